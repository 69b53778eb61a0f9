"""An any-order property whose byte DFA alone passes ``max_states`` (`_emitter`, sizing the
any-order budget): its object falls back to declared order with an `OrderFallbackWarning`
naming why, instead of the schema being refused ("the pattern's byte DFA exceeds
max_states", SchemaStore's codecov)."""

from __future__ import annotations

import warnings

import automata_compile as ac
from automata_compile.automata import _byte_dfa
from automata_compile.frontends.json_schema import parse_options, translate_grammar


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
