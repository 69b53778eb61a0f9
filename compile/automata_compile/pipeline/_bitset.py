"""`compile_json_schema_bitset`: the bitset any-order path (docs/any_order_bitset.md), opt-in.

An eligible schema's any-order objects are spelled as loops with bitset events; the byte DFA
then composes with the vocabulary into `tokens.BitsetTables`. A schema that is not eligible
(grammar rules, counted objects, an event conflict) raises `BitsetIneligible` with the reason:
compile it with `compile_json_schema` (the default path, unchanged by this module).
"""

from __future__ import annotations

import dataclasses

from automata_compile.automata import build_byte_dfa, limits
from automata_compile.frontends.json_schema import (
    BitsetEvents,
    BitsetIneligible,
    load_schema,
    parse_options,
    translate_grammar,
)
from automata_compile.tokens import DEFAULT_MAX_TOKENS, EventConflict, compose_bitset, trie_for
from automata_compile.tokens._bitset_forced import with_forced_runs


def bitset_byte_dfa(schema, *, max_states: int | None = None, **options):
    """(byte DFA with event columns, `BitsetEvents`) of an eligible schema.

    Raises:
      BitsetIneligible: the schema needs grammar rules, counts an object's properties, or
        has no object in any order.
    """
    schema = load_schema(schema)
    opts = parse_options(options)
    if opts.property_order == "declared":
        raise BitsetIneligible('property_order="declared" has no any-order object')
    events = BitsetEvents()
    opts = dataclasses.replace(opts, bitset=events)
    grammar, _ = translate_grammar(schema, opts, False)
    if len(grammar.bodies) > 1:
        raise BitsetIneligible(
            f"the schema needs grammar rules ({', '.join(grammar.names[1:])}): bits of objects "
            "inside rules would need the stack"
        )
    if not events.objects:
        raise BitsetIneligible("the schema has no object in any order")
    dfa = build_byte_dfa(
        grammar.bodies[0], len(events.events), max_states=max_states, what="the schema"
    )
    return dfa, events


def compile_json_schema_bitset(
    schema,
    vocab,
    *,
    max_states: int | None = None,
    timeout_s: float | None = 30.0,
    max_forced_tokens: int = DEFAULT_MAX_TOKENS,
    **options,
):
    """Compiles an eligible schema into `tokens.BitsetTables` (see the module docstring).

    ``max_forced_tokens``: F of the forced runs (`tokens._bitset_forced`; 0: none).

    Raises:
      BitsetIneligible: as `bitset_byte_dfa`, or a determinization conflict between events.
    """
    with limits(timeout_s, "the schema"):
        dfa, events = bitset_byte_dfa(schema, max_states=max_states, **options)
        words = max(1, (events.num_bits + 31) // 32)
        kinds = [k for k, _ in events.events]
        try:
            tables = compose_bitset(
                dfa,
                trie_for(vocab),
                vocab,
                kinds,
                events.masks(words),
                events.num_bits,
            )
        except EventConflict as e:
            raise BitsetIneligible(f"events conflict in the byte DFA: {e}") from None
        return with_forced_runs(dfa, tables, vocab, max_forced_tokens)
