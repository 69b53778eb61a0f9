"""Grammar constraints: compile time next to llguidance, and decode overhead of a PDA row.

Compile: the built-in JSON grammar (RFC 8259) on the Llama-3 and Gemma-3 vocabularies, in one
run: ours = `compile_grammar` (vocabulary trie prebuilt; its build is reported apart), token
classes, context-dependent edges, artifact bytes; llguidance = ``LLTokenizer`` (once per
vocabulary) + ``LLMatcher`` on the same Lark text + its first mask (llguidance compiles lazily,
so the first mask is part of its start-up cost). xgrammar is not measured: ``pip install
xgrammar`` pulls in torch and CUDA wheels, too heavy for the shared environment.

Decode: `generate` with the JSON grammar (Gemma-3 vocabulary, 262,144 logits, a small
random-weight Gemma-3 model) against the same loop with every row unconstrained, batch
1 / 8 / 64, runs interleaved, medians of seconds per decode step; tables' device bytes.

Schemas (``--schemas``): JSON Schemas that compile to a pushdown automaton (recursive
``$ref``, free-form JSON) and a regular one with a definition used ten times, on both
vocabularies: `compile_json_schema` with ``recursion="stack"`` (the default) and
``"unroll"`` (the old DFA); for the shared definition also the byte PDA with the definition
forced into one rule plus its composition (``shared_rule``); next to llguidance's
``grammar_from_json_schema`` + ``LLMatcher`` + first mask, in one run; medians of
``--repeats``. Writes ``benchmarks/results/schema_grammar.json``.

Run: ``python benchmarks/grammar_bench.py [--skip-decode] [--batches 1,8,64] [--steps 32]``
Writes ``benchmarks/results/grammar.json`` and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

import automata_compile as ac
from automata_compile.tokens._token_trie import trie_for

ROOT = Path(__file__).resolve().parents[1]
TOKENIZERS = ROOT.parent / "shared" / "tokenizers"
RESULTS = ROOT / "benchmarks" / "results" / "grammar.json"
SCHEMA_RESULTS = ROOT / "benchmarks" / "results" / "schema_grammar.json"

_NODE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "size": {"type": "integer", "minimum": 0},
        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
    },
    "required": ["name"],
    "additionalProperties": False,
}
_ADDRESS = {
    "type": "object",
    "properties": {
        "street": {"type": "string", "maxLength": 40},
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "email": {"type": "string", "format": "email"},
        "since": {"type": "string", "format": "date"},
    },
    "required": ["street", "city"],
    "additionalProperties": False,
}
SCHEMAS = {
    "tree ($ref cycle)": {"$defs": {"node": _NODE}, "$ref": "#/$defs/node"},
    "thread (mutual $ref)": {
        "$defs": {
            "post": {
                "type": "object",
                "properties": {
                    "author": {"type": "string"},
                    "replies": {"$ref": "#/$defs/replies"},
                },
                "required": ["author"],
                "additionalProperties": False,
            },
            "replies": {"type": "array", "items": {"$ref": "#/$defs/post"}, "maxItems": 5},
        },
        "$ref": "#/$defs/post",
    },
    "free-form JSON {}": {},
    "shared definition x10": {
        "$defs": {"address": _ADDRESS},
        "type": "object",
        "properties": {f"addr{i}": {"$ref": "#/$defs/address"} for i in range(10)},
        "additionalProperties": False,
    },
}


def bench_schemas(name: str, repeats: int) -> list[dict]:
    """Compile time of each of `SCHEMAS`: ours (stack and unroll) and llguidance."""
    path = TOKENIZERS / name / "tokenizer.json"
    vocab = ac.Vocabulary.from_file(path)
    trie_for(vocab)
    try:
        import llguidance
        from llguidance.numpy import fill_next_token_bitmask

        tok = llguidance.LLTokenizer(str(path))
    except Exception:  # report the rows without llguidance
        tok = None
    rows = []
    for label, schema in SCHEMAS.items():
        row = {"vocab": name, "schema": label}
        for mode in ("stack", "unroll"):
            times = []
            for _ in range(repeats):
                t = time.perf_counter()
                try:
                    dfa = ac.compile_json_schema(schema, vocab, recursion=mode)
                except ac.AutomataError as e:
                    row[f"{mode}_error"] = f"{type(e).__name__}: {str(e)[:120]}"
                    break
                times.append(time.perf_counter() - t)
            if times:
                row[f"{mode}_s"] = statistics.median(times)
                row[f"{mode}_states"] = dfa.num_states
                row[f"{mode}_pda"] = dfa.is_pda
                row[f"{mode}_bytes"] = dfa.nbytes
        if label.startswith("shared"):  # the same schema with its definition forced into a rule
            from automata_compile.frontends.json_schema import parse_options
            from automata_compile.pipeline import byte_language
            from automata_compile.tokens._pda_compose import compose_pda

            times = []
            for _ in range(repeats):
                t = time.perf_counter()
                _, pda = byte_language(schema, parse_options({}), share=True)
                tables = compose_pda(pda, trie_for(vocab), vocab)
                times.append(time.perf_counter() - t)
            row["shared_rule_s"] = statistics.median(times)
            row["shared_rule_states"] = int(tables["next_state"].shape[0])
            row["shared_rule_bytes"] = int(
                sum(a.nbytes for a in tables.values() if hasattr(a, "nbytes"))
            )
        if tok is not None:
            lt = []
            for _ in range(repeats):
                t = time.perf_counter()
                grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema))
                m = llguidance.LLMatcher(tok, grammar)
                bitmask = np.zeros((1, (tok.vocab_size + 31) // 32), np.int32)
                fill_next_token_bitmask(m, bitmask, 0)
                lt.append(time.perf_counter() - t)
                if m.is_error():
                    row["llguidance_error"] = m.get_error()
            row["llguidance_s"] = statistics.median(lt)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def bench_compile(name: str, repeats: int) -> dict:
    path = TOKENIZERS / name / "tokenizer.json"
    vocab = ac.Vocabulary.from_file(path)
    t = time.perf_counter()
    trie_for(vocab)
    trie_s = time.perf_counter() - t
    text = ac.builtin_grammar("json")
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        pda = ac.compile_grammar(text, vocab)
        times.append(time.perf_counter() - t)
    row = {
        "vocab": name,
        "vocab_size": vocab.size,
        "trie_s": trie_s,
        "ours_s": statistics.median(times),
        "states": pda.num_states,
        "classes": pda.num_classes,
        "context_edges": int(pda.cd_state.shape[0]),
        "bytes": pda.nbytes,
    }
    try:
        import llguidance

        t = time.perf_counter()
        tok = llguidance.LLTokenizer(str(path))
        row["llg_tokenizer_s"] = time.perf_counter() - t
        grammar = llguidance.LLMatcher.grammar_from_lark(text)
        lt = []
        for _ in range(repeats):
            t = time.perf_counter()
            m = llguidance.LLMatcher(tok, grammar)
            bitmask = np.zeros((1, (tok.vocab_size + 31) // 32), np.int32)
            from llguidance.numpy import fill_next_token_bitmask

            fill_next_token_bitmask(m, bitmask, 0)
            lt.append(time.perf_counter() - t)
            assert not m.is_error(), m.get_error()
        row["llguidance_s"] = statistics.median(lt)
    except Exception as e:  # report, do not fail the whole run
        row["llguidance_error"] = f"{type(e).__name__}: {e}"
    return row


def bench_decode(args) -> dict:
    import jax
    import jax.numpy as jnp

    import automata_jax as aj
    from automata_jax.models import Gemma3, Gemma3Config

    vocab = ac.Vocabulary.from_file(TOKENIZERS / "gemma3" / "tokenizer.json")
    pda = ac.compile_grammar("json", vocab)
    config = dataclasses.replace(
        Gemma3Config.tiny(vocab_size=262_144), d_model=128, num_layers=4, num_heads=2,
        num_kv_heads=1, head_dim=64, hidden_dim=512, sliding_window=64,
    )  # fmt: skip
    model = Gemma3(config)
    params = model.init_params(0)
    tables = aj.ConstraintTables.from_dfas(pda, vocab_size=config.vocab_size)
    sampler = aj.Temperature(1.0)
    prompt = vocab.encode("Write a JSON value: ")
    rows = []
    for b in [int(x) for x in args.batches.split(",")]:
        tokens, mask = aj.pad_prompts([prompt] * b)
        cache_len = tokens.shape[1] + args.steps

        def run(ids, rng, b=b, tokens=tokens, mask=mask, cache_len=cache_len):
            out = aj.generate(
                model.apply_step, params, tokens, tables, ids, sampler=sampler,
                max_new_tokens=args.steps, rng=rng, prompt_mask=mask,
                cache=model.init_cache(b, cache_len), buffer_length=args.steps,
            )  # fmt: skip
            out.tokens.block_until_ready()
            return max(1, min(args.steps, int(jnp.max(out.lengths + out.states.done))))

        loops = {
            "unconstrained": jnp.full((b,), -1, jnp.int32),
            "grammar": jnp.zeros((b,), jnp.int32),
        }
        for ids in loops.values():
            run(ids, jax.random.key(0))
        times = {k: [] for k in loops}
        for r in range(args.repeats):
            for k, ids in loops.items():
                t = time.perf_counter()
                steps = run(ids, jax.random.key(r + 1))
                times[k].append((time.perf_counter() - t) / steps)
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {
            "batch": b,
            **{f"{k}_step_ms": 1000 * v for k, v in med.items()},
            "overhead_pct": 100 * (med["grammar"] / med["unconstrained"] - 1),
        }
        rows.append(row)
        print(json.dumps(row), flush=True)
    return {"tables_device_bytes": tables.nbytes, "padded_shape": tables.padded_shape,
            "stack_size": tables.stack_size, "rows": rows}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocabs", default="llama3,gemma3")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--skip-decode", action="store_true")
    parser.add_argument("--schemas", action="store_true", help="only the JSON Schema compiles")
    args = parser.parse_args()
    if args.schemas:
        rows = [r for name in args.vocabs.split(",") for r in bench_schemas(name, args.repeats)]
        result = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "schemas": rows}
        SCHEMA_RESULTS.parent.mkdir(parents=True, exist_ok=True)
        SCHEMA_RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        return
    result = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "compile": []}
    for name in args.vocabs.split(","):
        row = bench_compile(name, args.repeats)
        result["compile"].append(row)
        print(json.dumps(row), flush=True)
    if not args.skip_decode:
        result["decode"] = bench_decode(args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
