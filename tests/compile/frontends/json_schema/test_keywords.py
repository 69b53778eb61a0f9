"""String keywords (`frontends.json_schema._keywords`): where ``maxLength`` meets a
``pattern`` or ``format`` whose intersection outgrows the automaton budget, the default
accepts the strings of at most ``n`` characters (a sound subset, warned by name) instead
of refusing the schema.

Oracle: Python's ``re`` (the pattern is ECMA- and ``re``-compatible) and the length, on
strings generated from the pattern, against the compiled automaton over a byte vocabulary.
"""

from __future__ import annotations

import json
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import SubsetWarning, UnsupportedSchemaError

BYTES = ac.Vocabulary.from_bytes(
    [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
)
PATTERN = r"^([a-z]{2,8}-){0,30}[a-z]{1,5}$"  # up to 275 characters
SCHEMA = {"type": "string", "pattern": PATTERN, "maxLength": 200}


def _compiled(schema, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dfa = ac.compile_json_schema(schema, BYTES, **options)
    cut = [w.message for w in caught if issubclass(w.category, SubsetWarning)]
    return dfa, cut


@pytest.fixture(scope="module")
def length_cut():
    dfa, cut = _compiled(SCHEMA)
    (w,) = cut
    n = int(re.search(r"at most (\d+) characters are accepted, not 200", str(w)).group(1))
    return dfa, w, n


def test_the_cut_is_warned_by_name_and_where(length_cut):
    _, w, n = length_cut
    assert w.keyword == "maxLength" and w.pointer == "/maxLength"
    assert "outgrows the automaton budget" in str(w)
    assert 100 < n < 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_cut_accepts_exactly_the_valid_strings_of_at_most_n_characters(length_cut, data):
    dfa, _, n = length_cut
    words = data.draw(st.lists(st.from_regex(r"[a-z]{2,8}", fullmatch=True), max_size=30))
    text = "".join(w + "-" for w in words) + data.draw(st.from_regex(r"[a-z]{1,5}", fullmatch=True))
    if data.draw(st.booleans()):  # near the bound, valid or not
        text = text[: data.draw(st.integers(n - 3, n + 3))]
    valid = re.fullmatch(PATTERN, text) is not None and len(text) <= 200
    assert dfa.accepts(list(json.dumps(text).encode())) == (valid and len(text) <= n), text


def test_strings_of_n_characters_are_accepted_and_longer_ones_not(length_cut):
    dfa, _, n = length_cut
    for length in (n - 1, n, n + 1):
        text = _valid_of_length(length)
        assert re.fullmatch(PATTERN, text) and len(text) == length, text
        assert dfa.accepts(list(json.dumps(text).encode())) == (length <= n), length


def _valid_of_length(length: int) -> str:
    """A string of ``PATTERN`` with ``length`` characters: groups of 8 letters and a dash,
    one shorter group, then a tail of 3 to 5 letters."""
    groups, rest = divmod(length - 3, 9)
    tail = 3
    if rest in (1, 2):
        tail, rest = 3 + rest, 0
    head = "abcdefgh-" * groups + ("a" * (rest - 1) + "-" if rest else "")
    return head + "z" * tail


def test_subsets_refuse_keeps_the_refusal():
    with pytest.raises(UnsupportedSchemaError, match="outgrows the automaton budget"):
        ac.compile_json_schema(SCHEMA, BYTES, subsets="refuse")


def test_no_cut_below_min_length_refuses():
    """Where no bound from ``minLength`` up fits, cutting would leave nothing: refused."""
    with pytest.raises(UnsupportedSchemaError, match="outgrows the automaton budget"):
        ac.compile_json_schema({**SCHEMA, "minLength": 190}, BYTES)


def test_an_email_with_the_usual_max_length_compiles():
    """``format: email`` with ``maxLength: 254`` (RFC 5321's bound) was refused by default."""
    dfa, (w,) = _compiled({"type": "string", "format": "email", "maxLength": 254})
    assert w.keyword == "maxLength"
    assert dfa.accepts(list(b'"ada@example.com"')) and not dfa.accepts(list(b'"ada"'))


def test_a_length_the_format_implies_is_exact_without_a_warning():
    """``hostname`` strings are at most 253 characters (the subset's own bound): the
    ``maxLength`` counter only multiplied states past the budget. It is dropped, exactly:
    the same tables as the format alone, and no ``maxLength`` warning."""
    import numpy as np

    bounded, cut = _compiled({"type": "string", "format": "hostname", "maxLength": 253})
    alone, _ = _compiled({"type": "string", "format": "hostname"})
    assert not [w for w in cut if w.keyword == "maxLength"]
    for name in ("token_class", "next_state", "accepting"):
        assert np.array_equal(getattr(bounded, name), getattr(alone, name)), name
