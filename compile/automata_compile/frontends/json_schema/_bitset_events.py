"""The event table of the bitset any-order objects (see docs/any_order_bitset.md).

With ``_Options.bitset`` set to a `BitsetEvents`, an object whose properties may come in any
order is spelled as a loop over its properties with event symbols (the IR's `Event`,
column ``256 + e`` of the byte DFA) instead of one automaton state per set of properties
written: ``SET`` after a declared key's closing quote, ``CLEAR`` after ``{``, ``REQUIRE`` after
``}``. The runtime keeps the set as bits per open object.
"""

from __future__ import annotations

from automata_compile.automata import Automaton, Event, children

SET, CLEAR, REQUIRE = 0, 1, 2


class BitsetIneligible(Exception):
    """The schema cannot use the bitset path (the reason is the message); it compiles on the
    old path."""


class BitsetEvents:
    """Objects and events of one compile (hashed by identity: a compile's own key).

    Attributes:
      objects: per object, ``(pointer, base bit, number of bits, required bits)``.
      events: per event id, ``(kind, payload)``: ``(SET, bit)``, ``(CLEAR, object)`` or
        ``(REQUIRE, object)``.
    """

    def __init__(self):
        self.objects: list[tuple[str, int, int, frozenset]] = []
        self.events: list[tuple[int, int]] = []
        self._ids: dict = {}

    @property
    def num_bits(self) -> int:
        return sum(n for _, _, n, _ in self.objects)

    def add_object(self, ptr: str, n: int, required) -> int:
        base = self.num_bits
        self.objects.append((ptr, base, n, frozenset(required)))
        return len(self.objects) - 1

    def event(self, kind: int, payload: int) -> Event:
        key = (kind, payload)
        e = self._ids.get(key)
        if e is None:
            e = self._ids[key] = len(self.events)
            self.events.append(key)
        return Event(e)

    def masks(self, words: int):
        """Per event, its mask as uint32 words (``SET``: the bit; ``CLEAR``: the object's
        range; ``REQUIRE``: its required bits), as a list of int lists."""
        out = []
        for kind, payload in self.events:
            if kind == SET:
                bits = [payload]
            else:
                _, base, n, req = self.objects[payload]
                bits = range(base, base + n) if kind == CLEAR else [base + i for i in req]
            m = [0] * words
            for b in bits:
                m[b >> 5] |= 1 << (b & 31)
            out.append(m)
        return out


def has_event(nodes) -> bool:
    """Whether an `Event` occurs in any of the IR trees ``nodes`` (automata labels too)."""
    seen: set = set()
    todo = list(nodes)
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, Event):
            return True
        if isinstance(x, Automaton):
            todo.extend(lb for out in x.edges for lb, _ in out if not isinstance(lb, tuple))
        else:
            todo.extend(children(x))
    return False
