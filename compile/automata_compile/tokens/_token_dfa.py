"""`TokenDFA`: the compiled token-level automaton and its `.npz` artifact format.

This module is the one contract between the compiler and the runtime: the
runtime (automata_jax) reads TokenDFAs through it, so it imports NumPy only.
The format is defined here once: a plain ``.npz`` (loaded with
``allow_pickle=False``) whose ``meta`` entry is UTF-8 JSON.
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
import zlib
from typing import Any

import numpy as np

from automata_compile._errors import IncompatibleVocabularyError, TableFormatError

FORMAT_LABEL = "automata-jax/token-dfa"
FORMAT_VERSION = 2
# Versions `load` reads: 1 = no forced runs (read as forced_len all 0).
READABLE_VERSIONS = (1, 2)
COMPILER_VERSION = "0.1.0"
DEAD = -1
_ARRAYS = ("token_class", "next_state", "accepting")
# --- forced runs (issue 12; optional arrays, absent in version-1 files) -----------------------
_FORCED_ARRAYS = ("forced_tokens", "forced_len", "forced_next")


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class TokenDFA:
    """A deterministic automaton over token ids, stored as token classes.

    Tokens with the same transition function form one class (a terminal label);
    class 0 is always the never-allowed class (special tokens, EOS, unusable
    tokens). EOS is not a class: it is allowed exactly in ``accepting`` states.

    Attributes:
      token_class: int32[V], the class of each token id (V = full id range).
      next_state: int32[Q, C], next state for (state, class); -1 = not allowed.
      accepting: bool[Q], EOS is allowed in this state.
      start: the initial state.
      eos_ids: the vocabulary's end-of-sequence token ids.
      vocab_fingerprint: identifies the vocabulary the tables were compiled for.
      spec_kind: "regex", "json_schema", "dataclass", ...
      spec: the spec text (the pattern, or the schema as JSON).
      compiler_version: version of automata_compile that built the tables.
      terminals: names of explicit terminal labels used (informational).
      forced_tokens: int32[Q, F] or None, each state's forced canonical token run, padded
        with 0 (see `automata_compile.tokens._forced` for the rule).
      forced_len: int32[Q] or None, tokens in each run (0 = nothing forced).
      forced_next: int32[Q] or None, the state after the run (the state itself if none).
    """

    token_class: np.ndarray
    next_state: np.ndarray
    accepting: np.ndarray
    start: int
    eos_ids: tuple[int, ...]
    vocab_fingerprint: str
    spec_kind: str = "regex"
    spec: str = ""
    compiler_version: str = COMPILER_VERSION
    terminals: tuple[str, ...] = ()
    # --- forced runs (issue 12): all three or none ---
    forced_tokens: np.ndarray | None = None
    forced_len: np.ndarray | None = None
    forced_next: np.ndarray | None = None

    def __post_init__(self):
        _validate_arrays(
            self.token_class,
            self.next_state,
            self.accepting,
            self.start,
            self.eos_ids,
            where="TokenDFA",
        )
        _validate_forced(self, where="TokenDFA")

    @property
    def max_forced(self) -> int:
        """F, the width of `forced_tokens` (0 without forced runs)."""
        return 0 if self.forced_tokens is None else int(self.forced_tokens.shape[1])

    def forced_run(self, state: int) -> tuple[list[int], int]:
        """(forced tokens of ``state``, the state after them); ([], state) if none."""
        if self.forced_len is None or self.forced_len[state] == 0:
            return [], int(state)
        n = int(self.forced_len[state])
        return [int(t) for t in self.forced_tokens[state, :n]], int(self.forced_next[state])

    # -- sizes --------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return int(self.token_class.shape[0])

    @property
    def num_states(self) -> int:
        return int(self.next_state.shape[0])

    @property
    def num_classes(self) -> int:
        return int(self.next_state.shape[1])

    @property
    def nbytes(self) -> int:
        """Bytes of the three tables (what the runtime puts on the device, before padding)."""
        return int(self.token_class.nbytes + self.next_state.nbytes + self.accepting.nbytes)

    # -- NumPy reference semantics --------------------------------------------------------------

    def allowed(self, state: int) -> np.ndarray:
        """bool[V]: tokens allowed in ``state``; EOS ids are allowed iff ``state`` accepts."""
        mask = self.next_state[state][self.token_class] >= 0
        if self.accepting[state]:
            mask[list(self.eos_ids)] = True
        return mask

    def advance(self, state: int, token: int) -> int:
        """The state after ``token``; -1 if the token is not allowed.

        EOS in an accepting state leaves the state unchanged (the sequence is finished).
        """
        if token in self.eos_ids:
            return int(state) if self.accepting[state] else DEAD
        return int(self.next_state[state, self.token_class[token]])

    def walk(self, tokens) -> int:
        """The state after a token sequence from ``start``; -1 once a token is not allowed."""
        state = self.start
        for token in tokens:
            state = self.advance(state, int(token))
            if state < 0:
                return DEAD
        return state

    def accepts(self, tokens) -> bool:
        """Whether ``tokens`` (without EOS) spell a complete string of the language."""
        state = self.walk(tokens)
        return state >= 0 and bool(self.accepting[state])

    # -- artifacts ------------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        return {
            "format": FORMAT_LABEL,
            "format_version": FORMAT_VERSION,
            "compiler_version": self.compiler_version,
            "vocab_fingerprint": self.vocab_fingerprint,
            "vocab_size": self.vocab_size,
            "start": int(self.start),
            "eos_ids": list(self.eos_ids),
            "spec_kind": self.spec_kind,
            "spec": self.spec,
            "terminals": list(self.terminals),
            "max_forced": self.max_forced,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Writes the tables and metadata to ``path`` as ``.npz`` (no pickle)."""
        meta = np.frombuffer(json.dumps(self.metadata()).encode("utf-8"), dtype=np.uint8)
        forced = {}
        if self.forced_tokens is not None:
            forced = {k: getattr(self, k) for k in _FORCED_ARRAYS}
        with open(path, "wb") as f:
            np.savez_compressed(
                f,
                meta=meta,
                token_class=self.token_class,
                next_state=self.next_state,
                accepting=self.accepting,
                **forced,
            )

    @classmethod
    def load(
        cls, path: str | os.PathLike, *, vocab=None, expected_fingerprint: str | None = None
    ) -> TokenDFA:
        """Reads an artifact written by `save`.

        Args:
          path: the ``.npz`` file.
          vocab: optional `Vocabulary` the tables will be used with.
          expected_fingerprint: optional fingerprint to check instead of ``vocab``.

        Raises:
          TableFormatError: the file is missing, corrupt, foreign or of another format version.
          IncompatibleVocabularyError: the tables were compiled for another vocabulary.
        """
        path = os.fspath(path)
        try:
            loaded = np.load(path, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):  # a .npy holds one bare array
                raise TableFormatError(
                    f"{path}: not an automata-jax tables file (a .npy array, not an .npz "
                    "archive); recompile it with `python -m automata_compile`."
                )
            with loaded as data:
                missing = [k for k in ("meta", *_ARRAYS) if k not in data.files]
                if missing:
                    raise TableFormatError(
                        f"{path}: not an automata-jax tables file (missing {', '.join(missing)}); "
                        "recompile it with `python -m automata_compile`."
                    )
                meta = json.loads(bytes(data["meta"]).decode("utf-8"))
                arrays = {k: data[k] for k in _ARRAYS}
                arrays.update({k: data[k] for k in _FORCED_ARRAYS if k in data.files})
        except TableFormatError:
            raise
        except FileNotFoundError as e:
            raise TableFormatError(f"{path}: no such tables file") from e
        except (
            OSError,
            ValueError,
            zipfile.BadZipFile,
            zlib.error,  # a corrupt compressed member
            NotImplementedError,  # zipfile: a corrupt header naming an unknown version / method
            RuntimeError,  # zipfile: a corrupt flag marking a member encrypted
            json.JSONDecodeError,
            UnicodeDecodeError,
            EOFError,
        ) as e:
            raise TableFormatError(
                f"{path}: corrupt or foreign tables file ({type(e).__name__}: {e}); "
                "recompile it with `python -m automata_compile`."
            ) from e
        if not isinstance(meta, dict) or meta.get("format") != FORMAT_LABEL:
            raise TableFormatError(
                f"{path}: format label is {meta.get('format') if isinstance(meta, dict) else meta!r}, expected {FORMAT_LABEL!r}"
            )
        if meta.get("format_version") not in READABLE_VERSIONS:
            raise TableFormatError(
                f"{path}: tables format version {meta.get('format_version')!r}, this library reads "
                f"versions {', '.join(map(str, READABLE_VERSIONS))}; recompile the spec with this "
                "version of automata_compile."
            )
        try:
            dfa = cls(
                token_class=arrays["token_class"],
                next_state=arrays["next_state"],
                accepting=arrays["accepting"],
                start=int(meta["start"]),
                eos_ids=tuple(int(i) for i in meta["eos_ids"]),
                vocab_fingerprint=str(meta["vocab_fingerprint"]),
                spec_kind=str(meta.get("spec_kind", "")),
                spec=str(meta.get("spec", "")),
                compiler_version=str(meta.get("compiler_version", "")),
                terminals=tuple(meta.get("terminals", ())),
                **{k: arrays.get(k) for k in _FORCED_ARRAYS},
            )
        except TableFormatError as e:
            raise TableFormatError(f"{path}: {e}") from e
        except (KeyError, TypeError, ValueError) as e:
            raise TableFormatError(f"{path}: corrupt metadata ({type(e).__name__}: {e})") from e
        if vocab is not None:
            expected_fingerprint = vocab.fingerprint
        if expected_fingerprint is not None:
            dfa.check_vocabulary(expected_fingerprint, where=path)
        return dfa

    def check_vocabulary(self, fingerprint: str, *, where: str = "TokenDFA") -> None:
        """Raises IncompatibleVocabularyError unless the tables were built for ``fingerprint``."""
        if fingerprint != self.vocab_fingerprint:
            raise IncompatibleVocabularyError(
                f"{where}: tables were compiled for vocabulary {self.vocab_fingerprint[:16]}…, "
                f"but the vocabulary in use is {fingerprint[:16]}…; recompile the spec "
                f"({self.spec_kind}) for this tokenizer."
            )

    def __repr__(self) -> str:
        return (
            f"TokenDFA({self.spec_kind}, states={self.num_states}, classes={self.num_classes}, "
            f"vocab={self.vocab_size}, bytes={self.nbytes})"
        )


def _validate_arrays(token_class, next_state, accepting, start, eos_ids, *, where: str) -> None:
    def bad(msg):
        raise TableFormatError(f"{where}: {msg}")

    if not (
        isinstance(token_class, np.ndarray)
        and token_class.dtype == np.int32
        and token_class.ndim == 1
    ):
        bad(
            f"token_class must be int32[V], got {getattr(token_class, 'dtype', type(token_class))}{getattr(token_class, 'shape', '')}"
        )
    if not (
        isinstance(next_state, np.ndarray) and next_state.dtype == np.int32 and next_state.ndim == 2
    ):
        bad(
            f"next_state must be int32[Q, C], got {getattr(next_state, 'dtype', type(next_state))}{getattr(next_state, 'shape', '')}"
        )
    if not (
        isinstance(accepting, np.ndarray)
        and accepting.dtype == np.bool_
        and accepting.shape == next_state.shape[:1]
    ):
        bad(
            f"accepting must be bool[{next_state.shape[0]}], got {getattr(accepting, 'dtype', type(accepting))}{getattr(accepting, 'shape', '')}"
        )
    q, c = next_state.shape
    if q == 0 or c == 0:
        bad(f"empty tables (Q={q}, C={c})")
    if not 0 <= int(start) < q:
        bad(f"start state {start} out of range [0, {q})")
    if token_class.size and (token_class.min() < 0 or token_class.max() >= c):
        bad(f"token_class values must lie in [0, {c})")
    if next_state.min() < DEAD or next_state.max() >= q:
        bad(f"next_state values must lie in [-1, {q})")
    if (next_state[:, 0] != DEAD).any():
        bad("class 0 must be the never-allowed class")
    for i in eos_ids:
        if not 0 <= int(i) < token_class.shape[0]:
            bad(f"eos id {i} out of range [0, {token_class.shape[0]})")


def _validate_forced(dfa: TokenDFA, *, where: str) -> None:
    """The forced-run arrays: all three or none, shapes, ranges, and every run allowed."""
    arrays = [dfa.forced_tokens, dfa.forced_len, dfa.forced_next]
    if all(a is None for a in arrays):
        return
    q = dfa.num_states

    def bad(msg):
        raise TableFormatError(f"{where}: {msg}")

    if any(a is None for a in arrays):
        bad("forced_tokens, forced_len and forced_next come together (all three or none)")
    ft, fl, fn = arrays
    for name, a, nd in (("forced_tokens", ft, 2), ("forced_len", fl, 1), ("forced_next", fn, 1)):
        if not (isinstance(a, np.ndarray) and a.dtype == np.int32 and a.ndim == nd):
            bad(f"{name} must be int32 of rank {nd}, got {getattr(a, 'dtype', type(a))}")
        if a.shape[0] != q:
            bad(f"{name} must have {q} rows (one per state), got {a.shape[0]}")
    if fl.min(initial=0) < 0 or fl.max(initial=0) > ft.shape[1]:
        bad(f"forced_len values must lie in [0, {ft.shape[1]}]")
    if ft.min(initial=0) < 0 or ft.max(initial=0) >= dfa.vocab_size:
        bad(f"forced_tokens values must lie in [0, {dfa.vocab_size})")
    # Every forced token is allowed from the state it is fed in, and ends in forced_next.
    state = np.arange(q)
    for j in range(ft.shape[1]):
        live = fl > j
        step = dfa.next_state[state[live], dfa.token_class[ft[live, j]]]
        if (step < 0).any():
            bad(
                f"forced run of state {int(np.flatnonzero(live)[np.argmax(step < 0)])} is not allowed"
            )
        state = state.copy()
        state[live] = step
    if not (state == fn).all():
        bad("forced_next is not the state after each forced run")
