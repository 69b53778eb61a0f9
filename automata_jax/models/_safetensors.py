"""Loads Hugging Face Gemma-3 safetensors checkpoints into the `gemma3` params layout.

Accepted key layouts (the prefix is detected from where ``embed_tokens.weight`` is):

* ``model.*`` — ``Gemma3ForCausalLM`` (gemma-3-270m, gemma-3-1b);
* ``language_model.model.*`` — ``Gemma3ForConditionalGeneration`` as published (4B+);
* ``model.language_model.*`` — the same, as saved by transformers >= 4.52;
* no prefix — a bare ``Gemma3TextModel``.

``lm_head.weight`` is skipped (the output layer is tied to the embedding), and so
are the vision tower and the multimodal projector of multimodal checkpoints.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from automata_jax._errors import CheckpointError
from automata_jax.models.gemma3 import Gemma3Config, Params, param_shapes

_PREFIXES = ("model.", "language_model.model.", "model.language_model.", "")
_SKIPPED_PREFIXES = (
    "vision_tower.",
    "multi_modal_projector.",
    "model.vision_tower.",
    "model.multi_modal_projector.",
)
_SKIPPED_KEYS = ("lm_head.weight", "language_model.lm_head.weight")

# Our per-layer name -> HF module name under ``layers.{i}.``.
_LAYER_KEYS = {
    "input_layernorm": "input_layernorm",
    "q_proj": "self_attn.q_proj",
    "k_proj": "self_attn.k_proj",
    "v_proj": "self_attn.v_proj",
    "q_norm": "self_attn.q_norm",
    "k_norm": "self_attn.k_norm",
    "o_proj": "self_attn.o_proj",
    "post_attention_layernorm": "post_attention_layernorm",
    "pre_feedforward_layernorm": "pre_feedforward_layernorm",
    "gate_proj": "mlp.gate_proj",
    "up_proj": "mlp.up_proj",
    "down_proj": "mlp.down_proj",
    "post_feedforward_layernorm": "post_feedforward_layernorm",
}


def load_safetensors(path: str | os.PathLike, config: Gemma3Config, *, dtype: Any = None) -> Params:
    """Reads an HF Gemma-3 checkpoint into a params dict for `gemma3.apply_step`.

    Args:
      path: a ``.safetensors`` file, a ``model.safetensors.index.json`` (sharded), or
        a directory holding either.
      config: the model the checkpoint must match (layer count and every shape).
      dtype: cast every array to this dtype; None keeps the stored dtype (bf16, f32).

    Returns:
      The params tree (jax arrays) in the layout of `gemma3.param_shapes`.

    Raises:
      CheckpointError: naming the file and the missing / unexpected / mis-shaped key.
      ImportError: when the ``safetensors`` package is not installed.
    """
    try:
        from safetensors import SafetensorError, safe_open
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_safetensors needs the 'safetensors' package: pip install 'automata-jax[gemma]'"
        ) from e

    files = _checkpoint_files(Path(path))
    where: dict[str, Path] = {}
    try:
        for file in files:
            with safe_open(str(file), framework="numpy") as f:
                for key in f.keys():
                    if key in where:
                        raise CheckpointError(
                            f"{file}: key {key!r} is also in {where[key]}; a checkpoint holds "
                            "each tensor once"
                        )
                    where[key] = file
    except (SafetensorError, OSError) as e:
        raise CheckpointError(f"cannot read safetensors file(s) {_names(files)}: {e}") from e

    hf_keys = _hf_key_map(where, config, files)

    def read(hf_key: str) -> np.ndarray:
        try:
            with safe_open(str(where[hf_key]), framework="numpy") as f:
                return f.get_tensor(hf_key)
        except (SafetensorError, OSError) as e:
            raise CheckpointError(f"{where[hf_key]}: cannot read {hf_key!r}: {e}") from e

    return _convert(hf_keys, read, lambda key: str(where[key]), config, dtype)


def convert_hf_state_dict(
    state_dict: Mapping[str, np.ndarray], config: Gemma3Config, *, dtype: Any = None
) -> Params:
    """Like `load_safetensors`, for an in-memory dict of HF-named arrays."""
    hf_keys = _hf_key_map({k: "<state_dict>" for k in state_dict}, config, ["<state_dict>"])
    return _convert(
        hf_keys, lambda k: np.asarray(state_dict[k]), lambda k: "<state_dict>", config, dtype
    )


def _checkpoint_files(path: Path) -> list[Path]:
    if path.is_dir():
        if (path / "model.safetensors.index.json").is_file():
            path = path / "model.safetensors.index.json"
        elif (path / "model.safetensors").is_file():
            return [path / "model.safetensors"]
        else:
            raise CheckpointError(
                f"{path}: no model.safetensors or model.safetensors.index.json in this directory"
            )
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    if path.name.endswith(".json"):
        try:
            weight_map = json.loads(path.read_text())["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(
                f"{path}: not a safetensors index (expected a JSON object with 'weight_map'): {e}"
            ) from e
        files = [path.parent / name for name in shards]
        for file in files:
            if not file.is_file():
                raise CheckpointError(f"{path}: lists shard {file.name!r}, which does not exist")
        return files
    return [path]


def _hf_key_map(
    where: Mapping[str, Any], config: Gemma3Config, files: list
) -> dict[tuple[str, ...], str]:
    """Maps each params path to its HF key, checking that the key sets agree."""
    prefix = next((p for p in _PREFIXES if f"{p}embed_tokens.weight" in where), None)
    if prefix is None:
        raise CheckpointError(
            f"{_names(files)}: missing the embedding; expected one of "
            f"{[p + 'embed_tokens.weight' for p in _PREFIXES]} (is this a Gemma-3 checkpoint?)"
        )
    wanted = {
        ("embed_tokens",): f"{prefix}embed_tokens.weight",
        ("final_norm",): f"{prefix}norm.weight",
    }
    for i in range(config.num_layers):
        for ours, theirs in _LAYER_KEYS.items():
            wanted[(f"layer_{i}", ours)] = f"{prefix}layers.{i}.{theirs}.weight"
    for key in wanted.values():
        if key not in where:
            raise CheckpointError(
                f"{_names(files)}: missing key {key!r} (config: {config.num_layers} layers; "
                f"keys found under prefix {prefix!r})"
            )
    expected = set(wanted.values())
    for key in sorted(where):
        if key in expected or key in _SKIPPED_KEYS or key.startswith(_SKIPPED_PREFIXES):
            continue
        raise CheckpointError(
            f"{where[key]}: unexpected key {key!r}; the checkpoint does not match the config "
            f"(config: {config.num_layers} layers, prefix {prefix!r})"
        )
    return wanted


def _convert(hf_keys, read, file_of, config: Gemma3Config, dtype) -> Params:
    shapes = param_shapes(config)
    d, h, kv, k = config.d_model, config.num_heads, config.num_kv_heads, config.head_dim
    # HF linear weights are [out, in]; ours are [in, ...out] (and o_proj [H, K, D]).
    hf_shape = {
        "q_proj": (h * k, d),
        "k_proj": (kv * k, d),
        "v_proj": (kv * k, d),
        "o_proj": (d, h * k),
        "gate_proj": (config.hidden_dim, d),
        "up_proj": (config.hidden_dim, d),
        "down_proj": (d, config.hidden_dim),
    }
    params: Params = {}
    for path, hf_key in hf_keys.items():
        name = path[-1]
        target = shapes[path[0]] if len(path) == 1 else shapes[path[0]][name]
        want = hf_shape.get(name, target)
        array = read(hf_key)
        if tuple(array.shape) != tuple(want):
            raise CheckpointError(
                f"{file_of(hf_key)}: {hf_key!r} has shape {tuple(array.shape)}, expected "
                f"{tuple(want)} for this config"
            )
        if name in hf_shape:
            array = array.T.reshape(target)
        value = jnp.asarray(array, dtype=dtype)
        if len(path) == 1:
            params[name] = value
        else:
            params.setdefault(path[0], {})[name] = value
    return params


def _names(files) -> str:
    return ", ".join(str(f) for f in files)
