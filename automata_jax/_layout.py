"""Where a (constraint, state)'s row and token classes live in `ConstraintTables`: the one
place that knows the table layout. Every runtime reader of ``token_class``, ``next_state``
and ``edge_push`` (the mask, `advance`, the stack, token healing) goes through these.

Two layouts, chosen per batch when the tables are built (`_table_build`):

* **dense** (``row_start is None``): ``next_state`` / ``edge_push`` are int32[K, Q, C] and
  constraint k's tokens have one class map, ``token_class[k]``;
* **state blocks** (a batch holding a constraint compiled with blocks, e.g. tool calls; see
  `TokenDFA`'s ``class_block``): ``next_state`` / ``edge_push`` are flat int32[K, R]; state
  q's row starts at ``row_start[k, q]`` and is ``row_len[k, q]`` classes wide, and its
  tokens' classes are ``token_class[class_map[k, q]]`` (one map per block). Rows are read
  ``C = tables.row_width`` wide (the widest row of the batch), so what follows a row
  reads as "not allowed".

Both are pure gathers with static shapes; the dense path is exactly the one the runtime
had before the blocks.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def is_ragged(tables) -> bool:
    """Whether the tables hold state blocks (flat rows)."""
    return tables.row_start is not None


def row(tables, array, k: jax.Array, q: jax.Array, fill: int = -1) -> jax.Array:
    """``array`` (``next_state`` or ``edge_push``) of each row's (k, q): [B, C]; cells past
    a ragged row's end read ``fill``."""
    if not is_ragged(tables):
        return array[k, q]
    c = tables.row_width
    lane = jnp.arange(c, dtype=jnp.int32)[None, :]
    at = jnp.minimum(tables.row_start[k, q][:, None] + lane, array.shape[1] - 1)
    got = array[k[:, None], at]
    return jnp.where(lane < tables.row_len[k, q][:, None], got, fill)


def cell(tables, array, k: jax.Array, q: jax.Array, c: jax.Array) -> jax.Array:
    """``array`` at (k, q, class c), broadcast over the index arrays."""
    if not is_ragged(tables):
        return array[k, q, c]
    return array[k, tables.row_start[k, q] + c]


def class_maps(tables, k: jax.Array, q: jax.Array) -> jax.Array:
    """The class of every token in each row's (k, q): int32[V] when the batch shares one map,
    else int32[B, V]."""
    if not is_ragged(tables):
        if tables.token_class.shape[0] == 1:
            return tables.token_class[0]
        return tables.token_class[k]
    return tables.token_class[tables.class_map[k, q]]


def token_classes(tables, k: jax.Array, q: jax.Array, t: jax.Array) -> jax.Array:
    """The class of token ``t`` in (k, q), broadcast over the index arrays."""
    if not is_ragged(tables):
        return tables.token_class[k, t]
    return tables.token_class[tables.class_map[k, q], t]


def gather_classes(tables, k: jax.Array, q: jax.Array, row_ok: jax.Array) -> jax.Array:
    """bool[B, V] from bool[B, C]: each token's class bit in its row's class map."""
    maps = class_maps(tables, k, q)
    if maps.ndim == 1:  # one shared class map: one gather with shared indices
        return jnp.take(row_ok, maps, axis=1)
    return jnp.take_along_axis(row_ok, maps, axis=1)
