"""SchemaStore with defaults, before/after: each schema's outcome and compile CPU time,
one schema per process.

Every SchemaStore schema vendored by ``check-jsonschema`` (see `schema_corpus_bench.py`)
is compiled on Llama-3 with `compile_json_schema`'s defaults (``strict=True`` as in
`schema_corpus_bench.py`, the compile's own 30 s deadline) by a fresh worker process
per schema and side (``--baseline``, a checkout such as ``git worktree add /tmp/base
<commit>``, and this checkout), alternating which side goes first, so that one schema's
memory or caches never help another and load hits both sides alike. The worker is killed
past ``--timeout`` (wall seconds, above the deadline). Reported per schema: the outcome
(compiled with its table digest, or the error's class and message), the worker's compile
CPU time (`time.process_time`: steadier than wall time on a shared machine) and wall time;
then the number compiled within the deadline by each side, whether the schemas compiled
by both have the same tables, and CPU p50 / p90 of compile + first mask over them.

Run: ``python benchmarks/schemastore_outcomes_ab.py --baseline /tmp/base [--only a,b]``.
Writes ``--out`` (default ``benchmarks/results/schemastore_outcomes_ab.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import ROOT, git_commit, machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "schemastore_outcomes_ab.json"


def _outcome(r: dict) -> str:
    if "digest" in r:
        return f"compiled ({r['states']} states, digest {r['digest']})"
    if "refused" in r:
        return f"{r['refused']}: {r['message'][:160]}"
    return scb._outcome(r)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="checkout to compare with")
    parser.add_argument("--timeout", type=float, default=90.0, help="wall seconds per worker")
    parser.add_argument("--only", default="", help="comma-separated schema names (no .json)")
    parser.add_argument("--out", default=str(RESULTS), help="results JSON file")
    args = parser.parse_args(argv)
    tok = scb.TOKENIZERS / "llama3" / "tokenizer.json"
    store = scb.schemastore_schemas()
    names = [n for n in store if not args.only or n.removesuffix(".json") in args.only.split(",")]
    sides = {"before": args.baseline, "after": str(ROOT)}
    out = {"machine": machine(), "baseline": git_commit(args.baseline),
           "commit": git_commit(str(ROOT)), "load_start": os.getloadavg()[0], "schemas": {}}  # fmt: skip
    for i, name in enumerate(names):
        row = out["schemas"][name] = {}
        for side in ("before", "after") if i % 2 == 0 else ("after", "before"):
            worker = scb.Worker(tok, args.timeout, sides[side])
            try:
                row[side] = worker.run(store[name])
            finally:
                worker.close()
            row[side]["load"] = os.getloadavg()[0]
        print(f"{name:28s}", " | ".join(
            f"{s}: {_outcome(row[s])} cpu {row[s].get('compile_cpu_s', float('nan')):.1f} s"
            for s in ("before", "after")), flush=True)  # fmt: skip
    out["load_end"] = os.getloadavg()[0]
    rows = out["schemas"].values()
    summary = {s: sum("digest" in r[s] for r in rows) for s in sides}
    both = [r for r in rows if "digest" in r["before"] and "digest" in r["after"]]
    summary["compiled_by_both"] = len(both)
    summary["same_tables"] = sum(r["before"]["digest"] == r["after"]["digest"] for r in both)
    for s in sides:
        summary[f"{s}_cpu_first_mask"] = scb.stats(
            [r[s]["compile_cpu_s"] + r[s]["table_s"] for r in both]
        ) if both else None  # fmt: skip
    out["summary"] = summary
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
