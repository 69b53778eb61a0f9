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
decodes them unchanged. One bitset constraint per tables (K = 1).
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

from automata_jax._capacity import DEFAULT_STACK_SIZE, TableCapacity, bucket, needs
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
      mask_row: int32[Q], each state's `mask_bits` row.
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
        return int(self.programs.shape[2])

    @property
    def vocab_size(self) -> int:
        return self.vocab

    @property
    def capacity(self) -> BitsetCapacity:
        """These tables' padded sizes: tables of another schema built with them
        (``ConstraintTables.from_bitset(..., capacity=tables.bitset.capacity)``) have the
        same shapes, so they swap into compiled loops with no retrace."""
        return BitsetCapacity(**self.sizes, **dict(self.stack_sizes))

    @property
    def sizes(self) -> dict[str, int]:
        """The padded sizes, as `from_tables` keywords: tables of another schema built with
        them have the same shapes (no retrace)."""
        return {
            "states": int(self.program.shape[0]),
            "classes": int(self.program.shape[1]),
            "programs": int(self.programs.shape[0]),
            "alternatives": int(self.alts.shape[1]),
            "words": self.words,
            "conditions": int(self.conds.shape[0]),
            "mask_rows": int(self.mask_bits.shape[0]),
            "cond_tokens": int(self.cond_tokens.shape[0]),
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


def run_bits(tables: BitsetDeviceTables | None, state, n, bits):
    """Each row's bits after the first ``n`` (int32[B]) tokens of its state's forced run
    (``bits`` where ``n`` is 0, or without bitset tables or runs)."""
    if tables is None or tables.forced_clear is None:
        return bits
    q = jnp.clip(state, 0, tables.forced_clear.shape[0] - 1)
    i = jnp.clip(n - 1, 0, tables.forced_clear.shape[1] - 1)
    after = (bits & ~tables.forced_clear[q, i]) | tables.forced_set[q, i]
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
    v = token_class.shape[0]
    always = _always(conds, cond_static, cond_alts)
    conditional = ~always & ~_holds_never(conds, cond_static)
    static_cls = always[cond_id]  # [Q, C]; cond_id 0 (no edge) never holds
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
    cls_conditional = conditional[cond_id].any(axis=0)  # [C]
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


def _test(tables: BitsetDeviceTables, nxt, prog, bits, alts=None):
    """Edges ``nxt`` (int32[B, ...]) with programs ``prog`` (uint32[B, ..., 4, W]) and their
    REQUIRE alternatives ``alts`` (uint32[B, ..., K, W], or None: no choice) on each row's
    ``bits`` (uint32[B, W]): (allowed, bits after)."""
    u, s, c, a = (prog[..., k, :] for k in range(4))
    b = bits.reshape(bits.shape[:1] + (1,) * (nxt.ndim - 1) + bits.shape[1:])
    ok = (nxt >= 0) & jnp.all((b & u) == 0, axis=-1) & jnp.all((b & s) == s, axis=-1)
    if alts is not None:
        ok &= _one_alternative(b[..., None, :], alts)
    after = (b & ~c) | a
    tn = jnp.maximum(nxt, 0)
    live = tables.live_always[tn] | jnp.any((tables.live_mask[tn] & ~after) != 0, axis=-1)
    return ok & live, after


def bitset_mask(
    tables: BitsetDeviceTables, state: Int[Array, " B"], bits: UInt32[Array, "B W"]
) -> Bool[Array, "B V"]:
    """The tokens each row may take next: its state's static tokens (one packed row,
    unpacked), the conditional tokens' edge tests on its bits written over them; EOS where
    the row's state accepts."""
    if bits.ndim != 2 or bits.shape[1] != tables.words or bits.dtype != jnp.uint32:
        raise RuntimeShapeError(
            f"bitset_mask: expected bits uint32[B, {tables.words}], got {bits.dtype}{list(bits.shape)}"
        )
    n_rows = state.shape[0]
    v = tables.vocab_size
    words = tables.mask_bits[tables.mask_row[state]]  # [B, ceil(V/32)]
    shifts = jnp.arange(32, dtype=jnp.uint32)
    mask = ((words[:, :, None] >> shifts) & jnp.uint32(1)).astype(jnp.bool_)
    mask = mask.reshape(n_rows, -1)[:, :v]
    holds = _holds(tables, bits)  # [B, N]
    cond = tables.cond_id[state[:, None], tables.cond_token_class[None, :]]  # [B, T]
    ok = jnp.take_along_axis(holds, cond, axis=1)
    mask = mask.at[:, tables.cond_tokens].set(ok, mode="drop")
    acc = tables.accepting[state][:, None]
    return mask.at[:, tables.eos].set(jnp.broadcast_to(acc, (n_rows, tables.eos.shape[0])))


def _holds(tables: BitsetDeviceTables, bits: UInt32[Array, "B W"]) -> Bool[Array, "B N"]:
    """bool[B, N]: which of the table's edge conditions each row's bits pass."""
    b = bits[:, None, :]  # [B, 1, W] against the N conditions
    u, s, k = tables.conds[None, :, 0], tables.conds[None, :, 1], tables.conds[None, :, 2]
    holds = jnp.all((b & u) == 0, axis=-1) & jnp.all((b & s) == s, axis=-1)
    holds &= _one_alternative(b[:, :, None, :], tables.cond_alts[None])
    return holds & (tables.cond_static[None, :] | jnp.any((k & ~b) != 0, axis=-1))


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
) -> tuple[Int[Array, " B"], UInt32[Array, "B W"]]:
    """Each row's state and bits after ``token`` (EOS keeps them; a token the row does not
    allow gives state -1). ``cls``, ``nxt``: the token's class and the edge's next state,
    read from ``tables``' own token table where None (`ConstraintTables` passes its own)."""
    if cls is None:
        cls = tables.token_class[token]
        nxt = tables.next_state[state, cls]  # [B]
    prog = tables.program[state, cls]
    good, after = _test(tables, nxt, tables.programs[prog], bits, tables.alts[prog])
    is_eos = jnp.any(token[:, None] == tables.eos[None, :], axis=1)
    new_state = jnp.where(is_eos, state, jnp.where(good, nxt, -1))
    new_bits = jnp.where((is_eos | ~good)[:, None], bits, after)
    return new_state, new_bits


def pda_class_ok(
    tables: BitsetDeviceTables,
    state: Int[Array, " B"],
    bits: UInt32[Array, "B W"],
    nxt: Int[Array, "B C"],
) -> Bool[Array, "B C"]:
    """With a stack: which classes' context-independent edges (next states ``nxt``, the
    rows of `ConstraintTables.next_state`) pass their test on each row's bits (class-level;
    the stack's own tests are `_stack.class_mask`'s)."""
    prog = tables.program[state]  # [B, C]
    ok, _ = _test(tables, nxt, tables.programs[prog], bits, tables.alts[prog])
    return ok


def pda_cd_test(tables: BitsetDeviceTables, edge, target, bits: UInt32[Array, "B W"]):
    """With a stack: context-dependent edges ``edge`` (int32[B, ...], into ``target``) on each
    row's bits: (allowed bool[B, ...], bits after uint32[B, ..., W])."""
    prog = tables.cd_program[jnp.clip(edge, 0, tables.cd_program.shape[0] - 1)]
    return _test(tables, target, tables.programs[prog], bits, tables.alts[prog])


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
    """`BitsetDeviceTables.from_tables` keywords of ``capacity`` (its stack fields left out)."""
    if capacity is None:
        return {}
    return {k: v for k, v in dataclasses.asdict(capacity).items() if k not in STACK_FIELDS}


def _check_capacity(capacity) -> None:
    if capacity is not None and not isinstance(capacity, BitsetCapacity):
        raise RuntimeShapeError(
            f"capacity: expected a BitsetCapacity (or None), got {type(capacity).__name__}"
        )


def _stack_capacity(t, capacity: BitsetCapacity) -> TableCapacity:
    """The `TableCapacity` of ``capacity``'s token table and stack block for the PDA of ``t``.

    Raises:
      TableCapacityError: the PDA needs more than ``capacity`` (the field, both sizes)."""
    need = needs(t.tables)
    for name in ("states", "classes", *STACK_FIELDS[1:]):
        have = getattr(capacity, name)
        if need[name] > have:
            raise TableCapacityError(
                f"ConstraintTables.from_bitset: the schema's tables need {name}={need[name]:,}, "
                f"but BitsetCapacity.{name} is {have:,}; build them with a larger "
                "BitsetCapacity (a new capacity compiles the decoding loop again)"
            )
    return TableCapacity(
        states=capacity.states,
        classes=capacity.classes,
        **{name: getattr(capacity, name) for name in STACK_FIELDS},
    )


def pda_constraint_tables(t, vocab_size: int, capacity: BitsetCapacity | None = None):
    """`ConstraintTables` of one `BitsetPDATables` (K = 1): the PDA's plain tables with its
    stack block (`ConstraintTables.from_dfas`, no forced runs: they would skip the bits'
    tests), and the ``bitset`` block whose edge tables are the PDA's context-independent
    edges, plus ``cd_program``; `allowed_mask` / `advance` test the bits on both kinds of
    edge at the class level (`pda_class_ok`, `pda_cd_test`). ``capacity`` fixes every padded
    size, the stack block's included (``BitsetCapacity.stack`` .. ``pops``), so another
    grammar schema that fits swaps into loops compiled for these with no retrace; its
    ``forced`` is unused (0: no forced runs with a stack)."""
    from automata_jax._tables import ConstraintTables

    _check_capacity(capacity)
    if getattr(t.tables, "is_blocked", False):  # class ids must be the PDA's own
        raise RuntimeShapeError(
            "ConstraintTables.from_bitset: expected dense PDA tables (no state blocks)"
        )
    fixed = None if capacity is None else _stack_capacity(t, capacity)
    plain = ConstraintTables.from_dfas([t.tables], vocab_size=int(vocab_size), capacity=fixed)
    _, q, c = plain.next_state.shape
    sizes = {**_bitset_sizes(capacity), "states": q, "classes": c, "forced": 0}
    dt = BitsetDeviceTables.from_tables(_pda_view(t), int(vocab_size), **sizes)
    e = plain.cd_class.shape[1]
    cd_program = np.zeros(e, np.int32)
    cd_program[: len(t.cd_program)] = t.cd_program
    cap = plain.capacity
    stack_sizes = tuple((name, int(getattr(cap, name))) for name in STACK_FIELDS)
    dt = dt.replace(
        cd_program=jnp.asarray(cd_program),
        stack_sizes=stack_sizes,
        token_class=None,  # the plain tables' (one copy on the device)
        next_state=None,
    )
    return plain.replace(
        bitset=dt, forced_tokens=None, forced_len=None, forced_states=None, exit_tokens=None
    )


def _check_supported(t) -> None:
    """Refuses what is not bitset tables (`BitsetTables`, or `BitsetPDATables`: a stack with
    the bits, `pda_constraint_tables`)."""
    if hasattr(t, "cd_program") and hasattr(t, "tables"):
        return  # BitsetPDATables: `pda_constraint_tables`
    if not hasattr(t, "token_class") or not hasattr(t, "programs"):
        raise RuntimeShapeError(
            f"ConstraintTables.from_bitset: expected automata_compile BitsetTables or "
            f"BitsetPDATables (compile_json_schema_bitset), got {type(t).__name__}"
        )


def constraint_tables(t, vocab_size: int, capacity: BitsetCapacity | None = None):
    """`ConstraintTables` of one bitset constraint (K = 1): the plain arrays are ``t``'s token
    table read with every bitset (an over-approximation that nothing reads for the mask or
    the advance), the ``bitset`` block holds the device tables. See
    `ConstraintTables.from_bitset`."""
    from automata_jax._tables import ConstraintTables  # _tables imports this module lazily

    if isinstance(t, (str, os.PathLike)):  # a file of `automata_compile.tokens.save_bitset_tables`
        from automata_compile import load_bitset_tables

        t = load_bitset_tables(t)
    if not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise RuntimeShapeError(f"vocab_size: expected a positive int, got {vocab_size!r}")
    _check_supported(t)
    if hasattr(t, "cd_program"):
        return pda_constraint_tables(t, vocab_size, capacity)
    _check_capacity(capacity)
    eos = np.asarray(t.eos_ids, np.int64)
    if eos.size == 0 or (eos < 0).any() or (eos >= vocab_size).any():
        raise RuntimeShapeError(
            f"ConstraintTables.from_bitset: expected EOS ids in [0, {vocab_size}), got "
            f"{list(t.eos_ids)}"
        )
    dt = BitsetDeviceTables.from_tables(t, int(vocab_size), **_bitset_sizes(capacity))
    next_state = np.asarray(dt.next_state)
    accepting = np.asarray(dt.accepting)
    token_class = np.asarray(dt.token_class).copy()
    token_class[eos] = 0  # EOS is allowed exactly in accepting states
    eos_mask = np.zeros(int(vocab_size), bool)
    eos_mask[eos] = True
    tables = ConstraintTables(
        token_class=token_class[None],
        next_state=next_state[None],
        accepting=accepting[None],
        viable=(accepting | (next_state >= 0).any(axis=1))[None],
        start=np.asarray([int(t.start)], np.int32),
        eos_mask=eos_mask,
        num_constraints=np.int32(1),
        eos_ids=tuple(int(e) for e in t.eos_ids),
        bitset=dt.replace(token_class=None, next_state=None),  # one copy: the plain arrays
        **_forced_arrays(t, next_state.shape[0], dt.forced),
    )
    return jax.device_put(tables)
