"""The bitset events' table (`_bitset_events`), the `Event` IR symbol, and the option's guard."""

from __future__ import annotations

import pytest

import automata_compile as ac
from automata_compile.automata import Automaton, Event, Terminal, fingerprint
from automata_compile.frontends.json_schema import BitsetEvents
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._bitset_events import CLEAR, REQUIRE, SET, has_event
from automata_compile.frontends.json_schema._rules import rule_calls


def test_masks_of_each_event_kind():
    ev = BitsetEvents()
    bits = [ev.new_bit() for _ in range(34)]
    assert ev.num_bits == 34 and bits[-1] == 33
    e_set = ev.event(SET, [33]).index
    e_clear = ev.event(CLEAR, range(3, 34)).index
    e_req = ev.event(REQUIRE, [0, 2]).index
    assert ev.event(SET, [33]).index == e_set  # equal events share one id
    assert ev.event(REQUIRE, [2, 0]).index == e_req
    m = ev.masks(2)
    assert m[e_set] == [0, 1 << 1]
    assert m[e_clear] == [((1 << 32) - 1) & ~0b111, 0b11]
    assert m[e_req] == [0b101, 0]


def test_event_is_no_rule_call_and_digests_apart_from_a_terminal():
    node = sf.seq(sf.char("{"), Event(3), Terminal(1))
    assert sorted(rule_calls(node, set())) == [1]
    assert has_event([node]) and not has_event([Terminal(3)])
    inside = Automaton(edges=(((Event(0), 1),), ()), start=0, finals=frozenset({1}))
    assert has_event([sf.seq(sf.char("x"), inside)])
    assert fingerprint(Event(3)) != fingerprint(Terminal(3))
    assert Event(3) != Terminal(3)


def test_the_internal_option_is_refused():
    with pytest.raises(TypeError, match="bitset"):
        ac.compile_json_schema({"type": "boolean"}, None, bitset=BitsetEvents())


def test_event_kinds_agree_with_the_token_level():
    from automata_compile.tokens import _bitset_compose

    assert (SET, CLEAR, REQUIRE) == (
        _bitset_compose.SET,
        _bitset_compose.CLEAR,
        _bitset_compose.REQUIRE,
    )


def test_owners_events_in_and_shifted_events():
    from automata_compile.frontends.json_schema._bitset_events import events_in, shift_events

    ev = BitsetEvents(skip={"/x"})
    a = ev.event(SET, [0], ["/a"])
    b = ev.event(SET, [0], ["/b"])  # the same event, a second owner
    c = ev.event(REQUIRE, [0], ["/c"])
    assert a == b and ev.owners_of([a.index]) == {"/a", "/b"}
    assert ev.owners_of([a.index, c.index]) == {"/a", "/b", "/c"} and ev.skip == {"/x"}
    inside = Automaton(edges=(((c, 1),), ()), start=0, finals=frozenset({1}))
    node = sf.seq(sf.char("{"), a, Terminal(1), inside)
    assert events_in([node]) == {a.index, c.index}
    shifted = shift_events(node, 5)
    assert events_in([shifted]) == {a.index + 5, c.index + 5}
    assert sorted(rule_calls(shifted, set())) == [1]  # calls keep their numbers


def test_an_object_around_bitset_objects_names_them_to_skip():
    """A counted object holding bitset objects asks for them to be counted too
    (`BitsetSkip`), naming their pointers."""
    import dataclasses

    from automata_compile.frontends.json_schema import parse_options, translate_grammar
    from automata_compile.frontends.json_schema._bitset_events import BitsetSkip

    inner = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}},
             "additionalProperties": False}  # fmt: skip
    schema = {"type": "object", "properties": {"n": inner, "m": {"type": "boolean"}},
              "minProperties": 1, "additionalProperties": False}  # fmt: skip
    opts = dataclasses.replace(parse_options({}), bitset=BitsetEvents())
    with pytest.raises(BitsetSkip) as e:
        translate_grammar(schema, opts, False)
    assert e.value.pointers == {"/properties/n"}
    opts = dataclasses.replace(parse_options({}), bitset=BitsetEvents(skip={"/properties/n"}))
    grammar, _ = translate_grammar(schema, opts, False)
    assert not has_event(grammar.bodies)
