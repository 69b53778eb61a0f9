"""Language models for the decoding loop: a compact Gemma-3 text decoder.

``Gemma3(config)`` offers ``init_params``, ``init_cache``, ``apply_step`` and
``num_params``; ``load_safetensors`` reads Hugging Face checkpoints.
"""

from automata_jax.models._safetensors import (
    CheckpointError,
    convert_hf_state_dict,
    load_safetensors,
)
from automata_jax.models.gemma3 import Gemma3, Gemma3Config, KVCache, ModelError

__all__ = [
    "CheckpointError",
    "Gemma3",
    "Gemma3Config",
    "KVCache",
    "ModelError",
    "convert_hf_state_dict",
    "load_safetensors",
]
