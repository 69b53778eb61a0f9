"""Declared-order objects of many properties: the flat automaton (`_Emitter._declared_flat`).

Oracle: the nested IR chain (the construction below `MAX_NESTED_CHAIN`, printable as a regex)
and `jsonschema`, on every text of up to three (name, value) pairs from a small pool, in
every order, over generated schemas (required and optional properties, with and without
other properties); and a 300-property object, which nested past the recursion limit.
"""

from __future__ import annotations

import itertools
import json
import warnings

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile.frontends.json_schema import _emitter

jsonschema = pytest.importorskip("jsonschema")

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)
NAMES = ["a", "b", "c", "d"]
VALUES = [1, "x"]


def _compile(schema, chain_max, monkeypatch):
    monkeypatch.setattr(_emitter, "MAX_NESTED_CHAIN", chain_max)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ac.compile_json_schema(schema, BYTES, property_order="declared")


def _texts():
    """Every object of at most three pairs from the pool, names distinct, both separators."""
    pool = [(n, v) for n in [*NAMES, "e"] for v in VALUES]
    for k in range(4):
        for pairs in itertools.permutations(pool, k):
            if len({n for n, _ in pairs}) == k:
                yield pairs


def _text(pairs, sep) -> str:
    return "{" + sep.join(f"{json.dumps(n)}:{sep[1:]}{json.dumps(v)}" for n, v in pairs) + "}"


@st.composite
def schemas(draw):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4, unique=True))
    props = {n: draw(st.sampled_from([{"type": "integer"}, {"type": "string"}, {}])) for n in names}
    schema = {"type": "object", "properties": props}
    schema["required"] = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.sampled_from([False, {"type": "integer"}]))
    return schema


@settings(
    max_examples=8,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
@given(schema=schemas())
def test_the_flat_chain_is_the_nested_chain(schema, monkeypatch):
    """The flat automaton accepts exactly what the nested chain does: the texts valid under
    `jsonschema` whose declared names come in declared order, before the other names."""
    flat, nested = _compile(schema, 0, monkeypatch), _compile(schema, 10**6, monkeypatch)
    order = {n: i for i, n in enumerate(schema["properties"])}
    validator = jsonschema.Draft202012Validator(schema)
    for pairs in _texts():
        ranks = [order.get(n, len(order)) for n, _ in pairs]
        want = validator.is_valid(dict(pairs)) and ranks == sorted(ranks)
        for sep in (", ", ",", ""):  # "": pairs with no comma between them
            text = list(_text(pairs, sep).encode())
            ok = want and (sep != "" or len(pairs) < 2)
            assert flat.accepts(text) == ok, (schema, pairs, sep)
            assert nested.accepts(text) == ok, (schema, pairs, sep)


def test_an_object_of_300_optional_properties_compiles():
    """Nested one IR level per property, this object raised RecursionError."""
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(300)},
        "required": ["p7"],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dfa = ac.compile_json_schema(schema, BYTES)
    for text, want in [
        ('{"p7": 1}', True),
        ('{"p0": 1, "p7": 2, "p299": 3, "x": [4]}', True),
        ('{"p0": 1, "p299": 3}', False),  # p7 is required
        ('{"p8": 1, "p7": 2}', False),  # declared order
        ('{"p7": 1, "p7": 2}', False),  # at most once
        ('{"p7": 1 "p8": 2}', False),
        ('{"p7": 1"p8": 2}', False),
        ('{"x": 1, "p7": 2}', False),  # other names after the declared ones
    ]:
        assert dfa.accepts(list(text.encode())) == want, text
