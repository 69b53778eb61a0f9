"""The rule-DFA memo of the byte PDA (`_byte_dfa.cached_byte_dfa`, keyed by `_ir.fingerprint`):
a hit is the DFA a fresh build gives, and budgets and deadlines still apply."""

from __future__ import annotations

import numpy as np
import pytest

from automata_compile._errors import CompileTimeoutError, StateBudgetExceededError
from automata_compile.automata import _byte_dfa, _fsa
from automata_compile.automata._ir import Automaton, Chars, Repeat, Seq, Terminal, fingerprint
from automata_compile.frontends.json_schema import parse_options
from automata_compile.pipeline import byte_language

WORD = Seq((Chars(((97, 122),)), Repeat(Chars(((48, 57), (97, 122))), 0, None), Terminal(0)))


@pytest.fixture(autouse=True)
def empty_cache(monkeypatch):
    monkeypatch.setattr(_byte_dfa, "_CACHE", type(_byte_dfa._CACHE)())
    monkeypatch.setattr(_byte_dfa, "_cache_bytes", 0)


def same_dfa(a, b) -> bool:
    return (
        a.start == b.start
        and np.array_equal(a.trans, b.trans)
        and np.array_equal(a.accepting, b.accepting)
    )


def test_hit_is_the_fresh_build():
    first = _byte_dfa.cached_byte_dfa(WORD, 1)
    # an equal tree built anew hits: the key is the structure, not the objects
    again = Seq((Chars(((97, 122),)), Repeat(Chars(((48, 57), (97, 122))), 0, None), Terminal(0)))
    assert _byte_dfa.cached_byte_dfa(again, 1) is first
    assert same_dfa(first, _byte_dfa.build_byte_dfa(WORD, 1))
    assert not first.trans.flags.writeable and not first.accepting.flags.writeable
    # another terminal count is another table
    assert _byte_dfa.cached_byte_dfa(WORD, 2).num_terminals == 2


def test_state_budget_still_enforced_on_a_hit():
    _byte_dfa.cached_byte_dfa(WORD, 1)
    with pytest.raises(StateBudgetExceededError, match="max_states=1"):
        _byte_dfa.cached_byte_dfa(WORD, 1, max_states=1)


def test_deadline_still_enforced_on_a_hit():
    _byte_dfa.cached_byte_dfa(WORD, 1)
    with _fsa.limits(1e-9, "the grammar"), pytest.raises(CompileTimeoutError) as info:
        _byte_dfa.cached_byte_dfa(WORD, 1, what="the grammar")
    assert "in the NFA construction of the grammar's byte DFA" in str(info.value)


def test_lru_bound(monkeypatch):
    monkeypatch.setattr(_byte_dfa, "CACHE_ENTRIES", 2)
    for n in range(4):
        _byte_dfa.cached_byte_dfa(Repeat(Chars(((97, 97),)), n, n))
    assert len(_byte_dfa._CACHE) == 2
    assert _byte_dfa._cache_bytes == sum(
        d.trans.nbytes + d.accepting.nbytes for d in _byte_dfa._CACHE.values()
    )


def test_fingerprint_compares_automata_by_structure():
    def automaton(label):
        return Automaton(edges=(((label, 1),), ()), start=0, finals=frozenset({1}))

    a, b = automaton(((97, 98),)), automaton(((97, 98),))
    assert a != b and fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(automaton(((97, 99),)))
    # a character-set label is not the same tree as a `Chars` node label
    assert fingerprint(a) != fingerprint(automaton(Chars(((97, 98),))))
    assert fingerprint(Seq((a, a))) != fingerprint(Seq((a,)))


def test_byte_language_same_with_a_warm_cache():
    schema, opts = (
        {"properties": {"a": {"minimum": 1.5}, "b": {"type": "string"}}},
        parse_options({}),
    )
    _, cold = byte_language(schema, opts)
    _, warm = byte_language(schema, opts)
    assert cold.names == warm.names and cold.returns == warm.returns
    for f in ("rule_of", "starts", "shift", "ends", "kind", "arg", "ret"):
        assert np.array_equal(getattr(cold, f), getattr(warm, f)), f
