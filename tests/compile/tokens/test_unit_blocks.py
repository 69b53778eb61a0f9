"""`_unit_blocks`: tool-call tables assembled from per-tool blocks cached across requests.
The same automaton as the whole PDA composed at once (`token_pda` with `_tool_blocks`),
checked configuration by configuration; cached blocks reused at other offsets, next to
other names, give the arrays a cold compile gives."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import automata_compile as ac
from automata_compile.frontends.tool_calls import tool_calls_pda, tool_calls_spec
from automata_compile.pipeline import _tool_calls
from automata_compile.tokens import _pda_units, _unit_blocks, token_pda

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from test_blocks import MORE_TOOLS, _random_walks, _same_automaton  # noqa: E402

FLAGS = [
    {"format": "hermes", "parallel": True},
    {"format": "gemma"},
    {"format": "hermes", "require_call": True, "allow_text": False, "parallel": True},
    {"format": "gemma", "parallel": True, "require_call": True},
    {"format": "hermes", "tool": "search"},
]


def _whole(tools, vocab, **flags):
    """The whole PDA composed at once, blocks by `_tool_blocks` (the path before)."""
    fmt, ts, opts, spec = tool_calls_spec(
        tools,
        format=flags.pop("format"),
        tool=flags.pop("tool", None),
        parallel=flags.get("parallel", False),
        require_call=flags.get("require_call", False),
        allow_text=flags.get("allow_text", True),
    )
    full = dict(parallel=False, require_call=False, allow_text=True) | flags
    pda = tool_calls_pda(fmt, ts, opts, **full)
    block = _tool_calls._tool_blocks(pda, ts, fmt, opts)
    return token_pda(pda, vocab, spec_kind="tool_calls", spec=spec, block=block)


def _arrays(dfa) -> dict:
    return {
        f.name: getattr(dfa, f.name)
        for f in dataclasses.fields(dfa)
        if isinstance(getattr(dfa, f.name), np.ndarray)
    }


@pytest.mark.parametrize("flags", FLAGS)
def test_same_automaton_as_the_whole_composition(llama3_vocab, flags):
    _pda_units.clear_cache()
    new = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, **flags)
    old = _whole(MORE_TOOLS, llama3_vocab, **dict(flags))
    assert new.num_states == old.num_states
    assert np.array_equal(new.accepting, old.accepting)
    rng = np.random.default_rng(7)
    walks = _random_walks(new, rng, 8, 48) + _random_walks(old, rng, 8, 48)
    assert _same_automaton(new, old.dense(), walks) > 200
    warm = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, **flags)
    for name, v in _arrays(new).items():
        assert np.array_equal(v, getattr(warm, name)), name


def test_cached_blocks_at_other_offsets(llama3_vocab):
    """Blocks cached by one request and reused by another (other tools before them, other
    names in the trie, the unit at another offset) give the cold compile's arrays."""
    first, second = MORE_TOOLS[:4], [MORE_TOOLS[5], MORE_TOOLS[2], MORE_TOOLS[6], MORE_TOOLS[0]]
    _pda_units.clear_cache()
    cold = _arrays(ac.compile_tool_calls(second, llama3_vocab, format="gemma"))
    _pda_units.clear_cache()
    ac.compile_tool_calls(first, llama3_vocab, format="gemma")
    assert len(_unit_blocks._CACHE) == len(first)
    part = ac.compile_tool_calls(second, llama3_vocab, format="gemma")
    assert len(_unit_blocks._CACHE) == len(first) + 2  # only the two new tools built
    for name, v in cold.items():
        assert v.dtype == getattr(part, name).dtype, name
        assert np.array_equal(v, getattr(part, name)), name


def test_not_cacheable_falls_back(llama3_vocab, monkeypatch):
    """A unit whose rows would reach the names' trie (never seen) is composed the old way."""

    def refuse(*a):
        raise _unit_blocks.UnitNotCacheable("test")

    _pda_units.clear_cache()
    monkeypatch.setattr(_unit_blocks, "_encode", refuse)
    got = ac.compile_tool_calls(MORE_TOOLS[:3], llama3_vocab, parallel=True)
    assert not _unit_blocks._CACHE
    old = _whole(MORE_TOOLS[:3], llama3_vocab, format="hermes", parallel=True)
    for name, v in _arrays(old).items():
        assert np.array_equal(v, getattr(got, name)), name


def test_root_walk_cache(llama3_vocab, monkeypatch):
    """The root's walk comes from the cache only for the same root and units (a tool with
    the same name and other parameters, or other flags, walk again); a hit, alone, with the
    root's tables kept, or with units whose blocks must be built again (later outcome ids
    follow the cached ones), gives the cold compile's arrays."""
    tools = MORE_TOOLS[:4]
    _pda_units.clear_cache()
    cold = _arrays(ac.compile_tool_calls(tools, llama3_vocab, parallel=True))
    walked = []
    real = _unit_blocks.walk_states
    monkeypatch.setattr(
        _unit_blocks, "walk_states", lambda *a, **k: walked.append(1) or real(*a, **k)
    )

    def same(got):
        for name, v in cold.items():
            assert v.dtype == getattr(got, name).dtype, name
            assert np.array_equal(v, getattr(got, name)), name

    tabled = []
    real_tables = _unit_blocks._tables
    monkeypatch.setattr(
        _unit_blocks, "_tables", lambda *a, **k: tabled.append(1) or real_tables(*a, **k)
    )
    same(ac.compile_tool_calls(tools, llama3_vocab, parallel=True))  # kept by the cold one
    assert not walked and not tabled
    for entry in _unit_blocks._ROOTS.values():  # built again with every unit cached
        entry.tables.clear()
    same(ac.compile_tool_calls(tools, llama3_vocab, parallel=True))
    assert not walked and len(tabled) == 1
    with _unit_blocks._LOCK:  # the blocks gone, the root's walk kept
        _unit_blocks._CACHE.clear()
    same(ac.compile_tool_calls(tools, llama3_vocab, parallel=True))
    assert not walked
    ac.compile_tool_calls(tools, llama3_vocab, parallel=False)
    assert len(walked) == 1
    other = [dict(t) for t in tools]
    params = other[1].get("parameters") or {"type": "object", "properties": {}}
    other[1]["parameters"] = {**params, "properties": {**params.get("properties", {}), "zz": {"type": "integer"}}}  # fmt: skip
    ac.compile_tool_calls(other, llama3_vocab, parallel=True)
    assert len(walked) == 2
    assert len(_unit_blocks._ROOTS) == 3


@pytest.mark.parametrize("hi", [1, 3, 60, 10_000, 10**7])
@pytest.mark.parametrize("n", [0, 1, 7, 500])
def test_unique_inverse_is_numpys(n, hi):
    """`_unique_inverse` (a mask over the ids' range where it is short, else a sort) gives
    `np.unique`'s ids and inverse, values, dtypes and shapes."""
    x = np.random.default_rng(n * 31 + hi).integers(0, hi, n).astype(np.int64)
    got, want = _unit_blocks._unique_inverse(x), np.unique(x, return_inverse=True)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_unit_classes_over_every_group(llama3_vocab):
    """`_unit_classes` (over the groups the walks name and one that stands for the rest)
    gives `_classes_hashed`'s classes over all the groups, for every tool of a request."""
    from automata_compile.tokens._pda_compose import _classes_hashed

    seen = []
    real = _unit_blocks._unit_classes

    def spy(parts, num_groups, num_outcomes):
        got = real(parts, num_groups, num_outcomes)
        seen.append(got)
        want = _classes_hashed(parts, num_groups, num_outcomes)
        assert want is not None
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        return got

    _pda_units.clear_cache()
    try:
        _unit_blocks._unit_classes = spy
        ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, parallel=True)
    finally:
        _unit_blocks._unit_classes = real
        _pda_units.clear_cache()
    assert len(seen) == len(MORE_TOOLS)


def _same_masks(a, b, walks) -> int:
    """Equal masks (EOS included) along every prefix of every walk, each automaton with its
    own states and stacks (for two PDAs of one language with other rules)."""
    n = 0
    for ids in walks:
        ca, cb = (a.start, ()), (b.start, ())
        for cut in range(len(ids) + 1):
            assert np.array_equal(a.allowed(*ca), b.allowed(*cb)), cut
            n += 1
            if cut < len(ids):
                ca, cb = a.advance_config(*ca, ids[cut]), b.advance_config(*cb, ids[cut])
    return n


@pytest.mark.parametrize("flags", [FLAGS[0], FLAGS[1], FLAGS[2], FLAGS[3]])
def test_value_rules_keep_the_language(llama3_vocab, monkeypatch, flags):
    """Each large argument value a rule of its own (`_tools.VALUE_RULE_MIN_SIZE`) gives the
    masks of the tools compiled with shared values only, along random walks of either (in
    fewer states for JSON); a warm compile gives the cold one's arrays."""
    from automata_compile.frontends.tool_calls import _tools

    _pda_units.clear_cache()
    new = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, **flags)
    monkeypatch.setattr(_tools, "VALUE_RULE_MIN_SIZE", None)
    _pda_units.clear_cache()
    old = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, **flags)
    monkeypatch.undo()
    if flags["format"] == "hermes":  # (Python style: a called value adds its return states)
        assert new.num_states < old.num_states
    rng = np.random.default_rng(11)
    walks = _random_walks(new, rng, 8, 48) + _random_walks(old, rng, 8, 48)
    assert _same_masks(new, old, walks) > 300
    warm = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, **flags)
    for name, v in _arrays(new).items():
        assert np.array_equal(v, getattr(warm, name)), name


def test_value_rules_are_shared_across_tools():
    """Two tools' string and integer parameters are rules of the same structure where the
    bytes that may follow them are the same (one byte DFA and one walk: both cached by
    it); a boolean and a short enum stay inline; with ``VALUE_RULE_MIN_SIZE = None`` a
    value used once is inline."""
    from automata_compile.frontends.json_schema import parse_options
    from automata_compile.frontends.tool_calls import _tools
    from automata_compile.frontends.tool_calls._formats import resolve

    fmt = resolve("hermes")
    opts = parse_options({"property_order": "declared"})
    a = _tools.Tool("a", {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "integer"}, "b": {"type": "boolean"}}, "additionalProperties": False})  # fmt: skip
    b = _tools.Tool("b", {"type": "object", "properties": {"k": {"enum": ["x", "y"]}, "t": {"type": "string"}, "m": {"type": "integer"}, "c": {"type": "boolean"}}, "additionalProperties": False})  # fmt: skip
    keys = []
    for tool in (a, b):
        _tools.clear_cache()
        pda = _tools.tool_unit(tool, fmt, opts)
        assert len(pda.names) == 3  # the arguments, the string, the integer
        keys.append(sorted(_pda_units._closure(pda, r).key for r in (1, 2)))
    assert keys[0] == keys[1]
    size = _tools.VALUE_RULE_MIN_SIZE
    try:
        _tools.VALUE_RULE_MIN_SIZE = None
        _tools.clear_cache()
        assert len(_tools.tool_unit(a, fmt, opts).names) == 1
    finally:
        _tools.VALUE_RULE_MIN_SIZE = size
        _tools.clear_cache()


def test_narrow_rule_walks_same_tables(llama3_vocab, monkeypatch):
    """A tool's rule walks with starts of fewer than `MIN_WIDE_BYTES` bytes as sparse lanes
    give the arrays of walks that keep every wide start in rows."""
    flags = {"format": "hermes", "parallel": True}
    _pda_units.clear_cache()
    new = _arrays(ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, **flags))
    monkeypatch.setattr(_unit_blocks, "MIN_WIDE_BYTES", 1)
    _pda_units.clear_cache()
    old = ac.compile_tool_calls(MORE_TOOLS, llama3_vocab, **flags)
    _pda_units.clear_cache()
    for name, v in new.items():
        assert v.dtype == getattr(old, name).dtype, name
        assert np.array_equal(v, getattr(old, name)), name
