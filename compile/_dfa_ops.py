"""Vectorized operations on dense DFAs ``trans int32[Q, S]`` (-1 = no edge).

Used for both the byte DFA (S = 256 bytes + terminal labels) and the token DFA
(S = token classes): trimming to useful states, and minimization.
"""

from __future__ import annotations

import numpy as np

DEAD = -1


def trim(trans: np.ndarray, accepting: np.ndarray, start: int):
    """Keeps the states reachable from ``start`` that can reach acceptance.

    Returns:
      (trans, accepting, start) restricted and renumbered (start = 0 first in
      BFS order), or None if the language is empty.
    """
    q = trans.shape[0]
    src, sym = np.nonzero(trans >= 0)
    dst = trans[src, sym]
    pairs = np.unique(src.astype(np.int64) * q + dst)
    src, dst = pairs // q, pairs % q
    reach = _closure(np.array([start]), src, dst, q)
    coreach = _closure(np.flatnonzero(accepting), dst, src, q)
    keep = reach & coreach
    if not keep[start]:
        return None
    return restrict(trans, accepting, start, keep)


def restrict(trans, accepting, start, keep):
    """Drops the states not in ``keep`` (edges into them become -1), renumbering the rest."""
    new_id = np.full(trans.shape[0] + 1, DEAD, dtype=np.int32)  # last slot maps DEAD to DEAD
    kept = np.flatnonzero(keep)
    new_id[kept] = np.arange(kept.size, dtype=np.int32)
    out = new_id[trans[kept]]
    return out.astype(np.int32), accepting[kept].copy(), int(new_id[start])


def _closure(seeds, src, dst, q) -> np.ndarray:
    """States reachable from ``seeds`` along edges src→dst (BFS on a CSR graph)."""
    order = np.argsort(src, kind="stable")
    src, dst = src[order], dst[order]
    offsets = np.searchsorted(src, np.arange(q + 1))
    seen = np.zeros(q, dtype=bool)
    seen[seeds] = True
    frontier = np.unique(seeds)
    while frontier.size:
        lo, hi = offsets[frontier], offsets[frontier + 1]
        counts = hi - lo
        if counts.sum() == 0:
            break
        idx = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        nxt = dst[idx]
        nxt = np.unique(nxt[~seen[nxt]])
        seen[nxt] = True
        frontier = nxt
    return seen


def minimize(trans: np.ndarray, accepting: np.ndarray, start: int):
    """Moore partition refinement, vectorized with random hashing, then verified exactly.

    Args:
      trans: int32[Q, S], a trimmed DFA (every state useful).
      accepting: bool[Q].
      start: initial state.

    Returns:
      (trans, accepting, start, block) of the minimal DFA; ``block`` int32[Q] maps
      old states to new ones.
    """
    q, s = trans.shape
    if q == 0:
        return trans, accepting, start, np.zeros(0, np.int32)
    # Equal columns need to be hashed once.
    cols, col_inverse = np.unique(trans.T, axis=0, return_inverse=True)
    ctrans = np.ascontiguousarray(cols.T)
    rng = np.random.default_rng(0x5EED)
    weights = rng.integers(1, 2**62, size=ctrans.shape[1], dtype=np.uint64) | np.uint64(1)
    block = accepting.astype(np.int64)
    count = len(np.unique(block))
    while True:
        succ = np.where(ctrans >= 0, block[np.maximum(ctrans, 0)] + 1, 0).astype(np.uint64)
        sig = (succ * weights[None, :]).sum(axis=1, dtype=np.uint64)
        _, new_block = np.unique(
            np.stack([block.astype(np.uint64), sig], axis=1), axis=0, return_inverse=True
        )
        new_block = new_block.reshape(-1).astype(np.int64)
        new_count = int(new_block.max()) + 1
        block = new_block
        if new_count == count:
            break
        count = new_count
    block = _verify_or_refine(ctrans, accepting, block)
    nb = int(block.max()) + 1
    rep = np.zeros(nb, dtype=np.int64)
    rep[block[::-1]] = np.arange(q)[::-1]  # first member of each block
    out = trans[rep]
    out = np.where(out >= 0, block[np.maximum(out, 0)], DEAD).astype(np.int32)
    return out, accepting[rep].copy(), int(block[start]), block.astype(np.int32)


def _verify_or_refine(ctrans, accepting, block):
    """Exact check that ``block`` is a congruence; refines with exact row keys if a hash collided."""
    while True:
        succ = np.where(ctrans >= 0, block[np.maximum(ctrans, 0)], DEAD)
        rows = np.concatenate([block[:, None], accepting[:, None].astype(np.int64), succ], axis=1)
        _, exact = np.unique(rows, axis=0, return_inverse=True)
        exact = exact.reshape(-1)
        if exact.max() == block.max():
            return block
        block = exact.astype(np.int64)
