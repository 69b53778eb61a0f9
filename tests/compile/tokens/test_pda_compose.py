"""`compose_pda` against a straightforward reference: the same tables, array for array.

The reference walks the vocabulary trie token by token in Python from every boundary
state (`Walker._dfs`, no NumPy lanes, no cache), keys each token group by its tuple of outcomes
per state (a dict, no hashing tricks) and assembles the tables with plain loops.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

import automata_compile as ac
from automata_compile._errors import AutomataError
from automata_compile.automata._byte_pda import build_byte_pda
from automata_compile.frontends.grammar import read_grammar
from automata_compile.frontends.json_schema import parse_options
from automata_compile.pipeline import builtin_grammar, byte_language
from automata_compile.tokens import _pda_compose, _pda_units
from automata_compile.tokens._pda_compose import compose_pda
from automata_compile.tokens._pda_walk import Walker
from automata_compile.tokens._token_trie import trie_for

EOS = 256


def reference_compose(pda, trie) -> dict:
    """The token-level tables, computed the slow, obvious way."""
    walker = Walker(pda, trie)
    start = int(pda.starts[0])
    rows: dict[int, dict[int, tuple]] = {}  # state -> group -> outcomes
    todo, seen = [start], {start}
    while todo:
        q = todo.pop()
        g, o = [], []
        walker._dfs(0, 0, ((q, (), ()),), g, o)
        rows[q] = {gr: walker.outcomes[oid] for gr, oid in zip(g, o, strict=True)}
        for outs in rows[q].values():
            for target, _, _ in outs:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
    boundary = sorted(rows)
    class_of: dict[tuple, int] = {tuple(None for _ in boundary): 0}
    group_class = []
    for gr in range(trie.num_groups):
        sig = tuple(rows[q].get(gr) for q in boundary)
        group_class.append(class_of.setdefault(sig, len(class_of)))
    tg = trie.token_group
    token_class = np.array([group_class[g] if g >= 0 else 0 for g in tg.tolist()], np.int32)
    sigs = sorted(class_of.items(), key=lambda kv: kv[1])
    q_count, c_count = pda.num_states, len(sigs)
    next_state = np.full((q_count, c_count), -1, np.int32)
    edge_push = np.zeros((q_count, c_count), np.int32)
    pushes: dict[tuple, int] = {(): 0}
    cd = []
    for sig, c in sigs:
        for q, outs in zip(boundary, sig, strict=True):
            if outs is None:
                continue
            if len(outs) == 1 and not outs[0][2]:
                next_state[q, c] = outs[0][0]
                edge_push[q, c] = pushes.setdefault(outs[0][1], len(pushes))
            else:
                for target, pushed, popped in outs:
                    cd.append((q, c, popped, target, pushes.setdefault(pushed, len(pushes))))
    cd.sort()
    width = max(max(len(p) for p in pushes), 1)
    kmax = max((len(e[2]) for e in cd), default=1)
    return {
        "token_class": token_class,
        "next_state": next_state,
        "accepting": pda.ends.copy(),
        "start": start,
        "edge_push": edge_push,
        "push_seq": np.array([list(p) + [-1] * (width - len(p)) for p in pushes], np.int32),
        "push_len": np.array([len(p) for p in pushes], np.int32),
        "cd_state": np.array([e[0] for e in cd], np.int32),
        "cd_class": np.array([e[1] for e in cd], np.int32),
        "cd_pop": np.array([list(e[2]) + [-1] * (kmax - len(e[2])) for e in cd], np.int32).reshape(
            len(cd), kmax
        ),
        "cd_npop": np.array([len(e[2]) for e in cd], np.int32),
        "cd_target": np.array([e[3] for e in cd], np.int32),
        "cd_push": np.array([e[4] for e in cd], np.int32),
    }


def _assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for k in want:
        a, b = np.asarray(got[k]), np.asarray(want[k])
        assert a.shape == b.shape and a.dtype == b.dtype, (k, a.shape, b.shape, a.dtype, b.dtype)
        assert np.array_equal(a, b), k


def _pda(text, vocab):
    return build_byte_pda(read_grammar(text, vocab))


@pytest.fixture(scope="module")
def byte_vocab():
    """Every single byte, multi-byte tokens that cross rule boundaries, EOS."""
    extra = [b'"}', b"]]", b"}]", b'":', b"),", b"))", b"(((", b'{"a":[1,', b"true]", b" ]}"]
    extra += [b"ab", b"ba", b"(a", b"a)", b"[[", b"x,", b"1]", b", ", b"null,", b"]}"]
    tokens = [bytes([b]) for b in range(256)] + [b"<eos>"] + extra
    return ac.Vocabulary.from_bytes(tokens, eos_ids=[EOS], special_ids=[EOS])


def _random_grammar(rng: random.Random) -> str:
    """A few mutually recursive rules over a small alphabet (may be refused as non-LL(1))."""
    names = ["start"] + [f"r{i}" for i in range(rng.randint(1, 3))]
    lits = ['"a"', '"b"', '"x"', '"1"', '","', '" "', '"ab"']

    def item(depth):
        u = rng.random()
        if u < 0.4 or depth > 2:
            return rng.choice(lits)
        if u < 0.6:
            return f'"(" {rng.choice(names)} ")"'
        if u < 0.75:
            return f'"[" {rng.choice(names[1:] or names)} "]"'
        if u < 0.9:
            return f"({seq(depth + 1)})" + rng.choice(["*", "+", "?", ""])
        return f"[{seq(depth + 1)}]"

    def seq(depth):
        return " ".join(item(depth) for _ in range(rng.randint(1, 3)))

    return "\n".join(f"{n}: " + " | ".join(seq(0) for _ in range(rng.randint(1, 2))) for n in names)


def test_builtin_grammars_byte_vocab(byte_vocab):
    for name in ("json", "arithmetic"):
        pda = _pda(builtin_grammar(name), byte_vocab)
        _assert_same(
            compose_pda(pda, trie_for(byte_vocab), byte_vocab),
            reference_compose(pda, trie_for(byte_vocab)),
        )


def test_random_grammars_byte_vocab(byte_vocab):
    rng, done = random.Random(7), 0
    for _ in range(200):
        text = _random_grammar(rng)
        try:
            pda = _pda(text, byte_vocab)
            want = reference_compose(pda, trie_for(byte_vocab))
        except AutomataError:
            continue
        _assert_same(compose_pda(pda, trie_for(byte_vocab), byte_vocab), want)
        done += 1
        if done == 25:
            break
    assert done >= 10


@pytest.mark.parametrize(
    "text",
    [
        builtin_grammar("json"),
        builtin_grammar("arithmetic"),
        'start: ("(" start ")" | "[" start "]")*',
        'start: item*\n?item: "(" start ")" | "[" start "]"',
    ],
)
def test_sentencepiece_vocab(mistral_sp_vocab, text):
    pda = _pda(text, mistral_sp_vocab)
    trie = trie_for(mistral_sp_vocab)
    _assert_same(compose_pda(pda, trie, mistral_sp_vocab), reference_compose(pda, trie))


def test_random_grammars_sentencepiece_vocab(mistral_sp_vocab):
    rng, done = random.Random(11), 0
    trie = trie_for(mistral_sp_vocab)
    for _ in range(200):
        text = _random_grammar(rng)
        try:
            pda = _pda(text, mistral_sp_vocab)
            want = reference_compose(pda, trie)
        except AutomataError:
            continue
        _assert_same(compose_pda(pda, trie, mistral_sp_vocab), want)
        done += 1
        if done == 4:
            break
    assert done >= 2


def test_hash_collisions_fall_back_to_the_exact_classes(byte_vocab, monkeypatch):
    """Every signature hashing alike is caught by the check, and the result is unchanged."""
    pda = _pda(builtin_grammar("json"), byte_vocab)
    want = reference_compose(pda, trie_for(byte_vocab))
    calls = []
    exact = _pda_compose._classes_exact
    monkeypatch.setattr(_pda_compose, "_mix", lambda x: np.zeros_like(x))
    monkeypatch.setattr(_pda_compose, "_classes_exact", lambda *a: calls.append(1) or exact(*a))
    _assert_same(compose_pda(pda, trie_for(byte_vocab), byte_vocab), want)
    assert calls, "the all-zero hash must collide and be caught"


# JSON Schemas whose PDAs share rules (a free value's arrays and objects) and free strings:
# after the first, their walks come from the cache; every table must still be the reference's.
SHARING_SCHEMAS = [
    {"minimum": 1},
    {"maxLength": 2},
    {"type": "array", "items": {"maxLength": 3}},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
    {"$defs": {"t": {"type": "array", "items": {"$ref": "#/$defs/t"}}}, "$ref": "#/$defs/t"},
]


@pytest.mark.parametrize("vocab_name", ["byte_vocab", "mistral_sp_vocab"])
def test_json_schemas_sharing_cached_walks_match_the_reference(request, vocab_name, monkeypatch):
    vocab = request.getfixturevalue(vocab_name)
    trie = trie_for(vocab)
    made = []
    walk_part = _pda_units._walk_part
    monkeypatch.setattr(
        _pda_units, "_walk_part", lambda *a, **k: made.append(1) or walk_part(*a, **k)
    )
    _pda_units.clear_cache()
    for schema in SHARING_SCHEMAS:
        _, pda = byte_language(schema, parse_options({}))
        _assert_same(compose_pda(pda, trie, vocab), reference_compose(pda, trie))
    keys = list(_pda_units._CACHE)
    assert any(":rule:" in k for k in keys) and any(":loop:" in k for k in keys)
    assert len(made) == len(keys)  # each part walked once, then served from the cache


def _tool_call_pda(tools, fmt, **flags):
    from automata_compile.frontends.tool_calls import tool_calls_pda, tool_calls_spec

    fmt, ts, opts, _ = tool_calls_spec(tools, format=fmt, tool=None, **flags)
    return tool_calls_pda(fmt, ts, opts, **flags)


@pytest.mark.parametrize(
    "fmt, flags",
    [
        ("hermes", {"parallel": True, "require_call": False, "allow_text": True}),
        ("gemma", {"parallel": False, "require_call": True, "allow_text": True}),
        ("hermes", {"parallel": True, "require_call": False, "allow_text": False}),
    ],
)
@pytest.mark.parametrize("vocab_name", ["byte_vocab", "mistral_sp_vocab"])
def test_tool_call_pdas_match_the_reference(request, vocab_name, fmt, flags):
    """A tool-call PDA (free text, a name trie, several units, the walks of shared rules from
    the cache): its tables are the reference's, so the classes (one class per distinct
    signature, the all-dead class first) and the boundary states are exact."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tool_call_fixtures import DEVICE_TOOLS, ORACLE_TOOLS

    vocab = request.getfixturevalue(vocab_name)
    trie = trie_for(vocab)
    pda = _tool_call_pda([*ORACLE_TOOLS, DEVICE_TOOLS[2]], fmt, **flags)
    _assert_same(compose_pda(pda, trie, vocab), reference_compose(pda, trie))


@pytest.mark.parametrize("chunk", [1, 3])
def test_tool_call_pdas_walked_in_chunks_match_the_reference(mistral_sp_vocab, chunk, monkeypatch):
    """The root's wide states (free text, the names) walked with rows a few at a time
    (`_pda_units.ROW_CHUNK`): still the reference's tables."""
    import sys
    from pathlib import Path

    from automata_compile.tokens import _pda_walk

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tool_call_fixtures import DEVICE_TOOLS, ORACLE_TOOLS

    trie = trie_for(mistral_sp_vocab)
    flags = {"parallel": True, "require_call": False, "allow_text": True}
    pda = _tool_call_pda([*ORACLE_TOOLS, DEVICE_TOOLS[2]], "hermes", **flags)
    want = reference_compose(pda, trie)
    _pda_units.clear_cache()
    monkeypatch.setattr(_pda_walk, "WIDE_SHARE", 0.0)
    monkeypatch.setattr(_pda_units, "ROW_CHUNK", chunk)
    _assert_same(compose_pda(pda, trie, mistral_sp_vocab), want)


# -- a walk's rows are stored as exceptions to a default row: edits against their meaning -----


def _ends(walk, num_groups: int) -> dict:
    """{group: end state per wide start} for every live group of ``walk``: what its rows
    mean; and the stored form checked (exceptions to a default row, ascending, each once)."""
    assert np.all(np.diff(walk.other_group) > 0), "other groups ascending, each once"
    assert walk.other_group.dtype == walk.other_row.dtype == np.int32
    assert not np.any(walk.other_row == walk.default_row)
    out = {}
    for g, r in enumerate(walk.group_rows(num_groups).tolist()):
        if r >= 0:
            row = tuple(walk.rows[r].tolist())
            assert any(t != walk.sink for t in row), "a live group's row is not all dead"
            out[g] = row
    return out


def _json_walk(byte_vocab, monkeypatch):
    from automata_compile.tokens import _pda_walk

    monkeypatch.setattr(_pda_walk, "WIDE_SHARE", 0.0)  # every state walked with rows
    pda = _pda(builtin_grammar("json"), byte_vocab)
    walker = Walker(pda, trie_for(byte_vocab))
    walk = walker.walk(np.flatnonzero((pda.kind != 0).any(axis=1)))
    assert walk.wide.size > 2 and (walk.group_rows(walker.trie.num_groups) >= 0).sum() > 2
    return walk, walker.trie.num_groups


@pytest.mark.parametrize("default", ["most common", "live"])
@pytest.mark.parametrize("seed", range(4))
def test_row_edits_on_sparse_rows_mean_what_they_say(byte_vocab, seed, default, monkeypatch):
    """`_with_entries` (set entry w of group g's row, a dead group starting from the dead
    row) and `_restricted` (drop wide starts; a row left all dead kills its group) give the
    rows they mean, on a real walk, with the dense view agreeing."""
    walk, num_groups = _json_walk(byte_vocab, monkeypatch)
    if default == "live":  # the same rows, stored as exceptions to a live row
        dense = walk.group_rows(num_groups)
        live = dense[dense >= 0]
        d = int(np.bincount(live).argmax())
        other = np.flatnonzero(dense != d).astype(np.int32)
        walk = dataclasses.replace(
            walk, default_row=d, other_group=other, other_row=dense[other].astype(np.int32)
        )
    rng = np.random.default_rng(seed)
    ends = _ends(walk, num_groups)
    width = walk.wide.shape[0]
    n = int(rng.integers(1, 12))
    cells = rng.choice(num_groups * width, size=n, replace=False)
    g, w = cells // width, cells % width
    t = rng.integers(0, walk.sink, size=n)
    want = dict(ends)
    for gi, wi, ti in zip(g.tolist(), w.tolist(), t.tolist(), strict=True):
        row = list(want.get(gi, (walk.sink,) * width))
        row[wi] = ti
        want[gi] = tuple(row)
    edited = _pda_compose._with_entries(walk, g, w, t)
    assert _ends(edited, num_groups) == want
    dense = edited.group_rows(num_groups)
    assert [g for g in range(num_groups) if dense[g] >= 0] == sorted(want)

    keep = np.ones(walk.sink, bool)
    keep[rng.choice(walk.wide, size=int(rng.integers(1, width)), replace=False)] = False
    kept = keep[edited.wide]
    want_r = {}
    for gi, row in want.items():
        sub = tuple(x for x, k in zip(row, kept.tolist(), strict=True) if k)
        if any(x != walk.sink for x in sub):
            want_r[gi] = sub
    restricted = _pda_compose._restricted(edited, keep)
    assert _ends(restricted, num_groups) == want_r
    assert keep[restricted.src].all() and np.array_equal(restricted.wide, edited.wide[kept])


# -- tokens past the stack contexts' budget: cut, a sound subset ----------------------------------

# an object whose 12 properties are each the schema again: closing nested objects, a `}`
# pops a return state of 12 call sites, so a token of k braces pops one of 12**k stacks
NESTED = {
    "type": "object",
    "properties": {f"k{i}": {"$ref": "#"} for i in range(12)},
    "additionalProperties": False,
}
BRACES = [b"}" * n for n in range(2, 7)]  # "}}" pops 144 stacks, "}}}}" 20,736: cut


@pytest.fixture(scope="module")
def brace_vocab():
    extra = BRACES + [b'{"k1": {', b', "k', b'": {}']
    tokens = [bytes([i]) for i in range(256)] + extra + [b"<eos>"]
    eos = len(tokens) - 1
    return ac.Vocabulary.from_bytes(tokens, eos_ids=[eos], special_ids=[eos])


def _spell(doc) -> str:
    if not doc:
        return "{}"
    items = [f'"{k}": {_spell(v)}' for k, v in doc.items()]
    return "{" + ", ".join(items) + "}"


def _doc(rng, depth):
    keys = rng.sample(range(12), rng.randint(0, 3 if depth else 0))
    return {f"k{i}": _doc(rng, depth - 1) for i in sorted(keys)}


def test_tokens_past_the_contexts_budget_are_cut_soundly(brace_vocab, byte_vocab):
    """Oracle: the same schema over single bytes (no token pops twice: exact). Along valid
    texts, every token the cut tables allow is a valid continuation there, and every
    valid token is allowed but those that pop past the budget."""
    with pytest.warns(ac.TokenSubsetWarning, match=r"more than 4096 stack contexts.*left out"):
        cut = ac.compile_json_schema(NESTED, brace_vocab)
    exact = ac.compile_json_schema(NESTED, byte_vocab)
    spelled = [brace_vocab.decode([t]) for t in range(brace_vocab.size)]
    rng = random.Random(0)
    left_out = 0
    for _ in range(12):
        text = _spell(_doc(rng, 5)).encode()
        config, oracle = (cut.start, ()), (exact.start, ())
        for i, byte in enumerate(text):
            allowed = np.flatnonzero(cut.allowed(*config))
            for t in range(brace_vocab.size - 1):
                o = oracle
                for b in spelled[t]:
                    o = o and exact.advance_config(*o, b)
                if t in allowed:
                    assert o, (text[:i], spelled[t])  # sound: never a token invalid here
                elif o and spelled[t] not in BRACES[2:]:
                    raise AssertionError(("left out", text[:i], spelled[t]))
                else:
                    left_out += bool(o)
            config = cut.advance_config(*config, byte)
            oracle = exact.advance_config(*oracle, byte)
            assert config is not None and oracle is not None
        assert cut.accepts(list(text)) and exact.accepts(list(text))
    assert left_out  # some brace runs were valid and cut


def test_subsets_refuse_refuses_tokens_past_the_contexts_budget(brace_vocab):
    with pytest.raises(ac.StateBudgetExceededError, match="4096 stack contexts"):
        ac.compile_json_schema(NESTED, brace_vocab, subsets="refuse")
