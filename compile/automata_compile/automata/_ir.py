"""The compiler's IR: regular expressions over code points, shared by every front end.

Four node types over code points (``Chars``, ``Seq``, ``Alt``, ``Repeat``) plus
``Terminal`` (a token-level edge: one whole token satisfying a label) and
``Automaton`` (a character automaton, e.g. built by an extension or by a boolean
operation). `automata._byte_dfa` turns a tree into a minimal UTF-8 byte DFA.
"""

from __future__ import annotations

import dataclasses

from automata_compile.automata import _charsets as cs


@dataclasses.dataclass(frozen=True)
class Chars:
    """One character from a set of code points."""

    ranges: cs.Ranges


@dataclasses.dataclass(frozen=True)
class Seq:
    items: tuple


@dataclasses.dataclass(frozen=True)
class Alt:
    options: tuple


@dataclasses.dataclass(frozen=True)
class Repeat:
    item: object
    min: int
    max: int | None  # None = unbounded


@dataclasses.dataclass(frozen=True)
class Terminal:
    """A token-level edge: one whole token satisfying terminal label ``index``."""

    index: int


@dataclasses.dataclass(frozen=True, eq=False)
class Automaton:
    """A character-level DFA built by an extension.

    Attributes:
      edges: per state, a tuple of (Ranges, target state).
      start: initial state.
      finals: accepting states.
    """

    edges: tuple
    start: int
    finals: frozenset


EMPTY = Seq(())
