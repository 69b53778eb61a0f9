"""Cached token walks through a byte DFA's loops (the DFA composition's cross-schema cache).

A free JSON string is a small strongly connected *loop* of byte states (its content, the
escapes after a backslash, UTF-8 continuations) that every string property of every schema
repeats. Walking the vocabulary from its states visits nearly the whole trie, once per
composition. Here that walk is done once per loop *shape*: the loop's states are numbered
canonically (breadth first from a root, by byte), each byte edge is spelled as a local
state, dead, or *leaving* the loop, and the walk over that table is cached by its digest
(an LRU per vocabulary trie).

A cached walk gives each terminal group's row over the loop's states (local state where the
token ends inside the loop, else dead) and the *exits*: (trie node, loop start, state left
from) where a token's byte leaves the loop. Each copy of the loop in a byte DFA maps the
rows to its own states, and its exits continue as sparse lanes of the composition from the
state the byte enters (`_compose`), since that is the one part that depends on the schema.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
import weakref

import numpy as np

from automata_compile.automata import NUM_BYTES, check_time
from automata_compile.tokens._rows import distinct_rows, unique_rows, unique_small
from automata_compile.tokens._token_trie import TokenTrie

# A loop has at most this many states, found within this many states of its root.
MAX_LOOP = 64
BALL = 160
# Cached loop walks per vocabulary trie (each holds an int32 per terminal group).
CACHE_SIZE = 32


@dataclasses.dataclass(frozen=True, eq=False)
class LoopWalk:
    """Every token's walk from every state of one loop shape, stopped where it leaves.

    Attributes:
      size: n, the loop's states (local ids 0..n-1; n = dead or left).
      rows: int32[U, n], distinct live rows: the local state per local start, n where the
        token died or left the loop.
      group_row: int32[G], each terminal group's row, -1 where no start ends in the loop.
      exit_depth, exit_node: int64[X], the trie node (level, index) whose byte leaves.
      exit_start, exit_src: int64[X], the local start, and the local state left from.
    """

    size: int
    rows: np.ndarray
    group_row: np.ndarray
    exit_depth: np.ndarray
    exit_node: np.ndarray
    exit_start: np.ndarray
    exit_src: np.ndarray


@dataclasses.dataclass(frozen=True)
class Loop:
    """One copy of a loop in a byte DFA: ``states[i]`` is local state i; ``key`` its shape."""

    states: np.ndarray
    key: bytes


def find_loops(byte_trans: np.ndarray, roots: np.ndarray) -> list[Loop]:
    """The loops through ``roots`` (states with a byte edge to themselves), each root's
    strongly connected component as seen within `BALL` states of it, if it has at most
    `MAX_LOOP` states; a root already in an earlier loop is skipped.

    Any set of states is a valid loop (a walk leaving it continues outside); the component
    is just the set that keeps most walks inside. A root is first matched against the
    shapes seen before (`_match`, one NumPy step per state; a schema's strings are copies
    of one shape), and searched only where none fits.
    """
    q = byte_trans.shape[0]
    roots = roots[(byte_trans[roots] == roots[:, None]).any(axis=1)]
    if roots.size == 0:
        return []
    succ: dict[int, list[int]] = {}

    def successors(s: int) -> list[int]:
        out = succ.get(s)
        if out is None:
            row = byte_trans[s]
            out = succ[s] = np.unique(row[row >= 0]).tolist()
        return out

    taken = np.zeros(q + 1, dtype=bool)  # the last slot: -1, no edge
    loops = []
    with _LOCK:
        shapes = list(_SHAPES.items())[::-1]  # the most recent first
    for root in roots.tolist():
        if taken[root]:
            continue
        for shape_key, table in shapes:
            states = _match(byte_trans, root, table, taken)
            if states is not None:
                key = shape_key
                break
        else:
            states, key = _search(byte_trans, root, successors, taken)
            if states is None:
                taken[root] = True
                continue
        taken[states] = True
        loops.append(Loop(states, key))
    return loops


def _match(byte_trans, root: int, table: np.ndarray, taken: np.ndarray):
    """The states of a copy of the loop shape ``table`` rooted at ``root`` (local state 0),
    or None where ``root`` is not the root of one: every byte edge of every copy state
    must be the table's (a local state, dead, or a state outside the copy).

    Each local state but the root is reached by its first edge in the table (`_discovery`:
    from a state numbered before it), so the copy's states follow from ``root`` by one
    byte step each, and one comparison of the copy's rows with the table checks the rest.
    """
    n = table.shape[0]
    parents, bytes_ = _discovery(table)
    if parents is None:
        return None
    states = [root]
    for j, b in zip(parents, bytes_, strict=True):
        s = int(byte_trans[states[j], b])
        if s < 0:
            return None
        states.append(s)
    if len(set(states)) != n:
        return None
    states = np.asarray(states, dtype=np.int64)
    if taken[states].any():
        return None
    local = np.full(byte_trans.shape[0] + 1, n + 1, dtype=np.int16)
    local[-1] = n
    local[states] = np.arange(n, dtype=np.int16)
    if not np.array_equal(local[byte_trans[states]], table):
        return None
    return states


def _discovery(table: np.ndarray):
    """(parents, bytes) of local states 1..n-1: the first edge into each in the table's
    row-major order, as Python lists, or (None, None) where a state has none from a state
    numbered before it (not a breadth-first table). Memoized per table."""
    key = table.tobytes()
    with _LOCK:
        hit = _DISCOVERY.get(key)
    if hit is not None:
        return hit
    n = table.shape[0]
    flat = table.reshape(-1)
    pos = np.flatnonzero(flat < n)
    vals, first = np.unique(flat[pos], return_index=True)
    pos = pos[first]
    parents, bytes_ = (pos // NUM_BYTES)[vals > 0], (pos % NUM_BYTES)[vals > 0]
    ok = np.array_equal(vals[vals > 0], np.arange(1, n)) and bool((parents < vals[vals > 0]).all())
    out = (parents.tolist(), bytes_.tolist()) if ok else (None, None)
    with _LOCK:
        if len(_DISCOVERY) >= 4 * CACHE_SIZE:
            _DISCOVERY.clear()
        _DISCOVERY[key] = out
    return out


def _search(byte_trans, root: int, successors, taken):
    """(states, key) of the loop through ``root`` found by search (and its shape recorded),
    or (None, None)."""
    ball, seen = [root], {root}
    for s in ball:  # breadth first, grows while read
        for t in successors(s):
            if t not in seen and len(ball) < BALL:
                seen.add(t)
                ball.append(t)
    pred: dict[int, list[int]] = {s: [] for s in ball}
    for s in ball:
        for t in successors(s):
            if t in pred:
                pred[t].append(s)
    comp, stack = {root}, [root]
    while stack:
        for p in pred[stack.pop()]:
            if p not in comp:
                comp.add(p)
                stack.append(p)
    if len(comp) > MAX_LOOP or any(taken[s] for s in comp):
        return None, None
    states, table = _canonical(byte_trans, root, comp)
    key = hashlib.sha256(table.tobytes()).digest()
    with _LOCK:
        _SHAPES[key] = table
        _SHAPES.move_to_end(key)
        while len(_SHAPES) > CACHE_SIZE:
            _SHAPES.popitem(last=False)
    return states, key


def _canonical(byte_trans, root: int, comp: set[int]):
    """The loop's states in canonical order (breadth first from ``root``, successors in
    byte order) and its local table: int16[n, 256], local state, n = dead, n + 1 = left."""
    member = np.zeros(byte_trans.shape[0] + 1, dtype=bool)
    member[list(comp)] = True
    order, seen = [root], {root}
    for s in order:
        row = byte_trans[s]
        row = row[member[row]]
        _, first = np.unique(row, return_index=True)
        for t in row[np.sort(first)].tolist():
            if t not in seen:
                seen.add(t)
                order.append(t)
    states = np.asarray(order, dtype=np.int64)
    n = states.shape[0]
    local = np.full(byte_trans.shape[0] + 1, n + 1, dtype=np.int16)  # outside: left
    local[-1] = n  # -1 (no edge): dead
    local[states] = np.arange(n, dtype=np.int16)
    return states, local[byte_trans[states]]


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
STATS = collections.Counter()  # hits / misses, for benchmarks and tests
_SHAPES: collections.OrderedDict = collections.OrderedDict()  # key -> local table
_DISCOVERY: dict = {}  # a shape's table bytes -> its first edges (`_discovery`)


def loop_walk(byte_trans: np.ndarray, loop: Loop, trie: TokenTrie) -> LoopWalk:
    """The walk of ``loop``'s shape over ``trie`` (cached per trie by the shape's digest)."""
    with _LOCK:
        per_trie = _CACHE.setdefault(trie, collections.OrderedDict())
        hit = per_trie.get(loop.key)
        if hit is not None:
            per_trie.move_to_end(loop.key)
            STATS["hits"] += 1
            return hit
    local = np.full(byte_trans.shape[0] + 1, loop.states.shape[0] + 1, dtype=np.int16)
    local[-1] = loop.states.shape[0]
    local[loop.states] = np.arange(loop.states.shape[0], dtype=np.int16)
    walk = walk_table(local[byte_trans[loop.states]], trie)
    with _LOCK:
        STATS["misses"] += 1
        per_trie[loop.key] = walk
        while len(per_trie) > CACHE_SIZE:
            per_trie.popitem(last=False)
    return walk


def walk_table(local: np.ndarray, trie: TokenTrie) -> LoopWalk:
    """Walks every token from every local state of ``local`` (int16[n, 256]; n = dead,
    n + 1 = left) with hash-consed rows, recording where a token leaves."""
    n = local.shape[0]
    table = np.full((n + 2, NUM_BYTES), n, dtype=np.int16)
    table[:n] = local
    table[n + 1] = n + 1
    first_byte, byte_class = distinct_rows(table.T)
    byte_class = byte_class.astype(np.int64)
    nc = first_byte.shape[0]
    rows = np.arange(n, dtype=np.int16)[None, :]
    node_row = np.zeros(1, dtype=np.int64)
    group_row = np.full(trie.num_groups, -1, dtype=np.int64)
    levels, offset = [], 0
    exits = []
    for d in range(1, trie.depth + 1):
        check_time("the composition with the vocabulary")
        parent = trie.parent[d]
        sel = np.flatnonzero(node_row[parent] >= 0)
        if sel.size == 0:
            break
        key = node_row[parent[sel]] * nc + byte_class[trie.byte[d][sel]]
        ukey, key_of = unique_small(key, rows.shape[0] * nc)
        prev = rows[ukey // nc]
        cur = table[prev, first_byte[ukey % nc][:, None]]
        left = cur == n + 1
        if left.any():
            nodes = np.flatnonzero(left.any(axis=1)[key_of])
            k, i = np.nonzero(left[key_of[nodes]])
            exits.append((np.full(k.shape, d), sel[nodes[k]], i, prev[key_of[nodes[k]], i]))
            cur[left] = n
        rows, row_of_key = unique_rows(cur)
        live = ~(rows == n).all(axis=1)
        ids = row_of_key[key_of]
        ids = np.where(live[ids], ids, -1)
        node_row = np.full(parent.shape[0], -1, dtype=np.int64)
        node_row[sel] = ids
        term = trie.terminal[d][sel]
        hit = (term >= 0) & (ids >= 0)
        group_row[term[hit]] = ids[hit] + offset
        levels.append(rows)
        offset += rows.shape[0]
    if levels:
        canon, canon_of = unique_rows(np.concatenate(levels))
    else:
        canon, canon_of = np.zeros((0, n), np.int16), np.zeros(0, np.int64)
    group_row = np.where(group_row >= 0, canon_of[np.maximum(group_row, 0)], -1)
    ex = [np.concatenate(c).astype(np.int64) for c in zip(*exits, strict=True)] if exits else []
    z = np.zeros(0, np.int64)
    return LoopWalk(
        size=n,
        rows=canon.astype(np.int32),
        group_row=group_row.astype(np.int32),
        exit_depth=ex[0] if ex else z,
        exit_node=ex[1] if ex else z,
        exit_start=ex[2] if ex else z,
        exit_src=ex[3] if ex else z,
    )
