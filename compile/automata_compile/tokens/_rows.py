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
