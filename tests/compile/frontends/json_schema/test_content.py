"""Intersections of content languages where one side is a small finite set
(`_content.finite_strings`): each string is tested against the others instead of building
a product automaton, with the same language as the automaton path
(`automata._char_dfa.intersect`, the oracle here)."""

from __future__ import annotations

import pytest

from automata_compile.automata import Chars
from automata_compile.automata import char_dfa as _char_dfa
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._ecma import pattern_language

NAMES = [f"Task{i}@{i % 3}" for i in range(40)] + ["", "a", "ab", "Task1@1x"]
ENUM = sf.alt(*(sf.lit(x) for x in NAMES))
CASES = {
    "enum and a pattern naming one": (ENUM, pattern_language("^Task7@1$")),
    "enum and an open pattern": (ENUM, pattern_language("@[01]$")),
    "enum and a length bound": (ENUM, sf.rep(sf.ANY_CHAR, 0, 6)),
    "bounded repeat and a pattern": (sf.rep(sf.chars([(48, 50)]), 1, 3), pattern_language("1")),
    "two finite sets": (ENUM, sf.alt(sf.lit("ab"), sf.lit("Task3@0"), sf.lit("zz"))),
    "nothing in common": (ENUM, pattern_language("^z")),
}


def _probes(a, b) -> set[str]:
    out = set(NAMES) | {"", "1", "12", "012", "zz", "Task7@1", "Task7@2", "Task10@1"}
    for node in (a, b):
        out |= set(sf.finite_strings(node) or ())
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_a_finite_side_gives_the_automaton_language(name):
    a, b = CASES[name]
    fast = sf.intersect(a, b)
    assert sf.printable(fast)  # a literal set, no product automaton
    oracle = _char_dfa.intersect(a, b)
    for text in _probes(a, b):
        want = _char_dfa.matches(oracle, text)
        assert sf.content_matches(fast, text) == want, (name, text)


def test_finite_strings_reads_finite_trees_only():
    assert sf.finite_strings(sf.lit("ab")) == ("ab",)
    assert set(sf.finite_strings(sf.opt(sf.lit("ab")))) == {"", "ab"}
    assert set(sf.finite_strings(sf.rep(sf.chars([(48, 49)]), 0, 2))) == {
        "", "0", "1", "00", "01", "10", "11"
    }  # fmt: skip
    assert sf.finite_strings(sf.NEVER) == ()
    long = "x" * 20_000  # a long const: one string, joined once
    assert sf.finite_strings(sf.lit(long)) == (long,)
    assert sf.finite_strings(sf.rep(sf.NEVER, 0, 10**9)) == ("",)
    # infinite, or past FINITE_MAX strings: the automaton path
    assert sf.finite_strings(sf.ANY_STRING) is None
    assert sf.finite_strings(sf.star(sf.char("a"))) is None
    assert sf.finite_strings(sf.rep(sf.char("a"), 0, 10**9)) is None
    # one string, but too long to spell out (its length bounds the work: no quadratic walk)
    assert sf.finite_strings(sf.rep(sf.char("a"), 10**6, 10**6)) is None
    assert sf.finite_strings(sf.rep(sf.char("a"), 4096, 4096)) == ("a" * 4096,)
    assert sf.finite_strings(sf.rep(sf.chars([(48, 57)]), 2, 2)) is None  # 100 strings
    assert sf.finite_strings(pattern_language("^a")) is None  # an automaton node
    assert sf.finite_strings(Chars(((sf.BOL, sf.BOL),))) is None  # a virtual anchor symbol
