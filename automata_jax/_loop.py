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
import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from jaxtyping import Array, Bool, Float, Int

__all__ = [
    "LoopConfig",
    "LoopInputs",
    "LoopStart",
    "branch_free",
    "cache_room",
    "defers_cache_write",
    "switch_calls",
    "write_cache",
]


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
      backend: the platform the loop is compiled for (``jax.default_backend()``, which
        `generate` passes; None: read at trace time); it picks static choices that cost
        differently on a host and on an accelerator (`branch_free`).
    """

    step_fn: Any
    sampler: Any
    capacity: int
    init_cache: Any = None
    data_sharding: Any = None
    fast_forward: Any = None
    speculate: Any = None
    lead: int = 0
    backend: str | None = None

    @property
    def branch_free(self) -> bool:
        """`branch_free` for this loop's backend."""
        return branch_free(self.backend)

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


ACCELERATORS = ("gpu", "cuda", "rocm", "tpu")
"""The backends on which the loops avoid branches (`branch_free`)."""


def branch_free(backend: str | None = None) -> bool:
    """Whether the loops compiled for ``backend`` (default: ``jax.default_backend()``) avoid
    conditionals: True on an accelerator (GPU, TPU), False on the CPU.

    On XLA:GPU a ``lax.cond``/``lax.switch`` (and each trip of a ``while_loop``) reads its
    predicate back to the host before it launches the branch, so an accelerator computes
    both sides of a cheap choice and selects (``jnp.where``), and writes the cache *inside*
    the width switch's branches (measured on an H200: a one-token call in a while loop's
    switch 0.89x, a 5-wide call with 5 logit slots 0.84x of the same call written after
    the switch). On the CPU, XLA copies a cache that a branch writes, and skipping a
    branch's work saves it, so there the loops keep their conditionals and write the
    cache after the switch (`defers_cache_write`)."""
    backend = jax.default_backend() if backend is None else backend
    return backend.lower() in ACCELERATORS


def cache_room(cache, cache_length) -> Int[Array, ""]:
    """Cache slots left for the chunked loops' width choice (2**30 without a cache, or
    without a known length)."""
    if cache is None or cache_length is None:
        return jnp.int32(2**30)
    return cache_length - cache.end_index


DEFERS_CACHE_WRITE = "defers_cache_write"
"""The attribute a step function declares ``write_cache=False`` with (`defers_cache_write`)."""


def defers_cache_write(step_fn, cache, backend: str | None = "cpu") -> bool:
    """Whether the chunked loops call ``step_fn(..., write_cache=False)``: where the step
    declares it can, and not on an accelerator (`branch_free` of ``backend``; None: the
    default backend), where the step writes the cache inside the branches.

    Such a step only reads the cache and returns, in its place, the update: a pytree of
    the cache's structure whose leaves of rank >= 2 hold the ``T`` new slots on axis 1
    (the cache's leaves of rank >= 2 have their slots on axis 1), and whose other leaves
    (``end_index``) replace the cache's, as `automata_jax.models.gemma3.apply_step` does.
    The loops then write the update after their ``lax.switch`` over call widths
    (`switch_calls`): XLA copies a cache that a branch writes (every layer's keys and
    values, each call), while one written after the switch is updated in place.

    A declared capability: ``step_fn.defers_cache_write = True`` (a function's attribute,
    which a bound method reads from its function, or a callable object's class attribute;
    for a `functools.partial`, its function's). Undeclared: False (the step writes).
    """
    if cache is None or branch_free(backend):
        return False
    target = step_fn
    while True:
        declared = getattr(target, DEFERS_CACHE_WRITE, None)
        if declared is not None:
            return bool(declared)
        if not isinstance(target, functools.partial):
            return False
        target = target.func


def write_cache(cache, update, start: Int[Array, ""], count: Int[Array, ""]):
    """``cache`` with the first ``count`` slots of ``update`` (see `defers_cache_write`)
    written at slots ``[start, start + count)`` (past the cache's end: dropped), and the
    update's other leaves."""

    def write(old, new):
        if old.ndim < 2:
            return new
        at = jnp.arange(new.shape[1], dtype=jnp.int32)
        idx = jnp.where(at < count, start + at, old.shape[1])
        return old.at[:, idx].set(new.astype(old.dtype), mode="drop")

    return jax.tree.map(write, cache, update)


def switch_calls(
    choice: Int[Array, ""],
    branches: Sequence[Callable],
    widths: Sequence[int],
    cache,
    deferred: bool,
):
    """``branches[choice](cache) -> (out, cache)``: model calls of ``widths[choice]`` slots,
    in a ``lax.switch`` (one branch: called as is). With ``deferred`` (`defers_cache_write`),
    each branch calls its step with ``write_cache=False`` and returns the update instead of
    the cache; it is padded to the widest width, returned from the switch and written
    after it (`write_cache`), so the cache is updated in place."""
    if not deferred:
        return branches[0](cache) if len(branches) == 1 else jax.lax.switch(choice, branches, cache)
    w_max = max(widths)

    def padded(branch):
        def run(cache):
            out, update = branch(cache)

            def pad(old, new):
                if old.ndim < 2:
                    return new
                widths = [(0, 0)] * new.ndim
                widths[1] = (0, w_max - new.shape[1])
                return jnp.pad(new, widths)

            return out, jax.tree.map(pad, cache, update)

        return run

    fns = [padded(branch) for branch in branches]
    out, update = fns[0](cache) if len(fns) == 1 else jax.lax.switch(choice, fns, cache)
    width = jnp.asarray(widths, jnp.int32)[choice]
    return out, write_cache(cache, update, cache.end_index, width)
