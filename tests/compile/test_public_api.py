"""The public surface of `automata_compile`, pinned, and its import-time dependencies."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

import automata_compile

EXPECTED_ALL = [
    "AutomataError",
    "BitsetIneligible",
    "BitsetTables",
    "CanonicalError",
    "CompileTimeoutError",
    "EmptyLanguageError",
    "FORMAT_VERSION",
    "GGUFError",
    "GrammarConflictError",
    "IncompatibleVocabularyError",
    "InvalidGrammarError",
    "InvalidPatternError",
    "InvalidSchemaError",
    "InvalidToolError",
    "LeftRecursionError",
    "OrderFallbackWarning",
    "StateBudgetExceededError",
    "SubsetWarning",
    "TOOL_CALL_FORMATS",
    "TableFormatError",
    "TokenDFA",
    "TokenSubsetWarning",
    "ToolCall",
    "ToolCallFormat",
    "ToolCallParseError",
    "UnsupportedGrammarError",
    "UnsupportedPatternError",
    "UnsupportedSchemaError",
    "Vocabulary",
    "VocabularyError",
    "builtin_grammar",
    "cached_tables",
    "canonical_bpe",
    "compile_dataclass",
    "compile_grammar",
    "compile_json_schema",
    "compile_json_schema_bitset",
    "compile_regex",
    "compile_tool_calls",
    "dataclass_to_regex",
    "error_line",
    "json_schema_to_regex",
    "load_bitset_tables",
    "parse",
    "parse_tool_calls",
    "plain_warnings",
    "progress",
    "read_gguf_header",
    "save_bitset_tables",
]

FORBIDDEN = ("jax", "jaxlib", "flax", "interegular")


def test_all_is_pinned():
    assert automata_compile.__all__ == EXPECTED_ALL
    assert automata_compile.__version__
    assert set(EXPECTED_ALL) <= set(dir(automata_compile))


@pytest.mark.parametrize("name", EXPECTED_ALL)
def test_every_public_name_resolves(name):
    module = automata_compile._EXPORTS[name]
    if importlib.util.find_spec(f"automata_compile.{module}") is None:  # pragma: no cover
        pytest.skip(f"automata_compile.{module} is not written yet")
    value = getattr(automata_compile, name)
    assert value is getattr(importlib.import_module(f"automata_compile.{module}"), name)
    assert getattr(value, "__doc__", None), f"{name} has no docstring"


def test_unknown_attribute():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        automata_compile.nope  # noqa: B018


def test_error_hierarchy():
    ac = automata_compile
    for name in EXPECTED_ALL:
        if name.endswith("Error"):
            assert issubclass(getattr(ac, name), ac.AutomataError), name
    for name in (
        "InvalidPatternError",
        "UnsupportedPatternError",
        "EmptyLanguageError",
        "GGUFError",
        "UnsupportedSchemaError",
        "InvalidSchemaError",
        "VocabularyError",
        "IncompatibleVocabularyError",
        "TableFormatError",
    ):
        assert issubclass(getattr(ac, name), ValueError), name


def _modules_after(code: str) -> list[str]:
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import json, sys
        print(json.dumps(sorted(sys.modules)))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def _top_level(modules):
    return {m.split(".")[0] for m in modules}


def test_import_does_not_pull_in_jax_or_the_compiler():
    modules = _modules_after("import automata_compile")
    assert not _top_level(modules) & set(FORBIDDEN)
    # Names load lazily: nothing of the compiler itself yet, only the lazy-name helper.
    assert [m for m in modules if m.startswith("automata_compile.")] == ["automata_compile._lazy"]


def test_tables_format_import_is_light():
    modules = _modules_after("from automata_compile import TokenDFA, TableFormatError")
    assert not _top_level(modules) & set(FORBIDDEN)
    ours = {m for m in modules if m.startswith("automata_compile.")}
    # The `tokens` package's __init__ loads its names lazily too.
    assert ours == {
        "automata_compile._lazy",
        "automata_compile.tokens",
        "automata_compile.tokens._token_dfa",
        "automata_compile._errors",
    }


def test_compiling_does_not_import_jax():
    modules = _modules_after(
        """
        import automata_compile as ac
        vocab = ac.Vocabulary.from_bytes([b"a", b"b", None], eos_ids=[2])
        ac.compile_regex("(a|b)+", vocab)
        """
    )
    assert "automata_compile.tokens._compose" in modules
    assert not _top_level(modules) & set(FORBIDDEN)
