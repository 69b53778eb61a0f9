"""JSON Schema on the pushdown automaton: schema-free values and recursive ``$ref`` as rules.

Oracles: `jsonschema` on hypothesis instances of a recursive schema and of a schema with
free-form properties, and on mutations of them (the byte PDA accepts a text iff it is a
valid instance in the accepted spelling); the old unrolled DFA (``recursion="unroll"``),
which must agree with the PDA on every string within its nesting bound; and, on the
Llama-3 vocabulary, brute force over every token: a token is allowed iff the byte PDA
can read ``prefix + bytes(token)``, EOS iff it accepts ``prefix``.
"""

from __future__ import annotations

import itertools
import json
import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import InvalidSchemaError, TokenDFA, UnsupportedSchemaError
from automata_compile.frontends.json_schema import (
    load_schema,
    parse_options,
    schema_grammar,
    schema_ir,
    translate_grammar,
)
from automata_compile.pipeline import byte_language

jsonschema = pytest.importorskip("jsonschema")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEPARATORS = [None, (",", ":")]

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 6},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/node",
}
# a declared integer, anything else free-form (any JSON value, at any depth)
FREE = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
# a recursive list whose tail is nullable, and free-form items
LIST = {
    "type": "object",
    "properties": {"head": {}, "tail": {"anyOf": [{"type": "null"}, {"$ref": "#"}]}},
    "required": ["head", "tail"],
    "additionalProperties": False,
}


_PDAS: dict = {}


def byte_pda(schema, share=None, **options):
    key = json.dumps([schema, share, options], sort_keys=True)
    if key not in _PDAS:
        opts = parse_options(options)
        ir, _PDAS[key] = byte_language(load_schema(schema), opts, share=share)
        assert ir is None and _PDAS[key] is not None
    return _PDAS[key]


def byte_vocab():
    return ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )


def texts(value) -> list[str]:
    return [json.dumps(value, separators=s, ensure_ascii=a) for s in SEPARATORS for a in (1, 0)]


names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)  # within the default max_digits (20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | names
)
json_values = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(names, kids, max_size=3),
    max_leaves=12,
)
trees = st.recursive(
    st.builds(lambda n: {"name": n}, names),
    lambda kids: st.builds(
        lambda n, c: {"name": n, "children": c}, names, st.lists(kids, max_size=3)
    ),
    max_leaves=12,
)


def nest(value, depth: int):
    for i in range(depth):
        value = {"k": [value]} if i % 2 else [{"k": value}]
    return value


# ------------------------------------------------------------------------------------------
# the byte language
# ------------------------------------------------------------------------------------------


def test_rules_are_named_and_regular_schemas_have_none():
    assert byte_pda(TREE).names == ("<root>", "#/$defs/node")
    assert set(byte_pda(FREE).names) == {"<root>", "json_array", "json_object"}
    g = schema_grammar({"type": "array", "items": {"type": "integer"}}, parse_options({}))
    assert g.names == ("<root>",)


@SETTINGS
@given(trees)
def test_tree_instances_are_accepted_at_any_depth(tree):
    pda = byte_pda(TREE)
    for text in texts(tree):
        assert pda.matches(text.encode()), text


def test_deep_trees_and_free_values_need_no_bound():
    pda = byte_pda(TREE)
    deep = {"name": "a"}
    for _ in range(40):
        deep = {"name": "b", "children": [deep, {"name": ""}]}
    assert pda.matches(json.dumps(deep).encode())
    free = byte_pda(FREE)
    for depth in (4, 5, 12):
        doc = {"id": 1, "extra": nest({"x": [1.5, None, "s"]}, depth)}
        assert free.matches(json.dumps(doc).encode()), depth
        assert not free.matches(json.dumps({"id": 1.5, "extra": nest(1, depth)}).encode())


def _mutations(value, rnd: random.Random):
    """Structural mutations of a JSON value (some stay valid, most do not)."""
    if isinstance(value, dict) and value:
        k = rnd.choice(list(value))
        yield {x: v for x, v in value.items() if x != k}
        yield {**value, k: rnd.choice([1, "s", None, [], {}])}
        yield {**value, "extra": 1}
        for m in itertools.islice(_mutations(value[k], rnd), 3):
            yield {**value, k: m}
    elif isinstance(value, list) and value:
        i = rnd.randrange(len(value))
        yield value[:i] + value[i + 1 :]
        yield value + [rnd.choice([0, "x", {"name": "z"}, {}])]
        for m in itertools.islice(_mutations(value[i], rnd), 3):
            yield value[:i] + [m] + value[i + 1 :]
    else:
        yield rnd.choice([None, 7, "long name", [], {"name": 1}])


@SETTINGS
@given(st.one_of(trees, st.builds(lambda v: {"id": 3, "x": v}, json_values)), st.randoms())
def test_mutated_instances_agree_with_jsonschema(value, rnd):
    for schema in (TREE, FREE):
        pda = byte_pda(schema)
        validator = jsonschema.Draft202012Validator(schema)
        for m in itertools.chain([value], _mutations(value, rnd)):
            valid = validator.is_valid(m)
            for text in texts(m):
                assert pda.matches(text.encode()) == valid, (schema is TREE, text)


@SETTINGS
@given(st.text(alphabet='[]{}",:01-.e tn ', max_size=14))
def test_pda_equals_the_unrolled_dfa_within_its_bound(text):
    """Strings that open at most two arrays/objects are in the unrolled (depth 2) language
    iff they are in the PDA's: the rules only lift the bound."""
    if text.count("[") + text.count("{") > 2:
        return
    data = text.encode()
    for ws in ("default", "compact", "pretty"):
        pda = byte_pda({}, whitespace=ws, max_whitespace=2)
        dfa = _unrolled({}, ws)
        assert pda.matches(data) == dfa.matches(data), (ws, text)


_UNROLLED: dict = {}


def _unrolled(schema, ws, **options):
    from automata_compile.automata._byte_dfa import build_byte_dfa

    key = (json.dumps(schema), ws, json.dumps(options, sort_keys=True))
    if key not in _UNROLLED:
        opts = parse_options(dict(whitespace=ws, max_whitespace=2, recursion="unroll", **options))
        _UNROLLED[key] = build_byte_dfa(schema_ir(load_schema(schema), opts))
    return _UNROLLED[key]


def test_recursive_list_with_free_items():
    pda = byte_pda(LIST)
    doc = None
    for i in range(30):
        doc = {"head": nest(i, i % 6), "tail": doc}
    assert pda.matches(json.dumps(doc).encode())
    assert not pda.matches(json.dumps({"head": 1}).encode())
    assert not pda.matches(json.dumps({"head": 1, "tail": {"head": 2}}).encode())


ADDRESS = {
    "type": "object",
    "properties": {
        "street": {"type": "string", "maxLength": 40},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "since": {"type": "string", "format": "date"},
    },
    "required": ["street"],
    "additionalProperties": False,
}
# SHARED has ten properties: any order is past its budget, so these tests use declared order
DECLARED = {"property_order": "declared"}
SHARED = {
    "$defs": {"address": ADDRESS},
    "type": "object",
    "properties": {f"a{i}": {"$ref": "#/$defs/address"} for i in range(10)},
    "additionalProperties": False,
}
addresses = st.fixed_dictionaries(
    {"street": st.text(max_size=3)},
    optional={
        "zip": st.from_regex(r"\A[0-9]{5}\Z"),
        "since": st.sampled_from(["2024-02-29", "2023-02-29"]),
    },
)


def test_a_shared_definition_compiles_once():
    pda = byte_pda(SHARED, share=True, **DECLARED)
    assert pda.names == ("<root>", "shared:#/$defs/address")  # named where it is defined
    dfa = _unrolled(SHARED, "default", **DECLARED)
    assert pda.num_states * 4 < dfa.num_states  # ten copies in the DFA, one rule here
    # beside a free value (the schema needs rules anyway) the definition is shared by default
    with_free = {**SHARED, "additionalProperties": True}
    assert byte_pda(with_free, **DECLARED).names == (
        "<root>",
        "shared:#/$defs/address",
        "json_array",
        "json_object",
    )


def test_an_error_in_a_shared_rule_names_the_definition():
    """A shared rule's budget error says which definition outgrew it (it said ``shared1``,
    which no schema spells): the root's 91 states fit 300, the address's 872 do not."""
    opts = parse_options(DECLARED)
    with pytest.raises(ac.StateBudgetExceededError, match=r"rule 'shared:#/\$defs/address'"):
        byte_language(load_schema(SHARED), opts, share=True, max_states=300)


def test_a_shared_rule_without_a_translation_of_its_own_is_named_by_its_object():
    """A shared value made by merging (no subschema translated to it alone) is named after
    its first object's schema; one with neither keeps a number."""
    from automata_compile.frontends.json_schema._rules import Rules
    from automata_compile.frontends.json_schema._types import _literal

    obj, num = _literal({"a": 1}, "/$defs/x"), _literal(3, "/$defs/n")
    rules = Rules([], [], first_at={obj: "/properties/y"})
    rules.call(("shared", obj), lambda: None)
    assert rules.names[-1] == "shared:#/properties/y"  # where it was translated comes first
    rules = Rules([], [])
    rules.call(("shared", obj), lambda: None)
    rules.call(("shared", num), lambda: None)
    assert rules.names[1:] == ["shared:#/$defs/x", "shared2"]


def test_a_regular_schema_shares_only_past_the_dfa_budget():
    vocab = byte_vocab()
    assert not ac.compile_json_schema(SHARED, vocab, **DECLARED).is_pda  # fits: the DFA
    with pytest.raises(ac.StateBudgetExceededError):
        ac.compile_json_schema(SHARED, vocab, recursion="unroll", max_states=3000, **DECLARED)
    pda = ac.compile_json_schema(SHARED, vocab, max_states=3000, **DECLARED)
    assert pda.is_pda
    doc = {"a1": {"street": "x", "zip": "12345"}, "a7": {"street": "", "since": "2024-02-29"}}
    assert pda.accepts(list(json.dumps(doc).encode()))
    assert not pda.accepts(list(json.dumps({"a1": {"street": "x", "zip": "1234"}}).encode()))


@SETTINGS
@given(st.dictionaries(st.sampled_from([f"a{i}" for i in range(10)]), addresses, max_size=4))
def test_shared_definition_language_is_unchanged(doc):
    pda = byte_pda(SHARED, share=True, **DECLARED)
    dfa = _unrolled(SHARED, "default", **DECLARED)
    validator = jsonschema.Draft202012Validator(SHARED, format_checker=jsonschema.FormatChecker())
    order = list(ADDRESS["properties"])
    doc = {  # schema order
        k: {p: doc[k][p] for p in order if p in doc[k]}
        for k in sorted(doc, key=lambda k: int(k[1:]))
    }
    for text in texts(doc):
        data = text.encode()
        assert pda.matches(data) == dfa.matches(data) == validator.is_valid(doc), text


# ------------------------------------------------------------------------------------------
# options, refusals, fallbacks
# ------------------------------------------------------------------------------------------


def test_tables_without_calls_are_unchanged():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "integer"},
            "b": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    }
    vocab = byte_vocab()
    default = ac.compile_json_schema(schema, vocab)
    unrolled = ac.compile_json_schema(schema, vocab, recursion="unroll")
    assert not default.is_pda
    for name in ("token_class", "next_state", "accepting", "forced_tokens", "forced_len"):
        assert np.array_equal(getattr(default, name), getattr(unrolled, name)), name


def test_unroll_option_and_regex_refusal():
    with pytest.raises(UnsupportedSchemaError, match=r"#/\$defs/node.*recursion='unroll'"):
        ac.json_schema_to_regex(TREE, **DECLARED)
    assert "children" in ac.json_schema_to_regex(TREE, recursion="unroll", **DECLARED)
    dfa = ac.compile_json_schema(TREE, byte_vocab(), recursion="unroll", max_recursion_depth=1)
    assert not dfa.is_pda
    with pytest.raises(ValueError, match="recursion must be 'stack' or 'unroll'"):
        ac.compile_json_schema(TREE, byte_vocab(), recursion="deep")


def test_recursion_that_never_ends_is_unsatisfiable():
    endless = {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}
    with pytest.raises(InvalidSchemaError, match="unsatisfiable"):
        ac.compile_json_schema(endless, byte_vocab())
    # an endless branch is dropped, the rest stays
    e = {**endless, "properties": {"next": {"$ref": "#/$defs/e"}}}
    either = {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/e"}], "$defs": {"e": e}}
    pda = ac.compile_json_schema(either, byte_vocab())
    assert pda.accepts(list(b"null")) and not pda.accepts(list(b'{"next": null}'))


def test_recursive_ref_with_sibling_constraints_falls_back_to_unrolling():
    schema = {"type": "object", "properties": {"k": {"$ref": "#", "minProperties": 1}}}
    with pytest.warns(UserWarning, match=r"#/properties/k: a recursive \$ref meets other .*unroll"):
        dfa = ac.compile_json_schema(
            schema, byte_vocab(), timeout_s=None
        )  # no deadline: load-independent
    assert not dfa.is_pda
    assert dfa.accepts(list(b'{"k": {"k": {"x": 1}}}')) and not dfa.accepts(list(b'{"k": {}}'))


def test_union_conflict_falls_back_to_unrolling_with_a_warning():
    """After ``{"a":`` one branch spells an object inline, the other calls the free-object
    rule: one byte of lookahead cannot choose, so the schema is unrolled."""
    inner = {
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "additionalProperties": False,
    }
    schema = {
        "anyOf": [
            {
                "type": "object",
                "properties": {"a": inner},
                "required": ["a"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"a": {}, "c": {"type": "integer"}},
                "required": ["c"],
                "additionalProperties": False,
            },
        ]
    }
    with pytest.warns(UserWarning, match="union of alternatives calls a rule"):
        dfa = ac.compile_json_schema(schema, byte_vocab())
    assert not dfa.is_pda
    validator = jsonschema.Draft202012Validator(schema)
    docs = ({"a": {"x": 1}}, {"a": {"y": 1}}, {"a": {"y": [1]}, "c": 2}, {"c": 1}, {"a": 1})
    for doc in docs:
        assert dfa.accepts(list(json.dumps(doc).encode())) == validator.is_valid(doc), doc


def _closed(props, required=()):
    return {
        "type": "object",
        "properties": props,
        "required": list(required),
        "additionalProperties": False,
    }


COLORS = ["crimson", "scarlet", "vermilion", "magenta", "turquoise", "chartreuse", "lavender"]
# two shared values (each used at two or more positions, large enough to be rules); after
# ``{"x": {`` the first two branches hold ``shade`` (a call of its rule) and an object spelled
# inline: one byte of lookahead cannot choose there, but ``palette`` is called where nothing
# else can start
SHARED_CONFLICT = {
    "$defs": {
        "shade": _closed(
            {"name": {"enum": COLORS}, "tone": {"enum": [c.upper() for c in COLORS]}}, ["name"]
        ),
        "palette": {
            "type": "array",
            "items": {"enum": [c + s for c in COLORS for s in ("-light", "-dark", "-pale")]},
            "maxItems": 4,
        },
    },
    "anyOf": [
        _closed({"x": {"$ref": "#/$defs/shade"}, "p": {"$ref": "#/$defs/palette"}, "k": {}}, ["k"]),
        _closed({"x": _closed({"n": {"type": "boolean"}}), "q": {"$ref": "#/$defs/palette"}}),
        _closed({"y": {"$ref": "#/$defs/shade"}, "r": {"$ref": "#/$defs/palette"}}, ["y"]),
    ],
}


def test_a_shared_value_a_conflict_names_is_spelled_inline_the_others_stay_rules():
    """Where shared-value rules conflict, only the value the conflict names is spelled
    inline (`Outliner.byte_pda`): ``palette`` stays one rule, built once; spelling every
    shared value inline (the next attempt) made travis.json's automaton outgrow its budget
    after 12 s."""
    opts = parse_options({})
    first, _ = translate_grammar(SHARED_CONFLICT, opts, True)
    assert first.names[1:3] == ("shared:#/$defs/shade", "shared:#/$defs/palette")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, pda = byte_language(SHARED_CONFLICT, opts)
    assert pda.names == ("<root>", "shared:#/$defs/palette", "json_array", "json_object")
    validator = jsonschema.Draft202012Validator(SHARED_CONFLICT)
    shade = {"name": "magenta", "tone": "MAGENTA"}
    docs = [
        {"x": shade, "p": ["crimson-dark"], "k": [1, {"a": None}]},
        {"x": {"name": "teal"}, "k": 1},
        {"x": {"n": True}, "q": ["lavender-pale", "scarlet-light"]},
        {"x": {"n": True}, "q": ["lavender"]},
        {"x": {"n": 1}},
        {"y": shade, "r": []},
        {"y": shade, "r": ["magenta-pale"] * 5},
        {"y": {"tone": "CRIMSON"}},
        {"x": shade},
        {},
    ]
    for doc in docs:
        for text in (json.dumps(doc), json.dumps(doc, separators=(",", ":"))):
            assert pda.matches(text.encode()) == validator.is_valid(doc), text


def test_free_array_beside_a_spelled_one_is_spelled_inline_not_unrolled():
    """A schema-free array is a call of the free-array rule, unless a union spells another
    array at the same place: then it is spelled inline (still a PDA, still no depth bound),
    not unrolled."""
    schema = {
        "type": "array",
        "anyOf": [{"items": {"type": "array"}}, {"items": {"items": {"type": "integer"}}}],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, pda = byte_language(schema, parse_options({}))
    assert pda is not None
    validator = jsonschema.Draft202012Validator(schema)
    deep = [[[[[[["x"]]]]]]]
    for doc in ([[1, 2], []], [["x", {}]], deep, [1], [[1], 2], {"a": 1}, [[[1]]]):
        assert pda.matches(json.dumps(doc).encode()) == validator.is_valid(doc), doc


def test_regular_schemas_compile_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ac.compile_json_schema(TREE, byte_vocab())
        ac.compile_json_schema(FREE, byte_vocab())


# ------------------------------------------------------------------------------------------
# tokens: artifacts and exact masks on a real vocabulary
# ------------------------------------------------------------------------------------------


def test_pda_artifact_round_trip(tmp_path):
    vocab = byte_vocab()
    pda = ac.compile_json_schema(TREE, vocab)
    assert pda.is_pda and pda.spec_kind == "json_schema" and pda.forced_tokens is None
    path = tmp_path / "tree.npz"
    pda.save(path)
    back = TokenDFA.load(path, vocab=vocab)
    assert back.is_pda and back.spec == pda.spec
    for name, arr in pda.pda_arrays().items():
        assert np.array_equal(arr, getattr(back, name)), name
    doc = list(json.dumps({"name": "a", "children": [{"name": "b", "children": []}]}).encode())
    assert back.accepts(doc) and not back.accepts(doc[:-1])


class PdaOracle:
    """Brute force over every token: ``prefix + token`` readable by the byte PDA."""

    def __init__(self, pda):
        self.pda = pda
        self.start = (int(pda.starts[0]), ())

    def feed(self, data: bytes):
        config = self.start
        for b in data:
            config = config and self.pda.step(*config, b)
        return config

    def in_language(self, data: bytes) -> bool:
        config = self.feed(data)
        return (
            bool(config)
            and bool(self.pda.ends[config[0]])
            and all(self.pda.ends[r] for r in config[1])
        )

    def allowed_tokens(self, prefix: bytes, tokens) -> set:
        base = self.feed(prefix)
        out, prev, stack = set(), b"", [base]
        for tok, i in sorted((t, i) for i, t in enumerate(tokens) if t):
            lcp = 0
            while lcp < min(len(prev), len(tok)) and prev[lcp] == tok[lcp]:
                lcp += 1
            del stack[lcp + 1 :]
            config = stack[-1]
            for b in tok[lcp:]:
                config = config and self.pda.step(*config, b)
                stack.append(config)
            if config:
                out.add(i)
            prev = tok
        return out


DOCS = {
    "tree": (TREE, {"name": "r\u00e9", "children": [{"name": "a", "children": [{"name": ""}]}]}),
    "free": (FREE, {"id": -12, "meta": {"a": [1, {"b": {"c": [True, None, "x\n"]}}]}, "z": 2.5}),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DOCS))
def test_masks_equal_brute_force_on_llama3(llama3_vocab, name):
    schema, doc = DOCS[name]
    vocab = llama3_vocab
    pda = ac.compile_json_schema(schema, vocab)
    oracle = PdaOracle(byte_pda(schema))
    eos = set(vocab.eos_ids)
    text = json.dumps(doc, ensure_ascii=False)
    ids = vocab.encode(text)
    assert pda.accepts(ids)
    state, stack, prefix = pda.start, (), b""
    rnd = random.Random(name)
    check = set(rnd.sample(range(len(ids) + 1), min(8, len(ids) + 1))) | {0, len(ids)}
    for i, tok in enumerate([*ids, None]):
        if i in check:
            mask = pda.allowed(state, stack)
            got = set(np.flatnonzero(mask).tolist()) - eos
            want = oracle.allowed_tokens(prefix, vocab.tokens)
            assert got == want, (prefix, [vocab.tokens[t] for t in sorted(got ^ want)[:10]])
            assert all(mask[list(eos)]) == oracle.in_language(prefix), prefix
        if tok is not None:
            state, stack = pda.advance_config(state, stack, tok)
            prefix += vocab.tokens[tok]
    assert prefix == text.encode()
