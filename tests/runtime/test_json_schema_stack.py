"""A recursive JSON Schema compiled to a pushdown automaton, generated end to end with the
tiny random-weight model: finished rows are valid instances (jsonschema), unfinished rows
are prefixes the byte pushdown automaton can still read."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_compile.frontends.json_schema import parse_options
from automata_compile.pipeline import byte_language
from automata_jax import ConstraintTables, testing

jsonschema = pytest.importorskip("jsonschema")

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "v": {"type": "integer", "minimum": 0, "maximum": 9},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                "meta": {},
            },
            "required": ["v"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/node",
}


def test_generated_trees_are_valid_instances():
    vocab = testing.default_vocabulary()
    model, params = testing.tiny_model(vocab.size)
    pda = ac.compile_json_schema(TREE, vocab, whitespace="compact")
    assert pda.is_pda
    tables = ConstraintTables.from_dfas([pda], vocab_size=vocab.size)
    _, byte_pda = byte_language(TREE, parse_options({"whitespace": "compact"}))
    validator = jsonschema.Draft202012Validator(TREE)
    ids = np.zeros(8, np.int32)
    prompts, mask = aj.pad_prompts([[1, 100 + i] for i in range(len(ids))])
    out = aj.generate(
        model.apply_step, params, prompts, tables, ids, sampler=aj.Temperature(1.0),
        max_new_tokens=48, rng=jax.random.key(0), prompt_mask=mask, cache=model.init_cache,
    )  # fmt: skip
    assert not np.asarray(out.states.error).any()
    finished = 0
    for b in range(len(ids)):
        n = int(out.lengths[b])
        text = vocab.decode(np.asarray(out.tokens[b, :n]).tolist())
        if bool(out.accepted[b]):
            finished += 1
            validator.validate(json.loads(text))
        else:
            config = (int(byte_pda.starts[0]), ())
            for byte in text:
                config = byte_pda.step(*config, byte)
                assert config is not None, text
    assert finished >= 1


def test_rule_blocks_generate_what_the_dense_tables_generate(monkeypatch):
    """The schema's PDA in per-rule state blocks (`pipeline._grammar.pda_tables`, the
    threshold lowered) generates, token for token, what its dense tables generate with the
    same key: the masks and stack moves in the loop are the same."""
    from automata_compile.pipeline import _grammar

    vocab = testing.default_vocabulary()
    model, params = testing.tiny_model(vocab.size)
    outs = []
    for threshold in (10**9, 0):
        monkeypatch.setattr(_grammar, "BLOCK_MIN_STATES", threshold)
        pda = ac.compile_json_schema(TREE, vocab, whitespace="compact")
        assert pda.is_blocked == (threshold == 0)
        tables = ConstraintTables.from_dfas([pda], vocab_size=vocab.size)
        ids = np.zeros(6, np.int32)
        prompts, mask = aj.pad_prompts([[1, 200 + i] for i in range(len(ids))])
        outs.append(aj.generate(
            model.apply_step, params, prompts, tables, ids, sampler=aj.Temperature(1.0),
            max_new_tokens=40, rng=jax.random.key(1), prompt_mask=mask, cache=model.init_cache,
        ))  # fmt: skip
    dense, blocked = outs
    np.testing.assert_array_equal(np.asarray(dense.lengths), np.asarray(blocked.lengths))
    np.testing.assert_array_equal(np.asarray(dense.tokens), np.asarray(blocked.tokens))
    np.testing.assert_array_equal(np.asarray(dense.accepted), np.asarray(blocked.accepted))
    assert not np.asarray(blocked.states.error).any()
    assert np.asarray(blocked.accepted).any()
    validator = jsonschema.Draft202012Validator(TREE)
    for b in np.flatnonzero(np.asarray(blocked.accepted)):
        n = int(blocked.lengths[b])
        validator.validate(json.loads(vocab.decode(np.asarray(blocked.tokens[b, :n]).tolist())))
