"""Distinct rows and small keys in NumPy: the hash-consing step of the trie walks
(`_compose` for DFAs, `_pda_walk` for PDAs)."""

from __future__ import annotations

import numpy as np


def unique_small(key: np.ndarray, bound: int):
    """(sorted distinct values, index of each value among them) of ``key`` in ``[0, bound)``:
    by counting when the range is small (no sort), else `np.unique`."""
    if bound > 4 * key.shape[0] + (1 << 16):
        ukey, inverse = np.unique(key, return_inverse=True)
        return ukey, inverse.reshape(-1)
    present = np.bincount(key, minlength=bound) > 0
    rank = np.cumsum(present) - 1
    return np.flatnonzero(present), rank[key]


def unique_rows(a: np.ndarray):
    """(distinct rows, index of each row of ``a`` among them)."""
    a = np.ascontiguousarray(a)
    first, inverse = distinct_rows(a)
    return a[first], inverse


def distinct_rows(a: np.ndarray):
    """(index of the first row of each distinct row, index of each row's distinct row):
    distinct rows in the order of their bytes (each row one `np.void` item: far faster than
    ``np.unique(a, axis=0)``, which compares a structured item field by field)."""
    a = np.ascontiguousarray(a)
    if a.shape[1] == 0:
        return np.zeros(min(a.shape[0], 1), np.int64), np.zeros(a.shape[0], np.int64)
    void = a.view(np.dtype((np.void, a.dtype.itemsize * a.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(void, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


_WEIGHTS = np.random.default_rng(0x20F1).integers(1, 2**63, size=1, dtype=np.uint64)


def unique_rows_unordered(a: np.ndarray):
    """`unique_rows` with the distinct rows in no fixed order, for callers that only group
    by them: rows of up to 8 bytes are one integer key; wider ones a random linear hash
    (mod 2**64), checked exactly (`unique_rows` on a collision). Several times faster than
    sorting `np.void` rows on the short levels of a trie walk."""
    global _WEIGHTS
    a = np.ascontiguousarray(a)
    n, w = a.shape
    if n <= 1 or w == 0:
        return unique_rows(a)
    width = a.dtype.itemsize * w
    if width <= 8:
        packed = np.zeros((n, 8), np.uint8)
        packed[:, :width] = a.view(np.uint8).reshape(n, width)
        _, first, inverse = np.unique(
            packed.view(np.uint64).reshape(n), return_index=True, return_inverse=True
        )
        return a[first], inverse.reshape(-1)
    if _WEIGHTS.shape[0] < w:
        _WEIGHTS = np.random.default_rng(0x20F1).integers(1, 2**63, size=2 * w, dtype=np.uint64)
    key = (a.astype(np.uint64) * _WEIGHTS[:w]).sum(axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not (a == a[first[inverse]]).all():  # pragma: no cover - a 64-bit collision
        return unique_rows(a)
    return a[first], inverse
