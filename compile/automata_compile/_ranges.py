"""Concatenated ranges: the index arrays of many slices at once, without a Python loop."""

from __future__ import annotations

import numpy as np


def ranges(lo, counts: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(lo[i], lo[i] + counts[i])`` over i (``counts`` >= 0;
    int64 for signed integer inputs)."""
    return np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
