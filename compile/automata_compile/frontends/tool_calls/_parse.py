"""Parsing a tool-call output back into text segments and calls."""

from __future__ import annotations

import ast
import dataclasses
import json

from automata_compile._errors import AutomataError
from automata_compile.frontends.tool_calls._formats import resolve


class ToolCallParseError(AutomataError, ValueError):
    """An output is not text with well-formed calls of the format (offset: where)."""

    def __init__(self, message: str, *, offset: int):
        self.offset = offset
        super().__init__(f"{message} (at character {offset})")


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One parsed call: the tool's name and its arguments (parsed JSON / Python values)."""

    name: str
    arguments: dict


def parse_tool_calls(text: str, format="hermes") -> list:
    """Splits ``text`` into free-text segments (``str``, empty ones dropped) and `ToolCall`
    s, in order. A constrained output always parses; for any other text a malformed call
    raises.

    Raises:
      ToolCallParseError: a trigger not followed by a well-formed call and end tag.

    Example:
      >>> parse_tool_calls('Sure.<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>')
      ['Sure.', ToolCall(name='f', arguments={'x': 1})]
    """
    fmt = resolve(format)
    out, i = [], 0
    while True:
        j = text.find(fmt.trigger, i)
        if j < 0:
            if text[i:]:
                out.append(text[i:])
            return out
        if text[i:j]:
            out.append(text[i:j])
        k = j + len(fmt.trigger)
        if fmt.after_trigger and text.startswith(fmt.after_trigger, k):
            k += len(fmt.after_trigger)
        call, k = (_json_call if fmt.style == "json" else _python_call)(text, k, fmt)
        if (
            fmt.before_end
            and text.startswith(fmt.before_end, k)
            and not text.startswith(fmt.end, k)
        ):
            k += len(fmt.before_end)
        if not text.startswith(fmt.end, k):
            raise ToolCallParseError(f"expected the end tag {fmt.end!r}", offset=k)
        out.append(call)
        i = k + len(fmt.end)


def _json_call(text: str, k: int, fmt) -> tuple[ToolCall, int]:
    try:
        value, end = json.JSONDecoder().raw_decode(text, k)
    except ValueError as e:
        raise ToolCallParseError(f"the call is not JSON: {e.msg}", offset=k) from None
    key = fmt.arguments_key
    if (
        not isinstance(value, dict)
        or set(value) != {"name", key}
        or not isinstance(value["name"], str)
        or not isinstance(value[key], dict)
    ):
        raise ToolCallParseError(f'expected {{"name": ..., "{key}": {{...}}}}', offset=k)
    return ToolCall(value["name"], value[key]), end


def _python_call(text: str, k: int, fmt) -> tuple[ToolCall, int]:
    end = text.find(fmt.end, k)
    if end < 0:
        raise ToolCallParseError(f"no end tag {fmt.end!r} after the call", offset=k)
    body = text[k:end]
    if fmt.before_end and body.endswith(fmt.before_end):
        body = body[: -len(fmt.before_end)]
    try:
        node = ast.parse(body, mode="eval").body
    except SyntaxError as e:
        raise ToolCallParseError(
            f"the call is not a Python expression: {e.msg}", offset=k
        ) from None
    if not isinstance(node, ast.Call) or node.args:
        raise ToolCallParseError("expected name(key=value, ...)", offset=k)
    name = _dotted(node.func)
    if name is None or any(kw.arg is None for kw in node.keywords):
        raise ToolCallParseError("expected name(key=value, ...)", offset=k)
    try:
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    except ValueError as e:
        raise ToolCallParseError(f"an argument is not a literal: {e}", offset=k) from None
    return ToolCall(name, args), k + len(body)


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None
