"""The compiler's IR: regular expressions over code points, shared by every front end.

Four node types over code points (``Chars``, ``Seq``, ``Alt``, ``Repeat``) plus
``Terminal`` (a token-level edge: one whole token satisfying a label) and
``Automaton`` (a character automaton, e.g. built by an extension or by a boolean
operation). `automata._byte_dfa` turns a tree into a minimal UTF-8 byte DFA.
"""

from __future__ import annotations

import dataclasses
import functools

from automata_compile.automata import _charsets as cs


@dataclasses.dataclass(frozen=True)
class Chars:
    """One character from a set of code points."""

    ranges: cs.Ranges


class _CachedHash:
    """Trees are keys of caches in the front ends: each node hashes once, when it is
    built (children first, so hashing a deep tree never recurses)."""

    def __post_init__(self):
        _ = self._hash

    def __hash__(self):
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        return hash(
            (type(self).__name__, *(getattr(self, f.name) for f in dataclasses.fields(self)))
        )


@dataclasses.dataclass(frozen=True)
class Seq(_CachedHash):
    """Concatenation; ``Seq(())`` is the empty string."""

    items: tuple
    __hash__ = _CachedHash.__hash__


@dataclasses.dataclass(frozen=True)
class Alt(_CachedHash):
    """Alternation; ``Alt(())`` is the empty language."""

    options: tuple
    __hash__ = _CachedHash.__hash__


@dataclasses.dataclass(frozen=True)
class Repeat(_CachedHash):
    item: object
    min: int
    max: int | None  # None = unbounded
    __hash__ = _CachedHash.__hash__


@dataclasses.dataclass(frozen=True)
class Terminal:
    """A token-level edge: one whole token satisfying terminal label ``index``."""

    index: int


@dataclasses.dataclass(frozen=True, eq=False)
class Automaton:
    """A character-level automaton: built by an extension, by a boolean operation on
    languages (intersection, complement), or by a counting construction of a front end.

    Attributes:
      edges: per state, a tuple of (label, target state); a label is a `Ranges` tuple
        (one character of the set) or an IR node (any string of its language, e.g. the
        JSON spellings of one character). Several edges may leave a state with the same
        label; the automaton need not be deterministic.
      start: initial state.
      finals: accepting states.
    """

    edges: tuple
    start: int
    finals: frozenset


EMPTY = Seq(())
NEVER = Alt(())
