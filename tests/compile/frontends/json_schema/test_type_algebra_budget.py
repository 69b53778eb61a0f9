"""The type algebra's work budget (`_type_algebra.MAX_PAIRS`): a complement whose
alternatives multiply past it is refused by name (keyword and pointer) in a bounded
amount of work, where before only the compile's deadline stopped it
(SchemaStore's bitbucket-pipelines); below it, the language is exact. The alternatives
budget (`_types._MAX_DNF`) bounds products only: a meet that multiplies alternatives past it
is refused by name, a union of more branches (SchemaStore's azure-pipelines) is exact.

Oracle: `jsonschema` on instances spelled as `json.dumps` writes them.
"""

from __future__ import annotations

import json

import pytest

import automata_compile as ac
from automata_compile.frontends.json_schema import _type_algebra, _types

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


# A union adds up its branches' alternatives (``anyOf`` of N objects is N of them, as
# SchemaStore's azure-pipelines writes 259 tasks): past the product budget `_MAX_DNF`, and
# meeting the object beside it (one alternative), it stays exact.
N_UNION = _types._MAX_DNF + 4
UNION = {
    "type": "object",
    "properties": {"kind": {"type": "string"}, "note": {"type": "string"}},
    "anyOf": [
        {
            "properties": {
                "kind": {"const": f"k{i}"},
                "v": {"type": "integer"} if i % 2 else {"type": "string", "maxLength": 2},
            },
            "required": ["kind"],
            "additionalProperties": False,
        }
        for i in range(N_UNION)
    ],
}


def test_a_union_past_the_product_budget_is_exact():
    dfa = ac.compile_json_schema(UNION, _byte_vocab())
    validator = jsonschema.Draft202012Validator(UNION)
    last = N_UNION - 1  # odd: an integer v
    values = [{"kind": "k1", "v": 3}, {"v": 3, "kind": "k1"}, {"kind": "k2", "v": "ab"}]
    values += [{"v": 7, "kind": f"k{last}"}, {"kind": f"k{last}"}, {"kind": "k0"}]
    values += [{"kind": "k2", "v": 3}, {"v": "abc", "kind": "k2"}, {"kind": f"k{N_UNION}"}]
    values += [{}, {"v": 1}, {"kind": "k1", "note": "x"}, {"kind": 1}, []]
    assert {validator.is_valid(v) for v in values} == {True, False}
    for value in values:
        text = json.dumps(value).encode()
        assert dfa.accepts(list(text)) == validator.is_valid(value), value


def test_a_meet_multiplying_alternatives_past_the_budget_is_refused_by_name():
    # 17 x 17 distinct objects (each needs one name of each side): 289 > _MAX_DNF
    side = [{"required": [f"a{i}"], "type": "object"} for i in range(17)]
    other = [{"required": [f"b{i}"], "type": "object"} for i in range(17)]
    schema = {"allOf": [{"anyOf": side}, {"anyOf": other}]}
    with pytest.raises(ac.UnsupportedSchemaError) as e:
        ac.compile_json_schema(schema, _byte_vocab(), property_order="declared")
    assert e.value.keyword == "allOf" and e.value.pointer == "/allOf"
    assert "too many alternatives" in str(e.value)
