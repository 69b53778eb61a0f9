"""`TableCapacity`: fixed padded sizes of `ConstraintTables`, and the `bucket` sizes.

A `TableCapacity` fixes every padded size (states, classes, constraints, the stack and the
PDA block, forced runs, bitmask rows): tables built with one capacity have the same shapes,
dtypes and static fields whatever their constraints, so a new schema's tables swap into an
already compiled decoding loop with no retrace. A constraint that does not fit raises
`TableCapacityError` naming the dimension, what it needs and the capacity (docs/capacity.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from automata_compile import TokenDFA
from automata_jax._errors import RuntimeShapeError, TableCapacityError

__all__ = [
    "DEFAULT_STACK_SIZE",
    "TableCapacity",
    "bucket",
    "cells_bucket",
    "check_fits",
    "fine_bucket",
]

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
      blocks, cells: the state-block layout (`automata_jax._layout`): NB class maps and R
        flat row cells per constraint; 0 (the default): the dense layout, for batches
        without state blocks (`TokenDFA.class_block`: tool calls, grammars and JSON
        Schemas with rules), which it stores dense (`TokenDFA.dense`: exact, as large as
        the blocks avoid). With ``blocks`` every constraint is stored ragged (a
        constraint without blocks: one block of ``states x classes`` cells).
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
    blocks: int = 0
    cells: int = 0

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
        if bool(self.blocks) != bool(self.cells):
            raise RuntimeShapeError(
                "TableCapacity: blocks and cells come together (both >= 1, or both 0)"
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

        need = [needs(d) for d in dfas]
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
        blocks = {}
        if top["blocks"]:
            blocks = {"blocks": up(top["blocks"]), "cells": up(max(d.num_cells for d in dfas))}
        return cls(
            states=up(top["states"]),
            classes=up(top["classes"]),
            stack=stack,
            **blocks,
            forced=bucket(top["forced"], 1) if top["forced"] else 0,
            **pda,
        )


def needs(d: TokenDFA) -> dict[str, int]:
    """The sizes one DFA needs, by `TableCapacity` field."""
    out = {"states": d.num_states, "classes": d.num_classes, "forced": 0}
    out["blocks"] = d.num_blocks if d.is_blocked else 0
    out["cells"] = d.num_cells if d.is_blocked else 0
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


_LARGER = "build the tables with a larger {} (a new capacity compiles the decoding loop again)"


def too_many_constraints(where: str, n: int, have: int, cap: str) -> TableCapacityError:
    """The error of ``n`` constraints where the capacity ``cap`` (its name as the user
    spells it, e.g. ``capacity``) holds ``have``."""
    kind = "BitsetCapacity" if cap == "BitsetCapacity" else "TableCapacity"
    return TableCapacityError(
        f"{where}: {n} constraints, but {cap}.constraints is {have}; {_LARGER.format(kind)}"
    )


def too_large(
    where: str, which: str, name: str, n: int, have: int, cap: str, hint: str = ""
) -> TableCapacityError:
    """The error of a constraint (``which``, e.g. ``constraint #1``) that needs ``n`` of the
    dimension ``name`` where the capacity ``cap`` holds ``have``."""
    kind = "BitsetCapacity" if cap == "BitsetCapacity" else "TableCapacity"
    return TableCapacityError(
        f"{where}: {which} needs {name}={n:,}, but {cap}.{name} is {have:,}; "
        f"{_LARGER.format(kind)}{hint}"
    )


def check_fits(dfas: Sequence[TokenDFA], cap: TableCapacity) -> None:
    """Raises `TableCapacityError` unless every DFA (and their number) fits ``cap``."""
    where = "ConstraintTables.from_dfas"
    if len(dfas) > cap.constraints:
        raise too_many_constraints(where, len(dfas), cap.constraints, "capacity")
    for i, d in enumerate(dfas):
        if d.is_pda and not cap.stack:
            raise TableCapacityError(
                f"ConstraintTables.from_dfas: constraint #{i} ({d.spec_kind} {d.spec[:40]!r}) "
                "is a grammar (pushdown automaton), but capacity.stack is 0; give the "
                "TableCapacity a stack"
            )
        need = needs(d)
        need.pop("forced")  # a longer forced run is cut (its prefix is forced too)
        if cap.blocks:  # the state-block layout stores every constraint ragged
            need.update(blocks=d.num_blocks, cells=d.num_cells)
        for name, n in need.items():
            have = getattr(cap, name)
            if n > have:
                which = f"constraint #{i} ({d.spec_kind} {d.spec[:40]!r})"
                hint = " or simplify the constraint"
                raise too_large(where, which, name, n, have, "capacity", hint)


def bucket(n: int, minimum: int = 8) -> int:
    """The smallest power of two that is >= max(n, minimum)."""
    n = max(int(n), int(minimum), 1)
    return 1 << (n - 1).bit_length()


def fine_bucket(n: int, minimum: int = 8) -> int:
    """The smallest multiple of an eighth of the power of two >= max(n, minimum) (four
    sizes per power of two: 5, 6, 7, 8 x 2^e, exact below 8): at most 25% padding."""
    n = max(int(n), int(minimum), 1)
    step = 1 << max((n - 1).bit_length() - 3, 0)  # an eighth of the power of two >= n
    return -(-n // step) * step  # 5, 6, 7 or 8 steps


def cells_bucket(n: int, minimum: int = 8) -> int:
    """The state-block layout's flat row cells R: `bucket` up to ``FINE_CELLS``, then
    `fine_bucket` (compose-spec.json: 82 M cells, 134 M as a power of two, 84 M so), for
    a few more distinct shapes (a `TableCapacity` fixes them)."""
    n = max(int(n), int(minimum), 1)
    return bucket(n, minimum) if n <= FINE_CELLS else fine_bucket(n, minimum)


# From this many cells, `cells_bucket` rounds to quarter powers of two; from
# ``FINE_DENSE_CELLS`` dense cells (Q x C as powers of two), so do Q and C
# (`_table_build.bucket_sizes`).
FINE_CELLS = 1 << 16
FINE_DENSE_CELLS = 1 << 22
