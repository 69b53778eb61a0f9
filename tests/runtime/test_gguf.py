"""`load_gguf`: GGUF files written with ``gguf.GGUFWriter`` load to the params of the safetensors
path; llama.cpp's conventions (names, ggml shapes, norms stored as 1 + w); errors name the file
and the key or tensor; the real Gemma-3 270M file, where its package is installed."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

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
    default_cache_dir,
    load_gguf,
)

gguf = pytest.importorskip("gguf")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gguf_fixtures import CFG, VOCAB, random_hf_state_dict, write_gguf  # noqa: E402


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


def test_real_gemma3_270m_loads_and_continues_a_sentence(gemma3_gguf_path):
    from automata_compile import Vocabulary

    config, params = load_gguf(gemma3_gguf_path, cache_dir=default_cache_dir())  # CI: once
    assert config == dataclasses.replace(
        Gemma3Config.gemma3_270m(), rms_norm_eps=float(np.float32(1e-6))
    )
    model = Gemma3(config)
    assert jax.tree.map(lambda x: x.shape, params) == model.param_shapes()
    vocab = Vocabulary.from_gguf(gemma3_gguf_path)
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


def test_tables_from_either_gemma3_vocabulary_fit_the_model(gemma3_gguf_path):
    """tokenizer.json (262,145 ids) and the GGUF (262,144): both compile to tables for the
    model's 262,144 logits; they differ only on the ids the two files classify differently."""
    from automata_compile import Vocabulary, compile_regex
    from automata_jax import ConstraintTables

    json_path = Path(__file__).resolve().parents[2] / ".." / "shared" / "tokenizers" / "gemma3"
    if not (json_path / "tokenizer.json").is_file():
        pytest.skip(f"{json_path} is not here")
    g = Vocabulary.from_gguf(gemma3_gguf_path)
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
