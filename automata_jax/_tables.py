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

import os
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Int, UInt32

from automata_compile import IncompatibleVocabularyError, TokenDFA
from automata_jax import _table_build as build
from automata_jax._capacity import DEFAULT_STACK_SIZE, TableCapacity, bucket
from automata_jax._errors import RuntimeShapeError

__all__ = [  # TableCapacity, bucket and DEFAULT_STACK_SIZE are `_capacity`'s, re-exported
    "DEFAULT_MASK_IMPL",
    "DEFAULT_STACK_SIZE",
    "MASK_BITMASK",
    "MASK_GATHER",
    "MASK_IMPLS",
    "ConstraintTables",
    "TableCapacity",
    "bucket",
    "unconstrained_tables",
]

MASK_GATHER = "gather"
MASK_BITMASK = "bitmask"
MASK_IMPLS = (MASK_GATHER, MASK_BITMASK)
DEFAULT_MASK_IMPL = MASK_GATHER  # see the module docstring of `_constraint` for the numbers


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
      cd_first, cd_count: int32[K, Q], the context-dependent edges of each state: the
        ``cd_count`` edges from id ``cd_first`` (edges are sorted by state); at most
        ``edges_per_state`` (E, static) per state, the window a step reads.
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
      exit_tokens: int32[K, Q] or None (with the forced runs), each state's *exit*: the
        token that leaves it into its longest forced run (-1: none), which speculative
        decoding drafts where a copied span ends (see `_table_build.exit_tables`).
      structure_drafts: int32[K, Q] or None (with the forced runs), each state's structural
        draft (`TokenDFA.structure_draft`: the tokenizer's spelling of forced text that has
        no forced run, ``":"`` after a key; -1: none, and for DFAs compiled without it),
        which speculative decoding proposes after a draft that ends in that state.
      class_map, row_start, row_len: int32[K, Q] or None: the state-block layout, present
        when a constraint of the batch has state blocks (`TokenDFA.class_block`, or a
        capacity with ``blocks``). Then ``token_class`` is int32[K * NB, V] (each
        constraint's NB class maps), ``next_state`` and ``edge_push`` are flat int32[K, R],
        and state q of constraint k reads classes ``token_class[class_map[k, q]]`` and the
        row of ``row_len[k, q]`` entries at ``row_start[k, q]``; ``row_width`` (static) is C,
        the widest row. Read them through `automata_jax._layout`.
      bitset: `automata_jax._bitset.BitsetDeviceTables` or None: the bitset any-order
        constraints' tables (`from_bitset`), each array with a leading K axis; then rows
        also carry ``ConstraintState.bits`` and `allowed_mask` / `advance` test and update
        them.
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
    cd_first: Int[Array, "K Q"] | None = None
    cd_count: Int[Array, "K Q"] | None = None
    cd_class: Int[Array, "K N"] | None = None
    cd_pop: Int[Array, "K N KP"] | None = None
    cd_npop: Int[Array, "K N"] | None = None
    cd_target: Int[Array, "K N"] | None = None
    cd_push: Int[Array, "K N"] | None = None
    stack_size: int = struct.field(pytree_node=False, default=0)
    edges_per_state: int = struct.field(pytree_node=False, default=0)
    vocab_fingerprint: str = struct.field(pytree_node=False, default="")
    eos_ids: tuple[int, ...] = struct.field(pytree_node=False, default=())
    # --- forced runs for fast-forward decoding (issue 12) ---
    forced_tokens: Int[Array, "K Q F"] | None = None
    forced_len: Int[Array, "K Q"] | None = None
    forced_states: Int[Array, "K Q F"] | None = None
    exit_tokens: Int[Array, "K Q"] | None = None
    structure_drafts: Int[Array, "K Q"] | None = None
    # --- state blocks (issue 24; see `_layout`): None in a batch without them ---
    class_map: Int[Array, "K Q"] | None = None
    row_start: Int[Array, "K Q"] | None = None
    row_len: Int[Array, "K Q"] | None = None
    row_width: int = struct.field(pytree_node=False, default=0)
    # --- the bitset any-order block (issue 20; `automata_jax._bitset`): None without it ---
    bitset: Any = None

    # -- sizes ----------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        """V, the logits width the tables were built for."""
        return int(self.token_class.shape[1])

    @property
    def padded_shape(self) -> tuple[int, int, int]:
        """(K, Q, C) after bucketing (C: the widest row with state blocks)."""
        if self.row_start is not None:
            return (*(int(d) for d in self.row_start.shape), int(self.row_width))
        return tuple(int(d) for d in self.next_state.shape)

    @property
    def capacity(self) -> TableCapacity:
        """These tables' padded sizes as a `TableCapacity`: tables of other constraints
        built with it (``from_dfas(..., capacity=tables.capacity)``) have the same shapes,
        so they run in loops compiled for these with no retrace."""
        k, q, c = self.padded_shape
        blocks = {}
        if self.row_start is not None:
            blocks = {
                "blocks": int(self.token_class.shape[0]) // k,
                "cells": int(self.next_state.shape[1]) - c,  # less the dead row of padding
            }
        pda = {}
        if self.has_stack:
            pda = {
                "pushes": int(self.push_seq.shape[1]),
                "push_len": int(self.push_seq.shape[2]),
                "context_edges": int(self.cd_class.shape[1]),
                "edges_per_state": int(self.edges_per_state),
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
            **blocks,
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
        bitset = "" if self.bitset is None else f", bitset_words={self.bitset.words}"
        return (
            f"ConstraintTables(K={k}, Q={q}, C={c}, V={self.vocab_size}, "
            f"mask_impl={self.mask_impl!r}{bitset}, stack_size={self.stack_size}, "
            f"nbytes={self.nbytes})"
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
        dfas = build.load_dfas(dfas)
        vocab_size = build.check_vocab_size(vocab_size)
        if mask_impl not in MASK_IMPLS:
            raise RuntimeShapeError(f"mask_impl: expected one of {MASK_IMPLS}, got {mask_impl!r}")
        bitmask = mask_impl == MASK_BITMASK
        fingerprint = build.shared_fingerprint(dfas)
        eos_ids = build.resolve_eos_ids(dfas, eos_ids, vocab_size)
        if capacity is not None and not capacity.blocks:
            # the dense layout: a constraint with state blocks (a grammar or JSON Schema
            # with rules, tool calls) is stored dense, exactly (as large as blocks avoid)
            dfas = [d.dense() for d in dfas]
        if capacity is not None:
            defaults = (min_states, min_classes, min_constraints, stack_size) == (8, 8, 1, None)
            sizes, stack_size = build.capacity_sizes(
                dfas, capacity, bitmask=bitmask, defaults_kept=defaults
            )
        else:
            sizes = build.bucket_sizes(dfas, min_constraints, min_states, min_classes)
        blocks = build.block_sizes(dfas, capacity, sizes)
        arrays = build.dfa_arrays(dfas, vocab_size, eos_ids, sizes, blocks)
        fixed_forced = None if capacity is None else capacity.forced
        forced = build.forced_tables(dfas, sizes[0], sizes[1], fixed_forced)
        if forced:
            forced |= build.exit_tables(dfas, arrays["token_class"], eos_ids, *sizes[:2])
            forced |= build.structure_tables(dfas, *sizes[:2])
        stack_size = build.resolve_stack_size(
            dfas, stack_size, fixed=capacity is not None, bitmask=bitmask
        )
        cells = blocks[1] if blocks else 0
        pda = build.pda_arrays(dfas, sizes, capacity, arrays["viable"], cells)
        mask_bits = mask_row = None
        if bitmask:
            mask_bits, mask_row = build.bitmasks(
                arrays["token_class"],
                dfas,
                *sizes[:2],
                None if capacity is None else capacity.mask_rows,
            )
        tables = cls(
            **arrays,
            num_constraints=np.int32(len(dfas)),
            mask_bits=mask_bits,
            mask_row=mask_row,
            **pda,
            stack_size=stack_size,
            vocab_fingerprint=fingerprint,
            eos_ids=eos_ids,
            **forced,
        )
        return jax.device_put(tables)

    @classmethod
    def from_bitset(cls, bitset_tables, *, vocab_size: int, capacity=None) -> ConstraintTables:
        """Tables of JSON Schemas compiled with the bitset any-order path
        (`automata_compile.compile_json_schema_bitset`): constraint id ``i`` for the i-th
        (0 for one; -1 for an unconstrained row). Each row carries the declared properties
        it has written in its open objects as ``uint32[W]`` bits (``ConstraintState.bits``),
        which `allowed_mask` and `advance` test and update (docs/any_order_bitset.md).

        Args:
          bitset_tables: an `automata_compile.BitsetTables` or `BitsetPDATables`, the path
            of a file written by `automata_compile.tokens.save_bitset_tables`, or a sequence
            of them (K constraints in one batch, each row choosing its own by id; a plain
            dense `TokenDFA` may join them, as bitset tables whose edges have no events).
          vocab_size: the model's logits width V.
          capacity: a `BitsetCapacity` (e.g. ``other.bitset.capacity``): fixed padded sizes
            (``constraints``: K),
            so that tables of another schema that fits run in loops compiled for these with
            no retrace (for a schema with grammar rules, the stack block's sizes too); None
            pads to powers of two.

        Raises:
          TableCapacityError: the schema needs more than ``capacity`` (the message names the
            dimension).
          RuntimeShapeError: bad ``vocab_size`` or EOS ids.
        """
        from automata_jax._bitset import constraint_tables

        return constraint_tables(bitset_tables, vocab_size, capacity)


def unconstrained_tables(vocab_size: int, eos_ids: Sequence[int]) -> ConstraintTables:
    """Tables with no constraint: every row must use constraint id -1."""
    return ConstraintTables.from_dfas([], vocab_size=vocab_size, eos_ids=eos_ids)
