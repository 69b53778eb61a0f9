"""``closed_objects=True`` (`frontends.json_schema._closing`): which objects are closed, and
that the language stays a sound subset: the official test suite and random schemas with
`jsonschema` as oracles (each catches a mutation that closes ``oneOf`` branches, ``not``
operands or a ``contains`` with ``maxContains``)."""

from __future__ import annotations

import itertools
import json
import re
import warnings

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile.frontends.json_schema._closing import close_objects

from .test_json_schema_suite import SUITE, _groups, sc

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)

ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
# what pydantic writes for `class Person(BaseModel): name: str; home: Optional[Address]`
PYDANTIC = {
    "$defs": {"Address": ADDRESS},
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "home": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": None},
    },
    "required": ["name"],
}


def closed(schema):
    return close_objects(schema)[1]


def accepts(dfa, text: str) -> bool:
    return bool(dfa.accepts([*text.encode(), 256]))


def test_pydantic_objects_are_closed_and_reject_invented_keys():
    assert closed(PYDANTIC) == ("", "/$defs/Address")
    open_ = ac.compile_json_schema(PYDANTIC, BYTES, property_order="declared")
    shut = ac.compile_json_schema(PYDANTIC, BYTES, property_order="declared", closed_objects=True)
    good = '{"name":"Ann","home":{"city":"Oslo"}}'
    for text, ok_open, ok_shut in (
        (good, True, True),
        ('{"name":"Ann","home":null}', True, True),
        ('{"name":"Ann","age":3}', True, False),
        ('{"name":"Ann","home":{"city":"Oslo","zip":"1"}}', True, False),
    ):
        assert (accepts(open_, text), accepts(shut, text)) == (ok_open, ok_shut), text


def test_the_input_is_not_changed_and_a_closed_schema_is_itself():
    before = json.dumps(PYDANTIC)
    out, _ = close_objects(PYDANTIC)
    assert json.dumps(PYDANTIC) == before and out is not PYDANTIC
    assert list(out["properties"]) == ["name", "home"]  # declared order kept
    shut = {**ADDRESS, "additionalProperties": {"type": "integer"}}
    assert close_objects(shut) == (shut, ())


@pytest.mark.parametrize(
    "schema",
    [
        {"oneOf": [ADDRESS, {"type": "null"}]},  # a narrower branch can make two match one
        {"not": ADDRESS},
        {"if": ADDRESS, "then": {"required": ["x"]}},
        {"dependentSchemas": {"a": ADDRESS}},
        {"allOf": [ADDRESS, {"properties": {"zip": {}}}]},  # the other part declares zip
        {"properties": {"a": {}}, "allOf": [{"properties": {"b": {}}}]},
        {"properties": {"a": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
        {"properties": {"a": {}}, "required": ["b"]},  # closed, it would accept nothing
        {"properties": {"a": {}}, "unevaluatedProperties": False},
        {"type": "object"},  # declares nothing: a free object stays free
    ],
)
def test_objects_that_closing_could_make_unsound_or_empty_stay_open(schema):
    assert closed(schema) == ()


def test_one_of_branches_stay_open_since_closing_one_would_accept_an_invalid_instance():
    """``{"a": 1, "b": 2}`` matches both open branches, so it is invalid; with the first
    branch closed it would match the second only, and be accepted."""
    one = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    two = {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
    dfa = ac.compile_json_schema(
        {"oneOf": [one, two]}, BYTES, property_order="declared", closed_objects=True
    )
    assert not accepts(dfa, '{"a":1,"b":2}')
    assert accepts(dfa, '{"a":1}') and accepts(dfa, '{"a":1,"c":3}')  # open: c is allowed


def test_contains_with_max_contains_stays_open():
    """Two items match the open ``contains``, one past maxContains: invalid; closed, the
    second would no longer match, and the array would pass."""
    item = {"type": "object", "properties": {"a": {}}, "required": ["a"]}
    schema = {"type": "array", "contains": item, "maxContains": 1}
    assert closed(schema) == () and closed({"type": "array", "contains": item}) == ("/contains",)
    dfa = ac.compile_json_schema(schema, BYTES, property_order="declared", closed_objects=True)
    assert not accepts(dfa, '[{"a":1},{"a":1,"b":2}]') and accepts(dfa, '[{"a":1},2]')


def test_a_definition_also_reached_under_not_stays_open():
    schema = {
        "$defs": {"A": ADDRESS},
        "properties": {"a": {"$ref": "#/$defs/A"}, "b": {"not": {"$ref": "#/$defs/A"}}},
    }
    assert closed(schema) == ("",)
    assert closed({**schema, "properties": {"a": {"$ref": "#/$defs/A"}}}) == ("", "/$defs/A")


def test_positions_an_instance_must_match_are_closed():
    schema = {
        "type": "array",
        "prefixItems": [ADDRESS],
        "items": {"allOf": [ADDRESS]},
        "contains": {"anyOf": [ADDRESS, {"type": "string"}]},
    }
    assert closed(schema) == ("/contains/anyOf/0", "/items/allOf/0", "/prefixItems/0")


@pytest.mark.parametrize(
    "schema, keyword",
    [
        ({"$defs": {"A": {"$anchor": "a", **ADDRESS}}, "$ref": "#a"}, "$anchor"),
        ({"properties": {"a": {"$ref": "#nowhere"}}}, "$ref"),
        ({"$dynamicAnchor": "n", **ADDRESS}, "$dynamicAnchor"),
    ],
)
def test_references_it_does_not_follow_leave_the_schema_open_with_a_warning(schema, keyword):
    with pytest.warns(UserWarning, match=f"closed_objects: '{re.escape(keyword)}' at #"):
        assert close_objects(schema) == (schema, ())


def test_tool_calls_close_objects_by_default():
    tools = [{"name": "f", "parameters": {"type": "object", "properties": {"a": {}}}}]
    for closed_objects in (False, True):
        options = {} if closed_objects else {"closed_objects": False}
        dfa = ac.compile_tool_calls(tools, BYTES, **options)
        for args, ok in (('{"a": 1}', True), ('{"a": 1, "b": 2}', not closed_objects)):
            text = f'<tool_call>\n{{"name": "f", "arguments": {args}}}\n</tool_call>'
            assert dfa.accepts(list(text.encode())) is ok, (closed_objects, args)


def test_bad_option_value_is_named():
    with pytest.raises(ValueError, match="closed_objects must be True or False"):
        ac.compile_json_schema(ADDRESS, BYTES, closed_objects="yes")


@pytest.mark.skipif(SUITE is None, reason="JSON-Schema-Test-Suite not found")
def test_closed_language_is_a_sound_subset_on_the_suite():
    """Every instance the closed language accepts (every key order, every spelling) is a
    valid one, and no schema that compiles open is refused or emptied closed."""
    checked = closed_any = 0
    for rel, group in _groups():
        options = {
            **sc.OPTIONS,
            **sc.FILE_OPTIONS.get(rel, {}),
            "property_order": "declared",
            "recursion": "unroll",
        }
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ac.json_schema_to_regex(group["schema"], **options)
            except (ac.UnsupportedSchemaError, ac.InvalidSchemaError):
                continue
            regex = ac.json_schema_to_regex(group["schema"], closed_objects=True, **options)
            closed_any += bool(closed(group["schema"]))
        rx = re.compile(regex)
        for test in group["tests"]:
            for value in itertools.islice(sc.key_orders(test["data"]), 24):
                for spelling in sc.SPELLINGS:
                    text = json.dumps(value, **spelling)
                    if rx.fullmatch(text):
                        assert test["valid"], (rel, group["description"], text)
        checked += 1
    assert checked >= 300 and closed_any >= 25, (checked, closed_any)


# -- a property: random schemas of the applicators, random instances, jsonschema as oracle ------

NAMES = ("a", "b")
LEAF = st.sampled_from([{"type": "integer"}, {"type": "null"}, {}])
# objects over two names: what closing narrows
OBJECTS = st.builds(
    lambda props, req: {
        "type": "object",
        "properties": props,
        **({"required": [n for n in req if n in props]} if req else {}),
    },
    st.dictionaries(st.sampled_from(NAMES), LEAF, max_size=2),
    st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
)
PAIRS = st.lists(OBJECTS, min_size=2, max_size=3)
SHAPES = st.one_of(
    OBJECTS,
    st.builds(lambda xs: {"anyOf": xs}, PAIRS),
    st.builds(lambda xs: {"oneOf": xs}, PAIRS),
    st.builds(lambda xs: {"allOf": xs}, PAIRS),
    st.builds(lambda x: {"not": x}, OBJECTS),
    st.builds(lambda x, y: {"if": x, "then": y, "else": False}, OBJECTS, OBJECTS),
)
SCHEMAS = st.one_of(
    SHAPES,
    st.builds(lambda x: {"type": "object", "properties": {"x": x}, "required": ["x"]}, SHAPES),
    st.builds(lambda x: {"type": "array", "contains": x, "maxContains": 1}, SHAPES),
    st.builds(
        lambda x: {
            "$defs": {"d": x},
            "anyOf": [{"$ref": "#/$defs/d"}, {"not": {"$ref": "#/$defs/d"}}],
        },
        OBJECTS,
    ),
)
MEMBERS = st.dictionaries(st.sampled_from(NAMES), st.sampled_from([1, None]), max_size=2)
VALUES = st.one_of(
    MEMBERS,
    st.builds(lambda x: {"x": x}, MEMBERS),
    st.lists(MEMBERS, max_size=3),
)


@settings(
    max_examples=500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(SCHEMAS, st.lists(VALUES, min_size=1, max_size=8))
def test_closed_language_never_accepts_an_invalid_instance(schema, values):
    """Closing is a sound subset on random mixes of objects under anyOf, oneOf, allOf, not,
    if/then/else, contains with maxContains and a $ref reached from both sides of a not: an
    instance accepted in any key order is valid under the schema as written."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dfa = ac.compile_json_schema(
                schema, BYTES, closed_objects=True, property_order="declared", recursion="unroll"
            )
        except ac.AutomataError:  # a refusal or a budget: nothing accepted to check
            return
    validator = jsonschema.Draft202012Validator(schema)
    for value in values:
        for order in itertools.islice(sc.key_orders(value), 24):
            if accepts(dfa, json.dumps(order, separators=(",", ":"))):
                assert validator.is_valid(value), (schema, order)
