"""A dataclass's instance language in either format: its IR (`dataclass_ir`) and its regex
(`dataclass_to_regex`)."""

from __future__ import annotations

from automata_compile._errors import InvalidSchemaError
from automata_compile.frontends.dataclass._call_format import _CallBuilder
from automata_compile.frontends.dataclass._schema import dataclass_schema
from automata_compile.frontends.json_schema import content as sf
from automata_compile.frontends.json_schema import (
    json_schema_to_regex,
    load_schema,
    parse_options,
    schema_ir,
)

_FORMATS = ("json", "call")


def _check_format(format: str):
    if format not in _FORMATS:
        raise ValueError(f"format must be 'json' or 'call', got {format!r}")


def dataclass_ir(cls, format: str, options: dict):
    """The IR of ``cls``'s instances in ``format`` (``options`` as in `dataclass_to_regex`)."""
    _check_format(format)
    if format == "json":
        # key order = field order; a dataclass compiles to a DFA (recursive fields and free
        # values are unrolled)
        options = {"property_order": "declared", "recursion": "unroll", **options}
        return schema_ir(load_schema(dataclass_schema(cls)), parse_options(options))
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
        _check_format(format)
        options = {"property_order": "declared", "recursion": "unroll", **options}
        return json_schema_to_regex(dataclass_schema(cls), **options)
    return sf.to_regex(dataclass_ir(cls, format, options))
