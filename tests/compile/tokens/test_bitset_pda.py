"""The bitset any-order path for schemas with grammar rules (`tokens._bitset_pda`) against the
exact any-order PDA tables.

Oracle: `compile_json_schema`'s default (``property_order="any"``, no fallback; its tables are
a PDA, ``is_pda``) on Llama-3, through `TokenDFA.allowed` / `advance_config`. The reference rule
with a stack and a bitset (`reference_pda_mask` / `reference_pda_advance`) must allow exactly
the same tokens along random walks; hypothesis instances in shuffled key order (with free JSON
values) are accepted exactly where `jsonschema` says they are valid.
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
from automata_compile.tokens import BitsetPDATables

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bitset_oracles import PDAPair, compare, instances, random_walks  # noqa: E402
from bitset_oracles import text as json_text  # noqa: E402
from bitset_schemas import BOOL, FREE, PDA_SCHEMAS, object_schemas  # noqa: E402
from bitset_schemas import INT99 as INT  # noqa: E402

SCHEMAS = {
    "free_value": PDA_SCHEMAS["free_value"],
    "nested": PDA_SCHEMAS["nested"],
    "rest_free": {  # additional properties take free values: a rule after any other key
        "type": "object",
        "properties": {
            "a": INT,
            "ab": BOOL,
            "n": {"type": "object", "properties": {"q": BOOL, "r": FREE}},
        },
        "required": ["ab"],
    },  # fmt: skip
    "array_of_objects": {
        "type": "array",
        "maxItems": 3,
        "items": {
            "type": "object",
            "properties": {"k": FREE, "v": INT},
            "required": ["v"],
            "additionalProperties": False,
        },
    },
    "union": PDA_SCHEMAS["union"],
}


@pytest.fixture(scope="module")
def compiled(llama3_vocab):
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        for name, schema in SCHEMAS.items():
            old = ac.compile_json_schema(schema, llama3_vocab)
            assert old.is_pda, name
            out[name] = (old, compile_json_schema_bitset(schema, llama3_vocab))
    return out


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_random_walks_allow_the_same_tokens(name, compiled, llama3_vocab):
    old, new = compiled[name]
    assert isinstance(new, BitsetPDATables) and new.tables.is_pda
    assert new.programs.shape[0] > 1  # some edge holds events
    random_walks(
        PDAPair(old, new, llama3_vocab),
        llama3_vocab,
        random.Random(name),
        stop=0.2,
        walks=12,
        steps=70,
        label=name,
    )


@pytest.mark.parametrize("name", ["free_value", "nested", "rest_free", "array_of_objects"])
def test_instances_in_any_order(name, compiled, llama3_vocab):
    old, new = compiled[name]
    schema = SCHEMAS[name]

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(instances(schema))
    def check(value):
        text = json_text(value)
        valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        assert (
            compare(PDAPair(old, new, llama3_vocab), llama3_vocab, llama3_vocab.encode(text))
            == valid
        ), text

    check()


def test_an_object_inside_a_recursive_rule_is_counted(llama3_vocab):
    """An object inside a recursive rule is spelled by the counting automaton (its bits
    would need the stack); the root's objects keep their bits; masks equal to the default."""
    tree = {
        "$defs": {
            "t": {
                "type": "object",
                "properties": {"v": INT, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/t"}, "a": BOOL, "b": FREE},
        "required": ["root"],
        "additionalProperties": False,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        old = ac.compile_json_schema(tree, llama3_vocab)
        new = compile_json_schema_bitset(tree, llama3_vocab)
    assert old.is_pda and isinstance(new, BitsetPDATables)
    assert new.counted_objects and new.num_bits >= 3
    random_walks(
        PDAPair(old, new, llama3_vocab),
        llama3_vocab,
        random.Random("tree"),
        stop=0.2,
        walks=10,
        steps=70,
        label="tree",
    )


GENERATED = int(os.environ.get("BITSET_GENERATED_EXAMPLES", "6"))


@settings(max_examples=GENERATED, deadline=None, suppress_health_check=list(HealthCheck))
@given(object_schemas(2, [BOOL, INT, FREE], [False, BOOL, True]), st.integers(0, 2**16))
def test_generated_schemas_allow_the_same_tokens(llama3_vocab, schema, seed):
    """Generated nested objects, arrays and unions with free values: where the default is a
    PDA that kept any order and the bitset path takes the schema, the masks are equal."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        try:
            old = ac.compile_json_schema(schema, llama3_vocab)
        except ac.OrderFallbackWarning:
            event("skipped: the default fell back")
            return
    try:
        new = compile_json_schema_bitset(schema, llama3_vocab)
    except BitsetIneligible as e:
        event(f"skipped: {str(e).split(':')[0][:40]}")
        return
    event("compared (PDA)" if old.is_pda else "compared (DFA)")
    rng = random.Random(seed)
    if not old.is_pda:
        return  # the DFA path: tests/compile/tokens/test_bitset_compose.py
    random_walks(
        PDAPair(old, new, llama3_vocab),
        llama3_vocab,
        rng,
        stop=0.2,
        walks=3,
        steps=40,
        short=0.85,
        label=str(schema),
    )


@pytest.mark.parametrize("whitespace", ["compact", "pretty"])
def test_whitespace_options(whitespace, llama3_vocab):
    schema = SCHEMAS["nested"]
    old = ac.compile_json_schema(schema, llama3_vocab, whitespace=whitespace, max_whitespace=2)
    new = compile_json_schema_bitset(schema, llama3_vocab, whitespace=whitespace, max_whitespace=2)
    rng = random.Random(whitespace)
    random_walks(
        PDAPair(old, new, llama3_vocab),
        llama3_vocab,
        rng,
        stop=0.2,
        walks=6,
        steps=60,
        label=f"nested/{whitespace}",
    )


def test_union_instances_in_any_order(compiled, llama3_vocab):
    """A disjunctive REQUIRE after free values: instances of either member (shuffled, some
    missing a required key) accepted exactly where `jsonschema` accepts them."""
    old, new = compiled["union"]
    schema = SCHEMAS["union"]
    assert new.program_alts.shape[1] >= 2

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(schema["anyOf"]).flatmap(instances))
    def check(pairs):
        text = json_text(pairs)
        valid = jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))
        assert (
            compare(PDAPair(old, new, llama3_vocab), llama3_vocab, llama3_vocab.encode(text))
            == valid
        ), text

    check()


@pytest.mark.parametrize(
    "name, before, again",
    [
        ("free_value", '{"a": 1, "b": 2, ', '"a": 3}'),
        ("rest_free", '{"ab": true, "n": {"q": true, ', '"q": false}}'),
        ("array_of_objects", '[{"v": 1, ', '"v": 3}]'),
    ],
)
def test_a_key_written_twice_is_refused(name, before, again, compiled, llama3_vocab):
    """A declared key written a second time in one object is refused by both automata (the
    bitset's "not yet written" test), with equal masks up to the refusal, after a prefix
    both allow; random walks and `jsonschema` instances (dicts) rarely or never repeat a key."""
    old, new = compiled[name]
    pair = PDAPair(old, new, llama3_vocab)
    prefix = llama3_vocab.encode(before)
    config = pair.start()
    for tok in prefix:  # the object so far, each key once: every token allowed
        mo, mn = pair.masks(config)
        assert np.array_equal(mo, mn) and mo[tok], llama3_vocab.decode(prefix)
        config = pair.step(config, tok)
    assert not compare(pair, llama3_vocab, prefix + llama3_vocab.encode(again))


# An object whose ``anyOf`` asks for one of two keys, with a free value: its `}` edges hold a
# disjunctive REQUIRE (both required sets as program alternatives), ordinary ones after a
# scalar and context-dependent ones (a pop of the free value's rule) after an array.
ONE_OF_TWO_KEYS = {
    "type": "object",
    "properties": {"a": BOOL, "b": BOOL, "f": FREE},
    "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def one_of_two_keys(llama3_vocab):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ac.OrderFallbackWarning)
        old = ac.compile_json_schema(ONE_OF_TWO_KEYS, llama3_vocab)
        new = compile_json_schema_bitset(ONE_OF_TWO_KEYS, llama3_vocab)
    assert old.is_pda and isinstance(new, BitsetPDATables)
    return old, new


@pytest.mark.parametrize(
    "before, met, ordinary",
    [
        ('{"f": null', False, True),
        ('{"f": 1', False, True),
        ('{"a": true', True, True),
        ('{"f": "x", "b": false', True, True),
        ('{"f": [true, {"k": 2}]', False, False),
        ('{"b": true, "f": [true, {"k": 2}]', True, False),
    ],
)
def test_a_disjunctive_requirement_at_the_closing_brace(
    before, met, ordinary, one_of_two_keys, llama3_vocab
):
    """`}` is allowed exactly where one of the required sets is written, by the exact PDA and
    the reference rule (equal masks up to it and there), on an ordinary edge and on a
    context-dependent one; `jsonschema` agrees. In the union schema a disjunctive `}` on an
    ordinary edge follows only the members' shared key, which meets an alternative: there
    the reference's test of the alternatives never refuses."""
    old, new = one_of_two_keys
    pair = PDAPair(old, new, llama3_vocab)
    (close,) = llama3_vocab.encode("}")
    config = pair.start()
    for tok in llama3_vocab.encode(before):
        mo, mn = pair.masks(config)
        assert np.array_equal(mo, mn) and mo[tok], before
        config = pair.step(config, tok)
    mo, mn = pair.masks(config)
    assert np.array_equal(mo, mn), before
    assert mn[close] == met, before
    # the edge this case is about: ordinary or not, its program's two required sets
    _, (state, stack, _) = config
    tab = new.tables
    cls = tab.token_class[close]
    assert (tab.next_state[state, cls] >= 0) == ordinary
    if ordinary:
        program = new.program[state, cls]
    else:
        (edge,) = [
            e
            for e in tab._cd_edges(state).tolist()
            if tab.cd_class[e] == cls and tab._pops_match(e, stack)
        ]
        program = new.cd_program[edge]
    assert len({tuple(alt) for alt in new.program_alts[program].tolist()}) == 2
    valid = jsonschema.Draft202012Validator(ONE_OF_TWO_KEYS).is_valid(json.loads(before + "}"))
    assert valid == met
