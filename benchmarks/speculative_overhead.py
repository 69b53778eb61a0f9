"""The decode loops' own work per batch, without the model: fast-forward vs speculation.

Each set's first batch is decoded once with the real Gemma-3 270M (fast-forward, greedy), then
replayed with an oracle model whose logits are one-hot at the token the real run emitted next
(`speculative_bench.OracleModel`, without its recording callback), so every loop makes the
real run's choices at almost no model cost: what is left is the loop's own work (lookup, state
walks, masks, policy, rewinds). Times are process CPU seconds (medians of ``--repeats``
interleaved runs), beside the real batch's.

Run: ``python benchmarks/speculative_overhead.py [--sets bfcl,extract]``
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "compile"), str(ROOT / "benchmarks")]

import speculative_bench as sb  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax._tables import bucket  # noqa: E402
from automata_jax.models import Gemma3, default_cache_dir, default_gguf_path, load_gguf  # noqa: E402


@dataclasses.dataclass(frozen=True)
class QuietOracle(sb.OracleModel):
    """`speculative_bench.OracleModel` without the callback."""

    takes_logits_at = True

    def apply_step(self, params, tokens, positions, input_mask, cache, logits_at=None):
        if logits_at is None:
            at = jnp.broadcast_to(jnp.arange(tokens.shape[1])[None], tokens.shape)
        else:
            at = logits_at if logits_at.ndim == 2 else logits_at[:, None]
        pos = jnp.take_along_axis(positions, at, axis=1) + 1
        target = params["target"]
        target = jnp.take_along_axis(target, jnp.clip(pos, 0, target.shape[1] - 1), axis=1)
        logits = jax.nn.one_hot(target, self.vocab_size, dtype=jnp.float32)
        valid = jax.lax.dynamic_update_slice(cache.valid, input_mask, (0, cache.end_index))
        return logits, cache.replace(valid=valid, end_index=cache.end_index + tokens.shape[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="bfcl,extract")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--bfcl-cases", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    path = default_gguf_path()
    vocab = ac.Vocabulary.from_gguf(path)
    config, params = load_gguf(path, cache_dir=default_cache_dir())
    model = Gemma3(config)
    cache_fn = functools.partial(model.init_cache, dtype=params["embed_tokens"].dtype)
    oracle = QuietOracle(config.vocab_size)
    twins_lc = aj.bare_twins(vocab.tokens, lowercase_stops=True)
    sets = sb.load_sets(args.sets.split(","), vocab, args.bfcl_cases)
    loops = {
        "ff": dict(fast_forward=True),
        "ff+spec+lcspell": dict(fast_forward=True, speculate=True),
        "ff+spec_never+lcspell": dict(
            fast_forward=True, speculate=aj.Speculate(prior_accepted=1e-6, prior_drafted=1e6)
        ),
    }
    print("| set | loop | real batch CPU-s | oracle batch CPU-s (loop work) | runs |")
    print("|---|---|---:|---:|---|")
    for name, (prompts, ids, dfas) in sets.items():
        rows = list(range(min(args.batch, len(prompts))))
        full = rows + [rows[0]] * (args.batch - len(rows))
        length = bucket(max(len(p) for p in prompts), 64)
        tokens, mask = aj.pad_prompts([prompts[r] for r in full], length=length)
        cids = np.asarray([ids[r] for r in full], np.int32)
        tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=config.vocab_size)
        spellings = aj.bare_spellings(vocab.tokens, vocab.encode, np.unique(tokens))
        keys = aj.draft_keys(tokens, twins_lc, spellings)
        common = dict(sampler=aj.Greedy(), max_new_tokens=args.max_new_tokens,
                      rng=jax.random.key(0), prompt_mask=mask)  # fmt: skip

        def run(
            step, p, kw, cache, tables=tables, cids=cids, tokens=tokens, keys=keys, common=common
        ):
            extra = dict(draft_keys=keys) if "speculate" in kw else {}
            return jax.device_get(
                aj.generate(step, p, tokens, tables, cids, cache=cache, **common, **kw, **extra)
            )

        real = {}
        for loop in ("ff", "ff+spec+lcspell"):
            out = run(model.apply_step, params, loops[loop], cache_fn)  # compile
            start = time.process_time()
            out = run(model.apply_step, params, loops[loop], cache_fn)
            real[loop] = (time.process_time() - start, out)
        out = real["ff"][1]
        lengths = np.asarray(out.lengths + out.accepted)
        target = np.zeros((args.batch, length + args.max_new_tokens + 2), np.int32)
        for r in range(args.batch):
            seq = list(tokens[r][mask[r]]) + list(out.tokens[r][: lengths[r]])
            target[r, : len(seq)] = seq
        oparams = {"target": jnp.asarray(target)}
        times = {k: [] for k in loops}
        for k in loops:  # compile, and check the replay
            replay = run(oracle.apply_step, oparams, loops[k], oracle.init_cache)
            assert (replay.tokens == out.tokens).all(), (name, k)
        for r in range(args.repeats):
            for k in loops if r % 2 == 0 else list(loops)[::-1]:
                start = time.process_time()
                run(oracle.apply_step, oparams, loops[k], oracle.init_cache)
                times[k].append(time.process_time() - start)
        for k in loops:
            real_s = f"{real[k][0]:.2f}" if k in real else "-"
            print(
                f"| {name} | {k} | {real_s} | {np.median(times[k]):.3f} | "
                f"{', '.join(f'{x:.3f}' for x in times[k])} |"
            )
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
