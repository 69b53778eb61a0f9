"""generate_sharded on 8 fake CPU devices equals the unsharded run (subprocess: XLA_FLAGS)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

import automata_jax as aj

HERE = Path(__file__).resolve().parent

SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    import jax, numpy as np
    assert jax.device_count() == 8, jax.devices()
    from jax.sharding import Mesh
    import automata_jax as aj
    from test_generate import AB_C, B_C, EOS, PAD, TRAP, V, FakeModel

    model = FakeModel(vocab_size=V)
    params = model.init_params(3)
    tables = aj.ConstraintTables.from_dfas([AB_C, B_C, TRAP], vocab_size=V)
    rng = np.random.default_rng(0)
    prompts = [list(rng.integers(0, V, rng.integers(1, 5))) for _ in range(16)]
    tokens, mask = aj.pad_prompts(prompts, pad_id=PAD)
    ids = np.array([(i % 4) - 1 for i in range(16)], np.int32)
    mesh = Mesh(np.array(jax.devices()).reshape(8), ("data",))
    for sampler in (aj.Greedy(), aj.Temperature(1.0)):
        kw = dict(sampler=sampler, max_new_tokens=10, rng=jax.random.key(7), prompt_mask=mask,
                  cache=model.init_cache, pad_id=PAD)
        ref = aj.generate(model.apply_step, params, tokens, tables, ids, **kw)
        out = aj.generate_sharded(mesh, model.apply_step, params, tokens, tables, ids, **kw)
        assert len(out.tokens.sharding.device_set) == 8, out.tokens.sharding
        assert out.tokens.sharding.spec[0] == "data", out.tokens.sharding
        for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(out)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(out.states.error)[ids == 2].all()  # the trap rows
        print(sampler, "ok", np.asarray(out.lengths).tolist())
    try:
        aj.generate_sharded(mesh, model.apply_step, params, tokens[:12], tables, ids[:12], **kw)
    except aj.RuntimeShapeError as e:
        assert "divisible by the 8 devices" in str(e), e
    else:
        raise AssertionError("expected RuntimeShapeError")
    print("SHARDING OK")
    """
)


def test_sharded_equals_unsharded_on_8_devices():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"
    ).strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(here=str(HERE))],
        env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0 and "SHARDING OK" in proc.stdout, proc.stdout + proc.stderr


def test_shard_batch_and_replicate_on_one_device():
    mesh = Mesh(np.array(jax.devices()[:1]), ("data",))
    tree = {"x": np.zeros((4, 3)), "s": np.float32(1.0)}
    sharded = aj.shard_batch(mesh, tree)
    assert sharded["x"].sharding == aj.batch_sharding(mesh)
    assert sharded["s"].sharding == aj.replicated(mesh)
    assert aj.replicate(mesh, tree)["x"].sharding == aj.replicated(mesh)
    with pytest.raises(
        aj.RuntimeShapeError, match=r"axis: expected one of the mesh axes \('data',\), got 'batch'"
    ):
        aj.shard_batch(mesh, tree, axis="batch")
