"""Vectorized operations on dense DFAs ``trans int32[Q, S]`` (-1 = no edge).

Used for both the byte DFA (S = 256 bytes + terminal labels) and the token DFA
(S = token classes): trimming to useful states, and minimization.
"""

from __future__ import annotations

import numpy as np

from automata_compile._ranges import ranges

DEAD = -1


class WorkBudgetExceeded(Exception):
    """Internal: `minimize` passed its ``max_work`` (callers name what grew)."""


def trim(
    trans: np.ndarray,
    accepting: np.ndarray,
    start: int,
    *,
    return_kept: bool = False,
    all_reachable: bool = False,
):
    """Keeps the states reachable from ``start`` that can reach acceptance.

    ``all_reachable``: the caller knows every state is reachable from ``start`` (a subset
    construction's table): only the states that cannot reach acceptance are looked for.

    Returns:
      (trans, accepting, start) restricted and renumbered (kept states in their old
      order; ``start`` is the start's new id), or None if the language is empty. With
      ``return_kept``, a fourth item: int64[Q'], the old id of each kept state.
    """
    q = trans.shape[0]
    # The distinct (source, target) edges, in that order: each row sorted, repeats dropped.
    row = np.sort(trans, axis=1)
    keep = row >= 0
    keep[:, 1:] &= row[:, 1:] != row[:, :-1]
    src, col = np.nonzero(keep)
    src, dst = src.astype(np.int64), row[src, col].astype(np.int64)
    coreach = _closure(np.flatnonzero(accepting), dst, src, q)
    keep = coreach if all_reachable else _closure(np.array([start]), src, dst, q) & coreach
    if not keep[start]:
        return None
    out = restrict(trans, accepting, start, keep)
    return (*out, np.flatnonzero(keep)) if return_kept else out


def restrict(trans, accepting, start, keep):
    """Drops the states not in ``keep`` (edges into them become -1), renumbering the rest."""
    new_id = np.full(trans.shape[0] + 1, DEAD, dtype=np.int32)  # last slot maps DEAD to DEAD
    kept = np.flatnonzero(keep)
    new_id[kept] = np.arange(kept.size, dtype=np.int32)
    out = new_id[trans[kept]]
    return out.astype(np.int32), accepting[kept].copy(), int(new_id[start])


# `_closure` walks a graph of at most this many edges in plain Python (a BFS level per
# NumPy call costs more there: a chain of n states is n levels).
SMALL_GRAPH = 20_000


def _closure(seeds, src, dst, q) -> np.ndarray:
    """States reachable from ``seeds`` along edges src→dst (BFS on a CSR graph)."""
    if src.shape[0] <= SMALL_GRAPH:
        return _closure_small(seeds, src, dst, q)
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
        idx = ranges(lo, counts)
        nxt = dst[idx]
        nxt = np.unique(nxt[~seen[nxt]])
        seen[nxt] = True
        frontier = nxt
    return seen


def _closure_small(seeds, src, dst, q) -> np.ndarray:
    """`_closure` with Python lists: the same set."""
    succ: list[list[int]] = [[] for _ in range(q)]
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        succ[a].append(b)
    seen = [False] * q
    stack = np.asarray(seeds, dtype=np.int64).reshape(-1).tolist()
    for x in stack:
        seen[x] = True
    while stack:
        for y in succ[stack.pop()]:
            if not seen[y]:
                seen[y] = True
                stack.append(y)
    return np.array(seen, dtype=bool)


def minimize(
    trans: np.ndarray,
    accepting: np.ndarray,
    start: int,
    max_work: int | None = None,
    tick=None,
    weights: np.ndarray | None = None,
):
    """Moore partition refinement with incremental random hashing, then verified exactly.

    Each state's signature is a random linear form of its successors' block ids. When
    states change block, only their predecessors' signatures change (the *touched*
    states). At the end of a round every member of a block has the same signature, so the
    untouched members of a block stay together with their block's id: a round sorts only
    the touched states, and only they can move. A round costs what changed, not the size
    of the blocks it splits: a chain of n states (a bounded repeat such as ``.{0,n}``
    needs one round per link) costs O(n) rounds of O(1) states, not O(n²).

    Args:
      trans: int32[Q, S], a trimmed DFA (every state useful).
      accepting: bool[Q].
      start: initial state.
      max_work: optional cap on the states sorted, summed over rounds (at least one a
        round; a round sorts at most Q).
      tick: optional callable run once per round (a deadline check; it may raise).
      weights: optional uint64[S], the symbols' hash weights (default: `symbol_weights`);
        a table over symbol classes passes each class's sum of its symbols' weights, which
        gives the same signatures, so the same blocks, as the full table.

    Returns:
      (trans, accepting, start, block) of the minimal DFA, its states numbered in the
      order of their first member (a minimal input comes back as it was); ``block``
      int32[Q] maps old states to new ones.

    Raises:
      WorkBudgetExceeded: past ``max_work``.
    """
    q, s = trans.shape
    if q == 0:
        return trans, accepting, start, np.zeros(0, np.int32)
    if weights is None:
        weights = symbol_weights(s)
    # Reverse edges grouped by target: (source, symbol weight) of every edge into each state.
    src, sym = np.nonzero(trans >= 0)
    dst = trans[src, sym]
    # (a stable sort of 16-bit keys is a radix sort: several times faster, the same order)
    order = np.argsort(dst.astype(np.int16) if q <= 2**15 else dst, kind="stable")
    rsrc, rweight = src[order], weights[sym[order]]
    roff = np.searchsorted(dst[order], np.arange(q + 1))
    # Dense block ids 0..num_blocks-1; a split keeps the old id for one part.
    block = accepting.astype(np.int64)
    if block.min() == 1:
        block[:] = 0
    num_blocks = int(block.max()) + 1
    size = np.zeros(q + 1, dtype=np.int64)  # members of each block
    size[:num_blocks] = np.bincount(block)
    ref = np.zeros(q + 1, dtype=np.uint64)  # each block's signature at the end of a round
    sig = np.zeros(q, dtype=np.uint64)
    np.add.at(sig, rsrc, rweight * (block[dst[order]] + 1).astype(np.uint64))
    touched = np.arange(q)  # distinct states whose signature may differ from their block's
    work = 0
    while True:
        work += max(touched.shape[0], 1)
        if max_work is not None and work > max_work:
            raise WorkBudgetExceeded(work)
        if tick is not None:
            tick()
        moved, new_block = _refine_round(touched, block, sig, size, ref, num_blocks)
        if moved.shape[0] == 0:
            break
        num_blocks = int(new_block[-1]) + 1  # the new ids ascend
        delta = (new_block - block[moved]).astype(np.uint64)  # wraps for negatives
        block[moved] = new_block
        counts = roff[moved + 1] - roff[moved]
        idx = ranges(roff[moved], counts)
        hit = rsrc[idx]
        np.add.at(sig, hit, rweight[idx] * np.repeat(delta, counts))
        touched = np.unique(hit)
    # (numbered after the check: a collision's exact split numbers blocks its own way)
    block = _first_member_order(_verify_or_refine(trans, accepting, block))
    nb = int(block.max()) + 1
    rep = np.zeros(nb, dtype=np.int64)
    rep[block[::-1]] = np.arange(q)[::-1]  # first member of each block
    lut = np.append(block, DEAD).astype(np.int32)  # trans == -1 reads the appended DEAD
    out = lut[trans[rep].astype(np.intp)]  # (an intp index is gathered faster)
    return out, accepting[rep].copy(), int(block[start]), block.astype(np.int32)


def _refine_round(touched, block, sig, size, ref, num_blocks):
    """One Moore round over the ``touched`` states: their groups by (block, signature).

    A block's untouched members, and its touched ones whose signature is back at the
    block's ``ref``, form one group that keeps the block's id; where every member is
    touched, its largest group keeps it (the first of equals): a state then moves only
    into a part at most half its block, as in Hopcroft's algorithm. Every other group gets
    a new id (from ``num_blocks`` on, in (block, signature) order). Updates ``size`` and
    ``ref``.

    Returns:
      (moved, new_block): the states that change block and their new ids.
    """
    n = touched.shape[0]
    if n == 0:
        return touched, touched
    b, s = block[touched], sig[touched]
    perm = np.lexsort((s, b))
    order, b, s = touched[perm], b[perm], s[perm]
    starts_block = np.empty(n, dtype=bool)
    starts_block[0] = True
    np.not_equal(b[1:], b[:-1], out=starts_block[1:])
    starts_group = starts_block.copy()
    starts_group[1:] |= s[1:] != s[:-1]
    first = np.flatnonzero(starts_block)
    touched_in = np.diff(np.append(first, n))
    keeps = s == ref[b]  # with the untouched members (where the block has some)
    whole = size[b[first]] == touched_in  # blocks every member of which is touched
    if whole.any():
        groups = np.flatnonzero(starts_group)
        group_size = np.diff(np.append(groups, n))
        block_start = np.flatnonzero(starts_block[groups])  # each block's first group
        group_block = np.cumsum(starts_block[groups]) - 1
        best = group_size == np.maximum.reduceat(group_size, block_start)[group_block]
        seen = np.cumsum(best)  # best groups so far; a block's first has its count + 1
        best &= seen == (seen - best)[block_start][group_block] + 1
        keeps = np.where(np.repeat(whole, touched_in), np.repeat(best, group_size), keeps)
        kept = groups[best & whole[group_block]]
        ref[b[kept]] = s[kept]  # the keeping group's signature is its block's now
    move = ~keeps
    if not move.any():
        return order[:0], order[:0]
    # a moving group's new id: its rank among the moving groups (constant along a group)
    new = num_blocks - 1 + np.cumsum(starts_group & move)[move]
    moved, old, s = order[move], b[move], s[move]
    np.subtract.at(size, old, 1)
    size[num_blocks : int(new[-1]) + 1] = np.bincount(new - num_blocks)
    ref[new] = s
    return moved, new


def _first_member_order(block):
    """``block`` renumbered 0.. in the order of each block's first member."""
    _, first, inverse = np.unique(block, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)]


def symbol_weights(num_symbols: int) -> np.ndarray:
    """uint64[S]: `minimize`'s random hash weight of each symbol (fixed seed)."""
    rng = np.random.default_rng(0x5EED)
    return rng.integers(1, 2**63, size=num_symbols, dtype=np.uint64) | np.uint64(1)


def _verify_or_refine(trans, accepting, block):
    """Exact check that ``block`` is a congruence; refines exactly if a hash collided."""
    while True:
        rep = np.zeros(int(block.max()) + 1, dtype=np.int64)
        rep[block[::-1]] = np.arange(block.shape[0])[::-1]
        block32 = np.append(block, DEAD).astype(np.int32)
        # Only states that are not their block's first member can differ from it (a DFA
        # that minimization leaves as it is has none: nothing to compare).
        other = np.flatnonzero(rep[block] != np.arange(block.shape[0]))
        mine, theirs = block32[trans[other]], block32[trans[rep[block[other]]]]
        if (mine == theirs).all() and (accepting[other] == accepting[rep[block[other]]]).all():
            return block
        succ = block32[trans]  # trans == -1 reads the appended DEAD
        # pragma: no cover - a 64-bit signature collision; split exactly and check again.
        rows = np.concatenate(
            [block[:, None], accepting[:, None].astype(np.int64), succ.astype(np.int64)], axis=1
        )
        _, exact = np.unique(rows, axis=0, return_inverse=True)
        block = exact.reshape(-1).astype(np.int64)


# `unique_columns` hashes this many rows at a time.
UNIQUE_COLUMNS_BLOCK = 256


def unique_columns(mat: np.ndarray):
    """(index of one column per distinct column, id of each column's distinct column).

    Hashes columns with random weights and verifies equality exactly (falling back to
    sorting on a collision); ids are numbered in order of first appearance.
    """
    weights = np.random.default_rng(0xC01).integers(1, 2**63, size=mat.shape[0], dtype=np.uint64)
    # sum over rows of weight * (entry + 2), mod 2**64, a block of rows at a time (the
    # temporaries stay small; modular sums do not depend on the order)
    keys = np.zeros(mat.shape[1], np.uint64)
    for r in range(0, mat.shape[0], UNIQUE_COLUMNS_BLOCK):
        blk = mat[r : r + UNIQUE_COLUMNS_BLOCK].astype(np.uint64) + np.uint64(2)  # -1 wraps to 1
        keys += weights[r : r + UNIQUE_COLUMNS_BLOCK] @ blk  # uint64 product: the same sums
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    other = np.flatnonzero(first[inverse] != np.arange(inverse.shape[0]))  # not their own rep
    if not (mat[:, other] == mat[:, first[inverse[other]]]).all():  # pragma: no cover - collision
        _, first, inverse = np.unique(mat.T, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    # Renumber by first appearance so that column 0 keeps id 0.
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    return first[order], rank[inverse]
