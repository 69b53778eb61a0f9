"""The tool-call front end: tools and a call format → the byte PDA of "free text with
triggered calls" (`automata.BytePDA`) and the artifact's spec text."""

from __future__ import annotations

import dataclasses
import json

from automata_compile.frontends.json_schema import parse_options as _options
from automata_compile.frontends.tool_calls._formats import resolve
from automata_compile.frontends.tool_calls._link import link, root_and_calls
from automata_compile.frontends.tool_calls._tools import (
    InvalidToolError,
    normalize_tools,
    tool_unit,
)


def tool_calls_spec(
    tools,
    *,
    format,
    parallel: bool,
    require_call: bool,
    tool: str | None,
    allow_text: bool,
    **schema_options,
):
    """The checked inputs of `compile_tool_calls` (its arguments, less the vocabulary and
    the time limit): ``(fmt, tools, opts, spec)``, the resolved format, the tools to
    compile, the schema options and the artifact's spec text.

    Raises:
      InvalidToolError: a malformed tool list, or ``tool`` names no tool.
    """
    fmt = resolve(format)
    schema_options.setdefault("property_order", "declared")
    opts = _options(schema_options)
    tools = normalize_tools(tools, fmt.style)
    if tool is not None:
        chosen = [t for t in tools if t.name == tool]
        if not chosen:
            raise InvalidToolError(
                f"tool={tool!r} names no tool; tools: {', '.join(t.name for t in tools)}"
            )
        tools = tuple(chosen)
    spec = json.dumps(
        {
            "format": dataclasses.asdict(fmt),
            "parallel": parallel,
            "require_call": require_call,
            "allow_text": allow_text,
            "options": schema_options,
            "tools": [{"name": t.name, "parameters": t.parameters} for t in tools],
        },
        ensure_ascii=False,
        separators=(",", ":"),
        sort_keys=True,
    )
    return fmt, tools, opts, spec


def tool_calls_pda(fmt, tools, opts, *, parallel: bool, require_call: bool, allow_text: bool):
    """The byte PDA of `compile_tool_calls` for the checked inputs of `tool_calls_spec`:
    one unit per tool (cached), linked under the root of free text and triggers.

    Raises:
      InvalidSchemaError, UnsupportedSchemaError: a parameters schema (the message names
        the tool).
      GrammarConflictError: a custom format whose parts collide with the calls.
    """
    names = [t.name for t in tools]
    units = []
    for t in tools:
        try:
            units.append(tool_unit(t, fmt, opts))
        except InvalidToolError:
            raise
        except Exception as e:
            if hasattr(e, "pointer") or isinstance(e, ValueError):
                e.args = (f"tool {t.name!r}: {e.args[0] if e.args else e}", *e.args[1:])
            raise
    root, start, back = root_and_calls(
        fmt, names, parallel=parallel, require_call=require_call, allow_text=allow_text
    )
    pda = link(root, start, back, units, names)
    return pda
