"""Fast-forward decoding (`automata_jax._fast_forward`) against a Python reference loop."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import automata_compile as ac
import automata_jax as aj
from automata_jax import ConstraintTables, Greedy, TopP, _generate, testing
from automata_jax.testing import FakeModel, host_callbacks, jaxpr_primitive_names

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from decoding_fixtures import EOS, MODEL, PAD, VOCAB, V, byte_vocab, tree_schema  # noqa: E402

PATTERNS = [r"cabab(c|a)b?", r"(a|b)cabcc(ab)*", r"abcc|c(abc){1,3}", r"(a|b|c)*"]
PROMPTS = [[1, 2, 5], [0], [5, 6], [7, 0, 1, 2]]


def _reference(dfa, params, prompt, n, rng=None):
    """Fast-forward decoding of one row, one model call per fed token, greedy. The start
    state's forced run (its lead) is fed with the prompt, in the prefill."""
    lead = dfa.forced_run(dfa.start)[0][:n]
    tokens = jnp.asarray([prompt + lead], jnp.int32)
    cache = MODEL.init_cache(1, len(prompt) + n + 16)
    logits, cache = MODEL.apply_step(
        params, tokens, jnp.arange(tokens.shape[1])[None], jnp.ones_like(tokens, bool), cache
    )
    last, pos, q, out, calls = np.asarray(logits[0, -1]), tokens.shape[1], dfa.start, [], 1
    for t in lead:
        q = dfa.advance(q, t)
    out = list(lead)
    if len(out) >= n:
        return out, calls, False
    while True:
        run, _ = dfa.forced_run(q)
        if run:
            emit = run[: n - len(out)]
        else:
            x = int(np.argmax(np.where(dfa.allowed(q), last, -np.inf)))
            if x == EOS:
                return out + [EOS], calls, True
            run, _ = dfa.forced_run(dfa.advance(q, x))
            emit = [x] + run[: n - len(out) - 1]
        for t in emit:
            q = dfa.advance(q, t)
            assert q >= 0
        out += emit
        if len(out) >= n:
            return out, calls, False
        for t in emit:  # the chunk, fed token by token (the fake model is sequential)
            logits, cache = MODEL.apply_step(
                params, jnp.asarray([[t]]), jnp.asarray([[pos]]), jnp.ones((1, 1), bool), cache
            )
            pos += 1
        last, calls = np.asarray(logits[0, -1]), calls + 1


def _run(params, tables, ids, prompts, n, *, step=MODEL.apply_step, **kw):
    tokens, mask = aj.pad_prompts(prompts, pad_id=PAD)
    kw.setdefault("sampler", Greedy())
    kw.setdefault("cache", MODEL.init_cache)
    kw.setdefault("rng", jax.random.key(0))
    kw.setdefault("fast_forward", True)
    return jax.device_get(
        aj.generate(
            step, params, tokens, tables, np.asarray(ids, np.int32), prompt_mask=mask,
            pad_id=PAD, max_new_tokens=n, **kw,
        )
    )  # fmt: skip


def test_runs_exist(dfas):
    assert all(dfas[i].forced_len.max() > 0 for i in range(3)) and dfas[3].forced_len.max() == 0


@pytest.mark.parametrize("n", [12, 5, 2])
def test_matches_the_reference_loop(dfas, params, n):
    """Tokens, lengths, model calls and acceptance equal a one-call-per-token reference
    (the policy that chunks whenever a row gains: ``slot_cost=0``)."""
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    ids = [0, 1, 2, 3]
    out = _run(params, tables, ids, PROMPTS, n, fast_forward=aj.FastForward(slot_cost=0))
    for row, k in enumerate(ids):
        ref, calls, accepted = _reference(dfas[k], params, PROMPTS[row], n)
        got = out.tokens[row].tolist()
        assert got[: len(ref)] == ref and set(got[len(ref) :]) <= {PAD}, (k, got, ref)
        assert int(out.lengths[row]) == len(ref) - accepted
        assert bool(out.accepted[row]) == accepted
        assert int(out.model_calls[row]) == calls
        # The final DFA state is the walk of the output (the masks after it are the DFA's).
        if not accepted:
            assert int(out.states.state[row]) == dfas[k].walk(ref)


def test_fewer_calls_and_outputs_in_the_language(dfas, params):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    prompts = [[i % 7] for i in range(16)]
    ids = [i % 3 for i in range(16)]
    for seed in range(3):
        kw = dict(sampler=TopP(0.95), rng=jax.random.key(seed))
        on = _run(params, tables, ids, prompts, 16, **{**kw})
        off = jax.device_get(
            aj.generate(
                MODEL.apply_step, params, *map(np.asarray, aj.pad_prompts(prompts, PAD)[:1]),
                tables, np.asarray(ids, np.int32), prompt_mask=aj.pad_prompts(prompts, PAD)[1],
                pad_id=PAD, max_new_tokens=16, cache=MODEL.init_cache, **kw,
            )
        )  # fmt: skip
        assert not on.states.error.any() and on.accepted.all()
        for row, k in enumerate(ids):
            n = int(on.lengths[row])
            assert dfas[k].accepts(on.tokens[row, :n].tolist())
            assert on.tokens[row, n] == EOS
        assert on.model_calls.sum() < off.model_calls.sum()
        np.testing.assert_array_equal(off.model_calls, off.lengths + 1)  # one call per token


def test_nothing_forced_is_the_plain_loop(dfas, params):
    """Tables that force nothing: fast_forward=True runs the plain loop (same outputs)."""
    tables = ConstraintTables.from_dfas([dfas[3]], vocab_size=V)
    assert tables.forced_tokens is None
    tokens, mask = aj.pad_prompts(PROMPTS, pad_id=PAD)
    kw = dict(
        sampler=TopP(0.9), max_new_tokens=10, rng=jax.random.key(3), prompt_mask=mask,
        pad_id=PAD, cache=MODEL.init_cache,
    )  # fmt: skip
    a = aj.generate(MODEL.apply_step, params, tokens, tables, np.zeros(4, np.int32), **kw)
    b = aj.generate(
        MODEL.apply_step, params, tokens, tables, np.zeros(4, np.int32), fast_forward=True, **kw
    )
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def test_unconstrained_rows_ride_along(dfas, params):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    out = _run(params, tables, [0, -1, 1, -1], PROMPTS, 8, sampler=TopP(0.9))
    assert not out.states.error.any()
    assert dfas[0].accepts(out.tokens[0, : out.lengths[0]].tolist()) or not out.accepted[0]


def test_gemma_logits_at_matches_full_logits():
    from automata_jax.models import Gemma3, Gemma3Config

    model = Gemma3(Gemma3Config.tiny(vocab_size=64))
    params = model.init_params(0)
    cache = model.init_cache(2, 8)
    tokens = jnp.array([[1, 2, 3], [4, 5, 6]])
    pos = jnp.arange(3)[None].repeat(2, 0)
    mask = jnp.array([[True, True, True], [True, True, False]])
    full, c1 = model.apply_step(params, tokens, pos, mask, cache)
    some, c2 = model.apply_step(params, tokens, pos, mask, cache, logits_at=jnp.array([2, 1]))
    np.testing.assert_allclose(some[:, 0], full[jnp.arange(2), jnp.array([2, 1])], atol=1e-5)
    assert int(c1.end_index) == int(c2.end_index) == 3


def _forwarder(*args, **kwargs):  # undeclared: cannot say whether it takes logits_at
    return MODEL.apply_step(*args, **kwargs)


def _declared(*args, **kwargs):
    return MODEL.apply_step(*args, **kwargs)


_declared.takes_logits_at = False


def test_accepts_logits_at_reads_the_declared_capability_first():
    """A declared ``takes_logits_at`` wins over the signature, through bound methods,
    callable objects, `functools.partial` and `jax.jit`; an undeclared ``**kwargs``
    forwarder (session 11's bug: it hid the keyword) is an error, never a silent False."""
    import functools

    from automata_jax._fast_forward import accepts_logits_at
    from automata_jax.models import Gemma3, Gemma3Config
    from automata_jax.models.gemma3 import apply_step

    def plain(params, tokens, positions, input_mask, cache, logits_at=None):
        return None

    def without(params, tokens, positions, input_mask, cache):
        return None

    def only_args(*args):
        return None

    assert accepts_logits_at(plain) and not accepts_logits_at(without)
    assert not accepts_logits_at(only_args)  # cannot take the keyword at all
    plain.takes_logits_at = False
    assert not accepts_logits_at(plain)  # declared beats the signature

    class Model:
        def step(self, *args, **kwargs):
            return None

        step.takes_logits_at = True

    class Callable:
        takes_logits_at = True

        def __call__(self, *args, **kwargs):
            return None

    assert accepts_logits_at(Model().step) and accepts_logits_at(Callable())
    model = Gemma3(Gemma3Config.tiny(vocab_size=64))
    assert accepts_logits_at(model.apply_step)
    assert accepts_logits_at(functools.partial(apply_step, model.config))
    assert accepts_logits_at(jax.jit(model.apply_step))
    assert not accepts_logits_at(_declared) and not accepts_logits_at(MODEL.apply_step)
    with pytest.raises(aj.RuntimeShapeError, match="takes_logits_at"):
        accepts_logits_at(_forwarder)
    with pytest.raises(aj.RuntimeShapeError, match="takes_logits_at"):
        accepts_logits_at(functools.partial(_forwarder))


@pytest.mark.parametrize("fast_forward", [False, True])
def test_generate_refuses_an_undeclared_forwarder(dfas, params, fast_forward):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    tokens, mask = aj.pad_prompts([[1, 2], [3]], pad_id=PAD)
    with pytest.raises(aj.RuntimeShapeError, match="takes_logits_at"):
        aj.generate(
            _forwarder, params, tokens, tables, jnp.array([0, 1]), max_new_tokens=4, sampler=Greedy(), rng=jax.random.key(0),
            prompt_mask=mask, cache=MODEL.init_cache, pad_id=PAD, fast_forward=fast_forward,
        )  # fmt: skip
    out = aj.generate(
        _declared, params, tokens, tables, jnp.array([0, 1]), max_new_tokens=4, sampler=Greedy(), rng=jax.random.key(0),
        prompt_mask=mask, cache=MODEL.init_cache, pad_id=PAD, fast_forward=fast_forward,
    )  # fmt: skip
    ref = aj.generate(
        MODEL.apply_step, params, tokens, tables, jnp.array([0, 1]), max_new_tokens=4, sampler=Greedy(), rng=jax.random.key(0),
        prompt_mask=mask, cache=MODEL.init_cache, pad_id=PAD, fast_forward=fast_forward,
    )  # fmt: skip
    np.testing.assert_array_equal(out.tokens, ref.tokens)


def test_jaxpr_has_no_host_callbacks(dfas, params):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    tokens, mask = aj.pad_prompts([[1, 2], [3]], pad_id=PAD)

    def fn(params, tokens, mask, tables, ids, rng):
        return aj.generate(
            MODEL.apply_step, params, tokens, tables, ids, sampler=TopP(0.9), max_new_tokens=8,
            rng=rng, prompt_mask=mask, cache=MODEL.init_cache, pad_id=PAD, fast_forward=True,
        )  # fmt: skip

    closed = jax.make_jaxpr(fn)(params, tokens, mask, tables, jnp.array([0, 1]), jax.random.key(0))
    names = jaxpr_primitive_names(closed)
    assert {"while", "cond"} <= names
    assert not host_callbacks(names), names


def test_sharded_equals_unsharded(dfas, params):
    from jax.sharding import Mesh

    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    tokens, mask = aj.pad_prompts(PROMPTS, pad_id=PAD)
    kw = dict(
        sampler=TopP(0.9), max_new_tokens=10, rng=jax.random.key(1), prompt_mask=mask,
        pad_id=PAD, cache=MODEL.init_cache, fast_forward=True,
    )  # fmt: skip
    ids = np.array([0, 1, 2, 3], np.int32)
    a = aj.generate(MODEL.apply_step, params, tokens, tables, ids, **kw)
    b = aj.generate_sharded(mesh, MODEL.apply_step, params, tokens, tables, ids, **kw)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


@struct.dataclass
class _NoIndexCache:
    h: jax.Array


def test_cache_without_end_index_is_refused(dfas, params):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    with pytest.raises(aj.RuntimeShapeError, match="end_index"):
        _run(params, tables, [0], [[1]], 4, cache=_NoIndexCache(h=jnp.zeros((1, 2))))


@pytest.mark.parametrize("always", [True, False])
def test_a_tight_cache_never_overflows(params, always):
    """With only max_new_tokens slots past the prompt, chunks stop when room runs out
    (under the widest always-chunk policy, and the default)."""
    # Two constraints out of phase: their rows chunk on alternate steps.
    pair = [ac.compile_regex(p, VOCAB) for p in (r"(cabcc(a|b)){4,6}", r"(a|b)(cabcc(a|b)){4,6}")]
    tables = ConstraintTables.from_dfas(pair, vocab_size=V)
    prompts = [[i % 7] for i in range(8)]
    ids = [i % 2 for i in range(8)]
    seen = []

    def step(params, tokens, positions, input_mask, cache):
        # A write past the end would be clamped by dynamic_update_slice: record the ends.
        jax.debug.callback(lambda e, n: seen.append(int(e) + n), cache.end_index, tokens.shape[1])
        return MODEL.apply_step(params, tokens, positions, input_mask, cache)

    n = 20
    policy = aj.FastForward(widths=(99,), slot_cost=0) if always else aj.FastForward()
    _run(params, tables, ids, prompts, n, step=step, sampler=TopP(0.95), fast_forward=policy)
    if always:
        assert max(seen) > 1 + n  # the default cache has extra slots, and they are used
    seen.clear()
    tight = _run(
        params, tables, ids, prompts, n, step=step, sampler=TopP(0.95),
        cache=MODEL.init_cache(8, 1 + n), fast_forward=policy,
    )  # fmt: skip
    assert max(seen) <= 1 + n
    assert not tight.states.error.any()
    for row in range(8):
        got, dfa = tight.tokens[row, : tight.lengths[row]].tolist(), pair[ids[row]]
        assert dfa.accepts(got) if tight.accepted[row] else dfa.walk(got) >= 0


# --- the step policy (`FastForward`): which call width each iteration takes ---

# PATTERNS[1] forces a run after its first token (PATTERNS[0]'s run, at its start, goes in
# with the prompt: no decode call feeds it); PATTERNS[3] forces nothing.
FORCED, FREE = 1, 3


def _widths_taken(params, tables, ids, n, policy):
    """(output, the width of every decode call) under ``policy``."""
    seen = []

    def step(params, tokens, positions, input_mask, cache):
        jax.debug.callback(lambda: seen.append(tokens.shape[1]))  # static per branch
        return MODEL.apply_step(params, tokens, positions, input_mask, cache)

    prompts = [[i % 7] for i in range(len(ids))]
    out = _run(params, tables, ids, prompts, n, step=step, fast_forward=policy)
    return out, seen[1:]  # seen[0]: the prefill


def test_one_forced_row_among_free_rows_takes_single_steps(dfas, params):
    """The cost model: one row's 2 saved calls do not pay for 8 rows' wider call."""
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    ids = [FORCED] + [FREE] * 7
    out, widths = _widths_taken(params, tables, ids, 6, aj.FastForward(slot_cost=0.25))
    assert set(widths) == {1}
    always, widths = _widths_taken(params, tables, ids, 6, aj.FastForward(slot_cost=0))
    assert max(widths) > 1  # the old policy chunks for the one row
    np.testing.assert_array_equal(out.tokens, always.tokens)


def test_a_batch_of_forced_rows_takes_chunked_steps(dfas, params):
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    policy = aj.FastForward(slot_cost=0.25)
    out, widths = _widths_taken(params, tables, [FORCED] * 8, 6, policy)
    assert widths[0] > 1 and set(widths) <= set(policy.resolve(full_width=5).widths)
    assert (out.model_calls < 1 + 6).all()  # fewer calls than tokens


def test_widths_are_as_narrow_as_the_runs():
    """A sampled token plus a run of 2 ("c", "ab") takes 3-slot calls, not the tables' 8."""
    pair = [ac.compile_regex(p, VOCAB) for p in (r"((a|b)cab)+", r"cabababababab")]
    tables = ConstraintTables.from_dfas(pair, vocab_size=V)
    assert tables.forced_tokens.shape[2] > 2
    model_params = MODEL.init_params()
    policy = aj.FastForward(widths=(2, 3, 8), slot_cost=0.1)
    _, widths = _widths_taken(model_params, tables, [0, 0], 12, policy)
    assert 3 in widths and max(widths) <= 3, widths


@pytest.mark.parametrize(
    "policy",
    [aj.FastForward(), aj.FastForward(slot_cost=0.05), aj.FastForward(widths=(3,), slot_cost=0.5)],
)
def test_every_policy_gives_the_same_greedy_output(dfas, params, policy):
    """Policies change how tokens are grouped into calls, never which tokens (greedy):
    outputs equal the always-chunk loop's, and calls lie between it and one per token."""
    tables = ConstraintTables.from_dfas(dfas, vocab_size=V)
    ids = [0, 1, 2, 3, 0, 3, 1, 3]
    prompts = PROMPTS * 2
    fastest = _run(params, tables, ids, prompts, 12, fast_forward=aj.FastForward(slot_cost=0))
    one = _run(params, tables, ids, prompts, 12, fast_forward=aj.FastForward(widths=(1,)))
    got = _run(params, tables, ids, prompts, 12, fast_forward=policy)
    for out in (one, got):
        for x, y in zip(jax.tree.leaves(fastest.states), jax.tree.leaves(out.states), strict=True):
            np.testing.assert_array_equal(x, y)
        np.testing.assert_array_equal(out.tokens, fastest.tokens)
        np.testing.assert_array_equal(out.lengths, fastest.lengths)
    # widths=(1,): one call per token (EOS included), as without fast-forward, except the
    # start's forced run (its lead), fed with the prompt.
    lead = [min(len(dfas[k].forced_run(dfas[k].start)[0]), 12) for k in ids]
    np.testing.assert_array_equal(one.model_calls, one.lengths + one.accepted - lead)
    assert (fastest.model_calls <= got.model_calls).all()
    assert (got.model_calls <= one.model_calls).all()
    for row, k in enumerate(ids):
        n = int(got.lengths[row])
        assert dfas[k].accepts(got.tokens[row, :n].tolist()) or not got.accepted[row]


def test_policy_resolution_and_bad_values():
    assert aj.FastForward().resolve(full_width=5).widths == (1, 3, 5)
    assert aj.FastForward().resolve(full_width=9).widths == (1, 5, 9)
    assert aj.FastForward().resolve(full_width=3).widths == (1, 2, 3)
    assert aj.FastForward().resolve(full_width=2).widths == (1, 2)
    assert aj.FastForward(widths=(4, 16)).resolve(full_width=9).widths == (1, 4, 9)
    hash(aj.FastForward(widths=[2, 3]))  # lists become tuples: hashable, a static argument
    with pytest.raises(aj.RuntimeShapeError, match="widths"):
        aj.FastForward(widths=(0,))
    with pytest.raises(aj.RuntimeShapeError, match="slot_cost"):
        aj.FastForward(slot_cost=-1)
    tables = ConstraintTables.from_dfas([ac.compile_regex("ab", VOCAB)], vocab_size=V)
    with pytest.raises(aj.RuntimeShapeError, match="fast_forward"):
        _run(None, tables, [0], [[1]], 4, fast_forward="yes")


def test_no_retrace_for_a_second_constraint_of_the_bucket(params):
    """A new constraint set of the same bucket reuses the compiled fast-forward loop."""
    from automata_jax import _generate

    first = ConstraintTables.from_dfas(
        [ac.compile_regex(p, VOCAB) for p in (r"cabab(c|a)b?", r"abcc|cab")], vocab_size=V
    )
    second = ConstraintTables.from_dfas(
        [ac.compile_regex(p, VOCAB) for p in (r"bcabab(a|b)", r"ccab|cbb")], vocab_size=V
    )
    assert jax.tree.map(jnp.shape, first) == jax.tree.map(jnp.shape, second)
    _run(params, first, [0, 1], [[1], [2]], 8)
    before = _generate._generate_jit._cache_size()
    out = _run(params, second, [0, 1], [[1], [2]], 8)
    assert _generate._generate_jit._cache_size() == before
    assert not out.states.error.any()


# --- the start's forced run (the lead), fed with the prompt in the prefill ---


@pytest.mark.parametrize("speculate", [False, True])
def test_the_lead_goes_in_with_the_prompt(params, speculate, monkeypatch):
    """Schemas (a DFA and a PDA), regexes with and without a forced start, unconstrained rows
    in one batch: greedy outputs and final states equal the loop's that feeds the lead in a
    call of its own; each row with a lead saves exactly that call. (Not the plain loop's:
    a forced run is the canonical spelling, where the plain loop may choose ``{`` then
    ``"``.)"""
    vocab = byte_vocab([b'","', b'":"', b'"}', b'{"', b"ab"])
    v = vocab.size
    flat = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    }
    tree = tree_schema()
    options = dict(whitespace="compact", property_order="declared")
    dfas = [
        ac.compile_json_schema(flat, vocab, **options),
        ac.compile_json_schema(tree, vocab, **options),
        ac.compile_regex(r"xyz(ab|c)+", vocab),
        ac.compile_regex(r"(ab|c)+,yz", vocab),
        ac.compile_regex(r"q{30}(ab|c)+", vocab),  # a lead (capped at 16) past max_new_tokens
    ]
    assert dfas[1].is_pda
    n = 12
    leads = [len(d.forced_run(d.start)[0]) for d in dfas]
    assert leads[0] and leads[2] and not leads[3] and leads[4] >= n
    tables = ConstraintTables.from_dfas(dfas, vocab_size=v)
    model = FakeModel(vocab_size=v)
    mparams = model.init_params(11)
    docs = ['{"a": "ab", "b": 7}', '{"n": "ab", "k": []}', "xyzab", "ab,yz", "abc"]
    prompts = [list(d.encode()) for d in docs] + [[5], list(b"a long prompt"), [7, 8]]
    ids = [0, 1, 2, 3, -1, 4, 2, 1]
    tokens, mask = aj.pad_prompts(prompts, pad_id=PAD)
    # Policies that never narrow a row's call for the batch's sake, so that each row's
    # calls depend on its own tokens only.
    spec = aj.Speculate(slot_cost=0.0, logit_cost=0.0) if speculate else False
    always = aj.FastForward(slot_cost=0.0)
    # One max_new_tokens: rows 0-3 and 6-7 go on past their lead, row 5 ends inside it.
    kw = dict(
        sampler=Greedy(), max_new_tokens=n, rng=jax.random.key(0), prompt_mask=mask,
        pad_id=PAD,
    )  # fmt: skip
    ids_ = np.asarray(ids, np.int32)
    lead = aj.generate(
        model.apply_step, mparams, tokens, tables, ids_, cache=model.init_cache,
        fast_forward=always, speculate=spec, **kw,
    )  # fmt: skip
    with monkeypatch.context() as patch:  # the loop before leads: a call of its own
        patch.setattr(_generate, "_lead_width", lambda *args: 0)
        own = aj.generate(
            model.apply_step, mparams, tokens, tables, ids_, cache=model.init_cache,
            fast_forward=always, speculate=spec, **kw,
        )  # fmt: skip
    lead, own = jax.device_get((lead, own))
    np.testing.assert_array_equal(lead.tokens, own.tokens)
    np.testing.assert_array_equal(lead.lengths, own.lengths)
    np.testing.assert_array_equal(lead.accepted, own.accepted)
    for a, b in zip(jax.tree.leaves(lead.states), jax.tree.leaves(own.states), strict=True):
        np.testing.assert_array_equal(a, b)
    for row, k in enumerate(ids):
        has = k >= 0 and leads[k] > 0
        finished_in_lead = has and leads[k] >= n
        saved = int(has and not finished_in_lead)
        assert int(own.model_calls[row]) - int(lead.model_calls[row]) == saved, (row, n)
        if finished_in_lead:  # cut by max_new_tokens inside the lead: the prefill only
            assert int(lead.model_calls[row]) == 1


def test_the_lead_on_tiny_gemma():
    """The real model's prefill (logits at the last slot, sliding windows) with each row's
    lead appended, ragged: greedy outputs equal the plain loop's."""
    model, params = testing.tiny_model(vocab_size=64)
    vocab = ac.Vocabulary.from_bytes(
        [bytes([c]) for c in range(97, 97 + 26)] + [b" "] + [None] * 37, eos_ids=[27],
        special_ids=list(range(27, 64)),
    )  # fmt: skip
    dfas = [ac.compile_regex(p, vocab) for p in (r"hello (abc|cab)+", r"[a-e]{3,9}", r"xy z?")]
    assert dfas[0].forced_run(dfas[0].start)[0] and not dfas[1].forced_run(dfas[1].start)[0]
    tables = ConstraintTables.from_dfas(dfas, vocab_size=64)
    prompts = [[0, 1, 2, 0, 1, 2, 0], [2, 0, 1, 2, 0, 1], [3, 4, 3, 4, 3], [1, 1, 1]]
    ids = [0, 1, 2, -1]
    tokens, mask = aj.pad_prompts(prompts, pad_id=PAD)
    kw = dict(
        sampler=Greedy(), max_new_tokens=12, rng=jax.random.key(0), prompt_mask=mask,
        pad_id=PAD, cache=model.init_cache,
    )  # fmt: skip
    off = aj.generate(model.apply_step, params, tokens, tables, np.asarray(ids), **kw)
    on = aj.generate(
        model.apply_step, params, tokens, tables, np.asarray(ids), fast_forward=True, **kw
    )
    np.testing.assert_array_equal(on.tokens, off.tokens)
    assert int(on.model_calls[0]) < int(off.model_calls[0])
