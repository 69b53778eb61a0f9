"""Lazily loaded package names: a package lists where each public name lives, and the module
is imported on first use (so that importing `automata_compile.TokenDFA` loads the table
format only, not the compiler)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_exports(
    package: str, exports: dict[str, str], aliases: dict[str, str] | None = None
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module-level ``__getattr__`` and ``__dir__`` of ``package``.

    ``exports`` maps a public name to the submodule (relative to ``package``) that defines
    it; ``aliases`` maps a public name to its name in that submodule where they differ.
    A loaded name is cached in the package's namespace.
    """
    aliases = aliases or {}

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), aliases.get(name, name))
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
