"""The automaton core's deadline checkpoints added for issue 20, item 3 (every compile
ends by its deadline): an IR's fingerprint, the subset construction's set-up and epsilon
closures. On renovate each ran for seconds without reaching `_fsa.check_time` (its compile
ended 22 s past its 30 s deadline); under an expired deadline they now raise
`CompileTimeoutError` naming their step."""

from __future__ import annotations

import pytest

from automata_compile._errors import CompileTimeoutError
from automata_compile.automata import Chars, Seq, _fsa, _subset, fingerprint


def test_fingerprint_checks_the_deadline():
    ir = Seq(tuple(Chars(((i, i),)) for i in range(3000)))
    with _fsa.limits(1e-9, "the schema"), pytest.raises(CompileTimeoutError) as info:
        fingerprint(ir)
    assert "in the fingerprint of an automaton's IR" in str(info.value)
    assert fingerprint(ir) == fingerprint(Seq(tuple(Chars(((i, i),)) for i in range(3000))))


def _eps_chain(n: int) -> _fsa.NFA:
    """States 0..n: a ``lo``-byte edge and an epsilon edge from each to the next."""
    nfa = _fsa.NFA(_fsa.Budget(), 10 * n)
    for _ in range(n + 1):
        nfa.state()
    for i in range(n):
        nfa.edges[i].append((i % 200, i % 200, i + 1))
        nfa.eps[i].append(i + 1)
    return nfa


def test_subset_construction_checks_the_deadline_before_its_closures(monkeypatch):
    nfa = _eps_chain(3000)
    closures, calls = _subset._closures, []

    def spy(*args):
        calls.append(1)
        return closures(*args)

    monkeypatch.setattr(_subset, "_closures", spy)
    with _fsa.limits(1e-9, "the schema"), pytest.raises(CompileTimeoutError) as info:
        _fsa.determinize(nfa, 0, 3000, 256)
    assert "in the subset construction" in str(info.value)
    assert not calls  # checked before the closures (seconds on renovate's pieces)


def test_epsilon_closures_tick():
    nfa = _eps_chain(3000)
    ticks = []
    targets = _subset.np.arange(3001)
    important = _subset.np.ones(3001, bool)
    _subset._closures(nfa.eps, targets, important, 3001, ticks.append)
    assert len(ticks) >= 2 and ticks == sorted(ticks)  # once per 1,024 targets: members kept


def test_epsilon_closures_have_a_memory_guard(monkeypatch):
    """The closures of all edge targets are bounded before the first level (circle-ci's
    property sizing grew to 13 GB there): past ``CLOSURE_GUARD`` times the work budget,
    the named budget error."""
    from automata_compile._errors import StateBudgetExceededError

    nfa = _eps_chain(800)  # closures of 800 + 799 + ... members
    assert _fsa.determinize(nfa, 0, 800, 256).num_states == 801
    monkeypatch.setattr(_subset, "CLOSURE_GUARD", 1)
    nfa.budget = _fsa.Budget("the test's NFA", 100_000, 100_000)
    with pytest.raises(StateBudgetExceededError, match="the epsilon closures"):
        _fsa.determinize(nfa, 0, 800, 256)
