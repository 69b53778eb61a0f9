"""JSON strings with a long ``maxLength``, before/after: compile CPU time and outcome.

A string of at most n characters is a chain of about 20 n byte states (a character is 1-4
UTF-8 bytes or an escape); its minimization once needed a round per link over every state
(issue 20: ``maxLength: 1024`` passed the work budget). Each schema
``{"type": "string", "maxLength": n, ...}`` for n in ``--lengths`` (plain, with
``minLength: n // 2``, with a ``pattern``, with ``format: email`` / ``uri``) is compiled on
Llama-3 by two worker processes, one importing ``--baseline`` (a checkout) and one this
checkout, alternating which goes first, each ``--repeats`` times; the table gives the median
compile CPU time (the worker's `time.process_time`, steadier than wall time on a shared
machine), the outcome, and whether both sides built the same tables (canonical digest, see
`schema_corpus_bench.canonical_arrays`).

Run: ``python benchmarks/long_strings_bench.py --baseline /tmp/base [--lengths 64 256 1024 4096]``.
Writes ``benchmarks/results/long_strings.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import ROOT, git_commit, machine, machine_line  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "long_strings.json"
VARIANTS = {
    "plain": lambda n: {},
    "minLength n/2": lambda n: {"minLength": n // 2},
    "pattern": lambda n: {"pattern": "^[A-Za-z0-9 _.-]*$"},
    "format email": lambda n: {"format": "email"},
    "format uri": lambda n: {"format": "uri"},
}


def _cpu(r: dict) -> float | None:
    return r.get("compile_cpu_s")


def _outcome(r: dict) -> str:
    if "digest" in r:
        return "compiles"
    if "refused" in r:
        return r["refused"] + (" (work budget)" if "work budget" in r["message"] else "")
    return "timeout" if "timeout" in r else r.get("crash", "?")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="checkout to compare with")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=3, help="compiles per side and schema")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per compile")
    parser.add_argument("--out", default=str(RESULTS), help="results JSON file")
    args = parser.parse_args(argv)
    tok = scb.TOKENIZERS / "llama3" / "tokenizer.json"
    workers = {"before": scb.Worker(tok, args.timeout, args.baseline),
               "after": scb.Worker(tok, args.timeout, str(ROOT))}  # fmt: skip
    results = {"machine": machine(), "baseline": git_commit(args.baseline), "rows": []}
    try:
        for n in args.lengths:
            for variant, extra in VARIANTS.items():
                schema = {"type": "string", "maxLength": n, **extra(n)}
                runs: dict[str, list] = {"before": [], "after": []}
                for i in range(args.repeats):
                    for w in ("before", "after") if i % 2 == 0 else ("after", "before"):
                        runs[w].append(workers[w].run(schema, timeout_s=args.timeout))
                row = {"n": n, "variant": variant, "schema": schema}
                for w, rs in runs.items():
                    cpus = [c for c in map(_cpu, rs) if c is not None]
                    row[w] = {"outcome": _outcome(rs[0]), "digest": rs[0].get("digest"),
                              "cpu_s": statistics.median(cpus) if cpus else None,
                              "states": rs[0].get("states")}  # fmt: skip
                results["rows"].append(row)
                print(json.dumps(row), file=sys.stderr)
    finally:
        for w in workers.values():
            w.close()
    results["machine"]["loadavg_end"] = list(__import__("os").getloadavg())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    print(markdown(results))
    return 0


def markdown(results: dict) -> str:
    lines = [
        machine_line(results["machine"], f"baseline {results['baseline']}"),
        "",
        "| maxLength | with | before: outcome | CPU s | after: outcome | CPU s | ratio | "
        "token states | same tables |",
        "| ---: | --- | --- | ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for r in results["rows"]:
        b, a = r["before"], r["after"]
        ratio = f"{b['cpu_s'] / a['cpu_s']:.2f}x" if b["cpu_s"] and a["cpu_s"] else ""
        same = (
            ""
            if not (b["digest"] and a["digest"])
            else "yes"
            if b["digest"] == a["digest"]
            else "NO"
        )
        lines.append(
            f"| {r['n']} | {r['variant']} | {b['outcome']} | {b['cpu_s']:.2f} | {a['outcome']} "
            f"| {a['cpu_s']:.2f} | {ratio} | {a['states'] or ''} | {same} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
