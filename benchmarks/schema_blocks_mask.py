"""The cost of one jitted `allowed_mask` + `advance` step for JSON Schema rows with per-rule
state blocks (how `compile_json_schema` lays out a schema with grammar rules) against the
same constraint's dense tables (`TokenDFA.dense`) and unconstrained rows, interleaved in one
process; with each layout's device bytes and table-build time. Every schema is compiled
in blocks here, also one under ``BLOCK_MIN_STATES`` (the small ``tree``), to compare.

Rows sit at the start and after a prefix of a valid instance (``PREFIXES`` below), each a
real configuration of the schema (its stack included).

    PYTHONPATH=.:compile:benchmarks python benchmarks/schema_blocks_mask.py \
        --schemas github-workflows.json dependabot.json --batch 1 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import schema_corpus_bench as corpus

import automata_compile as ac
import automata_jax as aj
from automata_compile.pipeline import _grammar

# A small recursive schema (a few rules, a small dense table).
TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
        }
    },
    "$ref": "#/$defs/node",
}

# A prefix of a valid instance of each schema (the rows' state: inside nested rules).
PREFIXES = {
    "github-workflows.json": '{"on": "push", "jobs": {"build": {"runs-on": "ubuntu-latest", '
    '"steps": [{"name": "x", "run": "make',
    "dependabot.json": '{"version": 2, "updates": [{"allow": [{"dependency-name": "requ',
    "tree": '{"name": "root", "children": [{"name": "leaf", "children": [{"name": "x',
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--schemas", nargs="+", default=sorted(PREFIXES))
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--tokenizer", default=str(corpus.TOKENIZERS / "llama3" / "tokenizer.json"))
    args = p.parse_args()
    vocab = ac.Vocabulary.from_file(args.tokenizer)
    schemas = corpus.schemastore_schemas() | {"tree": TREE}
    _grammar.BLOCK_MIN_STATES = 0  # blocks whatever the size, to compare the two layouts
    for name in args.schemas:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            blocked = ac.compile_json_schema(schemas[name], vocab)
        kinds = {"blocks": blocked, "dense": blocked.dense()}
        ids = vocab.encode(PREFIXES[name])
        for batch in args.batch:
            tok = jnp.full((batch,), vocab.encode(" ")[0], jnp.int32)

            @jax.jit
            def step(tables, state, tok=tok):
                return aj.allowed_mask(tables, state), aj.advance(tables, state, tok)

            cases, build_s, device_mb = {}, {}, {}
            for kind, dfa in kinds.items():
                t = time.perf_counter()
                tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=vocab.size)
                jax.block_until_ready(tables)
                build_s[kind] = time.perf_counter() - t
                device_mb[kind] = tables.nbytes / 2**20
                start = aj.init_state(tables, jnp.zeros((batch,), jnp.int32))
                inside = start
                for t in ids:
                    inside = aj.advance(tables, inside, jnp.full((batch,), t, jnp.int32))
                assert not bool(inside.error.any()), (name, kind)
                cases[f"{kind}_start"] = (tables, start)
                cases[f"{kind}_inside"] = (tables, inside)
                if kind == "dense":
                    free = aj.init_state(tables, jnp.full((batch,), -1, jnp.int32))
                    cases["unconstrained"] = (tables, free)
            masks = {k: jax.block_until_ready(step(*c))[0] for k, c in cases.items()}
            for where in ("start", "inside"):  # the same masks in both layouts
                assert bool((masks[f"blocks_{where}"] == masks[f"dense_{where}"]).all())
            times = {k: [] for k in cases}
            for _ in range(args.repeat):
                for k, (tables, st) in cases.items():
                    t = time.perf_counter()
                    jax.block_until_ready(step(tables, st))
                    times[k].append(1000 * (time.perf_counter() - t))
            row = {"schema": name, "batch": batch, "states": blocked.num_states}
            row.update({f"{k}_ms": round(statistics.median(v), 3) for k, v in times.items()})
            row.update({f"{k}_device_mb": round(v, 1) for k, v in device_mb.items()})
            row.update({f"{k}_build_s": round(v, 2) for k, v in build_s.items()})
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
