"""The call format: a dataclass → the IR of its constructor calls (`_CallBuilder`)."""

from __future__ import annotations

import dataclasses
import enum
import math
import typing
from typing import Any, Literal

from automata_compile._errors import UnsupportedSchemaError
from automata_compile.automata import NEVER
from automata_compile.frontends.dataclass import _introspect as intro
from automata_compile.frontends.json_schema import content as sf
from automata_compile.frontends.json_schema import strings as _strings

# ------------------------------------------------------------------------------------------
# call format: dataclass -> regex tree
# ------------------------------------------------------------------------------------------

_MUST_ESCAPE = ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
_PY_SHORT = {
    0x5C: "\\",
    0x22: '"',
    0x27: "'",
    0x0A: "n",
    0x0D: "r",
    0x09: "t",
    0x07: "a",
    0x08: "b",
    0x0C: "f",
    0x0B: "v",
}
_BACKSLASH = sf.char("\\")


def _py_encode_set(ranges: tuple, free: bool):
    """Python double-quoted literal fragments for one character of ``ranges``."""
    parts = []
    raw = sf.cs_diff(ranges, _MUST_ESCAPE + ((0xD800, 0xDFFF),))
    if raw:
        parts.append(sf.chars(raw))
    escapable = (
        sf.cs_diff(ranges, ((0xD800, 0xDFFF),)) if free else sf.cs_inter(ranges, _MUST_ESCAPE)
    )
    short = [cp for cp in _PY_SHORT if sf.cs_contains(escapable, cp)]
    if short:
        parts.append(sf.seq(_BACKSLASH, sf.chars([(ord(_PY_SHORT[cp]),) * 2 for cp in short])))
    low = sf.cs_inter(escapable, ((0, 0xFF),))
    if low:
        parts.append(sf.seq(_BACKSLASH, sf.char("x"), _strings._hex_fixed(low, 2)))
    bmp = sf.cs_inter(escapable, ((0, 0xFFFF),))
    if bmp:
        parts.append(sf.seq(_BACKSLASH, sf.char("u"), _strings._hex_fixed(bmp, 4)))
    if escapable:
        parts.append(sf.seq(_BACKSLASH, sf.char("U"), _strings._hex_fixed(escapable, 8)))
    return sf.alt(*parts)


def _py_string(content):
    body = _strings.map_chars(content, lambda r: _py_encode_set(r, r == sf.ALL_CHARS))
    return sf.seq(sf.char('"'), body, sf.char('"'))


_DIGITS = sf.chars([(0x30, 0x39)])
_PY_INT = sf.seq(
    sf.opt(sf.char("-")), sf.alt(sf.char("0"), sf.seq(sf.chars([(0x31, 0x39)]), sf.star(_DIGITS)))
)
_PY_FLOAT = sf.seq(
    _PY_INT,
    sf.opt(sf.seq(sf.char("."), sf.rep(_DIGITS, 1, None))),
    sf.opt(
        sf.seq(
            sf.chars([(0x45, 0x45), (0x65, 0x65)]),
            sf.opt(sf.chars([(0x2B, 0x2B), (0x2D, 0x2D)])),
            sf.rep(_DIGITS, 1, None),
        )
    ),
)


def _py_literal(v):
    if v is None:
        return sf.lit("None")
    if isinstance(v, bool):
        return sf.lit(repr(v))
    if isinstance(v, int):
        return sf.lit(str(v))
    if isinstance(v, float):
        if not math.isfinite(v):
            raise UnsupportedSchemaError(
                f"{v!r} has no Python literal", keyword="Literal", pointer=""
            )
        return sf.lit(repr(v))
    return _py_string(sf.lit(v))


class _CallBuilder:
    def __init__(self, max_recursion_depth: int, whitespace: str):
        self.max_depth = max_recursion_depth
        self.stack: list[type] = []
        sp = sf.EPS if whitespace == "compact" else sf.opt(sf.char(" "))
        self.comma = sf.seq(sf.char(","), sp)
        self.colon = sf.seq(sf.char(":"), sp)

    def dataclass(self, cls, ptr: str):
        if self.stack.count(cls) > self.max_depth:
            return NEVER
        self.stack.append(cls)
        try:
            items = []
            for f, tp in intro._fields(cls):
                value = self.value(tp, f"{ptr}/{f.name}")
                items.append(
                    (sf.seq(sf.lit(f.name), sf.char("="), value), not intro._has_default(f))
                )
        finally:
            self.stack.pop()
        return sf.seq(sf.lit(cls.__name__), sf.char("("), _joined(items, self.comma), sf.char(")"))

    def value(self, tp, ptr: str):
        tp = intro._strip(tp)
        if tp is type(None) or tp is None:
            return sf.lit("None")
        if tp is bool:
            return sf.alt(sf.lit("True"), sf.lit("False"))
        if tp is int:
            return _PY_INT
        if tp is float:
            return _PY_FLOAT
        if tp is str:
            return _py_string(sf.ANY_STRING)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.dataclass(tp, ptr)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return sf.alt(*(_py_literal(v) for v in intro._enum_values(tp, ptr)))
        args = intro._union_args(tp)
        if args is not None:
            return sf.alt(*(self.value(a, ptr) for a in args))
        origin, targs = typing.get_origin(tp), typing.get_args(tp)
        if origin is Literal:
            return sf.alt(*(_py_literal(v) for v in intro._literal_values(tp, ptr)))
        if origin in (list, typing.List):  # noqa: UP006
            item = self.value(targs[0] if targs else Any, f"{ptr}/0")
            return sf.seq(
                sf.char("["), sf.opt(sf.seq(item, sf.star(sf.seq(self.comma, item)))), sf.char("]")
            )
        if origin in (tuple, typing.Tuple):  # noqa: UP006
            if len(targs) == 2 and targs[1] is Ellipsis:
                item = self.value(targs[0], f"{ptr}/0")
                return sf.alt(
                    sf.lit("()"),
                    sf.seq(sf.char("("), item, sf.char(","), sf.char(")")),
                    sf.seq(
                        sf.char("("), item, sf.rep(sf.seq(self.comma, item), 1, None), sf.char(")")
                    ),
                )
            if targs == ((),) or not targs:
                return sf.lit("()")
            items = [self.value(a, f"{ptr}/{i}") for i, a in enumerate(targs)]
            if len(items) == 1:
                return sf.seq(sf.char("("), items[0], sf.char(","), sf.char(")"))
            body = [items[0]]
            for it in items[1:]:
                body += [self.comma, it]
            return sf.seq(sf.char("("), *body, sf.char(")"))
        if origin in (dict, typing.Dict):  # noqa: UP006
            if targs and intro._strip(targs[0]) is not str:
                intro._unsupported(tp, ptr, "call")
            v = self.value(targs[1] if targs else Any, f"{ptr}/*")
            item = sf.seq(_py_string(sf.ANY_STRING), self.colon, v)
            return sf.seq(
                sf.char("{"), sf.opt(sf.seq(item, sf.star(sf.seq(self.comma, item)))), sf.char("}")
            )
        intro._unsupported(tp, ptr, "call")


def _joined(items: list, comma):
    """Items in order joined by commas; optional items may be omitted (linear size)."""
    emitted, empty_ok = NEVER, True
    for node, required in items:
        if sf.is_never(node):
            if required:
                return NEVER
            continue
        if required:
            emitted = sf.seq(
                sf.opt(sf.seq(emitted, comma)) if empty_ok else sf.seq(emitted, comma), node
            )
            empty_ok = False
        elif not empty_ok:
            emitted = sf.seq(emitted, sf.opt(sf.seq(comma, node)))
        elif sf.is_never(emitted) or sf.size(node) <= sf.size(emitted):
            emitted = sf.alt(sf.seq(emitted, sf.opt(sf.seq(comma, node))), node)
        else:
            emitted = sf.alt(sf.seq(sf.opt(sf.seq(emitted, comma)), node), emitted)
    return sf.alt(emitted, sf.EPS if empty_ok else NEVER)
