"""A byte trie over a vocabulary, stored level by level as NumPy arrays.

Built once per vocabulary (cached by fingerprint) and shared by every
compilation: walking the trie visits each shared token prefix once for all
DFA states at the same time (see `_compose`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading

import numpy as np

from automata_compile._ranges import ranges


@dataclasses.dataclass(frozen=True, eq=False)
class TokenTrie:
    """Attributes (level d = 1..depth; level 0 is the root, one node):

    parent: per level d, int32[N_d], the parent's index within level d-1, non-decreasing.
    byte: per level d, int32[N_d], the byte on the edge from the parent.
    child_start: per level d (0..depth-1), int32[N_d + 1], CSR offsets into level d+1.
    terminal: per level d, int32[N_d], index of the token group ending at this node or -1.
    group_tokens: int32[T], token ids grouped by terminal node (tokens with equal bytes share one).
    group_offsets: int32[G + 1], CSR offsets of each terminal group in ``group_tokens``.
    token_group: int32[V], group of each token, -1 for tokens that are never emitted as text.
    first_byte_count: int64[256], number of tokens starting with each byte.
    """

    parent: tuple
    byte: tuple
    child_start: tuple
    terminal: tuple
    group_tokens: np.ndarray
    group_offsets: np.ndarray
    token_group: np.ndarray
    first_byte_count: np.ndarray

    @property
    def depth(self) -> int:
        return len(self.parent) - 1

    @property
    def num_groups(self) -> int:
        return int(self.group_offsets.shape[0] - 1)

    @property
    def num_nodes(self) -> int:
        return sum(int(p.shape[0]) for p in self.parent)

    @functools.cached_property
    def lists(self) -> tuple:
        """(child_start, byte, terminal) as Python lists per level, for walks in Python
        (made on first use, once per vocabulary)."""
        return tuple([a.tolist() for a in x] for x in (self.child_start, self.byte, self.terminal))

    @functools.cached_property
    def emitted(self) -> tuple[np.ndarray, np.ndarray]:
        """(int64[E] the ids of the tokens emitted as text, int64[E] their groups)."""
        ids = np.flatnonzero(self.token_group >= 0)
        return ids, self.token_group[ids].astype(np.int64)

    @functools.cached_property
    def first_byte_nodes(self) -> np.ndarray:
        """int64[256]: the number of nodes below each first byte (how far a walk from a state
        taking that byte may go)."""
        out = np.zeros(256, np.int64)
        if not self.depth:
            return out
        top = np.arange(self.parent[1].shape[0])
        counts = np.ones(top.shape[0], np.int64)
        for d in range(2, self.depth + 1):
            top = top[self.parent[d]]
            counts += np.bincount(top, minlength=counts.shape[0])
        np.add.at(out, self.byte[1], counts)
        return out

    @functools.cached_property
    def child_keys(self) -> tuple:
        """Per level d, int64[N_d] ``parent * 256 + byte``, ascending: the child of a node on a
        byte is found by binary search (level 0: empty)."""
        keys = [np.zeros(0, np.int64)]
        keys += [
            p.astype(np.int64) * 256 + b
            for p, b in zip(self.parent[1:], self.byte[1:], strict=True)
        ]
        return tuple(keys)

    def children(self, d: int, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The children of level-``d - 1`` nodes ``node``, in one vectorized step.

        Returns:
          (rep, child): for each child, the index into ``node`` of its parent, and its id at
          level ``d`` (empty arrays when no node has a child).
        """
        cs = self.child_start[d - 1]
        lo = cs[node]
        counts = cs[node + 1] - lo
        rep = np.repeat(np.arange(node.shape[0]), counts)
        child = ranges(lo, counts)
        return rep, child


_CACHE: dict[str, TokenTrie] = {}
_LOCK = threading.Lock()


def trie_for(vocab) -> TokenTrie:
    """The trie of ``vocab`` (built on first use, then cached by fingerprint)."""
    key = vocab.fingerprint
    with _LOCK:
        trie = _CACHE.get(key)
    if trie is None:
        trie = build_trie(vocab.tokens)
        with _LOCK:
            _CACHE[key] = trie
    return trie


def build_trie(tokens) -> TokenTrie:
    """Builds the trie of the byte strings ``tokens`` (None / empty = never emitted)."""
    v = len(tokens)
    ids = [i for i, t in enumerate(tokens) if t]  # empty tokens make no progress: never allowed
    ids.sort(key=tokens.__getitem__)
    n = len(ids)
    lengths = np.fromiter((len(tokens[i]) for i in ids), dtype=np.int64, count=n)
    depth = int(lengths.max()) if n else 0
    flat = np.frombuffer(b"".join(tokens[i] for i in ids), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    # Longest common prefix of each token with its predecessor in sorted order.
    lcp = _lcp(flat, offsets, lengths)
    # Equal byte strings (e.g. a byte-fallback token and a one-byte piece) share a terminal group.
    same_as_prev = np.zeros(n, dtype=bool)
    same_as_prev[1:] = (lcp[1:] == lengths[1:]) & (lengths[1:] == lengths[:-1])
    group_of_sorted = np.cumsum(~same_as_prev) - 1
    num_groups = int(group_of_sorted[-1]) + 1 if n else 0
    group_tokens = np.asarray(ids, dtype=np.int32)
    group_offsets = np.searchsorted(group_of_sorted, np.arange(num_groups + 1)).astype(np.int32)
    token_group = np.full(v, -1, dtype=np.int32)
    token_group[group_tokens] = group_of_sorted

    root = np.full(1, -1, np.int32)
    parents, bytes_, terminals, child_starts = [root], [root], [root], []
    node_prev = np.zeros(n, dtype=np.int64)  # node of each sorted token at the previous level
    for d in range(1, depth + 1):
        sel = np.flatnonzero(lengths >= d)
        new = lcp[sel] < d
        local = np.cumsum(new) - 1
        first = sel[new]
        parent = node_prev[first].astype(np.int32)
        byte = flat[offsets[first] + d - 1].astype(np.int32)
        child_starts.append(
            np.searchsorted(parent, np.arange(parents[-1].shape[0] + 1)).astype(np.int32)
        )
        term = np.full(first.shape[0], -1, dtype=np.int32)
        ends = lengths[sel] == d
        term[local[ends]] = group_of_sorted[sel[ends]]
        node_prev[sel] = local
        parents.append(parent)
        bytes_.append(byte)
        terminals.append(term)
    child_starts.append(np.zeros(parents[-1].shape[0] + 1, dtype=np.int32))
    return TokenTrie(
        parent=tuple(parents),
        byte=tuple(bytes_),
        child_start=tuple(child_starts),
        terminal=tuple(terminals),
        group_tokens=group_tokens,
        group_offsets=group_offsets,
        token_group=token_group,
        first_byte_count=np.bincount(flat[offsets[:-1][lengths > 0]], minlength=256).astype(
            np.int64
        ),
    )


def _lcp(flat: np.ndarray, offsets: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    n = lengths.shape[0]
    lcp = np.zeros(n, dtype=np.int64)
    if n < 2:
        return lcp
    m = np.minimum(lengths[1:], lengths[:-1])
    cur = np.arange(1, n)
    k = 0
    active = np.flatnonzero(m > 0)
    while active.size:
        i = cur[active]
        eq = flat[offsets[i] + k] == flat[offsets[i - 1] + k]
        active = active[eq]
        lcp[active + 1] += 1
        k += 1
        active = active[m[active] > k]
    return lcp
