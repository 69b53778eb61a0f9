"""`BitsetTables` in the tables file (`TokenDFA`'s ``.npz`` format, version 4: the bitset block).

A bitset file is a `TokenDFA` file (label ``automata-jax/token-dfa``, ``meta`` JSON plus
``token_class`` / ``next_state`` / ``accepting``) whose metadata says ``"bitset": true`` and
whose format version is `BITSET_FORMAT_VERSION` (4): a reader of versions 1-3 refuses it with
its version error, and `TokenDFA.load` of this version refuses it by name (the table read
with every bitset is not the language). The block: every array field of `BitsetTables` as
``bitset.<field>``, its other fields in the metadata, and the forced runs (``forced_tokens``,
``forced_len``, ``forced_next`` as in a `TokenDFA` file, plus ``bitset.forced_clear`` /
``bitset.forced_set`` and the runs' texts). ``block_sha256`` in the metadata covers every
array of the file (names, dtypes, shapes, bytes) and the fields: `load_bitset_tables` refuses
a file whose block does not match it. No pickle.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import zipfile
import zlib

import numpy as np

from automata_compile._errors import IncompatibleVocabularyError, TableFormatError
from automata_compile.tokens._bitset_compose import BitsetTables
from automata_compile.tokens._bitset_forced import BitsetForcedRuns
from automata_compile.tokens._token_dfa import COMPILER_VERSION, FORMAT_LABEL

BITSET_FORMAT_VERSION = 4
_PREFIX = "bitset."
_FORCED = ("forced_tokens", "forced_len", "forced_next")


def _digest(arrays: dict[str, np.ndarray], fields: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    h.update(json.dumps(fields, sort_keys=True).encode())
    return h.hexdigest()


def _texts(items) -> list[str]:
    return [base64.b64encode(x).decode("ascii") for x in items]


def save_bitset_tables(t: BitsetTables, path: str | os.PathLike, *, vocab_fingerprint: str):
    """Writes ``t`` to ``path`` (see the module docstring); ``vocab_fingerprint``: the
    vocabulary it was compiled for (``vocab.fingerprint``), checked by `load_bitset_tables`.

    Raises:
      TypeError: a field of ``t`` that is neither an array, nor a JSON value, nor the runs.
    """
    arrays: dict[str, np.ndarray] = {}
    fields: dict = {}
    forced_meta = None
    for f in dataclasses.fields(t):
        v = getattr(t, f.name)
        if f.name == "forced":
            if v is None:
                continue
            arrays.update(forced_tokens=v.tokens, forced_len=v.length, forced_next=v.next)
            if getattr(v, "clear", None) is not None:
                arrays[_PREFIX + "forced_clear"] = v.clear
                arrays[_PREFIX + "forced_set"] = v.set
            forced_meta = {"text": _texts(v.text), "context": _texts(v.context)}
        elif isinstance(v, np.ndarray):
            arrays[_PREFIX + f.name] = v
        elif v is None or isinstance(v, (bool, int, float, str, tuple, list)):
            fields[f.name] = list(v) if isinstance(v, tuple) else v
        else:
            raise TypeError(f"save_bitset_tables: cannot store field {f.name!r} ({type(v)})")
    for name in ("token_class", "next_state", "accepting"):  # TokenDFA's required arrays
        arrays[name] = arrays[_PREFIX + name]
    meta = {
        "format": FORMAT_LABEL,
        "format_version": BITSET_FORMAT_VERSION,
        "bitset": True,
        "compiler_version": COMPILER_VERSION,
        "vocab_fingerprint": vocab_fingerprint,
        "start": int(t.start),
        "eos_ids": [int(e) for e in t.eos_ids],
        "fields": fields,
        "forced": forced_meta,
    }
    meta["block_sha256"] = _digest(arrays, {"fields": fields, "forced": forced_meta})
    raw = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as out:
        np.savez_compressed(out, meta=raw, **arrays)


def load_bitset_tables(
    path: str | os.PathLike, *, vocab=None, expected_fingerprint: str | None = None
) -> BitsetTables:
    """Reads a file written by `save_bitset_tables`.

    Raises:
      TableFormatError: missing, corrupt or foreign file; another format version; not a
        bitset file (a plain `TokenDFA`'s: load it with `TokenDFA.load`); a block that does
        not match its ``block_sha256``.
      IncompatibleVocabularyError: compiled for another vocabulary than ``vocab`` /
        ``expected_fingerprint``.
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode("utf-8"))
            arrays = {k: data[k] for k in data.files if k != "meta"}
    except FileNotFoundError as e:
        raise TableFormatError(f"{path}: no such tables file") from e
    except (
        OSError,
        ValueError,
        KeyError,
        AttributeError,
        zipfile.BadZipFile,
        zlib.error,
        NotImplementedError,
        RuntimeError,
        json.JSONDecodeError,
        UnicodeDecodeError,
        EOFError,
    ) as e:
        raise TableFormatError(
            f"{path}: corrupt or foreign tables file ({type(e).__name__}: {e})"
        ) from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_LABEL:
        raise TableFormatError(f"{path}: not an automata-jax tables file")
    if not meta.get("bitset"):
        raise TableFormatError(
            f"{path}: a token-DFA tables file without the bitset block; load it with TokenDFA.load"
        )
    if meta.get("format_version") != BITSET_FORMAT_VERSION:
        raise TableFormatError(
            f"{path}: bitset tables format version {meta.get('format_version')!r}, this "
            f"library reads version {BITSET_FORMAT_VERSION}; recompile the schema with "
            "compile_json_schema_bitset"
        )
    try:
        fields = dict(meta["fields"])
        forced_meta = meta["forced"]
        if _digest(arrays, {"fields": fields, "forced": forced_meta}) != meta["block_sha256"]:
            raise TableFormatError(f"{path}: the bitset block does not match its block_sha256")
        kw = {}
        for f in dataclasses.fields(BitsetTables):
            if f.name == "forced":
                continue
            if _PREFIX + f.name in arrays:
                kw[f.name] = arrays[_PREFIX + f.name]
            elif f.name in fields:
                v = fields[f.name]
                kw[f.name] = tuple(v) if isinstance(v, list) else v  # tuples (eos_ids, ...)
        forced = None
        if forced_meta is not None:
            forced = BitsetForcedRuns(
                tokens=arrays["forced_tokens"],
                length=arrays["forced_len"],
                next=arrays["forced_next"],
                draft=np.full(len(arrays["forced_len"]), -1, np.int32),  # none on bitset tables
                text=tuple(base64.b64decode(x) for x in forced_meta["text"]),
                context=tuple(base64.b64decode(x) for x in forced_meta["context"]),
                clear=arrays.get(_PREFIX + "forced_clear"),
                set=arrays.get(_PREFIX + "forced_set"),
            )
        t = BitsetTables(**kw, forced=forced)
    except TableFormatError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise TableFormatError(f"{path}: corrupt metadata ({type(e).__name__}: {e})") from e
    want = vocab.fingerprint if vocab is not None else expected_fingerprint
    if want is not None and want != meta.get("vocab_fingerprint"):
        raise IncompatibleVocabularyError(
            f"{path}: bitset tables were compiled for vocabulary "
            f"{str(meta.get('vocab_fingerprint'))[:16]}…, but the vocabulary in use is "
            f"{want[:16]}…; recompile the schema for this tokenizer."
        )
    return t
