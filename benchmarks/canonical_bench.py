"""The canonical filter's cost: table build time, device memory, and time per decode step.

Builds `canonical_bpe` for a real ``tokenizer.json`` (default Gemma-3), then times, at
batch ``--batch``, one decode step's masking side by side: the constraint mask alone
(`allowed_mask` + where on float32 logits) vs the constraint mask AND `canonical_mask` (as
`generate(canonical=...)` does); median of ``--repeats`` interleaved runs.

    PYTHONPATH=.:compile JAX_PLATFORMS=cpu python benchmarks/canonical_bench.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import automata_compile as ac
import automata_jax as aj

TOKENIZER = Path(__file__).resolve().parents[2] / "shared/tokenizers/gemma3/tokenizer.json"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args(argv)
    vocab = ac.Vocabulary.from_tokenizer_json(args.tokenizer)
    v = vocab.size
    t0 = time.perf_counter()
    bpe = ac.canonical_bpe(args.tokenizer, v)
    build = time.perf_counter() - t0
    canon = aj.canonical_tables(bpe)
    nbytes = sum(x.nbytes for x in jax.tree.leaves(canon))
    print(
        f"canonical_bpe: {build:.1f} s; device arrays {nbytes / 2**20:.1f} MiB "
        f"(V={v}, DL={bpe.left_sym.shape[1]}, DR={bpe.right_sym.shape[1]}, "
        f"M={canon.merge_right.shape[0]}, L={canon.slots.shape[0]}); tokens kept {int(bpe.ok.sum())}, "
        f"special {int(bpe.exempt.sum())}"
    )
    dfa = ac.compile_json_schema(
        {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
         "required": ["name", "n"]},
        vocab,
    )  # fmt: skip
    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=v)
    b = args.batch
    state = aj.init_state(tables, jnp.zeros(b, jnp.int32))
    logits = jax.random.normal(jax.random.key(0), (b, v))
    prev = jnp.asarray(np.random.default_rng(0).choice(np.flatnonzero(bpe.ok), b), jnp.int32)

    @jax.jit
    def plain(state, logits):
        return jnp.argmax(aj.mask_logits(tables, state, logits), axis=-1)

    @jax.jit
    def canonical(state, logits, prev):
        both = aj.allowed_mask(tables, state) & aj.canonical_mask(canon, prev, jnp.ones(b, bool))
        return jnp.argmax(jnp.where(both, logits, -jnp.inf), axis=-1)

    plain(state, logits).block_until_ready()
    canonical(state, logits, prev).block_until_ready()
    tp, tc = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        plain(state, logits).block_until_ready()
        tp.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        canonical(state, logits, prev).block_until_ready()
        tc.append(time.perf_counter() - t0)
    mp, mc = statistics.median(tp), statistics.median(tc)
    print(
        f"batch {b}: mask step {1e3 * mp:.2f} ms plain, {1e3 * mc:.2f} ms with canonical "
        f"(+{1e3 * (mc - mp):.2f} ms/step, {mc / mp:.1f}x the masking)"
    )


if __name__ == "__main__":
    main()
