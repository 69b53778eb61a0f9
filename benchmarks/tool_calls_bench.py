"""Compile time of `compile_tool_calls` against the number of tools (BFCL function schemas).

For n in 10, 100, 1,000 distinct BFCL functions (simple_python, multiple, parallel,
parallel_multiple, live_* categories, first occurrence of each name), for Llama-3:

* cold: every compile cache emptied (tool units, byte DFAs, PDA walks), the vocabulary and
  its trie already loaded (as in a server that has served other requests);
* warm: the same tools again (a request repeating known tools);
* plus one: the n tools and one tool not seen before.

Also the table size. Medians of ``--repeat`` runs (cold runs clear the caches each time).

    python benchmarks/tool_calls_bench.py --sizes 10 100 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import _bfcl

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
    """n distinct BFCL functions as tools (JSON Schema parameters)."""
    out, seen = {}, set()
    for cat in CATEGORIES:
        for case in _bfcl.load_cases(cat):
            for fn in case.functions:
                name = fn["name"]
                if name in seen:
                    continue
                seen.add(name)
                try:
                    out[name] = {"name": name, "parameters": _bfcl.parameters_schema(fn)}
                except _bfcl.BfclDataError:
                    continue
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    p.add_argument("--format", default="hermes")
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    ac.compile_tool_calls([{"name": "warmup"}], vocab, format=args.format)  # trie, imports
    rows = []
    for n in args.sizes:
        tools = bfcl_tools(n)
        base, extra = tools[:n], tools[n]
        cold, warm, plus = [], [], []
        for _ in range(args.repeat):
            clear()
            dt, dfa = timed(lambda: ac.compile_tool_calls(base, vocab, format=args.format))
            cold.append(dt)
            warm.append(timed(lambda: ac.compile_tool_calls(base, vocab, format=args.format))[0])
            plus.append(
                timed(lambda: ac.compile_tool_calls([*base, extra], vocab, format=args.format))[0]
            )
        row = {
            "tools": n,
            "cold_s": statistics.median(cold),
            "warm_s": statistics.median(warm),
            "plus_one_s": statistics.median(plus),
            "states": dfa.num_states,
            "classes": dfa.num_classes,
            "table_mb": round(dfa.nbytes / 2**20, 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
