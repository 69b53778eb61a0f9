"""Decode throughput: `generate` constrained vs unconstrained, same model, same loop.

A Gemma-3-architecture model with random weights and the real Gemma-3 vocabulary
(262,144 logits; the tokenizer's 262,145th id is a special token and never allowed),
a JSON-Schema-sized constraint, batch 1 / 8 / 64. Throughput is batch × decode
steps / time, where the steps are those the loop actually ran (the loop stops when
every row is done; the schema's long first field makes that rare within ``--steps``,
and the random model practically never emits EOS unconstrained), so the loops
compare per step, like with like.

Three loops, interleaved run by run so that machine noise hits all alike:
  * ``plain``: the same prefill + `lax.while_loop` + sampler with no constraint code;
  * ``unconstrained``: `automata_jax.generate` with every row's constraint id -1;
  * ``constrained``: `automata_jax.generate` with the schema's tables.

Run: ``python benchmarks/decode_bench.py [--batches 1,8,64] [--steps 32] [--repeats 5]``
Writes ``benchmarks/results/decode.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import jax
import jax.numpy as jnp

import automata_compile as ac
import automata_jax as aj
from automata_jax.models import Gemma3, Gemma3Config

ROOT = Path(__file__).resolve().parents[1]
GEMMA_TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "gemma3" / "tokenizer.json"

SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "minLength": 120},
        "title": {"type": "string", "maxLength": 80},
        "year": {"type": "integer", "minimum": 1900, "maximum": 2100},
        "rating": {"type": "number"},
        "status": {"enum": ["draft", "published", "retracted"]},
        "authors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "email": {"type": "string", "format": "email"},
                },
                "required": ["name"],
            },
            "maxItems": 8,
        },
        "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    },
    "required": ["summary", "title", "year", "status"],
}


def bench_config(vocab_size: int) -> Gemma3Config:
    """Small enough for a 2-core CPU; the 262k-wide logits dominate, as in real Gemma decoding."""
    return dataclasses.replace(
        Gemma3Config.tiny(vocab_size=vocab_size),
        d_model=128,
        num_layers=4,
        num_heads=2,
        num_kv_heads=1,
        head_dim=64,
        hidden_dim=512,
        sliding_window=64,
    )


def plain_generate_fn(step_fn, sampler, capacity):
    """The baseline: generate's loop structure with no constraint code at all."""

    def run(params, prompt_tokens, prompt_mask, rng, cache):
        positions = jnp.maximum(jnp.cumsum(prompt_mask.astype(jnp.int32), axis=1) - 1, 0)
        logits, cache = step_fn(params, prompt_tokens, positions, prompt_mask, cache)
        next_position = positions[:, -1] + 1
        token = sampler(logits[:, -1], jax.random.fold_in(rng, 0)).astype(jnp.int32)
        b = prompt_tokens.shape[0]
        buffer = jnp.zeros((b, capacity), jnp.int32).at[:, 0].set(token)

        def cond(carry):
            return carry[0] < capacity

        def body(carry):
            i, buffer, token, cache = carry
            logits, cache = step_fn(
                params,
                token[:, None],
                (next_position + i - 1)[:, None],
                jnp.ones((b, 1), bool),
                cache,
            )
            token = sampler(logits[:, 0], jax.random.fold_in(rng, i)).astype(jnp.int32)
            buffer = jax.lax.dynamic_update_slice(buffer, token[:, None], (jnp.int32(0), i))
            return i + 1, buffer, token, cache

        _, buffer, _, _ = jax.lax.while_loop(cond, body, (jnp.int32(1), buffer, token, cache))
        return buffer

    return jax.jit(run)


def bench_batch(model, params, tables, sampler, prompt, b, args) -> dict:
    """Seconds per decode step of the three loops at batch ``b`` (medians, interleaved runs)."""
    tokens, mask = aj.pad_prompts([prompt] * b)
    tokens, mask = jnp.asarray(tokens), jnp.asarray(mask)
    capacity = args.steps
    cache_len = tokens.shape[1] + capacity
    plain = plain_generate_fn(model.apply_step, sampler, capacity)

    def run_plain(ids, rng):
        del ids
        plain(params, tokens, mask, rng, model.init_cache(b, cache_len)).block_until_ready()
        return capacity

    def run_gen(ids, rng):
        out = aj.generate(
            model.apply_step,
            params,
            tokens,
            tables,
            ids,
            sampler=sampler,
            max_new_tokens=capacity,
            rng=rng,
            prompt_mask=mask,
            cache=model.init_cache(b, cache_len),
            buffer_length=capacity,
        )
        out.tokens.block_until_ready()
        # Steps the loop ran: until the last row finished (EOS counts as a step) or capacity.
        return min(capacity, int(jnp.max(out.lengths + out.states.done.astype(jnp.int32))))

    loops = {
        "plain": (run_plain, None),
        "unconstrained": (run_gen, jnp.full((b,), -1, jnp.int32)),
        "constrained": (run_gen, jnp.zeros((b,), jnp.int32)),
    }
    for fn, ids in loops.values():  # warm up: compile each loop once
        fn(ids, jax.random.key(0))
    times = {name: [] for name in loops}
    for r in range(args.repeats):
        for name, (fn, ids) in loops.items():
            t = time.perf_counter()
            steps = fn(ids, jax.random.key(r + 1))
            times[name].append((time.perf_counter() - t) / steps)
    med = {k: statistics.median(v) for k, v in times.items()}  # seconds per decode step
    return {
        "batch": b,
        "steps": capacity,
        **{f"{k}_tok_s": b / v for k, v in med.items()},
        **{f"{k}_step_ms": 1000 * v for k, v in med.items()},
        "overhead_vs_plain_pct": 100 * (med["constrained"] / med["plain"] - 1),
        "overhead_vs_unconstrained_pct": 100 * (med["constrained"] / med["unconstrained"] - 1),
    }


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    dev = jax.devices()[0]
    return f"{os.cpu_count()} cores, {cpu}; JAX {jax.__version__} on {dev.platform} ({dev.device_kind})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--mask-impl", default=None, help="gather | bitmask (default: the library default)"
    )
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "decode.json"))
    args = parser.parse_args()

    vocab = ac.Vocabulary.from_file(GEMMA_TOKENIZER)
    t0 = time.perf_counter()
    dfa = ac.compile_json_schema(SCHEMA, vocab)
    compile_s = time.perf_counter() - t0
    config = bench_config(262_144)
    model = Gemma3(config)
    params = model.init_params(0)
    kwargs = {} if args.mask_impl is None else {"mask_impl": args.mask_impl}
    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=config.vocab_size, **kwargs)
    sampler = aj.Temperature(1.0)
    rows = []
    for b in [int(x) for x in args.batches.split(",")]:
        row = bench_batch(
            model, params, tables, sampler, vocab.encode("Extract the record as JSON: "), b, args
        )
        rows.append(row)
        print(json.dumps(row), flush=True)

    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "command": "python benchmarks/decode_bench.py "
        + f"--batches {args.batches} --steps {args.steps} --repeats {args.repeats}",
        "model": {
            k: getattr(config, k)
            for k in ("vocab_size", "d_model", "num_layers", "num_heads", "hidden_dim")
        },
        "params": model.num_params(params),
        "schema_compile_s": compile_s,
        "dfa": {"states": dfa.num_states, "classes": dfa.num_classes, "bytes": dfa.nbytes},
        "tables": {
            "padded_shape": tables.padded_shape,
            "mask_impl": tables.mask_impl,
            "device_bytes": tables.nbytes,
        },
        "rows": rows,
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\n{result['date']} · {result['machine']} · `{result['command']}`")
    print(
        f"DFA: Q={dfa.num_states}, C={dfa.num_classes}; tables on device: {tables.nbytes:,} bytes ({tables.mask_impl})\n"
    )
    print(
        "| batch | plain tok/s | unconstrained tok/s | constrained tok/s | overhead vs plain | vs unconstrained |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['batch']} | {r['plain_tok_s']:.1f} | {r['unconstrained_tok_s']:.1f} | {r['constrained_tok_s']:.1f} "
            f"| {r['overhead_vs_plain_pct']:+.1f}% | {r['overhead_vs_unconstrained_pct']:+.1f}% |"
        )


if __name__ == "__main__":
    main()
