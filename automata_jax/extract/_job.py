"""The job: options, checks, the batch loop and the summary (`python -m automata_jax.extract`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from automata_compile import AutomataError, error_line, plain_warnings
from automata_jax.extract import _io, _prep
from automata_jax.extract._io import (
    ExtractError,
    OutputLog,
    Record,
    in_share,
    read_records,
    result_line,
)

__all__ = ["LIMIT_ERROR", "SCHEMA_OPTIONS", "ExtractError", "main", "parse_args"]

MODELS = ("gemma3-270m", "gemma3-1b", "tiny")
DEFAULT_MODEL = "gemma3-270m"
LIMIT_ERROR = "max_new_tokens reached before the object was complete"

# How the job compiles every schema (`automata_compile.compile_json_schema` options; also
# what benchmarks/decode_bench.py's "person" constraint uses). Compact whitespace: the job
# writes the *parsed* object (`"object": {...}`, re-serialized), so the generated text's
# whitespace never reaches the output, and with no optional spaces the separators and keys
# are forced text that fast-forward feeds without sampling (1.9x fewer model calls per
# record on person.json vs 1.4-1.5x with an optional space after "," and ":"). Declared
# property order: a generator needs one order, not all of them (the compiler's default,
# any order, is what a validator accepts); the schema's order keeps the keys forced text,
# the output's field order predictable and the automaton small (a 4-property object is
# about 5x the states in any order, and past ~5 properties any order is refused). Closed
# objects: an object that declares its properties accepts no others unless the schema says so
# (a sound subset, `frontends.json_schema._closing`): Gemma-3 270M invented keys in a
# pydantic schema's nested objects until max_new_tokens (docs/extraction_job.md).
SCHEMA_OPTIONS = {"whitespace": "compact", "property_order": "declared", "closed_objects": True}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see ``python -m automata_jax.extract --help``)."""
    p = argparse.ArgumentParser(
        prog="python -m automata_jax.extract",
        description="Extract one JSON object per document with schema-constrained generation.",
    )
    p.add_argument(
        "--schema", default=None, help="JSON Schema file (default: the bundled person.json)"
    )
    p.add_argument(
        "--input", default=None, help="JSON-lines input (default: the bundled docs.jsonl)"
    )
    p.add_argument("--output", required=True, help="JSON-lines output; rerun to resume")
    p.add_argument("--text-field", default="text", help="input field holding the text")
    p.add_argument(
        "--model",
        choices=MODELS,
        default=None,
        help=f"default {DEFAULT_MODEL}: Gemma-3 270M base from the weights package (or "
        "--checkpoint); gemma3-1b needs --checkpoint; tiny = random weights, for tests",
    )
    p.add_argument(
        "--checkpoint",
        default=None,
        help="a Gemma-3 GGUF file, or a HF safetensors directory (not with --model tiny)",
    )
    p.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer.json / SentencePiece .model / GGUF (default: the GGUF's own, the "
        "checkpoint's tokenizer.json, or the bundled tokenizer.model.v1 for the tiny model)",
    )
    p.add_argument(
        "--prompt-template",
        default=None,
        help="template file with {text} (optionally {fields}, {schema}, {id}); default: the "
        "model's chat template, else a few-shot prompt for a base model",
    )
    p.add_argument("--batch-size", type=int, default=8, help="records per generation batch")
    p.add_argument("--max-new-tokens", type=int, default=256, help="generation limit per record")
    p.add_argument(
        "--max-prompt-tokens", type=int, default=2048, help="longer prompts get an error line"
    )
    p.add_argument(
        "--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples"
    )
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument(
        "--lenient",
        action="store_true",
        help="drop schema keywords that cannot be enforced exactly (with a warning) "
        "instead of refusing the schema",
    )
    p.add_argument(
        "--cache-dir",
        default=None,
        help="where compiled tables are cached (default: .automata_cache next to the output)",
    )
    p.add_argument("--no-cache", action="store_true", help="always compile the schema")
    p.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16"),
        default="auto",
        help="model weights dtype (auto: bfloat16 for gemma3-* on GPU/TPU, else float32)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--compile-timeout",
        type=float,
        default=None,
        metavar="S",
        help="give up compiling the schema after S seconds (default: none)",
    )
    p.add_argument(
        "--no-fast-forward",
        dest="fast_forward",
        action="store_false",
        help="one model call per token (default: forced tokens join the sampled one's call)",
    )
    p.add_argument(
        "--speculate",
        choices=("auto", "on", "off"),
        default="auto",
        help="verify drafts copied from the prompt (its words also as a JSON string spells them) "
        "in the same model call (auto: on for GPU/TPU, where wider calls are nearly free; off on "
        "CPU, where they cost more than the 5-16%% of calls they save; BENCHMARKS.md)",
    )
    p.add_argument(
        "--call-costs",
        metavar="FILE",
        help="with speculation: the model calls' measured costs on this device, the JSON "
        "benchmarks/speculative_costs.py writes (the width policy prices each call from it "
        "instead of its hand-set constants; see docs/speculative.md)",
    )
    args = p.parse_args(argv)
    for name in ("batch_size", "max_new_tokens", "max_prompt_tokens"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: expected >= 1, got {getattr(args, name)}")
    if args.compile_timeout is not None and not args.compile_timeout > 0:
        p.error(f"--compile-timeout: expected > 0, got {args.compile_timeout}")
    if args.temperature < 0:
        p.error(f"--temperature: expected >= 0, got {args.temperature}")
    if args.model is None:
        args.model = DEFAULT_MODEL
    if args.model == "tiny" and args.checkpoint:
        p.error("--checkpoint needs --model gemma3-270m or gemma3-1b (tiny has random weights)")
    if args.model == "gemma3-1b" and not args.checkpoint:
        p.error(f"--model {args.model} needs --checkpoint (a GGUF file or HF safetensors folder)")
    return args


def main(argv: list[str] | None = None) -> int:
    """Runs the job; returns the exit status (0 done, 2 bad input/options, 130 interrupted)."""
    args = parse_args(argv)
    with plain_warnings():
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except (AutomataError, OSError, ImportError) as e:
        print(error_line(e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: finished batches are saved; rerun the same command to resume",
            file=sys.stderr,
        )
        return 130


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from automata_jax import _assets

    schema_path = Path(args.schema) if args.schema else _assets.data_path("person.json")
    input_path = Path(args.input) if args.input else _assets.example_docs_path()
    output_path = Path(args.output)

    # Everything is checked before the output file is created, cheap checks first so that
    # a typo fails before any model work; nothing at all is written before the schema
    # compiles (then its tables are cached, before the model's weights load).
    schema = _prep.load_schema(schema_path)
    summary = _io.scan_input(input_path, text_field=args.text_field)
    template = _prompt_template(args, schema)
    log = OutputLog.inspect(output_path)
    _warn_duplicates(summary.duplicate_ids)
    share = getattr(args, "share", None)  # (process, processes): automata_jax.extract.hosts
    keys = {k for k in summary.keys if in_share(k[0], share)}
    if log.done:
        _log(f"resume: {len(log.done & keys)} record(s) already in {output_path} are skipped")
    stale = len(log.done - keys)
    if stale:
        _log(
            f"warning: {stale} line(s) of {output_path} match no line of {input_path} "
            "(written for another input, or the input changed); they are kept"
        )
    todo = len(keys - log.done)
    if not todo:  # no need to build a model
        _report(_Stats(), output_path, empty=not keys)
        return 0

    t0 = time.perf_counter()
    from automata_jax.extract import _run as run

    vocab = run.load_vocabulary(args)
    t_vocab = time.perf_counter()
    cache_dir = (
        None if args.no_cache else Path(args.cache_dir or output_path.parent / ".automata_cache")
    )
    dfa, artifact, hit = _prep.compile_schema_cached(
        schema,
        vocab,
        cache_dir,
        name=schema_path.stem,
        strict=not args.lenient,
        timeout_s=args.compile_timeout,
        progress=False if args.no_progress else None,
        **SCHEMA_OPTIONS,
    )
    t_compile = time.perf_counter()
    if cache_dir is not None:
        _enable_xla_cache(cache_dir / "xla")
    runner = run.Runner.create(args, vocab)
    runner.set_constraint(dfa)
    t_model = time.perf_counter()
    _log(
        f"model: {runner.description} ({t_model - t_compile:.1f} s); "
        f"schema: {dfa.num_states} states, {dfa.num_classes} classes, "
        + (f"loaded from {artifact}" if hit else f"compiled in {t_compile - t_vocab:.1f} s")
        + f"; prompt: {template.name}"
    )
    compile_before = _xla_compile_seconds()
    runner.set_prefix(template.prefix_ids(vocab))  # the prompts' shared start, run once
    with log.open():
        if log.torn_bytes:
            _log(
                f"resume: dropped a torn last line ({log.torn_bytes} bytes) from "
                f"{output_path}; that record is redone"
            )
        stats = _process(args, runner, template, schema, input_path, log, len(keys), todo)
    stats.load_s = (t_vocab - t0) + (t_model - t_compile)
    stats.schema_s = t_compile - t_vocab
    stats.compile_s, stats.cache_hits = (
        a - b for a, b in zip(_xla_compile_seconds(), compile_before, strict=True)
    )
    _report(stats, output_path)
    return 0


def _prompt_template(args, schema) -> _prep.PromptTemplate:
    """``--prompt-template``; else the tiny model's plain prompt; else a GGUF's chat template
    (for an instruction-tuned model) around the bundled user message; else, for a base model,
    a few-shot prompt (the bundled examples for the bundled schema, else field names only).

    No default shows the schema's annotations (title, description, bounds): a small model
    copies them into values (``"name": "Person"``, ``"age": 130``); the constraint enforces
    the schema anyway.
    """
    from automata_jax import _assets
    from automata_jax.extract import _run as run

    prep = _prep
    if args.prompt_template:
        return prep.PromptTemplate.from_file(args.prompt_template)
    if args.model == "tiny":
        return prep.PromptTemplate.from_file(_assets.data_path("prompt.txt"))
    ckpt = run.resolve_checkpoint(args)
    chat = run.chat_template(args)
    if chat is not None:
        user = _assets.data_path("prompt_chat_user.txt").read_text("utf-8")
        return prep.PromptTemplate(prep.chat_prompt(chat, user), f"chat template of {ckpt.name}")
    if not run.is_gguf(ckpt):  # a HF instruction-tuned checkpoint (gemma-3-1b-it)
        return prep.PromptTemplate.from_file(_assets.data_path("prompt_gemma.txt"))
    bundled = schema == _assets.example_schema()
    name = "prompt_base.txt" if bundled else "prompt_base_generic.txt"
    return prep.PromptTemplate.from_file(_assets.data_path(name))


_XLA_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_xla_totals = [0.0, 0]  # seconds tracing + lowering + compiling (or reading the cache), hits


def _xla_compile_seconds() -> tuple[float, int]:
    """Seconds JAX spent tracing, lowering and compiling in this process so far, and
    persistent-cache hits (a listener on `jax.monitoring`, registered on first use)."""
    import jax

    if not getattr(_xla_compile_seconds, "registered", False):

        def on_duration(event: str, seconds: float, **_: Any) -> None:
            if event in _XLA_EVENTS:
                _xla_totals[0] += seconds

        def on_event(event: str, **_: Any) -> None:
            if event == "/jax/compilation_cache/cache_hits":
                _xla_totals[1] += 1

        jax.monitoring.register_event_duration_secs_listener(on_duration)
        jax.monitoring.register_event_listener(on_event)
        _xla_compile_seconds.registered = True
    return _xla_totals[0], _xla_totals[1]


def _warn_duplicates(duplicates: dict) -> None:
    if not duplicates:
        return
    first_id, lines = next(iter(duplicates.items()))
    shown = ", ".join(map(str, lines[:5])) + (", ..." if len(lines) > 5 else "")
    _log(
        f"warning: {len(duplicates)} id(s) appear on more than one input line (e.g. "
        f"{first_id!r} on lines {shown}); every line is still processed and gets its own "
        "output line (resume follows line numbers, not ids)"
    )


def _enable_xla_cache(path: Path) -> None:
    """Persists compiled XLA programs, so a rerun (a resume) skips the loop's compilation.

    Leaves a cache directory the user configured alone. JAX fixes the directory at its
    first compilation, so in one process only the first job's directory is used.
    """
    import jax

    if jax.config.jax_compilation_cache_dir is None:
        jax.config.update("jax_compilation_cache_dir", str(path))
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


class _Stats:
    def __init__(self):
        self.records = 0
        self.ok = 0
        self.errors = 0
        self.tokens = 0
        self.model_calls = 0
        self.drafted = 0
        self.drafts_accepted = 0
        self.speculate = False
        self.batches = 0
        self.first_batch_s = 0.0
        self.first_batch_records = 0
        self.first_batch_tokens = 0
        self.seconds = 0.0
        self.load_s = 0.0  # tokenizer and weights
        self.schema_s = 0.0  # compiling the schema, or reading its cached tables
        self.compile_s = 0.0  # JAX tracing + lowering + XLA compiling (or cache reads)
        self.cache_hits = 0  # XLA programs read from the persistent cache


def _process(args, runner, template, schema, input_path, log, total, todo) -> _Stats:
    from tqdm import tqdm

    schema_json = json.dumps(schema, ensure_ascii=False)
    share = getattr(args, "share", None)
    fields = _prep.schema_fields(schema)
    validator = _prep.schema_validator(schema)
    stats = _Stats()
    stats.speculate = runner.speculate
    bar = tqdm(
        total=total,
        initial=total - todo,
        unit="rec",
        desc="extract",
        file=sys.stderr,
        disable=args.no_progress,
        dynamic_ncols=True,
    )
    pending: list[tuple[Record, list[int] | None]] = []
    start = time.perf_counter()

    def flush() -> None:
        if not pending:
            return
        t = time.perf_counter()
        results = _run_batch(args, runner, pending, validator, stats)
        log.append(results)
        if stats.batches == 0:
            stats.first_batch_s = time.perf_counter() - t
            stats.first_batch_records, stats.first_batch_tokens = stats.records, stats.tokens
        stats.batches += 1
        bar.update(len(results))
        bar.set_postfix(ok=stats.ok, err=stats.errors, refresh=False)
        pending.clear()

    with bar:
        for record in read_records(input_path, text_field=args.text_field):
            if record.key in log.done or not in_share(record.line, share):
                continue
            ids = None
            if record.error is None:
                ids = template.encode(
                    runner.vocab,
                    text=record.text,
                    schema_json=schema_json,
                    record_id=record.id,
                    fields=fields,
                )
            pending.append((record, ids))
            if sum(ids is not None for _, ids in pending) >= args.batch_size:
                flush()
        flush()
    stats.seconds = time.perf_counter() - start
    return stats


def _run_batch(args, runner, pending, validator, stats) -> list[dict[str, Any]]:
    """Generates for the batch's good records; returns result lines in input order."""
    results: dict[int, dict[str, Any]] = {}
    todo = []
    for i, (record, ids) in enumerate(pending):
        if record.error is not None:
            results[i] = result_line(record, {"ok": False, "error": record.error})
        elif len(ids) > args.max_prompt_tokens:
            error = (
                f"prompt is {len(ids)} tokens, over --max-prompt-tokens {args.max_prompt_tokens}"
            )
            results[i] = result_line(record, {"ok": False, "error": error})
        else:
            todo.append((i, record, ids))
    if todo:
        outputs = runner.generate([ids for _, _, ids in todo], seed_offset=todo[0][1].line)
        for (i, record, _), out in zip(todo, outputs, strict=True):
            stats.tokens += out.num_tokens
            stats.model_calls += out.model_calls
            stats.drafted += out.drafted
            stats.drafts_accepted += out.drafts_accepted
            results[i] = result_line(record, _result(out, runner.vocab, validator))
    for r in results.values():
        stats.records += 1
        stats.ok += bool(r["ok"])
        stats.errors += not r["ok"]
    return [results[i] for i in range(len(pending))]


def _result(out, vocab, validator) -> dict[str, Any]:
    if out.error is not None:
        return {"ok": False, "error": out.error, "tokens": out.num_tokens}
    raw = vocab.decode(out.tokens)
    if not out.finished:  # the text so far says where it ran long (a list, a string)
        text = raw.decode("utf-8", "replace")
        return {"ok": False, "error": LIMIT_ERROR, "tokens": out.num_tokens, "text": text}
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:  # a compiler bug if ever reached
        return {"ok": False, "error": f"generated text is not JSON ({e}): {raw!r}"}
    error = _prep.first_error(validator, obj)
    if error is not None:  # only --lenient (keywords not enforced) can get here
        return {
            "ok": False,
            "error": f"object does not validate: {error[1]} at {error[0]}",
            "text": raw.decode(),
        }
    return {"ok": True, "object": obj, "tokens": out.num_tokens}


def _report(stats: _Stats, output_path: Path, *, empty: bool = False) -> None:
    if empty:
        _log("nothing to do: the input has no records")
        return
    if stats.records == 0:
        _log(f"nothing to do: every input record is already in {output_path}")
        return
    secs = max(stats.seconds, 1e-9)
    line = (
        f"done: {stats.records} record(s) ({stats.ok} ok, {stats.errors} error) in {secs:.1f} s: "
        f"{stats.records / secs:.2f} records/s, {stats.tokens / secs:.0f} tokens/s"
    )
    _log(line + f" -> {output_path}")
    _log(
        f"per record: {stats.tokens / stats.records:.1f} tokens, "
        f"{stats.model_calls / stats.records:.1f} model calls"
    )
    if stats.speculate:
        calls = max(stats.model_calls, 1)
        _log(
            f"speculation: {stats.drafted / calls:.2f} drafted and "
            f"{stats.drafts_accepted / calls:.2f} accepted tokens per model call"
        )
    _log(
        f"time: load {stats.load_s:.1f} s, schema {stats.schema_s:.1f} s, XLA compile "
        f"{stats.compile_s:.1f} s ({stats.cache_hits} program(s) from the persistent cache), "
        f"generation {max(secs - stats.compile_s, 0.0):.1f} s"
    )
    if stats.batches > 1:  # the first batch pays for XLA compilation
        steady = max(secs - stats.first_batch_s, 1e-9)
        _log(
            f"after the first batch ({stats.first_batch_s:.1f} s, includes XLA compilation): "
            f"{(stats.records - stats.first_batch_records) / steady:.2f} records/s, "
            f"{(stats.tokens - stats.first_batch_tokens) / steady:.0f} tokens/s"
        )
