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
from automata_compile.automata import NUM_BYTES, ByteDFA, check_time
from automata_compile.automata import dfa_ops as _dfa_ops
from automata_compile.tokens._rows import distinct_rows, unique_rows, unique_small
from automata_compile.tokens._token_trie import TokenTrie

# A state is wide when tokens whose first byte it allows exceed this share of the vocabulary.
WIDE_SHARE = 0.05


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
    if not _verify(next_state, token_class, trie, walk):  # pragma: no cover - about 2**-64
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
    dead = np.full((ns.shape[0], 1), -1, dtype=np.int32)
    first, col_id = _dfa_ops.unique_columns(np.concatenate([dead, ns], axis=1))
    new_next = np.ascontiguousarray(np.concatenate([dead, ns], axis=1)[:, first]).astype(np.int32)
    token_class = col_id[1:][token_class].astype(np.int32)
    if return_byte_states:
        byte_state = np.zeros(ns.shape[0], dtype=np.int32)
        byte_state[block[::-1]] = kept[::-1]  # the first kept byte state of each token state
        return token_class, new_next, acc, st, byte_state
    return token_class, new_next, acc, st


def _walk(dfa: ByteDFA, trie: TokenTrie, predicates) -> _Walk:
    q = dfa.num_states
    byte_trans = dfa.trans[:, :NUM_BYTES]
    has_terminal = (dfa.trans[:, NUM_BYTES:] >= 0).any(axis=1)
    estimate = (byte_trans >= 0).astype(np.int64) @ trie.first_byte_count
    wide_mask = (estimate > WIDE_SHARE * trie.token_group.shape[0]) & ~has_terminal
    wide = np.flatnonzero(wide_mask)
    narrow = np.flatnonzero(~wide_mask)
    groups, starts, ends = _sparse_walk(byte_trans, trie, narrow)
    rows, group_row = _dense_walk(byte_trans, trie, wide)
    xtok, xstart, xend = _terminal_edges(dfa, trie, predicates, groups, starts)
    return _Walk(groups, starts, ends, wide, rows, group_row, q, xtok, xstart, xend)


def _sparse_walk(byte_trans: np.ndarray, trie: TokenTrie, starts0: np.ndarray):
    """Live (terminal group, start state, end state) triples from ``starts0``."""
    flat = np.ascontiguousarray(byte_trans).reshape(-1)
    node = np.zeros(starts0.shape[0], dtype=np.int64)
    start = starts0.astype(np.int64)
    cur = start.copy()
    groups, starts, ends = [], [], []
    for d in range(1, trie.depth + 1):
        check_time("the composition with the vocabulary")
        if node.size == 0:
            break
        rep, child = trie.children(d, node)
        if child.size == 0:
            break
        nxt = flat[cur[rep] * NUM_BYTES + trie.byte[d][child]]
        keep = nxt >= 0
        node, start, cur = child[keep], start[rep[keep]], nxt[keep].astype(np.int64)
        term = trie.terminal[d][node]
        hit = term >= 0
        if hit.any():
            groups.append(term[hit])
            starts.append(start[hit])
            ends.append(cur[hit])
    if not groups:
        z = np.zeros(0, np.int64)
        return z, z, z
    return np.concatenate(groups).astype(np.int64), np.concatenate(starts), np.concatenate(ends)


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
    rows = wide[None, :].astype(dtype)  # the root's row
    node_row = np.zeros(1, dtype=np.int64)  # row of each node of the previous level, -1 = dead
    levels, offset = [], 0
    for d in range(1, trie.depth + 1):
        parent = trie.parent[d]
        sel = np.flatnonzero(node_row[parent] >= 0)
        if sel.size == 0:
            break
        key = node_row[parent[sel]] * num_classes + byte_class[trie.byte[d][sel]]
        ukey, key_of = unique_small(key, rows.shape[0] * num_classes)
        cur = table[rows[ukey // num_classes], first_byte[ukey % num_classes][:, None]]
        rows, row_of_key = unique_rows(cur)
        live = ~(rows == q).all(axis=1)
        ids = row_of_key[key_of]
        ids = np.where(live[ids], ids, -1)
        node_row = np.full(parent.shape[0], -1, dtype=np.int64)
        node_row[sel] = ids
        term = trie.terminal[d][sel]
        hit = (term >= 0) & (ids >= 0)
        group_row[term[hit]] = ids[hit] + offset
        levels.append(rows)
        offset += rows.shape[0]
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
    a[start] * b[end] and checked exactly afterwards by `_verify`.

    Returns token_class int64[V] and one representative token per class (rep[0] = -1).
    """
    vsize = trie.token_group.shape[0]
    rng = np.random.default_rng(0xA17A)
    a = rng.integers(1, 2**63, size=num_states, dtype=np.uint64)
    b = rng.integers(1, 2**63, size=num_states, dtype=np.uint64)
    group_hash = _sum_by(walk.groups, a[walk.starts] * b[walk.ends], trie.num_groups)
    tg = trie.token_group
    emitted = tg >= 0
    token_hash = np.zeros(vsize, dtype=np.uint64)
    token_hash[emitted] = group_hash[tg[emitted]]
    if walk.xtok.size:
        token_hash += _sum_by(walk.xtok, a[walk.xstart] * b[walk.xend], vsize)
    dense_id = np.zeros(vsize, dtype=np.uint64)  # 0 = dead from every wide state
    dense_id[emitted] = (walk.group_row[tg[emitted]] + 1).astype(np.uint64)
    live = np.flatnonzero((token_hash != 0) | (dense_id != 0))
    d, h = dense_id[live], token_hash[live]
    order = np.lexsort((h, d))
    new = np.ones(live.shape[0], dtype=bool)
    new[1:] = (d[order][1:] != d[order][:-1]) | (h[order][1:] != h[order][:-1])
    inverse = np.empty(live.shape[0], dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    token_class = np.zeros(vsize, dtype=np.int64)
    token_class[live] = inverse + 1
    rep = np.full(int(new.sum()) + 1, -1, dtype=np.int64)
    rep[token_class[live][::-1]] = live[::-1]
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
    sel = group_class[walk.groups] >= 0
    next_state[walk.starts[sel], group_class[walk.groups[sel]]] = walk.ends[sel]
    if walk.wide.size:
        cls = np.arange(1, num_classes)[has_group]
        row = walk.group_row[rep_groups[has_group]]
        d = walk.rows[np.maximum(row, 0)].astype(np.int32)
        d[row < 0] = walk.sink
        next_state[np.ix_(walk.wide, cls)] = np.where(d == walk.sink, -1, d).T
    if walk.xtok.size:
        is_rep = rep[token_class[walk.xtok]] == walk.xtok
        next_state[walk.xstart[is_rep], token_class[walk.xtok[is_rep]]] = walk.xend[is_rep]
    return next_state


def _verify(next_state, token_class, trie: TokenTrie, walk: _Walk) -> bool:
    """Exact check of the hashed (sparse) part: every token's pairs are its class column's.

    The dense part needs no check: classes are keyed by the exact canonical row.
    """
    tg = trie.token_group
    vsize = tg.shape[0]
    gt, go = trie.group_tokens, trie.group_offsets
    # Sparse part: every pair of every token is in its class column ...
    counts = np.diff(go)[walk.groups]
    rep = np.repeat(np.arange(walk.groups.shape[0]), counts)
    toks = gt[
        np.repeat(go[walk.groups] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    ]
    if not (next_state[walk.starts[rep], token_class[toks]] == walk.ends[rep]).all():
        return False
    if walk.xtok.size and not (next_state[walk.xstart, token_class[walk.xtok]] == walk.xend).all():
        return False
    # ... and the column has no other edge from a narrow state.
    narrow = np.ones(next_state.shape[0], dtype=bool)
    narrow[walk.wide] = False
    per_token = np.bincount(toks, minlength=vsize) + np.bincount(walk.xtok, minlength=vsize)
    per_class = (next_state[narrow] >= 0).sum(axis=0)
    if not (per_class[token_class] == per_token).all():
        return False
    return True
