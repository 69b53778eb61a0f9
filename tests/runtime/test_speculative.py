"""Speculative decoding (`automata_jax._speculative`): identical greedy outputs, outputs in
the language, exact masks after rewinds, exact sampling distribution, a rewound cache."""

from __future__ import annotations

import inspect
import json
import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_jax import ConstraintTables, Greedy, Speculate, Temperature, TopP, testing
from automata_jax._speculative import rewind
from automata_jax.testing import FakeModel, host_callbacks, jaxpr_primitive_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from decoding_fixtures import MODEL, PAD, VOCAB, V, byte_vocab, tree_schema  # noqa: E402

PATTERNS = [r"cabab(c|a)b?", r"(a|b)cabcc(ab)*", r"abcc|c(abc){1,3}", r"(a|b|c)*", r"(ab|c)*c"]
EAGER = Speculate(slot_cost=0.0, logit_cost=0.0)  # drafts whenever a row has one


def _run(params, tables, ids, prompts, n, model=MODEL, width=None, **kw):
    tokens, mask = aj.pad_prompts(prompts, pad_id=PAD, length=width)
    kw.setdefault("sampler", Greedy())
    kw.setdefault("rng", jax.random.key(0))
    return jax.device_get(
        aj.generate(
            model.apply_step, params, tokens, tables, np.asarray(ids, np.int32), prompt_mask=mask,
            pad_id=PAD, max_new_tokens=n, cache=model.init_cache, **kw,
        )
    )  # fmt: skip


WIDTH = 9  # the random prompts' padded width: one compiled loop per configuration


def _random_prompts(rng, rows):
    """Prompts of repeated random spans (so the lookup drafts), any token, in or out of the
    language: random and adversarial drafts; at most `WIDTH` tokens."""
    prompts = []
    for _ in range(rows):
        span = rng.choice([0, 1, 2, 5, 6, 3, 7], size=rng.integers(1, 4)).tolist()
        prompts.append((span * rng.integers(1, 4) + rng.choice(8, size=2).tolist())[:9])
    return prompts


def _check_masks(tables, dfas, ids, out):
    """The final masks (after every rewind) are the oracle's for the walked output."""
    masks = np.asarray(aj.allowed_mask(tables, jax.device_put(out.states)))
    for row, k in enumerate(ids):
        n = int(out.lengths[row])
        emitted = out.tokens[row, :n].tolist()
        if k < 0:
            continue
        assert dfas[k].walk(emitted) >= 0, (row, emitted)
        if out.states.done[row]:
            assert out.accepted[row] and dfas[k].accepts(emitted)
            continue
        q = dfas[k].walk(emitted)
        assert int(out.states.state[row]) == q
        np.testing.assert_array_equal(masks[row], dfas[k].allowed(q))


@pytest.mark.parametrize("fast_forward", [False, True])
def test_greedy_outputs_are_identical(dfas, params, fast_forward):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    rng = np.random.default_rng(0)
    drafted = kept = 0
    for trial in range(4):
        prompts = _random_prompts(rng, 8)
        ids = rng.integers(-1, len(dfas), size=8).tolist()  # mixed: -1 = unconstrained
        n = [16, 5, 9, 16][trial]
        off = _run(params, tables, ids, prompts, n, width=WIDTH, fast_forward=fast_forward)
        on = _run(
            params, tables, ids, prompts, n, width=WIDTH, fast_forward=fast_forward, speculate=EAGER
        )
        np.testing.assert_array_equal(on.tokens, off.tokens)
        np.testing.assert_array_equal(on.lengths, off.lengths)
        np.testing.assert_array_equal(on.accepted, off.accepted)
        for a, b in zip(jax.tree.leaves(on.states), jax.tree.leaves(off.states), strict=True):
            np.testing.assert_array_equal(a, b)
        assert (on.model_calls <= off.model_calls).all()
        assert (on.drafts_accepted <= on.drafted).all()
        # Each call feeds one chosen token or forced run, plus the drafts it keeps.
        drafted += int(on.drafted.sum())
        kept += int(on.drafts_accepted.sum())
        _check_masks(tables, dfas, ids, on)
    assert 0 < kept < drafted  # drafts were both kept and rejected


def test_draft_keys_change_the_drafts_not_the_outputs(dfas, params):
    # Random alternate spellings (adversarial: any id, in or out of the language) and the
    # bare twins of a toy vocabulary: greedy outputs and final states are unchanged.
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    rng = np.random.default_rng(1)
    drafted = {False: 0, True: 0}
    for trial in range(3):
        prompts = _random_prompts(rng, 8)
        ids = rng.integers(-1, len(dfas), size=8).tolist()
        shape = aj.pad_prompts(prompts, pad_id=PAD, length=WIDTH)[0].shape
        keys = rng.integers(-1, V, size=shape).astype(np.int32)
        off = _run(params, tables, ids, prompts, 12, width=WIDTH, fast_forward=trial != 1)
        for keyed in (False, True):
            on = _run(
                params, tables, ids, prompts, 12, width=WIDTH, fast_forward=trial != 1,
                speculate=EAGER, draft_keys=keys if keyed else None,
            )  # fmt: skip
            np.testing.assert_array_equal(on.tokens, off.tokens)
            np.testing.assert_array_equal(on.lengths, off.lengths)
            for a, b in zip(jax.tree.leaves(on.states), jax.tree.leaves(off.states), strict=True):
                np.testing.assert_array_equal(a, b)
            drafted[keyed] += int(on.drafted.sum())
            _check_masks(tables, dfas, ids, on)
    assert drafted[True] != drafted[False]  # the keys were used


def test_the_default_policy_is_identical_and_saves_calls(dfas, params):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    prompts = [[6, 6, 6, 5, 0, 5, 0, 5], [2, 2, 2, 5]]
    off = _run(params, tables, [3, 4], prompts, 24, fast_forward=True)
    on = _run(params, tables, [3, 4], prompts, 24, fast_forward=True, speculate=True)
    np.testing.assert_array_equal(on.tokens, off.tokens)
    assert on.model_calls.sum() <= off.model_calls.sum()


@pytest.mark.parametrize(
    "spec",
    [
        # branches with fewer logit slots, the linear cost model
        Speculate(logit_slots=(2, 3, 5), slot_cost=0.0, logit_cost=0.01),
        # a measured table (wide calls cheap, so the policy drafts) with fewer logit slots
        Speculate(
            logit_slots=(2, 5),
            call_costs=((1, 1, 1.0), (3, 1, 1.01), (5, 2, 1.02), (5, 5, 1.05), (8, 5, 1.06)),
        ),
        # a table that makes every speculative call dear: drafts never pay
        Speculate(call_costs=((1, 1, 1.0), (9, 5, 40.0))),
    ],
)
def test_logit_slots_and_measured_costs_keep_greedy_outputs(dfas, params, spec):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    rng = np.random.default_rng(3)
    drafted = 0
    for trial in range(3):
        prompts = _random_prompts(rng, 8)
        ids = rng.integers(-1, len(dfas), size=8).tolist()
        off = _run(params, tables, ids, prompts, 14, width=WIDTH, fast_forward=trial != 1)
        on = _run(
            params, tables, ids, prompts, 14, width=WIDTH, fast_forward=trial != 1, speculate=spec
        )
        np.testing.assert_array_equal(on.tokens, off.tokens)
        for a, b in zip(jax.tree.leaves(on.states), jax.tree.leaves(off.states), strict=True):
            np.testing.assert_array_equal(a, b)
        drafted += int(on.drafted.sum())
        _check_masks(tables, dfas, ids, on)
    if spec.call_costs is not None and spec.call_costs[-1][2] > 10:
        assert drafted == 0  # every speculative branch costs more than any row can save
    else:
        assert drafted > 0


def test_branches_and_their_costs():
    from automata_jax._fast_forward import FastForward
    from automata_jax._speculative import branches, extra_cost

    ff = FastForward().resolve(full_width=4)
    spec = Speculate(logit_slots=(2, 3)).resolve(forced=3)
    assert branches(spec, ff) == tuple((w, 1) for w in ff.widths) + (
        (5, 2), (5, 3), (8, 2), (8, 3),
    )  # fmt: skip
    assert branches(Speculate().resolve(forced=3), ff)[-2:] == ((5, 5), (8, 5))
    linear = Speculate(slot_cost=0.1, logit_cost=0.2)
    assert extra_cost(linear, ff, 5, 3) == pytest.approx(0.1 * 4 + 0.2 * 2)
    assert extra_cost(linear, ff, 4, 1) == pytest.approx(ff.slot_cost * 3)
    table = Speculate(call_costs=((1, 1, 0.5), (4, 1, 0.6), (5, 3, 0.8), (9, 5, 1.0)))
    assert extra_cost(table, ff, 1, 1) == 0.0
    assert extra_cost(table, ff, 3, 1) == pytest.approx(0.2)  # the cheapest call >= (3, 1)
    assert extra_cost(table, ff, 5, 2) == pytest.approx(0.6)
    assert extra_cost(table, ff, 9, 5) == pytest.approx(1.0)
    assert extra_cost(table, ff, 10, 5) == pytest.approx(0.05 * 9 + 0.1 * 4)  # linear
    with pytest.raises(aj.RuntimeShapeError, match="logit_slots"):
        Speculate(logit_slots=(1,))
    with pytest.raises(aj.RuntimeShapeError, match="call_costs"):
        Speculate(call_costs=((2, 3, 1.0),))
    with pytest.raises(aj.RuntimeShapeError, match="call_costs"):
        Speculate(call_costs=((2, 1, float("nan")),))
    with pytest.raises(aj.RuntimeShapeError, match="call_costs"):
        Speculate(call_costs=((2, 1),))


def test_sampled_outputs_are_in_the_language(dfas, params):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    rng = np.random.default_rng(1)
    for seed in range(3):
        prompts = _random_prompts(rng, 8)
        ids = rng.integers(0, len(dfas), size=8).tolist()
        out = _run(
            params, tables, ids, prompts, 16, width=WIDTH, sampler=TopP(0.9),
            rng=jax.random.key(seed), fast_forward=bool(seed % 2), speculate=EAGER,
        )  # fmt: skip
        assert not out.states.error.any()
        _check_masks(tables, dfas, ids, out)


def test_sampling_distribution_is_unchanged(dfas, params):
    """A point-mass draft is kept iff the sample equals it: the token distribution at each
    step is the model's (marginals of 4096 rows, with and without drafts)."""
    model = FakeModel(vocab_size=V, scale=1.0)
    params = model.init_params(3)
    tables = ConstraintTables.from_dfas([dfas[3]], vocab_size=V)
    rows = 4096
    prompts = [[0, 1, 0, 1, 0, 1, 0]] * rows
    kw = dict(sampler=Temperature(1.0), fast_forward=False, model=model)
    off = _run(params, tables, [0] * rows, prompts, 4, rng=jax.random.key(1), **kw)
    on = _run(params, tables, [0] * rows, prompts, 4, rng=jax.random.key(2), speculate=EAGER, **kw)
    assert on.drafts_accepted.sum() > rows // 8
    for step in range(4):
        p = np.bincount(off.tokens[:, step], minlength=V) / rows
        q = np.bincount(on.tokens[:, step], minlength=V) / rows
        assert 0.5 * np.abs(p - q).sum() < 0.04, (step, p, q)


def test_grammar_and_schema_rows_in_one_batch(params):
    """A recursive schema (a PDA) and a flat one (a DFA) with unconstrained rows, over a byte
    vocabulary with multi-byte tokens; prompts hold JSON to copy."""
    pieces = [bytes([c]) for c in range(256)] + [b'": "', b'", "', b'{"', b'"}', b"ab"]
    vocab = ac.Vocabulary.from_bytes(pieces + [None, None], eos_ids=[len(pieces)],
                                     special_ids=[len(pieces), len(pieces) + 1])  # fmt: skip
    tree = {
        "type": "object",
        "properties": {
            "n": {"type": "string", "maxLength": 6},
            "k": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2},
        },
        "required": ["n", "k"],
        "additionalProperties": False,
    }
    flat = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    pda = ac.compile_json_schema(tree, vocab, whitespace="compact")
    dfa = ac.compile_json_schema(flat, vocab, whitespace="compact")
    assert pda.is_pda and not dfa.is_pda
    v = vocab.size
    model = FakeModel(vocab_size=v)
    mparams = model.init_params(5)
    tables = ConstraintTables.from_dfas([pda, dfa], vocab_size=v)
    docs = ['{"n": "ab", "k": [{"n": "x", "k": []}]}', '{"a": "abab", "b": 12}', "abababab"]
    prompts = [list(d.encode()) for d in docs] * 2
    ids = [0, 1, -1, 1, 0, 0]
    kw = dict(model=model)
    for ff in (False, True):
        off = _run(mparams, tables, ids, prompts, 40, fast_forward=ff, **kw)
        on = _run(mparams, tables, ids, prompts, 40, fast_forward=ff, speculate=EAGER, **kw)
        np.testing.assert_array_equal(on.tokens, off.tokens)
        for a, b in zip(jax.tree.leaves(on.states), jax.tree.leaves(off.states), strict=True):
            np.testing.assert_array_equal(a, b)
        assert on.drafted.sum() > 0
        masks = np.asarray(aj.allowed_mask(tables, jax.device_put(on.states)))
        for row, k in enumerate(ids):
            if k < 0:
                continue
            emitted = on.tokens[row, : int(on.lengths[row])].tolist()
            automaton = [pda, dfa][k]
            config = automaton.walk_config(emitted)
            assert config is not None, emitted
            if on.accepted[row]:
                json.loads(vocab.decode(emitted))
            elif not on.states.done[row]:
                np.testing.assert_array_equal(masks[row], automaton.allowed(*config))


def test_a_rewound_cache_decodes_like_an_unrewound_one():
    model, params = testing.tiny_model(vocab_size=64)
    step = jax.jit(model.apply_step)  # one program per shape, not one per operation
    prompt = jnp.asarray([[5, 6, 7], [8, 9, 10]], jnp.int32)
    pos = jnp.asarray([[0, 1, 2], [0, 1, 2]], jnp.int32)
    ones = jnp.ones((2, 3), bool)
    cache = model.init_cache(2, 16)
    _, cache = step(params, prompt, pos, ones, cache)
    # Feed 4 drafts per row; keep 1 and 3 of them.
    chunk = jnp.asarray([[11, 12, 13, 14], [15, 16, 17, 18]], jnp.int32)
    start = cache.end_index
    _, spec = step(
        params, chunk, 3 + jnp.arange(4)[None].repeat(2, 0), jnp.ones((2, 4), bool), cache
    )
    spec = rewind(spec, start, jnp.asarray([1, 3]), 4)
    assert int(spec.end_index) == int(start) + 3
    nxt = jnp.asarray([[20], [21]], jnp.int32)
    got, _ = step(params, nxt, jnp.asarray([[4], [6]]), jnp.ones((2, 1), bool), spec)
    for row, kept in enumerate([1, 3]):
        seq = jnp.concatenate([prompt[row], chunk[row, :kept], nxt[row]])[None]
        ref, _ = step(params, seq, jnp.arange(seq.shape[1])[None],
                      jnp.ones(seq.shape, bool), model.init_cache(1, 16))  # fmt: skip
        np.testing.assert_allclose(got[row, 0], ref[0, -1], atol=1e-5, rtol=1e-5)


def test_tiny_gemma_greedy_outputs_are_identical():
    model, params = testing.tiny_model(vocab_size=64)
    vocab = ac.Vocabulary.from_bytes(
        [bytes([c]) for c in range(97, 97 + 26)] + [b" "] + [None] * 37, eos_ids=[27],
        special_ids=list(range(27, 64)),
    )  # fmt: skip
    dfas = [ac.compile_regex(p, vocab) for p in (r"(abc|cab)+ d?", r"[a-e]{3,9}")]
    tables = ConstraintTables.from_dfas(dfas, vocab_size=64)
    prompts = [[0, 1, 2, 0, 1, 2, 0], [2, 0, 1, 2, 0, 1], [3, 4, 3, 4, 3], [1, 1, 1]]
    ids = [0, 0, 1, -1]
    off = _run(params, tables, ids, prompts, 10, model=model)
    on = _run(params, tables, ids, prompts, 10, model=model, speculate=EAGER)
    np.testing.assert_array_equal(on.tokens, off.tokens)
    assert on.drafted.sum() > 0


# Prompts whose copies the loops draft (a constrained row keeps its draft, an unconstrained
# row's are rejected), so the loop-body tests verify drafts on both forms of the loop.
LOOP_PROMPTS = [[2, 1, 2, 1], [5, 5, 5, 1, 0]]
LOOP_IDS = [0, -1]
MEASURED = Speculate(logit_slots=(2, 3, 5), call_costs=((1, 1, 1.0), (4, 1, 1.2), (9, 5, 1.6)))


@pytest.mark.parametrize("spec", [True, MEASURED])
def test_jaxpr_has_no_host_callbacks_and_no_retrace(dfas, params, spec):
    from automata_jax import _generate

    tables = ConstraintTables.from_dfas(dfas[:2], vocab_size=V)
    tokens, mask = aj.pad_prompts([[1, 2], [3]], pad_id=PAD)

    def fn(params, tokens, mask, tables, ids, rng, keys=None):
        return aj.generate(
            MODEL.apply_step, params, tokens, tables, ids, sampler=TopP(0.9), max_new_tokens=8,
            rng=rng, prompt_mask=mask, cache=MODEL.init_cache, pad_id=PAD, fast_forward=True,
            speculate=spec, draft_keys=keys,
        )  # fmt: skip

    keys = aj.draft_keys(tokens, aj.bare_twins(VOCAB.tokens))
    for extra in ((), (keys,)):  # without and with draft keys (a traced input)
        closed = jax.make_jaxpr(fn)(
            params, tokens, mask, tables, jnp.array([0, 1]), jax.random.key(0), *extra
        )
        names = jaxpr_primitive_names(closed)
        assert {"while", "cond"} <= names
        assert not host_callbacks(names), names
    other = ConstraintTables.from_dfas(
        [ac.compile_regex(p, VOCAB) for p in (r"bcabab(a|b)", r"ccab|cbb")], vocab_size=V
    )
    assert jax.tree.map(jnp.shape, other) == jax.tree.map(jnp.shape, tables)
    # LOOP_PROMPTS' shape: the loop test below runs this compiled program again.
    _run(params, tables, [0, 1], [[1], [2]], 8, width=5, fast_forward=True, speculate=spec)
    before = _generate._generate_jit._cache_size()
    out = _run(params, other, [1, 0], [[2], [5]], 8, width=5, fast_forward=True, speculate=spec)
    assert _generate._generate_jit._cache_size() == before
    assert not out.states.error.any()


def _control_flow(jaxpr, skip_file, counts=None):
    """Counts of the control-flow primitives (``while``, ``scan``, ``cond``) in ``jaxpr``
    and its sub-jaxprs, except those traced from ``skip_file`` (the model's own)."""
    counts = {"while": 0, "scan": 0, "cond": 0} if counts is None else counts
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        tb = eqn.source_info.traceback
        if tb is not None and any(f.file_name == skip_file for f in tb.frames):
            continue
        if eqn.primitive.name in counts:
            counts[eqn.primitive.name] += 1
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else (param,):
                if isinstance(sub, (jax.extend.core.ClosedJaxpr, jax.extend.core.Jaxpr)):
                    _control_flow(sub, skip_file, counts)
    return counts


def _decode_loop(jaxpr):
    """The (outermost) ``while`` equation of a jaxpr: the decode loop."""
    for eqn in getattr(jaxpr, "jaxpr", jaxpr).eqns:
        if eqn.primitive.name == "while":
            return eqn
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else (param,):
                if isinstance(sub, (jax.extend.core.ClosedJaxpr, jax.extend.core.Jaxpr)):
                    found = _decode_loop(sub)
                    if found is not None:
                        return found
    return None


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("spec", [True, MEASURED])
def test_the_loop_body_has_no_inner_loops_and_few_branches(
    dfas, params, spec, backend, monkeypatch
):
    """Per iteration, the speculative loop walks its draft twice (reused, not walked again
    for the exit, the structural draft and the verification), with no inner loop on an
    accelerator (the walks unrolled over the static draft length: on XLA:GPU each trip of a
    loop reads its predicate back to the host) and two scans on the CPU; it has two
    conditionals on the CPU, the width switch and the verification's skip of the slots no
    row drafted, and one on an accelerator (the switch: the verification computes every
    slot and selects; `automata_jax._loop.branch_free`); greedy outputs are the same, with
    some drafts kept (saving calls) and some rejected."""
    tables = ConstraintTables.from_dfas(dfas[:2], vocab_size=V)
    # The reference: compiled once for the four cases (on the CPU's own branches).
    off = _run(params, tables, LOOP_IDS, LOOP_PROMPTS, 8, fast_forward=True)
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    tokens, mask = aj.pad_prompts(LOOP_PROMPTS, pad_id=PAD)

    def fn(params):
        return aj.generate(
            MODEL.apply_step, params, tokens, tables, jnp.array(LOOP_IDS), sampler=Greedy(),
            max_new_tokens=8, rng=jax.random.key(0), prompt_mask=mask, cache=MODEL.init_cache,
            pad_id=PAD, fast_forward=True, speculate=spec,
        )  # fmt: skip

    loop = _decode_loop(jax.make_jaxpr(fn)(params))
    model_file = inspect.getsourcefile(type(MODEL))
    body = _control_flow(loop.params["body_jaxpr"], model_file)
    # the CPU: two walks (the copy's and the whole draft's) as scans, and the two conds
    expected = (
        {"while": 0, "scan": 2, "cond": 2}
        if backend == "cpu"
        else {"while": 0, "scan": 0, "cond": 1}
    )
    assert body == expected, body
    # The program the jaxpr is of (on the CPU, the one the test above compiled).
    on = _run(params, tables, LOOP_IDS, LOOP_PROMPTS, 8, fast_forward=True, speculate=spec)
    np.testing.assert_array_equal(on.tokens, off.tokens)
    # Drafts were verified, some kept and some rejected, and the kept ones saved calls.
    assert (on.drafts_accepted <= on.drafted).all()
    assert 0 < on.drafts_accepted.sum() < on.drafted.sum(), (on.drafted, on.drafts_accepted)
    assert on.model_calls.sum() < off.model_calls.sum()


def test_bad_policies_and_caches():
    with pytest.raises(aj.RuntimeShapeError, match="exit_drafts"):
        Speculate(exit_drafts="yes")
    with pytest.raises(aj.RuntimeShapeError, match="lone_exits"):
        Speculate(lone_exits=1)
    with pytest.raises(aj.RuntimeShapeError, match="structure_copies"):
        Speculate(structure_copies=None)
    with pytest.raises(aj.RuntimeShapeError, match="draft_len"):
        Speculate(draft_len=0)
    with pytest.raises(aj.RuntimeShapeError, match="ngram_sizes"):
        Speculate(ngram_sizes=(0,))
    with pytest.raises(aj.RuntimeShapeError, match="widths"):
        Speculate(widths=(1,))
    with pytest.raises(aj.RuntimeShapeError, match="logit_cost"):
        Speculate(logit_cost=-1)
    tables = ConstraintTables.from_dfas([ac.compile_regex("ab", VOCAB)], vocab_size=V)
    with pytest.raises(aj.RuntimeShapeError, match="speculate"):
        _run(None, tables, [0], [[1]], 4, speculate="yes")
    with pytest.raises(aj.RuntimeShapeError, match="draft_keys: only used with speculate"):
        _run(None, tables, [0], [[1]], 4, draft_keys=np.zeros((1, 1), np.int32))
    with pytest.raises(aj.RuntimeShapeError, match=r"draft_keys: expected the prompts' shape"):
        _run(None, tables, [0], [[1]], 4, speculate=True, draft_keys=np.zeros((1, 2), np.int32))
    tokens, mask = aj.pad_prompts([[1]], pad_id=PAD)
    with pytest.raises(aj.RuntimeShapeError, match="speculate expected"):
        aj.generate(
            MODEL.apply_step, None, tokens, tables, np.zeros(1, np.int32), sampler=Greedy(),
            max_new_tokens=4, rng=jax.random.key(0), cache={"end_index": 0}, speculate=True,
        )  # fmt: skip


@pytest.fixture(scope="module")
def json_batch():
    """JSON Schemas (a DFA and a PDA), a regex and unconstrained rows in one batch, over a
    byte vocabulary where ``":"",`` makes ``":"`` after a key a choice; prompts, the job's
    keys (clause stops), and the greedy outputs without drafts. Shared by the exit and the
    structural drafts tests, so their loops compile once (the same tables and shapes)."""
    vocab = byte_vocab([b'","', b'",', b'":"', b'":"",', b'"}', b',"', b"ab"])
    v = vocab.size
    flat = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 6}, "b": {"type": "integer"},
                       "c": {"type": "string", "maxLength": 5}, "d": {"type": "integer"}},
        "required": ["a", "b", "c", "d"],
        "additionalProperties": False,
    }  # fmt: skip
    options = dict(whitespace="compact", property_order="declared")
    dfas = [
        ac.compile_json_schema(flat, vocab, **options),
        ac.compile_json_schema(tree_schema(), vocab, **options),
        ac.compile_regex(r"x(ab|c)*,yz(q|r)", vocab),
    ]
    tables = ConstraintTables.from_dfas(dfas, vocab_size=v)
    model = FakeModel(vocab_size=v)
    mparams = model.init_params(7)
    docs = ["ab, 12, abc ab.", '{"n": "ab", "k": []}', "xabc,yzq ab", "ab ab, ab ab"]
    prompts = [list(d.encode()) for d in docs] * 2
    ids = [0, 1, 2, -1, 0, 0, 2, 1]
    tokens = aj.pad_prompts(prompts, pad_id=PAD)[0]
    clause = aj.draft_keys(tokens, aj.bare_twins(vocab.tokens, lowercase_stops=True))
    kw = dict(model=model, fast_forward=True)
    off = _run(mparams, tables, ids, prompts, 32, **kw)
    return dict(vocab=vocab, tables=tables, mparams=mparams, prompts=prompts, ids=ids,
                tokens=tokens, clause=clause, kw=kw, off=off)  # fmt: skip


def _same_outputs(on, off):
    """Greedy outputs, lengths and final states equal; no row keeps more than it drafted."""
    np.testing.assert_array_equal(on.tokens, off.tokens)
    np.testing.assert_array_equal(on.lengths, off.lengths)
    for a, b in zip(jax.tree.leaves(on.states), jax.tree.leaves(off.states), strict=True):
        np.testing.assert_array_equal(a, b)
    assert (on.drafts_accepted <= on.drafted).all()


def test_exit_drafts_change_the_drafts_not_the_outputs(json_batch):
    """Exit drafts (a copy that stops goes on with the exit token and its forced run; with
    lone exits, an empty copy inside a value drafts the exit alone) over
    JSON Schemas (a DFA and a PDA), a regex and unconstrained rows in one batch, with the
    job's keys (clause stops) and random adversarial keys: greedy outputs and final states
    equal decoding without drafts, and without exit drafts."""
    b = json_batch
    vocab, tables, tokens, off = b["vocab"], b["tables"], b["tokens"], b["off"]
    assert tables.exit_tokens is not None
    v = vocab.size
    rng = np.random.default_rng(3)
    adversarial = rng.integers(-3 - v, v, size=tokens.shape).astype(np.int32)  # twins, stops
    no_exits = Speculate(slot_cost=0.0, logit_cost=0.0, exit_drafts=False)
    no_lone = Speculate(slot_cost=0.0, logit_cost=0.0, lone_exits=False)
    run_copies = Speculate(slot_cost=0.0, logit_cost=0.0, structure_copies=True)
    run = partial(_run, b["mparams"], tables, b["ids"], b["prompts"], 32, **b["kw"])
    drafted = {}
    for name, keys in (("clause", b["clause"]), ("adversarial", adversarial)):
        for spec in (EAGER, no_lone, no_exits, run_copies):
            on = run(speculate=spec, draft_keys=keys)
            _same_outputs(on, off)
            drafted[name, spec] = int(on.drafted.sum())
    assert drafted["clause", no_lone] != drafted["clause", no_exits]  # exits drafted
    assert drafted["clause", EAGER] != drafted["clause", no_lone]  # lone exits too
    # Copies at the constraint's structure (the output's own `":"`) change the drafts.
    assert drafted["clause", run_copies] != drafted["clause", EAGER]
    # Bare spellings: the job's (the toy vocabulary's own encoder) and random ids, -1 and
    # ids outside the vocabulary (ignored) after random keys (as many spellings as the
    # job's: one key shape, one compiled loop).
    spelled = aj.bare_spellings(vocab.tokens, vocab.encode, np.unique(tokens))
    job = aj.draft_keys(tokens, aj.bare_twins(vocab.tokens), spelled)
    random_spellings = rng.integers(-2, v + 3, size=job.shape[:2] + (job.shape[2] - 1,))
    for keys in (job, np.concatenate([adversarial[..., None], random_spellings], axis=-1)):
        _same_outputs(run(speculate=EAGER, draft_keys=keys.astype(np.int32)), off)


def test_structural_drafts_change_the_drafts_not_the_outputs(json_batch):
    """Structural drafts (`Speculate.structure_drafts`: ``":"`` after a key, where ``":"",``
    makes it a choice) over JSON Schemas (a DFA and a PDA), a regex and unconstrained rows,
    with the compiled tables and with random adversarial ones (any id, allowed or not):
    greedy outputs and final states equal decoding without drafts."""
    b = json_batch
    vocab, tables, off = b["vocab"], b["tables"], b["off"]
    v = vocab.size
    drafts = np.asarray(tables.structure_drafts)
    # After the keys "a" (in the start's run) and "c": '":"' (an empty value's '":"",' too).
    assert vocab.tokens.index(b'":"') in drafts[0]
    rng = np.random.default_rng(5)
    adversarial = tables.replace(
        structure_drafts=jnp.asarray(rng.integers(-1, v, size=drafts.shape), jnp.int32)
    )
    drafted = {}
    for name, tabs in (("compiled", tables), ("adversarial", adversarial)):
        run = partial(_run, b["mparams"], tabs, b["ids"], b["prompts"], 32, **b["kw"])
        for spec in (Speculate(structure_drafts=True),
                     Speculate(slot_cost=0.0, logit_cost=0.0, structure_drafts=True),
                     Speculate(slot_cost=0.0, logit_cost=0.0, structure_drafts=True,
                               exit_drafts=False)):  # fmt: skip
            on = run(speculate=spec, draft_keys=b["clause"])
            _same_outputs(on, off)
            drafted[name, spec.slot_cost, spec.exit_drafts] = int(on.drafted.sum())
    without = Speculate(slot_cost=0.0, logit_cost=0.0, structure_drafts=False)
    run = partial(_run, b["mparams"], tables, b["ids"], b["prompts"], 32, **b["kw"])
    plain = run(speculate=without, draft_keys=b["clause"])
    assert drafted["compiled", 0.0, True] != int(plain.drafted.sum())  # it drafts more


def test_cache_length_is_what_generate_allocates(dfas, params):
    """`cache_length` (used by the job to build a prefix cache ahead) equals the length
    `generate` asks its cache init function for, with and without chunked calls. The loop
    asks while it is traced, so `jax.eval_shape` runs generate's own code without compiling
    the eight loops."""
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    assert tables.forced_tokens is not None
    tokens, mask = aj.pad_prompts([[0, 1, 2], [5]], pad_id=PAD)
    for ff, spec in ((False, False), (True, False), (False, True), (True, EAGER)):
        for n in (5, 20):
            asked = []

            def init_cache(b, length, asked=asked):
                asked.append(length)
                return MODEL.init_cache(b, length)

            jax.eval_shape(
                lambda init_cache=init_cache, ff=ff, spec=spec, n=n: aj.generate(
                    MODEL.apply_step, params, tokens, tables, np.asarray([0, 1], np.int32),
                    sampler=Greedy(), max_new_tokens=n, rng=jax.random.key(0),
                    prompt_mask=mask, pad_id=PAD, cache=init_cache, fast_forward=ff,
                    speculate=spec,
                )
            )  # fmt: skip
            want = aj.cache_length(tokens.shape[1], n, tables, fast_forward=ff, speculate=spec)
            assert asked == [want], (ff, spec, n)
