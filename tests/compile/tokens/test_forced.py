"""Forced canonical token runs (`automata_compile.tokens._forced`), against brute-force oracles."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

import automata_compile as ac
from automata_compile import TableFormatError, TokenDFA
from automata_compile.tokens import _forced
from automata_compile.tokens import _token_dfa as tdfa
from automata_jax import testing

TOY = [b"{", b'"', b'{"', b"name", b'":', b'":"', b"a", b"b", b"ab", b'"}', b"}", None]
EOS = 11


@pytest.fixture(scope="module")
def toy_vocab():
    return ac.Vocabulary.from_bytes(TOY, eos_ids=[EOS], special_ids=[EOS])


def _walk_states(dfa, state, run):
    states = [state]
    for t in run:
        states.append(int(dfa.next_state[states[-1], dfa.token_class[t]]))
    return states


def _check_runs(dfa, vocab, runs):
    """Oracles for every state with a run: forced, allowed, right boundary (rule 4)."""
    allowed_bytes = {}
    checked = 0
    for q in range(dfa.num_states):
        run, after = dfa.forced_run(q)
        if not run:
            continue
        checked += 1
        assert not dfa.accepting[q]
        states = _walk_states(dfa, q, run)
        assert min(states) >= 0 and states[-1] == after
        text = vocab.decode(run)
        # Forced: every allowed token of q agrees with the run's text (brute force over V).
        mask = dfa.allowed(q)
        for t in np.flatnonzero(mask):
            tb = vocab.tokens[t]
            assert tb is not None and (text.startswith(tb) or tb.startswith(text)), (q, tb, text)
        # Rule 4 (when the run spells all of the forced text): no allowed longer token
        # extends any tail of the run.
        assert runs.text[q].startswith(text)
        if text == runs.text[q]:
            for i in range(len(run)):
                tail = vocab.decode(run[i:])
                key = states[i]
                if key not in allowed_bytes:
                    allowed_bytes[key] = [
                        vocab.tokens[t] for t in np.flatnonzero(dfa.allowed(key)) if vocab.tokens[t]
                    ]
                assert not any(
                    len(tb) > len(tail) and tb.startswith(tail) for tb in allowed_bytes[key]
                ), (q, i, tail)
    return checked


def test_toy_runs_are_forced_allowed_and_stop_before_mergeable_tails(toy_vocab):
    dfa, runs = _compile_with_runs(r'\{"name":"[ab]{1,2}"\}', toy_vocab)
    run, after = dfa.forced_run(dfa.start)
    # Greedy longest match spells '{"name":"' as '{"', 'name', '":"'; the last one is
    # kept since no allowed token extends it ('":"' is the longest token starting so).
    assert [toy_vocab.tokens[t] for t in run] == [b'{"', b"name", b'":"']
    assert dfa.forced_run(after) == ([], after)
    assert _check_runs(dfa, toy_vocab, runs) >= 1


def test_tail_dropped_when_a_longer_allowed_token_extends_it():
    vocab = ac.Vocabulary.from_bytes(
        [b"k", b"ey", b"key", b'"', b'"a', b"a", b"b", None], eos_ids=[7], special_ids=[7]
    )
    dfa = ac.compile_regex(r'key"[ab]+', vocab)
    run, after = dfa.forced_run(dfa.start)
    # 'key"' is forced; greedy tokens 'key', '"'; '"a' is allowed after 'key' and extends
    # '"', so '"' is left to a normal masked step.
    assert [vocab.tokens[t] for t in run] == [b"key"]
    assert dfa.forced_run(after) == ([], after)  # '"' alone: dropped again, for the same reason


def test_a_dropped_run_leaves_its_first_token_as_the_structural_draft():
    """Rule 5: where rule 4 drops all of a state's run, its first canonical token is the
    state's structural draft (allowed there, never forced); states with a run have none."""
    vocab = ac.Vocabulary.from_bytes(
        [b"k", b"ey", b"key", b'"', b'"a', b"a", b"b", None], eos_ids=[7], special_ids=[7]
    )
    dfa = ac.compile_regex(r'key"[ab]+', vocab)
    run, after = dfa.forced_run(dfa.start)
    assert dfa.structure_draft[dfa.start] == -1  # it has a run
    assert vocab.tokens[dfa.structure_draft[after]] == b'"'  # '"' alone: '"a' extends it
    assert dfa.step(np.array([after]), dfa.structure_draft[[after]])[0] >= 0


def _check_structure_drafts(dfa, vocab, runs):
    """Oracles of rule 5: a structural draft is allowed, where no run is, and spells a
    prefix of the state's forced text; every state with forced text, no run and an allowed
    canonical first token has one."""
    found = 0
    for q in range(dfa.num_states):
        t = int(dfa.structure_draft[q])
        if t < 0:
            continue
        found += 1
        assert dfa.forced_len[q] == 0 and runs.text[q], q
        assert dfa.allowed(q)[t] and runs.text[q].startswith(vocab.tokens[t]), q
    return found


def test_accepting_states_and_choices_force_nothing(toy_vocab):
    dfa = ac.compile_regex(r"(ab|b)a?", toy_vocab)
    assert dfa.forced_run(dfa.start)[0] == []
    for q in np.flatnonzero(dfa.accepting):
        assert dfa.forced_run(int(q))[0] == []


def test_max_forced_tokens(toy_vocab):
    full = ac.compile_regex(r'\{"name":"a"\}', toy_vocab)
    capped = ac.compile_regex(r'\{"name":"a"\}', toy_vocab, max_forced_tokens=1)
    none = ac.compile_regex(r'\{"name":"a"\}', toy_vocab, max_forced_tokens=0)
    assert full.max_forced == 16 and capped.max_forced == 1 and none.max_forced == 0
    assert capped.forced_run(capped.start)[0] == full.forced_run(full.start)[0][:1]
    assert none.forced_len is None and none.forced_run(none.start) == ([], none.start)


@pytest.mark.parametrize("whitespace", ["compact", "default"])
def test_gemma_runs_equal_the_tokenizers_encoding_in_context(gemma3_vocab, whitespace):
    """The forced run is the tokenizer's own encoding of the forced text after its context."""
    vocab = gemma3_vocab
    schema = json.loads(testing.data_path("person.json").read_text())
    dfa, runs = _compile_with_runs(
        ac.json_schema_to_regex(schema, whitespace=whitespace, property_order="declared"), vocab
    )
    count = 0
    for q in range(dfa.num_states):
        run, _ = dfa.forced_run(q)
        if not run:
            continue
        count += 1
        text, context = runs.text[q], runs.context[q]
        ids = vocab.encode((context + text).decode("utf-8"))
        ends = np.cumsum([len(vocab.tokens[i]) for i in ids]).tolist()
        if not context:
            expected = ids
        elif len(context) in ends:  # a token boundary where the forced text starts
            expected = ids[ends.index(len(context)) + 1 :]
        else:  # the tokenizer merges across that boundary: the forced text is encoded alone
            expected = vocab.encode(text.decode("utf-8"))
        assert expected[: len(run)] == run, (q, context, text)
    assert count >= 10
    assert _check_runs(dfa, vocab, runs) == count
    assert _check_structure_drafts(dfa, vocab, runs) >= 1
    # The key's closing '":"' (before a string value, where '":"",' is allowed too).
    spelled = {vocab.tokens[t] for t in dfa.structure_draft[dfa.structure_draft >= 0]}
    assert (b'":"' if whitespace == "compact" else b'"') in spelled, spelled


def _compile_with_runs(pattern, vocab):
    """compile_regex's pipeline, also returning the `ForcedRuns` (forced text and context)."""
    from automata_compile.automata import _byte_dfa
    from automata_compile.frontends import _extensions, _regex
    from automata_compile.tokens import _compose
    from automata_compile.tokens._token_trie import trie_for

    expanded = _extensions.expand(pattern, vocab)
    ir = _regex.parse(expanded.pattern, expanded.placeholders)
    byte_dfa = _byte_dfa.build_byte_dfa(ir, len(expanded.predicates))
    tc, ns, acc, _, byte_state = _compose.compose(
        byte_dfa, trie_for(vocab), expanded.predicates, return_byte_states=True
    )
    runs = _forced.forced_runs(byte_dfa, byte_state, tc, ns, acc, vocab)
    dfa = ac.compile_regex(pattern, vocab)
    assert np.array_equal(dfa.forced_tokens, runs.tokens)  # deterministic, same tables
    return dfa, runs


# -- the artifact ------------------------------------------------------------------------------


def test_round_trip_and_version_1_files(toy_vocab, tmp_path):
    dfa = ac.compile_regex(r'\{"name":"[ab]{1,2}"\}', toy_vocab)
    path = tmp_path / "f.npz"
    dfa.save(path)
    back = TokenDFA.load(path, vocab=toy_vocab)
    for k in ("forced_tokens", "forced_len", "forced_next", "structure_draft"):
        assert np.array_equal(getattr(dfa, k), getattr(back, k))
    with zipfile.ZipFile(path) as z:
        assert {"forced_tokens.npy", "forced_len.npy", "forced_next.npy"} <= set(z.namelist())
    # A version-1 file (no forced arrays) still loads, with nothing forced.
    old = tmp_path / "v1.npz"
    meta = dfa.metadata()
    meta["format_version"] = 1
    meta.pop("max_forced")
    np.savez(
        old,
        meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
        token_class=dfa.token_class,
        next_state=dfa.next_state,
        accepting=dfa.accepting,
    )
    v1 = TokenDFA.load(old)
    assert v1.forced_len is None and v1.max_forced == 0
    assert v1.structure_draft is None
    assert v1.forced_run(v1.start) == ([], v1.start)
    assert tdfa.FORMAT_VERSION == 3


def test_bad_forced_arrays_are_refused(toy_vocab):
    dfa = ac.compile_regex(r'\{"name":"[ab]{1,2}"\}', toy_vocab)
    base = dict(
        token_class=dfa.token_class,
        next_state=dfa.next_state,
        accepting=dfa.accepting,
        start=dfa.start,
        eos_ids=dfa.eos_ids,
        vocab_fingerprint=dfa.vocab_fingerprint,
    )
    good = dict(
        forced_tokens=dfa.forced_tokens, forced_len=dfa.forced_len, forced_next=dfa.forced_next
    )
    with pytest.raises(TableFormatError, match="all three or none"):
        TokenDFA(**base, forced_tokens=dfa.forced_tokens)
    bad_tokens = dfa.forced_tokens.copy()
    bad_tokens[dfa.start, 0] = toy_vocab.tokens.index(b"}")  # not allowed at the start
    with pytest.raises(TableFormatError, match="not allowed"):
        TokenDFA(**{**base, **good, "forced_tokens": bad_tokens})
    bad_next = dfa.forced_next.copy()
    bad_next[dfa.start] = dfa.start
    with pytest.raises(TableFormatError, match="forced_next"):
        TokenDFA(**{**base, **good, "forced_next": bad_next})
    with pytest.raises(TableFormatError, match="forced_len"):
        TokenDFA(**{**base, **good, "forced_len": np.full_like(dfa.forced_len, 99)})
    with pytest.raises(TableFormatError, match="needs the forced runs"):
        TokenDFA(**base, structure_draft=np.full(dfa.num_states, -1, np.int32))
    with pytest.raises(TableFormatError, match="structure_draft"):
        TokenDFA(**base, **good, structure_draft=np.full(dfa.num_states, -2, np.int32))
    bad_draft = np.full(dfa.num_states, -1, np.int32)
    bad_draft[dfa.start] = toy_vocab.tokens.index(b"}")  # not allowed at the start
    with pytest.raises(TableFormatError, match="not allowed in its state"):
        TokenDFA(**base, **good, structure_draft=bad_draft)


def test_contexts_match_the_one_state_walk(byte_level_vocab):
    from automata_compile.automata import _byte_dfa
    from automata_compile.frontends import _regex

    pattern = r'\{"name": ?"[a-zé]{1,60}", ?"日本": ?(true|false)(, ?"x+y": ?[0-9]{1,3})?\}'
    ir = _regex.parse(pattern, {})
    byte_dfa = _byte_dfa.build_byte_dfa(ir, 0)
    paths = _forced._shortest_paths(byte_dfa)
    states = np.arange(byte_dfa.num_states)
    got = _forced._contexts(paths, states)
    want = [_forced._context((paths[0].tolist(), paths[1].tolist()), s) for s in states.tolist()]
    assert got == want
    assert max(map(len, want)) == _forced.CONTEXT_BYTES  # some paths are longer than kept


@pytest.mark.parametrize("which", ["toy_vocab", "byte_level_vocab", "llama3_vocab"])
def test_batched_runs_match_one_pair_at_a_time(request, which):
    vocab = request.getfixturevalue(which)
    contexts = [b"", b'{"name": ', b"x", b'"a": "', "日本".encode(), b"  ", b'{"q": 1, "']
    forced = [b'"', b'name": "', b", ", b'"}', b"\xc3\xa9t\xc3\xa9", b"true", b"\x00\x7f"]
    pairs = [(c, w) for c in contexts for w in forced]
    want = [_forced._canonical(vocab, c, w) for c, w in pairs]
    assert _forced._canonical_runs(vocab, pairs) == want
    assert any(want)
    if which == "toy_vocab":  # it cannot spell every text: those pairs have no run
        assert not all(want)
    texts = [(c + w).decode("utf-8") for c, w in pairs]
    if which == "llama3_vocab":
        assert vocab.encode_many(texts) == [vocab.encode(t) for t in texts]


@pytest.mark.parametrize("which", ["toy_vocab", "llama3_vocab"])
def test_encodings_are_memoized_per_vocabulary(request, which, monkeypatch):
    vocab = request.getfixturevalue(which)

    def one(t):
        try:
            return vocab.encode(t)
        except ac.VocabularyError:
            return None

    texts = ['{"name": "', "ab", "ab", "日本", '"}', "zz"] + [f"k{i}" for i in range(40)]
    want = [one(t) for t in texts]
    _forced._ENCODINGS.pop(vocab, None)
    calls = []
    real = _forced._encode_uncached
    monkeypatch.setattr(
        _forced, "_encode_uncached", lambda v, ts: calls.append(list(ts)) or real(v, ts)
    )
    got = _forced._encode_many(vocab, texts)
    assert [None if g is None else list(g) for g in got] == want
    assert calls == [list(dict.fromkeys(texts))]  # each distinct text once
    assert _forced._encode_many(vocab, texts[::-1]) == got[::-1]
    assert len(calls) == 1  # all from the memo (failures too)
    # Bounded: the least recently used texts go first.
    monkeypatch.setattr(_forced, "ENCODE_CACHE_ENTRIES", 4)
    _forced._encode_many(vocab, ["x1", "x2", "ab"])
    assert len(_forced._ENCODINGS[vocab]) == 4
    assert set(list(_forced._ENCODINGS[vocab])[-3:]) == {"x1", "x2", "ab"}


def test_prefix_index_lists_the_extending_tokens_again_from_its_memo(byte_level_vocab):
    """`_PrefixIndex.extending` against a scan of the vocabulary, asked twice (the second
    answer from the memo), and after the memo is cleared for being full."""
    index = _forced._PrefixIndex(byte_level_vocab)
    tokens = byte_level_vocab.tokens
    prefixes = [b"", b"a", b"ab", b"\xff", b"\xe2\x82", b" t", b"zz\x00"]
    prefixes += [t[:k] for t in tokens[:60] if t for k in range(1, len(t) + 1)]
    for rounds in range(3):
        if rounds == 2:
            index._found = {str(i).encode(): None for i in range(_forced.PREFIX_MEMO_ENTRIES)}
        for p in prefixes:
            want = sorted(
                i for i, t in enumerate(tokens) if t and len(t) > len(p) and t.startswith(p)
            )
            assert sorted(index.extending(p).tolist()) == want
