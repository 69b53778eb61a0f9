"""Decode throughput: our in-loop constraint (fast-forward off / on) vs a host-side matcher.

A Gemma-3-architecture model with random weights and the real Gemma-3 vocabulary
(262,144 logits; the tokenizer's 262,145th id is a special token and never allowed):
``--model bench`` (34.5M parameters, the output layer dominates, as in real Gemma
decoding on CPU), ``gemma3_270m`` or ``gemma3_1b`` (real sizes), ``--dtype`` float32 or
bfloat16. Every loop decodes one batch of records to the end (EOS in every row) or to
``--max-new-tokens``, under one constraint per run. Loops, interleaved run by run so
that machine noise hits all alike:

* ``plain``: prefill + `lax.while_loop` + sampler with no constraint code (the same
  number of steps as ``ours``): the cost of the model alone;
* ``ours``: `automata_jax.generate` (the mask is a gather inside the jitted loop);
* ``ours_ff``: the same with ``fast_forward=True`` (forced tokens join a call; the
  default `FastForward` step policy: a chunked call only when the rows' saved calls pay
  for it, as narrow as the runs need);
* ``ours_spec``: fast-forward plus speculative drafts (``speculate=Speculate()``:
  n-gram prompt lookup, verified in the same call, cache and state rewound; with random
  weights few drafts are accepted, so this row shows what speculation costs when it
  does not pay; `benchmarks/speculative_bench.py` measures the real model);
* ``ff_always``: fast-forward with the policy before `FastForward` existed (one chunk
  width ``1 + F``, taken whenever any row has forced tokens: ``FastForward(widths=(W,),
  slot_cost=0)``);
* ``ff_c<x>`` (``--slot-costs x,...``): the default widths with ``slot_cost=x``, to
  calibrate the cost model; ``ff_single`` (``--slot-costs single``): fast-forward's loop
  restricted to single-token calls (``widths=(1,)``: the loop's own overhead);
* ``host``: what a server with a host matcher does (vLLM + llguidance / XGrammar style):
  the same jitted model step, and per step llguidance fills the batch's token bitmask
  on the CPU (``LLExecutor``, in parallel over rows) while the device computes the
  forward pass (JAX async dispatch); a jitted sampler applies the bitmask; the sampled
  ids come back to the host, which advances the matchers. Same language: llguidance
  compiles our schema's regex (``grammar_from_regex``), so both sides enforce the same
  strings.

Figures per loop: records/s and tokens/s over all ``--repeats`` runs (sampled lengths
differ run to run), model calls per record (a row's calls: prefill + one per step it
sampled after), ms per batch step (median); the host loop's mask time per step (filling
the bitmask plus advancing the matchers, on the host) next to ours (our step time minus
``plain``'s over the same number of steps).

Run: ``python benchmarks/decode_bench.py [--model bench] [--batches 1,8,64]``
Writes ``benchmarks/results/decode.json`` (or ``--output``) and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import cpu_name  # noqa: E402

import automata_compile as ac  # noqa: E402
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
                "additionalProperties": False,
            },
            "maxItems": 8,
        },
        "keywords": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
    },
    "required": ["summary", "title", "year", "status"],
    # Closed objects: a regular language (`json_schema_to_regex`); open ones need grammar rules.
    "additionalProperties": False,
}
FREE_TEXT = r"[a-zA-Z ,.]{1,400}"  # nothing is ever forced: the no-regression case


def constraints():
    """name -> regex: the extraction job's schema as the job compiles it (``person``:
    `automata_jax.extract.SCHEMA_OPTIONS`, the one place the job's compile options are set)
    and with JSON's default separators (an optional space after ``,`` and ``:``), this
    script's schema (the job's options but those default separators: the free-text-heavy
    case), and a free-text constraint with no forced text."""
    from automata_jax.extract import SCHEMA_OPTIONS

    spaced = {**SCHEMA_OPTIONS, "whitespace": "default"}
    person = json.loads((ROOT / "automata_jax" / "data" / "person.json").read_text())
    return {
        "person": ac.json_schema_to_regex(person, **SCHEMA_OPTIONS),
        "person_default_ws": ac.json_schema_to_regex(person, **spaced),
        "bench_schema": ac.json_schema_to_regex(SCHEMA, **spaced),
        "free_text": FREE_TEXT,
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


MODELS = {
    "bench": lambda: bench_config(262_144),
    "gemma3_270m": Gemma3Config.gemma3_270m,
    "gemma3_1b": Gemma3Config.gemma3_1b,
}


def plain_generate_fn(step_fn, sampler, capacity):
    """The baseline: generate's loop structure with no constraint code, ``steps`` steps."""

    def run(params, prompt_tokens, prompt_mask, rng, cache, steps):
        positions = jnp.maximum(jnp.cumsum(prompt_mask.astype(jnp.int32), axis=1) - 1, 0)
        logits, cache = step_fn(params, prompt_tokens, positions, prompt_mask, cache)
        next_position = positions[:, -1] + 1
        token = sampler(logits[:, -1], jax.random.fold_in(rng, 0)).astype(jnp.int32)
        b = prompt_tokens.shape[0]
        buffer = jnp.zeros((b, capacity), jnp.int32).at[:, 0].set(token)

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

        carry = (jnp.int32(1), buffer, token, cache)
        return jax.lax.while_loop(lambda c: c[0] < steps, body, carry)[1]

    return jax.jit(run)


class HostMatcherLoop:
    """Per-step llguidance bitmasks on the host, overlapped with the jitted forward pass."""

    def __init__(self, model, params, sampler, vocab, lltok, grammar, cache_fn):
        import llguidance as llg
        import llguidance.numpy as lln

        self.llg, self.lln = llg, lln
        self.params, self.vocab, self.lltok, self.grammar = params, vocab, lltok, grammar
        self.prototype = llg.LLMatcher(lltok, grammar, log_level=0)
        if self.prototype.is_error():
            raise RuntimeError(f"llguidance: {self.prototype.get_error()}")
        self.executor = llg.LLExecutor()
        self.step = jax.jit(model.apply_step)
        self.cache_fn = cache_fn
        v = model.config.vocab_size
        self.eos = jnp.asarray(sorted(vocab.eos_ids), jnp.int32)

        def sample(logits, bits, rng, i):
            shifts = jnp.arange(32, dtype=jnp.uint32)
            words = bits.astype(jnp.uint32)
            allowed = ((words[:, :, None] >> shifts) & 1).astype(bool).reshape(bits.shape[0], -1)
            masked = jnp.where(allowed[:, :v], logits, -jnp.inf)
            return sampler(masked, jax.random.fold_in(rng, i)).astype(jnp.int32)

        self.sample = jax.jit(sample)

    def run(self, tokens, mask, rng, max_new_tokens):
        """Returns (tokens per row incl. EOS, model calls per row, host mask seconds, steps)."""
        b, t = tokens.shape
        matchers = [self.prototype.deep_copy() for _ in range(b)]
        bits = self.lln.allocate_token_bitmask(b, self.lltok.vocab_size)
        cache = self.cache_fn(b, t + max_new_tokens)
        positions = jnp.maximum(jnp.cumsum(mask.astype(jnp.int32), axis=1) - 1, 0)
        logits, cache = self.step(self.params, tokens, positions, mask, cache)
        logits = logits[:, -1]
        position = np.asarray(positions[:, -1]) + 1
        done = np.zeros(b, bool)
        count = np.zeros(b, np.int64)
        calls = np.ones(b, np.int64)
        mask_s = 0.0
        steps = 0
        eos = int(min(self.vocab.eos_ids))
        while not done.all() and steps < max_new_tokens:
            t0 = time.perf_counter()  # the forward pass that made `logits` is still running
            active = [(m, i) for i, m in enumerate(matchers) if not done[i]]
            self.lln.fill_next_token_bitmask_par(self.executor, active, bits)
            mask_s += time.perf_counter() - t0
            token = np.array(self.sample(logits, jnp.asarray(bits), rng, steps))
            t0 = time.perf_counter()
            for i, m in enumerate(matchers):
                if done[i]:
                    token[i] = eos
                    continue
                count[i] += 1
                if int(token[i]) in self.vocab.eos_ids or not m.consume_token(int(token[i])):
                    done[i] = True
            mask_s += time.perf_counter() - t0
            steps += 1
            if done.all() or steps >= max_new_tokens:
                break
            feed = jnp.asarray(~done)[:, None]
            logits, cache = self.step(
                self.params,
                jnp.asarray(token)[:, None],
                jnp.asarray(position)[:, None],
                feed,
                cache,
            )
            logits = logits[:, 0]
            calls += ~done
            position += 1
        return count, calls, mask_s, steps


def bench_case(name, model, params, cache_fn, dfa, host, prompt, b, args) -> dict:
    """One (constraint, batch) row: every loop, interleaved, medians over repeats."""
    tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=model.config.vocab_size)
    tokens, mask = aj.pad_prompts([prompt] * b)
    tokens, mask = jnp.asarray(tokens), jnp.asarray(mask)
    n = args.max_new_tokens
    sampler = aj.Temperature(1.0)
    plain = plain_generate_fn(model.apply_step, sampler, n)
    last_steps = {"n": n}

    full = aj._fast_forward.chunk_width(tables)
    policies = {"ours": False, "ours_ff": aj.FastForward()}
    policies["ff_always"] = aj.FastForward(widths=(full,), slot_cost=0.0)
    for c in filter(None, args.slot_costs.split(",")):
        if c == "single":
            policies["ff_single"] = aj.FastForward(widths=(1,))
        else:
            policies[f"ff_c{c}"] = aj.FastForward(slot_cost=float(c))

    def run_ours(ff, speculate=False):
        def run(rng):
            out = aj.generate(
                model.apply_step, params, tokens, tables, jnp.zeros((b,), jnp.int32),
                sampler=sampler, max_new_tokens=n, rng=rng, prompt_mask=mask, cache=cache_fn,
                fast_forward=ff, speculate=speculate,
            )  # fmt: skip
            lengths, done, calls = jax.device_get((out.lengths, out.states.done, out.model_calls))
            tok = lengths + done
            if not ff:
                last_steps["n"] = int(calls.max())  # loop steps the plain baseline repeats
            return tok, calls, int(calls.max()), None

        return run

    def run_plain(rng):
        steps = last_steps["n"]
        cache = cache_fn(b, tokens.shape[1] + n)
        plain(params, tokens, mask, rng, cache, jnp.int32(steps)).block_until_ready()
        return np.full(b, steps), np.full(b, steps), steps, None

    def run_host(rng):
        count, calls, mask_s, steps = host.run(tokens, mask, rng, n)
        return count, calls, steps, mask_s / max(steps, 1)

    loops = {k: run_ours(ff) for k, ff in policies.items()}
    loops["ours_spec"] = run_ours(aj.FastForward(), aj.Speculate())
    loops["plain"] = run_plain
    if host is not None:
        loops["host"] = run_host
    if name == "free_text":
        del loops["plain"]
    for fn in loops.values():  # warm up: compile each loop once
        fn(jax.random.key(0))
    samples = {k: [] for k in loops}
    for r in range(args.repeats):
        for k, fn in loops.items():
            t0 = time.perf_counter()
            tok, calls, steps, mask_s = fn(jax.random.key(r + 1))
            secs = time.perf_counter() - t0
            samples[k].append((secs, float(np.sum(tok)), float(np.mean(calls)), steps, mask_s))
    row = {"constraint": name, "batch": b, "max_new_tokens": n}
    for k, runs in samples.items():
        total_s = sum(s for s, *_ in runs)
        toks = sum(t for _, t, *_ in runs) / len(runs)
        row[k] = {
            "seconds": statistics.median(s for s, *_ in runs),
            # Rates over all repeats (sampled lengths differ run to run).
            "records_s": b * len(runs) / total_s,
            "tokens_s": toks * len(runs) / total_s,
            "tokens_per_record": toks / b,
            "calls_per_record": statistics.mean(c for _, _, c, _, _ in runs),
            # Batch model calls (loop iterations, the prefill included) and time per call.
            "steps": statistics.mean(st for *_, st, _ in runs),
            "ms_per_step": statistics.median(1000 * s / st for s, _, _, st, _ in runs),
        }
        if k == "host":
            row[k]["mask_ms_per_step"] = 1000 * statistics.median(m for *_, m in runs)
    if "plain" in row:  # ours: the step time above the model alone, same number of steps
        row["ours"]["mask_ms_per_step"] = row["ours"]["ms_per_step"] - row["plain"]["ms_per_step"]
    return row


def machine() -> str:
    dev = jax.devices()[0]
    return f"{os.cpu_count()} cores, {cpu_name()}; JAX {jax.__version__} on {dev.platform} ({dev.device_kind})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="bench")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--constraints", default="person,person_default_ws,bench_schema,free_text")
    parser.add_argument(
        "--slot-costs",
        default="",
        help="extra fast-forward loops: FastForward(slot_cost=x) per x, 'single' = widths (1,)",
    )
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-host", action="store_true", help="skip the llguidance baseline")
    parser.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "decode.json"))
    args = parser.parse_args()

    vocab = ac.Vocabulary.from_file(GEMMA_TOKENIZER)
    config = MODELS[args.model]()
    dtype = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[args.dtype]
    model = Gemma3(config)
    params = model.init_params(0, dtype)
    cache_fn = _CacheFn(model, dtype)
    lltok = None
    if not args.no_host:
        import llguidance as llg

        t0 = time.perf_counter()
        lltok = llg.LLTokenizer(
            GEMMA_TOKENIZER.read_text(), n_vocab=vocab.size, eos_token=list(vocab.eos_ids)
        )
        print(f"llguidance tokenizer: {time.perf_counter() - t0:.1f} s", flush=True)
    regexes = constraints()
    prompt = vocab.encode("Extract the record as JSON: ")
    rows, compiled = [], {}
    for name in args.constraints.split(","):
        t0 = time.perf_counter()
        dfa = ac.compile_regex(regexes[name], vocab)
        compiled[name] = {
            "compile_s": time.perf_counter() - t0,
            "states": dfa.num_states,
            "classes": dfa.num_classes,
            "states_with_forced_tokens": int((dfa.forced_len > 0).sum()),
            "longest_forced_run": int(dfa.forced_len.max()),
        }
        host = None
        if lltok is not None and name != "free_text":
            import llguidance as llg

            grammar = llg.LLMatcher.grammar_from_regex(regexes[name])
            host = HostMatcherLoop(
                model, params, aj.Temperature(1.0), vocab, lltok, grammar, cache_fn
            )
        for b in [int(x) for x in args.batches.split(",")]:
            row = bench_case(name, model, params, cache_fn, dfa, host, prompt, b, args)
            rows.append(row)
            print(json.dumps(row), flush=True)

    command = (
        f"python benchmarks/decode_bench.py --model {args.model} --dtype {args.dtype} "
        f"--batches {args.batches} --constraints {args.constraints} "
        f"--max-new-tokens {args.max_new_tokens} --repeats {args.repeats}"
        + (f" --slot-costs {args.slot_costs}" if args.slot_costs else "")
        + (" --no-host" if args.no_host else "")
    )
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "load_average": os.getloadavg(),
        "command": command,
        "model": args.model,
        "dtype": args.dtype,
        "params": model.num_params(params),
        "constraints": compiled,
        "rows": rows,
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


class _CacheFn:
    """A hashable ``init_cache`` (a static argument of the jitted loop)."""

    def __init__(self, model, dtype):
        self.model, self.dtype = model, dtype

    def __call__(self, batch_size, max_length):
        return self.model.init_cache(batch_size, max_length, self.dtype)

    def __hash__(self):
        return hash((self.model, str(self.dtype)))

    def __eq__(self, other):
        return isinstance(other, _CacheFn) and (self.model, self.dtype) == (
            other.model,
            other.dtype,
        )


def markdown(result) -> str:
    lines = [
        f"{result['date']} · {result['machine']} · load average {result['load_average']}",
        f"`{result['command']}` ({result['params'] / 1e6:.1f}M parameters)",
        "",
        "| constraint | batch | loop | records/s | tokens/s | tokens/record | calls/record "
        "| ms/step | mask ms/step | records/s vs ours | vs host |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        ff_rows = sorted(x for x in r if x.startswith("ff_"))
        for k in ("plain", "ours", "ours_ff", "ours_spec", *ff_rows, "host"):
            if k not in r:
                continue
            x = r[k]
            mask = f"{x['mask_ms_per_step']:.2f}" if "mask_ms_per_step" in x else ""
            vs_ours = f"{x['records_s'] / r['ours']['records_s']:.2f}x"
            vs_host = f"{x['records_s'] / r['host']['records_s']:.2f}x" if "host" in r else ""
            lines.append(
                f"| {r['constraint']} | {r['batch']} | {k} | {x['records_s']:.2f} "
                f"| {x['tokens_s']:.0f} | {x['tokens_per_record']:.1f} | {x['calls_per_record']:.1f} "
                f"| {x['ms_per_step']:.1f} | {mask} | {vs_ours} | {vs_host} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
