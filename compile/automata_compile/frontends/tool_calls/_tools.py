"""Tools → per-tool byte PDAs (cached), the units a tool-call constraint links together.

A tool compiles to one byte PDA whose rule 0 is everything after the tool's name:

* ``style="json"``: ``", "arguments": ARGS}`` (the envelope after the name, the arguments
  as the JSON Schema front end spells them, the closing brace);
* ``style="python"``: ``(key=VALUE, ...)``, each VALUE the front end's language of the
  parameter's schema spelled with Python's ``None``/``True``/``False``.

Rule 0 thus ends with a literal byte, so no rule is tail-called from it and the PDA's
FIRST / FOLLOW analysis stays exact when the unit is called from the root (`_link`):
only rule 0's final states need a return move. Units are cached by (schema, format
part, options): a request with 100 tools compiles only the tools not seen before.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
import threading

from automata_compile._errors import (
    GrammarConflictError,
    InvalidSchemaError,
    UnsupportedSchemaError,
)
from automata_compile.automata import Automaton, BytePDA, GrammarIR, Terminal, build_byte_pda
from automata_compile.frontends.json_schema import ROOT, rule_calls, schema_ir
from automata_compile.frontends.json_schema import content as sf
from automata_compile.frontends.json_schema import load_schema as _load
from automata_compile.frontends.json_schema import rewrite_calls as _rewrite
from automata_compile.frontends.json_schema import translate_grammar as _grammar
from automata_compile.frontends.json_schema import unrolled_options as _unrolled

CACHE_SIZE = 4096
# JSON style: every value in a tool's arguments whose IR is at least this large (a free
# string: 155, an integer: 464, a number: 92; not a boolean or a short enum) is a grammar
# rule of its own, so equal values across tools are one byte DFA and one walk
# (`_byte_dfa.cached_byte_dfa`, `tokens._pda_units`: both cached by structure), not a
# copy inside each tool's arguments rule; None: shared values only, as in a JSON Schema.
VALUE_RULE_MIN_SIZE: int | None = 64
_CACHE: collections.OrderedDict = collections.OrderedDict()
_LOCK = threading.Lock()
_JSON_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_PY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_PY_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class InvalidToolError(InvalidSchemaError):
    """A tool definition is malformed (its name, its parameters schema)."""


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    parameters: dict


def normalize_tools(tools, style: str) -> tuple[Tool, ...]:
    """Tools as (name, parameters schema) from OpenAI-style ``{"type": "function",
    "function": {...}}``, ``{"name", "parameters"}`` or MCP-style ``{"name",
    "inputSchema"}`` dicts.

    Raises:
      InvalidToolError: no tools, a missing or malformed name (JSON: letters, digits,
        ``_ . -``; Python: dotted identifiers), a repeated name, a non-object schema.
    """
    out, seen = [], set()
    if not tools:
        raise InvalidToolError("tools: at least one tool is needed", pointer="")
    for i, t in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(t, dict):
            raise InvalidToolError(f"{where}: a tool is a dict, got {type(t).__name__}")
        if t.get("type") == "function" and isinstance(t.get("function"), dict):
            t = t["function"]
        name = t.get("name")
        if not isinstance(name, str):
            raise InvalidToolError(f"{where}: no 'name' string")
        ok = _PY_NAME if style == "python" else _JSON_NAME
        if not ok.fullmatch(name):
            raise InvalidToolError(
                f"{where}: tool name {name!r} is not a valid {style}-style name "
                f"(expected {ok.pattern})"
            )
        if name in seen:
            raise InvalidToolError(f"{where}: tool name {name!r} is repeated")
        seen.add(name)
        params = t.get("parameters", t.get("inputSchema", {"type": "object", "properties": {}}))
        try:
            params = _load(params)
        except InvalidSchemaError as e:
            raise InvalidToolError(f"{where} ({name}): parameters: {e}", pointer="") from None
        if params is True or params == {}:
            params = {"type": "object"}
        if not isinstance(params, dict) or params.get("type", "object") != "object":
            raise InvalidToolError(
                f"{where} ({name}): parameters must be an object schema (type 'object')",
                pointer="",
            )
        out.append(Tool(name, params))
    return tuple(out)


def tool_unit(tool: Tool, fmt, opts) -> BytePDA:
    """The tool's byte PDA (module docstring), from the cache when this schema was compiled
    for the same format part and options before."""
    if fmt.style == "json":
        part = ("json", fmt.arguments_key, unit_variant())
    else:
        part = ("python", unit_variant())
    key = (json.dumps(tool.parameters, sort_keys=True), part, opts.key())
    with _LOCK:
        got = _CACHE.get(key)
        if got is not None:
            _CACHE.move_to_end(key)
            return got
    if fmt.style == "json":
        got = _json_unit(tool, fmt, opts)
    else:
        got = _python_unit(tool, dataclasses.replace(opts, spelling="python"))
    with _LOCK:
        _CACHE[key] = got
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return got


def unit_variant() -> tuple:
    """What a tool's unit depends on besides its schema, the format and the options (a
    part of the keys that cache units and what is built from them: the finished tool
    blocks)."""
    return ("values", VALUE_RULE_MIN_SIZE)


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


def _wrap(grammar: GrammarIR, head, tail) -> GrammarIR:
    return GrammarIR(grammar.names, (sf.seq(head, grammar.bodies[0], tail), *grammar.bodies[1:]))


def _build(tool: Tool, candidates, fallback) -> BytePDA:
    """The first candidate grammar the LL(1) byte PDA accepts (as the JSON Schema front
    end's `byte_language` tries them), else ``fallback()`` (the unrolled schema)."""
    for make in candidates:
        try:
            return build_byte_pda(make(), what=f"tool {tool.name!r}")
        except GrammarConflictError:
            continue
    return build_byte_pda(fallback(), what=f"tool {tool.name!r}")


def _json_unit(tool: Tool, fmt, opts) -> BytePDA:
    sp = sf.opt(sf.char(" "))
    head = sf.seq(sf.lit('",'), sp, sf.lit(json.dumps(fmt.arguments_key) + ":"), sp)
    tail = sf.char("}")
    schema = tool.parameters

    def grammar(share, free=True):
        values = _values_min(share)
        return lambda: _wrap(_grammar(schema, opts, share, free, values=values)[0], head, tail)

    def fallback():
        node = schema_ir(schema, _unrolled(opts, f"tool {tool.name!r}: a rule conflict"))
        return GrammarIR((ROOT,), (sf.seq(head, node, tail),))

    return _build(tool, [grammar(True), grammar(False), grammar(False, False)], fallback)


def _values_min(share: bool) -> int | None:
    """The ``values`` of `translate_grammar` for a unit's candidate grammar (per-value
    rules with ``share``, `VALUE_RULE_MIN_SIZE`)."""
    return VALUE_RULE_MIN_SIZE if share else None


def _python_unit(tool: Tool, opts) -> BytePDA:
    """``(k1=v1, k2=v2)``: declared parameters in declared order, required ones present,
    each value its schema's language (rules of each value renumbered into one grammar)."""
    schema = tool.parameters
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise InvalidToolError(f"tool {tool.name!r}: 'properties' must be an object", pointer="")
    required = set(schema.get("required", []))
    unknown = required - set(props)
    if unknown:
        raise InvalidToolError(
            f"tool {tool.name!r}: required parameter(s) {sorted(unknown)} are not declared in "
            "'properties' (the Python-call style passes declared parameters only)",
            pointer="/required",
        )
    shared = {k: schema[k] for k in ("$defs", "definitions") if k in schema}
    for ref in _refs(schema):
        if not ref.startswith(("#/$defs/", "#/definitions/")):
            raise UnsupportedSchemaError(
                f"tool {tool.name!r}: $ref {ref!r}: the Python-call style compiles each parameter "
                "on its own, so only references into $defs / definitions are supported; use a "
                "JSON format (format='hermes') for this schema",
                keyword="$ref",
                pointer="",
            )

    def value_grammars(share, free):
        out = []
        for key, sub in props.items():
            if not _PY_KEY.fullmatch(key):
                raise InvalidToolError(
                    f"tool {tool.name!r}: parameter {key!r} is not a Python identifier",
                    pointer=f"/properties/{key}",
                )
            sub = {**shared, **sub} if isinstance(sub, dict) else sub
            out.append((key, _grammar(sub, opts, share, free, values=_values_min(share))[0]))
        return out

    def grammar(share, free=True):
        def make():
            names, bodies, values = [ROOT], [None], []
            for key, g in value_grammars(share, free):
                called = any(0 in set(rule_calls(b, set())) for b in g.bodies)
                big = _values_min(share)  # the parameter's value itself a rule (as in JSON)
                called = called or (big is not None and sf.size(g.bodies[0]) >= big)
                fix = {}
                for j in range(0 if called else 1, len(g.bodies)):
                    fix[j] = len(names)
                    names.append(f"{key}.{g.names[j]}")
                    bodies.append(None)
                fix.setdefault(0, None)
                for j in range(0 if called else 1, len(g.bodies)):
                    bodies[fix[j]] = _rewrite(g.bodies[j], fix, {})
                root = Terminal(fix[0]) if called else _rewrite(g.bodies[0], fix, {})
                values.append((key, root))
            bodies[0] = sf.seq(sf.char("("), _kwargs(values, required), sf.char(")"))
            return GrammarIR(tuple(names), tuple(bodies))

        return make

    def fallback():
        uopts = _unrolled(opts, f"tool {tool.name!r}: a rule conflict")
        values = [
            (k, schema_ir({**shared, **s} if isinstance(s, dict) else s, uopts))
            for k, s in props.items()
        ]
        return GrammarIR((ROOT,), (sf.seq(sf.char("("), _kwargs(values, required), sf.char(")")),))

    return _build(tool, [grammar(True), grammar(False), grammar(False, False)], fallback)


def _refs(node):
    """Every ``$ref`` / ``$dynamicRef`` / ``$recursiveRef`` value in a schema document."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(v, str):
                yield v
            else:
                yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def _kwargs(values, required):
    """``k=v`` items in order, separated by ``", "`` or ``","``; optional ones may be left
    out. An automaton over states ``2 i + w`` (items before i considered; ``w``: one was
    written, so the next needs a separator): a tree would repeat the tail per choice."""
    sep = sf.seq(sf.char(","), sf.opt(sf.char(" ")))
    edges = []
    for i, (key, value) in enumerate(values):
        item = sf.seq(sf.lit(key + "="), value)
        for w in (0, 1):
            out = [(sf.seq(sep, item) if w else item, 2 * i + 3)]
            if key not in required:
                out.append((sf.EPS, 2 * i + 2 + w))
            edges.append(tuple(out))
    n = len(values)
    edges += [(), ()]
    return Automaton(edges=tuple(edges), start=0, finals=frozenset({2 * n, 2 * n + 1}))


__all__ = [
    "InvalidToolError",
    "Tool",
    "clear_cache",
    "normalize_tools",
    "tool_unit",
    "unit_variant",
]
