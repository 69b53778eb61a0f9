"""What per-tool table blocks would cost, against today's one table per tool-call constraint.

Today `compile_tool_calls` gives one `TokenDFA` whose dense ``[states, classes]`` table
covers every tool; its classes are the common refinement of every tool's classes, so the
table grows with (tools x tools). A per-tool block design (issue 24: a dispatcher that
jumps into the named tool's own table) would keep each tool's table as compiled alone.

For n distinct BFCL functions this measures, on one vocabulary:

* the monolithic constraint: states, classes, dense cells (``next_state`` entries);
* each tool compiled alone (the frame plus that tool: an upper bound on its block):
  states and classes, and the sum of their dense cells;
* the classes of the joined block tables if their class maps were unified on the host
  (``np.unique`` over the stacked per-block class columns): a unified-class join keeps
  the monolithic table's size, so blocks only pay off with a class map per block
  (``joined_is_mono_partition``: the unified classes are exactly the monolithic ones);
* the size of one ``int16`` class map per block.

    python benchmarks/tool_call_blocks.py --sizes 10 40 100
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import tool_calls_bench as bench

import automata_compile as ac


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 40, 100])
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    for n in args.sizes:
        tools = bench.bfcl_tools(n)[:n]
        mono = ac.compile_tool_calls(tools, vocab)
        blocks = [ac.compile_tool_calls([t], vocab) for t in tools]
        _, joined_of = np.unique(
            np.stack([d.token_class for d in blocks], axis=1), axis=0, return_inverse=True
        )
        joined_of = joined_of.reshape(-1)
        joined = int(joined_of.max()) + 1
        pairs = np.unique(np.stack([joined_of, mono.token_class], axis=1), axis=0).shape[0]
        row = {
            "tools": n,
            "mono_states": mono.num_states,
            "mono_classes": mono.num_classes,
            "mono_cells_M": round(mono.num_states * mono.num_classes / 1e6, 2),
            "joined_classes": joined,
            "joined_is_mono_partition": pairs == joined == mono.num_classes,
            "block_states_median": int(np.median([d.num_states for d in blocks])),
            "block_classes_median": int(np.median([d.num_classes for d in blocks])),
            "blocks_cells_M": round(sum(d.num_states * d.num_classes for d in blocks) / 1e6, 2),
            "class_maps_MB": round(n * mono.vocab_size * 2 / 2**20, 1),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
