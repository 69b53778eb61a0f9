"""`ConstraintTables`: one or many `TokenDFA`s as one pytree of device arrays.

Each constraint's tables are padded to bucketed sizes (states, classes and the
number of constraints rounded up to powers of two), so a second constraint set of
the same bucket has the same shapes and reuses every compiled kernel and loop.
The vocabulary axis is the model's logits width.

Grammar constraints (`TokenDFA.is_pda`) add the PDA block, padded the same way
(a DFA in the same batch gets no stack edits), and fix the static stack bound S
(``stack_size``; see `_stack` for its semantics).

A `TableCapacity` fixes every padded size instead (states, classes, constraints, the
stack and the PDA block, forced runs, bitmask rows): tables built with one capacity
have the same shapes, dtypes and static fields whatever their constraints, so a new
schema's tables swap into an already compiled decoding loop with no retrace. A
constraint that does not fit raises `TableCapacityError` naming the dimension, what it
needs and the capacity (see docs/capacity.md).
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import jax
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Int, UInt32

from automata_compile import IncompatibleVocabularyError, TokenDFA
from automata_jax._errors import (
    RuntimeShapeError,
    TableCapacityError,
)

MASK_GATHER = "gather"
MASK_BITMASK = "bitmask"
MASK_IMPLS = (MASK_GATHER, MASK_BITMASK)
DEFAULT_MASK_IMPL = MASK_GATHER  # see the module docstring of `_constraint` for the numbers
DEFAULT_STACK_SIZE = 64  # S for batches with a grammar (see `_stack`)


@dataclasses.dataclass(frozen=True)
class TableCapacity:
    """Fixed padded sizes of `ConstraintTables` (hashable, a static configuration).

    Tables built with one capacity have one pytree structure, shapes and static fields, so
    jitted kernels and `generate`'s loop compiled for one set of constraints run any other
    that fits, with no retrace. Every field is an upper bound per constraint (``constraints``:
    of the batch); padding allows nothing.

    Attributes:
      states, classes: Q and C of ``next_state`` (a compiled `TokenDFA`'s ``num_states``
        and ``num_classes`` must not exceed them).
      constraints: K, the constraints of one batch.
      stack: S, the stack bound of grammar (PDA) rows; 0: the batch may hold DFAs only.
        With ``stack > 0`` the PDA block is always present (a DFA gets no stack edits).
      pushes, push_len, context_edges, edges_per_state, pops: the PDA block's sizes (push
        rows and their length, context-dependent edges, those of one state, symbols one
        edge pops); used only with ``stack > 0``.
      forced: F, the longest forced token run kept for fast-forward decoding (0: no forced
        runs; a longer run is cut to its first F tokens, which are forced too).
      mask_rows: M, the deduplicated bitmask rows (``mask_impl="bitmask"`` only).
    """

    states: int
    classes: int
    constraints: int = 1
    stack: int = 0
    pushes: int = 64
    push_len: int = 16
    context_edges: int = 1024
    edges_per_state: int = 64
    pops: int = 16
    forced: int = 0
    mask_rows: int = 0

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            low = 1 if f.name in ("states", "classes", "constraints") else 0
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                raise RuntimeShapeError(
                    f"TableCapacity.{f.name}: expected an int >= {low}, got {v!r}"
                )
            object.__setattr__(self, f.name, int(v))
        if self.stack and not (self.pushes and self.push_len and self.pops):
            raise RuntimeShapeError(
                "TableCapacity: a capacity with a stack needs pushes, push_len and pops >= 1"
            )

    @classmethod
    def fitting(
        cls, dfas: Sequence[TokenDFA], *, headroom: float = 2.0, stack: int | None = None
    ) -> TableCapacity:
        """A capacity that fits every DFA of ``dfas`` one at a time (``constraints=1``),
        each size times ``headroom`` rounded up to a power of two, so that similar
        constraints fit too; ``stack``: default 64 where one is a PDA, else 0."""
        if not dfas:
            raise RuntimeShapeError("TableCapacity.fitting: expected at least one TokenDFA")

        def up(n) -> int:
            return bucket(int(np.ceil(max(int(n), 1) * headroom)), 1)

        need = [_needs(d) for d in dfas]
        top = {k: max(n[k] for n in need) for k in need[0]}
        any_pda = any(d.is_pda for d in dfas)
        if stack is None:
            stack = DEFAULT_STACK_SIZE if any_pda else 0
        pda = {}
        if stack:
            pda = {
                k: up(top[k])
                for k in ("pushes", "push_len", "context_edges", "edges_per_state", "pops")
            }
        return cls(
            states=up(top["states"]),
            classes=up(top["classes"]),
            stack=stack,
            forced=bucket(top["forced"], 1) if top["forced"] else 0,
            **pda,
        )


def _needs(d: TokenDFA) -> dict[str, int]:
    """The sizes one DFA needs, by `TableCapacity` field."""
    out = {"states": d.num_states, "classes": d.num_classes, "forced": 0}
    if d.forced_len is not None:
        out["forced"] = int(d.forced_len.max(initial=0))
    pda = dict.fromkeys(("pushes", "push_len", "context_edges", "edges_per_state", "pops"), 0)
    if d.is_pda:
        pda = {
            "pushes": d.push_seq.shape[0],
            "push_len": d.push_seq.shape[1],
            "context_edges": d.cd_state.shape[0],
            "edges_per_state": int(np.bincount(d.cd_state, minlength=1).max(initial=0)),
            "pops": d.cd_pop.shape[1],
        }
    out.update(pda)
    return out


def _check_fits(dfas: Sequence[TokenDFA], cap: TableCapacity) -> None:
    if len(dfas) > cap.constraints:
        raise TableCapacityError(
            f"ConstraintTables.from_dfas: {len(dfas)} constraints, but capacity.constraints "
            f"is {cap.constraints}; build the tables with a larger TableCapacity (a new "
            "capacity compiles the decoding loop again)"
        )
    for i, d in enumerate(dfas):
        if d.is_pda and not cap.stack:
            raise TableCapacityError(
                f"ConstraintTables.from_dfas: constraint #{i} ({d.spec_kind} {d.spec[:40]!r}) "
                "is a grammar (pushdown automaton), but capacity.stack is 0; give the "
                "TableCapacity a stack"
            )
        needs = _needs(d)
        needs.pop("forced")  # a longer forced run is cut (its prefix is forced too)
        for name, n in needs.items():
            have = getattr(cap, name)
            if n > have:
                raise TableCapacityError(
                    f"ConstraintTables.from_dfas: constraint #{i} ({d.spec_kind} "
                    f"{d.spec[:40]!r}) needs {name}={n:,}, but capacity.{name} is {have:,}; "
                    "build the tables with a larger TableCapacity (a new capacity compiles "
                    "the decoding loop again) or simplify the constraint"
                )


def bucket(n: int, minimum: int = 8) -> int:
    """The smallest power of two that is >= max(n, minimum)."""
    n = max(int(n), int(minimum), 1)
    return 1 << (n - 1).bit_length()


@struct.dataclass(kw_only=True)
class ConstraintTables:
    """Token-DFA tables of K constraints on the device (a pytree; pass it to jit as an argument).

    Padded constraints (ids ``num_constraints .. K-1``) allow nothing, so a row that
    uses one is flagged as an error; padded states allow nothing and are not accepting.
    EOS ids always have class 0 here: EOS is allowed exactly in accepting states.

    Attributes:
      token_class: int32[K, V], the class of each token id under each constraint.
      next_state: int32[K, Q, C], next state for (constraint, state, class); -1 = not allowed.
      accepting: bool[K, Q], EOS is allowed in this state.
      viable: bool[K, Q], accepting or some token allowed; landing in a non-viable state
        is an error (nothing can be generated from it).
      start: int32[K], the initial state of each constraint.
      eos_mask: bool[V], the vocabulary's EOS ids.
      num_constraints: int32[], how many of the K constraints are real.
      mask_bits: uint32[M, ceil(V/32)] or None, deduplicated allowed-token bitmasks (bit
        ``t % 32`` of word ``t // 32`` is token t); only with ``mask_impl="bitmask"``.
      mask_row: int32[K, Q] or None, the `mask_bits` row of each (constraint, state).
      edge_push: int32[K, Q, C] or None (no grammar in the batch): the push row of each
        context-independent edge (0 = nothing).
      push_seq: int32[K, P, L], push_len: int32[K, P]: the symbol sequences pushed.
      cd_index: int32[K, Q, E], the context-dependent edges of each state (-1 = none).
      cd_class, cd_npop, cd_target, cd_push: int32[K, N]; cd_pop: int32[K, N, KP]: those
        edges (see `TokenDFA.PDA_ARRAYS`).
      stack_size: S, the static stack bound of every row (0 without grammars).
      vocab_fingerprint: the vocabulary the tables were compiled for (static).
      eos_ids: the EOS token ids (static).
      forced_tokens: int32[K, Q, F] or None, each state's forced canonical token run (see
        `automata_jax._fast_forward`); None when no constraint forces anything. F is the
        longest run of all constraints, rounded up to a power of two.
      forced_len: int32[K, Q] or None, the length of each run (0 = none).
      forced_states: int32[K, Q, F] or None, the state after each token of each run.
    """

    token_class: Int[Array, "K V"]
    next_state: Int[Array, "K Q C"]
    accepting: Bool[Array, "K Q"]
    viable: Bool[Array, "K Q"]
    start: Int[Array, " K"]
    eos_mask: Bool[Array, " V"]
    num_constraints: Int[Array, ""]
    mask_bits: UInt32[Array, "M W"] | None = None
    mask_row: Int[Array, "K Q"] | None = None
    edge_push: Int[Array, "K Q C"] | None = None
    push_seq: Int[Array, "K P L"] | None = None
    push_len: Int[Array, "K P"] | None = None
    cd_index: Int[Array, "K Q E"] | None = None
    cd_class: Int[Array, "K N"] | None = None
    cd_pop: Int[Array, "K N KP"] | None = None
    cd_npop: Int[Array, "K N"] | None = None
    cd_target: Int[Array, "K N"] | None = None
    cd_push: Int[Array, "K N"] | None = None
    stack_size: int = struct.field(pytree_node=False, default=0)
    vocab_fingerprint: str = struct.field(pytree_node=False, default="")
    eos_ids: tuple[int, ...] = struct.field(pytree_node=False, default=())
    # --- forced runs for fast-forward decoding (issue 12) ---
    forced_tokens: Int[Array, "K Q F"] | None = None
    forced_len: Int[Array, "K Q"] | None = None
    forced_states: Int[Array, "K Q F"] | None = None

    # -- sizes ----------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """V, the logits width the tables were built for."""
        return int(self.token_class.shape[1])

    @property
    def padded_shape(self) -> tuple[int, int, int]:
        """(K, Q, C) after bucketing."""
        return tuple(int(d) for d in self.next_state.shape)

    @property
    def capacity(self) -> TableCapacity:
        """These tables' padded sizes as a `TableCapacity`: tables of other constraints
        built with it (``from_dfas(..., capacity=tables.capacity)``) have the same shapes,
        so they run in loops compiled for these with no retrace."""
        k, q, c = self.padded_shape
        pda = {}
        if self.has_stack:
            pda = {
                "pushes": int(self.push_seq.shape[1]),
                "push_len": int(self.push_seq.shape[2]),
                "context_edges": int(self.cd_class.shape[1]),
                "edges_per_state": int(self.cd_index.shape[2]),
                "pops": int(self.cd_pop.shape[2]),
            }
        return TableCapacity(
            states=q,
            classes=c,
            constraints=k,
            stack=self.stack_size if self.has_stack else 0,
            forced=0 if self.forced_tokens is None else int(self.forced_tokens.shape[2]),
            mask_rows=0 if self.mask_bits is None else int(self.mask_bits.shape[0]),
            **pda,
        )

    @property
    def has_stack(self) -> bool:
        """Whether the batch holds a grammar (PDA) constraint."""
        return self.edge_push is not None

    @property
    def mask_impl(self) -> str:
        return MASK_GATHER if self.mask_bits is None else MASK_BITMASK

    @property
    def nbytes(self) -> int:
        """Bytes of all arrays on the device."""
        return int(sum(x.nbytes for x in jax.tree.leaves(self)))

    def check_vocabulary(self, fingerprint: str) -> None:
        """Raises IncompatibleVocabularyError unless the tables were built for ``fingerprint``."""
        if self.vocab_fingerprint and fingerprint != self.vocab_fingerprint:
            raise IncompatibleVocabularyError(
                f"ConstraintTables: expected vocabulary {self.vocab_fingerprint[:16]}…, got "
                f"{fingerprint[:16]}…; recompile the constraints for this tokenizer."
            )

    def __repr__(self) -> str:
        k, q, c = self.padded_shape
        return (
            f"ConstraintTables(K={k}, Q={q}, C={c}, V={self.vocab_size}, "
            f"mask_impl={self.mask_impl!r}, stack_size={self.stack_size}, nbytes={self.nbytes})"
        )

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def from_dfas(
        cls,
        dfas: TokenDFA | str | os.PathLike | Sequence[TokenDFA | str | os.PathLike],
        *,
        vocab_size: int,
        eos_ids: Sequence[int] | None = None,
        mask_impl: str = DEFAULT_MASK_IMPL,
        min_states: int = 8,
        min_classes: int = 8,
        min_constraints: int = 1,
        stack_size: int | None = None,
        capacity: TableCapacity | None = None,
    ) -> ConstraintTables:
        """Pads one or many TokenDFAs into one device pytree.

        Args:
          dfas: a `TokenDFA`, an artifact path (read with `TokenDFA.load`), or a sequence of
            them; constraint id ``i`` of the batch is ``dfas[i]``. May be empty (then every
            row must be unconstrained and ``eos_ids`` is required).
          vocab_size: the model's logits width V. A DFA over fewer ids is padded (the extra
            ids are never allowed); over more ids only if those ids are all class 0.
          eos_ids: EOS token ids; default: the union of the DFAs' ``eos_ids``.
          mask_impl: ``"gather"`` (mask = ``next_state[k, q][token_class[k]] >= 0``) or
            ``"bitmask"`` (deduplicated per-state bitmasks; more memory).
          min_states, min_classes, min_constraints: lower bounds of the buckets.
          stack_size: S, the stack bound of grammar rows (default 64 when a DFA of the batch
            is a PDA, else 0). Deeper nesting is masked (see `automata_jax._stack`).
          capacity: fixed padded sizes (`TableCapacity`) instead of buckets: the tables of
            any constraints that fit have the same shapes and static fields, so they swap
            into compiled loops with no retrace. Then ``min_*`` and ``stack_size`` must be
            left at their defaults (the capacity gives them).

        Returns:
          The tables, committed to the default device.

        Raises:
          IncompatibleVocabularyError: the DFAs were compiled for different vocabularies, or
            allow token ids >= ``vocab_size``.
          TableFormatError: an artifact path cannot be read.
          RuntimeShapeError: bad ``vocab_size``, ``eos_ids``, ``mask_impl`` or ``stack_size``
            (``mask_impl="bitmask"`` is for batches without grammars).
          TableCapacityError: with ``capacity``, a constraint (or the batch) does not fit.

        Example:
          >>> import numpy as np
          >>> from automata_compile import TokenDFA
          >>> dfa = TokenDFA(token_class=np.array([1, 0], np.int32),
          ...                next_state=np.array([[-1, 0]], np.int32),
          ...                accepting=np.array([True]), start=0, eos_ids=(1,),
          ...                vocab_fingerprint="toy")
          >>> tables = ConstraintTables.from_dfas(dfa, vocab_size=4)
          >>> tables.padded_shape, tables.vocab_size
          ((1, 8, 8), 4)
        """
        if isinstance(dfas, (TokenDFA, str, os.PathLike)):
            dfas = [dfas]
        dfas = [d if isinstance(d, TokenDFA) else TokenDFA.load(d) for d in dfas]
        if not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
            raise RuntimeShapeError(f"vocab_size: expected a positive int, got {vocab_size!r}")
        vocab_size = int(vocab_size)
        if mask_impl not in MASK_IMPLS:
            raise RuntimeShapeError(f"mask_impl: expected one of {MASK_IMPLS}, got {mask_impl!r}")
        fingerprints = {d.vocab_fingerprint for d in dfas}
        if len(fingerprints) > 1:
            listing = "; ".join(
                f"#{i} ({d.spec_kind} {d.spec[:30]!r}): {d.vocab_fingerprint[:16]}…"
                for i, d in enumerate(dfas)
            )
            raise IncompatibleVocabularyError(
                f"ConstraintTables.from_dfas: expected every DFA to share one vocabulary, got "
                f"{len(fingerprints)} fingerprints ({listing}); compile all constraints with "
                "the same tokenizer."
            )
        if eos_ids is None:
            eos_ids = sorted({int(i) for d in dfas for i in d.eos_ids})
        eos_ids = tuple(sorted({int(i) for i in eos_ids}))
        if not eos_ids:
            raise RuntimeShapeError(
                "eos_ids: expected at least one EOS id (from the DFAs or the eos_ids argument), "
                "got none"
            )
        bad_eos = [i for i in eos_ids if not 0 <= i < vocab_size]
        if bad_eos:
            raise RuntimeShapeError(
                f"eos_ids: expected ids in [0, {vocab_size}), got {bad_eos} (vocab_size is the "
                "model's logits width)"
            )

        k_real = len(dfas)
        if capacity is not None:
            if not isinstance(capacity, TableCapacity):
                raise RuntimeShapeError(
                    f"capacity: expected a TableCapacity, got {type(capacity).__name__}"
                )
            if (min_states, min_classes, min_constraints, stack_size) != (8, 8, 1, None):
                raise RuntimeShapeError(
                    "capacity: min_states, min_classes, min_constraints and stack_size come "
                    "from the TableCapacity; leave them at their defaults"
                )
            if mask_impl == MASK_BITMASK and not capacity.mask_rows:
                raise RuntimeShapeError(
                    'capacity: mask_impl="bitmask" needs TableCapacity.mask_rows >= 1'
                )
            _check_fits(dfas, capacity)
            kp, qp, cp = capacity.constraints, capacity.states, capacity.classes
            stack_size = capacity.stack
        else:
            kp = bucket(k_real, min_constraints)
            qp = bucket(max((d.num_states for d in dfas), default=1), min_states)
            cp = bucket(max((d.num_classes for d in dfas), default=1), min_classes)
        token_class = np.zeros((kp, vocab_size), np.int32)
        next_state = np.full((kp, qp, cp), -1, np.int32)
        accepting = np.zeros((kp, qp), bool)
        viable = np.zeros((kp, qp), bool)
        start = np.zeros((kp,), np.int32)
        eos = np.zeros((vocab_size,), bool)
        eos[list(eos_ids)] = True
        for i, d in enumerate(dfas):
            tc = _fit_vocabulary(d, vocab_size, i)
            tc[list(eos_ids)] = 0
            q, c = d.next_state.shape
            token_class[i] = tc
            next_state[i, :q, :c] = d.next_state
            accepting[i, :q] = d.accepting
            used = np.bincount(tc, minlength=c) > 0
            viable[i, :q] = d.accepting | (d.next_state[:, used] >= 0).any(axis=1)
            start[i] = d.start

        forced = _forced_tables(dfas, kp, qp, None if capacity is None else capacity.forced)

        any_pda = any(d.is_pda for d in dfas)
        if stack_size is None:
            stack_size = DEFAULT_STACK_SIZE if any_pda else 0
        if isinstance(stack_size, bool) or not isinstance(stack_size, (int, np.integer)):
            raise RuntimeShapeError(f"stack_size: expected an int >= 1, got {stack_size!r}")
        stack_size = int(stack_size)
        if stack_size < (1 if any_pda else 0):
            raise RuntimeShapeError(f"stack_size: expected an int >= 1, got {stack_size}")
        if (any_pda or stack_size and capacity is not None) and mask_impl == MASK_BITMASK:
            raise RuntimeShapeError(
                'mask_impl: expected "gather" for a batch with a grammar constraint (a bitmask '
                'cannot see the stack), got "bitmask"'
            )
        if capacity is not None:
            pda = _pda_block(dfas, kp, qp, cp, capacity) if capacity.stack else {}
        else:
            pda = _pda_block(dfas, kp, qp, cp) if any_pda else {}
        for i, d in enumerate(dfas):
            if d.is_pda:  # states with only context-dependent edges are not dead
                viable[i, np.unique(d.cd_state)] = True

        mask_bits = mask_row = None
        if mask_impl == MASK_BITMASK:
            mask_bits, mask_row = _bitmasks(
                token_class,
                next_state,
                [d.num_states for d in dfas],
                None if capacity is None else capacity.mask_rows,
            )
        tables = cls(
            token_class=token_class,
            next_state=next_state,
            accepting=accepting,
            viable=viable,
            start=start,
            eos_mask=eos,
            num_constraints=np.int32(k_real),
            mask_bits=mask_bits,
            mask_row=mask_row,
            **pda,
            stack_size=stack_size,
            vocab_fingerprint=next(iter(fingerprints), ""),
            eos_ids=eos_ids,
            **forced,
        )
        return jax.device_put(tables)


def _forced_tables(dfas: Sequence[TokenDFA], kp: int, qp: int, fixed: int | None = None) -> dict:
    """forced_tokens / forced_len / forced_states padded to [K, Q, F]; {} if nothing is
    forced. ``fixed``: F from a capacity (0: none; longer runs are cut to F tokens)."""
    longest = max(
        (int(d.forced_len.max(initial=0)) for d in dfas if d.forced_len is not None), default=0
    )
    if fixed is not None:
        longest = fixed
    if longest == 0:
        return {}
    f = bucket(longest, 1) if fixed is None else fixed
    tokens = np.zeros((kp, qp, f), np.int32)
    length = np.zeros((kp, qp), np.int32)
    states = np.zeros((kp, qp, f), np.int32)
    for i, d in enumerate(dfas):
        if d.forced_len is None:
            continue
        q = d.num_states
        n = min(f, d.max_forced)
        tokens[i, :q, :n] = d.forced_tokens[:, :n]
        length[i, :q] = np.minimum(d.forced_len, f)
        cur = np.arange(q)
        for j in range(f):
            live = d.forced_len > j
            if j < n:
                cur = cur.copy()
                cur[live] = d.next_state[cur[live], d.token_class[d.forced_tokens[live, j]]]
            states[i, :q, j] = cur
    return dict(forced_tokens=tokens, forced_len=length, forced_states=states)


def _pda_block(
    dfas: list[TokenDFA], kp: int, qp: int, cp: int, capacity: TableCapacity | None = None
) -> dict[str, np.ndarray]:
    """The PDA arrays of the batch, padded (DFAs: no pushes, no context-dependent edges).

    Every size is bucketed to a power of two with a floor (pushes 16 x 8, context edges 64,
    16 per state, 8 popped symbols), so grammars of similar size share one compilation;
    or taken from ``capacity``.
    """
    if capacity is not None:
        pp, lp, n = capacity.pushes, capacity.push_len, capacity.context_edges
        kpop, e = capacity.pops, capacity.edges_per_state
    else:
        pdas = [d for d in dfas if d.is_pda]
        pp = bucket(max(d.push_seq.shape[0] for d in pdas), 16)
        lp = bucket(max(d.push_seq.shape[1] for d in pdas), 8)
        n = bucket(max(d.cd_state.shape[0] for d in pdas), 64)
        kpop = bucket(max(d.cd_pop.shape[1] for d in pdas), 8)
        per_state = [np.bincount(d.cd_state, minlength=1).max(initial=0) for d in pdas]
        e = bucket(max(per_state), 16)
    out = {
        "edge_push": np.zeros((kp, qp, cp), np.int32),
        "push_seq": np.full((kp, pp, lp), -1, np.int32),
        "push_len": np.zeros((kp, pp), np.int32),
        "cd_index": np.full((kp, qp, e), -1, np.int32),
        "cd_class": np.zeros((kp, n), np.int32),
        "cd_pop": np.full((kp, n, kpop), -1, np.int32),
        "cd_npop": np.zeros((kp, n), np.int32),
        "cd_target": np.zeros((kp, n), np.int32),
        "cd_push": np.zeros((kp, n), np.int32),
    }
    for i, d in enumerate(dfas):
        if not d.is_pda:
            continue
        q, c = d.next_state.shape
        out["edge_push"][i, :q, :c] = d.edge_push
        p, length = d.push_seq.shape
        out["push_seq"][i, :p, :length] = d.push_seq
        out["push_len"][i, :p] = d.push_len
        m = d.cd_state.shape[0]
        for name in ("cd_class", "cd_npop", "cd_target", "cd_push"):
            out[name][i, :m] = getattr(d, name)
        out["cd_pop"][i, :m, : d.cd_pop.shape[1]] = d.cd_pop
        first = np.searchsorted(d.cd_state, d.cd_state)  # cd_state is sorted
        out["cd_index"][i, d.cd_state, np.arange(m) - first] = np.arange(m)
    return out


def _fit_vocabulary(dfa: TokenDFA, vocab_size: int, index: int) -> np.ndarray:
    """The DFA's token_class padded (class 0) or truncated to ``vocab_size`` ids."""
    tc = np.asarray(dfa.token_class, np.int32)
    if tc.shape[0] <= vocab_size:
        return np.concatenate([tc, np.zeros(vocab_size - tc.shape[0], np.int32)])
    extra = np.flatnonzero(tc[vocab_size:])
    if extra.size:
        raise IncompatibleVocabularyError(
            f"ConstraintTables.from_dfas: DFA #{index} ({dfa.spec_kind} {dfa.spec[:30]!r}) "
            f"covers {tc.shape[0]} token ids and may emit id {vocab_size + int(extra[0])}, but "
            f"the model's logits width is {vocab_size}; expected a vocabulary of at most "
            f"{vocab_size} ids (compile for the model's tokenizer)."
        )
    return tc[:vocab_size].copy()


def _bitmasks(
    token_class: np.ndarray,
    next_state: np.ndarray,
    num_states: list[int],
    fixed_rows: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicated packed allowed-token masks of every real (constraint, state).

    Row 0 is the all-zero mask (padding, dead). Rows are padded to a power of two, or to
    ``fixed_rows`` (a capacity's ``mask_rows``).
    """
    kp, qp, _ = next_state.shape
    v = token_class.shape[1]
    words = (v + 31) // 32
    rows: dict[bytes, int] = {bytes(words * 4): 0}
    packed_rows = [np.zeros(words, np.uint32)]
    mask_row = np.zeros((kp, qp), np.int32)
    chunk = max(1, (1 << 24) // max(v, 1))  # ~16 MB of bools at a time
    for k, q_real in enumerate(num_states):
        # States with the same set of allowed classes have the same token mask.
        patterns, inverse = np.unique(next_state[k, :q_real] >= 0, axis=0, return_inverse=True)
        pattern_row = np.zeros(len(patterns), np.int32)
        for lo in range(0, len(patterns), chunk):
            allowed = patterns[lo : lo + chunk][:, token_class[k]]  # bool[n, V]
            packed = np.packbits(allowed, axis=1, bitorder="little")
            packed = np.pad(packed, ((0, 0), (0, words * 4 - packed.shape[1])))
            for j, row in enumerate(packed):
                key = row.tobytes()
                idx = rows.get(key)
                if idx is None:
                    idx = rows[key] = len(packed_rows)
                    packed_rows.append(np.frombuffer(key, "<u4").astype(np.uint32))
                pattern_row[lo + j] = idx
        mask_row[k, :q_real] = pattern_row[inverse.reshape(-1)]
    m = bucket(len(packed_rows), 8)
    if fixed_rows is not None:
        if len(packed_rows) > fixed_rows:
            raise TableCapacityError(
                f"ConstraintTables.from_dfas: the batch needs mask_rows={len(packed_rows):,} "
                f"distinct bitmask rows, but capacity.mask_rows is {fixed_rows:,}"
            )
        m = fixed_rows
    bits = np.zeros((m, words), np.uint32)
    bits[: len(packed_rows)] = np.stack(packed_rows)
    return bits, mask_row


def unconstrained_tables(vocab_size: int, eos_ids: Sequence[int]) -> ConstraintTables:
    """Tables with no constraint: every row must use constraint id -1."""
    return ConstraintTables.from_dfas([], vocab_size=vocab_size, eos_ids=eos_ids)
