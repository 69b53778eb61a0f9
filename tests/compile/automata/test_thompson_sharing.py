"""One copy of a repeated subtree in the Thompson NFA (`_thompson._units`, `_either`):
``a (sep a)*`` as a loop, ``first (sep last)? | last`` and ``(first sep)? last | first``
as ``first | first sep last | last``.

Oracle: the same construction with two copies (``_thompson.LOOPS = False``, the former
path): the same minimal DFA, state for state, with at most its NFA states, subset states
and work; and JSON Schema byte automata (arrays of objects, declared order) the same.
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
from automata_compile.automata._ir import Alt, Chars, Repeat, Seq

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from byte_language_oracle import (  # noqa: E402
    assert_same,
    byte_arrays,
    closed_or_open,
    fresh_memos,
    nested_objects,
)

LEAVES = [Chars(((c, c),)) for c in b"ab,["] + [Chars(((97, 122),)), Chars(((0xE9, 0xE9),))]


def _tree(depth: int = 2):
    leaf = st.sampled_from(LEAVES)
    if not depth:
        return leaf
    kid = _tree(depth - 1)
    return st.one_of(
        leaf,
        st.lists(kid, min_size=1, max_size=3).map(lambda xs: Seq(tuple(xs))),
        st.lists(kid, min_size=1, max_size=2).map(lambda xs: Alt(tuple(xs))),
        st.builds(Repeat, kid, st.integers(0, 1), st.sampled_from([None, 1, 2])),
    )


def _items(x) -> tuple:
    return x.items if isinstance(x, Seq) else (x,)


@st.composite
def shared(draw):
    """A tree holding the shapes the NFA shares (and near misses: a different copy)."""
    a, sep, b = draw(_tree()), draw(_tree(1)), draw(_tree())
    other = draw(st.sampled_from([a, b, draw(_tree(1))]))  # usually a copy: shared
    sep_items = _items(sep)
    shape = draw(st.integers(0, 2))
    if shape == 0:  # a (sep a)*
        node = Seq((*_items(a), Repeat(Seq((*sep_items, *_items(other))), 0, None)))
    elif shape == 1:  # first (sep last)? | last
        node = Alt((Seq((*_items(a), Repeat(Seq((*sep_items, *_items(b))), 0, 1))), other))
    else:  # (first sep)? last | first
        node = Alt((Seq((Repeat(Seq((*_items(a), *sep_items)), 0, 1), *_items(b))), other))
    if draw(st.booleans()):
        node = Seq((Chars(((123, 123),)), node, Repeat(node, 0, None)))
    return node


def _dfa(node, loops: bool, monkeypatch):
    monkeypatch.setattr(_thompson, "LOOPS", loops)
    nfa, s, e = _byte_dfa.byte_nfa(node)
    stats: dict = {}
    d = _fsa.minimal_dfa(nfa, s, e, _byte_dfa.NUM_BYTES, stats=stats)
    return d, len(nfa.edges), stats


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(node=shared())
def test_one_copy_builds_the_same_minimal_dfa(node):
    with pytest.MonkeyPatch.context() as mp:
        old, old_nfa, old_st = _dfa(node, False, mp)
        new, new_nfa, new_st = _dfa(node, True, mp)
    if old is None:
        assert new is None
        return
    np.testing.assert_array_equal(old.trans, new.trans)
    np.testing.assert_array_equal(old.accepting, new.accepting)
    assert old.start == new.start
    assert new_nfa <= old_nfa
    assert new_st["states"] <= old_st["states"] and new_st["work"] <= old_st["work"]


def test_a_loop_has_one_copy():
    comma = Chars(((44, 44),))
    a = Seq((Chars(((97, 122),)), *(Chars(((c, c),)) for c in b"yz}")))
    node = Seq((*a.items, Repeat(Seq((comma, *a.items)), 0, None)))
    units = _thompson._units(node.items)
    assert len(units) == 1 and units[0].sep == comma and units[0].body == a
    assert _thompson._units(a.items) is a.items  # nothing shared: the items as they are
    # a lead of literals stays a chain (`_char_dfa._after_literal` bounds it by its tail)
    lit = Seq(tuple(Chars(((c, c),)) for c in b"{yz}"))
    node = Seq((*lit.items, Repeat(Seq((comma, *lit.items)), 0, None)))
    assert _thompson._units(node.items) is node.items
    node = Seq((*lit.items, a, Repeat(Seq((comma, a)), 0, None)))
    assert _thompson._units(node.items)[len(lit.items)] == _thompson._Loop(a, comma)


VALUES = [{"type": "integer"}, {"type": "boolean"}, {"type": "string", "maxLength": 4}, {}]


def schemas():
    return nested_objects(depth=2, names="abcde", sizes=(1, 4), values=VALUES, tail=closed_or_open)


def _language(schema, order: str, loops: bool, monkeypatch):
    """The byte DFA (or byte PDA arrays), with empty memos (a hit would skip the build)."""
    monkeypatch.setattr(_thompson, "LOOPS", loops)
    fresh_memos(monkeypatch)
    out, _ = byte_arrays(schema, {"property_order": order})
    assert out[0] != "error", out
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=schemas(), order=st.sampled_from(["declared", "any"]))
def test_schemas_build_the_same_byte_automaton(schema, order):
    with pytest.MonkeyPatch.context() as mp:
        old = _language(schema, order, False, mp)
        new = _language(schema, order, True, mp)
    assert_same(old, new)


ITEM = {
    "type": "object",
    "properties": {
        **{k: {"type": "integer"} for k in "abcd"},
        "s": {"type": "string", "maxLength": 3},
    },
    "required": ["a"],
}
NESTED = {  # test_byte_dfa_pieces.py's
    "type": "object",
    "properties": {"xs": {"type": "array", "items": ITEM}, "n": {"type": "boolean"}},
}


def test_one_copy_lets_a_construction_fit_its_budget(monkeypatch):
    """The decision change (toward fitting only: the one-copy construction meets at most
    the two-copy one's states and work): without pieces, the nested schema of
    test_byte_dfa_pieces.py passed ``max_states=50,000`` with two copies of its array's
    element (its objects then in declared order); with one copy it fits, the tables the
    two-copy construction gives under a larger budget."""
    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    tables = {}
    for loops, max_states in ((False, 50_000), (False, 100_000), (True, 50_000)):
        monkeypatch.setattr(_thompson, "LOOPS", loops)
        monkeypatch.setattr(_byte_dfa, "PIECES", False)
        fresh_memos(monkeypatch)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tables[loops, max_states] = ac.compile_json_schema(NESTED, vocab, max_states=max_states)
        fell_back = any(isinstance(w.message, ac.OrderFallbackWarning) for w in caught)
        assert fell_back == (not loops and max_states == 50_000)
    ref, new = tables[False, 100_000], tables[True, 50_000]
    for name in ("token_class", "next_state", "accepting"):
        np.testing.assert_array_equal(getattr(ref, name), getattr(new, name))
