"""Tests of the automaton core (`automata._fsa`, `automata._char_dfa`).

Boolean operations are checked against brute force over every string of up to five
characters of a small alphabet, judged by the `regex` package; budgets must raise
`StateBudgetExceededError` naming what grew, quickly, instead of running on.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile import StateBudgetExceededError
from automata_compile.automata import _byte_dfa, _char_dfa, _fsa
from automata_compile.automata._ir import Automaton
from automata_compile.frontends import _regex

ALPHABET = "abc"
STRINGS = ["".join(p) for n in range(6) for p in itertools.product(ALPHABET, repeat=n)]


def _atoms():
    return st.sampled_from(["a", "b", "c", "[ab]", "[^a]", "."])


def _patterns(depth: int = 3):
    leaf = _atoms()
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}{t[1]})"),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            st.tuples(inner, st.sampled_from(["*", "?", "+", "{0,2}", "{2}", "{1,3}"])).map(
                lambda t: f"(?:{t[0]}){t[1]}"
            ),
        ),
        max_leaves=6,
    )


def language(pattern: str) -> set[str]:
    rx = regex.compile(pattern, regex.DOTALL)
    return {s for s in STRINGS if rx.fullmatch(s)}


def accepted(node) -> set[str]:
    return {s for s in STRINGS if _char_dfa.matches(node, s)}


SETTINGS = settings(max_examples=60, deadline=None)


@SETTINGS
@given(p=_patterns(), q=_patterns())
def test_intersection_is_the_intersection_of_languages(p, q):
    node = _char_dfa.intersect(_regex.parse(p, None), _regex.parse(q, None))
    assert isinstance(node, Automaton) or _char_dfa.is_never(node)
    assert accepted(node) == language(p) & language(q)


@SETTINGS
@given(p=_patterns())
def test_complement(p):
    node = _char_dfa.complement(_regex.parse(p, None))
    assert accepted(node) == set(STRINGS) - language(p)
    # the complement is over every character, not only the pattern's alphabet
    assert _char_dfa.matches(node, "\u00e9") == (regex.fullmatch(p, "\u00e9", regex.S) is None)


@SETTINGS
@given(p=_patterns(), q=_patterns())
def test_difference_and_emptiness(p, q):
    a, b = _regex.parse(p, None), _regex.parse(q, None)
    node = _char_dfa.difference(a, b)
    assert accepted(node) == language(p) - language(q)
    # a difference with no string up to length 5 may still be non-empty: compare on the
    # automaton itself (its language is empty iff the minimal DFA has no state)
    assert _char_dfa.is_empty(node) == _char_dfa.is_never(node)
    assert _char_dfa.is_empty(_char_dfa.difference(a, a))
    assert _char_dfa.disjoint(a, b) == _char_dfa.is_never(_char_dfa.intersect(a, b))


@SETTINGS
@given(p=_patterns(), n=st.integers(0, 4))
def test_bounded_length_intersection(p, n):
    node = _char_dfa.with_max_length(_regex.parse(p, None), n)
    assert accepted(node) == {s for s in language(p) if len(s) <= n}


@SETTINGS
@given(p=_patterns())
def test_longest_is_the_length_past_which_nothing_is_accepted(p):
    """Oracle: the language minus its strings of at most n characters (a bounded
    intersection) is empty at the longest n and not below; no longest: empty or infinite."""
    node = _regex.parse(p, None)
    _, (dfa,) = _char_dfa.dfas(node, what="a test")
    n = _fsa.longest(dfa)

    def longer_than(k):
        return not _char_dfa.is_empty(
            _char_dfa.difference(node, _char_dfa.with_max_length(node, k))
        )

    if n is None:
        assert _char_dfa.is_empty(node) or longer_than(64)
    else:
        assert not longer_than(n) and (n == 0 or longer_than(n - 1))


@SETTINGS
@given(p=_patterns(), q=_patterns())
def test_byte_dfa_of_an_intersection_matches_its_bytes(p, q):
    node = _char_dfa.intersect(_regex.parse(p, None), _regex.parse(q, None))
    if _char_dfa.is_never(node):
        return
    dfa = _byte_dfa.build_byte_dfa(node)
    for s in STRINGS + ["\u00e9", "a\U0001f600"]:
        want = bool(regex.fullmatch(p, s, regex.S)) and bool(regex.fullmatch(q, s, regex.S))
        assert dfa.matches(s.encode("utf-8")) == want, s


def _dense(pattern: str) -> _fsa.DFA:
    d = _byte_dfa.build_byte_dfa(_regex.parse(pattern, None))
    return _fsa.DFA(d.trans, d.accepting, d.start)


def test_product_ops_on_dense_tables():
    a, b = _dense("[ab]*a"), _dense("a[ab]*")
    budget = _fsa.Budget("test")
    both = _fsa.product(a, b, "and", budget)
    minus = _fsa.product(a, b, "minus", budget)
    either = _fsa.product(a, b, "or", budget)
    for s in ["".join(p) for n in range(5) for p in itertools.product("ab", repeat=n)]:
        x, y = a.run(s.encode()), b.run(s.encode())
        assert both.run(s.encode()) == (x and y)
        assert minus.run(s.encode()) == (x and not y)
        assert either.run(s.encode()) == (x or y)
    assert _fsa.is_empty(_fsa.product(a, _fsa.complement(a), "and", budget))
    small = _fsa.minimize(both)
    assert small.num_states <= both.num_states


def test_nfa_simulation_agrees_with_the_dfa():
    ir = _regex.parse("(?:ab|a)*b{1,3}", None)
    nfa, s, e = _byte_dfa.byte_nfa(ir)
    dfa = _byte_dfa.build_byte_dfa(ir)
    for w in STRINGS:
        assert _fsa.nfa_accepts(nfa, s, e, w.encode()) == dfa.matches(w.encode()), w


# -- budgets ---------------------------------------------------------------------------------


def test_stacked_bounded_repeats_finish_or_hit_the_work_budget():
    # (.{0,100}){10} is .{0,1000}: flattened, then 1,001 positions x 8 UTF-8 states. Its
    # minimization costs linear work (a round per link, each sorting a few states):
    # (.{0,100}){100}, 80,001 states, once past the work budget, now finishes (in seconds,
    # so not here); a budget below the first round's states still stops it, by name.
    dfa = _byte_dfa.build_byte_dfa(_regex.parse("(.{0,100}){10}", None))
    assert dfa.num_states == 8001
    assert dfa.matches(b"x" * 1000) and not dfa.matches(b"x" * 1001)
    budget = _fsa.Budget(what="a chain", max_work=1000)
    with pytest.raises(StateBudgetExceededError, match="minimization of a chain exceeds its work"):
        _fsa.minimize(_fsa.DFA(dfa.trans, dfa.accepting, dfa.start), budget)


def test_unflattenable_stacked_repeats_hit_the_subset_work_budget():
    with pytest.raises(
        StateBudgetExceededError, match="the subset construction of the pattern's byte DFA"
    ):
        _byte_dfa.build_byte_dfa(_regex.parse("(?:(?:ab|.){0,100}){10}", None))


@settings(max_examples=80, deadline=None)
@given(
    a=st.integers(0, 3),
    db=st.integers(0, 3),
    c=st.integers(0, 3),
    dd=st.one_of(st.none(), st.integers(0, 3)),
    unbounded_inner=st.booleans(),
)
def test_flattened_repeats_keep_the_language(a, db, c, dd, unbounded_inner):
    inner = f"a{{{a},}}" if unbounded_inner else f"a{{{a},{a + db}}}"
    outer = f"{{{c},}}" if dd is None else f"{{{c},{c + dd}}}"
    pattern = f"(?:{inner}){outer}"
    dfa = (
        _byte_dfa.build_byte_dfa(_regex.parse(pattern, None))
        if language_nonempty(pattern)
        else None
    )
    for n in range(0, 14):
        want = regex.fullmatch(pattern, "a" * n) is not None
        assert (dfa is not None and dfa.matches(b"a" * n)) == want, (pattern, n)


def language_nonempty(pattern: str) -> bool:
    return any(regex.fullmatch(pattern, "a" * n) for n in range(40))


def test_product_budget_names_the_step():
    a, b = _dense("[ab]*a[ab]{6}"), _dense("[ab]*b[ab]{6}")
    with pytest.raises(
        StateBudgetExceededError, match=r"a product of the test exceeds max_states=50"
    ):
        _fsa.product(a, b, "and", _fsa.Budget("the test", max_states=50))


def test_length_bound_budget_names_the_step():
    a = _dense("[ab]*")
    with pytest.raises(
        StateBudgetExceededError, match=r"a length bound of x exceeds max_states=10"
    ):
        _fsa.bounded(a, 100, _fsa.Budget("x", max_states=10))


def test_character_intersection_budget(monkeypatch):
    monkeypatch.setattr(_char_dfa, "MAX_STATES", 40)
    a = _regex.parse("[a-z]*x[a-z]{8}", None)
    b = _regex.parse("[a-z]*y[a-z]{8}", None)
    with pytest.raises(StateBudgetExceededError, match="an intersection of string constraints"):
        _char_dfa.intersect(a, b)


def test_dense_tables_are_int32():
    d = _dense("a|bc")
    assert d.trans.dtype == np.int32 and d.accepting.dtype == bool


def test_limits_pause_the_garbage_collector_and_restore_it():
    import gc
    import threading

    assert gc.isenabled()
    with _fsa.limits(5.0, "x"):
        assert not gc.isenabled()
        with _fsa.limits(None, "y"):  # nested: still paused, and after the inner block too
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    # Overlapping blocks in two threads: the last to close re-enables it.
    inside, leave = threading.Event(), threading.Event()

    def other():
        with _fsa.gc_paused():
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=other)
    t.start()
    inside.wait(5)
    with _fsa.gc_paused():
        leave.set()
        t.join()
        assert not gc.isenabled()
    assert gc.isenabled()
    # A collector the caller had disabled stays disabled.
    gc.disable()
    try:
        with _fsa.limits(5.0, "x"):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_limits_restore_the_collector_after_an_error():
    import gc

    with pytest.raises(StateBudgetExceededError), _fsa.limits(5.0, "x"):
        raise StateBudgetExceededError("boom")
    assert gc.isenabled()
