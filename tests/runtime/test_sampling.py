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
    Temperature(1.0),
    Temperature(0.05),
    Temperature(100.0),
    TopK(1),
    TopK(5, 2.0),
    TopK(1000, 50.0),
    TopP(0.9),
    TopP(1.0, 10.0),
    TopP(1e-6),
    TopP(0.999999, 1e4),
    MinP(0.1),
    MinP(0.0, 100.0),
    MinP(1.0),
]


def masked_logits(rng, batch, allowed_per_row):
    """Random logits where the disallowed tokens were the most likely before masking."""
    logits = rng.normal(size=(batch, V)).astype(np.float32)
    allowed = np.zeros((batch, V), bool)
    for b in range(batch):
        allowed[b, rng.choice(V, size=allowed_per_row[b], replace=False)] = True
    logits = np.where(allowed, logits, logits + 50.0)  # disallowed ones look best
    return jnp.where(allowed, logits, -jnp.inf), allowed


@pytest.mark.parametrize("sampler", SAMPLERS, ids=repr)
def test_never_samples_a_masked_token(sampler):
    rng = np.random.default_rng(0)
    batch = 32
    logits, allowed = masked_logits(rng, batch, rng.integers(1, 6, batch))
    fn = jax.jit(lambda x, key: jax.vmap(lambda k: sampler(x, k))(jax.random.split(key, 64)))
    tokens = np.asarray(fn(logits, jax.random.key(1)))  # [64 draws, B]
    assert tokens.dtype == np.int32
    assert allowed[np.arange(batch)[None, :], tokens].all()


@pytest.mark.parametrize("sampler", SAMPLERS, ids=repr)
def test_single_allowed_token_is_always_chosen(sampler):
    logits = jnp.full((4, V), -jnp.inf).at[jnp.arange(4), jnp.array([0, 7, 63, 5])].set(-30.0)
    for seed in range(3):
        tokens = sampler(logits, jax.random.key(seed))
        assert np.asarray(tokens).tolist() == [0, 7, 63, 5]


def test_greedy_is_argmax_first_on_ties():
    logits = jnp.array([[0.0, 2.0, 2.0, -jnp.inf], [-jnp.inf, -jnp.inf, 1.0, 0.0]])
    assert np.asarray(Greedy()(logits, jax.random.key(0))).tolist() == [1, 2]


def test_filters_restrict_the_support():
    logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05]]))
    logits = jnp.tile(logits, (2000, 1))
    key = jax.random.key(3)
    assert set(np.asarray(TopK(2)(logits, key)).tolist()) == {0, 1}
    assert set(np.asarray(TopP(0.7)(logits, key)).tolist()) == {0, 1}  # 0.5 + 0.3 reaches 0.7
    assert set(np.asarray(TopP(0.5)(logits, key)).tolist()) == {0}
    assert set(np.asarray(MinP(0.25)(logits, key)).tolist()) == {0, 1, 2}  # >= 0.125
    assert set(np.asarray(Temperature(1.0)(logits, key)).tolist()) == {0, 1, 2, 3}


def test_temperature_one_follows_the_distribution():
    probs = np.array([0.5, 0.3, 0.15, 0.05, 0.0])
    with np.errstate(divide="ignore"):
        logits = jnp.tile(jnp.log(jnp.asarray(probs, jnp.float32)), (20000, 1))
    tokens = np.asarray(Temperature(1.0)(logits, jax.random.key(0)))
    freq = np.bincount(tokens, minlength=5) / tokens.size
    np.testing.assert_allclose(freq, probs, atol=0.015)


def test_low_precision_logits():
    logits = jnp.full((3, V), -jnp.inf, jnp.bfloat16).at[:, 9].set(1.0).at[:, 10].set(0.5)
    for sampler in (Greedy(), Temperature(0.7), TopK(3), TopP(0.8), MinP(0.05)):
        tokens = np.asarray(sampler(logits, jax.random.key(0)))
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
