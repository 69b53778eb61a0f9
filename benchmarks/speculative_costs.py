"""What a model call costs by width and logit slots, side by side, on the device at hand.

The speculative loop's calls (`automata_jax._speculative.branches`) feed ``w`` slots per row
and return logits at ``j`` of them; fast-forward's calls have ``j = 1``. This times one call
of each (w, j) on the real Gemma-3 270M at the job's batch and cache size (interleaved,
``--repeats`` rounds, the order alternating; the minimum and the median of each), the prefill
too, and writes each cost as a multiple of the one-token call: the measured table that
``aj.Speculate(call_costs=...)`` takes in place of the hand-set ``slot_cost``/``logit_cost``.

``--in-loop`` also times the calls as the loops make them, per call: ``--loop-calls`` calls
per `jax.lax.while_loop`, the cache carried, each call one branch of a ``lax.switch`` over all
of ``--calls`` (`automata_jax._loop.switch_calls`): ``WxJ@after``, the step's new-slot update
written after the switch (the loops' way since session 12), and ``WxJ@branch``, the step
writing its cache inside the branch (the way before, which XLA pays with a copy of every
layer's cache per call; since session 13 the loops' way on an accelerator,
`automata_jax._loop.branch_free`). The ratios are then to the one-token call written where
the loops write it on this backend (``1x1@after`` on the CPU, ``1x1@branch`` on a GPU), and
so is the table written.

Run: ``python benchmarks/speculative_costs.py [--batch 8] [--prompt-length 64]``
Writes ``benchmarks/results/speculative_costs.json`` (or ``--output``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "compile")]

from automata_jax._loop import branch_free  # noqa: E402
from automata_jax.models import Gemma3, default_cache_dir, default_gguf_path, load_gguf  # noqa: E402

CALLS = "1x1,2x1,3x1,5x1,9x1,3x2,5x2,5x3,5x5,9x2,9x3,9x5"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--prompt-length", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=64, help="the output buffer (cache)")
    parser.add_argument("--calls", default=CALLS, help="WxJ: width x logit slots")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--in-loop", action="store_true", help="calls in a while_loop's switch")
    parser.add_argument("--loop-calls", type=int, default=4, help="(--in-loop) calls per loop")
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall",
        help="cpu: process CPU time (all threads), steadier on a shared machine",
    )  # fmt: skip
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/speculative_costs.json"))
    args = parser.parse_args(argv)
    config, params = load_gguf(default_gguf_path(), cache_dir=default_cache_dir())
    model = Gemma3(config)
    b, t = args.batch, args.prompt_length
    length = t + 8 + 2 * args.new_tokens  # prompt, a forced start, buffer and slack
    cache = model.init_cache(b, length, dtype=params["embed_tokens"].dtype)
    cache = cache.replace(valid=cache.valid.at[:, :t].set(True), end_index=jnp.int32(t))

    @functools.partial(jax.jit, static_argnames=("w", "j"))
    def call(params, cache, w, j):
        tokens = (jnp.arange(b * w, dtype=jnp.int32).reshape(b, w) * 7919) % config.vocab_size
        pos = jnp.broadcast_to(jnp.arange(t, t + w, dtype=jnp.int32)[None], (b, w))
        mask = jnp.ones((b, w), bool)
        at = jnp.broadcast_to(jnp.arange(j, dtype=jnp.int32)[None], (b, j))
        at = at[:, 0] if j == 1 else at
        out, c = model.apply_step(params, tokens, pos, mask, cache, logits_at=at)
        return out[..., 0].sum(), c.end_index

    @jax.jit
    def prefill(params):
        empty = model.init_cache(b, length, dtype=params["embed_tokens"].dtype)
        tokens = (jnp.arange(b * t, dtype=jnp.int32).reshape(b, t) * 7919) % config.vocab_size
        pos = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32)[None], (b, t))
        out, c = model.apply_step(
            params, tokens, pos, jnp.ones((b, t), bool), empty,
            logits_at=jnp.full((b,), t - 1, jnp.int32),
        )  # fmt: skip
        return out[..., 0].sum(), c.end_index

    shapes = [tuple(int(x) for x in c.split("x")) for c in args.calls.split(",")]
    runs = {"prefill": lambda: prefill(params)}
    runs.update({f"{w}x{j}": functools.partial(call, params, cache, w=w, j=j) for w, j in shapes})
    if args.in_loop:
        for name, deferred in [("after", True), ("branch", False)]:
            looped = _looped(model, shapes, b, t, args.loop_calls, deferred)
            runs.update({f"{w}x{j}@{name}": functools.partial(looped, params, cache, jnp.int32(i))
                         for i, (w, j) in enumerate(shapes)})  # fmt: skip
    for f in runs.values():  # compile
        jax.block_until_ready(f())
    times = {k: [] for k in runs}
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    loads = []
    for r in range(args.repeats):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for k in order:
            start = clock()
            jax.block_until_ready(runs[k]())
            times[k].append(clock() - start)
        loads.append(os.getloadavg()[0])
    times = {k: [x / args.loop_calls for x in ts] if "@" in k else ts for k, ts in times.items()}
    # the loops' calls where measured: the cache written where the loops write it on this
    # backend (`automata_jax._loop.branch_free`: in the branch on an accelerator)
    at = ("@branch" if branch_free() else "@after") if args.in_loop else ""
    base_min, base_med = min(times[f"1x1{at}"]), float(np.median(times[f"1x1{at}"]))
    table = {}
    print(
        f"batch {b}, prompt {t}, cache {length}, load average {min(loads):.1f}-{max(loads):.1f}, "
        f"{args.clock} time"
    )
    if args.in_loop:
        print(f"@: in a while_loop's switch, {args.loop_calls} calls per loop, per call; x 1x1{at}")
    print("| call | min ms | median ms | x one-token (min) | x one-token (median) |")
    print("|---|---:|---:|---:|---:|")
    for k, ts in times.items():
        lo, med = min(ts), float(np.median(ts))
        table[k] = dict(min=lo, median=med, rel_min=lo / base_min, rel_median=med / base_med)
        print(
            f"| {k} | {lo * 1e3:.1f} | {med * 1e3:.1f} | {lo / base_min:.2f} | {med / base_med:.2f} |"
        )
    costs = tuple((w, j, round(table[f"{w}x{j}{at}"]["rel_min"], 3)) for w, j in shapes)
    print(f"aj.Speculate(call_costs={costs})")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(
        json.dumps(dict(args=vars(args), loads=loads, table=table, call_costs=costs), indent=1)
    )
    return 0


def _looped(model, shapes, b, t, n, deferred):
    """A jitted ``(params, cache, index) -> ...``: ``n`` calls of branch ``index`` of a
    ``lax.switch`` over ``shapes`` in a ``while_loop`` (each at slot ``t``)."""
    from automata_jax._loop import switch_calls

    vocab = model.config.vocab_size
    extra = dict(write_cache=False) if deferred else {}

    @jax.jit
    def looped(params, cache, index):
        def branch(w, j):
            def run(cache):
                tokens = (jnp.arange(b * w, dtype=jnp.int32).reshape(b, w) * 7919) % vocab
                pos = jnp.broadcast_to(jnp.arange(t, t + w, dtype=jnp.int32)[None], (b, w))
                at = jnp.broadcast_to(jnp.arange(j, dtype=jnp.int32)[None], (b, j))
                at = at[:, 0] if j == 1 else at
                out, cache = model.apply_step(
                    params, tokens, pos, jnp.ones((b, w), bool), cache, logits_at=at, **extra
                )
                return out[:, 0, 0], cache

            return run

        fns = [branch(w, j) for w, j in shapes]

        def body(c):
            i, cache, acc = c
            out, cache = switch_calls(index, fns, [w for w, _ in shapes], cache, deferred)
            return i + 1, cache.replace(end_index=jnp.int32(t)), acc + out.sum()

        _, cache, acc = jax.lax.while_loop(
            lambda c: c[0] < n, body, (jnp.int32(0), cache, jnp.float32(0))
        )
        return acc, cache.end_index

    return looped


if __name__ == "__main__":
    raise SystemExit(main())
