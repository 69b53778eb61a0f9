"""The bitset runtime rule's step cost beside the gather mask, on one schema (default changie).

Compiles the schema on Llama-3 three ways (the bitset path, the default any order, declared
order), checks `automata_jax._bitset.bitset_mask` / `bitset_advance` against the NumPy
reference along random walks (8 rows, 60 steps), then times one jitted mask per step (median of
200 calls after a warm-up) at B = 1, 8, 64 for the bitset kernel (static packed rows, the
conditional tokens' tests written over them) and for `allowed_mask` on the two token DFAs (the
default gather mask; declared order also with ``mask_impl="bitmask"``). ``--alternatives 1,8``
times the bitset kernel with its REQUIRE alternatives padded to each K (the union test of
docs/any_order_bitset.md; K = the tables' own, a power of two, by default); ``--schema-file``
reads a schema from a path instead of the SchemaStore corpus. Run:
``python benchmarks/bitset_mask_bench.py [--schema changie.json] [--alternatives 1,8]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import machine, median_call_s  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_compile.pipeline._bitset import compile_json_schema_bitset  # noqa: E402
from automata_compile.tokens import reference_advance, reference_mask  # noqa: E402
from automata_jax._bitset import BitsetDeviceTables, bitset_advance, bitset_mask  # noqa: E402


def _median_us(fn, *args) -> float:
    return median_call_s(fn, *args) * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", default="changie.json")
    parser.add_argument("--schema-file", default=None)
    parser.add_argument("--alternatives", default=None, help="comma-separated K values")
    args = parser.parse_args(argv)
    vocab = ac.Vocabulary.from_file(scb.TOKENIZERS / "llama3" / "tokenizer.json")
    if args.schema_file:
        schema = json.loads(Path(args.schema_file).read_text())
    else:
        schema = scb.schemastore_schemas()[args.schema]
    warnings.simplefilter("ignore")
    t = compile_json_schema_bitset(schema, vocab)
    dfas = {
        "any": ac.compile_json_schema(schema, vocab),
        "declared": ac.compile_json_schema(schema, vocab, property_order="declared"),
    }
    dt = BitsetDeviceTables.from_tables(t, vocab.size)
    m, a = jax.jit(bitset_mask), jax.jit(bitset_advance)
    rng = random.Random(0)
    rows = 8
    state = np.full(rows, t.start, np.int32)
    bits = np.zeros((rows, t.words), np.uint32)
    for _ in range(60):
        got = np.asarray(m(dt, jnp.asarray(state), jnp.asarray(bits)))
        toks = []
        for r in range(rows):
            want = reference_mask(t, int(state[r]), bits[r])
            assert np.array_equal(got[r], want)
            allowed = [x for x in np.flatnonzero(want).tolist() if x not in vocab.eos_ids]
            toks.append(rng.choice(allowed) if allowed else vocab.eos_ids[0])
        ns, nb = a(dt, jnp.asarray(state), jnp.asarray(bits), jnp.asarray(toks, jnp.int32))
        for r in range(rows):
            if toks[r] not in vocab.eos_ids:
                s2, b2 = reference_advance(t, int(state[r]), bits[r], toks[r])
                assert int(ns[r]) == s2 and np.array_equal(np.asarray(nb[r]), b2)
        state, bits = np.asarray(ns), np.asarray(nb)
    print(machine(), file=sys.stderr)
    print(f"kernels equal to the reference on {rows * 60} row-steps; {jax.devices()}")
    print(f"bitset tables {dt.sizes}; program_alts {tuple(t.program_alts.shape)}")
    ks = [int(k) for k in args.alternatives.split(",")] if args.alternatives else []
    padded = {k: BitsetDeviceTables.from_tables(t, vocab.size, alternatives=k) for k in ks}
    for b in (1, 8, 64):
        state0, bits0 = jnp.full((b,), t.start, jnp.int32), jnp.zeros((b, t.words), jnp.uint32)
        out = {"bitset": _median_us(m, dt, state0, bits0)}
        for k, dk in padded.items():
            out[f"bitset K={k}"] = _median_us(m, dk, state0, bits0)
        for (name, d), impl in [(x, i) for x in dfas.items() for i in ("gather", "bitmask")]:
            if impl == "bitmask" and name == "any":
                continue
            tables = aj.ConstraintTables.from_dfas([d], vocab_size=vocab.size, mask_impl=impl)
            cs = aj.init_state(tables, jnp.zeros((b,), jnp.int32))
            out[f"{name} {impl} {tuple(tables.next_state.shape[1:])}"] = _median_us(
                jax.jit(aj.allowed_mask), tables, cs
            )
        print(f"B={b}: " + ", ".join(f"{k} {v:,.0f} us" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
