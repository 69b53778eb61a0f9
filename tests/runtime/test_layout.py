"""The state-block table layout (`automata_jax._layout`): tables of constraints with state
blocks give, row by row and step by step, the masks, states, stacks, forced runs, exits,
bitmasks and healing masks of the same constraints' dense tables, in mixed batches."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_compile.frontends.tool_calls import tool_calls_pda, tool_calls_spec
from automata_compile.tokens._blocks import split_blocks
from automata_jax import _healing
from automata_jax.testing import host_callbacks, jaxpr_primitive_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tool_call_fixtures import ORACLE_TOOLS as TOOLS  # noqa: E402

GRAMMAR = 'start: "[" (item ("," item)*)? "]"\nitem: /[a-c]+/ | start'
REGEX = r'(ab|cd)+\{"k": "[0-9]{2,4}"\}x?'


_MASK = jax.jit(aj.allowed_mask)
_ADVANCE = jax.jit(aj.advance)


@pytest.mark.parametrize("seed", range(3))
def test_random_partitions_match_the_dense_tables(byte_level_vocab, seed):
    vocab = byte_level_vocab
    rng = np.random.default_rng(seed)
    grammar = ac.compile_grammar(GRAMMAR, vocab)
    regex = ac.compile_regex(REGEX, vocab)
    split = [split_blocks(d, rng.integers(0, 4, d.num_states)) for d in (grammar, regex)]
    dense = aj.ConstraintTables.from_dfas([regex, grammar], vocab_size=vocab.size + 3)
    blocked = aj.ConstraintTables.from_dfas([regex, split[0], split[1]], vocab_size=vocab.size + 3)
    assert dense.row_start is None and blocked.row_start is not None
    # rows: regex (dense in both), grammar (split in the second), regex (split), free
    ids_dense = jnp.array([0, 1, 0, -1, 1])
    ids_blocked = jnp.array([0, 1, 2, -1, 1])
    s1 = aj.init_state(dense, ids_dense)
    s2 = aj.init_state(blocked, ids_blocked)
    np.testing.assert_array_equal(np.asarray(s1.state), np.asarray(s2.state))
    for _ in range(2):
        _run_mixed(dense, blocked, ids_dense, ids_blocked, 30, rng, list(vocab.eos_ids))


def _run_mixed(dense, blocked, ids1, ids2, steps, rng, eos):
    s1, s2 = aj.init_state(dense, ids1), aj.init_state(blocked, ids2)
    for i in range(steps):
        m1 = np.asarray(_MASK(dense, s1))
        m2 = np.asarray(_MASK(blocked, s2))
        np.testing.assert_array_equal(m1, m2, err_msg=f"step {i}")
        tok = []
        for row in m1:
            ok = np.flatnonzero(row)
            non_eos = ok[~np.isin(ok, eos)]
            tok.append(int(rng.choice(non_eos if non_eos.size and rng.random() < 0.95 else ok)))
        s1, s2 = _ADVANCE(dense, s1, jnp.array(tok)), _ADVANCE(blocked, s2, jnp.array(tok))
        for name in ("state", "done", "error", "depth"):
            np.testing.assert_array_equal(
                np.asarray(getattr(s1, name)), np.asarray(getattr(s2, name)), err_msg=name
            )


def test_forced_runs_exits_and_bitmasks_per_block(byte_level_vocab):
    vocab = byte_level_vocab
    regex = ac.compile_regex(REGEX, vocab)
    assert regex.forced_len is not None and regex.forced_len.max() > 1
    v = vocab.size
    for seed in range(3):
        split = split_blocks(regex, np.random.default_rng(seed).integers(0, 3, regex.num_states))
        for impl in ("gather", "bitmask"):
            a = aj.ConstraintTables.from_dfas([regex], vocab_size=v, mask_impl=impl)
            b = aj.ConstraintTables.from_dfas([split], vocab_size=v, mask_impl=impl)
            for name in (
                "forced_tokens",
                "forced_len",
                "forced_states",
                "exit_tokens",
                "structure_drafts",
                "viable",
            ):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
            ids = jnp.array([0, 0, -1])
            _run_mixed(a, b, ids, ids, 25, np.random.default_rng(seed), list(vocab.eos_ids))
        # healing: the class map follows the state byte by byte
        dense = aj.ConstraintTables.from_dfas([regex], vocab_size=v)
        blocked = aj.ConstraintTables.from_dfas([split], vocab_size=v)
        ids = [vocab.encode("ab")[0]] * 2
        _, heal = aj.heal_prompts([ids, ids], vocab.tokens, vocab_size=v)
        state = aj.init_state(dense, jnp.array([0, -1]))
        m1, q1 = _healing.heal_mask(dense, state, heal)
        m2, q2 = _healing.heal_mask(blocked, aj.init_state(blocked, jnp.array([0, -1])), heal)
        np.testing.assert_array_equal(np.asarray(m1), np.asarray(m2))
        np.testing.assert_array_equal(
            np.asarray(q1)[np.asarray(m1)], np.asarray(q2)[np.asarray(m2)]
        )


@pytest.fixture(scope="module")
def tool_tables(llama3_vocab):
    flags = dict(parallel=True, require_call=False, allow_text=True)
    dense = ac.compile_tool_calls(TOOLS, llama3_vocab, format="hermes", parallel=True).dense()
    fmt, ts, opts, _ = tool_calls_spec(TOOLS, format="hermes", tool=None, **flags)
    pda = tool_calls_pda(fmt, ts, opts, **flags)
    tool_of = {t.name: k + 1 for k, t in enumerate(ts)}
    rule_block = np.array([tool_of.get(n.split("/")[0], 0) for n in pda.names])
    blocked = split_blocks(dense, rule_block[pda.rule_of])
    regex = ac.compile_regex(r'\{"a": [0-9]{1,3}\}', llama3_vocab)
    v = llama3_vocab.size
    return (
        aj.ConstraintTables.from_dfas([regex, dense], vocab_size=v),
        aj.ConstraintTables.from_dfas([regex, blocked], vocab_size=v),
    )


def test_tool_call_blocks_on_a_real_vocabulary(tool_tables, llama3_vocab):
    """Llama-3, the 3-tool constraint: a call spelled byte by byte (the trigger split across
    tokens), one tokenized normally, and sampled rows, with a regex row in the batch."""
    dense, blocked = tool_tables
    assert blocked.padded_shape[2] < dense.padded_shape[2]
    text = (
        'Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
        '"days": 3}}\n</tool_call> ok'
    )
    byte_ids = [llama3_vocab.encode(bytes([b]).decode())[0] for b in text.encode()]
    ids = llama3_vocab.encode(text)
    eos = llama3_vocab.eos_ids[0]
    rows = jnp.array([0, 1, 1, 1])
    s1, s2 = aj.init_state(dense, rows), aj.init_state(blocked, rows)
    rng = np.random.default_rng(0)
    for i in range(len(byte_ids) + 1):
        m1, m2 = np.asarray(_MASK(dense, s1)), np.asarray(_MASK(blocked, s2))
        np.testing.assert_array_equal(m1, m2, err_msg=f"step {i}")
        sampled = int(rng.choice(np.flatnonzero(m1[3])))
        tok = [
            eos,
            byte_ids[i] if i < len(byte_ids) else eos,
            ids[i] if i < len(ids) else eos,
            sampled,
        ]
        s1 = _ADVANCE(dense, s1, jnp.array(tok))
        s2 = _ADVANCE(blocked, s2, jnp.array(tok))
        np.testing.assert_array_equal(np.asarray(s1.state), np.asarray(s2.state))
        np.testing.assert_array_equal(np.asarray(s1.error), np.asarray(s2.error))
    assert not np.asarray(s1.error)[1:3].any() and np.asarray(s1.done)[1:3].all()


def test_capacity_with_blocks_swaps_without_retrace(byte_level_vocab):
    vocab = byte_level_vocab
    v = vocab.size
    grammar = ac.compile_grammar(GRAMMAR, vocab)
    other = ac.compile_grammar('start: "(" start ")" | "ab"', vocab)
    rng = np.random.default_rng(1)
    split = [split_blocks(d, rng.integers(0, 3, d.num_states)) for d in (grammar, other)]
    cap = aj.TableCapacity.fitting(split)
    assert cap.blocks and cap.cells
    traces = []

    @jax.jit
    def step(tables, state, tok):
        traces.append(1)
        return aj.allowed_mask(tables, state), aj.advance(tables, state, tok)

    regex = ac.compile_regex("a+b", vocab)
    for dfa in (split[0], split[1], other, regex):  # a dense constraint fits as one block
        tables = aj.ConstraintTables.from_dfas([dfa], vocab_size=v, capacity=cap)
        assert tables.capacity == cap
        state = aj.init_state(tables, jnp.array([0]))
        step(tables, state, jnp.array([vocab.encode("a")[0]]))
    assert len(traces) == 1
    # a capacity without blocks stores a constraint with blocks dense: the same masks
    dense_cap = aj.TableCapacity.fitting([grammar])
    dense = aj.ConstraintTables.from_dfas([split[0]], vocab_size=v, capacity=dense_cap)
    assert dense.capacity == dense_cap and dense.class_map is None
    ragged = aj.ConstraintTables.from_dfas([split[0]], vocab_size=v, capacity=cap)
    for text in ("", "[", "[a,[b", "[ab]"):
        ids = jnp.array(vocab.encode(text), jnp.int32) if text else jnp.zeros(0, jnp.int32)
        masks = []
        for t in (dense, ragged):
            state = aj.init_state(t, jnp.array([0]))
            for tok in ids:
                state = aj.advance(t, state, tok[None])
            masks.append(np.asarray(aj.allowed_mask(t, state)))
        np.testing.assert_array_equal(masks[0], masks[1])
    tables = aj.ConstraintTables.from_dfas([split[0]], vocab_size=v, capacity=cap)
    state = aj.init_state(tables, jnp.array([0]))
    names = jaxpr_primitive_names(jax.make_jaxpr(step)(tables, state, jnp.array([5])))
    assert not host_callbacks(names)
