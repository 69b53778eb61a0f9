"""The any-order budget decided from floors of the labels' sizes (`_floors`,
`_emitter._Emitter._refused_by_floors`).

Oracles: each floor against the minimal byte DFA it bounds (built); the refusal against
the budget computed from the built sizes (``_emitter.EARLY_REFUSAL = False``, the former
path): the same byte automaton, state for state, and the same warnings, word for word.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automata_compile import EmptyLanguageError
from automata_compile.automata import _byte_dfa
from automata_compile.automata._ir import Alt, Automaton, Chars, Repeat, Seq, Terminal
from automata_compile.frontends.json_schema import _emitter, _floors

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from byte_language_oracle import (  # noqa: E402
    assert_same,
    byte_arrays,
    fresh_memos,
    nested_objects,
)

CHARS = st.sampled_from(
    [((97, 97),), ((97, 99),), ((0xE9, 0xE9),), ((0x4E00, 0x4E01),), ((0xD800, 0xDFFF),), ()]
)


def _ir(depth: int = 3):
    leaf = st.one_of(CHARS.map(Chars), st.just(Terminal(0)))
    if not depth:
        return leaf
    kid = _ir(depth - 1)
    automaton = st.builds(
        lambda labels, finals: Automaton(
            edges=tuple(((lab, (i + 1) % 3),) for i, lab in enumerate(labels)),
            start=0,
            finals=frozenset(finals),
        ),
        st.lists(st.one_of(CHARS, kid), min_size=3, max_size=3),
        st.sets(st.integers(0, 2), max_size=2),
    )
    return st.one_of(
        leaf,
        st.lists(kid, max_size=3).map(lambda xs: Seq(tuple(xs))),
        st.lists(kid, max_size=3).map(lambda xs: Alt(tuple(xs))),
        st.builds(Repeat, kid, st.integers(0, 2), st.sampled_from([None, 2, 3])),
        automaton,
    )


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(node=_ir())
def test_a_floor_is_at_most_the_minimal_byte_dfa(node):
    sure, _ = _floors.shortest(node, {})
    try:
        states = _byte_dfa.build_byte_dfa(node, num_terminals=1).num_states
    except EmptyLanguageError:
        states = 0
    assert _floors.size_floor(node, {}) <= states
    if sure:
        assert states > 0


def test_floors_of_literals_are_exact():
    lit = Seq(tuple(Chars(((c, c),)) for c in b'"name":'))
    assert _floors.size_floor(lit, {}) == 8 == _byte_dfa.build_byte_dfa(lit).num_states
    assert _floors.size_floor(Alt(()), {}) == 0
    assert _floors.size_floor(Chars(((0xD800, 0xDBFF),)), {}) == 0  # surrogates: no char


VALUES = [
    {"type": "integer"},
    {"type": "boolean"},
    {"type": "string", "maxLength": 12},
    {"type": "string", "pattern": "^[a-zé]{2,9}$"},
    {"enum": ["alpha", "beta", "gamma"]},
    {},  # a free value: a rule call
]


def _extras(draw, schema) -> None:
    extra = draw(st.sampled_from(["free", "none", "pattern"]))
    if extra == "none":
        schema["additionalProperties"] = False
    elif extra == "pattern":
        schema["patternProperties"] = {"^x_": {"type": "integer"}}
        schema["additionalProperties"] = False
    if draw(st.integers(0, 3)) == 0:
        schema["maxProperties"] = draw(st.integers(1, 6))
    if draw(st.integers(0, 3)) == 0:
        schema["minProperties"] = draw(st.integers(1, 3))


def objects():
    names = [f"prop_{c}" for c in "abcdefghijklmnop"]
    return nested_objects(
        depth=1, names=names, values=VALUES, sizes=(2, 15), nest=5, required=3, tail=_extras
    )


def _build(schema, early: bool, monkeypatch):
    """The byte DFA (or byte PDA arrays) and the warnings, with fresh memos."""
    monkeypatch.setattr(_emitter, "EARLY_REFUSAL", early)
    fresh_memos(monkeypatch)
    return byte_arrays(schema)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(schema=objects())
def test_floors_refuse_as_the_sizes_do(schema):
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        old, old_warned = _build(schema, False, mp)
        new, new_warned = _build(schema, True, mp)
    assert_same(old, new)
    assert new_warned == old_warned


WIDE = {
    "type": "object",
    "properties": {f"property_{i}": {"type": "string", "maxLength": 8} for i in range(14)},
    "required": ["property_0"],
}


def test_a_wide_object_is_refused_without_its_sizes(monkeypatch):
    """14 properties: the floors pass the budget long before 4,096 sets, so no label's
    byte DFA is built for the budget; the outcome and the warning are the sizes'."""
    sized = []
    size = _emitter._Emitter._dfa_size

    def spy(self, label):
        sized.append(label)
        return size(self, label)

    monkeypatch.setattr(_emitter._Emitter, "_dfa_size", spy)
    old, old_warned = _build(WIDE, False, monkeypatch)
    assert sized
    sized.clear()
    new, new_warned = _build(WIDE, True, monkeypatch)
    assert not sized
    assert_same(old, new)
    assert new_warned == old_warned and len(new_warned) == 1
    assert "automaton states more than declared order" in new_warned[0]
