"""Front ends: each spec language (regex text and its extensions, Lark grammars, JSON Schema,
dataclasses, tool calls) → IR or grammar IR (`automata_compile.automata`). They never
import the token level or the pipeline (`automata_compile.pipeline` composes their output
with a vocabulary).

Subpackages: `grammar`, `json_schema`, `dataclass`, `tool_calls`; the regex front end is
here (`_regex`, `_extensions`, `_ext_automata`, `_pattern`). Names load lazily, so that
compiling a regex does not import the other front ends.
"""

from __future__ import annotations

from automata_compile._lazy import lazy_exports

_EXPORTS = {
    "PLACEHOLDER_PREFIX": "_regex",
    "expand_extensions": "_extensions",
    "parse_regex": "_regex",
    "regex_ir": "_pattern",
}
_ALIASES = {"expand_extensions": "expand", "parse_regex": "parse"}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _ALIASES)
