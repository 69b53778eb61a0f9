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
