"""Canonical-only decoding on the device (`automata_jax._canonical`), against the tokenizer.

Oracle: the real Gemma-3 tokenizer (``tokenizers``). For sampled previous tokens, the
device mask over the whole vocabulary equals ``{b : encode(decode(prev) + decode(b)) ==
[prev, b]}`` restricted to the tokens the pair test keeps (``ok``: the compiler's documented
restriction) plus the special tokens; the mask `generate` uses equals the constraint mask
AND that; and `generate(canonical=...)` outputs re-encode to themselves.
"""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_jax as aj
from automata_compile import Vocabulary, compile_regex
from automata_compile.tokens import canonical_bpe

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def gemma(gemma3_tokenizer_path):
    bpe = canonical_bpe(gemma3_tokenizer_path)
    tok = tokenizers.Tokenizer.from_file(str(gemma3_tokenizer_path))
    vocab = Vocabulary.from_tokenizer_json(gemma3_tokenizer_path)
    return bpe, aj.canonical_tables(bpe), tok, vocab


def _oracle(tok, bpe, prev: int) -> np.ndarray:
    """bool[V]: b with encode(decode([prev, b])) == [prev, b], over the kept tokens."""
    ids = np.flatnonzero(bpe.ok)
    left = tok.decode([prev])
    texts = [left + tok.decode([int(b)]) for b in ids]
    out = np.zeros(bpe.vocab_size, bool)
    for b, enc in zip(ids, tok.encode_batch(texts, add_special_tokens=False), strict=True):
        out[b] = enc.ids == [prev, int(b)]
    return out


def test_kept_tokens_are_canonical_alone(gemma):
    bpe, _, tok, _ = gemma
    ids = np.flatnonzero(bpe.ok)
    sample = random.Random(1).sample(list(ids), 3000)
    encs = tok.encode_batch([tok.decode([int(t)]) for t in sample], add_special_tokens=False)
    assert all(e.ids == [int(t)] for t, e in zip(sample, encs, strict=True))
    assert bpe.ok.sum() > 0.95 * (bpe.vocab_size - bpe.exempt.sum())


@pytest.mark.parametrize("seed", [0, 1])
def test_device_mask_equals_the_tokenizer_oracle(gemma, seed):
    bpe, canon, tok, vocab = gemma
    rng = random.Random(seed)
    ids = np.flatnonzero(bpe.ok)
    prevs = [int(rng.choice(ids)) for _ in range(2)]
    prevs.append(tok.token_to_id("ll") if seed == 0 else tok.token_to_id("▁"))
    mask = np.asarray(
        aj.canonical_mask(canon, jnp.asarray(prevs, jnp.int32), jnp.ones(len(prevs), bool))
    )
    ruled_out = 0
    for row, prev in enumerate(prevs):
        want = _oracle(tok, bpe, prev) | bpe.exempt
        got = mask[row]
        diff = np.flatnonzero(got != want)
        assert diff.size == 0, (prev, [(int(b), bool(got[b])) for b in diff[:5]])
        ruled_out += int((~want[bpe.ok]).sum())
    assert ruled_out > 100  # the oracle rules tokens out: the comparison can fail


def test_no_previous_token_tests_the_token_alone(gemma):
    bpe, canon, _, _ = gemma
    mask = np.asarray(aj.canonical_mask(canon, jnp.zeros(1, jnp.int32), jnp.zeros(1, bool)))
    assert (mask[0] == (bpe.ok | bpe.exempt)).all()


def _toy_step(bias):
    def step_fn(params, tokens, positions, input_mask, cache):
        return jnp.broadcast_to(params, tokens.shape + params.shape[-1:]), cache

    return step_fn


def test_generate_canonical_outputs_reencode_to_themselves(gemma):
    bpe, canon, tok, vocab = gemma
    v = bpe.vocab_size
    dfa = compile_regex(r"[a-z ]{1,40}", vocab)
    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=v)
    # a model with random preferences: it often spells text in non-canonical pieces
    logits = 3.0 * jax.random.normal(jax.random.key(3), (v,))
    outs = []
    for canonical in (None, canon):
        out = aj.generate(
            _toy_step(None), logits, jnp.ones((8, 1), jnp.int32), tables, [0] * 8,
            sampler=aj.Temperature(1.0), max_new_tokens=24, rng=jax.random.key(0),
            canonical=canonical,
        )  # fmt: skip
        same = []
        for row in range(8):
            ids = [int(t) for t in out.tokens[row, : int(out.lengths[row])]]
            text = vocab.decode(ids).decode("utf-8")
            same.append(tok.encode(text, add_special_tokens=False).ids == ids)
        outs.append((out, same))
    (_, plain_same), (out, same) = outs
    clean = np.asarray(out.canonical_fallbacks) == 0
    assert clean.sum() >= 6, out.canonical_fallbacks
    assert all(s for s, c in zip(same, clean, strict=True) if c), (same, out.canonical_fallbacks)
    assert not all(plain_same)  # the unfiltered run is non-canonical: the filter matters


def test_combined_mask_is_constraint_and_canonical(gemma):
    bpe, canon, tok, vocab = gemma
    v = bpe.vocab_size
    dfa = compile_regex(r"(ab|a|b|llo|hello|l)+", vocab)
    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=v)
    prevs = [tok.token_to_id("he"), tok.token_to_id("b")]
    state = aj.init_state(tables, jnp.asarray([0, 0], jnp.int32))
    state = aj.advance(tables, state, jnp.asarray(prevs, jnp.int32))
    allowed = np.asarray(aj.allowed_mask(tables, state))
    canonical = np.asarray(
        aj.canonical_mask(canon, jnp.asarray(prevs, jnp.int32), jnp.ones(2, bool))
    )
    wants = []
    for row, prev in enumerate(prevs):
        want = allowed[row] & (_oracle(tok, bpe, prev) | bpe.exempt)
        assert (allowed[row] & canonical[row] == want).all()
        wants.append(want)
    # after "he" the language needs "llo", and every spelling of it merges with "he": a dead
    # end (generate falls back there and counts it)
    assert allowed[0].any() and not wants[0].any()
    assert wants[1].any() and (allowed[1] & ~wants[1]).any()  # both sides of the AND bite


def test_refuses_tables_of_another_size(gemma):
    _, canon, _, _ = gemma
    tables = aj.ConstraintTables.from_dfas(
        compile_regex("a", Vocabulary.from_bytes([b"a", None], eos_ids=[1], special_ids=[1])),
        vocab_size=2,
    )
    with pytest.raises(aj.RuntimeShapeError, match="canonical: expected tables for vocab_size 2"):
        aj.generate(
            _toy_step(None), jnp.zeros(2), jnp.ones((1, 1), jnp.int32), tables, [0],
            sampler=aj.Greedy(), max_new_tokens=2, rng=jax.random.key(0), canonical=canon,
        )  # fmt: skip
