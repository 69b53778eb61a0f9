"""The bitset any-order path (docs/any_order_bitset.md) against the exact any-order token DFA.

Oracle: `compile_json_schema`'s default (``property_order="any"``, no fallback) on Llama-3.
The NumPy reference of the runtime rule (`reference_mask` / `reference_advance`) must allow
exactly the tokens the token DFA allows at every reachable (state, bitset), along random
walks and along encoded instances; hypothesis instances in shuffled key order are accepted
exactly where `jsonschema` says they are valid.
"""

from __future__ import annotations

import json
import os
import random
import sys
import warnings
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile.frontends.json_schema import BitsetIneligible
from automata_compile.pipeline._bitset import compile_json_schema_bitset
from automata_compile.tokens import reference_advance, reference_mask

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bitset_oracles import DFAPair, compare, instances, random_walks  # noqa: E402
from bitset_oracles import text as json_text  # noqa: E402
from bitset_schemas import BOOL, DISJUNCTIVE, ENUM, UNION_A, UNION_B, UNION_C, object_schemas  # noqa: E402
from bitset_schemas import INT99 as INT  # noqa: E402

NESTED = {
    "type": "object",
    "properties": {"p": INT, "q": BOOL, "pq": ENUM},
    "required": ["q"],
    "additionalProperties": False,
}

SCHEMAS_TWO = {
    "type": "object",
    "properties": {"a": INT, "b": BOOL},
    "required": ["a"],
    "additionalProperties": False,
}
SCHEMAS = {
    "two": {
        "type": "object",
        "properties": {"a": INT, "b": BOOL},
        "required": ["a"],
        "additionalProperties": False,
    },
    "prefix_names": {
        "type": "object",
        "properties": {"a": INT, "ab": BOOL, "abc": ENUM},
        "required": ["ab"],
        "additionalProperties": False,
    },
    "five_none_required": {
        "type": "object",
        "properties": {k: BOOL for k in ("v", "w", "x", "y", "z")},
        "additionalProperties": False,
    },
    "all_required": {
        "type": "object",
        "properties": {"a": BOOL, "b": ENUM, "c": INT},
        "required": ["a", "b", "c"],
        "additionalProperties": False,
    },
    "rest_allowed": {
        "type": "object",
        "properties": {"a": INT, "b": BOOL},
        "required": ["b"],
        "additionalProperties": {"type": "boolean"},
    },
    "nested": {
        "type": "object",
        "properties": {"n": NESTED, "a": INT, "m": NESTED},
        "required": ["n"],
        "additionalProperties": False,
    },
    "counted_beside_bitset": {
        "type": "object",
        "properties": {
            "c": {
                "type": "object",
                "minProperties": 1,
                "properties": {"a": BOOL, "b": INT},
                "additionalProperties": False,
            },
            "d": NESTED,
        },
        "additionalProperties": False,
    },
    "union_of_objects": {
        "type": "object",
        "properties": {"u": {"anyOf": [SCHEMAS_TWO, NESTED, {"type": "integer"}]}, "k": BOOL},
        "required": ["u"],
        "additionalProperties": False,
    },
    "union_sharing_keys": {
        "type": "array",
        "maxItems": 2,
        "items": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"a": INT, "b": BOOL, "c": ENUM},
                    "required": ["a"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"a": BOOL, "c": ENUM, "d": INT},
                    "required": ["a"],
                    "additionalProperties": False,
                },
            ]
        },
    },
    "array_of_objects": {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": NESTED, "maxItems": 3}, "k": BOOL},
        "required": ["xs"],
        "additionalProperties": False,
    },
}


@pytest.fixture(scope="module")
def compiled(llama3_vocab):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        for name, schema in SCHEMAS.items():
            out[name] = (
                ac.compile_json_schema(schema, llama3_vocab),
                compile_json_schema_bitset(schema, llama3_vocab),
            )
    return out


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_walks_allow_the_same_tokens(name, compiled, llama3_vocab):
    old, new = compiled[name]
    rng = random.Random(name)
    random_walks(
        DFAPair(old, new, llama3_vocab), llama3_vocab, rng, walks=12, steps=80, stop=0.3, label=name
    )


@pytest.mark.parametrize(
    "name", ["two", "prefix_names", "rest_allowed", "nested", "array_of_objects", "all_required"]
)
def test_instances_in_any_order(name, compiled, llama3_vocab):
    old, new = compiled[name]
    schema = SCHEMAS[name]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(instances(schema), st.booleans())
    def check(pairs, dup):
        text = json_text(pairs)
        declared = [(k, v) for k, v in pairs if k in schema["properties"]]
        dup = dup and bool(declared)
        if dup:  # a declared key written twice: refused (other keys may repeat)
            k, v = declared[0]
            text = text[:-1] + f", {json.dumps(k)}: {json_text(v)}" + "}"
        try:
            data = json.loads(text)
            valid = not dup and jsonschema.Draft202012Validator(schema).is_valid(data)
        except ValueError:
            valid = False
        accepted = compare(DFAPair(old, new, llama3_vocab), llama3_vocab, llama3_vocab.encode(text))
        assert accepted == valid, (text, valid)

    check()


def test_the_state_space_is_smaller_than_any_order(compiled):
    old, new = compiled["five_none_required"]
    assert new.reachable_states() < old.next_state.shape[0]
    assert new.num_bits == 5


def test_objects_inside_counted_objects_are_counted(llama3_vocab):
    """An object counting its properties spells the objects inside it with the counting
    automaton too: here none is left with bits. (Grammar rules: test_bitset_pda.py.)"""
    with pytest.raises(BitsetIneligible, match="every object in any order is spelled by"):
        compile_json_schema_bitset(
            {"type": "object", "properties": {"a": NESTED, "b": BOOL}, "minProperties": 1},
            llama3_vocab,
        )
    with pytest.raises(BitsetIneligible, match="no object in any order"):
        compile_json_schema_bitset({"type": "integer"}, llama3_vocab)


@pytest.mark.parametrize("whitespace", ["compact", "pretty"])
@pytest.mark.parametrize("name", ["prefix_names", "nested"])
def test_whitespace_options(name, whitespace, llama3_vocab):
    schema = SCHEMAS[name]
    old = ac.compile_json_schema(schema, llama3_vocab, whitespace=whitespace, max_whitespace=2)
    new = compile_json_schema_bitset(schema, llama3_vocab, whitespace=whitespace, max_whitespace=2)
    rng = random.Random(whitespace + name)
    random_walks(
        DFAPair(old, new, llama3_vocab),
        llama3_vocab,
        rng,
        walks=8,
        steps=60,
        label=f"{name}/{whitespace}",
    )


@pytest.mark.parametrize("name", sorted(DISJUNCTIVE))
def test_unions_closing_on_different_required_sets(name, llama3_vocab):
    """``}`` of a union whose members require different keys: its REQUIRE is the disjunction
    of the members' (programs with alternatives); masks equal to the exact any-order DFA."""
    schema = DISJUNCTIVE[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        old = ac.compile_json_schema(schema, llama3_vocab)
    new = compile_json_schema_bitset(schema, llama3_vocab)
    assert new.program_alts.shape[1] >= 2  # some program holds a choice
    rng = random.Random(name)
    random_walks(
        DFAPair(old, new, llama3_vocab), llama3_vocab, rng, walks=12, steps=60, stop=0.2, label=name
    )


def test_a_union_whose_events_conflict_is_spelled_by_the_counting_automaton(llama3_vocab):
    """A key one member declares (SET) and another takes as an additional property (no
    event): the union's members are spelled by the counting automaton (as by default) in a
    second translation, the rest of the schema keeps its bits; masks equal to the default."""
    open_b = dict(UNION_B, additionalProperties=BOOL)
    schema = {
        "type": "object",
        "properties": {"u": {"anyOf": [UNION_C, open_b]}, "n": NESTED},
        "required": ["u"],
        "additionalProperties": False,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        old = ac.compile_json_schema(schema, llama3_vocab)
        new = compile_json_schema_bitset(schema, llama3_vocab)
    assert new.counted_objects == ("/properties/u/anyOf/0", "/properties/u/anyOf/1")
    assert new.num_bits > 0  # the others keep their bits
    rng = random.Random("counted")
    random_walks(
        DFAPair(old, new, llama3_vocab),
        llama3_vocab,
        rng,
        walks=12,
        steps=60,
        stop=0.2,
        label="counted",
    )


def test_counted_objects_past_the_budget_fall_back_as_by_default(llama3_vocab):
    """Counted union members of 12 properties fall back to declared order with a warning,
    as the default does with them; masks equal to the default's."""
    big_a = {"type": "object", "properties": {f"p{i}": BOOL for i in range(12)},
             "required": ["p3"], "additionalProperties": False}  # fmt: skip
    big_b = {"type": "object", "properties": {f"q{i}": BOOL for i in range(12)},
             "additionalProperties": BOOL}  # fmt: skip
    schema = {
        "type": "object",
        "properties": {"u": {"anyOf": [big_a, big_b]}, "n": NESTED},
        "required": ["u"],
        "additionalProperties": False,
    }
    with pytest.warns(ac.OrderFallbackWarning):
        old = ac.compile_json_schema(schema, llama3_vocab)
    with pytest.warns(ac.OrderFallbackWarning):
        new = compile_json_schema_bitset(schema, llama3_vocab)
    assert new.counted_objects and new.num_bits == 5  # the root and NESTED keep their bits
    rng = random.Random("budget")
    random_walks(
        DFAPair(old, new, llama3_vocab),
        llama3_vocab,
        rng,
        walks=4,
        steps=40,
        stop=0.2,
        label="budget",
    )


def _union_instance(members):
    return st.sampled_from(members).flatmap(instances)


@pytest.mark.parametrize("members", [[UNION_A, UNION_B], [UNION_A, UNION_B, UNION_C]])
def test_union_instances_in_any_order(members, llama3_vocab):
    """Hypothesis instances of one member (in shuffled order, sometimes missing a required
    key) are accepted exactly where `jsonschema` says the union accepts them."""
    schema = {"anyOf": members}
    old = ac.compile_json_schema(schema, llama3_vocab)
    new = compile_json_schema_bitset(schema, llama3_vocab)

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(_union_instance(members))
    def check(pairs):
        text = json_text(pairs)
        valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        assert (
            compare(DFAPair(old, new, llama3_vocab), llama3_vocab, llama3_vocab.encode(text))
            == valid
        ), text

    check()


GENERATED = int(os.environ.get("BITSET_GENERATED_EXAMPLES", "6"))


@settings(max_examples=GENERATED, deadline=None, suppress_health_check=list(HealthCheck))
@given(object_schemas(2, [BOOL, INT, ENUM], [False, BOOL], leaf_weight=2), st.integers(0, 2**16))
def test_generated_schemas_allow_the_same_tokens(llama3_vocab, schema, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        try:
            old = ac.compile_json_schema(schema, llama3_vocab)
        except ac.OrderFallbackWarning:  # the oracle is not exact in any order there
            event("skipped: the default fell back")
            return
    try:
        new = compile_json_schema_bitset(schema, llama3_vocab)
    except BitsetIneligible as e:  # e.g. no object in any order, a union conflict
        event(f"skipped: {str(e).split(':')[0][:40]}")
        return
    event("compared")
    rng = random.Random(seed)
    pair = DFAPair(old, new, llama3_vocab)
    random_walks(
        pair, llama3_vocab, rng, walks=3, steps=40, stop=0.2, short=0.85, label=str(schema)
    )


BIG = {
    "type": "object",
    "properties": {f"p{i}": [INT, BOOL, ENUM][i % 3] for i in range(14)},
    "required": ["p0", "p5", "p13"],
    "additionalProperties": False,
}


def _accepts(t, vocab, tokens) -> bool:
    state, bits = t.start, np.zeros(t.words, np.uint32)
    for tok in tokens:
        if not reference_mask(t, state, bits)[tok]:
            return False
        state, bits = reference_advance(t, state, bits, tok)
    return bool(reference_mask(t, state, bits)[vocab.eos_ids[0]])


@pytest.fixture(scope="module")
def big(llama3_vocab):
    with pytest.warns(ac.OrderFallbackWarning):  # the default: past its any-order budget
        ac.compile_json_schema(BIG, llama3_vocab)
    return compile_json_schema_bitset(BIG, llama3_vocab)


def test_an_object_past_the_old_budget_is_exact_in_any_order(big, llama3_vocab):
    """14 properties (2**14 sets: the default falls back to declared order): every
    hypothesis instance in shuffled order is accepted exactly where `jsonschema` says it is
    valid, duplicates refused; the table stays linear (14 bits)."""
    assert big.num_bits == 14 and big.next_state.shape[0] < 1000

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(instances(BIG), st.booleans())
    def check(pairs, dup):
        text = json_text(pairs)
        dup = dup and bool(pairs)
        if dup:
            k, v = pairs[-1]
            text = text[:-1] + f", {json.dumps(k)}: {json_text(v)}" + "}"
        valid = not dup and jsonschema.Draft202012Validator(BIG).is_valid(json.loads(text))
        assert _accepts(big, llama3_vocab, llama3_vocab.encode(text)) == valid, text

    check()


@pytest.mark.parametrize("name", ["nested", "union_sharing_keys"])
def test_minimized_tables_walk_the_same(name, compiled, llama3_vocab):
    from automata_compile.tokens import minimize_bitset

    _, t = compiled[name]
    m = minimize_bitset(t)
    assert m.next_state.shape[0] <= t.reachable_states()
    rng = random.Random(name)
    for _ in range(6):
        s1, b1 = t.start, np.zeros(t.words, np.uint32)
        s2, b2 = m.start, np.zeros(m.words, np.uint32)
        for _ in range(40):
            x, y = reference_mask(t, s1, b1), reference_mask(m, s2, b2)
            assert np.array_equal(x, y)
            allowed = [k for k in np.flatnonzero(x).tolist() if k not in llama3_vocab.eos_ids]
            if not allowed:
                break
            tok = rng.choice(allowed)
            s1, b1 = reference_advance(t, s1, b1, tok)
            s2, b2 = reference_advance(m, s2, b2, tok)
