"""docs/tool_calls.md's example runs with the tiny model and prints a parsed, valid call."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = (Path(__file__).resolve().parents[1] / "docs" / "tool_calls.md").read_text(encoding="utf-8")


def test_example_runs_and_prints_a_call():
    block = re.search(
        r"<!-- tool-calls-example:begin[^>]*-->\s*```python\n(.*?)```\s*<!-- tool-calls-example:end -->",
        DOC,
        re.DOTALL,
    )
    assert block
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        exec(compile(block.group(1), "docs/tool_calls.md", "exec"), {"__name__": "__doc__"})
    out = stdout.getvalue()
    assert out.startswith("[ToolCall(name='get_weather', arguments={'city': "), out


def test_readme_links_here():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "docs/tool_calls.md" in readme
