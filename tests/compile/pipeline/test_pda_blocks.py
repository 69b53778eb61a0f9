"""A JSON Schema (or grammar) compiled as a byte PDA gets one state block per grammar rule from
``BLOCK_MIN_STATES`` states (`pipeline._grammar.pda_tables`): the same automaton as
the dense tables, configuration for configuration, in fewer cells; smaller PDAs stay dense.

Oracle: the dense composition of the same byte PDA (``BLOCK_MIN_STATES`` raised past it),
walked along valid instances' tokenizations and random allowed walks, and the device
tables' masks against `TokenDFA.allowed`.
"""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_compile.pipeline import _grammar

jsonschema = pytest.importorskip("jsonschema")

# Recursive (so a byte PDA) with shared definitions: several rules.
SCHEMA = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 12},
                "kind": {"enum": ["file", "dir", "link"]},
                "size": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
            "additionalProperties": False,
        },
        "tag": {
            "type": "object",
            "properties": {"key": {"type": "string"}, "value": {"type": "number"}},
            "additionalProperties": False,
        },
    },
    "$ref": "#/$defs/node",
}
TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        }
    },
    "$ref": "#/$defs/node",
}
INSTANCES = [
    {"name": "root", "kind": "dir", "children": [{"name": "a.txt", "size": 12}]},
    {"children": [{"name": "x", "tags": [{"key": "k", "value": 1.5}]}], "name": "r"},
    {"name": "", "tags": [], "children": [{"name": "d", "children": [{"name": "e"}]}]},
]


@pytest.fixture(scope="module")
def both(llama3_vocab):
    """(dense, blocked): the schema composed without and with per-rule blocks."""
    mp = pytest.MonkeyPatch()
    try:
        out = []
        for threshold in (10**9, 0):
            mp.setattr(_grammar, "BLOCK_MIN_STATES", threshold)
            out.append(ac.compile_json_schema(SCHEMA, llama3_vocab))
    finally:
        mp.undo()
    return tuple(out)


def _walks(dfa, vocab, rng) -> list[list[int]]:
    walks = []
    for inst in INSTANCES:
        jsonschema.validate(inst, SCHEMA)
        for sep in ((",", ":"), (", ", ": ")):
            walks.append(vocab.encode(json.dumps(inst, separators=sep)))
    for _ in range(8):  # random allowed walks, EOS left out
        config, ids = (dfa.start, ()), []
        for _ in range(30):
            ok = np.flatnonzero(dfa.allowed(*config))
            ok = ok[~np.isin(ok, dfa.eos_ids)]
            if not ok.size:
                break
            ids.append(int(rng.choice(ok)))
            config = dfa.advance_config(*config, ids[-1])
        walks.append(ids)
    return walks


def test_rule_blocks_are_the_same_automaton_in_fewer_cells(both, llama3_vocab):
    dense, blocked = both
    assert dense.is_pda and not dense.is_blocked
    assert blocked.is_blocked and blocked.num_blocks >= 3  # the root, node, tag (+ empty)
    assert blocked.num_cells <= dense.num_cells
    assert blocked.num_states == dense.num_states
    checked = 0
    for ids in _walks(dense, llama3_vocab, np.random.default_rng(0)):
        for cut in range(len(ids) + 1):
            ca, cb = dense.walk_config(ids[:cut]), blocked.walk_config(ids[:cut])
            assert ca == cb, (ids, cut)
            assert ca is not None, (ids, cut)  # every walk is of allowed tokens
            assert np.array_equal(dense.allowed(*ca), blocked.allowed(*cb)), (ids, cut)
            checked += 1
        assert dense.accepts(ids) == blocked.accepts(ids)
    assert checked > 200


def test_device_tables_of_rule_blocks_give_the_same_masks(both, llama3_vocab):
    dense, blocked = both
    tables = aj.ConstraintTables.from_dfas(blocked, vocab_size=llama3_vocab.size)
    assert tables.class_map is not None  # the state-block layout
    ids = llama3_vocab.encode(json.dumps(INSTANCES[1]))
    state = aj.init_state(tables, jnp.zeros((1,), jnp.int32))
    for cut, tok in enumerate(ids):
        config = dense.walk_config(ids[:cut])
        mask = np.asarray(aj.allowed_mask(tables, state))[0, : llama3_vocab.size]
        assert np.array_equal(mask, dense.allowed(*config)), cut
        state = aj.advance(tables, state, jnp.array([tok], jnp.int32))
    assert not bool(state.error.any())
    assert bool(np.asarray(aj.allowed_mask(tables, state))[0, llama3_vocab.eos_ids[0]])


def test_default_blocks_from_the_threshold(both, llama3_vocab):
    dense, _ = both
    assert dense.num_states >= _grammar.BLOCK_MIN_STATES
    assert ac.compile_json_schema(SCHEMA, llama3_vocab).is_blocked
    small = ac.compile_json_schema(TREE, llama3_vocab)  # a byte PDA under the threshold
    assert small.is_pda and small.num_states < _grammar.BLOCK_MIN_STATES
    assert not small.is_blocked


def test_grammar_rule_blocks_are_the_same_automaton(llama3_vocab, monkeypatch):
    """`compile_grammar` takes the same policy: the built-in JSON grammar with blocks (the
    threshold lowered) against its dense tables."""
    dense = ac.compile_grammar("json", llama3_vocab)
    assert dense.num_states < _grammar.BLOCK_MIN_STATES and not dense.is_blocked
    monkeypatch.setattr(_grammar, "BLOCK_MIN_STATES", 0)
    blocked = ac.compile_grammar("json", llama3_vocab)
    assert blocked.is_blocked and blocked.num_blocks > 1
    checked = 0
    for ids in _walks(dense, llama3_vocab, np.random.default_rng(1)):
        for cut in range(len(ids) + 1):
            ca, cb = dense.walk_config(ids[:cut]), blocked.walk_config(ids[:cut])
            assert ca == cb and ca is not None, (ids, cut)
            assert np.array_equal(dense.allowed(*ca), blocked.allowed(*cb)), (ids, cut)
            checked += 1
    assert checked > 200
