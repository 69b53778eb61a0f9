"""The bitset runtime rule on the device (`automata_jax._bitset`) against the NumPy reference
(`automata_compile.tokens.reference_mask` / `reference_advance`), with and without jit, REQUIRE
alternatives (unions closing on different required sets) included; no host callbacks; a second
schema padded to the same sizes does not retrace."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from automata_compile.pipeline._bitset import compile_json_schema_bitset
from automata_compile.tokens import reference_advance, reference_mask
from automata_jax._bitset import BitsetDeviceTables, bitset_advance, bitset_mask
from automata_jax.testing import host_callbacks, jaxpr_primitive_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bitset_schemas import DISJUNCTIVE, INT9, SIX_BOOLS, nested_object  # noqa: E402

A = nested_object(INT9)
B = SIX_BOOLS
SIZES = dict(
    states=256, classes=256, programs=32, words=1, conditions=64, mask_rows=32, cond_tokens=64
)


@pytest.fixture(scope="module")
def tables(llama3_vocab):
    out = {}
    for name, schema in (("A", A), ("B", B)):
        t = compile_json_schema_bitset(schema, llama3_vocab)
        out[name] = (t, BitsetDeviceTables.from_tables(t, llama3_vocab.size, **SIZES))
    for name, schema in DISJUNCTIVE.items():
        t = compile_json_schema_bitset(schema, llama3_vocab)
        assert t.program_alts.any()
        out[name] = (t, BitsetDeviceTables.from_tables(t, llama3_vocab.size))
        # more alternatives than any program holds: padding repeats a program's last one
        k8 = BitsetDeviceTables.from_tables(t, llama3_vocab.size, alternatives=8)
        out[name + "/k8"] = (t, k8)
    return out


def _walks(t, dt, vocab, fn_mask, fn_advance, seed, steps=40):
    rng = random.Random(seed)
    rows = 3
    state = np.full(rows, t.start, np.int32)
    bits = np.zeros((rows, t.words), np.uint32)
    for _ in range(steps):
        got = np.asarray(fn_mask(dt, jnp.asarray(state), jnp.asarray(bits)))
        tokens = []
        for r in range(rows):
            want = reference_mask(t, int(state[r]), bits[r])
            np.testing.assert_array_equal(got[r], want)
            allowed = [x for x in np.flatnonzero(want).tolist() if x not in vocab.eos_ids]
            tokens.append(rng.choice(allowed) if allowed else vocab.eos_ids[0])
        new_state, new_bits = jax.device_get(  # one transfer, rows indexed in NumPy
            fn_advance(dt, jnp.asarray(state), jnp.asarray(bits), jnp.asarray(tokens))
        )
        for r in range(rows):
            if tokens[r] in vocab.eos_ids:
                continue
            s, b = reference_advance(t, int(state[r]), bits[r], tokens[r])
            assert int(new_state[r]) == s
            np.testing.assert_array_equal(new_bits[r], b)
        state, bits = new_state, new_bits


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", ["A", "B"])
def test_kernels_match_the_reference(name, jit, tables, llama3_vocab):
    t, dt = tables[name]
    m, a = (jax.jit(bitset_mask), jax.jit(bitset_advance)) if jit else (bitset_mask, bitset_advance)
    _walks(t, dt, llama3_vocab, m, a, name)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(DISJUNCTIVE) + ["two_members/k8"])
def test_kernels_match_the_reference_with_require_alternatives(name, jit, tables, llama3_vocab):
    """Random walks on unions whose ``}`` holds only if one member's required set is all
    written: the device conditions and advance test the alternatives as the reference does.
    Eager (op by op, ~25x slower a step): the first walk; the rule's coverage is the jitted
    walks' (the same functions, traced; `test_a_choice_decides_the_closing_brace` calls them
    eagerly where the alternatives decide `}`)."""
    t, dt = tables[name]
    m, a = (jax.jit(bitset_mask), jax.jit(bitset_advance)) if jit else (bitset_mask, bitset_advance)
    for seed in range(4 if jit else 1):
        _walks(t, dt, llama3_vocab, m, a, f"{name}/{seed}", steps=60)


def test_a_choice_decides_the_closing_brace(tables, llama3_vocab):
    """``{"u":{"b":true`` of u: anyOf [{a required}, {z required}, {b, c required}]: its
    ``}`` needs a or b and c (S, their common bits, is empty), so it is refused; after
    ``,"a":true`` or ``,"c":"x"`` allowed, on the device as in the reference."""
    t, dt = tables["three_members_nested"]
    brace = llama3_vocab.encode("}")
    assert len(brace) == 1
    cases = (
        ('{"u":{"b":true', False),
        ('{"u":{"b":true,"a":true', True),
        ('{"u":{"b":true,"c":"x"', True),
    )
    for text, want in cases:
        q, bits = t.start, np.zeros(t.words, np.uint32)
        for tok in llama3_vocab.encode(text):
            q, bits = reference_advance(t, q, bits, tok)
        got = np.asarray(bitset_mask(dt, jnp.asarray([q], jnp.int32), jnp.asarray(bits[None])))
        assert bool(reference_mask(t, q, bits)[brace[0]]) is want, text
        assert bool(got[0, brace[0]]) is want, text
        s, _ = bitset_advance(
            dt, jnp.asarray([q], jnp.int32), jnp.asarray(bits[None]), jnp.asarray(brace)
        )
        assert (int(s[0]) >= 0) is want, text


@pytest.mark.parametrize("name", ["A", "B"] + sorted(DISJUNCTIVE) + ["two_members/k8"])
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
    t, _ = tables["three_members_nested"]
    k = t.program_alts.shape[1]
    assert k >= 2
    with pytest.raises(RuntimeShapeError, match="expected alternatives"):
        BitsetDeviceTables.from_tables(t, llama3_vocab.size, alternatives=k - 1)
