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
* the size of one ``int16`` class map per block;
* the *state-block* design (docs/tool_calls.md, "Per-tool blocks"): one table whose rows keep
  the monolithic state numbers, but whose columns are each block's own classes (the frame's
  states one block, each tool's unit another), so a row's class map is picked by its
  state's block. Measured exactly from the monolithic tables: a block's classes are the
  distinct columns of its states' ``next_state`` / ``edge_push`` entries and
  context-dependent edges (``state_block_classes_max``: the widest block sets the table's
  width; ``state_block_cells_M``: states x that width; ``state_block_ragged_cells_M``: each
  block's states x its own classes, if blocks were stored apart).

    python benchmarks/tool_call_blocks.py --sizes 10 40 100
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import tool_calls_bench as bench

import automata_compile as ac
from automata_compile.frontends.tool_calls import tool_calls_pda, tool_calls_spec


def state_blocks(tools, vocab, mono) -> tuple[np.ndarray, list[int]]:
    """The block of each state (0: the frame, k: tool k's unit) and each block's number of
    classes when its columns are restricted to its own states."""
    fmt, ts, opts, _ = tool_calls_spec(
        tools, format="hermes", parallel=False, require_call=False, tool=None, allow_text=True
    )
    pda = tool_calls_pda(fmt, ts, opts, parallel=False, require_call=False, allow_text=True)
    assert pda.num_states == mono.num_states
    tool_of = {t.name: k + 1 for k, t in enumerate(ts)}
    rule_block = np.array([tool_of.get(n.split("/")[0], 0) for n in pda.names], np.int64)
    block = rule_block[pda.rule_of]
    ns, ep = np.asarray(mono.next_state), np.asarray(mono.edge_push)
    cd = np.stack([mono.cd_state, mono.cd_npop, mono.cd_target, mono.cd_push], axis=1)
    classes = []
    for b in range(int(block.max()) + 1):
        states = np.flatnonzero(block == b)
        cols = [ns[states].T, ep[states].T]
        m = np.isin(mono.cd_state, states)
        if m.any():  # each class's context-dependent edges from these states, as one id
            sig = np.concatenate([cd[m], mono.cd_pop[m]], axis=1)
            _, sid = np.unique(sig, axis=0, return_inverse=True)
            edges: dict[int, list] = {}
            for c, x in zip(mono.cd_class[m].tolist(), sid.reshape(-1).tolist(), strict=True):
                edges.setdefault(c, []).append(x)
            ids: dict[tuple, int] = {(): 0}
            per_class = np.zeros((ns.shape[1], 1), np.int64)
            for c, xs in edges.items():
                per_class[c, 0] = ids.setdefault(tuple(sorted(xs)), len(ids))
            cols.append(per_class)
        classes.append(int(np.unique(np.concatenate(cols, axis=1), axis=0).shape[0]))
    return block, classes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 40, 100])
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    for n in args.sizes:
        tools = bench.bfcl_tools(n)[:n]
        built = ac.compile_tool_calls(tools, vocab)  # with state blocks (issue 24)
        mono = built.dense()  # the one-table form
        blocks = [ac.compile_tool_calls([t], vocab).dense() for t in tools]
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
        block, per_block = state_blocks(tools, vocab, mono)
        sizes = np.bincount(block)
        row.update(
            state_block_frame_classes=per_block[0],
            state_block_classes_median=int(np.median(per_block[1:])),
            state_block_classes_max=max(per_block),
            state_block_cells_M=round(mono.num_states * max(per_block) / 1e6, 2),
            state_block_ragged_cells_M=round(float(sizes @ np.array(per_block)) / 1e6, 2),
            built_blocks=built.num_blocks,
            built_cells_M=round(built.num_cells / 1e6, 2),
            built_table_MB=round(built.nbytes / 2**20, 1),
            dense_table_MB=round(mono.nbytes / 2**20, 1),
        )
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
