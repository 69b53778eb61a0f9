"""Regex IR → minimal UTF-8 byte DFA (Thompson NFA, subset construction, Moore).

Symbols 0..255 are bytes; symbol 256 + k is terminal label k (an edge that
consumes one whole token satisfying the label's predicate, see `_compose`).
Character sets are spelled in UTF-8, so only valid UTF-8 can be produced, and
a byte that is half of a multi-byte character is allowed exactly when the
language allows some character starting with it.
"""

from __future__ import annotations

import bisect
import dataclasses

import numpy as np

from automata_compile._errors import EmptyLanguageError, StateBudgetExceededError
from automata_compile.automata import _charsets as cs
from automata_compile.automata import _dfa_ops
from automata_compile.automata._ir import Alt, Automaton, Chars, Repeat, Seq, Terminal

NUM_BYTES = 256
DEFAULT_MAX_STATES = 100_000


@dataclasses.dataclass(frozen=True, eq=False)
class ByteDFA:
    """A trimmed, minimal DFA over bytes (+ terminal labels).

    Attributes:
      trans: int32[Q, 256 + K]; -1 = no edge.
      accepting: bool[Q].
      start: initial state.
    """

    trans: np.ndarray
    accepting: np.ndarray
    start: int

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def num_terminals(self) -> int:
        return int(self.trans.shape[1]) - NUM_BYTES

    def matches(self, data: bytes) -> bool:
        """Full match of ``data`` (bytes only), for tests."""
        q = self.start
        for b in data:
            q = int(self.trans[q, b])
            if q < 0:
                return False
        return bool(self.accepting[q])


class _NFA:
    def __init__(self, max_states: int):
        self.edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []
        self.max_states = max_states

    def state(self) -> int:
        if len(self.edges) >= self.max_states:
            raise StateBudgetExceededError(
                f"the pattern's automaton exceeds {self.max_states} NFA states; simplify the "
                "pattern (large bounded repeats multiply states) or raise max_states"
            )
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def build(self, node, s: int, e: int) -> None:
        """Adds a fragment for ``node`` from state ``s`` to state ``e``."""
        if isinstance(node, Chars):
            self._chars(node.ranges, s, e, {})
        elif isinstance(node, Seq):
            cur = s
            for i, item in enumerate(node.items):
                nxt = e if i == len(node.items) - 1 else self.state()
                self.build(item, cur, nxt)
                cur = nxt
            if not node.items:
                self.eps[s].append(e)
        elif isinstance(node, Alt):
            for option in node.options:
                a, b = self.state(), self.state()
                self.eps[s].append(a)
                self.build(option, a, b)
                self.eps[b].append(e)
        elif isinstance(node, Repeat):
            self._repeat(node, s, e)
        elif isinstance(node, Terminal):
            k = NUM_BYTES + node.index
            self.edges[s].append((k, k, e))
        elif isinstance(node, Automaton):
            self._automaton(node, s, e)
        else:  # pragma: no cover - the parser produces nothing else
            raise TypeError(f"unknown regex IR node {node!r}")

    def _chars(self, ranges, s, e, suffix_memo) -> None:
        # Sequences of byte ranges share their suffix states (memo keyed by the remaining ranges).
        for seq in cs.utf8_sequences(ranges):
            nxt = e
            for k in range(len(seq) - 1, 0, -1):
                key = seq[k:]
                st = suffix_memo.get(key)
                if st is None:
                    st = self.state()
                    lo, hi = seq[k]
                    self.edges[st].append((lo, hi, nxt))
                    suffix_memo[key] = st
                nxt = st
            lo, hi = seq[0]
            self.edges[s].append((lo, hi, nxt))

    def _repeat(self, node: Repeat, s, e) -> None:
        cur = s
        for _ in range(node.min):
            nxt = self.state()
            self.build(node.item, cur, nxt)
            cur = nxt
        if node.max is None:
            loop = self.state()
            self.eps[cur].append(loop)
            body_end = self.state()
            self.build(node.item, loop, body_end)
            self.eps[body_end].append(loop)
            self.eps[loop].append(e)
            return
        self.eps[cur].append(e)
        for _ in range(node.max - node.min):
            nxt = self.state()
            self.build(node.item, cur, nxt)
            self.eps[nxt].append(e)
            cur = nxt

    def _automaton(self, node: Automaton, s, e) -> None:
        ids = [self.state() for _ in node.edges]
        self.eps[s].append(ids[node.start])
        memos: dict[int, dict] = {}
        for src, out in enumerate(node.edges):
            for ranges, dst in out:
                self._chars(ranges, ids[src], ids[dst], memos.setdefault(dst, {}))
        for f in node.finals:
            self.eps[ids[f]].append(e)


def build_byte_dfa(ir, num_terminals: int = 0, *, max_states: int | None = None) -> ByteDFA:
    """Compiles the regex IR to a trimmed, minimal byte DFA.

    Raises:
      EmptyLanguageError: the pattern matches nothing.
      StateBudgetExceededError: the DFA would exceed ``max_states``.
    """
    max_states = max_states or DEFAULT_MAX_STATES
    nfa = _NFA(max_nfa_states(max_states))
    s, e = nfa.state(), nfa.state()
    nfa.build(ir, s, e)
    trans, accepting = _determinize(nfa, s, e, NUM_BYTES + num_terminals, max_states)
    trimmed = _dfa_ops.trim(trans, accepting, 0)
    if trimmed is None:
        raise EmptyLanguageError("the pattern matches no string (its language is empty)")
    trans, accepting, start = trimmed
    trans, accepting, start, _ = _dfa_ops.minimize(trans, accepting, start)
    return ByteDFA(trans=trans, accepting=accepting, start=start)


def max_nfa_states(max_states: int) -> int:
    return max(20 * max_states, 200_000)


def _determinize(nfa: _NFA, s: int, e: int, num_symbols: int, max_states: int):
    closures: dict[int, frozenset] = {}

    def closure(x: int) -> frozenset:
        c = closures.get(x)
        if c is None:
            stack, seen = [x], {x}
            while stack:
                y = stack.pop()
                for z in nfa.eps[y]:
                    if z not in seen:
                        seen.add(z)
                        stack.append(z)
            c = frozenset(y for y in seen if nfa.edges[y] or y == e)
            closures[x] = c
        return c

    start = closure(s)
    ids = {start: 0}
    order = [start]
    rows: list[np.ndarray] = []
    accepting: list[bool] = []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        accepting.append(e in cur)
        row = np.full(num_symbols, -1, dtype=np.int32)
        edges = [edge for x in cur for edge in nfa.edges[x]]
        if edges:
            points = sorted({lo for lo, _, _ in edges} | {hi + 1 for _, hi, _ in edges})
            targets: list[set] = [set() for _ in points]
            for lo, hi, t in edges:
                a = bisect.bisect_left(points, lo)
                b = bisect.bisect_left(points, hi + 1)
                for k in range(a, b):
                    targets[k].add(t)
            for k in range(len(points) - 1):
                if not targets[k]:
                    continue
                key = frozenset().union(*(closure(t) for t in targets[k]))
                d = ids.get(key)
                if d is None:
                    d = len(order)
                    if d >= max_states:
                        raise StateBudgetExceededError(
                            f"the pattern's byte DFA exceeds max_states={max_states}; simplify the "
                            "pattern or raise max_states"
                        )
                    ids[key] = d
                    order.append(key)
                row[points[k] : points[k + 1]] = d
        rows.append(row)
    return np.stack(rows), np.array(accepting, dtype=bool)
