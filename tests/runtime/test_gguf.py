"""`load_gguf`: GGUF files written with ``gguf.GGUFWriter`` load to the params of the safetensors
path; llama.cpp's conventions (names, ggml shapes, norms stored as 1 + w); errors name the file
and the key or tensor; the real Gemma-3 270M file, where its package is installed."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from automata_compile import read_gguf_header
from automata_jax.models import (
    CheckpointError,
    Gemma3,
    Gemma3Config,
    convert_hf_state_dict,
    default_gguf_path,
    load_gguf,
)

gguf = pytest.importorskip("gguf")

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


def assert_params_close(a, b, atol=0.0):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=atol)


def test_f32_file_loads_to_the_safetensors_params(tmp_path):
    sd = random_hf_state_dict(CFG, seed=1)
    path = tmp_path / "tiny.gguf"
    held = write_gguf(path, sd, CFG)
    config, params = load_gguf(path)
    assert config == dataclasses.replace(CFG, rms_norm_eps=float(np.float32(CFG.rms_norm_eps)))
    expected = convert_hf_state_dict(held, CFG)
    # Matrices are exact; a norm weight w comes back as (w + 1) - 1 in float32 (one rounding).
    assert_params_close(params, expected, atol=1e-7)
    for i in range(CFG.num_layers):
        for name in ("q_proj", "o_proj", "down_proj"):
            np.testing.assert_array_equal(params[f"layer_{i}"][name], expected[f"layer_{i}"][name])


def test_quantized_file_loads_to_its_dequantized_values(tmp_path):
    sd = random_hf_state_dict(CFG, seed=2)
    Q = gguf.GGMLQuantizationType
    quant = {
        "token_embd.weight": Q.Q8_0,
        "blk.0.attn_q.weight": Q.Q4_0,
        "blk.1.ffn_up.weight": Q.Q5_0,
    }
    quant.update({f"blk.{i}.ffn_down.weight": Q.BF16 for i in range(CFG.num_layers)})
    path = tmp_path / "q.gguf"
    held = write_gguf(path, sd, CFG, quant=quant)
    assert not np.array_equal(held["model.embed_tokens.weight"], sd["model.embed_tokens.weight"])
    _, params = load_gguf(path)
    assert_params_close(params, convert_hf_state_dict(held, CFG), atol=1e-7)
    _, bf16 = load_gguf(path, dtype=jnp.bfloat16)
    assert all(x.dtype == jnp.bfloat16 for x in jax.tree.leaves(bf16))
    # The model runs on them.
    model = Gemma3(CFG)
    tokens = jnp.array([[2, 5, 7]], jnp.int32)
    logits, _ = model.apply_step(
        params, tokens, jnp.arange(3)[None], jnp.ones((1, 3), bool), model.init_cache(1, 4)
    )
    assert np.isfinite(np.asarray(logits)).all()


def test_config_from_metadata(tmp_path):
    sd = random_hf_state_dict(CFG, seed=3)
    path = tmp_path / "c.gguf"
    write_gguf(path, sd, CFG, meta={"rope.freq_base_swa": None})
    config, _ = load_gguf(path)
    assert config.rope_local_base == 10_000.0 and config.query_pre_attn_scalar == CFG.head_dim
    assert config.vocab_size == VOCAB and config.is_local == CFG.is_local


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(arch="llama"), r"'general\.architecture' is 'llama'"),
        (dict(drop={"blk.2.ffn_gate.weight"}), r"missing tensor 'blk\.2\.ffn_gate\.weight'"),
        (
            dict(extra={"output.weight": np.zeros((VOCAB, 64), np.float32)}),
            r"unexpected tensor 'output\.weight'",
        ),
        (
            dict(extra={"blk.4.attn_q.weight": np.zeros((64, 64), np.float32)}),
            r"unexpected tensor 'blk\.4\.attn_q\.weight'",
        ),
        (dict(meta={"feed_forward_length": 64}), r"'blk\.0\.ffn_gate\.weight' \(HF"),
        (
            dict(meta={"attention.key_length": None}),
            r"missing metadata key 'gemma3\.attention\.key",
        ),
        (dict(meta={"attention.value_length": 16}), r"value_length"),
    ],
)
def test_errors_name_file_and_key(tmp_path, kwargs, match):
    path = tmp_path / "bad.gguf"
    write_gguf(path, random_hf_state_dict(CFG, seed=4), CFG, **kwargs)
    with pytest.raises(CheckpointError, match=match) as e:
        load_gguf(path)
    assert str(path) in str(e.value)


def test_unreadable_files(tmp_path):
    path = tmp_path / "x.gguf"
    with pytest.raises(CheckpointError, match="no such GGUF file"):
        load_gguf(path)
    path.write_bytes(b"PK\x03\x04 not gguf")
    with pytest.raises(CheckpointError, match="not a GGUF file"):
        load_gguf(path)
    write_gguf(path, random_hf_state_dict(CFG, seed=5), CFG)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 1000])
    with pytest.raises(CheckpointError, match=r"runs past the end of the file"):
        load_gguf(path)
    path.write_bytes(data[:200])
    with pytest.raises(CheckpointError, match="truncated header"):
        load_gguf(path)


def test_quant_type_the_gguf_package_cannot_dequantize(tmp_path):
    sd = random_hf_state_dict(CFG, seed=6)
    path = tmp_path / "q.gguf"
    write_gguf(path, sd, CFG)  # a valid file, then patch one tensor's type to Q8_1
    header = read_gguf_header(path)
    info = next(t for t in header.tensors if t.name == "blk.0.attn_k.weight")
    data = bytearray(path.read_bytes())
    name = info.name.encode()
    at = data.index(len(name).to_bytes(8, "little") + name) + 8 + len(name)
    at += 4 + 8 * len(info.shape)  # rank, dims; then the type
    assert int.from_bytes(data[at : at + 4], "little") == 0
    data[at : at + 4] = int(gguf.GGMLQuantizationType.Q8_1).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"'blk\.0\.attn_k\.weight' is Q8_1"):
        load_gguf(path)


# ------------------------------------------------------------- the real Gemma-3 270M file


@pytest.fixture(scope="module")
def real_gguf():
    try:
        return default_gguf_path()
    except ImportError as e:
        pytest.skip(f"the Gemma-3 270M weights package is not installed ({e})")


def test_real_gemma3_270m_loads_and_continues_a_sentence(real_gguf):
    from automata_compile import Vocabulary

    config, params = load_gguf(real_gguf)
    assert config == dataclasses.replace(
        Gemma3Config.gemma3_270m(), rms_norm_eps=float(np.float32(1e-6))
    )
    model = Gemma3(config)
    assert jax.tree.map(lambda x: x.shape, params) == model.param_shapes()
    vocab = Vocabulary.from_gguf(real_gguf)
    prompt = [vocab.bos_id, *vocab.encode("The capital of France is")]
    cache = model.init_cache(1, len(prompt) + 4)
    step = jax.jit(model.apply_step)
    logits, cache = step(
        params, jnp.array([prompt]), jnp.arange(len(prompt))[None], jnp.ones((1, len(prompt)), bool),
        cache,
    )  # fmt: skip
    out = []
    for k in range(4):
        out.append(int(jnp.argmax(logits[0, -1])))
        pos = jnp.array([[len(prompt) + k]])
        logits, cache = step(params, jnp.array([out[-1:]]), pos, jnp.ones((1, 1), bool), cache)
    # Greedy continuation of the base model (a wrong norm or layout gives gibberish).
    assert vocab.decode(out) == b" the capital of the"


def test_tables_from_either_gemma3_vocabulary_fit_the_model(real_gguf):
    """tokenizer.json (262,145 ids) and the GGUF (262,144): both compile to tables for the
    model's 262,144 logits; they differ only on the ids the two files classify differently."""
    from pathlib import Path

    from automata_compile import Vocabulary, compile_regex
    from automata_jax import ConstraintTables

    json_path = Path(__file__).resolve().parents[2] / ".." / "shared" / "tokenizers" / "gemma3"
    if not (json_path / "tokenizer.json").is_file():
        pytest.skip(f"{json_path} is not here")
    g = Vocabulary.from_gguf(real_gguf)
    j = Vocabulary.from_file(json_path / "tokenizer.json")
    pattern = r"<[a-z_0-9]{1,12}>"
    masks = []
    for vocab in (g, j):
        dfa = compile_regex(pattern, vocab)
        tables = ConstraintTables.from_dfas(dfa, vocab_size=262_144)
        assert tables.vocab_size == 262_144
        tc = np.asarray(tables.token_class)[0]
        masks.append(np.asarray(tables.next_state)[0, dfa.start][tc] >= 0)
    differ = set(np.flatnonzero(masks[0] != masks[1]).tolist())
    expected = {
        i
        for i in range(262_144)
        if g.tokens[i] != j.tokens[i] and re.fullmatch(pattern.encode(), g.tokens[i] or j.tokens[i])
    }
    assert differ == expected and len(expected) > 6000  # <mask> and the <unusedN> ids
