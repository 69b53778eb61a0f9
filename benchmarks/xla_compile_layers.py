"""How the decode loop's XLA compile time grows with the model's layers (Gemma-3 270M shapes).

The extraction job's summary on this CPU says most of its time is XLA compilation (36.8 s of
a 45.7 s job in session 20). `models.gemma3.apply_step` unrolls its layers in Python, so every
model call site of a compiled loop holds one copy of each layer, and the fast-forward loop
calls the model at several widths (a `lax.switch`). This measures the cost per layer: the
270M config (d_model 640, 262,144 ids) with ``num_layers`` set to each of ``--layers``,
random weights, batch 8, a 48-token prompt, 24 new tokens under a regex's tables, with and
without fast-forward, **one fresh process per configuration** (no compile cache). Compile ≈
the first `generate` call minus the second (same shapes: the second reuses the executable).

Run: ``python benchmarks/xla_compile_layers.py [--layers 3,6,18] [--out F]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import ROOT, git_commit, machine  # noqa: E402

TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "gemma3" / "tokenizer.json"
RESULTS = ROOT / "benchmarks" / "results" / "xla_compile_layers.json"


def _child(layers: int, fast_forward: bool) -> None:
    """One configuration (this process); prints one JSON line."""
    import dataclasses

    import jax
    import numpy as np

    import automata_compile as ac
    import automata_jax as aj
    from automata_jax.models.gemma3 import Gemma3, Gemma3Config

    cfg = dataclasses.replace(Gemma3Config.gemma3_270m(), num_layers=layers)
    vocab = ac.Vocabulary.from_file(TOKENIZER)
    dfa = ac.compile_regex(r'\{"name": "[a-z]{1,12}", "age": [0-9]{1,2}\}', vocab)
    tables = aj.ConstraintTables.from_dfas([dfa], vocab_size=cfg.vocab_size)
    model = Gemma3(cfg)
    params = model.init_params(jax.random.key(0), std=0.02)
    batch, width = 8, 48
    tokens = np.full((batch, width), 2, np.int32)
    mask = np.ones((batch, width), bool)

    def run() -> float:
        t0 = time.perf_counter()
        out = aj.generate(
            model.apply_step, params, tokens, tables, np.zeros(batch, np.int32),
            prompt_mask=mask, pad_id=0, max_new_tokens=24, cache=model.init_cache,
            fast_forward=fast_forward, sampler=aj.Greedy(), rng=jax.random.key(0),
        )  # fmt: skip
        jax.block_until_ready(out.tokens)
        return time.perf_counter() - t0

    first, second = run(), run()
    print(json.dumps({"first_s": first, "second_s": second, "compile_s": first - second}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default="3,6,18")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(int(args.child[0]), args.child[1] == "1")
        return
    rows = []
    for ff in (False, True):
        for layers in (int(x) for x in args.layers.split(",")):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(layers), str(int(ff))],
                capture_output=True, text=True, env={"JAX_PLATFORMS": "cpu", **os.environ},
            )  # fmt: skip
            if out.returncode:
                raise SystemExit(out.stderr[-2000:])
            row = {"layers": layers, "fast_forward": ff, **json.loads(out.stdout.splitlines()[-1])}
            rows.append(row)
            print(
                f"layers={layers:2d} fast_forward={ff!s:5}: first {row['first_s']:.1f} s, "
                f"second {row['second_s']:.1f} s, compile ~{row['compile_s']:.1f} s",
                flush=True,
            )
    command = "python benchmarks/xla_compile_layers.py " + " ".join(sys.argv[1:])
    result = {
        "machine": machine(),
        "commit": git_commit(),
        "command": command.strip(),
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
