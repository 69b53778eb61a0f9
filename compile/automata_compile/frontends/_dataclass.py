"""Python dataclasses -> regex, in two output formats, and `parse` back to instances.

``format="json"``: a JSON object with the dataclass's fields (``json.dumps(asdict(x))``),
translated through the dataclass's JSON Schema (`dataclass_schema`) by
`json_schema_to_regex`, so it accepts what that accepts (whitespace options, key order =
field order: ``property_order="declared"`` unless passed, fields with defaults may be
omitted, no other keys).

``format="call"``: a constructor call with keyword arguments in field order, values as
Python literals: ``Person(name="Ada", age=36, tags=["x"], home=Address(city="Oslo"))``.
Fields with defaults may be omitted. Separators are ``", "`` or ``","``; no space around
``=``. Strings are **double-quoted** Python literals: any character raw except ``"``,
``\\`` and control characters U+0000-U+001F; escapes ``\\\\ \\" \\' \\n \\r \\t \\a \\b \\f \\v``,
``\\xHH``, ``\\uHHHH`` (no surrogates) and ``\\UHHHHHHHH`` (at most U+10FFFF); hex digits of
either case; so ``json.dumps(s, ensure_ascii=False)`` is always a valid spelling. (``Literal``/``Enum``
strings accept the raw spelling and, for characters that need one, an escape.) ``True``/``False``/``None``; ints ``-?(0|[1-9][0-9]*)``; floats
in JSON number syntax; lists ``[a, b]``; tuples ``()``, ``(a,)``, ``(a, b)``; dicts
``{"k": v}``; enums as their values.

Supported field types: ``bool``, ``int``, ``float``, ``str``, ``None``, nested dataclasses
(recursion unrolled to ``max_recursion_depth``), ``Optional[X]``/``X | None``/``Union``,
``list[T]``, ``tuple[A, B]``, ``tuple[T, ...]``, ``dict[str, T]``, ``Literal[...]``, ``Enum``
subclasses, ``Annotated[X, ...]``, and (json format only) ``typing.Any``.

Example:
  >>> import dataclasses, re
  >>> from automata_compile import dataclass_to_regex, parse
  >>> @dataclasses.dataclass
  ... class Person:
  ...     name: str
  ...     age: int = 0
  >>> rx = dataclass_to_regex(Person, format="call")
  >>> bool(re.fullmatch(rx, 'Person(name="Ada", age=36)')), bool(re.fullmatch(rx, 'Person(age=36)'))
  (True, False)
  >>> parse(Person, 'Person(name="Ada", age=36)')
  Person(name='Ada', age=36)
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import json
import math
import sys
import types
import typing
from typing import Any, Literal, Union

from automata_compile._errors import DataclassParseError, InvalidSchemaError, UnsupportedSchemaError
from automata_compile.automata._ir import NEVER
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema import _strings

_FORMATS = ("json", "call")


__all__ = ["DataclassParseError", "compile_dataclass", "dataclass_to_regex", "parse"]


# ------------------------------------------------------------------------------------------
# type introspection
# ------------------------------------------------------------------------------------------


def _fields(cls) -> list[tuple[dataclasses.Field, Any]]:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise InvalidSchemaError(f"{cls!r} is not a dataclass type", pointer="")
    module = sys.modules.get(cls.__module__)
    globalns = dict(vars(module)) if module else {}
    try:
        hints = typing.get_type_hints(
            cls, globalns=globalns, localns={cls.__name__: cls}, include_extras=True
        )
    except Exception as e:  # noqa: BLE001 - any failure to resolve annotations
        raise InvalidSchemaError(
            f"cannot resolve the field types of {cls.__qualname__}: {e}", pointer=""
        ) from None
    return [(f, hints.get(f.name, Any)) for f in dataclasses.fields(cls) if f.init]


def _has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _strip(tp):
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _union_args(tp):
    tp = _strip(tp)
    origin = typing.get_origin(tp)
    if origin is Union or (hasattr(types, "UnionType") and isinstance(tp, types.UnionType)):
        return typing.get_args(tp)
    return None


def _literal_values(tp, ptr: str) -> list:
    out = []
    for v in typing.get_args(tp):
        if isinstance(v, enum.Enum):
            v = v.value
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise UnsupportedSchemaError(
                f"{'#' + ptr}: Literal value {v!r} is not a JSON scalar",
                keyword="Literal",
                pointer=ptr,
            )
        out.append(v)
    return out


def _enum_values(tp, ptr: str) -> list:
    vals = [m.value for m in tp]
    for v in vals:
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise UnsupportedSchemaError(
                f"{'#' + ptr}: enum {tp.__name__} value {v!r} is not a JSON scalar",
                keyword="Enum",
                pointer=ptr,
            )
    return vals


def _unsupported(tp, ptr: str, fmt: str):
    raise UnsupportedSchemaError(
        f"{'#' + ptr}: field type {tp!r} is not supported in format {fmt!r} (supported: bool, int, float, str, None, "
        "dataclasses, Optional/Union, list, tuple, dict[str, T], Literal, Enum)",
        keyword=getattr(tp, "__name__", str(tp)),
        pointer=ptr,
    )


# ------------------------------------------------------------------------------------------
# json format: dataclass -> JSON Schema
# ------------------------------------------------------------------------------------------


def dataclass_schema(cls) -> dict:
    """The JSON Schema (2020-12) of ``json.dumps(dataclasses.asdict(x))`` for instances x."""
    defs: dict[str, dict] = {}
    names: dict[type, str] = {}

    def ref(c) -> dict:
        if c not in names:
            name = c.__name__
            while name in defs:
                name += "_"
            names[c] = name
            defs[name] = {}
            defs[name] = obj(c, f"/$defs/{name}")
        return {"$ref": f"#/$defs/{names[c]}"}

    def obj(c, ptr) -> dict:
        props, required = {}, []
        for f, tp in _fields(c):
            props[f.name] = conv(tp, f"{ptr}/properties/{f.name}")
            if not _has_default(f):
                required.append(f.name)
        out = {"type": "object", "properties": props, "additionalProperties": False}
        if required:
            out["required"] = required
        return out

    def conv(tp, ptr) -> dict:
        tp = _strip(tp)
        if tp is Any:
            return {}
        if tp is type(None) or tp is None:
            return {"type": "null"}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"type": "number"}
        if tp is str:
            return {"type": "string"}
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return ref(tp)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return {"enum": _enum_values(tp, ptr)}
        args = _union_args(tp)
        if args is not None:
            return {"anyOf": [conv(a, f"{ptr}/anyOf/{i}") for i, a in enumerate(args)]}
        origin, targs = typing.get_origin(tp), typing.get_args(tp)
        if origin is Literal:
            return {"enum": _literal_values(tp, ptr)}
        if origin in (list, typing.List):  # noqa: UP006
            return {"type": "array", "items": conv(targs[0] if targs else Any, f"{ptr}/items")}
        if origin in (tuple, typing.Tuple):  # noqa: UP006
            if len(targs) == 2 and targs[1] is Ellipsis:
                return {"type": "array", "items": conv(targs[0], f"{ptr}/items")}
            if targs == ((),) or not targs:
                return {"type": "array", "maxItems": 0}
            items = [conv(a, f"{ptr}/prefixItems/{i}") for i, a in enumerate(targs)]
            return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items)}
        if origin in (dict, typing.Dict):  # noqa: UP006
            if targs and _strip(targs[0]) is not str:
                _unsupported(tp, ptr, "json")
            return {
                "type": "object",
                "additionalProperties": conv(
                    targs[1] if targs else Any, f"{ptr}/additionalProperties"
                ),
            }
        _unsupported(tp, ptr, "json")

    root = ref(cls)
    return {"$defs": defs, **root}


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
            for f, tp in _fields(cls):
                value = self.value(tp, f"{ptr}/{f.name}")
                items.append((sf.seq(sf.lit(f.name), sf.char("="), value), not _has_default(f)))
        finally:
            self.stack.pop()
        return sf.seq(sf.lit(cls.__name__), sf.char("("), _joined(items, self.comma), sf.char(")"))

    def value(self, tp, ptr: str):
        tp = _strip(tp)
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
            return sf.alt(*(_py_literal(v) for v in _enum_values(tp, ptr)))
        args = _union_args(tp)
        if args is not None:
            return sf.alt(*(self.value(a, ptr) for a in args))
        origin, targs = typing.get_origin(tp), typing.get_args(tp)
        if origin is Literal:
            return sf.alt(*(_py_literal(v) for v in _literal_values(tp, ptr)))
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
            if targs and _strip(targs[0]) is not str:
                _unsupported(tp, ptr, "call")
            v = self.value(targs[1] if targs else Any, f"{ptr}/*")
            item = sf.seq(_py_string(sf.ANY_STRING), self.colon, v)
            return sf.seq(
                sf.char("{"), sf.opt(sf.seq(item, sf.star(sf.seq(self.comma, item)))), sf.char("}")
            )
        _unsupported(tp, ptr, "call")


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


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------


def _check_format(format: str):
    if format not in _FORMATS:
        raise ValueError(f"format must be 'json' or 'call', got {format!r}")


def _dataclass_ir(cls, format: str, options: dict):
    _check_format(format)
    if format == "json":
        from automata_compile.frontends.json_schema import _api

        # key order = field order; a dataclass compiles to a DFA (recursive fields and free
        # values are unrolled)
        options = {"property_order": "declared", "recursion": "unroll", **options}
        return _api.schema_ir(_api._load(dataclass_schema(cls)), _api._options(options))
    unknown = set(options) - {"max_recursion_depth", "whitespace"}
    if unknown:
        raise TypeError(f"unexpected options for format='call': {', '.join(sorted(unknown))}")
    builder = _CallBuilder(
        options.get("max_recursion_depth", 3), options.get("whitespace", "default")
    )
    node = builder.dataclass(cls, "")
    if sf.is_never(node):
        raise InvalidSchemaError(
            f"{cls.__qualname__} has no finite instance within max_recursion_depth", pointer=""
        )
    return node


def dataclass_to_regex(cls, format: str = "json", **options) -> str:
    """The regex (Python `re` syntax, full match) of a dataclass's instances.

    Args:
      cls: a dataclass type (fields may nest other dataclasses).
      format: ``"json"`` (``json.dumps(asdict(x))``) or ``"call"`` (``Cls(field=value, ...)``).
      **options: for ``"json"``, the options of `json_schema_to_regex` (``recursion``
        defaults to ``"unroll"``: a dataclass compiles to a DFA); for ``"call"``,
        ``max_recursion_depth`` (default 3) and ``whitespace`` (``"compact"`` forbids the
        space after commas).

    Raises:
      InvalidSchemaError: ``cls`` is not a dataclass, or its annotations do not resolve.
      UnsupportedSchemaError: a field type has no representation in the format, or (as
        for `json_schema_to_regex`) the language needs an automaton node.
    """
    if format == "json":
        from automata_compile.frontends.json_schema import json_schema_to_regex

        _check_format(format)
        options = {"property_order": "declared", "recursion": "unroll", **options}
        return json_schema_to_regex(dataclass_schema(cls), **options)
    return sf.to_regex(_dataclass_ir(cls, format, options))


def compile_dataclass(
    cls,
    vocab,
    format: str = "json",
    *,
    max_states: int | None = None,
    timeout_s: float | None = None,
    **options,
):
    """Compiles a dataclass's instance language (see `dataclass_to_regex`) to a `TokenDFA`;
    the IR goes to the byte automaton directly. ``max_states`` and ``timeout_s`` are the
    compile budgets of `compile_regex`."""
    from automata_compile._compile import compile_ir

    node = _dataclass_ir(cls, format, options)
    spec = {"class": f"{cls.__module__}.{cls.__qualname__}", "format": format}
    if format == "json":
        spec["schema"] = dataclass_schema(cls)
    return compile_ir(
        node,
        vocab,
        max_states=max_states,
        spec_kind="dataclass",
        spec=json.dumps(spec),
        what=f"dataclass {cls.__qualname__}",
        timeout_s=timeout_s,
    )


def parse(cls, text: str, format: str | None = None):
    """Builds a ``cls`` instance from text in the json or call format (auto-detected when
    ``format`` is None: text starting with ``{`` is json). Never evaluates code: the call
    format is read with `ast.parse` and `ast.literal_eval`.

    Raises:
      DataclassParseError: the text is not an instance in that format.
    """
    if format is None:
        format = "json" if text.lstrip().startswith("{") else "call"
    _check_format(format)
    if format == "json":
        try:
            data = json.loads(text)
        except ValueError as e:
            raise DataclassParseError(f"not valid JSON: {e}") from None
        return _build(cls, data, "")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise DataclassParseError(
            f"not a Python expression: {e.msg} at offset {e.offset}"
        ) from None
    return _from_ast(cls, tree.body, "")


def _build(tp, value, ptr: str):
    tp = _strip(tp)
    where = "#" + ptr
    if tp is Any:
        return value
    if tp is type(None) or tp is None:
        if value is not None:
            raise DataclassParseError(f"{where}: expected None, got {value!r}")
        return None
    if tp is bool:
        if not isinstance(value, bool):
            raise DataclassParseError(f"{where}: expected a bool, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataclassParseError(f"{where}: expected an int, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataclassParseError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise DataclassParseError(f"{where}: expected a str, got {value!r}")
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise DataclassParseError(
                f"{where}: expected an object for {tp.__name__}, got {value!r}"
            )
        fields = dict((f.name, t) for f, t in _fields(tp))
        unknown = set(value) - set(fields)
        if unknown:
            raise DataclassParseError(
                f"{where}: unknown fields for {tp.__name__}: {', '.join(sorted(unknown))}"
            )
        kwargs = {k: _build(fields[k], v, f"{ptr}/{k}") for k, v in value.items()}
        try:
            return tp(**kwargs)
        except TypeError as e:
            raise DataclassParseError(f"{where}: {e}") from None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise DataclassParseError(
                f"{where}: {value!r} is not a value of {tp.__name__}"
            ) from None
    args = _union_args(tp)
    if args is not None:
        errors = []
        for a in args:
            try:
                return _build(a, value, ptr)
            except DataclassParseError as e:
                errors.append(str(e))
        raise DataclassParseError(
            f"{where}: {value!r} matches no member of {tp!r} ({'; '.join(errors)})"
        )
    origin, targs = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        allowed = _literal_values(tp, ptr)
        for a, raw in zip(allowed, typing.get_args(tp), strict=True):
            if value == a and type(value) is type(a):
                return raw
        raise DataclassParseError(f"{where}: {value!r} is not one of {allowed!r}")
    if origin in (list, typing.List):  # noqa: UP006
        if not isinstance(value, (list, tuple)):
            raise DataclassParseError(f"{where}: expected a list, got {value!r}")
        item = targs[0] if targs else Any
        return [_build(item, v, f"{ptr}/{i}") for i, v in enumerate(value)]
    if origin in (tuple, typing.Tuple):  # noqa: UP006
        if not isinstance(value, (list, tuple)):
            raise DataclassParseError(f"{where}: expected a tuple, got {value!r}")
        if len(targs) == 2 and targs[1] is Ellipsis:
            return tuple(_build(targs[0], v, f"{ptr}/{i}") for i, v in enumerate(value))
        types_ = () if targs == ((),) else targs
        if len(value) != len(types_):
            raise DataclassParseError(f"{where}: expected {len(types_)} items, got {len(value)}")
        return tuple(
            _build(t, v, f"{ptr}/{i}") for i, (t, v) in enumerate(zip(types_, value, strict=True))
        )
    if origin in (dict, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            raise DataclassParseError(f"{where}: expected a dict, got {value!r}")
        vt = targs[1] if targs else Any
        return {k: _build(vt, v, f"{ptr}/{k}") for k, v in value.items()}
    raise DataclassParseError(f"{where}: unsupported field type {tp!r}")


def _from_ast(tp, node: ast.AST, ptr: str):
    """Reads a call-format value: calls of dataclasses are rebuilt, literals go through
    `ast.literal_eval` (never `eval`)."""
    tp = _strip(tp)
    where = "#" + ptr
    if isinstance(node, ast.Call):
        candidates = [tp] if _union_args(tp) is None else list(_union_args(tp))
        for c in candidates:
            c = _strip(c)
            if (
                isinstance(c, type)
                and dataclasses.is_dataclass(c)
                and isinstance(node.func, ast.Name)
                and node.func.id == c.__name__
            ):
                if node.args:
                    raise DataclassParseError(
                        f"{where}: {c.__name__}(...) takes keyword arguments only"
                    )
                fields = dict((f.name, t) for f, t in _fields(c))
                kwargs = {}
                for kw in node.keywords:
                    if kw.arg is None or kw.arg not in fields:
                        raise DataclassParseError(
                            f"{where}: unknown argument {kw.arg!r} for {c.__name__}"
                        )
                    kwargs[kw.arg] = _from_ast(fields[kw.arg], kw.value, f"{ptr}/{kw.arg}")
                try:
                    return c(**kwargs)
                except TypeError as e:
                    raise DataclassParseError(f"{where}: {e}") from None
        name = node.func.id if isinstance(node.func, ast.Name) else ast.dump(node.func)
        raise DataclassParseError(f"{where}: a call of {name} is not a value of {tp!r}")
    origin, targs = typing.get_origin(tp), typing.get_args(tp)
    if isinstance(node, (ast.List, ast.Tuple)) and origin in (
        list,
        tuple,
        list,
        tuple,
    ):  # noqa: UP006
        if origin in (list, typing.List):  # noqa: UP006
            item = targs[0] if targs else Any
            return [_from_ast(item, x, f"{ptr}/{i}") for i, x in enumerate(node.elts)]
        if len(targs) == 2 and targs[1] is Ellipsis:
            return tuple(_from_ast(targs[0], x, f"{ptr}/{i}") for i, x in enumerate(node.elts))
        types_ = () if targs == ((),) else targs
        if len(node.elts) != len(types_):
            raise DataclassParseError(
                f"{where}: expected {len(types_)} items, got {len(node.elts)}"
            )
        return tuple(
            _from_ast(t, x, f"{ptr}/{i}")
            for i, (t, x) in enumerate(zip(types_, node.elts, strict=True))
        )
    if isinstance(node, ast.Dict) and origin in (dict, typing.Dict):  # noqa: UP006
        vt = targs[1] if targs else Any
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise DataclassParseError(f"{where}: ** in a dict literal is not a value")
            key = _literal(k, where)
            out[key] = _from_ast(vt, v, f"{ptr}/{key}")
        return _build(tp, out, ptr)
    if _union_args(tp) is not None and isinstance(node, (ast.List, ast.Tuple, ast.Dict)):
        errors = []
        for a in _union_args(tp):
            try:
                return _from_ast(a, node, ptr)
            except DataclassParseError as e:
                errors.append(str(e))
        raise DataclassParseError(f"{where}: matches no member of {tp!r} ({'; '.join(errors)})")
    return _build(tp, _literal(node, where), ptr)


def _literal(node: ast.AST, where: str):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as e:
        raise DataclassParseError(f"{where}: not a Python literal ({e})") from None
