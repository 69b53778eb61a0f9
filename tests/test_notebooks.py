"""Every notebook in colab/ runs headless, top to bottom, on the CPU (tiny random-weight model)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbclient = pytest.importorskip(
    "nbclient", reason="nbclient is not installed (pip install nbclient)"
)
nbformat = pytest.importorskip(
    "nbformat", reason="nbformat is not installed (pip install nbformat)"
)

COLAB = Path(__file__).resolve().parents[1] / "colab"
NOTEBOOKS = sorted(COLAB.glob("*.ipynb"))
CELL_TIMEOUT_S = 120
KERNEL = "automata-jax-test"


def test_the_three_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} >= {
        "quickstart.ipynb",
        "batch_extraction.ipynb",
        "benchmark.ipynb",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_cpu(path, tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # the kernel inherits the environment
    monkeypatch.setenv("AUTOMATA_JAX_NOTEBOOK_MODEL", "tiny")  # not the real model, if installed
    # A kernel spec for this very interpreter (a virtual environment's python, not whatever
    # "python3" kernel a user or system directory declares); JUPYTER_PATH is searched first.
    spec = tmp_path / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": KERNEL, "language": "python"})
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{path.name}: commit notebooks without outputs"
    )
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(tmp_path)}},
        allow_errors=False,
    )
    client.execute()  # raises CellExecutionError with the failing cell and its traceback
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
