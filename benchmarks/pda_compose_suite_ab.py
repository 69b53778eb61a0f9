"""`compose_pda` A/B over the official JSON Schema Test Suite: a git ref's `_pda_compose.py`
(a self-contained module, e.g. ``a8ff1f4``) against this checkout's, on the same byte PDAs.

Every suite schema (draft 2020-12, one per test group) whose `byte_language` is a PDA is
composed with the Llama-3 vocabulary by both, old then new, in one process; their tables
(every array of the PDA block too) are compared. This checkout's composer keeps its walk
cache across the run, as a process compiling many schemas does: the first schema pays
for the shared rules' and loops' walks (reported apart).

Run: ``python benchmarks/pda_compose_suite_ab.py --ref a8ff1f4``. Writes
``benchmarks/results/pda_compose_suite_ab.json`` and prints a summary.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import ROOT, machine  # noqa: E402

import automata_compile as ac  # noqa: E402
from automata_compile.frontends.json_schema import _api  # noqa: E402
from automata_compile.tokens import _pda_compose  # noqa: E402
from automata_compile.tokens._token_trie import trie_for  # noqa: E402

MODULE = "compile/automata_compile/tokens/_pda_compose.py"
RESULTS = ROOT / "benchmarks" / "results" / "pda_compose_suite_ab.json"


def _old_module(ref: str, tmp: str):
    text = subprocess.run(
        ["git", "show", f"{ref}:{MODULE}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = Path(tmp) / "old_pda_compose.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("old_pda_compose", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.asarray(a[k]).shape == np.asarray(b[k]).shape and np.array_equal(a[k], b[k]) for k in a
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", required=True, help="git ref of the old composer")
    parser.add_argument("--out", default=str(RESULTS), help="results JSON file")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    vocab = ac.Vocabulary.from_file(str(scb.TOKENIZERS / "llama3" / "tokenizer.json"))
    trie = trie_for(vocab)
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        old = _old_module(args.ref, tmp)
        for name, schema in scb.suite_schemas(None).items():
            try:
                _, pda = _api.byte_language(schema, _api._options({}))
            except ac.AutomataError:
                continue
            if pda is None:
                continue
            t0 = time.perf_counter()
            a = old.compose_pda(pda, trie, vocab)
            t1 = time.perf_counter()
            b = _pda_compose.compose_pda(pda, trie, vocab)
            t2 = time.perf_counter()
            rows[name] = {"old_s": t1 - t0, "new_s": t2 - t1, "same": _same(a, b)}
            print(f"{name:50} {t1 - t0:7.3f} {t2 - t1:7.3f}", file=sys.stderr)
    names = list(rows)
    rest = names[1:]  # the first composition fills the walk cache
    summary = {
        "pdas": len(rows),
        "identical_tables": sum(r["same"] for r in rows.values()),
        "first": {"name": names[0], **{k: rows[names[0]][k] for k in ("old_s", "new_s")}},
        "old": scb.stats([rows[n]["old_s"] for n in rest]),
        "new": scb.stats([rows[n]["new_s"] for n in rest]),
        "median_per_schema_speedup": statistics.median(
            rows[n]["old_s"] / rows[n]["new_s"] for n in rest
        ),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "ref": args.ref, "summary": summary,
                               "rows": rows}, indent=1))  # fmt: skip
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
