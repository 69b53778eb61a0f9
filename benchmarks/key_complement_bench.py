"""The byte language of an object whose other properties' keys are the complement of N
names (`frontends.json_schema._strings.none_of`): the subset construction's states, the
minimal byte automaton's states and the build time, one JSON line per N. Two shapes:
``forbidden``, renovate.json's root (``not: {anyOf: [{required: [name]}, ...]}``, 110 names,
and one declared property); ``open``, N declared boolean properties (random 9-letter names)
and other properties allowed. Run it in two checkouts to compare:

    PYTHONPATH=<tree>/compile python <tree>/benchmarks/key_complement_bench.py

Each N is built in a fresh process (no cache across sizes); the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as corpus  # noqa: E402


def _schema(shape: str, n: int) -> dict:
    if shape == "open":
        rng = random.Random(0)
        names = ["".join(rng.choice(string.ascii_lowercase) for _ in range(9)) for _ in range(n)]
        return {"type": "object", "properties": {name: {"type": "boolean"} for name in names}}
    root = corpus.schemastore_schemas()["renovate.json"]
    names = [branch["required"][0] for branch in root["not"]["anyOf"]][:n]
    return {
        "type": "object",
        "properties": {"abandonmentThreshold": {"type": ["string", "null"]}},
        "not": {"anyOf": [{"required": [name]} for name in names]},
    }


def one(shape: str, n: int) -> dict:
    from automata_compile.automata import _subset, build_byte_dfa
    from automata_compile.frontends.json_schema import parse_options
    from automata_compile.pipeline._json_schema import byte_language

    schema = _schema(shape, n)
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
        # declared order: the open shape's any-order automaton is past its budget
        opts = parse_options({"property_order": "declared" if shape == "open" else "any"})
        ir, pda = byte_language(schema, opts, max_states=10**6)
        states = build_byte_dfa(ir, max_states=10**6).num_states if pda is None else None
    return {
        "shape": shape,
        "names": n,
        "build_s": time.perf_counter() - t,
        "subset_states": max(subset_states),
        "states": states if pda is None else int(pda.shift.shape[0]),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("forbidden", "open"), default="forbidden")
    parser.add_argument("--sizes", default="20,40,80,110")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(one(args.shape, args.one)))
        return 0
    for n in map(int, args.sizes.split(",")):
        runs = [
            json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--shape", args.shape, "--one", str(n)],
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
