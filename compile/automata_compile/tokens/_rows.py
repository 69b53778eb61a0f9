"""Distinct rows, small keys and the level step in NumPy: the hash-consing step of the
trie walks (`_compose` for DFAs, `_pda_walk` for PDAs) and their step from one level's
rows to the next (`step_rows`)."""

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


# `step_rows` takes one class's column at a time where a class has at least this many
# cells on average (a 1-D take from one column, which stays in cache, then beats one
# flat take over every column by more than the per-class overhead). Chosen on SchemaStore's
# dependabot, snapcraft and woodpecker-ci (not the schemas BENCHMARKS.md reports): the
# walks' steps took 1.23 s flat, 1.03 s from 1,024 cells, 1.00 s from 8,192, 1.03 s from
# 16,384 (the same arrays in every case)
GROUPED_CELLS = 8192


def step_rows(columns: np.ndarray, col: np.ndarray, rows: np.ndarray, row: np.ndarray):
    """``out[i, j] = columns[col[i], rows[row[i], j]]``: one level of a trie walk's row
    step (``columns``: [classes, states], contiguous; ``rows``: the previous level's
    states per wide start). Per class one 1-D take where classes hold many cells, else
    one flat take; the same array either way."""
    k, w = row.shape[0], rows.shape[1]
    order = np.argsort(col, kind="stable")
    by_col = col[order]
    cuts = np.flatnonzero(by_col[1:] != by_col[:-1]) + 1
    if k == 0 or k * w < GROUPED_CELLS * (cuts.shape[0] + 1):
        at = rows[row].astype(np.intp)
        at += (col * columns.shape[1])[:, None]
        return columns.reshape(-1).take(at)
    out = np.empty((k, w), columns.dtype)
    bounds = [0, *cuts.tolist(), k]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        idx = order[a:b]
        out[idx] = columns[by_col[a]].take(rows[row[idx]])
    return out


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
    by them (`distinct_rows_unordered`)."""
    a = np.ascontiguousarray(a)
    first, inverse = distinct_rows_unordered(a)
    return a[first], inverse


def distinct_rows_unordered(a: np.ndarray):
    """`distinct_rows` with the distinct rows in no fixed order (each one's first row
    still the first of its kind): rows of up to 8 bytes are one integer key; wider ones a
    random linear hash (mod 2**64), checked exactly (`distinct_rows` on a collision).
    Several times faster than sorting `np.void` rows on the short levels of a trie walk,
    and on the million context-dependent edges of gitlab-ci.json's block tables."""
    global _WEIGHTS
    a = np.ascontiguousarray(a)
    n, w = a.shape
    if n <= 1 or w == 0:
        return distinct_rows(a)
    width = a.dtype.itemsize * w
    if width <= 8:
        packed = np.zeros((n, 8), np.uint8)
        packed[:, :width] = a.view(np.uint8).reshape(n, width)
        _, first, inverse = np.unique(
            packed.view(np.uint64).reshape(n), return_index=True, return_inverse=True
        )
        return first, inverse.reshape(-1)
    # rows of whole 8-byte words are hashed word by word (a view, no widened copy, and a
    # quarter of the products for int16 rows); others element by element
    words = a.view(np.uint64) if width % 8 == 0 else a.astype(np.uint64)
    if _WEIGHTS.shape[0] < words.shape[1]:
        _WEIGHTS = np.random.default_rng(0x20F1).integers(
            1, 2**63, size=2 * words.shape[1], dtype=np.uint64
        )
    # (a uint64 matrix-vector product: the same sums mod 2**64 as multiplying and summing,
    # several times faster with no [n, w] temporary of products)
    key = words @ _WEIGHTS[: words.shape[1]]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    # the exact check: each row that is not its group's first equals that first row (by
    # words where the rows are whole words)
    exact = words if width % 8 == 0 else a
    dup = np.flatnonzero(first[inverse] != np.arange(n))
    if not (exact[dup] == exact[first[inverse[dup]]]).all():  # pragma: no cover - collision
        return distinct_rows(a)
    return first, inverse
