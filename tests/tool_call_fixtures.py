"""The tool definitions that the tool-call tests share (compiler oracle tests and device
tests), and helpers to read them whatever their style (OpenAI or plain)."""

from __future__ import annotations


def weather(city_max_length: int) -> dict:
    """``get_weather(city, days=None)`` as a plain ``{"name", "parameters"}`` tool."""
    return {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": city_max_length},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    }


GET_TIME = {
    "name": "get_time",
    "parameters": {
        "type": "object",
        "properties": {"tz": {"enum": ["UTC", "CET"]}, "utc": {"type": "boolean"}},
        "required": ["tz"],
        "additionalProperties": False,
    },
}
# A name that is a prefix of the others (the name trie branches after "get").
GET = {
    "name": "get",
    "parameters": {
        "type": "object",
        "properties": {"key": {"type": "string", "pattern": "^[a-z]+$"}},
        "required": ["key"],
        "additionalProperties": False,
    },
}
PING = {
    "name": "ping",
    "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
}

# The oracle tests' 3 tools: one in OpenAI's wrapping, a name that prefixes the others.
ORACLE_TOOLS = [{"type": "function", "function": weather(12)}, GET_TIME, GET]
# The device tests' 3 tools: short values so that a random model finishes its calls, and a
# tool without parameters.
DEVICE_TOOLS = [weather(3), GET_TIME, PING]


def params(tool: dict) -> dict:
    """A tool's parameters schema (OpenAI-wrapped or plain)."""
    return (tool.get("function") or tool)["parameters"]


def names(tools) -> list[str]:
    """The tools' names (OpenAI-wrapped or plain)."""
    return [(t.get("function") or t)["name"] for t in tools]
