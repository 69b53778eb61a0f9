"""`_token_trie`: the byte trie of a vocabulary and the lookups the walks use."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from automata_compile.tokens._token_trie import build_trie


def _node_bytes(trie) -> list[dict[int, bytes]]:
    """The byte string of every node, per level."""
    out = [{0: b""}]
    for d in range(1, trie.depth + 1):
        prev = out[-1]
        out.append({i: prev[int(p)] + bytes([int(b)])
                    for i, (p, b) in enumerate(zip(trie.parent[d], trie.byte[d], strict=True))})  # fmt: skip
    return out


@given(st.lists(st.binary(min_size=0, max_size=6), min_size=1, max_size=40))
def test_trie_spells_every_token_once_and_its_lookups_agree(tokens):
    trie = build_trie(tokens)
    nodes = _node_bytes(trie)
    prefixes = {t[:k] for t in tokens if t for k in range(1, len(t) + 1)}
    assert sorted(v for level in nodes[1:] for v in level.values()) == sorted(prefixes)
    # terminals: each group is one distinct byte string, holding exactly the tokens spelling it
    for d in range(1, trie.depth + 1):
        for i, g in enumerate(trie.terminal[d].tolist()):
            if g >= 0:
                members = trie.group_tokens[trie.group_offsets[g] : trie.group_offsets[g + 1]]
                assert sorted(members.tolist()) == [
                    k for k, t in enumerate(tokens) if t == nodes[d][i]
                ]
    # child_keys: the child of a node on a byte, found by binary search
    for d in range(1, trie.depth + 1):
        keys = trie.child_keys[d]
        assert np.all(np.diff(keys) > 0)
        for i, s in nodes[d].items():
            parent = next(j for j, v in nodes[d - 1].items() if v == s[:-1])
            assert np.searchsorted(keys, parent * 256 + s[-1]) == i
    # first_byte_nodes: nodes below (and at) each first byte
    want = np.zeros(256, np.int64)
    for s in prefixes:
        want[s[0]] += 1
    assert np.array_equal(trie.first_byte_nodes, want)
