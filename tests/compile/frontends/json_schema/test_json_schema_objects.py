"""JSON Schema objects: property order (``property_order``), its budget, its refusals.

Oracle: `jsonschema` (Draft 2020-12) on the parsed instance, against the compiled automaton
walked byte by byte (`TokenDFA.accepts` over a byte vocabulary), on generated object
schemas and generated texts whose properties come in any order, with extras interleaved,
declared names repeated, required ones missing. A text whose object repeats an undeclared
name is left out (its meaning is undefined; see the module docstring of `_api`).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import warnings

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import InvalidSchemaError, UnsupportedSchemaError, json_schema_to_regex

jsonschema = pytest.importorskip("jsonschema")

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)
NAMES = ["a", "b", "c", "d"]
OTHER_NAMES = ["e", "x1", "zz"]
VALUE_SCHEMAS = [
    {"type": "integer"},
    {"type": "boolean"},
    {"type": "string", "maxLength": 2},
    {"enum": ["x", 1]},
    {"type": "null"},
]
VALUES = [0, 7, True, False, None, "x", "ab", "abc", 1]
_DFAS: dict = {}


def compiled(schema, **options):
    """The schema's DFA, memoized; the compile's warnings are raised again on every call, so
    a test that records them sees them whether or not an earlier test compiled the schema."""
    key = json.dumps([schema, options], sort_keys=True)
    if key not in _DFAS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dfa = ac.compile_json_schema(schema, BYTES, max_nesting_depth=0, **options)
        _DFAS[key] = dfa, [w.message for w in caught]
    dfa, messages = _DFAS[key]
    for message in messages:
        warnings.warn(message, stacklevel=2)
    return dfa


def text_of(pairs, sep=", ", colon=": ") -> str:
    return "{" + sep.join(f"{json.dumps(k)}{colon}{json.dumps(v)}" for k, v in pairs) + "}"


def expected(schema, pairs) -> bool | None:
    """Whether a validator accepts the object (declared names must not repeat); None where
    an undeclared name repeats."""
    declared = set(schema.get("properties", {})) | set(schema.get("required", []))
    names = [k for k, _ in pairs]
    repeated = {k for k in names if names.count(k) > 1}
    if repeated - declared:
        return None
    if repeated:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(dict(pairs))


def accepts(dfa, text: str) -> bool:
    return bool(dfa.accepts(list(text.encode("utf-8"))))


@st.composite
def object_schemas(draw):
    props = draw(
        st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUE_SCHEMAS), max_size=4)
    )
    schema = {"type": "object", "properties": props}
    req = draw(st.lists(st.sampled_from(sorted(props) + ["e"]), unique=True, max_size=3))
    if req:
        schema["required"] = req
    extra = draw(st.sampled_from([None, True, False, {"type": "integer"}]))
    if extra is not None:
        schema["additionalProperties"] = extra
    if draw(st.booleans()):
        schema["patternProperties"] = {"^x": {"type": "boolean"}}
    if draw(st.booleans()):
        schema["minProperties"] = draw(st.integers(0, 3))
    if draw(st.booleans()):
        schema["maxProperties"] = draw(st.integers(schema.get("minProperties", 1), 4))
    return schema


@st.composite
def instances(draw, schema):
    """Pairs in any order: mostly valid-looking (declared names, their value types), with
    extras, repeats and missing required names mixed in."""
    props = schema["properties"]
    names = list(props) + list(schema.get("required", []))
    pool = names * 3 + OTHER_NAMES if names else OTHER_NAMES
    keys = draw(st.lists(st.sampled_from(pool), max_size=5))
    pairs = [(k, draw(st.sampled_from(VALUES))) for k in keys]
    return draw(st.permutations(pairs))


@settings(  # no shrinking: each example compiles a schema
    max_examples=30,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(data=st.data(), schema=object_schemas())
def test_any_order_is_what_a_validator_accepts(data, schema):
    """Exact where the object keeps any order; where it falls back to declared order (an
    `OrderFallbackWarning`, past the any-order budget) a sound subset: nothing invalid."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            dfa = compiled(schema)
        except InvalidSchemaError:  # unsatisfiable: e.g. a required name no rule allows
            dfa = None
    fell_back = any(isinstance(w.message, ac.OrderFallbackWarning) for w in caught)
    for _ in range(25):
        pairs = data.draw(instances(schema))
        want = expected(schema, pairs)
        if want is None:
            continue
        for sep, colon in ((", ", ": "), (",", ":")):
            text = text_of(pairs, sep, colon)
            got = dfa is not None and accepts(dfa, text)
            if fell_back:
                assert not got or want, (schema, text)  # never an invalid instance
            else:
                assert got == want, (schema, text, want)


def all_orders(pool, max_len=3):
    """Every sequence of distinct pairs from ``pool`` up to ``max_len``, in every order."""
    for n in range(max_len + 1):
        for combo in itertools.combinations(pool, n):
            yield from itertools.permutations(combo)


FIXED = [
    # the issue's shape: declared properties, undeclared ones allowed anywhere
    {"properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {}}},
    # required, closed
    {
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"type": "null"}},
        "required": ["a", "c"],
        "additionalProperties": False,
    },
    # counts, with patternProperties beside declared ones
    {
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
        "patternProperties": {"^x": {"type": "integer"}},
        "additionalProperties": False,
        "minProperties": 2,
        "maxProperties": 3,
    },
    # a witness: some property other than the declared ones must be a boolean
    {
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
        "not": {"additionalProperties": {"not": {"type": "boolean"}}},
    },
    # propertyNames with a required name
    {"propertyNames": {"maxLength": 1}, "required": ["a", "b"]},
    # unevaluatedProperties sees in-place properties
    {
        "properties": {"a": {"type": "integer"}},
        "allOf": [{"properties": {"b": {"type": "boolean"}}}],
        "unevaluatedProperties": False,
    },
    # dependentRequired
    {
        "properties": {"a": {}, "b": {}, "c": {}},
        "dependentRequired": {"a": ["b"]},
        "additionalProperties": False,
    },
    # enum/const objects: any key order
    {"enum": [{"a": 1, "b": True}, {"c": None}]},
]
FIXED_POOL = [("a", 1), ("a", True), ("b", True), ("b", 7), ("c", None), ("x1", 2), ("zz", True)]


@pytest.mark.parametrize("schema", FIXED, ids=range(len(FIXED)))
def test_any_order_fixed_cases(schema):
    dfa = compiled(schema)
    seen = {True: 0, False: 0}
    for pairs in all_orders(FIXED_POOL):
        want = expected(schema, list(pairs))
        if want is None:
            continue
        assert accepts(dfa, text_of(pairs)) == want, (schema, text_of(pairs), want)
        seen[want] += 1
    assert seen[True] and seen[False]


def test_declared_names_never_repeat():
    schema = {"properties": {"a": {"type": "integer"}, "b": {}}}
    dfa = compiled(schema)
    assert accepts(dfa, '{"b": 1, "x": 2, "a": 3}')
    assert not accepts(dfa, '{"a": 1, "b": 2, "a": 3}')
    assert not accepts(dfa, '{"b": 1, "b": 2}')


def test_declared_order_is_todays_language():
    schema = {
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
        "required": ["b"],
    }
    dfa = compiled(schema, property_order="declared")
    assert accepts(dfa, '{"a": 1, "b": true, "x": 2}') and accepts(dfa, '{"b": true}')
    assert not accepts(dfa, '{"b": true, "a": 1}') and not accepts(dfa, '{"x": 2, "b": true}')
    unroll = {"recursion": "unroll", "max_nesting_depth": 1}  # free values: no grammar rules
    rx = json_schema_to_regex(schema, property_order="declared", **unroll)
    assert rx  # declared order keeps a regex spelling
    with pytest.raises(UnsupportedSchemaError, match='property_order="declared"'):
        json_schema_to_regex(schema, **unroll)


def test_one_kind_of_property_keeps_a_regex():
    """With one declared property and no others (or none declared) the orders coincide."""
    assert json_schema_to_regex(
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False}
    )
    assert json_schema_to_regex({"type": "object", "additionalProperties": {"type": "integer"}})


def test_bad_property_order():
    with pytest.raises(ValueError, match="property_order"):
        ac.compile_json_schema({}, BYTES, property_order="sorted")


def test_dataclasses_keep_field_order():
    import dataclasses

    @dataclasses.dataclass
    class P:
        a: int
        b: bool = False

    dfa = ac.compile_dataclass(P, BYTES)
    assert accepts(dfa, '{"a": 1, "b": true}') and not accepts(dfa, '{"b": true, "a": 1}')


# ------------------------------------------------------------------------------------------
# the budget
# ------------------------------------------------------------------------------------------

MANY = {"type": "object", "properties": {f"p{i}": {"type": "boolean"} for i in range(24)}}


@pytest.mark.parametrize(
    "schema,pointer",
    [
        (
            {"type": "object", "properties": {"inner": MANY}, "additionalProperties": False},
            "#/properties/inner",
        ),
        (
            {
                "$defs": {"big": MANY},
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/big"}},
                "additionalProperties": False,
            },
            "#/$defs/big",
        ),
    ],
)
def test_strict_any_budget_error_names_the_object(schema, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        ac.compile_json_schema(schema, BYTES, property_order="strict_any")
    e = info.value
    assert e.keyword == "properties" and "#" + e.pointer == pointer
    msg = str(e)
    assert f"object at {pointer} has 24 properties" in msg
    assert 'property_order="declared"' in msg and "--property-order declared" in msg
    dfa = ac.compile_json_schema(schema, BYTES, property_order="declared")
    assert accepts(
        dfa, json.dumps({"x" if "$defs" in schema else "inner": {"p1": True, "p7": False}})
    )


@pytest.mark.parametrize(
    "schema,pointer",
    [
        (
            {"type": "object", "properties": {"inner": MANY}, "additionalProperties": False},
            "#/properties/inner",
        ),
        (
            {
                "$defs": {"big": MANY},
                "type": "object",
                "properties": {"x": {"$ref": "#/$defs/big"}},
                "additionalProperties": False,
            },
            "#/$defs/big",
        ),
    ],
)
@pytest.mark.parametrize("strict", [True, False])
def test_default_falls_back_to_declared_order_with_one_warning(schema, pointer, strict):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dfa = ac.compile_json_schema(schema, BYTES, strict=strict)
    fallbacks = [w.message for w in caught if isinstance(w.message, ac.OrderFallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in caught]
    assert "#" + fallbacks[0].pointer == pointer and pointer in str(fallbacks[0])
    assert "declared order only" in str(fallbacks[0])
    assert isinstance(fallbacks[0], ac.SubsetWarning) and fallbacks[0].keyword == "properties"
    key = "x" if "$defs" in schema else "inner"
    assert accepts(dfa, json.dumps({key: {"p1": True, "p7": False}}))
    assert not accepts(dfa, json.dumps({key: {"p7": False, "p1": True}}))
    assert not accepts(dfa, '{"' + key + '": {"p1": true, "p1": false}}')


def test_whole_schema_budget_falls_back_per_object():
    """Each object fits its own budget but the schema's DFA outgrows max_states in any
    order: compiled again in declared order, the object named by one warning. With
    ``strict_any`` (no declared-order fallback) its values are outlined into grammar rules
    instead (`pipeline._json_schema._outlined`): any order, exact, as a PDA."""
    schema = {
        "type": "object",
        "properties": {k: {"type": "string", "maxLength": 3} for k in "abcd"},
        "additionalProperties": False,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        pda = ac.compile_json_schema(schema, BYTES, max_states=800, property_order="strict_any")
    assert pda.is_pda
    assert accepts(pda, '{"c": "yz", "a": "x"}') and not accepts(pda, '{"c": "yz", "c": "x"}')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dfa = ac.compile_json_schema(schema, BYTES, max_states=800)
    fallbacks = [w.message for w in caught if isinstance(w.message, ac.OrderFallbackWarning)]
    assert [w.pointer for w in fallbacks] == [""]
    assert "max_states=800" in str(fallbacks[0])
    assert accepts(dfa, '{"a": "x", "c": "yz"}') and not accepts(dfa, '{"c": "yz", "a": "x"}')


def test_property_order_is_checked():
    with pytest.raises(ValueError, match="strict_any"):
        ac.compile_json_schema({"type": "object"}, BYTES, property_order="sorted")
    with pytest.raises(TypeError, match="declared_at"):
        ac.compile_json_schema({"type": "object"}, BYTES, declared_at=frozenset())


BIG_VALUES = [
    {"type": "integer"},
    {"type": "boolean"},
    {"type": "string", "maxLength": 3},
    {"enum": ["x", 1, None]},
    {"type": "null"},
]
BIG_NAMES = [f"k{i}" for i in range(12)]


@st.composite
def big_objects(draw):
    """Objects of 4 to 12 declared properties: around and past the old any-order budget."""
    n = draw(st.integers(4, 12))
    names = BIG_NAMES[:n]
    props = {k: draw(st.sampled_from(BIG_VALUES)) for k in names}
    schema = {"type": "object", "properties": props}
    req = draw(st.lists(st.sampled_from(names), unique=True, max_size=n))
    if req:
        schema["required"] = req
    schema["additionalProperties"] = draw(st.sampled_from([False, {"type": "integer"}]))
    return schema


BIG_SAMPLES = [0, -3, 7, True, False, None, "x", "abc", "abcd", 1.5]


def _shuffled_pairs(data, schema, valid_bias: bool):
    props = schema["properties"]
    pairs = []
    for k in props:
        if k in schema.get("required", []) or data.draw(st.booleans()):
            pairs.append((k, data.draw(st.sampled_from(BIG_SAMPLES))))
    if data.draw(st.integers(0, 3)) == 0:
        pairs.append(("zz", data.draw(st.sampled_from(BIG_SAMPLES))))
    if data.draw(st.integers(0, 4)) == 0 and pairs:
        pairs.pop(data.draw(st.integers(0, len(pairs) - 1)))
    return pairs


@settings(  # no shrinking: each example compiles a schema
    max_examples=12,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(data=st.data(), schema=big_objects())
def test_large_objects_exact_where_exact_and_a_sound_subset_where_they_fall_back(data, schema):
    """Shuffled instances against `jsonschema`: with no fallback warning the language is
    exactly the valid instances in every order; with one, every accepted text is valid,
    and every valid instance in declared order is accepted."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dfa = compiled(schema)
    fell_back = any(isinstance(w.message, ac.OrderFallbackWarning) for w in caught)
    validator = jsonschema.Draft202012Validator(schema)
    order = {k: i for i, k in enumerate(schema["properties"])}
    for _ in range(30):
        pairs = _shuffled_pairs(data, schema, True)
        valid = validator.is_valid(dict(pairs))
        for ordered in (pairs, data.draw(st.permutations(pairs))):
            got = accepts(dfa, text_of(ordered))
            in_declared_order = [order.get(k, len(order)) for k, _ in ordered] == sorted(
                order.get(k, len(order)) for k, _ in ordered
            )
            if not fell_back:
                assert got == valid, (schema, ordered)
            else:
                assert not got or valid, (schema, ordered)  # never an invalid instance
                if valid and in_declared_order:
                    assert got, (schema, ordered)


# ------------------------------------------------------------------------------------------
# a real tokenizer: the issue's example
# ------------------------------------------------------------------------------------------

ISSUE_ITEM = {
    "type": "object",
    "properties": {
        "run": {"type": "string"},
        "parameters": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
        "cache": {"type": "boolean"},
        "validate": {"type": "boolean"},
    },
}
ISSUE_TEXT = '{"flow": "f1", "parameters": {"n": 3, "mode": "fast"}, "cache": false}'


def test_issue_example_on_llama3(llama3_vocab):
    vocab = llama3_vocab
    unroll = {"recursion": "unroll", "max_nesting_depth": 1}  # a DFA, so `ref` is a byte oracle
    dfa = ac.compile_json_schema(ISSUE_ITEM, vocab, **unroll)
    assert jsonschema.Draft202012Validator(ISSUE_ITEM).is_valid(json.loads(ISSUE_TEXT))
    assert dfa.accepts(vocab.encode(ISSUE_TEXT))
    assert not dfa.accepts(vocab.encode('{"cache": false, "flow": "f1", "cache": true}'))
    assert not dfa.accepts(vocab.encode('{"run": 1}'))
    # exact masks after "cache" was written: the byte-level automaton is the oracle
    ref = ac.compile_json_schema(ISSUE_ITEM, BYTES, **unroll)
    prefix = '{"flow": "f1", "cache": false, '
    state = dfa.walk(vocab.encode(prefix))
    ref_state = ref.walk(list(prefix.encode()))
    assert state >= 0 and ref_state >= 0
    mask = dfa.allowed(state)
    for t in range(vocab.size):
        if t in vocab.special_ids:
            continue
        s = ref_state
        for b in vocab.decode([t]):
            s = ref.advance(s, b)
            if s < 0:
                break
        assert mask[t] == (s >= 0), vocab.decode([t])
    assert mask[vocab.encode('"run')[0]] and not dfa.accepts(
        vocab.encode(prefix + '"cache": true}')
    )
    # the default (free values as grammar rules, no depth bound): the same on the PDA
    pda = ac.compile_json_schema(ISSUE_ITEM, BYTES)
    assert pda.is_pda and pda.accepts(list(ISSUE_TEXT.encode()))
    assert not pda.accepts(list(b'{"cache": false, "flow": "f1", "cache": true}'))


def test_cli_property_order(mistral_sp_path, tmp_path):
    out = tmp_path / "o.npz"
    cli = [sys.executable, "-m", "automata_compile", "json-schema", "-", "--tokenizer"]
    cli += [str(mistral_sp_path), "-o", str(out)]

    def run(*flags):
        return subprocess.run(
            [*cli, *flags], input=json.dumps(MANY), capture_output=True, text=True, timeout=300
        )

    proc = run("--property-order", "strict_any")
    assert proc.returncode == 2 and not out.exists()
    assert "object at # has 24 properties" in proc.stderr
    assert "--property-order declared" in proc.stderr
    proc = run()  # the default: declared order for this object, with a warning naming it
    assert proc.returncode == 0, proc.stderr
    assert "declared order only" in proc.stderr and "[object #]" in proc.stderr
    out.unlink()
    proc = run("--property-order", "declared")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["states"] > 1 and ac.TokenDFA.load(out).num_states > 1


def test_schema_wide_any_order_budget_falls_back_the_later_objects(monkeypatch):
    """Objects that each fit their budget but together pass the schema's
    (`MAX_SCHEMA_ORDER_STATES`): the ones built past it fall back, each named."""
    from automata_compile.frontends.json_schema import _emitter

    inner = {"type": "object", "properties": {k: {"type": "boolean"} for k in "abc"}}
    schema = {
        "type": "object",
        "properties": {"x": inner, "y": {**inner, "required": ["a"]}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }

    def compile_with(limit):
        monkeypatch.setattr(_emitter, "MAX_SCHEMA_ORDER_STATES", limit)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dfa = ac.compile_json_schema(schema, BYTES)
        names = [
            w.message.pointer for w in caught if isinstance(w.message, ac.OrderFallbackWarning)
        ]
        return dfa, names

    dfa, names = compile_with(10**9)
    assert names == []
    assert accepts(dfa, '{"y": {"c": true, "a": false}, "x": {"b": true, "a": true}}')
    dfa, names = compile_with(0)
    assert sorted(names) == ["", "/properties/x", "/properties/y"]
    assert accepts(dfa, '{"x": {"a": true, "b": true}, "y": {"a": false, "c": true}}')
    assert not accepts(dfa, '{"x": {"b": true, "a": true}, "y": {"a": false}}')
    msg = "the schema's objects in any order would add more than 0 automaton states"
    with pytest.raises(UnsupportedSchemaError, match=msg):
        ac.compile_json_schema(schema, BYTES, property_order="strict_any")
