"""Grammar front end: Lark EBNF → per-rule IR (`_lark_reader`) → deterministic byte-level
pushdown automaton (`automata._byte_pda`); `_compile.compile_grammar` composes it with the vocabulary
(`tokens._pda_compose`) into a `TokenDFA` with the PDA block.

Calls into the regex / automata stages are in two places only, for re-pointing after a
refactor: `_lark_reader._Reader.regex_ir` (``_extensions.expand`` + ``_regex.parse``) and
`automata._byte_pda.build_byte_pda` (``_byte_dfa.cached_byte_dfa(ir, num_terminals, max_states=...)``,
using its ``trans`` / ``accepting`` / ``start``; symbol ``256 + j`` is a call of rule j).
"""
