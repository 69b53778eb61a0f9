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

from automata_compile._errors import EmptyLanguageError
from automata_compile.automata import _charsets as cs
from automata_compile.automata import _fsa, _thompson
from automata_compile.automata._ir import Terminal, fingerprint

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
    """Spells character sets in UTF-8; terminal label k is symbol 256 + k."""

    def __init__(self, nfa: _fsa.NFA):
        super().__init__(nfa)
        self.spellings: dict = {}  # ranges -> their `_spelling` (sets recur in a tree)

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
        return dfa
    dfa = build_byte_dfa(ir, num_terminals, max_states=max_states, what=what)
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


def ir_matches(ir, data: bytes) -> bool:
    """Whether the IR's language contains the byte string (NFA simulation, for tests and
    the suite runner: no determinization, so no state budget)."""
    nfa, s, e = byte_nfa(ir)
    return _fsa.nfa_accepts(nfa, s, e, data)


def max_nfa_states(max_states: int) -> int:
    return max(20 * max_states, 200_000)
