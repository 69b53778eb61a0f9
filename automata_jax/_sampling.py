"""Samplers: frozen, hashable dataclasses mapping (masked) logits and a key to token ids.

Apply them AFTER `mask_logits`: disallowed tokens hold -inf, every sampler keeps
them at -inf (so their probability is exactly 0 at any temperature), and every
filter (top-k, top-p, min-p) keeps the most likely token, which is allowed
whenever any token is.
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import dataclasses
import math
import numbers

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from automata_jax._tables import RuntimeDtypeError, RuntimeShapeError

__all__ = ["Greedy", "MinP", "Sampler", "Temperature", "TopK", "TopP"]


def _check_logits(logits) -> None:
    dtype = getattr(logits, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise RuntimeDtypeError(f"logits: expected a floating-point array, got dtype {dtype}")
    if logits.ndim != 2:
        raise RuntimeShapeError(f"logits: expected shape [B, V], got {list(logits.shape)}")


def _check_temperature(t) -> None:
    if not (isinstance(t, numbers.Real) and math.isfinite(t) and t > 0):
        raise ValueError(f"temperature: expected a finite float > 0, got {t!r} (use Greedy())")


def _scaled(logits: jax.Array, temperature: float) -> jax.Array:
    x = logits.astype(jnp.float32)
    return x if temperature == 1.0 else x / jnp.float32(temperature)


def _categorical(rng: jax.Array, x: jax.Array) -> jax.Array:
    return jax.random.categorical(rng, x, axis=-1).astype(jnp.int32)


class Sampler:
    """Base class: ``sampler(logits f32[B, V], rng) -> int32[B]``."""

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Greedy(Sampler):
    """The most likely token (first on ties); ignores ``rng``."""

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        _check_logits(logits)
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class Temperature(Sampler):
    """Samples from ``softmax(logits / temperature)``."""

    temperature: float = 1.0

    def __post_init__(self):
        _check_temperature(self.temperature)

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        _check_logits(logits)
        return _categorical(rng, _scaled(logits, self.temperature))


@dataclasses.dataclass(frozen=True)
class TopK(Sampler):
    """Samples among the ``k`` most likely tokens (masked ones keep probability 0)."""

    k: int
    temperature: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.k, numbers.Integral) and self.k >= 1):
            raise ValueError(f"k: expected an int >= 1, got {self.k!r}")
        _check_temperature(self.temperature)

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        _check_logits(logits)
        k = min(int(self.k), logits.shape[-1])
        values, indices = jax.lax.top_k(_scaled(logits, self.temperature), k)
        choice = _categorical(rng, values)
        return jnp.take_along_axis(indices, choice[:, None], axis=-1)[:, 0].astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class TopP(Sampler):
    """Nucleus sampling: the smallest set of most likely tokens whose mass reaches ``p``."""

    p: float
    temperature: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.p, numbers.Real) and 0 < self.p <= 1):
            raise ValueError(f"p: expected a float in (0, 1], got {self.p!r}")
        _check_temperature(self.temperature)

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        _check_logits(logits)
        x = _scaled(logits, self.temperature)
        if self.p >= 1:
            return _categorical(rng, x)
        order = jnp.argsort(-x, axis=-1, stable=True)
        sorted_x = jnp.take_along_axis(x, order, axis=-1)
        probs = jax.nn.softmax(sorted_x, axis=-1)
        mass_before = jnp.cumsum(probs, axis=-1) - probs
        keep = mass_before < self.p
        keep = keep.at[:, 0].set(True)
        # Only ever lowers logits: a masked token stays at -inf.
        choice = _categorical(rng, jnp.where(keep, sorted_x, -jnp.inf))
        return jnp.take_along_axis(order, choice[:, None], axis=-1)[:, 0].astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class MinP(Sampler):
    """Samples among tokens whose probability is at least ``p`` times the largest one."""

    p: float
    temperature: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.p, numbers.Real) and 0 <= self.p <= 1):
            raise ValueError(f"p: expected a float in [0, 1], got {self.p!r}")
        _check_temperature(self.temperature)

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        _check_logits(logits)
        x = _scaled(logits, self.temperature)
        if self.p == 0:
            return _categorical(rng, x)
        top = jnp.max(x, axis=-1, keepdims=True)
        keep = x >= top + jnp.float32(math.log(self.p))  # the max itself always passes
        return _categorical(rng, jnp.where(keep, x, -jnp.inf))
