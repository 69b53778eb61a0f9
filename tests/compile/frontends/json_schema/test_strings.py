"""`_strings.none_of`: the key language of an object's other properties (every string but
its declared names), exact, spelled as JSON exactly as the plain construction spells it
(a trie with a tail at every node, the oracle here), with its shared parts spelled once."""

from __future__ import annotations

import collections
import json

from hypothesis import given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile.automata import Alt, Repeat, Seq, build_byte_dfa
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


def _trie_with_tails(names):
    """Every string but ``names``: at each trie node, the end (unless a name ends there),
    a character no name continues with and then any string, or a child."""

    def build(node):
        kids = sorted(k for k in node if k is not None)
        other = sf.chars(sf.cs_complement(sf.cs_norm([(ord(k), ord(k)) for k in kids])))
        parts = [] if None in node else [sf.EPS]
        parts.append(sf.seq(other, sf.ANY_STRING))
        parts.extend(sf.seq(sf.char(k), build(node[k])) for k in kids)
        return sf.alt(*parts)

    return build(_strings.name_trie(names))


def _same_bytes(a, b) -> bytes | None:
    """None if the two byte DFAs accept the same strings, else a string only one accepts."""
    seen = {(a.start, b.start): b""}
    todo = collections.deque(seen)
    while todo:
        p, q = todo.popleft()
        path = seen[p, q]
        if bool(a.accepting[p]) != bool(b.accepting[q]):
            return path
        for c in range(256):
            x, y = int(a.trans[p, c]), int(b.trans[q, c])
            if (x < 0) != (y < 0):
                return path + bytes([c])
            if x >= 0 and (x, y) not in seen:
                seen[x, y] = path + bytes([c])
                todo.append((x, y))
    return None


@settings(max_examples=40, deadline=None)
@given(names=st.lists(st.text(alphabet='ab/é"\\\n', max_size=3), max_size=5))
def test_none_of_is_spelled_as_the_trie_with_tails(names):
    # the same JSON spellings too: a name that no name continues is followed by free text
    # (every spelling of the next character, `\/` included), a prefix by the plain ones
    for escapes in ("standard", "any", "minimal"):
        fast = build_byte_dfa(_strings.encode_json_string(_strings.none_of(names), escapes))
        oracle = build_byte_dfa(_strings.encode_json_string(_trie_with_tails(names), escapes))
        assert _same_bytes(fast, oracle) is None, (names, escapes)


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


def test_an_open_object_of_many_properties_fits_the_default_budget():
    # every key spelled once per trie node passed max_states=100,000 at about 110 open
    # properties, in declared order too (110,000 subset states for 120 properties, now 5,000)
    names = [f"{'qwertyuiop'[i % 10]}{'asdfghjkl'[i % 9]}field{i}" for i in range(150)]
    schema = {"type": "object", "properties": {n: {"type": "boolean"} for n in names}}
    vocab = ac.Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])
    dfa = ac.compile_json_schema(schema, vocab, property_order="declared")
    text = json.dumps({names[3]: True, names[140]: False, "other/key": [1, {"x": None}]})
    assert dfa.accepts(list(text.encode()))
    assert not dfa.accepts(list(json.dumps({names[3]: 1}).encode()))
