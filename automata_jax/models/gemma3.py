"""A compact Gemma-3 text decoder: pure functions over a params dict, with a KV cache.

Faithful to Hugging Face ``Gemma3ForCausalLM`` (``modeling_gemma3.py``) and the
google-deepmind ``gemma`` Gemma-3 text model:

* token embedding scaled by ``sqrt(d_model)`` in the compute dtype; tied output logits;
* RMSNorm with ``(1 + weight)`` scaling, computed in float32; four norms per layer
  (pre/post attention, pre/post feed-forward) and a final norm;
* grouped-query attention with RMSNorm on each query and key head (QK-norm), RoPE
  (rotate-half layout) with base 10k on local layers and 1M on global layers, an
  optional linear RoPE scaling factor on global layers (4B+ checkpoints), scores
  scaled by ``query_pre_attn_scalar ** -0.5``, optional attention logit soft-capping;
* local (sliding-window) and global layers, 5 local then 1 global by default;
* gated-GELU MLP (tanh approximation); optional final logit soft-capping.

Parameters are a plain nested dict (see `param_shapes`): ``"embed_tokens"``
``[V, D]``, ``"final_norm"`` ``[D]`` and one dict per layer ``"layer_{i}"`` whose
matrices are stored in einsum-friendly layouts (``q_proj`` ``[D, H, K]``, ...).
The compute dtype is the dtype of the embedding table; the cache has its own.

Example:
  >>> import jax, jax.numpy as jnp
  >>> model = Gemma3(Gemma3Config.tiny(vocab_size=256))
  >>> params = model.init_params(jax.random.key(0))
  >>> cache = model.init_cache(batch_size=1, max_length=8)
  >>> tokens = jnp.array([[2, 17, 42]], jnp.int32)
  >>> positions = jnp.arange(3, dtype=jnp.int32)[None]
  >>> logits, cache = jax.jit(model.apply_step)(
  ...     params, tokens, positions, jnp.ones((1, 3), bool), cache)
  >>> logits.shape, int(cache.end_index)
  ((1, 3, 256), 3)
"""

# ruff: noqa: F722 (jaxtyping shape strings such as "B T" are not Python expressions)
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from automata_jax._errors import ModelError

if TYPE_CHECKING:  # jaxtyping is for readers and type checkers only (not a runtime dependency).
    from jaxtyping import Array, Bool, Float, Int

Params = dict[str, Any]

LOCAL = "local"
GLOBAL = "global"

# Attention scores of masked slots. Finite (not -inf) so that a query row with no
# visible key (a padding slot) gives finite, ignorable outputs instead of NaN.
_MASKED_SCORE = -0.7 * float(np.finfo(np.float32).max)


# Published sizes of the Gemma-3 text decoders (HF config.json); the other fields keep their
# defaults, which are the family's.
_PRESETS = {
    "gemma3_270m": dict(
        vocab_size=262_144, d_model=640, num_layers=18, num_heads=4, num_kv_heads=1,
        head_dim=256, hidden_dim=2048, sliding_window=512,
    ),
    "gemma3_1b": dict(
        vocab_size=262_144, d_model=1152, num_layers=26, num_heads=4, num_kv_heads=1,
        head_dim=256, hidden_dim=6912, sliding_window=512,
    ),
    "gemma3_4b": dict(
        vocab_size=262_208, d_model=2560, num_layers=34, num_heads=8, num_kv_heads=4,
        head_dim=256, hidden_dim=10_240, sliding_window=1024, rope_global_scale=8.0,
    ),
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Gemma3Config:
    """Static, hashable configuration of a Gemma-3 text decoder.

    Attributes:
      vocab_size: rows of the (tied) embedding table; the width of the logits.
      d_model: width of the residual stream (HF ``hidden_size``).
      num_layers: decoder layers.
      num_heads: query heads.
      num_kv_heads: key/value heads; divides ``num_heads`` (grouped-query attention).
      head_dim: width of one head.
      hidden_dim: width of the gated MLP (HF ``intermediate_size``).
      sliding_window: a local layer's query sees the keys of the last ``sliding_window``
        valid cache slots up to its own (invalid slots in between do not count).
      sliding_window_pattern: layer ``i`` is global iff ``(i + 1) % pattern == 0``
        (6: five local layers, then one global).
      layer_types: optional explicit ``"local"`` / ``"global"`` per layer (HF
        ``layer_types``); overrides ``sliding_window_pattern``.
      query_pre_attn_scalar: attention scores are scaled by its ``-1/2`` power.
      rope_local_base: RoPE base frequency of local layers.
      rope_global_base: RoPE base frequency of global layers.
      rope_global_scale: linear RoPE scaling factor of global layers (positions are
        divided by it); 1.0 means none, 8.0 in the 4B+ checkpoints.
      attn_logit_softcap: if set, scores become ``cap * tanh(scores / cap)``.
      final_logit_softcap: if set, logits become ``cap * tanh(logits / cap)``.
      rms_norm_eps: epsilon of every RMSNorm.
    """

    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_dim: int
    sliding_window: int
    sliding_window_pattern: int = 6
    layer_types: tuple[str, ...] | None = None
    query_pre_attn_scalar: float = 256.0
    rope_local_base: float = 10_000.0
    rope_global_base: float = 1_000_000.0
    rope_global_scale: float = 1.0
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    rms_norm_eps: float = 1e-6

    def __post_init__(self):
        for name in ("vocab_size", "d_model", "num_layers", "num_heads", "num_kv_heads"):
            if getattr(self, name) < 1:
                raise ModelError(f"Gemma3Config.{name}: expected >= 1, got {getattr(self, name)}")
        for name in ("hidden_dim", "sliding_window", "sliding_window_pattern"):
            if getattr(self, name) < 1:
                raise ModelError(f"Gemma3Config.{name}: expected >= 1, got {getattr(self, name)}")
        if self.head_dim < 2 or self.head_dim % 2:
            raise ModelError(f"Gemma3Config.head_dim: expected an even number, got {self.head_dim}")
        if self.num_heads % self.num_kv_heads:
            raise ModelError(
                f"Gemma3Config: num_heads ({self.num_heads}) must be a multiple of "
                f"num_kv_heads ({self.num_kv_heads})"
            )
        if self.layer_types is not None:
            if not isinstance(self.layer_types, tuple):
                raise ModelError("Gemma3Config.layer_types: expected a tuple (hashable)")
            if len(self.layer_types) != self.num_layers or set(self.layer_types) - {LOCAL, GLOBAL}:
                raise ModelError(
                    f"Gemma3Config.layer_types: expected {self.num_layers} entries, each "
                    f"{LOCAL!r} or {GLOBAL!r}, got {self.layer_types!r}"
                )
        if self.rope_global_scale <= 0:
            raise ModelError(
                f"Gemma3Config.rope_global_scale: expected > 0, got {self.rope_global_scale}"
            )

    @property
    def is_local(self) -> tuple[bool, ...]:
        """Per layer: True for a sliding-window (local) layer, False for a global one."""
        if self.layer_types is not None:
            return tuple(t == LOCAL for t in self.layer_types)
        return tuple(bool((i + 1) % self.sliding_window_pattern) for i in range(self.num_layers))

    @classmethod
    def gemma3_270m(cls) -> Gemma3Config:
        """google/gemma-3-270m (HF config.json)."""
        return cls(**_PRESETS["gemma3_270m"])

    @classmethod
    def gemma3_1b(cls) -> Gemma3Config:
        """google/gemma-3-1b-pt / -it (HF config.json)."""
        return cls(**_PRESETS["gemma3_1b"])

    @classmethod
    def gemma3_4b(cls) -> Gemma3Config:
        """Text decoder of google/gemma-3-4b-pt / -it (vocabulary includes image tokens)."""
        return cls(**_PRESETS["gemma3_4b"])

    @classmethod
    def tiny(cls, vocab_size: int = 262_144) -> Gemma3Config:
        """A tiny config for tests and demos: 6 layers (5 local, 1 global), window 16."""
        return cls(
            vocab_size=vocab_size, d_model=64, num_layers=6, num_heads=2, num_kv_heads=1,
            head_dim=32, hidden_dim=128, sliding_window=16, query_pre_attn_scalar=32.0,
        )  # fmt: skip

    @classmethod
    def from_hf_config(cls, hf: Mapping[str, Any]) -> Gemma3Config:
        """Reads an HF ``config.json`` dict (``Gemma3TextConfig``, or a multimodal
        ``Gemma3Config`` with a ``text_config``); absent keys take HF's defaults.

        Raises:
          ModelError: for a RoPE type other than default/linear.
        """
        hf = dict(hf.get("text_config", hf))
        local_base = float(hf.get("rope_local_base_freq", 10_000.0))
        global_base = float(hf.get("rope_theta", 1_000_000.0))
        scaling = hf.get("rope_scaling")
        if "rope_parameters" in hf:  # newer transformers: one dict per layer type
            rp = hf["rope_parameters"]
            local_base = float(rp.get("sliding_attention", {}).get("rope_theta", local_base))
            global_base = float(rp.get("full_attention", {}).get("rope_theta", global_base))
            scaling = rp.get("full_attention")
        scale = 1.0
        if scaling:
            kind = scaling.get("rope_type", scaling.get("type", "default"))
            if kind == "linear":
                scale = float(scaling["factor"])
            elif kind != "default":
                raise ModelError(f"from_hf_config: unsupported rope type {kind!r} (only linear)")
        layer_types = hf.get("layer_types")
        if layer_types is not None:
            names = {"sliding_attention": LOCAL, "full_attention": GLOBAL}
            layer_types = tuple(names.get(t, t) for t in layer_types)
        return cls(
            vocab_size=int(hf.get("vocab_size", 262_208)),
            d_model=int(hf.get("hidden_size", 2304)),
            num_layers=int(hf.get("num_hidden_layers", 26)),
            num_heads=int(hf.get("num_attention_heads", 8)),
            num_kv_heads=int(hf.get("num_key_value_heads", 4)),
            head_dim=int(hf.get("head_dim", 256)),
            hidden_dim=int(hf.get("intermediate_size", 9216)),
            sliding_window=int(hf.get("sliding_window", 4096)),
            sliding_window_pattern=int(hf.get("sliding_window_pattern", 6)),
            layer_types=layer_types,
            query_pre_attn_scalar=float(hf.get("query_pre_attn_scalar", 256)),
            rope_local_base=local_base,
            rope_global_base=global_base,
            rope_global_scale=scale,
            attn_logit_softcap=hf.get("attn_logit_softcapping"),
            final_logit_softcap=hf.get("final_logit_softcapping"),
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        )


@flax.struct.dataclass(kw_only=True)
class KVCache:
    """Keys and values of every layer for ``S`` cache slots, shared slot index for all rows.

    Attributes:
      keys: per layer, RoPE-rotated keys; each shape=[B, S, KVH, K].
      values: per layer; each shape=[B, S, KVH, K].
      valid: which slots hold a real (non-padding) token; shape=[B, S], bool.
      end_index: the next slot to write; shape=[], int32.
    """

    keys: tuple[Float[Array, "B S KVH K"], ...]
    values: tuple[Float[Array, "B S KVH K"], ...]
    valid: Bool[Array, "B S"]
    end_index: Int[Array, ""]

    @property
    def batch_size(self) -> int:
        return self.valid.shape[0]

    @property
    def max_length(self) -> int:
        return self.valid.shape[1]


def param_shapes(config: Gemma3Config) -> Params:
    """The params tree with shape tuples as leaves (the layout `apply_step` expects)."""
    d, h, kv, k, f = (
        config.d_model, config.num_heads, config.num_kv_heads, config.head_dim, config.hidden_dim,
    )  # fmt: skip
    layer = {
        "input_layernorm": (d,),
        "q_proj": (d, h, k),
        "k_proj": (d, kv, k),
        "v_proj": (d, kv, k),
        "q_norm": (k,),
        "k_norm": (k,),
        "o_proj": (h, k, d),
        "post_attention_layernorm": (d,),
        "pre_feedforward_layernorm": (d,),
        "gate_proj": (d, f),
        "up_proj": (d, f),
        "down_proj": (f, d),
        "post_feedforward_layernorm": (d,),
    }
    params: Params = {"embed_tokens": (config.vocab_size, d), "final_norm": (d,)}
    for i in range(config.num_layers):
        params[f"layer_{i}"] = dict(layer)
    return params


def init_params(
    config: Gemma3Config, rng: jax.Array | int, dtype: Any = jnp.float32, *, std: float = 0.02
) -> Params:
    """Random parameters: matrices ~ N(0, std^2), norm weights 0 (i.e. scale 1), as in HF."""
    if isinstance(rng, int):
        rng = jax.random.key(rng)
    shapes = param_shapes(config)
    leaves, treedef = jax.tree.flatten(shapes, is_leaf=lambda x: isinstance(x, tuple))
    out = []
    for i, shape in enumerate(leaves):
        if len(shape) == 1:
            out.append(jnp.zeros(shape, dtype))
        else:
            out.append((std * jax.random.normal(jax.random.fold_in(rng, i), shape)).astype(dtype))
    return jax.tree.unflatten(treedef, out)


def init_cache(
    config: Gemma3Config, batch_size: int, max_length: int, dtype: Any = jnp.float32
) -> KVCache:
    """An empty cache of ``max_length`` slots (all invalid, ``end_index`` 0)."""
    shape = (batch_size, max_length, config.num_kv_heads, config.head_dim)
    return KVCache(
        keys=tuple(jnp.zeros(shape, dtype) for _ in range(config.num_layers)),
        values=tuple(jnp.zeros(shape, dtype) for _ in range(config.num_layers)),
        valid=jnp.zeros((batch_size, max_length), bool),
        end_index=jnp.zeros((), jnp.int32),
    )


def num_params(params: Params) -> int:
    """Total number of scalars in a params tree."""
    return int(sum(math.prod(x.shape) for x in jax.tree.leaves(params)))


def apply_step(
    config: Gemma3Config,
    params: Params,
    tokens: Int[Array, "B T"],
    positions: Int[Array, "B T"],
    input_mask: Bool[Array, "B T"],
    cache: KVCache,
    logits_at: Int[Array, " B"] | None = None,
    write_cache: bool = True,
) -> tuple[Float[Array, "B T V"], KVCache]:
    """Runs ``T`` new tokens per row through the decoder, reading and extending the cache.

    The new keys/values go to slots ``[end_index, end_index + T)`` of every row;
    their ``valid`` bits come from ``input_mask``. The query in slot ``i`` attends to
    valid slots ``j <= i`` (on local layers, only the last ``sliding_window`` valid
    ones). Logits of padding slots are finite but meaningless. The caller keeps
    ``end_index + T <= max_length`` (past it, ``dynamic_update_slice`` clamps the
    write to the last ``T`` slots).

    Args:
      config: static model configuration.
      params: weights in the layout of `param_shapes`.
      tokens: token ids (clipped into ``[0, vocab_size)``); shape=[B, T].
      positions: RoPE position of each token, per row; shape=[B, T].
      input_mask: False marks a padding slot, never attended to; shape=[B, T].
      cache: from `init_cache` or a previous call.
      logits_at: optional slot per row, shape=[B]; then only that slot's logits are
        computed (shape=[B, 1, V]), which saves the output layer on the other slots
        (fast-forward decoding feeds forced tokens whose logits it does not need). Or
        J slots per row, shape=[B, J], giving logits of shape=[B, J, V] (speculative
        decoding verifies its drafts at J slots).
      write_cache: False: the cache is only read, and the second result is the update
        instead, a `KVCache` of the ``T`` new slots (keys/values [B, T, KVH, K], ``valid``
        = ``input_mask``, ``end_index`` advanced by ``T``) that the caller writes at slots
        ``[end_index, end_index + T)`` (`automata_jax._loop.write_cache`). The decode
        loops use it inside their ``lax.switch`` over call widths: a cache written inside
        a branch is copied whole by XLA (every layer's keys and values, each call), one
        written after the switch is updated in place. The attention is the same: the new
        slots' scores take the place of slots ``[end_index, end_index + T)``'s.

    Returns:
      ``(logits, cache)``: float32 logits, shape=[B, T, V] (or [B, 1, V] with
      ``logits_at``), and the cache with ``end_index`` advanced by ``T`` (or the update,
      with ``write_cache=False``).

    Raises:
      ModelError: (while tracing) when shapes or dtypes do not fit the config/cache.
    """
    _check_inputs(config, params, tokens, positions, input_mask, cache)
    seq_len = tokens.shape[1]
    start = cache.end_index
    embed = params["embed_tokens"]
    dtype = embed.dtype

    x = jnp.take(embed, tokens, axis=0, mode="clip")  # shape=[B, T, D]
    x = x * jnp.asarray(math.sqrt(config.d_model), dtype)

    # Masks by cache slot, shared by all layers of a kind; shape=[B, T, S].
    valid = jax.lax.dynamic_update_slice(cache.valid, input_mask, (jnp.int32(0), start))
    key_slot = jnp.arange(cache.max_length, dtype=jnp.int32)[None, :]
    query_slot = start + jnp.arange(seq_len, dtype=jnp.int32)[:, None]
    global_mask = valid[:, None, :] & (key_slot <= query_slot)[None]
    # The window counts tokens, not slots: slots left invalid between tokens (a chunked
    # call's padding, rejected drafts) do not shorten it. rank = valid slots up to a slot.
    rank = jnp.cumsum(valid.astype(jnp.int32), axis=1)  # [B, S]
    query_rank = jax.lax.dynamic_slice_in_dim(rank, start, seq_len, axis=1)  # [B, T]
    local_mask = global_mask & (query_rank[:, :, None] - rank[:, None, :] < config.sliding_window)

    keys, values = [], []
    for i, is_local in enumerate(config.is_local):
        p = params[f"layer_{i}"]
        h = _rms_norm(x, p["input_layernorm"], config.rms_norm_eps)
        h, k_cache, v_cache = _attention(
            config, p, h, positions, cache.keys[i], cache.values[i], start,
            local_mask if is_local else global_mask, is_local, write_cache,
        )  # fmt: skip
        keys.append(k_cache)
        values.append(v_cache)
        x = x + _rms_norm(h, p["post_attention_layernorm"], config.rms_norm_eps)
        h = _rms_norm(x, p["pre_feedforward_layernorm"], config.rms_norm_eps)
        h = _mlp(p, h)
        x = x + _rms_norm(h, p["post_feedforward_layernorm"], config.rms_norm_eps)

    if logits_at is not None:
        at = logits_at.astype(jnp.int32)
        at = at[:, None, None] if at.ndim == 1 else at[:, :, None]  # [B] or [B, J] slots
        x = jnp.take_along_axis(x, at, axis=1)
    x = _rms_norm(x, params["final_norm"], config.rms_norm_eps)
    logits = jnp.einsum("btd,vd->btv", x, embed, preferred_element_type=jnp.float32)
    logits = _softcap(logits, config.final_logit_softcap)
    new_cache = KVCache(
        keys=tuple(keys),
        values=tuple(values),
        valid=valid if write_cache else input_mask.astype(bool),
        end_index=start + seq_len,
    )
    return logits, new_cache


# Declared for the decode loops (`functools.partial(apply_step, config)` too): see
# `automata_jax._fast_forward.accepts_logits_at` and `automata_jax._loop.defers_cache_write`.
apply_step.takes_logits_at = True
apply_step.defers_cache_write = True


@dataclasses.dataclass(frozen=True)
class Gemma3:
    """A Gemma-3 text decoder bound to its config: thin methods over the pure functions.

    Hashable, so it can be closed over or passed as a static argument to ``jax.jit``.
    """

    config: Gemma3Config

    def param_shapes(self) -> Params:
        return param_shapes(self.config)

    def init_params(
        self, rng: jax.Array | int, dtype: Any = jnp.float32, *, std: float = 0.02
    ) -> Params:
        return init_params(self.config, rng, dtype, std=std)

    def init_cache(self, batch_size: int, max_length: int, dtype: Any = jnp.float32) -> KVCache:
        return init_cache(self.config, batch_size, max_length, dtype)

    def apply_step(
        self,
        params: Params,
        tokens: Int[Array, "B T"],
        positions: Int[Array, "B T"],
        input_mask: Bool[Array, "B T"],
        cache: KVCache,
        logits_at: Int[Array, " B"] | None = None,
        write_cache: bool = True,
    ) -> tuple[Float[Array, "B T V"], KVCache]:
        """`apply_step` with this config. It declares ``logits_at`` (``takes_logits_at``,
        read by `automata_jax._fast_forward.accepts_logits_at`): without it the decode loops
        would compute the logits at every fed slot (the prefill's whole prompt); and
        ``write_cache`` (``defers_cache_write``, `automata_jax._loop.defers_cache_write`)."""
        return apply_step(
            self.config, params, tokens, positions, input_mask, cache, logits_at, write_cache
        )

    apply_step.takes_logits_at = True
    apply_step.defers_cache_write = True

    def num_params(self, params: Params) -> int:
        return num_params(params)


# --------------------------------------------------------------------------- internals


def _rms_norm(x: Float[Array, "... N"], weight: Float[Array, " N"], eps: float):
    """Gemma RMSNorm: float32 statistics, scale ``1 + weight``, back to x's dtype."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(jnp.square(x32), axis=-1, keepdims=True) + eps)
    return (y * (1.0 + weight.astype(jnp.float32))).astype(x.dtype)


def _rope(x: Float[Array, "B T N K"], positions: Int[Array, "B T"], base: float, scale: float):
    """Rotary embedding, rotate-half layout (first half / second half of each head)."""
    head_dim = x.shape[-1]
    exponents = np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim
    inv_freq = (1.0 / (np.float32(base) ** exponents)) / np.float32(scale)  # shape=[K/2]
    angles = positions.astype(jnp.float32)[..., None] * inv_freq  # shape=[B, T, K/2]
    cos = jnp.cos(angles)[:, :, None, :]
    sin = jnp.sin(angles)[:, :, None, :]
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


def _softcap(x: jax.Array, cap: float | None) -> jax.Array:
    return x if cap is None else cap * jnp.tanh(x / cap)


def _attention(
    config: Gemma3Config,
    p: Params,
    x: Float[Array, "B T D"],
    positions: Int[Array, "B T"],
    k_cache: Float[Array, "B S KVH K"],
    v_cache: Float[Array, "B S KVH K"],
    start: Int[Array, ""],
    mask: Bool[Array, "B T S"],
    is_local: bool,
    write_cache: bool = True,
):
    """Self-attention of one layer; returns (output [B, T, D], updated k/v caches), or
    with ``write_cache=False`` (output, the new keys, the new values [B, T, KVH, K]): the
    caches are only read, the new slots' scores put in place of theirs (same softmax)."""
    batch, seq_len, _ = x.shape
    kvh, groups = config.num_kv_heads, config.num_heads // config.num_kv_heads
    q = jnp.einsum("btd,dhk->bthk", x, p["q_proj"])
    k = jnp.einsum("btd,dhk->bthk", x, p["k_proj"])
    v = jnp.einsum("btd,dhk->bthk", x, p["v_proj"])
    q = _rms_norm(q, p["q_norm"], config.rms_norm_eps)
    k = _rms_norm(k, p["k_norm"], config.rms_norm_eps)
    if is_local:
        base, scale = config.rope_local_base, 1.0
    else:
        base, scale = config.rope_global_base, config.rope_global_scale
    q = _rope(q, positions, base, scale)
    k = _rope(k, positions, base, scale)

    zero = jnp.int32(0)
    k, v = k.astype(k_cache.dtype), v.astype(v_cache.dtype)
    if write_cache:
        k_cache = jax.lax.dynamic_update_slice(k_cache, k, (zero, start, zero, zero))
        v_cache = jax.lax.dynamic_update_slice(v_cache, v, (zero, start, zero, zero))

    q = q.reshape(batch, seq_len, kvh, groups, config.head_dim)  # head h uses kv head h // groups
    scores = jnp.einsum("btngk,bsnk->bngts", q, k_cache, preferred_element_type=jnp.float32)
    at = (zero, zero, zero, zero, start)
    if not write_cache:  # the new slots' scores in place of the stale slots'
        new = jnp.einsum("btngk,bsnk->bngts", q, k, preferred_element_type=jnp.float32)
        scores = jax.lax.dynamic_update_slice(scores, new, at)
    scores = _softcap(scores * config.query_pre_attn_scalar**-0.5, config.attn_logit_softcap)
    scores = jnp.where(mask[:, None, None], scores, _MASKED_SCORE)  # shape=[B, KVH, G, T, S]
    probs = jax.nn.softmax(scores, axis=-1).astype(v_cache.dtype)
    if write_cache:
        out = jnp.einsum("bngts,bsnk->btngk", probs, v_cache)
    else:  # the stale slots' weights go to the new values
        fresh = jax.lax.dynamic_slice_in_dim(probs, start, seq_len, axis=4)
        stale = jax.lax.dynamic_update_slice(probs, jnp.zeros_like(fresh), at)
        out = jnp.einsum("bngts,bsnk->btngk", stale, v_cache)
        out = out + jnp.einsum("bngts,bsnk->btngk", fresh, v)
        k_cache, v_cache = k, v
    out = out.astype(x.dtype).reshape(batch, seq_len, config.num_heads, config.head_dim)
    return jnp.einsum("bthk,hkd->btd", out, p["o_proj"]), k_cache, v_cache


def _mlp(p: Params, x: Float[Array, "B T D"]) -> Float[Array, "B T D"]:
    gate = jax.nn.gelu(jnp.einsum("btd,df->btf", x, p["gate_proj"]), approximate=True)
    up = jnp.einsum("btd,df->btf", x, p["up_proj"])
    return jnp.einsum("btf,fd->btd", gate * up, p["down_proj"])


def _check_inputs(config, params, tokens, positions, input_mask, cache) -> None:
    """Shape/dtype checks; they run while tracing, so misuse fails before compiling."""
    if tokens.ndim != 2:
        raise ModelError(f"apply_step: tokens: expected shape [B, T], got {tokens.shape}")
    if not jnp.issubdtype(tokens.dtype, jnp.integer):
        raise ModelError(f"apply_step: tokens: expected an integer dtype, got {tokens.dtype}")
    if positions.shape != tokens.shape or not jnp.issubdtype(positions.dtype, jnp.integer):
        raise ModelError(
            f"apply_step: positions: expected integers of shape {tokens.shape}, "
            f"got {positions.dtype}{list(positions.shape)}"
        )
    if input_mask.shape != tokens.shape or input_mask.dtype != jnp.bool_:
        raise ModelError(
            f"apply_step: input_mask: expected bool of shape {tokens.shape}, "
            f"got {input_mask.dtype}{list(input_mask.shape)}"
        )
    if len(cache.keys) != config.num_layers or tokens.shape[0] != cache.batch_size:
        raise ModelError(
            f"apply_step: cache: expected {config.num_layers} layers and batch {tokens.shape[0]}, "
            f"got {len(cache.keys)} layers and batch {cache.batch_size}"
        )
    if tokens.shape[1] > cache.max_length:
        raise ModelError(
            f"apply_step: {tokens.shape[1]} tokens do not fit a cache of {cache.max_length} slots"
        )
    embed_shape = tuple(params["embed_tokens"].shape)
    if embed_shape != (config.vocab_size, config.d_model):
        raise ModelError(
            f"apply_step: params['embed_tokens']: expected shape "
            f"{(config.vocab_size, config.d_model)} for this config, got {embed_shape}"
        )
