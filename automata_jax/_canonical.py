"""Canonical-only decoding, on the device: the BPE pair test as gathers and one scatter.

`generate(..., canonical=...)` samples each step under ``constraint mask AND
canonical_after(prev)``, where ``prev`` is the row's previous generated token. With `Greedy`
and `Temperature` it does so lazily (`canonical_sample`): it samples under the constraint
mask as the plain loop does, tests only the chosen token of each row (`canonical_pair_ok`,
DR x DL binary searches), and computes the full mask below only on a step where some row's
token fails; other samplers take the full mask every step. The pair test
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

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Int

from automata_jax._errors import RuntimeShapeError

__all__ = ["CanonicalTables", "canonical_mask", "canonical_pair_ok", "canonical_tables"]

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
      left_start, left_count: int32[V], each symbol's segment of merges with it on the left;
        inside a segment the merges are sorted by right part, one per (left, right) pair.
      slots: int32[L], 0..L-1 (L: the most merges over one token's right spine).
      search_steps: static, binary-search steps that cover the longest segment.
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
    search_steps: int = struct.field(pytree_node=False, default=32)

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
    keep = keep[np.lexsort((time[keep], mr[keep], ml[keep]))]  # by left, right, then time
    first = np.ones(keep.size, bool)  # one merge per (left, right) pair: the earliest
    first[1:] = (ml[keep][1:] != ml[keep][:-1]) | (mr[keep][1:] != mr[keep][:-1])
    keep = keep[first]
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
        search_steps=int(count.max(initial=0)).bit_length() + 1,
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


def canonical_pair_ok(
    canon: CanonicalTables,
    prev: Int[Array, " B"],
    has_prev: Bool[Array, " B"],
    tokens: Int[Array, " B"],
) -> Bool[Array, " B"]:
    """bool[B]: each row's ``tokens`` keeps its tokenization canonical after ``prev``.

    The same test as one entry of `canonical_mask` (``canonical_mask(...)[r, tokens[r]]``),
    for one token per row: for each ``u`` on ``prev``'s right spine and ``v`` on the
    token's left spine, merge ``(u, v)`` is found by binary search in ``u``'s segment
    (sorted by right part), DR x DL lookups of ``search_steps`` gathers each per row.
    """
    v = canon.vocab_size
    m = canon.merge_right.shape[0]
    p, t = jnp.clip(prev, 0, v - 1), jnp.clip(tokens, 0, v - 1)
    rs, rl = canon.right_sym[p][:, :, None], canon.right_life[p][:, :, None]  # [B, DR, 1]
    ls, ll = canon.left_sym[t][:, None, :], canon.left_life[t][:, None, :]  # [B, 1, DL]
    u = jnp.clip(rs, 0, v - 1)
    lo = jnp.broadcast_to(canon.left_start[u], (rs.shape[0], rs.shape[1], ls.shape[2]))
    end = lo + canon.left_count[u]
    hi = end
    for _ in range(canon.search_steps):  # lower bound of ls in merge_right[lo:end]
        mid = (lo + hi) // 2
        right = (lo < hi) & (canon.merge_right[jnp.clip(mid, 0, m - 1)] < ls)
        lo, hi = jnp.where(right, mid + 1, lo), jnp.where((lo < hi) & ~right, mid, hi)
    k = jnp.clip(lo, 0, m - 1)
    found = (lo < end) & (canon.merge_right[k] == ls) & (rs >= 0) & (ls >= 0)
    time = canon.merge_time[k]
    conflict = jnp.any(found & (time < rl) & (time <= ll), axis=(1, 2))
    free = ~has_prev | canon.exempt[p] | ~canon.ok[p]
    return canon.exempt[t] | (canon.ok[t] & (free | ~conflict))


def canonical_sample(canon, sampler, allowed, logits, rng, prev, has_prev, done):
    """Samples each row under ``allowed`` AND canonical-after-``prev`` (`generate`'s step).

    Returns ``(tokens int32[B], fallback int32[B])``; a row whose constraint allows no
    canonical token samples under ``allowed`` alone and gets ``fallback`` 1.

    Lazy where the sampler allows it (``sampler.rejection_exact``: `Greedy`,
    `Temperature`): sample under ``allowed`` as the plain loop does, test only the chosen
    token of each row (`canonical_pair_ok`), and only when some row's token fails compute
    `canonical_mask` for the batch (under ``lax.cond``) and resample the failed rows from
    ``allowed`` AND canonical with an independent key. Exact:

    * Greedy: the argmax under ``allowed``, when canonical, is also the first argmax under
      the smaller mask, so every row's token is the full-mask path's.
    * Temperature: with ``p`` the distribution under ``allowed``, ``C`` the canonical set,
      ``Z = p(C)``, a token ``y`` in ``C`` is drawn first with probability ``p(y)``, or
      rejected (probability ``1 - Z``) then redrawn with ``p(y) / Z``:
      ``p(y) + (1 - Z) p(y) / Z = p(y) / Z``, which is ``p`` restricted to ``C``.

    Other samplers (`TopK`, `TopP`, `MinP`: the filtered distribution depends on the mask)
    take the full mask every step, which is exact by construction.
    """
    neg = jnp.asarray(-jnp.inf, logits.dtype)

    def full(sample_key):
        both = allowed & canonical_mask(canon, prev, has_prev)
        empty = ~jnp.any(both, axis=-1)
        keep = jnp.where(empty[:, None], allowed, both)
        tokens = sampler(jnp.where(keep, logits, neg), sample_key).astype(jnp.int32)
        return tokens, (empty & ~done).astype(jnp.int32)

    if not getattr(sampler, "rejection_exact", False):
        return full(rng)
    tokens = sampler(jnp.where(allowed, logits, neg), rng).astype(jnp.int32)
    good = canonical_pair_ok(canon, prev, has_prev, tokens) | done

    def resample(_):
        again, fallback = full(jax.random.fold_in(rng, 1))
        return jnp.where(good, tokens, again), jnp.where(good, 0, fallback)

    def keep(_):
        return tokens, jnp.zeros_like(tokens)

    return jax.lax.cond(jnp.all(good), keep, resample, None)
