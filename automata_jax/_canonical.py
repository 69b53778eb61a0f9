"""Canonical-only decoding, on the device: the BPE pair test as gathers and one scatter.

`generate(..., canonical=...)` masks each step with ``constraint mask AND
canonical_after(prev)``, where ``prev`` is the row's previous generated token. The pair test
(`automata_compile.tokens.canonical_bpe`, which states and checks when it is exact): ``b``
may follow ``a`` iff ``b`` alone is canonical (or a special token) and no merge ``(u, v)``
with ``u`` on ``a``'s right spine and ``v`` on ``b``'s left spine fires before both are
consumed (``time(u, v) < consumed(u)`` and ``time(u, v) <= consumed(v)``).

Per step and row: the merges whose left part is on ``prev``'s right spine are contiguous
segments of the merge list sorted by left part (one per spine symbol, at most L merges in
all, L = the most over any token); gather them, keep those that fire before their left
part is consumed, scatter-min their times into ``best[v]`` over their right parts; then
gather ``best`` over every token's left spine (V x DL) and compare. All static shapes, no
host work.

The first generated token has no previous token (the prompt boundary is healing's job):
only the single-token test applies there. A row whose constraint allows no canonical token
(the language needs a non-canonical spelling there) falls back to the constraint mask for
that step and counts it in `GenerateOutput.canonical_fallbacks`: decoding never hangs.
"""

# ruff: noqa: F722 (jaxtyping shape strings are not Python expressions)

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Int

from automata_jax._errors import RuntimeShapeError

__all__ = ["CanonicalTables", "canonical_mask", "canonical_tables"]

INF = np.iinfo(np.int32).max


@struct.dataclass(kw_only=True)
class CanonicalTables:
    """The pair test's arrays on the device (a pytree; see `canonical_tables`).

    Attributes:
      ok: bool[V], the token alone is canonical.
      exempt: bool[V], special tokens (always allowed; no pair test after them).
      left_sym, left_life: int32[V, DL], left spines (symbol, consumed time; -1 pads).
      right_sym, right_life: int32[V, DR], right spines.
      merge_right, merge_time: int32[M], the merges sorted by left part (time: when it
        fires, see `automata_compile.tokens.canonical_bpe`).
      left_start, left_count: int32[V], each symbol's segment of merges with it on the left.
      slots: int32[L], 0..L-1 (L: the most merges over one token's right spine).
    """

    ok: Bool[Array, " V"]
    exempt: Bool[Array, " V"]
    left_sym: Int[Array, "V DL"]
    left_life: Int[Array, "V DL"]
    right_sym: Int[Array, "V DR"]
    right_life: Int[Array, "V DR"]
    merge_right: Int[Array, " M"]
    merge_time: Int[Array, " M"]
    left_start: Int[Array, " V"]
    left_count: Int[Array, " V"]
    slots: Int[Array, " L"]

    @property
    def vocab_size(self) -> int:
        return self.ok.shape[0]


def canonical_tables(bpe) -> CanonicalTables:
    """Device arrays from the compiler's `automata_compile.tokens.CanonicalBPE`."""
    v = int(bpe.vocab_size)
    ml, mr = np.asarray(bpe.merge_left), np.asarray(bpe.merge_right)
    usable = (ml >= 0) & (ml < v) & (mr >= 0) & (mr < v)
    time = np.where(usable, np.asarray(bpe.merge_time), INF).astype(np.int32)
    keep = np.flatnonzero(time < INF)  # merges that can never fire are dropped
    keep = keep[np.argsort(ml[keep], kind="stable")]
    count = np.bincount(ml[keep], minlength=v).astype(np.int32)
    start = (np.cumsum(count) - count).astype(np.int32)
    rs = np.asarray(bpe.right_sym)
    per_token = np.where(rs >= 0, count[np.clip(rs, 0, v - 1)], 0).sum(axis=1)
    return CanonicalTables(
        ok=jnp.asarray(bpe.ok, bool),
        exempt=jnp.asarray(bpe.exempt, bool),
        left_sym=jnp.asarray(bpe.left_sym, jnp.int32),
        left_life=jnp.asarray(bpe.left_life, jnp.int32),
        right_sym=jnp.asarray(bpe.right_sym, jnp.int32),
        right_life=jnp.asarray(bpe.right_life, jnp.int32),
        merge_right=jnp.asarray(mr[keep], jnp.int32),
        merge_time=jnp.asarray(time[keep], jnp.int32),
        left_start=jnp.asarray(start),
        left_count=jnp.asarray(count),
        slots=jnp.arange(max(1, int(per_token.max(initial=0))), dtype=jnp.int32),
    )


def check(canon: CanonicalTables, vocab_size: int) -> None:
    """Raises unless ``canon`` covers the tables' vocabulary."""
    if not isinstance(canon, CanonicalTables):
        raise RuntimeShapeError(
            f"canonical: expected CanonicalTables (canonical_tables(...)), got "
            f"{type(canon).__name__}"
        )
    if canon.vocab_size != vocab_size:
        raise RuntimeShapeError(
            f"canonical: expected tables for vocab_size {vocab_size} (the constraint tables'), "
            f"got {canon.vocab_size}"
        )


def canonical_mask(
    canon: CanonicalTables, prev: Int[Array, " B"], has_prev: Bool[Array, " B"]
) -> Bool[Array, "B V"]:
    """bool[B, V]: the tokens that keep each row's tokenization canonical after ``prev``."""
    v = canon.vocab_size
    b = prev.shape[0]
    p = jnp.clip(prev, 0, v - 1)
    rows = jnp.arange(b)[:, None]
    rs, rl = canon.right_sym[p], canon.right_life[p]  # [B, DR]
    u = jnp.clip(rs, 0, v - 1)
    count = jnp.where(rs >= 0, canon.left_count[u], 0)
    end = jnp.cumsum(count, axis=1)  # [B, DR]: each spine symbol's segment ends here
    slot = canon.slots[None, :, None]  # [1, L, 1]
    seg = jnp.sum(slot >= end[:, None, :], axis=-1)  # [B, L]: the segment of each slot
    seg_c = jnp.minimum(seg, rs.shape[1] - 1)

    def take(x):
        return jnp.take_along_axis(x, seg_c, axis=1)

    offset = canon.slots[None, :] - (take(end) - take(count))
    k = jnp.clip(take(canon.left_start[u]) + offset, 0, canon.merge_time.shape[0] - 1)
    time = canon.merge_time[k]  # [B, L]
    fires = (seg < rs.shape[1]) & (time < take(rl))
    times = jnp.where(fires, time, INF)
    best = jnp.full((b, v), INF, jnp.int32).at[rows, canon.merge_right[k]].min(times)
    ls = canon.left_sym
    first = best[:, jnp.clip(ls, 0, v - 1)]  # [B, V, DL]: the first cross merge into v
    hit = (first < INF) & (first <= canon.left_life[None]) & (ls >= 0)[None]
    conflict = jnp.any(hit, axis=-1)
    free = ~has_prev | canon.exempt[p] | ~canon.ok[p]
    return canon.exempt[None, :] | (canon.ok[None, :] & (free[:, None] | ~conflict))
