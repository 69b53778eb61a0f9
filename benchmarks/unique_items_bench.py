"""``uniqueItems: true`` (issue 20): how each construction compiles, against the same schema
without it.

Cases: arrays of enum strings (3 to 200 values; exact any order while the sets of values fit
the budget, then one fixed order), with ``maxItems``, bounded integers, and free strings (at
most one item). Each is compiled for the Llama-3 vocabulary (trie prebuilt) with and without
``uniqueItems``, interleaved in one process; the result is the construction (from the
warnings), the token DFA's states and the median compile time of each, and their ratio.

  python benchmarks/unique_items_bench.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import ROOT, machine, machine_line  # noqa: E402

TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "llama3" / "tokenizer.json"
RESULTS = ROOT / "benchmarks" / "results" / "unique_items.json"
WORDS = ["read", "write", "admin", "delete", "create", "update", "list", "watch", "patch", "sync"]


def enum_array(n: int, **extra) -> dict:
    values = (WORDS + [f"scope-{i:03d}" for i in range(n)])[:n]
    return {"type": "array", "items": {"enum": values}, **extra}


CASES = {
    "enum 3": enum_array(3),
    "enum 6": enum_array(6),
    "enum 8": enum_array(8),
    "enum 10": enum_array(10),
    "enum 12, maxItems 3": enum_array(12, maxItems=3),
    "enum 20": enum_array(20),
    "enum 200": enum_array(200),
    "integers 0..30": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 30}},
    "free strings": {"type": "array", "items": {"type": "string"}},
}


def compile_once(ac, schema, vocab):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        dfa = ac.compile_json_schema(schema, vocab)
        seconds = time.perf_counter() - t
    kinds = [str(w.message) for w in caught if isinstance(w.message, ac.SubsetWarning)]
    return dfa, seconds, kinds


def construction(kinds) -> str:
    if not kinds:
        return "exact (any order)"
    if "one fixed order" in kinds[0]:
        return "fixed order (subset)"
    return "at most one item (subset)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    import automata_compile as ac

    vocab = ac.Vocabulary.from_file(TOKENIZER)
    ac.compile_json_schema({"type": "string"}, vocab)  # builds the trie once
    rows = []
    print("| case | construction | states (without → with) | compile (without → with) | ratio |")
    print("| --- | --- | --- | --- | ---: |")
    for name, base in CASES.items():
        unique = {**base, "uniqueItems": True}
        times = {"without": [], "with": []}
        for _ in range(args.repeats):  # interleaved: the load moves both alike
            dfa0, s0, _ = compile_once(ac, base, vocab)
            dfa1, s1, kinds = compile_once(ac, unique, vocab)
            times["without"].append(s0)
            times["with"].append(s1)
        t0, t1 = statistics.median(times["without"]), statistics.median(times["with"])
        row = {
            "case": name,
            "construction": construction(kinds),
            "states_without": dfa0.num_states,
            "states_with": dfa1.num_states,
            "compile_s_without": t0,
            "compile_s_with": t1,
        }
        rows.append(row)
        print(
            f"| {name} | {row['construction']} | {dfa0.num_states:,} → {dfa1.num_states:,} "
            f"| {t0 * 1000:.0f} → {t1 * 1000:.0f} ms | {t1 / t0:.2f} |"
        )
    m = machine()
    print(machine_line(m))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"machine": m, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
