"""What the decode loops share: the static configuration of one `generate` call
(`LoopConfig`), its traced inputs (`LoopInputs`), the prefill's result that the chunked
loops (fast-forward, speculative) start from (`LoopStart`), and the batch-sharding
constraint (`LoopConfig.on_batch`), written once.

These replace the loops' long positional and keyword parameter lists (gemma's sampler does
the same with ``SamplingState`` and ``SamplerLoop``).
"""

# ruff: noqa: F722 (jaxtyping shape strings are not Python expressions)

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from jaxtyping import Array, Bool, Float, Int

__all__ = ["LoopConfig", "LoopInputs", "LoopStart", "cache_room"]


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """The static part of one `generate` call (hashable: the jitted loop's static argument).

    Attributes:
      step_fn: the model step ``(params, tokens, positions, mask, cache) -> (logits, cache)``.
      sampler: a `Sampler`.
      capacity: the token buffer's length (>= max_new_tokens).
      init_cache: ``(batch, length) -> cache``, or None when the caller passed a cache.
      data_sharding: the batch sharding to keep per-row arrays on, or None.
      fast_forward: the resolved `FastForward` policy, or None (off).
      speculate: the resolved `Speculate` policy, or None (off).
      lead: F, the width of the start's forced runs fed with the prompt in the prefill
        (`automata_jax._fast_forward.lead_run`), or 0 (not fed).
    """

    step_fn: Any
    sampler: Any
    capacity: int
    init_cache: Any = None
    data_sharding: Any = None
    fast_forward: Any = None
    speculate: Any = None
    lead: int = 0

    def on_batch(self, tree):
        """``tree`` constrained to the batch sharding (unchanged without one)."""
        if self.data_sharding is None:
            return tree
        sharding = self.data_sharding
        return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, sharding), tree)


@struct.dataclass(kw_only=True)
class LoopInputs:
    """The traced arguments of one `generate` call (see `generate` for each)."""

    params: Any
    prompt_tokens: Int[Array, "B T"]
    prompt_mask: Bool[Array, "B T"]
    tables: Any  # ConstraintTables
    constraint_ids: Int[Array, " B"]
    max_new_tokens: Int[Array, ""]
    rng: Any
    cache: Any  # None when LoopConfig.init_cache builds it
    pad_id: Int[Array, ""]
    healing: Any = None  # TokenHealing or None
    draft_keys: Any = None  # int32[B, T] or [B, T, 1 + R] or None: alternate spellings for drafts
    canonical: Any = None  # CanonicalTables or None


@struct.dataclass(kw_only=True)
class LoopStart:
    """Where the chunked loops (fast-forward, speculative) start: the prefill's result (with
    ``lead_tokens``/``lead_len``: the start's forced run, fed in the prefill, which the loops
    write to the output first)."""

    params: Any
    tables: Any  # ConstraintTables
    state: Any  # ConstraintState
    logits: Float[Array, "B V"]  # the last prompt position's (or the healed token's) logits
    cache: Any
    next_position: Int[Array, " B"]
    num_steps: Int[Array, ""]
    rng: Any
    pad_id: Int[Array, ""]
    lead_tokens: Int[Array, "B F"] | None = None  # the start's forced run, fed in the prefill
    lead_len: Int[Array, " B"] | None = None  # its length per row (0: none)


def cache_room(cache, cache_length) -> Int[Array, ""]:
    """Cache slots left for the chunked loops' width choice (2**30 without a cache, or
    without a known length)."""
    if cache is None or cache_length is None:
        return jnp.int32(2**30)
    return cache_length - cache.end_index
