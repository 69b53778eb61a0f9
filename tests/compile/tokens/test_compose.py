"""`tokens._compose`: the fast paths (loops' cached walks, wide rows) against the plain sparse
walk, table for table, and the canonical numbering of the token DFA.

The reference is every state walked as sparse lanes (``WIDE_SHARE = 2``: no state is wide)
without loops; its tables are checked against brute force by the regex and JSON Schema
oracle tests. Tables are numbered canonically, so every way of splitting the walk must give
the same arrays, not just the same language.
"""

from __future__ import annotations

import numpy as np
import pytest

import automata_compile as ac
from automata_compile.tokens import _compose, _loop_walk

PATTERNS = [
    r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    r'\{"a": ?"[^"]*", ?"b": ?(-?[0-9]{1,20}|"[^"\\]*")\}',
    r"(ab|c)*x[0-9]{1,6}",
    r"[a-z ]{0,40}\.",
]
SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "city": {"type": "string"},
            "guests": {"type": "integer"},
            "note": {"type": "string", "maxLength": 3},
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    {"type": "array", "items": {"type": "string"}, "maxItems": 3},
]
# (USE_LOOPS, WIDE_SHARE): loops on the default split, every state wide (with and without
# loops), and the previous default split without loops.
VARIANTS = [(True, _compose.WIDE_SHARE), (True, -1.0), (False, -1.0), (False, 0.05)]


def _arrays(dfa):
    return [
        np.asarray(a)
        for a in (dfa.token_class, dfa.next_state, dfa.accepting, dfa.start)
        + (dfa.forced_tokens, dfa.forced_len, dfa.forced_next)
    ]


def _compile_variants(monkeypatch, build):
    out = []
    for use_loops, share in [(False, 2.0), *VARIANTS]:
        monkeypatch.setattr(_compose, "USE_LOOPS", use_loops)
        monkeypatch.setattr(_compose, "WIDE_SHARE", share)
        out.append(_arrays(build()))
    return out


def _assert_same(results):
    ref, *rest = results
    for i, got in enumerate(rest):
        for a, b in zip(ref, got, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b), VARIANTS[i]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_variants_give_the_same_tables_byte_level(monkeypatch, byte_level_vocab, pattern):
    build = lambda: ac.compile_regex(pattern, byte_level_vocab)  # noqa: E731
    _assert_same(_compile_variants(monkeypatch, build))


@pytest.mark.parametrize("pattern", PATTERNS[:2])
def test_variants_give_the_same_tables_llama3(monkeypatch, llama3_vocab, pattern):
    _assert_same(_compile_variants(monkeypatch, lambda: ac.compile_regex(pattern, llama3_vocab)))


@pytest.mark.parametrize("schema", SCHEMAS)
def test_variants_give_the_same_tables_for_schemas(monkeypatch, llama3_vocab, schema):
    build = lambda: ac.compile_json_schema(schema, llama3_vocab)  # noqa: E731
    _assert_same(_compile_variants(monkeypatch, build))


def test_copies_of_a_string_share_one_cached_walk(llama3_vocab):
    schema = SCHEMAS[0]
    ac.compile_json_schema(schema, llama3_vocab)
    before = dict(_loop_walk.STATS)
    ac.compile_json_schema(schema, llama3_vocab)
    assert _loop_walk.STATS["misses"] == before.get("misses", 0)
    assert _loop_walk.STATS["hits"] > before.get("hits", 0)


def test_canonical_numbering_ignores_the_input_numbering(byte_level_vocab):
    from automata_compile.automata import build_byte_dfa
    from automata_compile.frontends import _regex
    from automata_compile.tokens._token_trie import trie_for

    ir = _regex.parse(PATTERNS[1], {})
    byte_dfa = build_byte_dfa(ir, 0)
    tc, ns, acc, st, bs = _compose.compose(
        byte_dfa, trie_for(byte_level_vocab), return_byte_states=True
    )
    assert (np.diff(bs) > 0).all()  # states in the order of their byte states
    first = [int(np.flatnonzero(tc == c)[0]) for c in range(1, ns.shape[1])]
    assert first == sorted(first)  # classes in the order of their first token
    rng = np.random.default_rng(0)
    for _ in range(5):
        sp = rng.permutation(ns.shape[0])  # new id of each state
        cp = np.concatenate([[0], 1 + rng.permutation(ns.shape[1] - 1)])  # class 0 stays
        inv_s, inv_c = np.argsort(sp), np.argsort(cp)
        ns2 = np.where(ns[inv_s][:, inv_c] >= 0, sp[np.maximum(ns[inv_s][:, inv_c], 0)], -1)
        got = _compose.canonical_numbering(
            cp[tc], ns2.astype(np.int32), acc[inv_s], int(sp[st]), bs[inv_s]
        )
        for a, b in zip(got, (tc, ns, acc, st, bs), strict=True):
            assert np.array_equal(a, b)


def test_classes_fall_back_to_the_exact_sort_on_a_collision(monkeypatch, byte_level_vocab):
    # Two groups with the same sparse pair (equal hashes) and different rows: with MIX = 0
    # their sort keys collide, and the exact check must split them again.
    from automata_compile.tokens._token_trie import trie_for

    trie = trie_for(byte_level_vocab)
    g1, g2 = 5, 9
    z = np.zeros(0, np.int64)
    group_row = np.full(trie.num_groups, -1, dtype=np.int64)
    group_row[[g1, g2]] = [0, 1]
    walk = _compose._Walk(
        groups=np.array([g1, g2]), starts=np.array([0, 0]), ends=np.array([1, 1]),
        wide=np.array([2]), rows=np.array([[1], [0]], dtype=np.int16), group_row=group_row,
        sink=3, xtok=z, xstart=z, xend=z,
    )  # fmt: skip
    go = trie.group_offsets
    tokens_of = lambda g: trie.group_tokens[go[g] : go[g + 1]]  # noqa: E731
    for mix in (_compose.MIX, np.uint64(0)):
        monkeypatch.setattr(_compose, "MIX", mix)
        token_class, rep = _compose._classes(3, trie, walk)
        c1, c2 = token_class[tokens_of(g1)], token_class[tokens_of(g2)]
        assert len(set(c1)) == 1 and len(set(c2)) == 1 and c1[0] != c2[0] and c1[0] > 0
        assert (token_class[rep[1:]] == np.arange(1, rep.shape[0])).all()
        others = np.setdiff1d(np.arange(token_class.shape[0]), np.r_[tokens_of(g1), tokens_of(g2)])
        assert (token_class[others] == 0).all()


def test_canonical_numbering_with_a_class_map_and_first_tokens(byte_level_vocab):
    """The class map and first tokens given (as `compose` gives them) number alike."""
    from automata_compile.automata import build_byte_dfa
    from automata_compile.frontends import _regex
    from automata_compile.tokens._token_trie import trie_for

    ir = _regex.parse(PATTERNS[1], {})
    tc, ns, acc, st, bs = _compose.compose(
        build_byte_dfa(ir, 0), trie_for(byte_level_vocab), return_byte_states=True
    )
    assert tc.dtype == np.int32
    rng = np.random.default_rng(1)
    c = ns.shape[1]
    for _ in range(5):
        # finer input classes: each class split in up to three, mapped back by class_map
        split = rng.integers(0, 3, size=tc.shape[0]) * (tc > 0)
        fine = tc.astype(np.int64) * 3 + split
        used, fine = np.unique(fine, return_inverse=True)
        class_map = used // 3
        first = np.full(c, tc.shape[0], dtype=np.int64)
        np.minimum.at(first, class_map[fine], np.arange(tc.shape[0]))
        plain = _compose.canonical_numbering(class_map[fine], ns, acc, st, bs)
        for kwargs in ({"class_map": class_map}, {"class_map": class_map, "first_token": first}):
            got = _compose.canonical_numbering(fine, ns, acc, st, bs, **kwargs)
            for a, b in zip(got, plain, strict=True):
                assert np.array_equal(a, b)
