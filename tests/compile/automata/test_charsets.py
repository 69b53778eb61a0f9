"""Code-point range sets and their UTF-8 spelling (`automata_compile.automata._charsets`), checked against
Python sets, `re` and `str.encode` by brute force."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile.automata import _charsets as cs

SURROGATES = range(0xD800, 0xE000)

# Code points near every interesting boundary: ASCII / 2-byte / 3-byte / surrogates / 4-byte / max.
_WINDOWS = [(0, 0x90), (0x7F0, 0x810), (0xD7F0, 0xE010), (0xFFF0, 0x10010), (0x10FFF0, 0x10FFFF)]


@st.composite
def small_ranges(draw, max_size=5):
    """Ranges within small windows, so that they can be expanded to Python sets."""
    out = []
    for _ in range(draw(st.integers(0, max_size))):
        lo_w, hi_w = draw(st.sampled_from(_WINDOWS))
        a = draw(st.integers(lo_w, hi_w))
        b = draw(st.integers(a, min(hi_w, a + 40)))
        out.append((a, b))
    return out


@st.composite
def wide_ranges(draw, max_size=4):
    """Arbitrary ranges (possibly huge), for the UTF-8 spelling."""
    points = sorted(
        draw(
            st.lists(
                st.sampled_from(_EDGES) | st.integers(0, cs.MAX_CODEPOINT),
                min_size=2,
                max_size=2 * max_size,
            )
        )
    )
    return [(points[i], points[i + 1]) for i in range(0, len(points) - 1, 2)]


_EDGES = [0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFF, 0x1000, 0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFF,
          0x10000, 0x3FFFF, 0x40000, 0xFFFFF, 0x100000, 0x10FFFF]  # fmt: skip


def as_set(ranges) -> set[int]:
    return {c for a, b in ranges for c in range(a, b + 1)} - set(SURROGATES)


def is_normal(ranges) -> bool:
    return all(a <= b for a, b in ranges) and all(
        ranges[i][1] + 1 < ranges[i + 1][0] for i in range(len(ranges) - 1)
    )


def _count(ranges) -> int:
    return sum(b - a + 1 for a, b in ranges)


# -- range algebra --------------------------------------------------------------------------------


@settings(max_examples=200)
@given(small_ranges())
def test_normalize(r):
    n = cs.normalize(r)
    assert is_normal(n)
    assert as_set(n) == as_set(r)
    assert not any(a <= 0xDFFF and b >= 0xD800 for a, b in n)
    assert cs.normalize(n) == n


@settings(max_examples=200)
@given(small_ranges(), small_ranges())
def test_union_and_intersect(a, b):
    na, nb = cs.normalize(a), cs.normalize(b)
    u, i = cs.union(na, nb), cs.intersect(na, nb)
    assert is_normal(u) and is_normal(i)
    assert as_set(u) == as_set(a) | as_set(b)
    assert as_set(i) == as_set(a) & as_set(b)


@settings(max_examples=200)
@given(small_ranges())
def test_complement(r):
    n = cs.normalize(r)
    c = cs.complement(n)
    assert is_normal(c)
    assert cs.intersect(c, n) == ()
    assert cs.union(c, n) == cs.ALL
    assert cs.complement(c) == n
    assert _count(c) + _count(n) == 0x110000 - len(SURROGATES)


def test_constants():
    assert cs.ALL == ((0, 0xD7FF), (0xE000, 0x10FFFF))
    assert cs.complement(()) == cs.ALL and cs.complement(cs.ALL) == ()
    assert cs.normalize([(0xD800, 0xDFFF)]) == ()
    assert cs.normalize([(5, 9), (0, 4), (20, 30), (25, 26)]) == ((0, 9), (20, 30))


# -- `re` as the definition of classes ------------------------------------------------------------


def brute_force(pattern: str, flags: int = 0, stride: int = 1) -> set[int]:
    rx = re.compile(pattern, flags)
    return {
        c
        for c in range(0, cs.MAX_CODEPOINT + 1, stride)
        if c not in SURROGATES and rx.fullmatch(chr(c))
    }


@pytest.mark.parametrize(
    "pattern,flags",
    [
        (r"\d", 0),
        (r"\s", 0),
        (r"[^\w\d]", 0),
        (r"\w", re.ASCII),
        ("k", re.IGNORECASE),
        (r"[a-z\u00e0-\u00ff]", re.IGNORECASE),
        (".", 0),
        (".", re.DOTALL),
    ],
)
def test_matched_by_re_equals_brute_force(pattern, flags):
    got = cs.matched_by_re(pattern, flags)
    assert is_normal(got)
    stride = 7  # every 7th code point: ~160k `re` calls per pattern
    want = brute_force(pattern, flags, stride)
    assert {c for c in as_set(got) if c % stride == 0} == want


def test_ignorecase_follows_re():
    # re's case folding: KELVIN SIGN matches k, LONG S matches s, and so on.
    assert cs.matched_by_re("k", re.IGNORECASE) == ((0x4B, 0x4B), (0x6B, 0x6B), (0x212A, 0x212A))
    assert (0x17F, 0x17F) in cs.matched_by_re("s", re.IGNORECASE)
    assert cs.matched_by_re(r"\d", re.ASCII) == ((0x30, 0x39),)
    assert (0x1C, 0x20) in cs.matched_by_re(r"\s", 0)  # str.isspace, unlike the `regex` package


@settings(max_examples=40, deadline=None)
@given(small_ranges(), st.booleans())
def test_class_pattern_round_trip(r, negate):
    n = cs.normalize(r)
    text = cs.class_pattern(n, negate)
    got = cs.matched_by_re(text, re.DOTALL)
    assert got == (cs.complement(n) if negate else n)


# -- UTF-8 ----------------------------------------------------------------------------------------


def _decode_one(data: bytes) -> int | None:
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return ord(s) if len(s) == 1 else None


@settings(max_examples=150, deadline=None)
@given(wide_ranges(), st.randoms(use_true_random=False))
def test_utf8_sequences_partition_the_encodings(r, rnd):
    ranges = cs.normalize(r)
    seqs = cs.utf8_sequences(ranges)
    # Sizes add up: the sequences spell exactly as many strings as there are code points ...
    assert sum(int(np.prod([hi - lo + 1 for lo, hi in s])) for s in seqs) == _count(ranges)
    # ... every spelled string is the UTF-8 of one code point of the set ...
    members = set()
    for s in seqs:
        assert 1 <= len(s) <= 4 and all(0 <= lo <= hi <= 255 for lo, hi in s)
        corners = [bytes(lo for lo, _ in s), bytes(hi for _, hi in s)]
        picks = [bytes(rnd.randint(lo, hi) for lo, hi in s) for _ in range(3)]
        for data in corners + picks:
            cp = _decode_one(data)
            assert cp is not None, (s, data)
            assert len(chr(cp).encode("utf-8")) == len(s)
            assert any(a <= cp <= b for a, b in ranges), (s, hex(cp))
            members.add(cp)
    # ... (so they are disjoint, by the count) and each sampled member is spelled by one sequence.
    samples = [a for a, _ in ranges] + [b for _, b in ranges]
    samples += [rnd.randint(a, b) for a, b in ranges for _ in range(3)]
    for cp in samples:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        data = chr(cp).encode("utf-8")
        hits = [
            s
            for s in seqs
            if len(s) == len(data)
            and all(lo <= x <= hi for x, (lo, hi) in zip(data, s, strict=True))
        ]
        assert len(hits) == 1, (hex(cp), hits)


def test_utf8_sequences_examples():
    assert cs.utf8_sequences(((0x61, 0x7A),)) == (((0x61, 0x7A),),)
    assert cs.utf8_sequences(((0xE9, 0xE9),)) == (((0xC3, 0xC3), (0xA9, 0xA9)),)
    # All of Unicode: the classic 8 (well-formed UTF-8 table of the Unicode standard, Table 3-7),
    # with E0 / ED / F0 / F4 restricted second bytes.
    seqs = cs.utf8_sequences(cs.ALL)
    assert ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)) in seqs
    assert ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)) in seqs
    assert ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)) in seqs
    assert ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)) in seqs
    assert sum(int(np.prod([b - a + 1 for a, b in s])) for s in seqs) == 0x110000 - 0x800
