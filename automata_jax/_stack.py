"""The stack of grammar (PDA) rows: context-dependent edges, pushes, pops and acceptance.

Every row of a batch carries ``stack int32[B, S]`` (bottom at index 0; entries at
``depth`` and above are garbage) and ``depth int32[B]``; S is static
(``ConstraintTables.stack_size``). DFA rows keep ``depth == 0``. With the tables'
PDA block (`TokenDFA.PDA_ARRAYS`, padded per constraint):

* **context-independent** token edges (most tokens) come from the usual
  ``next_state`` gather and push ``push_seq[edge_push[k, q, c]]``;
* **context-dependent** edges (tokens that end a rule and continue in the caller)
  are a short run per state, ``cd_count[k, q]`` edges from ``cd_first[k, q]`` (read
  through a window of ``edges_per_state``): an edge allows its class iff the
  symbols it pops equal the row's top ``cd_npop`` stack symbols (one compare of
  ``[B, E, K]``); the compiler guarantees that at most one edge matches per class;
* **EOS** is allowed iff ``accepting[k, q]`` and ``accepting[k, s]`` for every symbol
  s on the stack.

Stack bound semantics (exact masks): a token whose net pushes would take the depth
past S is masked (never allowed wrongly), so the mask is exact for the language
restricted to nesting depth <= S. A row whose every continuation needs more depth
(and that cannot end here) is offered EOS only; emitting it finishes the row with
``error`` set, so "needed more stack" is reported by the row's error flag. If a
token that does not fit is forced through `advance` anyway, the row fails the same
way.
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B V" are not Python expressions)

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from automata_jax import _layout


def _tops(stack: Int[Array, "B S"], depth: Int[Array, " B"], k: int) -> Int[Array, "B K"]:
    """The top ``k`` symbols of each row, top first (-2 where the stack is shorter)."""
    s = stack.shape[1]
    idx = depth[:, None] - 1 - jnp.arange(k, dtype=jnp.int32)[None, :]
    top = jnp.take_along_axis(stack, jnp.clip(idx, 0, max(s - 1, 0)), axis=1)
    return jnp.where(idx >= 0, top, -2)


def stack_accepts(tables, k: Int[Array, " B"], stack, depth) -> Bool[Array, " B"]:
    """bool[B]: every symbol on the stack may end its rule (so EOS is allowed if the state may)."""
    s = stack.shape[1]
    if s == 0:
        return jnp.ones(k.shape, jnp.bool_)
    below = jnp.arange(s, dtype=jnp.int32)[None, :] < depth[:, None]
    sym = jnp.clip(stack, 0, tables.accepting.shape[1] - 1)
    ok = tables.accepting[k[:, None], sym]
    return jnp.all(ok | ~below, axis=1)


def _entries(tables, k, q, stack, depth):
    """The state's context-dependent edges and whether each one's pops match and fits S.

    Returns (entry ids int32[B, E] clipped, usable bool[B, E]).
    """
    s = stack.shape[1]
    lane = jnp.arange(tables.edges_per_state, dtype=jnp.int32)[None, :]
    valid = lane < tables.cd_count[k, q][:, None]  # [B, E]
    ec = jnp.where(valid, tables.cd_first[k, q][:, None] + lane, 0)
    kk = k[:, None]
    kpop = tables.cd_pop.shape[2]
    pops = tables.cd_pop[kk, ec]  # [B, E, K]
    npop = tables.cd_npop[kk, ec]  # [B, E]
    tops = _tops(stack, depth, kpop)  # [B, K]
    lane = jnp.arange(kpop, dtype=jnp.int32)
    same = (lane >= npop[..., None]) | (pops == tops[:, None, :])
    match = valid & (npop <= depth[:, None]) & jnp.all(same, axis=2)
    grow = tables.push_len[kk, tables.cd_push[kk, ec]] - npop
    fits = depth[:, None] + grow <= s
    return ec, match & fits


def class_mask(
    tables, k, q, stack, depth, row_ok: Bool[Array, "B C"], cd_ok=None
) -> Bool[Array, "B C"]:
    """Refines the gathered ``next_state[k, q] >= 0`` row for PDA tables: drops
    context-independent edges whose pushes overflow S and adds matching context-dependent
    edges (``cd_ok``: None, or a function of the entry ids int32[B, E] giving bool[B, E],
    a further test of each edge, e.g. the bitset's)."""
    s = stack.shape[1]
    b, c = row_ok.shape
    grow = tables.push_len[k[:, None], _layout.row(tables, tables.edge_push, k, q, 0)]  # [B, C]
    row_ok = row_ok & (depth[:, None] + grow <= s)
    ec, usable = _entries(tables, k, q, stack, depth)
    if cd_ok is not None:
        usable = usable & cd_ok(ec)
    cls = tables.cd_class[k[:, None], ec]
    rows = jnp.broadcast_to(jnp.arange(b)[:, None], cls.shape)
    extra = jnp.zeros((b, c), jnp.int32).at[rows, cls].add(usable.astype(jnp.int32)) > 0
    return row_ok | extra


def step(tables, k, q, cls, nxt, stack, depth):
    """Applies the edge of token class ``cls`` from ``q`` with the row's stack.

    Args:
      nxt: int32[B], ``next_state[k, q, cls]`` (the context-independent edge, -1 if none).

    Returns:
      (new state int32[B], stack, depth, moved bool[B]); ``moved`` is False where no edge
      applies or its pushes do not fit (the caller flags the row).
    """
    return step_edge(tables, k, q, cls, nxt, stack, depth)[:4]


def step_edge(tables, k, q, cls, nxt, stack, depth, cd_ok=None):
    """`step`, also returning the context-dependent edge taken (int32[B]; meaningful where
    ``nxt < 0`` and the row moved); ``cd_ok`` as in `class_mask`."""
    s = stack.shape[1]
    b = q.shape[0]
    ec, usable = _entries(tables, k, q, stack, depth)
    if cd_ok is not None:
        usable = usable & cd_ok(ec)
    hit = usable & (tables.cd_class[k[:, None], ec] == cls[:, None])
    found = jnp.any(hit, axis=1)
    e = jnp.take_along_axis(ec, jnp.argmax(hit, axis=1)[:, None], axis=1)[:, 0]
    ci = nxt >= 0
    ci_push = _layout.cell(tables, tables.edge_push, k, q, cls)
    target = jnp.where(ci, nxt, tables.cd_target[k, e])
    push = jnp.where(ci, ci_push, tables.cd_push[k, e])
    npop = jnp.where(ci, 0, tables.cd_npop[k, e])
    base = depth - npop
    length = tables.push_len[k, push]
    fits = base + length <= s
    moved = (ci | found) & fits
    lp = tables.push_seq.shape[2]
    lane = jnp.arange(lp, dtype=jnp.int32)[None, :]
    pos = base[:, None] + lane
    write = moved[:, None] & (lane < length[:, None]) & (pos < s)
    seq = tables.push_seq[k, push]  # [B, L]
    rows = jnp.broadcast_to(jnp.arange(b)[:, None], pos.shape)
    new_stack = stack.at[rows, jnp.where(write, pos, s)].set(seq, mode="drop")
    new_depth = jnp.where(moved, base + length, depth)
    return jnp.where(moved, target, -1), new_stack, new_depth, moved, e


def no_stack(batch: int) -> tuple[jax.Array, jax.Array]:
    """(stack int32[B, 0], depth int32[B]) for tables without grammars."""
    return jnp.zeros((batch, 0), jnp.int32), jnp.zeros((batch,), jnp.int32)
