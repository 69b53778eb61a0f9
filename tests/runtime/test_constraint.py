"""init_state / allowed_mask / mask_logits / advance against the NumPy reference (TokenDFA)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import automata_jax as aj
from automata_compile import TokenDFA
from automata_jax import (
    ConstraintTables,
    RuntimeDtypeError,
    RuntimeShapeError,
    UnknownConstraintError,
    testing,
)

EOS, SPECIAL = 3, 4
V = 8  # model logits width; the DFAs cover 6 ids


def dfa(token_class, next_state, accepting, spec) -> TokenDFA:
    return testing.toy_dfa(token_class, next_state, accepting, spec, eos_id=EOS)


# Tokens: 0='a', 1='b', 2='ab', 3=EOS, 4=special, 5='c'.
AB_C = dfa(
    [1, 2, 3, 0, 0, 4],
    [[-1, 1, -1, 2, -1], [-1, -1, 2, -1, -1], [-1, 1, -1, 2, 3], [-1, -1, -1, -1, -1]],
    [False, False, True, True],
    "(ab)+c?",
)
B_C = dfa([0, 1, 0, 0, 0, 2], [[-1, 0, 1], [-1, -1, -1]], [False, True], "b*c")
# 'a' leads to a state with no token and no EOS (the compiler never emits one; tables by hand may).
TRAP = dfa([1, 0, 0, 0, 0, 2], [[-1, 1, 0], [-1, -1, -1]], [False, False], "(c*a)!")
DFAS = [AB_C, B_C, TRAP]

kernels = {
    "eager": (aj.init_state, aj.allowed_mask, aj.mask_logits, aj.advance),
    "jit": tuple(jax.jit(f) for f in (aj.init_state, aj.allowed_mask, aj.mask_logits, aj.advance)),
}


def reference_mask(dfa_or_none, q, done):
    mask = np.zeros(V, bool)
    if done:
        mask[EOS] = True
    elif dfa_or_none is None:
        mask[:] = True
    else:
        mask[: dfa_or_none.vocab_size] = dfa_or_none.allowed(q)
    return mask


@pytest.fixture(scope="module", params=["gather", "bitmask"])
def tables(request):
    return ConstraintTables.from_dfas(DFAS, vocab_size=V, mask_impl=request.param)


@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_random_walks_match_reference(tables, mode):
    init, allowed, masked, step = kernels[mode]
    rng = np.random.default_rng(0)
    ids = np.array([0, 1, 2, -1, 0, 1, 0, -1], np.int32)
    for _ in range(6):  # walks
        state = init(tables, ids)
        ref = [(DFAS[i] if i >= 0 else None, DFAS[i].start if i >= 0 else 0, False) for i in ids]
        for _ in range(7):
            mask = np.asarray(allowed(tables, state))
            for b, (d, q, done) in enumerate(ref):
                np.testing.assert_array_equal(
                    mask[b], reference_mask(d, q, done), err_msg=f"row {b}"
                )
            logits = jnp.asarray(rng.normal(size=(len(ids), V)), jnp.float32)
            out = np.asarray(masked(tables, state, logits))
            np.testing.assert_array_equal(np.isneginf(out), ~mask)
            tokens = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int32)
            state = step(tables, state, jnp.asarray(tokens))
            new_ref = []
            for (d, q, done), t in zip(ref, tokens, strict=True):
                if done:
                    new_ref.append((d, q, True))
                elif d is None:
                    new_ref.append((d, q, t == EOS))
                else:
                    nq = d.advance(q, int(t))
                    trapped = nq >= 0 and not d.allowed(nq).any()
                    new_ref.append((d, q if t == EOS else nq, t == EOS or trapped))
            ref = new_ref
            np.testing.assert_array_equal(np.asarray(state.done), [r[2] for r in ref])
            constrained_q = [r[1] for r in ref]
            np.testing.assert_array_equal(
                np.where(ids >= 0, np.asarray(state.state), 0), np.where(ids >= 0, constrained_q, 0)
            )
        # Only the trap rows may fail, and only by entering the trap.
        err = np.asarray(state.error)
        assert not err[ids != 2].any()


def test_eos_only_in_accepting_states_and_forced_at_dead_ends():
    tables = ConstraintTables.from_dfas(DFAS, vocab_size=V)
    state = aj.init_state(tables, np.array([0, 0], np.int32))
    state = aj.advance(tables, state, jnp.array([2, 2], jnp.int32))  # 'ab': accepting
    mask = np.asarray(aj.allowed_mask(tables, state))
    assert mask[:, EOS].all() and mask[:, 5].all()
    state = aj.advance(tables, state, jnp.array([5, EOS], jnp.int32))  # 'c' / EOS
    mask = np.asarray(aj.allowed_mask(tables, state))
    # Row 0 is in an accepting state with no allowed token: only EOS. Row 1 is done: only EOS.
    np.testing.assert_array_equal(mask, np.tile(np.arange(V) == EOS, (2, 1)))
    assert np.asarray(state.done).tolist() == [False, True]
    assert not np.asarray(state.error).any()
    state = aj.advance(tables, state, jnp.array([EOS, 0], jnp.int32))  # done rows ignore tokens
    assert np.asarray(state.done).all() and not np.asarray(state.error).any()


@pytest.mark.parametrize(
    ("ids", "tokens", "error"),
    [
        ([0], [1], True),  # 'b' not allowed at the start
        ([0], [EOS], True),  # EOS in a non-accepting state
        ([0], [SPECIAL], True),  # a never-allowed special token
        ([0], [7], True),  # an id the DFA does not cover (padding)
        ([0], [99], True),  # out of range
        ([2], [0], True),  # into the trap
        ([-1], [99], True),  # unconstrained, out of range
        ([-1], [7], False),  # unconstrained: anything in range
        ([-1], [EOS], False),  # unconstrained EOS: done, fine
    ],
)
def test_forced_tokens(ids, tokens, error):
    tables = ConstraintTables.from_dfas(DFAS, vocab_size=V)
    for step in (aj.advance, jax.jit(aj.advance)):
        state = step(tables, aj.init_state(tables, ids), jnp.asarray(tokens, jnp.int32))
        assert bool(state.error[0]) == error
        assert bool(state.done[0]) == (error or tokens[0] == EOS)
        if state.done[0]:
            np.testing.assert_array_equal(
                np.asarray(aj.allowed_mask(tables, state))[0], np.arange(V) == EOS
            )


def test_unknown_and_padded_constraints_under_jit_flag_errors():
    tables = ConstraintTables.from_dfas(DFAS, vocab_size=V)  # K = 3, padded to 4
    state = jax.jit(aj.init_state)(tables, jnp.array([3, 7, -2, 0, -1], jnp.int32))
    assert np.asarray(state.error).tolist() == [True, True, True, False, False]
    assert np.asarray(state.done).tolist() == [True, True, True, False, False]
    mask = np.asarray(aj.allowed_mask(tables, state))
    np.testing.assert_array_equal(mask[:3], np.tile(np.arange(V) == EOS, (3, 1)))


def test_unknown_constraint_raises_eagerly():
    tables = ConstraintTables.from_dfas(DFAS, vocab_size=V)
    for bad in ([3], [-2], [0, 5]):
        with pytest.raises(UnknownConstraintError, match=r"expected -1 \(unconstrained\) or an id"):
            aj.init_state(tables, np.array(bad, np.int32))


def test_mask_logits_preserves_dtype():
    tables = ConstraintTables.from_dfas(DFAS, vocab_size=V)
    state = aj.init_state(tables, [0, -1])
    for dtype in (jnp.float32, jnp.bfloat16, jnp.float16):
        out = aj.mask_logits(tables, state, jnp.ones((2, V), dtype))
        assert out.dtype == dtype
        assert np.isneginf(np.asarray(out[0], np.float32)).sum() == V - 2  # 'a', 'ab'
        assert (np.asarray(out[1], np.float32) == 1).all()


def test_vmap_over_independent_batches():
    tables = ConstraintTables.from_dfas(DFAS, vocab_size=V)
    ids = jnp.array([[0, 1], [1, -1], [2, 0]], jnp.int32)
    states = jax.vmap(aj.init_state, in_axes=(None, 0))(tables, ids)
    masks = jax.vmap(aj.allowed_mask, in_axes=(None, 0))(tables, states)
    for i in range(3):
        np.testing.assert_array_equal(
            masks[i], aj.allowed_mask(tables, aj.init_state(tables, ids[i]))
        )
    tokens = jnp.array([[0, 5], [5, 1], [0, 2]], jnp.int32)
    stepped = jax.vmap(aj.advance, in_axes=(None, 0, 0))(tables, states, tokens)
    for i in range(3):
        one = aj.advance(tables, aj.init_state(tables, ids[i]), tokens[i])
        np.testing.assert_array_equal(stepped.state[i], one.state)
        np.testing.assert_array_equal(stepped.done[i], one.done)


def test_same_bucket_does_not_retrace():
    traces = []

    @jax.jit
    def step(tables, state, logits):
        traces.append(1)
        masked = aj.mask_logits(tables, state, logits)
        return aj.advance(tables, state, jnp.argmax(masked, -1).astype(jnp.int32))

    logits = jnp.zeros((2, V))
    for dfas in ([AB_C], [B_C], [TRAP, AB_C], [B_C, B_C, AB_C, TRAP]):
        tables = ConstraintTables.from_dfas(dfas, vocab_size=V, min_constraints=4)
        step(tables, aj.init_state(tables, [0, -1]), logits)
    assert len(traces) == 1


def test_bad_inputs_raise_before_running():
    tables = ConstraintTables.from_dfas(DFAS, vocab_size=V)
    state = aj.init_state(tables, [0, 1])
    with pytest.raises(
        RuntimeShapeError, match=r"logits: expected shape \[B, V\] = \[2, 8\].*got \[2, 9\]"
    ):
        aj.mask_logits(tables, state, jnp.zeros((2, 9)))
    with pytest.raises(RuntimeShapeError, match=r"got \[3, 8\]"):
        aj.mask_logits(tables, state, jnp.zeros((3, V)))
    with pytest.raises(
        RuntimeDtypeError, match="logits: expected a floating-point array, got dtype int32"
    ):
        aj.mask_logits(tables, state, jnp.zeros((2, V), jnp.int32))
    with pytest.raises(
        RuntimeDtypeError, match="tokens: expected an integer array, got dtype float32"
    ):
        aj.advance(tables, state, jnp.zeros((2,), jnp.float32))
    with pytest.raises(RuntimeShapeError, match="tokens: expected batch size 2"):
        aj.advance(tables, state, jnp.zeros((3,), jnp.int32))
    with pytest.raises(RuntimeShapeError, match=r"constraint_ids: expected shape \[B\]"):
        aj.init_state(tables, np.zeros((2, 2), np.int32))
    with pytest.raises(RuntimeDtypeError, match="constraint_ids: expected an integer array"):
        aj.init_state(tables, np.zeros(2, np.float32))
    with pytest.raises(RuntimeShapeError, match="tables: expected ConstraintTables"):
        aj.allowed_mask(DFAS[0], state)
    with pytest.raises(RuntimeShapeError, match="state: expected ConstraintState"):
        aj.allowed_mask(tables, np.zeros(2))
    # The same checks fire while tracing under jit.
    with pytest.raises(RuntimeShapeError, match=r"got \[2, 9\]"):
        jax.jit(aj.mask_logits)(tables, state, jnp.zeros((2, 9)))


# -- real regexes compiled by automata_compile ------------------------------------------------

compiler = pytest.importorskip("automata_compile.pipeline", reason="compiler not available")


def small_vocab():
    import automata_compile as ac

    tokens = [bytes([c]) for c in range(32, 127)]
    tokens += [b"ab", b"12", b"true", b"false", b'{"', b'":', b"-1", b"00", b"<eos>", b"<pad>"]
    eos = len(tokens) - 2
    return ac.Vocabulary.from_bytes(tokens, eos_ids=[eos], special_ids=[eos, eos + 1])


REGEXES = [
    r"[a-c]{2,5}(-[0-9]+)?",
    r"(true|false)",
    r'\{"[a-z]{1,3}":[0-9]{1,3}\}',
    r"-?(0|[1-9][0-9]*)",
]


@pytest.mark.parametrize("mask_impl", ["gather", "bitmask"])
def test_real_regex_masks_equal_token_dfa_allowed(mask_impl):
    import automata_compile as ac

    vocab = small_vocab()
    dfas = [ac.compile_regex(p, vocab) for p in REGEXES]
    width = 128
    tables = ConstraintTables.from_dfas(dfas, vocab_size=width, mask_impl=mask_impl)
    tables.check_vocabulary(vocab.fingerprint)
    eos = vocab.eos_ids[0]
    ids = np.array([0, 1, 2, 3, 0, 2, 3, 1], np.int32)
    rng = np.random.default_rng(1)
    allowed_jit, advance_jit = jax.jit(aj.allowed_mask), jax.jit(aj.advance)
    for allowed, step in ((aj.allowed_mask, aj.advance), (allowed_jit, advance_jit)):
        state = aj.init_state(tables, ids)
        qs = [dfas[i].start for i in ids]
        done = [False] * len(ids)
        for _ in range(12):
            mask = np.asarray(allowed(tables, state))
            for b, i in enumerate(ids):
                expected = np.zeros(width, bool)
                if done[b]:
                    expected[eos] = True
                else:
                    expected[: vocab.size] = dfas[i].allowed(qs[b])
                np.testing.assert_array_equal(mask[b], expected, err_msg=f"{REGEXES[i]} row {b}")
            tokens = np.array([rng.choice(np.flatnonzero(m)) for m in mask], np.int32)
            state = step(tables, state, jnp.asarray(tokens))
            for b, t in enumerate(tokens):
                if not done[b]:
                    done[b] = bool(t == eos)
                    qs[b] = dfas[ids[b]].advance(qs[b], int(t))
            assert np.asarray(state.done).tolist() == done
            assert not np.asarray(state.error).any()
