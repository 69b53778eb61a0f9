"""A schema whose byte automaton outgrows ``max_states`` in every other form compiles as a
byte PDA with its values outlined into grammar rules (`pipeline._json_schema._outlined`),
the same language; where even those rules outgrow it, a `StateBudgetExceededError` says so.

Oracle: `jsonschema` (Draft 2020-12) on generated instances, against the compiled automaton
walked byte by byte over a byte vocabulary. Objects are written in declared order (the
schemas ask for ``property_order="declared"``: the language is then exactly the validator's
on those texts), as ``json.dumps`` writes them with and without spaces.
"""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import StateBudgetExceededError
from automata_compile.frontends.json_schema import parse_options
from automata_compile.pipeline import _json_schema
from automata_compile.pipeline._grammar import pda_tables
from automata_compile.pipeline._json_schema import byte_language

jsonschema = pytest.importorskip("jsonschema")

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)
MAX_STATES = 200
VALUE_SCHEMAS = [
    {"type": "integer", "minimum": -5, "maximum": 40},
    {"type": "string", "maxLength": 4},
    {"enum": ["red", "green", 3]},
    {"type": "boolean"},
]
VALUES = [0, 7, 41, -6, "", "ab", "abcde", "red", "blue", 3, True, None]


@st.composite
def bounded_arrays(draw):
    """An array of at most 3..6 items, each an object of one to three typed properties (or
    one of them alone): its DFA copies the item's automaton once per position."""
    names = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True))
    props = {n: draw(st.sampled_from(VALUE_SCHEMAS)) for n in names}
    item = {
        "type": "object",
        "properties": props,
        "required": draw(st.lists(st.sampled_from(names), unique=True)),
        "additionalProperties": False,
    }
    if draw(st.booleans()):
        item = {"anyOf": [item, draw(st.sampled_from(VALUE_SCHEMAS))]}
    return {"type": "array", "items": item, "maxItems": draw(st.integers(3, 6))}


@st.composite
def instances(draw, schema):
    """Arrays of up to 7 items: objects in declared order with valid-looking and wrong
    values, names missing, and bare values."""
    item = schema["items"]
    obj = item["anyOf"][0] if "anyOf" in item else item
    names = list(obj["properties"])

    def one():
        if draw(st.integers(0, 4)) == 0:
            return draw(st.sampled_from(VALUES))
        kept = [n for n in names if draw(st.booleans())]
        return {n: draw(st.sampled_from(VALUES)) for n in kept}

    return [one() for _ in range(draw(st.integers(0, 7)))]


def compile_small(schema):
    return ac.compile_json_schema(
        schema, BYTES, max_states=MAX_STATES, property_order="declared", max_nesting_depth=0
    )


@settings(  # no shrinking: each example compiles a schema
    max_examples=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(data=st.data(), schema=bounded_arrays())
def test_outlined_schema_is_what_a_validator_accepts(data, schema):
    try:
        dfa = compile_small(schema)
    except StateBudgetExceededError as e:  # even outlined, or no value large enough
        event(f"past the budget, outlined: {'outlined into grammar rules' in str(e)}")
        return
    event("outlined PDA" if dfa.is_pda else "DFA within the budget")
    validator = jsonschema.Draft202012Validator(schema)
    for _ in range(20):
        value = data.draw(instances(schema))
        want = validator.is_valid(value)
        for seps in ((", ", ": "), (",", ":")):
            text = json.dumps(value, separators=seps)
            assert bool(dfa.accepts(list(text.encode()))) == want, (schema, text, want)


SCHEMA = {
    "type": "array",
    "maxItems": 6,
    "items": {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 4},
            "b": {"type": "boolean"},
            "c": {"enum": ["red", "green", 3]},
        },
        "required": ["a"],
        "additionalProperties": False,
    },
}


def test_the_outlined_rules_fit_where_the_dfa_and_the_shared_rules_do_not():
    opts = parse_options({"property_order": "declared", "max_nesting_depth": 0})
    ir, pda = byte_language(SCHEMA, opts, max_states=MAX_STATES, share=True)
    assert pda is None  # no value used twice: no rule to share
    with pytest.raises(StateBudgetExceededError):
        ac.automata.build_byte_dfa(ir, max_states=MAX_STATES)
    dfa = compile_small(SCHEMA)
    assert dfa.is_pda
    ok = [{"a": "x", "b": True}] * 6
    assert dfa.accepts(list(json.dumps(ok).encode()))
    assert not dfa.accepts(list(json.dumps(ok * 2).encode()))  # maxItems
    assert not dfa.accepts(list(json.dumps([{"b": True}]).encode()))  # required


def test_a_budget_even_the_outlined_rules_outgrow_is_named():
    with pytest.raises(StateBudgetExceededError, match="outlined into grammar rules") as e:
        ac.compile_json_schema(SCHEMA, BYTES, max_states=20, property_order="declared")
    assert "max_states=20" in str(e.value)


def test_unrolled_schemas_keep_the_budget_error():
    with pytest.raises(StateBudgetExceededError) as e:
        ac.compile_json_schema(
            SCHEMA, BYTES, max_states=MAX_STATES, property_order="declared", recursion="unroll"
        )
    assert "outlined" not in str(e.value)


def _keyed(value):
    return {
        "type": "object",
        "properties": {"k": {"const": "x"}, "v": value},
        "required": ["k", "v"],
        "additionalProperties": False,
    }


# Two branches that share the prefix {"k": "x", "v": " and then hold different strings:
# the first outlined grammar conflicts there, so those values are kept inline.
CONFLICTING = {
    "type": "array",
    "maxItems": 4,
    "items": {
        "anyOf": [
            _keyed({"type": "string", "maxLength": 5}),
            _keyed({"type": "string", "pattern": "^a+b$"}),
        ]
    },
}


def test_values_a_conflict_names_are_kept_inline():
    from automata_compile.automata import build_byte_pda
    from automata_compile.frontends.json_schema import Outliner

    outliner = Outliner(CONFLICTING, parse_options({"property_order": "declared"}))
    grammar, named = outliner.grammar()
    with pytest.raises(ac.GrammarConflictError):
        build_byte_pda(grammar)
    dfa = ac.compile_json_schema(CONFLICTING, BYTES, max_states=200, property_order="declared")
    assert dfa.is_pda
    validator = jsonschema.Draft202012Validator(CONFLICTING)
    items = [{"k": "x", "v": v} for v in ("", "ab", "abcdef", "aab", "aaaaab", "ba")]
    items += [{"k": "y", "v": "a"}, {"k": "x"}, {"v": "ab"}, "x"]
    for n in range(6):
        for start in range(len(items)):
            value = [items[(start + 3 * i) % len(items)] for i in range(n)]
            text = json.dumps(value)
            assert bool(dfa.accepts(list(text.encode()))) == validator.is_valid(value), text


ITEM = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"x": {"type": "integer", "minimum": 0, "maximum": 40}, "y": {"type": "string"}},
}
ORDERED = {
    "type": "object",
    "additionalProperties": False,
    "properties": {n: {"type": "array", "maxItems": 3, "items": ITEM} for n in "abc"},
    "required": ["a"],
}


def outlined_failing_once(monkeypatch, **options):
    """``ORDERED`` through `_outlined` (its values are rules, its objects in any order)
    with the first composition failing on a budget, as codecov.json's does on Llama-3 (a
    token closing nested any-order objects reaches more than 4096 stack contexts: the
    return states of their values' rules multiply): the PDA composed and the warnings."""
    composed = []

    def failing_once(pda, *args, **kwargs):
        composed.append(pda)
        if len(composed) == 1:
            raise StateBudgetExceededError("a simulated composition budget")
        return pda_tables(pda, *args, **kwargs)

    monkeypatch.setattr(_json_schema, "pda_tables", failing_once)
    first = StateBudgetExceededError("the schema's DFA")
    opts = parse_options(options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dfa = _json_schema._outlined(ORDERED, opts, BYTES, None, "{}", first)
    return dfa, [w.message for w in caught if isinstance(w.message, ac.OrderFallbackWarning)]


def test_outlined_objects_in_any_order_fall_back_to_declared_order(monkeypatch):
    dfa, warned = outlined_failing_once(monkeypatch)
    assert {w.pointer for w in warned} == {"", "/properties/a/items"}
    assert all("outlined into grammar rules" in str(w) for w in warned)
    validator = jsonschema.Draft202012Validator(ORDERED)
    declared = [{"a": []}, {"a": [{"x": 1, "y": "s"}], "c": [{}]}, {"b": []}, {"a": [{"x": 41}]}]
    for value in declared:  # declared order: exactly the validator's language
        assert dfa.accepts(list(json.dumps(value).encode())) == validator.is_valid(value)
    for value in [{"c": [], "a": []}, {"a": [{"y": "s", "x": 1}]}]:  # valid, another order
        assert validator.is_valid(value)
        assert not dfa.accepts(list(json.dumps(value).encode()))
    exact = ac.compile_json_schema(ORDERED, BYTES)  # any order where nothing fails
    assert exact.accepts(list(json.dumps({"c": [], "a": []}).encode()))


def test_no_object_in_any_order_keeps_the_budget_error(monkeypatch):
    with pytest.raises(StateBudgetExceededError, match="simulated .*tried after: the schema's"):
        outlined_failing_once(monkeypatch, property_order="declared")
