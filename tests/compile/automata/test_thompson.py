"""`automata._thompson`: the IR -> Thompson NFA builder, checked directly.

The builder is driven over the simplest alphabet, code points themselves (a `Builder`
whose character sets become one interval edge per range), and the NFA is judged by an
on-the-fly subset simulation against the `regex` package's ``fullmatch`` on every string
of up to four characters of a small alphabet. `flatten_repeat` is checked against the
set of repetition counts it claims to preserve.
"""

from __future__ import annotations

import itertools

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile.automata import _fsa, _thompson
from automata_compile.automata._ir import EMPTY, NEVER, Alt, Automaton, Chars, Repeat, Seq, Terminal
from automata_compile.frontends import _regex

ALPHABET = "abc\u00e9"
STRINGS = ["".join(p) for n in range(5) for p in itertools.product(ALPHABET, repeat=n)]


class _CodePoints(_thompson.Builder):
    """The alphabet is the code points: a character set is one edge per range."""

    def chars(self, ranges, s, e, memo) -> None:
        for lo, hi in ranges:
            self.nfa.edges[s].append((lo, hi, e))


def _nfa(node):
    nfa = _fsa.NFA(_fsa.Budget("test"), 200_000)
    s, e = nfa.state(), nfa.state()
    _CodePoints(nfa).build(node, s, e)
    return nfa, s, e


def _accepts(built, text: str) -> bool:
    nfa, s, e = built
    return _fsa.nfa_accepts(nfa, s, e, [ord(c) for c in text])


def _language(built) -> set[str]:
    return {w for w in STRINGS if _accepts(built, w)}


def _re_language(pattern: str) -> set[str]:
    rx = regex.compile(pattern, regex.DOTALL)
    return {w for w in STRINGS if rx.fullmatch(w)}


def _patterns():
    leaf = st.sampled_from(["a", "b", "c", "\u00e9", "[ab]", "[^a]", ".", "(?:)"])
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}{t[1]})"),
            st.tuples(inner, inner).map(lambda t: f"(?:{t[0]}|{t[1]})"),
            st.tuples(
                inner, st.sampled_from(["*", "?", "+", "{0}", "{2}", "{0,2}", "{1,3}", "{2,}"])
            ).map(lambda t: f"(?:{t[0]}){t[1]}"),
        ),
        max_leaves=6,
    )


@settings(max_examples=80, deadline=None)
@given(pattern=_patterns())
def test_nfa_language_is_the_regex_language(pattern):
    assert _language(_nfa(_regex.parse(pattern, None))) == _re_language(pattern)


@pytest.mark.parametrize(
    ("node", "want"),
    [
        (EMPTY, {""}),
        (NEVER, set()),
        (Seq((Chars(((97, 97),)),)), {"a"}),
        (Alt((EMPTY, Chars(((98, 99),)))), {"", "b", "c"}),
        (Repeat(Chars(((97, 97),)), 0, 0), {""}),
        (Repeat(Chars(((97, 98),)), 2, 2), {"aa", "ab", "ba", "bb"}),
        (Repeat(EMPTY, 1, None), {""}),  # an unbounded loop around the empty string
        (Repeat(NEVER, 0, 3), {""}),
        (Repeat(NEVER, 1, None), set()),
    ],
    ids=[
        "empty",
        "never",
        "seq",
        "alt",
        "zero-repeat",
        "exact",
        "loop-of-empty",
        "never0",
        "never1",
    ],
)
def test_corner_nodes(node, want):
    assert _language(_nfa(node)) == want


def test_automaton_nodes_with_set_and_subtree_labels():
    # 0 -a-> 1 -(bc|é)-> 2 (final), 1 -[ab]-> 1, and 0 is final too; 3 is unreachable
    sub = Alt((Seq((Chars(((98, 98),)), Chars(((99, 99),)))), Chars(((0xE9, 0xE9),))))
    node = Automaton(
        edges=(
            ((((97, 97),), 1),),
            ((((97, 98),), 1), (sub, 2)),
            (),
            ((((99, 99),), 0),),
        ),
        start=0,
        finals=frozenset({0, 2}),
    )
    # the same language as a regex: (?:a[ab]*(?:bc|é))?
    assert _language(_nfa(node)) == _re_language("(?:a[ab]*(?:bc|\u00e9))?")
    # embedded in a larger tree, the automaton is one factor of a sequence
    seq = Seq((Chars(((99, 99),)), node, Chars(((99, 99),))))
    assert _language(_nfa(seq)) == _re_language("c(?:a[ab]*(?:bc|\u00e9))?c")


def test_automaton_with_a_non_initial_start_state():
    node = Automaton(
        edges=(((((97, 97),), 1),), ((((98, 98),), 0),)), start=1, finals=frozenset({1})
    )
    assert _language(_nfa(node)) == _re_language("(?:ba)*")


def test_terminals_are_refused_by_the_base_builder():
    with pytest.raises(TypeError, match="terminal labels are only allowed in byte automata"):
        _nfa(Seq((Chars(((97, 97),)), Terminal(0))))


def _counts(node: Repeat, limit: int) -> set[int]:
    """The numbers of characters a ``Repeat`` over one character set allows, up to ``limit``."""
    inner = node.item
    if isinstance(inner, Chars):
        hi = limit if node.max is None else min(node.max, limit)
        return set(range(node.min, hi + 1))
    inner_counts = _counts(inner, limit)
    out = {0} if node.min == 0 else set()
    reach = {0}
    for j in range(1, limit + 1):  # after j repetitions of the inner repeat
        reach = {x + y for x in reach for y in inner_counts if x + y <= limit}
        if j >= node.min and (node.max is None or j <= node.max):
            out |= reach
        if node.max is not None and j >= node.max:
            break
    return out


@settings(max_examples=300, deadline=None)
@given(
    a=st.integers(0, 4),
    b=st.one_of(st.none(), st.integers(0, 4)),
    c=st.integers(0, 4),
    d=st.one_of(st.none(), st.integers(0, 4)),
)
def test_flatten_repeat_keeps_the_counts(a, b, c, d):
    if (b is not None and b < a) or (d is not None and d < c):
        return
    node = Repeat(Repeat(Chars(((97, 97),)), a, b), c, d)
    flat = _thompson.flatten_repeat(node)
    limit = 24
    assert _counts(flat, limit) == _counts(node, limit)
    if flat is not node:  # flattened: one repeat of the character set itself
        assert isinstance(flat.item, Chars)
    # the NFA of either spelling accepts the same strings
    words = ["a" * n for n in range(14)]
    built, flat_built = _nfa(node), _nfa(flat)
    assert [_accepts(built, w) for w in words] == [_accepts(flat_built, w) for w in words]


def test_flatten_repeat_leaves_gaps_alone():
    # (aaa){1,2} allows 3 or 6 characters: a gap, so it must not become a{3,6}
    node = Repeat(Repeat(Chars(((97, 97),)), 3, 3), 1, 2)
    assert _thompson.flatten_repeat(node) is node
    # other items are not flattened
    seq = Repeat(Seq((Chars(((97, 97),)), Chars(((98, 98),)))), 0, 3)
    assert _thompson.flatten_repeat(seq) is seq
    # a stacked bounded repeat with no gap is flattened
    assert _thompson.flatten_repeat(Repeat(Repeat(Chars(((97, 97),)), 0, 100), 10, 10)) == Repeat(
        Chars(((97, 97),)), 0, 1000
    )
