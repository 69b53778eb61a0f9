"""Regex IR → minimal UTF-8 byte DFA (Thompson NFA, subset construction, Moore; `_fsa`).

Symbols 0..255 are bytes; symbol 256 + k is terminal label k (an edge that
consumes one whole token satisfying the label's predicate, see `_compose`).
Character sets are spelled in UTF-8, so only valid UTF-8 can be produced, and
a byte that is half of a multi-byte character is allowed exactly when the
language allows some character starting with it.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import weakref

import numpy as np

from automata_compile._errors import EmptyLanguageError, StateBudgetExceededError
from automata_compile.automata import _charsets as cs
from automata_compile.automata import _fsa, _subset, _thompson
from automata_compile.automata._ir import Automaton, Chars, Terminal, fingerprint

NUM_BYTES = 256
DEFAULT_MAX_STATES = 100_000


@dataclasses.dataclass(frozen=True, eq=False)
class ByteDFA(_fsa.DFA):
    """A trimmed, minimal DFA over bytes (+ terminal labels).

    Attributes:
      trans: int32[Q, 256 + K]; -1 = no edge.
      accepting: bool[Q].
      start: initial state.
    """

    @property
    def num_terminals(self) -> int:
        return int(self.trans.shape[1]) - NUM_BYTES

    def matches(self, data: bytes) -> bool:
        """Full match of ``data`` (bytes only), for tests."""
        return self.run(data)


def _spelling(seqs) -> tuple:
    """The UTF-8 sequences of a character set as `_Bytes.chars` spells them: per sequence
    its first byte range and its suffixes, longest last (``(seq[k:], *seq[k])`` for k from
    the end down to 1), so a spelling slices no tuple again each time the set recurs."""
    return tuple(
        (*seq[0], tuple((seq[k:], *seq[k]) for k in range(len(seq) - 1, 0, -1))) for seq in seqs
    )


class _Bytes(_thompson.Builder):
    """Spells character sets in UTF-8; terminal label k is symbol 256 + k.

    An automaton whose edges hold IR labels (a counting construction: an object's
    properties in any order) is built as a *piece* where the NFA copies it (inside a
    repeat or another such automaton) and its fragment passes `PIECE_MIN_STATES`: the
    fragment is determinized and minimized alone, once, and its minimal DFA takes the
    place of each copy (the same language, see `_piece_of`). A tree whose byte DFA is
    known (`_PIECES`: a piece, a label `cached_byte_dfa` built) is spliced likewise."""

    def __init__(self, nfa: _fsa.NFA, pieces: bool = True):
        super().__init__(nfa)
        self.spellings: dict = {}  # ranges -> their `_spelling` (sets recur in a tree)
        self.pieces = pieces and PIECES
        self.depth = 0  # composite automata around the node being built
        self.repeats = 0  # repeats around it

    def build(self, node, s: int, e: int) -> None:
        kind = type(node)
        if not self.pieces or kind is Chars or kind is Terminal:
            super().build(node, s, e)
        elif (piece := _piece(node)) is not None:  # built before (a label sized, a piece)
            self._splice(piece, s, e)
        elif kind is Automaton and _composite(node):
            self.depth += 1
            try:
                self._piece_build(node, s, e)
            finally:
                self.depth -= 1
                self.unique += 1  # built in place or as a piece: by its context
        else:
            super().build(node, s, e)

    def copyable(self, node) -> bool:
        return not (self.pieces and type(node) is Automaton and _composite(node))

    def _repeat(self, node, s: int, e: int) -> None:
        self.repeats += 1
        try:
            super()._repeat(node, s, e)
        finally:
            self.repeats -= 1

    def _piece_build(self, node: Automaton, s: int, e: int) -> None:
        if self.depth == 1 and not self.repeats:
            # built once, in no other composite: its construction alone would be as long
            # as within the whole (whose other parts it does not meet)
            super().build(node, s, e)
            return
        nfa = self.nfa  # (no piece yet: `build` looked)
        base, entries = len(nfa.edges), len(nfa.eps[s])
        super().build(node, s, e)  # in place: small fragments stay as built
        if len(nfa.edges) - base <= PIECE_MIN_STATES:
            return
        piece = _piece_of(node, nfa, base, s, e, entries)
        if piece is None:  # past a budget alone: the fragment stays as built
            return
        del nfa.edges[base:]
        del nfa.eps[base:]
        del nfa.eps[s][entries:]
        self.forget(base)
        self._splice(piece, s, e)

    def _splice(self, piece, s: int, e: int) -> None:
        rows, start, finals = piece
        nfa = self.nfa
        base = len(nfa.edges)
        for _ in rows:
            nfa.state()
        edges, eps = nfa.edges, nfa.eps
        for i, row in enumerate(rows):
            if row:
                edges[base + i].extend([(lo, hi, base + t) for lo, hi, t in row])
        if rows:
            eps[s].append(base + start)
        for f in finals:
            eps[base + f].append(e)

    def chars(self, ranges, s, e, memo) -> None:
        # Sequences of byte ranges share their suffix states (memo keyed by the remaining ranges).
        nfa = self.nfa
        edges = nfa.edges
        plan = self.spellings.get(ranges)
        if plan is None:
            plan = self.spellings[ranges] = _spelling(cs.utf8_sequences(ranges))
        out = edges[s]
        for lo, hi, suffixes in plan:
            nxt = e
            for key, klo, khi in suffixes:  # none for one byte range
                st = memo.get(key)
                if st is None:
                    st = nfa.state()
                    edges[st].append((klo, khi, nxt))
                    memo[key] = st
                nxt = st
            out.append((lo, hi, nxt))

    def terminal(self, node: Terminal, s, e) -> None:
        k = NUM_BYTES + node.index
        self.nfa.edges[s].append((k, k, e))


def build_byte_dfa(
    ir, num_terminals: int = 0, *, max_states: int | None = None, what: str = "the pattern"
) -> ByteDFA:
    """Compiles the regex IR to a trimmed, minimal byte DFA.

    Raises:
      EmptyLanguageError: the pattern matches nothing.
      StateBudgetExceededError: the DFA would exceed ``max_states``, or the subset
        construction its work budget (both scale with ``max_states``).
    """
    nfa, s, e = byte_nfa(ir, max_states=max_states, what=what)
    dfa = _fsa.minimal_dfa(nfa, s, e, NUM_BYTES + num_terminals)
    if dfa is None:
        raise EmptyLanguageError(f"{what} matches no string (its language is empty)")
    return ByteDFA(trans=dfa.trans, accepting=dfa.accepting, start=dfa.start)


# Memo of `cached_byte_dfa`: at most this many DFAs and this many table bytes in all (a
# DFA over a quarter of that is not kept).
CACHE_ENTRIES = 128
CACHE_BYTES = 32 << 20
_CACHE: collections.OrderedDict = collections.OrderedDict()
_CACHE_LOCK = threading.Lock()
_cache_bytes = 0


def cached_byte_dfa(
    ir, num_terminals: int = 0, *, max_states: int | None = None, what: str = "the pattern"
) -> ByteDFA:
    """`build_byte_dfa`, memoized across compiles in a small LRU: grammar rules recur from
    one compile to the next (a JSON Schema's free ``json_array``/``json_object`` rules are
    the same in every schema that has them).

    The key is the IR's structure (`_ir.fingerprint`), the terminal count and the state
    budget, so a hit is a build that succeeded under the same budgets; the `_fsa.limits`
    deadline is still checked. The DFA is shared: its arrays are read-only.
    """
    global _cache_bytes
    key = (fingerprint(ir), num_terminals, max_states or DEFAULT_MAX_STATES)
    with _CACHE_LOCK:
        dfa = _CACHE.get(key)
        if dfa is not None:
            _CACHE.move_to_end(key)
    if dfa is not None:
        _fsa.check_time("the NFA construction", f"{what}'s byte DFA")
        if PIECES:  # this node too: spliced where it recurs
            _keep(ir, dfa)
        return dfa
    dfa = build_byte_dfa(ir, num_terminals, max_states=max_states, what=what)
    if PIECES:  # spliced where this tree recurs (a label in its object)
        _keep(ir, dfa)  # its rows are listed when first spliced
    dfa.trans.flags.writeable = False
    dfa.accepting.flags.writeable = False
    size = dfa.trans.nbytes + dfa.accepting.nbytes
    if size <= CACHE_BYTES // 4:
        with _CACHE_LOCK:
            if key not in _CACHE:
                _CACHE[key] = dfa
                _cache_bytes += size
            while len(_CACHE) > CACHE_ENTRIES or _cache_bytes > CACHE_BYTES:
                _, old = _CACHE.popitem(last=False)
                _cache_bytes -= old.trans.nbytes + old.accepting.nbytes
    return dfa


# Memo of `lead_then_states`: each tail's byte DFA with its construction's counts.
_TAIL_COUNTS: collections.OrderedDict = collections.OrderedDict()
_FAILED = object()


def lead_then_states(lead: bytes, tail) -> int | None:
    """The states of ``cached_byte_dfa(ir)`` (default budgets) for an IR ``ir`` spelling the
    ASCII bytes ``lead`` one by one, then ``tail`` (a `minimal` character automaton:
    no terminal), computed from the tail's memoized byte DFA; None where that is not
    certain (the caller builds the whole).

    The whole's byte NFA is the tail's with one state per lead byte; its subset construction
    visits one singleton per lead byte, then the tail's sets level for level (the same
    members, edges, target sets and closures; a lead byte splits at most two symbol classes,
    so a level's moves grow at most ``2k + 1``-fold). Where the tail's counts bound the whole
    within every budget, its minimal DFA is the lead's chain on the tail's DFA: ``k`` more
    states, unless a state of the tail's DFA spells the last lead byte alone into its start
    (a twin of the chain's last state: then None).
    """
    k = len(lead)
    if k == 0 or max(lead) >= 0x80:
        return None
    key = fingerprint(tail)
    with _CACHE_LOCK:
        hit = _TAIL_COUNTS.get(key)
        if hit is not None:
            _TAIL_COUNTS.move_to_end(key)
    if hit is None:
        try:
            nfa, s, e = byte_nfa(tail, what="a property")
            stats: dict = {}
            dfa = _fsa.minimal_dfa(nfa, s, e, NUM_BYTES, stats=stats)
            hit = (
                _FAILED
                if dfa is None
                else (_twin_bytes(dfa), dfa.num_states, len(nfa.edges), stats)
            )
        except StateBudgetExceededError:
            hit = _FAILED
        with _CACHE_LOCK:
            _TAIL_COUNTS[key] = hit
            while len(_TAIL_COUNTS) > CACHE_ENTRIES:
                _TAIL_COUNTS.popitem(last=False)
    else:
        _fsa.check_time("the NFA construction", "a property's byte DFA")
    if hit is _FAILED:
        return None
    twins, num_states, nfa_states, st = hit
    max_work = _fsa.DEFAULT_MAX_WORK
    work = st["work"] + 4 * k + nfa_states
    states = st["states"] + k
    guard = _subset.GUARD * max_work
    fits = (
        nfa_states + k <= max_nfa_states(DEFAULT_MAX_STATES)
        and states <= DEFAULT_MAX_STATES
        and work <= max_work
        and work + (2 * k + 1) * st["moves_peak"] + k <= guard
        and work + max(st["closure_peak"], nfa_states) <= guard
        and (states + 1) ** 2 <= _fsa.MINIMIZE_WORK_FACTOR * max_work
    )
    if not fits:
        return None
    return None if lead[-1] in twins else k + num_states


def _twin_bytes(dfa) -> frozenset:
    """The bytes ``b`` for which a state of ``dfa`` spells ``b`` alone into the start, not
    accepting (what a lead ending in ``b`` would be the twin of; the memo keeps these, not
    the table)."""
    live = dfa.trans >= 0
    one = np.flatnonzero(~dfa.accepting & (live.sum(axis=1) == 1))
    byte = np.argmax(live[one], axis=1)
    return frozenset(byte[dfa.trans[one, byte] == dfa.start].tolist())


def byte_nfa(ir, *, max_states: int | None = None, what: str = "the pattern"):
    """(nfa, start, final): the Thompson NFA of the IR over bytes (+ terminal labels)."""
    max_states = max_states or DEFAULT_MAX_STATES
    budget = _fsa.Budget(
        f"{what}'s byte DFA", max_states, _fsa.DEFAULT_MAX_WORK * max_states // DEFAULT_MAX_STATES
    )
    nfa = _fsa.NFA(budget, max_nfa_states(max_states))
    s, e = nfa.state(), nfa.state()
    _Bytes(nfa).build(ir, s, e)
    return nfa, s, e


# Pieces (`_Bytes`): an automaton with IR labels whose NFA fragment has more states than
# this is determinized and minimized alone, then spliced into its parent as its minimal
# DFA. The byte DFA is the same (the minimal DFA of the same language, numbered the same:
# see `_piece_of`); the parent's subset construction meets one state per piece state
# instead of sets of the fragment's Thompson states.
PIECES = True
PIECE_MIN_STATES = 2000
# Memo of pieces by node, as long as the node lives: the labels of an object are sized
# (`cached_byte_dfa` of each) and then built again in their parent. Keyed by ``id`` (a
# lookup per node built must be cheap), with a weak reference that checks the id still
# names the node and drops the entry with it.
_PIECES: dict = {}


def _keep(node, piece) -> None:
    key = id(node)

    def drop(ref, key=key):  # (no lock: it may run in a collection while one is held)
        if _PIECES.get(key, (None,))[0] is ref:
            _PIECES.pop(key, None)

    _PIECES[key] = (weakref.ref(node, drop), piece)  # (one dict store: atomic)


def _composite(node: Automaton) -> bool:
    """Whether an automaton node has IR labels on its edges (not only character sets)."""
    return any(type(label) is not tuple for out in node.edges for label, _ in out)


def _piece(node):
    hit = _PIECES.get(id(node))
    if hit is None or hit[0]() is not node:
        return None
    piece = hit[1]
    if isinstance(piece, _fsa.DFA):
        piece = _rows(piece)
        if _PIECES.get(id(node)) is hit:
            _PIECES[id(node)] = (hit[0], piece)
    return piece


def _piece_of(node, nfa: _fsa.NFA, base: int, s: int, e: int, entries: int):
    """The minimal DFA of the fragment ``nfa`` holds for ``node`` (its states from ``base``
    on, entered by ``s``'s epsilon edge number ``entries``, leaving to ``e``) as a piece
    ``(rows, start, finals)``: per state its ``(lo, hi, target)`` edges, local ids. None
    where the fragment is not one (an edge leaving it elsewhere) or its construction passes
    a budget.

    Splicing it for the fragment keeps the parent's minimal DFA, state for state: the
    language is the same, and a minimal DFA numbered as `_fsa.minimal_dfa` numbers it
    (breadth-first, successors in symbol order, each block by its first state) depends on
    the language alone."""
    if len(nfa.eps[s]) != entries + 1:
        return None
    n = len(nfa.edges) - base
    final = n  # ``e`` becomes the fragment's own final state
    edges, eps = [], []
    top = NUM_BYTES
    for out, ep in zip(nfa.edges[base:], nfa.eps[base:], strict=True):
        if len(edges) & 1023 == 1023:
            _fsa.check_time("a piece's automaton", nfa.budget.what)
        row = []
        for lo, hi, t in out:
            if t >= base:
                row.append((lo, hi, t - base))
            elif t == e:
                row.append((lo, hi, final))
            else:
                return None
            top = max(top, hi + 1)
        edges.append(row)
        loc = []
        for t in ep:
            if t >= base:
                loc.append(t - base)
            elif t == e:
                loc.append(final)
            else:
                return None
        eps.append(loc)
    sub = _fsa.NFA(nfa.budget, nfa.max_states)
    sub.edges, sub.eps = [*edges, []], [*eps, []]
    try:
        dfa = _fsa.minimal_dfa(sub, nfa.eps[s][entries] - base, final, top)
    except StateBudgetExceededError:
        return None
    piece = ((), 0, ()) if dfa is None else _rows(dfa)
    _keep(node, piece)
    return piece


def _rows(dfa: _fsa.DFA):
    """``(rows, start, finals)``: per state its ``(lo, hi, target)`` edges (runs of one
    target along its row), the start and the accepting states."""
    trans = dfa.trans
    q, width = trans.shape
    change = np.ones((q, width), dtype=bool)
    change[:, 1:] = trans[:, 1:] != trans[:, :-1]
    r, lo = np.nonzero(change)
    hi = np.append(lo[1:], 0) - 1
    hi[np.append(r[1:] != r[:-1], True)] = width - 1
    tgt = trans[r, lo]
    live = tgt >= 0
    rows: list = [[] for _ in range(q)]
    for i, a, b, t in zip(
        r[live].tolist(), lo[live].tolist(), hi[live].tolist(), tgt[live].tolist(), strict=True
    ):
        rows[i].append((a, b, t))
    return rows, int(dfa.start), np.flatnonzero(dfa.accepting).tolist()


def ir_matches(ir, data: bytes) -> bool:
    """Whether the IR's language contains the byte string (NFA simulation, for tests and
    the suite runner: no determinization, so no state budget)."""
    nfa, s, e = byte_nfa(ir)
    return _fsa.nfa_accepts(nfa, s, e, data)


def max_nfa_states(max_states: int) -> int:
    return max(20 * max_states, 200_000)
