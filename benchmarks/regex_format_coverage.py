"""How many real regexes the ``format: regex`` subset accepts.

The patterns are the ``pattern`` values and ``patternProperties`` names of the SchemaStore
schemas vendored by check-jsonschema (ECMA regexes written by people). The files, sorted by
name, are split into a tuning half (even positions) and a held-out half (odd positions):
the subset was adjusted only while looking at the tuning half. Each half counts the
distinct patterns that are valid for ECMA-262 (`regress`, without and with the ``u``
flag) and Python's ``re``, and how many of those the subset accepts.

``--sizes`` also compiles each format enforced as a subset (``regex``, ``hostname``,
``idn-hostname``, ``idn-email``) alone on the Llama-3 vocabulary: states, token classes, table
bytes, and the median of three compile times (the format's IR cache cleared each time).

Usage: python benchmarks/regex_format_coverage.py [--show-rejected tuning|held-out] [--sizes]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

import automata_compile as ac


def vendor_dir() -> str:
    import check_jsonschema

    return os.path.join(os.path.dirname(check_jsonschema.__file__), "builtin_schemas", "vendor")


def patterns_of(node, out: set[str]) -> None:
    """Every ``pattern`` value and ``patternProperties`` name under ``node``."""
    if isinstance(node, dict):
        if isinstance(node.get("pattern"), str):
            out.add(node["pattern"])
        if isinstance(node.get("patternProperties"), dict):
            out.update(node["patternProperties"])
        for v in node.values():
            patterns_of(v, out)
    elif isinstance(node, list):
        for v in node:
            patterns_of(v, out)


def halves() -> dict[str, set[str]]:
    files = sorted(f for f in os.listdir(vendor_dir()) if f.endswith(".json"))
    out = {"tuning": set(), "held-out": set()}
    for i, name in enumerate(files):
        with open(os.path.join(vendor_dir(), name), encoding="utf-8") as f:
            patterns_of(json.load(f), out["tuning" if i % 2 == 0 else "held-out"])
    return out


def valid_everywhere(pattern: str) -> bool:
    import regress

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            re.compile(pattern)
        regress.Regex(pattern, "")
        regress.Regex(pattern, "u")
    except Exception:  # noqa: BLE001 - any failure means "not valid in all three"
        return False
    return True


def sizes() -> None:
    from automata_compile.frontends.json_schema import _formats

    tok = (
        Path(__file__).resolve().parents[2] / "shared" / "tokenizers" / "llama3" / "tokenizer.json"
    )
    vocab = ac.Vocabulary.from_file(str(tok))
    ac.compile_json_schema({"type": "integer"}, vocab)  # builds the trie once
    print("format | states | token classes | table MB | compile s (median of 3)")
    for fmt in ("regex", "hostname", "idn-hostname", "idn-email"):
        times = []
        for _ in range(3):
            _formats.format_language.cache_clear()
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ac.SubsetWarning)
                dfa = ac.compile_json_schema({"type": "string", "format": fmt}, vocab)
            times.append(time.perf_counter() - t0)
        print(
            f"{fmt} | {dfa.num_states} | {dfa.num_classes} | {dfa.nbytes / 1e6:.1f} | "
            f"{statistics.median(times):.2f}"
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show-rejected", choices=["tuning", "held-out"])
    ap.add_argument("--sizes", action="store_true", help="automaton sizes on Llama-3")
    args = ap.parse_args(argv)
    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ac.SubsetWarning)
        dfa = ac.compile_json_schema({"type": "string", "format": "regex"}, vocab)
    for half, pats in halves().items():
        valid = sorted(p for p in pats if valid_everywhere(p))
        accepted = [p for p in valid if dfa.accepts(list(json.dumps(p).encode("utf-8")))]
        print(
            f"{half}: {len(pats)} distinct patterns, {len(valid)} valid in ECMA-262 (u and "
            f"non-u) and Python re, {len(accepted)} accepted by the subset "
            f"({100 * len(accepted) / max(len(valid), 1):.1f}%)"
        )
        if args.show_rejected == half:
            for p in sorted(set(valid) - set(accepted)):
                print("   ", json.dumps(p))
    if args.sizes:
        sizes()
    return 0


if __name__ == "__main__":
    sys.exit(main())
