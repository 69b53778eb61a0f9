"""Koo et al.'s regex extensions (Table 1): named groups with special meaning.

`expand` rewrites each recognized extension group into a placeholder group
``(?P<__ext_N>)`` and returns the IR node that replaces it: a `Terminal` (a
token-level label with a predicate over the vocabulary) or an `Automaton`.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Expanded:
    """A pattern with its extension groups replaced by placeholders.

    Attributes:
      pattern: the rewritten pattern text.
      placeholders: placeholder group name → IR node.
      predicates: per terminal label k (symbol 256 + k), bool[V] over token ids, in precedence order.
      terminal_names: the label names, for the artifact's metadata.
    """

    pattern: str
    placeholders: dict
    predicates: tuple = ()
    terminal_names: tuple = ()


def expand(pattern: str, vocab) -> Expanded:
    """Recognizes extension groups in ``pattern`` (none are defined yet)."""
    del vocab
    return Expanded(pattern=pattern, placeholders={})
