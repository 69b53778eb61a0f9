"""A schema's values outlined into grammar rules: the last resort where its automaton
outgrew ``max_states`` in every other form (`pipeline._json_schema`).

Every value below the root (a property value, an array element, used once or more) whose
IR is at least `_rules.OUTLINE_MIN_SIZE` becomes a rule, the same language, its states
built once instead of once per copy (a bounded array's positions, an any-order object's
sets of properties, a union's branches). Outlining can meet a conflict the inline values
did not have: where two alternatives of a union share a prefix and then hold different
values, the byte PDA would have to choose between two calls on one byte. The values a
conflict names are then kept inline (`Outliner.grammar`'s ``inline``) and the rules are
emitted again from the same translation.
"""

from __future__ import annotations

from automata_compile.automata import GrammarIR
from automata_compile.frontends.json_schema._emitter import _Emitter
from automata_compile.frontends.json_schema._grammar import closed_schema, schema_errors
from automata_compile.frontends.json_schema._resolver import _DEFAULT_BASE
from automata_compile.frontends.json_schema._rules import (
    OUTLINE_MIN_SIZE,
    Rules,
    shared_types,
)
from automata_compile.frontends.json_schema._translator import _Options, _Translator
from automata_compile.frontends.json_schema._types import _Unroll


class Outliner:
    """The schema translated once (``recursion="stack"``), emitted as rules on demand.

    Attributes:
      possible: False where outlining cannot apply: no rules (``recursion="unroll"``) or
        a recursive ``$ref`` whose expansion an operation needs (the schema is unrolled).
    """

    def __init__(self, schema, opts: _Options):
        self.opts = opts
        schema = closed_schema(schema, opts)
        self.tr = _Translator(schema, opts)
        self.t = None
        if opts.recursion == "stack":
            try:
                with schema_errors():
                    self.t = self.tr.schema(schema, _DEFAULT_BASE, "")
            except _Unroll:
                self.t = None
        self.possible = self.t is not None
        self.values = shared_types([self.t, *self.tr.rule_types], 1) if self.possible else set()

    def grammar(self, inline=frozenset(), free_calls: bool = True) -> tuple[GrammarIR, dict]:
        """The rules with every value of at least `OUTLINE_MIN_SIZE` IR units outlined but
        the typed languages in ``inline``, and the outlined rules' typed languages by rule
        name (to name the values a `GrammarConflictError` involves); ``free_calls=False``
        spells schema-free values inline (as `translate_grammar` does)."""
        tr = self.tr
        rules = Rules(tr.rule_types, tr.rule_ptrs, self.values - inline, tr.first_at)
        with schema_errors():
            emitter = _Emitter(self.opts, tr.refuse, rules, free_calls, OUTLINE_MIN_SIZE, tr.subset)
            grammar = rules.grammar(emitter.value(self.t))
        named = {rules.names[j]: key[1] for key, j in rules.ids.items() if key[0] == "shared"}
        return grammar, named
