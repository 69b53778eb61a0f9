"""One `compile_tool_calls` size, cold then warm, with the process's peak memory: run once per
(size, tree) in a fresh process so that each peak is its own (issue 24's A/B of the table
layout against a baseline checkout: put that checkout first on PYTHONPATH).

Cold: every compile cache emptied (`tool_calls_bench.clear`), the vocabulary and its trie
loaded; warm: the same tools again. Prints one JSON line: the times (medians of
``--repeat``), the table's states, classes (the widest row with state blocks), blocks,
cells, bytes, and ``peak_rss_mb`` (``ru_maxrss``, the whole process: vocabulary included).

    PYTHONPATH=.:compile:benchmarks python benchmarks/tool_calls_scale.py --tools 100
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import time

import tool_calls_bench as bench

import automata_compile as ac


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tools", type=int, default=100)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--tokenizer", default="../shared/tokenizers/llama3/tokenizer.json")
    p.add_argument("--label", default="")
    p.add_argument("--skip", type=int, default=0, help="leave out the first SKIP BFCL functions")
    p.add_argument("--format", default="hermes")
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    ac.compile_tool_calls([{"name": "warmup"}], vocab, format=args.format)  # trie, imports
    tools = bench.bfcl_tools(args.skip + args.tools)[args.skip : args.skip + args.tools]
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cold, warm, cold_cpu, warm_cpu = [], [], [], []
    dfa = None
    for _ in range(args.repeat):
        bench.clear()
        dfa = None
        t, c = time.perf_counter(), time.process_time()
        dfa = ac.compile_tool_calls(tools, vocab, format=args.format)
        cold.append(time.perf_counter() - t)
        cold_cpu.append(time.process_time() - c)
        dfa = None
        t, c = time.perf_counter(), time.process_time()
        dfa = ac.compile_tool_calls(tools, vocab, format=args.format)
        warm.append(time.perf_counter() - t)
        warm_cpu.append(time.process_time() - c)
    commit = subprocess.run(
        ["git", "-C", ac.__file__.rsplit("/compile/", 1)[0], "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    row = {
        "label": args.label,
        "commit": commit,
        "tools": args.tools,
        "skip": args.skip,
        "format": args.format,
        "cold_s": round(statistics.median(cold), 3),
        "warm_s": round(statistics.median(warm), 3),
        "cold_cpu_s": round(statistics.median(cold_cpu), 3),
        "warm_cpu_s": round(statistics.median(warm_cpu), 3),
        "states": dfa.num_states,
        "classes": dfa.num_classes,
        "blocks": getattr(dfa, "num_blocks", 1),
        "cells_M": round(getattr(dfa, "num_cells", dfa.next_state.size) / 1e6, 2),
        "table_mb": round(dfa.nbytes / 2**20, 1),
        "rss_before_mb": round(base_rss),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
