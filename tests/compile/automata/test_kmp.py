"""`automata._kmp.kmp_moves` against its definition: from state ``j`` on symbol ``c`` the next
state is the length of the longest suffix of ``word[:j] + c`` that is a prefix of ``word``."""

from __future__ import annotations

import doctest

from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile.automata import _kmp


def _next(word: bytes, j: int, c: int) -> int:
    text = word[:j] + bytes([c])
    return max(n for n in range(len(text) + 1) if word[:n] == text[len(text) - n :])


@settings(max_examples=200, deadline=None)
@given(word=st.binary(min_size=1, max_size=9).map(lambda b: bytes(x % 3 for x in b)))
def test_moves_follow_the_definition(word):
    moves = _kmp.kmp_moves(word)
    assert len(moves) == len(word)
    for j, d in enumerate(moves):
        for c in range(4):
            assert d.get(c, 0) == _next(word, j, c), (word, j, c)
        assert 0 not in d.values()


def test_code_points_and_the_doctest():
    assert _kmp.kmp_moves([ord(c) for c in "\u00e9\u00e9"]) == [{0xE9: 1}, {0xE9: 2}]
    assert _kmp.kmp_moves(b"") == []
    assert doctest.testmod(_kmp).failed == 0
