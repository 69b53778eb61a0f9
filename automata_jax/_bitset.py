"""The bitset any-order runtime rule on the device (docs/any_order_bitset.md), opt-in.

Each row carries, besides its token-DFA state, ``uint32[W]`` bits: the declared properties
already written in its open any-order objects. An edge (state, class) has a program
``(U, S, C, A)``: it is allowed iff ``bits & U == 0`` and ``bits & S == S`` and its next state
is live under the bits after it (``(bits & ~C) | A``); a key position is live iff one of its
keys is unset. Pure JAX, no host callback: the mask tests each row's bits against the
table's few distinct edge conditions (``[B, N, W]``) and gathers them like next states.

Not wired into `generate` yet: `bitset_mask` and `bitset_advance` are the kernels a
decoding loop would call in place of `allowed_mask` / `advance` for such rows.
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Int, UInt32

from automata_jax._capacity import bucket
from automata_jax._errors import RuntimeShapeError


@struct.dataclass(kw_only=True)
class BitsetDeviceTables:
    """`automata_compile.tokens.BitsetTables` padded to bucketed sizes, as device arrays.

    Padded states allow nothing and are not accepting; padded classes are dead; padded
    programs and words are zeros. Tables of two schemas with the same padded sizes have the
    same shapes, so the kernels do not retrace.

    Attributes:
      token_class: int32[V], V = the logits width.
      next_state: int32[Q, C], -1 = no edge.
      program: int32[Q, C].
      programs: uint32[P, 4, W], per program U, S, C, A.
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
    """

    token_class: Int[Array, " V"]
    next_state: Int[Array, "Q C"]
    program: Int[Array, "Q C"]
    programs: UInt32[Array, "P 4 W"]
    live_mask: UInt32[Array, "Q W"]
    live_always: Bool[Array, " Q"]
    accepting: Bool[Array, " Q"]
    eos: Int[Array, " E"]
    start: Int[Array, ""]
    cond_id: Int[Array, "Q C"]
    conds: UInt32[Array, "N 3 W"]
    cond_static: Bool[Array, " N"]

    @property
    def words(self) -> int:
        return int(self.programs.shape[2])

    @classmethod
    def from_tables(
        cls,
        t,
        vocab_size: int,
        *,
        states: int | None = None,
        classes: int | None = None,
        programs: int | None = None,
        words: int | None = None,
        conditions: int | None = None,
    ) -> BitsetDeviceTables:
        """Pads ``t`` (a `BitsetTables`) to powers of two, or to the sizes given.

        Raises:
          RuntimeShapeError: ``t`` needs more than a size given.
        """
        q, c = t.next_state.shape
        p, _, w = t.programs.shape
        need = {
            "states": q,
            "classes": c,
            "programs": p,
            "words": w,
            "vocab_size": len(t.token_class),
        }
        have = {
            "states": states or bucket(q),
            "classes": classes or bucket(c),
            "programs": programs or bucket(p),
            "words": words or w,
            "vocab_size": vocab_size,
        }
        for name, n in need.items():
            if n > have[name]:
                raise RuntimeShapeError(
                    f"BitsetDeviceTables.from_tables: expected {name} >= {n:,}, got {have[name]:,}"
                )
        Q, C, P, W = have["states"], have["classes"], have["programs"], have["words"]
        cond_id, conds, cond_static = _conditions(t, Q, C, W, conditions)
        return cls(
            cond_id=jnp.asarray(cond_id),
            conds=jnp.asarray(conds),
            cond_static=jnp.asarray(cond_static),
            token_class=jnp.asarray(_padded(t.token_class, (vocab_size,), np.int32)),
            next_state=jnp.asarray(_padded(t.next_state, (Q, C), np.int32, fill=-1)),
            program=jnp.asarray(_padded(t.program, (Q, C), np.int32)),
            programs=jnp.asarray(_padded(t.programs, (P, 4, W), np.uint32)),
            live_mask=jnp.asarray(_padded(t.live_mask, (Q, W), np.uint32)),
            live_always=jnp.asarray(_padded(t.live_always, (Q,), bool)),
            accepting=jnp.asarray(_padded(t.accepting, (Q,), bool)),
            eos=jnp.asarray(np.asarray(t.eos_ids, np.int32)),
            start=jnp.asarray(t.start, jnp.int32),
        )


def _padded(a, shape: tuple[int, ...], dtype, fill=0) -> np.ndarray:
    """``a`` in the leading corner of a ``shape`` array of ``fill``."""
    out = np.full(shape, fill, dtype)
    out[tuple(slice(0, n) for n in np.shape(a))] = a
    return out


def _conditions(t, num_states: int, num_classes: int, words: int, size: int | None):
    """(cond_id int32[Q, C], conds uint32[N, 3, W], cond_static bool[N]) of ``t``'s edges,
    padded: N a power of two (or ``size``), condition 0 never holds.

    Raises:
      RuntimeShapeError: more conditions than ``size``."""
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
        raise RuntimeShapeError(
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
    return cond_id, conds, static


def _test(tables: BitsetDeviceTables, nxt, prog, bits):
    """Edges ``nxt`` (int32[B, ...]) with programs ``prog`` (uint32[B, ..., 4, W]) on each row's
    ``bits`` (uint32[B, W]): (allowed, bits after)."""
    u, s, c, a = (prog[..., k, :] for k in range(4))
    b = bits.reshape(bits.shape[:1] + (1,) * (nxt.ndim - 1) + bits.shape[1:])
    ok = (nxt >= 0) & jnp.all((b & u) == 0, axis=-1) & jnp.all((b & s) == s, axis=-1)
    after = (b & ~c) | a
    tn = jnp.maximum(nxt, 0)
    live = tables.live_always[tn] | jnp.any((tables.live_mask[tn] & ~after) != 0, axis=-1)
    return ok & live, after


def bitset_mask(
    tables: BitsetDeviceTables, state: Int[Array, " B"], bits: UInt32[Array, "B W"]
) -> Bool[Array, "B V"]:
    """The tokens each row may take next: its edges' tests on its bits, read per token
    through the class map; EOS where the row's state accepts."""
    if bits.ndim != 2 or bits.shape[1] != tables.words or bits.dtype != jnp.uint32:
        raise RuntimeShapeError(
            f"bitset_mask: expected bits uint32[B, {tables.words}], got {bits.dtype}{list(bits.shape)}"
        )
    b = bits[:, None, :]  # [B, 1, W] against the N conditions
    u, s, k = tables.conds[None, :, 0], tables.conds[None, :, 1], tables.conds[None, :, 2]
    holds = jnp.all((b & u) == 0, axis=-1) & jnp.all((b & s) == s, axis=-1)
    holds &= tables.cond_static[None, :] | jnp.any((k & ~b) != 0, axis=-1)  # [B, N]
    ok = jnp.take_along_axis(holds, tables.cond_id[state], axis=1)  # [B, C]
    mask = jnp.take(ok, tables.token_class, axis=1)
    acc = tables.accepting[state][:, None]
    return mask.at[:, tables.eos].set(jnp.broadcast_to(acc, (state.shape[0], tables.eos.shape[0])))


def bitset_advance(
    tables: BitsetDeviceTables,
    state: Int[Array, " B"],
    bits: UInt32[Array, "B W"],
    token: Int[Array, " B"],
) -> tuple[Int[Array, " B"], UInt32[Array, "B W"]]:
    """Each row's state and bits after ``token`` (EOS keeps them; a token the row does not
    allow gives state -1)."""
    cls = tables.token_class[token]
    nxt = tables.next_state[state, cls]  # [B]
    good, after = _test(tables, nxt, tables.programs[tables.program[state, cls]], bits)
    is_eos = jnp.any(token[:, None] == tables.eos[None, :], axis=1)
    new_state = jnp.where(is_eos, state, jnp.where(good, nxt, -1))
    new_bits = jnp.where((is_eos | ~good)[:, None], bits, after)
    return new_state, new_bits
