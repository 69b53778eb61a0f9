"""Byte DFA ∘ detokenizer → token DFA (Koo et al. §3; Outlines' index).

Every token induces a function ``f_t: state → state ∪ {dead}`` (walk its bytes).
All of them are computed in one vectorized pass over the vocabulary's trie,
level by level, for all DFA states at once:

* *narrow* states (few tokens can start there: literals, digits, punctuation)
  keep a sparse list of live (trie node, start, current) triples;
* *wide* states (free text: most tokens are allowed) are walked together: a
  trie node's *row* is the vector of current states over all wide states, and
  rows are hash-consed per level (a node's row depends only on its parent's
  row and its byte's class), so the work is proportional to the number of
  distinct rows (typically a few thousand), not nodes × states.

Tokens with equal functions form one class. The dense part of a function is
identified exactly by its canonical row; the sparse part is hashed and then
*verified exactly*, so a hash collision can never merge two different classes.

Terminal labels (symbols 256 + k of the byte DFA) add an edge for every token
satisfying label k's predicate, where no byte path exists for that token
(normal edges win; lower k wins among labels).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from automata_compile._errors import EmptyLanguageError
from automata_compile._ranges import ranges
from automata_compile.automata import NUM_BYTES, ByteDFA, check_time
from automata_compile.automata import dfa_ops as _dfa_ops
from automata_compile.tokens._loop_walk import find_loops, loop_walk
from automata_compile.tokens._rows import (
    distinct_rows,
    step_rows,
    unique_rows,
    unique_rows_unordered,
    unique_small,
)
from automata_compile.tokens._token_trie import TokenTrie

# A state is wide when tokens whose first byte it allows exceed this share of the vocabulary.
WIDE_SHARE = 0.01
# Free strings walk their loop's cached walk (`_loop_walk`); False: the plain walk (tests).
USE_LOOPS = True
# `_classes` sorts hash + dense id * MIX (an odd 64-bit constant).
MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclasses.dataclass
class _Walk:
    """Every token's function, split into its sparse and dense parts.

    Attributes:
      groups, starts, ends: int64[P], live (terminal group, narrow start, end) triples.
      wide: int64[W], the wide states.
      rows: int[U, W], distinct rows: end states over the wide states; ``sink`` = dead.
      group_row: int64[G], each terminal group's row, -1 if dead from every wide state.
      sink: the dead marker in ``rows`` (= number of states).
      xtok, xstart, xend: int64[X], token-level edges added by terminal labels.
    """

    groups: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    wide: np.ndarray
    rows: np.ndarray
    group_row: np.ndarray
    sink: int
    xtok: np.ndarray
    xstart: np.ndarray
    xend: np.ndarray


def compose(dfa: ByteDFA, trie: TokenTrie, predicates=(), *, return_byte_states: bool = False):
    """Builds the token DFA tables.

    Returns:
      (token_class int32[V], next_state int32[Q, C], accepting bool[Q], start), minimal and
      trimmed to states from which acceptance is reachable through tokens; class 0 is dead.
      With ``return_byte_states``, a fifth item ``int32[Q]``: one byte-DFA state merged into
      each token state (its token-level future is the token state's; used for forced text).

    Raises:
      EmptyLanguageError: no string of the language can be spelled with the vocabulary.
    """
    walk = _walk(dfa, trie, predicates)
    token_class, rep = _classes(dfa.num_states, trie, walk)
    next_state = _columns(dfa.num_states, trie, walk, token_class, rep)
    if not _verify(next_state, token_class, rep, trie, walk):  # pragma: no cover - about 2**-64
        raise RuntimeError(
            "token class hashing collided; please report this pattern and vocabulary"
        )

    trimmed = _dfa_ops.trim(next_state, dfa.accepting, dfa.start, return_kept=True)
    if trimmed is None:
        raise EmptyLanguageError(
            "no string of the language can be spelled with this vocabulary's tokens "
            "(the pattern matches something, but not with these tokens)"
        )
    ns, acc, st, kept = trimmed
    ns, acc, st, block = _dfa_ops.minimize(
        ns, acc, st, tick=lambda: check_time("the token DFA's minimization")
    )
    # Minimization can make columns equal: merge them, keeping the dead class first.
    # (each step below is one pass over a table of up to GBs: the deadline between them)
    check_time("the token DFA's minimization")
    with_dead = np.concatenate([np.full((ns.shape[0], 1), -1, dtype=np.int32), ns], axis=1)
    first, col_id = _dfa_ops.unique_columns(with_dead)
    check_time("the token DFA's classes")
    new_next = with_dead[:, first].astype(np.int32, copy=False)
    class_map = col_id[1:]  # each class's merged class
    # Each merged class's first token: the least of its classes' (``rep``: their first).
    first_token = np.full(new_next.shape[1], token_class.shape[0], dtype=np.int64)
    np.minimum.at(first_token, class_map[1:], rep[1:])
    byte_state = np.zeros(ns.shape[0], dtype=np.int32)
    byte_state[block[::-1]] = kept[::-1]  # the first kept byte state of each token state
    check_time("the token DFA's classes")
    token_class, new_next, acc, st, byte_state = canonical_numbering(
        token_class, new_next, acc, st, byte_state, class_map=class_map, first_token=first_token
    )
    if return_byte_states:
        return token_class, new_next, acc, st, byte_state
    return token_class, new_next, acc, st


def canonical_numbering(
    token_class, next_state, accepting, start, byte_state, *, class_map=None, first_token=None
):
    """Renumbers a minimal token DFA canonically, so that its tables depend only on the
    byte DFA and the vocabulary, not on how the walk split or ordered its work.

    A token state is a block of byte states with one token-level future, so it is named by
    its first byte state (``byte_state``): states are numbered in that order. Token classes
    (the distinct columns) are numbered in the order of their first token id; class 0, the
    dead column, stays 0.

    ``class_map`` (optional): ``token_class`` holds ids that it maps to ``next_state``'s
    classes (composed with the renumbering: one pass over the vocabulary). ``first_token``
    (optional): each class's least token id (the vocabulary's size for none), where the
    caller knows it; else it is found from the tokens.

    Returns:
      (token_class, next_state, accepting, start, byte_state), renumbered.
    """
    state_order = np.argsort(byte_state, kind="stable")
    state_id = np.empty(state_order.shape[0] + 1, dtype=np.int32)
    state_id[state_order] = np.arange(state_order.shape[0], dtype=np.int32)
    state_id[-1] = -1  # next_state's -1 reads the last slot
    num_classes = next_state.shape[1]
    if first_token is None:
        tc = token_class if class_map is None else class_map[token_class]
        first_token = np.full(num_classes, tc.shape[0], dtype=np.int64)
        nonzero = np.flatnonzero(tc)
        first_token[tc[nonzero[::-1]]] = nonzero[::-1]
    else:
        first_token = np.array(first_token, dtype=np.int64)
    first_token[0] = -1  # the dead class stays first
    class_order = np.argsort(first_token, kind="stable")
    class_id = np.empty(num_classes, dtype=np.int32)
    class_id[class_order] = np.arange(num_classes, dtype=np.int32)
    # (two one-axis takes: several times faster than one `np.ix_` gather)
    new_next = state_id[np.take(np.take(next_state, state_order, axis=0), class_order, axis=1)]
    if class_map is not None:
        class_id = class_id[class_map]
    return (
        class_id[token_class],
        new_next,
        accepting[state_order],
        int(state_id[start]),
        byte_state[state_order],
    )


def _walk(dfa: ByteDFA, trie: TokenTrie, predicates) -> _Walk:
    q = dfa.num_states
    byte_trans = dfa.trans[:, :NUM_BYTES]
    has_terminal = (dfa.trans[:, NUM_BYTES:] >= 0).any(axis=1)
    estimate = (byte_trans >= 0).astype(np.int64) @ trie.first_byte_count
    wide_mask = (estimate > WIDE_SHARE * trie.token_group.shape[0]) & ~has_terminal
    # A wide state in a loop (a free string) takes the loop's cached walk, and the loop's
    # other states with it; the loop's exits continue as sparse lanes.
    loops = []
    if USE_LOOPS:
        loops = [
            lp
            for lp in find_loops(byte_trans, np.flatnonzero(wide_mask))
            if not has_terminal[lp.states].any()
        ]
    in_loop = np.zeros(q, dtype=bool)
    for lp in loops:
        in_loop[lp.states] = True
    wide = np.flatnonzero(wide_mask & ~in_loop)
    narrow = np.flatnonzero(~wide_mask & ~in_loop).astype(np.int64)
    flat = np.ascontiguousarray(byte_trans).reshape(-1)
    z = np.zeros(narrow.shape[0], np.int64)
    lanes = [(z, z, narrow, narrow)]
    rows, group_row = _dense_walk(byte_trans, trie, wide)
    if loops:
        walks = [loop_walk(byte_trans, lp, trie) for lp in loops]
        for lp, lw in zip(loops, walks, strict=True):
            entry = lp.states[lw.exit_src] * NUM_BYTES + _node_bytes(trie, lw)
            lanes.append((lw.exit_depth, lw.exit_node, lp.states[lw.exit_start], flat[entry]))
        wide, rows, group_row = _join_loops(q, wide, rows, group_row, loops, walks)
    depth, node, start, cur = (np.concatenate(c).astype(np.int64) for c in zip(*lanes, strict=True))
    groups, starts, ends = _lanes_walk(flat, trie, depth, node, start, cur)
    xtok, xstart, xend = _terminal_edges(dfa, trie, predicates, groups, starts)
    return _Walk(groups, starts, ends, wide, rows, group_row, q, xtok, xstart, xend)


def _node_bytes(trie: TokenTrie, lw) -> np.ndarray:
    """int64[X]: the byte of each exit's trie node."""
    out = np.zeros(lw.exit_node.shape[0], np.int64)
    for d in np.unique(lw.exit_depth).tolist():
        at = lw.exit_depth == d
        out[at] = trie.byte[d][lw.exit_node[at]]
    return out


def _join_loops(q, wide, rows, group_row, loops, walks):
    """The dense part over ``wide`` and then every loop copy's states: a group's row is its
    row over ``wide`` next to its cached row in each loop, mapped to the copy's states.

    Returns (wide, rows, group_row) as `_Walk` holds them.
    """
    # One id per distinct combination of a group's row ids (copies of a shape share ids).
    shapes = {}
    for lp, lw in zip(loops, walks, strict=True):
        shapes.setdefault(lp.key, lw)
    combo = np.asarray(group_row, dtype=np.int64) + 1  # (no copy before the sum)
    for lw in shapes.values():
        u = lw.rows.shape[0] + 1
        key = combo * u
        key += lw.group_row
        key += 1
        _, combo = unique_small(key, (int(combo.max()) + 1) * u)
    num = int(combo.max()) + 1
    rep = np.zeros(num, dtype=np.int64)
    rep[combo[::-1]] = np.arange(combo.shape[0])[::-1]  # one group per combination
    dtype = np.int16 if q < np.iinfo(np.int16).max else np.int32
    gr = group_row[rep]
    if rows.shape[0]:
        cols = [np.where(gr[:, None] >= 0, rows[np.maximum(gr, 0)], q)]
    else:  # no wide state outside the loops
        cols = [np.full((num, wide.shape[0]), q)]
    for lp, lw in zip(loops, walks, strict=True):
        gr = lw.group_row[rep]
        local = np.where(gr[:, None] >= 0, lw.rows[np.maximum(gr, 0)], lw.size)
        cols.append(np.append(lp.states, q)[local])
    out = np.concatenate([c.astype(dtype) for c in cols], axis=1)
    live = ~(out == q).all(axis=1)
    new_rows, row_of = unique_rows(out[live])
    ids = np.full(num, -1, dtype=np.int64)
    ids[live] = row_of
    all_wide = np.concatenate([wide.astype(np.int64)] + [lp.states for lp in loops])
    return all_wide, new_rows, ids[combo]


def _lanes_walk(flat: np.ndarray, trie: TokenTrie, depth, node, start, cur):
    """Live (terminal group, start state, end state) triples of sparse lanes: lane i is at
    trie node ``node[i]`` of level ``depth[i]`` (0: the root, no byte read yet) in byte
    state ``cur[i]``, having started in ``start[i]``; a lane at level d > 0 counts the
    token ending at its node."""
    order = np.argsort(depth, kind="stable")
    depth, node, start, cur = depth[order], node[order], start[order], cur[order]
    bounds = np.searchsorted(depth, np.arange(trie.depth + 2))
    last = int(depth[-1]) if depth.size else 0
    groups, starts, ends = [], [], []
    lane_node, lane_start, lane_cur = node[: bounds[1]], start[: bounds[1]], cur[: bounds[1]]
    for d in range(1, trie.depth + 1):
        check_time("the composition with the vocabulary")
        if lane_node.size == 0 and d > last:
            break
        if lane_node.size:
            rep, child = trie.children(d, lane_node)
            nxt = flat[lane_cur[rep] * NUM_BYTES + trie.byte[d][child]]
            keep = nxt >= 0
            lane_node, lane_start, lane_cur = child[keep], lane_start[rep[keep]], nxt[keep]
        lo, hi = bounds[d], bounds[d + 1]
        if hi > lo:  # lanes joining at this level
            lane_node = np.concatenate([lane_node, node[lo:hi]])
            lane_start = np.concatenate([lane_start, start[lo:hi]])
            lane_cur = np.concatenate([lane_cur, cur[lo:hi]])
        term = trie.terminal[d][lane_node]
        hit = term >= 0
        if hit.any():
            groups.append(term[hit])
            starts.append(lane_start[hit])
            ends.append(lane_cur[hit])
    if not groups:
        z = np.zeros(0, np.int64)
        return z, z, z
    return (
        np.concatenate(groups).astype(np.int64),
        np.concatenate(starts).astype(np.int64),
        np.concatenate(ends).astype(np.int64),
    )


def _dense_walk(byte_trans: np.ndarray, trie: TokenTrie, wide: np.ndarray):
    """Walks all wide states at once with hash-consed rows.

    Returns:
      rows: int[U, W], the distinct live rows (current state per wide start; Q = dead).
      group_row: int64[G], the row of each terminal group, -1 if dead everywhere.
    """
    q = byte_trans.shape[0]
    dtype = np.int16 if q < np.iinfo(np.int16).max else np.int32
    group_row = np.full(trie.num_groups, -1, dtype=np.int64)
    if wide.size == 0:
        return np.zeros((0, 0), dtype=dtype), group_row
    table = np.full((q + 1, NUM_BYTES), q, dtype=dtype)  # row q = dead sink
    table[:q] = np.where(byte_trans >= 0, byte_trans, q)
    # Bytes with equal columns act alike on every row.
    first_byte, byte_class = distinct_rows(table.T)
    byte_class = byte_class.astype(np.int64)
    num_classes = first_byte.shape[0]
    # Class-major: row c is class c's step from each state (1-D takes, `step_rows`).
    by_class = np.ascontiguousarray(table[:, first_byte].T)
    rows = wide[None, :].astype(dtype)  # the root's row
    # The live nodes of the previous level and their rows (their children are listed from
    # the trie's offsets: after the first levels few nodes stay live outside the loops).
    nodes = np.zeros(1, dtype=np.int64)
    node_row = np.zeros(1, dtype=np.int64)
    levels, offset = [], 0
    for d in range(1, trie.depth + 1):
        rep, sel = trie.children(d, nodes)
        if sel.size == 0:
            break
        key = node_row[rep] * num_classes + byte_class[trie.byte[d][sel]]
        ukey, key_of = unique_small(key, rows.shape[0] * num_classes)
        cur = step_rows(by_class, ukey % num_classes, rows, ukey // num_classes)
        # (the order of a level's rows is free: the ids across levels are canonical below)
        rows, row_of_key = unique_rows_unordered(cur)
        live = ~(rows == q).all(axis=1)
        ids = row_of_key[key_of]
        ids = np.where(live[ids], ids, -1)
        term = trie.terminal[d][sel]
        hit = (term >= 0) & (ids >= 0)
        group_row[term[hit]] = ids[hit] + offset
        levels.append(rows)
        offset += rows.shape[0]
        keep = ids >= 0
        nodes, node_row = sel[keep], ids[keep]
    # Canonical ids across levels: equal rows get one id.
    canon, canon_of = unique_rows(np.concatenate(levels))
    group_row = np.where(group_row >= 0, canon_of[np.maximum(group_row, 0)], -1)
    return canon, group_row


def _terminal_edges(dfa: ByteDFA, trie: TokenTrie, predicates, groups, starts):
    """Token-level (token, start, end) edges added by terminal labels (terminal states are narrow)."""
    toks, sts, ens = [], [], []
    vsize = trie.token_group.shape[0]
    term_trans = dfa.trans[:, NUM_BYTES:]
    tg = trie.token_group
    emitted = tg >= 0
    for q in np.flatnonzero((term_trans >= 0).any(axis=1)):
        taken = np.zeros(vsize, dtype=bool)  # tokens with a normal edge from q keep it
        taken[emitted] = np.isin(tg[emitted], groups[starts == q])
        for k in np.flatnonzero(term_trans[q] >= 0):
            new = np.asarray(predicates[k], dtype=bool) & ~taken
            taken |= new
            t = np.flatnonzero(new)
            toks.append(t)
            sts.append(np.full(t.shape, q))
            ens.append(np.full(t.shape, int(term_trans[q, k])))
    if not toks:
        z = np.zeros(0, np.int64)
        return z, z, z
    return (
        np.concatenate(toks),
        np.concatenate(sts).astype(np.int64),
        np.concatenate(ens).astype(np.int64),
    )


def _classes(num_states: int, trie: TokenTrie, walk: _Walk):
    """Groups tokens by their function; class 0 = never allowed.

    The dense part of a token's function is its canonical row id (exact); the sparse
    part is hashed as a sum (mod 2**64) over the token's (start, end) pairs of
    a[start] * b[end] and checked exactly afterwards by `_verify`. Tokens with no sparse
    pair (most of them) are grouped by their row id alone, by counting; the few with
    pairs by one sort of a key mixing row id and hash. The two never share a class (a
    class is then at most finer than the function: equal columns merge after
    minimization).

    Returns token_class int64[V] and one representative token per class (rep[0] = -1).
    """
    rng = np.random.default_rng(0xA17A)
    a = rng.integers(1, 2**63, size=num_states, dtype=np.uint64)
    b = rng.integers(1, 2**63, size=num_states, dtype=np.uint64)
    tg = trie.token_group
    # dense_id: 0 = dead from every wide state (or no group: the last slot, read by -1).
    dense_id = np.append(walk.group_row + 1, 0)[tg]
    # The tokens with sparse pairs: those of the groups with one, and terminal-label edges.
    seen = np.zeros(trie.num_groups, dtype=bool)
    seen[walk.groups] = True
    groups = np.flatnonzero(seen)  # = np.unique(walk.groups)
    go = trie.group_offsets
    counts = (go[groups + 1] - go[groups]).astype(np.int64)
    hashed = trie.group_tokens[ranges(go[groups], counts)].astype(np.int64)
    if walk.xtok.size:
        hashed = np.union1d(hashed, walk.xtok)  # sorted: terminal edges are found in it
    group_hash = _sum_by(walk.groups, a[walk.starts] * b[walk.ends], trie.num_groups)
    in_group = tg[hashed]
    h = np.where(in_group >= 0, group_hash[np.maximum(in_group, 0)], np.uint64(0))
    if walk.xtok.size:
        x = np.searchsorted(hashed, walk.xtok)
        h = h + _sum_by(x, a[walk.xstart] * b[walk.xend], hashed.shape[0])
    # Tokens without pairs: by row id (counting: class k + 1 for the k-th distinct nonzero
    # row id, 0 for none).
    plain = dense_id.copy()
    plain[hashed] = 0
    present = np.bincount(plain, minlength=1) > 0
    present[0] = False
    num_plain = int(present.sum())
    token_class = (np.cumsum(present) * present)[plain]
    # Tokens with pairs: one sort of one 64-bit key (a SIMD sort; `np.lexsort` of the
    # pair is 20x slower); the row ids are checked exactly below.
    d = dense_id[hashed].astype(np.uint64)
    for exact in (False, True):
        if exact:  # the mixed key collided across row ids
            order = np.lexsort((h, d))
            new = np.ones(hashed.shape[0], dtype=bool)
            new[1:] = (d[order][1:] != d[order][:-1]) | (h[order][1:] != h[order][:-1])
        else:
            key = h + d * MIX
            order = np.argsort(key)
            sorted_key = key[order]
            new = np.ones(hashed.shape[0], dtype=bool)
            new[1:] = sorted_key[1:] != sorted_key[:-1]
        inverse = np.empty(hashed.shape[0], dtype=np.int64)
        inverse[order] = np.cumsum(new) - 1
        first = np.full(int(new.sum()), hashed.shape[0], dtype=np.int64)
        first[inverse[::-1]] = np.arange(hashed.shape[0])[::-1]
        if (d[first[inverse]] == d).all():
            break
    pair_live = (h != 0) | (d != 0)
    # Renumber the classes densely (a pair class may hold only dead tokens), and pick
    # each class's first token.
    used = np.zeros(num_plain + int(new.sum()) + 1, dtype=bool)
    used[: num_plain + 1] = True
    used[inverse[pair_live] + 1 + num_plain] = True
    rank = np.cumsum(used) - 1  # rank[0] = 0: the dead class stays 0
    # (rank is the identity up to num_plain: only the pair classes move)
    token_class[hashed] = np.where(pair_live, rank[inverse + 1 + num_plain], 0)
    nonzero = np.flatnonzero(token_class)
    rep = np.full(int(used.sum()), -1, dtype=np.int64)
    rep[token_class[nonzero[::-1]]] = nonzero[::-1]
    return token_class, rep


def _sum_by(keys: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """uint64[size]: sum (mod 2**64) of ``values`` per key."""
    out = np.zeros(size, dtype=np.uint64)
    np.add.at(out, keys, values)  # unbuffered, wraps mod 2**64; no sort
    return out


def _columns(num_states: int, trie: TokenTrie, walk: _Walk, token_class, rep) -> np.ndarray:
    """int32[Q, C]: each class's column, read off its representative token."""
    num_classes = rep.shape[0]
    next_state = np.full((num_states, num_classes), -1, dtype=np.int32)
    rep_groups = trie.token_group[rep[1:]]
    has_group = rep_groups >= 0
    group_class = np.full(trie.num_groups, -1, dtype=np.int64)
    group_class[rep_groups[has_group]] = np.arange(1, num_classes)[has_group]
    if walk.wide.size:
        cls = np.arange(1, num_classes)[has_group]
        row = walk.group_row[rep_groups[has_group]]
        d = walk.rows[np.maximum(row, 0)].astype(np.int32)
        d[row < 0] = walk.sink
        next_state[np.ix_(walk.wide, cls)] = np.where(d == walk.sink, -1, d).T
    # Sparse pairs last: a wide start's pair (a token that left a loop) is dead in its row.
    sel = group_class[walk.groups] >= 0
    next_state[walk.starts[sel], group_class[walk.groups[sel]]] = walk.ends[sel]
    if walk.xtok.size:
        is_rep = rep[token_class[walk.xtok]] == walk.xtok
        next_state[walk.xstart[is_rep], token_class[walk.xtok[is_rep]]] = walk.xend[is_rep]
    return next_state


def _verify(next_state, token_class, class_rep, trie: TokenTrie, walk: _Walk) -> bool:
    """Exact check of the hashed (sparse) part: every token's pairs are its class column's
    (``class_rep``: each class's first token, as `_classes` gives it).

    The dense part needs no check: classes are keyed by the exact canonical row.
    """
    tg = trie.token_group
    vsize = tg.shape[0]
    gt, go = trie.group_tokens, trie.group_offsets
    # Sparse part: every pair of every token is in its class column ...
    counts = np.diff(go)[walk.groups]
    rep = np.repeat(np.arange(walk.groups.shape[0]), counts)
    toks = gt[ranges(go[walk.groups], counts)]
    if not (next_state[walk.starts[rep], token_class[toks]] == walk.ends[rep]).all():
        return False
    if walk.xtok.size and not (next_state[walk.xstart, token_class[walk.xtok]] == walk.xend).all():
        return False
    # ... and the column has no other edge from a narrow state, nor from a wide state
    # where the class's row is dead (a loop's exit is a sparse pair there).
    narrow = np.ones(next_state.shape[0], dtype=bool)
    narrow[walk.wide] = False
    per_token = np.bincount(toks, minlength=vsize)
    if walk.xtok.size:
        per_token += np.bincount(walk.xtok, minlength=vsize)
    per_class = (next_state[narrow] >= 0).sum(axis=0)
    if walk.wide.size:
        group = np.where(class_rep >= 0, tg[np.maximum(class_rep, 0)], -1)
        row = np.where(group >= 0, walk.group_row[np.maximum(group, 0)], -1)
        dead = walk.rows[np.maximum(row, 0)] == walk.sink  # [C, W]
        dead[row < 0] = True
        per_class += ((next_state[walk.wide] >= 0) & dead.T).sum(axis=0)
    if not (per_class[token_class] == per_token).all():
        return False
    return True
