"""Bitset any-order tables in `generate` (`ConstraintTables.from_bitset`): greedy outputs
equal those of the exact any-order token DFA (plain, speculation; fast-forward feeds other
runs: test_bitset_fast_forward.py), finished rows are valid instances (jsonschema), an
instance in every property order is accepted (the device `allowed_mask` / `advance` against
the NumPy reference), a second schema of the same `BitsetCapacity` runs with no retrace, no
host callbacks, and the refusals."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_compile.tokens import BitsetPDATables, reference_advance, reference_mask
from automata_jax import ConstraintTables, testing
from automata_jax._fast_forward import accepts_logits_at
from automata_jax.testing import host_callbacks, jaxpr_primitive_names

jsonschema = pytest.importorskip("jsonschema")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bitset_schemas import BOOL, PDA_SCHEMAS, SIX_BOOLS, nested_object  # noqa: E402
from bitset_schemas import INT9 as INT  # noqa: E402
from bitset_schemas import UNION_A as MEMBER_A  # noqa: E402
from bitset_schemas import UNION_B as MEMBER_Z  # noqa: E402

A = nested_object(INT)
B = SIX_BOOLS
MEMBER_BC = {"type": "object", "properties": {"a": INT, "b": BOOL, "c": {"enum": ["x", "yy"]}},
             "required": ["b", "c"], "additionalProperties": False}  # fmt: skip
# unions whose members close on different required sets: `}` programs with REQUIRE alternatives
UNIONS = {
    "U2": {"anyOf": [MEMBER_A, MEMBER_Z]},
    "U3": {
        "type": "object",
        "properties": {
            "u": {"anyOf": [MEMBER_A, MEMBER_Z, MEMBER_BC]},
            "v": {"anyOf": [MEMBER_A, MEMBER_BC]},
        },
        "required": ["u"],
        "additionalProperties": False,
    },
}
SCHEMAS = {"A": A, "B": B, **UNIONS}
FREE = {  # free values: grammar rules, so `BitsetPDATables`
    "type": "object",
    "properties": {"a": {}, "b": BOOL, "c": INT},
    "required": ["b"],
    "additionalProperties": False,
}
# One capacity for every schema without rules (objects, unions of 2 and 3 members whose K = 2
# alternatives pad to 4) and batches of two of them: every test's loop of one setting is one
# compiled program (a capacity's padding decodes as the tight tables: the no-retrace tests).
CAPACITY = aj.BitsetCapacity(
    states=256, classes=128, words=1, programs=64, alternatives=4, conditions=128, mask_rows=128,
    cond_tokens=64, forced=4, constraints=2,
)  # fmt: skip
# grammar schemas: the stack block's sizes too
PDA_CAPACITY = aj.BitsetCapacity(
    states=1024, classes=256, words=1, programs=32, conditions=64, mask_rows=128, cond_tokens=64,
    forced=0, stack=32, pushes=64, push_len=16, context_edges=8192, edges_per_state=128, pops=16,
)  # fmt: skip
# ... and batches of four (`test_bitset_grammar_and_plain_constraints_in_one_batch`): one capacity
# for every grammar table of the module, so they share their loops too
PDA_BATCH_CAPACITY = dataclasses.replace(PDA_CAPACITY, constraints=4)
PLAIN = {"type": "array", "items": BOOL}  # a plain `TokenDFA` in a bitset batch


class CountingStep:
    """Wraps a step function and counts how often it is traced."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0
        self.takes_logits_at = accepts_logits_at(fn)  # a forwarder declares what it wraps

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)


def _alone_at_one_capacity(dfas: dict, vocab_size: int) -> dict:
    """Each DFA's own `from_dfas` tables, all at the one `TableCapacity` that fits every one of
    them: their runs of one setting share one compiled loop."""
    fits_all = ConstraintTables.from_dfas(list(dfas.values()), vocab_size=vocab_size).capacity
    capacity = dataclasses.replace(fits_all, constraints=1)
    return {
        name: ConstraintTables.from_dfas([dfa], vocab_size=vocab_size, capacity=capacity)
        for name, dfa in dfas.items()
    }


@pytest.fixture(scope="module")
def setup():
    """Each schema's compiled bitset tables, its `from_bitset` tables at `CAPACITY` and its
    exact any-order tables (`from_dfas`, one `TableCapacity` for all, `PLAIN` included)."""
    vocab = testing.default_vocabulary()
    model, params = testing.tiny_model(vocab.size)
    dfas = {  # exact any order
        n: ac.compile_json_schema(s, vocab, whitespace="compact")
        for n, s in {**SCHEMAS, "plain": PLAIN}.items()
    }
    exact = _alone_at_one_capacity(dfas, vocab.size)
    tables = {"plain": (None, exact["plain"], dfas["plain"])}
    for name, schema in SCHEMAS.items():
        bt = ac.compile_json_schema_bitset(schema, vocab, whitespace="compact")
        tables[name] = (
            ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=CAPACITY),
            exact[name],
            bt,
        )
    return vocab, model, params, tables


@pytest.fixture(scope="module")
def grammar(setup):
    """The grammar schemas (`BitsetPDATables`): compiled bitset tables, `from_bitset` tables at
    `PDA_BATCH_CAPACITY` and exact any-order PDA tables (one `TableCapacity` for both)."""
    vocab = setup[0]
    schemas = {"free": FREE, "nested": PDA_SCHEMAS["nested"]}
    pdas = {n: ac.compile_json_schema(s, vocab, whitespace="compact") for n, s in schemas.items()}
    assert all(p.is_pda for p in pdas.values())
    exact = _alone_at_one_capacity(pdas, vocab.size)
    tables = {}
    for name, schema in schemas.items():
        bt = ac.compile_json_schema_bitset(schema, vocab, whitespace="compact")
        assert isinstance(bt, BitsetPDATables)
        tables[name] = (
            ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=PDA_BATCH_CAPACITY),
            exact[name],
            bt,
        )
    return tables


@pytest.fixture(scope="module")
def step(setup):
    """The step every run of the module decodes with, counting its traces: runs of one setting
    and one capacity share one compiled loop (the no-retrace tests check the count)."""
    return CountingStep(setup[1].apply_step)


def _run(model, step, params, tables, sampler=None, rng=0, ids=(0, 0, 0, 0), **kw):
    prompts, mask = aj.pad_prompts([[1, 100 + i] for i in range(4)])
    return aj.generate(
        step, params, prompts, tables, np.asarray(ids, np.int32), sampler=sampler or aj.Greedy(),
        max_new_tokens=40, rng=jax.random.key(rng), prompt_mask=mask, cache=model.init_cache,
        **kw,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["A", "B", *UNIONS])
def test_greedy_outputs_equal_the_exact_any_order_tables(name, setup, step):
    vocab, model, params, tables = setup
    bitset, exact, _ = tables[name]
    want = _run(model, step, params, exact)
    validator = jsonschema.Draft202012Validator(SCHEMAS[name])
    for kw in ({}, {"speculate": True}):  # fast-forward: tests/runtime/test_bitset_fast_forward.py
        got = _run(model, step, params, bitset, **kw)
        np.testing.assert_array_equal(np.asarray(got.tokens), np.asarray(want.tokens), str(kw))
        np.testing.assert_array_equal(np.asarray(got.accepted), np.asarray(want.accepted))
        assert not np.asarray(got.states.error).any()
    assert np.asarray(want.accepted).any()
    for row, n, ok in zip(
        np.asarray(got.tokens), np.asarray(got.lengths), got.accepted, strict=True
    ):
        if bool(ok):
            validator.validate(json.loads(vocab.decode(row[:n].tolist())))


def test_a_grammar_schema_decodes_as_the_exact_any_order_pda(setup, grammar, step):
    """A schema with free values (`BitsetPDATables`: the stack and the bits together): greedy
    outputs equal to the exact any-order PDA tables' (plain and speculation), finished rows
    valid."""
    vocab, model, params, _ = setup
    bitset, exact, _ = grammar["free"]
    assert bitset.has_stack and bitset.bitset is not None
    want = _run(model, step, params, exact)
    assert np.asarray(want.accepted).any()
    validator = jsonschema.Draft202012Validator(FREE)
    for kw in ({}, {"speculate": True}):
        got = _run(model, step, params, bitset, **kw)
        np.testing.assert_array_equal(np.asarray(got.tokens), np.asarray(want.tokens), str(kw))
        np.testing.assert_array_equal(np.asarray(got.accepted), np.asarray(want.accepted))
        assert not np.asarray(got.states.error).any()
    for row, n, ok in zip(
        np.asarray(got.tokens), np.asarray(got.lengths), got.accepted, strict=True
    ):
        if bool(ok):
            validator.validate(json.loads(vocab.decode(row[:n].tolist())))


def test_sampled_rows_are_valid_instances(setup, step):
    vocab, model, params, tables = setup
    for name in SCHEMAS:
        bitset, _, _ = tables[name]
        validator = jsonschema.Draft202012Validator(SCHEMAS[name])
        out = _run(model, step, params, bitset, sampler=aj.Temperature(1.0))
        assert not np.asarray(out.states.error).any()
        for row, n, ok in zip(
            np.asarray(out.tokens), np.asarray(out.lengths), out.accepted, strict=True
        ):
            if bool(ok):
                validator.validate(json.loads(vocab.decode(row[:n].tolist())))


def test_every_property_order_is_accepted(llama3_vocab):
    """An instance of B in all 24 orders of four properties (and one of A's nesting): every
    token allowed by the device mask and by the reference, the device advance equal to the
    reference's, EOS allowed at the end; a repeated key is refused."""
    vocab = llama3_vocab
    instances = []
    for keys in itertools.permutations(["u", "x", "y", "z"]):
        instances.append({k: k != "x" for k in keys})
    instances.append({"n": {"y": 3, "x": True}, "ab": False, "a": 1})
    t = ac.compile_json_schema_bitset(B, vocab)
    ta = ac.compile_json_schema_bitset(A, vocab)
    mask, advance = jax.jit(aj.allowed_mask), jax.jit(aj.advance)
    for inst in instances:
        bt = ta if "n" in inst else t
        tables = ConstraintTables.from_bitset(bt, vocab_size=vocab.size)
        text = json.dumps(inst, separators=(",", ":"))
        jsonschema.validate(inst, A if "n" in inst else B)
        state = aj.init_state(tables, jnp.zeros((1,), jnp.int32))
        q, bits = bt.start, np.zeros(bt.words, np.uint32)
        for tok in vocab.encode(text):
            want = reference_mask(bt, q, bits)
            assert want[tok], (text, tok)
            np.testing.assert_array_equal(np.asarray(mask(tables, state))[0], want)
            q, bits = reference_advance(bt, q, bits, tok)
            state = advance(tables, state, jnp.asarray([tok], jnp.int32))
            assert int(state.state[0]) == q and not bool(state.error[0])
            np.testing.assert_array_equal(np.asarray(state.bits[0]), bits)
        eos = vocab.eos_ids[0]
        assert bool(np.asarray(mask(tables, state))[0, eos])
        assert bool(advance(tables, state, jnp.asarray([eos], jnp.int32)).done[0])
    # a repeated key: '{"u":true,"u"' is refused at the second key's closing quote
    tables = ConstraintTables.from_bitset(t, vocab_size=vocab.size)
    state = aj.init_state(tables, jnp.zeros((1,), jnp.int32))
    ok = True
    for tok in vocab.encode('{"u":true,"u":true,"z":true}'):
        ok = ok and bool(np.asarray(mask(tables, state))[0, tok])
        state = advance(tables, state, jnp.asarray([tok], jnp.int32))
    assert not ok and bool(state.error[0])


def _runs_traced(step, runs):
    """Runs each ``run()`` in turn; the traces of ``step`` and `generate`'s compiled loops
    (its jit cache size) after each."""
    from automata_jax import _generate

    calls, compiled = [], []
    for run in runs:
        run()
        calls.append(step.calls)
        compiled.append(_generate._generate_jit._cache_size())
    return calls, compiled


def test_a_second_schema_of_one_capacity_runs_with_no_retrace(setup, step):
    """Objects and unions of 2 and 3 members (K = 2 alternatives, padded to 4) at one capacity:
    the first run traces at most once (prefill + loop body: the module's runs share ``step``,
    so it may be compiled already), the others swap into its loop."""
    _, model, params, tables = setup
    for name in ("A", "B", "U2", "U3"):
        assert tables[name][0].bitset.capacity == CAPACITY
    before = step.calls
    calls, compiled = _runs_traced(step, [
        functools.partial(_run, model, step, params, tables[name][0],
                          sampler=aj.Temperature(1.0), rng=3)
        for name in ("A", "B", "U2", "U3", "A")
    ])  # fmt: skip
    assert calls[0] - before in (0, 2)
    assert calls[1:] == calls[:1] * 4 and compiled[1:] == compiled[:1] * 4


def test_a_second_grammar_schema_of_one_capacity_runs_with_no_retrace(setup, grammar, step):
    """Grammar schemas (`BitsetPDATables`) built with one `BitsetCapacity` (its stack fields
    included) have one pytree: the second swaps into the compiled loop (no trace), and decodes
    as its exact any-order PDA does."""
    _, model, params, _ = setup
    for bitset, _, _ in grammar.values():
        assert bitset.bitset.capacity == PDA_BATCH_CAPACITY
        assert bitset.stack_size == PDA_BATCH_CAPACITY.stack
    before, outs = step.calls, {}

    def run(name):
        outs[name] = _run(model, step, params, grammar[name][0])

    calls, compiled = _runs_traced(
        step, [functools.partial(run, n) for n in ("free", "nested", "free")]
    )
    assert calls[0] - before in (0, 2)  # at most one trace: prefill + loop body
    assert calls[1:] == calls[:1] * 2 and compiled[1:] == compiled[:1] * 2
    want = _run(model, step, params, grammar["nested"][1])
    got = outs["nested"]
    np.testing.assert_array_equal(np.asarray(got.tokens), np.asarray(want.tokens))
    np.testing.assert_array_equal(np.asarray(got.accepted), np.asarray(want.accepted))
    assert not np.asarray(got.states.error).any()


def test_a_grammar_schema_past_the_capacity_is_refused_by_field(setup, grammar):
    vocab = setup[0]
    bt = grammar["nested"][2]
    need = bt.tables.cd_state.shape[0]
    small = dataclasses.replace(PDA_CAPACITY, context_edges=need - 1)
    with pytest.raises(
        aj.TableCapacityError,
        match=rf"context_edges={need:,}, but BitsetCapacity.context_edges is {need - 1:,}",
    ):
        ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=small)
    with pytest.raises(aj.TableCapacityError, match="expected programs >= "):  # the bits' sizes
        ConstraintTables.from_bitset(
            bt, vocab_size=vocab.size, capacity=dataclasses.replace(PDA_CAPACITY, programs=1)
        )
    assert issubclass(aj.TableCapacityError, aj.RuntimeShapeError)


def _rows_equal(got, alone, ids):
    """Row r of ``got`` equals row r of ``alone[ids[r]]`` (tokens, lengths, accepted)."""
    for r, i in enumerate(ids):
        want = alone[i]
        np.testing.assert_array_equal(np.asarray(got.tokens[r]), np.asarray(want.tokens[r]))
        assert int(got.lengths[r]) == int(want.lengths[r])
        assert bool(got.accepted[r]) == bool(want.accepted[r])
        assert not bool(got.states.error[r])


def test_several_bitset_constraints_decode_each_row_as_alone(setup, step):
    """`from_bitset` of a sequence (K = 2 bitset schemas with forced runs): rows choose their
    constraint by id and each decodes exactly as its schema's own tables (greedy and sampled
    with one key, plain, speculation and fast-forward); two batches of one capacity share one
    trace; a batch past ``constraints`` is refused by name."""
    vocab, model, params, tables = setup
    bts = [tables[n][2] for n in "AB"]
    mixed = ConstraintTables.from_bitset(bts, vocab_size=vocab.size, capacity=CAPACITY)
    assert mixed.bitset.capacity == CAPACITY and mixed.padded_shape[0] == 2
    ids = (0, 1, 1, 0)
    # each alone at the batch's capacity: one loop per setting for them and the batch
    own = [tables[n][0] for n in "AB"]
    for kw in ({}, {"speculate": True}, {"fast_forward": True}, {"sampler": aj.Temperature(1.0)}):
        alone = [_run(model, step, params, t, **kw) for t in own]
        _rows_equal(_run(model, step, params, mixed, ids=ids, **kw), alone, ids)
    swapped = ConstraintTables.from_bitset(bts[::-1], vocab_size=vocab.size, capacity=CAPACITY)
    calls, compiled = _runs_traced(
        step, [functools.partial(_run, model, step, params, t, ids=ids) for t in (mixed, swapped)]
    )
    assert calls[1] == calls[0] and compiled[1] == compiled[0]  # no trace for the second
    with pytest.raises(
        aj.TableCapacityError, match="3 constraints, but BitsetCapacity.constraints is 2"
    ):
        ConstraintTables.from_bitset(bts + bts[:1], vocab_size=vocab.size, capacity=CAPACITY)


def test_bitset_grammar_and_plain_constraints_in_one_batch(setup, grammar, step):
    """A batch of a bitset schema, a grammar one (`BitsetPDATables`), a plain `TokenDFA`
    (bitset tables whose edges have no events) and another bitset schema: one stack block
    for all (class-level mask), each row decodes as its constraint's own tables (greedy and
    sampled with one key, plain and speculation)."""
    vocab, model, params, tables = setup
    bts = [tables["A"][2], grammar["free"][2], tables["B"][2]]
    plain = tables["plain"][2]
    cap = PDA_BATCH_CAPACITY
    mixed = ConstraintTables.from_bitset(
        [bts[0], bts[1], plain, bts[2]], vocab_size=vocab.size, capacity=cap
    )
    assert mixed.has_stack and mixed.padded_shape[0] == 4
    # the bitset constraints alone at the batch's capacity (one loop for them and the batch;
    # a capacity's padding decodes as the tight tables: the no-retrace tests); the plain DFA
    # alone through `from_dfas`, the other runtime path
    own = [ConstraintTables.from_bitset([b], vocab_size=vocab.size, capacity=cap) for b in bts]
    own.insert(2, tables["plain"][1])
    ids = (0, 1, 2, 3)
    for kw in ({}, {"speculate": True}, {"sampler": aj.Temperature(1.0)}):
        alone = [_run(model, step, params, t, **kw) for t in own]
        _rows_equal(_run(model, step, params, mixed, ids=ids, **kw), alone, ids)


def test_jaxpr_has_no_host_callbacks(setup):
    _, model, params, tables = setup
    bitset, _, _ = tables["A"]
    prompts, mask = aj.pad_prompts([[1, 2], [3]])

    def fn(params, tokens, mask, tables, ids, rng):
        return aj.generate(
            model.apply_step, params, tokens, tables, ids, sampler=aj.TopP(0.9),
            max_new_tokens=8, rng=rng, prompt_mask=mask, cache=model.init_cache,
        )  # fmt: skip

    closed = jax.make_jaxpr(fn)(
        params, prompts, mask, bitset, jnp.array([0, -1]), jax.random.key(0)
    )
    names = jaxpr_primitive_names(closed)
    assert "while" in names
    assert not host_callbacks(names), names


def test_refusals(setup, llama3_vocab):
    vocab, model, params, tables = setup
    free = ac.compile_json_schema_bitset(FREE, vocab)  # a free value: rules, a stack
    with pytest.raises(aj.TableCapacityError, match="BitsetCapacity.states is 256"):
        ConstraintTables.from_bitset(free, vocab_size=vocab.size, capacity=CAPACITY)
    union = ac.compile_json_schema_bitset(UNIONS["U3"], vocab)
    assert union.program_alts.shape[1] == 2  # a REQUIRE with alternatives: run, up to a capacity
    with pytest.raises(aj.TableCapacityError, match="expected alternatives >= 2"):
        ConstraintTables.from_bitset(
            union, vocab_size=vocab.size,
            capacity=dataclasses.replace(CAPACITY, alternatives=1),
        )  # fmt: skip
    with pytest.raises(ac.BitsetIneligible, match="declared"):
        ac.compile_json_schema_bitset(B, vocab, property_order="declared")
    bt = ac.compile_json_schema_bitset(A, vocab, whitespace="compact")
    with pytest.raises(
        aj.TableCapacityError, match=r"needs states=\d+, but BitsetCapacity.states is 8"
    ):
        ConstraintTables.from_bitset(
            bt, vocab_size=vocab.size, capacity=aj.BitsetCapacity(states=8, classes=128)
        )
    with pytest.raises(aj.RuntimeShapeError, match="BitsetCapacity"):
        ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=aj.TableCapacity(8, 8))
    with pytest.raises(aj.RuntimeShapeError, match="from_bitset"):
        ConstraintTables.from_dfas(bt, vocab_size=vocab.size)
    with pytest.raises(aj.RuntimeShapeError, match="from_bitset"):
        ConstraintTables.from_dfas([bt], vocab_size=vocab.size)
    bitset, _, _ = tables["A"]
    short, healing = aj.heal_prompts([[1, 100]], vocab.tokens, vocab_size=vocab.size)
    prompts, mask = aj.pad_prompts(short)
    with pytest.raises(aj.RuntimeShapeError, match="bitset"):
        aj.generate(
            model.apply_step, params, prompts, bitset, np.zeros(1, np.int32),
            max_new_tokens=4, rng=jax.random.key(0), prompt_mask=mask, sampler=aj.Greedy(),
            cache=model.init_cache, healing=healing,
        )  # fmt: skip
    state = aj.init_state(tables["A"][1], jnp.zeros((1,), jnp.int32))  # no bits
    with pytest.raises(aj.RuntimeShapeError, match="state.bits"):
        aj.allowed_mask(bitset, state)
