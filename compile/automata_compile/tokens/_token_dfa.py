"""`TokenDFA`: the compiled token-level automaton and its `.npz` artifact format.

This module is the one contract between the compiler and the runtime: the
runtime (automata_jax) reads TokenDFAs through it, so it imports NumPy only.
The format is defined here once: a plain ``.npz`` (loaded with
``allow_pickle=False``) whose ``meta`` entry is UTF-8 JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import zipfile
import zlib
from typing import Any

import numpy as np

from automata_compile._errors import IncompatibleVocabularyError, TableFormatError

FORMAT_LABEL = "automata-jax/token-dfa"
FORMAT_VERSION = 3
# Versions `load` reads: 1 = the same file without the optional forced-run and PDA blocks;
# 2 = without the optional state blocks (``class_block`` / ``row_start``).
READABLE_VERSIONS = (1, 2, 3)
COMPILER_VERSION = "0.1.0"
DEAD = -1
_ARRAYS = ("token_class", "next_state", "accepting")
# --- forced runs (issue 12; optional arrays, absent in version-1 files) -----------------------
_FORCED_ARRAYS = ("forced_tokens", "forced_len", "forced_next")
# Optional beside them (issue 22): each state's structural draft (`tokens._forced`, rule 5).
_DRAFT_ARRAY = "structure_draft"
# --- PDA block (optional; all present or all absent) ------------------------------------------
# A token-level pushdown automaton (compiled from a grammar) is a TokenDFA plus these arrays.
# Stack symbols are state ids. A DFA is the case with none of them (no stack edits).
PDA_ARRAYS = (
    "edge_push",  # int32[Q, C]: push_seq row pushed by the context-independent edge (0 = none)
    "push_seq",  # int32[P, L]: symbols pushed, bottom first, -1 padded; row 0 = nothing
    "push_len",  # int32[P]
    "cd_state",  # int32[E]: context-dependent edges, sorted by state: the source state,
    "cd_class",  # int32[E]: the token class,
    "cd_pop",  # int32[E, K]: the symbols it pops, top of stack first, -1 padded,
    "cd_npop",  # int32[E]: how many (>= 1),
    "cd_target",  # int32[E]: the state after the token,
    "cd_push",  # int32[E]: and the push_seq row pushed after popping.
)
# --- state blocks (optional; both present or both absent) -------------------------------------
# A constraint whose states fall into NB blocks, each with its own token classes (a tool-call
# constraint: the frame and one block per tool). ``token_class`` is then int32[NB, V] and
# ``next_state`` / ``edge_push`` are flat int32[R]: state q's row is the slice of width
# ``W(class_block[q])`` at ``row_start[q]``, indexed by the classes of its block's map.
# Without them (every other constraint) the layout is the NB = 1 case stored densely:
# ``class_block`` all 0, ``row_start[q] = q * C``.
_BLOCK_ARRAYS = ("class_block", "row_start")


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
      structure_draft: int32[Q] or None (only with the forced runs), each state's structural
        draft: a token the DFA allows there, the tokenizer's spelling of forced text that has
        no forced run (``":"`` after a key); -1 where none. Speculative decoding proposes it.
      edge_push, push_seq, push_len, cd_state, cd_class, cd_pop, cd_npop, cd_target, cd_push:
        the optional PDA block (see ``PDA_ARRAYS``); None for a DFA. For a PDA, a class
        whose ``next_state`` is -1 may still be allowed by a context-dependent edge of that
        state whose popped symbols are the top of the stack; EOS is allowed iff
        ``accepting`` holds for the state and for every symbol on the stack.
      class_block, row_start: int32[Q] each, or None: the optional state blocks (see
        ``_BLOCK_ARRAYS``). With them ``token_class`` is int32[NB, V], ``next_state`` (and
        ``edge_push``) int32[R], rows are stored in state order with no gaps, every state of
        a block has the same row width, and ``cd_class`` is a class of its state's block.
        Read rows and classes through `class_map`, `row`, `push_row` and `step`, which
        cover both layouts.
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
    structure_draft: np.ndarray | None = None  # optional, with the forced runs
    edge_push: np.ndarray | None = None
    push_seq: np.ndarray | None = None
    push_len: np.ndarray | None = None
    cd_state: np.ndarray | None = None
    cd_class: np.ndarray | None = None
    cd_pop: np.ndarray | None = None
    cd_npop: np.ndarray | None = None
    cd_target: np.ndarray | None = None
    cd_push: np.ndarray | None = None
    # --- state blocks: both or none ---
    class_block: np.ndarray | None = None
    row_start: np.ndarray | None = None

    def __post_init__(self):
        if self.class_block is None and self.row_start is None:
            _validate_arrays(
                self.token_class,
                self.next_state,
                self.accepting,
                self.start,
                self.eos_ids,
                where="TokenDFA",
            )
        else:
            _validate_blocks(self, where="TokenDFA")
        _validate_forced(self, where="TokenDFA")
        _validate_pda(self, where="TokenDFA")

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

    @property
    def is_pda(self) -> bool:
        """Whether the tables carry stack edits (compiled from a grammar)."""
        return self.edge_push is not None

    def pda_arrays(self) -> dict[str, np.ndarray]:
        """The PDA block by name (empty for a DFA)."""
        return {k: getattr(self, k) for k in PDA_ARRAYS} if self.is_pda else {}

    # -- sizes --------------------------------------------------------------------------------

    @property
    def is_blocked(self) -> bool:
        """Whether the states fall into blocks with their own token classes (``class_block``)."""
        return self.class_block is not None

    @property
    def num_blocks(self) -> int:
        """NB, the number of class maps (1 without state blocks)."""
        return int(self.token_class.shape[0]) if self.is_blocked else 1

    @property
    def vocab_size(self) -> int:
        return int(self.token_class.shape[-1])

    @property
    def num_states(self) -> int:
        return int(self.accepting.shape[0])

    @property
    def num_classes(self) -> int:
        """C, the widest row (the classes of the widest block)."""
        if self.is_blocked:
            return int(self.row_width.max(initial=1))
        return int(self.next_state.shape[1])

    @property
    def num_cells(self) -> int:
        """R, the entries of ``next_state`` (Q x C without state blocks)."""
        return int(self.next_state.size)

    @functools.cached_property
    def row_width(self) -> np.ndarray:
        """int64[Q], the width of each state's row (its block's classes)."""
        if not self.is_blocked:
            return np.full(self.num_states, self.next_state.shape[1], np.int64)
        ends = np.append(np.asarray(self.row_start[1:], np.int64), self.next_state.shape[0])
        return ends - np.asarray(self.row_start, np.int64)

    @property
    def nbytes(self) -> int:
        """Bytes of the three tables (what the runtime puts on the device, before padding)."""
        base = self.token_class.nbytes + self.next_state.nbytes + self.accepting.nbytes
        blocks = sum(a.nbytes for a in self.block_arrays().values())
        return int(base + blocks + sum(a.nbytes for a in self.pda_arrays().values()))

    def block_arrays(self) -> dict[str, np.ndarray]:
        """The state blocks by name (empty without them)."""
        return {k: getattr(self, k) for k in _BLOCK_ARRAYS} if self.is_blocked else {}

    # -- the table layout: every reader of rows and classes goes through these ---------------

    def class_map(self, state: int) -> np.ndarray:
        """int32[V], the token classes of ``state``'s block."""
        if self.is_blocked:
            return self.token_class[self.class_block[state]]
        return self.token_class

    def row(self, state: int) -> np.ndarray:
        """int32[W], ``state``'s next states by class of its block (a view)."""
        if self.is_blocked:
            lo = int(self.row_start[state])
            return self.next_state[lo : lo + int(self.row_width[state])]
        return self.next_state[state]

    def push_row(self, state: int) -> np.ndarray:
        """int32[W], ``state``'s ``edge_push`` by class (a PDA only)."""
        if self.is_blocked:
            lo = int(self.row_start[state])
            return self.edge_push[lo : lo + int(self.row_width[state])]
        return self.edge_push[state]

    def classes(self, states, tokens) -> np.ndarray:
        """The class of each token in each state's block (arrays broadcast)."""
        if self.is_blocked:
            return self.token_class[self.class_block[states], tokens]
        return self.token_class[tokens]

    def cells(self, array: np.ndarray, states, classes) -> np.ndarray:
        """``array`` (``next_state`` or ``edge_push``) at (state, class), broadcast."""
        if self.is_blocked:
            return array[self.row_start[states] + classes]
        return array[states, classes]

    def blocks(self):
        """Yields ``(block, states, class map int32[V], rows int32[n, W], push rows or None)``
        per block with states (block 0, every state, without state blocks)."""
        if not self.is_blocked:
            yield 0, np.arange(self.num_states), self.token_class, self.next_state, self.edge_push
            return
        for b in range(self.num_blocks):
            states = np.flatnonzero(self.class_block == b)
            if not states.size:
                continue
            at = self.row_start[states][:, None] + np.arange(int(self.row_width[states[0]]))
            push = self.edge_push[at] if self.is_pda else None
            yield b, states, self.token_class[b], self.next_state[at], push

    def flat_rows(self, name: str = "next_state") -> np.ndarray:
        """``next_state`` (or ``edge_push``) as one flat row store, rows at `flat_starts`."""
        return getattr(self, name).reshape(-1)

    def flat_starts(self) -> np.ndarray:
        """int64[Q], where each state's row starts in `flat_rows`."""
        if self.is_blocked:
            return np.asarray(self.row_start, np.int64)
        return np.arange(self.num_states, dtype=np.int64) * self.next_state.shape[1]

    def step(self, states, tokens) -> np.ndarray:
        """The next state of each (state, token) by the context-independent edges (-1: none)."""
        return self.cells(self.next_state, states, self.classes(states, tokens))

    def dense(self) -> TokenDFA:
        """The same automaton without state blocks (classes: the common refinement of the
        blocks' maps); ``self`` if it has none. Exact, but as large as the blocks avoid."""
        if not self.is_blocked:
            return self
        cols, token_class = np.unique(self.token_class.T, axis=0, return_inverse=True)
        token_class = token_class.reshape(-1).astype(np.int32)
        zero = np.flatnonzero(~cols.any(axis=1))  # the column of all-0 classes is class 0
        order = np.concatenate([zero, np.setdiff1d(np.arange(len(cols)), zero)])
        rank = np.empty(len(cols), np.int64)
        rank[order] = np.arange(len(cols))
        token_class = rank[token_class].astype(np.int32)
        cols = cols[order]
        if not zero.size:  # no token is class 0 everywhere: keep an empty class 0
            cols = np.concatenate([np.zeros((1, cols.shape[1]), cols.dtype), cols])
            token_class += 1
        q = self.num_states
        local = cols.T[self.class_block]  # [Q, C]: each dense class in each state's block
        local[:, 0] = 0
        rs = np.asarray(self.row_start, np.int64)[:, None]
        next_state = self.next_state[rs + local].astype(np.int32)
        next_state[:, 0] = DEAD
        pda = {}
        if self.is_pda:
            edge_push = self.edge_push[rs + local].astype(np.int32)
            edge_push[:, 0] = 0
            # a context-dependent edge covers every dense class with its local class
            src, cls = np.nonzero(local[self.cd_state] == self.cd_class[:, None])
            keep = cls > 0
            src, cls = src[keep], cls[keep]
            order = np.lexsort((cls, self.cd_state[src]))
            src, cls = src[order], cls[order]
            pda = {k: getattr(self, k) for k in PDA_ARRAYS}
            pda.update(
                edge_push=edge_push,
                cd_state=self.cd_state[src],
                cd_class=cls.astype(np.int32),
                cd_pop=self.cd_pop[src],
                cd_npop=self.cd_npop[src],
                cd_target=self.cd_target[src],
                cd_push=self.cd_push[src],
            )
        del q
        return dataclasses.replace(
            self,
            token_class=token_class,
            next_state=next_state,
            class_block=None,
            row_start=None,
            **pda,
        )

    # -- NumPy reference semantics --------------------------------------------------------------

    def allowed(self, state: int, stack=()) -> np.ndarray:
        """bool[V]: tokens allowed in ``state`` (with ``stack``, bottom first, for a PDA);
        EOS ids are allowed iff the configuration accepts."""
        ok = self.row(state) >= 0
        if self.is_pda:
            for e in self._cd_edges(state):
                if self._pops_match(e, stack):
                    ok[self.cd_class[e]] = True
        mask = ok[self.class_map(state)]
        if self.accepting[state] and all(self.accepting[s] for s in stack):
            mask[list(self.eos_ids)] = True
        return mask

    def _cd_edges(self, state: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.cd_state, [state, state + 1])
        return np.arange(lo, hi)

    def _pops_match(self, e: int, stack) -> bool:
        n = int(self.cd_npop[e])
        return len(stack) >= n and all(
            int(self.cd_pop[e, i]) == int(stack[len(stack) - 1 - i]) for i in range(n)
        )

    def advance_config(self, state: int, stack: tuple, token: int):
        """``(state, stack)`` after ``token`` (stack bottom first); None if not allowed.

        EOS in an accepting configuration leaves it unchanged.
        """
        if token in self.eos_ids:
            ok = self.accepting[state] and all(self.accepting[s] for s in stack)
            return (int(state), tuple(stack)) if ok else None
        c = int(self.classes(state, token))
        nxt = int(self.cells(self.next_state, state, c))
        if nxt >= 0:
            push = self.cells(self.edge_push, state, c) if self.is_pda else 0
            return nxt, tuple(stack) + self._pushed(push)
        if not self.is_pda:
            return None
        for e in self._cd_edges(state):
            if self.cd_class[e] == c and self._pops_match(e, stack):
                kept = tuple(stack)[: len(stack) - int(self.cd_npop[e])]
                return int(self.cd_target[e]), kept + self._pushed(self.cd_push[e])
        return None

    def _pushed(self, row: int) -> tuple:
        if not self.is_pda:
            return ()
        return tuple(int(x) for x in self.push_seq[row, : self.push_len[row]])

    def walk_config(self, tokens):
        """``(state, stack)`` after a token sequence from ``start``; None once not allowed."""
        config = (self.start, ())
        for token in tokens:
            config = self.advance_config(*config, int(token))
            if config is None:
                return None
        return config

    def advance(self, state: int, token: int) -> int:
        """The state after ``token``; -1 if the token is not allowed.

        EOS in an accepting state leaves the state unchanged (the sequence is finished).
        For a PDA (``is_pda``) use `advance_config`, which carries the stack.

        Raises:
          TypeError: the tables are a PDA.
        """
        if self.is_pda:
            raise TypeError("TokenDFA.advance: this is a PDA (a grammar); use advance_config")
        if token in self.eos_ids:
            return int(state) if self.accepting[state] else DEAD
        return int(self.step(state, token))

    def walk(self, tokens) -> int:
        """The state after a token sequence from ``start``; -1 once a token is not allowed."""
        if self.is_pda:
            config = self.walk_config(tokens)
            return DEAD if config is None else config[0]
        state = self.start
        for token in tokens:
            state = self.advance(state, int(token))
            if state < 0:
                return DEAD
        return state

    def accepts(self, tokens) -> bool:
        """Whether ``tokens`` (without EOS) spell a complete string of the language."""
        config = self.walk_config(tokens)
        return config is not None and bool(
            self.accepting[config[0]] and all(self.accepting[s] for s in config[1])
        )

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
            "pda": self.is_pda,
            "blocks": self.num_blocks,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Writes the tables and metadata to ``path`` as ``.npz`` (no pickle)."""
        meta = np.frombuffer(json.dumps(self.metadata()).encode("utf-8"), dtype=np.uint8)
        forced = {}
        if self.forced_tokens is not None:
            forced = {k: getattr(self, k) for k in _FORCED_ARRAYS}
            if self.structure_draft is not None:
                forced[_DRAFT_ARRAY] = self.structure_draft
        with open(path, "wb") as f:
            np.savez_compressed(
                f,
                meta=meta,
                token_class=self.token_class,
                next_state=self.next_state,
                accepting=self.accepting,
                **forced,
                **self.pda_arrays(),
                **self.block_arrays(),
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
                if _DRAFT_ARRAY in data.files:
                    arrays[_DRAFT_ARRAY] = data[_DRAFT_ARRAY]
                pda = {k: data[k] for k in PDA_ARRAYS if k in data.files}
                blocks = {k: data[k] for k in _BLOCK_ARRAYS if k in data.files}
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
        if meta.get("bitset"):  # version 4: `tokens._bitset_file`
            raise TableFormatError(
                f"{path}: bitset any-order tables; load them with "
                "automata_compile.tokens.load_bitset_tables"
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
                structure_draft=arrays.get(_DRAFT_ARRAY),
                **pda,
                **blocks,
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
        extra = f", context_edges={self.cd_state.shape[0]}" if self.is_pda else ""
        extra += f", blocks={self.num_blocks}" if self.is_blocked else ""
        return (
            f"TokenDFA({self.spec_kind}, states={self.num_states}, classes={self.num_classes}, "
            f"vocab={self.vocab_size}{extra}, bytes={self.nbytes})"
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
    q = dfa.num_states

    def bad(msg):
        raise TableFormatError(f"{where}: {msg}")

    if all(a is None for a in arrays):
        if dfa.structure_draft is not None:
            bad("structure_draft needs the forced runs (forced_tokens, forced_len, forced_next)")
        return

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
        step = dfa.step(state[live], ft[live, j])
        if (step < 0).any():
            bad(
                f"forced run of state {int(np.flatnonzero(live)[np.argmax(step < 0)])} is not allowed"
            )
        state = state.copy()
        state[live] = step
    if not (state == fn).all():
        bad("forced_next is not the state after each forced run")
    sd = dfa.structure_draft
    if sd is not None:
        if not (isinstance(sd, np.ndarray) and sd.dtype == np.int32 and sd.shape == (q,)):
            bad(f"structure_draft must be int32[{q}], got {getattr(sd, 'dtype', type(sd))}")
        if sd.min(initial=-1) < -1 or sd.max(initial=-1) >= dfa.vocab_size:
            bad(f"structure_draft values must lie in [-1, {dfa.vocab_size})")
        has = np.flatnonzero(sd >= 0)
        if has.size and (dfa.step(has, sd[has]) < 0).any():
            bad("a structure_draft token is not allowed in its state")


def _validate_pda(dfa: TokenDFA, *, where: str) -> None:
    """Checks the optional PDA block: all or nothing, dtypes, shapes and value ranges."""
    present = [k for k in PDA_ARRAYS if getattr(dfa, k) is not None]
    if not present:
        return

    def bad(msg):
        raise TableFormatError(f"{where}: PDA block: {msg}")

    if len(present) != len(PDA_ARRAYS):
        bad(f"expected all of {', '.join(PDA_ARRAYS)}, got only {', '.join(present)}")
    a = {k: getattr(dfa, k) for k in PDA_ARRAYS}
    q, c = dfa.num_states, dfa.num_classes
    want = {"edge_push": 1 if dfa.is_blocked else 2, "push_seq": 2, "cd_pop": 2}
    for k, v in a.items():
        if not (isinstance(v, np.ndarray) and v.dtype == np.int32 and v.ndim == want.get(k, 1)):
            bad(f"{k} must be int32 of rank {want.get(k, 1)}, got {getattr(v, 'dtype', type(v))}"
                f"{getattr(v, 'shape', '')}")  # fmt: skip
    p = a["push_seq"].shape[0]
    e = a["cd_state"].shape[0]
    if a["edge_push"].shape != dfa.next_state.shape:
        bad(f"edge_push must have next_state's shape {dfa.next_state.shape}, got "
            f"{a['edge_push'].shape}")  # fmt: skip
    if p == 0 or a["push_len"].shape != (p,) or a["push_len"][0] != 0:
        bad("push_seq / push_len must have P >= 1 rows and row 0 must push nothing")
    if (a["push_len"] < 0).any() or (a["push_len"] > a["push_seq"].shape[1]).any():
        bad("push_len out of range")
    if ((a["push_seq"] < -1) | (a["push_seq"] >= q)).any():
        bad(f"push_seq symbols must lie in [-1, {q})")
    if a["edge_push"].size and (a["edge_push"].min() < 0 or a["edge_push"].max() >= p):
        bad(f"edge_push must lie in [0, {p})")
    for k in ("cd_class", "cd_npop", "cd_target", "cd_push"):
        if a[k].shape != (e,):
            bad(f"{k} must have shape [{e}] (like cd_state), got {a[k].shape}")
    if a["cd_pop"].shape[0] != e:
        bad(f"cd_pop must have {e} rows, got {a['cd_pop'].shape[0]}")
    if e:
        if (np.diff(a["cd_state"]) < 0).any():
            bad("cd_state must be sorted")
        checks = (
            ("cd_state", 0, q), ("cd_class", 1, c), ("cd_target", 0, q), ("cd_push", 0, p),
            ("cd_npop", 1, a["cd_pop"].shape[1] + 1),
        )  # fmt: skip
        for k, lo, hi in checks:
            if a[k].min() < lo or a[k].max() >= hi:
                bad(f"{k} must lie in [{lo}, {hi})")
        if dfa.is_blocked and (a["cd_class"] >= dfa.row_width[a["cd_state"]]).any():
            bad("cd_class must be a class of its state's block")
        if ((a["cd_pop"] < -1) | (a["cd_pop"] >= q)).any():
            bad(f"cd_pop symbols must lie in [-1, {q})")


def _validate_blocks(dfa: TokenDFA, *, where: str) -> None:
    """The state-block layout (``_BLOCK_ARRAYS``): dtypes, shapes, contiguous rows of one width
    per block, class maps within their block's width, and the values of ``next_state``."""

    def bad(msg):
        raise TableFormatError(f"{where}: state blocks: {msg}")

    tc, ns, acc, cb, rs = (
        dfa.token_class, dfa.next_state, dfa.accepting, dfa.class_block, dfa.row_start
    )  # fmt: skip
    for name, x, nd in (("class_block", cb, 1), ("row_start", rs, 1), ("token_class", tc, 2),
                        ("next_state", ns, 1)):  # fmt: skip
        if not (isinstance(x, np.ndarray) and x.dtype == np.int32 and x.ndim == nd):
            bad(f"{name} must be int32 of rank {nd}, got "
                f"{getattr(x, 'dtype', type(x))}{getattr(x, 'shape', '')}")  # fmt: skip
    if not (isinstance(acc, np.ndarray) and acc.dtype == np.bool_ and acc.ndim == 1):
        bad(f"accepting must be bool[Q], got {getattr(acc, 'dtype', type(acc))}")
    q, nb = acc.shape[0], tc.shape[0]
    if q == 0 or nb == 0 or ns.shape[0] == 0:
        bad(f"empty tables (Q={q}, NB={nb}, R={ns.shape[0]})")
    if cb.shape != (q,) or rs.shape != (q,):
        bad(f"class_block and row_start must have shape [{q}] (like accepting)")
    if cb.min() < 0 or cb.max() >= nb:
        bad(f"class_block values must lie in [0, {nb})")
    if rs[0] != 0 or (np.diff(rs.astype(np.int64)) <= 0).any() or rs[-1] >= ns.shape[0]:
        bad("rows must be stored in state order from 0, each at least one class wide")
    width = dfa.row_width
    per_block = np.zeros(nb, np.int64)
    per_block[cb] = width
    if (per_block[cb] != width).any():
        bad("every state of a block must have the same row width")
    if tc.size and (tc.min() < 0 or (tc.max(axis=1) >= np.maximum(per_block, 1)).any()):
        bad("token_class values must lie in [0, the width of their block's rows)")
    if not 0 <= int(dfa.start) < q:
        bad(f"start state {dfa.start} out of range [0, {q})")
    if ns.min() < DEAD or ns.max() >= q:
        bad(f"next_state values must lie in [-1, {q})")
    if (ns[rs] != DEAD).any():
        bad("class 0 must be the never-allowed class")
    for i in dfa.eos_ids:
        if not 0 <= int(i) < tc.shape[1]:
            bad(f"eos id {i} out of range [0, {tc.shape[1]})")
