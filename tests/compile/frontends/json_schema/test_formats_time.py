"""``time`` / ``date-time``: fractional seconds of any length (RFC 3339 ``time-secfrac =
"." 1*DIGIT``), exactly: not bounded by ``max_filler`` (the digits are content), only by
``maxLength``."""

from __future__ import annotations

import json

import pytest

import automata_compile as ac

BASES = {"time": "12:34:56", "date-time": "2024-02-29T12:34:56"}


@pytest.fixture(scope="module")
def vocab():
    return ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )


def _accepts(dfa, text: str) -> bool:
    return dfa.accepts(list(json.dumps(text).encode()))


@pytest.mark.parametrize("fmt", sorted(BASES))
def test_fractional_seconds_of_any_length(vocab, fmt):
    dfa = ac.compile_json_schema({"type": "string", "format": fmt}, vocab)
    base = BASES[fmt]
    for digits in (1, 2, 9, 10, 64, 300):  # beyond max_filler (20): content, not filler
        for frac in ("0" * digits, "9" * digits, ("1234567890" * 30)[:digits]):
            assert _accepts(dfa, f"{base}.{frac}Z"), (fmt, digits)
            assert _accepts(dfa, f"{base}.{frac}+05:30"), (fmt, digits)
    assert _accepts(dfa, f"{base}Z")
    for bad in (f"{base}.Z", f"{base}..5Z", f"{base}.5.5Z", f"{base}.5", f"{base}.x1Z"):
        assert not _accepts(dfa, bad), bad


def test_fractional_seconds_with_max_length(vocab):
    dfa = ac.compile_json_schema({"type": "string", "format": "time", "maxLength": 20}, vocab)
    assert _accepts(dfa, "12:34:56." + "1" * 10 + "Z")  # 20 characters
    assert not _accepts(dfa, "12:34:56." + "1" * 11 + "Z")  # 21


def test_leap_second_fraction(vocab):
    dfa = ac.compile_json_schema({"type": "string", "format": "date-time"}, vocab)
    assert _accepts(dfa, "2016-12-31T23:59:60." + "5" * 40 + "Z")
