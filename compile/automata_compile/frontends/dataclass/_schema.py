"""The json format: a dataclass → its JSON Schema (`dataclass_schema`)."""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, Literal

from automata_compile.frontends.dataclass._introspect import (
    _enum_values,
    _fields,
    _has_default,
    _literal_values,
    _strip,
    _union_args,
    _unsupported,
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
