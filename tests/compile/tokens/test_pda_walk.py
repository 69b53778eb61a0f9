"""`tokens._pda_walk`: every token's outcomes from every state, checked against a plain
byte-by-byte run of the byte PDA with a real stack.

A `Walker` reports, per (start state, token), configurations ``(state, pushed, popped)``
over a *symbolic* stack: ``popped`` are the return states the token pops below its own
pushes (top first). The oracle here knows nothing of that: from configurations reached
by running the PDA on random valid prefixes (a state and a concrete stack), it runs each
token's bytes with the stack (call: push the return state and enter the callee; return:
pop), and the walker's outcomes that fit the stack must give exactly that configuration,
or nothing when the run dies. The walk is checked in its three forms: every start walked
with rows, every start walked with lanes, and the Python depth-first walk.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from automata_compile import Vocabulary
from automata_compile.automata import CALL, RETURN, SHIFT, build_byte_pda
from automata_compile.frontends.grammar import read_grammar
from automata_compile.pipeline import builtin_grammar
from automata_compile.tokens import _pda_walk
from automata_compile.tokens._rows import unique_rows, unique_rows_unordered
from automata_compile.tokens._token_trie import build_trie

GRAMMARS = {
    # calls and returns nest: a token like "]],[[" returns twice and calls twice
    "lists": 'start: "[" (start ("," start)*)? "]" | "1"',
    # a nullable call and tail positions: returns decided by the byte after the rule
    "pairs": 'start: pair+\npair: "(" start? ")" | "a" "b"?',
    "arithmetic": builtin_grammar("arithmetic"),
}


def _vocab(alphabet: bytes, seed: int) -> Vocabulary:
    rng = random.Random(seed)
    tokens = {bytes([b]) for b in alphabet}
    tokens |= {bytes(p) for p in itertools.product(alphabet, repeat=2)}
    while len(tokens) < 400:
        n = rng.randint(3, 7)
        tokens.add(bytes(rng.choice(alphabet) for _ in range(n)))
    return Vocabulary.from_bytes([*sorted(tokens), b"<eos>"], eos_ids=[len(tokens)])


ALPHABETS = {"lists": b"[],1", "pairs": b"()ab", "arithmetic": b"1+-*^(),xf .e"}


def concrete(pda, q: int, stack: tuple, data: bytes):
    """The configuration after ``data`` from ``(q, stack)`` (stack top last), or None."""
    stack = list(stack)
    for b in data:
        while True:
            k = int(pda.kind[q, b])
            if k == SHIFT:
                q = int(pda.arg[q, b])
                break
            if k == CALL:
                if pda.ret[q, b] >= 0:
                    stack.append(int(pda.ret[q, b]))
                q = int(pda.starts[pda.arg[q, b]])
            elif k == RETURN and stack:
                q = stack.pop()
            else:
                return None
    return q, tuple(stack)


def reached_configs(pda, alphabet: bytes, seed: int, count: int = 40) -> list:
    """Configurations on random walks from the initial one, deepest stacks included."""
    rng = random.Random(seed)
    seen: dict = {}
    for _ in range(200):
        config = (int(pda.starts[0]), ())
        for _ in range(rng.randint(0, 14)):
            nxt = [c for b in alphabet if (c := concrete(pda, *config, bytes([b]))) is not None]
            if not nxt:
                break
            config = rng.choice(nxt)
            seen.setdefault(config, None)
    configs = sorted(seen, key=lambda c: (-len(c[1]), c))
    if len(configs) <= count:
        return configs
    half = count // 2
    return configs[:half] + rng.sample(configs[half:], half)


def apply(outcome: tuple, stack: tuple):
    """A walker configuration applied to a real stack, or None if its pops do not fit."""
    target, pushed, popped = outcome
    if len(popped) > len(stack):
        return None
    for i, r in enumerate(popped):
        if stack[len(stack) - 1 - i] != r:
            return None
    return target, stack[: len(stack) - len(popped)] + tuple(pushed)


def outcomes_by_walk(walker, walk) -> dict:
    """{(start, group): set of configurations}, rows and sparse entries together."""
    out: dict = {}
    for src, g, oid in zip(walk.src.tolist(), walk.group.tolist(), walk.oid.tolist(), strict=True):
        out.setdefault((src, g), set()).update(walker.outcomes[oid])
    for g, r in enumerate(walk.group_rows(walker.trie.num_groups).tolist()):
        if r < 0:
            continue
        for i, q in enumerate(walk.wide.tolist()):
            t = int(walk.rows[r, i])
            if t != walk.sink:
                out.setdefault((q, g), set()).add((t, (), ()))
    return out


def outcomes_by_dfs(walker, states) -> dict:
    out: dict = {}
    for q in states:
        g, o = [], []
        walker._dfs(0, 0, ((q, (), ()),), g, o)
        for gr, oid in zip(g, o, strict=True):
            out.setdefault((q, gr), set()).update(walker.outcomes[oid])
    return out


@pytest.mark.parametrize("mode", ["rows", "lanes", "dfs"])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_outcomes_match_a_run_with_a_real_stack(name, mode, monkeypatch):
    alphabet = ALPHABETS[name]
    vocab = _vocab(alphabet, seed=len(name))
    pda = build_byte_pda(read_grammar(GRAMMARS[name], vocab))
    trie = build_trie(vocab.tokens)
    walker = _pda_walk.Walker(pda, trie)
    live = np.flatnonzero((pda.kind != 0).any(axis=1))
    if mode == "dfs":
        table = outcomes_by_dfs(walker, live.tolist())
    else:
        monkeypatch.setattr(_pda_walk, "WIDE_SHARE", -1.0 if mode == "rows" else 2.0)
        walk = walker.walk(live)
        assert walk.wide.size == (live.size if mode == "rows" else 0)
        table = outcomes_by_walk(walker, walk)
    configs = reached_configs(pda, alphabet, seed=len(name))
    assert any(len(stack) >= 2 for _, stack in configs)  # the stack really is used
    checked = alive = 0
    for q, stack in configs:
        for t, data in enumerate(vocab.tokens):
            if not data:
                continue
            want = concrete(pda, q, stack, data)
            outs = table.get((q, int(trie.token_group[t])), set())
            got = {c for o in outs if (c := apply(o, stack)) is not None}
            assert got == ({want} if want is not None else set()), (q, stack, data)
            checked += 1
            alive += want is not None
    assert alive > 50 and checked > alive  # both live and dead tokens were judged


@pytest.mark.parametrize("share", [-1.0, 2.0])
@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_allowed_bytes_of_the_asked_rows_only(name, share, monkeypatch):
    """`Walker.allowed_bytes` over the asked states' rows only (few of the PDA's) gives
    the same walks, array for array, as over every row, in rows and in lanes."""
    vocab = _vocab(ALPHABETS[name], seed=len(name))
    pda = build_byte_pda(read_grammar(GRAMMARS[name], vocab))
    trie = build_trie(vocab.tokens)
    live = np.flatnonzero((pda.kind != 0).any(axis=1))
    monkeypatch.setattr(_pda_walk, "WIDE_SHARE", share)
    walks = []
    for ratio in (0, 10**9):  # 0: always the asked rows; 10**9: always every row
        monkeypatch.setattr(_pda_walk, "ALLOWED_ROWS_RATIO", ratio)
        walker = _pda_walk.Walker(pda, trie)
        walks.append((walker.walk(live), walker.outcomes))
    _same_walks(*walks)


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_level_rows_in_any_order(name, monkeypatch):
    """A row walk numbers each level's distinct rows in any order (`_level_rows`): the
    finished walk is the same, array for array, as with the rows in byte order."""
    vocab = _vocab(ALPHABETS[name], seed=len(name))
    pda = build_byte_pda(read_grammar(GRAMMARS[name], vocab))
    trie = build_trie(vocab.tokens)
    live = np.flatnonzero((pda.kind != 0).any(axis=1))
    monkeypatch.setattr(_pda_walk, "WIDE_SHARE", -1.0)
    walks = []
    for level_rows in (unique_rows, unique_rows_unordered):
        monkeypatch.setattr(_pda_walk, "_level_rows", level_rows)
        walker = _pda_walk.Walker(pda, trie)
        walks.append((walker.walk(live), walker.outcomes))
    _same_walks(*walks)


def _same_walks(one, other):
    (a, oa), (b, ob) = one, other
    assert oa == ob
    for f in a.__dataclass_fields__:
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f
        else:
            assert x == y, f


def test_allowed_bytes_agree():
    """Both forms of `Walker.allowed_bytes` list, per asked state, the bytes its row does
    not refuse, in byte order."""
    rng = np.random.default_rng(0)
    vocab = _vocab(ALPHABETS["lists"], seed=1)
    pda = build_byte_pda(read_grammar(GRAMMARS["lists"], vocab))
    trie = build_trie(vocab.tokens)
    states = rng.integers(0, pda.num_states, 40)
    for ratio in (0, 10**9):
        _pda_walk.ALLOWED_ROWS_RATIO, old = ratio, _pda_walk.ALLOWED_ROWS_RATIO
        try:
            offsets, flat, index = _pda_walk.Walker(pda, trie).allowed_bytes(states)
        finally:
            _pda_walk.ALLOWED_ROWS_RATIO = old
        for q, i in zip(states.tolist(), index.tolist(), strict=True):
            want = np.flatnonzero(pda.kind[q] != 0).tolist()
            assert flat[offsets[i] : offsets[i + 1]].tolist() == want


@pytest.mark.parametrize("seed", range(6))
def test_sparse_row_exceptions(seed):
    """`_sparse_row_exceptions` (the groups a row walk reached, in any order) gives
    `_row_exceptions` of the dense int[G] view, the most common row included."""
    rng = np.random.default_rng(seed)
    num_groups = int(rng.integers(0, 50))
    k = int(rng.integers(0, num_groups + 1))
    group = rng.permutation(num_groups)[:k].astype(np.int64)
    row = rng.integers(0, int(rng.integers(1, 4)), k).astype(np.int64)
    dense = np.full(num_groups, -1, np.int64)
    dense[group] = row
    got = _pda_walk._sparse_row_exceptions(group, row, num_groups)
    want = _pda_walk._row_exceptions(dense)
    assert got[0] == want[0]
    for g, w in zip(got[1:], want[1:], strict=True):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
