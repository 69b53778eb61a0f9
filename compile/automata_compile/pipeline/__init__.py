"""The compile pipeline: every ``compile_*`` entry point, and the only package that knows all
three layers (spec → IR or grammar IR in `frontends`, → byte automaton in `automata`, →
token tables in `tokens`).

`_regex` (`compile_regex`, and `compile_ir` for any front end's IR), `_grammar`
(`compile_grammar`, `builtin_grammar`), `_json_schema` (`compile_json_schema` and the
DFA-then-PDA policy, `byte_language`), `_dataclass` (`compile_dataclass`), `_tool_calls`
(`compile_tool_calls`).
"""

from automata_compile.pipeline._dataclass import compile_dataclass
from automata_compile.pipeline._grammar import BUILTIN_GRAMMARS, builtin_grammar, compile_grammar
from automata_compile.pipeline._json_schema import (
    DEFAULT_TIMEOUT_S,
    byte_language,
    compile_json_schema,
)
from automata_compile.pipeline._regex import compile_ir, compile_regex
from automata_compile.pipeline._tool_calls import compile_tool_calls

__all__ = [
    "BUILTIN_GRAMMARS",
    "DEFAULT_TIMEOUT_S",
    "builtin_grammar",
    "byte_language",
    "compile_dataclass",
    "compile_grammar",
    "compile_ir",
    "compile_json_schema",
    "compile_regex",
    "compile_tool_calls",
]
