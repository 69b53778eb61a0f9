"""A schema's values as grammar rules, with the values a conflict names kept inline.

Two uses (`pipeline._json_schema`):

* **Shared values** (used at two or more value positions, IR at least
  `_rules.SHARE_MIN_SIZE`), where the shared rules conflict: only the values the
  conflicts name are spelled inline, not every shared value (travis.json: 35 shared
  rules, two of them conflict; inlining all 35 outgrew ``max_states`` after 12 s).
* **Outlined values**, the last resort where the schema's automaton outgrew
  ``max_states`` in every other form: every value below the root (a property value, an
  array element, used once or more) whose IR is at least `_rules.OUTLINE_MIN_SIZE`.

A rule call is the same language, its states built once instead of once per copy (a
bounded array's positions, an any-order object's sets of properties, a union's branches).
A rule can meet a conflict the inline value did not have: where two alternatives of a
union share a prefix and then hold different values, the byte PDA would have to choose
between two calls on one byte. The values a conflict names are then kept inline
(`Outliner.grammar`'s ``inline``) and the rules are emitted again from the same
translation (`Outliner.byte_pda`).
"""

from __future__ import annotations

from automata_compile._errors import GrammarConflictError
from automata_compile.automata import GrammarIR, build_byte_pda
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
    """The schema translated once (``recursion="stack"``), emitted as rules on demand:
    its values used at ``uses`` or more value positions whose IR is at least ``min_size``
    (defaults: every value of at least `OUTLINE_MIN_SIZE`).

    Attributes:
      possible: False where outlining cannot apply: no rules (``recursion="unroll"``) or
        a recursive ``$ref`` whose expansion an operation needs (the schema is unrolled).
    """

    def __init__(self, schema, opts: _Options, *, uses: int = 1, min_size: int = OUTLINE_MIN_SIZE):
        self.opts = opts
        self.min_size = min_size
        self.inline: frozenset = frozenset()  # values a conflict named (`byte_pda`)
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
        self.values = shared_types([self.t, *self.tr.rule_types], uses) if self.possible else set()

    def grammar(self, inline=frozenset(), free_calls: bool = True) -> tuple[GrammarIR, dict]:
        """The rules with every value of at least ``min_size`` IR units outlined but the
        typed languages in ``inline``, and the outlined rules' typed languages by rule
        name (to name the values a `GrammarConflictError` involves); ``free_calls=False``
        spells schema-free values inline (as `translate_grammar` does)."""
        tr = self.tr
        rules = Rules(tr.rule_types, tr.rule_ptrs, self.values - inline, tr.first_at)
        with schema_errors():
            emitter = _Emitter(self.opts, tr.refuse, rules, free_calls, self.min_size, tr.subset)
            grammar = rules.grammar(emitter.value(self.t))
        named = {rules.names[j]: key[1] for key, j in rules.ids.items() if key[0] == "shared"}
        return grammar, named

    def byte_pda(self, free_calls: bool = True, *, max_states=None):
        """``(grammar, pda)``: the rules (`grammar`) and their byte PDA, the values each
        conflict names kept inline, one conflict at a time (each round keeps more values
        inline: it ends; ``self.inline`` holds them for the next call); ``pda`` is None
        where no rule is left (the root alone: a regular language).

        Raises:
          GrammarConflictError: a conflict that names no outlined value.
          StateBudgetExceededError: the byte PDA outgrows ``max_states``.
        """
        while True:
            g, named = self.grammar(self.inline, free_calls)
            try:
                return grammar_pda(g, max_states=max_states)
            except GrammarConflictError as e:
                kept = conflict_values(e, named) - self.inline
                if not kept:
                    raise
                self.inline |= kept


def grammar_pda(g: GrammarIR, *, max_states=None):
    """``(g, pda)``: the schema's grammar ``g`` and its byte PDA, or None where ``g`` is the
    root alone (a regular language, no PDA to build)."""
    if len(g.bodies) == 1:
        return g, None
    return g, build_byte_pda(g, max_states=max_states, what="the schema")


def conflict_values(e: GrammarConflictError, named: dict) -> set:
    """The outlined values a conflict names: those called where it is, else the value it
    is in (``named``: typed languages by rule name, from `Outliner.grammar`)."""
    kept = {named[n] for n in e.rules[1:] if n in named}
    return kept or {named[n] for n in e.rules[:1] if n in named}
