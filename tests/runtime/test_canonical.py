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


# --- the lazy check: one pair test per row, the full mask only when a row fails ---

CORPUS = [
    "the cat sat on the mat; the hat is that flat",
    "aaaa abab baba llama hello hallo ll lll",
    "----====----  ,,;; tattle tale",
] * 20


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small trained BPE, merge list shuffled (ranks out of training order, as Gemma-3's)."""
    import json

    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=120, show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    obj = json.loads(tok.to_str())
    random.Random(0).shuffle(obj["model"]["merges"])
    path = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    path.write_text(json.dumps(obj))
    bpe = canonical_bpe(path)
    return bpe, aj.canonical_tables(bpe)


@pytest.mark.parametrize("has_prev", [True, False])
def test_pair_test_equals_the_full_mask_on_every_pair(small, has_prev):
    bpe, canon = small
    v = bpe.vocab_size
    full = np.asarray(aj.canonical_mask(canon, jnp.arange(v), jnp.full(v, has_prev)))
    prev, nxt = jnp.repeat(jnp.arange(v), v), jnp.tile(jnp.arange(v), v)
    pair = aj.canonical_pair_ok(canon, prev, jnp.full(v * v, has_prev), nxt)
    assert (np.asarray(pair).reshape(v, v) == full).all()
    assert (~full).sum() > 1000  # both outcomes occur


def test_pair_test_equals_the_full_mask_on_gemma3(gemma):
    """Brute force over the real vocabulary: for sampled previous tokens, every token the
    full mask rules out and 20,000 random others, plus special and out-of-range ids."""
    bpe, canon, tok, _ = gemma
    rng = np.random.default_rng(0)
    ids = np.flatnonzero(bpe.ok)
    prevs = [*rng.choice(ids, 6), tok.token_to_id("ll"), tok.token_to_id("▁"), 1, 2]
    full = np.asarray(aj.canonical_mask(canon, jnp.asarray(prevs), jnp.ones(len(prevs), bool)))
    nexts = [  # per row: every token the full mask rules out, and 20,000 random ids
        np.concatenate([np.flatnonzero(~full[r]), rng.integers(0, bpe.vocab_size, 20000)])
        for r in range(len(prevs))
    ]
    # every row's (prev, next) pairs in one call (one compile)
    row = np.repeat(np.arange(len(prevs)), [n.size for n in nexts])
    nxt = np.concatenate(nexts)
    prev = np.asarray(prevs)[row]
    got = np.asarray(jax.jit(aj.canonical_pair_ok)(canon, prev, np.ones(nxt.size, bool), nxt))
    bad = got != full[row, nxt]
    assert not bad.any(), (prev[bad][:5], nxt[bad][:5])
    ruled_out = int((~full).sum())
    assert ruled_out > 1000 and nxt.size > 200_000


def _random_rows(bpe, n, seed):
    rng = np.random.default_rng(seed)
    v = bpe.vocab_size
    prev = jnp.asarray(rng.integers(0, v, n), jnp.int32)
    has_prev = jnp.asarray(rng.random(n) < 0.9)
    allowed = jnp.asarray(rng.random((n, v)) < 0.5)
    logits = jnp.asarray(rng.normal(0, 3, (n, v)), jnp.float32)
    done = jnp.asarray(rng.random(n) < 0.05)
    return allowed, logits, prev, has_prev, done


class _FullGreedy(aj.Greedy):
    rejection_exact = False  # the full mask every step


class _FullTemperature(aj.Temperature):
    rejection_exact = False


def test_lazy_greedy_equals_the_full_mask(small):
    bpe, canon = small
    allowed, logits, prev, has_prev, done = _random_rows(bpe, 4000, 0)
    key = jax.random.key(0)
    lazy = aj._canonical.canonical_sample(
        canon, aj.Greedy(), allowed, logits, key, prev, has_prev, done
    )
    full = aj._canonical.canonical_sample(
        canon, _FullGreedy(), allowed, logits, key, prev, has_prev, done
    )
    live = ~np.asarray(done)  # a done row's token is replaced by pad_id in generate
    for a, b in zip(lazy, full, strict=True):
        assert (np.asarray(a)[live] == np.asarray(b)[live]).all()
    plain = np.asarray(aj.Greedy()(jnp.where(allowed, logits, -jnp.inf), key))
    assert (plain != np.asarray(lazy[0])).sum() > 100  # the slow path ran for those rows
    assert np.asarray(lazy[1]).sum() == 0  # half the vocabulary allowed: no dead end here


def test_lazy_temperature_samples_the_restricted_distribution(small):
    """Exact probabilities of p restricted to (constraint AND canonical) against the lazy
    sampler's draws over 20,000 keys (chi-square, loose bound); the full path too."""
    from scipy import stats

    bpe, canon = small
    v = bpe.vocab_size
    allowed, logits, _, _, _ = _random_rows(bpe, 1, 1)
    logits = logits / 3.0
    full_c = np.asarray(aj.canonical_mask(canon, jnp.arange(v), jnp.ones(v, bool)))
    prev = int(np.argmax((~full_c & np.asarray(allowed)).sum(axis=1)))  # most ruled out
    keep = np.asarray(allowed[0]) & full_c[prev]
    p = np.where(keep, np.exp(np.asarray(logits[0], np.float64)), 0)
    p /= p.sum()
    base = np.where(np.asarray(allowed[0]), np.exp(np.asarray(logits[0], np.float64)), 0)
    assert base[~keep].sum() / base.sum() > 0.2  # the first draw is often rejected
    n = 20000

    def draw(sampler):
        def one(key):
            tok, fb = aj._canonical.canonical_sample(
                canon, sampler, allowed, logits, key, jnp.asarray([prev]),
                jnp.ones(1, bool), jnp.zeros(1, bool),
            )  # fmt: skip
            return tok[0], fb[0]

        toks, fbs = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(7), n))
        assert int(fbs.sum()) == 0
        return np.bincount(np.asarray(toks), minlength=v)

    for sampler in (aj.Temperature(1.0), _FullTemperature(1.0)):
        counts = draw(sampler)
        assert counts[~keep].sum() == 0
        big = p * n >= 5  # pool the rare tokens into one cell
        obs = np.append(counts[big], counts[~big].sum())
        exp = np.append(p[big] * n, p[~big].sum() * n)
        obs, exp = obs[exp > 0], exp[exp > 0]
        assert stats.chisquare(obs, exp).pvalue > 1e-4, sampler


def test_lazy_generate_equals_the_full_mask_greedy(gemma):
    """Mixed batch (constrained and unconstrained rows, a dead end that falls back): greedy
    outputs, states and fallback counts are identical with the lazy check and the full mask,
    and the slow path ran (the plain loop's outputs differ)."""
    bpe, canon, tok, vocab = gemma
    v = bpe.vocab_size
    dfas = [compile_regex(r"[a-z ]{1,40}", vocab), compile_regex(r"(ab|a|b|llo|hello|l)+", vocab)]
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=v)
    logits = 3.0 * jax.random.normal(jax.random.key(3), (v,))
    logits = logits.at[tok.token_to_id("he")].set(50.0)  # the dead end: "he" then "llo"
    ids = [0, 1, -1, 0, 1, 0, -1, 0]
    runs = {}
    for name, sampler, canonical in (
        ("plain", aj.Greedy(), None),
        ("lazy", aj.Greedy(), canon),
        ("full", _FullGreedy(), canon),
    ):
        runs[name] = aj.generate(
            _toy_step(None), logits, jnp.ones((8, 1), jnp.int32), tables, ids, sampler=sampler,
            max_new_tokens=12, rng=jax.random.key(0), canonical=canonical,
        )  # fmt: skip
    lazy, full = runs["lazy"], runs["full"]
    for a, b in zip(jax.tree.leaves(lazy), jax.tree.leaves(full), strict=True):
        assert (np.asarray(a) == np.asarray(b)).all()
    assert int(lazy.canonical_fallbacks.sum()) >= 1
    assert (np.asarray(runs["plain"].tokens) != np.asarray(lazy.tokens)).any()


def test_lazy_generate_has_no_callbacks_and_no_retrace(gemma):
    from automata_jax import _generate
    from automata_jax.testing import host_callbacks, jaxpr_primitive_names

    bpe, canon, _, vocab = gemma
    v = bpe.vocab_size
    logits = jax.random.normal(jax.random.key(1), (v,))
    step = _toy_step(None)

    def run(tables, ids, sampler=None):
        sampler = aj.Temperature(1.0) if sampler is None else sampler
        return aj.generate(
            step, logits, jnp.ones((2, 1), jnp.int32), tables, ids, sampler=sampler,
            max_new_tokens=6, rng=jax.random.key(0), canonical=canon,
        )  # fmt: skip

    first = aj.ConstraintTables.from_dfas(compile_regex(r"[a-z]{1,9}", vocab), vocab_size=v)
    second = aj.ConstraintTables.from_dfas(compile_regex(r"[b-y ]{2,8}", vocab), vocab_size=v)
    assert jax.tree.map(jnp.shape, first) == jax.tree.map(jnp.shape, second)
    names = jaxpr_primitive_names(jax.make_jaxpr(lambda t: run(t, [0, 0]))(first))
    assert {"while", "cond"} <= names and not host_callbacks(names), names
    run(first, [0, 0])
    before = _generate._generate_jit._cache_size()
    out = run(second, [0, -1])
    assert _generate._generate_jit._cache_size() == before
    assert not out.states.error.any()


def test_fast_forward_outputs_reencode_to_themselves(gemma):
    """With fast_forward the forced runs are cut where their first token would merge with
    the token before (``"`` then a forced ``,``) and their last token is sampled: outputs
    without a fallback re-encode to themselves, forced runs still save model calls, and
    without the filter some output does not re-encode."""
    bpe, canon, tok, vocab = gemma
    v = bpe.vocab_size
    dfa = compile_regex(r'\{"name": "[a-z]{1,12}", "n": [0-9]{1,3}\}', vocab)
    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=v)
    logits = 3.0 * jax.random.normal(jax.random.key(5), (v,))
    logits = logits.at[tok.token_to_id('"')].add(6.0)  # often ends the name with a bare quote
    same = {}
    for canonical in (None, canon):
        out = aj.generate(
            _toy_step(None), logits, jnp.ones((8, 1), jnp.int32), tables, [0] * 8,
            sampler=aj.Temperature(1.0), max_new_tokens=40, rng=jax.random.key(0),
            fast_forward=True, canonical=canonical,
        )  # fmt: skip
        assert bool(out.accepted.all())
        rows = []
        for row in range(8):
            ids = [int(t) for t in out.tokens[row, : int(out.lengths[row])]]
            text = vocab.decode(ids).decode("utf-8")
            rows.append(tok.encode(text, add_special_tokens=False).ids == ids)
        same[canonical is None] = rows
        if canonical is not None:  # dead ends ('"' then only ","-tokens) fall back, counted
            clean = np.asarray(out.canonical_fallbacks) == 0
            assert clean.sum() >= 3, out.canonical_fallbacks
            assert all(r for r, c in zip(rows, clean, strict=True) if c), (rows, clean)
            assert (np.asarray(out.model_calls) < np.asarray(out.lengths)).all()
    assert not all(same[True])  # the unfiltered run is non-canonical: the filter matters
