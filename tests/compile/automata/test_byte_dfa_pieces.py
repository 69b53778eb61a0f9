"""Pieces in the byte NFA (`_byte_dfa._Bytes`): a composite automaton (an object's
properties as a counting construction) determinized and minimized alone, and a label's
byte DFA built before, spliced into the parent's NFA.

Oracle: the same construction with pieces off (`_byte_dfa.PIECES = False`, the former
path). The minimal byte DFA must be the same table, state for state (the PDA's arrays
are compared as they are numbered), and the token tables over Llama-3 the same arrays.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile.automata import _byte_dfa, _fsa, _thompson
from automata_compile.automata._ir import Automaton, Chars, Repeat, Seq

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from byte_language_oracle import (  # noqa: E402
    assert_same,
    byte_arrays,
    closed_or_open,
    fresh_memos,
    nested_objects,
)

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)

VALUES = [
    {"type": "integer"},
    {"type": "boolean"},
    {"type": "string", "maxLength": 3},
    {"type": "string", "pattern": "^[a-zé]+$"},
    {"enum": ["x", 1, None]},
    {},  # a free value: a rule call (a byte PDA)
]


def _fresh(monkeypatch, pieces: bool) -> None:
    """Pieces on or off, with empty memos (a memo hit would skip the construction)."""
    monkeypatch.setattr(_byte_dfa, "PIECES", pieces)
    fresh_memos(monkeypatch)


def objects():
    return nested_objects(
        depth=2, names="abcdefg", values=VALUES, nest=4, max_items=(2, None), tail=closed_or_open
    )


def _build(schema, pieces: bool, monkeypatch):
    """The schema's byte DFA (a regular schema) or its byte PDA's arrays, with the
    translation (and its labels' sizes) done under the same setting."""
    _fresh(monkeypatch, pieces)
    return byte_arrays(schema)[0]


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=objects(), min_states=st.sampled_from([0, 50, _byte_dfa.PIECE_MIN_STATES]))
def test_pieces_build_the_same_byte_automaton(schema, min_states):
    """``min_states`` 0: every nested composite is a piece (the strongest check)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_byte_dfa, "PIECE_MIN_STATES", min_states)
        old = _build(schema, False, mp)
        if old[:2] == ("error", "StateBudgetExceededError"):
            return  # a decision the pieces may change (see the test below)
        assert old[0] != "error", old
        new = _build(schema, True, mp)
    assert_same(old, new)


ITEM = {
    "type": "object",
    "properties": {
        **{k: {"type": "integer"} for k in "abcd"},
        "s": {"type": "string", "maxLength": 3},
    },
    "required": ["a"],
}
NESTED = {
    "type": "object",
    "properties": {"xs": {"type": "array", "items": ITEM}, "n": {"type": "boolean"}},
}


def test_a_repeated_object_is_a_piece(monkeypatch):
    """The array's object is determinized once, as a piece: the schema's NFA and subset
    construction shrink (about 2.4x and 1.4x here), the DFA is the same table."""
    seen = []
    minimal_dfa = _fsa.minimal_dfa

    def spy(nfa, s, e, k, stats=None):
        stats = {} if stats is None else stats
        out = minimal_dfa(nfa, s, e, k, stats=stats)
        if nfa.budget.what.startswith("the schema"):
            seen.append((len(nfa.edges), stats["states"]))
        return out

    monkeypatch.setattr(_fsa, "minimal_dfa", spy)
    old = _build(NESTED, False, monkeypatch)
    (old_nfa, old_sets), seen[:] = seen[0], []
    new = _build(NESTED, True, monkeypatch)
    new_nfa, new_sets = seen[0]
    assert_same(old, new)
    assert new_nfa * 2 < old_nfa and new_sets * 4 < old_sets * 3


def test_pieces_let_a_construction_fit_its_budget(monkeypatch):
    """The deliberate decision change: a schema whose subset construction over Thompson
    copies passed ``max_states=50,000`` (then compiled with its objects in declared order) fits
    with pieces, and keeps any order: the tables built without pieces under a larger
    budget. (Both with two copies of an array's element, `_thompson.LOOPS = False`: one
    copy alone also lets this construction fit, see test_thompson_sharing.py.)"""
    monkeypatch.setattr(_thompson, "LOOPS", False)
    _fresh(monkeypatch, False)
    with pytest.warns(ac.OrderFallbackWarning):
        ac.compile_json_schema(NESTED, BYTES, max_states=50_000)
    _fresh(monkeypatch, False)
    ref = ac.compile_json_schema(NESTED, BYTES, max_states=100_000)
    _fresh(monkeypatch, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = ac.compile_json_schema(NESTED, BYTES, max_states=50_000)
    for name in ("token_class", "next_state", "accepting"):
        np.testing.assert_array_equal(getattr(ref, name), getattr(new, name))
    assert new.accepts(list(b'{"xs":[{"s":"q","b":2,"a":1}],"n":true}'))


def test_a_composite_built_once_is_built_in_place(monkeypatch):
    """An object built once, in no other composite and no repeat, is no piece (its
    construction alone would be as long as the whole's); one inside a repeat is."""
    _fresh(monkeypatch, True)
    monkeypatch.setattr(_byte_dfa, "PIECE_MIN_STATES", 0)
    value = Automaton(edges=(((Chars(((98, 99),)), 1),), ()), start=0, finals=frozenset({1}))
    inner = Automaton(
        edges=(((Seq((Chars(((97, 97),)), value)), 1),), ()), start=0, finals=frozenset({1})
    )
    brace = Chars(((123, 123),))
    _byte_dfa.build_byte_dfa(Seq((brace, inner, brace)))
    assert _byte_dfa._piece(inner) is None
    _byte_dfa.build_byte_dfa(Repeat(Seq((brace, inner)), 0, None))
    assert _byte_dfa._piece(inner) is not None


def test_a_fragment_with_an_edge_out_is_no_piece():
    budget = _fsa.Budget("t")
    nfa = _fsa.NFA(budget, 100)
    s, e, other = nfa.state(), nfa.state(), nfa.state()
    base = nfa.state()
    nfa.eps[s].append(base)
    nfa.edges[base].append((97, 97, other))  # leaves the fragment, not to its end
    node = Automaton(edges=((),), start=0, finals=frozenset())
    assert _byte_dfa._piece_of(node, nfa, base, s, e, 0) is None
    nfa.edges[base][0] = (97, 97, e)
    rows, start, finals = _byte_dfa._piece_of(node, nfa, base, s, e, 0)
    assert rows[start] == [(97, 97, finals[0])]


@pytest.mark.parametrize(
    "schema",
    [
        NESTED,
        {"type": "object", "properties": {"a": {}, "b": {"type": "array", "items": ITEM}}},
        {
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array",
                    "items": {**ITEM, "properties": {**ITEM["properties"], "env": {}}},
                },
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["steps"],
        },
    ],
)
def test_llama3_tables_are_the_same_with_pieces(schema, llama3_vocab, monkeypatch):
    out = []
    for pieces in (False, True):
        _fresh(monkeypatch, pieces)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append(ac.compile_json_schema(schema, llama3_vocab))
    old, new = out
    assert old.is_pda == new.is_pda
    names = ["token_class", "next_state", "accepting", "forced_tokens", "forced_len", "forced_next"]
    for name in names:
        a, b = getattr(old, name), getattr(new, name)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert old.start == new.start
    if old.is_pda:
        for k, v in old.pda_arrays().items():
            np.testing.assert_array_equal(np.asarray(v), np.asarray(new.pda_arrays()[k]))


def test_a_piece_lives_as_long_as_its_node():
    import gc

    node = Automaton(
        edges=(
            (
                (
                    Seq(
                        (
                            Chars(
                                ((97, 97),),
                            ),
                        )
                    ),
                    1,
                ),
            ),
            (),
        ),
        start=0,
        finals=frozenset({1}),
    )
    _byte_dfa._keep(node, ((), 0, ()))
    assert _byte_dfa._piece(node) == ((), 0, ())
    key = id(node)
    del node
    gc.collect()
    assert key not in _byte_dfa._PIECES
