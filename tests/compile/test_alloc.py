"""`_alloc.empty`: an uninitialized array like `np.empty`, mapped by itself when large."""

from __future__ import annotations

import numpy as np
import pytest

from automata_compile import _alloc

SMALL = 1 << 20  # the tests' threshold (the default's arrays would be 128 MB)


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch):
    monkeypatch.setattr(_alloc, "MIN_BYTES", SMALL)


@pytest.mark.parametrize("shape", [7, (3, 5), (0, 256), (SMALL // 4 + 3,), (1030, 4099)])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_empty_is_a_writable_c_array_of_the_shape(shape, dtype):
    a = _alloc.empty(shape, dtype)
    want = np.empty(shape, dtype)
    assert a.shape == want.shape and a.dtype == want.dtype
    assert a.flags.c_contiguous and a.flags.writeable
    rng = np.random.default_rng(a.size)
    x = rng.integers(-100, 100, a.shape).astype(dtype)
    a[...] = x
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(a.reshape(-1)[::-1].copy(), x.reshape(-1)[::-1])


def test_large_arrays_are_separate_and_outlive_their_names():
    n = SMALL // 4 + 1
    a, b = _alloc.empty(n, np.int32), _alloc.empty(n, np.int32)
    a.fill(1)
    b.fill(2)
    view = a[5:9]
    del a
    assert (view == 1).all() and (b == 2).all()
    assert not np.shares_memory(view, b)
    assert not b.flags.owndata  # backed by its own mapping
