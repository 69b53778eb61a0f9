"""Schemas whose language needs boolean operations on automata (issue 9).

``pattern`` + ``maxLength``, ``format`` + ``maxLength``, ``not``, ``allOf`` of patterns and
``propertyNames`` used to be refused ("too large for a regular expression") when the
intersection or complement came back as a regex by state elimination. They now stay
automata (`Automaton` IR nodes): `compile_json_schema` accepts them, and the token DFA
agrees with `jsonschema` on valid and invalid instances; `json_schema_to_regex` says why
it cannot print them.
"""

from __future__ import annotations

import json

import pytest

import automata_compile as ac
from automata_compile import UnsupportedSchemaError, json_schema_to_regex

jsonschema = pytest.importorskip("jsonschema")

URI = "^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%!$&'()*+,;=:@-]*)*$"
EMAIL = "^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}$"
IDENT = "^[A-Za-z_][A-Za-z0-9_]*$"

CASES = [
    (
        "pattern+maxLength (URL)",
        {"type": "string", "pattern": URI, "maxLength": 40},
        ["http://a.io", "https://example.com:8080/a/b", "http://x.y/" + "a" * 29],
        ["ftp://a.io", "http://x.y/" + "a" * 30, "http://", "https://a b.com"],
    ),
    (
        "pattern+maxLength (email)",
        {"type": "string", "pattern": EMAIL, "minLength": 6, "maxLength": 24},
        ["ab@cd.io", "first.last@example.org"],
        ["a@b.c", "first.last@example-long.org", "no-at.example.org", "x@y.z"],
    ),
    (
        "format+maxLength (email)",
        {"type": "string", "format": "email", "maxLength": 16},
        ["ab@example.com", "a.b@c.de"],
        ["abcdef@example.com", "not an email"],
    ),
    (
        "format+maxLength (ipv4)",
        {"type": "string", "format": "ipv4", "maxLength": 11},
        ["10.0.0.1", "192.168.1.1"],
        ["192.168.10.1", "256.1.1.1", "1.2.3", "01.2.3.4"],
    ),
    (
        "format+pattern (lower-case uuid)",
        {"type": "string", "format": "uuid", "pattern": "^[0-9a-f-]+$"},
        ["123e4567-e89b-12d3-a456-426614174000"],
        ["123E4567-E89B-12D3-A456-426614174000", "123e4567e89b12d3a456426614174000"],
    ),
    (
        "not pattern (identifier that is not a keyword)",
        {"type": "string", "pattern": IDENT, "not": {"enum": ["class", "def", "if"]}},
        ["klass", "define", "_if", "iff"],
        ["class", "def", "if", "9lives", ""],
    ),
    (
        "not pattern (no whitespace)",
        {"type": "string", "not": {"pattern": "\\s"}},
        ["", "abc", "a-b_c"],
        ["a b", "\t", "x\n"],
    ),
    (
        "allOf of patterns (password rules)",
        {
            "type": "string",
            "allOf": [
                {"pattern": "[0-9]"},
                {"pattern": "[A-Z]"},
                {"pattern": "[a-z]"},
                {"pattern": "^[^\\s]{8,16}$"},
            ],
        },
        ["Passw0rdx", "aB3aaaaaaaaaaaaa"],
        ["password1", "PASSWORD1", "Pa1", "Passw0rd with space", "aB3aaaaaaaaaaaaaa"],
    ),
    (
        "allOf of date pattern and year range",
        {"allOf": [{"format": "date"}, {"pattern": "^20[0-9]{2}-"}]},
        ["2024-02-29", "2000-01-01"],
        ["1999-12-31", "2023-02-29", "20245-01-01"],
    ),
    (
        "propertyNames",
        {
            "type": "object",
            "propertyNames": {"pattern": IDENT, "maxLength": 8},
            "additionalProperties": {"type": "integer"},
        },
        [{}, {"a": 1}, {"snake_ok": 2, "_x": 3}],
        [{"9a": 1}, {"too_long_name": 1}, {"a-b": 1}, {"a": "x"}],
    ),
]


def _vocab():
    return ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )


@pytest.mark.parametrize("name,schema,valid,invalid", CASES, ids=[c[0] for c in CASES])
def test_compiles_and_agrees_with_jsonschema(name, schema, valid, invalid):
    checker = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    dfa = ac.compile_json_schema(schema, _vocab())
    for value, expected in [(v, True) for v in valid] + [(v, False) for v in invalid]:
        assert checker.is_valid(value) == expected, (name, value)  # the table itself is right
        for text in {json.dumps(value), json.dumps(value, separators=(",", ":"))}:
            assert bool(dfa.accepts(list(text.encode("utf-8")))) == expected, (name, text)


@pytest.mark.parametrize("name,schema", [(c[0], c[1]) for c in CASES], ids=[c[0] for c in CASES])
def test_regex_printing_refuses_automata_by_reason(name, schema):
    with pytest.raises(UnsupportedSchemaError, match="no regular-expression spelling") as info:
        json_schema_to_regex(schema, recursion="unroll")
    assert "compile_json_schema" in str(info.value)


def test_state_counts_are_small():
    """The refused cases of the old pipeline are small automata."""
    vocab = _vocab()
    for name, schema, _, _ in CASES:
        dfa = ac.compile_json_schema(schema, vocab)
        assert dfa.num_states < 10_000, (name, dfa.num_states)


PRINTABLE = [
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]},
    {"type": "array", "items": {"enum": ["a", "b", 3]}, "maxItems": 3},
    {"type": "string", "pattern": "^[a-z]+$"},
    {"type": "string", "format": "date"},
    {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": -3, "maximum": 12}]},
]


@pytest.mark.parametrize("schema", PRINTABLE, ids=lambda s: json.dumps(s)[:40])
def test_direct_ir_equals_the_regex_round_trip(schema):
    """Where a regex exists, compiling the IR directly gives the same minimal automaton
    (objects in declared order: in any order they need an automaton node)."""
    vocab = _vocab()
    opts = {"property_order": "declared", "recursion": "unroll"}
    direct = ac.compile_json_schema(schema, vocab, **opts)
    via_text = ac.compile_regex(json_schema_to_regex(schema, **opts), vocab)
    assert (direct.num_states, direct.num_classes) == (via_text.num_states, via_text.num_classes)
    for text in ['{"n": 12}', '["a", 3]', '"abc"', '"2024-02-29"', "null", "9.5", "11"]:
        ids = list(text.encode("utf-8"))
        assert direct.accepts(ids) == via_text.accepts(ids), text
