"""State blocks (`split_blocks`, `TokenDFA` with ``class_block`` / ``row_start``): the same
automaton as the dense tables, checked configuration by configuration against them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import automata_compile as ac
from automata_compile import TableFormatError, TokenDFA
from automata_compile.frontends.tool_calls import tool_calls_pda, tool_calls_spec
from automata_compile.tokens import _unit_blocks
from automata_compile.tokens._blocks import split_blocks
from automata_compile.tokens._token_dfa import PDA_ARRAYS

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tool_call_fixtures import ORACLE_TOOLS as TOOLS  # noqa: E402

TEXT = (
    b'Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", '
    b'"days": 3}}\n</tool_call> ok <tool_call>\n{"name": "get", "arguments": {"key": "x"}}'
)


def _tool_blocks(tools, **flags) -> np.ndarray:
    fmt, ts, opts, _ = tool_calls_spec(tools, format="hermes", tool=None, **flags)
    pda = tool_calls_pda(fmt, ts, opts, **flags)
    tool_of = {t.name: k + 1 for k, t in enumerate(ts)}
    rule_block = np.array([tool_of.get(n.split("/")[0], 0) for n in pda.names])
    return rule_block[pda.rule_of]


def _same_automaton(a: TokenDFA, b: TokenDFA, walks) -> int:
    """Asserts equal configurations and masks along every prefix of every walk."""
    n = 0
    for ids in walks:
        for cut in range(len(ids) + 1):
            ca, cb = a.walk_config(ids[:cut]), b.walk_config(ids[:cut])
            assert ca == cb, cut
            if ca is None:
                break
            assert np.array_equal(a.allowed(*ca), b.allowed(*cb)), cut
            n += 1
    return n


def _random_walks(dfa: TokenDFA, rng, count: int, length: int) -> list[list[int]]:
    walks = []
    for _ in range(count):
        config, ids = (dfa.start, ()), []
        for _ in range(length):
            ok = np.flatnonzero(dfa.allowed(*config))
            ok = ok[~np.isin(ok, dfa.eos_ids)]
            if not ok.size:
                break
            t = int(rng.choice(ok))
            ids.append(t)
            config = dfa.advance_config(*config, t)
        walks.append(ids)
    return walks


@pytest.fixture(scope="module")
def tool_dfa(llama3_vocab):
    """(the one-table form, `compile_tool_calls`'s blocks: the frame and one per tool)."""
    blocked = ac.compile_tool_calls(TOOLS, llama3_vocab, format="hermes", parallel=True)
    return blocked.dense(), blocked


def test_compile_tool_calls_splits_by_tool(tool_dfa):
    """Blocks: each tool's unit alone (its block is cached across requests); the root's
    fixed states (text, trigger, envelope, end tag); the names' trie split by first name
    byte; the states with empty rows. `split_blocks` of the dense tables with the same
    partition gives the same blocks."""
    from automata_compile.frontends.tool_calls import tool_calls_layout

    dense, blocked = tool_dfa
    flags = dict(parallel=True, require_call=False, allow_text=True)
    unit_of_state = _tool_blocks(TOOLS, **flags)  # 0: the root rule
    fmt, ts, opts, _ = tool_calls_spec(TOOLS, format="hermes", tool=None, **flags)
    _, lay = tool_calls_layout(fmt, ts, opts, **flags)
    block = unit_of_state + 1000 * (unit_of_state > 0)
    block[lay.trie_lo : lay.trie_hi] = 1 + np.asarray(lay.trie_first)
    assert set(lay.trie_first) == {ord("g")}  # get, get_time, get_weather
    live = blocked.row_width > 1
    for b in np.unique(blocked.class_block[live]):
        assert np.unique(block[live & (blocked.class_block == b)]).size == 1
    assert np.unique(blocked.class_block[live]).size == np.unique(block[live]).size
    again = split_blocks(dense, block)
    assert again.num_cells == blocked.num_cells and again.num_blocks == blocked.num_blocks


def test_tool_blocks_are_the_same_automaton(tool_dfa, llama3_vocab):
    dense, blocked = tool_dfa
    assert blocked.is_blocked and blocked.num_blocks >= len(TOOLS) + 1
    assert blocked.num_cells < dense.num_cells / 2
    byte_ids = [llama3_vocab.encode(bytes([b]).decode())[0] for b in TEXT]
    walks = [byte_ids, llama3_vocab.encode(TEXT.decode())]
    walks += _random_walks(dense, np.random.default_rng(0), 12, 40)
    assert _same_automaton(dense, blocked, walks) > 150
    back = blocked.dense()
    assert not back.is_blocked and back.num_classes == dense.num_classes
    assert _same_automaton(dense, back, walks[:4]) > 50


def test_round_trip(tool_dfa, tmp_path):
    _, blocked = tool_dfa
    path = tmp_path / "b.npz"
    blocked.save(path)
    back = TokenDFA.load(path)
    assert back.metadata() == blocked.metadata()
    assert back.metadata()["format_version"] == 3 and back.metadata()["blocks"] > 1
    for name in ("token_class", "next_state", "class_block", "row_start", *PDA_ARRAYS):
        assert np.array_equal(getattr(back, name), getattr(blocked, name)), name


@pytest.mark.parametrize("seed", range(4))
def test_random_partitions_of_a_grammar(byte_level_vocab, seed):
    """Any partition of the states is the same automaton (a grammar PDA and a regex DFA)."""
    rng = np.random.default_rng(seed)
    grammar = ac.compile_grammar(
        'start: "[" (item ("," item)*)? "]"\nitem: /[a-c]+/ | start', byte_level_vocab
    )
    regex = ac.compile_regex(r"(ab|cd)+[0-9]{2,4}x?", byte_level_vocab)
    for dfa in (grammar, regex):
        nb = int(rng.integers(1, 6))
        blocked = split_blocks(dfa, rng.integers(0, nb, dfa.num_states))
        walks = _random_walks(dfa, rng, 10, 30)
        assert _same_automaton(dfa, blocked, walks) > 20
        assert _same_automaton(dfa, blocked.dense(), walks) > 20


def test_bad_blocks_are_refused(tool_dfa):
    _, b = tool_dfa
    import dataclasses

    bad = [
        dict(class_block=None),
        dict(row_start=b.row_start[::-1].copy()),
        dict(class_block=np.full_like(b.class_block, b.num_blocks)),
        dict(token_class=b.token_class[0]),
        dict(next_state=b.next_state[:-1]),
    ]
    for change in bad:
        with pytest.raises(TableFormatError):
            dataclasses.replace(b, **change)
    with pytest.raises(ValueError):
        split_blocks(b, b.class_block)


def test_exact_fallback_gives_the_same_blocks(byte_level_vocab, llama3_vocab, monkeypatch):
    """Where the hashed class keys fail their check, the blocks' columns are compared
    exactly: the same blocks."""
    from automata_compile.tokens import _blocks, _pda_compose

    grammar = ac.compile_grammar(
        'start: "[" (item ("," item)*)? "]"\nitem: /[a-c]+/ | start', byte_level_vocab
    )
    part = np.random.default_rng(5).integers(0, 3, grammar.num_states)
    _unit_blocks.clear_root_cache()  # the root's tables built here, not kept from before
    fast = [split_blocks(grammar, part), ac.compile_tool_calls(TOOLS, llama3_vocab)]
    monkeypatch.setattr(_blocks, "_sparse_classes", lambda *a: (None, None))
    monkeypatch.setattr(_pda_compose, "block_tables_walks", lambda *a: None)
    _unit_blocks.clear_root_cache()
    slow = [split_blocks(grammar, part), ac.compile_tool_calls(TOOLS, llama3_vocab)]
    for f, sl in zip(fast, slow, strict=True):
        for name in ("token_class", "next_state", "class_block", "row_start", *PDA_ARRAYS):
            assert np.array_equal(getattr(f, name), getattr(sl, name)), name


@pytest.mark.parametrize(
    "flags",
    [
        {"format": "hermes", "parallel": True},
        {"format": "gemma"},
        {"format": "hermes", "require_call": True, "allow_text": False, "parallel": True},
        {"format": "hermes", "tool": "get"},
    ],
)
def test_blocks_from_rows_equal_blocks_from_listed_cells(llama3_vocab, monkeypatch, flags):
    """`block_tables_walks` (each walk row hashed, checked and written once per block) gives
    the arrays of `block_tables` over every allowed cell listed, and does not decline."""
    from automata_compile.tokens import _blocks, _pda_compose

    declined = []
    real = _blocks.block_tables_walks

    def spy(*a):
        out = real(*a)
        declined.append(out is None)
        return out

    monkeypatch.setattr(_pda_compose, "block_tables_walks", spy)
    _unit_blocks.clear_root_cache()  # the root's tables built here, not kept from before
    fast = ac.compile_tool_calls(TOOLS, llama3_vocab, **flags)
    assert declined == [False]
    monkeypatch.setattr(_pda_compose, "block_tables_walks", lambda *a: None)
    _unit_blocks.clear_root_cache()
    slow = ac.compile_tool_calls(TOOLS, llama3_vocab, **flags)
    assert fast.num_blocks > 1
    for name in ("token_class", "next_state", "class_block", "row_start", *PDA_ARRAYS):
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


MORE_TOOLS = [
    *TOOLS,
    {
        "name": "search_flights",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string"},
                "dest": {"type": "string", "enum": ["OSL", "CDG", "JFK"]},
                "passengers": {"type": "integer"},
                "flexible": {"type": "boolean"},
            },
            "required": ["origin", "dest"],
        },
    },
    {
        "name": "set_alarm",
        "parameters": {
            "type": "object",
            "properties": {
                "time": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"},
                "days": {"type": "array", "items": {"enum": ["mon", "tue", "wed"]}},
                "label": {"type": "string", "maxLength": 5},
            },
            "required": ["time"],
        },
    },
    {
        "name": "sum",
        "parameters": {
            "type": "object",
            "properties": {"xs": {"type": "array", "items": {"type": "number"}}},
            "required": ["xs"],
        },
    },
    {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {"lang": {"type": "string"}, "year": {"type": "integer"}},
                },
            },
            "required": ["query"],
        },
    },
]


@pytest.mark.parametrize("fmt", ["hermes", "gemma"])
def test_blocks_from_rows_with_backgrounds(llama3_vocab, monkeypatch, fmt):
    """Seven tools whose blocks share few classes (strings, enums, numbers, arrays, nested
    objects; names sharing prefixes): `_row_classes` (only the cells off their block's
    background row hashed and grouped) gives the listed-cell path's arrays, and the same
    automaton as the dense tables along random walks."""
    from automata_compile.tokens import _blocks, _pda_compose

    seen = []
    real = _blocks._row_classes

    def spy(q, c, bl, nb, *rest):
        out = real(q, c, bl, nb, *rest)
        local = out[0]
        seen.append([np.unique(local[b]).size for b in range(nb)])
        return out

    monkeypatch.setattr(_blocks, "_row_classes", spy)
    fast = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, format=fmt, parallel=True)
    assert len(seen) == 1 and max(seen[0]) > 2
    monkeypatch.setattr(_pda_compose, "block_tables_walks", lambda *a: None)
    slow = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, format=fmt, parallel=True)
    assert fast.num_blocks > len(MORE_TOOLS) + 2  # units, frame, names by first byte, empty
    for name in ("token_class", "next_state", "class_block", "row_start", *PDA_ARRAYS):
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    dense = fast.dense()
    walks = _random_walks(fast, np.random.default_rng(3), 6, 40)
    assert _same_automaton(fast, dense, walks) > 40
