"""GGUF test files written the way llama.cpp's converter writes Gemma-3 (``gguf.GGUFWriter``):
random weights under HF names, the GGUF names and conventions, optional quantization."""

from __future__ import annotations

import dataclasses

import gguf
import numpy as np

from automata_jax.models import Gemma3Config

VOCAB = 96
CFG = dataclasses.replace(Gemma3Config.tiny(vocab_size=VOCAB), num_layers=4)

_BLOCK = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "post_feedforward_layernorm": "post_ffw_norm",
}


def random_hf_state_dict(cfg: Gemma3Config, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    d, h, kv, k, f = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden_dim

    def linear(out_dim, in_dim):
        return rng.normal(0.0, in_dim**-0.5, (out_dim, in_dim)).astype(np.float32)

    def norm(n):
        return rng.normal(0.0, 0.3, (n,)).astype(np.float32)

    sd = {
        "model.embed_tokens.weight": linear(cfg.vocab_size, d),
        "model.norm.weight": norm(d),
    }
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        for name in _BLOCK:
            if name.endswith("norm"):
                sd[p + name + ".weight"] = norm(k if "_attn." in name else d)
        sd[p + "self_attn.q_proj.weight"] = linear(h * k, d)
        sd[p + "self_attn.k_proj.weight"] = linear(kv * k, d)
        sd[p + "self_attn.v_proj.weight"] = linear(kv * k, d)
        sd[p + "self_attn.o_proj.weight"] = linear(d, h * k)
        sd[p + "mlp.gate_proj.weight"] = linear(f, d)
        sd[p + "mlp.up_proj.weight"] = linear(f, d)
        sd[p + "mlp.down_proj.weight"] = linear(d, f)
    return sd


def gguf_name(hf: str) -> str:
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    _, _, i, rest = hf.split(".", 3)
    return f"blk.{i}.{_BLOCK[rest.removesuffix('.weight')]}.weight"


def write_gguf(
    path, sd, cfg: Gemma3Config, *, quant=None, arch="gemma3", extra=None, drop=(), meta=None
):
    """Writes ``sd`` (HF names and layouts) the way llama.cpp's converter does: GGUF names,
    norms + 1, matrices quantized with ``quant`` (name -> GGMLQuantizationType) when given.

    Returns the HF state dict of the values the file holds (the dequantized matrices)."""
    w = gguf.GGUFWriter(str(path), arch)
    m = {
        "embedding_length": cfg.d_model,
        "block_count": cfg.num_layers,
        "feed_forward_length": cfg.hidden_dim,
        "attention.head_count": cfg.num_heads,
        "attention.head_count_kv": cfg.num_kv_heads,
        "attention.key_length": cfg.head_dim,
        "attention.value_length": cfg.head_dim,
        "attention.sliding_window": cfg.sliding_window,
        "context_length": 1024,
    }
    m.update(meta or {})
    for key, value in m.items():
        if value is None:
            continue
        w.add_uint32(f"{arch}.{key}", value)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", cfg.rms_norm_eps)
    w.add_float32(f"{arch}.rope.freq_base", cfg.rope_global_base)
    held = {}
    quant = quant or {}
    for hf, array in sd.items():
        name = gguf_name(hf)
        if name in drop:
            continue
        if name.endswith("norm.weight"):
            w.add_tensor(name, (array + np.float32(1.0)).astype(np.float32))
            held[hf] = array
            continue
        qtype = quant.get(name)
        if qtype is None:
            w.add_tensor(name, array)
            held[hf] = array
        else:
            q = gguf.quants.quantize(array, qtype)
            w.add_tensor(name, q, raw_dtype=qtype)
            held[hf] = gguf.quants.dequantize(q, qtype).reshape(array.shape)
    for name, array in (extra or {}).items():
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return held
