"""`parse`: text in the json or call format → a dataclass instance (never evaluates code)."""

from __future__ import annotations

import ast
import dataclasses
import enum
import json
import typing
from typing import Any, Literal

from automata_compile._errors import DataclassParseError
from automata_compile.frontends.dataclass._introspect import (
    _fields,
    _literal_values,
    _strip,
    _union_args,
)
from automata_compile.frontends.dataclass._language import _check_format


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
