"""Where the time of `compile_tool_calls` goes: the byte PDA (units + link) and each step of the
token composition (`tokens._pda_compose`), timed by wrapping them, for n BFCL tools, cold
(every compile cache emptied) and warm (the same tools again). Medians of ``--repeat``.

    python benchmarks/tool_calls_stages.py --tools 100 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import tool_calls_bench as bench

import automata_compile as ac
import automata_compile.pipeline._tool_calls as pipeline
from automata_compile.tokens import _pda_compose

STEPS = [
    ("walk_states", "root walk"),
    ("rule_walks", "rule walks"),
    ("_normalized", "normalize"),
    ("_reached", "boundary"),
    ("_restricted", "restrict"),
    ("_classes_hashed", "classes"),
    ("_tables", "tables"),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tools", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    ac.compile_tool_calls([{"name": "warmup"}], vocab)  # trie, imports
    spent: dict[str, float] = {}

    def timed(module, name, label):
        f = getattr(module, name)

        def g(*a, **k):
            t = time.perf_counter()
            out = f(*a, **k)
            spent[label] = spent.get(label, 0.0) + time.perf_counter() - t
            return out

        setattr(module, name, g)

    timed(pipeline, "tool_calls_pda", "units + link")
    for name, label in STEPS:
        timed(_pda_compose, name, label)
    tools = bench.bfcl_tools(args.tools)[: args.tools]
    runs: dict[str, list] = {"cold": [], "warm": []}
    for _ in range(args.repeat):
        bench.clear()
        for kind in runs:
            spent.clear()
            t = time.perf_counter()
            dfa = ac.compile_tool_calls(tools, vocab)
            spent["total"] = time.perf_counter() - t
            del dfa
            runs[kind].append(dict(spent))
    for kind, rs in runs.items():
        row = {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]}
        print(json.dumps({"tools": args.tools, "run": kind, **row}), flush=True)


if __name__ == "__main__":
    main()
