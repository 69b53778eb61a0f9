"""Constraint state and the pure per-token kernels: init, allowed mask, logit masking, advance.

All functions take the batch's `ConstraintState` and `ConstraintTables` and are
jit- and vmap-friendly. Nothing raises inside jit: shape and dtype misuse raises
while tracing ("expected …, got …"); bad values (an unknown constraint id under
jit, a disallowed token, a dead state) flag the row ``done`` and ``error``, and
such a row is offered EOS only.

The mask of row b is ``next_state[k, q][token_class[k]] >= 0`` (a gather of V
from a row of C entries), plus EOS when ``q`` accepts; with state blocks the row and the
class map are the state's (`_layout`). The alternative kept for
accelerators, ``mask_impl="bitmask"``, reads one deduplicated packed row of
``uint32[ceil(V/32)]`` and unpacks it. Measured on CPU (2 shared, busy cores;
Gemma-3 vocabulary V = 262,145; a JSON-Schema DFA of 1,367 states / 630 classes,
padded to Q = 2048, C = 1024): `allowed_mask` alone is faster as a bitmask at
B = 8 / 64 (0.20 / 2.6 ms vs 0.8-1.6 / 16 ms; B = 1: both ~0.4 ms), but inside the
`generate` loop (near-free fake model, i.e. the worst case) gather added +0.0-0.5 /
+0.6 / +1.7-2.9 ms per token at B = 1 / 8 / 64 while bitmask added up to +1.8 /
+5.1 / +46 ms with temperature sampling; the bitmask tables also take 26.5 MB on the
device against 9.7 MB and 0.8 s to build. So gather is the default; re-measure on
accelerators (``mask_impl="bitmask"``).

Grammar rows (a PDA constraint) also carry a stack; the context-dependent edges,
pushes, pops and the stack bound's semantics are in `automata_jax._stack`. Rows of bitset
tables (`ConstraintTables.from_bitset`) carry ``bits``, the declared properties written in
their open objects, which the mask tests and the advance updates (`automata_jax._bitset`).
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jaxtyping import Array, Bool, Float, Int, UInt32

from automata_jax import _bitset, _layout, _stack
from automata_jax._errors import RuntimeDtypeError, RuntimeShapeError, UnknownConstraintError
from automata_jax._tables import ConstraintTables

UNCONSTRAINED = -1


@struct.dataclass(kw_only=True)
class ConstraintState:
    """Per-row decoding state of a batch (a pytree; replaced, never mutated).

    Attributes:
      state: int32[B], the current DFA state (0 for unconstrained rows).
      constraint: int32[B], the row's constraint id; -1 = unconstrained.
      done: bool[B], the row has finished (EOS) or failed; it is offered EOS only.
      error: bool[B], the row reached an impossible state (unknown constraint, a
        disallowed token, a state from which nothing can be generated, or a grammar row
        that needed more than S stack entries).
      stack: int32[B, S], grammar rows' stacks (bottom first; S = tables.stack_size, 0
        without grammars); entries at ``depth`` and above are unused.
      depth: int32[B], the number of symbols on each row's stack (0 for DFA rows).
      bits: uint32[B, W] with bitset tables (`ConstraintTables.from_bitset`), else None: the
        declared properties each row has written in its open any-order objects.
    """

    state: Int[Array, " B"]
    constraint: Int[Array, " B"]
    done: Bool[Array, " B"]
    error: Bool[Array, " B"]
    stack: Int[Array, "B S"]
    depth: Int[Array, " B"]
    bits: UInt32[Array, "B W"] | None = None

    @property
    def batch_size(self) -> int:
        return int(self.state.shape[0])


def is_concrete(x) -> bool:
    """Whether ``x`` holds values now (not a tracer), so value checks can run on the host."""
    return not isinstance(x, jax.core.Tracer)


def _check_int_vector(name: str, x, batch: int | None = None) -> jax.Array:
    if not hasattr(x, "dtype"):
        x = np.asarray(x)
        if x.size == 0 and x.dtype == np.float64:
            x = x.astype(np.int32)
    if not (jnp.issubdtype(x.dtype, jnp.integer) and x.dtype != jnp.bool_):
        raise RuntimeDtypeError(f"{name}: expected an integer array, got dtype {x.dtype}")
    if x.ndim != 1:
        raise RuntimeShapeError(f"{name}: expected shape [B], got {tuple(x.shape)}")
    if batch is not None and x.shape[0] != batch:
        raise RuntimeShapeError(
            f"{name}: expected batch size {batch} (the state's), got {x.shape[0]}"
        )
    return jnp.asarray(x, jnp.int32)


def _check_tables(tables) -> None:
    if not isinstance(tables, ConstraintTables):
        raise RuntimeShapeError(
            f"tables: expected ConstraintTables (see ConstraintTables.from_dfas), got "
            f"{type(tables).__name__}"
        )


def _check_state(state) -> None:
    if not isinstance(state, ConstraintState):
        raise RuntimeShapeError(
            f"state: expected ConstraintState (from init_state), got {type(state).__name__}"
        )


def check_constraint_ids(tables: ConstraintTables, constraint_ids) -> jax.Array:
    """Validates constraint ids (dtype, rank, and values when concrete); returns int32[B].

    Raises:
      RuntimeDtypeError, RuntimeShapeError: not an integer vector.
      UnknownConstraintError: an id is < -1 or >= the number of loaded constraints.
    """
    _check_tables(tables)
    ids = _check_int_vector("constraint_ids", constraint_ids)
    if is_concrete(ids) and is_concrete(tables.num_constraints):
        k = int(tables.num_constraints)
        host = np.asarray(ids)
        bad = host[(host < UNCONSTRAINED) | (host >= k)]
        if bad.size:
            raise UnknownConstraintError(
                f"constraint_ids: expected -1 (unconstrained) or an id in [0, {k}) (the tables "
                f"hold {k} constraints), got {int(bad[0])}"
            )
    return ids


def init_state(tables: ConstraintTables, constraint_ids: Int[Array, " B"]) -> ConstraintState:
    """The start state of each row.

    Args:
      tables: the constraints.
      constraint_ids: int[B]; row b follows constraint ``constraint_ids[b]``, -1 = none.

    Returns:
      A state with nothing done. Under jit an out-of-range id (not checkable while
      tracing) gives an ``error`` row instead of raising.

    Raises:
      UnknownConstraintError: a concrete id out of range.
    """
    cid = check_constraint_ids(tables, constraint_ids)
    num_k = tables.start.shape[0]
    k = jnp.clip(cid, 0, num_k - 1)
    constrained = cid >= 0
    known = (cid >= UNCONSTRAINED) & (cid < tables.num_constraints)
    q = jnp.where(constrained, tables.start[k], 0)
    error = ~known | (constrained & ~tables.viable[k, q])
    b = cid.shape[0]
    return ConstraintState(
        state=q,
        constraint=cid,
        done=error,
        error=error,
        stack=jnp.zeros((b, tables.stack_size), jnp.int32),
        depth=jnp.zeros((b,), jnp.int32),
        bits=None if tables.bitset is None else jnp.zeros((b, tables.bitset.words), jnp.uint32),
    )


def _bits(tables: ConstraintTables, state: ConstraintState) -> jax.Array:
    """The rows' bits, checked against the tables' bitset block."""
    w = tables.bitset.words
    bits = state.bits
    if bits is None or bits.ndim != 2 or bits.shape != (state.batch_size, w):
        got = None if bits is None else f"{bits.dtype}{list(bits.shape)}"
        raise RuntimeShapeError(
            f"state.bits: expected uint32[{state.batch_size}, {w}] for tables with a bitset "
            f"block (init_state makes them), got {got}"
        )
    return bits


def _class_mask(tables: ConstraintTables, k: jax.Array, q: jax.Array, state=None) -> jax.Array:
    """(bool[B, V], tokens whose (constraint, state, class) transition exists; for grammar
    batches with the row's stack and only if the pushes fit, and bool[B], whether any class is
    allowed (grammar batches only, else None); every class >= 1 has a token below V)."""
    if tables.bitset is not None and tables.has_stack:  # bitset rows with a stack: class level
        bits = _bits(tables, state)
        row = _layout.row(tables, tables.next_state, k, q)
        row_ok = (row >= 0) & _bitset.pda_class_ok(tables.bitset, q, bits, row, k)

        def cd_ok(ec):
            target = tables.cd_target[k[:, None], ec]
            return _bitset.pda_cd_test(tables.bitset, ec, target, bits, k)[0]

        row_ok = _stack.class_mask(tables, k, q, state.stack, state.depth, row_ok, cd_ok)
        return _bitset.pda_mask(tables.bitset, k, q, row_ok), jnp.any(row_ok, axis=1)
    if tables.bitset is not None:
        return _bitset.bitset_mask(tables.bitset, q, _bits(tables, state), k), None
    if tables.has_stack:
        row_ok = _layout.row(tables, tables.next_state, k, q) >= 0
        row_ok = _stack.class_mask(tables, k, q, state.stack, state.depth, row_ok)
        return _layout.gather_classes(tables, k, q, row_ok), jnp.any(row_ok, axis=1)
    if tables.mask_bits is not None:
        words = tables.mask_bits[tables.mask_row[k, q]]  # [B, W]
        shifts = jnp.arange(32, dtype=jnp.uint32)
        bits = (words[:, :, None] >> shifts) & jnp.uint32(1)
        return bits.astype(jnp.bool_).reshape(k.shape[0], -1)[:, : tables.vocab_size], None
    return _layout.gather_classes(
        tables, k, q, _layout.row(tables, tables.next_state, k, q) >= 0
    ), None


def allowed_mask(tables: ConstraintTables, state: ConstraintState) -> Bool[Array, "B V"]:
    """bool[B, V]: the tokens each row may emit next.

    Constrained rows: tokens with a transition, plus EOS iff the state accepts.
    Unconstrained rows: every token. Done (or failed) rows: EOS only.
    """
    _check_tables(tables)
    _check_state(state)
    num_k, num_q, _ = tables.padded_shape
    k = jnp.clip(state.constraint, 0, num_k - 1)
    q = jnp.clip(state.state, 0, num_q - 1)
    eos = tables.eos_mask[None, :]
    accepts = _accepts(tables, state, k, q)
    tokens, any_class = _class_mask(tables, k, q, state)
    if any_class is not None:  # a grammar row that needs more stack than S: EOS only, then error
        accepts = accepts | ~any_class
    mask = tokens | (eos & accepts[:, None])
    mask = mask | (state.constraint < 0)[:, None]
    return jnp.where(state.done[:, None], eos, mask)


def _accepts(tables: ConstraintTables, state: ConstraintState, k, q) -> jax.Array:
    """bool[B]: EOS allowed: the state accepts (and every symbol on a grammar row's stack)."""
    acc = tables.accepting[k, q]
    if tables.has_stack:
        acc = acc & _stack.stack_accepts(tables, k, state.stack, state.depth)
    return acc


def check_logits(tables: ConstraintTables, state: ConstraintState, logits) -> None:
    """Raises unless ``logits`` is a float array of shape [B, V] matching tables and state."""
    dtype = getattr(logits, "dtype", None)
    if dtype is None or not jnp.issubdtype(dtype, jnp.floating):
        raise RuntimeDtypeError(f"logits: expected a floating-point array, got dtype {dtype}")
    expected = (state.batch_size, tables.vocab_size)
    if tuple(logits.shape) != expected:
        raise RuntimeShapeError(
            f"logits: expected shape [B, V] = {list(expected)} (batch of the state, vocab_size of "
            f"the tables), got {list(logits.shape)}"
        )


def mask_logits(
    tables: ConstraintTables, state: ConstraintState, logits: Float[Array, "B V"]
) -> Float[Array, "B V"]:
    """Sets disallowed logits to -inf (dtype preserved); sampling then never picks them."""
    _check_tables(tables)
    _check_state(state)
    check_logits(tables, state, logits)
    neg = jnp.asarray(-jnp.inf, logits.dtype)
    return jnp.where(allowed_mask(tables, state), logits, neg)


def advance(
    tables: ConstraintTables, state: ConstraintState, tokens: Int[Array, " B"]
) -> ConstraintState:
    """The state after each row emits ``tokens[b]``.

    EOS in an accepting state finishes the row (its DFA state is unchanged). A
    disallowed token, an out-of-range id, or a move to a state from which nothing
    can be generated finishes the row with ``error``. Done rows are unchanged,
    whatever their token (typically pad).
    """
    _check_tables(tables)
    _check_state(state)
    tok = _check_int_vector("tokens", tokens, state.batch_size)
    num_k, num_q, _ = tables.padded_shape
    v = tables.vocab_size
    in_range = (tok >= 0) & (tok < v)
    t = jnp.clip(tok, 0, v - 1)
    is_eos = tables.eos_mask[t] & in_range
    constrained = state.constraint >= 0
    k = jnp.clip(state.constraint, 0, num_k - 1)
    q = jnp.clip(state.state, 0, num_q - 1)

    cls = _layout.token_classes(tables, k, q, t)
    nxt = _layout.cell(tables, tables.next_state, k, q, cls)
    stack, depth, bits = state.stack, state.depth, state.bits
    if tables.bitset is not None and tables.has_stack:  # the edge taken's test, then B'
        bits = _bits(tables, state)
        ci_nxt, ci_bits = _bitset.bitset_advance(tables.bitset, q, bits, t, cls, nxt, k)
        ci_nxt = jnp.where(nxt >= 0, ci_nxt, -1)  # EOS (class 0 here): no edge

        def cd_ok(ec):
            target = tables.cd_target[k[:, None], ec]
            return _bitset.pda_cd_test(tables.bitset, ec, target, bits, k)[0]

        nxt, stack, depth, _, e = _stack.step_edge(tables, k, q, cls, ci_nxt, stack, depth, cd_ok)
        _, cd_bits = _bitset.pda_cd_test(tables.bitset, e[:, None], nxt[:, None], bits, k)
        bits = jnp.where((ci_nxt >= 0)[:, None], ci_bits, cd_bits[:, 0])
    elif tables.bitset is not None:  # the edge's test on the row's bits (-1: refused), then B'
        nxt, bits = _bitset.bitset_advance(tables.bitset, q, _bits(tables, state), t, cls, nxt, k)
    if tables.has_stack and tables.bitset is None:
        nxt, stack, depth, _ = _stack.step(tables, k, q, cls, nxt, stack, depth)
    moved = in_range & ~is_eos & (nxt >= 0)
    finished = is_eos & _accepts(tables, state, k, q)
    c_error = ~(finished | (moved & tables.viable[k, jnp.maximum(nxt, 0)]))
    error = jnp.where(constrained, c_error, ~in_range)
    done = error | is_eos

    active = ~state.done
    new_q = jnp.where(constrained & moved, nxt, state.state)
    keep = (active & constrained & moved)[:, None]
    return ConstraintState(
        state=jnp.where(active, new_q, state.state),
        constraint=state.constraint,
        done=state.done | (active & done),
        error=state.error | (active & error),
        stack=jnp.where(keep, stack, state.stack),
        depth=jnp.where(keep[:, 0], depth, state.depth),
        bits=None if bits is None else jnp.where(keep, bits, state.bits),
    )
