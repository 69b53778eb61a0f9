"""The runtime's imports (issue 21): `automata_compile`'s public names only, and no test
helpers (`automata_jax.testing`) in production code."""

from __future__ import annotations

import ast
from pathlib import Path

import automata_compile

PACKAGE = Path(__file__).resolve().parents[2] / "automata_jax"
TEST_HELPERS = {"testing.py", "_fake_model.py"}  # the test helpers themselves


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """``(line, module, name)`` for each import in ``path`` (name None for ``import m``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.lineno, node.module, alias.name) for alias in node.names]
    return found


def _runtime_files() -> list[Path]:
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 20 and PACKAGE / "extract" / "_job.py" in files
    return files


def compile_imports_past_the_surface(imports) -> list[str]:
    """Imports that reach past ``automata_compile``'s public surface: a submodule
    (``automata_compile.tokens._token_dfa``), or an underscored or unexported name."""
    bad = []
    for line, module, name in imports:
        if module != "automata_compile" and not module.startswith("automata_compile."):
            continue
        if module != "automata_compile" or (
            name is not None and (name.startswith("_") or name not in automata_compile.__all__)
        ):
            bad.append(f"{line}: {module}" + (f" import {name}" if name else ""))
    return bad


def test_the_checker_finds_private_imports():
    imports = [
        (1, "automata_compile.tokens._token_dfa", "TokenDFA"),
        (2, "automata_compile", "_cli"),
        (3, "automata_compile._errors", None),
        (4, "automata_compile", "TokenDFA"),
        (5, "automata_compile", None),
        (6, "automata_jax._tables", "bucket"),
    ]
    assert compile_imports_past_the_surface(imports) == [
        "1: automata_compile.tokens._token_dfa import TokenDFA",
        "2: automata_compile import _cli",
        "3: automata_compile._errors",
    ]


def test_runtime_imports_only_public_compile_names():
    bad = {
        str(path.relative_to(PACKAGE)): found
        for path in _runtime_files()
        if (found := compile_imports_past_the_surface(_imports(path)))
    }
    assert not bad, f"import these from automata_compile's __init__ (add to _EXPORTS): {bad}"


def test_production_code_never_imports_the_test_helpers():
    bad = {}
    for path in _runtime_files():
        if path.name in TEST_HELPERS and path.parent == PACKAGE:
            continue
        found = [
            line
            for line, module, name in _imports(path)
            if module == "automata_jax.testing" or (module == "automata_jax" and name == "testing")
        ]
        if found:
            bad[str(path.relative_to(PACKAGE))] = found
    assert not bad, f"use automata_jax._assets for bundled data and the demo model: {bad}"
