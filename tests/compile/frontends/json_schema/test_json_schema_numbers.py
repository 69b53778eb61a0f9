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
        st.integers(-(2**64) + 1, 2**64 - 1),
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


# ------------------------------------------------------------------------------------------
# digit runs: max_digits (issue 20, item 6)
# ------------------------------------------------------------------------------------------

_UNBOUNDED_INT_RX = _rx({"type": "integer"}, max_digits=None)
_UNBOUNDED_NUM_RX = _rx({"type": "number"}, max_digits=None)


@settings(max_examples=200, deadline=None)
@given(st.integers())
def test_json_dumps_of_any_integer_accepted_with_max_digits_none(x):
    text = json.dumps(x)
    assert _UNBOUNDED_INT_RX.fullmatch(text) and _UNBOUNDED_NUM_RX.fullmatch(text), text


_DIGIT_SCHEMAS = [
    {"type": "number"},
    {"type": "integer"},
    {},
    {"type": "number", "minimum": 0.5},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 3},
    {"type": "integer", "minimum": 7},
    {"type": "number", "multipleOf": 0.5},
    {"type": "number", "not": {"const": 2}},
]


class _Bytes:
    """``fullmatch`` by the schema's automaton on a byte vocabulary (where no regex is)."""

    def __init__(self, schema, **options):
        import automata_compile as ac

        vocab = ac.Vocabulary.from_bytes(
            [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
        )
        self.dfa = ac.compile_json_schema(schema, vocab, **options)

    def fullmatch(self, text: str) -> bool:
        return bool(self.dfa.accepts(list(text.encode())))


def _runs(k: int):
    """(text with a run of k digits, the same with k + 1), per kind of run."""
    return [
        ("1" * k, "1" * (k + 1)),  # integer part
        ("-" + "9" * k, "-" + "9" * (k + 1)),
        ("1." + "5" * k, "1." + "5" * (k + 1)),  # fraction (its last digit non-zero)
        ("2.0" + "5" * (k - 1), "2.0" + "5" * k),  # a fraction's leading zeros count
        ("1e" + "2" * k, "1e" + "2" * (k + 1)),  # exponent
        ("1e-00" + "2" * k, "1e-00" + "2" * (k + 1)),  # after its filler zeros
    ]


@pytest.mark.parametrize("schema", _DIGIT_SCHEMAS)
@pytest.mark.parametrize("k", [20, 23])
def test_digit_runs_bounded_at_exactly_max_digits(schema, k):
    """Each run of k digits is accepted where the schema admits the value and k + 1 is
    refused (the value is valid either way: the bound is the only reason)."""
    rx = _Bytes(schema, max_digits=k)
    unbounded = _Bytes(schema, max_digits=None)
    validator = jsonschema.Draft202012Validator(schema)
    checked = 0
    for ok, too_long in _runs(k):
        if not (unbounded.fullmatch(ok) and unbounded.fullmatch(too_long)):
            continue  # the schema's own language refuses one of them
        assert validator.is_valid(json.loads(too_long)) or "e" in too_long
        assert rx.fullmatch(ok), (schema, ok)
        assert not rx.fullmatch(too_long), (schema, too_long)
        checked += 1
    assert checked >= 1, schema


def test_fraction_digits_and_filler_zeros():
    """A fraction of an unbounded number has at most max_digits digits in all, of which at
    most max_filler trailing zeros; one compared with a bound has at most max_digits digits
    up to its last non-zero digit, then at most max_filler zeros."""
    free = _Bytes({"type": "number"}, max_digits=20, max_filler=3)
    assert free.fullmatch("1." + "5" * 17 + "000") and not free.fullmatch("1." + "5" * 17 + "0000")
    assert free.fullmatch("1." + "5" * 19 + "0") and not free.fullmatch("1." + "5" * 20 + "0")
    bounded = _Bytes({"type": "number", "minimum": 0.5}, max_digits=20, max_filler=3)
    # 0.x is compared with the bound 0.5 digit by digit; 1.x is past it (a free fraction)
    assert bounded.fullmatch("0." + "5" * 20 + "000")
    assert not bounded.fullmatch("0." + "5" * 20 + "0000")
    assert not bounded.fullmatch("0." + "5" * 21)
    assert not bounded.fullmatch("1." + "5" * 20 + "000")


def test_digit_bound_on_the_compiled_automaton():
    import automata_compile as ac

    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    dfa = ac.compile_json_schema(
        {"type": "object", "properties": {"n": {"type": "integer"}}}, vocab, max_digits=21
    )
    assert dfa.is_pda  # free additionalProperties: the free values' numbers are bounded too
    for text, want in (
        ('{"n": ' + "1" * 21 + "}", True),
        ('{"n": ' + "1" * 22 + "}", False),
        ('{"m": ' + "1" * 21 + "}", True),
        ('{"m": ' + "1" * 22 + "}", False),
        ('{"m": [0.' + "3" * 22 + "]}", False),
    ):
        assert bool(dfa.accepts(list(text.encode()))) == want, text


def test_bounds_and_literals_keep_their_digits():
    big = 10**30
    assert _rx({"type": "integer", "maximum": big}).fullmatch(str(big - 1))
    assert _rx({"const": big}).fullmatch(str(big))
    assert _rx({"type": "integer", "minimum": big}).fullmatch(str(big + 5))


@pytest.mark.parametrize("bad", [19, 0, -1, 2.5, True, "20"])
def test_bad_max_digits(bad):
    with pytest.raises(ValueError, match="max_digits must be None or an int >= 20"):
        json_schema_to_regex({"type": "integer"}, max_digits=bad)
