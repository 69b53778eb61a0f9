"""``uniqueItems: true`` (`frontends/json_schema/_unique.py`) against ``jsonschema``.

Finite item languages are exact (any order, under budget), larger ones are accepted in one
canonical order and infinite ones with at most one item: both sound subsets named by a
`SubsetWarning`, or refused with ``subsets="refuse"``.
"""

from __future__ import annotations

import itertools
import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import InvalidSchemaError, SubsetWarning, UnsupportedSchemaError

jsonschema = pytest.importorskip("jsonschema")

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)
# item values the instances draw from: 1 and 1.0 are one JSON value, True is not 1
POOL = ["a", "b", "c", "é", 1, 1.0, 2, 2.5, True, False, None, "x", [1], {"k": 1}]
FINITE_ITEMS = [
    {"enum": ["a", "b", "c"]},
    {"enum": [1, 2, 2.5, "a"]},
    {"enum": [None, True, False, 1]},
    {"type": "boolean"},
    {"type": "integer", "minimum": 1, "maximum": 2},
    {"anyOf": [{"const": "a"}, {"const": 1}, {"type": "null"}]},
    {"enum": ["a", "b", "é", "x"], "maxLength": 1},
]
SPELLINGS = [{}, {"separators": (",", ":")}, {"ensure_ascii": False}]
_DFAS: dict = {}


def compiled(schema, **options):
    """(DFA, warnings) of the schema, memoized (the warnings are those of the compile); the
    DFA is None where the schema is unsatisfiable (`InvalidSchemaError`)."""
    key = json.dumps([schema, options], sort_keys=True)
    if key not in _DFAS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                dfa = ac.compile_json_schema(schema, BYTES, max_nesting_depth=0, **options)
            except InvalidSchemaError as e:
                assert "unsatisfiable" in str(e)
                dfa = None
        _DFAS[key] = dfa, [w.message for w in caught]
    return _DFAS[key]


def accepts(dfa, value, **dumps) -> bool:
    return bool(dfa.accepts(list(json.dumps(value, **dumps).encode("utf-8"))))


def valid(schema, value) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def subset_warnings(messages) -> list:
    return [m for m in messages if isinstance(m, SubsetWarning)]


@st.composite
def finite_schemas(draw):
    schema = {"type": "array", "items": draw(st.sampled_from(FINITE_ITEMS)), "uniqueItems": True}
    if draw(st.booleans()):
        schema["minItems"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        schema["maxItems"] = draw(st.integers(schema.get("minItems", 0), 4))
    if draw(st.booleans()):
        schema["prefixItems"] = [draw(st.sampled_from(FINITE_ITEMS))]
    if draw(st.booleans()):
        schema["contains"] = {"enum": ["a", 1, None]}
        if draw(st.booleans()):
            schema["maxContains"] = 1
    return schema


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(finite_schemas(), st.lists(st.lists(st.sampled_from(POOL), max_size=5), max_size=8))
def test_finite_items_are_exact(schema, instances):
    """Over finite item values the language is exact: no warning, and the automaton agrees
    with jsonschema on every instance (shuffled, repeated, 1 beside 1.0), every spelling."""
    dfa, messages = compiled(schema)
    assert not subset_warnings(messages), messages
    for value in instances:
        want = valid(schema, value)
        if dfa is None:
            assert not want, (schema, value)
            continue
        for dumps in SPELLINGS:
            assert accepts(dfa, value, **dumps) == want, (schema, value, dumps)
        if want:  # every order of a valid set is valid
            for perm in itertools.islice(itertools.permutations(value), 24):
                assert accepts(dfa, list(perm)) == valid(schema, list(perm)), (schema, perm)


def test_json_equality_and_spellings():
    schema = {"type": "array", "items": {"enum": [1, 2, "a", "b"]}, "uniqueItems": True}
    dfa, messages = compiled(schema, string_escapes="any")
    assert not messages
    assert not accepts(dfa, [1, 1.0]) and not accepts(dfa, [2.0, 1, 2])
    assert accepts(dfa, [1.0, 2]) and accepts(dfa, ["b", 2, "a", 1])
    for text, ok in [('["a", "\\u0062"]', True), ('["a", "\\u0061"]', False), ("[1,1e0]", False)]:
        assert bool(dfa.accepts(list(text.encode()))) == ok, text


def test_bounds_prefix_and_nesting():
    schema = {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "prefixItems": [{"const": "x"}],
                "items": {"enum": ["x", "y", "z"]},
                "uniqueItems": True,
                "minItems": 2,
                "maxItems": 3,
            }
        },
        "required": ["tags"],
    }
    dfa, messages = compiled(schema)
    assert not messages
    pool = ["x", "y", "z"]
    for n in range(5):
        for items in itertools.product(pool, repeat=n):
            value = {"tags": list(items)}
            assert accepts(dfa, value) == valid(schema, value), value


def test_many_values_are_accepted_in_canonical_order():
    values = [f"v{i:02d}" for i in range(20)]
    schema = {"type": "array", "items": {"enum": values}, "uniqueItems": True}
    dfa, messages = compiled(schema)
    (w,) = subset_warnings(messages)
    assert w.keyword == "uniqueItems" and w.pointer == "/uniqueItems"
    assert "one fixed order" in str(w)
    chosen = [values[i] for i in (3, 0, 17, 9)]
    assert accepts(dfa, sorted(chosen))  # every set keeps its canonical spelling
    assert not accepts(dfa, chosen)
    assert not accepts(dfa, ["v03", "v03"]) and accepts(dfa, [])


def test_any_order_arrays_share_the_schema_budget():
    """Exact arrays charge the schema's any-order total: past it, the next ones (in the
    order they are built) take the fixed order, each named."""
    values = [f"value-{c}" for c in "abcdefgh"]
    items = [{"enum": [v + str(i) for v in values]} for i in range(4)]
    schema = {
        "properties": {
            f"p{i}": {"type": "array", "items": x, "uniqueItems": True} for i, x in enumerate(items)
        }
    }
    dfa, messages = compiled(schema, property_order="declared")
    pointers = [w.pointer for w in subset_warnings(messages)]
    assert pointers == ["/properties/p3/uniqueItems"], pointers
    assert "schema's arrays and objects in any order" in str(subset_warnings(messages)[0])
    assert accepts(dfa, {"p0": ["value-c0", "value-a0"], "p3": ["value-a3", "value-c3"]})
    assert not accepts(dfa, {"p3": ["value-c3", "value-a3"]})


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(list(range(40)) + [1.0, "a"]), max_size=6))
def test_canonical_order_is_sound_and_complete_over_sets(value):
    schema = {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 39},
        "uniqueItems": True,
        "maxItems": 5,
    }
    dfa, messages = compiled(schema)
    assert [w.keyword for w in subset_warnings(messages)] == ["uniqueItems"]
    if accepts(dfa, value):
        assert valid(schema, value)
    if valid(schema, value):
        assert accepts(dfa, sorted(value))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from([0, 1, 2, 5, 7, 39, 5.0, "a"]), max_size=5))
def test_canonical_order_with_prefix_and_contains_is_sound(value):
    """With prefixItems and contains the fixed order is still sound (only arrays whose
    sorted spelling fits the prefix keep one, which the warning's "one fixed order" says)."""
    schema = {
        "type": "array",
        "prefixItems": [{"enum": [0, 1, 2]}],
        "items": {"type": "integer", "minimum": 0, "maximum": 39},
        "contains": {"const": 5},
        "maxContains": 1,
        "uniqueItems": True,
    }
    dfa, messages = compiled(schema)
    assert [w.keyword for w in subset_warnings(messages)] == ["uniqueItems"]
    if accepts(dfa, value):
        assert valid(schema, value)
    assert accepts(dfa, [1, 5, 7]) and not accepts(dfa, [1, 7, 5]) and not accepts(dfa, [1, 7])


def test_infinite_items_accept_at_most_one():
    schema = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    dfa, messages = compiled(schema)
    (w,) = subset_warnings(messages)
    assert w.pointer == "/uniqueItems" and "at most one item" in str(w)
    assert accepts(dfa, []) and accepts(dfa, ["anything"])
    assert not accepts(dfa, ["a", "b"]) and not accepts(dfa, ["a", "a"])
    # at most one item is already distinct: exact, no warning
    _, quiet = compiled({**schema, "maxItems": 1})
    assert not quiet


def test_infinite_items_with_min_two_are_refused():
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True, "minItems": 2}
    with pytest.raises(UnsupportedSchemaError, match="minItems 2") as e:
        ac.compile_json_schema(schema, BYTES)
    assert (e.value.keyword, e.value.pointer) == ("uniqueItems", "/uniqueItems")
    with pytest.warns(UserWarning, match="'uniqueItems' at #/uniqueItems is not enforced"):
        dfa = ac.compile_json_schema(schema, BYTES, strict=False)
    assert accepts(dfa, [1, 1])  # lenient mode drops the keyword, as it says


def test_subsets_refuse_refuses_every_subset_but_keeps_exact_cases():
    inf = {"properties": {"t": {"type": "array", "uniqueItems": True}}}
    with pytest.raises(UnsupportedSchemaError, match="subsets='warn'") as e:
        ac.compile_json_schema(inf, BYTES, subsets="refuse")
    assert (e.value.keyword, e.value.pointer) == ("uniqueItems", "/properties/t/uniqueItems")
    exact = {"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": True}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dfa = ac.compile_json_schema(exact, BYTES, subsets="refuse")
    assert accepts(dfa, ["b", "a"]) and not accepts(dfa, ["a", "a"])


def test_one_warning_per_pointer():
    schema = {
        "$defs": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "properties": {
            "a": {"$ref": "#/$defs/tags"},
            "b": {"$ref": "#/$defs/tags"},
            "c": {"type": "array", "uniqueItems": True},
        },
    }
    _, messages = compiled(schema)
    pointers = sorted(w.pointer for w in subset_warnings(messages))
    assert pointers == ["/$defs/tags/uniqueItems", "/properties/c/uniqueItems"]


def test_allof_and_not():
    schema = {"allOf": [{"uniqueItems": True}, {"type": "array", "items": {"enum": [1, 2]}}]}
    dfa, messages = compiled(schema)
    assert not messages and accepts(dfa, [2, 1]) and not accepts(dfa, [1, 1])
    with pytest.raises(UnsupportedSchemaError, match="complement of uniqueItems") as e:
        ac.compile_json_schema({"not": {"uniqueItems": True, "items": {"enum": [1]}}}, BYTES)
    assert e.value.keyword == "not"


def test_invalid_unique_items():
    with pytest.raises(InvalidSchemaError, match="uniqueItems must be a boolean") as e:
        ac.compile_json_schema({"uniqueItems": "yes"}, BYTES)
    assert e.value.pointer == "/uniqueItems"


def test_llama3_masks_enum_array(llama3_vocab):
    """Token masks through `compile_json_schema` on a real vocabulary equal the brute-force
    oracle (the prefixes of every valid text) along a valid instance; a duplicate dies."""
    values = ["read", "write", "admin"]
    schema = {"type": "array", "items": {"enum": values}, "uniqueItems": True, "minItems": 1}
    dfa = ac.compile_json_schema(schema, llama3_vocab)
    texts = {  # the default whitespace: each comma with or without one space
        (
            "[" + "".join(s + json.dumps(v) for s, v in zip(("", *seps), p, strict=True)) + "]"
        ).encode()
        for n in range(1, 4)
        for p in itertools.permutations(values, n)
        for seps in itertools.product((", ", ","), repeat=n - 1)
    }
    prefixes = {t[:i] for t in texts for i in range(len(t) + 1)}
    token_bytes = [llama3_vocab.decode([t]) for t in range(llama3_vocab.size)]
    eos = set(llama3_vocab.eos_ids)
    ids = llama3_vocab.encode('["write", "read"]')
    assert dfa.accepts(ids)
    for cut in range(len(ids) + 1):
        done = llama3_vocab.decode(ids[:cut])
        state = dfa.walk(ids[:cut])
        mask = dfa.allowed(state)
        for t in range(llama3_vocab.size):
            if t in eos:
                want = done in texts
            else:
                want = bool(token_bytes[t]) and done + token_bytes[t] in prefixes
            assert bool(mask[t]) == want, (done, token_bytes[t])
    assert not dfa.accepts(llama3_vocab.encode('["read", "read"]'))
