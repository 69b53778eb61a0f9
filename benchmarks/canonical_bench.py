"""The canonical filter's cost: table build time, device memory, time per step and per decode.

Builds `canonical_bpe` for a real ``tokenizer.json`` (default Gemma-3), then at batch
``--batch``, side by side (interleaved, median of ``--repeats`` runs):

* one step's masking and argmax: the constraint mask alone (the plain loop); the lazy
  check `generate(canonical=...)` takes with `Greedy` (`canonical_sample`: argmax under the
  constraint, then one pair test per row), with no row failing and with one row failing
  (the full mask under ``lax.cond``); and the full mask every step (constraint AND
  `canonical_mask`, what the lazy check replaces);
* with ``--decode``, whole `generate` calls of the real Gemma-3 270M (greedy, the BFCL
  tuning split's first ``--batch`` cases and their argument schemas, ``--new`` tokens):
  plain, lazy canonical, full-mask canonical, and lazy canonical with fast-forward.

    PYTHONPATH=.:compile JAX_PLATFORMS=cpu python benchmarks/canonical_bench.py --decode
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import automata_compile as ac
import automata_jax as aj
from automata_jax import models as aj_models
from automata_jax._canonical import canonical_sample

TOKENIZER = Path(__file__).resolve().parents[2] / "shared/tokenizers/gemma3/tokenizer.json"


class FullGreedy(aj.Greedy):
    """Greedy with the full canonical mask every step (what the lazy check replaces)."""

    rejection_exact = False


def timed(fns: dict, repeats: int) -> dict:
    """Median seconds per call of each thunk, interleaved (one warm-up call each first)."""
    for f in fns.values():
        jax.block_until_ready(f())
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f())
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def step_costs(canon, bpe, vocab, tok_ids, b: int, repeats: int) -> None:
    v = bpe.vocab_size
    dfa = ac.compile_json_schema(
        {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
         "required": ["name", "n"]},
        vocab,
    )  # fmt: skip
    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=v)
    state = aj.init_state(tables, jnp.zeros(b, jnp.int32))
    for t in vocab.encode('{"name": "'):  # inside the string: free text
        state = aj.advance(tables, state, jnp.full((b,), t, jnp.int32))
    logits = jax.random.normal(jax.random.key(0), (b, v))
    # row 0 prefers "llo" after "he" (non-canonical: "hello" merges): the lazy slow path
    failing = logits.at[0, tok_ids["llo"]].set(100.0)
    exempt = jnp.full((b,), int(np.flatnonzero(bpe.exempt)[0]), jnp.int32)  # no pair fails
    prev = exempt.at[0].set(tok_ids["he"])
    yes, no = jnp.ones(b, bool), jnp.zeros(b, bool)
    key = jax.random.key(0)

    @jax.jit
    def plain(state, logits):
        return aj.Greedy()(aj.mask_logits(tables, state, logits), key)

    @functools.partial(jax.jit, static_argnums=0)
    def canonical(sampler, state, logits, prev):
        allowed = aj.allowed_mask(tables, state)
        return canonical_sample(canon, sampler, allowed, logits, key, prev, yes, no)

    got = canonical(aj.Greedy(), state, failing, prev)[0]
    assert int(got[0]) != int(tok_ids["llo"]) and not bool(state.error.any())
    med = timed(
        {
            "plain": lambda: plain(state, logits),
            "lazy, no row fails": lambda: canonical(aj.Greedy(), state, logits, exempt),
            "lazy, one row fails": lambda: canonical(aj.Greedy(), state, failing, prev),
            "full mask": lambda: canonical(FullGreedy(), state, logits, exempt),
        },
        repeats,
    )
    base = med["plain"]
    print(f"\none step's masking + argmax, batch {b} (median of {repeats}):")
    print("| path | ms/step | vs plain |\n|---|---|---|")
    for k, t in med.items():
        print(f"| {k} | {1e3 * t:.2f} | +{1e3 * (t - base):.2f} ms |")


def decode_costs(tokenizer, vocab, b: int, new: int, repeats: int) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _bfcl
    import quality_bench as qb

    model, params = qb.load_model()
    v = model.config.vocab_size  # the model's width (the tokenizer has one id more)
    canon = aj.canonical_tables(
        ac.canonical_bpe(tokenizer, v, cache_dir=aj_models.default_cache_dir())
    )
    cases = _bfcl.load_cases("simple_python")[:b]  # the tuning split: timing only
    dfas = [
        ac.compile_json_schema(_bfcl.parameters_schema(c.functions[0]), vocab, strict=False)
        for c in cases
    ]
    eos = [i for i in vocab.eos_ids if i < v]
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=v, eos_ids=eos)
    prompts = [[vocab.bos_id, *vocab.encode(qb.prompt(c, "Arguments:"))] for c in cases]
    tokens, mask = aj.pad_prompts(prompts, length=64 * -(-max(map(len, prompts)) // 64))
    ids = np.arange(b, dtype=np.int32)
    cache = functools.partial(model.init_cache)

    def run(sampler, canonical, ff=False):
        return lambda: aj.generate(
            model.apply_step, params, tokens, tables, ids, sampler=sampler,
            max_new_tokens=new, rng=jax.random.key(0), prompt_mask=mask, cache=cache,
            canonical=canonical, fast_forward=ff,
        )  # fmt: skip

    variants = {
        "plain": run(aj.Greedy(), None),
        "lazy canonical": run(aj.Greedy(), canon),
        "full-mask canonical": run(FullGreedy(), canon),
        "lazy canonical + fast-forward": run(aj.Greedy(), canon, True),
    }
    outs = {k: f() for k, f in variants.items()}
    med = timed(variants, repeats)
    same = bool((outs["lazy canonical"].tokens == outs["full-mask canonical"].tokens).all())
    differ = int((outs["plain"].tokens != outs["lazy canonical"].tokens).any(axis=1).sum())
    print(
        f"\ngenerate, Gemma-3 270M, batch {b}, greedy, up to {new} tokens (median of {repeats}); "
        f"lazy == full-mask outputs: {same}; rows where canonical differs from plain: {differ}"
    )
    print("| loop | s/generate | tokens/row | model calls/row | fallbacks | vs plain |")
    print("|---|---|---|---|---|---|")
    base = med["plain"]
    for k, t in med.items():
        o = outs[k]
        print(
            f"| {k} | {t:.2f} | {float(o.lengths.mean()):.1f} | "
            f"{float(o.model_calls.mean()):.1f} | {int(o.canonical_fallbacks.sum())} | "
            f"{t / base:.2f}x |"
        )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--decode", action="store_true", help="also time generate on the real model")
    ap.add_argument("--new", type=int, default=32, help="max_new_tokens of --decode")
    ap.add_argument("--decode-repeats", type=int, default=5)
    args = ap.parse_args(argv)
    vocab = ac.Vocabulary.from_tokenizer_json(args.tokenizer)
    v = vocab.size
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        bpe = ac.canonical_bpe(args.tokenizer, v, cache_dir=cache)
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        ac.canonical_bpe(args.tokenizer, v, cache_dir=cache)
        load = time.perf_counter() - t0
    canon = aj.canonical_tables(bpe)
    nbytes = sum(x.nbytes for x in jax.tree.leaves(canon))
    print(
        f"canonical_bpe: {build:.1f} s (from its on-disk cache: {load:.2f} s); device arrays {nbytes / 2**20:.1f} MiB "
        f"(V={v}, DL={bpe.left_sym.shape[1]}, DR={bpe.right_sym.shape[1]}, "
        f"M={canon.merge_right.shape[0]}, L={canon.slots.shape[0]}, "
        f"search steps {canon.search_steps}); tokens kept {int(bpe.ok.sum())}, "
        f"special {int(bpe.exempt.sum())}"
    )
    pieces = {bytes(t): i for i, t in enumerate(vocab.tokens) if t}
    tok_ids = {"he": pieces[b"he"], "llo": pieces[b"llo"]}
    step_costs(canon, bpe, vocab, tok_ids, args.batch, args.repeats)
    if args.decode:
        decode_costs(args.tokenizer, vocab, args.batch, args.new, args.decode_repeats)


if __name__ == "__main__":
    main()
