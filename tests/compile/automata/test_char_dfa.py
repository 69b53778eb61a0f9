"""`automata._char_dfa`: the code-point partition, character DFAs and their IR, over all of
Unicode.

`test_fsa.py` checks the boolean operations on a three-letter alphabet; here the character
sets are wide (Greek, CJK, emoji, ``\\d`` and ``\\w`` in Unicode mode, negated classes), and
`matches` and the IR that `to_ir` returns are judged against Python's `re` (whose ``\\d``,
``\\w`` and ``\\s`` the compiler adopts, see `_charsets`) on code points sampled from the
whole range, class boundaries included.
"""

from __future__ import annotations

import bisect
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile.automata import _byte_dfa, _char_dfa, _fsa
from automata_compile.automata import _charsets as cs
from automata_compile.automata._ir import (
    NEVER,
    Alt,
    Automaton,
    Chars,
    Repeat,
    Seq,
    children,
    fingerprint,
)
from automata_compile.frontends import _regex

PATTERNS = [
    r"[\u03b1-\u03c9]+",
    r"[^a-z]*",
    r"\d{1,3}",
    r"\w+",
    r"[\u4e00-\u9fff]{2}|[a\U0001F600-\U0001F64F]",
    r".?[^\u00e9]",
    r"(?:[a-c\u00e0-\u00ff]|\s)*x",
    r"[\U00010000-\U0010FFFF]+",
]

# Code points around the edges of the classes above, and across the planes.
EDGES = [
    0x0,
    0x9,
    0x20,
    0x30,
    0x39,
    0x3A,
    0x60,
    0x61,
    0x63,
    0x78,
    0x7A,
    0x7B,
    0xDF,
    0xE0,
    0xE9,
    0xFF,
    0x100,
    0x3B0,
    0x3B1,
    0x3C9,
    0x3CA,
    0x660,
    0x4DFF,
    0x4E00,
    0x9FFF,
    0xA000,
    0xD7FF,
    0xE000,
    0xFFFF,
    0x10000,
    0x1F5FF,
    0x1F600,
    0x1F64F,
    0x1F650,
    0x10FFFF,
]
# Surrogates are not characters (UTF-8 cannot spell them): never sampled.
_chars = st.one_of(
    st.sampled_from([chr(c) for c in EDGES]),
    st.characters(blacklist_categories=("Cs",)),
)
_texts = st.lists(_chars, max_size=4).map("".join)


def _fullmatch(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text, re.DOTALL) is not None


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=100, deadline=None)
@given(text=_texts)
def test_matches_agrees_with_regex(pattern, text):
    node = _regex.parse(pattern, None)
    assert _char_dfa.matches(node, text) == _fullmatch(pattern, text)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=30, deadline=None)
@given(text=_texts)
def test_to_ir_round_trip_keeps_the_language(pattern, text):
    # the minimal DFA as an IR automaton, spelled again in UTF-8 bytes
    node = _regex.parse(pattern, None)
    part, (d,) = _char_dfa.dfas(node)
    back = _char_dfa.to_ir(part, d)
    assert isinstance(back, Automaton)
    assert _char_dfa.matches(back, text) == _fullmatch(pattern, text)
    assert _byte_dfa.ir_matches(back, text.encode("utf-8")) == _fullmatch(pattern, text)


def _to_ir_row_by_row(part, dfa):
    """The former `to_ir` body (one row at a time), the oracle of the vectorized one."""
    order = [dfa.start] + [q for q in range(dfa.num_states) if q != dfa.start]
    new = {q: i for i, q in enumerate(order)}
    edges = []
    for q in order:
        row = dfa.trans[q]
        by_target: dict[int, list] = {}
        for a in np.flatnonzero(row >= 0).tolist():
            by_target.setdefault(int(row[a]), []).extend(part.atoms[a])
        edges.append(tuple((cs.normalize(r), new[t]) for t, r in sorted(by_target.items())))
    finals = frozenset(new[q] for q in np.flatnonzero(dfa.accepting).tolist())
    return tuple(edges), finals


@pytest.mark.parametrize("pattern", PATTERNS)
def test_to_ir_is_the_row_by_row_automaton(pattern):
    """The same edges (labels, targets, order) and finals as the former row loop, on a
    minimal DFA and on one whose start is not state 0 (a reversed complement's)."""
    node = _regex.parse(pattern, None)
    for n in (node, _char_dfa.complement(node)):
        part, (d,) = _char_dfa.dfas(n)
        for dfa in (d, _fsa.DFA(d.trans[::-1], d.accepting[::-1], d.num_states - 1 - d.start)):
            renumbered = np.where(dfa.trans >= 0, dfa.num_states - 1 - dfa.trans, dfa.trans)
            if dfa is not d:
                dfa = _fsa.DFA(renumbered.astype(np.int32), dfa.accepting, dfa.start)
            got = _char_dfa.to_ir(part, dfa, is_minimal=True)
            assert (got.edges, got.finals) == _to_ir_row_by_row(part, dfa)


@settings(max_examples=40, deadline=None)
@given(
    p=st.sampled_from(PATTERNS),
    q=st.sampled_from(PATTERNS),
    text=_texts,
)
def test_boolean_operations_on_wide_sets(p, q, text):
    a, b = _regex.parse(p, None), _regex.parse(q, None)
    x, y = _fullmatch(p, text), _fullmatch(q, text)
    assert _char_dfa.matches(_char_dfa.intersect(a, b), text) == (x and y)
    assert _char_dfa.matches(_char_dfa.difference(a, b), text) == (x and not y)
    assert _char_dfa.matches(_char_dfa.complement(a), text) == (not x)
    n = len(text)
    assert _char_dfa.matches(_char_dfa.with_max_length(a, n), text) == x
    if n:
        assert not _char_dfa.matches(_char_dfa.with_max_length(a, n - 1), text)


def _ranges():
    point = st.integers(0, 0x10FFFF)
    pair = st.tuples(point, point).map(lambda t: (min(t), max(t)))
    return st.lists(pair, min_size=1, max_size=3).map(cs.normalize).filter(bool)


def _contains(ranges, c: int) -> bool:
    k = bisect.bisect_right([lo for lo, _ in ranges], c) - 1
    return k >= 0 and ranges[k][1] >= c


@settings(max_examples=100, deadline=None)
@given(sets=st.lists(_ranges(), min_size=1, max_size=4), probes=st.lists(st.integers(0, 0x10FFFF)))
def test_partition_atoms_split_no_set_and_cover_the_universe(sets, probes):
    part = _char_dfa.Partition(sets)
    atoms = part.atoms
    # the atoms are disjoint and together are every encodable code point
    assert cs.union(*atoms) == cs.ALL
    total = sum(hi - lo + 1 for a in atoms for lo, hi in a)
    assert total == sum(hi - lo + 1 for lo, hi in cs.ALL)
    # each set is exactly the union of its atoms
    for s in sets:
        assert cs.union(*(atoms[i] for i in part.atoms_of(s))) == s
    # no atom is split by a set: every probe's atom lies inside or outside each set
    boundary = [c for s in sets for lo, hi in s for c in (lo, hi, lo - 1, hi + 1)]
    for c in [*probes, *boundary]:
        if not 0 <= c <= 0x10FFFF or 0xD800 <= c <= 0xDFFF:
            continue
        (atom,) = [i for i, a in enumerate(atoms) if _contains(a, c)]
        for s in sets:
            assert (atom in part.atoms_of(s)) == _contains(s, c)


def test_partition_within_a_universe():
    ascii_ = ((0, 0x7F),)
    part = _char_dfa.Partition([((0x61, 0x7A),), ((0x30, 0x39), (0x61, 0x66))], ascii_)
    assert cs.union(*part.atoms) == ascii_
    assert len(part.atoms) == 4  # a-f, g-z, 0-9, the rest of ASCII


def test_char_sets_collects_every_set():
    node = _regex.parse(r"a[b-d](?:\u00e9|x*)", None)
    got = _char_dfa.char_sets(node, set())
    assert got == {((0x61, 0x61),), ((0x62, 0x64),), ((0xE9, 0xE9),), ((0x78, 0x78),)}
    auto = Automaton(
        edges=(((((0x3B1, 0x3C9),), 1),), ((Chars(((0x31, 0x31),)), 0),)),
        start=0,
        finals=frozenset({1}),
    )
    assert _char_dfa.char_sets(auto, set()) == {((0x3B1, 0x3C9),), ((0x31, 0x31),)}


def test_char_sets_walks_shared_subtrees_once():
    """A tree of shared subtrees (2**40 paths, 41 distinct nodes) gives the sets a plain
    recursive walk gives on a small one (shared subtrees are walked once, by identity)."""

    def recursive(node, acc):
        if isinstance(node, Chars):
            acc.add(node.ranges)
        for kid in children(node):
            recursive(kid, acc)
        return acc

    leaves = [Chars(((0x30 + i, 0x30 + i),)) for i in range(3)]
    node = Alt(tuple(leaves))
    small = node
    for i in range(40):
        node = Seq((node, Repeat(node, 0, 2), leaves[i % 3]))
        if i == 3:
            small = node
    assert _char_dfa.char_sets(small, set()) == recursive(small, set())
    assert _char_dfa.char_sets(node, set()) == {leaf.ranges for leaf in leaves}


def test_empty_languages():
    assert _char_dfa.is_never(NEVER) and _char_dfa.is_empty(NEVER)
    assert not _char_dfa.matches(NEVER, "")
    a = _regex.parse(r"[\u03b1-\u03c9]+", None)
    b = _regex.parse(r"[a-z]+", None)
    assert _char_dfa.disjoint(a, b)
    assert _char_dfa.is_never(_char_dfa.intersect(a, b))
    assert not _char_dfa.disjoint(a, _regex.parse(r"\w+", None))
    assert _char_dfa.is_empty(_char_dfa.difference(a, _regex.parse(r"\w+", None)))


def _canonical(node):
    """An `Automaton` IR node's states renumbered breadth first from the start, edges in
    label order: equal for isomorphic automata (minimal ones of one language)."""
    if _char_dfa.is_never(node):
        return None
    order, seen, out = [node.start], {node.start: 0}, []
    for q in order:
        row = []
        for label, t in sorted(node.edges[q]):
            if t not in seen:
                seen[t] = len(order)
                order.append(t)
            row.append((label, seen[t]))
        out.append((tuple(row), q in node.finals))
    return tuple(out)


def test_minimal_is_memoized_by_structure_across_calls(monkeypatch):
    """`minimal`: the same automaton as `to_ir` of `dfas` (the same language, spelled by
    Python's `re`), built once per structure: a second, distinct but equal tree is a hit (the
    node built first), a rule call (`Terminal`) or a budget refusal is kept as None."""
    from automata_compile.automata._ir import Seq, Terminal

    monkeypatch.setattr(_char_dfa, "_MINIMAL", type(_char_dfa._MINIMAL)())
    monkeypatch.setattr(_char_dfa, "_TAILS", type(_char_dfa._TAILS)())

    def label():  # a fresh tree each time: "ab" then one of [0-9]
        return Seq((Chars(((97, 97),)), Chars(((98, 98),)), Chars(((48, 57),))))

    built = []
    real = _char_dfa._construct
    monkeypatch.setattr(_char_dfa, "_construct", lambda *a: built.append(a[0]) or real(*a))
    first = _char_dfa.minimal(label())
    again = _char_dfa.minimal(label())
    assert again is first and len(built) == 1  # the tail [0-9], then the lead's chain
    part, (d,) = _char_dfa.dfas(label())
    assert _canonical(first) == _canonical(_char_dfa.to_ir(part, d))
    call = Seq((Chars(((97, 97),)), Terminal(0)))
    assert _char_dfa.minimal(call) is None and _char_dfa.minimal(call) is None
    assert len(built) == 2  # the tail (a terminal refuses the whole too), memoized
    assert _char_dfa.matches(first, "ab7")
    assert not _char_dfa.matches(first, "ab") and not _char_dfa.matches(first, "abx")
    monkeypatch.setattr(_char_dfa, "MAX_STATES", 2)
    long = Seq(tuple(Chars(((c, c),)) for c in b"abcdef"))
    assert _char_dfa.minimal(long) is None  # past the state budget: as is


_leads = st.text(alphabet='ab\u00e9"c', min_size=1, max_size=6)


def _lead_then(lead: str, tail):
    from automata_compile.automata._ir import Seq

    return Seq(tuple(Chars(((ord(c), ord(c)),)) for c in lead) + (tail,))


@settings(max_examples=200, deadline=None)
@given(
    lead=_leads,
    pattern=st.one_of(
        st.sampled_from(PATTERNS + ["", "(?:ca)*"]), st.deferred(lambda: _small_regexes)
    ),
)
def test_minimal_after_a_literal_lead_is_the_construction(lead, pattern):
    """A literal lead (a property's name) and a tail (its value): the chain on the tail's
    memoized minimal automaton is the minimal automaton of the whole, as its construction
    builds it (up to the numbering of states), and within the budgets where `_fits` says so
    (checked against the whole's construction's own counts)."""
    tail = _regex.parse(pattern, None)
    node = _lead_then(lead, tail)
    full, (nfa_states, atoms, st_whole) = _char_dfa._construct(node, "x")
    fast = _char_dfa._after_literal(node, "x", {})
    if _char_dfa._literal_split(node) is None:  # the tail is one literal character too
        assert fast is None and len(pattern) == 1
        return
    assert fast is not None  # small: within the bounds
    assert _canonical(fast) == _canonical(full)
    # `_fits`' bounds hold on the whole's construction
    t_nfa, t_atoms, st_tail = _char_dfa._construct(tail, "x")[1]
    k, a = len(lead), t_atoms + len(lead)
    assert nfa_states == t_nfa + k and atoms <= a
    assert st_whole["states"] == st_tail["states"] + k
    assert st_whole["work"] <= 4 * k + t_nfa + a * st_tail["work"]
    assert st_whole["moves_peak"] <= max(a * st_tail["moves_peak"], 1)


def test_minimal_after_a_literal_lead_merges_a_twin():
    """``a(ca)*``: the lead's state is the tail's state after ``c`` (both spell ``a(ca)*``),
    so the whole has 2 states, not 3."""
    node = _lead_then("a", _regex.parse("(?:ca)*", None))
    fast = _char_dfa._after_literal(node, "x", {})
    full = _char_dfa._construct(node, "x")[0]
    assert len(fast.edges) == 2 and _canonical(fast) == _canonical(full)


def test_minimal_after_a_literal_lead_refuses_with_a_tail_past_the_state_budget(monkeypatch):
    """A tail past the state budget: the whole (a superset of its subset construction's
    sets) is refused without being constructed; past the work budget alone it is built."""
    monkeypatch.setattr(_char_dfa, "_MINIMAL", type(_char_dfa._MINIMAL)())
    monkeypatch.setattr(_char_dfa, "_TAILS", type(_char_dfa._TAILS)())
    built = []
    real = _char_dfa._construct
    monkeypatch.setattr(_char_dfa, "_construct", lambda *a: built.append(a[0]) or real(*a))
    monkeypatch.setattr(_char_dfa, "MAX_STATES", 6)
    node = _lead_then("ab", _regex.parse("[ab]{0,8}", None))
    with pytest.raises(_char_dfa.StateBudgetExceededError):
        real(node, "x")  # the construction of the whole is refused
    assert _char_dfa.minimal(node) is None and len(built) == 1  # the tail only
    monkeypatch.setattr(_char_dfa, "MAX_STATES", 20_000)
    monkeypatch.setattr(_char_dfa, "MAX_WORK", 5)  # past the work budget: judged on the whole
    monkeypatch.setattr(_char_dfa, "_MINIMAL", type(_char_dfa._MINIMAL)())
    monkeypatch.setattr(_char_dfa, "_TAILS", type(_char_dfa._TAILS)())
    built.clear()
    assert _char_dfa.minimal(node) is None and len(built) == 2


def test_minimal_after_a_literal_lead_keeps_the_budget_outcome(monkeypatch):
    """Where the bounds do not show the whole within the budgets, the whole is constructed
    (and refused where it is past them), as without the shortcut."""
    node = _lead_then("abc", _regex.parse("[ab]{0,6}", None))
    ok = _char_dfa._after_literal(node, "x", {})
    assert ok is not None
    monkeypatch.setattr(_char_dfa, "MAX_STATES", 8)  # the whole needs 3 + 7 subset states
    assert _char_dfa._after_literal(node, "x", {}) is None  # the bounds fail: not taken
    monkeypatch.setattr(_char_dfa, "_MINIMAL", type(_char_dfa._MINIMAL)())
    monkeypatch.setattr(_char_dfa, "_TAILS", type(_char_dfa._TAILS)())
    assert _char_dfa.minimal(node) is None  # the construction of the whole is refused
    monkeypatch.setattr(_char_dfa, "MAX_STATES", 10)
    monkeypatch.setattr(_char_dfa, "_MINIMAL", type(_char_dfa._MINIMAL)())
    assert _canonical(_char_dfa.minimal(node)) == _canonical(ok)


_small_regexes = st.recursive(
    st.sampled_from(["a", "b", "[ab]", "[^a]", "\u00e9", "."]),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}{t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        st.tuples(inner, st.sampled_from(["*", "?", "+", "{0,2}", "{2,3}"])).map(
            lambda t: f"(?:{t[0]}){t[1]}"
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(pattern=st.one_of(st.sampled_from(PATTERNS + ["", "a|ab|abc"]), _small_regexes))
def test_minimizing_a_minimal_dfa_changes_nothing(pattern):
    # `minimal` skips `to_ir`'s second minimization on `dfas`' output: it must be the same
    # table, state for state, and the same IR node.
    part, (dfa,) = _char_dfa.dfas(_regex.parse(pattern, None))
    again = _char_dfa._fsa.minimize(dfa, _char_dfa._budget("x"))
    if again is None:  # the empty language: `dfas` gives a DFA with no accepting state
        assert not dfa.accepting.any()
    else:
        assert (again.trans == dfa.trans).all() and (again.accepting == dfa.accepting).all()
        assert again.start == dfa.start
    a, b = _char_dfa.to_ir(part, dfa, is_minimal=True), _char_dfa.to_ir(part, dfa)
    assert fingerprint(a) == fingerprint(b)  # `Automaton` nodes compare by identity
    empty = _char_dfa._empty(len(part.atoms))
    assert _char_dfa.to_ir(part, empty, is_minimal=True) is NEVER is _char_dfa.to_ir(part, empty)


_ascii_regexes = st.recursive(
    st.sampled_from(["a", "b", "[ab]", "[^a\\x80-\\U0010FFFF]", "[0-9]", '"']),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}{t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
        st.tuples(inner, st.sampled_from(["*", "?", "{0,3}", "{2}"])).map(
            lambda t: f"(?:{t[0]}){t[1]}"
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(pattern=st.one_of(_ascii_regexes, _small_regexes))
def test_ascii_states_is_the_byte_dfa_size(pattern):
    node = _regex.parse(pattern, None)
    m = _char_dfa.minimal(node)
    if m is None or _char_dfa.is_never(m):
        return
    n = _char_dfa.ascii_states(m)
    ascii_only = all(hi < 0x80 for s in _char_dfa.char_sets(m, set()) for _, hi in s)
    assert (n is not None) == ascii_only
    if n is not None:
        assert n == _byte_dfa.build_byte_dfa(node).num_states
    assert _char_dfa.ascii_states(Chars(((97, 97),))) is None  # not an automaton
