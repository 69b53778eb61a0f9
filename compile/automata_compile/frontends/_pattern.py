"""A regex with its extensions → IR: `regex_ir` (`_extensions.expand`, then `_regex.parse`)."""

from __future__ import annotations

from automata_compile.frontends import _extensions, _regex


def regex_ir(pattern: str, vocab):
    """``(ir, predicates, terminal_names)`` of ``pattern`` (Python ``re`` syntax with the
    extension groups of docs/regex.md) for ``vocab``; ``Terminal(k)`` in the IR uses
    ``predicates[k]``.

    Raises:
      InvalidPatternError, UnsupportedPatternError.
    """
    expanded = _extensions.expand(pattern, vocab)
    ir = _regex.parse(expanded.pattern, expanded.placeholders)
    return ir, expanded.predicates, expanded.terminal_names
