"""The compiler's layers depend one way, and folders meet through public names only.

Read from the source with `ast` (nothing is imported): ``automata/`` (the core) imports no
other layer; ``frontends/`` imports neither ``tokens/`` nor ``pipeline/``; ``tokens/``
imports neither ``frontends/`` nor ``pipeline/``; and no module imports an underscored
module of another folder (``from automata_compile.automata import _fsa`` from
``tokens/``), except the errors every layer shares (``automata_compile._errors``), the lazy-name helper (``_lazy``), the
allocator of large tables (``_alloc``) and the concatenated ranges (``_ranges``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "automata_compile"
SOURCE = Path(__file__).resolve().parents[2] / "compile" / PACKAGE

# layer -> layers it may not import
FORBIDDEN = {
    "automata": {"frontends", "tokens", "pipeline"},
    "frontends": {"tokens", "pipeline"},
    "tokens": {"frontends", "pipeline"},
}
SHARED = {
    f"{PACKAGE}._errors",
    f"{PACKAGE}._lazy",
    f"{PACKAGE}._alloc",
    f"{PACKAGE}._ranges",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _folder(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) for every import of our package, a ``from X import name`` giving
    both ``X`` and ``X.name`` (the name may be a submodule)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return [(line, m) for line, m in out if m == PACKAGE or m.startswith(PACKAGE + ".")]


def violations(module: str, is_package: bool, source: str) -> list[str]:
    """The rules broken by ``source``, the text of ``module``."""
    found = []
    layer = module.split(".")[1] if "." in module else None
    folder = _folder(module, is_package)
    for line, target in _imported(ast.parse(source)):
        parts = target.split(".")
        if layer in FORBIDDEN and len(parts) > 1 and parts[1] in FORBIDDEN[layer]:
            found.append(f"{module}:{line}: the {layer} layer imports {target}")
        underscored = [
            i for i, p in enumerate(parts) if p.startswith("_") and not p.startswith("__")
        ]
        if underscored and ".".join(parts[: underscored[0] + 1]) not in SHARED:
            owner = ".".join(parts[: underscored[0]])
            if owner != folder:
                found.append(f"{module}:{line}: imports {target}, private to {owner}")
    return found


def _modules():
    for path in sorted(SOURCE.rglob("*.py")):
        yield _module_name(path), path.name == "__init__.py", path


def test_the_source_is_found():
    names = {m for m, _, _ in _modules()}
    assert {f"{PACKAGE}.automata", f"{PACKAGE}.frontends", f"{PACKAGE}.tokens"} <= names
    assert f"{PACKAGE}.pipeline" in names


@pytest.mark.parametrize("module, is_package, path", list(_modules()), ids=lambda x: str(x))
def test_layers_and_public_names(module, is_package, path):
    assert violations(module, is_package, path.read_text("utf-8")) == []


@pytest.mark.parametrize(
    "module, is_package, source, expected",
    [
        (
            "automata_compile.tokens._x",
            False,
            "from automata_compile.frontends import regex_ir",
            "tokens layer",
        ),
        (
            "automata_compile.frontends._x",
            False,
            "import automata_compile.tokens",
            "frontends layer",
        ),
        (
            "automata_compile.frontends.grammar._x",
            False,
            "from automata_compile.pipeline import compile_ir",
            "frontends layer",
        ),
        (
            "automata_compile.automata._x",
            False,
            "from automata_compile.tokens import TokenDFA",
            "automata layer",
        ),
        (
            "automata_compile.automata",
            True,
            "from automata_compile.frontends import regex_ir",
            "automata layer",
        ),
        (
            "automata_compile.tokens._x",
            False,
            "from automata_compile.automata import _fsa",
            "private to automata_compile.automata",
        ),
        (
            "automata_compile.pipeline._x",
            False,
            "from automata_compile.automata._fsa import limits",
            "private to",
        ),
        (
            "automata_compile.frontends._x",
            False,
            "from automata_compile.frontends.json_schema._api import _load",
            "private to",
        ),
        (
            "automata_compile.frontends.json_schema._x",
            False,
            "from automata_compile.frontends import _regex",
            "private to automata_compile.frontends",
        ),
    ],
)
def test_the_checker_finds_violations(module, is_package, source, expected):
    found = violations(module, is_package, source)
    assert found and expected in found[0], found


@pytest.mark.parametrize(
    "module, is_package, source",
    [
        ("automata_compile.tokens._x", False, "from automata_compile.automata import limits"),
        (
            "automata_compile.tokens._x",
            False,
            "from automata_compile.tokens._rows import unique_rows",
        ),
        ("automata_compile.tokens", True, "from automata_compile.tokens import _gguf"),
        (
            "automata_compile.frontends._x",
            False,
            "from automata_compile._errors import InvalidPatternError",
        ),
        ("automata_compile.pipeline._x", False, "from automata_compile.frontends import regex_ir"),
        ("automata_compile.pipeline._x", False, "from automata_compile.tokens import token_pda"),
    ],
)
def test_the_checker_allows_public_names(module, is_package, source):
    assert violations(module, is_package, source) == []
