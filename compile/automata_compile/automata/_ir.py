"""The compiler's IR: regular expressions over code points, shared by every front end.

Four node types over code points (``Chars``, ``Seq``, ``Alt``, ``Repeat``) plus
``Terminal`` (a token-level edge: one whole token satisfying a label) and
``Automaton`` (a character automaton, e.g. built by an extension or by a boolean
operation). `automata._byte_dfa` turns a tree into a minimal UTF-8 byte DFA.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib

from automata_compile.automata import _charsets as cs
from automata_compile.automata import _fsa


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


@dataclasses.dataclass(frozen=True)
class Event(Terminal):
    """An event symbol of the bitset any-order path (docs/any_order_bitset.md): column
    ``256 + index`` of the byte DFA like a `Terminal`, but no rule call (the front ends'
    rule passes leave it alone) and read by no token: `tokens.compose_bitset` takes it as
    soon as its state is reached."""


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


def fingerprint(node, memo: dict | None = None) -> bytes:
    """A digest of the tree's structure, `Automaton` nodes included (their edges, start and
    finals): trees with equal fingerprints build the same automata, so caches across
    compiles key on it (an `Automaton` node is otherwise compared by identity). Shared
    subtrees are digested once, without recursion. ``memo`` (digests by node id) may be
    shared by calls on trees that share subtrees (while they are alive).

    Each node keeps its digest (nodes are immutable), so a subtree met again by a later
    call, as the labels of an object are when it is sized, then built, then cached, is not
    digested again."""
    memo = {} if memo is None else memo
    stack = [node]
    while stack:
        x = stack[-1]
        if id(x) in memo:
            stack.pop()
            continue
        kept = x.__dict__.get(_FINGERPRINT)
        if kept is not None:
            memo[id(x)] = kept
            stack.pop()
            continue
        todo = [k for k in _children(x) if id(k) not in memo]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        memo[id(x)] = x.__dict__[_FINGERPRINT] = _digest(x, memo)
        if len(memo) & 1023 == 0:
            _fsa.check_time("the fingerprint of an automaton's IR")
    return memo[id(node)]


# The attribute a node's digest is kept in, in its ``__dict__`` (the nodes are frozen
# dataclasses: as `functools.cached_property` does, past the frozen ``__setattr__``).
_FINGERPRINT = "_fingerprint"


def children(node) -> tuple:
    """The subtrees of a `Seq`, `Alt` or `Repeat`; ``()`` for any other node (an
    `Automaton`'s IR labels are not counted: see `fingerprint` for a walk that includes them)."""
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Alt):
        return node.options
    if isinstance(node, Repeat):
        return (node.item,)
    return ()


def distinct_nodes(roots):
    """Each node of the IR trees ``roots`` once (a subtree shared by several parents, the same
    object, is visited once), an `Automaton`'s IR labels included; in no particular order."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        yield x
        stack.extend(_children(x))


def _plain_seq(*items):
    return Seq(tuple(items))


def _plain_alt(*options):
    return Alt(tuple(options))


def map_terminals(node, leaf, memo: dict, *, seq=_plain_seq, alt=_plain_alt, rep=Repeat):
    """``node`` with every `Terminal` (an `Event` too) ``t`` replaced by ``leaf(t)``, inside
    `Automaton` labels as well, rebuilt bottom up with ``seq(*items)`` / ``alt(*options)`` /
    ``rep(item, min, max)`` (the plain nodes by default; simplifying constructors such as
    `_content.seq` drop what ``leaf`` made empty). A subtree shared in the tree is rebuilt
    once (``memo``, by id; keep one memo per ``leaf``)."""

    def walk(node):
        hit = memo.get(id(node))
        if hit is not None:
            return hit[1]
        if isinstance(node, Terminal):
            out = leaf(node)
        elif isinstance(node, Seq):
            out = seq(*(walk(x) for x in node.items))
        elif isinstance(node, Alt):
            out = alt(*(walk(x) for x in node.options))
        elif isinstance(node, Repeat):
            out = rep(walk(node.item), node.min, node.max)
        elif isinstance(node, Automaton):
            edges = tuple(
                tuple((x if isinstance(x, tuple) else walk(x), r) for x, r in out)
                for out in node.edges
            )
            out = Automaton(edges=edges, start=node.start, finals=node.finals)
        else:
            out = node
        memo[id(node)] = (node, out)  # the node kept alive, so that its id is not reused
        return out

    return walk(node)


def _children(node) -> tuple:
    if isinstance(node, Automaton):
        return tuple(x for out in node.edges for x, _ in out if not isinstance(x, tuple))
    return children(node)


def _digest(node, memo: dict) -> bytes:
    """The node's digest from its children's (``memo``, by id); a tag per node kind and a
    count before each list keep distinct trees apart."""
    h = hashlib.blake2b(digest_size=16)
    if isinstance(node, Chars):
        h.update(b"C" + repr(node.ranges).encode())
    elif isinstance(node, Terminal):
        h.update((b"E%d" if isinstance(node, Event) else b"T%d") % node.index)
    elif isinstance(node, (Seq, Alt)):
        kids = _children(node)
        h.update(b"%c%d;" % (b"S" if isinstance(node, Seq) else b"A", len(kids)))
        for k in kids:
            h.update(memo[id(k)])
    elif isinstance(node, Repeat):
        h.update(b"R" + repr((node.min, node.max)).encode() + memo[id(node.item)])
    elif isinstance(node, Automaton):
        h.update(b"M" + repr((node.start, sorted(node.finals), len(node.edges))).encode())
        for out in node.edges:
            h.update(b"q%d;" % len(out))
            for label, target in out:
                if isinstance(label, tuple):  # a character set
                    h.update(b"c" + repr(label).encode())
                else:
                    h.update(b"n" + memo[id(label)])
                h.update(b"%d;" % target)
    else:
        raise TypeError(f"unknown IR node {node!r}")
    return h.digest()
