"""`compose_pda` A/B: a git ref's `_pda_compose.py` (default ``perf``) against this checkout's.

Byte PDAs are built once per vocabulary: the built-in JSON grammar (this checkout) and,
with ``--schema-checkout DIR`` (a checkout whose `compile_json_schema` targets the PDA),
a recursive "tree" schema and the schema-free ``{}``, built there in a subprocess. Both
compositions then run on the same PDA and trie, interleaved (old/new, new/old, ...), and
their tables are compared array by array. Prints a Markdown table: medians (min-max) of seconds.

Run: ``PYTHONPATH=$PWD:$PWD/compile python benchmarks/pda_compose_bench.py [--ref perf]
[--repeats 3] [--vocabs llama3,gemma3] [--schema-checkout ../wt-schemagrammar]``
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import automata_compile as ac
from automata_compile.frontends.grammar._byte_pda import BytePDA, build_byte_pda
from automata_compile.frontends.grammar._compile import builtin_grammar
from automata_compile.frontends.grammar._lark_reader import read_grammar
from automata_compile.tokens._token_trie import trie_for

ROOT = Path(__file__).resolve().parents[1]
TOKENIZERS = ROOT.parent / "shared" / "tokenizers"
MODULE = "compile/automata_compile/tokens/_pda_compose.py"
TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["v"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/node",
}
# Run in the schema checkout: pickles the fields of the schemas' byte PDAs.
SCHEMA_PDAS = """
import dataclasses, pickle, sys
from automata_compile.frontends.json_schema._api import byte_language, _options
out = {}
for name, schema in (("tree schema", TREE), ("{} schema", {})):
    _, pda = byte_language(schema, _options({}))
    out[name] = {f.name: getattr(pda, f.name) for f in dataclasses.fields(pda)}
pickle.dump(out, open(sys.argv[1], "wb"))
"""


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _schema_pdas(checkout: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pdas.pkl"
        env = dict(os.environ, PYTHONPATH=f"{checkout}:{checkout / 'compile'}")
        code = f"TREE = {TREE!r}\n{SCHEMA_PDAS}"
        subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True)
        fields = {f.name for f in dataclasses.fields(BytePDA)}
        return {
            k: BytePDA(**{f: v for f, v in d.items() if f in fields})
            for k, d in pickle.loads(out.read_bytes()).items()
        }


def _span(ts: list) -> str:
    """Median (min-max) seconds."""
    return f"{statistics.median(ts):.2f} ({min(ts):.2f}-{max(ts):.2f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default="perf")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--vocabs", default="llama3,gemma3")
    ap.add_argument("--schema-checkout", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old_path = Path(tmp) / "old_pda_compose.py"
        old_path.write_text(
            subprocess.run(
                ["git", "show", f"{args.ref}:{MODULE}"],
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        old = _module(old_path, "old_pda_compose")
    new = _module(ROOT / MODULE, "new_pda_compose")
    schemas = _schema_pdas(args.schema_checkout) if args.schema_checkout else {}
    print(
        f"| vocabulary | workload | Q | {args.ref} (s) | this checkout (s) | speed-up | identical |"
    )
    print("|---|---|---:|---:|---:|---:|---|")
    for vname in args.vocabs.split(","):
        vocab = ac.Vocabulary.from_file(TOKENIZERS / vname / "tokenizer.json")
        trie = trie_for(vocab)
        pdas = {"JSON grammar": build_byte_pda(read_grammar(builtin_grammar("json"), vocab))}
        pdas.update(schemas)
        for wname, pda in pdas.items():
            times = {old: [], new: []}
            tables = {}
            for r in range(args.repeats):
                for mod in (old, new) if r % 2 == 0 else (new, old):
                    t = time.perf_counter()
                    tables[mod] = mod.compose_pda(pda, trie, vocab)
                    times[mod].append(time.perf_counter() - t)
            a, b = tables[old], tables[new]
            same = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
            to, tn = statistics.median(times[old]), statistics.median(times[new])
            print(
                f"| {vname} ({vocab.size:,}) | {wname} | {pda.num_states} | {_span(times[old])} | "
                f"{_span(times[new])} | {to / tn:.1f}x | {'yes' if same else 'NO'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
