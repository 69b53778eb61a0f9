"""Samplers: never a masked token, at any temperature; filters keep an allowed token."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from automata_jax import Greedy, MinP, RuntimeDtypeError, RuntimeShapeError, Temperature, TopK, TopP

V = 64
SAMPLERS = [
    Greedy(),
    Temperature(1.0),
    Temperature(0.05),
    Temperature(100.0),
    TopK(1),
    TopK(5, 2.0),
    TopK(1000, 50.0),
    TopP(0.9),
    TopP(1e-6),
    TopP(0.999999, 1e4),
    MinP(0.1),
    MinP(1.0),
]


def hard_logits(rng, batch):
    """Rows whose disallowed tokens looked best before masking, one-token rows, NaN/inf rows.

    Returns the masked logits and, per row, the set of tokens a sampler may return.
    """
    logits = rng.normal(size=(batch, V)).astype(np.float32)
    allowed = np.zeros((batch, V), bool)
    for b in range(batch):
        allowed[b, rng.choice(V, size=rng.integers(1, 6), replace=False)] = True
    logits = np.where(allowed, logits, logits + 50.0)  # disallowed ones look best
    logits = np.where(allowed, logits, -np.inf)
    extra = np.full((8, V), -np.inf, np.float32)
    extra[0, 0] = extra[1, 63] = -30.0  # a single allowed token
    extra[2, 7] = 80.0
    extra[3, 5] = 0.0
    extra[4, [3, 4]] = np.nan  # every allowed logit NaN: either is fine
    extra[5, [5, 6]] = [np.nan, 1.0]  # NaN loses to a real logit
    extra[6, [7, 8]] = [np.inf, 1.0]  # +inf wins
    extra[7, 9] = np.inf
    sets = [set(np.flatnonzero(a)) for a in allowed]
    sets += [{0}, {63}, {7}, {5}, {3, 4}, {6}, {7}, {9}]
    return jnp.asarray(np.concatenate([logits, extra])), sets


@pytest.mark.parametrize("sampler", SAMPLERS, ids=repr)
def test_never_samples_a_masked_token(sampler):
    logits, sets = hard_logits(np.random.default_rng(0), 32)
    draws = jax.jit(lambda x, key: jax.vmap(lambda k: sampler(x, k))(jax.random.split(key, 48)))
    tokens = np.asarray(draws(logits, jax.random.key(1)))  # [48 draws, B]
    assert tokens.dtype == np.int32
    for b, allowed in enumerate(sets):
        assert set(tokens[:, b].tolist()) <= allowed, (b, allowed, set(tokens[:, b].tolist()))


def test_greedy_is_argmax_first_on_ties():
    logits = jnp.array([[0.0, 2.0, 2.0, -jnp.inf], [-jnp.inf, -jnp.inf, 1.0, 0.0]])
    assert np.asarray(Greedy()(logits, jax.random.key(0))).tolist() == [1, 2]


def test_filters_restrict_the_support():
    logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
    logits = jnp.tile(logits, (2000, 1))
    key = jax.random.key(3)
    assert set(np.asarray(TopK(2)(logits, key)).tolist()) == {0, 1}
    assert set(np.asarray(TopP(0.7)(logits, key)).tolist()) == {0, 1}  # 0.5 + 0.3 reaches 0.7
    assert set(np.asarray(TopP(0.45)(logits, key)).tolist()) == {0}
    assert set(np.asarray(MinP(0.25)(logits, key)).tolist()) == {0, 1, 2}  # >= 0.125
    assert set(np.asarray(Temperature(1.0)(logits, key)).tolist()) == {0, 1, 2, 3}


def test_temperature_one_follows_the_distribution():
    probs = np.array([0.5, 0.3, 0.15, 0.05, 0.0])
    with np.errstate(divide="ignore"):
        logits = jnp.tile(jnp.log(jnp.asarray(probs, jnp.float32)), (20000, 1))
    tokens = np.asarray(Temperature(1.0)(logits, jax.random.key(0)))
    freq = np.bincount(tokens, minlength=5) / tokens.size
    np.testing.assert_allclose(freq, probs, atol=0.015)


@pytest.mark.parametrize("sampler", [Temperature(1.0), TopP(0.9), MinP(0.001)], ids=repr)
def test_distribution_across_blocks_of_a_wide_vocabulary(sampler):
    # 3000 tokens (6 blocks of 512 in the two-level draw), mass spread over all blocks.
    probs = np.zeros(3000)
    probs[[3, 600, 1100, 1700, 2999]] = [0.3, 0.25, 0.2, 0.15, 0.1]
    probs[2000:2010] = 0.001  # outside the 0.9 nucleus, above min-p 0.001
    probs /= probs.sum()
    with np.errstate(divide="ignore"):
        logits = jnp.tile(jnp.log(jnp.asarray(probs, jnp.float32)), (4000, 1))
    tokens = np.asarray(jax.jit(sampler.__call__)(logits, jax.random.key(5)))
    assert probs[tokens].min() > 0
    expected = probs.copy()
    if isinstance(sampler, TopP):
        expected[expected < 0.05] = 0  # the nucleus of mass 0.9 is the five big tokens
    expected /= expected.sum()
    freq = np.bincount(tokens, minlength=3000) / tokens.size
    np.testing.assert_allclose(freq, expected, atol=0.025)


def test_low_precision_logits():
    logits = jnp.full((3, V), -jnp.inf, jnp.bfloat16).at[:, 9].set(1.0).at[:, 10].set(0.5)
    for sampler in (Greedy(), TopP(0.8), MinP(0.05)):
        tokens = np.asarray(jax.jit(sampler.__call__)(logits, jax.random.key(0)))
        assert set(tokens.tolist()) <= {9, 10}


def test_samplers_are_frozen_and_hashable():
    for sampler in (Greedy(), *SAMPLERS):
        hash(sampler)
        assert sampler == dataclasses.replace(sampler)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TopK(3).k = 4


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Temperature(0.0), "temperature: expected a finite float > 0, got 0.0"),
        (lambda: Temperature(float("nan")), "temperature: expected a finite float > 0"),
        (lambda: TopK(0), "k: expected an int >= 1, got 0"),
        (lambda: TopK(2.5), "k: expected an int >= 1"),
        (lambda: TopP(0.0), r"p: expected a float in \(0, 1\]"),
        (lambda: TopP(1.5), r"p: expected a float in \(0, 1\]"),
        (lambda: MinP(-0.1), r"p: expected a float in \[0, 1\]"),
        (lambda: TopP(0.5, temperature=-1.0), "temperature"),
    ],
)
def test_bad_parameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_logits():
    with pytest.raises(RuntimeDtypeError, match="expected a floating-point array, got dtype int32"):
        Greedy()(jnp.zeros((2, 3), jnp.int32), jax.random.key(0))
    with pytest.raises(RuntimeShapeError, match=r"expected shape \[B, V\], got \[3\]"):
        Temperature()(jnp.zeros((3,)), jax.random.key(0))
