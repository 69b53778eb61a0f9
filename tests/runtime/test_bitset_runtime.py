"""The bitset runtime rule on the device (`automata_jax._bitset`) against the NumPy reference
(`automata_compile.tokens.reference_mask` / `reference_advance`), with and without jit; no
host callbacks; a second schema padded to the same sizes does not retrace."""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from automata_compile.pipeline._bitset import compile_json_schema_bitset
from automata_compile.tokens import reference_advance, reference_mask
from automata_jax._bitset import BitsetDeviceTables, bitset_advance, bitset_mask
from automata_jax.testing import host_callbacks, jaxpr_primitive_names

BOOL = {"type": "boolean"}
INT = {"type": "integer", "minimum": 0, "maximum": 9}
A = {
    "type": "object",
    "properties": {
        "a": INT,
        "ab": BOOL,
        "n": {
            "type": "object",
            "properties": {"x": BOOL, "y": INT},
            "required": ["y"],
            "additionalProperties": False,
        },
    },
    "required": ["ab"],
    "additionalProperties": False,
}
B = {
    "type": "object",
    "properties": {k: BOOL for k in "uvwxyz"},
    "required": ["z"],
    "additionalProperties": False,
}
SIZES = dict(
    states=256, classes=256, programs=32, words=1, conditions=64, mask_rows=32, cond_tokens=64
)


@pytest.fixture(scope="module")
def tables(llama3_vocab):
    out = {}
    for name, schema in (("A", A), ("B", B)):
        t = compile_json_schema_bitset(schema, llama3_vocab)
        out[name] = (t, BitsetDeviceTables.from_tables(t, llama3_vocab.size, **SIZES))
    return out


def _walks(t, dt, vocab, fn_mask, fn_advance, seed):
    rng = random.Random(seed)
    rows = 3
    state = np.full(rows, t.start, np.int32)
    bits = np.zeros((rows, t.words), np.uint32)
    for _ in range(40):
        got = np.asarray(fn_mask(dt, jnp.asarray(state), jnp.asarray(bits)))
        tokens = []
        for r in range(rows):
            want = reference_mask(t, int(state[r]), bits[r])
            np.testing.assert_array_equal(got[r], want)
            allowed = [x for x in np.flatnonzero(want).tolist() if x not in vocab.eos_ids]
            tokens.append(rng.choice(allowed) if allowed else vocab.eos_ids[0])
        new_state, new_bits = fn_advance(
            dt, jnp.asarray(state), jnp.asarray(bits), jnp.asarray(tokens)
        )
        for r in range(rows):
            if tokens[r] in vocab.eos_ids:
                continue
            s, b = reference_advance(t, int(state[r]), bits[r], tokens[r])
            assert int(new_state[r]) == s
            np.testing.assert_array_equal(np.asarray(new_bits[r]), b)
        state, bits = np.asarray(new_state), np.asarray(new_bits)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", ["A", "B"])
def test_kernels_match_the_reference(name, jit, tables, llama3_vocab):
    t, dt = tables[name]
    m, a = (jax.jit(bitset_mask), jax.jit(bitset_advance)) if jit else (bitset_mask, bitset_advance)
    _walks(t, dt, llama3_vocab, m, a, name)


@pytest.mark.parametrize("name", ["A", "B"])
def test_mask_matches_the_reference_on_any_state_and_bits(name, tables):
    """Every state (padded ones included) under random bitsets, not only the reachable
    pairs: the static rows and the conditional tokens cover every edge."""
    t, dt = tables[name]
    rng = np.random.default_rng(20)
    q = t.next_state.shape[0]
    states = np.concatenate([np.arange(q), rng.integers(0, q, 64)]).astype(np.int32)
    bits = rng.integers(0, 2**32, (states.shape[0], t.words), dtype=np.uint32)
    bits[::3] &= rng.integers(0, 2**32, (len(bits[::3]), t.words), dtype=np.uint32)
    bits[::5] = 0
    got = np.asarray(jax.jit(bitset_mask)(dt, jnp.asarray(states), jnp.asarray(bits)))
    for r, s in enumerate(states.tolist()):
        np.testing.assert_array_equal(got[r], reference_mask(t, s, bits[r]))
    padded = np.asarray(
        bitset_mask(
            dt, jnp.asarray([dt.next_state.shape[0] - 1]), jnp.zeros((1, t.words), jnp.uint32)
        )
    )
    assert not padded.any()


def test_no_host_callbacks_and_no_retrace(tables):
    traces = []

    def step(dt, state, bits, token):
        traces.append(1)
        return bitset_mask(dt, state, bits), bitset_advance(dt, state, bits, token)

    jstep = jax.jit(step)
    for name in ("A", "B"):
        _, dt = tables[name]
        state = jnp.full((2,), dt.start)
        bits = jnp.zeros((2, dt.words), jnp.uint32)
        jstep(dt, state, bits, jnp.zeros((2,), jnp.int32))
    assert len(traces) == 1
    _, dt = tables["A"]
    jaxpr = jax.make_jaxpr(step)(dt, state, bits, jnp.zeros((2,), jnp.int32))
    assert not host_callbacks(jaxpr_primitive_names(jaxpr))


def test_a_table_past_its_sizes_is_refused(tables, llama3_vocab):
    from automata_jax import RuntimeShapeError

    t, _ = tables["A"]
    with pytest.raises(RuntimeShapeError, match="expected states"):
        BitsetDeviceTables.from_tables(t, llama3_vocab.size, states=8)
    with pytest.raises(RuntimeShapeError, match="expected conditions"):
        BitsetDeviceTables.from_tables(t, llama3_vocab.size, conditions=2)
    with pytest.raises(RuntimeShapeError, match="expected mask_rows"):
        BitsetDeviceTables.from_tables(t, llama3_vocab.size, mask_rows=2)
    with pytest.raises(RuntimeShapeError, match="expected cond_tokens"):
        BitsetDeviceTables.from_tables(t, llama3_vocab.size, cond_tokens=2)
