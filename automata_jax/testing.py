"""Tiny fixtures shared by the tests, the Colab notebooks and the README.

The bundled data, tokenizer and random model come from `automata_jax._assets` (re-exported
here; the extraction job uses that module, never this one); the rest are test helpers.

Everything here works offline on any machine: the default model is a tiny
Gemma-3-architecture decoder with **random weights** built from a fixed seed (no
weights file), and the default tokenizer is the real 32k SentencePiece model of
Mistral 7B v1, bundled as ``automata_jax/data/tokenizer.model.v1`` (Apache-2.0, copied
from the ``mistral-common`` package; licence and provenance in
``tokenizer.model.v1.LICENSE`` next to it). The model's ``vocab_size`` is that
tokenizer's size. Output of
the random model is random text -- but under a constraint it is always in the
constraint's language, which is what the demo shows.

Example:
  >>> from automata_jax import testing
  >>> vocab = testing.default_vocabulary()
  >>> model, params = testing.tiny_model(vocab.size)
  >>> model.config.vocab_size == vocab.size == 32000
  True
"""

from __future__ import annotations

import json
from pathlib import Path

from automata_jax._assets import (
    DEFAULT_SEED,
    data_path,
    default_tokenizer_path,
    default_vocabulary,
    example_docs_path,
    example_schema,
    tiny_model,
)

__all__ = [
    "DEFAULT_SEED",
    "FakeModel",  # noqa: F822 (loaded lazily by the module __getattr__)
    "data_path",
    "default_tokenizer_path",
    "default_vocabulary",
    "example_docs_path",
    "example_schema",
    "host_callbacks",
    "jaxpr_primitive_names",
    "tiny_model",
    "toy_dfa",
    "write_random_checkpoint",
]


def write_random_checkpoint(
    path: str | Path, config, *, seed: int = DEFAULT_SEED, tokenizer: str | Path | None = None
) -> Path:
    """Writes a random-weight checkpoint in Hugging Face's Gemma-3 layout, for tests of the
    real-weights code paths (`load_safetensors`, ``extract --checkpoint``) without a download.

    Args:
      path: the directory to create (``config.json``, ``model.safetensors``).
      config: a `Gemma3Config` (keep it small: the embedding is ``vocab_size x d_model``).
      seed: NumPy seed of the weights (N(0, 0.02^2); norm weights 0).
      tokenizer: a tokenizer file to copy in as ``tokenizer.json`` / ``tokenizer.model``.

    Returns:
      ``path``.

    Raises:
      ImportError: the ``safetensors`` package is not installed.
    """
    import numpy as np

    from automata_jax.models._safetensors import _LAYER_KEYS  # our name -> HF module name

    try:
        from safetensors.numpy import save_file
    except ImportError as e:
        raise ImportError(
            "write_random_checkpoint needs 'safetensors': pip install safetensors"
        ) from e

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    c = config
    hf_config = {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "num_hidden_layers": c.num_layers,
        "num_attention_heads": c.num_heads,
        "num_key_value_heads": c.num_kv_heads,
        "head_dim": c.head_dim,
        "intermediate_size": c.hidden_dim,
        "sliding_window": c.sliding_window,
        "sliding_window_pattern": c.sliding_window_pattern,
        "query_pre_attn_scalar": c.query_pre_attn_scalar,
        "rope_local_base_freq": c.rope_local_base,
        "rope_theta": c.rope_global_base,
        "rms_norm_eps": c.rms_norm_eps,
        "torch_dtype": "float32",
    }
    (path / "config.json").write_text(json.dumps(hf_config, indent=2), encoding="utf-8")
    d, h, kv, k, f = c.d_model, c.num_heads, c.num_kv_heads, c.head_dim, c.hidden_dim
    hf_shapes = {  # HF linear weights are [out, in]
        "q_proj": (h * k, d), "k_proj": (kv * k, d), "v_proj": (kv * k, d), "o_proj": (d, h * k),
        "gate_proj": (f, d), "up_proj": (f, d), "down_proj": (d, f),
        "q_norm": (k,), "k_norm": (k,),
    }  # fmt: skip
    rng = np.random.default_rng(seed)

    def normal(shape):
        return (0.02 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)

    tensors = {
        "model.embed_tokens.weight": normal((c.vocab_size, d)),
        "model.norm.weight": np.zeros((d,), np.float32),
    }
    for i in range(c.num_layers):
        for ours, theirs in _LAYER_KEYS.items():
            shape = hf_shapes.get(ours, (d,))
            value = np.zeros(shape, np.float32) if len(shape) == 1 else normal(shape)
            tensors[f"model.layers.{i}.{theirs}.weight"] = value
    save_file(tensors, str(path / "model.safetensors"))
    if tokenizer is not None:
        tokenizer = Path(tokenizer)
        name = "tokenizer.model" if ".model" in tokenizer.suffixes else "tokenizer.json"
        (path / name).write_bytes(tokenizer.read_bytes())
        config_file = tokenizer.with_name("tokenizer_config.json")
        if config_file.is_file():
            (path / "tokenizer_config.json").write_bytes(config_file.read_bytes())
    return path


def toy_dfa(token_class, next_state, accepting, spec: str, *, eos_id: int = 3):
    """A hand-made `TokenDFA` over a toy vocabulary (start state 0, fingerprint "toy-vocab").

    Args:
      token_class: the class of each token id (class 0 = never allowed).
      next_state: ``[Q][C]`` next states, -1 = not allowed.
      accepting: ``[Q]`` accepting flags.
      spec: the language, for messages.
      eos_id: the toy vocabulary's EOS id.
    """
    import numpy as np

    from automata_compile import TokenDFA

    return TokenDFA(
        token_class=np.array(token_class, np.int32),
        next_state=np.array(next_state, np.int32),
        accepting=np.array(accepting),
        start=0,
        eos_ids=(eos_id,),
        vocab_fingerprint="toy-vocab",
        spec=spec,
    )


def jaxpr_primitive_names(jaxpr) -> set[str]:
    """Names of every primitive in a (closed) jaxpr, sub-jaxprs included (``while`` bodies,
    ``pjit`` calls, ``cond`` branches): the tests check that no host callback is among them."""
    import jax

    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    names: set[str] = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else (param,):
                if isinstance(sub, (jax.extend.core.ClosedJaxpr, jax.extend.core.Jaxpr)):
                    names |= jaxpr_primitive_names(sub)
    return names


def host_callbacks(names: set[str]) -> set[str]:
    """The primitive ``names`` (from `jaxpr_primitive_names`) that leave the device: host
    callbacks, ``jax.debug`` calls and prints. Runtime code must have none."""
    return {n for n in names if "callback" in n or "debug" in n or n == "print"}


def __getattr__(name: str):
    # The fake model needs jax and flax at class-definition time: loaded on first use only.
    if name == "FakeModel":
        from automata_jax._fake_model import FakeModel

        return FakeModel
    raise AttributeError(f"module 'automata_jax.testing' has no attribute {name!r}")
