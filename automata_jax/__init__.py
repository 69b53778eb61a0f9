"""automata_jax: exact constrained decoding on the accelerator.

Token-level DFAs compiled offline by `automata_compile` become device tables
(`ConstraintTables`); pure kernels mask logits and advance each row's state; and
`generate` runs the whole prefill-and-decode loop in one jit, with no host round
trip per token. Flax models plug in through `nnx_step` (NNX) and `LinenStep` (linen).

Example:
  >>> import automata_jax as aj
  >>> tokens, mask = aj.pad_prompts([[1, 2], [3]])
  >>> tokens.tolist()
  [[1, 2], [0, 3]]
"""

from automata_jax._bitset import BitsetCapacity
from automata_jax._canonical import (
    CanonicalTables,
    canonical_mask,
    canonical_pair_ok,
    canonical_tables,
)
from automata_jax._constraint import (
    UNCONSTRAINED,
    ConstraintState,
    advance,
    allowed_mask,
    init_state,
    mask_logits,
)
from automata_jax._draft import bare_spellings, bare_twins, draft_keys
from automata_jax._errors import (
    RuntimeDtypeError,
    RuntimeShapeError,
    TableCapacityError,
    UnknownConstraintError,
)
from automata_jax._fast_forward import FastForward
from automata_jax._flax_adapters import LinenStep, NnxStep, nnx_step
from automata_jax._generate import GenerateOutput, cache_length, generate, pad_prompts
from automata_jax._healing import TokenHealing, heal_prompts, strip_healed
from automata_jax._sampling import Greedy, MinP, Sampler, Temperature, TopK, TopP
from automata_jax._sharding import (
    batch_sharding,
    generate_sharded,
    replicate,
    replicated,
    shard_batch,
)
from automata_jax._speculative import Speculate
from automata_jax._tables import ConstraintTables, TableCapacity

__all__ = [
    "UNCONSTRAINED",
    "BitsetCapacity",
    "CanonicalTables",
    "ConstraintState",
    "ConstraintTables",
    "FastForward",
    "GenerateOutput",
    "Greedy",
    "LinenStep",
    "MinP",
    "NnxStep",
    "RuntimeDtypeError",
    "RuntimeShapeError",
    "Sampler",
    "Speculate",
    "TableCapacity",
    "TableCapacityError",
    "Temperature",
    "TopK",
    "TokenHealing",
    "TopP",
    "UnknownConstraintError",
    "advance",
    "allowed_mask",
    "bare_spellings",
    "bare_twins",
    "batch_sharding",
    "cache_length",
    "canonical_mask",
    "canonical_pair_ok",
    "canonical_tables",
    "draft_keys",
    "generate",
    "generate_sharded",
    "heal_prompts",
    "init_state",
    "mask_logits",
    "nnx_step",
    "pad_prompts",
    "replicate",
    "replicated",
    "shard_batch",
    "strip_healed",
]

__version__ = "0.1.0"
