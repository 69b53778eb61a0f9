"""What a JSON Schema compile does where a construction passes ``max_states``
(`pipeline._json_schema`, `frontends.json_schema._emitter`):

- a rule's DFA past it (after the objects' fallback to declared order, where that applies):
  the schema is translated again with every large value a rule (`_values_pda`), and the
  original error is raised where that does not help;
- an any-order property whose byte DFA alone passes it: its object falls back to declared
  order with an `OrderFallbackWarning` naming why (the schema was refused).
"""

from __future__ import annotations

import warnings

import pytest

import automata_compile as ac
from automata_compile import StateBudgetExceededError
from automata_compile.automata import _byte_dfa
from automata_compile.frontends.json_schema import parse_options, translate_grammar
from automata_compile.pipeline import _json_schema as pj

VOCAB = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)
ITEM = {"type": "object", "properties": {k: {"type": "string", "maxLength": 3} for k in "pqrs"}}
SCHEMA = {  # needs rules (a free value); its values are large enough to be rules
    "type": "object",
    "properties": {
        "a": ITEM,
        "b": {"type": "array", "items": {**ITEM, "required": ["p"]}},
        "z": {},
    },
    "required": ["a"],
}


def _compile(schema, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ac.compile_json_schema(schema, VOCAB, **kw)


def test_a_rule_past_max_states_makes_every_large_value_a_rule(monkeypatch):
    grammars = []
    real = pj.build_byte_pda

    def first_too_large(g, **kw):  # the first grammar's rule passes the budget
        grammars.append(len(g.bodies))
        if len(grammars) == 1:
            raise StateBudgetExceededError("a rule's DFA exceeds max_states=1 states")
        return real(g, **kw)

    monkeypatch.setattr(pj, "build_byte_pda", first_too_large)
    tables = _compile(SCHEMA, property_order="declared")  # (no order fallback first)
    assert len(grammars) == 2 and grammars[1] > grammars[0]  # more rules: the values
    monkeypatch.setattr(pj, "build_byte_pda", real)
    reference = _compile(SCHEMA, property_order="declared")  # the same language, fewer rules
    assert tables.num_states > 0 and reference.num_states > 0


def test_the_error_stays_where_value_rules_do_not_help(monkeypatch):
    def too_large(g, **kw):
        raise StateBudgetExceededError("a rule's DFA exceeds max_states=1 states")

    monkeypatch.setattr(pj, "build_byte_pda", too_large)
    with pytest.raises(StateBudgetExceededError, match="max_states=1 states"):
        _compile(SCHEMA)


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
    assert (
        len(reasons) == 1
        and "one property's byte automaton alone passes max_states" in (reasons[0])
    )
    body = grammar.bodies[0]
    assert _byte_dfa.ir_matches(body, b'{"a":"aaaaaaa","b":1}')
    assert not _byte_dfa.ir_matches(body, b'{"b":1,"a":"aaaaaaa"}')  # declared order
