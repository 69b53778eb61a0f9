"""Regex IR → UTF-8 byte DFA (`automata_compile.automata._byte_dfa`), against `re` and UTF-8 by brute
force: the DFA accepts exactly the UTF-8 encodings of the strings `re.fullmatch` accepts, never
invalid UTF-8, and is trimmed and minimal."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automata_compile.automata import _byte_dfa
from automata_compile.frontends import _regex

UTF8 = st.characters(codec="utf-8")


@functools.cache
def byte_dfa(pattern: str) -> _byte_dfa.ByteDFA:
    return _byte_dfa.build_byte_dfa(_regex.parse(pattern))


def walk_all(dfa: _byte_dfa.ByteDFA, strings: np.ndarray) -> np.ndarray:
    """Vectorized full match of the rows of ``strings`` (uint8[N, L])."""
    q = np.full(strings.shape[0], dfa.start, dtype=np.int64)
    for j in range(strings.shape[1]):
        alive = q >= 0
        q[alive] = dfa.trans[q[alive], strings[alive, j]]
    out = np.zeros(strings.shape[0], dtype=bool)
    alive = q >= 0
    out[alive] = dfa.accepting[q[alive]]
    return out


def is_valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_trim_and_minimal(dfa: _byte_dfa.ByteDFA) -> None:
    trans, acc = dfa.trans, dfa.accepting
    q = trans.shape[0]
    # Reachable and co-reachable.
    seen, todo = {dfa.start}, [dfa.start]
    while todo:
        s = todo.pop()
        for t in set(trans[s][trans[s] >= 0].tolist()) - seen:
            seen.add(t)
            todo.append(t)
    assert len(seen) == q
    live, changed = set(np.flatnonzero(acc).tolist()), True
    while changed:
        new = {s for s in range(q) if s not in live and np.isin(trans[s], list(live)).any()}
        live |= new
        changed = bool(new)
    assert len(live) == q
    # Minimal (brute-force Moore refinement).
    block = acc.astype(np.int64)
    while True:
        succ = np.where(trans >= 0, block[np.maximum(trans, 0)], -1)
        _, new = np.unique(np.concatenate([block[:, None], succ], 1), axis=0, return_inverse=True)
        new = new.reshape(-1)
        if len(np.unique(new)) == len(np.unique(block)):
            break
        block = new
    assert len(np.unique(block)) == q, "equivalent byte-DFA states"


PATTERNS = [
    "abc",
    "[a-z]+",
    r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?",
    r"\w+",
    r"\s*x\s*",
    r"[^a-z]{1,3}",
    ".*",
    "(?s).{0,3}",
    "(?i)straße|kelvin",
    r"(?i)[a-zé]+",
    r"(?a)\w+\d",
    r"(?x) a  b # a comment\n c",
    r"\N{GREEK SMALL LETTER ALPHA}\u00e9\U0001F600\x41\101",
    "[日本語]{2}|😀+",
    "(ab|a)(bc|c)",
    "a+?b*?c??",
    "(?:x|y){2,4}z{0}",
    "[\U0001f300-\U0001f5ff]+",
    "[\ud7ff\ue000]",
    "[^\n]",
    r"[\d\s-]+",
    r"[^\W\d_]+",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_structure(pattern):
    dfa = byte_dfa(pattern)
    assert dfa.num_terminals == 0 and dfa.trans.shape[1] == 256
    assert dfa.trans.dtype == np.int32 and dfa.accepting.dtype == np.bool_
    check_trim_and_minimal(dfa)


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_matches_equal_re_fullmatch(pattern, data):
    dfa = byte_dfa(pattern)
    member = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=UTF8))
    other = data.draw(st.text(alphabet=UTF8, max_size=6))
    mixed = data.draw(st.sampled_from([member + other, other + member, member[:-1], member * 2]))
    for text in (member, other, mixed):
        assert dfa.matches(text.encode("utf-8")) == (re.fullmatch(pattern, text) is not None), text


@given(st.binary(max_size=8))
@settings(max_examples=300)
def test_only_valid_utf8_is_ever_accepted(data):
    dfa = _ANY
    assert dfa.matches(data) == is_valid_utf8(data)


_ANY = byte_dfa("(?s).*")


@pytest.mark.parametrize("pattern", ["(?s).", "[^a]", r"\w", r"\W"])
def test_one_character_classes_exhaustively(pattern):
    """All byte strings of length 1-2, and 1M random 3- and 4-byte strings: accepted iff they are
    the UTF-8 encoding of one character the class matches."""
    dfa = byte_dfa(pattern)
    rx = re.compile(pattern)
    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 4):
        if n < 3:
            grid = np.indices((256,) * n).reshape(n, -1).T.astype(np.uint8)
        else:
            grid = rng.integers(0, 256, size=(1_000_000, n), dtype=np.uint8)
            lead = (0xE0, 0xF0) if n == 3 else (0xF0, 0xF5)
            grid[:, 0] = rng.integers(*lead, size=grid.shape[0])  # mostly valid leads
            grid[: grid.shape[0] // 2, 1:] = (grid[: grid.shape[0] // 2, 1:] & 0x3F) | 0x80
        got = walk_all(dfa, grid)
        # Only valid one-character strings can be accepted; check those with `re`.
        accepted = grid[got]
        for row in accepted[:: max(1, accepted.shape[0] // 5000)]:
            text = bytes(row).decode("utf-8")
            assert len(text) == 1 and rx.fullmatch(text)
        valid = np.array(
            [_one_char(bytes(r)) for r in grid[:: max(1, grid.shape[0] // 20000)]], dtype=object
        )
        sampled_got = got[:: max(1, grid.shape[0] // 20000)]
        for ch, g in zip(valid, sampled_got, strict=True):
            assert g == (ch is not None and rx.fullmatch(ch) is not None), repr(ch)
    # Exact totals for the 2- and 3-byte grids.
    if pattern == "(?s).":
        grid2 = np.indices((256, 256)).reshape(2, -1).T.astype(np.uint8)
        assert walk_all(dfa, grid2).sum() == 0x800 - 0x80
        grid3 = np.indices((256, 256, 256)).reshape(3, -1).T.astype(np.uint8)
        assert walk_all(dfa, grid3).sum() == 0x10000 - 0x800 - 0x800  # minus surrogates


def _one_char(data: bytes):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if len(text) == 1 else None


def test_sizes_of_simple_dfas():
    assert byte_dfa("abc").num_states == 4
    assert byte_dfa("[a-z]+").num_states == 2
    assert byte_dfa("(ab|a)(bc|c)").matches(b"abc")
    # Surrogates cannot be produced even when a class names them.
    dfa = byte_dfa("[\ud000-\uefff]")
    assert not dfa.matches(b"\xed\xa0\x80") and dfa.matches("\ud7ff".encode())


def test_large_bounded_repeat_is_linear():
    dfa = byte_dfa("[0-9]{1,200}")
    assert dfa.num_states == 201
    assert dfa.matches(b"1" * 200) and not dfa.matches(b"1" * 201)


def _reference_chars(nfa, ranges, s, e, memo) -> None:
    """The UTF-8 spelling of a character set as it was written before `_byte_dfa._spelling`:
    each sequence's suffix keys sliced on every call."""
    from automata_compile.automata import _charsets as cs

    for seq in cs.utf8_sequences(ranges):
        if len(seq) == 1:
            nfa.edges[s].append((*seq[0], e))
            continue
        nxt = e
        for k in range(len(seq) - 1, 0, -1):
            st_ = memo.get(seq[k:])
            if st_ is None:
                st_ = nfa.state()
                nfa.edges[st_].append((*seq[k], nxt))
                memo[seq[k:]] = st_
            nxt = st_
        nfa.edges[s].append((*seq[0], nxt))


_CODEPOINT = st.one_of(
    st.integers(0, 0x7F), st.integers(0x80, 0x7FF), st.integers(0x800, 0xFFFF),
    st.integers(0x10000, 0x10FFFF), st.sampled_from([0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000]),
)  # fmt: skip


@given(
    st.lists(st.lists(st.tuples(_CODEPOINT, _CODEPOINT), min_size=1, max_size=4), max_size=6),
    st.data(),
)
@settings(max_examples=200, deadline=None)
def test_spelling_builds_the_nfa_the_reference_spelling_does(sets, data):
    """`_Bytes.chars` (its plan of suffixes cached per set) and the reference spelling build
    the same NFA, state for state, when sets recur and when edges into one state share
    their suffix memo (as `Automaton` edges do)."""
    from automata_compile.automata import _charsets as cs
    from automata_compile.automata import _fsa

    sets = [cs.normalize(tuple((min(a, b), max(a, b)) for a, b in r)) for r in sets]
    sets = [r for r in sets if r]
    calls = [
        (data.draw(st.sampled_from(sets)), data.draw(st.integers(0, 2)))
        for _ in range(len(sets) * 2)
    ]
    nfas = []
    for spell in ("plan", "reference"):
        nfa = _fsa.NFA(_fsa.Budget("a test", 10**6, 10**8), 10**6)
        builder = _byte_dfa._Bytes(nfa)
        ends = [nfa.state() for _ in range(3)]
        memos: dict = {}
        for ranges, end in calls:
            s = nfa.state()
            memo = memos.setdefault(end, {})
            if spell == "plan":
                builder.chars(ranges, s, ends[end], memo)
            else:
                _reference_chars(nfa, ranges, s, ends[end], memo)
        nfas.append((nfa.edges, nfa.eps))
    assert nfas[0] == nfas[1]


# -- a property's byte DFA size from its value's (`lead_then_states`) ---------------------------


@settings(max_examples=150, deadline=None)
@given(
    lead=st.text(alphabet='ab"c:', min_size=1, max_size=5),
    pattern=st.sampled_from(
        [
            "[ab]*",
            "(?:ca)*",
            "\u00e9|\u4e2d+",
            '[^"]{0,3}',
            "x(?:[a-c\u00e0-\u00ff]|\\s)*",
            "",
            ".?",
        ]
    ),
)
def test_lead_then_states_is_the_size_of_the_built_dfa(lead, pattern):
    """A literal lead (a property's name) on a tail's minimal automaton (its value): the
    size from the tail's DFA is the size of the whole's DFA, built, or None (a twin of the
    chain's last state, or counts that do not bound the whole within the budgets)."""
    from automata_compile.automata import _char_dfa
    from automata_compile.automata._ir import Chars, Seq

    tail = _regex.parse(pattern, None)
    node = Seq(tuple(Chars(((ord(c), ord(c)),)) for c in lead) + (tail,))
    m = _char_dfa.minimal(tail)
    whole = _char_dfa.minimal(node)
    if _char_dfa.is_never(whole):
        return
    built = _byte_dfa.build_byte_dfa(whole).num_states
    assert _byte_dfa.lead_then_states(lead.encode(), m) in (None, built)
    parts = _char_dfa.chain_parts(whole)  # the chain `minimal` spelled, when it did
    if parts is not None:
        assert parts[0] == tuple(map(ord, lead))
        assert _byte_dfa.lead_then_states(lead.encode(), parts[1]) == built


def test_lead_then_states_declines_a_twin_and_a_budget(monkeypatch):
    from automata_compile.automata import _char_dfa

    m = _char_dfa.minimal(_regex.parse("(?:ca)*", None))  # "a" then (ca)*: a(ca)* = (ac)*a
    assert _byte_dfa.lead_then_states(b"a", m) is None
    assert _byte_dfa.lead_then_states(b"b", m) == 1 + 2
    assert _byte_dfa.lead_then_states(b"\xc3", m) is None  # not ASCII
    monkeypatch.setattr(_byte_dfa, "_TAIL_COUNTS", type(_byte_dfa._TAIL_COUNTS)())
    monkeypatch.setattr(_byte_dfa, "DEFAULT_MAX_STATES", 3)  # the whole needs 1 + 2 subsets
    assert _byte_dfa.lead_then_states(b"bb", m) is None
