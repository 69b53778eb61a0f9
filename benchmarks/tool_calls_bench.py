"""Compile time of `compile_tool_calls` against the number of tools (BFCL function schemas).

For n distinct BFCL functions (simple_python, multiple, parallel, parallel_multiple, live_*
categories, first occurrence of each name): the byte level alone (tool units + link, no
vocabulary) for 10, 100, 1,000 tools, and the whole compile for 10 and 100 on ``--tokenizer``
(Llama-3 by default; the dense token tables of 1,000 tools would not fit in memory):

* cold: every compile cache emptied (tool units, byte DFAs, PDA walks), the vocabulary and
  its trie already loaded (as in a server that has served other requests);
* warm: the same tools again (a request repeating known tools);
* plus one: the n tools and one tool not seen before.

Also the table size. Medians of ``--repeat`` runs (cold runs clear the caches each time).

    python benchmarks/tool_calls_bench.py --sizes 10 100 --byte-sizes 10 100 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import _bfcl
import numpy as np

import automata_compile as ac
from automata_compile.automata import _byte_dfa
from automata_compile.frontends.tool_calls import _tools
from automata_compile.tokens import _pda_units

CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)


def bfcl_tools(n: int) -> list[dict]:
    """n + 1 distinct BFCL functions as tools (JSON Schema parameters), leaving out the few
    whose converted schema is unsatisfiable (the translation refuses it)."""
    from automata_compile.frontends.json_schema import parse_options as _options
    from automata_compile.frontends.json_schema import translate_grammar as _grammar

    opts = _options({"property_order": "declared"})
    out, seen = {}, set()
    for cat in CATEGORIES:
        for case in _bfcl.load_cases(cat):
            for fn in case.functions:
                name = fn["name"]
                if name in seen:
                    continue
                seen.add(name)
                try:
                    schema = _bfcl.parameters_schema(fn)
                    _grammar(schema, opts, True)
                except (_bfcl.BfclDataError, ac.InvalidSchemaError, ac.UnsupportedSchemaError):
                    continue
                out[name] = {"name": name, "parameters": schema}
                if len(out) == n + 1:
                    return list(out.values())
    raise SystemExit(f"only {len(out)} distinct BFCL functions")


def clear() -> None:
    _tools.clear_cache()
    _pda_units.clear_cache()
    with _byte_dfa._CACHE_LOCK:
        _byte_dfa._CACHE.clear()
        _byte_dfa._cache_bytes = 0


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def byte_level(tools, fmt):
    """The tool units and the linked byte PDA (no vocabulary): the front end's share."""
    from automata_compile.frontends.json_schema import parse_options as _options
    from automata_compile.frontends.tool_calls import _formats, _link

    fmt = _formats.resolve(fmt)
    opts = _options({"property_order": "declared"})
    ts = _tools.normalize_tools(tools, fmt.style)
    units = [_tools.tool_unit(t, fmt, opts) for t in ts]
    names = [t.name for t in ts]
    root, start, back = _link.root_and_calls(fmt, names, parallel=False, require_call=False)
    return _link.link(root, start, back, units, names)


def measure(make, repeat: int) -> dict:
    cold, warm, plus = [], [], []
    out = None
    for _ in range(repeat):
        clear()
        dt, out = timed(lambda: make(False))
        cold.append(dt)
        warm.append(timed(lambda: make(False))[0])
        plus.append(timed(lambda: make(True))[0])
    return out, {
        "cold_s": round(statistics.median(cold), 3),
        "warm_s": round(statistics.median(warm), 3),
        "plus_one_s": round(statistics.median(plus), 3),
    }


def mask_cost(dfa, batch: int, repeat: int = 30) -> dict:
    """Median ms of one jitted `allowed_mask` + `advance` step at ``batch`` rows in the
    start (free text) state, for rows of this constraint and unconstrained rows, interleaved."""
    import jax
    import jax.numpy as jnp

    import automata_jax as aj

    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=dfa.vocab_size)
    tok = jnp.zeros((batch,), jnp.int32) + int(np.flatnonzero(dfa.class_map(dfa.start) > 0)[0])

    @jax.jit
    def step(tables, state):
        return aj.allowed_mask(tables, state), aj.advance(tables, state, tok)

    states = {
        "constrained": aj.init_state(tables, jnp.zeros((batch,), jnp.int32)),
        "unconstrained": aj.init_state(tables, jnp.full((batch,), -1, jnp.int32)),
    }
    times = {k: [] for k in states}
    for st in states.values():
        jax.block_until_ready(step(tables, st))
    for _ in range(repeat):
        for k, st in states.items():
            t = time.perf_counter()
            jax.block_until_ready(step(tables, st))
            times[k].append(1000 * (time.perf_counter() - t))
    return {f"mask_{k}_ms": round(statistics.median(v), 3) for k, v in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="*", default=[10, 100])
    p.add_argument("--byte-sizes", type=int, nargs="*", default=[10, 100, 1000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    p.add_argument("--format", default="hermes")
    p.add_argument("--mask-batch", type=int, default=8, help="0: no mask timing")
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    ac.compile_tool_calls([{"name": "warmup"}], vocab, format=args.format)  # trie, imports
    for n in args.byte_sizes:
        tools = bfcl_tools(n)
        pda, row = measure(
            lambda more, t=tools, n=n: byte_level(t if more else t[:n], args.format), args.repeat
        )
        print(json.dumps({"tools": n, "part": "byte PDA (units + link)", **row,
                          "byte_states": pda.num_states}), flush=True)  # fmt: skip
    for n in args.sizes:
        tools = bfcl_tools(n)

        def make(more, t=tools, n=n):
            return ac.compile_tool_calls(t if more else t[:n], vocab, format=args.format)

        dfa, row = measure(make, args.repeat)
        row.update(
            tools=n,
            part=f"compile_tool_calls ({args.tokenizer.rstrip('/').split('/')[-2]})",
            states=dfa.num_states,
            classes=dfa.num_classes,
            blocks=dfa.num_blocks,
            cells_M=round(dfa.num_cells / 1e6, 2),
            table_mb=round(dfa.nbytes / 2**20, 1),
        )
        if args.mask_batch:
            row.update(mask_cost(dfa, args.mask_batch), mask_batch=args.mask_batch)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
