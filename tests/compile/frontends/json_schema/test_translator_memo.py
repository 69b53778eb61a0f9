"""The translator's memo (`_translator._Translator._entry`): a subschema reached by many
``$ref`` paths is translated once per context it can see, and the language is unchanged.

Oracle: `jsonschema` on instances, spelled as `json.dumps` writes them, walked on the
byte-level `TokenDFA`.
"""

from __future__ import annotations

import collections
import json

import pytest

import automata_compile as ac
from automata_compile.frontends.json_schema import _translator, load_schema, parse_options
from automata_compile.frontends.json_schema._resolver import _DEFAULT_BASE

jsonschema = pytest.importorskip("jsonschema")


def _fibonacci_schema(n: int) -> dict:
    """``d{i}`` refers to ``d{i+1}`` and ``d{i+2}``: ``d{n-1}`` is reached by Fibonacci(n)
    distinct ``$ref`` paths (stacks), each of which a stack-keyed memo translates again."""
    defs = {}
    for i in range(n):
        props = {k: {"$ref": f"#/$defs/d{j}"} for k, j in (("a", i + 1), ("b", i + 2)) if j < n}
        defs[f"d{i}"] = (
            {"type": "object", "properties": props, "additionalProperties": False}
            if props
            else {"type": "integer", "minimum": 0}
        )
    return {"$defs": defs, "$ref": "#/$defs/d0"}


@pytest.fixture
def translations(monkeypatch):
    """Counts `_Translator._schema` calls (translations, memo hits excluded) per pointer."""
    counts: collections.Counter = collections.Counter()
    inner = _translator._Translator._schema

    def counted(self, node, base, ptr):
        counts[ptr] += 1
        return inner(self, node, base, ptr)

    monkeypatch.setattr(_translator._Translator, "_schema", counted)
    return counts


def _byte_vocab():
    pieces = [bytes([i]) for i in range(256)] + [b"<eos>"]
    return ac.Vocabulary.from_bytes(pieces, eos_ids=[256], special_ids=[256])


def test_a_definition_reached_by_many_paths_is_translated_once(translations):
    schema = load_schema(_fibonacci_schema(24))
    tr = _translator._Translator(schema, parse_options({"property_order": "declared"}))
    tr.schema(schema, _DEFAULT_BASE, "")
    # a stack-keyed memo: 46,368 translations of d23 alone
    assert translations["/$defs/d23"] == 1
    assert max(translations.values()) == 1


def test_the_memoized_language_agrees_with_jsonschema():
    schema = _fibonacci_schema(6)
    dfa = ac.compile_json_schema(schema, _byte_vocab(), property_order="declared")
    good = [{}, {"a": {"b": {}}}, {"a": {"a": {"a": {"a": {"a": 3}}}}}, {"b": {"a": {"b": 7}}}]
    bad = [{"c": 1}, {"a": 1}, {"b": {"b": {"b": -1}}}, {"a": {"a": {"a": {"a": {"a": {}}}}}}]
    for value in good + bad:
        want = jsonschema.Draft202012Validator(schema).is_valid(value)
        text = json.dumps(value, separators=(",", ":")).encode()
        assert dfa.accepts(list(text)) == want, value
    assert sum(jsonschema.Draft202012Validator(schema).is_valid(v) for v in good) == len(good)
    assert not any(jsonschema.Draft202012Validator(schema).is_valid(v) for v in bad)
