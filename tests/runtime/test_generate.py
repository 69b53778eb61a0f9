"""generate: the jitted prefill + while_loop, against a fake model and real regexes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_jax as aj
from automata_compile import TokenDFA
from automata_jax import ConstraintTables, Greedy, Temperature, TopP, testing
from automata_jax.testing import FakeModel, host_callbacks, jaxpr_primitive_names

# -- a fake model with the automata_jax.models contract ---------------------------------------


class CountingStep:
    """Wraps a step function and counts how often it is traced."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


# -- hand-made tables: tokens 0='a', 1='b', 2='ab', 3=EOS, 4=pad, 5='c' --------------------------

EOS, PAD, V = 3, 4, 8


def toy(token_class, next_state, accepting, spec) -> TokenDFA:
    return testing.toy_dfa(token_class, next_state, accepting, spec, eos_id=EOS)


AB_C = toy(
    [1, 2, 3, 0, 0, 4],
    [[-1, 1, -1, 2, -1], [-1, -1, 2, -1, -1], [-1, 1, -1, 2, 3], [-1, -1, -1, -1, -1]],
    [False, False, True, True],
    "(ab)+c?",
)
B_C = toy([0, 1, 0, 0, 0, 2], [[-1, 0, 1], [-1, -1, -1]], [False, True], "b*c")
TRAP = toy([1, 0, 0, 0, 0, 0], [[-1, 1], [-1, -1]], [False, False], "a!")  # 'a' then stuck
TEXT = {0: "a", 1: "b", 2: "ab", 5: "c"}


def spell(tokens, length):
    return "".join(TEXT.get(int(t), "?") for t in tokens[:length])


MODEL = FakeModel(vocab_size=V)


@pytest.fixture(scope="module")
def model():
    return MODEL


@pytest.fixture(scope="module")
def params(model):
    return model.init_params()


@pytest.fixture(scope="module")
def step(model):
    return CountingStep(model.apply_step)


def run(step, params, tables, ids, *, prompts=None, **kw):
    prompts = prompts or [[1, 2, 3], [4], [5, 6], [7, 0, 1, 2]][: len(ids)]
    tokens, mask = aj.pad_prompts(prompts, pad_id=PAD)
    kw.setdefault("sampler", Greedy())
    kw.setdefault("max_new_tokens", 12)
    kw.setdefault("rng", jax.random.key(0))
    kw.setdefault("cache", MODEL.init_cache)  # static: the same bound method each call
    return aj.generate(
        step, params, tokens, tables, np.asarray(ids, np.int32), prompt_mask=mask, pad_id=PAD, **kw
    )


def test_outputs_are_in_the_language_and_padded_after_the_end(step, params):
    tables = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V)
    for seed in range(3):
        out = run(
            step, params, tables, [0, 1, -1, 0], sampler=Temperature(1.0), rng=jax.random.key(seed)
        )
        tokens, lengths = np.asarray(out.tokens), np.asarray(out.lengths)
        accepted, done = np.asarray(out.accepted), np.asarray(out.states.done)
        assert tokens.shape == (4, 12) and tokens.dtype == np.int32
        assert not np.asarray(out.states.error).any()
        for b, pattern in ((0, r"(ab)+c?"), (1, r"b*c"), (3, r"(ab)+c?")):
            import re

            text = spell(tokens[b], lengths[b])
            assert "?" not in text
            if accepted[b]:
                assert re.fullmatch(pattern, text), (pattern, text)
                assert tokens[b, lengths[b]] == EOS
                assert (tokens[b, lengths[b] + 1 :] == PAD).all()
            else:
                assert lengths[b] == 12 and not done[b]
        assert accepted.tolist() == done.tolist()


def test_greedy_matches_a_python_reference_loop(model, step, params):
    tables = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V)
    ids = [0, 1, -1]
    prompts = [[1, 2, 3], [4], [5, 6]]
    out = run(step, params, tables, ids, prompts=prompts, max_new_tokens=10)
    dfas = [AB_C, B_C]
    apply_step = jax.jit(model.apply_step)
    for b, prompt in enumerate(prompts):
        cache = model.init_cache(1, 32)
        toks = jnp.asarray([prompt], jnp.int32)
        pos = jnp.arange(len(prompt))[None]
        logits, cache = apply_step(params, toks, pos, jnp.ones_like(toks, bool), cache)
        q, generated = (dfas[ids[b]].start if ids[b] >= 0 else 0), []
        for i in range(10):
            row = np.asarray(logits[0, -1]).copy()
            allowed = np.ones(V, bool)
            if ids[b] >= 0:
                allowed[:] = False
                allowed[:6] = dfas[ids[b]].allowed(q)
            row[~allowed] = -np.inf
            t = int(np.argmax(row))
            generated.append(t)
            if t == EOS:
                break
            if ids[b] >= 0:
                q = dfas[ids[b]].advance(q, t)
            logits, cache = apply_step(
                params,
                jnp.asarray([[t]]),
                jnp.asarray([[len(prompt) + i]]),
                jnp.ones((1, 1), bool),
                cache,
            )
        got = np.asarray(out.tokens[b])
        np.testing.assert_array_equal(got[: len(generated)], generated)
        assert (got[len(generated) :] == PAD).all()
        assert int(out.lengths[b]) == len(generated) - (generated[-1] == EOS)


def test_error_rows_stop_and_are_not_accepted(step, params):
    tables = ConstraintTables.from_dfas([TRAP, AB_C], vocab_size=V)
    out = run(step, params, tables, [0, 1])
    assert np.asarray(out.states.error).tolist() == [True, False]
    assert np.asarray(out.accepted).tolist()[0] is False
    assert np.asarray(out.tokens[0]).tolist() == [0] + [PAD] * 11  # 'a', then stuck: stop
    assert int(out.lengths[0]) == 1


def test_no_retrace_for_new_tables_or_max_new_tokens(model, params):
    counting = CountingStep(model.apply_step)
    shapes = []
    for dfas, n in (([AB_C], 12), ([B_C], 12), ([AB_C, B_C], 9), ([B_C, TRAP], 16), ([TRAP], 3)):
        tables = ConstraintTables.from_dfas(dfas, vocab_size=V, min_constraints=2)
        out = run(counting, params, tables, [0, -1], max_new_tokens=n)
        shapes.append(out.tokens.shape)
    assert counting.calls == 2  # one trace: prefill + loop body
    assert shapes == [(2, 12), (2, 12), (2, 9), (2, 16), (2, 3)]


def test_max_new_tokens_is_honoured(step, params):
    tables = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V)
    full = run(step, params, tables, [-1, -1], max_new_tokens=16)
    for n in (1, 2, 5):
        out = run(step, params, tables, [-1, -1], max_new_tokens=n)
        assert out.tokens.shape == (2, n)
        np.testing.assert_array_equal(out.tokens, np.asarray(full.tokens)[:, :n])
        assert (np.asarray(out.lengths) <= n).all()


def test_jaxpr_has_no_host_callbacks(model, step, params):
    tables = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V, mask_impl="bitmask")
    tokens, mask = aj.pad_prompts([[1, 2], [3]], pad_id=PAD)

    def fn(params, tokens, mask, tables, ids, rng):
        return aj.generate(
            step, params, tokens, tables, ids, sampler=TopP(0.9), max_new_tokens=8, rng=rng,
            prompt_mask=mask, cache=model.init_cache, pad_id=PAD,
        )  # fmt: skip

    closed = jax.make_jaxpr(fn)(params, tokens, mask, tables, jnp.array([0, 1]), jax.random.key(0))
    names = jaxpr_primitive_names(closed)
    assert "while" in names and ("pjit" in names or "jit" in names)
    assert not host_callbacks(names), names


def test_gemma_model_contract():
    models = pytest.importorskip("automata_jax.models")
    config = models.Gemma3Config(
        vocab_size=V, d_model=16, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=8,
        hidden_dim=32, sliding_window=4, sliding_window_pattern=2,
    )  # fmt: skip
    model = models.Gemma3(config)
    rng = np.random.default_rng(0)
    params = jax.tree.map(
        lambda shape: jnp.asarray(rng.normal(scale=0.5, size=shape), jnp.float32),
        model.param_shapes(),
        is_leaf=lambda x: isinstance(x, tuple),
    )
    tables = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V)
    tokens, mask = aj.pad_prompts([[1, 2, 0], [5]], pad_id=PAD)
    out = aj.generate(
        model.apply_step, params, tokens, tables, jnp.array([0, 1]), sampler=Temperature(1.0),
        max_new_tokens=10, rng=jax.random.key(0), prompt_mask=mask, cache=model.init_cache,
        pad_id=PAD,
    )  # fmt: skip
    assert not np.asarray(out.states.error).any()
    import re

    for b, pattern in enumerate((r"(ab)+c?", r"b*c")):
        text = spell(out.tokens[b], int(out.lengths[b]))
        assert re.fullmatch(pattern, text) if out.accepted[b] else "?" not in text


def test_pad_prompts():
    tokens, mask = aj.pad_prompts([[5, 6, 7], [8]], pad_id=9, length=4)
    assert tokens.tolist() == [[9, 5, 6, 7], [9, 9, 9, 8]] and tokens.dtype == np.int32
    assert mask.tolist() == [[False, True, True, True], [False, False, False, True]]
    with pytest.raises(aj.RuntimeShapeError, match="empty prompt at row 1"):
        aj.pad_prompts([[1], []])
    with pytest.raises(aj.RuntimeShapeError, match=r"length: expected >= the longest prompt \(3\)"):
        aj.pad_prompts([[1, 2, 3]], length=2)


def test_bad_inputs(model, step, params):
    tables = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V)
    wide = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V + 1)
    ok = dict(sampler=Greedy(), max_new_tokens=4, rng=jax.random.key(0), cache=model.init_cache)
    tokens, mask = aj.pad_prompts([[1, 2], [3]], pad_id=PAD)
    ids = np.array([0, 1], np.int32)
    cases = [
        (
            dict(tables=wide),
            aj.RuntimeShapeError,
            r"step_fn logits: expected shape \[B, T, V\] = \[2, 2, 9\].*got \[2, 2, 8\]",
        ),
        (
            dict(prompt_tokens=tokens.astype(np.float32)),
            aj.RuntimeDtypeError,
            "prompt_tokens: expected an integer array, got dtype float32",
        ),
        (
            dict(prompt_tokens=tokens[0]),
            aj.RuntimeShapeError,
            r"prompt_tokens: expected shape \[B, T\]",
        ),
        (
            dict(prompt_mask=mask.astype(np.int32)),
            aj.RuntimeDtypeError,
            "prompt_mask: expected dtype bool",
        ),
        (
            dict(prompt_mask=mask[:, ::-1].copy()),
            aj.RuntimeShapeError,
            "expected left-padded prompts",
        ),
        (
            dict(constraint_ids=np.array([0, 1, 1], np.int32)),
            aj.RuntimeShapeError,
            r"constraint_ids: expected one id per prompt row \(2\), got 3",
        ),
        (
            dict(constraint_ids=np.array([0, 2], np.int32)),
            aj.UnknownConstraintError,
            r"an id in \[0, 2\).*got 2",
        ),
        (dict(constraint_ids=np.array([0, -3], np.int32)), aj.UnknownConstraintError, "got -3"),
        (
            dict(max_new_tokens=0),
            aj.RuntimeShapeError,
            "max_new_tokens: expected an int >= 1, got 0",
        ),
        (dict(rng=0), aj.RuntimeDtypeError, "rng: expected a single PRNG key"),
        (
            dict(cache=model.init_cache(2, 4)),
            aj.RuntimeShapeError,
            r"cache: expected room for at least 5 slots",
        ),
        (
            dict(buffer_length=2),
            aj.RuntimeShapeError,
            r"buffer_length: expected >= max_new_tokens \(4\), got 2",
        ),
    ]
    for override, error, match in cases:
        args = dict(prompt_tokens=tokens, tables=tables, constraint_ids=ids, prompt_mask=mask, **ok)
        args.update(override)
        with pytest.raises(error, match=match):
            aj.generate(step, params, pad_id=PAD, **args)


# -- property: real regexes, random model, temperature 1.0, mixed constraints ------------------


def test_sampled_sequences_match_their_regex():
    ac = pytest.importorskip("automata_compile")
    regex = pytest.importorskip("regex")
    pytest.importorskip("automata_compile.pipeline")

    tokens = [bytes([c]) for c in range(32, 127)]
    tokens += [
        b"ab",
        b"12",
        b"true",
        b"false",
        b'{"',
        b'":',
        b"-1",
        b"00",
        b", ",
        b"<eos>",
        b"<pad>",
    ]
    eos, pad = len(tokens) - 2, len(tokens) - 1
    vocab = ac.Vocabulary.from_bytes(tokens, eos_ids=[eos], special_ids=[eos, pad])
    patterns = [
        r"[a-c]{2,5}(-[0-9]+)?",
        r"(true|false)",
        r'\{"[a-z]{1,3}":[0-9]{1,2}(, "[a-z]":[0-9])?\}',
        r"-?(0|[1-9][0-9]*)",
        r"(ab|12)*x",
    ]
    dfas = [ac.compile_regex(p, vocab) for p in patterns]
    width = 128  # model logits wider than the vocabulary: ids >= vocab.size are never allowed
    tables = ConstraintTables.from_dfas(dfas, vocab_size=width)
    model = FakeModel(vocab_size=width, scale=2.0)
    params = model.init_params(1)
    batch = 84
    ids = np.array([(i % 6) - 1 for i in range(batch)], np.int32)  # -1 (unconstrained) and 0..4
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(0, vocab.size, rng.integers(1, 6))) for _ in range(batch)]
    prompt_tokens, mask = aj.pad_prompts(prompts, pad_id=pad)
    checked = finished = 0
    sampler = Temperature(1.0)
    for seed in range(3):
        out = aj.generate(
            model.apply_step, params, prompt_tokens, tables, ids, sampler=sampler,
            max_new_tokens=14, rng=jax.random.key(seed), prompt_mask=mask,
            cache=model.init_cache, pad_id=pad,
        )  # fmt: skip
        toks, lengths = np.asarray(out.tokens), np.asarray(out.lengths)
        accepted, error = np.asarray(out.accepted), np.asarray(out.states.error)
        assert not error.any()
        for b in np.flatnonzero(ids >= 0):
            pattern = patterns[ids[b]]
            text = vocab.decode(toks[b, : lengths[b]]).decode("utf-8")
            if accepted[b]:
                finished += 1
                assert toks[b, lengths[b]] == eos
                assert regex.fullmatch(pattern, text), (pattern, text)
            else:
                assert lengths[b] == 14
                assert regex.fullmatch(pattern, text, partial=True), (pattern, text)
            checked += 1
    assert checked >= 200 and finished >= 50, (checked, finished)


@pytest.mark.parametrize("fast_forward", [True, False])
def test_prefill_computes_only_the_last_slot_when_the_step_takes_logits_at(fast_forward):
    """A ``step_fn`` with ``logits_at`` gets the prompt's last slot in the prefill (logits
    [B, 1, V]); the generated tokens equal those of the same model without the keyword."""
    models = pytest.importorskip("automata_jax.models")
    config = models.Gemma3Config(
        vocab_size=V, d_model=16, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=8,
        hidden_dim=32, sliding_window=4, sliding_window_pattern=2,
    )  # fmt: skip
    model = models.Gemma3(config)
    params = model.init_params(jax.random.key(3), std=0.5)
    seen = []

    def with_logits_at(params, tokens, positions, input_mask, cache, logits_at=None):
        seen.append((tokens.shape[1], None if logits_at is None else logits_at.shape))
        return model.apply_step(params, tokens, positions, input_mask, cache, logits_at)

    def without(params, tokens, positions, input_mask, cache):
        return model.apply_step(params, tokens, positions, input_mask, cache)

    tables = ConstraintTables.from_dfas([AB_C, B_C], vocab_size=V)
    tokens, mask = aj.pad_prompts([[1, 2, 0, 5, 6], [5]], pad_id=PAD)
    outs = [
        aj.generate(
            fn,
            params,
            tokens,
            tables,
            jnp.array([0, 1]),
            sampler=Greedy(),
            max_new_tokens=9,
            rng=jax.random.key(0),
            prompt_mask=mask,
            cache=model.init_cache,
            pad_id=PAD,
            fast_forward=fast_forward,
        )  # fmt: skip
        for fn in (with_logits_at, without)
    ]
    assert seen[0] == (tokens.shape[1], (2,))  # the prefill, traced first
    np.testing.assert_array_equal(outs[0].tokens, outs[1].tokens)
    np.testing.assert_array_equal(outs[0].lengths, outs[1].lengths)


# -- a fixed TableCapacity: a new schema swaps in with no retrace (issue 20) ----------------------


def test_new_json_schema_in_a_fixed_capacity_runs_with_no_retrace():
    """Schema A (a DFA), then B (a pushdown automaton), then C, in tables of one
    `TableCapacity`: the decoding loop is traced and compiled once."""
    import json

    import jsonschema

    import automata_compile as ac
    from automata_jax import _generate

    eos = 256
    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[eos], special_ids=[eos]
    )
    schemas = [
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "yz"]}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        {"type": "array", "items": {}, "minItems": 1, "maxItems": 2},  # free items: a PDA
        {"type": "boolean"},
    ]
    dfas = [ac.compile_json_schema(s, vocab, whitespace="compact") for s in schemas]
    assert [d.is_pda for d in dfas] == [False, True, False]
    capacity = aj.TableCapacity(states=2048, classes=256, constraints=2, stack=16)
    model = FakeModel(vocab_size=257)
    params = model.init_params()
    counting = CountingStep(model.apply_step)
    tokens, mask = aj.pad_prompts([[1, 2, 3], [4]], pad_id=0)
    compiled = []
    for i, (schema, dfa) in enumerate(zip(schemas, dfas, strict=True)):
        tables = ConstraintTables.from_dfas([dfa], vocab_size=257, capacity=capacity)
        assert tables.capacity == capacity
        out = aj.generate(
            counting,
            params,
            tokens,
            tables,
            np.asarray([0, 0], np.int32),
            prompt_mask=mask,
            pad_id=0,
            sampler=Temperature(1.0),
            max_new_tokens=24,
            rng=jax.random.key(i),
            cache=model.init_cache,
        )
        compiled.append(_generate._generate_jit._cache_size())
        assert not np.asarray(out.states.error).any()
        for row, n, ok in zip(
            np.asarray(out.tokens), np.asarray(out.lengths), out.accepted, strict=True
        ):
            if bool(ok):  # a finished row is a valid instance
                text = bytes(int(t) for t in row[:n] if t != eos).decode()
                assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)), text
    assert counting.calls == 2  # one trace: prefill + loop body
    assert compiled[1:] == compiled[:1] * 2  # no new XLA compilation for B and C


def test_tables_without_a_capacity_of_a_dfa_and_a_pda_differ_in_structure():
    """Why the capacity exists: bucketed tables of a DFA and of a PDA have different trees."""
    import automata_compile as ac

    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    a = ac.compile_json_schema({"type": "boolean"}, vocab)
    b = ac.compile_json_schema({"type": "array"}, vocab)
    ta = ConstraintTables.from_dfas(a, vocab_size=257)
    tb = ConstraintTables.from_dfas(b, vocab_size=257)
    assert jax.tree.structure(ta) != jax.tree.structure(tb)
    cap = aj.TableCapacity.fitting([a, b])
    ta, tb = (ConstraintTables.from_dfas(d, vocab_size=257, capacity=cap) for d in (a, b))
    assert jax.tree.structure(ta) == jax.tree.structure(tb)
    assert jax.tree.map(jnp.shape, ta) == jax.tree.map(jnp.shape, tb)
