"""The type algebra's work budget (`_type_algebra.MAX_PAIRS`): a complement whose
alternatives multiply past it is refused by name (keyword and pointer) in a bounded
amount of work, where before only the compile's deadline stopped it
(SchemaStore's bitbucket-pipelines); below it, the language is exact.

Oracle: `jsonschema` on instances spelled as `json.dumps` writes them.
"""

from __future__ import annotations

import json

import pytest

import automata_compile as ac
from automata_compile.frontends.json_schema import _type_algebra

jsonschema = pytest.importorskip("jsonschema")

# the complement of k objects, each excluded two ways (its property missing, or another
# value): 2**k alternatives
K = 4
SCHEMA = {
    "type": "object",
    "not": {
        "anyOf": [
            {"type": "object", "properties": {f"p{i}": {"const": i}}, "required": [f"p{i}"]}
            for i in range(K)
        ]
    },
    "properties": {f"p{i}": {"type": "integer"} for i in range(K)},
    "additionalProperties": False,
}


def _byte_vocab():
    pieces = [bytes([i]) for i in range(256)] + [b"<eos>"]
    return ac.Vocabulary.from_bytes(pieces, eos_ids=[256], special_ids=[256])


def test_a_complement_past_the_budget_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(_type_algebra, "MAX_PAIRS", 2 ** (K - 1))
    # complements and meets computed by another test under the full budget are cached
    _type_algebra._negate_cached.cache_clear()
    _type_algebra._meet_cached.cache_clear()
    with pytest.raises(ac.UnsupportedSchemaError) as e:
        ac.compile_json_schema(SCHEMA, _byte_vocab(), property_order="declared")
    assert e.value.keyword == "not" and e.value.pointer == "/not"
    assert "more than 8 intersections" in str(e.value)


def test_a_complement_within_the_budget_is_exact():
    dfa = ac.compile_json_schema(SCHEMA, _byte_vocab(), property_order="declared")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    values = [{}, {"p0": 0}, {"p0": 1}, {"p0": 1, "p1": 0}, {"p0": 5, "p1": 6, "p2": 7, "p3": 8}]
    values += [{"p3": 3}, {"p2": 9, "p3": 3}, {"p1": "x"}, {"q": 1}]
    assert {validator.is_valid(v) for v in values} == {True, False}
    for value in values:
        text = json.dumps(value, separators=(",", ":")).encode()
        assert dfa.accepts(list(text)) == validator.is_valid(value), value
