"""The runtime's errors, in one place; each is an `automata_compile.AutomataError`.

`RuntimeShapeError`, `RuntimeDtypeError`, `TableCapacityError` and `UnknownConstraintError`
are exported by `automata_jax`, `ModelError` and `CheckpointError` by `automata_jax.models`,
`ExtractError` by `automata_jax.extract`. Misuse raises one of these before tracing (nothing
raises inside jit).
"""

from __future__ import annotations

from automata_compile import AutomataError

__all__ = [
    "CheckpointError",
    "ExtractError",
    "ModelError",
    "RuntimeDtypeError",
    "RuntimeShapeError",
    "TableCapacityError",
    "UnknownConstraintError",
]


class RuntimeShapeError(AutomataError, ValueError):
    """An array passed to the runtime has the wrong shape or holds out-of-range values."""


class RuntimeDtypeError(AutomataError, TypeError):
    """An array passed to the runtime has the wrong dtype."""


class TableCapacityError(RuntimeShapeError):
    """A constraint does not fit the fixed `TableCapacity` of its tables; the message names
    the constraint, the dimension, what it needs and the capacity."""


class UnknownConstraintError(AutomataError, ValueError):
    """A constraint id is neither -1 (unconstrained) nor the index of a loaded constraint."""


class ModelError(AutomataError, ValueError):
    """A model config, its parameters and its inputs do not fit together."""


class CheckpointError(ModelError):
    """A checkpoint file is missing, unreadable, or does not match the model config."""


class ExtractError(AutomataError, ValueError):
    """The extraction job cannot start: a bad input file, schema, template or option."""
