"""The Colab notebooks' install cell and badges (tests/test_notebooks.py runs the notebooks).

On Colab the first code cell must install the package so that the *same* kernel imports
it (a regular install, not ``pip install -e``, whose path hook needs a restart), from
the repository URL, without upgrading Colab's preinstalled jax. Here the cell runs with
a fake ``google.colab`` module and a recording ``subprocess.run``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "colab").glob("*.ipynb"))
README = (ROOT / "README.md").read_text(encoding="utf-8")
REPO_URL = re.search(r"`REPO_URL`: `(https://[^`]+)`", README).group(1)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _setup_cell(path: Path) -> str:
    return "".join(next(c for c in _cells(path) if c["cell_type"] == "code")["source"])


def _colab_badge(name: str) -> str:
    github = REPO_URL.removeprefix("https://github.com/")
    return (
        "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        f"(https://colab.research.google.com/github/{github}/blob/main/colab/{name})"
    )


def test_the_three_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "batch_extraction.ipynb",
        "benchmark.ipynb",
        "quickstart.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_badges_in_the_readme_and_the_notebook(path):
    badge = _colab_badge(path.name)
    assert badge in README
    assert badge in "".join(_cells(path)[0]["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_install_cell_on_colab_is_a_regular_install_that_keeps_jax(path, tmp_path, monkeypatch):
    pytest.importorskip("jax", reason="the cell imports jax (pip install jax)")
    source = _setup_cell(path)
    assert f'REPO_URL = "{REPO_URL}"' in source
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        # What pip is told not to change: read the constraints file while it exists.
        index = cmd.index("-c")
        calls.append(Path(cmd[index + 1]).read_text().split())
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.chdir(tmp_path)
    exec(compile(source, f"{path.name}:setup", "exec"), {"__name__": "__colab__"})

    (cmd, pins), *more = [calls[i : i + 2] for i in range(0, len(calls), 2)]
    assert not more
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"]
    assert not {"-e", "--editable", "-U", "--upgrade"} & set(cmd)
    assert cmd[-1] == f"automata-jax[gemma,demo] @ git+{REPO_URL}"
    assert f"jax=={metadata.version('jax')}" in pins
    assert f"jaxlib=={metadata.version('jaxlib')}" in pins
    assert f"numpy=={metadata.version('numpy')}" in pins


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_install_cell_elsewhere_installs_nothing(path, tmp_path, monkeypatch):
    pytest.importorskip("jax", reason="the cell imports jax (pip install jax)")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("installed off Colab"))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.chdir(tmp_path)
    exec(compile(_setup_cell(path), f"{path.name}:setup", "exec"), {"__name__": "__colab__"})
    assert not list(tmp_path.iterdir())


def test_docs_colab_snippet_is_a_regular_install_from_the_repo_url():
    """docs/runtime.md's Colab TPU snippet installs from README.md's REPO_URL."""
    runtime = (ROOT / "docs" / "runtime.md").read_text(encoding="utf-8")
    section = re.search(
        r"^## Real Gemma weights on a Colab TPU\n(.*?)(?=^## |\Z)",
        runtime,
        re.MULTILINE | re.DOTALL,
    )
    snippet = re.search(r"```python\n(.*?)```", section.group(1), re.DOTALL).group(1)
    assert f'REPO_URL = "{REPO_URL}"' in snippet and "git+{REPO_URL}" in snippet
    assert "pip install" in snippet and " -e " not in snippet and "-c constraints.txt" in snippet
