"""Front ends: each spec language (regex text and its extensions, Lark grammars, JSON Schema,
dataclasses, tool calls) → IR or grammar IR (`automata_compile.automata`). They never
import the token level or the pipeline (`automata_compile.pipeline` composes their output
with a vocabulary).

Subpackages: `grammar`, `json_schema`, `dataclass`, `tool_calls`; the regex front end is
here (`_regex`, `_extensions`, `_ext_automata`, `_pattern`). Names load lazily, so that
compiling a regex does not import the other front ends.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "PLACEHOLDER_PREFIX": "_regex",
    "expand_extensions": "_extensions",
    "parse_regex": "_regex",
    "regex_ir": "_pattern",
}
_ALIASES = {"expand_extensions": "expand", "parse_regex": "parse"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'automata_compile.frontends' has no attribute {name!r}")
    value = getattr(
        importlib.import_module(f"automata_compile.frontends.{module}"), _ALIASES.get(name, name)
    )
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
