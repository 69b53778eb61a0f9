"""JSON Schema -> regex: accept/reject tables, exactness properties, round trips, errors.

Oracles: `re.fullmatch` (the compiler implements exactly `re` semantics), the byte-level
`TokenDFA` from `compile_json_schema` (walked with `dfa.accepts`), brute force for number
ranges, and `jsonschema` for random valid instances, near-miss mutations of them, and
random texts sampled from the compiled automaton (everything it can generate must be a
valid instance).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import string
import warnings
from decimal import Decimal, localcontext

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import InvalidSchemaError, UnsupportedSchemaError, json_schema_to_regex

jsonschema = pytest.importorskip("jsonschema")

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SPELLINGS = [dict(separators=s, ensure_ascii=a) for s in (None, (",", ":")) for a in (True, False)]


def spellings(value) -> list[str]:
    return [json.dumps(value, **opts) for opts in SPELLINGS]


class IrMatcher:
    """``fullmatch`` on the schema's byte-level automaton (simulated as an NFA), for schemas
    whose IR holds automaton nodes (intersections, complements, counting), which have no
    regex spelling, or on its byte pushdown automaton where the IR calls grammar rules."""

    pattern = ""

    def __init__(self, schema, options):
        from automata_compile.automata import _byte_dfa, _fsa
        from automata_compile.frontends.json_schema import load_schema, parse_options
        from automata_compile.pipeline import byte_language

        ir, self.pda = byte_language(load_schema(schema), parse_options(options))
        if self.pda is None:
            self.nfa, self.start, self.final = _byte_dfa.byte_nfa(ir)
            self._accepts = _fsa.nfa_accepts

    def fullmatch(self, text: str) -> bool:
        if self.pda is not None:
            return self.pda.matches(text.encode("utf-8"))
        return self._accepts(self.nfa, self.start, self.final, text.encode("utf-8"))


def rx_for(schema, **options):
    """The schema's regex, or its byte automaton where it has no regex spelling (or needs
    grammar rules)."""
    try:
        return re.compile(json_schema_to_regex(schema, **options))
    except UnsupportedSchemaError as e:
        if "no regular-expression spelling" not in str(e) and "grammar rules" not in str(e):
            raise
        return IrMatcher(schema, options)


_VOCAB = None


def byte_vocab():
    global _VOCAB
    if _VOCAB is None:
        _VOCAB = ac.Vocabulary.from_bytes(
            [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
        )
    return _VOCAB


def dfa_accepts(dfa, text: str) -> bool:
    return bool(dfa.accepts(list(text.encode("utf-8"))))


class DecimalValidator:
    """jsonschema with exact decimal arithmetic: the schema and the instances are parsed with
    ``parse_float=Decimal`` (float division misjudges e.g. 639.92 as not a multiple of 0.01)."""

    def __init__(self, schema):
        base = jsonschema.Draft202012Validator
        checker = base.TYPE_CHECKER.redefine(
            "integer",
            lambda _, x: (
                not isinstance(x, bool)
                and (isinstance(x, int) or (isinstance(x, Decimal) and x == x.to_integral_value()))
            ),
        )
        cls = jsonschema.validators.extend(base, type_checker=checker)
        self.v = cls(
            json.loads(json.dumps(schema), parse_float=Decimal), format_checker=base.FORMAT_CHECKER
        )

    def is_valid(self, value) -> bool:
        return self.is_valid_text(json.dumps(value))

    def is_valid_text(self, text: str) -> bool:
        with localcontext() as ctx:
            ctx.prec = 4000
            return self.v.is_valid(json.loads(text, parse_float=Decimal))


def validator(schema) -> DecimalValidator:
    return DecimalValidator(schema)


# ------------------------------------------------------------------------------------------
# accept / reject tables (values are checked in the four json.dumps spellings; raw texts as is)
# ------------------------------------------------------------------------------------------


class Raw(str):
    """A JSON text checked verbatim."""


CASES = [
    ({"type": "null"}, [None], [0, False, "null", Raw("nul")]),
    ({"type": "boolean"}, [True, False], [0, 1, None, "true"]),
    (
        {"type": "integer"},
        [0, -7, 10**19, 1.0, -2.0, 1e16, Raw("-0"), Raw("3.000")],
        # 21 digits: past the default max_digits=20 (test_json_schema_numbers.py)
        [1.5, "1", Raw("01"), Raw("1."), Raw("+1"), Raw("1e5"), Raw("1" + "0" * 20)],
    ),
    (
        {"type": "number"},
        [0, 1.5, -2.25e-7, 1e300, Raw("1E+2"), Raw("-0.0")],
        [Raw(".5"), Raw("1.e3"), Raw("NaN"), Raw("0x1")],
    ),
    (
        {"type": "integer", "minimum": -3, "maximum": 12},
        [-3, 0, 12, 7.0, Raw("-0")],
        [-4, 13, 100, 2.5],
    ),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000}, [1, 999], [0, 1000, -5]),
    (
        {"type": "number", "minimum": 1.5, "maximum": 2},
        [1.5, 1.75, 2, 2.0, Raw("1.50"), Raw("1.999999")],
        [1.4999, 2.0001, 3, -1.6],
    ),
    (
        {"type": "number", "exclusiveMinimum": -0.5},
        [-0.4999, 0, 10**19, Raw("-0")],
        [-0.5, -1, Raw("-0.50"), Raw("1" + "0" * 20)],  # 21 digits: past max_digits=20
    ),
    ({"type": "number", "multipleOf": 0.25}, [0, 0.25, -1.5, 100, Raw("2.500")], [0.1, 0.3, 1.2]),
    ({"type": "integer", "multipleOf": 7, "maximum": 30}, [0, 7, 28, -14], [1, 35, 8, 29]),
    (
        {"type": "string"},
        ["", "héllo", 'a"b\\c\n\t\u0001', "\U0001f600", Raw('"\\u00e9\\/"')],
        [1, None, Raw('"\\x41"'), Raw('"\\ud800"'), Raw('"a\nb"')],
    ),
    (
        {"type": "string", "minLength": 2, "maxLength": 3},
        ["ab", "abc", "é\U0001f600", "\n\n"],
        ["a", "abcd", ""],
    ),
    ({"type": "string", "pattern": "^[a-z]+\\d$"}, ["abc1", "z0"], ["abc", "ABC1", "a١", "1"]),
    ({"type": "string", "pattern": "b+"}, ["b", "abba", "xbx"], ["", "a", "ccc"]),
    ({"type": "string", "pattern": "^a|b$"}, ["a", "ab", "cb", "axxx"], ["ba", "c", ""]),
    (
        {"type": "string", "pattern": "\\w\\s."},
        ["a b", "_\u00a0\u00e9"],
        ["é b", "a\tb\n"[:2], "ab c"[:2]],
    ),
    (
        {"type": "string", "format": "date"},
        ["2024-02-29", "1999-12-31"],
        ["2023-02-29", "2024-13-01", "2024-1-01"],
    ),
    (
        {"type": "string", "format": "date-time"},
        ["2024-01-31T23:59:59Z", "2024-01-31t10:00:00.5+05:30", "2016-12-31T23:59:60Z"],
        ["2024-01-31 10:00:00Z", "2024-01-31T10:00:00", "2016-12-31T22:59:60Z"],
    ),
    (
        {"type": "string", "format": "email"},
        ["a.b@example.com", '"a b"@x.org', "x@[127.0.0.1]"],
        ["a..b@x.com", "@x.com", "a@"],
    ),
    (
        {"type": "string", "format": "ipv4"},
        ["0.0.0.0", "255.255.255.255"],
        ["256.1.1.1", "01.1.1.1", "1.1.1"],
    ),
    (
        {"type": "string", "format": "ipv6"},
        ["::1", "2001:db8::8a2e:370:7334", "::ffff:1.2.3.4"],
        ["1:::2", "12345::", "1:2:3:4:5:6:7:8:9"],
    ),
    (
        {"type": "string", "format": "uuid"},
        ["2eb8aa08-aa98-11ea-b4aa-73b441d16380"],
        ["2eb8aa08aa9811eab4aa73b441d16380"],
    ),
    (
        {"type": "string", "format": "uri"},
        ["https://example.com/a?b=c#d", "urn:isbn:123"],
        ["//example.com", "a b:c", "http://x.com/ a"],
    ),
    ({"type": "string", "format": "duration"}, ["P1Y2M", "PT1H", "P4W"], ["P", "PT", "P1H", "1Y"]),
    ({"type": "string", "format": "no-such-format"}, ["anything"], [1]),
    (
        {"enum": ["red", "green", 1, None, [1, "a"], {"k": True}]},
        ["red", 1, 1.0, None, [1, "a"], {"k": True}],
        ["blue", 2, [1], {"k": False}, {}],
    ),
    (
        {"const": {"a": [1, 2.5]}},
        [{"a": [1, 2.5]}, {"a": [1.0, 2.50]}],
        [{"a": [1, 2]}, {"a": [2.5, 1]}],
    ),
    ({"type": ["string", "null"]}, ["x", None], [1, True]),
    (
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        [[1], [1, 2, 3]],
        [[], [1, 2, 3, 4], ["a"], [1.5]],
    ),
    (
        {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
        [[], ["a"], ["a", 1]],
        [[1], ["a", "b"], ["a", 1, 2]],
    ),
    (
        {
            "type": "array",
            "prefixItems": [{"const": 1}],
            "items": {"type": "string"},
            "minItems": 2,
        },
        [[1, "x"], [1, "x", "y"]],
        [[1], [2, "x"], [1, 2]],
    ),
    ({"type": "array", "contains": {"type": "string"}}, [["a"], [1, "a", 2]], [[], [1, 2]]),
    (
        {
            "type": "array",
            "contains": {"const": 0},
            "minContains": 2,
            "maxContains": 3,
            "items": {"type": "integer"},
        },
        [[0, 0], [1, 0, 2, 0, 0]],
        [[0], [0, 0, 0, 0], [1, 2]],
    ),
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": False,
        },
        [{"a": 1}, {"a": 1, "b": "x"}, Raw('{"b":"x","a":1}')],
        [
            {},
            {"b": "x"},
            {"a": 1, "c": 2},
            {"a": "1"},
            Raw('{"a": 1, "a": 2}'),
            Raw('{"a":1,}'),
        ],
    ),
    (
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        [{}, {"a": 1}, {"a": 1, "z": [1, {"q": None}]}, {"zz": "x"}, Raw('{"z": 1, "a": 1}')],
        [{"a": "x"}, Raw('{"a": 1, "a": 1}')],
    ),
    (
        {
            "type": "object",
            "properties": {
                "p": {"type": "boolean"},
                "q": {"type": "boolean"},
                "r": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        [
            {},
            {"p": True},
            {"q": True},
            {"r": True},
            {"p": True, "r": False},
            {"p": True, "q": True, "r": True},
            Raw('{"q": true, "p": true}'),
            Raw('{"r": true, "p": false, "q": true}'),
        ],
        [Raw("{,}"), Raw('{, "p": true}'), Raw('{"p": true,}'), Raw('{"q": true, "q": true}')],
    ),
    (
        {
            "type": "object",
            "patternProperties": {"^x-": {"type": "string"}, "n$": {"type": "integer"}},
            "additionalProperties": False,
        },
        [{}, {"x-a": "s"}, {"an": 1}, {"x-n": None} if False else {"x-a": "s", "bn": 2}],
        [{"y": 1}, {"x-a": 1}, {"x-n": "s"}, {"x-n": 1}],
    ),
    (
        {
            "type": "object",
            "propertyNames": {"maxLength": 2},
            "minProperties": 1,
            "maxProperties": 2,
        },
        [{"ab": 1}, {"a": 1, "b": 2}],
        [{}, {"abc": 1}, {"a": 1, "b": 2, "c": 3}],
    ),
    (
        {"type": "object", "required": ["id"], "dependentRequired": {"x": ["y"]}},
        [{"id": 1}, {"id": 1, "x": 1, "y": 2}, {"id": 1, "y": 1}],
        [{"id": 1, "x": 1}, {"x": 1, "y": 1}],
    ),
    (
        {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}]},
        ["", "a", 5],
        ["ab", 1.5, None],
    ),
    ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, [1, 2.5, -3], [2, 5, 100]),
    (
        {"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "pattern": "b"}]},
        ["a", "b", "xa"],
        ["ab", "c"],
    ),
    (
        {"allOf": [{"type": "string", "pattern": "^a"}, {"pattern": "z$"}, {"maxLength": 4}]},
        ["az", "abcz"],
        ["a", "abcdz", "bz"],
    ),
    ({"not": {"type": "string"}}, [1, None, [], {}], ["", "x"]),
    ({"type": "integer", "not": {"enum": [1, 2]}}, [0, 3, -1], [1, 2, 2.0]),
    ({"type": "string", "not": {"pattern": "^ab"}}, ["", "a", "ba", "xab"], ["ab", "abc"]),
    (
        {"type": "array", "items": {"type": "integer"}, "not": {"contains": {"const": 3}}},
        [[], [1, 2]],
        [[3], [1, 3]],
    ),
    (
        {"if": {"type": "integer"}, "then": {"minimum": 10}, "else": {"type": "string"}},
        [10, 11, "x"],
        [9, None, 1.5],
    ),
    (
        {
            "$defs": {"pos": {"type": "integer", "minimum": 1}},
            "type": "array",
            "items": {"$ref": "#/$defs/pos"},
        },
        [[], [1, 2]],
        [[0], ["1"]],
    ),
    ({"definitions": {"a b": {"const": "x"}}, "$ref": "#/definitions/a%20b"}, ["x"], ["y"]),
    ({"$defs": {"s": {"$anchor": "str", "type": "string"}}, "$ref": "#str"}, ["x"], [1]),
    ({"type": "integer", "nullable": True}, [1, None], ["1"]),
    (
        {
            "type": "object",
            "allOf": [{"properties": {"a": {"type": "integer"}}}],
            "properties": {"b": {}},
            "unevaluatedProperties": False,
        },
        [{}, {"a": 1}, {"b": "x"}, {"b": [], "a": 1}],
        [{"c": 1}, {"a": "x"}, {"b": 1, "c": 2}],
    ),
    (
        {
            "type": "object",
            "anyOf": [
                {"properties": {"a": {"const": 1}}, "required": ["a"]},
                {"properties": {"b": {"const": 2}}, "required": ["b"]},
            ],
            "unevaluatedProperties": {"type": "boolean"},
        },
        [{"a": 1}, {"b": 2}, {"a": 1, "b": 2}, {"a": 1, "z": True}, {"a": 1, "b": True}],
        [{}, {"a": 1, "z": 0}, {"b": 2, "a": 2}],
    ),
    (
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}],
            "contains": {"type": "string"},
            "unevaluatedItems": False,
        },
        [[1, "a"], [1, "a", "b"]],
        [[1], [1, 2], [1, "a", 2], ["a"]],
    ),
    (
        {
            "$id": "https://example.com/strict-tree",
            "$dynamicAnchor": "node",
            "$ref": "tree",
            "unevaluatedProperties": False,
            "$defs": {
                "tree": {
                    "$id": "tree",
                    "$dynamicAnchor": "node",
                    "type": "object",
                    "properties": {
                        "data": True,
                        "children": {"type": "array", "items": {"$dynamicRef": "#node"}},
                    },
                }
            },
        },
        [{}, {"data": 1}, {"data": 1, "children": [{"data": 2, "children": []}]}],
        [{"daat": 1}, {"children": [{"daat": 1}]}],
    ),
    (
        {
            "title": "t",
            "description": "d",
            "default": 1,
            "examples": [1],
            "$comment": "c",
            "x-vendor": 1,
            "type": "integer",
        },
        [1],
        ["1"],
    ),
    (True, [None, 1, "x", [1, [2]], {"a": {"b": 1}}], [Raw("nul"), Raw("[1,]")]),
    ({}, [None, 1, "x", [[]], {"a": {}}], [Raw("{'a': 1}")]),
    (False, [], [None, 1, "x", [], {}]) if False else ({"not": {}}, [], []),
]


def _check(rx, accepts, rejects, dfa=None):
    for v in accepts:
        texts = [v] if isinstance(v, Raw) else spellings(v)
        for t in texts:
            assert rx.fullmatch(t), f"rejected valid {t!r}"
            if dfa is not None:
                assert dfa_accepts(dfa, t), f"DFA rejected valid {t!r}"
    for v in rejects:
        texts = [v] if isinstance(v, Raw) else spellings(v)
        for t in texts:
            assert not rx.fullmatch(t), f"accepted invalid {t!r}"
            if dfa is not None:
                assert not dfa_accepts(dfa, t), f"DFA accepted invalid {t!r}"


@pytest.mark.parametrize(
    "schema,accepts,rejects",
    [c for c in CASES if c[1] or c[2]],
    ids=lambda x: json.dumps(x)[:60] if isinstance(x, (dict, bool)) else "",
)
def test_table(schema, accepts, rejects):
    rx = rx_for(schema)
    dfa = ac.compile_json_schema(schema, byte_vocab()) if len(rx.pattern) < 20000 else None
    _check(rx, accepts, rejects, dfa)
    if dfa is not None:
        assert dfa.spec_kind == "json_schema" and json.loads(dfa.spec) == schema


# property_order="declared": declared properties in definition order, then the others
DECLARED_ORDER_CASES = [
    (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
            "required": ["a"],
            "additionalProperties": False,
        },
        [{"a": 1}, {"a": 1, "b": "x"}],
        [{}, {"b": "x"}, Raw('{"a": 1, "a": 2}'), Raw('{"b":"x","a":1}'), Raw('{"a":1,}')],
    ),
    (
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        [{}, {"a": 1}, {"a": 1, "z": [1, {"q": None}]}, {"zz": "x"}],
        [{"a": "x"}, Raw('{"a": 1, "a": 1}'), Raw('{"z": 1, "a": 1}')],
    ),
    (
        {
            "type": "object",
            "properties": {
                "p": {"type": "boolean"},
                "q": {"type": "boolean"},
                "r": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        [{}, {"p": True}, {"r": True}, {"p": True, "r": False}, {"p": True, "q": True, "r": True}],
        [Raw("{,}"), Raw('{"p": true,}'), Raw('{"q": true, "p": true}')],
    ),
]


@pytest.mark.parametrize("schema,accepts,rejects", DECLARED_ORDER_CASES)
def test_table_declared_order(schema, accepts, rejects):
    rx = rx_for(schema, property_order="declared")  # a free value: the PDA's matcher
    dfa = ac.compile_json_schema(schema, byte_vocab(), property_order="declared")
    _check(rx, accepts, rejects, dfa)


def test_false_schema_is_unsatisfiable():
    with pytest.raises(InvalidSchemaError, match="unsatisfiable"):
        json_schema_to_regex(False)


def test_schema_as_json_text():
    assert json_schema_to_regex('{"type": "boolean"}') == json_schema_to_regex({"type": "boolean"})


def test_doctest_examples():
    import doctest

    from automata_compile.frontends.json_schema import _options
    from automata_compile.pipeline import _json_schema

    for module in (_options, _json_schema):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


# ------------------------------------------------------------------------------------------
# exactness properties (hypothesis)
# ------------------------------------------------------------------------------------------

decimals = st.decimals(
    min_value=-1000, max_value=1000, places=3, allow_nan=False, allow_infinity=False
)


def number_texts(d: Decimal) -> list[str]:
    """Plain spellings of a decimal (with a trailing zero variant)."""
    text = format(d, "f")
    out = [text]
    if "." in text:
        out.append(text + "0")
    else:
        out.append(text + ".0")
    return out


@SETTINGS
@given(
    lo=decimals,
    hi=decimals,
    x=decimals,
    lo_ex=st.booleans(),
    hi_ex=st.booleans(),
    integer=st.booleans(),
)
def test_number_ranges_match_brute_force(lo, hi, x, lo_ex, hi_ex, integer):
    assume(lo < hi)
    schema = {
        "type": "integer" if integer else "number",
        "exclusiveMinimum" if lo_ex else "minimum": float(lo),
        "exclusiveMaximum" if hi_ex else "maximum": float(hi),
    }
    lo, hi = Decimal(repr(float(lo))), Decimal(repr(float(hi)))
    if integer and not any(
        (v > lo if lo_ex else v >= lo) and (v < hi if hi_ex else v <= hi)
        for v in range(int(lo) - 1, int(hi) + 2)
    ):
        with pytest.raises(InvalidSchemaError, match="unsatisfiable"):
            json_schema_to_regex(schema)
        return
    rx = rx_for(schema)
    for v in {x, x.quantize(Decimal(1)), lo, hi, lo.quantize(Decimal(1)), hi.quantize(Decimal(1))}:
        ok = (
            (v > lo if lo_ex else v >= lo)
            and (v < hi if hi_ex else v <= hi)
            and (not integer or v == v.to_integral_value())
        )
        for text in number_texts(v):
            assert bool(rx.fullmatch(text)) == ok, (schema, text)


@SETTINGS
@given(m=st.sampled_from(["0.5", "0.01", "3", "2.5", "0.3", "12", "0.125"]), x=decimals)
def test_multiple_of_matches_brute_force(m, x):
    rx = rx_for({"type": "number", "multipleOf": float(m)})
    ok = (x / Decimal(m)) == (x / Decimal(m)).to_integral_value()
    for text in number_texts(x):
        assert bool(rx.fullmatch(text)) == ok, (m, text)


@SETTINGS
@given(s=st.text(max_size=8), lo=st.integers(0, 4), span=st.integers(0, 4))
def test_string_lengths_count_code_points(s, lo, span):
    rx = rx_for({"type": "string", "minLength": lo, "maxLength": lo + span})
    ok = lo <= len(s) <= lo + span
    assume(not any(0xD800 <= ord(c) <= 0xDFFF for c in s))
    for text in spellings(s):
        assert bool(rx.fullmatch(text)) == ok, text


@SETTINGS
@given(s=st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12))
def test_any_string_in_every_escape_mode(s):
    for mode in ("standard", "any"):
        rx = rx_for({"type": "string"}, string_escapes=mode)
        for text in spellings(s):
            assert rx.fullmatch(text)
    rx = rx_for({"type": "string"}, string_escapes="minimal")
    assert rx.fullmatch(json.dumps(s, ensure_ascii=False))


@SETTINGS
@given(s=st.text(alphabet="ab1 _\u00e9\n", max_size=6))
def test_ecma_pattern_semantics(s):
    # ECMA \w and \d are ASCII; \s includes U+00A0 but not U+00E9
    for pattern in ["^\\w+$", "\\d", "^a*b?$", "[^a]", "^(a|b1)+$", "\\s\\S", "^.{2,3}$"]:
        rx = rx_for({"type": "string", "pattern": pattern})
        expected = (
            re.search(pattern.replace("$", "\\Z"), s, re.ASCII) is not None
        )  # ECMA $: end only
        if pattern == "^.{2,3}$":
            expected = "\n" not in s and 2 <= len(s) <= 3
        for text in spellings(s):
            assert bool(rx.fullmatch(text)) == expected, (pattern, text)


# ------------------------------------------------------------------------------------------
# realistic schemas: round trips, near misses, and sampling from the automaton
# ------------------------------------------------------------------------------------------

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "email": {"type": "string", "format": "email"},
        "tags": {"type": "array", "items": {"enum": ["admin", "dev", "ops"]}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {
                "street": {"type": "string"},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                "country": {"enum": ["NO", "SE", "DK"]},
            },
            "required": ["zip"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^ORD-[0-9]{4}$"},
        "status": {"enum": ["new", "paid", "shipped"]},
        "created": {"type": "string", "format": "date-time"},
        "lines": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{3}$"},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                    "price": {"type": "number", "minimum": 0, "multipleOf": 0.01},
                },
                "required": ["sku", "qty", "price"],
                "additionalProperties": False,
            },
        },
        "note": {"type": ["string", "null"], "maxLength": 30},
        "payment": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "kind": {"const": "card"},
                        "last4": {"type": "string", "pattern": "^[0-9]{4}$"},
                    },
                    "required": ["kind", "last4"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "kind": {"const": "invoice"},
                        "days": {"type": "integer", "minimum": 1},
                    },
                    "required": ["kind"],
                    "additionalProperties": False,
                },
            ]
        },
    },
    "required": ["id", "status", "lines"],
    "additionalProperties": False,
}

TREE = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
            },
            "required": ["value"],
            "additionalProperties": False,
        }
    },
    "$ref": "#/$defs/node",
}

EVENT = {
    "type": "object",
    "properties": {
        "type": {"const": "event"},
        "at": {"type": "string", "format": "date"},
        "payload": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
    "required": ["type"],
    "patternProperties": {"^x-": {"type": "string", "maxLength": 5}},
    "additionalProperties": {"type": "boolean"},
}

names = st.text(alphabet=string.ascii_letters + 'é ü"\\\n', min_size=1, max_size=20)


def person_st():
    address = st.fixed_dictionaries(
        {"zip": st.from_regex(r"\A[0-9]{5}\Z")},
        optional={"street": st.text(max_size=10), "country": st.sampled_from(["NO", "SE", "DK"])},
    )
    return st.fixed_dictionaries(
        {"name": names, "age": st.integers(0, 150)},
        optional={
            "email": st.sampled_from(["a@b.co", "first.last@example.org", '"x y"@host.net']),
            "tags": st.lists(st.sampled_from(["admin", "dev", "ops"]), max_size=3),
            "address": address,
        },
    )


def order_st():
    line = st.fixed_dictionaries(
        {
            "sku": st.from_regex(r"\A[A-Z]{3}-[0-9]{3}\Z"),
            "qty": st.integers(1, 99),
            "price": st.integers(0, 10**6).map(lambda c: c / 100),
        }
    )
    payment = st.one_of(
        st.fixed_dictionaries({"kind": st.just("card"), "last4": st.from_regex(r"\A[0-9]{4}\Z")}),
        st.fixed_dictionaries({"kind": st.just("invoice")}, optional={"days": st.integers(1, 90)}),
    )
    return st.fixed_dictionaries(
        {
            "id": st.from_regex(r"\AORD-[0-9]{4}\Z"),
            "status": st.sampled_from(["new", "paid", "shipped"]),
            "lines": st.lists(line, min_size=1, max_size=3),
        },
        optional={
            "created": st.sampled_from(["2024-05-01T12:00:00Z", "1999-12-31T23:59:59.999+01:00"]),
            "note": st.one_of(st.none(), st.text(max_size=30)),
            "payment": payment,
        },
    )


def tree_st():
    return st.recursive(
        st.fixed_dictionaries({"value": st.integers(-5, 5)}),
        lambda kids: st.fixed_dictionaries(
            {"value": st.integers(-5, 5)}, optional={"children": st.lists(kids, max_size=2)}
        ),
        max_leaves=6,
    ).filter(lambda t: _depth(t) <= 3)


def _depth(t):
    return 1 + max((_depth(c) for c in t.get("children", [])), default=0)


def event_st():
    return st.fixed_dictionaries(
        {"type": st.just("event")},
        optional={
            "at": st.sampled_from(["2024-02-29", "2023-12-01"]),
            "payload": st.one_of(st.text(max_size=5), st.integers(-(2**63), 2**64 - 1)),
        },
    ).flatmap(
        lambda base: st.dictionaries(
            st.one_of(
                st.text(max_size=4).map(lambda s: "x-" + s),
                st.text(alphabet="pqr", min_size=1, max_size=3),
            ),
            st.booleans(),
            max_size=2,
        ).map(
            lambda extra: {
                **base,
                **{
                    k: ("s" if k.startswith("x-") else v) for k, v in extra.items() if k not in base
                },
            }
        )
    )


def canonical(value, schema, root=None):
    """The value with its objects' keys in the order the generated language uses: declared
    properties in definition order, then the others (JSON objects are unordered)."""
    root = schema if root is None else root
    if isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rsplit("/", 1)[1]]
    if not isinstance(schema, dict):
        return value
    for kw in ("oneOf", "anyOf"):
        for branch in schema.get(kw, []):
            if validator({**branch, "$defs": root.get("$defs", {})}).is_valid(value):
                return canonical(value, branch, root)
    if isinstance(value, dict):
        props = schema.get("properties", {})
        keys = [k for k in props if k in value] + [k for k in value if k not in props]
        extra = schema.get("additionalProperties", {})
        return {k: canonical(value[k], props.get(k, extra), root) for k in keys}
    if isinstance(value, list):
        return [canonical(x, schema.get("items", {}), root) for x in value]
    return value


REALISTIC = [
    ("person", PERSON, person_st),
    ("order", ORDER, order_st),
    ("tree", TREE, tree_st),
    ("event", EVENT, event_st),
]
_RX: dict = {}


def realistic_rx(name, schema):
    """The declared-order regex (`canonical` spells instances in that order)."""
    if name not in _RX:
        _RX[name] = rx_for(schema, property_order="declared")
    return _RX[name]


@pytest.mark.parametrize("name,schema,strategy", REALISTIC, ids=[r[0] for r in REALISTIC])
def test_realistic_round_trip(name, schema, strategy):
    rx = realistic_rx(name, schema)
    val = validator(schema)

    @SETTINGS
    @given(strategy())
    def check(instance):
        assert val.is_valid(instance), instance
        for text in spellings(canonical(instance, schema)):
            assert rx.fullmatch(text), text

    check()


def has_duplicate_names(text: str) -> bool:
    """Parses ``text`` (ValueError if it is not JSON); whether an object repeats a name."""
    seen = []

    def hook(pairs):
        seen.append(len(pairs) != len({k for k, _ in pairs}))
        return dict(pairs)

    json.loads(text, object_pairs_hook=hook)
    return any(seen)


MUTATION_CHARS = '{}[]":, 0123456789.-eatrufnlxyzAZ\\'


@pytest.mark.parametrize("name,schema,strategy", REALISTIC, ids=[r[0] for r in REALISTIC])
def test_realistic_near_misses_are_rejected(name, schema, strategy):
    rx = realistic_rx(name, schema)
    val = validator(schema)

    @SETTINGS
    @given(strategy(), st.randoms(use_true_random=False))
    def check(instance, rnd):
        text = json.dumps(canonical(instance, schema), separators=rnd.choice([None, (",", ":")]))
        for _ in range(3):
            i = rnd.randrange(len(text) + 1)
            op = rnd.choice("ids")
            c = rnd.choice(MUTATION_CHARS)
            text = text[:i] + (c if op != "d" else "") + text[i + (op != "i") :]
            try:
                duplicates = has_duplicate_names(text)
            except ValueError:
                assert not rx.fullmatch(text), f"accepted non-JSON {text!r}"
                continue
            if duplicates:
                continue  # duplicate names: outside what a validator sees
            if not val.is_valid_text(text):
                assert not rx.fullmatch(text), f"accepted invalid {text!r}"

    check()


def sample_texts(dfa, n: int, seed: int, max_len: int = 400) -> list[str]:
    """Random texts of the automaton's language (random walks over allowed tokens)."""
    rnd = random.Random(seed)
    out = []
    tries = 0
    while len(out) < n and tries < 20 * n:
        tries += 1
        (state, stack), buf = (dfa.start, ()), []
        while len(buf) < max_len:
            mask = dfa.allowed(state, stack)
            allowed = [t for t in mask.nonzero()[0].tolist() if t != 256]
            if mask[256] and (not allowed or rnd.random() < 0.3):
                out.append(bytes(buf).decode("utf-8"))
                break
            # favour structure over long free text: pick printable ASCII more often
            ascii_ = [t for t in allowed if 0x20 <= t < 0x7F]
            tok = rnd.choice(ascii_ if ascii_ and rnd.random() < 0.9 else allowed)
            buf.append(tok)
            state, stack = dfa.advance_config(state, stack, tok)
    return out


@pytest.mark.parametrize("name,schema,strategy", REALISTIC, ids=[r[0] for r in REALISTIC])
def test_everything_the_automaton_generates_is_valid(name, schema, strategy):
    dfa = ac.compile_json_schema(schema, byte_vocab(), property_order="declared")
    val = validator(schema)
    rx = realistic_rx(name, schema)
    texts = sample_texts(dfa, 25, seed=len(name))
    assert len(texts) >= 10
    for text in texts:
        assert rx.fullmatch(text), text
        assert val.is_valid_text(text), text


def test_realistic_regex_sizes():
    sizes = {name: len(realistic_rx(name, schema).pattern) for name, schema, _ in REALISTIC}
    assert sizes["person"] < 6000 and sizes["order"] < 9000 and sizes["tree"] < 12000, sizes


# ------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------

NESTED = {
    "type": "object",
    "properties": {
        "a": {"type": "array", "items": {"type": "integer"}},
        "b": {"type": "object", "properties": {"c": {"type": "null"}}},
    },
}


def test_whitespace_modes():
    value = {"a": [1, 2], "b": {"c": None}}
    default, compact, pretty = (
        rx_for(NESTED, whitespace=w) for w in ("default", "compact", "pretty")
    )
    assert default.fullmatch(json.dumps(value)) and default.fullmatch(
        json.dumps(value, separators=(",", ":"))
    )
    assert not default.fullmatch(json.dumps(value, indent=2))
    assert compact.fullmatch(json.dumps(value, separators=(",", ":"))) and not compact.fullmatch(
        json.dumps(value)
    )
    for indent in (None, 1, 2, 4, "\t"):
        assert pretty.fullmatch(json.dumps(value, indent=indent))
    assert pretty.fullmatch('{ "a" : [ 1 ,2 ] ,\r\n "b":{ } }')
    bounded = rx_for(NESTED, whitespace="pretty", max_whitespace=3)
    assert bounded.fullmatch('{   "a": []}') and not bounded.fullmatch('{    "a": []}')


def test_max_nesting_depth_bounds_free_values():
    rx1 = rx_for({}, max_nesting_depth=1, recursion="unroll")
    assert rx1.fullmatch("[1, {}]".replace(", {}", "")) and rx1.fullmatch(
        '{"a": [1]}'.replace("[1]", "1")
    )
    assert not rx1.fullmatch("[[1]]")
    rx3 = rx_for({}, max_nesting_depth=3, recursion="unroll")
    assert rx3.fullmatch('[[{"a": 1}]]') and not rx3.fullmatch("[[[[]]]]")
    # free values below a structured object get the whole bound
    rx = rx_for(
        {"type": "object", "properties": {"x": {}}}, max_nesting_depth=1, recursion="unroll"
    )
    assert rx.fullmatch('{"x": [1], "y": {"z": 2}}') and not rx.fullmatch('{"x": [[1]]}')
    # with grammar rules (the default) the bound does not apply
    assert rx_for({}, max_nesting_depth=1).fullmatch("[[[[[[{}]]]]]]")


def test_max_recursion_depth_unrolls_recursion():
    leaf = {"value": 1}
    deep = leaf
    for _ in range(3):
        deep = {"value": 1, "children": [deep]}
    declared = {"property_order": "declared", "recursion": "unroll"}
    assert rx_for(TREE, max_recursion_depth=3, **declared).fullmatch(json.dumps(deep))
    assert not rx_for(TREE, max_recursion_depth=2, **declared).fullmatch(json.dumps(deep))
    assert rx_for(TREE, max_recursion_depth=2).fullmatch(json.dumps(deep))  # rules: no bound
    required_child = {
        "$defs": {
            "n": {
                "type": "object",
                "properties": {"next": {"$ref": "#/$defs/n"}},
                "required": ["next"],
            }
        },
        "$ref": "#/$defs/n",
    }
    with pytest.raises(InvalidSchemaError, match="max_recursion_depth"):
        json_schema_to_regex(required_child, recursion="unroll")
    with pytest.raises(InvalidSchemaError, match="unsatisfiable"):
        rx_for(required_child)


def test_leap_seconds_option():
    schema = {"type": "string", "format": "time"}
    assert not rx_for(schema, leap_seconds="none").fullmatch('"23:59:60Z"')
    utc = rx_for(schema)
    assert (
        utc.fullmatch('"23:59:60Z"')
        and utc.fullmatch('"23:59:60.5-00:00"')
        and not utc.fullmatch('"01:29:60+01:30"')
    )
    exact = rx_for(schema, leap_seconds="exact")
    assert (
        exact.fullmatch('"01:29:60+01:30"')
        and exact.fullmatch('"15:59:60-08:00"')
        and not exact.fullmatch('"23:59:60+01:00"')
    )


def test_assert_format_option():
    assert rx_for({"format": "ipv4"}, assert_format=False).fullmatch('"not an ip"')
    assert not rx_for({"format": "ipv4"}).fullmatch('"not an ip"')


def test_string_escape_modes():
    assert rx_for({"const": "a/b"}, string_escapes="any").fullmatch('"a\\/b"')
    assert not rx_for({"const": "a/b"}).fullmatch('"a\\/b"')
    assert rx_for({"const": "é"}).fullmatch('"\\u00E9"')
    assert not rx_for({"const": "é"}, string_escapes="minimal").fullmatch('"\\u00e9"')


def test_bad_options():
    with pytest.raises(ValueError, match="whitespace"):
        json_schema_to_regex({}, whitespace="loose")
    with pytest.raises(ValueError, match="max_nesting_depth"):
        json_schema_to_regex({}, max_nesting_depth=-1)
    with pytest.raises(ValueError, match="subsets must be 'warn' or 'refuse'"):
        json_schema_to_regex({}, subsets="drop")
    with pytest.raises(TypeError):
        json_schema_to_regex({}, no_such_option=1)


def test_properties_in_definition_order_without_blowup():
    props = {f"p{i}": {"type": "boolean"} for i in range(30)}
    rx = rx_for(
        {"type": "object", "properties": props, "additionalProperties": False},
        property_order="declared",
    )
    assert len(rx.pattern) < 4000
    assert rx.fullmatch(json.dumps({"p3": True, "p17": False, "p29": True}))
    assert not rx.fullmatch(json.dumps({"p17": False, "p3": True}))


# ------------------------------------------------------------------------------------------
# bad schemas and refusals: the JSON pointer is in the message
# ------------------------------------------------------------------------------------------

INVALID = [
    ([1, 2], ""),
    ("not json", ""),
    ({"properties": {"a": 5}}, "/properties/a"),
    ({"properties": {"a": {"$ref": "#/$defs/missing"}}}, "/properties/a/$ref"),
    ({"$ref": "#nope"}, "/$ref"),
    ({"properties": {"n": {"minimum": 5, "maximum": 3}}}, "/properties/n"),
    ({"items": {"minLength": 4, "maxLength": 2}}, "/items"),
    ({"minItems": 3, "maxItems": 2}, ""),
    ({"properties": {"o": {"minProperties": 3, "maxProperties": 1}}}, "/properties/o"),
    ({"contains": {}, "minContains": 3, "maxContains": 1}, ""),
    ({"properties": {"e": {"enum": []}}}, "/properties/e/enum"),
    ({"properties": {"t": {"type": "float"}}}, "/properties/t/type"),
    ({"properties": {"p": {"pattern": "(unclosed"}}}, "/properties/p/pattern"),
    ({"properties": {"m": {"multipleOf": 0}}}, "/properties/m/multipleOf"),
    ({"properties": {"l": {"maxLength": -1}}}, "/properties/l/maxLength"),
    (
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        "/$defs/",
    ),
    (
        {
            "type": "object",
            "properties": {"x": {"allOf": [{"type": "string"}, {"type": "integer"}]}},
            "required": ["x"],
        },
        "/properties/x",
    ),
]


@pytest.mark.parametrize("schema,pointer", INVALID, ids=[str(i) for i in range(len(INVALID))])
def test_invalid_schemas_name_the_pointer(schema, pointer):
    with pytest.raises(InvalidSchemaError) as info:
        json_schema_to_regex(schema)
    assert info.value.pointer is not None and info.value.pointer.startswith(pointer)
    assert "#" + pointer in str(info.value)


UNSUPPORTED = [
    (
        {"properties": {"tags": {"type": "array", "uniqueItems": True, "minItems": 2}}},
        "uniqueItems",
        "/properties/tags/uniqueItems",
    ),
    (
        {
            "anyOf": [{"properties": {f"p{i}": {"type": "integer"}}} for i in range(5)],
            "unevaluatedProperties": False,
        },
        "unevaluatedProperties",
        "/unevaluatedProperties",
    ),
    (
        {"not": {"items": {"$dynamicRef": "https://example.com/meta#meta"}}},
        "$dynamicRef",
        "/not/items/$dynamicRef",
    ),
    (
        {"oneOf": [{"properties": {"r": {"$ref": "https://example.com/other.json"}}}, {}]},
        "$ref",
        "/oneOf/0/properties/r/$ref",
    ),
    ({"pattern": "(a)\\1"}, "pattern", "/pattern"),
    ({"patternProperties": {"(?=x)": {}}}, "patternProperties", "/patternProperties/(?=x)"),
    ({"properties": {"w": {"pattern": "\\bword"}}}, "pattern", "/properties/w/pattern"),
    ({"$schema": "https://example.com/my-meta", "type": "string"}, "$schema", "/$schema"),
    ({"type": "integer", "multipleOf": 0.123456789}, "multipleOf", "/multipleOf"),
]


@pytest.mark.parametrize("schema,keyword,pointer", UNSUPPORTED, ids=[u[1] for u in UNSUPPORTED])
def test_strict_mode_refuses_by_name(schema, keyword, pointer):
    with pytest.raises(UnsupportedSchemaError) as info:
        json_schema_to_regex(schema)
    assert info.value.keyword == keyword
    assert info.value.pointer == pointer
    if keyword:
        assert repr(keyword) in str(info.value) and "#" + pointer in str(info.value)


def test_lenient_mode_warns_and_accepts_more():
    schema = {
        "type": "object",
        "properties": {
            "tags": {
                "type": "array",
                "items": {"type": "string"},
                "uniqueItems": True,
                "minItems": 2,
            }
        },
    }
    with pytest.warns(
        UserWarning, match=r"'uniqueItems' at #/properties/tags/uniqueItems is not enforced"
    ):
        rx = re.compile(
            json_schema_to_regex(
                schema, strict=False, property_order="declared", recursion="unroll"
            )
        )
    assert rx.fullmatch('{"tags": ["a", "a"]}') and not rx.fullmatch('{"tags": [1, 2]}')
    with pytest.warns(ac.SubsetWarning, match=r"Punycode"):
        rx = re.compile(
            json_schema_to_regex({"format": "hostname"}, strict=False, recursion="unroll")
        )
    assert rx.fullmatch('"www.example.com"') and not rx.fullmatch('"xn--9n2bp8q.com"')


def test_no_warnings_in_strict_mode():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rx_for(ORDER, property_order="declared")


# ------------------------------------------------------------------------------------------
# differential fuzzing: random schemas and instances against jsonschema
# ------------------------------------------------------------------------------------------

KEYS = ["a", "b", "c"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([1.5, -0.5, 2.0, 0.25]),
    st.sampled_from(["", "a", "b", "ab", "ba", "aab", "é"]),
)
json_values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.sampled_from(KEYS + ["d"]), kids, max_size=3)
    ),
    max_leaves=6,
)


def schema_strategy():
    leaf = st.one_of(
        st.booleans(),
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    ["null", "boolean", "integer", "number", "string", "array", "object"]
                )
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.lists(
                    st.sampled_from(["integer", "string", "null", "array"]),
                    min_size=1,
                    max_size=2,
                    unique=True,
                )
            }
        ),
        st.fixed_dictionaries({"enum": st.lists(scalars, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"const": json_values}),
        st.fixed_dictionaries(
            {},
            optional={
                "minimum": st.integers(-2, 2),
                "exclusiveMaximum": st.sampled_from([0, 1.5, 3]),
            },
        ),
        st.fixed_dictionaries({"multipleOf": st.sampled_from([2, 0.5, 3, 0.25])}),
        st.fixed_dictionaries(
            {},
            optional={
                "minLength": st.integers(0, 2),
                "maxLength": st.integers(1, 3),
                "pattern": st.sampled_from(["^a", "b$", "a+", "^[ab]*$", "^(a|ba)$"]),
            },
        ),
        st.fixed_dictionaries(
            {}, optional={"minItems": st.integers(0, 2), "maxItems": st.integers(1, 3)}
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
                "minProperties": st.integers(0, 2),
                "maxProperties": st.integers(1, 3),
            },
        ),
    )

    def extend(kids):
        return st.one_of(
            st.fixed_dictionaries({"allOf": st.lists(kids, min_size=1, max_size=2)}),
            st.fixed_dictionaries({"anyOf": st.lists(kids, min_size=1, max_size=2)}),
            st.fixed_dictionaries({"oneOf": st.lists(kids, min_size=1, max_size=2)}),
            st.fixed_dictionaries({"not": kids}),
            st.fixed_dictionaries({"if": kids}, optional={"then": kids, "else": kids}),
            st.fixed_dictionaries(
                {"items": kids},
                optional={"prefixItems": st.lists(kids, max_size=2), "contains": kids},
            ),
            st.fixed_dictionaries(
                {"properties": st.dictionaries(st.sampled_from(KEYS), kids, max_size=2)},
                optional={
                    "additionalProperties": kids,
                    "patternProperties": st.dictionaries(
                        st.sampled_from(["^a", "b"]), kids, max_size=1
                    ),
                    "required": st.lists(st.sampled_from(KEYS), max_size=2, unique=True),
                },
            ),
            st.fixed_dictionaries({"propertyNames": kids}),
            st.fixed_dictionaries(
                {"allOf": st.lists(kids, min_size=1, max_size=2)},
                optional={"unevaluatedProperties": kids, "unevaluatedItems": kids},
            ),
        )

    return st.recursive(leaf, extend, max_leaves=5)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    schema=schema_strategy(),
    values=st.lists(json_values, min_size=1, max_size=6),
    seed=st.integers(0, 9),
)
def test_differential_against_jsonschema(schema, values, seed):
    """Exact, except where a oneOf is a named sound subset: then only sound."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rx = rx_for(schema, max_nesting_depth=3)
    except (UnsupportedSchemaError, InvalidSchemaError, ac.StateBudgetExceededError):
        return
    subset = any(getattr(w.message, "keyword", None) == "oneOf" for w in caught)
    val = validator(schema)
    for value in values:
        valid = val.is_valid(value)
        orders = list(itertools.islice(key_orders(value), 48))
        for opts in SPELLINGS[seed % 4 : seed % 4 + 1] + SPELLINGS[1:2]:
            texts = [json.dumps(v, **opts) for v in orders]
            hit = any(rx.fullmatch(t) for t in texts)
            assert hit == valid or (subset and not hit), (schema, texts[0], valid)


def key_orders(value):
    if isinstance(value, dict):
        for perm in itertools.permutations(value):
            for kids in itertools.product(*(list(key_orders(value[k])) for k in perm)):
                yield dict(zip(perm, kids, strict=True))
    elif isinstance(value, list):
        for kids in itertools.product(*(list(key_orders(x)) for x in value)):
            yield list(kids)
    else:
        yield value
