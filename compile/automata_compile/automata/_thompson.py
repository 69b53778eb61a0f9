"""IR → Thompson NFA (`_fsa.NFA`), for any alphabet.

The tree structure (sequence, alternation, repetition, embedded automata) is the
same for every alphabet; only a character set's spelling differs: UTF-8 byte
sequences in `_byte_dfa`, atoms of a code-point partition in `_char_dfa`. A
subclass supplies `chars` (and `terminal` where the alphabet has terminal labels).
"""

from __future__ import annotations

from automata_compile.automata import _fsa
from automata_compile.automata._ir import Alt, Automaton, Chars, Repeat, Seq, Terminal


class Builder:
    """Adds IR fragments to an `NFA`; ``build(node, s, e)`` connects ``s`` to ``e``."""

    def __init__(self, nfa: _fsa.NFA):
        self.nfa = nfa

    def chars(self, ranges, s: int, e: int, memo: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def terminal(self, node: Terminal, s: int, e: int) -> None:
        raise TypeError("terminal labels are only allowed in byte automata")

    def build(self, node, s: int, e: int) -> None:
        nfa = self.nfa
        if isinstance(node, Chars):
            self.chars(node.ranges, s, e, {})
        elif isinstance(node, Seq):
            cur = s
            for i, item in enumerate(node.items):
                nxt = e if i == len(node.items) - 1 else nfa.state()
                self.build(item, cur, nxt)
                cur = nxt
            if not node.items:
                nfa.eps[s].append(e)
        elif isinstance(node, Alt):
            for option in node.options:
                a, b = nfa.state(), nfa.state()
                nfa.eps[s].append(a)
                self.build(option, a, b)
                nfa.eps[b].append(e)
        elif isinstance(node, Repeat):
            self._repeat(node, s, e)
        elif isinstance(node, Terminal):
            self.terminal(node, s, e)
        elif isinstance(node, Automaton):
            self._automaton(node, s, e)
        else:  # pragma: no cover - front ends produce nothing else
            raise TypeError(f"unknown IR node {node!r}")

    def _repeat(self, node: Repeat, s: int, e: int) -> None:
        node = flatten_repeat(node)
        nfa = self.nfa
        cur = s
        for _ in range(node.min):
            nxt = nfa.state()
            self.build(node.item, cur, nxt)
            cur = nxt
        if node.max is None:
            loop = nfa.state()
            nfa.eps[cur].append(loop)
            body_end = nfa.state()
            self.build(node.item, loop, body_end)
            nfa.eps[body_end].append(loop)
            nfa.eps[loop].append(e)
            return
        nfa.eps[cur].append(e)
        for _ in range(node.max - node.min):
            nxt = nfa.state()
            self.build(node.item, cur, nxt)
            nfa.eps[nxt].append(e)
            cur = nxt

    def _automaton(self, node: Automaton, s: int, e: int) -> None:
        nfa = self.nfa
        ids = [nfa.state() for _ in node.edges]
        nfa.eps[s].append(ids[node.start])
        memos: dict[int, dict] = {}
        for src, out in enumerate(node.edges):
            for label, dst in out:
                if isinstance(label, tuple):  # a character set
                    self.chars(label, ids[src], ids[dst], memos.setdefault(dst, {}))
                else:  # an IR subtree (e.g. the JSON spellings of a character)
                    self.build(label, ids[src], ids[dst])
        for f in node.finals:
            nfa.eps[ids[f]].append(e)


def flatten_repeat(node: Repeat) -> Repeat:
    """``(C{a,b}){c,d}`` for one character set C is ``C{a*c, b*d}`` when the lengths it
    allows, the union of ``[j*a, j*b]`` for ``j`` in ``[c, d]``, leave no gap; the check at
    the smallest ``j`` suffices, as the gaps shrink with ``j``. Stacked bounded repeats
    such as ``(.{0,100}){10}`` then build a small NFA instead of one whose subset
    construction meets sets of a thousand states."""
    inner = node.item
    if not (isinstance(inner, Repeat) and isinstance(inner.item, Chars)):
        return node
    a, b, c, d = inner.min, inner.max, node.min, node.max
    if d is not None and d <= c:
        return node if d < c or d == 0 else Repeat(inner.item, a * c, None if b is None else b * c)
    gap_free = a <= 1 if (b is None and c == 0) else b is None or (c + 1) * a <= c * b + 1
    if not gap_free:
        return node
    if b == 0:
        return Repeat(inner.item, 0, 0)
    return Repeat(inner.item, a * c, None if b is None or d is None else b * d)
