"""The event table of the bitset any-order objects (see docs/any_order_bitset.md).

With ``_Options.bitset`` set to a `BitsetEvents`, an object whose properties may come in any
order is spelled as a loop over its properties with event symbols (the IR's `Event`,
column ``256 + e`` of the byte DFA) instead of one automaton state per set of properties
written: ``SET`` after a declared key's closing quote, ``CLEAR`` after ``{``, ``REQUIRE`` after
``}``. The runtime keeps the set as bits per open object.
"""

from __future__ import annotations

from automata_compile.automata import Event, distinct_nodes, map_terminals

SET, CLEAR, REQUIRE = 0, 1, 2


class BitsetIneligible(Exception):
    """The schema cannot use the bitset path (the reason is the message); it compiles on the
    old path."""


class BitsetSkip(Exception):
    """Translate again with the objects at ``pointers`` spelled by the counting automaton
    (an object that counts its properties, or is itself skipped, holds their events)."""

    def __init__(self, pointers):
        super().__init__(", ".join(sorted(pointers)))
        self.pointers = frozenset(pointers)


class BitsetEvents:
    """Objects and events of one compile (hashed by identity: a compile's own key).

    Attributes:
      objects: per object, ``(pointer, its bits, its required bits)`` (global bit numbers;
        the members of a union of objects share one bit per property name).
      events: per event id, ``(kind, bits)``: ``(SET, {bit})``, ``(CLEAR, an object's or a
        union's bits)`` or ``(REQUIRE, required bits)``; equal events share one id.
      owners: per event id, the pointers of the objects whose spelling holds it.
      skip: pointers of objects spelled by the counting automaton instead (exact any order
        within its budget, else declared order with a warning, as by default): objects whose
        events conflicted in a previous translation (`pipeline._bitset`).
    """

    def __init__(self, skip=()):
        self.objects: list[tuple[str, tuple, frozenset]] = []
        self.events: list[tuple[int, frozenset]] = []
        self.owners: dict[int, set] = {}
        self.skip: set = set(skip)
        self._ids: dict = {}
        self._bits = 0

    @property
    def num_bits(self) -> int:
        return self._bits

    def new_bit(self) -> int:
        self._bits += 1
        return self._bits - 1

    def add_object(self, ptr: str, bits, required) -> int:
        self.objects.append((ptr, tuple(bits), frozenset(required)))
        return len(self.objects) - 1

    def event(self, kind: int, bits, owners=()) -> Event:
        key = (kind, frozenset(bits))
        e = self._ids.get(key)
        if e is None:
            e = self._ids[key] = len(self.events)
            self.events.append(key)
        self.owners.setdefault(e, set()).update(owners)
        return Event(e)

    def owners_of(self, events) -> set:
        """The pointers of the objects owning the event ids ``events``."""
        out: set = set()
        for e in events:
            out |= self.owners.get(e, set())
        return out

    def masks(self, words: int):
        """Per event, its bits as ``words`` uint32 words (a list of int lists)."""
        out = []
        for _, bits in self.events:
            m = [0] * words
            for b in bits:
                m[b >> 5] |= 1 << (b & 31)
            out.append(m)
        return out


def has_event(nodes) -> bool:
    """Whether an `Event` occurs in any of the IR trees ``nodes`` (automata labels too)."""
    return bool(events_in(nodes, first=True))


def events_in(nodes, first: bool = False) -> set:
    """The ids of the `Event`s in the IR trees ``nodes`` (automata labels too); ``first``:
    stop at the first one."""
    out: set = set()
    for x in distinct_nodes(nodes):
        if isinstance(x, Event):
            out.add(x.index)
            if first:
                return out
    return out


def shift_events(node, offset: int, memo: dict | None = None):
    """``node`` with every ``Event(e)`` renumbered to ``Event(e + offset)`` (in a grammar's
    root the columns ``256 + j`` below ``offset`` are rule calls)."""

    def leaf(t):
        return Event(t.index + offset) if isinstance(t, Event) else t

    return map_terminals(node, leaf, {} if memo is None else memo)
