"""Filler runs in JSON Schema numbers are bounded by ``max_filler`` (issue 11, item 2)."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile import json_schema_to_regex

_SCHEMAS = [
    {"type": "integer"},
    {"type": "integer", "minimum": -5, "maximum": 10**6},
    {"type": "number"},
    {"type": "number", "minimum": 0.5, "maximum": 1.25},
    {"type": "number", "exclusiveMinimum": 0},
    {"enum": [12, 1.5]},
]


def _rx(schema, **kw):
    return re.compile(json_schema_to_regex(schema, **kw))


@pytest.mark.parametrize("k", [0, 1, 3, 20])
def test_integer_zero_run_bounded_at_exactly_max_filler(k):
    rx = _rx({"type": "integer"}, max_filler=k)
    assert rx.fullmatch("12")
    assert bool(rx.fullmatch("12." + "0" * k)) == (k > 0)
    assert not rx.fullmatch("12." + "0" * (k + 1))


@pytest.mark.parametrize("schema", _SCHEMAS)
@pytest.mark.parametrize("k", [1, 4])
def test_fraction_trailing_zeros_bounded_at_exactly_max_filler(schema, k):
    """Each schema admits some x.y; its spelling with k trailing zeros is valid under the
    schema and accepted, with k + 1 zeros rejected."""
    rx = _rx(schema, max_filler=k)
    for base in ("12", "1.5", "1.25", "0.5", "3"):
        if not rx.fullmatch(base):
            continue
        stem = base if "." in base else base + "."
        assert rx.fullmatch(stem + "0" * k), (schema, stem, k)
        assert not rx.fullmatch(stem + "0" * (k + 1)), (schema, stem, k)


def test_exponent_leading_zeros_bounded():
    rx = _rx({"type": "number"}, max_filler=2)
    assert rx.fullmatch("1e005") and rx.fullmatch("1E+00") and rx.fullmatch("2.5e-7")
    assert not rx.fullmatch("1e0005") and not rx.fullmatch("1e000")


def test_multiple_of_zero_run_bounded():
    """`multipleOf` remainder automata loop on zeros; the bound applies there too."""
    import automata_compile as ac

    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    for schema in ({"type": "number", "multipleOf": 0.5}, {"type": "integer", "multipleOf": 3}):
        dfa = ac.compile_json_schema(schema, vocab, max_filler=3)
        assert dfa.accepts(list(b"1.5000")) == (schema["multipleOf"] == 0.5)
        assert dfa.accepts(list(b"12.000"))
        assert not dfa.accepts(list(b"12.0000"))
        assert not dfa.accepts(list(b"1.50000"))


def test_bad_max_filler():
    with pytest.raises(ValueError, match="max_filler"):
        json_schema_to_regex({"type": "integer"}, max_filler=-1)


_INT_RX = _rx({"type": "integer"})
_NUM_RX = _rx({"type": "number"})
_BOUNDED_INT_RX = _rx({"type": "integer", "minimum": -(10**20), "maximum": 10**20})


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.integers(),
        st.integers(-(2**53), 2**53).map(float),
        st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: x == int(x)),
    )
)
def test_json_dumps_integers_accepted(x):
    text = json.dumps(x)
    assert jsonschema.Draft202012Validator({"type": "integer"}).is_valid(x)
    assert _INT_RX.fullmatch(text), text
    assert _NUM_RX.fullmatch(text), text
    if abs(x) <= 10**20 and "e" not in text:
        assert _BOUNDED_INT_RX.fullmatch(text), text


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_json_dumps_floats_accepted_by_number(x):
    assert _NUM_RX.fullmatch(json.dumps(x))
