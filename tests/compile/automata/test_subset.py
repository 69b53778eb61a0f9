"""The vectorized subset construction (`automata._subset`) against a one-state-at-a-time
reference: the same DFA table, state for state (same numbering), on random regexes, on
byte NFAs with several classes per edge, and on JSON-Schema-sized NFAs; hash collisions
of state sets must not merge different sets. Each test runs with every level vectorized
(``SMALL_LEVEL = -1``), with every level in plain Python (`_subset._small_level`) and with
the shipped threshold (the two kinds of level interleaved)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile._errors import StateBudgetExceededError
from automata_compile.automata import _byte_dfa, _fsa, _subset
from automata_compile.frontends import _regex
from automata_compile.frontends.json_schema import parse_options, schema_ir


@pytest.fixture(
    autouse=True, params=[-1, _subset.SMALL_LEVEL, 10**9], ids=["numpy", "mixed", "python"]
)
def small_level(request, monkeypatch):
    monkeypatch.setattr(_subset, "SMALL_LEVEL", request.param)
    return request.param


def _patterns():
    leaf = st.sampled_from(["a", "b", "c", "[ab]", "[^a]", ".", "é", "[0-9]"])
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


def reference(nfa, start: int, final: int, num_symbols: int):
    """FIFO subset construction, successors numbered in increasing symbol order."""

    def closure(states) -> frozenset:
        seen, stack = set(states), list(states)
        while stack:
            for z in nfa.eps[stack.pop()]:
                if z not in seen:
                    seen.add(z)
                    stack.append(z)
        return frozenset(y for y in seen if nfa.edges[y] or y == final)

    first = closure([start])
    ids, order, rows = {first: 0}, [first], []
    i = 0
    while i < len(order):
        cur = order[i]
        i += 1
        row = np.full(num_symbols, -1, np.int32)
        for a in range(num_symbols):
            targets = [t for x in cur for lo, hi, t in nfa.edges[x] if lo <= a <= hi]
            if targets:
                key = closure(targets)
                if key not in ids:
                    ids[key] = len(order)
                    order.append(key)
                row[a] = ids[key]
        rows.append(row)
    return np.stack(rows), np.array([final in s for s in order])


def _same(pattern: str):
    nfa, s, e = _byte_dfa.byte_nfa(_regex.parse(pattern, None))
    trans, accepting = reference(nfa, s, e, 256)
    dfa = _fsa.determinize(nfa, s, e, 256)
    np.testing.assert_array_equal(dfa.trans, trans)
    np.testing.assert_array_equal(dfa.accepting, accepting)


@settings(max_examples=80, deadline=None)
@given(_patterns())
def test_same_table_as_the_reference(pattern):
    _same(pattern)


@pytest.mark.parametrize(
    "pattern",
    ["", "a*", "(a|b)*a(a|b){3}", '[^"\\\\]{0,4}é|.', "(?:ab|.){0,5}", "[0-9]+(\\.[0-9]+)?"],
)
def test_same_table_on_byte_classes(pattern):
    _same(pattern)


def test_same_table_on_a_schema_nfa():
    ir = schema_ir({"type": "array", "items": {"type": "integer"}}, parse_options({}))
    nfa, s, e = _byte_dfa.byte_nfa(ir)
    trans, accepting = reference(nfa, s, e, 256)
    dfa = _fsa.determinize(nfa, s, e, 256)
    np.testing.assert_array_equal(dfa.trans, trans)
    np.testing.assert_array_equal(dfa.accepting, accepting)


def test_hash_collisions_do_not_merge_sets(monkeypatch):
    """With every NFA state weighing the same, distinct sets of equal size collide."""

    class Flat:
        def __init__(self, seed):
            pass

        def integers(self, lo, hi, size, dtype):
            return np.ones(size, dtype)

    monkeypatch.setattr(_subset.np.random, "default_rng", Flat)
    _same("(a|b)*a(a|b){3}")
    _same("(?:ab|.){0,4}")


def _budget_error(pattern: str, max_states: int, max_work: int) -> str:
    nfa, s, e = _byte_dfa.byte_nfa(_regex.parse(pattern, None))
    nfa.budget = _fsa.Budget("the pattern", max_states, max_work)
    with pytest.raises(StateBudgetExceededError) as err:
        _fsa.determinize(nfa, s, e, 256)
    return str(err.value)


@pytest.mark.parametrize("max_states, max_work", [(1, 10**6), (2, 10**6), (5, 10**6), (10**5, 40)])
def test_budgets_stop_both_kinds_of_level_alike(max_states, max_work, monkeypatch):
    """The same `StateBudgetExceededError` (states or work, same message) whichever kind of
    level passes the budget."""
    msgs = set()
    for small in (-1, 10**9):
        monkeypatch.setattr(_subset, "SMALL_LEVEL", small)
        msgs.add(_budget_error("(a|b)*a(a|b){3}x[0-9]{2,5}", max_states, max_work))
    assert len(msgs) == 1, msgs


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30),
            st.lists(st.booleans(), min_size=n, max_size=n),
            st.lists(st.integers(0, n - 1), min_size=1, max_size=8),
            st.sampled_from([0, 1, 2, _subset.MEMO_DEPTH]),
        )
    )
)
def test_closures_against_a_search_per_target(case):
    # Epsilon graphs with cycles and fan-outs: the memoized closures are each target's
    # important reachable states, sorted, whatever the memo depth.
    n, edges, important, targets, depth = case
    eps = [[] for _ in range(n)]
    for a, b in edges:
        eps[a].append(b)
    saved, _subset.MEMO_DEPTH = _subset.MEMO_DEPTH, depth
    try:
        off, length, mem = _subset._closures(eps, np.array(targets), np.array(important), n)
    finally:
        _subset.MEMO_DEPTH = saved
    for t in range(n):
        if t not in targets:
            assert length[t] == 0
            continue
        seen, stack = {t}, [t]
        while stack:
            for z in eps[stack.pop()]:
                if z not in seen:
                    seen.add(z)
                    stack.append(z)
        want = sorted(y for y in seen if important[y])
        assert mem[off[t] : off[t] + length[t]].tolist() == want
