"""Grammar front end: Lark EBNF → grammar IR (`automata.GrammarIR`, one IR tree per rule,
`_lark_reader`). The pipeline (`automata_compile.pipeline.compile_grammar`) turns it into a
deterministic byte-level pushdown automaton (`automata.build_byte_pda`) and composes that
with the vocabulary (`tokens.token_pda`) into a `TokenDFA` with the PDA block.

Calls into the regex / automata stages are in two places only, for re-pointing after a
refactor: `_lark_reader._Reader.regex_ir` (``frontends.expand_extensions`` +
``frontends.parse_regex``) and `automata._byte_pda.build_byte_pda`
(``_byte_dfa.cached_byte_dfa(ir, num_terminals, max_states=...)``, using its ``trans`` /
``accepting`` / ``start``; symbol ``256 + j`` is a call of rule j).
"""

from automata_compile.frontends.grammar._lark_reader import ROOT, read_grammar

__all__ = ["ROOT", "read_grammar"]
