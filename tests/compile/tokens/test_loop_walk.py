"""`tokens._loop_walk`: a loop's cached walk against a byte-by-byte walk of every token, and
finding loops and their shapes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile.tokens import _loop_walk, trie_for
from automata_compile.tokens._token_trie import build_trie

ALPHABET = b'ab"\\'


def _prefix(trie, depth, node) -> bytes:
    out = []
    for d in range(depth, 0, -1):
        out.append(int(trie.byte[d][node]))
        node = int(trie.parent[d][node])
    return bytes(out[::-1])


def _brute(local, token: bytes, start: int):
    """(end, exit): the local state the token ends in (n: dead or left) and, if it leaves,
    (prefix read, state left from)."""
    n = local.shape[0]
    s = start
    for i, b in enumerate(token):
        t = int(local[s, b])
        if t == n + 1:
            return n, (token[: i + 1], s)
        if t == n:
            return n, None
        s = t
    return s, None


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    tokens=st.lists(
        st.binary(min_size=1, max_size=5).map(lambda b: bytes(ALPHABET[x % 4] for x in b)),
        min_size=1,
        max_size=30,
        unique=True,
    ),
)
def test_walk_table_matches_a_byte_by_byte_walk(n, seed, tokens):
    rng = np.random.default_rng(seed)
    local = np.full((n, 256), n, dtype=np.int16)  # dead outside the alphabet
    local[:, list(ALPHABET)] = rng.integers(0, n + 2, size=(n, len(ALPHABET)))
    trie = build_trie(tokens)
    walk = _loop_walk.walk_table(local, trie)
    exits = {
        (int(i), _prefix(trie, int(d), int(x)), int(s))
        for d, x, i, s in zip(walk.exit_depth, walk.exit_node, walk.exit_start, walk.exit_src,
                              strict=True)
    }  # fmt: skip
    assert len(exits) == walk.exit_node.shape[0]
    expected_exits = set()
    for tok in tokens:
        g = int(trie.token_group[tokens.index(tok)])
        r = int(walk.group_row[g])
        row = walk.rows[r] if r >= 0 else np.full(n, n)
        for i in range(n):
            end, ex = _brute(local, tok, i)
            assert row[i] == end, (tok, i)
            if ex is not None:
                expected_exits.add((i, *ex))
    assert exits == expected_exits


def test_find_loops_gives_copies_of_a_string_one_shape(byte_level_vocab):
    from automata_compile.automata import build_byte_dfa
    from automata_compile.frontends import _regex

    ir = _regex.parse(r'\{"a":"[^"\\]*","b":"[^"\\]*"\}', {})
    trans = build_byte_dfa(ir, 0).trans[:, :256]
    loops = _loop_walk.find_loops(trans, np.arange(trans.shape[0]))
    assert len(loops) == 2
    assert loops[0].key == loops[1].key
    assert not set(loops[0].states.tolist()) & set(loops[1].states.tolist())
    for lp in loops:  # each loop's states reach each other
        assert (trans[lp.states[0]] == lp.states[0]).any()


def test_the_cache_is_bounded(monkeypatch, byte_level_vocab):
    monkeypatch.setattr(_loop_walk, "CACHE_SIZE", 1)
    for pattern in (r'"[^"]*"', r"'[^']*'", r'"[^"]*"'):
        ac.compile_regex(pattern, byte_level_vocab)
    assert len(_loop_walk._CACHE[trie_for(byte_level_vocab)]) == 1


@pytest.mark.parametrize("size", [_loop_walk.MAX_LOOP + 1])
def test_a_loop_past_max_loop_is_not_cached(size):
    # one strongly connected component of `size` states: byte b moves i -> i + 1 (mod size)
    trans = np.full((size, 256), -1, dtype=np.int32)
    trans[:, ord("a")] = (np.arange(size) + 1) % size
    trans[:, ord("b")] = np.arange(size)
    assert _loop_walk.find_loops(trans, np.arange(size)) == []


def test_matching_a_known_shape_finds_what_the_search_finds(monkeypatch):
    from automata_compile.automata import build_byte_dfa
    from automata_compile.frontends import _regex

    ir = _regex.parse(r'\["[^"\\]*(\\.[^"\\]*)*"(,"[^"\\]*(\\.[^"\\]*)*"){0,3}\]', {})
    trans = build_byte_dfa(ir, 0).trans[:, :256]
    monkeypatch.setattr(_loop_walk, "_SHAPES", _loop_walk.collections.OrderedDict())
    matched = _loop_walk.find_loops(trans, np.arange(trans.shape[0]))
    assert len(matched) == 4 and len({lp.key for lp in matched}) == 1
    searched = []
    for lp in matched:  # each searched alone, no shape known
        _loop_walk._SHAPES.clear()
        (one,) = _loop_walk.find_loops(trans, lp.states[:1])
        searched.append(one)
    for a, b in zip(matched, searched, strict=True):
        assert a.key == b.key and np.array_equal(a.states, b.states)
    # a root of another shape does not match
    other = np.flatnonzero((trans == np.arange(trans.shape[0])[:, None]).any(axis=1))
    table = next(iter(_loop_walk._SHAPES.values()))
    taken = np.zeros(trans.shape[0] + 1, dtype=bool)
    for root in other.tolist():
        states = _loop_walk._match(trans, root, table, taken)
        assert states is None or any(np.array_equal(states, lp.states) for lp in matched)


def _match_by_rows(byte_trans, root, table, taken):
    """The oracle: matches the shape row by row, mapping each row's local states."""
    n = table.shape[0]
    states = np.full(n, -1, dtype=np.int64)
    states[0] = root
    for i in range(n):
        if states[i] < 0:
            return None
        row = byte_trans[states[i]]
        for b in range(256):
            t = int(table[i, b])
            if t == n and row[b] != -1:
                return None
            if t < n:
                if row[b] < 0 or (states[t] >= 0 and states[t] != row[b]):
                    return None
                states[t] = row[b]
    if len(set(states.tolist())) != n or taken[states].any():
        return None
    local = np.full(byte_trans.shape[0] + 1, n + 1, dtype=np.int16)
    local[-1] = n
    local[states] = np.arange(n, dtype=np.int16)
    return states if np.array_equal(local[byte_trans[states]], table) else None


@pytest.mark.parametrize(
    "pattern",
    [
        r'\["[^"\\]*(\\.[^"\\]*)*"(,"[^"\\]*(\\.[^"\\]*)*"){0,3}\]',
        r'("(a|\\")*"|"[^"]*")(x"([^"\\]|\\[nt])*")?',
        r"(ab*c|[a-c]*d)+e",
    ],
)
def test_match_by_first_edges_agrees_with_matching_row_by_row(monkeypatch, pattern):
    from automata_compile.automata import build_byte_dfa
    from automata_compile.frontends import _regex

    trans = build_byte_dfa(_regex.parse(pattern, {}), 0).trans[:, :256]
    monkeypatch.setattr(_loop_walk, "_SHAPES", _loop_walk.collections.OrderedDict())
    q = trans.shape[0]
    for root in range(q):  # every state's component as a shape (most are no loop)
        _loop_walk.find_loops(trans, np.array([root]))
    tables = list(_loop_walk._SHAPES.values())
    assert tables
    matched = 0
    rng = np.random.default_rng(0)
    for table in tables:
        for taken_share in (0.0, 0.2):
            taken = np.zeros(q + 1, dtype=bool)
            taken[:q] = rng.random(q) < taken_share
            for root in range(q):
                got = _loop_walk._match(trans, root, table, taken)
                want = _match_by_rows(trans, root, table, taken)
                assert (got is None) == (want is None)
                assert got is None or np.array_equal(got, want)
                matched += got is not None
    assert matched >= len(tables)  # each shape at least at its own root
