"""The grammar IR: named rules, each an IR tree in which ``Terminal(j)`` calls rule j.

Front ends build it (the Lark reader, JSON Schema's rules, tool calls); the byte PDA
(`_byte_pda.build_byte_pda`) turns it into a byte-level pushdown automaton.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class GrammarIR:
    """Attributes:
    names: rule names; index = the rule's call id. Rule 0 is the synthetic root
      (``IGNORED* start``).
    bodies: one IR tree per rule; ``Terminal(j)`` is a call of rule j.
    """

    names: tuple[str, ...]
    bodies: tuple
