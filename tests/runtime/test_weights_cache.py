"""The dequantized-weights cache: same params as a fresh load, keyed by SHA-256 and dtype,
64-byte aligned (so that a load maps the file without copying), stale or corrupt files rebuilt,
file digests remembered until the file changes."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from automata_jax.models import _weights_cache as wc
from automata_jax.models import load_gguf

gguf = pytest.importorskip("gguf")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gguf_fixtures import CFG, random_hf_state_dict, write_gguf  # noqa: E402


def same(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x, np.float32), np.asarray(y, np.float32))


@pytest.fixture
def tiny_gguf(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_gguf(path, random_hf_state_dict(CFG, seed=7), CFG)
    return path


@pytest.mark.parametrize("dtype", [None, jnp.bfloat16])
def test_cached_load_is_the_fresh_load(tmp_path, tiny_gguf, dtype):
    cache = tmp_path / "cache"
    fresh = load_gguf(tiny_gguf, dtype=dtype)
    first = load_gguf(tiny_gguf, dtype=dtype, cache_dir=cache)
    files = list((cache / "weights").iterdir())
    assert len(files) == 1
    sha = wc.file_sha256(tiny_gguf)
    name = "float32" if dtype is None else "bfloat16"
    assert files[0].name == f"tiny-{sha[:16]}-{name}.safetensors"
    second = load_gguf(tiny_gguf, dtype=dtype, cache_dir=cache)
    for config, params in (first, second):
        assert config == fresh[0]
        same(params, fresh[1])
    # The data starts 64-byte aligned, and the arrays are the mapped file (no copy).
    data = files[0].read_bytes()
    assert (8 + int.from_bytes(data[:8], "little")) % 64 == 0
    header = json.loads(data[8 : 8 + int.from_bytes(data[:8], "little")])
    assert header["__metadata__"]["gguf_sha256"] == sha
    # A readable safetensors file for other tools too.
    from safetensors.numpy import load_file

    flat = load_file(str(files[0]))
    np.testing.assert_array_equal(
        flat["layer_1.q_proj"].astype(np.float32),
        np.asarray(second[1]["layer_1"]["q_proj"], np.float32),
    )


def test_stale_and_corrupt_files_are_rebuilt(tmp_path, tiny_gguf):
    cache = tmp_path / "cache"
    _, params = load_gguf(tiny_gguf, cache_dir=cache)
    (file,) = (cache / "weights").iterdir()
    file.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.warns(UserWarning, match="ignoring the cached weights"):
        _, again = load_gguf(tiny_gguf, cache_dir=cache)
    same(again, params)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, third = load_gguf(tiny_gguf, cache_dir=cache)  # rewritten: a clean hit
    same(third, params)
    # A changed GGUF (new digest) gets its own file.
    write_gguf(tiny_gguf, random_hf_state_dict(CFG, seed=8), CFG)
    _, changed = load_gguf(tiny_gguf, cache_dir=cache)
    assert len(list((cache / "weights").iterdir())) == 2
    assert not np.array_equal(changed["layer_0"]["q_proj"], params["layer_0"]["q_proj"])


def test_sha256_is_remembered_until_the_file_changes(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    cache = tmp_path / "c"
    digest = wc.file_sha256(path, cache)
    assert digest == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    memo = json.loads((cache / "sha256.json").read_text())
    memo[str(path.resolve())]["sha256"] = "remembered"
    (cache / "sha256.json").write_text(json.dumps(memo))
    assert wc.file_sha256(path, cache) == "remembered"  # not hashed again
    path.write_bytes(b"abcd")
    os.utime(path, ns=(1, 1))
    assert wc.file_sha256(path, cache) == wc.file_sha256(path)  # changed: hashed again
    (cache / "sha256.json").write_text("{broken")
    assert wc.file_sha256(path, cache) == wc.file_sha256(path)


def test_missing_file(tmp_path):
    from automata_jax.models import CheckpointError

    with pytest.raises(CheckpointError, match="no such GGUF file"):
        load_gguf(tmp_path / "nope.gguf", cache_dir=tmp_path)
