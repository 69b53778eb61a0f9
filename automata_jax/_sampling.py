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

from automata_jax._errors import RuntimeDtypeError, RuntimeShapeError

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


_BLOCK = 512  # tokens per block of the two-level inverse-CDF draw
_LOW, _HIGH = -1e30, 1e30


def _scaled(logits: jax.Array, temperature: float) -> jax.Array:
    """float32 logits / temperature; NaN becomes a finite, hopeless logit and +inf a large one.

    -inf (a masked token) stays -inf. NaN can only sit at allowed positions (masking
    replaces the rest), so it stays allowed but loses to any real logit.
    """
    x = logits.astype(jnp.float32)
    if temperature != 1.0:
        x = x / jnp.float32(temperature)
    return jnp.where(jnp.isnan(x), jnp.float32(_LOW), jnp.minimum(x, jnp.float32(_HIGH)))


def _first(cond: jax.Array) -> jax.Array:
    """Index of the first True along the last axis; the axis length if none."""
    n = cond.shape[-1]
    return jnp.min(jnp.where(cond, jnp.arange(n, dtype=jnp.int32), n), axis=-1)


def _last(cond: jax.Array) -> jax.Array:
    """Index of the last True along the last axis; -1 if none."""
    n = cond.shape[-1]
    return jnp.max(jnp.where(cond, jnp.arange(n, dtype=jnp.int32), -1), axis=-1)


def _argmax(x: jax.Array) -> jax.Array:
    """First index of the row maximum (two vectorizable reductions; XLA's CPU argmax is not)."""
    return _first(x == jnp.max(x, axis=-1, keepdims=True))


def _categorical(rng: jax.Array, x: jax.Array) -> jax.Array:
    """Draws one index per row from ``softmax(x)`` (x: float32[B, V], from `_scaled`).

    A two-level inverse-CDF draw with one uniform per row: pick a block of `_BLOCK`
    tokens by its mass, then a token inside it. Far cheaper on CPU than Gumbel-max,
    which needs V random numbers per row. Only tokens with nonzero probability can be
    returned (a -inf token has exactly 0), whatever the rounding of the cumulative sums.
    """
    b, v = x.shape
    size = min(_BLOCK, v)
    blocks = -(-v // size)
    if blocks * size != v:
        x = jnp.pad(x, ((0, 0), (0, blocks * size - v)), constant_values=-jnp.inf)
    top = jnp.max(x, axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    p = jnp.exp(x - top).reshape(b, blocks, size)
    block_mass = jnp.sum(p, axis=-1)  # [B, G]
    cum = jnp.cumsum(block_mass, axis=-1)
    u = jax.random.uniform(rng, (b, 1), jnp.float32) * cum[:, -1:]
    blk = _first((cum > u) & (block_mass > 0))
    blk = jnp.where(blk < blocks, blk, _last(block_mass > 0))
    blk = jnp.maximum(blk, 0)
    u = u - jnp.take_along_axis(cum - block_mass, blk[:, None], axis=-1)
    pb = jnp.take_along_axis(p, blk[:, None, None], axis=1)[:, 0]  # [B, size]
    i = _first((jnp.cumsum(pb, axis=-1) > u) & (pb > 0))
    i = jnp.where(i < size, i, _last(pb > 0))
    return jnp.clip(blk * size + i, 0, v - 1).astype(jnp.int32)


def _nucleus_threshold(x: jax.Array, p: float, iterations: int = 32) -> jax.Array:
    """float32[B, 1]: a logit threshold whose kept set ``x >= threshold`` has mass >= p.

    Bisection (no sort): the largest threshold keeping mass >= p, to float precision.
    Tokens tied at the boundary are all kept.
    """
    top = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - top)
    need = jnp.float32(p) * jnp.sum(e, axis=-1, keepdims=True)

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        ok = jnp.sum(jnp.where(x >= mid, e, 0.0), axis=-1, keepdims=True) >= need
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    # mass(top - 200) is 1 up to e^-200 per token; mass above top is 0.
    lo, _ = jax.lax.fori_loop(0, iterations, body, (top - 200.0, top + 1.0))
    return jnp.minimum(lo, top)


class Sampler:
    """Base class: ``sampler(logits f32[B, V], rng) -> int32[B]``.

    ``rejection_exact`` (a class attribute): sampling under a smaller mask equals sampling
    under a larger one and conditioning on the smaller; then `generate(canonical=...)`
    may sample first and resample only rows whose token is not canonical (True for
    `Greedy` and `Temperature`; False, the safe default, makes it mask every step).
    """

    rejection_exact = False

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Greedy(Sampler):
    """The most likely token (first on ties); ignores ``rng``."""

    rejection_exact = True

    def __call__(self, logits: Float[Array, "B V"], rng: jax.Array) -> Int[Array, " B"]:
        _check_logits(logits)
        return _argmax(_scaled(logits, 1.0))


@dataclasses.dataclass(frozen=True)
class Temperature(Sampler):
    """Samples from ``softmax(logits / temperature)``."""

    rejection_exact = True

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
        choice = _categorical(rng, values)  # the masked among the top k keep probability 0
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
        if self.p < 1:
            # Only ever lowers logits: a masked token stays at -inf; the top token stays.
            x = jnp.where(x >= _nucleus_threshold(x, self.p), x, -jnp.inf)
        return _categorical(rng, x)


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
