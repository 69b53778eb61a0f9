"""The tool-call front end: tools and a call format → the byte PDA of "free text with
triggered calls" (`automata.BytePDA`) and the artifact's spec text."""

from __future__ import annotations

import dataclasses
import json

import numpy as np

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
    schema_options.setdefault("closed_objects", True)  # a call's arguments: no invented keys
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
    return tool_calls_layout(
        fmt, tools, opts, parallel=parallel, require_call=require_call, allow_text=allow_text
    )[0]


@dataclasses.dataclass(frozen=True)
class ToolCallsLayout:
    """Where the parts of `tool_calls_pda`'s PDA are: the root's states ``0 .. q0 - 1``, of
    them the names' trie ``trie_lo .. trie_hi - 1`` (``trie_first``: each one's first name
    byte); then tool k's unit: states ``unit_lo[k]`` on (``unit_states[k]`` of them), rules
    ``rule_lo[k]`` on (``unit_rules[k]``)."""

    q0: int
    trie_lo: int
    trie_hi: int
    trie_first: tuple
    unit_lo: tuple
    unit_states: tuple
    rule_lo: tuple
    unit_rules: tuple


def tool_calls_layout(fmt, tools, opts, *, parallel: bool, require_call: bool, allow_text: bool):
    """(`tool_calls_pda`'s PDA, its `ToolCallsLayout`)."""
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
    sizes = [u.num_states for u in units]
    rules = [len(u.names) for u in units]
    layout = ToolCallsLayout(
        q0=len(root.edges),
        trie_lo=root.trie_lo,
        trie_hi=root.trie_hi,
        trie_first=tuple(root.trie_first),
        unit_lo=tuple(int(x) for x in np.cumsum([len(root.edges), *sizes[:-1]])),
        unit_states=tuple(sizes),
        rule_lo=tuple(int(x) for x in np.cumsum([1, *rules[:-1]])),
        unit_rules=tuple(rules),
    )
    return pda, layout
