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

from automata_compile._errors import (
    GrammarConflictError,
    StateBudgetExceededError,
    UnsupportedSchemaError,
)
from automata_compile.automata import build_byte_dfa, limits
from automata_compile.frontends.json_schema import (
    BitsetEvents,
    BitsetIneligible,
    BitsetSkip,
    events_in,
    load_schema,
    parse_options,
    shift_events,
    translate_grammar,
)
from automata_compile.pipeline._json_schema import order_fallback
from automata_compile.tokens import (
    DEFAULT_MAX_TOKENS,
    EventConflict,
    compose_bitset,
    compose_bitset_pda,
    trie_for,
    with_forced_runs,
)

# Translations at most: each one after the first spells the objects whose events conflicted
# with the counting automaton (`BitsetEvents.skip`).
MAX_ROUNDS = 8


def bitset_grammar(schema, *, skip=(), opts=None, **options):
    """(grammar with events, `BitsetEvents`) of an eligible schema: rule 0 (the root) holds
    every event, numbered after the rule calls where there are rules. ``skip``: pointers of
    objects to spell with the counting automaton (as by default); ``opts``: parsed options
    (else parsed from ``options``), their ``any_ordered`` filled by this translation.

    Raises:
      BitsetSkip: an object spelled by the counting automaton (counted, skipped) holds bitset
        objects, or a grammar rule other than the root does: translate again with them
        skipped too.
      BitsetIneligible: no object in any order.
    """
    schema = load_schema(schema)
    if opts is None:
        opts = parse_options(options)
    if opts.property_order == "declared":
        raise BitsetIneligible('property_order="declared" has no any-order object')
    events = BitsetEvents(skip)
    opts.any_ordered.clear()
    opts = dataclasses.replace(opts, bitset=events)
    grammar, _ = translate_grammar(schema, opts, False)
    if not events.objects:
        if skip:
            raise BitsetIneligible(
                "every object in any order is spelled by the counting automaton (inside a "
                "counted object, a recursive rule, or with conflicting events)"
            )
        raise BitsetIneligible("the schema has no object in any order")
    if len(grammar.bodies) > 1:
        inside = events_in(grammar.bodies[1:])
        if inside:  # objects inside a recursive rule: their bits would need the stack
            raise BitsetSkip(events.owners_of(inside))
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
    schema,
    vocab,
    *,
    max_states: int | None = None,
    timeout_s: float | None = 30.0,
    max_forced_tokens: int = DEFAULT_MAX_TOKENS,
    **options,
):
    """Compiles a schema into `tokens.BitsetTables`, or `tokens.BitsetPDATables` where it
    needs grammar rules (see the module docstring). Objects whose events conflict (members
    of a union whose continuations depend on the bits: docs/any_order_bitset.md), objects
    inside recursive rules and objects inside counted ones are spelled by the counting
    automaton, as by default (exact any order within its budget, else declared order with
    an `OrderFallbackWarning`, or, where the schema's automaton outgrows a budget with them in
    any order, declared order for all of them with a warning each, as `compile_json_schema`
    does); the tables' ``counted_objects`` name them.

    ``max_forced_tokens``: F of the forced runs (`tokens._bitset_forced`; 0: none).

    Raises:
      BitsetIneligible: no object in any order (or none left), a grammar conflict of the
        rules, or conflicts left after `MAX_ROUNDS` translations.
    """
    schema = load_schema(schema)
    skip: frozenset = frozenset()
    opts = parse_options(options)
    with limits(timeout_s, "the schema"):
        for _ in range(MAX_ROUNDS):
            try:
                out, counted = _compile_once(
                    schema, vocab, max_states, skip, opts, max_forced_tokens
                )
            except BitsetSkip as e:
                if e.pointers <= skip:
                    raise BitsetIneligible(f"events conflict again at {e}") from None
                skip |= e.pointers
                continue
            except (StateBudgetExceededError, UnsupportedSchemaError) as e:
                retry = order_fallback(opts, e)  # the counted objects in declared order
                if retry is None:
                    raise
                opts = retry
                continue
            return dataclasses.replace(out, counted_objects=tuple(sorted(counted)))
    raise BitsetIneligible(f"events still conflict after {MAX_ROUNDS} translations")


def _compile_once(schema, vocab, max_states, skip, opts, max_forced_tokens):
    """One translation and composition: (tables, pointers of the objects spelled by the
    counting automaton); `BitsetSkip` names the objects whose events conflict."""
    grammar, events = bitset_grammar(schema, skip=skip, opts=opts)
    words = max(1, (events.num_bits + 31) // 32)
    kinds = [k for k, _ in events.events]
    try:
        if len(grammar.bodies) > 1:
            r = len(grammar.names)
            root = build_byte_dfa(
                grammar.bodies[0], r + len(kinds), max_states=max_states, what="the schema"
            )
            spec = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
            try:
                out = compose_bitset_pda(
                    grammar,
                    root,
                    vocab,
                    kinds,
                    events.masks(words),
                    events.num_bits,
                    max_states=max_states,
                    spec=spec,
                )
            except GrammarConflictError as e:
                raise BitsetIneligible(f"the grammar conflicts: {e}") from None
            return out, events.skip
        dfa = build_byte_dfa(
            grammar.bodies[0], len(kinds), max_states=max_states, what="the schema"
        )
        out = compose_bitset(
            dfa, trie_for(vocab), vocab, kinds, events.masks(words), events.num_bits
        )
        return with_forced_runs(dfa, out, vocab, kinds, max_forced_tokens), events.skip
    except EventConflict as e:
        owners = events.owners_of(e.events)
        if not owners:
            raise BitsetIneligible(f"events conflict in the byte DFA: {e}") from None
        raise BitsetSkip(owners) from None
