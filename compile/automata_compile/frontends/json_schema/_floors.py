"""Lower bounds of a label's minimal byte-DFA size, from its IR alone (no construction).

The any-order budget (`_emitter._OrderBudget`) sums the labels' minimal byte-DFA sizes
over the counting automaton's edges. Building those DFAs is most of an any-order object's
translation, and where the object is refused anyway (declared order then) the work is
lost. A DFA that accepts some string, and none shorter than ``L`` symbols, has at least
``L + 1`` states (a shortest accepted path visits no state twice), so ``L + 1`` bounds
the size from below without building anything; `_emitter._refused_by_floors` replays the
budget with these floors and refuses the object where the floors alone pass the budget:
the true sizes pass it too, at the same point or earlier, with the same reason.
"""

from __future__ import annotations

import heapq

from automata_compile.automata import Alt, Automaton, Chars, Repeat, Seq, Terminal, check_time

_SURROGATES = (0xD800, 0xDFFF)


def _has_char(ranges) -> bool:
    """Whether a character set holds a character (a code point that is no surrogate)."""
    return any(lo < _SURROGATES[0] or hi > _SURROGATES[1] for lo, hi in ranges)


def shortest(node, memo: dict) -> tuple[bool, int]:
    """(surely nonempty, floor): whether the language certainly holds a string, and a
    length every string of it has at least (in characters, each at least one byte; a rule
    call is one symbol). Unknown nodes (anchors) are (False, 0). ``memo``: by ``id``, kept
    with the node (``memo[id] = (node, out)``) so an id is never reused while cached."""
    hit = memo.get(id(node))
    if hit is not None:
        return hit[1]
    kind = type(node)
    if kind is Chars:
        out = (_has_char(node.ranges), 1)
    elif kind is Seq:
        parts = [shortest(x, memo) for x in node.items]
        out = (all(p[0] for p in parts), sum(p[1] for p in parts))
    elif kind is Alt:
        parts = [shortest(x, memo) for x in node.options]
        out = (any(p[0] for p in parts), min((p[1] for p in parts), default=0))
    elif kind is Repeat:
        sure, floor = shortest(node.item, memo)
        out = (node.min == 0 or sure, node.min * floor)
    elif isinstance(node, Terminal):
        out = (True, 1)
    elif kind is Automaton:
        out = _automaton(node, memo)
    else:
        out = (False, 0)
    memo[id(node)] = (node, out)
    if len(memo) & 1023 == 0:
        check_time("the any-order budget's floors")
    return out


def _automaton(node: Automaton, memo: dict) -> tuple[bool, int]:
    """Shortest paths over the edges' floors (Dijkstra); surely nonempty where a final
    state is reached along surely nonempty labels."""

    def label(x):
        return (_has_char(x), 1) if isinstance(x, tuple) else shortest(x, memo)

    edges = [[(label(x), q) for x, q in out] for out in node.edges]
    dist = {node.start: 0}
    heap = [(0, node.start)]
    while heap:
        d, p = heapq.heappop(heap)
        if d > dist[p]:
            continue
        for (_, w), q in edges[p]:
            if d + w < dist.get(q, d + w + 1):
                dist[q] = d + w
                heapq.heappush(heap, (d + w, q))
    floor = min((dist[f] for f in node.finals if f in dist), default=0)
    seen, stack = {node.start}, [node.start]
    while stack:
        for lab, q in edges[stack.pop()]:
            if lab[0] and q not in seen:
                seen.add(q)
                stack.append(q)
    return (any(f in seen for f in node.finals), floor)


def size_floor(node, memo: dict) -> int:
    """At most the states of ``node``'s minimal byte DFA: ``L + 1`` where the language
    surely holds a string and none shorter than ``L``; 0 where it may be empty (its size
    is 0 then)."""
    sure, floor = shortest(node, memo)
    return floor + 1 if sure else 0
