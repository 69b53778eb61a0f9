"""An on-disk cache of compiled tables: a schema compiled once loads in milliseconds after.

``compile_json_schema(..., cache_dir=D)`` (and the extraction job) keep two files per
compile, named by a key (SHA-256)::

    {D}/{stem}-{key[:16]}.npz            the tables (`TokenDFA.save`, no pickle)
    {D}/{stem}-{key[:16]}.warnings.json  the compile's warnings, replayed on each load

The key hashes the spec's kind, the spec and its options (canonical JSON), the vocabulary's
fingerprint, the tables' `FORMAT_VERSION` and `compiler_fingerprint` (the compiler's own
source files), so another schema, option, vocabulary or compiler compiles afresh: a cache
never hands back tables an older compiler built. A load replays the warnings of the compile
that wrote the files (a `SubsetWarning` names what the tables leave out each time, not only
the first); an artifact without its warnings file, or one that fails to load, is compiled
again (warned) and overwritten. Files are written under a temporary name and renamed, so a
crash or a concurrent run never leaves half a file under the final name.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import automata_compile
from automata_compile._errors import (
    AutomataError,
    OrderFallbackWarning,
    SubsetWarning,
    TokenSubsetWarning,
)
from automata_compile.tokens import FORMAT_VERSION, TokenDFA


@functools.cache
def compiler_fingerprint() -> str:
    """SHA-256 over the compiler's source files (names and bytes; read once per process)."""
    root = Path(automata_compile.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".lark") and "__pycache__" not in path.parts:
            h.update(path.relative_to(root).as_posix().encode())
            h.update(b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()


def tables_key(kind: str, spec: Any, vocab_fingerprint: str) -> str:
    """The cache key of ``spec`` (any JSON value: the schema and options) for a vocabulary."""
    payload = json.dumps(
        {
            "kind": kind,
            "spec": spec,
            "vocab": vocab_fingerprint,
            "format": FORMAT_VERSION,
            "compiler": automata_compile.__version__,
            "source": compiler_fingerprint(),
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def cached_tables(
    cache_dir: str | os.PathLike,
    *,
    kind: str,
    spec: Any,
    vocab,
    build: Callable[[], TokenDFA],
    stem: str | None = None,
) -> tuple[TokenDFA, Path | None, bool]:
    """``build()``'s tables, or those a previous call with the same key saved.

    Args:
      cache_dir: the folder (created if needed).
      kind, spec: what is compiled (``kind`` names the files unless ``stem`` does; ``spec``:
        a JSON value hashed into the key).
      vocab: the `Vocabulary` (its fingerprint is in the key; a load checks it).
      build: compiles the tables where the cache has none.
      stem: a readable file-name prefix.

    Returns:
      ``(tables, artifact, hit)``: ``artifact`` is None where it could not be written
      (warned); ``hit`` is True when the tables were loaded.
    """
    key = tables_key(kind, spec, vocab.fingerprint)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", stem or kind)[:40] or kind
    artifact = Path(cache_dir) / f"{stem}-{key[:16]}.npz"
    notes = artifact.with_suffix(".warnings.json")
    if artifact.is_file() and notes.is_file():  # an artifact without its warnings: stale
        try:
            tables = TokenDFA.load(artifact, vocab=vocab)
            caught = read_warnings(notes)
        except (AutomataError, OSError, ValueError, KeyError, TypeError) as e:
            warnings.warn(f"ignoring cached tables {artifact} ({e}); compiling again", stacklevel=3)
        else:
            for w in caught:
                warnings.warn(w, stacklevel=3)
            return tables, artifact, True
    record: list = []
    try:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")  # every one, to save; the caller's filters below
            tables = build()
    finally:  # a refusal's warnings reach the caller too (nothing is saved then)
        caught = [w.message for w in record]
        for w in caught:
            warnings.warn(w, stacklevel=3)
    try:
        artifact.parent.mkdir(parents=True, exist_ok=True)
        _replace_atomically(notes, lambda tmp: write_warnings(tmp, caught))
        _replace_atomically(artifact, tables.save)
    except OSError as e:
        warnings.warn(f"cannot cache compiled tables in {artifact}: {e}", stacklevel=3)
        return tables, None, False
    return tables, artifact, False


def _replace_atomically(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


# The compiler's warning classes a cached artifact replays by name (any other: UserWarning).
_WARNING_CLASSES = {
    c.__name__: c for c in (SubsetWarning, OrderFallbackWarning, TokenSubsetWarning)
}


def write_warnings(path: Path, caught: list[Warning]) -> None:
    """Saves warnings as JSON: class name, message, and a `SubsetWarning`'s pointer and keyword."""
    rows = [
        {
            "category": type(w).__name__,
            "message": str(w),
            "pointer": getattr(w, "pointer", ""),
            "keyword": getattr(w, "keyword", ""),
        }
        for w in caught
    ]
    path.write_text(json.dumps({"warnings": rows}, ensure_ascii=False), encoding="utf-8")


def read_warnings(path: Path) -> list[Warning]:
    """The warnings `write_warnings` saved, as instances of their classes."""
    rows = json.loads(path.read_text(encoding="utf-8"))["warnings"]
    out: list[Warning] = []
    for row in rows:
        cls = _WARNING_CLASSES.get(row["category"])
        if cls is OrderFallbackWarning:
            out.append(cls(row["message"], row["pointer"]))
        elif cls is not None:
            out.append(cls(row["message"], row["pointer"], keyword=row["keyword"]))
        else:
            out.append(UserWarning(row["message"]))
    return out
