"""Bad input to `compile_regex`: every error is specific, names the cause and the place, and
comes quickly (never a hang).

(Artifact errors — TableFormatError, IncompatibleVocabularyError — are in tokens/test_token_dfa.py.)
"""

from __future__ import annotations

import re

import pytest

import automata_compile as ac
from automata_compile import (
    AutomataError,
    EmptyLanguageError,
    InvalidPatternError,
    StateBudgetExceededError,
    UnsupportedPatternError,
)


@pytest.fixture(scope="module")
def bytes_vocab():
    """Every single byte is a token, plus EOS."""
    return ac.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


# -- InvalidPatternError: what `re` itself rejects, with `re`'s offset ---------------------------

MALFORMED = [
    "(",
    "a)",
    "[a-",
    "a{2,1}",
    "*a",
    "a**",
    "(?P<x>a)(?P<x>b)",
    "\\",
    "[z-a]",
    r"\p{L}",
    "(?P<1>a)",
    r"\N{NO SUCH CHARACTER}",
    "(?<=a",
    "a{1000}{1000}",
    "(?L)a",
    "(?Q)",
    r"\x4",
    "[]",
]


@pytest.mark.parametrize("pattern", MALFORMED)
def test_malformed_patterns_raise_invalid_pattern_with_offset(pattern, bytes_vocab):
    with pytest.raises(re.error) as ref:
        re.compile(pattern)
    with pytest.raises(InvalidPatternError) as err:
        ac.compile_regex(pattern, bytes_vocab)
    e = err.value
    assert isinstance(e, AutomataError) and isinstance(e, ValueError)
    assert e.pattern == pattern
    assert e.offset == ref.value.pos
    msg = str(e)
    assert ref.value.msg in msg
    assert f"at offset {ref.value.pos}" in msg and pattern in msg
    # The caret line points at the offset.
    lines = msg.splitlines()
    assert lines[-1].index("^") - 2 == e.offset


def test_non_str_patterns_are_invalid(bytes_vocab):
    for bad in (b"abc", None, 42):
        with pytest.raises(InvalidPatternError, match=r"expected a str pattern"):
            ac.compile_regex(bad, bytes_vocab)


def test_huge_repeat_counts_are_invalid_not_crashes(bytes_vocab):
    with pytest.raises(InvalidPatternError, match="too large"):
        ac.compile_regex("x{99999999999}", bytes_vocab)


# -- UnsupportedPatternError: names the construct and where it is --------------------------------

UNSUPPORTED = [
    # (pattern, words in the message, offset)
    (r"(a)\1", "backreference", 3),
    (r"(?P<x>a)b(?P=x)", "backreference", 9),
    (r"(a)(b)(c)x\3", "backreference", 10),
    ("a(?=b)", "lookaround", 1),
    ("a(?!b)", "lookaround", 1),
    ("(?<=a)b", "lookaround", 0),
    ("xy(?<!a)b", "lookaround", 2),
    (r"(a)?(?(1)b|c)", "conditional", 4),
    ("a^b", "anchor in the middle", 1),
    ("a$b", "anchor in the middle", 1),
    ("c(a|^b)", "anchor in the middle", 4),
    ("(a|b$)c", "anchor in the middle", 4),
    (r"a\Ab", "anchor in the middle", 1),
    (r"a\Zb", "anchor in the middle", 1),
    (r"\bfoo", r"word boundary \b", 0),
    (r"foo\b", r"word boundary \b", 3),
    (r"x[\b]y\b", r"word boundary \b", 6),  # [\b] is a backspace character, not a boundary
    (r"foo\B", r"non-boundary \B", 3),
    ("(?>ab)c", "atomic group", 0),
    ("a*+", "possessive", 2),
    ("ab++c", "possessive", 3),
    ("a{2,3}+", "possessive", 6),
]


@pytest.mark.parametrize("pattern,words,offset", UNSUPPORTED)
def test_unsupported_constructs_are_named_with_offset(pattern, words, offset, bytes_vocab):
    re.compile(pattern)  # well-formed for `re`
    with pytest.raises(UnsupportedPatternError) as err:
        ac.compile_regex(pattern, bytes_vocab)
    e = err.value
    assert not isinstance(e, InvalidPatternError)
    assert words in str(e)
    assert "finite automaton" in str(e)
    assert e.pattern == pattern
    assert e.offset == offset, str(e)


@pytest.mark.parametrize(
    "pattern,member,non_member",
    [
        ("^abc$", "abc", "abcd"),
        (r"\Aabc\Z", "abc", "ab"),
        ("(^a|b)", "a", "ab"),
        ("(a|b$)", "b", ""),
        ("^(x|^y)$", "y", "xy"),
        ("abc$", "abc", "abc\n"),  # full-match semantics: $ does not allow a final newline
    ],
)
def test_anchors_at_the_ends_are_accepted(pattern, member, non_member, bytes_vocab):
    dfa = ac.compile_regex(pattern, bytes_vocab)
    assert dfa.accepts(list(member.encode()))
    assert not dfa.accepts(list(non_member.encode()))


# -- EmptyLanguageError ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern", [r"[^\s\S]", r"a[^\s\S]", r"(a|b)[^\d\D]c*", r"[^\x00-\U0010ffff]"]
)
def test_empty_language(pattern, bytes_vocab):
    with pytest.raises(EmptyLanguageError, match="matches no string"):
        ac.compile_regex(pattern, bytes_vocab)


def test_language_no_token_can_spell():
    # The pattern matches "c", but the vocabulary has no token containing the byte "c".
    vocab = ac.Vocabulary.from_bytes([b"a", b"b", b"ab", None], eos_ids=[3])
    with pytest.raises(EmptyLanguageError, match="vocabulary"):
        ac.compile_regex("c", vocab)
    with pytest.raises(EmptyLanguageError, match="vocabulary"):
        ac.compile_regex("(ab)+c", vocab)
    # A branch that needs "c" is dropped; the rest still compiles.
    dfa = ac.compile_regex("(ab)+c|a", vocab)
    assert dfa.accepts([0]) and not dfa.accepts([2])
    assert dfa.num_states == 2


def test_language_needing_a_half_character_token():
    # "é" is C3 A9; the vocabulary can start it but never finish it.
    vocab = ac.Vocabulary.from_bytes([b"\xc3", b"x", None], eos_ids=[2])
    with pytest.raises(EmptyLanguageError):
        ac.compile_regex("é", vocab)
    dfa = ac.compile_regex("é?x", vocab)
    assert dfa.accepts([1]) and not dfa.allowed(dfa.start)[0]


# -- StateBudgetExceededError: raised by the budget, not after the work -----------------------------
# (No wall-clock assertions: the work budgets bound the time; a runaway compile would hang here.)


def test_state_budget_exceeded(bytes_vocab):
    with pytest.raises(StateBudgetExceededError, match="max_states=1000"):
        ac.compile_regex("(a|b)*a(a|b){20}", bytes_vocab, max_states=1000)
    assert issubclass(StateBudgetExceededError, AutomataError)


def test_state_budget_nfa_size(bytes_vocab):
    # Huge bounded repeats blow up the NFA before any DFA state exists.
    with pytest.raises(StateBudgetExceededError, match="NFA states"):
        ac.compile_regex("(?:[a-z]{1000}){300}", bytes_vocab, max_states=1000)
    with pytest.raises(StateBudgetExceededError, match="max_states=1000"):
        ac.compile_regex("[a-z]{60000}", bytes_vocab, max_states=1000)


def test_budget_is_a_budget_not_a_cap(bytes_vocab):
    # Just under the budget compiles; the exponential pattern with fewer repeats fits.
    dfa = ac.compile_regex("(a|b)*a(a|b){5}", bytes_vocab, max_states=1000)
    assert dfa.num_states == 2**6
