"""Tool calls: free text with triggered calls whose arguments satisfy the named tool's schema.

`_calls` checks the inputs (`tool_calls_spec`) and builds the byte PDA (`tool_calls_pda`)
from one unit per tool (`_tools`) linked under the root (`_link`); composing it with a
vocabulary (`compile_tool_calls`) is in `automata_compile.pipeline`. `_parse` reads calls
back from text.
"""

from automata_compile.frontends.tool_calls._calls import (
    ToolCallsLayout,
    tool_calls_layout,
    tool_calls_pda,
    tool_calls_spec,
)
from automata_compile.frontends.tool_calls._formats import TOOL_CALL_FORMATS, ToolCallFormat
from automata_compile.frontends.tool_calls._parse import (
    ToolCall,
    ToolCallParseError,
    parse_tool_calls,
)
from automata_compile.frontends.tool_calls._tools import InvalidToolError, tool_unit, unit_variant

__all__ = [
    "TOOL_CALL_FORMATS",
    "InvalidToolError",
    "ToolCall",
    "ToolCallFormat",
    "ToolCallParseError",
    "ToolCallsLayout",
    "parse_tool_calls",
    "tool_calls_layout",
    "tool_calls_pda",
    "tool_calls_spec",
    "tool_unit",
    "unit_variant",
]
