"""Drafts for speculative decoding: an n-gram lookup in each row's own prompt and output.

Prompt lookup (Saxena, 2023): the last ``n`` tokens a row has written are searched for
in everything it has seen (its prompt, then its output so far); at the most recent
earlier occurrence, the ``K`` tokens that followed it are the draft. Extraction copies
names, numbers and dates from the document, so those tokens are often drafted right.
Longer n-grams are tried first (a longer match predicts better); a row with no match
drafts nothing.

Everything is a fixed-shape array operation on the device (``n`` shifted compares of
``[B, L]`` per n-gram size, one max, one gather), with no host round trip.
"""

# ruff: noqa: F722 (jaxtyping shape strings)

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Bool, Int


def prompt_lookup(
    history: Int[Array, "B L"],
    valid: Bool[Array, "B L"],
    end: Int[Array, " B"],
    *,
    ngram_sizes: tuple[int, ...],
    draft_len: int,
) -> tuple[Int[Array, "B K"], Int[Array, " B"]]:
    """Each row's draft: the tokens after the latest earlier occurrence of its last n-gram.

    Args:
      history: int32[B, L], each row's tokens: its (left-padded) prompt then its output.
      valid: bool[B, L], False on padding (never matched, never drafted).
      end: int32[B], the number of known slots of each row (slots ``>= end`` are ignored).
      ngram_sizes: static, the n-gram lengths to try, longest first.
      draft_len: static K, the most tokens drafted per row.

    Returns:
      ``(drafts int32[B, K], count int32[B])``: row b's draft is ``drafts[b, :count[b]]``
      (the slots after it hold arbitrary ids).

    Example:
      >>> import jax.numpy as jnp
      >>> h = jnp.asarray([[5, 6, 7, 8, 5, 6]])
      >>> d, n = prompt_lookup(h, h >= 0, jnp.asarray([6]), ngram_sizes=(2, 1), draft_len=3)
      >>> d[0, : int(n[0])].tolist()
      [7, 8, 5]
    """
    b, length = history.shape
    slots = jnp.arange(length, dtype=jnp.int32)
    rows_end = end.astype(jnp.int32)
    best = jnp.full((b,), -1, jnp.int32)
    for n in sorted(set(ngram_sizes), reverse=True):
        match = (slots[None, :] < rows_end[:, None] - 1) & (slots[None, :] >= n - 1)
        for i in range(n):  # static: the n-gram's i-th token from its end
            at = jnp.clip(rows_end - 1 - i, 0, length - 1)[:, None]
            want = jnp.take_along_axis(history, at, axis=1)
            want_ok = jnp.take_along_axis(valid, at, axis=1) & (rows_end - 1 - i >= 0)[:, None]
            shifted = jnp.pad(history[:, : length - i], ((0, 0), (i, 0)))
            shifted_ok = jnp.pad(valid[:, : length - i], ((0, 0), (i, 0)))
            match = match & (shifted == want) & shifted_ok & want_ok
        latest = jnp.max(jnp.where(match, slots[None, :], -1), axis=1)
        best = jnp.where(best < 0, latest, best)
    offsets = best[:, None] + 1 + jnp.arange(draft_len, dtype=jnp.int32)[None, :]
    at = jnp.clip(offsets, 0, length - 1)
    drafts = jnp.take_along_axis(history, at, axis=1)
    ok = (best >= 0)[:, None] & (offsets < rows_end[:, None])
    ok = ok & jnp.take_along_axis(valid, at, axis=1)
    count = jnp.sum(jnp.cumprod(ok.astype(jnp.int32), axis=1), axis=1)
    return drafts.astype(jnp.int32), count.astype(jnp.int32)
