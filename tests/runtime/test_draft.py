"""The n-gram prompt lookup (`automata_jax._draft`) against a Python brute force."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from automata_jax._draft import prompt_lookup


def _oracle(history, valid, end, sizes, k):
    """The draft of one row: longest n first, then the latest match ending before end - 1."""
    known = [(int(t) if ok else None) for t, ok in zip(history[:end], valid[:end], strict=True)]
    for n in sorted(set(sizes), reverse=True):
        if end < n + 1:
            continue
        suffix = known[end - n :]
        if None in suffix:
            continue
        for p in range(end - 2, n - 2, -1):  # p: the last slot of an earlier occurrence
            if known[p - n + 1 : p + 1] == suffix:
                draft = []
                for t in known[p + 1 : p + 1 + k]:
                    if t is None:
                        break
                    draft.append(t)
                return draft
    return []


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
)
def test_matches_a_brute_force(rows, sizes, k):
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
    drafts, count = prompt_lookup(
        jnp.asarray(history), jnp.asarray(valid), jnp.asarray(end), ngram_sizes=sizes, draft_len=k
    )
    for b in range(len(rows)):
        want = _oracle(history[b], valid[b], int(end[b]), sizes, k)
        assert np.asarray(drafts[b, : int(count[b])]).tolist() == want, (b, rows[b])


def test_copies_a_span_of_the_prompt():
    prompt = [7, 1, 2, 3, 4, 5, 6, 8]
    output = [0, 1, 2]  # "... 1 2" was in the prompt: draft what followed it
    history = jnp.asarray([prompt + output])
    drafts, count = prompt_lookup(
        history, history >= 0, jnp.asarray([11]), ngram_sizes=(3, 2, 1), draft_len=4
    )
    assert drafts[0, : int(count[0])].tolist() == [3, 4, 5, 6]
