"""Boolean operations on character languages (IR trees over code points).

The alphabet is a partition of the code points into *atoms*: maximal sets that no
character set of the operands splits. Each operand becomes a DFA over atom indices
(`_fsa`), the operation is a product or a complement there, and the minimal result
comes back as an `Automaton` IR node whose edges are `Ranges` (unions of atoms), so
`_byte_dfa` spells it in UTF-8 like any other IR. No regex text is produced.
"""

from __future__ import annotations

import bisect
import collections
import functools
import threading
import weakref

import numpy as np

from automata_compile._errors import StateBudgetExceededError
from automata_compile.automata import _charsets as cs
from automata_compile.automata import _fsa, _subset, _thompson
from automata_compile.automata._ir import (
    NEVER,
    Alt,
    Automaton,
    Chars,
    Seq,
    distinct_nodes,
    fingerprint,
)

MAX_STATES = 20_000
MAX_WORK = 2_000_000


def _budget(what: str) -> _fsa.Budget:
    return _fsa.Budget(what, MAX_STATES, MAX_WORK)


class Partition:
    """Atoms of the code points (within ``universe``) that no set in ``sets`` splits.

    Attributes:
      atoms: list of `Ranges`, one per atom.
    """

    def __init__(self, sets, universe=cs.ALL):
        bounds = {lo for lo, _ in universe} | {hi + 1 for _, hi in universe}
        for s in sets:
            for lo, hi in s:
                bounds.add(lo)
                bounds.add(hi + 1)
        points = sorted(bounds)
        # Elementary intervals [points[k], points[k+1]) inside the universe.
        inside = np.zeros(len(points), bool)
        for lo, hi in universe:
            inside[bisect.bisect_left(points, lo) : bisect.bisect_left(points, hi + 1)] = True
        sig: list[list[int]] = [[] for _ in points]
        self.sets = list(dict.fromkeys(sets))
        for i, s in enumerate(self.sets):
            for lo, hi in s:
                for k in range(bisect.bisect_left(points, lo), bisect.bisect_left(points, hi + 1)):
                    sig[k].append(i)
        by_sig: dict[tuple, list] = {}
        for k in range(len(points) - 1):
            if inside[k]:
                by_sig.setdefault(tuple(sig[k]), []).append((points[k], points[k + 1] - 1))
        self.atoms = [cs.normalize(r) for r in by_sig.values()]
        members: dict[int, list[int]] = {i: [] for i in range(len(self.sets))}
        for a, key in enumerate(by_sig):
            for i in key:
                members[i].append(a)
        self._members = {s: tuple(members[i]) for i, s in enumerate(self.sets)}

    def atoms_of(self, ranges) -> tuple[int, ...]:
        return self._members[ranges]


class _Atoms(_thompson.Builder):
    def __init__(self, nfa, part: Partition):
        super().__init__(nfa)
        self.part = part

    def chars(self, ranges, s, e, memo) -> None:
        atoms = self.part.atoms_of(ranges)
        k = 0
        while k < len(atoms):  # runs of consecutive atom ids become one interval edge
            j = k
            while j + 1 < len(atoms) and atoms[j + 1] == atoms[j] + 1:
                j += 1
            self.nfa.edges[s].append((atoms[k], atoms[j], e))
            k = j + 1


def char_sets(node, acc: set) -> set:
    """Collects the character sets (`Ranges`) of an IR tree into ``acc``; a subtree shared
    by several parents (the same object) is walked once."""
    for x in distinct_nodes([node]):
        if isinstance(x, Chars):
            acc.add(x.ranges)
        elif isinstance(x, Automaton):
            acc.update(label for out in x.edges for label, _ in out if isinstance(label, tuple))
    return acc


def dfas(*nodes, universe=cs.ALL, what: str = "a string constraint"):
    """(partition, [minimal DFA per node]) over a common partition."""
    sets: set = set()
    for n in nodes:
        char_sets(n, sets)
    part = Partition(sorted(sets), universe)
    out = []
    for n in nodes:
        budget = _budget(what)
        nfa = _fsa.NFA(budget, 20 * MAX_STATES)
        s, e = nfa.state(), nfa.state()
        _Atoms(nfa, part).build(n, s, e)
        # Minimal operands keep products small (a product explores pairs of states).
        d = _fsa.minimal_dfa(nfa, s, e, len(part.atoms))
        out.append(d if d is not None else _empty(len(part.atoms)))
    return part, out


def _empty(num_symbols: int) -> _fsa.DFA:
    return _fsa.DFA(np.full((1, num_symbols), _fsa.DEAD, np.int32), np.zeros(1, bool), 0)


def to_ir(part: Partition, dfa: _fsa.DFA | None, *, is_minimal: bool = False):
    """The minimal automaton of ``dfa`` as an IR node (`NEVER` if its language is empty).

    ``is_minimal``: ``dfa`` is already `_fsa.minimize`'s output (as `dfas` gives it), which
    minimizing again returns unchanged, state for state (its numbering follows the blocks'
    refinement, not the input's): that second pass is skipped."""
    if is_minimal:
        dfa = dfa if dfa is not None and dfa.accepting.any() else None
    elif dfa is not None:
        dfa = _fsa.minimize(dfa, _budget("a string constraint"))
    if dfa is None:
        return NEVER
    # Number states with the start first (the IR has no dead state).
    order = [dfa.start] + [q for q in range(dfa.num_states) if q != dfa.start]
    new = {q: i for i, q in enumerate(order)}
    # every edge at once, row by row in ``order`` and by atom within a row
    trans = dfa.trans[np.asarray(order, np.int64)]
    src, atom = np.nonzero(trans >= 0)
    by_target: list[dict[int, list]] = [{} for _ in order]
    atoms = part.atoms
    for i, a, t in zip(src.tolist(), atom.tolist(), trans[src, atom].tolist(), strict=True):
        by_target[i].setdefault(t, []).extend(atoms[a])
    edges = [tuple((cs.normalize(r), new[t]) for t, r in sorted(b.items())) for b in by_target]
    finals = frozenset(new[q] for q in np.flatnonzero(dfa.accepting).tolist())
    return Automaton(edges=tuple(edges), start=0, finals=finals)


def ascii_states(node) -> int | None:
    """The states of the minimal byte DFA of ``node``, a minimal automaton as `to_ir` (or
    `minimal`) returns it, where every character set on its edges is ASCII: its own
    states (each character is one byte, so its byte DFA is the same automaton, trimmed and
    minimal: no state to add, none to merge). None for any other node."""
    if not isinstance(node, Automaton):
        return None
    for out in node.edges:
        for label, _ in out:
            if not isinstance(label, tuple) or not label or label[-1][1] >= 0x80:
                return None
    return len(node.edges)


# Memo of `minimal`: at most this many entries (an entry is one IR node, a few kB).
MINIMAL_ENTRIES = 1024
_MINIMAL: collections.OrderedDict = collections.OrderedDict()
_MINIMAL_LOCK = threading.Lock()
_AS_IS = object()  # `minimal`'s memo of "no minimal automaton within the budgets"
_WHOLE_AS_IS = object()  # `_TAILS`' memo of a tail that makes any sequence ending in it so
# The nodes `_after_literal` spelled as a chain on a tail: node -> (lead, tail's automaton).
_CHAINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Memo of `_after_literal`: the tails of literal-led sequences, with their constructions'
# counts (a property's value, after its name).
_TAILS: collections.OrderedDict = collections.OrderedDict()


def _memo(table: collections.OrderedDict, key, compute):
    """(the entry of ``key``, computed on a miss; whether it was there)."""
    with _MINIMAL_LOCK:
        hit = table.get(key)
        if hit is not None:
            table.move_to_end(key)
            return hit, True
    hit = compute()
    with _MINIMAL_LOCK:
        table[key] = hit
        while len(table) > MINIMAL_ENTRIES:
            table.popitem(last=False)
    return hit, False


def minimal(node, what: str = "a string constraint"):
    """``node``'s minimal character automaton as an IR node (`to_ir`), or None where that
    passes this module's budgets or ``node`` holds what character automata cannot (a
    `Terminal`, a rule call: `TypeError`).

    Memoized across compiles in an LRU keyed by the node's structure (`fingerprint`): the
    same property (name and value) recurs from one schema to the next. Both outcomes are
    functions of the structure alone (fixed budgets; a deadline's `CompileTimeoutError` is
    raised, never kept). A hit is the node built the first time: IR nodes are immutable.

    A sequence led by literal characters (a property's name) followed by a tail (its value)
    is built from the tail's memoized minimal automaton (`_after_literal`) where the
    construction of the whole is certain to stay within the budgets: the same language and
    outcome (the minimal automaton is unique; its states may be numbered differently).
    """
    digests: dict = {}
    hit, cached = _memo(
        _MINIMAL, fingerprint(node, digests), lambda: _minimal_uncached(node, what, digests)
    )
    if cached:
        _fsa.check_time("the minimal automaton", what)
    return None if hit is _AS_IS else hit


def _minimal_uncached(node, what: str, digests: dict):
    fast = _after_literal(node, what, digests)
    if fast is not None:
        return fast
    try:
        return _construct(node, what)[0]
    except (StateBudgetExceededError, TypeError):
        return _AS_IS


def _construct(node, what: str):
    """(`to_ir` of the minimal automaton, the construction's counts): `dfas` of one node,
    with (NFA states, atoms, `_subset.determinize`'s stats)."""
    part = Partition(sorted(char_sets(node, set())))
    nfa = _fsa.NFA(_budget(what), 20 * MAX_STATES)
    s, e = nfa.state(), nfa.state()
    _Atoms(nfa, part).build(node, s, e)
    stats: dict = {}
    d = _fsa.minimal_dfa(nfa, s, e, len(part.atoms), stats=stats)
    d = d if d is not None else _empty(len(part.atoms))
    return to_ir(part, d, is_minimal=True), (len(nfa.edges), len(part.atoms), stats)


def _literal_split(node):
    """(code points, tail) of a `Seq` led by one-character `Chars` and more; else None."""
    if not isinstance(node, Seq):
        return None
    k = 0
    for item in node.items:
        if not (isinstance(item, Chars) and len(item.ranges) == 1):
            break
        lo, hi = item.ranges[0]
        if lo != hi:
            break
        k += 1
    if k == 0 or k == len(node.items):
        return None
    rest = node.items[k:]
    return [item.ranges[0][0] for item in node.items[:k]], rest[0] if len(rest) == 1 else Seq(rest)


def _fits(k: int, counts) -> bool:
    """Whether the construction of ``k`` literal characters followed by a tail whose own
    construction made ``counts`` certainly stays within every budget, by its counts:

    - its Thompson NFA is the tail's with ``k`` more states; its subset construction visits
      ``k`` singletons (one per character), then the tail's sets, level for level (the
      same members, the same distinct target sets and closures: the finer atoms of the
      whole split no symbol the tail's NFA tells apart);
    - each NFA edge of the tail spans at most ``a`` atoms of the whole (``a`` = the tail's
      atoms + ``k``: a one-character set adds at most one), so a state's edges and moves
      grow at most ``a``-fold: the work is at most ``4k + N + a * W``, a level's moves
      ``a`` times the tail's peak, a level's closures the tail's peak;
    - minimization: at most one round per state, at most ``states`` work per round.
    """
    nfa_states, atoms, st = counts
    a = atoms + k
    work = 4 * k + nfa_states + a * st["work"]
    states = st["states"] + k
    guard = _subset.GUARD * MAX_WORK
    return (
        nfa_states + k <= 20 * MAX_STATES
        and states <= MAX_STATES
        and work <= MAX_WORK
        and work + a * st["moves_peak"] + k <= guard
        and work + max(st["closure_peak"], nfa_states) <= guard
        and (states + 1) ** 2 <= _fsa.MINIMIZE_WORK_FACTOR * MAX_WORK
    )


def _after_literal(node, what: str, digests: dict):
    """``node``'s minimal automaton from its literal lead and its tail's memoized minimal
    automaton ``m``; None where ``node`` is not such a sequence or `_fits` does not hold (the
    caller then runs the construction of the whole).

    The lead's chain followed by ``m`` is a DFA of the language, every state useful. Its
    chain states are distinct (their shortest words differ in length) and ``m``'s are (it
    is minimal); a chain state can only be equivalent to a state of ``m`` if some state of
    ``m`` spells the last character alone into ``m``'s start, not accepting (that state
    would be the last chain state's twin; each earlier twin needs a later one). Without
    one the chain and ``m`` are the minimal automaton, spelled as `to_ir` spells it (the
    edge sets to each target, in target order); with one (rare) the table is minimized."""
    split = _literal_split(node)
    if split is None:
        return None
    chars, tail = split

    def construct_tail():
        try:
            return _construct(tail, what)
        except TypeError:  # a terminal: the whole's construction meets it too
            return _WHOLE_AS_IS
        except StateBudgetExceededError as e:
            # past the state or NFA budget: the whole visits the tail's sets (and NFA
            # states), so it is past them too; a work budget is judged on the whole
            text = str(e)
            return (
                _WHOLE_AS_IS if "exceeds max_states=" in text or " NFA states;" in text else _AS_IS
            )

    hit, _ = _memo(_TAILS, fingerprint(tail, digests), construct_tail)
    if hit is _WHOLE_AS_IS:
        return _AS_IS
    if hit is _AS_IS or not _fits(len(chars), hit[1]):
        return None
    m = hit[0]
    if is_never(m):
        return NEVER
    k = len(chars)
    lits = [((c, c),) for c in chars]
    last = (lits[-1], m.start)
    twin = any(out == (last,) and q not in m.finals for q, out in enumerate(m.edges))
    if not twin and all(_in_all(c) for c in chars):
        edges = [((lits[i], i + 1),) for i in range(k - 1)] + [((lits[-1], k + m.start),)]
        edges += [tuple((r, k + t) for r, t in out) for out in m.edges]
        out = Automaton(edges=tuple(edges), start=0, finals=frozenset(k + f for f in m.finals))
        with _MINIMAL_LOCK:
            _CHAINS[out] = (tuple(chars), m)
        return out
    part = Partition(sorted({*lits, *(r for out in m.edges for r, _ in out)}))
    trans = np.full((k + len(m.edges), len(part.atoms)), _fsa.DEAD, np.int32)
    for i, r in enumerate(lits):
        trans[i, list(part.atoms_of(r))] = i + 1 if i + 1 < k else k + m.start
    for q, out in enumerate(m.edges):
        for r, t in out:
            trans[k + q, list(part.atoms_of(r))] = k + t
    accepting = np.zeros(trans.shape[0], bool)
    accepting[[k + f for f in m.finals]] = True
    d = _fsa.minimize(_fsa.DFA(trans, accepting, 0), _budget(what))
    return to_ir(part, d, is_minimal=True)


def chain_parts(node):
    """(lead code points, the tail's minimal automaton) of a node `minimal` spelled as the
    lead's chain on the tail's automaton (the two are its states, in that order); else
    None."""
    if not isinstance(node, Automaton):
        return None
    with _MINIMAL_LOCK:
        return _CHAINS.get(node)


def _in_all(c: int) -> bool:
    """Whether code point ``c`` is in `cs.ALL` (the universe of `Partition`)."""
    return any(lo <= c <= hi for lo, hi in cs.ALL)


def is_never(node) -> bool:
    return isinstance(node, Alt) and not node.options


@functools.lru_cache(maxsize=1024)
def intersect(*nodes):
    """The intersection of the languages, as a minimal `Automaton` node."""
    part, ds = dfas(*nodes, what="an intersection of string constraints")
    acc = ds[0]
    for d in ds[1:]:
        acc = _fsa.product(acc, d, "and", _budget("an intersection of string constraints"))
    return to_ir(part, acc)


@functools.lru_cache(maxsize=1024)
def complement(node):
    """Every string (of encodable code points) not in the language."""
    part, (d,) = dfas(node, what="a complement of a string constraint")
    return to_ir(part, _fsa.complement(d))


@functools.lru_cache(maxsize=1024)
def difference(a, b):
    """The strings of ``a`` that are not in ``b``."""
    part, (da, db) = dfas(a, b, what="a difference of string constraints")
    return to_ir(part, _fsa.product(da, db, "minus", _budget("a difference of string constraints")))


@functools.lru_cache(maxsize=4096)
def is_empty(node) -> bool:
    if is_never(node):
        return True
    _, (d,) = dfas(node, what="an emptiness check")
    return _fsa.is_empty(d)


def disjoint(a, b) -> bool:
    if is_never(a) or is_never(b):
        return True
    _, (da, db) = dfas(a, b, what="a disjointness check")
    return _fsa.is_empty(_fsa.product(da, db, "and", _budget("a disjointness check")))


def with_max_length(node, n: int):
    """The strings of the language with at most ``n`` characters (bounded-length intersection)."""
    part, (d,) = dfas(node, what="a length bound")
    return to_ir(part, _fsa.bounded(d, n, _budget("a length bound")))


@functools.lru_cache(maxsize=1024)
def _matcher(node):
    part, (d,) = dfas(node, what="a string match")
    d = _fsa.minimize(d, _budget("a string match"))
    flat = sorted((lo, hi, a) for a, ranges in enumerate(part.atoms) for lo, hi in ranges)
    return d, [lo for lo, _, _ in flat], flat


def matches(node, text: str) -> bool:
    """Whether ``text`` (a decoded string) is in the language of ``node``."""
    if is_never(node):
        return False
    d, los, flat = _matcher(node)
    if d is None:
        return False
    q = d.start
    for ch in text:
        cp = ord(ch)
        k = bisect.bisect_right(los, cp) - 1
        if k < 0 or flat[k][1] < cp:
            return False
        q = int(d.trans[q, flat[k][2]])
        if q < 0:
            return False
    return bool(d.accepting[q])
