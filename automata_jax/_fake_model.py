"""A fake model with the `automata_jax.models` contract, for tests and examples (no weights).

Its logits are pseudo-random but depend on the whole unpadded history, carried one token at a
time in the cache, so a chunk of tokens gives exactly what the same tokens fed singly give:
what the loop tests (plain, sharded, fast-forward) need to compare against a reference walk.
The running hash after every slot is kept, and a call starts from the hash of the row's
last valid slot, so clearing slots' ``valid`` bits rewinds the cache as it rewinds a KV
cache (speculative decoding drops rejected drafts that way).
Exposed as `automata_jax.testing.FakeModel`.
"""

# ruff: noqa: F722 (jaxtyping shape strings)

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct
from jaxtyping import Array, Bool, Float, Int


@struct.dataclass(kw_only=True)
class FakeCache:
    """The fake model's cache: the running hash after each slot, and the slots' valid bits."""

    h: Float[Array, "B S D"]
    valid: Bool[Array, "B S"]
    end_index: Int[Array, ""]


@dataclasses.dataclass(frozen=True)
class FakeModel:
    """Pseudo-random logits over ``vocab_size`` ids that depend on the whole history."""

    vocab_size: int
    width: int = 16
    scale: float = 3.0

    def init_params(self, seed: int = 0) -> dict[str, jax.Array]:
        k1, k2 = jax.random.split(jax.random.key(seed))
        return {
            "embed": jax.random.normal(k1, (self.vocab_size, self.width)),
            "out": jax.random.normal(k2, (self.width, self.vocab_size)),
        }

    def init_cache(self, batch_size: int, max_length: int) -> FakeCache:
        return FakeCache(
            h=jnp.zeros((batch_size, max_length, self.width)),
            valid=jnp.zeros((batch_size, max_length), bool),
            end_index=jnp.zeros((), jnp.int32),
        )

    def apply_step(self, params, tokens, positions, input_mask, cache: FakeCache):
        """The `step_fn` contract: int32[B, T] tokens and positions, bool[B, T] mask."""

        def one(h, x):
            tok, pos, m = x
            new = jnp.tanh(0.7 * h + params["embed"][tok] + 0.1 * jnp.sin(pos)[:, None])
            h = jnp.where(m[:, None], new, h)
            return h, (h, h @ params["out"] * self.scale)

        slots = jnp.arange(cache.valid.shape[1])
        last = jnp.max(jnp.where(cache.valid, slots, -1), axis=1)  # the last valid slot
        h0 = jnp.take_along_axis(cache.h, jnp.maximum(last, 0)[:, None, None], axis=1)[:, 0]
        h0 = jnp.where((last >= 0)[:, None], h0, 0.0)
        _, (hs, logits) = jax.lax.scan(one, h0, (tokens.T, positions.T, input_mask.T))
        start = (0, cache.end_index, 0)
        h = jax.lax.dynamic_update_slice(cache.h, jnp.swapaxes(hs, 0, 1), start)
        valid = jax.lax.dynamic_update_slice(cache.valid, input_mask, (0, cache.end_index))
        cache = FakeCache(h=h, valid=valid, end_index=cache.end_index + tokens.shape[1])
        return jnp.swapaxes(logits, 0, 1), cache
