"""Grammar front end: Lark EBNF → byte-level PDA (`_lark_reader`, `_byte_pda`)."""
