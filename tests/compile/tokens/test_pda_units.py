"""`_pda_units`: walks of rules and loops, cached by structure. Whatever is served from the
cache, and however states are split between rows and lanes, the tables are the same."""

from __future__ import annotations

import numpy as np
import pytest

from automata_compile.frontends.json_schema import parse_options
from automata_compile.pipeline import byte_language
from automata_compile.tokens import _pda_units, _pda_walk
from automata_compile.tokens._pda_compose import compose_pda
from automata_compile.tokens._token_trie import trie_for

SCHEMAS = [
    {"minimum": 1},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {}},
    {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"},
]


def _pda(schema):
    _, pda = byte_language(schema, parse_options({}))
    assert pda is not None
    return pda


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


@pytest.fixture(autouse=True)
def _fresh_cache():
    _pda_units.clear_cache()
    yield
    _pda_units.clear_cache()


@pytest.mark.parametrize("schema", SCHEMAS, ids=["free-value", "object", "recursive"])
@pytest.mark.parametrize(
    "setting",
    [
        ("MAX_LOOP_STATES", 0),  # no loop from the cache
        ("LOOP_SHARE", 0.0),  # every wide state in a small loop from the cache
        ("CACHE_SIZE", 1),  # everything evicted at once
    ],
    ids=lambda s: f"{s[0]}={s[1]}",
)
def test_cache_settings_do_not_change_the_tables(mistral_sp_vocab, schema, setting, monkeypatch):
    pda, trie = _pda(schema), trie_for(mistral_sp_vocab)
    want = compose_pda(pda, trie, mistral_sp_vocab)
    _pda_units.clear_cache()
    monkeypatch.setattr(_pda_units, *setting)
    _same(compose_pda(pda, trie, mistral_sp_vocab), want)
    _same(compose_pda(pda, trie, mistral_sp_vocab), want)  # again, from the cache
    assert len(_pda_units._CACHE) <= _pda_units.CACHE_SIZE


@pytest.mark.parametrize("share", [0.0, 1.0], ids=["all-rows", "all-lanes"])
def test_rows_and_lanes_give_the_same_tables(mistral_sp_vocab, share, monkeypatch):
    pda, trie = _pda(SCHEMAS[1]), trie_for(mistral_sp_vocab)
    want = compose_pda(pda, trie, mistral_sp_vocab)
    _pda_units.clear_cache()
    monkeypatch.setattr(_pda_walk, "WIDE_SHARE", share)
    _same(compose_pda(pda, trie, mistral_sp_vocab), want)


@pytest.mark.parametrize("chunk", [1, 2, 5])
def test_wide_states_walked_in_chunks_give_the_same_tables(mistral_sp_vocab, chunk, monkeypatch):
    pda, trie = _pda(SCHEMAS[1]), trie_for(mistral_sp_vocab)
    want = compose_pda(pda, trie, mistral_sp_vocab)
    _pda_units.clear_cache()
    monkeypatch.setattr(_pda_walk, "WIDE_SHARE", 0.0)  # many wide states: several chunks
    monkeypatch.setattr(_pda_units, "ROW_CHUNK", chunk)
    _same(compose_pda(pda, trie, mistral_sp_vocab), want)


def test_a_rule_is_keyed_by_its_structure_not_its_numbers():
    """``json_array``'s states are numbered after the root's, whose size differs: one key."""
    keys, firsts = [], []
    for schema in (SCHEMAS[0], {"maxLength": 2}, {"type": "array", "items": {"maxLength": 2}}):
        pda = _pda(schema)
        rule = pda.names.index("json_array")
        keys.append(_pda_units._closure(pda, rule).key)
        firsts.append(int(np.flatnonzero(pda.rule_of == rule)[0]))
    assert len(set(firsts)) == 3 and len(set(keys)) == 1


def _rule_pdas() -> list:
    """PDAs of JSON Schemas and of tool calls (whose units repeat rules at other offsets)."""
    from automata_compile.frontends.tool_calls import tool_calls_pda, tool_calls_spec

    pdas = [_pda(s) for s in SCHEMAS]
    pdas.append(_pda({"type": "array", "items": {"maxLength": 2}}))
    tools = [
        {"name": n, "parameters": {"type": "object", "properties": p}}
        for n, p in [("a", {"x": {}}), ("b", {"x": {}}), ("c", {"y": {"type": "array"}})]
    ]
    fmt, ts, opts, _ = tool_calls_spec(
        tools, format="hermes", parallel=True, require_call=False, tool=None, allow_text=True
    )
    pdas.append(tool_calls_pda(fmt, ts, opts, parallel=True, require_call=False, allow_text=True))
    return pdas


def test_a_closure_is_its_rules_moves_renumbered():
    """Oracle: every move of the closure's sub-PDA, mapped back through the closure's
    states and rules, is the whole PDA's move (the renumbering by offset, `_in_rule`,
    needs a SHIFT's target and a pushed return state in their state's rule)."""
    for pda in _rule_pdas():
        shifts = np.nonzero(pda.kind == _pda_units.SHIFT)
        assert np.array_equal(pda.rule_of[pda.arg[shifts]], pda.rule_of[shifts[0]])
        pushes = np.nonzero(pda.ret >= 0)
        assert np.array_equal(pda.rule_of[pda.ret[pushes]], pda.rule_of[pushes[0]])
        for rule in range(1, len(pda.names)):
            closure = _pda_units._closure(pda, rule)
            sub = _pda_units._closure_pda(closure)
            states, rules = closure.states, closure.rules
            assert np.array_equal(sub.kind, pda.kind[states])
            assert np.array_equal(sub.ends, pda.ends[states])
            assert np.array_equal(states[sub.starts], pda.starts[rules])
            glob = pda.arg[states]
            shift, call = sub.kind == _pda_units.SHIFT, sub.kind == _pda_units.CALL
            assert np.array_equal(states[sub.arg[shift]], glob[shift])
            assert np.array_equal(sub.shift[shift], sub.arg[shift])
            assert (sub.shift[~shift] == -1).all() and (sub.arg[~(shift | call)] == -1).all()
            assert np.array_equal(rules[sub.arg[call]], glob[call])
            pushed = sub.ret >= 0
            assert np.array_equal(pushed, pda.ret[states] >= 0)
            assert np.array_equal(states[sub.ret[pushed]], pda.ret[states][pushed])


def test_rule_keys_are_equal_exactly_when_the_renumbered_rules_are():
    """The key digests only the entries that are not dead: over the rules of several PDAs
    (JSON Schemas, tool calls, whose units repeat rules at other offsets), two keys are
    equal iff the closures' dense sub-PDAs are (what a cached walk depends on)."""
    keys, dense = [], []
    for pda in _rule_pdas():
        for rule in range(1, len(pda.names)):
            closure = _pda_units._closure(pda, rule)
            sub = _pda_units._closure_pda(closure)
            keys.append(closure.key)
            dense.append(
                b"|".join(
                    np.ascontiguousarray(x).tobytes()
                    for x in (np.bincount(sub.rule_of), sub.starts, sub.kind, sub.arg, sub.ret)
                )
            )
    assert len(set(keys)) < len(keys)  # some rules repeat (a tool unit's, a free value's)
    for i in range(len(keys)):
        for j in range(len(keys)):
            assert (keys[i] == keys[j]) == (dense[i] == dense[j]), (i, j)


def test_a_free_string_is_one_loop_for_all_its_states(mistral_sp_vocab):
    """Every free string of a PDA is the same loop: one cached walk serves them all."""
    schema = {
        "type": "object",
        "properties": {k: {"type": "string"} for k in "abc"},
        "required": list("abc"),
        "additionalProperties": False,
    }
    schema["properties"]["d"] = {}  # a free value: the PDA path
    _, pda = byte_language(schema, parse_options({"property_order": "declared"}))
    assert pda is not None
    walker = _pda_walk.Walker(pda, trie_for(mistral_sp_vocab))
    live = np.flatnonzero((pda.kind != 0).any(axis=1) & (pda.rule_of == 0))
    loops = list(_pda_units._loops(walker, live))
    assert len(loops) >= 3
    assert len({digest for _, _, (_, _, digest) in loops}) < len(loops)


@pytest.mark.parametrize("schema", SCHEMAS, ids=["free-value", "object", "recursive"])
def test_components_of_some_rules_are_the_whole_pdas(schema):
    """Shifts never leave a rule: the loops found among whole rules' states are the whole
    PDA's, numbered in the same relative order (what `_loops` reads)."""
    pda = _pda(schema)
    full = _pda_units._components(pda)
    for rules in [[0], [len(pda.names) - 1], list(range(len(pda.names)))]:
        states = np.flatnonzero(np.isin(pda.rule_of, rules))
        part = _pda_units._components(pda, states)
        assert np.array_equal(
            np.unique(full[states], return_inverse=True)[1].reshape(-1),
            np.unique(part[states], return_inverse=True)[1].reshape(-1),
        )
        assert np.bincount(part)[part[states]].tolist() == np.bincount(full)[full[states]].tolist()
