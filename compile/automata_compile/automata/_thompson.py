"""IR → Thompson NFA (`_fsa.NFA`), for any alphabet.

The tree structure (sequence, alternation, repetition, embedded automata) is the
same for every alphabet; only a character set's spelling differs: UTF-8 byte
sequences in `_byte_dfa`, atoms of a code-point partition in `_char_dfa`. A
subclass supplies `chars` (and `terminal` where the alphabet has terminal labels).
"""

from __future__ import annotations

from typing import NamedTuple

from automata_compile.automata import _fsa
from automata_compile.automata._ir import Alt, Automaton, Chars, Repeat, Seq, Terminal


class Builder:
    """Adds IR fragments to an `NFA`; ``build(node, s, e)`` connects ``s`` to ``e``.

    A subtree met again in one NFA (the same node: a JSON string's character, a property
    value used at several places) is copied from the fragment its first build made
    (`_Fragment`), not built again: the same states, edges and order a build makes, so the
    NFA is the same, state for state (`COPIES`)."""

    def __init__(self, nfa: _fsa.NFA):
        self.nfa = nfa
        self.copies: dict = {}  # id(node) -> (node, its `_Fragment`)
        self.unique = 0  # builds whose fragment depends on their context (`copyable`)

    def chars(self, ranges, s: int, e: int, memo: dict) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def terminal(self, node: Terminal, s: int, e: int) -> None:
        raise TypeError("terminal labels are only allowed in byte automata")

    def copyable(self, node) -> bool:
        """Whether a build of ``node`` makes the same fragment wherever it is met (a
        subclass whose builds depend on their context says no, and counts them in
        ``unique``, so that no tree holding one is copied either)."""
        return True

    def build(self, node, s: int, e: int) -> None:
        kind = type(node)
        if not COPIES or kind is Chars or kind is Terminal:
            self._build(node, s, e)
            return
        hit = self.copies.get(id(node))
        if hit is not None and hit[0] is node and hit[1].copy(self.nfa, s, e):
            return  # (the entry holds the node: its id is its own)
        nfa = self.nfa
        base, unique = len(nfa.edges), self.unique
        marks = (len(nfa.edges[s]), len(nfa.eps[s]), len(nfa.edges[e]), len(nfa.eps[e]))
        self._build(node, s, e)
        if self.unique == unique and self.copyable(node):
            frag = _Fragment.cut(nfa, base, s, e, marks)
            if frag is not None:
                self.copies[id(node)] = (node, frag)

    def forget(self, base: int) -> None:
        """Drops the fragments of states from ``base`` on (deleted from the NFA)."""
        self.copies = {k: v for k, v in self.copies.items() if v[1].end <= base}

    def _build(self, node, s: int, e: int) -> None:
        nfa = self.nfa
        if isinstance(node, Chars):
            self.chars(node.ranges, s, e, {})
        elif isinstance(node, Seq):
            units = _units(node.items) if LOOPS else node.items
            cur = s
            for i, item in enumerate(units):
                nxt = e if i == len(units) - 1 else nfa.state()
                if type(item) is _Loop:
                    self._loop(item, cur, nxt)
                else:
                    self.build(item, cur, nxt)
                cur = nxt
            if not node.items:
                nfa.eps[s].append(e)
        elif isinstance(node, Alt):
            shared = _either(node.options) if LOOPS and len(node.options) == 2 else None
            if shared is not None:
                self._either(*shared, s, e)
                return
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

    def _loop(self, loop: _Loop, s: int, e: int) -> None:
        """``a (sep a)*`` with one copy of ``a``: ``s`` enters ``a`` at ``top``, whose end
        ``mid`` leaves to ``e`` or spells ``sep`` back to ``top``."""
        nfa = self.nfa
        top = nfa.state()
        nfa.eps[s].append(top)
        mid = nfa.state()
        self.build(loop.body, top, mid)
        self.build(loop.sep, mid, top)
        nfa.eps[mid].append(e)

    def _either(self, first, sep, last, s: int, e: int) -> None:
        """``first | first sep last | last`` with one copy of each: ``s`` enters ``first``
        (whose end ``mid`` leaves to ``e`` or spells ``sep``) or ``last`` directly."""
        nfa = self.nfa
        top = nfa.state()
        nfa.eps[s].append(top)
        mid = nfa.state()
        self.build(first, top, mid)
        nfa.eps[mid].append(e)
        low = nfa.state()
        self.build(sep, mid, low)
        nfa.eps[s].append(low)
        self.build(last, low, e)

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


# Subtrees met again in one NFA are copied from their first fragment (`Builder.build`);
# False: each is built again (the same NFA, slower).
COPIES = True


class _Fragment(NamedTuple):
    """What one build of a node added to an NFA between ``s`` and ``e``: the edges it
    appended to ``s`` and its states ``base .. end - 1``, read where they lie (no build
    writes to a state another build made once that build is over; `Builder.forget` drops
    the fragments of states deleted)."""

    base: int
    end: int
    s: int
    e: int
    s_edges: list
    s_eps: list

    @staticmethod
    def cut(nfa: _fsa.NFA, base: int, s: int, e: int, marks) -> _Fragment | None:
        """The fragment made from state ``base`` on, ``s``'s rows past their ``marks``;
        None where the build wrote to ``e``'s rows."""
        if (len(nfa.edges[e]), len(nfa.eps[e])) != marks[2:] or s >= base or e >= base:
            return None
        return _Fragment(
            base, len(nfa.edges), s, e, nfa.edges[s][marks[0] :], nfa.eps[s][marks[1] :]
        )

    def copy(self, nfa: _fsa.NFA, s: int, e: int) -> bool:
        """Adds the fragment between ``s`` and ``e`` (its states numbered from the NFA's end,
        in order, under the NFA's budget as ``nfa.state`` allocates them); False (nothing
        added) where an edge of it leaves for a state other than its ``s`` and ``e``."""
        lo_, hi_ = self.base, self.end
        shift = len(nfa.edges) - lo_
        ends = {self.s: s, self.e: e}
        for t in range(lo_, hi_):
            ends[t] = t + shift
        try:
            s_edges = [(lo, hi, ends[t]) for lo, hi, t in self.s_edges]
            s_eps = [ends[t] for t in self.s_eps]
            edges = [[(lo, hi, ends[t]) for lo, hi, t in row] for row in nfa.edges[lo_:hi_]]
            eps = [[ends[t] for t in row] for row in nfa.eps[lo_:hi_]]
        except KeyError:
            return False
        nfa.reserve(hi_ - lo_)
        nfa.edges.extend(edges)
        nfa.eps.extend(eps)
        nfa.edges[s].extend(s_edges)
        nfa.eps[s].extend(s_eps)
        return True


# Sequences ``a (sep a)*`` (a JSON array's elements, ``[a, a, ...]``) are built with one copy
# of ``a`` looping through ``sep`` (`_units`); False: two copies, as the tree spells them.
LOOPS = True


class _Loop(NamedTuple):
    """``body (sep body)*`` as one unit of a sequence (`_units`)."""

    body: object
    sep: object


def _one_char(node) -> bool:
    return type(node) is Chars and len(node.ranges) == 1 and node.ranges[0][0] == node.ranges[0][1]


def _same(a, b) -> bool:
    """Whether two IR nodes are the same tree (identity first; cached hashes before a deep
    comparison)."""
    return a is b or (type(a) is type(b) and hash(a) == hash(b) and a == b)


def _units(items: tuple) -> tuple:
    """A sequence's items, with each ``a_1 .. a_m, Repeat(Seq(sep .., a_1 .. a_m), 0, None)``
    as one `_Loop` (``sep`` not empty; the longest such ``m``): the same language, ``a``
    once in the NFA instead of twice. Its subset construction meets each set of ``a``'s
    states once, not once per copy (the two copies' sets, distinct there, were merged only
    by minimization), so the minimal DFA is the same table with at most the states and work
    of the two-copy construction. The items as they are where there is no such loop (the
    NFA is then the two-copy construction's, state for state). A loop never takes the
    sequence's leading one-character literals: `_char_dfa._after_literal` and
    `_byte_dfa.lead_then_states` bound the construction of such a lead and a tail by the
    tail's own, as the lead's chain on the tail's NFA."""
    lead = 0  # the leading one-character literals: never part of a loop
    while lead < len(items) and _one_char(items[lead]):
        lead += 1
    out: list = []
    for item in items:
        if type(item) is Repeat and item.min == 0 and item.max is None and type(item.item) is Seq:
            inner = item.item.items
            for m in range(min(len(inner) - 1, len(out) - lead), 0, -1):
                tail = out[len(out) - m :]
                if all(
                    type(x) is not _Loop and _same(x, y)
                    for x, y in zip(tail, inner[len(inner) - m :], strict=True)
                ):
                    del out[len(out) - m :]
                    body, sep = _node(tail), _node(inner[: len(inner) - m])
                    out.append(_Loop(body, sep))
                    break
            else:
                out.append(item)
            continue
        out.append(item)
    return tuple(out) if len(out) != len(items) else items


def _items(node) -> tuple:
    return node.items if type(node) is Seq else (node,)


def _node(items) -> object:
    return items[0] if len(items) == 1 else Seq(tuple(items))


def _optional_seq(node):
    """The items of ``Repeat(Seq(items), 0, 1)``, else None."""
    if type(node) is Repeat and node.min == 0 and node.max == 1 and type(node.item) is Seq:
        return node.item.items
    return None


def _either(options) -> tuple | None:
    """(first, sep, last) where the two options spell ``first (sep last)? | last`` or
    ``(first sep)? last | first`` (declared-order objects: optional properties after or
    before the others), both ``first | first sep last | last``; else None. Built with one
    copy of each (`Builder._either`): the same language, each set of a copy's states met
    once by the subset construction, as in `_units`."""
    for x, y in (options, options[::-1]):
        if type(x) is not Seq or len(x.items) < 2:
            continue
        xs, ys = x.items, _items(y)
        m = len(ys)
        tail = _optional_seq(xs[-1])  # first (sep last)? | last
        if (
            tail is not None
            and len(tail) > m
            and all(_same(a, b) for a, b in zip(tail[len(tail) - m :], ys, strict=True))
        ):
            return _node(xs[:-1]), _node(tail[: len(tail) - m]), y
        head = _optional_seq(xs[0])  # (first sep)? last | first
        if (
            head is not None
            and len(head) > m
            and all(_same(a, b) for a, b in zip(head[:m], ys, strict=True))
        ):
            return y, _node(head[m:]), _node(xs[1:])
    return None


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
