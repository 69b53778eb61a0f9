"""Type introspection of dataclass fields: annotations, unions, literals, enums."""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from typing import Any, Union

from automata_compile._errors import InvalidSchemaError, UnsupportedSchemaError

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
