"""Where the time of `compile_tool_calls` goes: the byte PDA (units + link) and each step of the
token composition (`tokens._pda_compose`), timed by wrapping them, for n BFCL tools, cold
(every compile cache emptied) and warm (the same tools again). Medians of ``--repeat``.

``--no-tables`` stops before the dense ``[states, classes]`` tables are written (1,000 tools'
would not fit in memory): it times everything before them and reports the states and
classes those tables would have (``cells_M``: their entries, in millions).

    python benchmarks/tool_calls_stages.py --tools 100 --repeat 3
    python benchmarks/tool_calls_stages.py --tools 1000 --repeat 1 --no-tables
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import tool_calls_bench as bench

import automata_compile as ac
import automata_compile.pipeline._tool_calls as pipeline
from automata_compile.tokens import _pda_compose, _unit_blocks

STEPS = [
    ("walk_states", "root walk"),
    ("rule_walks", "rule walks"),
    ("_normalized", "normalize"),
    ("_reached", "boundary"),
    ("_restricted", "restrict"),
    ("_classes_hashed", "classes"),
    ("_tables", "tables"),
]


class _Stop(Exception):
    """Raised in place of the dense tables (``--no-tables``)."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tools", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    p.add_argument("--no-tables", action="store_true", help="stop before the dense tables")
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

    timed(pipeline, "tool_calls_layout", "units + link")
    timed(_unit_blocks, "_unit_block", "unit blocks (new tools)")
    timed(_unit_blocks, "_assemble", "assembly")
    timed(_pda_compose, "block_tables_walks", "blocks (in tables)")
    timed(_pda_compose, "block_tables", "blocks from listed cells (in tables; fallback)")
    sizes = {}
    if args.no_tables:

        def no_tables(pda, trie, walker, parts, group_class, reps):
            sizes.update(num_states=pda.num_states, num_classes=reps.shape[0] + 1)
            raise _Stop

        _pda_compose._tables = no_tables
    for name, label in STEPS:
        timed(_pda_compose, name, label)
        if hasattr(_unit_blocks, name):  # imported by name there: time both
            setattr(_unit_blocks, name, getattr(_pda_compose, name))
    tools = bench.bfcl_tools(args.tools)[: args.tools]
    runs: dict[str, list] = {"cold": [], "warm": []}
    for _ in range(args.repeat):
        bench.clear()
        for kind in runs:
            spent.clear()
            t = time.perf_counter()
            try:
                dfa = ac.compile_tool_calls(tools, vocab)
                sizes.update(
                    num_states=dfa.num_states,
                    num_classes=dfa.num_classes,
                    blocks=dfa.num_blocks,
                    block_cells_M=round(dfa.num_cells / 1e6, 2),
                )
                del dfa
            except _Stop:
                pass
            spent["total"] = time.perf_counter() - t
            runs[kind].append(dict(spent))
    for kind, rs in runs.items():
        row = {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]}
        extra = {}
        if "blocks" not in sizes:  # the dense table the global classes would give
            extra["cells_M"] = round(sizes["num_states"] * sizes["num_classes"] / 1e6, 1)
        print(json.dumps({"tools": args.tools, "run": kind, **row, **sizes, **extra}),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
