"""The token level: vocabularies, their byte trie, composition into a `TokenDFA`, and its artifact.

Depends on `automata_compile.automata` only. Names load lazily (as in the top-level
package), so that importing the tables format (`TokenDFA`) stays light for the runtime.
"""

from __future__ import annotations

from automata_compile._lazy import lazy_exports

_EXPORTS = {
    "BitsetTables": "_bitset_compose",
    "BitsetPDATables": "_bitset_pda",
    "compose_bitset_pda": "_bitset_pda",
    "reference_pda_advance": "_bitset_pda",
    "reference_pda_mask": "_bitset_pda",
    "EventConflict": "_bitset_compose",
    "compose_bitset": "_bitset_compose",
    "minimize_bitset": "_bitset_compose",
    "reference_advance": "_bitset_compose",
    "reference_mask": "_bitset_compose",
    "load_bitset_tables": "_bitset_file",
    "with_forced_runs": "_bitset_forced",
    "save_bitset_tables": "_bitset_file",
    "CONTEXTS_REFUSED": "_pda_walk",
    "CanonicalBPE": "_canonical",
    "CanonicalError": "_canonical",
    "DEFAULT_MAX_TOKENS": "_forced",
    "FORMAT_VERSION": "_token_dfa",
    "PdaRoot": "_unit_blocks",
    "PdaUnit": "_unit_blocks",
    "TokenDFA": "_token_dfa",
    "TokenTrie": "_token_trie",
    "UnitNotCacheable": "_unit_blocks",
    "canonical_bpe": "_canonical",
    "Vocabulary": "_vocabulary",
    "compose": "_compose",
    "forced_runs": "_forced",
    "read_gguf_header": "_gguf",
    "token_pda": "_pda_compose",
    "token_pda_units": "_unit_blocks",
    "trie_for": "_token_trie",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
