"""The cost of one jitted `allowed_mask` + `advance` step for tool-call rows with the state-block
layout against the same constraint's dense tables (`TokenDFA.dense`) and unconstrained rows,
interleaved in one process (issue 24). Rows sit in the start (free-text) state and, where
given, after a call's opening (``--inside``: in the arguments of the first tool).

    PYTHONPATH=.:compile:benchmarks python benchmarks/tool_call_layout_mask.py --tools 10 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import jax
import jax.numpy as jnp
import tool_calls_bench as bench

import automata_compile as ac
import automata_jax as aj


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tools", type=int, nargs="+", default=[10, 100])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    for n in args.tools:
        tools = bench.bfcl_tools(n)[:n]
        blocked = ac.compile_tool_calls(tools, vocab)
        kinds = {"blocks": blocked, "dense": blocked.dense()}
        opening = '<tool_call>\n{"name": "' + tools[0]["name"] + '", "arguments": {'
        ids = vocab.encode(opening)
        tok = jnp.full((args.batch,), vocab.encode(" ")[0], jnp.int32)

        @jax.jit
        def step(tables, state, tok=tok):
            return aj.allowed_mask(tables, state), aj.advance(tables, state, tok)

        cases = {}
        for kind, dfa in kinds.items():
            tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=vocab.size)
            start = aj.init_state(tables, jnp.zeros((args.batch,), jnp.int32))
            inside = start
            for t in ids:
                inside = aj.advance(tables, inside, jnp.full((args.batch,), t, jnp.int32))
            assert not bool(inside.error.any())
            cases[f"{kind}_text"] = (tables, start)
            cases[f"{kind}_args"] = (tables, inside)
            if kind == "dense":
                free = aj.init_state(tables, jnp.full((args.batch,), -1, jnp.int32))
                cases["unconstrained"] = (tables, free)
        times = {k: [] for k in cases}
        for tables, st in cases.values():
            jax.block_until_ready(step(tables, st))
        for _ in range(args.repeat):
            for k, (tables, st) in cases.items():
                t = time.perf_counter()
                jax.block_until_ready(step(tables, st))
                times[k].append(1000 * (time.perf_counter() - t))
        row = {"tools": n, "batch": args.batch}
        row.update({f"{k}_ms": round(statistics.median(v), 3) for k, v in times.items()})
        row.update(
            {f"{k}_device_mb": round(cases[f"{k}_text"][0].nbytes / 2**20, 1) for k in kinds}
        )
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
