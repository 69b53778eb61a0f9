"""automata_compile: the offline compiler of automata_jax (no jax here).

Turns a regex, a JSON Schema or a dataclass into a `TokenDFA` for one
tokenizer's vocabulary, and a Lark grammar into a `TokenDFA` with a stack block
(a token-level pushdown automaton, `compile_grammar`), and saves either as a
versioned ``.npz``.

Example:
  >>> import automata_compile as ac
  >>> vocab = ac.Vocabulary.from_bytes([b"a", b"b", b"ab", b"<eos>"], eos_ids=[3], special_ids=[3])
  >>> dfa = ac.compile_regex(r"(ab)+", vocab)
  >>> bool(dfa.accepts([0, 1, 2]))
  True

Layers (one way, checked by tests/compile/test_layers.py): `automata` (the core: IR,
automata, grammar IR, compile limits) imports no other layer; `frontends` (spec → IR or
grammar IR) and `tokens` (vocabularies, composition, the tables format) import `automata`
only, never each other; `pipeline` (every ``compile_*`` entry point) is the only package
that knows all three.

Names are imported lazily so that the runtime can import the tables format
(`TokenDFA`) and the errors without pulling in the compiler's dependencies.
"""

from __future__ import annotations

from automata_compile._lazy import lazy_exports

_EXPORTS = {
    # errors
    "AutomataError": "_errors",
    "InvalidPatternError": "_errors",
    "UnsupportedPatternError": "_errors",
    "EmptyLanguageError": "_errors",
    "StateBudgetExceededError": "_errors",
    "CompileTimeoutError": "_errors",
    "UnsupportedSchemaError": "_errors",
    "InvalidSchemaError": "_errors",
    "OrderFallbackWarning": "_errors",
    "SubsetWarning": "_errors",
    "TokenSubsetWarning": "_errors",
    "VocabularyError": "_errors",
    "GGUFError": "_errors",
    "IncompatibleVocabularyError": "_errors",
    "TableFormatError": "_errors",
    "InvalidGrammarError": "_errors",
    "UnsupportedGrammarError": "_errors",
    "GrammarConflictError": "_errors",
    "LeftRecursionError": "_errors",
    # tables
    "TokenDFA": "tokens",
    # vocabularies
    "Vocabulary": "tokens",
    "read_gguf_header": "tokens",
    "canonical_bpe": "tokens",
    "CanonicalError": "tokens",
    # compilers
    "compile_regex": "pipeline",
    "json_schema_to_regex": "frontends.json_schema",
    "compile_json_schema": "pipeline",
    "compile_json_schema_bitset": "pipeline._bitset",
    "BitsetTables": "tokens",
    "load_bitset_tables": "tokens",
    "save_bitset_tables": "tokens",
    "BitsetIneligible": "frontends.json_schema",
    "compile_dataclass": "pipeline",
    "dataclass_to_regex": "frontends.dataclass",
    "parse": "frontends.dataclass",
    "compile_grammar": "pipeline",
    "builtin_grammar": "pipeline",
    "compile_tool_calls": "pipeline",
    "parse_tool_calls": "frontends.tool_calls",
    "ToolCall": "frontends.tool_calls",
    "ToolCallFormat": "frontends.tool_calls",
    "TOOL_CALL_FORMATS": "frontends.tool_calls",
    "InvalidToolError": "frontends.tool_calls",
    "ToolCallParseError": "frontends.tool_calls",
    # used by the runtime (automata_jax)
    "FORMAT_VERSION": "tokens",
    "cached_tables": "pipeline._cache",
    "error_line": "_cli",
    "plain_warnings": "_cli",
    "progress": "_cli",
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
