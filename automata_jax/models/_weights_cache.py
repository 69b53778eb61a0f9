"""A cache of dequantized GGUF weights, so that a second start loads them in about a second.

Dequantizing a GGUF takes seconds (10 s for Gemma-3 270M Q4_K_M on 2 CPU cores). The result is
stored once as a safetensors file (no pickle) named by the GGUF's SHA-256 and the dtype::

    {cache_dir}/weights/{gguf stem}-{sha256[:16]}-{dtype}.safetensors

whose metadata holds a format label, the full SHA-256, the dtype and the `Gemma3Config` (JSON);
a file whose metadata does not match is ignored and rewritten. Files are written to a
temporary name and renamed, so a crash never leaves half a file under the final name.

The tensor data is laid out 64-byte aligned (the header is padded), so a later load maps the
file and hands each tensor to ``jax.device_put``, which on CPU uses the mapped memory without a
copy: the load itself costs milliseconds, and pages are read as the model touches them.

Hashing a 240 MB file takes about a second, so `file_sha256` remembers each file's digest by
(path, size, mtime, inode) in ``{cache_dir}/sha256.json``; a changed file is hashed again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from automata_jax.models.gemma3 import Gemma3Config, Params

FORMAT = "automata_jax/gemma3-params/v1"


def default_cache_dir() -> Path:
    """``$AUTOMATA_JAX_CACHE``, else ``$XDG_CACHE_HOME/automata_jax``, else
    ``~/.cache/automata_jax``."""
    env = os.environ.get("AUTOMATA_JAX_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "automata_jax"


def file_sha256(path: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> str:
    """The SHA-256 hex digest of a file, remembered in ``cache_dir`` (when given) by the
    file's path, size, modification time and inode."""
    path = Path(path).resolve()
    st = path.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    memo_path = None if cache_dir is None else Path(cache_dir) / "sha256.json"
    memo: dict[str, Any] = {}
    if memo_path is not None:
        try:
            memo = json.loads(memo_path.read_text("utf-8"))
            entry = memo.get(str(path))
            if isinstance(entry, dict) and entry.get("stamp") == stamp:
                return str(entry["sha256"])
        except (OSError, ValueError, KeyError, AttributeError):
            memo = {}
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            h.update(block)
    digest = h.hexdigest()
    if memo_path is not None:
        memo = memo if isinstance(memo, dict) else {}
        memo[str(path)] = {"stamp": stamp, "sha256": digest}
        _atomic_write(memo_path, lambda tmp: tmp.write_text(json.dumps(memo, indent=0), "utf-8"))
    return digest


def cached_params(
    gguf_path: Path,
    dtype_name: str,
    cache_dir: str | os.PathLike,
    build: Callable[[], tuple[Gemma3Config, Params]],
) -> tuple[Gemma3Config, Params]:
    """The params of ``gguf_path`` in ``dtype_name`` from the cache, else ``build()`` them and
    store them (a failure to store is a warning, not an error)."""
    import jax

    cache_dir = Path(cache_dir)
    sha = file_sha256(gguf_path, cache_dir)
    file = cache_dir / "weights" / f"{gguf_path.stem[:40]}-{sha[:16]}-{dtype_name}.safetensors"
    hit = _read(file, sha, dtype_name)
    if hit is not None:
        config, flat = hit
        return config, _unflatten({k: jax.device_put(v) for k, v in flat.items()})
    config, params = build()
    try:
        _write(file, sha, dtype_name, config, params)
    except OSError as e:
        import warnings

        warnings.warn(f"cannot cache the dequantized weights in {file}: {e}", stacklevel=3)
    return config, params


_ALIGN = 64
_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def _read(file: Path, sha: str, dtype_name: str):
    """``(config, name -> array)`` memory-mapped from ``file``, or None when absent/stale."""
    if not file.is_file():
        return None
    try:
        import ml_dtypes

        data = np.memmap(file, dtype=np.uint8, mode="r")
        n = int(data[:8].view("<u8")[0])
        header = json.loads(bytes(data[8 : 8 + n]))
        meta = header.pop("__metadata__", {})
        if (
            meta.get("format") != FORMAT
            or meta.get("gguf_sha256") != sha
            or meta.get("dtype") != dtype_name
        ):
            return None
        config = Gemma3Config(**_config_fields(json.loads(meta["config"])))
        flat = {}
        for name, info in header.items():
            kind = _DTYPES[info["dtype"]]
            dtype = np.dtype(ml_dtypes.bfloat16 if kind == "bfloat16" else kind)
            begin, end = info["data_offsets"]
            raw = data[8 + n + begin : 8 + n + end]
            flat[name] = raw.view(dtype).reshape(info["shape"])
    except Exception as e:  # a corrupt or foreign file: rebuild it
        import warnings

        warnings.warn(f"ignoring the cached weights {file} ({e}); rebuilding", stacklevel=4)
        return None
    return config, flat


def _write(file: Path, sha: str, dtype_name: str, config: Gemma3Config, params: Params) -> None:
    from safetensors.numpy import save_file

    flat = {k: np.asarray(v) for k, v in _flatten(params).items()}
    meta = {
        "format": FORMAT,
        "gguf_sha256": sha,
        "dtype": dtype_name,
        "config": json.dumps(dataclasses.asdict(config)),
        "pad": "",
    }

    def write(tmp: Path) -> None:
        save_file(flat, str(tmp), metadata=meta)
        with open(tmp, "rb") as f:  # pad the header so that the data starts 64-byte aligned
            start = 8 + int.from_bytes(f.read(8), "little")
        if start % _ALIGN:
            meta["pad"] = " " * (-start % _ALIGN)  # a multiple of 8, like the header's padding
            save_file(flat, str(tmp), metadata=meta)

    _atomic_write(file, write)


def _atomic_write(file: Path, write: Callable[[Path], Any]) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, file)
    finally:
        if tmp.exists():
            tmp.unlink()


def _config_fields(obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("layer_types") is not None:
        obj["layer_types"] = tuple(obj["layer_types"])
    return obj


def _flatten(params: Params) -> dict[str, Any]:
    flat = {}
    for key, value in params.items():
        if isinstance(value, dict):
            for name, leaf in value.items():
                flat[f"{key}.{name}"] = leaf
        else:
            flat[key] = value
    return flat


def _unflatten(flat: dict[str, Any]) -> Params:
    params: Params = {}
    for key, value in flat.items():
        head, _, name = key.partition(".")
        if name:
            params.setdefault(head, {})[name] = value
        else:
            params[head] = value
    return params
