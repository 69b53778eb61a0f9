"""Exact-mask oracle tests of `compile_grammar` on real vocabularies (Llama-3, Gemma-3, and the
32k SentencePiece of mistral-common).

Along random walks through the token-level PDA, the whole allowed set (every token id of the
vocabulary) must equal brute force with the hand-written byte-level CFG oracle
(`grammar_oracle`: ``p + bytes(t)`` viable iff the oracle's configuration stays non-empty),
and EOS must be allowed iff ``p`` is in the language. Every random segmentation of valid
documents into vocabulary tokens must be accepted.
"""

from __future__ import annotations

import random
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import automata_compile as ac

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import grammar_oracle as go  # noqa: E402

VOCABS = ["mistral_sp_vocab", "llama3_vocab", "gemma3_vocab"]
ORACLES = {"json": go.json_oracle, "arithmetic": go.arithmetic_oracle}

JSON_DOCS = [
    b'{"name": "Ada", "tags": ["x", "y\\n"], "n": -12.5e-3, "ok": true, "none": null}',
    b'[[[[1, 2], {"a": {"b": {"c": []}}}]], "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 0, 1E+2]',
    b' {"\\u00e9\\"": [ {} , [ ] ,false ] }\n',
    b'"just a string with \\\\ and \\/"',
]
ARITH_DOCS = [
    b"1 + f(x, 2) * -(y - 3) ^ 2",
    b"max(a_1,b2,(c)) / 4.5e-3 % 7",
    b" -(-(--x)) ^ (1 + g()) ^ 2 ",
    b"sin(cos(tan(0.5 * pi)))",
]


def _vocab(request, name):
    return request.getfixturevalue(name)


@pytest.fixture(scope="module")
def compiled():
    cache = {}

    def get(grammar, vocab):
        key = (grammar, vocab.fingerprint)
        if key not in cache:
            cache[key] = ac.compile_grammar(grammar, vocab)
        return cache[key]

    return get


@pytest.fixture(scope="module")
def token_bytes():
    """`go.TokenBytes` of a vocabulary, packed once per module."""
    cache = {}

    def get(vocab):
        if vocab.fingerprint not in cache:
            cache[vocab.fingerprint] = go.TokenBytes(vocab.tokens)
        return cache[vocab.fingerprint]

    return get


@pytest.mark.slow
@pytest.mark.parametrize("grammar", sorted(ORACLES))
@pytest.mark.parametrize("vocab_name", VOCABS)
def test_masks_equal_brute_force_oracle(request, compiled, token_bytes, vocab_name, grammar):
    vocab = _vocab(request, vocab_name)
    pda = compiled(grammar, vocab)
    oracle = ORACLES[grammar]()
    rng = random.Random(zlib.crc32(f"{vocab_name}/{grammar}".encode()))
    eos = list(vocab.eos_ids)
    structural = set(b'{}[](),:"+-*/^')
    short_structural = np.array(
        [t is not None and len(t) <= 3 and bool(set(t) & structural) for t in vocab.tokens]
    )
    checked = 0
    for _ in range(3):
        state, stack, prefix = pda.start, (), b""
        for _ in range(12):
            mask = pda.allowed(state, stack)
            got = mask.copy()
            got[eos] = False
            want = oracle.allowed_mask(prefix, token_bytes(vocab))
            wrong = np.flatnonzero(got != want)
            assert not wrong.size, (prefix, [vocab.tokens[t] for t in wrong[:10]])
            assert all(mask[eos]) == oracle.in_language(prefix), prefix
            checked += 1
            got_ids = np.flatnonzero(got)
            if not got_ids.size:
                break
            # Prefer short structural tokens so the walks nest and close rules.
            short = got_ids[short_structural[got_ids]]
            tok = int(rng.choice(short if short.size and rng.random() < 0.7 else got_ids))
            state, stack = pda.advance_config(state, stack, tok)
            prefix += vocab.tokens[tok]
    assert checked >= 12


def _segmentations(data: bytes, index: dict, rng: random.Random, count: int):
    """Random tokenizations of ``data``: at each position a random token that is a prefix of the
    rest and from whose end the rest can still be tokenized."""
    n = len(data)
    reach = [False] * (n + 1)
    reach[n] = True
    for i in range(n - 1, -1, -1):
        reach[i] = any(reach[j] and data[i:j] in index for j in range(i + 1, min(n, i + 32) + 1))
    assert reach[0], data
    for _ in range(count):
        out, i = [], 0
        while i < n:
            j = rng.choice(
                [j for j in range(i + 1, min(n, i + 32) + 1) if reach[j] and data[i:j] in index]
            )
            out.append(index[data[i:j]])
            i = j
        yield out


@pytest.mark.parametrize("grammar, docs", [("json", JSON_DOCS), ("arithmetic", ARITH_DOCS)])
@pytest.mark.parametrize("vocab_name", VOCABS)
def test_every_tokenization_of_valid_documents_is_accepted(
    request, compiled, vocab_name, grammar, docs
):
    vocab = _vocab(request, vocab_name)
    pda = compiled(grammar, vocab)
    oracle = ORACLES[grammar]()
    index = {}
    for i, t in enumerate(vocab.tokens):
        if t and i not in vocab.special_ids:
            index.setdefault(t, i)
    rng = random.Random(zlib.crc32(f"seg/{vocab_name}/{grammar}".encode()))
    for doc in docs:
        assert oracle.in_language(doc), doc
        for ids in _segmentations(doc, index, rng, 20):
            assert pda.accepts(ids), (doc, [vocab.tokens[t] for t in ids])
        canonical = vocab.encode(doc.decode("utf-8"))
        assert pda.accepts(canonical), doc
        assert not pda.accepts(canonical[:-1]) or oracle.in_language(
            b"".join(vocab.tokens[t] for t in canonical[:-1])
        )
