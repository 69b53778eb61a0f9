"""The bitset any-order runtime rule on the device (docs/any_order_bitset.md), opt-in.

Each row carries, besides its token-DFA state, ``uint32[W]`` bits: the declared properties
already written in its open any-order objects. An edge (state, class) has a program
``(U, S, C, A)``: it is allowed iff ``bits & U == 0`` and ``bits & S == S`` and its next state
is live under the bits after it (``(bits & ~C) | A``); a key position is live iff one of its
keys is unset. A program may also hold REQUIRE alternatives (a union's ``}`` whose members
close on different required sets): then one of them must be all set. Pure JAX, no host
callback.

The mask splits the edges: an edge whose test holds whatever the bits (no program test, its
next state always live) is *static*, and a state's static edges are one deduplicated packed
row of ``uint32[ceil(V/32)]`` (as ``mask_impl="bitmask"`` stores every state's mask); the few
tokens that are ever on a *conditional* edge (key tokens, ``"``, ``}``: 602 of Llama-3's
128,256 on changie) are listed apart. The mask unpacks the row's static words, tests each
row's bits against the table's distinct edge conditions (``[B, N, W]``) and writes the listed
tokens' answers over them (``[B, T]``, a scatter of T columns). The element gather of
``[B, C]`` answers through the whole class map, 5-12x the plain gather mask on XLA:CPU, is
gone (BENCHMARKS.md, "Session 12").

`ConstraintTables.from_bitset` (`constraint_tables` here) puts these tables in the ``bitset``
block of `ConstraintTables`; `allowed_mask` / `advance` then call `bitset_mask` /
`bitset_advance` with the rows' ``ConstraintState.bits``, so `generate` (plain, speculative)
decodes them unchanged. Several constraints share one tables (K > 1, `constraint_tables` of
a sequence): every array of the block has a leading K axis and each row reads its own
constraint's (one capacity for all).
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Int, UInt32

from automata_jax._capacity import (
    DEFAULT_STACK_SIZE,
    TableCapacity,
    bucket,
    needs,
    too_large,
    too_many_constraints,
)
from automata_jax._errors import RuntimeShapeError, TableCapacityError


@dataclasses.dataclass(frozen=True)
class BitsetCapacity:
    """Fixed padded sizes of bitset tables (`ConstraintTables.from_bitset`), hashable.

    Tables of two schemas built with one capacity have the same shapes, so `generate`'s loop
    compiled for one runs the other with no retrace. Each field is an upper bound; padding
    allows nothing.

    Attributes:
      states, classes: Q and C of the token table.
      words: W, the bitset's uint32 words per row (32 declared properties each).
      programs: P, the distinct edge programs.
      alternatives: K, the most REQUIRE alternatives of one program (a union's ``}`` whose
        members close on different required sets; 1 where no program holds a choice).
      conditions: N, the distinct edge conditions (program, next state's keys), plus one.
      mask_rows: R, the deduplicated packed rows of the states' static tokens, plus one.
      cond_tokens: T, the tokens on a conditional edge in some state.
      forced: F, the most tokens of a state's forced run kept for fast-forward (0: none);
        None: the schema's longest run, rounded up to a power of two.
      constraints: K, the constraints of one tables (`from_bitset` of a sequence): every
        constraint is padded to the sizes above.
      stack, pushes, push_len, context_edges, edges_per_state, pops: the stack block of a
        schema with grammar rules (`BitsetPDATables`), as `TableCapacity`'s fields of those
        names: S, the stack bound of every row (deeper nesting is masked, see
        `automata_jax._stack`), the push rows and their length, the context-dependent edges,
        those of one state, the symbols one edge pops. Unused by schemas without rules.
    """

    states: int
    classes: int
    words: int = 1
    programs: int = 128
    alternatives: int = 4
    conditions: int = 512
    mask_rows: int = 128
    cond_tokens: int = 1024
    forced: int | None = None
    constraints: int = 1
    stack: int = DEFAULT_STACK_SIZE
    pushes: int = 64
    push_len: int = 16
    context_edges: int = 1024
    edges_per_state: int = 64
    pops: int = 16

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "forced" and (v is None or (isinstance(v, (int, np.integer)) and v == 0)):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise RuntimeShapeError(f"BitsetCapacity.{f.name}: expected an int >= 1, got {v!r}")
            object.__setattr__(self, f.name, int(v))


@struct.dataclass(kw_only=True)
class BitsetDeviceTables:
    """`automata_compile.tokens.BitsetTables` padded to bucketed sizes, as device arrays.

    Padded states allow nothing and are not accepting; padded classes are dead; padded
    programs and words are zeros. Tables of two schemas with the same padded sizes have the
    same shapes, so the kernels do not retrace.

    Attributes:
      token_class: int32[V], V = the logits width; None in `ConstraintTables`' block, whose
        own ``token_class`` / ``next_state`` are the same table (the kernels take the rows'
        classes and next states from the caller there, `bitset_advance`'s ``cls``/``nxt``).
      next_state: int32[Q, C], -1 = no edge; None with ``token_class``.
      program: int32[Q, C].
      programs: uint32[P, 4, W], per program U, S, C, A.
      alts: uint32[P, K, W], per program its REQUIRE alternatives: it also holds only if one
        of them is all set (all zeros: no choice; padded by repeating the last one).
      live_mask: uint32[Q, W].
      live_always: bool[Q].
      accepting: bool[Q].
      eos: int32[E], the end-of-sequence ids.
      start: int32[], the initial state.
      cond_id: int32[Q, C], each edge's condition (0: no edge), for the mask: an edge's
        program test and its next state's liveness depend on the row's bits only through
        its (program, next state's live mask) pair, so the mask tests the N distinct pairs
        per row and gathers them, as the plain mask gathers next states.
      conds: uint32[N, 3, W], per condition U (must be 0), S (must be 1), K (live iff one
        of them is 0: the next state's keys neither set nor cleared by the program).
      cond_static: bool[N], the condition's liveness holds whatever the bits (the next state
        is always live, or the program clears one of its keys without setting it).
      cond_alts: uint32[N, K, W], the condition's program's REQUIRE alternatives (`alts`).
      mask_bits: uint32[R, ceil(V/32)], deduplicated packed rows of each state's *static*
        tokens (bit ``t % 32`` of word ``t // 32`` is token t): those on an edge whose
        condition holds whatever the bits. Row 0 is all zeros.
      mask_row: int32[Q], each state's `mask_bits` row. (In a batch with a stack the rows
        and the conditional tokens below are `pda_rows`': the pushes and the
        context-dependent edges count too.)
      cond_tokens: int32[T], the tokens on a conditional edge in some state (padding: V, out
        of range, dropped by the mask's scatter); their mask bits are computed per row.
      cond_token_class: int32[T], their classes (padding: 0, no edge).
      forced_clear, forced_set: uint32[Q, F, W] or None (no forced runs): after the first
        i + 1 tokens of state q's forced run (`ConstraintTables.forced_tokens`) a row's bits
        B are ``(B & ~forced_clear[q, i]) | forced_set[q, i]`` (`run_bits`; fast-forward
        feeds a run without testing it: its tests hold for every bitset a row may hold).
      forced: F (static; 0: no forced runs).
      cd_program: int32[E] or None: with a stack (`BitsetPDATables`), each context-dependent
        edge's program (edge ids as in `ConstraintTables.cd_class`).
      vocab: V (static).
      stack_sizes: with a stack, the stack block's padded sizes (`BitsetCapacity`'s
        ``stack`` .. ``pops``, static), so that `capacity` gives them back; () without.
    """

    token_class: Int[Array, " V"] | None
    next_state: Int[Array, "Q C"] | None
    program: Int[Array, "Q C"]
    programs: UInt32[Array, "P 4 W"]
    alts: UInt32[Array, "P K W"]
    live_mask: UInt32[Array, "Q W"]
    live_always: Bool[Array, " Q"]
    accepting: Bool[Array, " Q"]
    eos: Int[Array, " E"]
    start: Int[Array, ""]
    cond_id: Int[Array, "Q C"]
    conds: UInt32[Array, "N 3 W"]
    cond_static: Bool[Array, " N"]
    cond_alts: UInt32[Array, "N K W"]
    mask_bits: UInt32[Array, "R VW"]
    mask_row: Int[Array, " Q"]
    cond_tokens: Int[Array, " T"]
    cond_token_class: Int[Array, " T"]
    forced_clear: UInt32[Array, "Q F W"] | None = None
    forced_set: UInt32[Array, "Q F W"] | None = None
    forced: int = struct.field(pytree_node=False, default=0)
    cd_program: Int[Array, " E"] | None = None
    stack_sizes: tuple[tuple[str, int], ...] = struct.field(pytree_node=False, default=())
    vocab: int = struct.field(pytree_node=False, default=0)

    @property
    def words(self) -> int:
        return int(self.programs.shape[-1])

    @property
    def vocab_size(self) -> int:
        return self.vocab

    @property
    def capacity(self) -> BitsetCapacity:
        """These tables' padded sizes: tables of another schema built with them
        (``ConstraintTables.from_bitset(..., capacity=tables.bitset.capacity)``) have the
        same shapes, so they swap into compiled loops with no retrace."""
        k = int(self.program.shape[0]) if self.program.ndim == 3 else 1
        return BitsetCapacity(**self.sizes, **dict(self.stack_sizes), constraints=k)

    @property
    def sizes(self) -> dict[str, int]:
        """The padded sizes, as `from_tables` keywords: tables of another schema built with
        them have the same shapes (no retrace)."""
        return {
            "states": int(self.program.shape[-2]),
            "classes": int(self.program.shape[-1]),
            "programs": int(self.programs.shape[-3]),
            "alternatives": int(self.alts.shape[-2]),
            "words": self.words,
            "conditions": int(self.conds.shape[-3]),
            "mask_rows": int(self.mask_bits.shape[-2]),
            "cond_tokens": int(self.cond_tokens.shape[-1]),
            "forced": self.forced,
        }

    @classmethod
    def from_tables(
        cls,
        t,
        vocab_size: int,
        *,
        states: int | None = None,
        classes: int | None = None,
        programs: int | None = None,
        alternatives: int | None = None,
        words: int | None = None,
        conditions: int | None = None,
        mask_rows: int | None = None,
        cond_tokens: int | None = None,
        forced: int | None = None,
    ) -> BitsetDeviceTables:
        """Pads ``t`` (a `BitsetTables`) to powers of two, or to the sizes given
        (``forced``: F of the forced runs, see `BitsetCapacity`; recorded here, the runs
        themselves go in `ConstraintTables`).

        Raises:
          TableCapacityError: ``t`` needs more than a size given.
        """
        q, c = t.next_state.shape
        p, _, w = t.programs.shape
        alts = _program_alts(t)
        need = {
            "states": q,
            "classes": c,
            "programs": p,
            "alternatives": alts.shape[1],
            "words": w,
            "vocab_size": len(t.token_class),
        }
        have = {
            "states": states or bucket(q),
            "classes": classes or bucket(c),
            "programs": programs or bucket(p),
            "alternatives": alternatives or bucket(alts.shape[1], 1),
            "words": words or w,
            "vocab_size": vocab_size,
        }
        for name, n in need.items():
            if n > have[name]:
                raise TableCapacityError(
                    f"BitsetDeviceTables.from_tables: expected {name} >= {n:,}, got {have[name]:,}"
                )
        Q, C, P, W = have["states"], have["classes"], have["programs"], have["words"]
        f = _forced_width(t, forced)
        alts = _padded_alts(alts, P, have["alternatives"], W)
        cond_id, conds, cond_static, cond_alts = _conditions(t, Q, C, W, conditions, alts)
        token_class = _padded(t.token_class, (vocab_size,), np.int32)
        mask_bits, mask_row, ctok, ctok_class = _static_rows(
            token_class, cond_id, conds, cond_static, mask_rows, cond_tokens, cond_alts
        )
        return cls(
            mask_bits=jnp.asarray(mask_bits),
            mask_row=jnp.asarray(mask_row),
            cond_tokens=jnp.asarray(ctok),
            cond_token_class=jnp.asarray(ctok_class),
            cond_id=jnp.asarray(cond_id),
            conds=jnp.asarray(conds),
            cond_static=jnp.asarray(cond_static),
            cond_alts=jnp.asarray(cond_alts),
            token_class=jnp.asarray(token_class),
            next_state=jnp.asarray(_padded(t.next_state, (Q, C), np.int32, fill=-1)),
            program=jnp.asarray(_padded(t.program, (Q, C), np.int32)),
            programs=jnp.asarray(_padded(t.programs, (P, 4, W), np.uint32)),
            alts=jnp.asarray(alts),
            live_mask=jnp.asarray(_padded(t.live_mask, (Q, W), np.uint32)),
            live_always=jnp.asarray(_padded(t.live_always, (Q,), bool)),
            accepting=jnp.asarray(_padded(t.accepting, (Q,), bool)),
            eos=jnp.asarray(np.asarray(t.eos_ids, np.int32)),
            start=jnp.asarray(t.start, jnp.int32),
            forced=f,
            vocab=int(vocab_size),
            **_forced_bits(t, Q, f, W),
        )


def _forced_width(t, fixed: int | None) -> int:
    """F: ``fixed``, else the longest forced run of ``t`` rounded up to a power of two (0: none)."""
    if fixed is not None:
        return int(fixed)
    runs = getattr(t, "forced", None)
    longest = 0 if runs is None else int(runs.length.max(initial=0))
    return bucket(longest, 1) if longest else 0


def _forced_bits(t, num_states: int, f: int, words: int) -> dict:
    """``forced_clear`` / ``forced_set`` ([Q, F, W]) of ``t``'s runs; {} where F is 0."""
    if not f:
        return {}
    clear = np.zeros((num_states, f, words), np.uint32)
    sets = np.zeros((num_states, f, words), np.uint32)
    runs = getattr(t, "forced", None)
    if runs is not None and getattr(runs, "clear", None) is not None:
        q, n, w = runs.clear.shape
        n = min(n, f)
        clear[:q, :n, :w] = runs.clear[:, :n]
        sets[:q, :n, :w] = runs.set[:, :n]
    return {"forced_clear": jnp.asarray(clear), "forced_set": jnp.asarray(sets)}


def run_bits(tables: BitsetDeviceTables | None, state, n, bits, constraint=None):
    """Each row's bits after the first ``n`` (int32[B]) tokens of its state's forced run
    (``bits`` where ``n`` is 0, or without bitset tables or runs); ``constraint``: each row's
    constraint id (tables of several; -1, unconstrained, reads constraint 0's unused runs)."""
    if tables is None or tables.forced_clear is None:
        return bits
    t = _stacked(tables)
    k = _rows_k(
        None if constraint is None else jnp.clip(constraint, 0, t.program.shape[0] - 1), state
    )
    q = jnp.clip(state, 0, t.forced_clear.shape[1] - 1)
    i = jnp.clip(n - 1, 0, t.forced_clear.shape[2] - 1)
    after = (bits & ~t.forced_clear[k, q, i]) | t.forced_set[k, q, i]
    return jnp.where((n > 0)[:, None], after, bits)


def _forced_arrays(t, num_states: int, f: int) -> dict:
    """``forced_tokens`` / ``forced_len`` / ``forced_states`` ([1, Q, F]) of ``t``'s runs, cut
    to F tokens (zeros where ``t`` has none); {} where F is 0 (`ConstraintTables`' forced
    arrays, which fast-forward reads; the bits a run sets are `_forced_bits`', see
    `automata_compile.tokens._bitset_forced`)."""
    if not f:
        return {}
    q = t.next_state.shape[0]
    runs = getattr(t, "forced", None)
    run_tokens = np.zeros((q, 1), np.int32) if runs is None else runs.tokens
    run_len = np.zeros(q, np.int32) if runs is None else runs.length
    n = min(f, run_tokens.shape[1])
    tokens = np.zeros((1, num_states, f), np.int32)
    length = np.zeros((1, num_states), np.int32)
    states = np.zeros((1, num_states, f), np.int32)
    tokens[0, :q, :n] = run_tokens[:, :n]
    length[0, :q] = np.minimum(run_len, f)
    cur = np.arange(q)
    for j in range(f):
        live = length[0, :q] > j
        if j < n:
            cur = cur.copy()
            cur[live] = t.next_state[cur[live], t.token_class[run_tokens[live, j]]]
            assert (cur[live] >= 0).all()
        states[0, :q, j] = cur
    return dict(forced_tokens=tokens, forced_len=length, forced_states=states)


def _padded(a, shape: tuple[int, ...], dtype, fill=0) -> np.ndarray:
    """``a`` in the leading corner of a ``shape`` array of ``fill``."""
    out = np.full(shape, fill, dtype)
    out[tuple(slice(0, n) for n in np.shape(a))] = a
    return out


def _program_alts(t) -> np.ndarray:
    """uint32[P, K, W]: ``t``'s programs' REQUIRE alternatives (zeros, K = 1, where it has
    none)."""
    alts = getattr(t, "program_alts", None)
    if alts is None:
        p, _, w = t.programs.shape
        return np.zeros((p, 1, w), np.uint32)
    return np.asarray(alts, np.uint32)


def _padded_alts(alts: np.ndarray, num_programs: int, k: int, words: int) -> np.ndarray:
    """``alts`` (uint32[P, K', W']) as uint32[num_programs, k, words]: each program's last
    alternative repeated (an alternative of zeros would always hold), padded programs zeros."""
    p, k0, w = alts.shape
    out = np.zeros((num_programs, k, words), np.uint32)
    out[:p, :k0, :w] = alts
    out[:p, k0:, :w] = alts[:, -1:]
    return out


def _conditions(t, num_states: int, num_classes: int, words: int, size: int | None, alts):
    """(cond_id int32[Q, C], conds uint32[N, 3, W], cond_static bool[N], cond_alts
    uint32[N, K, W]) of ``t``'s edges (``alts``: the padded `_program_alts`), padded: N a
    power of two (or ``size``), condition 0 never holds.

    Raises:
      TableCapacityError: more conditions than ``size``."""
    q, c = t.next_state.shape
    w = t.programs.shape[2]
    nxt = t.next_state
    edge = nxt >= 0
    tn = np.maximum(nxt, 0)
    # each state's live mask id: -1 where always live
    masks, mask_id = np.unique(t.live_mask, axis=0, return_inverse=True)
    mask_id = np.where(t.live_always, -1, mask_id.reshape(-1))
    key = t.program.astype(np.int64) * (masks.shape[0] + 1) + (mask_id[tn] + 1)
    uniq, inv = np.unique(key[edge], return_inverse=True)
    n = size or bucket(uniq.shape[0] + 1, 8)
    if uniq.shape[0] + 1 > n:
        raise TableCapacityError(
            f"BitsetDeviceTables.from_tables: expected conditions >= {uniq.shape[0] + 1:,}, "
            f"got {n:,}"
        )
    cond_id = np.zeros((num_states, num_classes), np.int32)
    cond_id[:q, :c][edge] = inv.reshape(-1) + 1
    prog = t.programs[uniq // (masks.shape[0] + 1)]  # [N', 4, w]
    mid = uniq % (masks.shape[0] + 1) - 1
    live = np.where((mid >= 0)[:, None], masks[np.maximum(mid, 0)], 0).astype(np.uint32)
    u, s_, clr, a = prog[:, 0], prog[:, 1], prog[:, 2], prog[:, 3]
    conds = np.zeros((n, 3, words), np.uint32)
    conds[1 : 1 + uniq.shape[0], 0, :w] = u
    conds[1 : 1 + uniq.shape[0], 1, :w] = s_
    conds[1 : 1 + uniq.shape[0], 2, :w] = live & ~a & ~clr
    static = np.zeros(n, bool)
    static[1 : 1 + uniq.shape[0]] = (mid < 0) | ((live & ~a & clr) != 0).any(axis=1)
    # condition 0 (no edge) never holds: it needs a bit both 0 and 1
    conds[0, 0, 0] = conds[0, 1, 0] = 1
    cond_alts = np.zeros((n,) + alts.shape[1:], np.uint32)
    cond_alts[1 : 1 + uniq.shape[0]] = alts[uniq // (masks.shape[0] + 1)]
    return cond_id, conds, static, cond_alts


def _always(conds: np.ndarray, cond_static: np.ndarray, cond_alts=None) -> np.ndarray:
    """bool[N]: the conditions that hold whatever the bits (no U, no S, no REQUIRE
    alternatives, statically live)."""
    always = (conds[:, 0] == 0).all(axis=1) & (conds[:, 1] == 0).all(axis=1) & cond_static
    if cond_alts is not None:
        always &= (cond_alts == 0).all(axis=(1, 2))
    return always


def _holds_never(conds: np.ndarray, cond_static: np.ndarray) -> np.ndarray:
    """bool[N]: the conditions that hold under no bits (condition 0; a next state whose keys
    are all set by the edge's program)."""
    never = ~cond_static & (conds[:, 2] == 0).all(axis=1)
    never |= ((conds[:, 0] & conds[:, 1]) != 0).any(axis=1)
    return never


def _static_rows(
    token_class, cond_id, conds, cond_static, rows: int | None, size: int | None, cond_alts=None
):
    """(mask_bits uint32[R, ceil(V/32)], mask_row int32[Q], cond_tokens int32[T],
    cond_token_class int32[T]): each state's static tokens as a deduplicated packed row, and
    the tokens on a conditional edge anywhere, padded (R: a power of two >= 8 or ``rows``; T:
    a power of two >= 8 or ``size``).

    Raises:
      TableCapacityError: more rows or tokens than ``rows`` / ``size``."""
    always = _always(conds, cond_static, cond_alts)
    conditional = ~always & ~_holds_never(conds, cond_static)
    static_cls = always[cond_id]  # [Q, C]; cond_id 0 (no edge) never holds
    cls_conditional = conditional[cond_id].any(axis=0)  # [C]
    return _packed_rows(token_class, static_cls, cls_conditional, rows, size)


def _packed_rows(token_class, static_cls, cls_conditional, rows: int | None, size: int | None):
    """`_static_rows` of the classes ``static_cls`` (bool[Q, C]) allowed in each state
    whatever the row's bits (and stack), and ``cls_conditional`` (bool[C]) those whose answer
    depends on them in some state."""
    v = token_class.shape[0]
    patterns, inverse = np.unique(static_cls, axis=0, return_inverse=True)
    # row 0 all zeros (padded states); a state without static edges shares it
    zero = ~patterns.any(axis=1)
    order = np.cumsum(~zero)  # pattern i -> row order[i] (its 1-based rank), 0 if empty
    pattern_row = np.where(zero, 0, order).astype(np.int32)
    n_rows = int((~zero).sum()) + 1
    r = rows or bucket(n_rows, 8)
    if n_rows > r:
        raise TableCapacityError(
            f"BitsetDeviceTables.from_tables: expected mask_rows >= {n_rows:,}, got {r:,}"
        )
    words = (v + 31) // 32
    mask_bits = np.zeros((r, words), np.uint32)
    for i in np.flatnonzero(~zero):
        packed = np.packbits(patterns[i][token_class], bitorder="little")
        packed = np.pad(packed, (0, words * 4 - packed.shape[0]))
        mask_bits[pattern_row[i]] = packed.view("<u4")
    mask_row = pattern_row[inverse.reshape(-1)]
    cls_conditional = cls_conditional.copy()
    cls_conditional[0] = False
    tok = np.flatnonzero(cls_conditional[token_class]).astype(np.int32)
    n = size or bucket(tok.shape[0], 8)
    if tok.shape[0] > n:
        raise TableCapacityError(
            f"BitsetDeviceTables.from_tables: expected cond_tokens >= {tok.shape[0]:,}, got {n:,}"
        )
    ctok = np.full(n, v, np.int32)
    ctok[: tok.shape[0]] = tok
    ctok_class = np.zeros(n, np.int32)
    ctok_class[: tok.shape[0]] = token_class[tok]
    return mask_bits, mask_row, ctok, ctok_class


def _stacked(tables: BitsetDeviceTables) -> BitsetDeviceTables:
    """``tables`` with a leading constraint axis K: one schema's own tables (`from_tables`)
    get K = 1; `ConstraintTables`' block has it already."""
    if tables.program.ndim == 3:
        return tables
    return jax.tree.map(lambda x: x[None], tables)


def _rows_k(k, state):
    """int32[B]: each row's constraint (0 where ``k`` is None)."""
    return jnp.zeros(state.shape[:1], jnp.int32) if k is None else k


def _shared(tables: BitsetDeviceTables, a, k):
    """``a`` ([K, ...]) per row ([B, ...]), or [1, ...] where K = 1 (broadcast, no gather)."""
    return a if tables.program.shape[0] == 1 else a[k]


def _test(tables: BitsetDeviceTables, k, nxt, pid, bits):
    """Edges ``nxt`` (int32[B, ...]) with programs ``pid`` (int32[B, ...]) of each row's
    constraint ``k`` (int32[B]) on its ``bits`` (uint32[B, W]): (allowed, bits after)."""
    kk = k.reshape(k.shape + (1,) * (nxt.ndim - 1))
    prog = tables.programs[kk, pid]  # [B, ..., 4, W]
    alts = tables.alts[kk, pid]  # [B, ..., K', W]
    u, s, c, a = (prog[..., i, :] for i in range(4))
    b = bits.reshape(bits.shape[:1] + (1,) * (nxt.ndim - 1) + bits.shape[1:])
    ok = (nxt >= 0) & jnp.all((b & u) == 0, axis=-1) & jnp.all((b & s) == s, axis=-1)
    ok &= _one_alternative(b[..., None, :], alts)
    after = (b & ~c) | a
    tn = jnp.maximum(nxt, 0)
    live = tables.live_always[kk, tn] | jnp.any((tables.live_mask[kk, tn] & ~after) != 0, axis=-1)
    return ok & live, after


def bitset_mask(
    tables: BitsetDeviceTables,
    state: Int[Array, " B"],
    bits: UInt32[Array, "B W"],
    k: Int[Array, " B"] | None = None,
) -> Bool[Array, "B V"]:
    """The tokens each row may take next: its state's static tokens (one packed row,
    unpacked), the conditional tokens' edge tests on its bits written over them; EOS where
    the row's state accepts. ``k``: each row's constraint (tables of several, K > 1)."""
    if bits.ndim != 2 or bits.shape[1] != tables.words or bits.dtype != jnp.uint32:
        raise RuntimeShapeError(
            f"bitset_mask: expected bits uint32[B, {tables.words}], got {bits.dtype}{list(bits.shape)}"
        )
    t, k = _stacked(tables), _rows_k(k, state)
    n_rows = state.shape[0]
    v = tables.vocab_size
    words = t.mask_bits[k, t.mask_row[k, state]]  # [B, ceil(V/32)]
    shifts = jnp.arange(32, dtype=jnp.uint32)
    mask = ((words[:, :, None] >> shifts) & jnp.uint32(1)).astype(jnp.bool_)
    mask = mask.reshape(n_rows, -1)[:, :v]
    holds = _holds(t, k, bits)  # [B, N]
    ctok_class = _shared(t, t.cond_token_class, k)  # [B or 1, T]
    cond = t.cond_id[k[:, None], state[:, None], ctok_class]  # [B, T]
    ok = jnp.take_along_axis(holds, cond, axis=1)
    if t.program.shape[0] == 1:
        mask = mask.at[:, t.cond_tokens[0]].set(ok, mode="drop")
    else:  # each row its constraint's conditional tokens
        rows = jnp.arange(n_rows)[:, None]
        mask = mask.at[rows, t.cond_tokens[k]].set(ok, mode="drop")
    acc = t.accepting[k, state][:, None]
    eos = t.eos[0]
    return mask.at[:, eos].set(jnp.broadcast_to(acc, (n_rows, eos.shape[0])))


def _holds(tables: BitsetDeviceTables, k, bits: UInt32[Array, "B W"]) -> Bool[Array, "B N"]:
    """bool[B, N]: which of its constraint's edge conditions each row's bits pass."""
    b = bits[:, None, :]  # [B, 1, W] against the N conditions
    conds = _shared(tables, tables.conds, k)  # [B or 1, N, 3, W]
    u, s, kk = conds[:, :, 0], conds[:, :, 1], conds[:, :, 2]
    holds = jnp.all((b & u) == 0, axis=-1) & jnp.all((b & s) == s, axis=-1)
    holds &= _one_alternative(b[:, :, None, :], _shared(tables, tables.cond_alts, k))
    static = _shared(tables, tables.cond_static, k)
    return holds & (static | jnp.any((kk & ~b) != 0, axis=-1))


def _one_alternative(b, alts):
    """bool[...]: whether one of the K alternatives (``alts`` uint32[..., K, W]) is all set in
    ``b`` (uint32[..., 1, W]); an alternative of zeros (no choice) always is."""
    return jnp.any(jnp.all((b & alts) == alts, axis=-1), axis=-1)


def bitset_advance(
    tables: BitsetDeviceTables,
    state: Int[Array, " B"],
    bits: UInt32[Array, "B W"],
    token: Int[Array, " B"],
    cls: Int[Array, " B"] | None = None,
    nxt: Int[Array, " B"] | None = None,
    k: Int[Array, " B"] | None = None,
) -> tuple[Int[Array, " B"], UInt32[Array, "B W"]]:
    """Each row's state and bits after ``token`` (EOS keeps them; a token the row does not
    allow gives state -1). ``cls``, ``nxt``: the token's class and the edge's next state,
    read from ``tables``' own token table where None (`ConstraintTables` passes its own);
    ``k``: each row's constraint (tables of several, K > 1)."""
    t, k = _stacked(tables), _rows_k(k, state)
    if cls is None:
        cls = t.token_class[k, token]
        nxt = t.next_state[k, state, cls]  # [B]
    good, after = _test(t, k, nxt, t.program[k, state, cls], bits)
    is_eos = jnp.any(token[:, None] == t.eos[0][None, :], axis=1)
    new_state = jnp.where(is_eos, state, jnp.where(good, nxt, -1))
    new_bits = jnp.where((is_eos | ~good)[:, None], bits, after)
    return new_state, new_bits


def pda_class_ok(
    tables: BitsetDeviceTables,
    state: Int[Array, " B"],
    bits: UInt32[Array, "B W"],
    nxt: Int[Array, "B C"],
    k: Int[Array, " B"] | None = None,
) -> Bool[Array, "B C"]:
    """With a stack: which classes' context-independent edges (next states ``nxt``, the
    rows of `ConstraintTables.next_state`) pass their test on each row's bits (class-level;
    the stack's own tests are `_stack.class_mask`'s)."""
    t, k = _stacked(tables), _rows_k(k, state)
    ok, _ = _test(t, k, nxt, t.program[k, state], bits)  # programs [B, C]
    return ok


def pda_cd_test(tables: BitsetDeviceTables, edge, target, bits: UInt32[Array, "B W"], k=None):
    """With a stack: context-dependent edges ``edge`` (int32[B, ...], into ``target``) of
    each row's constraint ``k`` on its bits: (allowed bool[B, ...], bits after
    uint32[B, ..., W])."""
    t, k = _stacked(tables), _rows_k(k, edge)
    kk = k.reshape(k.shape + (1,) * (edge.ndim - 1))
    pid = t.cd_program[kk, jnp.clip(edge, 0, t.cd_program.shape[1] - 1)]
    return _test(t, k, target, pid, bits)


def pda_mask(
    tables: BitsetDeviceTables, k, state: Int[Array, " B"], row_ok: Bool[Array, "B C"]
) -> Bool[Array, "B V"]:
    """With a stack: the tokens of each row's allowed classes ``row_ok`` (the class-level
    tests: bits, pushes that fit, context-dependent edges), as the packed row of its state's
    static tokens (`pda_rows`) with the few conditional tokens' class answers written over
    it, instead of a gather through the whole class map."""
    t = _stacked(tables)
    n_rows = state.shape[0]
    words = t.mask_bits[k, t.mask_row[k, state]]  # [B, ceil(V/32)]
    shifts = jnp.arange(32, dtype=jnp.uint32)
    mask = ((words[:, :, None] >> shifts) & jnp.uint32(1)).astype(jnp.bool_)
    mask = mask.reshape(n_rows, -1)[:, : tables.vocab_size]
    ok = jnp.take_along_axis(
        row_ok,
        jnp.broadcast_to(_shared(t, t.cond_token_class, k), (n_rows, t.cond_token_class.shape[1])),
        axis=1,
    )
    if t.program.shape[0] == 1:
        return mask.at[:, t.cond_tokens[0]].set(ok, mode="drop")
    rows = jnp.arange(n_rows)[:, None]
    return mask.at[rows, t.cond_tokens[k]].set(ok, mode="drop")


def pda_rows(plain, i: int, dt: BitsetDeviceTables, rows: int | None, size: int | None):
    """(mask_bits, mask_row, cond_tokens, cond_token_class) of constraint ``i`` of a batch
    with a stack (``plain``: its `ConstraintTables`, numpy; ``dt``: its device tables): a
    class is static in a state where its context-independent edge holds whatever the bits
    and pushes nothing (so it fits any stack); conditional where it has another edge there
    (a test, a push, a context-dependent edge).

    Raises:
      TableCapacityError: more rows or tokens than ``rows`` / ``size``."""
    token_class = np.asarray(plain.token_class[i])
    nxt = np.asarray(plain.next_state[i])
    grow = np.asarray(plain.push_len[i])[np.asarray(plain.edge_push[i])]  # [Q, C]
    conds, cond_static = np.asarray(dt.conds), np.asarray(dt.cond_static)
    always = _always(conds, cond_static, np.asarray(dt.cond_alts))
    static_cls = (nxt >= 0) & always[np.asarray(dt.cond_id)] & (grow == 0)
    count = np.asarray(plain.cd_count[i])
    qs = np.repeat(np.arange(count.size), count)  # edges sorted by state: edge j is qs[j]'s
    has_cd = np.zeros_like(static_cls)
    has_cd[qs, np.asarray(plain.cd_class[i])[: qs.size]] = True
    cls_conditional = (((nxt >= 0) & ~static_cls) | has_cd).any(axis=0)
    return _packed_rows(token_class, static_cls, cls_conditional, rows, size)


def _pda_view(t):
    """`BitsetTables`' fields of a `BitsetPDATables`: its context-independent edges."""
    import types

    tab = t.tables
    return types.SimpleNamespace(
        token_class=tab.token_class,
        next_state=tab.next_state,
        program=t.program,
        programs=t.programs,
        program_alts=t.program_alts,
        live_mask=t.live_mask,
        live_always=t.live_always,
        accepting=tab.accepting,
        start=tab.start,
        eos_ids=tab.eos_ids,
    )


STACK_FIELDS = ("stack", "pushes", "push_len", "context_edges", "edges_per_state", "pops")


def _bitset_sizes(capacity: BitsetCapacity | None) -> dict:
    """`BitsetDeviceTables.from_tables` keywords of ``capacity`` (its stack fields and
    ``constraints`` left out)."""
    if capacity is None:
        return {}
    drop = (*STACK_FIELDS, "constraints")
    return {k: v for k, v in dataclasses.asdict(capacity).items() if k not in drop}


def _check_capacity(capacity) -> None:
    if capacity is not None and not isinstance(capacity, BitsetCapacity):
        raise RuntimeShapeError(
            f"capacity: expected a BitsetCapacity (or None), got {type(capacity).__name__}"
        )


def _table_capacity(plains, capacity: BitsetCapacity, has_stack: bool) -> TableCapacity:
    """The `TableCapacity` of ``capacity``'s token tables and stack block for ``plains``.

    Raises:
      TableCapacityError: the batch or one constraint needs more than ``capacity`` (the
        field, both sizes)."""
    where, cap = "ConstraintTables.from_bitset", "BitsetCapacity"
    if len(plains) > capacity.constraints:
        raise too_many_constraints(where, len(plains), capacity.constraints, cap)
    for i, d in enumerate(plains):
        need = needs(d)
        names = ("states", "classes", *(STACK_FIELDS[1:] if d.is_pda else ()))
        for name in names:
            have = getattr(capacity, name)
            if need[name] > have:
                which = "the schema" if len(plains) == 1 else f"constraint #{i}"
                raise too_large(where, which, name, need[name], have, cap)
    stack = {name: getattr(capacity, name) for name in STACK_FIELDS} if has_stack else {}
    return TableCapacity(
        states=capacity.states,
        classes=capacity.classes,
        constraints=capacity.constraints,
        **stack,
    )


def _event_free(d):
    """A plain `TokenDFA` as bitset tables whose edges have no events (W = 1, always live):
    a `BitsetTables`-like view, or for a grammar a `BitsetPDATables`-like one."""
    import types

    q, c = d.next_state.shape
    common = dict(
        program=np.zeros((q, c), np.int32),
        programs=np.zeros((1, 4, 1), np.uint32),
        program_alts=np.zeros((1, 1, 1), np.uint32),
        live_mask=np.zeros((q, 1), np.uint32),
        live_always=np.ones(q, bool),
    )
    if d.is_pda:
        return types.SimpleNamespace(
            tables=d, cd_program=np.zeros(d.cd_state.shape[0], np.int32), **common
        )
    return types.SimpleNamespace(
        token_class=d.token_class,
        next_state=d.next_state,
        accepting=d.accepting,
        start=d.start,
        eos_ids=d.eos_ids,
        **common,
    )


def _is_pda(t) -> bool:
    return hasattr(t, "cd_program") and hasattr(t, "tables")


def _check_supported(t) -> None:
    """Refuses what is not bitset tables (`BitsetTables`, `BitsetPDATables`: a stack with
    the bits) or a `TokenDFA`."""
    from automata_compile import TokenDFA

    if _is_pda(t) or isinstance(t, TokenDFA):
        return
    if not hasattr(t, "token_class") or not hasattr(t, "programs"):
        raise RuntimeShapeError(
            f"ConstraintTables.from_bitset: expected automata_compile BitsetTables or "
            f"BitsetPDATables (compile_json_schema_bitset), or a TokenDFA, got "
            f"{type(t).__name__}"
        )


def constraint_tables(ts, vocab_size: int, capacity: BitsetCapacity | None = None):
    """`ConstraintTables` of bitset constraints: one, or a sequence (constraint id ``i`` is
    ``ts[i]``; a plain `TokenDFA` may join them as bitset tables whose edges have no
    events). See `ConstraintTables.from_bitset`.

    The plain arrays are the constraints' token tables (`ConstraintTables.from_dfas`, read
    with every bitset: what `advance` reads the class and next state from), with the stack
    block where one is a grammar (`BitsetPDATables`, or a grammar `TokenDFA`); the
    ``bitset`` block holds each constraint's device tables (`BitsetDeviceTables`) stacked on
    a leading K axis, all padded to one size. Forced runs: those of `BitsetTables` in a
    batch without a stack (none with a stack: fast-forward would feed a run untested; none
    for a plain `TokenDFA` in the batch)."""
    from automata_compile import TokenDFA
    from automata_jax._tables import ConstraintTables  # _tables imports this module lazily

    single = isinstance(ts, (str, os.PathLike)) or not isinstance(ts, (list, tuple))
    ts = [ts] if single else list(ts)
    if not ts:
        raise RuntimeShapeError("ConstraintTables.from_bitset: expected at least one constraint")
    loaded = []
    for t in ts:
        if isinstance(t, (str, os.PathLike)):  # `automata_compile.tokens.save_bitset_tables`
            from automata_compile import load_bitset_tables

            t = load_bitset_tables(t)
        _check_supported(t)
        if isinstance(t, TokenDFA):  # the bitset layout is dense: state blocks, exactly so
            t = t.dense()
        loaded.append(t)
    if not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise RuntimeShapeError(f"vocab_size: expected a positive int, got {vocab_size!r}")
    vocab_size = int(vocab_size)
    _check_capacity(capacity)
    views = [_event_free(t) if isinstance(t, TokenDFA) else t for t in loaded]
    for t in views:
        if _is_pda(t) and getattr(t.tables, "is_blocked", False):  # class ids: the PDA's own
            raise RuntimeShapeError(
                "ConstraintTables.from_bitset: expected dense PDA tables (no state blocks)"
            )
    known = {t.vocab_fingerprint for t in loaded if isinstance(t, TokenDFA)}
    known |= {t.tables.vocab_fingerprint for t in views if _is_pda(t)}
    fingerprint = next(iter(known)) if len(known) == 1 else ""
    plains = []
    for v, t in zip(views, loaded, strict=True):
        if _is_pda(v):
            plains.append(v.tables)
        elif isinstance(t, TokenDFA):
            plains.append(t)
        else:
            plains.append(_plain_dfa(t, vocab_size, fingerprint))
    has_stack = any(d.is_pda for d in plains)
    fixed = None if capacity is None else _table_capacity(plains, capacity, has_stack)
    plain = ConstraintTables.from_dfas(plains, vocab_size=vocab_size, capacity=fixed)
    num_k, q, c = plain.next_state.shape
    edge_views = [_pda_view(t) if _is_pda(t) else t for t in views]
    sizes = {**_bitset_sizes(capacity), "states": q, "classes": c}
    if capacity is None:
        sizes["words"] = max(t.programs.shape[2] for t in views)
    if has_stack:
        sizes["forced"] = 0
    elif capacity is None:
        sizes["forced"] = max(_forced_width(t, None) for t in views)
    dts = [BitsetDeviceTables.from_tables(t, vocab_size, **sizes) for t in edge_views]
    if len(dts) > 1 and capacity is None:  # one size for all: the largest of each
        top = {name: max(dt.sizes[name] for dt in dts) for name in dts[0].sizes}
        dts = [BitsetDeviceTables.from_tables(t, vocab_size, **top) for t in edge_views]
    if has_stack:  # the packed rows with the stack's tests (`pda_rows`, `pda_mask`)
        rows, size = (
            (None, None) if capacity is None else (capacity.mask_rows, capacity.cond_tokens)
        )
        packed = [pda_rows(plain, i, dt, rows, size) for i, dt in enumerate(dts)]
        if capacity is None and len(dts) > 1:  # one size for all
            rows = max(p[0].shape[0] for p in packed)
            size = max(p[2].shape[0] for p in packed)
            packed = [pda_rows(plain, i, dt, rows, size) for i, dt in enumerate(dts)]
        names = ("mask_bits", "mask_row", "cond_tokens", "cond_token_class")
        dts = [
            dt.replace(**{n: jnp.asarray(a) for n, a in zip(names, p, strict=True)})
            for dt, p in zip(dts, packed, strict=True)
        ]
    stack_sizes = ()
    if has_stack:
        cap = plain.capacity
        stack_sizes = tuple((name, int(getattr(cap, name))) for name in STACK_FIELDS)
    e = None if not has_stack else plain.cd_class.shape[1]
    out = []
    for t, dt in zip(views, dts, strict=True):
        cd_program = None
        if has_stack:
            cd_program = np.zeros(e, np.int32)
            if _is_pda(t):
                cd_program[: len(t.cd_program)] = t.cd_program
            cd_program = jnp.asarray(cd_program)
        out.append(
            dt.replace(
                cd_program=cd_program,
                stack_sizes=stack_sizes,
                token_class=None,  # the plain arrays' (one copy on the device)
                next_state=None,
            )
        )
    out += [out[-1]] * (num_k - len(out))  # padded constraints: ids past num_constraints
    block = jax.tree.map(lambda *xs: jnp.stack(xs), *out)
    forced = dict.fromkeys(("forced_tokens", "forced_len", "forced_states"))
    f = dts[0].forced
    if f:
        runs = [_forced_arrays(t, q, f) for t in views]
        runs += [{k: np.zeros_like(v) for k, v in runs[0].items()}] * (num_k - len(runs))
        forced = {k: np.concatenate([r[k] for r in runs]) for k in forced}
    tables = plain.replace(bitset=block, exit_tokens=None, structure_drafts=None, **forced)
    return jax.device_put(tables)


def _plain_dfa(t, vocab_size: int, fingerprint: str):
    """``t``'s (`BitsetTables`) token table read with every bitset, as a `TokenDFA` (EOS
    class 0: EOS is allowed exactly in accepting states)."""
    from automata_compile import TokenDFA

    eos = np.asarray(t.eos_ids, np.int64)
    if eos.size == 0 or (eos < 0).any() or (eos >= vocab_size).any():
        raise RuntimeShapeError(
            f"ConstraintTables.from_bitset: expected EOS ids in [0, {vocab_size}), got "
            f"{list(t.eos_ids)}"
        )
    token_class = np.asarray(t.token_class, np.int32).copy()
    token_class[eos[eos < token_class.shape[0]]] = 0
    return TokenDFA(
        token_class=token_class,
        next_state=np.asarray(t.next_state, np.int32),
        accepting=np.asarray(t.accepting, bool),
        start=int(t.start),
        eos_ids=tuple(int(x) for x in t.eos_ids),
        vocab_fingerprint=fingerprint,
        spec_kind="bitset",
    )
