"""Bitset tables with a stack (`BitsetPDATables`, schemas with grammar rules) on the device:
`ConstraintTables.from_bitset` → `allowed_mask` / `advance` against the NumPy reference with a
stack (`reference_pda_mask` / `reference_pda_advance`) on random walks, jitted (and short
eager ones); states, stacks and bits equal to the reference's."""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_jax as aj
from automata_compile.pipeline._bitset import compile_json_schema_bitset
from automata_compile.tokens import BitsetPDATables, reference_pda_advance, reference_pda_mask
from automata_jax import ConstraintTables

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bitset_schemas import PDA_SCHEMAS as SCHEMAS  # noqa: E402  (free values: grammar rules)


@pytest.fixture(scope="module")
def compiled(llama3_vocab):
    out = {}
    for name, schema in SCHEMAS.items():
        t = compile_json_schema_bitset(schema, llama3_vocab, whitespace="compact")
        assert isinstance(t, BitsetPDATables)
        out[name] = (t, ConstraintTables.from_bitset(t, vocab_size=llama3_vocab.size))
    return out


def _walk(t, tables, vocab, mask_fn, advance_fn, seed, rows=3, steps=50):
    """A random walk of ``rows`` rows checked against the reference; the deepest stack seen."""
    rng = random.Random(seed)
    deepest = 0
    state = aj.init_state(tables, jnp.zeros((rows,), jnp.int32))
    ref = [(t.start, (), np.zeros(t.words, np.uint32)) for _ in range(rows)]
    for _ in range(steps):
        got = np.asarray(mask_fn(tables, state))
        host = jax.device_get(state)  # one transfer; rows indexed in NumPy, not device ops
        tokens = []
        for r in range(rows):
            q, stack, bits = ref[r]
            if bool(host.done[r]):
                tokens.append(vocab.eos_ids[0])
                continue
            want = reference_pda_mask(t, q, stack, bits)
            np.testing.assert_array_equal(got[r], want)
            allowed = [x for x in np.flatnonzero(want).tolist() if x not in vocab.eos_ids]
            tokens.append(rng.choice(allowed) if allowed else vocab.eos_ids[0])
        state = advance_fn(tables, state, jnp.asarray(tokens, jnp.int32))
        host = jax.device_get(state)
        for r in range(rows):
            if tokens[r] in vocab.eos_ids:
                continue
            q, stack, bits = reference_pda_advance(t, *ref[r], tokens[r])
            ref[r] = (q, stack, bits)
            assert int(host.state[r]) == q and not bool(host.error[r])
            depth = int(host.depth[r])
            assert tuple(host.stack[r, :depth].tolist()) == tuple(stack)
            np.testing.assert_array_equal(host.bits[r], bits)
            deepest = max(deepest, depth)
        if bool(host.done.all()):
            break
    return deepest


def test_the_eager_path_matches_the_reference(compiled, llama3_vocab):
    """`allowed_mask` / `advance` un-jitted (op by op) on a short walk of each schema; the
    long walks go through `jax.jit` (test_device_rule_with_a_stack_matches_the_reference)."""
    deepest = 0
    for name in sorted(SCHEMAS):
        t, tables = compiled[name]
        walk = _walk(
            t, tables, llama3_vocab, aj.allowed_mask, aj.advance, f"eager/{name}", steps=12
        )
        deepest = max(deepest, walk)
    assert deepest > 0  # a walk pushed: the eager stack edits ran


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_device_rule_with_a_stack_matches_the_reference(name, compiled, llama3_vocab):
    t, tables = compiled[name]
    fns = (jax.jit(aj.allowed_mask), jax.jit(aj.advance))  # eager: test_the_eager_path_...
    for seed in range(3):
        _walk(t, tables, llama3_vocab, *fns, f"{name}/{seed}")


def test_a_capacity_with_a_stack_gives_one_pytree(compiled, llama3_vocab):
    """``tables.bitset.capacity`` holds the stack block's sizes: the schemas' tables built
    with the largest of them have one pytree structure and shapes, and the masks along random
    walks are the reference's still."""
    caps = [tables.bitset.capacity for _, tables in compiled.values()]
    big = aj.BitsetCapacity(
        **{f.name: max(getattr(c, f.name) for c in caps) for f in dataclasses.fields(caps[0])}
    )
    built = {}
    for name, (t, tables) in compiled.items():
        assert tables.bitset.capacity.stack == tables.stack_size > 0
        again = ConstraintTables.from_bitset(t, vocab_size=llama3_vocab.size, capacity=big)
        assert again.bitset.capacity == big
        built[name] = again
    shapes = {
        name: (jax.tree.structure(x), [a.shape for a in jax.tree.leaves(x)])
        for name, x in built.items()
    }
    assert len({repr(v) for v in shapes.values()}) == 1
    t, _ = compiled["union"]
    _walk(t, built["union"], llama3_vocab, jax.jit(aj.allowed_mask), jax.jit(aj.advance), "cap")


def test_context_dependent_edges_that_update_the_bits(compiled, llama3_vocab):
    """The schemas' context-dependent edges only test (a REQUIRE at a rule's end); here each
    of them also sets bit 31, which no key uses (synthetic tables), so the advance must take
    the bits after the edge the stack chose."""
    t, _ = compiled["nested"]
    assert t.num_bits < 32
    marked = t.programs.copy()
    marked[:, 3, 0] |= np.uint32(1 << 31)  # each program, also setting bit 31
    programs = np.concatenate([t.programs, marked])
    alts = np.concatenate([t.program_alts, t.program_alts])
    cd_program = (t.cd_program + t.programs.shape[0]).astype(np.int32)
    synth = dataclasses.replace(t, programs=programs, program_alts=alts, cd_program=cd_program)
    tables = ConstraintTables.from_bitset(synth, vocab_size=llama3_vocab.size)
    seen = []
    advance_fn = jax.jit(aj.advance)  # eager steps: test_the_eager_path_matches_the_reference

    def advance(tables, state, tokens):
        out = advance_fn(tables, state, tokens)
        seen.append(bool((np.asarray(out.bits)[:, 0] >> 31).any()))
        return out

    for seed in range(3):
        _walk(synth, tables, llama3_vocab, jax.jit(aj.allowed_mask), advance, f"cd/{seed}", 4, 120)
    assert any(seen)  # some walk took a context-dependent edge


def test_several_constraints_match_each_ones_reference(compiled, llama3_vocab):
    """`from_bitset` of the three grammar schemas (K = 3, padded to 4): along random walks
    each row's mask, state, stack and bits equal its own schema's reference, jitted."""
    names = sorted(SCHEMAS)
    ts = [compiled[n][0] for n in names]
    tables = ConstraintTables.from_bitset(ts, vocab_size=llama3_vocab.size)
    assert tables.padded_shape[0] == 4 and int(tables.num_constraints) == 3
    vocab = llama3_vocab
    mask_fn, advance_fn = jax.jit(aj.allowed_mask), jax.jit(aj.advance)
    ids = [0, 1, 2, 1, 0, 2]
    rng = random.Random("several")
    state = aj.init_state(tables, jnp.asarray(ids, jnp.int32))
    ref = [(ts[i].start, (), np.zeros(ts[i].words, np.uint32)) for i in ids]
    steps = 0
    for _ in range(40):
        got = np.asarray(mask_fn(tables, state))
        host = jax.device_get(state)  # one transfer; rows indexed in NumPy, not device ops
        tokens = []
        for r, i in enumerate(ids):
            if bool(host.done[r]):
                tokens.append(vocab.eos_ids[0])
                continue
            q, stack, bits = ref[r]
            want = reference_pda_mask(ts[i], q, stack, bits)
            np.testing.assert_array_equal(got[r], want)
            allowed = [x for x in np.flatnonzero(want).tolist() if x not in vocab.eos_ids]
            tokens.append(rng.choice(allowed) if allowed else vocab.eos_ids[0])
        state = advance_fn(tables, state, jnp.asarray(tokens, jnp.int32))
        host = jax.device_get(state)
        for r, i in enumerate(ids):
            if tokens[r] in vocab.eos_ids:
                continue
            ref[r] = reference_pda_advance(ts[i], *ref[r], tokens[r])
            steps += 1
            q, stack, bits = ref[r]
            assert int(host.state[r]) == q and not bool(host.error[r])
            depth = int(host.depth[r])
            assert tuple(host.stack[r, :depth].tolist()) == tuple(stack)
            np.testing.assert_array_equal(host.bits[r, : bits.shape[0]], bits)
        if bool(host.done.all()):
            break
    assert steps >= 40  # the rows walked (not all finished at once)
