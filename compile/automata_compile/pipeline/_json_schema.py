"""`compile_json_schema`: JSON Schema + vocabulary → `TokenDFA`, and the DFA-then-PDA policy.

The front end (`frontends.json_schema`) gives the schema's language as IR or as grammar
rules; `byte_language` chooses the byte automaton (a DFA where the language is regular,
else a byte PDA, with the retries on a grammar conflict), and `compile_json_schema` composes
it with the vocabulary, falling back to declared property order where the objects built in
any order outgrow a budget, and, last, to the schema's values outlined into grammar rules
where its automaton still outgrows ``max_states`` (`_outlined`).

The options and the accepted surface syntax ("the module docstring" in the docstrings
below) are documented in `frontends.json_schema._options`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time

from automata_compile._errors import (
    CompileTimeoutError,
    GrammarConflictError,
    StateBudgetExceededError,
    UnsupportedSchemaError,
)
from automata_compile.automata import limits
from automata_compile.frontends.json_schema import (
    OUTLINE_MIN_SIZE,
    SHARE_MIN_SIZE,
    SIZING_HINT,
    Outliner,
    Rules,
    SchemaOptions,
    grammar_pda,
    load_schema,
    order_fallback_warning,
    parse_options,
    pointer_fragment,
    schema_ir,
    translate_grammar,
    unrolled_options,
)
from automata_compile.pipeline._cache import cached_tables
from automata_compile.pipeline._grammar import pda_tables
from automata_compile.pipeline._regex import compile_ir
from automata_compile.tokens import CONTEXTS_REFUSED


def byte_language(
    schema, opts: SchemaOptions, *, max_states: int | None = None, share: bool | None = None
):
    """``(ir, None)`` for a schema with a regular IR, else ``(None, pda)``: its byte
    pushdown automaton.

    Shared-value rules (`frontends.json_schema._rules.SHARE_MIN_SIZE`) are used where the
    schema needs rules anyway (``share=None``: they shrink the PDA, whose composition with a
    vocabulary costs per state) or always (``share=True``, for a regular schema whose DFA
    outgrows its budget); a regular schema otherwise keeps its DFA, whose composition is
    cheaper. A grammar the byte PDA cannot parse with one byte of lookahead (see
    `frontends.json_schema._rules`) is tried again with the shared values each conflict
    names spelled inline, one conflict at a time (`frontends.json_schema.Outliner`), then
    without shared-value rules, then with schema-free arrays / objects spelled inline (a
    union whose other branch spells an array or object), then falls back to the unrolled
    IR, with a warning.
    """
    # In stack mode the shared variant is translated first: where the schema needs rules
    # anyway (free values, recursive $ref) it is the one used, and the plain one is only
    # needed on a conflict (translating an object-heavy schema can take a second).
    use_shared = share is not False and opts.recursion == "stack"
    first, sharing = translate_grammar(schema, opts, use_shared)
    if not (use_shared and sharing):
        plain = first  # sharing changes nothing
    elif all(Rules.is_shared(n) for n in first.names[1:]):
        plain = translate_grammar(schema, opts, False)[0]  # rules only for sharing: maybe regular
    else:
        plain = None  # rules in any case: the plain grammar is translated on a conflict
    if plain is not None and len(plain.bodies) == 1 and not share:
        return plain.bodies[0], None

    def attempts():  # in order; each translated only when the one before conflicts
        if plain is None or len(first.bodies) > len(plain.bodies):
            yield lambda: grammar_pda(first, max_states=max_states)
            if use_shared and sharing:  # the values the conflicts name inline, one by one
                shared = Outliner(schema, opts, uses=2, min_size=SHARE_MIN_SIZE)
                if shared.possible:
                    yield lambda: shared.byte_pda(max_states=max_states)
        if plain is not None:
            yield lambda: grammar_pda(plain, max_states=max_states)
        else:
            g = translate_grammar(schema, opts, False)[0]
            if len(g.bodies) != len(first.bodies):  # else the same grammar, the same conflict
                yield lambda: grammar_pda(g, max_states=max_states)
        if opts.recursion == "stack":  # last, the free arrays / objects spelled inline
            yield lambda: grammar_pda(
                translate_grammar(schema, opts, False, free_calls=False)[0], max_states=max_states
            )

    for attempt in attempts():
        try:
            g, pda = attempt()
        except GrammarConflictError as e:
            conflict = e
            continue
        return (g.bodies[0], None) if pda is None else (None, pda)
    reason = (
        f"#: at {conflict.example.decode('utf-8', 'replace')!r} (within rule "
        f"{conflict.rules[0]}) a union of alternatives calls a rule where another spells a "
        "value starting with the same byte"
    )
    return schema_ir(schema, unrolled_options(opts, reason)), None


DEFAULT_TIMEOUT_S = 30.0


def compile_json_schema(
    schema,
    vocab,
    *,
    max_states: int | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    cache_dir: str | os.PathLike | None = None,
    **options,
):
    """Compiles a JSON Schema into a `TokenDFA` for ``vocab`` (see the module docstring
    for the options); the schema's IR goes to the byte automaton directly, or, where it
    calls grammar rules (``recursion="stack"``), to a byte pushdown automaton composed
    with the vocabulary (``is_pda``; no forced runs, as for grammars).

    Compile budgets: ``max_states`` bounds the byte DFA (default 100,000; its work budget
    scales with it) and string/``multipleOf`` automata have their own fixed budgets; past
    one, the schema is compiled again with its objects in declared order, then with its
    values outlined into grammar rules (the same language), then with the objects those
    rules let fit any order in declared order (warned); where that fails too,
    `StateBudgetExceededError` (or, for a string constraint, `UnsupportedSchemaError`
    with the budget in its message). ``timeout_s`` (default 30 s; ``None``: no limit of its
    own) bounds the whole compile's wall-clock time, checked at the automaton core's
    checkpoints; past it, `CompileTimeoutError` (never a fallback: the language compiled
    does not depend on the machine's speed). Both messages name the subschema's JSON pointer when the
    translation was building one (``while building #/properties/x``).

    ``cache_dir``: a folder where the tables are kept (`pipeline._cache`: keyed by the
    schema, the options, ``max_states``, the vocabulary and the compiler's own source), so
    the same call again loads them (milliseconds to a second, against seconds to compile a
    large schema) and replays the first compile's warnings. ``timeout_s`` is not in the
    key; a refusal is not cached.

    Example:
      >>> import automata_compile as ac
      >>> vocab = ac.Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [b"<eos>"],
      ...                                  eos_ids=[256], special_ids=[256])
      >>> dfa = ac.compile_json_schema({"type": "boolean"}, vocab)
      >>> dfa.accepts(list(b"true")), dfa.accepts(list(b"yes"))
      (True, False)
    """
    schema = load_schema(schema)
    opts = parse_options(options)
    if cache_dir is not None:
        return cached_tables(
            cache_dir,
            kind="json_schema",
            spec={"schema": schema, "options": options, "max_states": max_states},
            vocab=vocab,
            build=lambda: compile_json_schema(
                schema, vocab, max_states=max_states, timeout_s=timeout_s, **options
            ),
        )[0]
    spec = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    with limits(timeout_s, "the schema"):
        start = time.perf_counter()
        try:
            return _compile(schema, opts, vocab, max_states, spec)
        except (StateBudgetExceededError, UnsupportedSchemaError) as e:
            retry = order_fallback(opts, e)
            if retry is None:
                if not isinstance(e, StateBudgetExceededError):
                    raise
                return _outlined(schema, opts, vocab, max_states, spec, e)
        spent = time.perf_counter() - start
        try:
            try:
                return _compile(schema, retry, vocab, max_states, spec)
            except StateBudgetExceededError as e:
                return _outlined(schema, retry, vocab, max_states, spec, e)
        except CompileTimeoutError as e:
            raise _after_fallback(e, spent) from None


def _after_fallback(e: CompileTimeoutError, spent: float) -> CompileTimeoutError:
    """``e``, a deadline met after the objects in any order fell back to declared order,
    saying so: ``property_order="declared"`` starts where it then was (buildkite: 20 s of
    the 30 s went to the any-order attempt; it compiles in 12 s in declared order)."""
    if SIZING_HINT in str(e):  # its own hint says the same
        return e
    return CompileTimeoutError(f"{e}{FALLBACK_HINT.format(spent=spent)}")


FALLBACK_HINT = (
    "; the objects it had tried in any property order fell back to declared order "
    'after {spent:.1f} s, where property_order="declared" starts'
)


def order_fallback(opts: SchemaOptions, e: Exception) -> SchemaOptions | None:
    """With ``property_order="any"``, the options that compile the objects built in any
    order in declared order instead, each named by a warning, where the whole schema
    outgrew a budget (``e``); None where that cannot help."""
    if opts.property_order != "any" or not opts.any_ordered or opts.declared_at:
        return None
    if isinstance(e, UnsupportedSchemaError) and e.keyword is not None:
        return None  # a keyword's own refusal: not the objects' size
    objects = sorted(set(opts.any_ordered))
    # a state budget, or another failure of the whole schema (an algebra budget, nesting too
    # deep to translate) that declared order may avoid: the warning names which
    why = "outgrows its budget" if isinstance(e, StateBudgetExceededError) else "fails to compile"
    for ptr in objects:
        order_fallback_warning(
            opts,
            ptr,
            f"the schema's automaton with the object at {pointer_fragment(ptr)} in any property order "
            f"{why} ({e})",
        )
    return dataclasses.replace(opts, declared_at=frozenset(objects), any_ordered=[])


def _compile(schema, opts: SchemaOptions, vocab, max_states, spec):
    node, pda = byte_language(schema, opts, max_states=max_states)
    if pda is None:
        try:
            return compile_ir(
                node,
                vocab,
                max_states=max_states,
                spec_kind="json_schema",
                spec=spec,
                what="the schema",
            )
        except StateBudgetExceededError:
            # a regular schema too large as a DFA: large values it repeats become rules
            _, pda = byte_language(schema, opts, max_states=max_states, share=True)
            if pda is None:
                raise
    return pda_tables(pda, vocab, spec_kind="json_schema", spec=spec)


def _outlined(schema, opts: SchemaOptions, vocab, max_states, spec, error):
    """The schema as a byte PDA whose values below the root are grammar rules
    (`frontends.json_schema.Outliner`): the last resort where its DFA, or a rule of its
    PDA, outgrew ``max_states`` (``error``) in every other form, so the schemas that
    compile without it keep their tables. A rule call is the same language. Where a
    conflict names outlined values, they are kept inline and the rules emitted again
    (each round keeps more values inline: it ends); then schema-free values are spelled
    inline, as in `byte_language`.

    Raises:
      StateBudgetExceededError: ``error``, where outlining cannot help (no rules:
        ``recursion="unroll"``; a conflict that names no outlined value), or the outlined
        grammar's own, naming the rule that still outgrows the budget.
    """
    outliner = Outliner(schema, opts)  # translated once for every round below
    if not outliner.possible:
        raise error
    for free_calls in (True, False):
        try:
            _, pda = outliner.byte_pda(free_calls, max_states=max_states)
        except GrammarConflictError:
            continue
        except StateBudgetExceededError as e:
            return _outlined_in_order(schema, opts, vocab, max_states, spec, error, e)
        if pda is None:
            raise error  # no value to outline
        try:
            return pda_tables(pda, vocab, spec_kind="json_schema", spec=spec)
        except StateBudgetExceededError as e:  # the composition's own budgets
            if _cut_last(opts, e):
                return pda_tables(pda, vocab, spec_kind="json_schema", spec=spec, cut=True)
            return _outlined_in_order(schema, opts, vocab, max_states, spec, error, e)
    raise error


def _cut_last(opts: SchemaOptions, e: StateBudgetExceededError) -> bool:
    """Whether the outlined PDA, its composition refused because a token reaches too many
    stack contexts (``e``), is composed again with those tokens left out
    (`tokens.compose_pda`'s ``cut``, a `TokenSubsetWarning`): with ``subsets="warn"``, in
    the last form tried, where no object is left in any order to fall back to declared
    order (which keeps the tokens: taskfile.json, as before). The draft-04/06/07
    meta-schemas were refused there; they compile."""
    if opts.subsets != "warn" or CONTEXTS_REFUSED not in str(e):
        return False
    return opts.property_order != "any" or not set(opts.any_ordered) - opts.declared_at


def _outlined_in_order(schema, opts: SchemaOptions, vocab, max_states, spec, error, e):
    """The outlined schema again with the objects it built in any order in declared order,
    each named by a warning, where the outlined PDA or its composition outgrew a budget
    (``e``). Outlined values are rule calls, so an object whose inline values were past
    the any-order budget can fit it as rules, and then its states are copied once per set
    of properties written: so are the return states of its values' rules, and a token
    that closes nested such objects reaches their product of stack contexts (codecov.json:
    ``coverage.notify``, 6 properties, in ``coverage``, 5). Declared order is a sound
    subset, as `order_fallback` takes for the whole schema.

    Raises:
      StateBudgetExceededError: ``e``, with ``error``, where no object was in any order
        or declared order outgrows a budget too.
    """
    objects = set(opts.any_ordered) - opts.declared_at
    if opts.property_order != "any" or not objects:
        raise _outlining_tried(e, error) from None
    for ptr in sorted(objects):
        order_fallback_warning(
            opts,
            ptr,
            f"the schema's values outlined into grammar rules with the object at "
            f"{pointer_fragment(ptr)} in any property order outgrow a budget ({e})",
        )
    retry = dataclasses.replace(opts, declared_at=opts.declared_at | objects, any_ordered=[])
    return _outlined(schema, retry, vocab, max_states, spec, error)


def _outlining_tried(e: StateBudgetExceededError, error) -> StateBudgetExceededError:
    return StateBudgetExceededError(
        f"{e} (with the schema's values of at least {OUTLINE_MIN_SIZE} IR units outlined "
        f"into grammar rules, tried after: {error})"
    )
