"""A new schema in a running program: no XLA recompilation, and its time to first token.

Issue 20 (goal 5): "A second schema in a running program starts decoding with no XLA
recompilation". A server compiles `generate`'s loop once; every new request's schema must then
only be compiled on the host and uploaded. `TableCapacity` fixes the tables' padded sizes, so
the tables of any schema that fits have one shape and swap into the compiled loop.

One process, a Gemma-3-architecture model with random weights (`decode_bench.MODELS`) and a
real vocabulary (Gemma-3's 262k or ``--tokenizer llama3``):

1. ``--schemas N`` BFCL function-argument schemas (``--category``, a fixed-seed sample,
   converted by `_bfcl.parameters_schema`) compiled on the host (`compile_json_schema`,
   defaults): wall and process CPU seconds each.
2. One `TableCapacity` fitting all of them (the capacity `ConstraintTables.from_dfas` gives
   the list, with ``constraints=1``).
3. For each schema in turn: tables at that capacity (upload), `generate` with
   ``max_new_tokens=1`` (time to first token: prefill + the first masked sample), then the
   full ``--max-new-tokens`` (both at one ``buffer_length``: ``max_new_tokens`` is traced, one
   compiled loop), every row under the schema. Counted: `_generate_jit`'s cache entries and
   every XLA backend compile (`jax.monitoring`) before and after. Schema 0 compiles the loop;
   schemas 1.. must compile nothing. Finished rows are parsed and validated (`jsonschema`);
   rows in the error state (a mask that allowed nothing) are counted.
4. Baseline: schema 1 in tables at its own size (``from_dfas([dfa])``, no capacity): the
   recompile a server pays without a fixed capacity.
5. A schema that does not fit (all N schemas as properties of one object): `from_dfas`
   raises `TableCapacityError` naming the dimension; a larger capacity means one recompile.

Run: ``python benchmarks/schema_swap_bench.py [--model bench] [--batch 8] [--schemas 8]``
(``--bfcl-dir DIR``: a folder holding ``BFCL_v4_<category>.json``, default the installed
``bfcl_eval`` package's data). Writes ``benchmarks/results/schema_swap.json`` (``--output``)
and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import jsonschema
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bfcl  # noqa: E402
from _bench_util import machine  # noqa: E402
from decode_bench import MODELS, _CacheFn  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax import _generate  # noqa: E402
from automata_jax._capacity import bucket  # noqa: E402
from automata_jax.models import Gemma3  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOKENIZERS = ROOT.parent / "shared" / "tokenizers"
LOGITS_WIDTH = {"gemma3": 262_144, "llama3": 128_256}  # the models' output layer per vocabulary
PROMPT = "Call the function. Its arguments as one JSON object: "


class CompileCounter:
    """Every XLA backend compile of the process (count and seconds), from `jax.monitoring`."""

    def __init__(self):
        self.count, self.seconds = 0, 0.0
        jax.monitoring.register_event_duration_secs_listener(self._on_event)

    def _on_event(self, event, duration, *args, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            self.count += 1
            self.seconds += duration

    def snapshot(self):
        return self.count, self.seconds, _generate._generate_jit._cache_size()


def sample_functions(bfcl_dir: Path, category: str, n: int, seed: int) -> list[dict]:
    """``n`` function documents of the category, a fixed-seed permutation's first ``n``
    (so a smaller ``n`` takes a prefix of a larger one's sample)."""
    questions = _bfcl._jsonl(bfcl_dir / f"BFCL_v4_{category}.json")
    functions = [q["function"][0] for q in questions]
    order = np.random.default_rng(seed).permutation(len(functions))[:n]
    return [functions[i] for i in order]


def compile_timed(schema, vocab):
    """(TokenDFA, wall s, CPU s, warnings)."""
    t0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dfa = ac.compile_json_schema(schema, vocab)
    return dfa, time.perf_counter() - t0, time.process_time() - c0, [str(w.message) for w in caught]


def swap_in(dfa, schema, capacity, decode, counter) -> dict:
    """Upload one schema's tables, then time to first token and the full decode."""
    before = counter.snapshot()
    t0 = time.perf_counter()
    tables = aj.ConstraintTables.from_dfas([dfa], vocab_size=decode.vocab_size, capacity=capacity)
    jax.block_until_ready(tables)
    upload_s = time.perf_counter() - t0
    first_s, _ = decode(tables, 1)
    generate_s, out = decode(tables, decode.max_new_tokens)
    after = counter.snapshot()
    finished, valid = decode.validate(out, schema)
    stuck = int(np.asarray(out.states.error).sum())  # rows whose mask allowed nothing (expected 0)
    return {
        "upload_s": upload_s,
        "first_token_s": first_s,
        "generate_s": generate_s,
        "generate_jit_new_entries": after[2] - before[2],
        "xla_compiles": after[0] - before[0],
        "xla_compile_s": after[1] - before[1],
        "finished": finished,
        "valid": valid,
        "error_rows": stuck,
    }


class Decode:
    """`generate` with every row under constraint 0, one buffer length for every call."""

    def __init__(self, model, params, cache_fn, vocab, batch, max_new_tokens):
        self.model, self.params, self.cache_fn, self.vocab = model, params, cache_fn, vocab
        self.vocab_size, self.max_new_tokens = model.config.vocab_size, max_new_tokens
        tokens, mask = aj.pad_prompts([vocab.encode(PROMPT)] * batch)
        self.tokens, self.mask = jnp.asarray(tokens), jnp.asarray(mask)
        self.ids = jnp.zeros((batch,), jnp.int32)
        self.buffer_length = bucket(max_new_tokens, _generate.MIN_BUFFER)
        self.calls = 0

    def __call__(self, tables, max_new_tokens):
        self.calls += 1
        t0 = time.perf_counter()
        out = aj.generate(
            self.model.apply_step, self.params, self.tokens, tables, self.ids,
            sampler=aj.Temperature(1.0), max_new_tokens=max_new_tokens,
            rng=jax.random.key(self.calls), prompt_mask=self.mask, cache=self.cache_fn,
            buffer_length=self.buffer_length,
        )  # fmt: skip
        jax.block_until_ready(out)
        return time.perf_counter() - t0, out

    def validate(self, out, schema) -> tuple[int, int]:
        """(finished rows, finished rows whose text is a valid instance of ``schema``)."""
        validator = jsonschema.Draft202012Validator(schema)
        eos = set(self.vocab.eos_ids)
        tokens, lengths, accepted = jax.device_get((out.tokens, out.lengths, out.accepted))
        finished = valid = 0
        for row, n, ok in zip(tokens, lengths, accepted, strict=True):
            if not ok:
                continue
            finished += 1
            text = self.vocab.decode(int(t) for t in row[:n] if int(t) not in eos)
            try:
                valid += validator.is_valid(json.loads(text))
            except ValueError:
                pass
        return finished, valid


def too_large_probe(schemas, vocab, capacity, vocab_size) -> dict:
    """All schemas as the properties of one object: what a capacity does with a schema past it."""
    schema = {
        "type": "object",
        "properties": {f"call_{i}": s for i, s in enumerate(schemas)},
        "required": [f"call_{i}" for i in range(len(schemas))],
        "additionalProperties": False,
    }
    try:
        dfa, wall, cpu, _ = compile_timed(schema, vocab)
    except ac.AutomataError as e:  # e.g. past a compile budget
        return {"compiled": False, "error": f"{type(e).__name__}: {e}"}
    row = {"states": dfa.num_states, "classes": dfa.num_classes, "compile_s": wall, "cpu_s": cpu}
    try:
        aj.ConstraintTables.from_dfas([dfa], vocab_size=vocab_size, capacity=capacity)
        row["fits"] = True
    except aj.TableCapacityError as e:
        row.update(fits=False, error=str(e))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="bench")
    parser.add_argument("--tokenizer", choices=sorted(LOGITS_WIDTH), default="gemma3")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--schemas", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--category", default="simple_python")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bfcl-dir", type=Path, default=None, help="default: bfcl_eval's data")
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/schema_swap.json"))
    args = parser.parse_args()
    if args.schemas < 2:
        parser.error("--schemas: at least 2 (schema 0 compiles the loop, 1.. swap in)")

    started = machine(jax=jax.__version__)  # date and load at the start
    counter = CompileCounter()
    vocab = ac.Vocabulary.from_file(TOKENIZERS / args.tokenizer / "tokenizer.json")
    config = dataclasses.replace(MODELS[args.model](), vocab_size=LOGITS_WIDTH[args.tokenizer])
    model = Gemma3(config)
    params = model.init_params(0, jnp.float32)
    decode = Decode(
        model, params, _CacheFn(model, jnp.float32), vocab, args.batch, args.max_new_tokens
    )

    functions = sample_functions(
        args.bfcl_dir or _bfcl.data_dir(), args.category, args.schemas, args.seed
    )
    schemas, dfas, rows = [], [], []
    for fn in functions:
        schema = _bfcl.parameters_schema(fn)
        dfa, wall, cpu, caught = compile_timed(schema, vocab)
        schemas.append(schema)
        dfas.append(dfa)
        rows.append(
            {
                "function": fn["name"],
                "states": dfa.num_states,
                "classes": dfa.num_classes,
                "pda": dfa.is_pda,
                "compile_s": wall,
                "compile_cpu_s": cpu,
                "warnings": caught,
            }
        )
        print(f"compiled {fn['name']}: {wall:.2f} s", flush=True)
    fits_all = aj.ConstraintTables.from_dfas(dfas, vocab_size=config.vocab_size).capacity
    capacity = dataclasses.replace(fits_all, constraints=1)
    del fits_all

    for i, (row, dfa, schema) in enumerate(zip(rows, dfas, schemas, strict=True)):
        row.update(swap_in(dfa, schema, capacity, decode, counter))
        print(json.dumps({"schema": i, **row}), flush=True)
    baseline = {
        "function": rows[1]["function"],
        **swap_in(dfas[1], schemas[1], None, decode, counter),
    }
    print(json.dumps({"baseline": baseline}), flush=True)
    probe = too_large_probe(schemas, vocab, capacity, config.vocab_size)
    print(json.dumps({"probe": probe}), flush=True)

    swapped = rows[1:]
    medians = {
        k: statistics.median(r[k] for r in swapped)
        for k in ("compile_s", "compile_cpu_s", "upload_s", "first_token_s", "generate_s")
    }
    medians["schema_to_first_token_s"] = statistics.median(
        r["compile_s"] + r["upload_s"] + r["first_token_s"] for r in swapped
    )
    dev = jax.devices()[0]
    result = {
        **started,
        "loadavg_end": os.getloadavg(),
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "device_kind": dev.device_kind,
        "model": args.model,
        "params": model.num_params(params),
        "tokenizer": args.tokenizer,
        "vocab_size": config.vocab_size,
        "batch": args.batch,
        "max_new_tokens": args.max_new_tokens,
        "buffer_length": decode.buffer_length,
        "category": args.category,
        "seed": args.seed,
        "capacity": dataclasses.asdict(capacity),
        "schemas": rows,
        "baseline_own_capacity": baseline,
        "too_large_probe": probe,
        "medians_schemas_1_on": medians,
        "no_recompile_after_schema_0": all(
            r["generate_jit_new_entries"] == 0 and r["xla_compiles"] == 0 for r in swapped
        ),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


def markdown(result) -> str:
    m = result["medians_schemas_1_on"]
    lines = [
        f"{result['date']} · {result['backend']} ({result['device_kind']}) · "
        f"load average {', '.join(f'{x:.1f}' for x in result['loadavg_start'])} at start",
        f"`{result['command']}` ({result['params'] / 1e6:.1f}M parameters, vocabulary "
        f"{result['vocab_size']:,}, buffer {result['buffer_length']})",
        f"capacity: states {result['capacity']['states']}, classes "
        f"{result['capacity']['classes']}, stack {result['capacity']['stack']}, forced "
        f"{result['capacity']['forced']}",
        "",
        "| schema | states × classes | host compile s (CPU s) | upload ms | first token s "
        "| generate s | `_generate_jit` entries | XLA compiles (s) | finished / valid / error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def line(name, r, shape, compile_s):
        lines.append(
            f"| {name} | {shape} | {compile_s} | {1000 * r['upload_s']:.1f} "
            f"| {r['first_token_s']:.3f} | {r['generate_s']:.3f} "
            f"| +{r['generate_jit_new_entries']} | +{r['xla_compiles']} "
            f"({r['xla_compile_s']:.2f}) | {r['finished']} / {r['valid']} / {r['error_rows']} |"
        )

    for i, r in enumerate(result["schemas"]):
        shape = f"{r['states']:,} × {r['classes']:,}" + (" PDA" if r["pda"] else "")
        compile_s = f"{r['compile_s']:.2f} ({r['compile_cpu_s']:.2f})"
        line(f"{i} {r['function']}", r, shape, compile_s)
    b = result["baseline_own_capacity"]
    line(f"1 {b['function']}, own size (no capacity)", b, "", "")
    lines += [
        "",
        f"Medians of schemas 1..{len(result['schemas']) - 1}: host compile "
        f"{m['compile_s']:.2f} s, upload {1000 * m['upload_s']:.1f} ms, first token "
        f"{m['first_token_s']:.3f} s, schema to first token {m['schema_to_first_token_s']:.2f} s, "
        f"generate {m['generate_s']:.3f} s.",
    ]
    p = result["too_large_probe"]
    if "states" in p:
        outcome = "fits" if p.get("fits") else f"`TableCapacityError`: {p['error']}"
        lines.append(f"All schemas in one object ({p['states']:,} states): {outcome}")
    else:
        lines.append(f"All schemas in one object: not compiled ({p['error']})")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
