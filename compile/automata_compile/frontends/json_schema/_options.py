"""The options of the JSON Schema front end, and its manual: JSON Schema → the compiler's IR
(and, where it has one, a Python `re` regex).

`compile_json_schema(schema, vocab, **options)` compiles the set of JSON texts (in the
accepted surface syntax, below) that are valid instances of the schema to a `TokenDFA`;
`schema_ir` is that language as an IR tree; `json_schema_to_regex(schema, **options)`
prints it as a regex (full-match semantics) when the IR holds no automaton node.

How it works: each (sub)schema is translated into a *typed language* (`_types._T`): for
each JSON type, the set of allowed values as a union of constraint records (numbers:
interval, multipleOf, finite sets; strings: an IR tree over decoded characters; arrays
and objects: per-position / per-property schemas, counts). Keywords are intersections of
such languages (`allOf` and sibling keywords), `anyOf` a union, `not`/`if`/`oneOf` use
complements where they are expressible. A union keeps every branch's alternatives, however
many (an ``anyOf`` of hundreds of objects, each told apart by a ``const`` property, is
exact); products, which multiply alternatives (an ``allOf`` of ``anyOf``s, a complement),
are bounded (see the refusals below). String intersections and complements run on
automata (`automata._char_dfa`) and stay `Automaton` IR nodes (except that a small finite
set, such as an ``enum``, meeting another constraint keeps the values that match it,
tested one by one), as do ``multipleOf``
remainders and counted ``contains``/property counts; the emitter (`_emitter`) spells the
typed language as IR of JSON texts, strings through `_strings` (JSON escapes), `_ecma`
(ECMA-262 patterns) and `_formats`. No regex text is printed and parsed on the way.

Accepted surface syntax (a restriction of JSON's spelling, never of the values):
  * property order (option ``property_order``): ``"any"`` (default) accepts the declared
    ``properties`` (after merging ``allOf``; required-but-undeclared names count as
    declared) in any order and the other properties (``additionalProperties``/
    ``patternProperties``) anywhere between them, as a validator does, ``enum``/``const``
    objects included. ``"declared"`` accepts the declared properties in definition order,
    then the others in any order, and ``enum``/``const`` objects in the literal's key
    order: predictable field order and a much smaller automaton (as Outlines and XGrammar
    do). Either way a declared name never repeats. Other names may repeat (a regex cannot
    rule it out): every occurrence is validated, but ``minProperties`` counts occurrences
    and ``not``/``oneOf``/``if`` judge each one, so a text with a repeated name (which RFC
    8259 leaves without a defined meaning) can parse, last value winning, to an invalid
    instance.
  * numbers: an unconstrained ``number`` accepts the full JSON grammar; an unconstrained
    ``integer`` accepts ``12``, ``12.0``/``12.00`` up to ``max_filler`` zeros (a float with
    zero fraction is an integer per the specification) and exponent forms from 1e16 to 1.7e308 (``1e+16``, as
    ``json.dumps`` writes large floats; larger ones overflow a double); a number with any
    numeric keyword (bounds, ``multipleOf``, ``not``) accepts plain decimals only (no
    exponent). ``enum``/``const`` numbers accept every plain spelling (``1``, ``1.0``,
    ``-0``) and the ``json.dumps`` spelling of the float.
  * strings: see `_strings.encode_json_string` (option ``string_escapes``).

Options (all keyword-only):
  whitespace: ``"default"`` accepts ``json.dumps`` output with its default separators
    (``", "`` and ``": "``) and compact output (``","`` and ``":"``), i.e. one optional
    space after ``,`` and ``:`` and nowhere else; ``"compact"`` accepts no whitespace at
    all; ``"pretty"`` accepts up to ``max_whitespace`` characters of JSON whitespace
    (space, tab, newline, carriage return) around every structural character (what
    ``json.dumps(indent=...)`` writes, within that bound).
  max_whitespace: bound of each whitespace run in ``"pretty"`` mode (default 20), so a
    model cannot loop on whitespace.
  max_filler: bound of each run of value-neutral zeros in numbers (default 20): trailing
    zeros of a fraction (``12.`` and at most 20 zeros is an integer) and leading zeros of
    an exponent, so a model cannot loop on zeros either. ``json.dumps`` writes at most one
    such zero (``12.0``), so every instance keeps its ``json.dumps`` spelling for any
    ``max_filler >= 1``; ``0`` accepts no filler at all (then ``12.0`` is refused).
  max_digits: bound of each run of digits in numbers (default 20; ``None``: unbounded):
    an integer part, an exponent after its leading zeros and a fraction (in all, its at
    most ``max_filler`` trailing zeros included) have at most this many digits, so a model
    cannot loop on digits (``{"n": 1000000000000…``); a fraction compared with a bound
    (``minimum``, ``maximum``, ...) has at most this many digits up to its last non-zero
    digit, then at most ``max_filler`` zeros. ``json.dumps`` writes at most
    20 digits in a run for a double (16 integer digits, 20 fraction digits: ``0.000``
    and 17 significant ones) or a 64-bit integer, and ``max_digits`` must be at least 20,
    so those spellings are always accepted. Literals (``enum``/``const``) and integers
    between bounds that need more digits keep them.
  recursion: ``"stack"`` (default) compiles schema-free values (under ``{}``, ``true``,
    absent ``additionalProperties``, ``items``, ...) and recursive ``$ref`` to grammar rules
    (`_rules`): the schema becomes a pushdown automaton (a `TokenDFA` with ``is_pda``) whose
    only depth bound is the runtime's stack; a schema without them keeps its DFA, table
    for table. ``"unroll"`` asks for a pure DFA (no stack), bounded by the next two options.
    Even with ``"stack"`` a schema is unrolled, with a warning, where a rule cannot be used:
    a recursive ``$ref`` that meets sibling constraints (``allOf``, ``not``, keywords beside
    it, ``unevaluated*``) needs its language expanded, and a union whose alternatives would
    need more than one byte of lookahead to choose between a rule and an inline value
    (``anyOf`` of objects where one declares a nested object and another allows any value)
    cannot be parsed by the LL(1) byte automaton. ``$dynamicRef`` is always unrolled.
    Shared definitions: a value used at several positions (a ``$defs`` entry referenced
    from many properties) whose IR is large (`_rules.SHARE_MIN_SIZE`) compiles once, as a
    rule (named ``shared:#/$defs/...`` after where it was first translated, as budget
    errors in it say), where the schema is a pushdown automaton anyway, and for a regular schema whose
    DFA outgrows ``max_states`` (the compile is then tried again with shared rules); a
    regular schema that fits keeps its DFA, whose composition with a vocabulary is
    cheaper than a PDA's (see BENCHMARKS.md).
  max_nesting_depth: with ``recursion="unroll"``, schema-free values nest at most this
    many levels of arrays and objects (default 2). Each level multiplies the automaton of
    every free value by about two; prefer ``additionalProperties: false`` where extra
    properties are not wanted.
  max_recursion_depth: with ``recursion="unroll"``, a recursive ``$ref`` is expanded at
    most this many times inside itself (default 3); deeper branches are cut (a recursive
    structure then has to end).
  strict: ``True`` (default) raises `UnsupportedSchemaError` for anything that cannot be
    enforced exactly; ``False`` drops it (accepting more) with a `warnings.warn` naming
    what is not enforced and where. (Sound subsets follow ``subsets``, not ``strict``.)
  string_escapes: ``"standard"`` (default), ``"any"`` or ``"minimal"``; see
    `encode_json_string`.
  leap_seconds: for ``time``/``date-time``: ``"utc"`` (default) accepts second 60 only as
    ``23:59:60`` with offset ``Z``/``+00:00``/``-00:00``; ``"exact"`` accepts every valid
    leap second (local time 23:59:60 UTC at any offset; about 1,500 more automaton
    states per field); ``"none"`` rejects second 60.
  assert_format: ``True`` (default) enforces ``format`` (the specification's optional
    format-assertion behaviour); ``False`` treats it as an annotation, as a 2020-12
    validator does by default. Unknown format names are annotations either way.
  property_order: ``"any"`` (default), ``"strict_any"`` or ``"declared"`` (see above). Any
    order needs an automaton state per set of declared properties already written, each
    with its own copy of the property values' automata: an object of n properties costs
    about ``2**(n-1)`` times the states of its values (``"declared"``: once). Each object
    may add at most 20,000 estimated byte-automaton states to what declared order needs
    (and have at most 4,096 counting states), and all objects of the schema together at
    most 40,000 (in the order they are built). Past that, ``"any"`` accepts that object in
    declared order (a subset of its valid spellings, never an invalid instance) with one
    `OrderFallbackWarning` naming it by JSON pointer; so does a whole schema whose
    automaton outgrows ``max_states`` (or another automaton budget) with its objects in
    any order: it is compiled again with each of them in declared order, each named by a
    warning; and so are the objects that fit any order only with the schema's values
    outlined into grammar rules, where those rules or their composition with the
    vocabulary outgrow a budget. ``"strict_any"`` raises `UnsupportedSchemaError` instead (keyword
    ``properties``, the object's pointer, its number of properties). In practice: up to
    4-5 properties with short values, fewer with long bounded strings or free
    ``additionalProperties`` (see BENCHMARKS.md).
  closed_objects: ``False`` (default) accepts the properties a schema allows as a validator
    does: where an object says nothing of undeclared properties, any. ``True`` closes the
    objects that declare ``properties`` and say nothing of others (as if they said
    ``additionalProperties: false``, as Outlines and XGrammar's strict mode do), for
    generation: a model cannot invent keys. Only where that is a sound subset and keeps
    the object satisfiable (`_closing`: not under ``not``, ``if``, ``oneOf``,
    ``dependentSchemas`` or a ``contains`` with ``maxContains``, nor beside ``allOf``/``anyOf``/``$ref`` or ``required`` names it
    does not declare), so every accepted instance is valid under the schema as written.
  subsets: ``"warn"`` (default) or ``"refuse"``. Where a keyword cannot be enforced exactly
    but a sound subset of its language can (every accepted text valid, some valid texts
    left out), ``"warn"`` compiles the subset and emits one `SubsetWarning` naming the
    keyword, its JSON pointer and what is left out; ``"refuse"`` raises
    `UnsupportedSchemaError` there instead, for users who want the exact language or
    nothing. (Objects past their any-order budget follow ``property_order``.)

Formats enforced exactly: ``date-time``, ``date``, ``time`` (see ``leap_seconds``),
``duration``, ``email`` (RFC 5321 mailbox, address literals included), ``ipv4``, ``ipv6``,
``uri``, ``uri-reference``, ``iri``, ``iri-reference``, ``uri-template``, ``uuid``,
``json-pointer``, ``relative-json-pointer``.
Formats enforced as named sound subsets (option ``subsets``; what each leaves out is
`_formats.FORMAT_LIMITS`' text, the `SubsetWarning` message): ``hostname`` (no Punycode
A-labels ``xn--``, at most 253 characters provably), ``idn-hostname`` (its ASCII names, the
same subset), ``idn-email`` (the ``email`` language) and ``regex`` (`_regex_format`: valid
for ECMA-262 with and without the ``u`` flag and for Python's ``re``; groups nest at most 3
deep; no named groups, backreferences or lookaround).

References: local ``$ref`` (JSON pointers, ``$anchor``, embedded ``$id`` resources,
``$defs``/``definitions``), and ``$dynamicRef``/``$dynamicAnchor`` resolved along the
static evaluation path; recursion is a grammar rule (see ``recursion``). ``$schema``
naming draft-04/06/07 makes ``$ref`` override its siblings; 2019-09, 2020-12 and the
OpenAPI 3.1 dialect are 2020-12; any other meta-schema is refused (it may change which
keywords apply). ``unevaluatedProperties``/``unevaluatedItems`` are exact: each object and
array alternative carries what was evaluated, and ``anyOf`` is split into exclusive
combinations of its branches where the schema uses them.

``uniqueItems: true`` is exact where the items' values are finite (``enum``/``const`` of
scalars, booleans, null, bounded integers; any order while the sets of values fit 4,096
counting states and 20,000 byte-automaton states, counted in the schema's any-order total of
40,000 with the objects); past that budget the values are accepted
in one fixed order, and over an infinite item language at most one item is accepted: both
sound subsets, named by a `SubsetWarning` (``subsets="refuse"`` raises instead).

``maxLength`` with a ``pattern`` or ``format`` whose intersection outgrows its budget
(20,000 states: a length counter times the pattern's automaton, e.g. ``format: email``
with ``maxLength: 254``) accepts the valid strings of at most ``n`` characters instead,
the largest ``n`` found that fits (`_keywords._length_cut`; 115 for that email), named by
a `SubsetWarning` (keyword ``maxLength``; ``subsets="refuse"`` raises instead); where the
pattern's or format's strings are that short anyway (``hostname``, ``maxLength: 253``),
exactly, without a warning.

``oneOf`` is exact where its branches are disjoint or each complement is expressible;
otherwise (the complement of ``uniqueItems``, of an existential property constraint, one
past a budget) it is a sound subset (`_one_of`): per JSON type, a value of one branch is
accepted only where it matches no superset of another branch whose complement is
expressible (that branch with ``uniqueItems`` and existential constraints dropped, else its
shape: lengths, sizes, allowed, required and forbidden names, else its type), named by a
`SubsetWarning` (keyword ``oneOf``; ``subsets="refuse"`` raises instead).

Refused in strict mode (`UnsupportedSchemaError`, with ``keyword`` and ``pointer``):
``uniqueItems: true`` over an infinite item language with ``minItems`` >= 2 (the subset of at
most one item is empty there), the complement of ``uniqueItems`` (in ``not`` and
``if``), remote ``$ref``/``$dynamicRef`` (documents
outside the schema, never fetched) under ``not``, an ``if`` condition, ``oneOf`` or ``contains``,
with ``subsets="refuse"`` or where the schema would accept nothing without them (elsewhere
they are a sound subset: no value accepted where one applies, an optional property left
out; a `SubsetWarning`), ``$recursiveRef``, unknown ``$schema`` meta-schemas, ECMA patterns
with backreferences, lookaround or ``\\b``, ``format`` values enforced as subsets (above)
with ``subsets="refuse"``, ``not``/``if`` whose complement is not expressible
(e.g. objects that must have some undeclared property), ``unevaluated*`` under an ``anyOf`` of more than four annotated
branches, and constraints whose automaton outgrows a budget (``multipleOf`` whose
remainder automaton needs more than 400 states, string intersections or complements past
20,000 states (with ``maxLength``: where no length from ``minLength`` up fits, or
``subsets="refuse"``), objects in any property order past their budget, an intersection or
complement with more than 256 alternatives of one JSON type where it multiplied them past
those of each of its operands, or one of more than 65,536 pairs of alternatives; a byte
automaton past ``max_states`` raises `StateBudgetExceededError`).
`json_schema_to_regex` also raises `UnsupportedSchemaError` (with no keyword) for a schema
that needs grammar rules (unless ``recursion="unroll"``; the message names the rules) and
for one whose IR holds an automaton node, which it cannot print: ``pattern``/``format`` with
``minLength``/``maxLength`` or with each other, ``allOf`` of patterns, ``not``,
``propertyNames``, ``patternProperties`` overlaps, ``multipleOf``, counted ``contains``,
``minProperties``/``maxProperties``, ``uniqueItems`` over finite item values (a counting
automaton), objects in any property order (two or more declared
properties, or one beside other allowed properties: pass ``property_order="declared"``
for a regex) and objects of more than 128 declared properties in declared order (a flat
automaton: nested IR as deep as the object recursed past Python's limit);
`compile_json_schema` accepts them.
Bad schemas raise `InvalidSchemaError` with the JSON pointer: non-schema values,
unresolvable local ``$ref``, ``$ref`` cycles, an empty ``enum``, contradictory bounds
(``minimum > maximum``, ``minLength > maxLength``, ``minItems > maxItems``, ...), and a
schema no JSON value satisfies. Messages show pointers as URI fragments (``#/items``).

Example:
  >>> import re
  >>> from automata_compile import json_schema_to_regex
  >>> rx = json_schema_to_regex({"type": "object", "properties": {"n": {"type": "integer",
  ...     "minimum": 1}}, "required": ["n"], "additionalProperties": False})
  >>> bool(re.fullmatch(rx, '{"n": 12}')), bool(re.fullmatch(rx, '{"n":0}'))
  (True, False)
"""

from __future__ import annotations

from automata_compile.frontends.json_schema._numbers import MIN_DIGITS
from automata_compile.frontends.json_schema._translator import _Options

_INTERNAL = ("declared_at", "any_ordered", "order_warned", "subset_warned", "closing_warned")
_INTERNAL += ("bitset",)


def parse_options(kw) -> _Options:
    """The validated options (`_translator._Options`) of ``kw``, the keyword arguments of
    `compile_json_schema` / `json_schema_to_regex`."""
    for name in _INTERNAL:
        if name in kw:
            raise TypeError(f"unexpected keyword argument {name!r}")
    opts = _Options(**kw)
    if opts.string_escapes not in ("standard", "any", "minimal"):
        raise ValueError(
            f"string_escapes must be 'standard', 'any' or 'minimal', got {opts.string_escapes!r}"
        )
    if opts.property_order not in ("any", "strict_any", "declared"):
        raise ValueError(
            f"property_order must be 'any', 'strict_any' or 'declared', got {opts.property_order!r}"
        )
    if not isinstance(opts.closed_objects, bool):
        raise ValueError(f"closed_objects must be True or False, got {opts.closed_objects!r}")
    if opts.subsets not in ("warn", "refuse"):
        raise ValueError(f"subsets must be 'warn' or 'refuse', got {opts.subsets!r}")
    if opts.spelling not in ("json", "python"):
        raise ValueError(f"spelling must be 'json' or 'python', got {opts.spelling!r}")
    if opts.recursion not in ("stack", "unroll"):
        raise ValueError(f"recursion must be 'stack' or 'unroll', got {opts.recursion!r}")
    if opts.leap_seconds not in ("utc", "exact", "none"):
        raise ValueError(
            f"leap_seconds must be 'utc', 'exact' or 'none', got {opts.leap_seconds!r}"
        )
    d = opts.max_digits
    if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < MIN_DIGITS):
        raise ValueError(
            f"max_digits must be None or an int >= {MIN_DIGITS} (json.dumps writes up to "
            f"{MIN_DIGITS} digits in a run for a double or a 64-bit integer), got {d!r}"
        )
    for name in ("max_whitespace", "max_filler", "max_nesting_depth", "max_recursion_depth"):
        v = getattr(opts, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return opts
