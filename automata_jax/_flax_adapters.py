"""Flax models as `generate`'s ``step_fn`` and ``init_cache``: one adapter for NNX, one for linen.

`generate` takes a pure function ``step_fn(params, tokens, positions, input_mask, cache) ->
(logits, cache)`` and ``init_cache(batch_size, max_length)``. Flax models keep their KV cache
inside the model instead: NNX modules in `flax.nnx.Cache` variables, linen modules in the
``"cache"`` variable collection. The adapters below move that state in and out:

* `nnx_step` splits an NNX module with `nnx.split` into a static ``graphdef``, the params
  (every variable that is not an `nnx.Cache`) and the cache state; each step is
  ``nnx.merge`` -> call -> ``nnx.state(module, nnx.Cache)``.
* `LinenStep` wraps ``module.apply({"params": params, "cache": cache}, ..., mutable=["cache"])``.

Both adapters take `generate`'s ``logits_at`` keyword (the prefill needs the last slot's
logits only; both declare it, ``takes_logits_at = True``): they pass it on to a module call
that takes it (declared, or a ``logits_at`` parameter; see
`automata_jax._fast_forward.accepts_logits_at`), and otherwise pick that slot from the full
logits. Both are frozen dataclasses (hashable, compared by value), so passing the same
adapter, or an equal one, to `generate` reuses its compilation. Nothing runs on the host:
the adapters only trace the model inside `generate`'s jit.

Example:
  >>> import jax, jax.numpy as jnp
  >>> from flax import nnx
  >>> class Bigram(nnx.Module):  # a cache-free model still needs an init_cache method
  ...     def __init__(self, rngs):
  ...         self.table = nnx.Embed(5, 5, rngs=rngs)
  ...     def init_cache(self, batch_size, max_length):
  ...         pass
  ...     def __call__(self, tokens, positions, input_mask):
  ...         return self.table(tokens)
  >>> step, params = nnx_step(Bigram(nnx.Rngs(0)))
  >>> logits, cache = step(params, jnp.zeros((2, 3), jnp.int32), jnp.zeros((2, 3), jnp.int32),
  ...                      jnp.ones((2, 3), bool), step.init_cache(2, 8))
  >>> logits.shape
  (2, 3, 5)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from automata_jax._fast_forward import accepts_logits_at

__all__ = ["LinenStep", "NnxStep", "nnx_step"]


@dataclasses.dataclass(frozen=True)
class _InitCache:
    """``adapter.init_cache``: a static, value-compared ``init_cache(batch_size, max_length)``.

    (A bound method compares its ``self`` by identity, so two equal adapters' bound methods
    would be two different static arguments to `generate`'s jit, and compile twice.)
    """

    adapter: Any

    def __call__(self, batch_size: int, max_length: int):
        return self.adapter.new_cache(batch_size, max_length)


def call_module(module, tokens, positions, input_mask, logits_at=None):
    """The default NNX call: ``module(tokens, positions, input_mask) -> logits``. With
    ``logits_at`` (int32[B], see `generate`), logits [B, 1, V]: the module's own
    ``logits_at`` keyword when its ``__call__`` takes one (it can then skip the output layer
    elsewhere), else the full logits' slot."""
    if logits_at is None:
        return module(tokens, positions, input_mask)
    if accepts_logits_at(module.__call__):
        return module(tokens, positions, input_mask, logits_at=logits_at)
    return pick_logits(module(tokens, positions, input_mask), logits_at)


def pick_logits(logits, logits_at):
    """``logits[b, logits_at[b]]`` for every row, shape [B, 1, V]."""
    return jnp.take_along_axis(logits, logits_at.astype(jnp.int32)[:, None, None], axis=1)


def init_module_cache(module, batch_size: int, max_length: int) -> None:
    """The default NNX cache set-up: ``module.init_cache(batch_size, max_length)``, which
    (re)creates the module's `nnx.Cache` variables for that batch and length."""
    module.init_cache(batch_size, max_length)


@dataclasses.dataclass(frozen=True)
class NnxStep:
    """``step_fn`` and ``init_cache`` of an NNX module (build it with `nnx_step`).

    Attributes:
      graphdef: the module's static structure, cache variables included.
      abstract: ``(treedef, leaves)`` of the module's state as shape/dtype structs; rebuilds
        a module inside `init_cache` without closing over any weights.
      call: ``call(module, tokens, positions, input_mask) -> logits`` (static).
      init: ``init(module, batch_size, max_length)`` creates the `nnx.Cache` variables (static).
    """

    graphdef: Any
    abstract: tuple[Any, tuple[jax.ShapeDtypeStruct, ...]]
    call: Callable = call_module
    init: Callable = init_module_cache

    takes_logits_at = True  # declared: `accepts_logits_at`

    def __call__(self, params, tokens, positions, input_mask, cache, logits_at=None):
        """``(params, tokens, positions, input_mask, cache) -> (logits, cache)``: merges the
        module, runs it (updating its cache variables) and splits the cache back out. With
        ``logits_at``, logits of those slots only ([B, 1, V]; passed on to ``call`` when it
        takes the keyword, as `call_module` does)."""
        from flax import nnx

        module = nnx.merge(self.graphdef, params, cache)
        if logits_at is None:
            logits = self.call(module, tokens, positions, input_mask)
        elif accepts_logits_at(self.call):
            logits = self.call(module, tokens, positions, input_mask, logits_at=logits_at)
        else:
            logits = pick_logits(self.call(module, tokens, positions, input_mask), logits_at)
        return logits, nnx.state(module, nnx.Cache)

    @property
    def init_cache(self) -> Callable:
        """``init_cache(batch_size, max_length)``: a fresh cache state (an `nnx.State` of the
        module's `nnx.Cache` variables). Compared by value (unlike a bound method), so that
        equal adapters share `generate`'s compilation."""
        return _InitCache(self)

    def new_cache(self, batch_size: int, max_length: int):
        """What `init_cache` calls."""
        from flax import nnx

        treedef, leaves = self.abstract
        module = nnx.merge(self.graphdef, *jax.tree.unflatten(treedef, leaves))
        self.init(module, batch_size, max_length)
        return nnx.state(module, nnx.Cache)


def nnx_step(
    module,
    *,
    call: Callable = call_module,
    init: Callable = init_module_cache,
) -> tuple[NnxStep, Any]:
    """Splits an NNX module into a `generate`-ready step and its params.

    The module's contract (the defaults; pass ``call`` / ``init`` for other signatures):
    ``module.init_cache(batch_size, max_length)`` creates its `nnx.Cache` variables (KV
    buffers, write index, valid bits), and ``module(tokens, positions, input_mask)`` returns
    float logits ``[B, T, V]``, reading the cache and writing the ``T`` new entries into it.
    Cache attributes that start as None must be declared ``nnx.data(None)``.

    Args:
      module: an `nnx.Module`; left unchanged (the cache layout is found by running ``init``
        on a shape-only copy, so ``init`` may read the weights' shapes but not their values).
      call: ``(module, tokens, positions, input_mask) -> logits``; a module-level function,
        so that the step stays hashable.
      init: ``(module, batch_size, max_length) -> None``, creating the cache variables.

    Returns:
      ``(step, params)``: ``generate(step, params, ..., cache=step.init_cache)``. ``params``
      is the `nnx.State` of every variable that is not an `nnx.Cache` (updates the model makes
      to them during a step, such as RNG counters, are dropped: a step is pure).

    Raises:
      `automata_jax.models.ModelError`: ``module`` is not an NNX module, or it has no
        ``init_cache`` and no ``init`` was given.
    """
    from flax import nnx

    if not isinstance(module, nnx.Module):
        raise _model_error(f"nnx_step: expected a flax.nnx.Module, got {type(module).__name__}")
    if init is init_module_cache and not callable(getattr(module, "init_cache", None)):
        raise _model_error(
            f"nnx_step: {type(module).__name__} has no init_cache(batch_size, max_length) "
            "method; add one that creates its nnx.Cache variables, or pass init="
        )
    graphdef, state = nnx.split(module)
    # The cache variables may not exist yet: create them on a shape-only copy, and take the
    # structure (graphdef) from there. Tiny sizes: only the layout matters here.
    shaped = nnx.merge(graphdef, jax.tree.map(_shape_of, state))
    init(shaped, 1, 1)
    graphdef, params_shapes, cache_shapes = nnx.split(shaped, nnx.Not(nnx.Cache), nnx.Cache)
    leaves, treedef = jax.tree.flatten((params_shapes, cache_shapes))
    abstract = (treedef, tuple(_shape_of(x) for x in leaves))  # the new cache leaves too
    step = NnxStep(graphdef=graphdef, abstract=abstract, call=call, init=init)
    return step, nnx.state(module, nnx.Not(nnx.Cache))


def _model_error(message: str) -> Exception:
    # Imported on the error path only: automata_jax.models pulls in more of automata_compile
    # than the runtime's import needs.
    from automata_jax.models import ModelError

    return ModelError(message)


def _shape_of(x) -> jax.ShapeDtypeStruct:
    x = x if hasattr(x, "shape") and hasattr(x, "dtype") else jnp.asarray(x)
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


@dataclasses.dataclass(frozen=True)
class LinenStep:
    """``step_fn`` and ``init_cache`` of a linen module whose KV cache is the ``"cache"``
    variable collection.

    The module's contract: ``module.apply({"params": p, "cache": c}, tokens, positions,
    input_mask, method=method)`` returns float logits ``[B, T, V]`` and, with ``"cache"``
    mutable, writes the ``T`` new entries into the cache. The module creates its cache
    variables on its first call (``module.init``), sized by that call's ``[B, T]`` input, and
    does not write into them then, as ``nn.MultiHeadDotProductAttention(decode=True)`` does;
    `init_cache` runs ``module.init`` on a dummy ``[batch_size, max_length]`` input and keeps
    the ``"cache"`` collection (the random params it also makes are discarded, and XLA
    removes their computation inside `generate`'s jit).

    Attributes:
      module: an unbound linen module (hashable: linen modules compare by their fields).
      method: the method to apply (a name or a function ``(module, tokens, positions,
        input_mask) -> logits``); None = ``__call__``.
    """

    module: Any
    method: str | Callable | None = None

    takes_logits_at = True  # declared: `accepts_logits_at`

    def __post_init__(self):
        import flax.linen as nn

        if not isinstance(self.module, nn.Module):
            raise _model_error(
                f"LinenStep: expected a flax.linen.Module, got {type(self.module).__name__}"
            )

    def __call__(self, params, tokens, positions, input_mask, cache, logits_at=None):
        """``(params, tokens, positions, input_mask, cache) -> (logits, cache)``; ``params``
        is the ``"params"`` collection. With ``logits_at``, logits of those slots only
        ([B, 1, V]; passed on to the method when it takes the keyword)."""
        kwargs = {}
        method = self.method or type(self.module).__call__
        if isinstance(method, str):
            method = getattr(type(self.module), method)
        forward = logits_at is not None and accepts_logits_at(method)
        if forward:
            kwargs["logits_at"] = logits_at
        logits, mutated = self.module.apply(
            {"params": params, "cache": cache},
            tokens,
            positions,
            input_mask,
            method=self.method,
            mutable=["cache"],
            **kwargs,
        )
        if logits_at is not None and not forward:
            logits = pick_logits(logits, logits_at)
        return logits, mutated["cache"]

    @property
    def init_cache(self) -> Callable:
        """``init_cache(batch_size, max_length)``: a fresh ``"cache"`` collection for
        ``batch_size`` rows of ``max_length`` slots (compared by value, like `NnxStep`'s)."""
        return _InitCache(self)

    def new_cache(self, batch_size: int, max_length: int):
        """What `init_cache` calls."""
        tokens = jnp.zeros((batch_size, max_length), jnp.int32)
        mask = jnp.zeros((batch_size, max_length), bool)
        variables = self.module.init(jax.random.key(0), tokens, tokens, mask, method=self.method)
        if "cache" not in variables:
            raise _model_error(
                f"LinenStep: {type(self.module).__name__} created no 'cache' variables on its "
                "first call; declare the KV cache with self.variable('cache', ...)"
            )
        return variables["cache"]
