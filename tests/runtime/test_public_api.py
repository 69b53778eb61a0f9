"""The public surface of automata_jax, its import hygiene, and its runnable examples."""

from __future__ import annotations

import doctest
import subprocess
import sys

import pytest

import automata_jax
from automata_jax import (
    _constraint,
    _draft,
    _fast_forward,
    _flax_adapters,
    _generate,
    _sampling,
    _sharding,
    _speculative,
    _tables,
)

PUBLIC = [
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
    "TokenHealing",
    "TopK",
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


def test_all_is_pinned():
    assert sorted(automata_jax.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(automata_jax, name) is not None, name


def test_errors_are_automata_errors():
    from automata_compile import AutomataError

    assert issubclass(automata_jax.RuntimeShapeError, AutomataError)
    assert issubclass(automata_jax.RuntimeShapeError, ValueError)
    assert issubclass(automata_jax.RuntimeDtypeError, TypeError)
    assert issubclass(automata_jax.UnknownConstraintError, ValueError)


def test_importing_the_runtime_pulls_in_no_compiler():
    # Allowed: the error classes, the artifact format, the package `automata_compile.tokens`
    # that holds it (lazy names only) and the lazy-name helper.
    code = (
        "import sys, automata_jax\n"
        "bad = sorted(m for m in sys.modules if m.startswith('interegular') or "
        "(m.startswith('automata_compile.') and m not in "
        "('automata_compile._errors', 'automata_compile._lazy', 'automata_compile.tokens', "
        "'automata_compile.tokens._token_dfa')))\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "module",
    [
        automata_jax,
        _tables,
        _constraint,
        _sampling,
        _generate,
        _sharding,
        _flax_adapters,
        _fast_forward,
        _speculative,
        _draft,
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
