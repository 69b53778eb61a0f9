"""Every notebook in colab/ runs headless, top to bottom, on the CPU (tiny random-weight model)."""

from __future__ import annotations

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


def test_the_three_notebooks_exist():
    assert {p.name for p in NOTEBOOKS} >= {
        "quickstart.ipynb",
        "batch_extraction.ipynb",
        "benchmark.ipynb",
    }


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_on_cpu(path, tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # the kernel inherits the environment
    nb = nbformat.read(path, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells if c.cell_type == "code"), (
        f"{path.name}: commit notebooks without outputs"
    )
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError with the failing cell and its traceback
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
