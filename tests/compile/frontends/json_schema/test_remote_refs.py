"""Remote references (documents outside the schema): left out as a sound subset where the
parts around them are monotone, refused where leaving values out could accept more."""

import itertools
import json
import warnings

import jsonschema
import pytest

import automata_compile as ac
from automata_compile import SubsetWarning, UnsupportedSchemaError

EOS = 256
VOCAB = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[EOS], special_ids=[EOS]
)
# the document the references point to, which the compiler cannot fetch: any value it
# describes may be valid, so a sound compile accepts none of them
REMOTE = "https://example.com/k8s.json#/definitions/Meta"
SCHEMA = {
    "type": "object",
    "properties": {
        "kind": {"const": "pod"},
        "meta": {"$ref": REMOTE},
        "tolerations": {"type": "array", "items": {"$ref": REMOTE}},
        "n": {"type": "integer"},
    },
    "required": ["kind"],
    "additionalProperties": False,
}


def accepts(dfa, text: str) -> bool:
    return dfa.accepts(list(text.encode()) + [EOS])


def compiled(schema, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dfa = ac.compile_json_schema(schema, VOCAB, property_order="declared", **options)
    return dfa, [w.message for w in caught if isinstance(w.message, SubsetWarning)]


def instances():
    """Instances with and without the remote-typed properties, valid for the schema with the
    remote definition replaced by ``true`` (the most the real one can allow)."""
    values = {
        "kind": ['"pod"', '"job"'],
        "meta": [None, "{}", '{"name": "x"}', "1"],
        "tolerations": [None, "[]", "[{}]", '[1, "a"]'],
        "n": [None, "3"],
    }
    for combo in itertools.product(*values.values()):
        fields = [f'"{k}": {v}' for k, v in zip(values, combo, strict=True) if v is not None]
        yield "{" + ", ".join(fields) + "}"


def test_a_remote_reference_under_properties_is_left_out_soundly_and_warned():
    dfa, warned = compiled(SCHEMA)
    assert sorted(w.pointer for w in warned) == [
        "/properties/meta/$ref",
        "/properties/tolerations/items/$ref",
    ]
    assert all(w.keyword == "$ref" and "cannot be fetched" in str(w) for w in warned)
    upper = _replace_refs(SCHEMA, True)
    lower = _replace_refs(SCHEMA, False)
    for text in instances():
        value = json.loads(text)
        # accepted exactly where the schema with the definition left out (false) accepts:
        # never an instance the schema could reject, whatever the remote document says
        assert accepts(dfa, text) == jsonschema.Draft202012Validator(lower).is_valid(value), text
        if accepts(dfa, text):
            assert jsonschema.Draft202012Validator(upper).is_valid(value)
    assert accepts(dfa, '{"kind": "pod", "tolerations": [], "n": 3}')
    assert not accepts(dfa, '{"kind": "pod", "meta": {}}')


def _replace_refs(schema, by):
    if isinstance(schema, dict):
        if schema.get("$ref") == REMOTE:
            return by
        return {k: _replace_refs(v, by) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_replace_refs(v, by) for v in schema]
    return schema


@pytest.mark.parametrize(
    "schema,pointer",
    [
        ({"not": {"$ref": REMOTE}}, "/not/$ref"),
        ({"oneOf": [{"$ref": REMOTE}, {"type": "integer"}]}, "/oneOf/0/$ref"),
        ({"if": {"$ref": REMOTE}, "then": {"type": "integer"}}, "/if/$ref"),
        ({"contains": {"$ref": REMOTE}, "maxContains": 1}, "/contains/$ref"),
        # the same definition reached first where leaving out is sound, then under not
        (
            {
                "properties": {"a": {"$ref": "#/$defs/d"}, "b": {"not": {"$ref": "#/$defs/d"}}},
                "$defs": {"d": {"properties": {"m": {"$ref": REMOTE}}}},
            },
            "/$defs/d/properties/m/$ref",
        ),
    ],
)
def test_a_remote_reference_where_leaving_values_out_could_accept_more_is_refused(schema, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        compiled(schema)
    assert info.value.keyword == "$ref" and info.value.pointer == pointer
    assert "could accept invalid instances" in str(info.value)


def test_subsets_refuse_keeps_refusing_remote_references():
    with pytest.raises(UnsupportedSchemaError) as info:
        compiled(SCHEMA, subsets="refuse")
    assert info.value.keyword == "$ref" and info.value.pointer == "/properties/meta/$ref"


def test_a_schema_left_empty_by_its_remote_references_is_refused_by_name():
    with pytest.raises(UnsupportedSchemaError) as info:
        compiled({"type": "object", "properties": {"x": {"$ref": REMOTE}}, "required": ["x"]})
    assert info.value.keyword == "$ref" and info.value.pointer == "/properties/x/$ref"
    assert "leaves no value" in str(info.value)


def test_lenient_mode_under_not_reads_the_reference_as_true_with_a_warning():
    schema = {"anyOf": [{"not": {"$ref": REMOTE}}, {"type": "integer"}]}
    with pytest.warns(UserWarning, match=r"'\$ref' at #/anyOf/0/not/\$ref is not enforced"):
        dfa = ac.compile_json_schema(schema, VOCAB, strict=False)
    assert accepts(dfa, "1") and not accepts(dfa, '"a"')  # (not true: no value)
