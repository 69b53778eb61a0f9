"""`automata_jax.testing`'s bundled demo tokenizer (issue 13): the file its licence note
describes, declared in pyproject.toml, and usable with no mistral-common installed."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from automata_jax import testing

ROOT = Path(__file__).resolve().parents[2]


def test_bundled_tokenizer_is_the_file_its_licence_note_names():
    path = testing.default_tokenizer_path()
    assert path.parent == Path(testing.__file__).resolve().parent / "data"
    note = path.with_name(path.name + ".LICENSE").read_text(encoding="utf-8")
    assert f"sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}" in note
    assert "Apache License" in note and "Version 2.0" in note


def test_default_install_carries_the_tokenizer_and_not_mistral_common():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert not [d for d in project["dependencies"] if d.startswith("mistral-common")]
    assert [d for d in project["optional-dependencies"]["test"] if d.startswith("mistral-common")]
    assert "automata_jax/data/*.LICENSE" in project["license-files"]
    # The demo's vocabulary loads with mistral_common made unimportable.
    code = (
        "import sys; sys.modules['mistral_common'] = None\n"
        "from automata_jax import testing\n"
        "assert testing.default_vocabulary().size == 32_000\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
