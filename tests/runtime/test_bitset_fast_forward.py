"""Fast-forward on bitset any-order tables (`ConstraintTables.from_bitset` with the forced runs
of `automata_compile.tokens._bitset_forced`): tokens, model calls and acceptance equal a
one-call-per-token Python reference loop over the NumPy rule (`reference_mask` /
`reference_advance`) that feeds each state's forced run; outputs are valid instances; the
forced arrays are the compile side's runs; no forced runs is the plain loop."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_compile.tokens import reference_advance, reference_mask
from automata_jax import ConstraintTables, testing
from automata_jax.testing import FakeModel, host_callbacks, jaxpr_primitive_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compile" / "tokens"))
from test_bitset_forced import ARRAY, NESTED, ONE  # noqa: E402

jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = {"nested": NESTED, "array": ARRAY, "one": ONE, "person": None}
CAPACITY = aj.BitsetCapacity(
    states=1024, classes=512, words=1, programs=64, conditions=256, mask_rows=256,
    cond_tokens=512, forced=8,
)  # fmt: skip
N_NEW = 48
PROMPTS = [[1, 100 + i] for i in range(4)]


@pytest.fixture(scope="module")
def setup():
    vocab = testing.default_vocabulary()
    model = FakeModel(vocab_size=vocab.size)
    params = model.init_params(3)
    compiled = {}
    for name, schema in SCHEMAS.items():
        schema = testing.example_schema() if schema is None else schema
        bt = ac.compile_json_schema_bitset(schema, vocab, whitespace="compact")
        compiled[name] = (schema, bt)
    return vocab, model, params, compiled


@functools.cache
def _jitted_step(model):
    return jax.jit(model.apply_step)


def _reference(t, model, params, prompt, n, f):
    """Greedy fast-forward of one row, one model call per fed token (the fake model is
    sequential): a state's forced run (cut to ``f``) is fed without sampling, the start's
    with the prompt."""
    runs = t.forced
    step = _jitted_step(model)  # one compile per call shape, not an eager scan per call

    def run(q):
        return runs.tokens[q, : min(runs.length[q], f)].tolist()

    q, bits = t.start, np.zeros(t.words, np.uint32)
    lead = run(q)[:n]
    tokens = jnp.asarray([prompt + lead], jnp.int32)
    cache = model.init_cache(1, len(prompt) + n + 16)
    logits, cache = step(
        params, tokens, jnp.arange(tokens.shape[1])[None], jnp.ones_like(tokens, bool), cache
    )
    last, pos, calls = np.asarray(logits[0, -1]), tokens.shape[1], 1
    for tok in lead:
        q, bits = reference_advance(t, q, bits, tok)
    out = list(lead)
    if len(out) >= n:
        return out, calls, False
    while True:
        emit = run(q)
        if emit:
            emit = emit[: n - len(out)]
        else:
            x = int(np.argmax(np.where(reference_mask(t, q, bits), last, -np.inf)))
            if x in t.eos_ids:
                return out + [x], calls, True
            q2, _ = reference_advance(t, q, bits, x)
            emit = [x] + run(q2)[: n - len(out) - 1]
        for tok in emit:
            assert reference_mask(t, q, bits)[tok]
            q, bits = reference_advance(t, q, bits, tok)
        out += emit
        if len(out) >= n:
            return out, calls, False
        for tok in emit:
            logits, cache = step(
                params, jnp.asarray([[tok]]), jnp.asarray([[pos]]), jnp.ones((1, 1), bool), cache
            )
            pos += 1
        last, calls = np.asarray(logits[0, -1]), calls + 1


def _run(model, params, tables, **kw):
    prompts, mask = aj.pad_prompts(PROMPTS)
    return jax.device_get(
        aj.generate(
            model.apply_step, params, prompts, tables, np.zeros(len(PROMPTS), np.int32),
            sampler=aj.Greedy(), max_new_tokens=N_NEW, rng=jax.random.key(0),
            prompt_mask=mask, cache=model.init_cache, **kw,
        )
    )  # fmt: skip


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_matches_the_reference_loop(name, setup):
    vocab, model, params, compiled = setup
    schema, bt = compiled[name]
    tables = ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=CAPACITY)
    assert tables.forced_tokens is not None and tables.forced_tokens.shape[2] == 8
    out = _run(model, params, tables, fast_forward=aj.FastForward(slot_cost=0))
    validator = jsonschema.Draft202012Validator(schema)
    fed = calls_made = 0
    for row, prompt in enumerate(PROMPTS):
        ref, calls, accepted = _reference(bt, model, params, prompt, N_NEW, 8)
        got = out.tokens[row].tolist()
        assert got[: len(ref)] == ref, (name, row, vocab.decode(got), vocab.decode(ref))
        assert int(out.lengths[row]) == len(ref) - accepted
        assert bool(out.accepted[row]) == accepted
        assert int(out.model_calls[row]) == calls
        if accepted:
            validator.validate(json.loads(vocab.decode(ref[:-1])))
        fed, calls_made = fed + len(ref), calls_made + calls
    assert not out.states.error.any()
    assert calls_made < fed  # the runs were fed (several tokens a call)


def test_forced_arrays_are_the_compile_sides_runs(setup):
    vocab, _, _, compiled = setup
    _, bt = compiled["one"]
    tables = ConstraintTables.from_bitset(bt, vocab_size=vocab.size)
    runs = bt.forced
    f = tables.forced_tokens.shape[2]
    assert f == int(2 ** np.ceil(np.log2(runs.length.max())))
    assert tables.bitset.capacity.forced == f
    q = bt.next_state.shape[0]
    np.testing.assert_array_equal(np.asarray(tables.forced_len[0, :q]), runs.length)
    for s in np.flatnonzero(runs.length):
        n = int(runs.length[s])
        np.testing.assert_array_equal(
            np.asarray(tables.forced_tokens[0, s, :n]), runs.tokens[s, :n]
        )
        assert int(tables.forced_states[0, s, n - 1]) == runs.next[s]


def test_no_runs_is_the_plain_loop(setup):
    vocab, model, params, compiled = setup
    schema = SCHEMAS["array"]
    bt = ac.compile_json_schema_bitset(schema, vocab, whitespace="compact", max_forced_tokens=0)
    tables = ConstraintTables.from_bitset(bt, vocab_size=vocab.size)
    assert tables.forced_tokens is None and tables.bitset.capacity.forced == 0
    on = _run(model, params, tables, fast_forward=True)
    off = _run(model, params, tables)
    np.testing.assert_array_equal(on.tokens, off.tokens)
    np.testing.assert_array_equal(on.model_calls, off.model_calls)


def test_fewer_calls_with_runs(setup):
    vocab, model, params, compiled = setup
    _, bt = compiled["array"]
    tables = ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=CAPACITY)
    on = _run(model, params, tables, fast_forward=aj.FastForward(slot_cost=0))
    off = _run(model, params, tables)
    assert on.model_calls.sum() < off.model_calls.sum()
    assert not on.states.error.any() and not off.states.error.any()
    np.testing.assert_array_equal(on.accepted, off.accepted)


def test_speculation_with_runs_gives_the_fast_forward_output(setup):
    """Speculative decoding feeds the forced runs too (their bits applied, `_bitset.run_bits`):
    greedy outputs equal fast-forward's."""
    vocab, model, params, compiled = setup
    for name in ("one", "person"):
        _, bt = compiled[name]
        tables = ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=CAPACITY)
        ff = _run(model, params, tables, fast_forward=True)
        spec = _run(model, params, tables, fast_forward=True, speculate=True)
        np.testing.assert_array_equal(spec.tokens, ff.tokens, name)
        np.testing.assert_array_equal(spec.accepted, ff.accepted)
        assert not spec.states.error.any()


@pytest.mark.parametrize("speculate", [False, True])
def test_jaxpr_has_no_host_callbacks(setup, speculate):
    vocab, model, params, compiled = setup
    tables = ConstraintTables.from_bitset(compiled["one"][1], vocab_size=vocab.size)
    prompts, mask = aj.pad_prompts([[1, 2], [3]])

    def fn(params, tokens, mask, tables, ids, rng):
        return aj.generate(
            model.apply_step, params, tokens, tables, ids, sampler=aj.TopP(0.9),
            max_new_tokens=8, rng=rng, prompt_mask=mask, cache=model.init_cache,
            fast_forward=True, speculate=speculate,
        )  # fmt: skip

    closed = jax.make_jaxpr(fn)(
        params, prompts, mask, tables, jnp.array([0, -1]), jax.random.key(0)
    )
    names = jaxpr_primitive_names(closed)
    assert "while" in names and not host_callbacks(names)


def test_a_second_schema_of_one_capacity_runs_with_no_retrace(setup):
    from automata_jax import _generate

    vocab, model, params, compiled = setup
    sizes = []
    for name in ("one", "array", "one"):
        tables = ConstraintTables.from_bitset(
            compiled[name][1], vocab_size=vocab.size, capacity=CAPACITY
        )
        assert tables.bitset.capacity == CAPACITY
        _run(model, params, tables, fast_forward=True)
        sizes.append(_generate._generate_jit._cache_size())
    assert sizes[1:] == sizes[:1] * 2


def test_tables_from_a_saved_file_decode_the_same(setup, tmp_path):
    from automata_compile.tokens import save_bitset_tables

    vocab, model, params, compiled = setup
    _, bt = compiled["one"]
    save_bitset_tables(bt, tmp_path / "one.npz", vocab_fingerprint=vocab.fingerprint)
    direct = ConstraintTables.from_bitset(bt, vocab_size=vocab.size, capacity=CAPACITY)
    loaded = ConstraintTables.from_bitset(
        tmp_path / "one.npz", vocab_size=vocab.size, capacity=CAPACITY
    )
    for a, b in zip(jax.tree.leaves(direct), jax.tree.leaves(loaded), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    out = _run(model, params, loaded, fast_forward=True)
    want = _run(model, params, direct, fast_forward=True)
    np.testing.assert_array_equal(out.tokens, want.tokens)


def test_capacity_forced_values(setup):
    vocab, _, _, compiled = setup
    assert aj.BitsetCapacity(states=8, classes=8).forced is None
    assert aj.BitsetCapacity(states=8, classes=8, forced=0).forced == 0
    for bad in (-1, 1.5, True):
        with pytest.raises(aj.RuntimeShapeError, match="forced"):
            aj.BitsetCapacity(states=8, classes=8, forced=bad)
    # F = 0 in a capacity: no runs, the plain loop; F = 1: runs cut to one token
    _, bt = compiled["one"]
    kw = {k: v for k, v in CAPACITY.__dict__.items() if k != "forced"}
    none = ConstraintTables.from_bitset(
        bt, vocab_size=vocab.size, capacity=aj.BitsetCapacity(**kw, forced=0)
    )
    assert none.forced_tokens is None and none.bitset.forced_clear is None
    one = ConstraintTables.from_bitset(
        bt, vocab_size=vocab.size, capacity=aj.BitsetCapacity(**kw, forced=1)
    )
    assert one.forced_tokens.shape[2] == 1 and int(one.forced_len.max()) == 1
