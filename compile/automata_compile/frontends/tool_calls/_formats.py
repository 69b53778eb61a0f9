"""Tool-call formats: how a call is opened, spelled and closed in a model's output.

A format is a trigger (the text that opens a call, recognized anywhere in free text,
across token boundaries), a call style, and an end tag:

* ``style="json"``: ``{"name": "NAME", "arguments": ARGS}`` where ARGS is a JSON text
  valid under the tool's parameters schema (one optional space after ``:`` and ``,``
  of the envelope, as ``json.dumps`` writes it, or none);
* ``style="python"``: ``NAME(key=VALUE, ...)`` with the declared parameters as keyword
  arguments, in declared order (optional ones may be left out), each VALUE a Python
  literal of a valid value (``True``/``False``/``None``, numbers, ``"strings"`` with
  JSON escapes, lists, dicts with string keys), separated by ``", "`` or ``","``.

Built-in formats (`TOOL_CALL_FORMATS`):

``"hermes"`` (JSON in tags)
  ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` (both newlines
  optional). The chat templates of Hermes 2 Pro / Hermes 3, Qwen 2.5 and Qwen 3 (and
  models fine-tuned on them) use exactly this.
``"gemma"`` (Python calls in a fence)
  ``\\`\\`\\`tool_code\\nNAME(key=value)\\n\\`\\`\\``` as in Google's function-calling
  guide for Gemma 3 (Gemma has no tool tokens; its prompts ask for Python calls);
  also fits other models prompted for Python-style calls (BFCL's prompt format).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ToolCallFormat:
    """A tool-call format (see the module docstring).

    Attributes:
      name: a label (recorded in the compiled artifact's spec).
      trigger: the text that opens a call; free text never contains it otherwise.
      end: the text that closes a call.
      style: ``"json"`` or ``"python"``.
      after_trigger: optional text accepted right after the trigger (e.g. ``"\\n"``).
      before_end: optional text accepted right before ``end``.
      arguments_key: the JSON envelope's key of the arguments (``style="json"``).
    """

    name: str
    trigger: str
    end: str
    style: str = "json"
    after_trigger: str = ""
    before_end: str = ""
    arguments_key: str = "arguments"

    def __post_init__(self):
        if self.style not in ("json", "python"):
            raise ValueError(f"ToolCallFormat.style must be 'json' or 'python', got {self.style!r}")
        for field in ("trigger", "end"):
            if not isinstance(getattr(self, field), str) or not getattr(self, field):
                raise ValueError(f"ToolCallFormat.{field} must be a non-empty string")
        if self.before_end and self.before_end[0] == self.end[0]:
            raise ValueError("ToolCallFormat.before_end must not start like end")
        if '"' in self.arguments_key or "\\" in self.arguments_key:
            raise ValueError(f"ToolCallFormat.arguments_key {self.arguments_key!r}: no quotes")


TOOL_CALL_FORMATS = {
    "hermes": ToolCallFormat(
        name="hermes",
        trigger="<tool_call>",
        end="</tool_call>",
        style="json",
        after_trigger="\n",
        before_end="\n",
    ),
    "gemma": ToolCallFormat(
        name="gemma",
        trigger="```tool_code\n",
        end="\n```",
        style="python",
    ),
}


def resolve(fmt) -> ToolCallFormat:
    """A `ToolCallFormat` from itself or a built-in name."""
    if isinstance(fmt, ToolCallFormat):
        return fmt
    got = TOOL_CALL_FORMATS.get(fmt)
    if got is None:
        raise ValueError(
            f"no built-in tool-call format {fmt!r}; expected one of "
            f"{', '.join(TOOL_CALL_FORMATS)} or a ToolCallFormat"
        )
    return got
