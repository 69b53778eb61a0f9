"""Language models for the decoding loop: a compact Gemma-3 text decoder.

``Gemma3(config)`` offers ``init_params``, ``init_cache``, ``apply_step`` and
``num_params``; ``load_safetensors`` reads Hugging Face checkpoints, ``load_gguf`` GGUF files
(llama.cpp, Ollama), and ``default_gguf_path`` finds the Gemma-3 270M weights package.
"""

from automata_jax._errors import CheckpointError, ModelError
from automata_jax.models._gguf import config_from_gguf, default_gguf_path, load_gguf
from automata_jax.models._safetensors import convert_hf_state_dict, load_safetensors
from automata_jax.models._weights_cache import default_cache_dir
from automata_jax.models.gemma3 import Gemma3, Gemma3Config, KVCache

__all__ = [
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
