"""Token healing (`automata_jax._healing`): the first-token mask against a brute-force oracle
over real vocabularies (`regex` partial matching), and `generate` with healing end to end."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import regex

import automata_compile as ac
import automata_jax as aj
from automata_jax import _healing
from automata_jax.testing import FakeModel, host_callbacks, jaxpr_primitive_names

# Prompts ending mid-word, after a space, and in punctuation; each with a language that
# can follow the prompt's full text.
CASES = [
    ("The city of Par", r"[a-z]* is in France\."),
    ("Arguments: ", r' ?\{"city": "[A-Za-z]+"\}'),
    ('Answer: {"city": "', r'[A-Z][a-z]+"\}'),
    ("Total =", r" ?[0-9]+(\.[0-9]+)?"),
]


def _oracle(vocab, h: bytes, pattern: str, v: int) -> np.ndarray:
    """bool[V]: bytes(t) starts with h and the rest is a prefix of the language."""
    allowed = np.zeros(v, bool)
    for t, b in enumerate(vocab.tokens[:v]):
        if not b or not b.startswith(h) or t in vocab.eos_ids:
            continue
        try:
            w = b[len(h) :].decode("utf-8")
        except UnicodeDecodeError:
            continue  # a partial character: never a prefix of these ASCII languages
        allowed[t] = regex.fullmatch(pattern, w, partial=True) is not None
    return allowed


@pytest.fixture(scope="module", params=["llama3", "gemma3"])
def vocab(request):
    return request.getfixturevalue(f"{request.param}_vocab")


def test_heal_prompts_backs_off_the_last_token():
    tokens = [b"a", b"b", b"ab", None] + [bytes([i]) for i in range(256)]
    short, heal = aj.heal_prompts([[0, 2], [3, 1], [2]], tokens, vocab_size=len(tokens))
    assert short == [[0], [3], [2]]  # a one-token prompt keeps its token
    assert heal.heal_len.tolist() == [2, 1, 0]
    assert bytes(np.asarray(heal.heal_bytes[0, :2])) == b"ab"
    short, heal = aj.heal_prompts([[0, 1, 2]], tokens, vocab_size=len(tokens), back=2)
    assert short == [[0]] and heal.heal_len.tolist() == [3]
    short, heal = aj.heal_prompts([[0, 3]], tokens, vocab_size=len(tokens))  # special: kept
    assert short == [[0, 3]] and heal.heal_len.tolist() == [0]
    with pytest.raises(aj.RuntimeShapeError, match="single byte"):
        aj.heal_prompts([[0, 1]], tokens[:4], vocab_size=4)


@pytest.mark.parametrize("text, pattern", CASES)
def test_heal_mask_matches_the_oracle(vocab, text, pattern):
    v = vocab.size
    dfa = ac.compile_regex(pattern, vocab)
    tables = aj.ConstraintTables.from_dfas([dfa], vocab_size=v)
    ids = vocab.encode(text)
    short, heal = aj.heal_prompts([ids, ids], vocab.tokens, vocab_size=v)
    h = vocab.decode(ids[len(short[0]) :])
    assert h and text.encode().endswith(h)
    state = aj.init_state(tables, jnp.array([0, -1]))
    mask, q_after = jax.jit(_healing.heal_mask)(tables, state, heal)
    mask, q_after = np.asarray(mask), np.asarray(q_after)
    want = _oracle(vocab, h, pattern, v)
    np.testing.assert_array_equal(mask[0], want)
    # The unconstrained row: every token that starts with h.
    starts = np.array([bool(b) and b.startswith(h) for b in vocab.tokens[:v]])
    np.testing.assert_array_equal(mask[1], starts)
    # The state after each allowed token is the state after its rest, spelled in single bytes.
    byte_token = {b[0]: i for i, b in enumerate(vocab.tokens) if b and len(b) == 1}
    for t in np.flatnonzero(want)[:200]:
        rest = vocab.tokens[t][len(h) :]
        assert q_after[0, t] == dfa.walk([byte_token[c] for c in rest]), vocab.tokens[t]


def _regex_vocab():
    """Bytes 0..255 as tokens plus a few merges (so healing has something to merge)."""
    merges = [b" {", b'{"', b"ab", b"abc", b" a", b"ca", b'"}']
    toks = [bytes([i]) for i in range(256)] + merges + [None, None]
    eos, pad = len(toks) - 2, len(toks) - 1
    return ac.Vocabulary.from_bytes(toks, eos_ids=[eos], special_ids=[eos, pad]), eos, pad


@pytest.mark.parametrize("fast_forward", [False, True])
def test_generate_starts_with_the_healed_bytes(fast_forward):
    vocab, eos, pad = _regex_vocab()
    v = vocab.size
    patterns = [r'\{"[abc]{1,4}"\}', r"[abc]+x"]
    dfas = [ac.compile_regex(p, vocab) for p in patterns]
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=v)
    tid = {b: i for i, b in enumerate(vocab.tokens) if b}
    prompts = [
        [tid[b"q"], tid[b" {"]],  # ends in " {": outputs are " {" + the language
        [tid[b"q"], tid[b"c"]],  # mid-word: h = "c", then [abc]+x
        [tid[b"q"], tid[b"a"]],  # unconstrained
        [tid[b"q"]],  # a one-token prompt: nothing to heal
    ]
    ids = np.array([0, 1, -1, 1], np.int32)
    short, heal = aj.heal_prompts(prompts, vocab.tokens, vocab_size=v)
    assert heal.heal_len.tolist() == [2, 1, 1, 0]
    model = FakeModel(vocab_size=v)
    params = model.init_params()
    tokens, mask = aj.pad_prompts(short, pad_id=pad)
    for seed in range(3):
        out = aj.generate(
            model.apply_step, params, tokens, tables, ids, sampler=aj.Temperature(1.0),
            max_new_tokens=12, rng=jax.random.key(seed), prompt_mask=mask,
            cache=model.init_cache, pad_id=pad, healing=heal, fast_forward=fast_forward,
        )  # fmt: skip
        toks, lengths = np.asarray(out.tokens), np.asarray(out.lengths)
        assert not np.asarray(out.states.error).any()
        for row, h, pattern in ((0, b" {", patterns[0]), (1, b"c", patterns[1]), (2, b"a", None),
                                (3, b"", patterns[1])):  # fmt: skip
            text = vocab.decode(toks[row, : lengths[row]])
            assert text.startswith(h), (row, text)
            rest = aj.strip_healed(text, heal.heal_len[row]).decode("latin-1")
            if pattern is not None:
                full = bool(out.accepted[row])
                assert regex.fullmatch(pattern, rest, partial=not full), (row, text)
                if full:
                    assert toks[row, lengths[row]] == eos


@pytest.mark.parametrize("fast_forward", [False, True])
def test_healing_with_speculation_decodes_as_without(fast_forward):
    """Healing then speculative steps: greedy outputs equal healing without drafts."""
    vocab, eos, pad = _regex_vocab()
    v = vocab.size
    dfas = [ac.compile_regex(p, vocab) for p in (r'\{"[abc]{1,4}"\}', r"[abc]+x")]
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=v)
    tid = {b: i for i, b in enumerate(vocab.tokens) if b}
    prompts = [[tid[b"q"], tid[b"a"], tid[b"b"], tid[b" {"]], [tid[b"a"], tid[b"b"], tid[b"c"]]]
    short, heal = aj.heal_prompts(prompts, vocab.tokens, vocab_size=v)
    model = FakeModel(vocab_size=v)
    tokens, mask = aj.pad_prompts(short, pad_id=pad)
    kw = dict(
        sampler=aj.Greedy(), max_new_tokens=12, rng=jax.random.key(0), prompt_mask=mask,
        cache=model.init_cache, pad_id=pad, healing=heal, fast_forward=fast_forward,
    )  # fmt: skip
    ids = np.array([0, 1], np.int32)
    outs = [
        aj.generate(model.apply_step, model.init_params(), tokens, tables, ids, speculate=s, **kw)
        for s in (False, True)
    ]
    np.testing.assert_array_equal(outs[0].tokens, outs[1].tokens)
    np.testing.assert_array_equal(outs[0].lengths, outs[1].lengths)
    np.testing.assert_array_equal(outs[0].accepted, outs[1].accepted)
    assert int(np.asarray(outs[1].drafted).sum()) > 0  # drafts were verified after healing
    for row, h in ((0, b" {"), (1, b"c")):
        text = vocab.decode(np.asarray(outs[1].tokens)[row, : int(outs[1].lengths[row])])
        assert text.startswith(h), (row, text)


def test_generate_heals_a_space_into_the_next_token():
    vocab, eos, pad = _regex_vocab()
    v = vocab.size
    dfa = ac.compile_regex(r'\{"[abc]{1,4}"\}', vocab)
    tables = aj.ConstraintTables.from_dfas([dfa], vocab_size=v)
    tid = {b: i for i, b in enumerate(vocab.tokens) if b}
    # " " backed off: the first token starts with " " and goes on with "{": " " or " {".
    short, heal = aj.heal_prompts([[tid[b"q"], tid[b" "]]] * 2, vocab.tokens, vocab_size=v)
    state = aj.init_state(tables, jnp.array([0, 0]))
    mask, _ = _healing.heal_mask(tables, state, heal)
    assert np.flatnonzero(mask[0]).tolist() == [tid[b" "], tid[b" {"]]
    tokens, mask = aj.pad_prompts(short, pad_id=pad)
    model = FakeModel(vocab_size=v)
    out = aj.generate(
        model.apply_step, model.init_params(), tokens, tables, np.array([0, 0], np.int32),
        sampler=aj.Greedy(), max_new_tokens=10, rng=jax.random.key(0), prompt_mask=mask,
        cache=model.init_cache, pad_id=pad, healing=heal,
    )  # fmt: skip
    toks = np.asarray(out.tokens)
    assert np.isin(toks[:, 0], [tid[b" "], tid[b" {"]]).all()
    for row in range(2):
        text = vocab.decode(toks[row, : int(out.lengths[row])])
        assert regex.fullmatch(r' \{"[abc]{1,4}"\}', text.decode(), partial=True), text


def test_no_heal_rows_decode_as_without_healing():
    vocab, eos, pad = _regex_vocab()
    v = vocab.size
    dfa = ac.compile_regex(r"[abc]+x", vocab)
    tables = aj.ConstraintTables.from_dfas([dfa], vocab_size=v)
    model = FakeModel(vocab_size=v)
    params = model.init_params()
    prompts = [[5, 6], [7]]
    tokens, mask = aj.pad_prompts(prompts, pad_id=pad)
    nothing = _healing.vocabulary_bytes(vocab.tokens, v).replace(
        heal_bytes=jnp.zeros((2, _healing.MAX_HEAL), jnp.uint8), heal_len=jnp.zeros(2, jnp.int32)
    )
    kw = dict(
        sampler=aj.Greedy(), max_new_tokens=8, rng=jax.random.key(0), prompt_mask=mask,
        cache=model.init_cache, pad_id=pad,
    )  # fmt: skip
    ids = np.array([0, -1], np.int32)
    plain = aj.generate(model.apply_step, params, tokens, tables, ids, **kw)
    healed = aj.generate(model.apply_step, params, tokens, tables, ids, healing=nothing, **kw)
    np.testing.assert_array_equal(plain.tokens[:, :7], healed.tokens[:, :7])
    np.testing.assert_array_equal(plain.model_calls, healed.model_calls)


def test_healing_refuses_grammars_and_one_token_outputs():
    vocab, eos, pad = _regex_vocab()
    v = vocab.size
    tables = aj.ConstraintTables.from_dfas([ac.compile_regex("a+", vocab)], vocab_size=v)
    _, heal = aj.heal_prompts([[5, 6]], vocab.tokens, vocab_size=v)
    model = FakeModel(vocab_size=v)
    with pytest.raises(aj.RuntimeShapeError, match="max_new_tokens"):
        aj.generate(
            model.apply_step, model.init_params(), jnp.array([[5]]), tables, [0],
            sampler=aj.Greedy(), max_new_tokens=1, rng=jax.random.key(0),
            cache=model.init_cache, healing=heal,
        )  # fmt: skip
    with pytest.raises(aj.RuntimeShapeError, match="one per prompt row"):
        aj.generate(
            model.apply_step, model.init_params(), jnp.array([[5], [6]]), tables, [0, 0],
            sampler=aj.Greedy(), max_new_tokens=4, rng=jax.random.key(0),
            cache=model.init_cache, healing=heal,
        )  # fmt: skip
    grammar = ac.compile_grammar('start: "(" start ")" | "a"', vocab)
    stack_tables = aj.ConstraintTables.from_dfas([grammar], vocab_size=v)
    with pytest.raises(aj.RuntimeShapeError, match="DFA constraints only"):
        aj.generate(
            model.apply_step, model.init_params(), jnp.array([[5]]), stack_tables, [0],
            sampler=aj.Greedy(), max_new_tokens=4, rng=jax.random.key(0),
            cache=model.init_cache, healing=heal,
        )  # fmt: skip


def test_healing_loop_has_no_host_callbacks():
    vocab, eos, pad = _regex_vocab()
    v = vocab.size
    tables = aj.ConstraintTables.from_dfas([ac.compile_regex("[abc]+x", vocab)], vocab_size=v)
    _, heal = aj.heal_prompts([[5, 6]], vocab.tokens, vocab_size=v)
    model = FakeModel(vocab_size=v)

    def run(params, tables, heal):
        return aj.generate(
            model.apply_step, params, jnp.array([[5]]), tables, jnp.array([0]),
            sampler=aj.Greedy(), max_new_tokens=4, rng=jax.random.key(0),
            cache=model.init_cache, healing=heal,
        ).tokens  # fmt: skip

    jaxpr = jax.make_jaxpr(run)(model.init_params(), tables, heal)
    assert not host_callbacks(jaxpr_primitive_names(jaxpr))
