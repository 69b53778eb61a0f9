"""`tokens._rows`: distinct rows and small keys, against `np.unique`."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from automata_compile.tokens import _rows
from automata_compile.tokens._rows import (
    distinct_rows,
    step_rows,
    unique_rows,
    unique_rows_unordered,
    unique_small,
)

_matrices = st.tuples(st.integers(1, 12), st.integers(0, 5)).flatmap(
    lambda shape: hnp.arrays(np.int16, shape, elements=st.integers(-1, 3))
)


@settings(max_examples=100, deadline=None)
@given(_matrices)
def test_distinct_rows_partition_as_np_unique_does(a):
    """The same grouping of rows as ``np.unique(axis=0)`` (numbered in another order): each
    row's distinct row equals it, ``first`` is that row's first occurrence, and two rows
    share an id exactly when they are equal."""
    first, inverse = distinct_rows(a)
    if a.shape[1] == 0:
        assert first.tolist() == [0] and not inverse.any()
        return
    _, ref = np.unique(a, axis=0, return_inverse=True)
    ref = ref.reshape(-1)
    assert len(first) == len(set(ref.tolist()))
    for i in range(a.shape[0]):
        np.testing.assert_array_equal(a[first[inverse[i]]], a[i])
        assert first[inverse[i]] == np.flatnonzero(ref == ref[i])[0]
    assert ((inverse[:, None] == inverse[None, :]) == (ref[:, None] == ref[None, :])).all()
    rows, inv = unique_rows(a)
    np.testing.assert_array_equal(rows[inv], a)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=40), st.sampled_from([51, 1 << 20]))
def test_unique_small_is_np_unique(keys, bound):
    key = np.array(keys, np.int64)
    ukey, inverse = unique_small(key, bound)
    ref, ref_inv = np.unique(key, return_inverse=True)
    np.testing.assert_array_equal(ukey, ref)
    np.testing.assert_array_equal(inverse, ref_inv.reshape(-1))


_wide_matrices = st.tuples(st.integers(1, 30), st.sampled_from([0, 1, 2, 3, 4, 5, 9, 40])).flatmap(
    lambda shape: hnp.arrays(
        st.sampled_from([np.int16, np.int32]), shape, elements=st.integers(-1, 3)
    )
)


@settings(max_examples=150, deadline=None)
@given(_wide_matrices, st.booleans())
def test_unique_rows_unordered_groups_as_unique_rows(a, collide):
    """The same grouping as `unique_rows` in some order (packed keys up to 8 bytes, a
    checked hash beyond), and the same after a forced hash collision."""
    if collide:  # every wide row hashes alike: the exact check falls back
        _rows._WEIGHTS = np.zeros(64, np.uint64)
    try:
        rows, inv = unique_rows_unordered(a)
    finally:
        _rows._WEIGHTS = np.zeros(0, np.uint64)  # drawn again on the next call
    ref_rows, ref = unique_rows(a)
    np.testing.assert_array_equal(rows[inv], a)
    assert rows.shape == ref_rows.shape
    assert ((inv[:, None] == inv[None, :]) == (ref[:, None] == ref[None, :])).all()


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 6),  # classes
    st.integers(1, 9),  # states
    st.integers(0, 5),  # previous rows
    st.integers(0, 12),  # keys
    st.integers(1, 7),  # wide starts
    st.sampled_from([np.int16, np.int32]),
    st.randoms(use_true_random=False),
)
def test_step_rows_is_the_fancy_index_on_both_paths(c, q, r, k, w, dtype, rnd):
    """``out[i, j] == columns[col[i], rows[row[i], j]]``, by one flat take and by one take
    per class (`GROUPED_CELLS` forces each path): the walks' former 2-D fancy index."""
    rng = np.random.default_rng(rnd.getrandbits(32))
    columns = rng.integers(0, q + 2, size=(c, q + 1)).astype(dtype)
    rows = rng.integers(0, q + 1, size=(max(r, 1), w)).astype(dtype)
    col = rng.integers(0, c, size=k)
    row = rng.integers(0, rows.shape[0], size=k)
    want = columns[col[:, None], rows[row]]
    default = _rows.GROUPED_CELLS
    try:
        for cells in (0, 1 << 30):
            _rows.GROUPED_CELLS = cells
            got = step_rows(columns, col, rows, row)
            assert got.dtype == columns.dtype and got.shape == (k, w)
            np.testing.assert_array_equal(got, want)
    finally:
        _rows.GROUPED_CELLS = default
