"""A schema's language as grammar rules (`automata.GrammarIR`) or, without rules, as IR:
the translation (`_translator`, `_emitter`, `_rules`) with its errors, and the unrolled
retry where a recursive ``$ref`` needs its expansion."""

from __future__ import annotations

import contextlib
import dataclasses
import warnings

from automata_compile._errors import InvalidSchemaError, UnsupportedSchemaError
from automata_compile.automata import GrammarIR
from automata_compile.frontends.json_schema._closing import close_objects
from automata_compile.frontends.json_schema._content import TooComplexError
from automata_compile.frontends.json_schema._emitter import _Emitter
from automata_compile.frontends.json_schema._resolver import _DEFAULT_BASE, _loc, _Refuse
from automata_compile.frontends.json_schema._rules import (
    ROOT,
    SHARE_MIN_SIZE,
    Rules,
    derives_a_value,
    shared_types,
)
from automata_compile.frontends.json_schema._translator import _Options, _Translator
from automata_compile.frontends.json_schema._types import _Unroll


@contextlib.contextmanager
def schema_errors():
    """The translation's internal refusals as `UnsupportedSchemaError` (pointer ``#``)."""
    try:
        yield
    except _Refuse as e:
        raise UnsupportedSchemaError(
            f"{e.keyword!r} cannot be enforced exactly: {e.reason}", keyword=e.keyword, pointer=""
        ) from None
    except TooComplexError as e:
        raise UnsupportedSchemaError(
            f"#: the schema's automaton outgrows its budget ({e}); simplify it or lower max_recursion_depth/max_nesting_depth",
            keyword=None,
            pointer="",
        ) from None
    except RecursionError:
        raise UnsupportedSchemaError(
            "#: the schema nests too deeply to translate", keyword=None, pointer=""
        ) from None


def _translate(
    schema, opts: _Options, share: bool, free_calls: bool = True, values: int | None = None
) -> tuple[GrammarIR, bool]:
    """The schema's language as grammar rules (rule 0 = the root value); ``share``: large
    values used at several positions become rules too; ``free_calls``: a schema-free array
    / object is a call of the free rule (see `_Emitter._free_rule`). Also whether some
    value is used at several positions (without one, ``share`` changes nothing).

    ``values`` (with ``share``): every value below the root (array elements, property
    values) whose IR is at least this large becomes a rule, used once or more (a tool's
    parameters: rules equal across tools are built and walked once, `translate_grammar`)."""
    schema = closed_schema(schema, opts)
    tr = _Translator(schema, opts)
    rules = (
        Rules(tr.rule_types, tr.rule_ptrs, first_at=tr.first_at)
        if opts.recursion == "stack"
        else None
    )
    with schema_errors():
        t = tr.schema(schema, _DEFAULT_BASE, "")
        uses = 1 if share and values is not None else 2
        shared = shared_types([t, *tr.rule_types], uses) if rules is not None else set()
        if share and rules is not None:
            rules.shared = shared
        size = SHARE_MIN_SIZE if values is None else values
        node = _Emitter(opts, tr.refuse, rules, free_calls, size, tr.subset).value(t)
        grammar = rules.grammar(node) if rules else GrammarIR(names=(ROOT,), bodies=(node,))
    if not derives_a_value(grammar):
        if tr.remote_left_out:  # satisfiable, maybe, but not without the documents
            keyword, ptr, reason = tr.remote_left_out[0]
            raise UnsupportedSchemaError(
                f"{keyword!r} at {_loc(ptr)} cannot be enforced: {reason}, and leaving its "
                "values out (the sound subset) leaves no value of the whole schema",
                keyword=keyword,
                pointer=ptr,
            )
        where = tr.empty_at if tr.empty_at is not None else ""
        detail = f" (the first unsatisfiable subschema is at {_loc(where)})" if where else ""
        if tr.truncated is not None:
            detail += f"; the recursive $ref at {_loc(tr.truncated)} was unrolled to max_recursion_depth={opts.max_recursion_depth}, which may be too shallow"
        if opts.subset_warned:
            taken = ", ".join(f"{k!r} at {_loc(p)}" for k, p in sorted(opts.subset_warned))
            detail += (
                f"; or the sound subsets taken for {taken} (SubsetWarning) accept nothing there"
            )
        raise InvalidSchemaError(
            f"the schema is unsatisfiable: no JSON value matches it{detail}", pointer=where
        )
    return grammar, bool(shared)


def closed_schema(schema, opts: _Options):
    """``schema`` with its objects closed where ``opts.closed_objects`` asks (`_closing`)."""
    return close_objects(schema, opts.closing_warned)[0] if opts.closed_objects else schema


def unrolled_options(opts: _Options, reason: str) -> _Options:
    warnings.warn(
        f"{reason}; the schema is compiled with recursion='unroll' instead (schema-free "
        f"values nest at most max_nesting_depth={opts.max_nesting_depth} levels, recursive "
        f"$ref is expanded max_recursion_depth={opts.max_recursion_depth} times)",
        stacklevel=4,
    )
    return dataclasses.replace(opts, recursion="unroll")


def schema_grammar(schema, opts: _Options, *, share: bool = False) -> GrammarIR:
    """The rules of the JSON texts valid under ``schema`` (parsed JSON data): one rule
    (rule 0, the root) when nothing is called, e.g. with ``recursion="unroll"``;
    ``share``: large values used at several positions become rules too. A
    recursive ``$ref`` whose language an operation needs (see `_types._Unroll`) makes
    the whole schema unrolled, with a warning."""
    return translate_grammar(schema, opts, share)[0]


def translate_grammar(
    schema, opts: _Options, share: bool, free_calls: bool = True, *, values: int | None = None
) -> tuple[GrammarIR, bool]:
    """`schema_grammar`, and whether ``share=True`` could give other rules (True where
    the schema was unrolled: its shared values are not known). ``values``: see
    `_translate` (the tool-call front end's per-value rules; None: shared values only)."""
    try:
        return _translate(schema, opts, share, free_calls, values)
    except _Unroll as e:
        opts = unrolled_options(
            opts, f"{_loc(e.pointer or '')}: {e.reason}, which needs its expansion"
        )
        return _translate(schema, opts, share, free_calls, values)[0], True


def schema_ir(schema, opts: _Options):
    """The IR of the JSON texts valid under ``schema`` (parsed JSON data), for a schema
    whose language needs no grammar rules.

    Raises:
      UnsupportedSchemaError: the schema needs rules (``recursion="stack"`` and a
        schema-free value or a recursive ``$ref``); the message names them.
    """
    grammar, _ = translate_grammar(schema, opts, False)
    if len(grammar.bodies) > 1:
        raise UnsupportedSchemaError(
            f"#: the schema needs grammar rules ({', '.join(grammar.names[1:])}: schema-free "
            "values or recursive $ref), which only a pushdown automaton can express; use "
            "compile_json_schema, or pass recursion='unroll' to bound them by "
            "max_nesting_depth/max_recursion_depth",
            keyword=None,
            pointer="",
        )
    return grammar.bodies[0]
