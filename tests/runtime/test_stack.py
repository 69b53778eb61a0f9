"""Grammar (PDA) rows on the device: masks and stacks against the NumPy reference walk, mixed
PDA/DFA batches, the stack bound's semantics, no retrace, no host callbacks, sampled outputs of
the random-weight model, and sharded generation."""

from __future__ import annotations

import functools
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_compile as ac
import automata_jax as aj
from automata_jax import ConstraintTables, testing
from automata_jax.testing import host_callbacks, jaxpr_primitive_names

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import grammar_oracle as go  # noqa: E402

EOS = 256


@functools.lru_cache(maxsize=1)
def byte_vocab():
    extra = [b'"}', b"]]", b"}]", b'":', b"),", b"))", b"(((", b'{"a":[1,', b"aaa", b"ac"]
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"] + extra
    return ac.Vocabulary.from_bytes(tokens, eos_ids=[EOS], special_ids=[EOS])


@functools.cache
def compiled(spec: str, kind: str = "grammar"):
    vocab = byte_vocab()
    return ac.compile_grammar(spec, vocab) if kind == "grammar" else ac.compile_regex(spec, vocab)


DEEP = 'start: "a" inner "b"\ninner: "a" inner "b" | x "e"\nx: "c"'


def _reference_mask(dfa, config, stack_size):
    """The exact mask under a stack bound: allowed, and the stack after the token fits."""
    state, stack = config
    mask = dfa.allowed(state, stack)
    for t in np.flatnonzero(mask):
        if t != EOS and len(dfa.advance_config(state, stack, int(t))[1]) > stack_size:
            mask[t] = False
    if not mask.any():
        mask[EOS] = True  # stuck: EOS only, then the row fails
    return mask


@jax.jit
def _mask_and_advance(tables, state, tokens):
    return aj.allowed_mask(tables, state), aj.advance(tables, state, tokens)


@pytest.mark.parametrize("stack_size", [64, 3])
def test_mixed_batch_matches_reference_walk(stack_size):
    dfas = [
        compiled("json"),
        compiled("arithmetic"),
        compiled("[ab]+c", "regex"),
        compiled(DEEP),
        compiled('start: ("(" start ")" | "[" start "]")*'),
    ]
    tables = ConstraintTables.from_dfas(dfas, vocab_size=byte_vocab().size, stack_size=stack_size)
    assert tables.has_stack and tables.stack_size == stack_size
    ids = np.array([0, 1, 2, 3, 4, -1, 0, 4], np.int32)
    state = aj.init_state(tables, ids)
    configs = [(dfas[k].start, ()) if k >= 0 else None for k in ids]
    rng = random.Random(stack_size)
    done = [False] * len(ids)
    for _ in range(30):
        mask = np.asarray(aj.allowed_mask(tables, state))
        tokens = []
        for b, k in enumerate(ids):
            if done[b]:
                tokens.append(EOS)
                continue
            if k < 0:
                assert mask[b].all()
                tokens.append(rng.randrange(256))
                continue
            want = _reference_mask(dfas[k], configs[b], stack_size)
            np.testing.assert_array_equal(mask[b], want, err_msg=f"row {b} at {configs[b]}")
            allowed = np.flatnonzero(want)
            opening = [
                t
                for t in allowed
                if t != EOS
                and byte_vocab().tokens[t] in (b"(", b"[", b"a", b"{", b'{"a":[1,', b"(((")
            ]
            t = (
                rng.choice(opening)
                if opening and rng.random() < 0.6
                else int(rng.choice(list(allowed)))
            )
            tokens.append(int(t))
        mask2, state = _mask_and_advance(tables, state, jnp.array(tokens, jnp.int32))
        np.testing.assert_array_equal(np.asarray(mask2), mask)
        depth, stack = np.asarray(state.depth), np.asarray(state.stack)
        for b, k in enumerate(ids):
            if k < 0 or done[b]:
                continue
            if tokens[b] == EOS:
                accepts = dfas[k].advance_config(*configs[b], EOS) is not None
                assert bool(state.done[b]) and bool(state.error[b]) == (not accepts)
                done[b] = True
                continue
            configs[b] = dfas[k].advance_config(*configs[b], tokens[b])
            assert int(state.state[b]) == configs[b][0]
            assert depth[b] == len(configs[b][1])
            assert tuple(stack[b, : depth[b]].tolist()) == configs[b][1]
            assert not bool(state.error[b])


def test_stack_overflow_is_masked_and_flagged():
    pda = compiled(DEEP)
    vocab = byte_vocab()
    tables = ConstraintTables.from_dfas([pda], vocab_size=vocab.size, stack_size=2)
    state = aj.init_state(tables, np.array([0], np.int32))
    a, c = vocab.tokens.index(b"a"), vocab.tokens.index(b"c")
    for _ in range(3):  # "aaa": the last "a" pushes to depth 2 (the outer "a" pushes nothing)
        assert bool(aj.allowed_mask(tables, state)[0, a])
        state = aj.advance(tables, state, jnp.array([a]))
    assert int(state.depth[0]) == 2
    mask = np.asarray(aj.allowed_mask(tables, state))[0]
    # Unbounded, both "a" and "c" (and "aaa", "ac") continue; each needs a third symbol.
    assert pda.allowed(*pda.walk_config([a, a, a]))[[a, c]].all()
    assert np.flatnonzero(mask).tolist() == [EOS]  # stuck: EOS only
    forced = aj.advance(tables, state, jnp.array([c]))  # a token that does not fit
    assert bool(forced.error[0]) and bool(forced.done[0])
    ended = aj.advance(tables, state, jnp.array([EOS]))
    assert bool(ended.error[0]) and bool(ended.done[0])


def test_default_stack_size_and_dfa_only_batches():
    vocab = byte_vocab()
    dfa = compiled("ab", "regex")
    plain = ConstraintTables.from_dfas([dfa], vocab_size=vocab.size)
    assert not plain.has_stack and plain.stack_size == 0
    assert aj.init_state(plain, np.array([0])).stack.shape == (1, 0)
    mixed = ConstraintTables.from_dfas([dfa, compiled("json")], vocab_size=vocab.size)
    assert mixed.stack_size == 64
    with pytest.raises(aj.RuntimeShapeError, match='expected "gather" for a batch with a grammar'):
        ConstraintTables.from_dfas([compiled("json")], vocab_size=vocab.size, mask_impl="bitmask")
    with pytest.raises(aj.RuntimeShapeError, match="stack_size: expected an int >= 1, got 0"):
        ConstraintTables.from_dfas([compiled("json")], vocab_size=vocab.size, stack_size=0)


def _fake_step(params, tokens, positions, input_mask, cache):
    logits = jax.random.normal(jax.random.key(0), (tokens.shape[0], tokens.shape[1], EOS + 11))
    return logits * params + positions[..., None] * 0.01, cache


def test_no_retrace_for_another_grammar_set_and_no_callbacks():
    vocab = byte_vocab()
    traces = []

    def step(params, tokens, positions, input_mask, cache):
        traces.append(1)
        return _fake_step(params, tokens, positions, input_mask, cache)

    object_only = ac.builtin_grammar("json").replace("start: value", "start: object")
    sets = [
        [compiled("json"), compiled("[ab]+c", "regex")],
        [compiled(object_only), compiled(DEEP)],
    ]
    shapes = set()
    for dfas in sets:
        tables = ConstraintTables.from_dfas(
            dfas, vocab_size=vocab.size, min_states=128, min_classes=64
        )
        shapes.add(tuple(x.shape for x in jax.tree.leaves(tables)))
        out = aj.generate(
            step, jnp.float32(1.0), jnp.zeros((2, 1), jnp.int32), tables, [0, 1],
            sampler=aj.Temperature(1.0), max_new_tokens=8, rng=jax.random.key(1),
        )  # fmt: skip
        assert not np.asarray(out.states.error).any()
    assert len(shapes) == 1 and len(traces) == 2  # one trace: prefill + loop body

    def fn(tables, rng):
        return aj.generate(
            _fake_step, jnp.float32(1.0), jnp.zeros((2, 1), jnp.int32), tables, jnp.array([0, 1]),
            sampler=aj.TopP(0.9), max_new_tokens=8, rng=rng,
        )  # fmt: skip

    names = jaxpr_primitive_names(jax.make_jaxpr(fn)(tables, jax.random.key(0)))
    assert "while" in names
    assert not host_callbacks(names), names


@pytest.mark.slow
def test_sampled_outputs_of_the_tiny_model_parse_or_are_viable_prefixes():
    lark = pytest.importorskip("lark")
    vocab = testing.default_vocabulary()
    model, params = testing.tiny_model(vocab.size)
    grammars = ["json", "arithmetic"]
    tables = ConstraintTables.from_dfas(
        [ac.compile_grammar(g, vocab) for g in grammars], vocab_size=vocab.size
    )
    oracles = [go.json_oracle(), go.arithmetic_oracle()]
    parsers = [lark.Lark(ac.builtin_grammar(g), parser="earley", lexer="dynamic") for g in grammars]
    ids = np.array([0, 1] * 4, np.int32)
    prompts, mask = aj.pad_prompts([[1, 100 + i] for i in range(len(ids))])
    finished = 0
    for seed in range(2):
        out = aj.generate(
            model.apply_step, params, prompts, tables, ids, sampler=aj.Temperature(1.0),
            max_new_tokens=24, rng=jax.random.key(seed), prompt_mask=mask, cache=model.init_cache,
        )  # fmt: skip
        assert not np.asarray(out.states.error).any()
        for b, k in enumerate(ids):
            n = int(out.lengths[b])
            text = vocab.decode(np.asarray(out.tokens[b, :n]).tolist())
            if bool(out.accepted[b]):
                finished += 1
                assert oracles[k].in_language(text), text
                parsers[k].parse(text.decode("utf-8"))
            else:
                assert oracles[k].viable(text), text
    assert finished >= 1


def test_fast_forward_with_grammar_rows_in_the_batch():
    """Fast-forward (forced runs of DFA rows) in a batch with grammar rows: every finished row
    is in its language, and the regex row's forced text took fewer model calls than tokens.
    The stack is deeper than the tokens can nest (24 < 32), so no row may fail on it, whatever
    the random stream."""
    vocab = byte_vocab()
    dfas = [compiled("json"), compiled(DEEP), compiled("x(y|z)forced text[0-9]{1,3}", "regex")]
    assert dfas[2].forced_len.max() > 0
    tables = ConstraintTables.from_dfas(dfas, vocab_size=vocab.size, stack_size=32)
    ids = np.array([0, 1, 2, 2, -1], np.int32)
    kw = dict(sampler=aj.Temperature(1.0), max_new_tokens=24, rng=jax.random.key(5), pad_id=0)
    tokens = np.zeros((len(ids), 1), np.int32)
    on = jax.device_get(
        aj.generate(_fake_step, np.float32(1.0), tokens, tables, ids, fast_forward=True, **kw)
    )
    assert not on.states.error.any()
    for row, k in enumerate(ids):
        n = int(on.lengths[row])
        if k >= 0 and on.accepted[row]:
            assert dfas[k].accepts(on.tokens[row, :n].tolist()), row
    regex_rows = np.flatnonzero(ids == 2)
    assert on.accepted[regex_rows].all()
    assert (on.model_calls[regex_rows] < on.lengths[regex_rows] + 1).all()


SHARD_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    import jax, numpy as np
    assert jax.device_count() == 8, jax.devices()
    from jax.sharding import Mesh
    import automata_jax as aj
    from test_stack import DEEP, EOS, _fake_step, compiled, byte_vocab

    dfas = [compiled("json"), compiled(DEEP), compiled("[ab]+c", "regex")]
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=byte_vocab().size, stack_size=4)
    ids = np.array([(i % 4) - 1 for i in range(16)], np.int32)
    tokens = np.zeros((16, 1), np.int32)
    mesh = Mesh(np.array(jax.devices()).reshape(8), ("data",))
    kw = dict(sampler=aj.Temperature(1.0), max_new_tokens=12, rng=jax.random.key(3), pad_id=0)
    ref = aj.generate(_fake_step, np.float32(1.0), tokens, tables, ids, **kw)
    out = aj.generate_sharded(mesh, _fake_step, np.float32(1.0), tokens, tables, ids, **kw)
    assert len(out.states.stack.sharding.device_set) == 8, out.states.stack.sharding
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    deep = np.asarray(out.accepted)[ids == 1]
    assert deep.all(), deep  # nested "a...c e b..." rows (pushes and pops) all finished
    print("SHARDING OK")
    """
)


def test_sharded_generation_with_grammar_rows_equals_unsharded():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join([here, str(TESTS), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", SHARD_SCRIPT.format(here=here)],
        env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert proc.returncode == 0 and "SHARDING OK" in proc.stdout, proc.stdout + proc.stderr
