"""Gemma-3 270M (real GGUF weights) on BFCL ``multiple``: tool calls constrained by
`compile_tool_calls` against the unconstrained loop.

Each case (one question, 2-4 functions) gets the same prompt in both modes: the functions as
Python signatures, one worked example with a made-up function (not from BFCL), the question,
and an instruction to answer with a ```tool_code block (the format of Google's Gemma
function-calling guide; written once, not tuned on these cases). Greedy decoding.

* constrained: ``compile_tool_calls(functions, vocab, format="gemma", allow_text=False)``:
  one call of one of the case's functions with schema-valid arguments, then EOS;
* unconstrained: the first ```tool_code block of the output is parsed, if there is one.

Reported per mode and per half of the cases (even / odd positions; nothing was tuned on
either): valid calls (parses, names a case function, arguments valid under its JSON Schema),
BFCL accuracy (its own AST checker, `_bfcl.check`) with Wilson 95% intervals, model calls per
case. Then free-text decode speed: a tool-call constraint with free text (``allow_text=True``)
against unconstrained rows, the same prompts, alternated, medians of ``--speed-repeat`` runs.

    python benchmarks/bfcl_tool_calls.py --cases 48 --batch 8
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import _bfcl
import jax
import jsonschema
import numpy as np

import automata_compile as ac
import automata_jax as aj
from automata_jax.models import Gemma3, load_gguf
from automata_jax.models._gguf import default_gguf_path
from automata_jax.models._weights_cache import default_cache_dir

_PY = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
}
EXAMPLE = (
    "Functions:\n"
    "def convert_length(value: float, unit: str):\n"
    '    """Converts a length to metres. unit: one of \'ft\', \'in\'"""\n'
    "Question: How many metres are 12 feet?\n"
    '```tool_code\nconvert_length(value=12, unit="ft")\n```\n\n'
)


def signature(fn: dict, schema: dict) -> str:
    args = []
    for k, s in schema.get("properties", {}).items():
        args.append(f"{k}: {_PY.get(s.get('type'), 'any')}")
    doc = fn.get("description", "").replace('"""', "'")
    return f'def {fn["name"]}({", ".join(args)}):\n    """{doc}"""\n'


def prompt(case, schemas) -> str:
    sigs = "".join(signature(fn, s) for fn, s in zip(case.functions, schemas, strict=True))
    question = case.messages[-1]["content"]
    return f"{EXAMPLE}Functions:\n{sigs}Question: {question}\n"


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    z, p = 1.96, k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (c - h, c + h)


def first_call(text: str):
    """The first ```tool_code call of an output, or None."""
    fmt = ac.TOOL_CALL_FORMATS["gemma"]
    i = text.find(fmt.trigger)
    if i < 0:
        return None
    j = text.find(fmt.end, i + len(fmt.trigger))
    if j < 0:
        return None
    try:
        parts = ac.parse_tool_calls(text[i : j + len(fmt.end)], "gemma")
    except ac.ToolCallParseError:
        return None
    return next((p for p in parts if isinstance(p, ac.ToolCall)), None)


def calls_to_block_end(vocab, seq) -> int:
    """Model calls (the prefill included) until the first call block is closed: where a
    server would stop an unconstrained row at the end tag (all of them if it never is)."""
    fmt = ac.TOOL_CALL_FORMATS["gemma"]
    for i in range(1, len(seq) + 1):
        text = vocab.decode(seq[:i]).decode("utf-8", "replace")
        j = text.find(fmt.trigger)
        if j >= 0 and text.find(fmt.end, j + len(fmt.trigger)) >= 0:
            return i
    return len(seq) + 1


def score(case, schemas, call) -> tuple[bool, bool]:
    """(valid, correct by BFCL's checker)."""
    if call is None:
        return False, False
    by_name = {fn["name"]: s for fn, s in zip(case.functions, schemas, strict=True)}
    if call.name not in by_name:
        return False, False
    try:
        jsonschema.validate(call.arguments, by_name[call.name])
        valid = True
    except jsonschema.ValidationError:
        valid = False
    try:
        correct = bool(_bfcl.check(case, [{call.name: call.arguments}])["valid"])
    except Exception:  # the checker raises on some malformed calls: count as wrong
        correct = False
    return valid, correct


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=48)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=80)
    p.add_argument("--speed-repeat", type=int, default=3)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    path = default_gguf_path()
    vocab = ac.Vocabulary.from_gguf(path)
    config, params = load_gguf(path, cache_dir=default_cache_dir())
    model = Gemma3(config)
    cases = _bfcl.load_cases("multiple", limit=args.cases)
    rows = {"constrained": [], "unconstrained": []}
    compile_s = []
    for lo in range(0, len(cases), args.batch):
        chunk = cases[lo : lo + args.batch]
        schemas = [[_bfcl.parameters_schema(fn) for fn in c.functions] for c in chunk]
        dfas = []
        for c, s in zip(chunk, schemas, strict=True):
            tools = [
                {"name": fn["name"], "parameters": x} for fn, x in zip(c.functions, s, strict=True)
            ]
            t = time.perf_counter()
            dfas.append(ac.compile_tool_calls(tools, vocab, format="gemma", allow_text=False))
            compile_s.append(time.perf_counter() - t)
        tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=config.vocab_size)
        toks = [
            [vocab.bos_id, *vocab.encode(prompt(c, s))] for c, s in zip(chunk, schemas, strict=True)
        ]
        tokens, mask = aj.pad_prompts(toks)
        for mode, ids in (
            ("constrained", np.arange(len(chunk))),
            ("unconstrained", np.full(len(chunk), -1)),
        ):
            out = aj.generate(
                model.apply_step, params, tokens, tables, ids.astype(np.int32), prompt_mask=mask,
                cache=model.init_cache, sampler=aj.Greedy(), max_new_tokens=args.max_new_tokens,
                rng=jax.random.key(0),
            )  # fmt: skip
            for b, (c, s) in enumerate(zip(chunk, schemas, strict=True)):
                n = int(out.lengths[b])
                text = vocab.decode(np.asarray(out.tokens[b, :n]).tolist()).decode(
                    "utf-8", "replace"
                )
                call = first_call(text)
                valid, correct = score(c, s, call)
                seq = np.asarray(out.tokens[b, :n]).tolist()
                rows[mode].append(
                    {"id": c.id, "half": (lo + b) % 2, "finished": call is not None,
                     "valid": valid, "correct": correct, "calls": int(out.model_calls[b]),
                     "calls_to_block_end": calls_to_block_end(vocab, seq), "text": text}
                )  # fmt: skip
        print(f"{lo + len(chunk)} cases", flush=True)
    report = {"cases": len(cases), "compile_s_median": statistics.median(compile_s)}
    for mode, rs in rows.items():
        for half in ("all", 0, 1):
            sel = [r for r in rs if half == "all" or r["half"] == half]
            k_ok = sum(r["correct"] for r in sel)
            fin = [r for r in sel if r["finished"]]
            report[f"{mode}/{half}"] = {
                "n": len(sel),
                "finished_call": len(fin) / len(sel),
                "valid_of_finished": sum(r["valid"] for r in fin) / max(len(fin), 1),
                "valid": sum(r["valid"] for r in sel) / len(sel),
                "accuracy": k_ok / len(sel),
                "accuracy_95": wilson(k_ok, len(sel)),
                "model_calls_mean": statistics.mean(r["calls"] for r in sel),
                "model_calls_to_block_end_mean": statistics.mean(
                    r["calls_to_block_end"] for r in sel
                ),
            }
    report["speed"] = speed(model, params, vocab, config, cases[: args.batch], args)
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"report": report, "rows": rows}, f, indent=1)


def speed(model, params, vocab, config, chunk, args) -> dict:
    """Seconds per generate call: free-text tool-call rows vs unconstrained, alternated."""
    schemas = [[_bfcl.parameters_schema(fn) for fn in c.functions] for c in chunk]
    dfas = [
        ac.compile_tool_calls(
            [{"name": fn["name"], "parameters": x} for fn, x in zip(c.functions, s, strict=True)],
            vocab, format="gemma",
        )
        for c, s in zip(chunk, schemas, strict=True)
    ]  # fmt: skip
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=config.vocab_size)
    toks = [[vocab.bos_id, *vocab.encode(c.messages[-1]["content"])] for c in chunk]
    tokens, mask = aj.pad_prompts(toks)
    times = {"tool_calls_free_text": [], "unconstrained": []}
    n = 32
    for i in range(args.speed_repeat + 1):
        for mode, ids in (
            ("tool_calls_free_text", np.arange(len(chunk))),
            ("unconstrained", np.full(len(chunk), -1)),
        ):
            t = time.perf_counter()
            out = aj.generate(
                model.apply_step, params, tokens, tables, ids.astype(np.int32), prompt_mask=mask,
                cache=model.init_cache, sampler=aj.Greedy(), max_new_tokens=n, rng=jax.random.key(0),
            )  # fmt: skip
            jax.block_until_ready(out.tokens)
            if i:  # the first round compiles
                times[mode].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    med["ratio"] = med["tool_calls_free_text"] / med["unconstrained"]
    med["all_samples"] = times
    return med


if __name__ == "__main__":
    main()
