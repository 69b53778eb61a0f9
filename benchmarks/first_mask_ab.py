"""Time to first mask, before/after: two checkouts side by side on the same schemas.

Each schema of the official JSON Schema Test Suite (and the SchemaStore schemas that
compile, see `schema_corpus_bench.py`, ``--bfcl N`` of BFCL's function schemas, and with
``--heldout`` the schemas no default was tuned on, `schema_corpus_bench.heldout_schemas`)
is compiled on Llama-3 by two worker processes, one
importing ``--baseline`` (a checkout, e.g. ``git worktree add /tmp/perf-base <commit>``) and
one this checkout, alternating which goes first, so load on a shared machine hits both
alike. Time to first mask = `compile_json_schema` + `ConstraintTables.from_dfas`, as in
`schema_corpus_bench.py`. Each result carries a digest of its tables (token classes, next
states, accepting, start, forced runs) numbered canonically
(`schema_corpus_bench.canonical_arrays`):
equal digests mean isomorphic token DFAs, the same language and forced runs, however each
checkout numbers its states and classes.

Run: ``python benchmarks/first_mask_ab.py --baseline /tmp/perf-base [--suite-limit N]``
(``--schemastore-all``: every vendored SchemaStore schema, not the six that compile;
``--timeout-s 30``: `compile_json_schema`'s own deadline, as a user would set it).
Writes ``benchmarks/results/first_mask_ab.json`` (or ``--out``) and prints a summary. The
tables' digest covers the PDA block too. The summary also gives each side's compile CPU time
(``compile_cpu``: the worker's `time.process_time`, steadier than wall time when other jobs
share the machine).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import ROOT, git_commit, machine  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "first_mask_ab.json"
SCHEMASTORE = ("changie.json", "github-discussion.json", "github-issue-config.json",
               "readthedocs.json", "github-actions.json", "cloudbuild.json")  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="checkout to compare with")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per compile")
    parser.add_argument("--suite-limit", type=int, default=None, help="first N suite groups")
    parser.add_argument("--no-schemastore", action="store_true")
    parser.add_argument(
        "--schemastore-all", action="store_true", help="every vendored SchemaStore schema"
    )
    parser.add_argument(
        "--schemastore", nargs="+", default=None, metavar="NAME", help="these SchemaStore schemas"
    )
    parser.add_argument("--no-suite", action="store_true", help="no test-suite corpus")
    parser.add_argument(
        "--timeout-s", type=float, default=None, help="compile_json_schema's own timeout_s"
    )
    parser.add_argument("--bfcl", type=int, default=0, help="BFCL function schemas (sampled)")
    parser.add_argument(
        "--heldout", action="store_true", help="schemas never tuned on (`heldout_schemas`)"
    )
    parser.add_argument("--out", default=str(RESULTS), help="results JSON file")
    args = parser.parse_args(argv)
    tok = scb.TOKENIZERS / "llama3" / "tokenizer.json"
    corpora = {} if args.no_suite else {"test-suite": scb.suite_schemas(args.suite_limit)}
    if not args.no_schemastore:
        store = scb.schemastore_schemas()
        names = store if args.schemastore_all else args.schemastore or SCHEMASTORE
        corpora["schemastore"] = {n: store[n] for n in names}
    if args.bfcl:
        corpora["bfcl"] = scb.bfcl_schemas(args.bfcl)
    if args.heldout:
        corpora["heldout"] = scb.heldout_schemas()
    workers = {"before": scb.Worker(tok, args.timeout, args.baseline),
               "after": scb.Worker(tok, args.timeout, str(ROOT))}  # fmt: skip
    options = {} if args.timeout_s is None else {"timeout_s": args.timeout_s}
    results = {"machine": machine(), "baseline": git_commit(args.baseline), "corpora": {}}
    try:
        i = 0
        for corpus, schemas in corpora.items():
            rows = results["corpora"][corpus] = {}
            for name, schema in schemas.items():
                order = ("before", "after") if i % 2 == 0 else ("after", "before")
                rows[name] = {w: workers[w].run(schema, **options) for w in order}
                i += 1
                b, a = rows[name]["before"], rows[name]["after"]
                print(f"{corpus:11} {name:45} {b.get('first_mask_s', -1):7.3f} "
                      f"{a.get('first_mask_s', -1):7.3f}", file=sys.stderr)  # fmt: skip
    finally:
        for w in workers.values():
            w.close()
    summary = {}
    for corpus, rows in results["corpora"].items():
        both = [
            r
            for r in rows.values()
            if "first_mask_s" in r["before"] and "first_mask_s" in r["after"]
        ]
        before = scb.stats([r["before"]["first_mask_s"] for r in both])
        after = scb.stats([r["after"]["first_mask_s"] for r in both])
        ratios = [r["before"]["first_mask_s"] / r["after"]["first_mask_s"] for r in both]
        summary[corpus] = {
            "before": before,
            "after": after,
            "speedup_p50": before["p50"] / after["p50"],
            "speedup_p90": before["p90"] / after["p90"],
            "speedup_max": before["max"] / after["max"],
            "median_per_schema_speedup": statistics.median(ratios),
            "same_tables": sum(r["before"]["digest"] == r["after"]["digest"] for r in both),
            "compiled_both": len(both),
            "outcome_differs": [n for n, r in rows.items()
                                if ("first_mask_s" in r["before"]) != ("first_mask_s" in r["after"])],
        }  # fmt: skip
        # The compile's CPU time (the worker process's), steadier than wall time on a shared
        # machine; the table build (JAX) is not in it.
        if both and all("compile_cpu_s" in r[w] for r in both for w in ("before", "after")):
            cpu = {w: scb.stats([r[w]["compile_cpu_s"] for r in both]) for w in ("before", "after")}
            summary[corpus]["compile_cpu"] = cpu
            summary[corpus]["compile_cpu_median_per_schema_speedup"] = statistics.median(
                r["before"]["compile_cpu_s"] / r["after"]["compile_cpu_s"] for r in both
            )
    results["summary"] = summary
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
