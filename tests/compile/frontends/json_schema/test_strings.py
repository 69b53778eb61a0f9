"""`_strings.none_of`: the key language of an object's other properties (every string but
its declared names), exact and with one shared tail."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from automata_compile.automata import Alt, Repeat, Seq
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema import _strings

_NAMES = st.lists(st.text(alphabet='abé"\\', max_size=4), max_size=6)


@settings(max_examples=150, deadline=None)
@given(names=_NAMES, extra=st.lists(st.text(alphabet='abcé"\\', max_size=5), max_size=6))
def test_none_of_is_every_string_but_the_names(names, extra):
    node = _strings.none_of(names)
    probes = set(extra) | set(names) | {n[:-1] for n in names} | {n + "a" for n in names}
    for text in probes:
        assert sf.content_matches(node, text) == (text not in names), (names, text)


def _tails(node) -> int:
    """How many times the tree reaches ``ANY_STRING`` (each reach is its own NFA states)."""
    if node == sf.ANY_STRING:
        return 1
    if isinstance(node, Seq):
        return sum(_tails(x) for x in node.items)
    if isinstance(node, Alt):
        return sum(_tails(x) for x in node.options)
    if isinstance(node, Repeat):
        return _tails(node.item)
    return 0


def test_none_of_spells_the_tail_once():
    # renovate.json forbids 110 names at its root: a tail per trie node made 132,000 subset
    # states for a minimal DFA of 1,300
    names = [f"option{i}Name{i * 7}" for i in range(110)]
    assert _tails(_strings.none_of(names)) == 1
    assert sf.content_matches(_strings.none_of(names), "option3Name2")
    assert not sf.content_matches(_strings.none_of(names), "option3Name21")
