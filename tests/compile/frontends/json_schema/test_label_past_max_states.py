"""An any-order property whose byte DFA alone passes ``max_states`` (`_emitter`, sizing the
any-order budget): its object falls back to declared order with an `OrderFallbackWarning`
naming why, instead of the schema being refused ("the pattern's byte DFA exceeds
max_states", SchemaStore's codecov)."""

from __future__ import annotations

import json
import warnings

import pytest

import automata_compile as ac
from automata_compile.automata import _byte_dfa
from automata_compile.frontends.json_schema import _emitter, parse_options, translate_grammar


def test_a_property_past_max_states_sends_its_object_to_declared_order(monkeypatch):
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^[ab]*a[ab]{6}$"}, "b": {}},
    }
    monkeypatch.setattr(_byte_dfa, "DEFAULT_MAX_STATES", 60)  # the label's DFA has more
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        grammar, _ = translate_grammar(schema, parse_options({}), False)
    reasons = [str(w.message) for w in caught if isinstance(w.message, ac.OrderFallbackWarning)]
    assert len(reasons) == 1
    assert "one property's byte automaton alone passes its budget" in reasons[0]
    body = grammar.bodies[0]
    assert _byte_dfa.ir_matches(body, b'{"a":"aaaaaaa","b":1}')
    assert not _byte_dfa.ir_matches(body, b'{"b":1,"a":"aaaaaaa"}')  # declared order


class _Forgetful(dict):
    """An `_emitter._OVER_BUDGET` that keeps nothing: every label is built again."""

    def __setitem__(self, key, value):
        pass


def test_a_recurring_label_past_its_budget_is_built_once(monkeypatch):
    """Labels whose byte DFA passed the budget are refused again from the first outcome
    (`_emitter._OVER_BUDGET`), not built again, when a later compile meets them: the same
    warnings and the same grammar as when every label is built again."""
    jsonschema = pytest.importorskip("jsonschema")
    costly = {"type": "string", "pattern": "^[ab]*a[ab]{6}$"}
    schema = {
        "type": "object",
        "properties": {
            "x": {"type": "object", "properties": {"a": costly, "b": {"type": "integer"}}},
            "y": {"type": "object", "properties": {"a": costly, "c": {"type": "integer"}}},
        },
    }
    monkeypatch.setattr(_byte_dfa, "DEFAULT_MAX_STATES", 60)
    built = []
    build = _byte_dfa.build_byte_dfa

    def spy(ir, *args, **kwargs):
        try:
            return build(ir, *args, **kwargs)
        except ac.StateBudgetExceededError:
            built.append(ir)
            raise

    monkeypatch.setattr(_byte_dfa, "build_byte_dfa", spy)
    runs = []
    for memo in (_Forgetful(), {}):
        monkeypatch.setattr(_emitter, "_OVER_BUDGET", memo)
        for _ in range(2):  # the second compile meets the labels again
            built.clear()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                grammar, _ = translate_grammar(schema, parse_options({}), False)
            warned = [
                str(w.message) for w in caught if isinstance(w.message, ac.OrderFallbackWarning)
            ]
            runs.append((grammar, warned, len(built)))
    new, new_reasons, _ = runs[-1]
    assert all(g == new and r == new_reasons for g, r, _ in runs)
    assert [n for _, _, n in runs] == [runs[0][2], runs[0][2], runs[0][2], 0]
    assert runs[0][2] > 0
    for ptr in ("#", "#/properties/x", "#/properties/y"):
        assert any(f"[object {ptr}]" in r and "alone passes its budget" in r for r in new_reasons)
    validator = jsonschema.Draft202012Validator(schema)
    for text, accepted in [
        ('{"x":{"a":"aaaaaaa","b":1},"y":{"a":"baaaaaaa","c":2}}', True),
        ('{"x":{"b":1,"a":"aaaaaaa"}}', False),  # valid, but x is in declared order now
        ('{"x":{"a":"bbbbbbb"}}', False),  # invalid
    ]:
        assert validator.is_valid(json.loads(text)) == ("bbbbbbb" not in text), text
        assert _byte_dfa.ir_matches(new.bodies[0], text.encode()) == accepted, text


def test_sizing_a_property_names_it_in_budget_and_timeout_errors(monkeypatch):
    """Sizing an any-order property builds its byte DFA as "a property's byte DFA" (no
    `pattern` keyword is involved: SchemaStore's circle-ci ran out of time there, named as
    "the pattern's byte DFA")."""
    costly = {"type": "string", "pattern": "^[ab]*a[ab]{6}$"}
    monkeypatch.setattr(_byte_dfa, "DEFAULT_MAX_STATES", 60)
    monkeypatch.setattr(_emitter, "_OVER_BUDGET", {})
    seen = []
    build = _byte_dfa.build_byte_dfa

    def spy(ir, *args, **kwargs):
        try:
            return build(ir, *args, **kwargs)
        except ac.StateBudgetExceededError as e:
            seen.append(str(e))
            raise

    monkeypatch.setattr(_byte_dfa, "build_byte_dfa", spy)
    schema = {"type": "object", "properties": {"a": costly, "b": {}}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        translate_grammar(schema, parse_options({}), False)
    # the any-JSON value of `b` is the label past 60 states; the error names it
    named = "of a property's byte DFA (while building #/properties/b) exceeds"
    assert seen and all(named in m for m in seen), seen
