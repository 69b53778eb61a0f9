"""allowed_mask / advance of `ConstraintTables.from_bitset` tables on Llama-3 (medians).

Median microseconds of 200 jitted calls; rows sit in the states of a 30-step random walk (64
rows; B = 1, 8, 64 are its first rows). Run with
``PYTHONPATH=<tree>:compile python benchmarks/bitset_runtime_bench.py SCHEMA.json [SCHEMA2.json]``
(SchemaStore names; ``<tree>`` picks the `automata_jax` measured, so two trees compare in
separate processes). ``K2=1``: also the first two schemas in one tables (K = 2, rows
alternating); ``PLAIN=1``: also the default compile's tables (`from_dfas`, the gather mask).
Figures: BENCHMARKS.md, "Session 13: the bitset runtime".
"""

from __future__ import annotations

import os
import random
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import median_call_s  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_compile.pipeline._bitset import compile_json_schema_bitset  # noqa: E402


def _median_us(fn, *args) -> float:
    return median_call_s(fn, *args) * 1e6


def _walked(tables, ids, mask, adv, steps=30):
    """The rows' states after ``steps`` random allowed tokens, and the last tokens."""
    rng = random.Random(0)
    st = aj.init_state(tables, jnp.asarray(ids, jnp.int32))
    toks = [0] * len(ids)
    for _ in range(steps):
        m = np.asarray(mask(tables, st))
        toks = [rng.choice(np.flatnonzero(m[r]).tolist()) for r in range(len(ids))]
        st = adv(tables, st, jnp.asarray(toks, jnp.int32))
    return st, toks


def _row(tables, ids, mask, adv, with_advance=True) -> str:
    st, toks = _walked(tables, ids, mask, adv)
    out = []
    for b in (1, 8, 64):
        sb = jax.tree.map(lambda x, b=b: x[:b], st)
        cell = f"B={b}: mask {_median_us(mask, tables, sb):,.0f} us"
        if with_advance:
            tok = jnp.asarray(toks[:b], jnp.int32)
            cell += f", advance {_median_us(adv, tables, sb, tok):,.0f} us"
        out.append(cell)
    return "; ".join(out)


def main(argv=None) -> int:
    names = sys.argv[1:] if argv is None else argv
    warnings.simplefilter("ignore")
    print("automata_jax from", aj.__file__)
    vocab = ac.Vocabulary.from_file(scb.TOKENIZERS / "llama3" / "tokenizer.json")
    schemas = scb.schemastore_schemas()
    mask, adv = jax.jit(aj.allowed_mask), jax.jit(aj.advance)
    compiled = {}
    for name in names:
        t = compiled[name] = compile_json_schema_bitset(schemas[name], vocab)
        tables = aj.ConstraintTables.from_bitset(t, vocab_size=vocab.size)
        row = _row(tables, [0] * 64, mask, adv)
        print(f"{name} ({type(t).__name__}, {tables.nbytes / 1e6:.1f} MB): {row}", flush=True)
    if os.environ.get("K2") and len(names) >= 2:
        tables = aj.ConstraintTables.from_bitset(
            [compiled[n] for n in names[:2]], vocab_size=vocab.size
        )
        row = _row(tables, [i % 2 for i in range(64)], mask, adv)
        print(f"K=2 {names[:2]} ({tables.padded_shape}, {tables.nbytes / 1e6:.1f} MB): {row}")
    if os.environ.get("PLAIN"):
        for name in names:
            d = ac.compile_json_schema(schemas[name], vocab)
            tables = aj.ConstraintTables.from_dfas([d], vocab_size=vocab.size)
            row = _row(tables, [0] * 64, mask, adv, with_advance=False)
            print(f"default {name} (pda={d.is_pda}, {tables.padded_shape}, "
                  f"{tables.nbytes / 1e6:.1f} MB): {row}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
