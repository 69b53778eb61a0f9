"""Large uninitialized arrays that are written once, in fresh memory without a huge-page
hint.

NumPy asks the kernel for transparent huge pages on every large allocation
(``madvise(MADV_HUGEPAGE)``). Where the kernel's THP ``defrag`` setting is ``madvise`` (a
common default), each first touch of such memory may compact memory to find a free 2 MB
page, in the faulting process: with the memory of a busy host fragmented, writing the
~1 GB of tables of a 1,000-tool constraint took ~1.8 s CPU instead of ~0.6 s with plain
pages (docs/tool_calls.md). `empty` maps anonymous memory itself (no hint: the kernel's
default for it applies), so tables built once and written in one pass do not stall.
"""

from __future__ import annotations

import mmap

import numpy as np

# below this, `np.empty`: huge pages that a process has just freed come back without
# compaction, and 4 KB pages cost ~10% more to fault in (100 tools' tables, ~100 MB in
# all: 0.29 s warm against 0.25 s, all of them mapped here)
MIN_BYTES = 128 << 20


def empty(shape, dtype) -> np.ndarray:
    """Like `np.empty` (C order, writable, uninitialized: write every cell); arrays of
    ``MIN_BYTES`` or more are backed by their own private anonymous mapping, released
    with the array."""
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    flags = getattr(mmap, "MAP_PRIVATE", None), getattr(mmap, "MAP_ANONYMOUS", None)
    if size < MIN_BYTES or None in flags:
        return np.empty(shape, dtype)
    buf = mmap.mmap(-1, size, flags=flags[0] | flags[1])
    return np.frombuffer(buf, dtype).reshape(shape)
