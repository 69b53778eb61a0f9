"""``oneOf`` whose overlap cannot be excluded exactly (`frontends/json_schema/_one_of.py`).

The default compiles a sound subset: a value of branch i is accepted only where it matches
no superset R_j of any other branch j. Checked against ``jsonschema`` (every accepted value is
valid) and against that prediction over hand-written supersets (the subset is what the
module says, so not trivially empty).
"""

from __future__ import annotations

import itertools
import json
import random
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import SubsetWarning, UnsupportedSchemaError

jsonschema = pytest.importorskip("jsonschema")

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)
_DFAS: dict = {}

# (name, schema, per branch: the superset the exclusion uses (None: the branch itself),
#  values that must be accepted)
CASES = [
    (
        "uniqueItems beside plain arrays",
        {
            "oneOf": [
                {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True},
                {"type": "array", "items": {"enum": [1, 2]}, "maxItems": 3},
            ]
        },
        [{"type": "array", "items": {"enum": [1, 2, 3]}}, None],
        [[3], [1, 3], [3, 2, 1]],
    ),
    (
        "propertyNames existential",
        {
            "oneOf": [
                {"type": "object", "not": {"propertyNames": {"pattern": "^a"}}},
                {"type": "object", "properties": {"a1": {"type": "integer"}}, "required": ["a1"]},
                {"type": "string"},
            ]
        },
        [{"type": "object"}, None, None],
        [{"b": 1}, {"b": 1, "a1": "s"}, {"x1": True}, "s"],
    ),
    (
        "patternProperties existential, minProperties",
        {
            "oneOf": [
                {
                    "type": "object",
                    "minProperties": 1,
                    "not": {"patternProperties": {"^x": {"type": "integer"}}},
                },
                {"type": "object", "properties": {"x1": {"type": "string"}}, "maxProperties": 1},
                {"type": "array", "maxItems": 1},
            ]
        },
        [{"type": "object", "minProperties": 1}, None, None],
        [{"x1": "s", "b": 1}, {"x2": "s", "x1": 1}, [], [{"x1": 1}]],
    ),
    (
        "existential beside uniqueItems, both relaxed",
        {
            "oneOf": [
                {"type": "object", "not": {"additionalProperties": {"type": "integer"}}},
                {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]},
                {"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": True},
                {"type": "array", "maxItems": 2},
            ]
        },
        [{"type": "object"}, None, {"type": "array", "items": {"enum": [1, 2, 3]}}, None],
        [{"c": "s"}, {"b": "s"}, [1, 2, 3], ["a"], [3, "s"]],
    ),
]
KEYS = ["a1", "b", "c", "x1", "x2"]
SCALARS = st.sampled_from([1, 2, 3, "s", True, None])
# values nest at most two levels (max_nesting_depth=2 below: free values are exact there)
LEAVES = SCALARS | st.lists(SCALARS, max_size=3)
VALUES = (
    SCALARS
    | st.lists(LEAVES, max_size=4)
    | st.dictionaries(st.sampled_from(KEYS), LEAVES, max_size=3)
)


def compiled(schema, **options):
    """(DFA, warnings) of the schema, memoized."""
    key = json.dumps([schema, options], sort_keys=True)
    if key not in _DFAS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dfa = ac.compile_json_schema(schema, BYTES, max_nesting_depth=2, **options)
        _DFAS[key] = dfa, [w.message for w in caught]
    return _DFAS[key]


def accepts(dfa, value) -> bool:
    return bool(dfa.accepts(list(json.dumps(value).encode("utf-8"))))


def valid(schema, value) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def predicted(schema, supersets, value) -> bool:
    """Some branch matches and no superset of another branch does."""
    branches = schema["oneOf"]
    supers = [b if r is None else r for b, r in zip(branches, supersets, strict=True)]
    return any(
        valid(b, value) and not any(valid(r, value) for j, r in enumerate(supers) if j != i)
        for i, b in enumerate(branches)
    )


def one_of_warnings(messages) -> list:
    return [m for m in messages if isinstance(m, SubsetWarning) and m.keyword == "oneOf"]


@pytest.mark.parametrize(
    ("name", "schema", "supersets", "accepted"), CASES, ids=[c[0] for c in CASES]
)
def test_subset_is_named_and_not_empty(name, schema, supersets, accepted):
    dfa, messages = compiled(schema)
    (w,) = one_of_warnings(messages)
    assert w.pointer == "/oneOf" and "provably matches no other branch" in str(w)
    for value in accepted:
        assert valid(schema, value) and predicted(schema, supersets, value), value
        assert accepts(dfa, value), (name, value)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(CASES), VALUES)
def test_subset_is_sound_and_as_predicted(case, value):
    """Every accepted value is valid (jsonschema), and the accepted set is exactly the
    values of a branch outside the other branches' supersets."""
    _, schema, supersets, _ = case
    dfa, _ = compiled(schema)
    got = accepts(dfa, value)
    if got:
        assert valid(schema, value), (schema, value)
    assert got == predicted(schema, supersets, value), (schema, value)


def test_exact_one_of_stays_exact():
    schema = {
        "oneOf": [
            {"type": "integer"},
            {"minimum": 2},
            {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ]
    }
    dfa, messages = compiled(schema)
    assert not messages
    for value in [1, 2, 2.5, -3, {"a": 1}, {"a": 1, "b": 2}, {"b": 2}, {"a": "s", "b": 1}]:
        assert accepts(dfa, value) == valid(schema, value), value


def test_refuse_and_lenient():
    schema = CASES[1][1]
    with pytest.raises(UnsupportedSchemaError) as e:
        compiled(schema, subsets="refuse")
    assert (e.value.keyword, e.value.pointer) == ("oneOf", "/oneOf")
    assert "subsets='warn'" in str(e.value)
    # strict=False takes the same sound subset (subsets follow `subsets`, not `strict`)
    lenient, messages = compiled(schema, strict=False)
    assert len(one_of_warnings(messages)) == 1
    assert not accepts(lenient, {"a1": 1, "b": 1}) and accepts(lenient, {"b": 1})


def test_one_warning_for_a_shared_definition():
    branch = CASES[1][1]
    schema = {
        "$defs": {"o": branch},
        "type": "array",
        "prefixItems": [{"$ref": "#/$defs/o"}, {"$ref": "#/$defs/o"}],
    }
    dfa, messages = compiled(schema)
    assert [w.pointer for w in one_of_warnings(messages)] == ["/$defs/o/oneOf"]
    assert accepts(dfa, [{"b": 1}, "s"]) and not accepts(dfa, [{"a1": 1, "b": 1}])


def test_empty_subset_is_named():
    """A subset that is empty although the schema is not: the error names the subset (the
    algebra cannot see every empty language, so this is found by the grammar)."""
    schema = {
        "oneOf": [
            {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True},
            {"type": "array", "items": {"enum": [1, 2]}},
        ]
    }
    with pytest.raises(ac.InvalidSchemaError, match="sound subsets taken for 'oneOf' at #/oneOf"):
        compiled(schema)


def test_closed_objects_by_their_names():
    """Closed objects told apart by their allowed names (the bitbucket-pipelines shape):
    sound wherever the exclusion is coarser than the branch."""
    step = {"type": "object", "properties": {"script": {"type": "string"}}}
    schema = {
        "oneOf": [
            {"type": "object", "additionalProperties": False, "properties": {k: step}}
            for k in ("step", "parallel", "stage")
        ]
    }
    dfa, _ = compiled(schema)
    for value in [{}, {"step": {}}, {"stage": {"script": "s"}}, {"step": {}, "stage": {}}]:
        if accepts(dfa, value):
            assert valid(schema, value), value
    assert accepts(dfa, {"parallel": {"script": "s"}}) and not accepts(dfa, {})


def test_exclusion_the_emitter_can_count():
    """The complement of a relaxed array branch counts items (``contains``) of a language
    whose complement is not expressible here; the exclusion then takes the branch's shape
    instead of leaving a ``contains`` the emitter would refuse."""
    schema = {
        "oneOf": [
            {
                "type": "array",
                "uniqueItems": True,
                "items": {"type": "object", "additionalProperties": {"type": "integer"}},
            },
            {"type": "array", "items": {"type": "string"}},
        ]
    }
    dfa, messages = compiled(schema)
    (w,) = one_of_warnings(messages)
    assert "shape alone" in str(w)
    for value in [[], ["s"], [{"k": 1}], [{"k": "s"}], [{"k": 1}, "s"]]:
        if accepts(dfa, value):
            assert valid(schema, value), value
    assert accepts(dfa, [{"k": 1}])


def _closed(props: dict) -> dict:
    return {"type": "object", "additionalProperties": False, "properties": props}


def test_a_closed_object_without_the_empty_object_stays_small():
    """Beside a branch that also accepts ``{}``, a closed object of optional properties
    keeps "at least one of its names": an existential constraint over declared names,
    exact, one flag in the emitter. Spelled as a union of objects, one requiring each name,
    the subset construction of the byte DFA tracked which of them were still alive across
    a value of many states, far past the minimal DFA (the travis.json notifications shape:
    rule 'shared64' passed max_states=100,000 for a DFA of 356 states)."""
    props = {"list": {"type": "array", "uniqueItems": True, "items": {"enum": list("abcd")}}}
    props.update({f"p{i}": {"type": "boolean"} for i in range(10)})
    schema = {"oneOf": [_closed({"secure": {"type": "string"}}), _closed(props)]}
    dfa, messages = compiled(schema, property_order="declared", max_states=10_000)
    # uniqueItems has no complement: the exclusion takes a superset without it, which
    # excludes the same objects from the first branch (none holds "list")
    assert all("uniqueItems" in str(w) for w in one_of_warnings(messages))
    values = [{}, {"secure": "s"}, {"secure": 1}, {"list": []}, {"list": ["b", "a"]}]
    values += [{"list": ["a", "a"]}, {"p3": True}, {"p0": True, "secure": "s"}]
    rng = random.Random(0)
    for _ in range(40):  # in declared order, as declared order accepts them
        names = [n for n in props if rng.random() < 0.3]
        values.append({n: ["c", "a"] if n == "list" else rng.random() < 0.5 for n in names})
    for value in values:
        assert accepts(dfa, value) == valid(schema, value), value


def test_two_exclusions_with_existential_constraints():
    """Three closed objects of optional properties: each branch excludes ``{}`` twice, so
    a meet holds two existential constraints, and the one over declared names is split
    into required names there (`_type_algebra.settled`): exact."""
    branches = [["a", "b"], ["c", "d"], ["e"]]
    schema = {"oneOf": [_closed({n: {"type": "integer"} for n in ns}) for ns in branches]}
    dfa, messages = compiled(schema, property_order="declared")
    assert not one_of_warnings(messages)
    for r in range(4):
        for names in itertools.combinations("abcde", r):
            value = {n: 1 for n in names}
            assert accepts(dfa, value) == valid(schema, value), value
