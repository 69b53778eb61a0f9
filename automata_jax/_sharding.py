"""Data-parallel `generate`: the batch sharded over one mesh axis, tables and params replicated.

Every row is independent, so the loop partitions along the batch with no
cross-device traffic except the loop's "all rows done?" test. Results equal the
unsharded run for the same rng (jit semantics do not depend on sharding).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from automata_jax._errors import RuntimeShapeError
from automata_jax._generate import GenerateOutput, StepFn, generate
from automata_jax._sampling import Sampler
from automata_jax._tables import ConstraintTables

DATA_AXIS = "data"


def batch_sharding(mesh: Mesh, axis: str = DATA_AXIS) -> NamedSharding:
    """Shards the leading (batch) dimension over ``axis``; other dimensions replicated."""
    return NamedSharding(mesh, PartitionSpec(axis))


def replicated(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole array."""
    return NamedSharding(mesh, PartitionSpec())


def shard_batch(mesh: Mesh, tree: Any, *, axis: str = DATA_AXIS) -> Any:
    """Places every array of ``tree`` on ``mesh``, leading dimension split over ``axis``.

    Raises:
      RuntimeShapeError: ``axis`` is not a mesh axis, or a leading dimension is not
        divisible by its size.
    """
    size = _axis_size(mesh, axis)

    def put(x):
        shape = getattr(x, "shape", ())
        if len(shape) == 0:
            return jax.device_put(x, replicated(mesh))
        if shape[0] % size:
            raise RuntimeShapeError(
                f"shard_batch: expected a batch size divisible by the {size} devices of mesh "
                f"axis {axis!r}, got {shape[0]}"
            )
        return jax.device_put(x, batch_sharding(mesh, axis))

    return jax.tree.map(put, tree)


def replicate(mesh: Mesh, tree: Any) -> Any:
    """Places every array of ``tree`` on every device of ``mesh``."""
    return jax.device_put(tree, replicated(mesh))


def _axis_size(mesh: Mesh, axis: str) -> int:
    if axis not in mesh.shape:
        raise RuntimeShapeError(
            f"axis: expected one of the mesh axes {tuple(mesh.shape)}, got {axis!r}"
        )
    return int(mesh.shape[axis])


def generate_sharded(
    mesh: Mesh,
    step_fn: StepFn,
    params: Any,
    prompt_tokens,
    tables: ConstraintTables,
    constraint_ids,
    *,
    sampler: Sampler,
    max_new_tokens: int,
    rng: jax.Array,
    prompt_mask=None,
    cache: Any = None,
    pad_id: int = 0,
    buffer_length: int | None = None,
    axis: str = DATA_AXIS,
    replicate_params: bool = True,
    fast_forward=False,
    speculate=False,
    draft_keys=None,
) -> GenerateOutput:
    """`generate` with the batch split over mesh axis ``axis`` (data parallelism).

    Prompts, masks, constraint ids (and ``draft_keys``) are sharded along the batch; tables, rng and
    (unless ``replicate_params=False``, for params you placed yourself) params are
    replicated. Pass ``cache`` as an ``init_cache`` callable so the cache is created
    inside the jit with the batch sharding; a cache pytree is used where it lies.
    The other arguments are those of `generate`.

    Raises:
      RuntimeShapeError: the batch size is not divisible by the size of ``axis``, or
        ``axis`` is not a mesh axis; and everything `generate` raises.

    Example:
      >>> import numpy as np, jax
      >>> from jax.sharding import Mesh
      >>> mesh = Mesh(np.array(jax.devices()), ("data",))
      >>> # out = generate_sharded(mesh, model.apply_step, params, tokens, tables, ids,
      >>> #                        sampler=Greedy(), max_new_tokens=64, rng=jax.random.key(0),
      >>> #                        prompt_mask=mask, cache=model.init_cache)
    """
    size = _axis_size(mesh, axis)
    prompt_tokens, constraint_ids = (
        x if hasattr(x, "shape") else np.asarray(x) for x in (prompt_tokens, constraint_ids)
    )
    batch = prompt_tokens.shape[0] if prompt_tokens.ndim else 0
    if batch % size:
        raise RuntimeShapeError(
            f"prompt_tokens: expected a batch size divisible by the {size} devices of mesh axis "
            f"{axis!r}, got {batch}; pad the batch (e.g. with unconstrained dummy rows)"
        )
    if prompt_mask is None:
        prompt_mask = np.ones(prompt_tokens.shape, bool)
    elif not hasattr(prompt_mask, "shape"):
        prompt_mask = np.asarray(prompt_mask)
    prompt_tokens, prompt_mask, constraint_ids = shard_batch(
        mesh, (prompt_tokens, prompt_mask, constraint_ids), axis=axis
    )
    if draft_keys is not None:
        draft_keys = shard_batch(mesh, np.asarray(draft_keys, np.int32), axis=axis)
    tables = replicate(mesh, tables)
    rng = replicate(mesh, rng)
    if replicate_params:
        params = replicate(mesh, params)
    return generate(
        step_fn,
        params,
        prompt_tokens,
        tables,
        constraint_ids,
        sampler=sampler,
        max_new_tokens=max_new_tokens,
        rng=rng,
        prompt_mask=prompt_mask,
        cache=cache,
        pad_id=pad_id,
        buffer_length=buffer_length,
        data_sharding=batch_sharding(mesh, axis),
        fast_forward=fast_forward,
        speculate=speculate,
        draft_keys=draft_keys,
    )
