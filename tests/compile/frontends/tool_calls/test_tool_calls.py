"""compile_tool_calls / parse_tool_calls: oracle masks over Llama-3, options, the tool cache,
parsing back, errors.

The oracle is a plain-Python reference of the language, independent of the byte PDA: the
output is scanned for the trigger (free text is any bytes), and each call region must be a
prefix of (or fully match) one regex: the format's envelope around an alternation, over
the tool names, of each tool's arguments regex from `json_schema_to_regex` (`regex`
partial matching). A token is allowed iff the prefix + its bytes stays viable.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest
import regex

import automata_compile as ac
from automata_compile import json_schema_to_regex
from automata_compile.frontends.tool_calls import _tools

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
from tool_call_fixtures import ORACLE_TOOLS as TOOLS  # noqa: E402
from tool_call_fixtures import names as _names  # noqa: E402
from tool_call_fixtures import params as _params  # noqa: E402


def _call_regex(fmt: str, tools) -> str:
    """The call region (after the trigger, through the end tag) as a regex."""
    alts = []
    for name, t in zip(_names(tools), tools, strict=True):
        p = _params(t)
        if fmt == "hermes":
            args = json_schema_to_regex(p, property_order="declared")
            alts.append(regex.escape(name) + '", ?"arguments": ?(?:' + args + ")")
        else:
            items = []
            for key, sub in p["properties"].items():
                v = json_schema_to_regex(sub, spelling="python")
                items.append((key, f"{key}=(?:{v})", key in p.get("required", [])))
            alts.append(regex.escape(name) + r"\(" + _kwargs_regex(items) + r"\)")
    if fmt == "hermes":
        return r'\n?\{"name": ?"(?:' + "|".join(alts) + r")\}\n?</tool_call>"
    return "(?:" + "|".join(alts) + ")\n```"


def _kwargs_regex(items) -> str:
    """Items in order, optional ones skippable, ', ' or ',' between written ones."""
    return _first(items, 0)


def _first(items, i):
    if i == len(items):
        return ""
    _, item, req = items[i]
    take = item + _rest(items, i + 1)
    return take if req else f"(?:{take}|{_first(items, i + 1)})"


def _rest(items, i):
    if i == len(items):
        return ""
    _, item, req = items[i]
    take = ", ?" + item + _rest(items, i + 1)
    return take if req else f"(?:{take}|{_rest(items, i + 1)})"


_COMPLETIONS = (
    [bytes([a]) for a in (0x80, 0x90, 0xA0)]
    + [bytes([a, b]) for a in (0x80, 0x90, 0xA0) for b in (0x80,)]
    + [bytes([a, 0x80, 0x80]) for a in (0x80, 0x90)]
)


def _complete(data: bytes) -> str | None:
    """``data`` as text, an incomplete final UTF-8 sequence completed (a representative
    character: every language here treats all non-ASCII characters alike); None if it is
    not UTF-8 even so."""
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            return None
    for c in _COMPLETIONS:
        try:
            return (data + c).decode()
        except UnicodeDecodeError:
            continue
    return None


class Reference:
    def __init__(self, fmt, tools, *, parallel=False, require_call=False):
        self.trig = ac.TOOL_CALL_FORMATS[fmt].trigger.encode()
        self.call = regex.compile(_call_regex(fmt, tools), regex.DOTALL)
        self.parallel, self.require_call = parallel, require_call

    def viable(self, data: bytes, *, complete: bool = False) -> bool:
        """Whether ``data`` is a prefix of the language (``complete``: in it)."""
        i, calls = 0, 0
        while True:
            j = data.find(self.trig, i)
            if j < 0:
                return not complete or calls > 0 or not self.require_call
            if calls and not self.parallel:
                return False
            k = j + len(self.trig)
            rest = data[k:]
            m = None
            # The call region ends with an ASCII end tag: decode up to its first match.
            text = _complete(rest)
            if text is None:
                # invalid UTF-8: viable only if a complete call ends before the bad bytes
                good = rest[: _valid_prefix(rest)]
                m = self.call.match(good.decode())
                if m is None:
                    return False
            else:
                m = self.call.match(text)
                if m is None:
                    return not complete and self.call.fullmatch(text, partial=True) is not None
            calls += 1
            i = k + len(m.group(0).encode())


def _valid_prefix(b: bytes) -> int:
    try:
        b.decode()
        return len(b)
    except UnicodeDecodeError as e:
        return e.start


@pytest.fixture(scope="module")
def token_bytes(llama3_vocab):
    return [llama3_vocab.decode([t]) for t in range(llama3_vocab.size)]


def _oracle(dfa, vocab, token_bytes, ref, prefix_ids):
    config = dfa.walk_config(prefix_ids)
    assert config is not None, vocab.decode(prefix_ids)
    got = dfa.allowed(*config)
    prefix = vocab.decode(prefix_ids)
    want = np.zeros(vocab.size, bool)
    special = set(vocab.special_ids)
    for t, b in enumerate(token_bytes):
        if t in vocab.eos_ids:
            want[t] = ref.viable(prefix, complete=True)
        elif t not in special and b:
            want[t] = ref.viable(prefix + b)
    bad = np.flatnonzero(got != want)
    assert not bad.size, (
        prefix,
        [(token_bytes[t], bool(got[t])) for t in bad[:10]],
        bad.size,
    )
    return int(want.sum())


HERMES = [
    'Let me check. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call> ok',
    '<tool_call>{"name":"get","arguments":{"key":"abc"}}</tool_call>',
    'a<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET", "utc": true}}\n</tool_call>',
]
# Prefixes of ORACLE_TEXT (bytes) at which masks are compared: in the text, every point of
# the trigger, the names (after "get", a whole tool name and a prefix of another), the
# arguments, the end tag, the text after a call and a second trigger begun there.
ORACLE_TEXT = HERMES[0] + " <tool_call"
CUTS = [0, 5, 14, 15, 16, 20, 24, 25, 26, 35, 38, 39, 40, 43, 46, 48, 55, 61, 70, 78, 82, 86]
CUTS += [88, 95, 101, 105, 107, 110, 117, 119]


@pytest.mark.parametrize("parallel", [False, True])
def test_oracle_masks_hermes_llama3(llama3_vocab, token_bytes, parallel):
    dfa = ac.compile_tool_calls(TOOLS, llama3_vocab, format="hermes", parallel=parallel)
    ref = Reference("hermes", TOOLS, parallel=parallel)
    text = ORACLE_TEXT.encode()
    sizes = []
    for cut in CUTS:
        # the trigger split across tokens: spell the prefix with one token per byte from 10
        ids = llama3_vocab.encode(text[: min(cut, 10)].decode()) + [
            llama3_vocab.encode(bytes([b]).decode())[0] for b in text[10:cut]
        ]
        assert llama3_vocab.decode(ids) == text[:cut]
        sizes.append(_oracle(dfa, llama3_vocab, token_bytes, ref, ids))
    assert max(sizes) > 100_000 and min(sizes) < 10  # free text vs inside a call


def test_oracle_masks_gemma_llama3(llama3_vocab, token_bytes):
    dfa = ac.compile_tool_calls(TOOLS, llama3_vocab, format="gemma", require_call=True)
    ref = Reference("gemma", TOOLS, require_call=True)
    text = b'Hi ```tool_code\nget_time(tz="UTC", utc=False)\n``` end'
    for cut in [0, 3, 6, 15, 16, 19, 24, 25, 28, 33, 38, 44, 47, 49, len(text)]:
        ids = [llama3_vocab.encode(bytes([b]).decode())[0] for b in text[:cut]]
        _oracle(dfa, llama3_vocab, token_bytes, ref, ids)


@pytest.mark.parametrize("fmt", ["hermes", "gemma"])
def test_whole_outputs(llama3_vocab, fmt):
    ok_h = [
        *HERMES,
        "no call at all",
        "",
        "<tool_ca ll> is not a trigger",
        '<tool_call>\n{"name": "get", "arguments": {"key": "z"}}</tool_call><tool_call>{"name": "get", "arguments": {"key": "y"}}\n</tool_call>',
    ]
    bad_h = [
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "get", "arguments": {"key": "A"}}</tool_call>',
        '<tool_call>{"name": "get_time", "arguments": {"tz": "CET", "x": 1}}</tool_call>',
        '<tool_call>{"name": "get", "arguments": {"key": "a"}}',
        "<tool_call> then text",
    ]
    ok_g = [
        '```tool_code\nget(key="a")\n```',
        'x ```tool_code\nget_weather(city="P",days=2)\n```',
        "text",
    ]
    bad_g = [
        '```tool_code\nget(key="A")\n```',
        "```tool_code\nget_weather(days=2)\n```",
        '```tool_code\nget_time(tz="UTC", utc=true)\n```',
    ]
    ok, bad = (ok_h, bad_h) if fmt == "hermes" else (ok_g, bad_g)
    dfa = ac.compile_tool_calls(TOOLS, llama3_vocab, format=fmt, parallel=True)
    for s in ok:
        assert dfa.accepts(llama3_vocab.encode(s)), s
        calls = [x for x in ac.parse_tool_calls(s, fmt) if isinstance(x, ac.ToolCall)]
        assert all(c.name in _names(TOOLS) for c in calls)
    for s in bad:
        assert not dfa.accepts(llama3_vocab.encode(s)), s


def test_options(llama3_vocab):
    two = HERMES[1] + " and " + HERMES[1]
    enc = llama3_vocab.encode
    one = ac.compile_tool_calls(TOOLS, llama3_vocab)
    assert one.accepts(enc(HERMES[1])) and not one.accepts(enc(two))
    assert one.accepts(enc("text")) and one.accepts(enc("text <tool_c"))
    req = ac.compile_tool_calls(TOOLS, llama3_vocab, require_call=True, parallel=True)
    assert req.accepts(enc(two)) and not req.accepts(enc("text"))
    bare = ac.compile_tool_calls(TOOLS, llama3_vocab, allow_text=False, parallel=True)
    both = HERMES[1] + "\n" + HERMES[1]
    assert bare.accepts(enc(HERMES[1])) and bare.accepts(enc(both))
    assert not bare.accepts(enc("")) and not bare.accepts(enc(HERMES[0]))
    only = ac.compile_tool_calls(TOOLS, llama3_vocab, tool="get_time")
    assert only.accepts(enc(HERMES[2])) and not only.accepts(enc(HERMES[1]))


def test_tools_compile_once(llama3_vocab, monkeypatch):
    _tools.clear_cache()
    built = []
    real = _tools._json_unit
    monkeypatch.setattr(_tools, "_json_unit", lambda t, *a: built.append(t.name) or real(t, *a))
    ac.compile_tool_calls(TOOLS[:2], llama3_vocab)
    extra = {"name": "other", "parameters": _params(TOOLS[2])}  # same schema as "get"
    dfa = ac.compile_tool_calls([*TOOLS, extra], llama3_vocab)
    assert built == ["get_weather", "get_time", "get"]
    assert dfa.accepts(
        llama3_vocab.encode('<tool_call>{"name": "other", "arguments": {"key": "q"}}</tool_call>')
    )


def _arrays(dfa) -> dict:
    """Every array and scalar field of a `TokenDFA` (the tables, the PDA block, the blocks)."""
    out = {}
    for f in dataclasses.fields(dfa):
        v = getattr(dfa, f.name)
        out[f.name] = np.asarray(v) if isinstance(v, np.ndarray) else v
    return out


def test_warm_compile_gives_the_cold_tables(llama3_vocab):
    """The walk and unit caches change nothing: a cold compile, the same request warm, and
    a request whose tools were partly compiled before (in another order) give equal
    arrays, blocks and class maps included."""
    from automata_compile.tokens import _pda_units

    tools = [*TOOLS, {"name": "other", "parameters": _params(TOOLS[2])}]

    def cold():
        _tools.clear_cache()
        _pda_units.clear_cache()
        return ac.compile_tool_calls(tools, llama3_vocab, parallel=True)

    ref = _arrays(cold())
    warm = _arrays(ac.compile_tool_calls(tools, llama3_vocab, parallel=True))
    _tools.clear_cache()
    _pda_units.clear_cache()
    ac.compile_tool_calls(tools[::-1][:2], llama3_vocab)  # some units and walks cached
    part = _arrays(ac.compile_tool_calls(tools, llama3_vocab, parallel=True))
    assert ref["class_block"] is not None
    for got in (warm, part):
        assert got.keys() == ref.keys()
        for name, v in ref.items():
            if isinstance(v, np.ndarray):
                assert v.dtype == got[name].dtype and np.array_equal(v, got[name]), name
            else:
                assert v == got[name], name


def test_recursive_schemas(llama3_vocab):
    """A parameter referencing the root (JSON style) and $defs (both styles)."""
    node = {
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}},
        },
        "required": ["v"],
        "additionalProperties": False,
    }
    tree = {"type": "object", "properties": {"root": {"$ref": "#/$defs/n"}}, "required": ["root"],
            "additionalProperties": False, "$defs": {"n": node}}  # fmt: skip
    rec = {
        **node,
        "properties": {**node["properties"], "kids": {"type": "array", "items": {"$ref": "#"}}},
    }
    enc = llama3_vocab.encode
    d = ac.compile_tool_calls(
        [{"name": "t", "parameters": tree}, {"name": "r", "parameters": rec}], llama3_vocab
    )
    assert d.accepts(
        enc(
            '<tool_call>{"name": "r", "arguments": {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}}</tool_call>'
        )
    )
    assert d.accepts(
        enc(
            '<tool_call>{"name": "t", "arguments": {"root": {"v": 1, "kids": [{"v": 2}]}}}</tool_call>'
        )
    )
    assert not d.accepts(
        enc('<tool_call>{"name": "r", "arguments": {"v": 1, "kids": [{"kids": []}]}}</tool_call>')
    )
    g = ac.compile_tool_calls([{"name": "t", "parameters": tree}], llama3_vocab, format="gemma")
    assert g.accepts(enc('```tool_code\nt(root={"v": 1, "kids": [{"v": 2, "kids": []}]})\n```'))
    assert not g.accepts(enc('```tool_code\nt(root={"kids": []})\n```'))


def test_parse_back():
    got = ac.parse_tool_calls(HERMES[0], "hermes")
    assert got == [
        "Let me check. ",
        ac.ToolCall("get_weather", {"city": "Paris", "days": 3}),
        " ok",
    ]
    got = ac.parse_tool_calls("```tool_code\nm.f(a=[1, 2], b=None)\n```tail", "gemma")
    assert got == [ac.ToolCall("m.f", {"a": [1, 2], "b": None}), "tail"]
    for s in [
        "<tool_call>{oops}</tool_call>",
        '<tool_call>{"name": "f"}</tool_call>',
        '<tool_call>{"name": "f", "arguments": {}}',
    ]:
        with pytest.raises(ac.ToolCallParseError):
            ac.parse_tool_calls(s, "hermes")
    with pytest.raises(ac.ToolCallParseError):
        ac.parse_tool_calls("```tool_code\nf(1)\n```", "gemma")


def test_errors(llama3_vocab):
    bad = [
        ([], "at least one tool"),
        ([{"parameters": {}}], "no 'name'"),
        ([{"name": "a b"}], "not a valid json-style name"),
        ([{"name": "a"}, {"name": "a"}], "repeated"),
        ([{"name": "a", "parameters": {"type": "string"}}], "object schema"),
    ]
    for tools, msg in bad:
        with pytest.raises(ac.InvalidToolError, match=msg):
            ac.compile_tool_calls(tools, llama3_vocab)
    with pytest.raises(ac.InvalidToolError, match="names no tool"):
        ac.compile_tool_calls(TOOLS, llama3_vocab, tool="nope")
    with pytest.raises(ac.InvalidSchemaError, match="'bad'"):
        ac.compile_tool_calls(
            [
                {
                    "name": "bad",
                    "parameters": {
                        "type": "object",
                        "properties": {"x": {"minimum": 3, "maximum": 1}},
                    },
                }
            ],
            llama3_vocab,
        )
    rec = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    with pytest.raises(ac.UnsupportedSchemaError, match="only references into"):
        ac.compile_tool_calls([{"name": "r", "parameters": rec}], llama3_vocab, format="gemma")
    with pytest.raises(ValueError, match="built-in tool-call format"):
        ac.compile_tool_calls(TOOLS, llama3_vocab, format="nope")
