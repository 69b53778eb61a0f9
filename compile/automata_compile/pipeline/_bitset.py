"""`compile_json_schema_bitset`: the bitset any-order path (docs/any_order_bitset.md), opt-in.

An eligible schema's any-order objects are spelled as loops with bitset events; the byte DFA
then composes with the vocabulary into `tokens.BitsetTables`, or, for a schema with grammar
rules whose events all lie in the root rule, the byte PDA into `tokens.BitsetPDATables`. A
schema that is not eligible (events inside a rule, counted objects, an event conflict, a
grammar conflict) raises `BitsetIneligible` with the reason: compile it with
`compile_json_schema` (the default path, unchanged by this module).
"""

from __future__ import annotations

import dataclasses
import json

from automata_compile._errors import GrammarConflictError
from automata_compile.automata import build_byte_dfa, limits
from automata_compile.frontends.json_schema import (
    BitsetEvents,
    BitsetIneligible,
    load_schema,
    parse_options,
    translate_grammar,
)
from automata_compile.frontends.json_schema._bitset_events import has_event, shift_events
from automata_compile.tokens import EventConflict, compose_bitset, compose_bitset_pda, trie_for


def bitset_grammar(schema, **options):
    """(grammar with events, `BitsetEvents`) of an eligible schema: rule 0 (the root) holds
    every event, numbered after the rule calls where there are rules.

    Raises:
      BitsetIneligible: an event object inside a grammar rule (a recursive ``$ref``), an
        object counting its properties around one, or no object in any order.
    """
    schema = load_schema(schema)
    opts = parse_options(options)
    if opts.property_order == "declared":
        raise BitsetIneligible('property_order="declared" has no any-order object')
    events = BitsetEvents()
    opts = dataclasses.replace(opts, bitset=events)
    grammar, _ = translate_grammar(schema, opts, False)
    if not events.objects:
        raise BitsetIneligible("the schema has no object in any order")
    if len(grammar.bodies) > 1:
        inside = [n for n, b in zip(grammar.names[1:], grammar.bodies[1:], strict=True)
                  if has_event([b])]  # fmt: skip
        if inside:
            raise BitsetIneligible(
                f"an any-order object lies inside grammar rule(s) {', '.join(map(str, inside))}:"
                " its bits would need saving on the stack"
            )
        root = shift_events(grammar.bodies[0], len(grammar.names))
        grammar = dataclasses.replace(grammar, bodies=(root,) + tuple(grammar.bodies[1:]))
    return grammar, events


def bitset_byte_dfa(schema, *, max_states: int | None = None, **options):
    """(byte DFA with event columns, `BitsetEvents`) of an eligible schema with no rules.

    Raises:
      BitsetIneligible: as `bitset_grammar`, or the schema needs grammar rules.
    """
    grammar, events = bitset_grammar(schema, **options)
    if len(grammar.bodies) > 1:
        raise BitsetIneligible(f"the schema needs grammar rules ({', '.join(grammar.names[1:])})")
    dfa = build_byte_dfa(
        grammar.bodies[0], len(events.events), max_states=max_states, what="the schema"
    )
    return dfa, events


def compile_json_schema_bitset(
    schema, vocab, *, max_states: int | None = None, timeout_s: float | None = 30.0, **options
):
    """Compiles an eligible schema into `tokens.BitsetTables`, or `tokens.BitsetPDATables`
    where it needs grammar rules (see the module docstring).

    Raises:
      BitsetIneligible: as `bitset_grammar`, a determinization conflict between events, or a
        grammar conflict of the rules.
    """
    with limits(timeout_s, "the schema"):
        grammar, events = bitset_grammar(schema, **options)
        words = max(1, (events.num_bits + 31) // 32)
        kinds = [k for k, _ in events.events]
        if len(grammar.bodies) > 1:
            r = len(grammar.names)
            root = build_byte_dfa(
                grammar.bodies[0], r + len(kinds), max_states=max_states, what="the schema"
            )
            spec = json.dumps(load_schema(schema), ensure_ascii=False, separators=(",", ":"))
            try:
                return compose_bitset_pda(
                    grammar,
                    root,
                    vocab,
                    kinds,
                    events.masks(words),
                    events.num_bits,
                    max_states=max_states,
                    spec=spec,
                )
            except EventConflict as e:
                raise BitsetIneligible(f"events conflict in the byte DFA: {e}") from None
            except GrammarConflictError as e:
                raise BitsetIneligible(f"the grammar conflicts: {e}") from None
        dfa = build_byte_dfa(
            grammar.bodies[0], len(kinds), max_states=max_states, what="the schema"
        )
        try:
            return compose_bitset(
                dfa,
                trie_for(vocab),
                vocab,
                kinds,
                events.masks(words),
                events.num_bits,
            )
        except EventConflict as e:
            raise BitsetIneligible(f"events conflict in the byte DFA: {e}") from None
