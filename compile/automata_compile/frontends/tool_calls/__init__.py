"""Tool calls: free text with triggered calls whose arguments satisfy the named tool's schema."""

from automata_compile.frontends.tool_calls._api import compile_tool_calls
from automata_compile.frontends.tool_calls._formats import TOOL_CALL_FORMATS, ToolCallFormat
from automata_compile.frontends.tool_calls._parse import ToolCall, parse_tool_calls

__all__ = [
    "TOOL_CALL_FORMATS",
    "ToolCall",
    "ToolCallFormat",
    "compile_tool_calls",
    "parse_tool_calls",
]
