"""Does every SchemaStore compile end by its deadline? Wall, CPU and peak memory per schema.

`compile_json_schema`'s default ``timeout_s=30`` is a wall-clock deadline checked at the
automaton core's checkpoints; a loop that never reaches one (or a construction that grows to
many GB first) runs past it. This runs each SchemaStore schema of `schema_corpus_bench.py`
(check-jsonschema's vendored ones) on Llama-3 with the defaults (``strict=True`` as that
bench runs it), **one fresh process per schema, one at a time**, address space capped
(``--mem-gb``, default 6) and killed past ``--kill`` seconds (default 120) of compile wall
time, and records: the compile's wall and CPU seconds (CPU of the whole process when
killed), the process' peak RSS (``ru_maxrss``, vocabulary included), the outcome (compiled
with the table digest of `schema_corpus_bench.canonical_arrays`, or the error's class and
first 150 characters) and the load average. A compile that runs past 35 s dumps its Python
stack (`faulthandler`, every 35 s) so the loop without a deadline check can be found.

Run: ``python benchmarks/schemastore_deadline.py [--checkout DIR] [--only a,b]
[--property-order declared] [--out F]``
(``--checkout``: compile with another checkout's code, e.g. ``git archive`` of a baseline).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import ROOT, git_commit, machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "schemastore_deadline.json"


def _child(name: str, order: str) -> None:
    """Compiles one schema (this process); prints ``ready`` then one JSON line."""
    import faulthandler

    import schema_corpus_bench as scb

    import automata_compile as ac

    vocab = ac.Vocabulary.from_file(scb.TOKENIZERS / "llama3" / "tokenizer.json")
    ac.compile_json_schema({"type": "integer"}, vocab)
    schema = scb.schemastore_schemas()[name]
    print("ready", flush=True)
    faulthandler.dump_traceback_later(35, repeat=True)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        dfa = ac.compile_json_schema(schema, vocab, strict=True, property_order=order)
    except Exception as e:  # noqa: BLE001 (any error is the finding)
        dfa, out = None, {"outcome": type(e).__name__, "message": str(e)[:150]}
        out["where"] = "".join(traceback.format_tb(e.__traceback__)[-4:])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0  # not the digest's
    faulthandler.cancel_dump_traceback_later()
    if dfa is not None:
        out = {"outcome": "ok", "states": dfa.num_states}
        try:
            out["digest"] = scb.table_digest(dfa)
        except MemoryError:  # the canonical numbering's copies, under the address-space cap
            out["digest"] = "no memory"
    out["wall_s"], out["cpu_s"] = wall, cpu
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out), flush=True)


def run_one(
    name: str, checkout: str | None, mem_gb: float, kill_s: float, order: str = "any"
) -> dict:
    env = dict(os.environ)
    code = checkout or str(ROOT)
    env["PYTHONPATH"] = os.pathsep.join([code, f"{code}/compile", str(Path(__file__).parent)])
    cap = int(mem_gb * 1e9)
    err = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a full pipe would block it
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", name, "--property-order", order],
        env=env,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)),
    )
    load = os.getloadavg()[0]
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        err.seek(0)
        return {"outcome": "crash before the compile", "stderr": err.read()[-600:]}
    t0, killed = time.perf_counter(), False
    while (waited := os.wait4(proc.pid, os.WNOHANG))[0] == 0:
        if time.perf_counter() - t0 > kill_s:
            proc.send_signal(signal.SIGKILL)
            waited, killed = os.wait4(proc.pid, 0), True
            break
        time.sleep(0.05)
    wall, usage = time.perf_counter() - t0, waited[2]
    proc.returncode = 0  # reaped by wait4
    lines = proc.stdout.read().splitlines()
    err.seek(0)
    stderr = err.read()
    if killed or not lines:
        out = {"outcome": "killed" if killed else f"died (status {waited[1]})", "wall_s": wall,
               "cpu_s": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024}  # fmt: skip
    else:
        out = json.loads(lines[-1])
    out["load"] = load
    if out["wall_s"] > 35:
        out["stack_at_35s"] = stderr[-3000:]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help="compile with this checkout's code")
    parser.add_argument("--only", default="", help="comma-separated schema names (no .json)")
    parser.add_argument("--mem-gb", type=float, default=6.0, help="address space cap (GB)")
    parser.add_argument("--kill", type=float, default=120.0, help="compile wall seconds")
    parser.add_argument("--label", help="what --checkout is (default: its git commit)")
    parser.add_argument(
        "--property-order", default="any", help="compile_json_schema's property_order"
    )
    parser.add_argument("--out", default=str(RESULTS), help="results JSON file")
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.property_order)
        return 0
    import schema_corpus_bench as scb

    names = [n for n in scb.schemastore_schemas()
             if not args.only or n.removesuffix(".json") in args.only.split(",")]  # fmt: skip
    out = {"machine": machine(), "commit": args.label or git_commit(args.checkout or ROOT),
           "command": " ".join(["python", *sys.argv]), "schemas": {}}  # fmt: skip
    for name in names:
        r = out["schemas"][name] = run_one(
            name, args.checkout, args.mem_gb, args.kill, args.property_order
        )
        r["load_after"] = os.getloadavg()[0]
        print(f"{name:28s} {r['outcome']:28s} wall {r['wall_s']:6.1f} cpu {r['cpu_s']:6.1f} "
              f"rss {r['rss_mb']:7.0f} MB load {r['load']:.1f} {r.get('message', '')[:70]}",
              flush=True)  # fmt: skip
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
