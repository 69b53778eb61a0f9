"""`_ranges.ranges`: the concatenated ranges, against a loop of `np.arange`."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from automata_compile._ranges import ranges


@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 6)), max_size=12),
    st.sampled_from([np.int32, np.int64]),
    st.sampled_from([np.int32, np.int64]),
)
def test_ranges_match_a_loop(pairs, lo_dtype, count_dtype):
    lo = np.array([a for a, _ in pairs], lo_dtype)
    counts = np.array([n for _, n in pairs], count_dtype)
    want = np.concatenate([np.arange(0)] + [np.arange(a, a + n) for a, n in pairs])
    got = ranges(lo, counts)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
