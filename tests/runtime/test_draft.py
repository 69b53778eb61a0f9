"""The n-gram prompt lookup (`automata_jax._draft`) against a Python brute force."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_jax import RuntimeShapeError, bare_spellings, bare_twins, draft_keys
from automata_jax._draft import STOP, prompt_lookup


def _oracle(history, valid, end, sizes, k, keys=None, spellings=None, before=None):
    """The draft of one row: longest n first, then the latest match ending before end - 1
    (a slot matches a token equal to its id or, with ``keys``, to its key); with
    ``spellings``, before n = 1 (or last), the latest slot whose bare spelling (2+ pieces)
    starts with the last token: the spelling's rest, then what follows the slot; and the
    first draft position copied from a STOP slot (len(draft) if none). With ``before``, a
    one-token n-gram matches only slots before it."""
    known = [(int(t) if ok else None) for t, ok in zip(history[:end], valid[:end], strict=True)]
    keys = [-1] * len(known) if keys is None else [int(x) for x in keys[:end]]

    def copy(p, first):
        draft, stop = list(first[:k]), None
        for i, t in enumerate(known[p + 1 : p + 1 + k - len(draft)]):
            if t is None:
                break
            if stop is None and keys[p + 1 + i] <= STOP:
                stop = len(draft)
            draft.append(t)
        return draft, len(draft) if stop is None else stop

    def spelled():
        if spellings is None or end < 2 or known[end - 1] is None:
            return None
        for p in range(end - 2, -1, -1):
            pieces = []
            for t in spellings[p]:
                if t < 0:
                    break
                pieces.append(int(t))
            if known[p] is not None and len(pieces) >= 2 and pieces[0] == known[end - 1]:
                return copy(p, pieces[1:])
        return None

    def matches(p, suffix):
        slots = range(p - len(suffix) + 1, p + 1)
        return all(
            known[s] is not None and w in (known[s], -3 - keys[s] if keys[s] <= -3 else keys[s])
            for s, w in zip(slots, suffix, strict=True)
        )

    for n in sorted(set(sizes), reverse=True):
        if n == 1 and spelled() is not None:
            return spelled()
        if end < n + 1:
            continue
        suffix = known[end - n :]
        if None in suffix:
            continue
        for p in range(end - 2, n - 2, -1):  # p: the last slot of an earlier occurrence
            if n == 1 and before is not None and p >= before:
                continue
            if matches(p, suffix):
                return copy(p, [])
    return spelled() or ([], 0)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=14),  # tokens
            st.integers(0, 3),  # leading pads
            st.integers(0, 4),  # unknown tail slots
        ),
        min_size=1,
        max_size=4,
    ),
    sizes=st.sampled_from([(1,), (3, 2, 1), (4, 2)]),
    k=st.sampled_from([1, 4]),
    key_seed=st.one_of(st.none(), st.integers(0, 2**16)),
    spell_seed=st.one_of(st.none(), st.integers(0, 2**16)),
    before=st.one_of(st.none(), st.lists(st.integers(0, 24), min_size=4, max_size=4)),
)
def test_matches_a_brute_force(rows, sizes, k, key_seed, spell_seed, before):
    length = 24  # fixed shapes: one compilation per (sizes, k)
    history = np.full((4, length), 9, np.int32)
    valid = np.zeros((4, length), bool)
    end = np.zeros(4, np.int32)
    for b, (tokens, pads, unknown) in enumerate(rows):
        history[b, pads : pads + len(tokens)] = tokens
        valid[b, pads : pads + len(tokens)] = True
        history[b, pads + len(tokens) :] = 1  # slots past the end must never be matched
        valid[b, pads + len(tokens) :] = unknown > 0
        end[b] = pads + len(tokens)
    keys = None  # alternate spellings: random ids (-1: none), also on unknown slots
    if key_seed is not None:
        keys = np.random.default_rng(key_seed).integers(-6, 4, size=(4, length)).astype(np.int32)
    spellings = None  # bare spellings: random ids and -1 (a -1 ends a spelling)
    if spell_seed is not None:
        spell_rng = np.random.default_rng(spell_seed)
        spellings = spell_rng.integers(-1, 4, size=(4, length, 3)).astype(np.int32)
        spellings[spell_rng.random((4, length)) < 0.5] = -1  # most slots have none
    drafts, count, stop = prompt_lookup(
        jnp.asarray(history), jnp.asarray(valid), jnp.asarray(end), ngram_sizes=sizes, draft_len=k,
        keys=None if keys is None else jnp.asarray(keys),
        spellings=None if spellings is None else jnp.asarray(spellings),
        unigrams_before=None if before is None else jnp.asarray(before, jnp.int32),
    )  # fmt: skip
    for b in range(len(rows)):
        want, want_stop = _oracle(
            history[b], valid[b], int(end[b]), sizes, k, None if keys is None else keys[b],
            None if spellings is None else spellings[b], None if before is None else before[b],
        )  # fmt: skip
        assert np.asarray(drafts[b, : int(count[b])]).tolist() == want, (b, rows[b])
        assert min(int(stop[b]), int(count[b])) == want_stop, (b, rows[b])


def test_copies_a_span_of_the_prompt():
    prompt = [7, 1, 2, 3, 4, 5, 6, 8]
    output = [0, 1, 2]  # "... 1 2" was in the prompt: draft what followed it
    history = jnp.asarray([prompt + output])
    drafts, count, stop = prompt_lookup(
        history, history >= 0, jnp.asarray([11]), ngram_sizes=(3, 2, 1), draft_len=4
    )
    assert drafts[0, : int(count[0])].tolist() == [3, 4, 5, 6]


def test_a_bare_twin_starts_the_draft():
    # " Ada Lovelace was" in the prompt; the output spells the value "Ada" (no space).
    tokens = [b"Ada", b" Ada", b" Lovelace", b" was", b'"', b" b\\", b"b\\"]
    twins = bare_twins(tokens)
    assert twins.tolist() == [-1, 0, -1, -1, STOP, -1, -1]  # no twin needing an escape
    prompt = [3, 1, 2, 3]
    output = [4, 0]  # '"Ada'
    history = jnp.asarray([prompt + output])
    keys = np.concatenate([draft_keys([prompt], twins), [[-1, -1]]], axis=1)
    args = dict(ngram_sizes=(3, 2, 1), draft_len=2)
    drafts, count, stop = prompt_lookup(history, history >= 0, jnp.asarray([6]), **args)
    assert int(count[0]) == 0  # token ids alone: "Ada" never occurs in the prompt
    drafts, count, stop = prompt_lookup(
        history, history >= 0, jnp.asarray([6]), keys=jnp.asarray(keys), **args
    )
    assert drafts[0, : int(count[0])].tolist() == [2, 3]  # " Lovelace was"


def test_a_copy_stops_at_a_new_clause():
    # "Ada Lovelace, 36" in the prompt: the draft after "Ada" stops before ","; so does one
    # after a line break, and every token whose first byte past its spaces is punctuation.
    tokens = [b"Ada", b" Lovelace", b",", b" 36", b"\n", b" (", b" x", b"-"]
    twins = bare_twins(tokens)
    assert twins.tolist() == [-1, -1, STOP, -1, STOP, STOP, -1, -1]
    prompt = [0, 1, 2, 3, 4]
    history = jnp.asarray([prompt + [0]])
    keys = jnp.asarray(np.concatenate([draft_keys([prompt], twins), [[-1]]], axis=1))
    args = dict(ngram_sizes=(1,), draft_len=4)
    drafts, count, stop = prompt_lookup(history, history >= 0, jnp.asarray([6]), keys=keys, **args)
    assert drafts[0, : int(count[0])].tolist() == [1, 2, 3, 4]
    assert int(stop[0]) == 1
    _, _, stop = prompt_lookup(history, history >= 0, jnp.asarray([6]), **args)
    assert int(stop[0]) == 4  # without keys, no stop


def test_a_lowercase_word_can_stop_a_copy_and_keep_its_twin():
    # "Sophie Martin turned 24": with lowercase stops, the copy after "Sophie" stops before
    # " turned"; "turned" in the output still matches " turned" (its twin is kept).
    tokens = [b"Sophie", b" Martin", b" turned", b"turned", b" 24"]
    twins = bare_twins(tokens, lowercase_stops=True)
    assert twins.tolist() == [-1, -1, -3 - 3, -1, -1]
    assert bare_twins(tokens).tolist() == [-1, -1, 3, -1, -1]
    prompt = [0, 1, 2, 4]
    keys = jnp.asarray(np.concatenate([draft_keys([prompt], twins), [[-1]]], axis=1))
    args = dict(ngram_sizes=(1,), draft_len=3, keys=keys)
    history = jnp.asarray([prompt + [0]])
    drafts, count, stop = prompt_lookup(history, history >= 0, jnp.asarray([5]), **args)
    assert drafts[0, : int(count[0])].tolist() == [1, 2, 4] and int(stop[0]) == 1
    history = jnp.asarray([prompt + [3]])  # the output spells "turned"
    drafts, count, _ = prompt_lookup(history, history >= 0, jnp.asarray([5]), **args)
    assert drafts[0, : int(count[0])].tolist() == [4, 3]  # " 24", then the output itself


def test_draft_keys_rejects_ids_outside_the_vocabulary():
    twins = bare_twins([b"a", b" a"])
    with pytest.raises(
        RuntimeShapeError, match=r"draft_keys: prompt token ids must lie in \[0, 2\)"
    ):
        draft_keys([[0, 2]], twins)
    with pytest.raises(RuntimeShapeError, match="draft_keys: expected prompt_tokens"):
        draft_keys([0, 1], twins)


def test_a_bare_spelling_starts_the_draft():
    # " in Bergen, Norway" in the prompt; the output spells the value "Ber" "gen" (the bare
    # word is two tokens): after "Ber", draft "gen" then the prompt's tokens after " Bergen".
    tokens = [b"Ber", b"gen", b" Bergen", b",", b" Norway", b'"', b" in"]
    spell = {"Bergen": [0, 1], "Norway": [7, 7]}.get  # id 7: no text, never spelled
    spellings = bare_spellings(tokens + [None], lambda text: spell(text, [8]), range(8))
    assert spellings[2].tolist() == [0, 1, -1] and (spellings[[0, 1, 3, 4, 5, 6]] == -1).all()
    prompt = [6, 2, 3, 4]
    keys = draft_keys([prompt + [5, 0]], bare_twins(tokens + [None]), spellings)
    assert keys.shape == (1, 6, 4)
    history = jnp.asarray([prompt + [5, 0]])
    drafts, count, stop = prompt_lookup(
        history, history >= 0, jnp.asarray([6]), ngram_sizes=(3, 2, 1), draft_len=4,
        keys=jnp.asarray(keys[..., 0]), spellings=jnp.asarray(keys[..., 1:]),
    )  # fmt: skip
    assert drafts[0, : int(count[0])].tolist() == [1, 3, 4, 5]  # "gen" "," " Norway" '"'
    assert int(stop[0]) == 1  # the copy stops at the clause start ","


def test_bare_spellings_skip_escapes_clauses_and_wrong_spellings():
    tokens = [b"a", b"b", b' a"', b" ,a", b" ab", b" \xff", b" ba"]
    enc = {'a"': [0, 1], ",a": [0, 1], "ab": [0, 1], "ba": [0, 0]}.__getitem__
    spellings = bare_spellings(tokens, enc, range(7))
    assert spellings[4].tolist() == [0, 1, -1]  # "ab" spelled a, b
    assert (np.delete(spellings, 4, axis=0) == -1).all()  # escapes, clauses, bad bytes, b != a
    with pytest.raises(RuntimeShapeError, match="spellings"):
        draft_keys([[0]], bare_twins(tokens), np.zeros((7, 1), np.int32))
