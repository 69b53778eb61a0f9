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


def machine(**versions: str) -> dict:
    """Date, CPU, load, Python/NumPy versions, commit and command line (plus ``versions``)."""
    import numpy as np

    cpu = cpu_name()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "compile", "automata_jax"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        commit, dirty = "unknown", ""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        **versions,
        "git_commit": commit + (" (working tree modified)" if dirty else ""),
        "command": "python " + " ".join([os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
    }


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
