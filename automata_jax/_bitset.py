"""The bitset any-order runtime rule on the device (docs/any_order_bitset.md), opt-in.

Each row carries, besides its token-DFA state, ``uint32[W]`` bits: the declared properties
already written in its open any-order objects. An edge (state, class) has a program
``(U, S, C, A)``: it is allowed iff ``bits & U == 0`` and ``bits & S == S`` and its next state
is live under the bits after it (``(bits & ~C) | A``); a key position is live iff one of its
keys is unset. Pure JAX: gathers per row and a ``[B, C, W]`` test, no host callback.

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
        next_state = np.full((Q, C), -1, np.int32)
        next_state[:q, :c] = t.next_state
        program = np.zeros((Q, C), np.int32)
        program[:q, :c] = t.program
        progs = np.zeros((P, 4, W), np.uint32)
        progs[:p, :, :w] = t.programs
        live_mask = np.zeros((Q, W), np.uint32)
        live_mask[:q, :w] = t.live_mask
        live_always = np.zeros(Q, bool)
        live_always[:q] = t.live_always
        accepting = np.zeros(Q, bool)
        accepting[:q] = t.accepting
        token_class = np.zeros(vocab_size, np.int32)
        token_class[: len(t.token_class)] = t.token_class
        return cls(
            token_class=jnp.asarray(token_class),
            next_state=jnp.asarray(next_state),
            program=jnp.asarray(program),
            programs=jnp.asarray(progs),
            live_mask=jnp.asarray(live_mask),
            live_always=jnp.asarray(live_always),
            accepting=jnp.asarray(accepting),
            eos=jnp.asarray(np.asarray(t.eos_ids, np.int32)),
            start=jnp.asarray(t.start, jnp.int32),
        )


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
    nxt = tables.next_state[state]  # [B, C]
    ok, _ = _test(tables, nxt, tables.programs[tables.program[state]], bits)
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
