"""Hypothesis properties of `compile_regex`.

* Every tokenization of a string of the language is accepted: the tokenizer's canonical
  `Vocabulary.encode`, and random segmentations into vocabulary tokens (random splits at byte
  positions; byte-fallback / byte-level tokens make every split spellable, even inside a
  character).
* Strings outside the language (mutations that `re.fullmatch` rejects) are rejected; in general,
  acceptance equals `re.fullmatch` on any string.
* Random regexes (drawn from a small grammar) behave the same on a small byte-complete
  vocabulary.
* Structure: the token DFA is minimal (brute-force Moore refinement finds no two equivalent
  states), its classes are distinct functions, class 0 is dead, and every state is reachable
  and can reach acceptance.
"""

from __future__ import annotations

import functools
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import automata_compile as ac

UTF8 = st.characters(codec="utf-8")

PATTERNS = [
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}){0,12}"',
    r"(in|int|into|integer|interval)( (in|int|integer))*",
    r"(true|false|null)(, (true|false|null)){0,3}",
    r"(ab|c){2,5}x{0,3}",
    r"[\u4e00-\u9fff]{1,5}(、[\u4e00-\u9fff]{1,4}){0,2}。?",
    r"(café|naïve|[a-zà-ÿ]{1,8})( [a-zà-ÿ]{1,8}){0,3}",
    r"(😀|👍🏽|🇫🇷|[\U0001F300-\U0001F5FF]){1,4}",
    r'\s*\{\s*"a"\s*:\s*[0-9]{1,4}\s*\}\s*',
    r"\d{1,3}(\.\d{1,2})?",
    r"\w+( \w+)?",
    r".{0,12}",
    r"[^\n]{0,20}\n",
]

SETTINGS = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

ALL_VOCABS = ["byte_level_vocab", "mistral_sp_vocab", "gemma3_vocab", "llama3_vocab"]


# -- helpers --------------------------------------------------------------------------------------


_DFAS: dict = {}


def compiled(pattern: str, vocab) -> ac.TokenDFA:
    key = (vocab.fingerprint, pattern)
    if key not in _DFAS:
        _DFAS[key] = ac.compile_regex(pattern, vocab)
    return _DFAS[key]


@functools.lru_cache(maxsize=8)
def _pieces(fingerprint: str, vocab) -> tuple[dict[bytes, list[int]], int]:
    table: dict[bytes, list[int]] = {}
    for i, t in enumerate(vocab.tokens):
        if t:
            table.setdefault(t, []).append(i)
    return table, max(map(len, table))


def random_segmentation(data: bytes, vocab, rnd: random.Random) -> list[int]:
    """A random tokenization of ``data``: at each position, a random token that matches there."""
    table, longest = _pieces(vocab.fingerprint, vocab)
    ids, pos = [], 0
    while pos < len(data):
        options = [
            k for k in range(1, min(longest, len(data) - pos) + 1) if data[pos : pos + k] in table
        ]
        assert options, f"{vocab.name}: no token spells {data[pos : pos + 8]!r}"
        # Favour long tokens half of the time (realistic), any token otherwise (adversarial).
        k = max(options) if rnd.random() < 0.5 else rnd.choice(options)
        ids.append(rnd.choice(table[data[pos : pos + k]]))
        pos += k
    assert vocab.decode(ids) == data
    return ids


def canonical_prefix(vocab) -> bytes:
    """What the tokenizer's encode() puts before the text (SentencePiece's dummy-prefix space)."""
    return vocab.decode(vocab.encode("x"))[:-1]


def mutate(text: str, rnd: random.Random, alphabet: str) -> str:
    chars = list(text)
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(4)
        i = rnd.randint(0, len(chars))
        if op == 0 and chars:  # delete
            del chars[min(i, len(chars) - 1)]
        elif op == 1:  # insert
            chars.insert(i, rnd.choice(alphabet))
        elif op == 2 and chars:  # replace
            chars[min(i, len(chars) - 1)] = rnd.choice(alphabet)
        elif chars:  # duplicate a slice
            j = rnd.randint(i, len(chars))
            chars[i:i] = chars[i:j] or chars[-1:]
    return "".join(chars)


def alphabet_of(pattern: str) -> str:
    # Characters of the pattern itself, plus a few from every script the tests use.
    extra = '0123456789aAzé日、。😀🏽\n \t"\\{}:.,-+eE'
    return "".join(sorted(set(pattern) | set(extra)))


def moore_blocks(next_state: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """Brute-force Moore refinement: the coarsest partition compatible with all transitions."""
    block = accepting.astype(np.int64)
    while True:
        succ = np.where(next_state >= 0, block[np.maximum(next_state, 0)], -1)
        rows = np.concatenate([block[:, None], succ], axis=1)
        _, new = np.unique(rows, axis=0, return_inverse=True)
        new = new.reshape(-1)
        if new.max() == block.max() and len(np.unique(new)) == len(np.unique(block)):
            return new
        block = new


def check_structure(dfa: ac.TokenDFA) -> None:
    ns, acc = dfa.next_state, dfa.accepting
    q, c = ns.shape
    # Minimal: no two states equivalent.
    assert len(np.unique(moore_blocks(ns, acc))) == q, "two token-DFA states are equivalent"
    # Classes are distinct functions; class 0 is the dead class; every class is used.
    assert (ns[:, 0] == -1).all()
    assert len(np.unique(ns.T, axis=0)) == c, "two token classes have equal columns"
    assert set(np.unique(dfa.token_class).tolist()) == set(range(c))
    # Every state reachable from start ...
    seen, todo = {dfa.start}, [dfa.start]
    while todo:
        s = todo.pop()
        for t in np.unique(ns[s][ns[s] >= 0]).tolist():
            if t not in seen:
                seen.add(t)
                todo.append(t)
    assert len(seen) == q, f"{q - len(seen)} unreachable states"
    # ... and co-reachable: acceptance reachable from every state through token edges.
    live = set(np.flatnonzero(acc).tolist())
    changed = True
    while changed:
        new = {s for s in range(q) if s not in live and np.isin(ns[s], list(live)).any()}
        live |= new
        changed = bool(new)
    assert len(live) == q, f"{q - len(live)} states cannot reach acceptance"
    # Special ids (EOS included) are in the dead class.
    for i in dfa.eos_ids:
        assert dfa.token_class[i] == 0


# -- fixed patterns, all vocabularies -------------------------------------------------------------


@pytest.mark.parametrize("vocab_fixture", ALL_VOCABS)
@pytest.mark.parametrize("pattern", PATTERNS)
@SETTINGS
@given(data=st.data())
def test_every_tokenization_of_a_member_is_accepted(vocab_fixture, pattern, data, request):
    vocab = request.getfixturevalue(vocab_fixture)
    dfa = compiled(pattern, vocab)
    text = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=UTF8), label="text")
    assume(re.fullmatch(pattern, text))  # hypothesis' regex strategy is not exactly `re`
    rnd = data.draw(st.randoms(use_true_random=False), label="rnd")
    raw = text.encode("utf-8")
    for _ in range(3):
        ids = random_segmentation(raw, vocab, rnd)
        assert dfa.accepts(ids), (text, ids)
    # The canonical encoding (SentencePiece puts a space first: compile that pattern too).
    prefix = canonical_prefix(vocab)
    ids = vocab.encode(text)
    if vocab.decode(ids) == prefix + raw:
        cdfa = dfa if not prefix else compiled(re.escape(prefix.decode()) + f"(?:{pattern})", vocab)
        assert cdfa.accepts(ids), (text, ids)


@pytest.mark.parametrize("vocab_fixture", ALL_VOCABS)
@pytest.mark.parametrize("pattern", PATTERNS)
@SETTINGS
@given(data=st.data())
def test_acceptance_equals_re_fullmatch_on_mutants(vocab_fixture, pattern, data, request):
    vocab = request.getfixturevalue(vocab_fixture)
    dfa = compiled(pattern, vocab)
    text = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=UTF8), label="text")
    rnd = data.draw(st.randoms(use_true_random=False), label="rnd")
    mutant = mutate(text, rnd, alphabet_of(pattern))
    expected = re.fullmatch(pattern, mutant) is not None
    ids = random_segmentation(mutant.encode("utf-8"), vocab, rnd)
    assert dfa.accepts(ids) == expected, (mutant, ids)
    if not expected:  # once dead, a walk stays dead; an accepting state is never reached
        state = dfa.walk(ids)
        assert state < 0 or not dfa.accepting[state]


@pytest.mark.parametrize("vocab_fixture", ALL_VOCABS)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_token_dfa_is_minimal_and_trim(vocab_fixture, pattern, request):
    vocab = request.getfixturevalue(vocab_fixture)
    check_structure(compiled(pattern, vocab))


# -- random regexes, small byte-complete vocabulary -----------------------------------------------

_ATOMS = [
    "a", "b", "c", "é", "日", "😀", "-", r"\.", " ", "\n",
    "[a-c]", "[^a]", "[0-9]", r"\d", r"\s", "[é-ë]", "[\u4e00-\u4e0f]", "[😀-😂]", ".",
    "[a-zé日]", r"[^\s]", "(?:ab|ac)",
]  # fmt: skip


def _regexes():
    """Patterns with their flag "has an unbounded repeat".

    Unbounded repeats only directly on atoms, and counted repeats only of parts with none: a
    counted repeat of a star, nested (`((x*){1,3}){1,3}`), makes `re` (the oracle) backtrack
    for hours on a near-miss string.
    """
    leaves = st.tuples(st.sampled_from(_ATOMS), st.sampled_from(["", "", "*", "+", "?"])).map(
        lambda p: (f"(?:{p[0]}){p[1]}" if p[1] else p[0], p[1] in ("*", "+"))
    )

    def counted(p):
        (child, unbounded), lo, hi = p
        if unbounded:
            return f"(?:{child})?", True
        return f"(?:{child}){{{min(lo, hi)},{max(lo, hi)}}}", False

    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(lambda p: (p[0][0] + p[1][0], p[0][1] or p[1][1])),
            st.tuples(children, children).map(
                lambda p: (f"(?:{p[0][0]}|{p[1][0]})", p[0][1] or p[1][1])
            ),
            children.map(lambda p: (f"(?:{p[0]})?", p[1])),
            st.tuples(children, st.integers(0, 3), st.integers(0, 3)).map(counted),
        )

    return st.recursive(leaves, extend, max_leaves=8).map(lambda p: p[0])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_regexes(), data=st.data())
def test_random_regexes_on_a_byte_level_vocabulary(byte_level_vocab, pattern, data):
    vocab = byte_level_vocab
    dfa = ac.compile_regex(pattern, vocab)
    check_structure(dfa)
    rnd = data.draw(st.randoms(use_true_random=False), label="rnd")
    members = data.draw(
        st.lists(st.from_regex(pattern, fullmatch=True, alphabet=UTF8), min_size=1, max_size=4),
        label="members",
    )
    alphabet = alphabet_of(pattern)
    for text in members:
        if re.fullmatch(pattern, text) is None:  # hypothesis' regex strategy is not exactly `re`
            continue
        assert dfa.accepts(vocab.encode(text)), text  # greedy longest-match (from_bytes)
        assert dfa.accepts(random_segmentation(text.encode(), vocab, rnd)), text
        for _ in range(4):
            mutant = mutate(text, rnd, alphabet)
            ids = random_segmentation(mutant.encode(), vocab, rnd)
            assert dfa.accepts(ids) == (re.fullmatch(pattern, mutant) is not None), mutant


def test_moore_reference_detects_redundant_states():
    # The brute-force check itself: two equivalent states must be found.
    ns = np.array([[-1, 1, 2], [-1, 3, -1], [-1, 3, -1], [-1, -1, -1]], dtype=np.int32)
    acc = np.array([False, False, False, True])
    assert len(np.unique(moore_blocks(ns, acc))) == 3
