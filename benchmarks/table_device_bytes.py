"""Bytes on the device and build time of each SchemaStore schema's `ConstraintTables`
(`compile_json_schema` with the defaults, then `ConstraintTables.from_dfas`), one JSON line
per schema. Run it in two checkouts to compare layouts:

    PYTHONPATH=<tree>:<tree>/compile python <tree>/benchmarks/table_device_bytes.py \\
        compose-spec.json dependabot.json
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jax  # noqa: E402
import schema_corpus_bench as corpus  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402


def main(names: list[str]) -> None:
    vocab = ac.Vocabulary.from_file(corpus.TOKENIZERS / "llama3" / "tokenizer.json")
    schemas = corpus.schemastore_schemas()
    for name in names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dfa = ac.compile_json_schema(schemas[name], vocab)
        t = time.perf_counter()
        tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=vocab.size)
        jax.block_until_ready(tables)
        row = {
            "schema": name,
            "device_mb": round(tables.nbytes / 2**20),
            "build_s": round(time.perf_counter() - t, 2),
        }
        print(json.dumps(row), flush=True)
        del tables, dfa


if __name__ == "__main__":
    main(sys.argv[1:])
