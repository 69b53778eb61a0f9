"""The core: the IR, code-point sets, the automata built from it (UTF-8 byte DFAs, character
DFAs, the byte pushdown automaton of a grammar), the grammar IR, and the compile limits
(state budgets and deadlines, `limits`).

Depends on no other layer of `automata_compile` (front ends and the token level build on
it). Other layers use the names below; the module namespaces (``fsa``, ``byte_dfa``,
``char_dfa``, ``charsets``, ``dfa_ops``) are exported for callers that use many of their
functions.
"""

from automata_compile.automata import _byte_dfa as byte_dfa
from automata_compile.automata import _char_dfa as char_dfa
from automata_compile.automata import _charsets as charsets
from automata_compile.automata import _dfa_ops as dfa_ops
from automata_compile.automata import _fsa as fsa
from automata_compile.automata._byte_dfa import NUM_BYTES, ByteDFA, build_byte_dfa, cached_byte_dfa
from automata_compile.automata._byte_pda import CALL, DEAD, RETURN, SHIFT, BytePDA, build_byte_pda
from automata_compile.automata._fsa import check_time, limits
from automata_compile.automata._grammar_ir import GrammarIR
from automata_compile.automata._ir import (
    EMPTY,
    NEVER,
    Alt,
    Automaton,
    Chars,
    Event,
    Repeat,
    Seq,
    Terminal,
    children,
    distinct_nodes,
    fingerprint,
    map_terminals,
)
from automata_compile.automata._kmp import kmp_moves

__all__ = [
    "CALL",
    "DEAD",
    "EMPTY",
    "Event",
    "NEVER",
    "NUM_BYTES",
    "RETURN",
    "SHIFT",
    "Alt",
    "Automaton",
    "ByteDFA",
    "BytePDA",
    "Chars",
    "GrammarIR",
    "Repeat",
    "Seq",
    "Terminal",
    "build_byte_dfa",
    "byte_dfa",
    "build_byte_pda",
    "cached_byte_dfa",
    "char_dfa",
    "charsets",
    "check_time",
    "children",
    "distinct_nodes",
    "map_terminals",
    "dfa_ops",
    "fingerprint",
    "fsa",
    "kmp_moves",
    "limits",
]
