"""What every benchmark script records: the machine and commit, and its section of BENCHMARKS.md."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo ("unknown" elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit(checkout: Path | str = ROOT) -> str:
    """The short commit of ``checkout`` ("unknown" outside git): what results name instead of a path."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"


def portable_paths(text: str) -> str:
    """``text`` with this machine's paths replaced by names that mean the same anywhere.

    Results and profiles are committed; they must not carry the checkout's or the
    virtual environment's absolute location."""
    import sysconfig

    prefixes = {
        sysconfig.get_paths()["purelib"]: "<site-packages>",
        sysconfig.get_paths()["stdlib"]: "<stdlib>",
        str(ROOT): "<repo>",
        str(Path.home()): "~",
    }
    for prefix, name in sorted(prefixes.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(prefix, name)
    return text


def machine(**versions: str) -> dict:
    """Date, CPU, load, Python/NumPy versions, commit and command line (plus ``versions``)."""
    import numpy as np

    cpu = cpu_name()
    commit = git_commit()
    try:
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "compile", "automata_jax"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        dirty = ""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        **versions,
        "git_commit": commit + (" (working tree modified)" if dirty else ""),
        "command": portable_paths(
            "python " + " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
        ),
    }


def machine_line(m: dict, *extra: str) -> str:
    """One sentence for BENCHMARKS.md: date, cores, CPU, load, Python (plus ``extra``), commit."""
    load = f"load average at start {', '.join(f'{x:.1f}' for x in m['loadavg_start'])}"
    if "loadavg_end" in m:
        load += f", at end {', '.join(f'{x:.1f}' for x in m['loadavg_end'])}"
    versions = ", ".join([f"Python {m['python']}", *extra])
    return f"{m['date']}; {m['nproc']} CPU cores ({m['cpu']}); {load}; {versions}; commit {m['git_commit']}."


def write_md_section(mark: str, text: str) -> None:
    """Replaces the ``<!-- mark:start -->`` ... ``<!-- mark:end -->`` section of BENCHMARKS.md
    with ``text`` (appended at the end if the file has no such section yet)."""
    start, end = f"<!-- {mark}:start -->", f"<!-- {mark}:end -->"
    section = f"{start}\n{text}\n{end}"
    old = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    if start in old and end in old:
        head, rest = old.split(start, 1)
        new = head + section + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + section + "\n"
    BENCHMARKS_MD.write_text(new)


def median_call_s(fn, *args, reps: int = 200) -> float:
    """Median seconds of ``fn(*args)`` over ``reps`` calls after one warm-up, each waited for
    (jax dispatches asynchronously): a jitted function's per-call time. jax is imported here
    so that compile-only benchmarks can use this module without it."""
    import statistics
    import time

    import jax

    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
