"""The byte language of an object that forbids N property names (renovate.json's root:
``not: {anyOf: [{required: [name]}, ...]}``, 110 names, and one declared property): the
subset construction's states, the minimal byte PDA's states and the build time, one JSON
line per N. The other names' key language is the complement of the forbidden and declared
names (`frontends.json_schema._strings.none_of`). Run it in two checkouts to compare:

    PYTHONPATH=<tree>/compile python <tree>/benchmarks/key_complement_bench.py

Each N is built in a fresh process (no cache across sizes); the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as corpus  # noqa: E402


def one(n: int) -> dict:
    from automata_compile.automata import _subset
    from automata_compile.frontends.json_schema import parse_options
    from automata_compile.pipeline._json_schema import byte_language

    root = corpus.schemastore_schemas()["renovate.json"]
    names = [branch["required"][0] for branch in root["not"]["anyOf"]][:n]
    schema = {
        "type": "object",
        "properties": {"abandonmentThreshold": {"type": ["string", "null"]}},
        "not": {"anyOf": [{"required": [name]} for name in names]},
    }
    subset_states = []
    determinize = _subset.determinize

    def counted(*args, **kw):
        stats = kw["stats"] = {} if kw.get("stats") is None else kw["stats"]
        out = determinize(*args, **kw)
        subset_states.append(stats["states"])
        return out

    _subset.determinize = counted
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, pda = byte_language(schema, parse_options({}), max_states=10**6)
    return {
        "names": len(names),
        "build_s": time.perf_counter() - t,
        "subset_states": max(subset_states),
        "pda_states": int(pda.shift.shape[0]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,40,80,110")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.one)))
        return 0
    for n in map(int, args.sizes.split(",")):
        runs = [
            json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--one", str(n)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(args.repeats)
        ]
        row = dict(runs[0], build_s=round(statistics.median(r["build_s"] for r in runs), 2))
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
