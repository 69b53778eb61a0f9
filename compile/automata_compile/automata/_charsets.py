"""Code-point sets as sorted, disjoint, inclusive ranges, and their UTF-8 byte spelling.

A character class of the regex becomes a ``Ranges`` tuple; a set that only the
``re`` engine can define exactly (``\\d`` / ``\\w`` / ``\\s`` in Unicode mode,
anything under IGNORECASE) is computed by letting ``re`` itself scan every code
point once, so the semantics are those of ``re`` by construction.
"""

from __future__ import annotations

import functools
import re

import numpy as np

Ranges = tuple[tuple[int, int], ...]

MAX_CODEPOINT = 0x10FFFF
SURROGATES = ((0xD800, 0xDFFF),)
# Everything UTF-8 can spell: surrogates are not characters and cannot be encoded.
ALL: Ranges = ((0, 0xD7FF), (0xE000, MAX_CODEPOINT))


def normalize(ranges) -> Ranges:
    """Sorts and merges ranges, and removes surrogates."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return (
        intersect(tuple((a, b) for a, b in out), ALL)
        if _touches_surrogates(out)
        else tuple((a, b) for a, b in out)
    )


def _touches_surrogates(ranges) -> bool:
    return any(lo <= 0xDFFF and hi >= 0xD800 for lo, hi in ranges)


def union(*sets: Ranges) -> Ranges:
    return normalize([r for s in sets for r in s])


def complement(ranges: Ranges) -> Ranges:
    """All encodable code points not in ``ranges``."""
    out = []
    nxt = 0
    for lo, hi in normalize(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODEPOINT:
        out.append((nxt, MAX_CODEPOINT))
    return intersect(tuple(out), ALL)


def intersect(a: Ranges, b: Ranges) -> Ranges:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


@functools.cache
def _all_codepoints() -> str:
    codepoints = np.arange(MAX_CODEPOINT + 1, dtype="<u4").tobytes()
    return codepoints.decode("utf-32-le", "surrogatepass")


@functools.lru_cache(maxsize=512)
def matched_by_re(class_pattern: str, flags: int) -> Ranges:
    """The code points that the one-character ``re`` pattern matches, as ranges.

    ``class_pattern`` must match exactly one character (a class, a category
    escape, a literal, ``.``). ``re`` scans all code points once (C speed).
    """
    rx = re.compile(f"(?:{class_pattern})+", flags)
    spans = [(m.start(), m.end() - 1) for m in rx.finditer(_all_codepoints())]
    return normalize(spans)


def class_pattern(ranges: Ranges, negate: bool = False) -> str:
    """A ``re`` character class spelling exactly ``ranges``."""
    body = "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges)
    return f"[{'^' if negate else ''}{body}]" if body else ("[\\s\\S]" if negate else "[^\\s\\S]")


# -- UTF-8 ---------------------------------------------------------------------------------------

_UTF8_BOUNDS = ((0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, MAX_CODEPOINT))


@functools.lru_cache(maxsize=4096)
def utf8_sequences(ranges: Ranges) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Splits code-point ranges into sequences of byte ranges (as in RE2 / regex-automata).

    Each returned sequence ``((lo1, hi1), ..., (lon, hin))`` matches exactly the
    UTF-8 encodings of a sub-range of code points; together they cover ``ranges``.
    """
    out: list[tuple[tuple[int, int], ...]] = []
    for lo, hi in ranges:
        for blo, bhi in _UTF8_BOUNDS:
            a, b = max(lo, blo), min(hi, bhi)
            if a <= b:
                _split(a, b, out)
    return tuple(out)


def _split(lo: int, hi: int, out: list) -> None:
    # Within one encoded length: split until every continuation position spans a full
    # 0x80..0xBF range or a single value, so each piece is a product of byte ranges.
    n = len(chr(lo).encode("utf-8", "surrogatepass"))
    if n == 1:
        out.append(((lo, hi),))
        return
    for i in range(1, n):
        m = (1 << (6 * i)) - 1
        if lo & ~m != hi & ~m:
            if lo & m != 0:
                _split(lo, lo | m, out)
                _split((lo | m) + 1, hi, out)
                return
            if hi & m != m:
                _split(lo, (hi & ~m) - 1, out)
                _split(hi & ~m, hi, out)
                return
    a = chr(lo).encode("utf-8", "surrogatepass")
    b = chr(hi).encode("utf-8", "surrogatepass")
    out.append(tuple(zip(a, b, strict=True)))
