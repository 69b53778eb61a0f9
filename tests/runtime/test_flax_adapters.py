"""Flax models through `generate`: `nnx_step` (NNX, `nnx.Cache` variables) and `LinenStep`
(linen, a ``"cache"`` collection), each with a small KV-cache transformer written here.

Checked: constrained outputs fullmatch their regex; cached decoding gives the logits of a full
forward over the whole sequence (and an empty cache does not, so the cache is really read);
`generate` equals a greedy loop of full forwards; the jaxpr has no host callback; equal
adapters share one compilation; misuse raises `ModelError`.
"""

from __future__ import annotations

import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn
from flax import nnx

import automata_jax as aj
from automata_compile import Vocabulary, compile_regex
from automata_jax.models import ModelError
from automata_jax.testing import host_callbacks, jaxpr_primitive_names

# A small hand-made vocabulary: single characters, a few multi-character pieces, then EOS.
PIECES = [c.encode() for c in "abcdef-:0123456789 xy"] + [b"ab", b"cd", b"12", b"-1", b"ef"]
EOS = len(PIECES)
V = EOS + 1
PATTERNS = [r"[a-f]{2,6}-\d{1,3}", r"(ab|cd){1,3}:\d\d"]  # bounded: done in <= 12 tokens
D, H, F, LAYERS, MAX_POSITIONS = 16, 2, 32, 2, 64
K = D // H


@pytest.fixture(scope="module")
def vocab():
    return Vocabulary.from_bytes([*PIECES, None], eos_ids=[EOS])


@pytest.fixture(scope="module")
def tables(vocab):
    return aj.ConstraintTables.from_dfas([compile_regex(p, vocab) for p in PATTERNS], vocab_size=V)


def attend(qkv, input_mask, keys, values, valid, end):
    """Causal attention of ``T`` new slots over a KV cache, writing them at slot ``end``.

    Returns ``(out [B, T, D], keys, values, valid, end + T)``: the model's new cache."""
    b, t = input_mask.shape
    qkv = qkv.reshape(b, t, 3, H, K)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    zero = jnp.int32(0)
    keys = jax.lax.dynamic_update_slice(keys, k, (zero, end, zero, zero))
    values = jax.lax.dynamic_update_slice(values, v, (zero, end, zero, zero))
    valid = jax.lax.dynamic_update_slice(valid, input_mask, (zero, end))
    key_slot = jnp.arange(keys.shape[1])[None, :]
    query_slot = end + jnp.arange(t)[:, None]
    mask = valid[:, None, :] & (key_slot <= query_slot)[None]  # shape=[B, T, S]
    scores = jnp.einsum("bthk,bshk->bhts", q, keys) / math.sqrt(K)
    scores = jnp.where(mask[:, None], scores, -1e9)
    out = jnp.einsum("bhts,bshk->bthk", jax.nn.softmax(scores, axis=-1), values)
    return out.reshape(b, t, D), keys, values, valid, end + t


# -- NNX: the cache lives in nnx.Cache variables, created by init_cache ---------------------------


class NnxBlock(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(D, rngs=rngs)
        self.qkv = nnx.Linear(D, 3 * D, use_bias=False, rngs=rngs)
        self.out = nnx.Linear(D, D, use_bias=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(D, rngs=rngs)
        self.up = nnx.Linear(D, F, rngs=rngs)
        self.down = nnx.Linear(F, D, rngs=rngs)
        self.keys = nnx.data(None)
        self.values = nnx.data(None)
        self.valid = nnx.data(None)
        self.end = nnx.data(None)

    def init_cache(self, batch_size: int, max_length: int) -> None:
        self.keys = nnx.Cache(jnp.zeros((batch_size, max_length, H, K)))
        self.values = nnx.Cache(jnp.zeros((batch_size, max_length, H, K)))
        self.valid = nnx.Cache(jnp.zeros((batch_size, max_length), bool))
        self.end = nnx.Cache(jnp.zeros((), jnp.int32))

    def __call__(self, x, input_mask):
        cache = (self.keys[...], self.values[...], self.valid[...], self.end[...])
        out, *cache = attend(self.qkv(self.norm1(x)), input_mask, *cache)
        self.keys[...], self.values[...], self.valid[...], self.end[...] = cache
        x = x + self.out(out)
        return x + self.down(nnx.gelu(self.up(self.norm2(x))))


class NnxLM(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.embed = nnx.Embed(V, D, rngs=rngs)
        self.position = nnx.Embed(MAX_POSITIONS, D, rngs=rngs)
        self.blocks = nnx.List([NnxBlock(rngs) for _ in range(LAYERS)])
        self.norm = nnx.LayerNorm(D, rngs=rngs)

    def init_cache(self, batch_size: int, max_length: int) -> None:
        for block in self.blocks:
            block.init_cache(batch_size, max_length)

    def __call__(self, tokens, positions, input_mask):
        x = self.embed(tokens) + self.position(jnp.clip(positions, 0, MAX_POSITIONS - 1))
        for block in self.blocks:
            x = block(x, input_mask)
        return self.embed.attend(self.norm(x))


# -- linen: the cache is the "cache" collection, created on the first call -----------------------


class LinenBlock(nn.Module):
    @nn.compact
    def __call__(self, x, input_mask):
        b, t, _ = x.shape
        qkv = nn.Dense(3 * D, use_bias=False)(nn.LayerNorm()(x))
        initialized = self.has_variable("cache", "keys")  # False inside module.init
        keys = self.variable("cache", "keys", jnp.zeros, (b, t, H, K))
        values = self.variable("cache", "values", jnp.zeros, (b, t, H, K))
        valid = self.variable("cache", "valid", jnp.zeros, (b, t), bool)
        end = self.variable("cache", "end", lambda: jnp.zeros((), jnp.int32))
        out, *cache = attend(qkv, input_mask, keys.value, values.value, valid.value, end.value)
        if initialized:
            keys.value, values.value, valid.value, end.value = cache
        x = x + nn.Dense(D, use_bias=False)(out)
        return x + nn.Dense(D)(nn.gelu(nn.Dense(F)(nn.LayerNorm()(x))))


class LinenLM(nn.Module):
    @nn.compact
    def __call__(self, tokens, positions, input_mask):
        embed = nn.Embed(V, D)
        x = embed(tokens) + nn.Embed(MAX_POSITIONS, D)(jnp.clip(positions, 0, MAX_POSITIONS - 1))
        for _ in range(LAYERS):
            x = LinenBlock()(x, input_mask)
        return embed.attend(nn.LayerNorm()(x))


def make(kind: str):
    """``(step, params)`` of a fresh model of that kind (fixed seed)."""
    if kind == "nnx":
        return aj.nnx_step(NnxLM(nnx.Rngs(0)))
    step = aj.LinenStep(LinenLM())
    ones = jnp.ones((1, 2), jnp.int32)
    params = step.module.init(jax.random.key(0), ones, ones, ones.astype(bool))["params"]
    return step, params


KINDS = ["nnx", "linen"]
PROMPTS = [[1, 2, 3, 4, 5], [6, 7], [8, 9, 10]]


def run(step, params, tables, ids, seed, *, sampler=None, max_new_tokens=16):
    tokens, mask = aj.pad_prompts(PROMPTS[: len(ids)])
    return aj.generate(
        step, params, tokens, tables, ids, prompt_mask=mask, cache=step.init_cache,
        sampler=sampler or aj.Temperature(1.5), max_new_tokens=max_new_tokens,
        rng=jax.random.key(seed), pad_id=EOS,
    )  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_constrained_outputs_fullmatch(kind, vocab, tables):
    step, params = make(kind)
    ids = [0, 1, 0]
    texts = set()
    for seed in range(3):
        out = run(step, params, tables, ids, seed)
        assert np.asarray(out.accepted).all(), (kind, seed, out.tokens)
        for row, cid in enumerate(ids):
            n = int(out.lengths[row])
            text = vocab.decode(np.asarray(out.tokens[row, :n])).decode()
            assert re.fullmatch(PATTERNS[cid], text), (kind, seed, row, text)
            assert int(out.tokens[row, n]) == EOS
            texts.add(text)
    assert len(texts) > 3  # the seeds matter: the model really samples


@pytest.mark.parametrize("kind", KINDS)
def test_cached_decoding_matches_a_full_forward(kind):
    step, params = make(kind)
    call = jax.jit(step)
    tokens, mask = (jnp.asarray(a) for a in aj.pad_prompts(PROMPTS[:2]))
    positions = jnp.maximum(jnp.cumsum(mask, axis=1) - 1, 0)
    steps = 4
    extra = jnp.asarray(np.random.default_rng(1).integers(0, V, (2, steps)), jnp.int32)
    length = tokens.shape[1] + steps
    _, cache = call(params, tokens, positions, mask, step.init_cache(2, length))
    for i in range(steps):
        token, position = extra[:, i : i + 1], positions[:, -1:] + 1 + i
        logits, cache = call(params, token, position, jnp.ones((2, 1), bool), cache)
        seq = jnp.concatenate([tokens, extra[:, : i + 1]], axis=1)
        seq_mask = jnp.concatenate([mask, jnp.ones((2, i + 1), bool)], axis=1)
        seq_positions = jnp.maximum(jnp.cumsum(seq_mask, axis=1) - 1, 0)
        full, _ = call(params, seq, seq_positions, seq_mask, step.init_cache(2, seq.shape[1]))
        np.testing.assert_allclose(logits[:, 0], full[:, -1], rtol=1e-5, atol=1e-5)
        # Control: the same step on an empty cache sees only its own token.
        alone, _ = call(params, token, position, jnp.ones((2, 1), bool), step.init_cache(2, 8))
        assert not np.allclose(alone[:, 0], full[:, -1], atol=1e-3)


@pytest.mark.parametrize("kind", KINDS)
def test_generate_equals_a_greedy_loop_of_full_forwards(kind, tables):
    step, params = make(kind)
    n = 6
    out = run(step, params, tables, [-1, -1], 0, sampler=aj.Greedy(), max_new_tokens=n)
    tokens, mask = aj.pad_prompts(PROMPTS[:2])
    t = tokens.shape[1]
    # One fixed-length buffer, the not-yet-generated tail masked off: causal attention makes
    # those slots invisible to the last real one.
    seq = np.concatenate([tokens, np.zeros((2, n), np.int32)], axis=1)
    seq_mask = np.concatenate([mask, np.zeros((2, n), bool)], axis=1)
    forward = jax.jit(lambda p, s, m: step(p, s, jnp.maximum(jnp.cumsum(m, 1) - 1, 0), m,
                                           step.init_cache(2, t + n))[0])  # fmt: skip
    expected = np.full((2, n), EOS, np.int32)
    done = np.zeros(2, bool)
    for i in range(n):
        logits = np.asarray(forward(params, seq, seq_mask))[:, t + i - 1]
        nxt = np.where(done, EOS, logits.argmax(-1))
        expected[:, i] = nxt
        done |= nxt == EOS
        seq[:, t + i], seq_mask[:, t + i] = nxt, True
    np.testing.assert_array_equal(np.asarray(out.tokens), expected)


@dataclasses.dataclass(frozen=True)
class WithCallback:
    """A step that calls back to the host: the control of the jaxpr check."""

    step: object

    def __call__(self, *args):
        jax.debug.callback(lambda: None)
        return self.step(*args)


@pytest.mark.parametrize("kind", KINDS)
def test_jaxpr_has_no_host_callbacks(kind, tables):
    step, params = make(kind)

    def names(step_fn):
        def fn(params, rng):
            tokens, mask = aj.pad_prompts(PROMPTS[:2])
            return aj.generate(step_fn, params, tokens, tables, jnp.array([0, 1]),
                               prompt_mask=mask, cache=step.init_cache, sampler=aj.TopP(0.9),
                               max_new_tokens=8, rng=rng, pad_id=EOS)  # fmt: skip

        return jaxpr_primitive_names(jax.make_jaxpr(fn)(params, jax.random.key(0)))

    found = names(step)
    assert "while" in found and "dot_general" in found  # the walker sees the loop and the model
    assert not host_callbacks(found), found
    assert host_callbacks(names(WithCallback(step)))  # the check can fail


def counting_call(module, tokens, positions, input_mask):
    counting_call.traces += 1
    return module(tokens, positions, input_mask)


counting_call.traces = 0


def test_equal_adapters_share_one_compilation(tables):
    model = NnxLM(nnx.Rngs(0))
    first, params = aj.nnx_step(model, call=counting_call)
    second, _ = aj.nnx_step(model, call=counting_call)
    assert first == second and hash(first) == hash(second)
    assert aj.LinenStep(LinenLM()) == aj.LinenStep(LinenLM())
    counting_call.traces = 0
    run(first, params, tables, [0, 1], 0, max_new_tokens=4)
    run(second, params, tables, [1, 0], 1, max_new_tokens=4)
    assert counting_call.traces == 2  # one trace: the prefill and the loop body


def test_nnx_params_exclude_the_cache_and_leave_the_model_alone():
    model = NnxLM(nnx.Rngs(0))
    step, params = aj.nnx_step(model)
    assert not jax.tree.leaves(nnx.state(model, nnx.Cache))  # no cache added to the model
    assert not jax.tree.leaves(nnx.state(params, nnx.Cache))
    cache = step.init_cache(3, 7)
    shapes = {leaf.shape for leaf in jax.tree.leaves(cache)}
    assert shapes == {(3, 7, H, K), (3, 7), ()}


class NoCacheMethod(nnx.Module):
    def __init__(self):
        self.w = nnx.Param(jnp.zeros((V, V)))

    def __call__(self, tokens, positions, input_mask):
        return self.w[...][tokens]


class NoCacheLinen(nn.Module):
    @nn.compact
    def __call__(self, tokens, positions, input_mask):
        return nn.Embed(V, V)(tokens)


def test_misuse_raises_model_error():
    with pytest.raises(ModelError, match="expected a flax.nnx.Module, got LinenLM"):
        aj.nnx_step(LinenLM())
    with pytest.raises(ModelError, match="NoCacheMethod has no init_cache"):
        aj.nnx_step(NoCacheMethod())
    with pytest.raises(ModelError, match="expected a flax.linen.Module, got NnxLM"):
        aj.LinenStep(NnxLM(nnx.Rngs(0)))
    with pytest.raises(ModelError, match="NoCacheLinen created no 'cache' variables"):
        aj.LinenStep(NoCacheLinen()).init_cache(1, 4)


class NnxLMWithLogitsAt(NnxLM):
    """NnxLM whose ``__call__`` takes ``logits_at`` (records the calls that got it)."""

    seen: list = []

    def __call__(self, tokens, positions, input_mask, logits_at=None):
        logits = super().__call__(tokens, positions, input_mask)
        if logits_at is None:
            return logits
        NnxLMWithLogitsAt.seen.append(tokens.shape)
        return jnp.take_along_axis(logits, logits_at[:, None, None], axis=1)


@pytest.mark.parametrize("kind", KINDS)
def test_adapters_take_logits_at(kind, tables):
    """`generate` hands the adapters ``logits_at`` for the prefill: an NNX module whose call
    takes it gets it; otherwise the adapter picks the slot. Same tokens either way."""
    step, params = make(kind)
    for at in ([4, 1, 2], [0, 0, 0]):
        tokens, mask = aj.pad_prompts(PROMPTS)
        pos = jnp.maximum(jnp.cumsum(mask, 1) - 1, 0)
        full, _ = step(params, tokens, pos, mask, step.init_cache(3, tokens.shape[1]))
        some, _ = step(
            params, tokens, pos, mask, step.init_cache(3, tokens.shape[1]), logits_at=jnp.array(at)
        )
        assert some.shape == (3, 1, V)
        np.testing.assert_allclose(some[:, 0], full[np.arange(3), at], rtol=1e-6, atol=1e-6)
    if kind == "nnx":
        NnxLMWithLogitsAt.seen.clear()
        step2, params2 = aj.nnx_step(NnxLMWithLogitsAt(nnx.Rngs(0)))
        a = run(step, params, tables, [0, 1, -1], 0, sampler=aj.Greedy())
        b = run(step2, params2, tables, [0, 1, -1], 0, sampler=aj.Greedy())
        np.testing.assert_array_equal(a.tokens, b.tokens)
        assert NnxLMWithLogitsAt.seen and NnxLMWithLogitsAt.seen[0][1] == 5  # the prefill
