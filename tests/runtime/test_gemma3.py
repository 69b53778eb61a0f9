"""Gemma-3 decoder: NumPy reference from HF ``modeling_gemma3``, KV cache, sliding window, loader."""

from __future__ import annotations

import dataclasses
import doctest
import functools
import json

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from automata_jax import models
from automata_jax.models import (
    CheckpointError,
    Gemma3,
    Gemma3Config,
    ModelError,
    convert_hf_state_dict,
    load_safetensors,
)
from automata_jax.models import gemma3 as gemma3_module

VOCAB = 97
# 4 layers: local, local, global, local; window 4 so that it matters.
CFG = dataclasses.replace(
    Gemma3Config.tiny(vocab_size=VOCAB), num_layers=4, sliding_window=4, sliding_window_pattern=3
)


# ----------------------------------------------------------------------------- fixtures


def random_hf_state_dict(cfg: Gemma3Config, seed: int = 0, prefix: str = "model.") -> dict:
    """Random weights under HF ``Gemma3ForCausalLM`` names and layouts ([out, in])."""
    rng = np.random.default_rng(seed)
    d, h, kv, k, f = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.hidden_dim

    def linear(out_dim, in_dim):
        return rng.normal(0.0, in_dim**-0.5, (out_dim, in_dim)).astype(np.float32)

    def norm(n):  # non-zero so that the (1 + weight) scaling is exercised
        return rng.normal(0.0, 0.3, (n,)).astype(np.float32)

    sd = {
        f"{prefix}embed_tokens.weight": rng.normal(0.0, d**-0.5, (cfg.vocab_size, d)).astype(
            np.float32
        ),
        f"{prefix}norm.weight": norm(d),
    }
    for i in range(cfg.num_layers):
        p = f"{prefix}layers.{i}."
        sd[p + "input_layernorm.weight"] = norm(d)
        sd[p + "self_attn.q_proj.weight"] = linear(h * k, d)
        sd[p + "self_attn.k_proj.weight"] = linear(kv * k, d)
        sd[p + "self_attn.v_proj.weight"] = linear(kv * k, d)
        sd[p + "self_attn.o_proj.weight"] = linear(d, h * k)
        sd[p + "self_attn.q_norm.weight"] = norm(k)
        sd[p + "self_attn.k_norm.weight"] = norm(k)
        sd[p + "post_attention_layernorm.weight"] = norm(d)
        sd[p + "pre_feedforward_layernorm.weight"] = norm(d)
        sd[p + "mlp.gate_proj.weight"] = linear(f, d)
        sd[p + "mlp.up_proj.weight"] = linear(f, d)
        sd[p + "mlp.down_proj.weight"] = linear(d, f)
        sd[p + "post_feedforward_layernorm.weight"] = norm(d)
    return sd


def left_padded_batch(seed: int, batch: int, length: int, pads: list[int], vocab: int = VOCAB):
    """Tokens, HF-style attention mask and per-row positions (0 at the first real token)."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, (batch, length)).astype(np.int32)
    mask = np.ones((batch, length), bool)
    for row, pad in enumerate(pads):
        mask[row, :pad] = False
        tokens[row, :pad] = 0
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
    return tokens, mask, positions


# ------------------------------------------------------ NumPy reference (HF modeling_gemma3)


def _rms_norm(x, w, eps):  # Gemma3RMSNorm
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * (1.0 + w)


def _rotate_half(x):
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([-x2, x1], axis=-1)


def _cos_sin(position_ids, dim, base, factor):  # Gemma3RotaryEmbedding (default / linear)
    inv_freq = 1.0 / base ** (np.arange(0, dim, 2) / dim) / factor
    freqs = position_ids[..., None].astype(np.float64) * inv_freq  # [B, T, dim/2]
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb)[:, None], np.sin(emb)[:, None]  # [B, 1, T, dim]


def _gelu_tanh(x):  # gelu_pytorch_tanh
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def _softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def reference_logits(sd, cfg: Gemma3Config, input_ids, attention_mask, position_ids):
    """Gemma3ForCausalLM.forward in float64, eager attention, from the HF state dict."""

    def w(name):
        return sd["model." + name].astype(np.float64)

    b, t = input_ids.shape
    h, kvh, hd, eps = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.rms_norm_eps
    x = w("embed_tokens.weight")[input_ids] * np.sqrt(cfg.d_model)  # scaled embedding
    q_idx, k_idx = np.arange(t)[:, None], np.arange(t)[None, :]
    full = (k_idx <= q_idx)[None] & attention_mask[:, None, :]  # [B, T, T]
    sliding = full & (q_idx - k_idx < cfg.sliding_window)[None]
    for i in range(cfg.num_layers):
        if cfg.layer_types is not None:
            is_sliding = cfg.layer_types[i] == "local"
        else:
            is_sliding = bool((i + 1) % cfg.sliding_window_pattern)
        p = f"layers.{i}."
        residual = x
        hs = _rms_norm(x, w(p + "input_layernorm.weight"), eps)
        q = (hs @ w(p + "self_attn.q_proj.weight").T).reshape(b, t, h, hd).transpose(0, 2, 1, 3)
        k = (hs @ w(p + "self_attn.k_proj.weight").T).reshape(b, t, kvh, hd).transpose(0, 2, 1, 3)
        v = (hs @ w(p + "self_attn.v_proj.weight").T).reshape(b, t, kvh, hd).transpose(0, 2, 1, 3)
        q = _rms_norm(q, w(p + "self_attn.q_norm.weight"), eps)
        k = _rms_norm(k, w(p + "self_attn.k_norm.weight"), eps)
        if is_sliding:
            cos, sin = _cos_sin(position_ids, hd, cfg.rope_local_base, 1.0)
        else:
            cos, sin = _cos_sin(position_ids, hd, cfg.rope_global_base, cfg.rope_global_scale)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        k = np.repeat(k, h // kvh, axis=1)  # repeat_kv
        v = np.repeat(v, h // kvh, axis=1)
        scores = q @ k.transpose(0, 1, 3, 2) * cfg.query_pre_attn_scalar**-0.5
        if cfg.attn_logit_softcap is not None:
            scores = np.tanh(scores / cfg.attn_logit_softcap) * cfg.attn_logit_softcap
        mask = sliding if is_sliding else full
        scores = np.where(mask[:, None], scores, -1e30)
        attn = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, t, h * hd)
        hs = attn @ w(p + "self_attn.o_proj.weight").T
        x = residual + _rms_norm(hs, w(p + "post_attention_layernorm.weight"), eps)
        residual = x
        hs = _rms_norm(x, w(p + "pre_feedforward_layernorm.weight"), eps)
        gate = _gelu_tanh(hs @ w(p + "mlp.gate_proj.weight").T)
        hs = (gate * (hs @ w(p + "mlp.up_proj.weight").T)) @ w(p + "mlp.down_proj.weight").T
        x = residual + _rms_norm(hs, w(p + "post_feedforward_layernorm.weight"), eps)
    x = _rms_norm(x, w("norm.weight"), eps)
    logits = x @ w("embed_tokens.weight").T
    if cfg.final_logit_softcap is not None:
        logits = np.tanh(logits / cfg.final_logit_softcap) * cfg.final_logit_softcap
    return logits


@functools.cache
def jitted_step(model: Gemma3):
    """One jitted apply_step per model, so that tests share compilations."""
    return jax.jit(model.apply_step)


def prefill(model, params, tokens, mask, positions, max_length=None, cache_dtype=jnp.float32):
    cache = model.init_cache(tokens.shape[0], max_length or tokens.shape[1], cache_dtype)
    return jitted_step(model)(params, tokens, positions, mask, cache)


# ----------------------------------------------------------------------------- surface


def test_public_surface():
    assert models.__all__ == [
        "CheckpointError",
        "Gemma3",
        "Gemma3Config",
        "KVCache",
        "ModelError",
        "config_from_gguf",
        "convert_hf_state_dict",
        "default_cache_dir",
        "default_gguf_path",
        "load_gguf",
        "load_safetensors",
    ]


def test_module_docstring_example_runs():
    assert doctest.testmod(gemma3_module).failed == 0


def test_real_configs():
    for cfg, expected_params, n_global in [
        (Gemma3Config.gemma3_270m(), 268_098_176, 3),
        (Gemma3Config.gemma3_1b(), 999_885_952, 4),
    ]:
        model = Gemma3(cfg)
        shapes = jax.eval_shape(lambda m=model: m.init_params(0))
        assert model.num_params(shapes) == expected_params
        assert cfg.is_local.count(False) == n_global
        assert cfg.is_local[:6] == (True,) * 5 + (False,)
        assert hash(cfg) == hash(dataclasses.replace(cfg))


def test_from_hf_config():
    hf_270m = {
        "architectures": ["Gemma3ForCausalLM"],
        "vocab_size": 262144,
        "hidden_size": 640,
        "intermediate_size": 2048,
        "num_hidden_layers": 18,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 256,
        "sliding_window": 512,
        "query_pre_attn_scalar": 256,
        "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0,
        "rope_scaling": None,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 3,
    }
    cfg = Gemma3Config.from_hf_config(hf_270m)
    assert cfg.is_local == Gemma3Config.gemma3_270m().is_local
    assert dataclasses.replace(cfg, layer_types=None) == Gemma3Config.gemma3_270m()
    hf_4b = {"text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                             "num_hidden_layers": 34, "num_attention_heads": 8,
                             "num_key_value_heads": 4, "sliding_window": 1024,
                             "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}  # fmt: skip
    assert Gemma3Config.from_hf_config(hf_4b) == Gemma3Config.gemma3_4b()
    with pytest.raises(ModelError, match="yarn"):
        Gemma3Config.from_hf_config({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"num_kv_heads": 3}, "multiple of num_kv_heads"),
        ({"head_dim": 31}, "even"),
        ({"layer_types": ("local",) * 5}, "layer_types"),
        ({"sliding_window": 0}, "sliding_window"),
    ],
)
def test_bad_config(changes, match):
    with pytest.raises(ModelError, match=match):
        dataclasses.replace(CFG, **changes)


# ----------------------------------------------------------------- faithfulness (reference)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"attn_logit_softcap": 2.0, "final_logit_softcap": 3.0},
        {"num_heads": 4, "num_kv_heads": 2, "rope_global_scale": 8.0},
        {
            "num_kv_heads": 2,
            "layer_types": ("global", "local", "global", "local"),
        },
    ],
    ids=["default", "softcaps", "gqa2_rope_scale", "mha_layer_types"],
)
def test_matches_numpy_reference(changes):
    cfg = dataclasses.replace(CFG, **changes)
    sd = random_hf_state_dict(cfg, seed=1)
    model = Gemma3(cfg)
    params = convert_hf_state_dict(sd, cfg)
    tokens, mask, positions = left_padded_batch(seed=2, batch=3, length=11, pads=[0, 3, 6])
    logits, cache = prefill(model, params, tokens, mask, positions)
    expected = reference_logits(sd, cfg, tokens, mask, positions)
    assert logits.dtype == jnp.float32 and logits.shape == (3, 11, VOCAB)
    np.testing.assert_allclose(np.asarray(logits)[mask], expected[mask], rtol=2e-4, atol=2e-4)
    assert np.isfinite(np.asarray(logits)).all()  # padding rows too
    np.testing.assert_array_equal(np.asarray(cache.valid), mask)
    assert int(cache.end_index) == 11


def test_bf16_params_and_cache_track_float32():
    sd = random_hf_state_dict(CFG, seed=3)
    model = Gemma3(CFG)
    tokens, mask, positions = left_padded_batch(seed=4, batch=3, length=11, pads=[0, 3, 6])
    exact, _ = prefill(model, convert_hf_state_dict(sd, CFG), tokens, mask, positions)
    params = convert_hf_state_dict(sd, CFG, dtype=jnp.bfloat16)
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(params))
    approx, cache = prefill(model, params, tokens, mask, positions, cache_dtype=jnp.bfloat16)
    assert approx.dtype == jnp.float32 and cache.keys[0].dtype == jnp.bfloat16
    err = np.abs(np.asarray(approx) - np.asarray(exact))[mask]
    assert err.max() < 0.15 * np.abs(np.asarray(exact)[mask]).max()


# ------------------------------------------------------------------------------ KV cache


def test_decode_with_cache_matches_prefill_with_left_padding():
    sd = random_hf_state_dict(CFG, seed=5)
    model = Gemma3(CFG)
    params = convert_hf_state_dict(sd, CFG)
    tokens, mask, positions = left_padded_batch(seed=6, batch=3, length=12, pads=[0, 4, 7])
    full, _ = prefill(model, params, tokens, mask, positions, max_length=16)
    step = jitted_step(model)

    # One token at a time.
    cache = model.init_cache(3, 16)
    per_token = []
    for t in range(12):
        sl = slice(t, t + 1)
        logits, cache = step(params, tokens[:, sl], positions[:, sl], mask[:, sl], cache)
        per_token.append(logits)
    per_token = np.concatenate(per_token, axis=1)
    np.testing.assert_allclose(per_token[mask], np.asarray(full)[mask], rtol=1e-5, atol=1e-5)

    # Chunks of 5, 1, 1, 5 (shapes already compiled above: 1, and 5 once more).
    cache = model.init_cache(3, 16)
    chunks, start = [], 0
    for size in (5, 1, 1, 5):
        sl = slice(start, start + size)
        logits, cache = step(params, tokens[:, sl], positions[:, sl], mask[:, sl], cache)
        chunks.append(logits)
        start += size
    chunks = np.concatenate(chunks, axis=1)
    np.testing.assert_allclose(chunks[mask], np.asarray(full)[mask], rtol=1e-5, atol=1e-5)
    assert int(cache.end_index) == 12
    np.testing.assert_array_equal(np.asarray(cache.valid)[:, :12], mask)
    assert not np.asarray(cache.valid)[:, 12:].any()


def test_padding_slot_in_the_middle_is_never_attended():
    """A row that skips a step (input_mask False) continues as if that slot did not exist."""
    # Slot distances grow by one past the gap, so use a window that covers the whole row.
    cfg = dataclasses.replace(CFG, sliding_window=8)
    model = Gemma3(cfg)
    params = convert_hf_state_dict(random_hf_state_dict(cfg, seed=7), cfg)
    tokens, mask, positions = left_padded_batch(seed=8, batch=1, length=6, pads=[0])
    ref, _ = prefill(model, params, tokens, mask, positions)
    # The same tokens with a garbage padding slot inserted at slot 3.
    toks = np.insert(tokens, 3, 55, axis=1)
    msk = np.insert(mask, 3, False, axis=1)
    pos = np.insert(positions, 3, 0, axis=1)
    step = jitted_step(model)
    cache = model.init_cache(1, 7)
    out = []
    for t in range(7):
        sl = slice(t, t + 1)
        logits, cache = step(params, toks[:, sl], pos[:, sl], msk[:, sl], cache)
        out.append(logits)
    out = np.concatenate(out, axis=1)[msk]
    np.testing.assert_allclose(out, np.asarray(ref)[0], rtol=1e-5, atol=1e-5)


def test_apply_step_does_not_retrace_and_runs_in_while_loop():
    model = Gemma3(CFG)
    params = model.init_params(jax.random.key(0), std=0.3)
    traces = []

    def counted(params, tokens, positions, mask, cache):
        traces.append(1)
        return model.apply_step(params, tokens, positions, mask, cache)

    step = jax.jit(counted)
    cache = model.init_cache(2, 8)
    ones = jnp.ones((2, 1), bool)
    greedy = []
    tok = jnp.array([[1], [2]], jnp.int32)
    for t in range(5):
        logits, cache = step(params, tok, jnp.full((2, 1), t, jnp.int32), ones, cache)
        tok = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        greedy.append(tok)
    assert len(traces) == 1
    greedy = jnp.concatenate(greedy, axis=1)

    @jax.jit
    def generate(params, first):
        def body(carry):
            tok, cache, out = carry
            t = cache.end_index
            logits, cache = model.apply_step(params, tok, jnp.full((2, 1), t), ones, cache)
            tok = jnp.argmax(logits, axis=-1).astype(jnp.int32)
            return tok, cache, jax.lax.dynamic_update_slice(out, tok, (0, t))

        init = (first, model.init_cache(2, 8), jnp.zeros((2, 5), jnp.int32))
        return jax.lax.while_loop(lambda c: c[1].end_index < 5, body, init)[2]

    np.testing.assert_array_equal(generate(params, jnp.array([[1], [2]], jnp.int32)), greedy)


# -------------------------------------------------------------------------- sliding window


def test_sliding_window_restricts_local_layers():
    """With one local layer, token 0 influences slots < window only; a global layer sees all."""
    one_local = dataclasses.replace(CFG, num_layers=1, layer_types=("local",))
    one_global = dataclasses.replace(CFG, num_layers=1, layer_types=("global",))
    tokens, mask, positions = left_padded_batch(seed=9, batch=1, length=10, pads=[0])
    changed = tokens.copy()
    changed[0, 0] = (tokens[0, 0] + 1) % VOCAB
    for cfg in (one_local, one_global):
        model = Gemma3(cfg)
        params = model.init_params(jax.random.key(1), std=0.3)
        a, _ = prefill(model, params, tokens, mask, positions)
        b, _ = prefill(model, params, changed, mask, positions)
        moved = np.abs(np.asarray(a) - np.asarray(b)).max(axis=-1)[0]  # per slot
        if cfg is one_local:
            assert (moved[: cfg.sliding_window] > 1e-6).all()
            assert (moved[cfg.sliding_window :] == 0).all()
        else:
            assert (moved > 1e-6).all()


def test_sliding_window_in_decode_matches_reference_beyond_window():
    """Token-by-token decoding far past the window agrees with the reference."""
    cfg = dataclasses.replace(CFG, sliding_window=3)
    sd = random_hf_state_dict(cfg, seed=10)
    model = Gemma3(cfg)
    params = convert_hf_state_dict(sd, cfg)
    tokens, mask, positions = left_padded_batch(seed=11, batch=2, length=10, pads=[0, 2])
    step = jitted_step(model)
    cache = model.init_cache(2, 10)
    out = []
    for t in range(10):
        sl = slice(t, t + 1)
        logits, cache = step(params, tokens[:, sl], positions[:, sl], mask[:, sl], cache)
        out.append(logits)
    out = np.concatenate(out, axis=1)
    expected = reference_logits(sd, cfg, tokens, mask, positions)
    np.testing.assert_allclose(out[mask], expected[mask], rtol=2e-4, atol=2e-4)


# ------------------------------------------------------------------------ input checking


def test_bad_inputs_raise_before_compiling():
    model = Gemma3(CFG)
    params = model.init_params(0)
    cache = model.init_cache(2, 4)
    tokens = jnp.zeros((2, 3), jnp.int32)
    mask = jnp.ones((2, 3), bool)
    with pytest.raises(ModelError, match="input_mask"):
        model.apply_step(params, tokens, tokens, mask.astype(jnp.int32), cache)
    with pytest.raises(ModelError, match="positions"):
        model.apply_step(params, tokens, tokens[:, :2], mask, cache)
    with pytest.raises(ModelError, match="do not fit"):
        model.apply_step(params, jnp.zeros((2, 5), jnp.int32), jnp.zeros((2, 5), jnp.int32),
                         jnp.ones((2, 5), bool), cache)  # fmt: skip
    with pytest.raises(ModelError, match="batch"):
        model.apply_step(params, tokens[:1], tokens[:1], mask[:1], cache)
    with pytest.raises(ModelError, match="embed_tokens"):
        Gemma3(Gemma3Config.tiny(vocab_size=50)).apply_step(
            params, tokens, tokens, mask, Gemma3(Gemma3Config.tiny(50)).init_cache(2, 4)
        )


# ---------------------------------------------------------------------------------- loader


def _assert_same_params(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x, np.float32), np.asarray(y, np.float32))


def test_loader_round_trip_single_file(tmp_path):
    sd = random_hf_state_dict(CFG, seed=12)
    sd["lm_head.weight"] = sd["model.embed_tokens.weight"]  # tied; skipped
    save_file(sd, str(tmp_path / "model.safetensors"))
    params = load_safetensors(tmp_path, CFG)
    _assert_same_params(params, convert_hf_state_dict(sd, CFG))
    assert jax.tree.map(lambda x: x.shape, params) == Gemma3(CFG).param_shapes()
    # Layouts: q_proj [D, H, K] from HF [H*K, D]; o_proj [H, K, D] from HF [D, H*K].
    k = CFG.head_dim
    q_hf = sd["model.layers.2.self_attn.q_proj.weight"]
    np.testing.assert_array_equal(params["layer_2"]["q_proj"][:, 1, :], q_hf[k : 2 * k].T)
    o_hf = sd["model.layers.2.self_attn.o_proj.weight"]
    np.testing.assert_array_equal(params["layer_2"]["o_proj"][1], o_hf[:, k : 2 * k].T)
    # The loaded model is the reference model.
    tokens, mask, positions = left_padded_batch(seed=13, batch=1, length=6, pads=[0])
    logits, _ = prefill(Gemma3(CFG), params, tokens, mask, positions)
    expected = reference_logits(sd, CFG, tokens, mask, positions)
    np.testing.assert_allclose(np.asarray(logits)[0], expected[0], rtol=2e-4, atol=2e-4)


def test_loader_sharded_index(tmp_path):
    sd = random_hf_state_dict(CFG, seed=14)
    keys = sorted(sd)
    shards = {"model-00001-of-00002.safetensors": keys[::2], "model-00002-of-00002.safetensors": keys[1::2]}  # fmt: skip
    weight_map = {}
    for name, shard_keys in shards.items():
        save_file({k: sd[k] for k in shard_keys}, str(tmp_path / name))
        weight_map.update(dict.fromkeys(shard_keys, name))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    expected = convert_hf_state_dict(sd, CFG)
    _assert_same_params(load_safetensors(tmp_path, CFG), expected)
    _assert_same_params(load_safetensors(tmp_path / "model.safetensors.index.json", CFG), expected)


@pytest.mark.parametrize("prefix", ["language_model.model.", "model.language_model."])
def test_loader_multimodal_checkpoint_bf16(tmp_path, prefix):
    sd = random_hf_state_dict(CFG, seed=15, prefix=prefix)
    sd = {k: v.astype(ml_dtypes.bfloat16) for k, v in sd.items()}
    vision = "model.vision_tower." if prefix.startswith("model.") else "vision_tower."
    sd[vision + "vision_model.embeddings.patch_embedding.weight"] = np.zeros((2, 3), np.float32)
    sd["multi_modal_projector.mm_input_projection_weight"] = np.zeros((2, 2), np.float32)
    path = tmp_path / "weights.safetensors"
    save_file(sd, str(path))
    params = load_safetensors(path, CFG)
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(params))
    np.testing.assert_array_equal(
        np.asarray(params["final_norm"], np.float32), sd[prefix + "norm.weight"].astype(np.float32)
    )
    params32 = load_safetensors(path, CFG, dtype=jnp.float32)
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params32))


def test_loader_errors_name_key_and_file(tmp_path):
    sd = random_hf_state_dict(CFG, seed=16)
    path = tmp_path / "model.safetensors"

    missing = dict(sd)
    del missing["model.layers.3.mlp.up_proj.weight"]
    save_file(missing, str(path))
    with pytest.raises(CheckpointError, match=r"model\.layers\.3\.mlp\.up_proj\.weight") as e:
        load_safetensors(tmp_path, CFG)
    assert str(path) in str(e.value) and "missing" in str(e.value)

    # A 4-layer checkpoint read with a 3-layer config: the extra layer is unexpected.
    with pytest.raises(CheckpointError, match=r"unexpected key 'model\.layers\.3\.") as e:
        save_file(sd, str(path))
        load_safetensors(path, dataclasses.replace(CFG, num_layers=3))
    assert str(path) in str(e.value)

    with pytest.raises(CheckpointError, match=r"'model\.embed_tokens\.weight' has shape"):
        load_safetensors(path, dataclasses.replace(CFG, vocab_size=VOCAB + 1))

    save_file({"foo.weight": np.zeros(3, np.float32)}, str(path))
    with pytest.raises(CheckpointError, match="embed_tokens"):
        load_safetensors(path, CFG)

    path.write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_safetensors(path, CFG)

    with pytest.raises(CheckpointError, match="no such checkpoint file"):
        load_safetensors(tmp_path / "does_not_exist.safetensors", CFG)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        load_safetensors(tmp_path / "empty", CFG)


# ------------------------------------------------------------- optional: HF transformers


def test_matches_hf_transformers_if_installed():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = dataclasses.replace(CFG, rope_global_scale=8.0, attn_logit_softcap=2.0)
    hf_cfg = transformers.Gemma3TextConfig(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.hidden_dim,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        query_pre_attn_scalar=cfg.query_pre_attn_scalar,
        sliding_window=cfg.sliding_window,
        sliding_window_pattern=cfg.sliding_window_pattern,
        layer_types=["sliding_attention" if loc else "full_attention" for loc in cfg.is_local],
        rope_scaling={"rope_type": "linear", "factor": cfg.rope_global_scale},
        attn_logit_softcapping=cfg.attn_logit_softcap,
        final_logit_softcapping=None,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    hf_model = transformers.Gemma3ForCausalLM(hf_cfg).eval()
    sd = {k: v.detach().float().numpy() for k, v in hf_model.state_dict().items()}
    rng = np.random.default_rng(0)
    sd = {k: v + rng.normal(0, 0.3, v.shape).astype(np.float32) if "norm" in k else v
          for k, v in sd.items()}  # fmt: skip
    hf_model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()})
    tokens, mask, positions = left_padded_batch(seed=17, batch=1, length=10, pads=[0])
    with torch.no_grad():
        expected = hf_model(input_ids=torch.from_numpy(tokens.astype(np.int64))).logits.numpy()
    logits, _ = prefill(Gemma3(cfg), convert_hf_state_dict(sd, cfg), tokens, mask, positions)
    np.testing.assert_allclose(np.asarray(logits), expected, rtol=1e-3, atol=1e-3)


def test_the_sliding_window_counts_tokens_not_invalid_slots():
    """Invalid slots between tokens (fast-forward's padding, rejected drafts) do not shorten
    a local layer's window: the logits equal those of the same tokens without the gap."""
    from automata_jax import testing

    model, params = testing.tiny_model(vocab_size=64)  # window 16
    n, gap = 30, 5
    toks = jnp.asarray(np.random.default_rng(0).integers(0, 64, (1, n)), jnp.int32)
    pos = jnp.arange(n)[None]
    ref, _ = model.apply_step(params, toks, pos, jnp.ones((1, n), bool), model.init_cache(1, 64))
    pad = jnp.zeros((1, gap), jnp.int32)
    t2 = jnp.concatenate([toks[:, :10], pad, toks[:, 10:]], 1)
    p2 = jnp.concatenate([pos[:, :10], pad, pos[:, 10:]], 1)
    m2 = jnp.concatenate([jnp.ones((1, 10), bool), pad > 0, jnp.ones((1, n - 10), bool)], 1)
    got, _ = model.apply_step(params, t2, p2, m2, model.init_cache(1, 64))
    np.testing.assert_allclose(got[0, -1], ref[0, -1], atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------- logits at chosen slots


def _dot_outputs(jaxpr):
    """Output shapes of every ``dot_general`` in a (closed) jaxpr, sub-jaxprs included."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    shapes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            shapes.append(tuple(eqn.outvars[0].aval.shape))
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else (param,):
                if isinstance(sub, (jax.extend.core.ClosedJaxpr, jax.extend.core.Jaxpr)):
                    shapes += _dot_outputs(sub)
    return shapes


@pytest.mark.parametrize("mode", ["plain", "fast_forward", "speculate"])
def test_the_loops_compute_logits_only_where_they_read_them(mode):
    """`Gemma3.apply_step` spells out ``logits_at`` (a ``*args`` forwarder hid it from the
    loops' signature check, so every call computed the logits at every fed slot: a prefill
    of T slots paid T output layers). The prefill's output layer is [B, 1, V]; a chunked
    call's has at most the speculative logit slots."""
    import automata_compile as ac
    import automata_jax as aj
    from automata_jax._fast_forward import accepts_logits_at

    model = Gemma3(CFG)
    assert accepts_logits_at(model.apply_step)
    params = model.init_params(jax.random.key(0), std=0.3)
    pieces = [b"a", b"b", b"ab", b"c", b"ba"] + [None] * (VOCAB - 5)  # 5: EOS
    vocab = ac.Vocabulary.from_bytes(pieces, eos_ids=[5], special_ids=[5])
    tables = aj.ConstraintTables.from_dfas(
        [ac.compile_regex(r"(ab|ba)c(ab|ba)", vocab)], vocab_size=VOCAB
    )
    prompt = [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]]
    tokens, mask = aj.pad_prompts(prompt * 2)
    kw = dict(fast_forward=mode != "plain", speculate=mode == "speculate")
    closed = jax.make_jaxpr(
        lambda p: aj.generate(
            model.apply_step,
            p,
            tokens,
            tables,
            jnp.zeros((2,), jnp.int32),
            sampler=aj.Greedy(),
            max_new_tokens=6,
            rng=jax.random.key(0),
            prompt_mask=mask,
            cache=model.init_cache,
            **kw,
        )  # fmt: skip
    )(params)
    out_layers = [s for s in _dot_outputs(closed) if s[-1] == VOCAB]
    assert out_layers
    most = 1 + aj.Speculate().draft_len if mode == "speculate" else 1
    assert all(s[0] == 2 and s[1] <= most for s in out_layers), out_layers
    assert any(s == (2, 1, VOCAB) for s in out_layers)


# ------------------------------------------------------- the cache written after the switch


def test_an_update_written_later_equals_the_cache_written_in_the_step():
    """``write_cache=False`` reads the cache only and returns the new slots; written with
    `automata_jax._loop.write_cache` they give the cache the writing step gives, and the
    logits are the same, also over stale slots past ``end_index`` (rejected drafts, a
    chunk's padding) and rows with invalid slots, on local and global layers. Jitted, over
    three call sizes (1 token, 3 and 6: one compile each, not one per eager op)."""
    from automata_jax._loop import write_cache

    model = Gemma3(CFG)
    step = jax.jit(model.apply_step, static_argnames="write_cache")
    write = jax.jit(write_cache)
    params = convert_hf_state_dict(random_hf_state_dict(CFG, seed=8), CFG)
    rng = np.random.default_rng(9)
    b, length = 3, 40
    ours = theirs = model.init_cache(b, length)
    position = 0
    for size in (6, 1, 3, 6, 1, 3, 6, 3):
        tokens = jnp.asarray(rng.integers(0, VOCAB, (b, size)), jnp.int32)
        mask = jnp.asarray(rng.random((b, size)) < 0.8)
        pos = jnp.broadcast_to(jnp.arange(position, position + size)[None], (b, size))
        at = jnp.asarray(rng.integers(0, size, (b,)), jnp.int32)
        ref, theirs = step(params, tokens, pos, mask, theirs, logits_at=at)
        start = ours.end_index
        got, update = step(params, tokens, pos, mask, ours, logits_at=at, write_cache=False)
        assert update.keys[0].shape == (b, size, CFG.num_kv_heads, CFG.head_dim)
        ours = write(ours, update, start, jnp.int32(size))
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        for a, c in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs), strict=True):
            np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-5)
        # Rewind by up to 2 slots, keeping their stale keys/values (as the loops do).
        back = int(rng.integers(0, min(size, 3)))
        keep = ours.end_index - back
        drop = jnp.arange(length)[None, :] >= keep
        ours = ours.replace(valid=ours.valid & ~drop, end_index=keep)
        theirs = theirs.replace(valid=theirs.valid & ~drop, end_index=keep)
        position += size - back


def _cache_copy_loop(step, speculate):
    """The jitted greedy `generate` under a small regex with ``step`` (of params)."""
    import automata_compile as ac
    import automata_jax as aj

    model = Gemma3(CFG)
    pieces = [b"a", b"b", b"ab", b"c", b"ba"] + [None] * (VOCAB - 5)  # 5: EOS
    vocab = ac.Vocabulary.from_bytes(pieces, eos_ids=[5], special_ids=[5])
    tables = aj.ConstraintTables.from_dfas(
        [ac.compile_regex(r"(ab|ba)c(ab|ba)(a|b|c)*", vocab)], vocab_size=VOCAB
    )
    tokens, mask = aj.pad_prompts([[1, 2, 3, 4, 1, 2, 3, 4, 2], [3, 4, 1, 2]])
    return jax.jit(
        lambda p: aj.generate(
            step,
            p,
            tokens,
            tables,
            jnp.zeros((2,), jnp.int32),
            sampler=aj.Greedy(),
            max_new_tokens=16,
            rng=jax.random.key(0),
            prompt_mask=mask,
            cache=model.init_cache,
            fast_forward=True,
            speculate=speculate,
        )  # fmt: skip
    )


def _cache_copy_run(fn, params):
    """``fn``'s outputs (tokens, lengths), and its compiled loop's copies of a whole layer
    cache (their slot counts, past 16)."""
    import re

    text = fn.lower(params).compile().as_text()
    layer = rf"f32\[2,(\d+),{CFG.num_kv_heads},{CFG.head_dim}\]\{{[^}}]*\}} copy\("
    copies = [int(n) for n in re.findall(layer, text) if int(n) > 16]
    out = fn(params)
    return (np.asarray(out.tokens), np.asarray(out.lengths)), copies


@pytest.mark.parametrize("speculate", [False, True])
def test_the_loops_write_the_cache_after_their_switch_on_the_cpu(speculate, monkeypatch):
    """On the CPU the compiled loop has no copy of a whole layer cache (XLA copied every
    layer's keys and values per call when the step wrote them inside the ``lax.switch`` over
    call widths), and its outputs equal a loop whose step writes inside the branches. On an
    accelerator the loops write inside the branches (`automata_jax._loop.branch_free`:
    measured cheaper on an H200), chosen statically at trace time; outputs are identical.

    One test for both (they compiled the same loops twice): without speculation the loop
    traced for "gpu" is the very program of the step that writes in its branches (their
    lowerings are equal), so it is not compiled again; with speculation "gpu" also changes
    the verification (branch-free), so it is compiled and run."""
    from automata_jax._loop import branch_free, defers_cache_write

    model = Gemma3(CFG)
    cache = model.init_cache(2, 8)
    assert not branch_free("cpu") and branch_free("gpu") and branch_free("tpu")
    assert defers_cache_write(model.apply_step, cache)
    assert defers_cache_write(model.apply_step, cache, "cpu")
    assert not defers_cache_write(model.apply_step, cache, "gpu")
    assert not defers_cache_write(model.apply_step, cache, "tpu")
    assert not defers_cache_write(model.apply_step, None)
    assert defers_cache_write(functools.partial(gemma3_module.apply_step, CFG), cache)

    @dataclasses.dataclass(frozen=True)
    class WritesInBranch:
        takes_logits_at = True
        defers_cache_write = False

        def __call__(self, *args, **kwargs):
            return model.apply_step(*args, **kwargs)

    params = model.init_params(jax.random.key(0), std=0.3)
    in_branch = _cache_copy_loop(WritesInBranch(), speculate)
    outs, copies = [], []
    for fn in (_cache_copy_loop(model.apply_step, speculate), in_branch):
        out, copied = _cache_copy_run(fn, params)
        outs.append(out)
        copies.append(copied)
    assert copies[0] == [] and copies[1], copies  # whole-cache copies: none now, some before
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    in_branch_program = in_branch.lower(params).as_text()  # traced for the CPU
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    on_gpu = _cache_copy_loop(model.apply_step, speculate)
    if not speculate:
        assert on_gpu.lower(params).as_text() == in_branch_program
        return
    out, copied = _cache_copy_run(on_gpu, params)
    assert copied, copied  # in-branch writes copy the cache on the CPU
    np.testing.assert_array_equal(out[0], outs[0][0])
    np.testing.assert_array_equal(out[1], outs[0][1])
