"""Dataclasses -> regex (json and call formats) and `parse` back, with hypothesis instances."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from typing import Literal, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import automata_compile as ac
from automata_compile import (
    InvalidSchemaError,
    UnsupportedSchemaError,
    compile_dataclass,
    dataclass_to_regex,
    parse,
)
from automata_compile._errors import DataclassParseError
from automata_compile.frontends.dataclass import dataclass_schema

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass
class Address:
    city: str
    zip: Optional[str] = None  # noqa: UP045 - Optional spelling is part of what is tested


@dataclasses.dataclass
class Person:
    name: str
    age: int
    height: float = 1.7
    active: bool = True
    color: Color = Color.RED
    level: Level = Level.LOW
    kind: Literal["a", "b", 3] = "a"
    tags: list[str] = dataclasses.field(default_factory=list)
    home: Address | None = None
    pair: tuple[int, str] = (0, "")
    many: tuple[float, ...] = ()
    scores: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node] = dataclasses.field(default_factory=list)


def to_json(x) -> str:
    def default(o):
        if isinstance(o, enum.Enum):
            return o.value
        raise TypeError(o)

    return json.dumps(dataclasses.asdict(x), default=default)


def to_call(x, omit_defaults: bool = False) -> str:
    """The call format, built independently of the library."""
    if dataclasses.is_dataclass(x):
        args = []
        for f in dataclasses.fields(x):
            v = getattr(x, f.name)
            if omit_defaults and (
                f.default is not dataclasses.MISSING
                and v == f.default
                or f.default_factory is not dataclasses.MISSING
                and v == f.default_factory()
            ):
                continue
            args.append(f"{f.name}={to_call(v, omit_defaults)}")
        return f"{type(x).__name__}({', '.join(args)})"
    if isinstance(x, enum.Enum):
        return to_call(x.value)
    if isinstance(x, str):
        return json.dumps(
            x, ensure_ascii=False
        )  # (a \\ud83d\\ude00 pair is two characters in Python)
    if isinstance(x, (bool, int)) or x is None:
        return repr(x)
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, list):
        return "[" + ", ".join(to_call(v, omit_defaults) for v in x) + "]"
    if isinstance(x, tuple):
        inner = [to_call(v, omit_defaults) for v in x]
        return "(" + (inner[0] + "," if len(inner) == 1 else ", ".join(inner)) + ")"
    if isinstance(x, dict):
        return (
            "{"
            + ", ".join(f"{to_call(k)}: {to_call(v, omit_defaults)}" for k, v in x.items())
            + "}"
        )
    raise TypeError(x)


text_st = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
# 64-bit integers: longer digit runs are past the default max_digits=20 (issue 20)
INT64 = st.integers(-(2**63), 2**63 - 1)
address_st = st.builds(Address, city=text_st, zip=st.one_of(st.none(), text_st))
person_st = st.builds(
    Person,
    name=text_st,
    age=st.integers(-(10**12), 10**12),
    height=floats,
    active=st.booleans(),
    color=st.sampled_from(Color),
    level=st.sampled_from(Level),
    kind=st.sampled_from(["a", "b", 3]),
    tags=st.lists(text_st, max_size=3),
    home=st.one_of(st.none(), address_st),
    pair=st.tuples(INT64, text_st),
    many=st.lists(floats, max_size=3).map(tuple),
    scores=st.dictionaries(text_st, INT64, max_size=2),
)
node_st = st.recursive(
    st.builds(Node, value=st.integers(-9, 9), children=st.just([])),
    lambda kids: st.builds(Node, value=st.integers(-9, 9), children=st.lists(kids, max_size=2)),
    max_leaves=5,
).filter(lambda n: _depth(n) <= 3)


def _depth(n: Node) -> int:
    return 1 + max((_depth(c) for c in n.children), default=0)


RX = {}


def rx(cls, fmt):
    if (cls, fmt) not in RX:
        RX[cls, fmt] = re.compile(dataclass_to_regex(cls, format=fmt))
    return RX[cls, fmt]


@SETTINGS
@given(person_st)
def test_person_json_round_trip(p):
    text = to_json(p)
    assert rx(Person, "json").fullmatch(text), text
    assert rx(Person, "json").fullmatch(
        json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    )
    assert parse(Person, text) == p
    assert parse(Person, text, format="json") == p


@SETTINGS
@given(person_st, st.booleans())
def test_person_call_round_trip(p, omit):
    text = to_call(p, omit_defaults=omit)
    assert rx(Person, "call").fullmatch(text), text
    assert rx(Person, "call").fullmatch(text.replace(", ", ","))
    assert parse(Person, text) == p
    assert parse(Person, text, format="call") == p


@SETTINGS
@given(node_st)
def test_recursive_dataclass(n):
    for fmt, text in (("json", to_json(n)), ("call", to_call(n))):
        assert rx(Node, fmt).fullmatch(text), text
        assert parse(Node, text) == n


def test_depth_beyond_recursion_limit_is_rejected():
    deep = Node(0)
    for _ in range(5):
        deep = Node(0, [deep])
    assert not rx(Node, "call").fullmatch(to_call(deep))
    assert re.fullmatch(
        dataclass_to_regex(Node, format="call", max_recursion_depth=5), to_call(deep)
    )


CALL_REJECTS = [
    'Person(age=36, name="Ada")',  # field order
    'Person(name="Ada")',  # missing required
    "Person(name='Ada', age=36)",  # single quotes
    'Person(name="Ada", age=36, extra=1)',
    'Person(name="Ada", age=36.5)',
    'Person(name="Ada", age=36, color=Color.RED)',
    'Person(name="Ada", age=36, kind="c")',
    'Person(name="Ada", age=36, pair=(1))',
    'Person(name="Ada", age=36, home=Address())',
    'Person(name = "Ada", age=36)',
    'Person(name="A\nda", age=36)',
]


@pytest.mark.parametrize("text", CALL_REJECTS)
def test_call_format_rejects(text):
    assert not rx(Person, "call").fullmatch(text)


def test_call_format_accepts_escapes_and_compact_separators():
    r = rx(Person, "call")
    for name in ['"A\\u00e9\\x41\\U0001F600\\t\\"\\\\"', '"é😀"', '""']:
        text = f'Person(name={name},age=-3,kind=3,home=Address(city="x",zip=None))'
        assert r.fullmatch(text), text
        assert parse(Person, text).home == Address("x")
    assert parse(Person, 'Person(name="\\u00e9", age=1)').name == "é"
    assert not r.fullmatch('Person(name="\\ud800", age=1)')
    assert not r.fullmatch('Person(name="\\U00110000", age=1)')


def test_json_format_rejects():
    r = rx(Person, "json")
    assert not r.fullmatch('{"age": 1, "name": "x"}')
    assert not r.fullmatch('{"name": "x", "age": 1, "other": 2}')
    assert not r.fullmatch('{"name": "x", "age": 1, "color": "blue"}')
    assert not r.fullmatch('{"name": "x", "age": 1, "pair": [1]}')
    assert r.fullmatch('{"name": "x", "age": 1, "color": "green", "level": 2, "pair": [1, "y"]}')


def test_schema_of_a_dataclass():
    schema = dataclass_schema(Address)
    assert schema["$ref"] == "#/$defs/Address"
    assert schema["$defs"]["Address"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "zip": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "additionalProperties": False,
        "required": ["city"],
    }


def test_compile_dataclass_to_token_dfa():
    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    p = Person("Ada", 36, tags=["x"], home=Address("Oslo", "0150"))
    for fmt, text in (("json", to_json(p)), ("call", to_call(p, omit_defaults=True))):
        dfa = compile_dataclass(Person, vocab, format=fmt)
        assert dfa.spec_kind == "dataclass" and json.loads(dfa.spec)["format"] == fmt
        assert dfa.accepts(list(text.encode()))
        assert not dfa.accepts(list(text.replace("Ada", "Ada\n").encode()))


def test_parse_never_evaluates_code():
    for text in [
        '__import__("os").system("true")',
        'Person(name=__import__("os").getcwd(), age=1)',
        'Person(name="a" + "b", age=1)',
        "Person(*[1, 2])",
    ]:
        with pytest.raises(DataclassParseError):
            parse(Person, text)


def test_parse_errors():
    with pytest.raises(DataclassParseError, match="unknown fields"):
        parse(Address, '{"city": "x", "street": "y"}')
    with pytest.raises(DataclassParseError, match="not valid JSON"):
        parse(Address, "{")
    with pytest.raises(DataclassParseError, match="keyword arguments"):
        parse(Address, 'Address("x")')
    with pytest.raises(DataclassParseError, match="#/age"):
        parse(Person, 'Person(name="x", age="old")')
    assert isinstance(DataclassParseError("x"), ac.AutomataError)


def test_unsupported_field_types_name_the_field():
    @dataclasses.dataclass
    class Bad:
        ok: int
        bad: set[int]

    @dataclasses.dataclass
    class BadKeys:
        m: dict[int, str]

    for cls, ptr in ((Bad, "/bad"), (BadKeys, "/m")):
        for fmt in ("json", "call"):
            with pytest.raises(UnsupportedSchemaError) as info:
                dataclass_to_regex(cls, format=fmt)
            assert ptr in str(info.value)
    with pytest.raises(InvalidSchemaError, match="not a dataclass"):
        dataclass_to_regex(int)
    with pytest.raises(ValueError, match="format"):
        dataclass_to_regex(Address, format="yaml")


def test_json_options_pass_through():
    pretty = re.compile(dataclass_to_regex(Address, whitespace="pretty"))
    assert pretty.fullmatch(json.dumps({"city": "x", "zip": None}, indent=2))
    compact_call = re.compile(dataclass_to_regex(Address, format="call", whitespace="compact"))
    assert compact_call.fullmatch('Address(city="x",zip=None)') and not compact_call.fullmatch(
        'Address(city="x", zip=None)'
    )


def test_module_doctest():
    import doctest

    from automata_compile.frontends import dataclass

    assert doctest.testmod(dataclass).failed == 0
