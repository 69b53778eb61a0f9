"""Speculative decoding on the real Gemma-3 270M: fast-forward alone vs fast-forward + drafts.

Both loops run on the same batches, interleaved batch by batch (the order alternates), in
one process, greedy, so machine noise hits both alike and outputs must be identical. Sets:

* ``extract``: the job's bundled documents (``automata_jax/data/docs.jsonl``), the job's
  prompt (``prompt_gemma.txt``) and schema (``person.json``), compiled as the job does;
* ``heldout``: the held-out labelled extraction set (``benchmarks/data/extract_heldout.jsonl``),
  same prompt and schema; nothing was tuned on it;
* ``bfcl``: BFCL ``simple_python`` (the first ``--bfcl-cases`` whose parameter schema
  compiles, after skipping ``--bfcl-skip`` such cases: the reported set is the first 8,
  a policy is decided on the next 8, ``--bfcl-skip 8``): the output is the call's
  arguments as JSON under that function's schema;
* ``free``: unconstrained free text from prompts with nothing to copy.

Figures per set and loop: model calls per record (prefill included), generated tokens
per record, drafted / accepted tokens per model call, records/s (total time of the timed
batches, each batch's median of ``--repeats`` interleaved runs; the first batch of each set
is run once untimed to compile), records per CPU second (process time, the same medians:
steadier than wall time on a shared machine), and the ratios.

``--breakdown`` also says where each loop's calls go per record, without touching the runtime:
each batch is replayed with an *oracle* model (`OracleModel`: its logits at a position are
one-hot at the token the real run emitted next, so greedy decoding retraces the real run:
same drafts, same acceptances, same policy choices; checked) whose step records what each
call fed (a ``jax.debug.callback`` in the bench's fake model, not in the loop). Each call a
row fed is then sorted by what it did (`CATEGORIES`).

Run: ``python benchmarks/speculative_bench.py [--sets extract,heldout,bfcl,free]``
Writes ``benchmarks/results/speculative.json`` (or ``--output``) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "compile")]

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax import _generate  # noqa: E402
from automata_jax._tables import bucket  # noqa: E402
from automata_jax.extract._prep import PromptTemplate  # noqa: E402
from automata_jax.models import Gemma3, default_cache_dir, default_gguf_path, load_gguf  # noqa: E402

OPTIONS = {"whitespace": "compact", "property_order": "declared"}  # the job's SCHEMA_OPTIONS
FREE_PROMPTS = [
    "Write a short poem about the sea at night.",
    "Explain in a few sentences why the sky is blue.",
    "Give three tips for learning to play the guitar.",
    "Describe your ideal weekend in a paragraph.",
    "What are the benefits of drinking water? Answer briefly.",
    "Tell a very short story about a dragon who cannot fly.",
    "Summarize the plot of a detective novel you invent.",
    "List some good habits for staying healthy.",
]
TURN = "<start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"
CATEGORIES = {
    "prefill": "the prompt's call",
    "start_run": 'feeds only the start state\'s forced run (e.g. `{"name":"`)',
    "forced_run": "feeds only a forced run elsewhere (one that did not fit the previous call)",
    "no_draft": "a chosen token and its forced run, nothing drafted after it",
    "rejected_first": "a draft whose first token the model rejected",
    "rejected_later": "a draft kept in part",
    "kept_all": "a draft kept whole",
}


@struct.dataclass(kw_only=True)
class OracleCache:
    """The oracle's cache: only what the loops read (valid slots, the next slot)."""

    valid: jax.Array  # bool[B, S]
    end_index: jax.Array  # int32[]


@dataclasses.dataclass(frozen=True)
class OracleModel:
    """Logits one-hot at ``params["target"][row, position + 1]``: the token the real run put
    after each position (prompt and output, indexed by position). Each call's fed tokens,
    positions and mask go to ``sink`` (a host list) through ``jax.debug.callback``."""

    vocab_size: int
    sink: list = dataclasses.field(default_factory=list, compare=False, hash=False)

    def init_cache(self, batch_size, max_length):
        return OracleCache(
            valid=jnp.zeros((batch_size, max_length), bool), end_index=jnp.zeros((), jnp.int32)
        )

    def apply_step(self, params, tokens, positions, input_mask, cache, logits_at=None):
        jax.debug.callback(
            lambda *a: self.sink.append(tuple(np.asarray(x) for x in a)),
            tokens, positions, input_mask,
        )  # fmt: skip
        if logits_at is None:
            at = jnp.broadcast_to(jnp.arange(tokens.shape[1])[None], tokens.shape)
        else:
            at = logits_at if logits_at.ndim == 2 else logits_at[:, None]
        pos = jnp.take_along_axis(positions, at, axis=1) + 1
        target = jnp.take_along_axis(
            params["target"], jnp.clip(pos, 0, params["target"].shape[1] - 1), axis=1
        )
        logits = jax.nn.one_hot(target, self.vocab_size, dtype=jnp.float32)
        valid = jax.lax.dynamic_update_slice(cache.valid, input_mask, (0, cache.end_index))
        return logits, cache.replace(valid=valid, end_index=cache.end_index + tokens.shape[1])


@dataclasses.dataclass(frozen=True)
class _WritesInBranch:
    """``model.apply_step`` as the loops called it before session 12: it writes its cache
    inside the loops' ``lax.switch`` over call widths (`automata_jax._loop.switch_calls`)."""

    model: Any
    takes_logits_at = True
    defers_cache_write = False

    def __call__(self, params, tokens, positions, input_mask, cache, logits_at=None):
        return self.model.apply_step(params, tokens, positions, input_mask, cache, logits_at)


def _lead(on: bool):
    """A context in which `generate` feeds the start's forced run with the prompt (``on``, the
    default) or, as before it did, in a call of its own (the bench patches the width)."""
    if on:
        return contextlib.nullcontext()
    return mock.patch.object(_generate, "_lead_width", lambda *args: 0)


def forced_flags(tables, cid, out):
    """bool per output token: whether the state before it forces a run (host walk; DFAs)."""
    if cid < 0 or tables.forced_len is None:
        return np.zeros(len(out), bool)
    cls = np.asarray(tables.token_class[cid])
    nxt = np.asarray(tables.next_state[cid])
    flen = np.asarray(tables.forced_len[cid])
    q, flags = int(tables.start[cid]), []
    for tok in out:
        flags.append(q >= 0 and flen[q] > 0)
        q = int(nxt[q, cls[tok]]) if q >= 0 else -1
    return np.asarray(flags, bool)


def breakdown(model, tables, tokens, mask, cids, out, kw, n, max_new_tokens, vocab, examples):
    """Replays one batch with the oracle; returns ({category: calls} summed over the first
    ``n`` rows, whether the replay matched the real run (tokens and calls))."""
    b, t = tokens.shape
    lengths = np.asarray(out.lengths + out.accepted)
    prompt_len = mask.sum(1)
    target = np.zeros((b, t + max_new_tokens + 2), np.int32)
    for r in range(b):
        seq = list(tokens[r][mask[r]]) + list(out.tokens[r][: lengths[r]])
        target[r, : len(seq)] = seq
    model.sink.clear()
    kw, lead = kw
    with _lead(lead):
        replay = aj.generate(
            model.apply_step, {"target": jnp.asarray(target)}, tokens, tables, cids,
            sampler=aj.Greedy(), max_new_tokens=max_new_tokens, rng=jax.random.key(0),
            prompt_mask=mask, cache=model.init_cache, **kw,
        )  # fmt: skip
        replay = jax.device_get(replay)
    same = bool(
        (replay.tokens == out.tokens).all() and (replay.model_calls == out.model_calls).all()
    )
    counts = dict.fromkeys(CATEGORIES, 0)
    for r in range(n):
        seq = out.tokens[r][: lengths[r]]
        forced = np.append(forced_flags(tables, int(cids[r]), seq), False)
        for fed_tokens, fed_pos, fed_mask in model.sink:
            if fed_tokens.shape[1] >= t:  # the prompt (and the start's run, fed with it)
                counts["prefill"] += 1
                continue
            cols = np.flatnonzero(fed_mask[r])
            if not len(cols):
                continue
            i0 = int(fed_pos[r, cols[0]]) - int(prompt_len[r])
            fed = fed_tokens[r, cols]
            w = len(fed)
            if forced[min(i0, len(seq))]:
                head = w  # a run with no choice before it
                counts["start_run" if i0 == 0 else "forced_run"] += 1
                continue
            head = 1
            while head < w and i0 + head < len(seq) and forced[i0 + head]:
                head += 1
            d = w - head
            m = 0
            while m < d and i0 + head + m < len(seq) and fed[head + m] == seq[i0 + head + m]:
                m += 1
            kind = (
                "no_draft" if d == 0 else
                "rejected_first" if m == 0 else "rejected_later" if m < d else "kept_all"
            )  # fmt: skip
            counts[kind] += 1
            if kind in ("no_draft", "rejected_first") and len(examples[kind]) < 12:
                nxt = i0 + head + m
                text = lambda ids: b"".join(vocab.tokens[i] or b"" for i in ids).decode(  # noqa: E731
                    "utf-8", "replace"
                )
                examples[kind].append(
                    f"{text(seq[max(0, nxt - 6) : nxt])!r} -> chose {text(seq[nxt : nxt + 1])!r}"
                    + (f", draft {text(fed[head:])!r}" if d else "")
                )
    return counts, same


def _bfcl_schema(node):
    """BFCL's parameter dialect ("dict", "float", "tuple", "any") as JSON Schema."""
    if isinstance(node, list):
        return [_bfcl_schema(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "type":
            mapped = {"dict": "object", "float": "number", "tuple": "array"}.get(value, value)
            if mapped != "any":
                out["type"] = mapped
        elif key in ("description", "default", "optional"):
            continue
        else:
            out[key] = _bfcl_schema(value)
    return out


def load_sets(names, vocab, n_bfcl, bfcl_skip=0):
    """{set: (prompts [token ids], constraint ids, dfas)}."""
    data = ROOT / "automata_jax" / "data"
    template = PromptTemplate.from_file(data / "prompt_gemma.txt")
    schema = json.loads((data / "person.json").read_text())
    sets = {}
    for name in names:
        if name in ("extract", "heldout"):
            path = (
                data / "docs.jsonl"
                if name == "extract"
                else ROOT / "benchmarks/data/extract_heldout.jsonl"
            )
            docs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            prompts = [
                template.encode(
                    vocab, text=d["text"], schema_json=json.dumps(schema), record_id=d["id"]
                )
                for d in docs
            ]
            dfa = ac.compile_json_schema(schema, vocab, **OPTIONS)
            sets[name] = (prompts, [0] * len(prompts), [dfa])
        elif name == "bfcl":
            import importlib.util

            base = Path(
                next(iter(importlib.util.find_spec("bfcl_eval").submodule_search_locations))
            )
            lines = (base / "data" / "BFCL_v4_simple_python.json").read_text().splitlines()
            prompts, dfas, skipped = [], [], 0
            for line in lines:
                case = json.loads(line)
                fn = case["function"][0]
                params = _bfcl_schema(fn["parameters"])
                params["additionalProperties"] = False
                try:
                    dfa = ac.compile_json_schema(params, vocab, **OPTIONS)
                except Exception:  # noqa: BLE001  (a dialect corner we do not map: skip the case)
                    continue
                if skipped < bfcl_skip:
                    skipped += 1
                    continue
                question = case["question"][0][0]["content"]
                text = (
                    f"Call the function {fn['name']}: {fn['description']}\n"
                    f"Its parameters: {json.dumps(fn['parameters'])}\n\nRequest: {question}\n"
                    "Reply with the arguments as one JSON object."
                )
                prompts.append([vocab.bos_id] + vocab.encode(TURN.format(text)))
                dfas.append(dfa)
                if len(prompts) == n_bfcl:
                    break
            sets[name] = (prompts, list(range(len(prompts))), dfas)
        elif name == "free":
            prompts = [[vocab.bos_id] + vocab.encode(TURN.format(p)) for p in FREE_PROMPTS]
            dfa = ac.compile_json_schema(schema, vocab, **OPTIONS)  # unused: rows are -1
            sets[name] = (prompts, [-1] * len(prompts), [dfa])
    return sets


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="extract,heldout,bfcl,free")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--bfcl-cases", type=int, default=8)
    parser.add_argument(
        "--bfcl-skip", type=int, default=0, help="skip this many compiling BFCL cases first"
    )
    parser.add_argument("--limit", type=int, default=0, help="at most this many records per set")
    parser.add_argument(
        "--loops",
        default="ff,ff+copy+keys,ff+spec+keys,ff+spec_eager+keys",
        help="the loops to compare (ff, the baseline, always)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1,
        help="time each batch this many times per loop, interleaved (records/s from medians)",
    )  # fmt: skip
    parser.add_argument(
        "--breakdown", action="store_true", help="where each loop's calls go (oracle replay)"
    )
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/speculative.json"))
    parser.add_argument(
        "--call-costs", default=str(ROOT / "benchmarks/results/speculative_costs.json"),
        help="the measured call costs for the _cal loops (benchmarks/speculative_costs.py)",
    )  # fmt: skip
    args = parser.parse_args(argv)

    path = default_gguf_path()
    vocab = ac.Vocabulary.from_gguf(path)
    config, params = load_gguf(path, cache_dir=default_cache_dir())
    model = Gemma3(config)
    cache_fn = functools.partial(model.init_cache, dtype=params["embed_tokens"].dtype)
    eager = aj.Speculate(slot_cost=0.0, logit_cost=0.0)  # drafts whenever a row has one
    no_exits = aj.Speculate(exit_drafts=False)  # drafts that only copy (before exit drafts)
    eager_no_exits = aj.Speculate(slot_cost=0.0, logit_cost=0.0, exit_drafts=False)
    no_lone = aj.Speculate(lone_exits=False)  # exits only where a copy stops
    eager_no_lone = aj.Speculate(slot_cost=0.0, logit_cost=0.0, lone_exits=False)
    loops = {
        "ff": dict(fast_forward=True),
        "ff+copy+keys": dict(fast_forward=True, speculate=no_exits, keys=True),
        "ff+copy_eager+keys": dict(fast_forward=True, speculate=eager_no_exits, keys=True),
        "ff+spec": dict(fast_forward=True, speculate=True),
        "ff+spec_eager": dict(fast_forward=True, speculate=eager),
        "ff+spec+keys": dict(fast_forward=True, speculate=True, keys=True),
        "ff+spec_eager+keys": dict(fast_forward=True, speculate=eager, keys=True),
        "ff+spec+lckeys": dict(fast_forward=True, speculate=True, keys="lowercase"),
        "ff+spec_nolone+lckeys": dict(fast_forward=True, speculate=no_lone, keys="lowercase"),
        "ff+spec_eager_nolone+lckeys": dict(
            fast_forward=True, speculate=eager_no_lone, keys="lowercase"
        ),
        # As before the start's forced run went in with the prompt (its own call):
        "ff_own_lead": dict(fast_forward=True, lead=False),
        "ff+spec_eager+lckeys_own_lead": dict(
            fast_forward=True, speculate=eager, keys="lowercase", lead=False
        ),
        "ff+spec_eager+lckeys": dict(fast_forward=True, speculate=eager, keys="lowercase"),
        # As before copies were skipped at the constraint's structure (`structure_copies`):
        "ff+spec+lckeys_structcopy": dict(
            fast_forward=True, speculate=aj.Speculate(structure_copies=True), keys="lowercase"
        ),
        "ff+spec_eager+lckeys_structcopy": dict(
            fast_forward=True,
            speculate=aj.Speculate(slot_cost=0.0, logit_cost=0.0, structure_copies=True),
            keys="lowercase",
        ),
        # With bare spellings (`aj.bare_spellings`: ``Ber`` drafts ``gen`` from `` Bergen``):
        "ff+spec+lcspell": dict(fast_forward=True, speculate=True, keys="spell"),
        # Structural drafts (`Speculate.structure_drafts`: ``":"`` after a key; the default
        # since session 12, so ff+spec+lcspell has them too) and the loop without them:
        "ff+spec_struct+lcspell": dict(
            fast_forward=True, speculate=aj.Speculate(structure_drafts=True), keys="spell"
        ),
        "ff+spec_nostruct+lcspell": dict(
            fast_forward=True, speculate=aj.Speculate(structure_drafts=False), keys="spell"
        ),
        "ff+spec_eager+lcspell": dict(fast_forward=True, speculate=eager, keys="spell"),
        # Speculative calls with 3 logit slots too (cheaper where the drafts need fewer):
        "ff+spec_slots+lcspell": dict(
            fast_forward=True, speculate=aj.Speculate(logit_slots=(3, 5)), keys="spell"
        ),
        "ff+spec_slots235+lcspell": dict(
            fast_forward=True, speculate=aj.Speculate(logit_slots=(2, 3, 5)), keys="spell"
        ),
        "ff+spec_eager_slots+lcspell": dict(
            fast_forward=True,
            speculate=aj.Speculate(slot_cost=0.0, logit_cost=0.0, logit_slots=(3, 5)),
            keys="spell",
        ),
        # The speculative loop's own overhead: its branches never win (no draft is fed).
        "ff+spec_never+lcspell": dict(
            fast_forward=True,
            speculate=aj.Speculate(prior_accepted=1e-6, prior_drafted=1e6),
            keys="spell",
        ),
    }
    costs_path = Path(args.call_costs)
    if costs_path.exists():  # the measured costs (`speculative_costs.py`), for the _cal loops
        measured = tuple(tuple(c) for c in json.loads(costs_path.read_text())["call_costs"])
        cal = aj.Speculate(call_costs=measured)
        cal_slots = aj.Speculate(call_costs=measured, logit_slots=(3, 5))
        loops["ff+spec_cal+lcspell"] = dict(fast_forward=True, speculate=cal, keys="spell")
        loops["ff+spec_cal_slots+lcspell"] = dict(
            fast_forward=True, speculate=cal_slots, keys="spell"
        )
    # The loops before session 12: the step writes its cache inside the switch over widths.
    loops["ff@branch"] = dict(fast_forward=True, step="branch")
    loops["ff+spec+lcspell@branch"] = dict(
        fast_forward=True, speculate=True, keys="spell", step="branch"
    )
    chosen = [k for k in args.loops.split(",") if k]
    unknown = sorted(set(chosen) - set(loops))
    if unknown or "ff" not in chosen:
        parser.error(f"--loops: expected ff and some of {sorted(loops)}, got {args.loops!r}")
    loops = {k: loops[k] for k in chosen}
    twins = aj.bare_twins(vocab.tokens)  # the draft lookup's alternate spellings (host side)
    twins_lc = aj.bare_twins(vocab.tokens, lowercase_stops=True)  # + stops before a lowercase word
    sets = load_sets(args.sets.split(","), vocab, args.bfcl_cases, args.bfcl_skip)
    if args.limit:
        sets = {k: (p[: args.limit], i[: args.limit], d) for k, (p, i, d) in sets.items()}
    # One prompt length for every set: sets whose tables have one shape share compilations.
    length = bucket(max(len(p) for prompts, _, _ in sets.values() for p in prompts), 64)
    compiled, results = set(), {}
    oracle = OracleModel(config.vocab_size)
    for name, (prompts, ids, dfas) in sets.items():
        tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=config.vocab_size)
        shape = (jax.tree.structure(tables), tuple(np.shape(x) for x in jax.tree.leaves(tables)))
        warm = shape not in compiled  # run the first batch once, untimed, to compile
        compiled.add(shape)
        stats = {
            k: dict(calls=0, tokens=0, drafted=0, accepted=0, seconds=0.0, records=0) for k in loops
        }
        same = 0
        split = {k: dict.fromkeys(CATEGORIES, 0) for k in loops}
        examples = {k: {"no_draft": [], "rejected_first": []} for k in loops}
        replayed = True
        batches = [
            list(range(i, min(i + args.batch, len(prompts))))
            for i in range(0, len(prompts), args.batch)
        ]
        for number, rows in enumerate(([batches[0]] if warm else []) + batches, start=1 - warm):
            full = rows + [rows[0]] * (args.batch - len(rows))
            tokens, mask = aj.pad_prompts([prompts[r] for r in full], length=length)
            cids = np.asarray([ids[r] for r in full], np.int32)
            outs, kws, times = {}, {}, {k: [] for k in loops}
            cpu = {k: [] for k in loops}  # process CPU time: steadier than wall time when shared
            for repeat in range(1 if number == 0 else args.repeats):
                forward = (number + repeat) % 2  # the order alternates
                for loop in list(loops) if forward else list(loops)[::-1]:
                    start, cpu_start = time.perf_counter(), time.process_time()
                    kw = dict(loops[loop])
                    lead = kw.pop("lead", True)
                    step = _WritesInBranch(model) if kw.pop("step", None) else model.apply_step
                    keyed = kw.pop("keys", False)
                    if keyed:  # built on the host with the prompts, as the job does
                        spellings = None
                        if keyed == "spell":
                            spellings = aj.bare_spellings(
                                vocab.tokens, vocab.encode, np.unique(tokens)
                            )
                        kw["draft_keys"] = aj.draft_keys(
                            tokens, twins if keyed is True else twins_lc, spellings
                        )
                    kws[loop] = kw, lead
                    with _lead(lead):
                        out = aj.generate(
                            step, params, tokens, tables, cids, sampler=aj.Greedy(),
                            max_new_tokens=args.max_new_tokens, rng=jax.random.key(0),
                            prompt_mask=mask, cache=cache_fn, **kw,
                        )  # fmt: skip
                        out = jax.device_get(out)
                    times[loop].append(time.perf_counter() - start)
                    cpu[loop].append(time.process_time() - cpu_start)
                    outs[loop] = out
            for loop in loops if number else ():  # number 0: the compile run
                out = outs[loop]
                n = len(rows)
                s = stats[loop]
                s["seconds"] += float(np.median(times[loop]))  # the batch's median
                s.setdefault("batch_seconds", []).append([round(x, 3) for x in times[loop]])
                s["cpu_seconds"] = s.get("cpu_seconds", 0.0) + float(np.median(cpu[loop]))
                s.setdefault("batch_cpu_seconds", []).append([round(x, 3) for x in cpu[loop]])
                s["records"] += n
                s["calls"] += int(out.model_calls[:n].sum())
                s["tokens"] += int((out.lengths[:n] + out.accepted[:n]).sum())
                s["drafted"] += int(out.drafted[:n].sum())
                s["accepted"] += int(out.drafts_accepted[:n].sum())
            if number:
                n = len(rows)
                agree = np.ones(n, bool)
                for k in loops:
                    agree &= (outs["ff"].tokens[:n] == outs[k].tokens[:n]).all(1)
                same += int(agree.sum())
                for k in loops if args.breakdown else ():
                    counts, ok = breakdown(
                        oracle, tables, tokens, mask, cids, outs[k], kws[k], n,
                        args.max_new_tokens, vocab, examples[k],
                    )  # fmt: skip
                    replayed &= ok
                    for c, v in counts.items():
                        split[k][c] += v
                times = ", ".join(f"{k} {stats[k]['seconds']:.1f}s" for k in loops)
                print(f"{name} batch {number}: {times}", flush=True)
        for s in stats.values():
            s["calls_per_record"] = s["calls"] / s["records"]
            s["tokens_per_record"] = s["tokens"] / s["records"]
            s["records_per_s"] = s["records"] / s["seconds"]
            s["records_per_cpu_s"] = s["records"] / s["cpu_seconds"]
            s["drafted_per_call"] = s["drafted"] / s["calls"]
            s["accepted_per_call"] = s["accepted"] / s["calls"]
        base = stats["ff"]
        for s in stats.values():
            s["calls_ratio"] = s["calls_per_record"] / base["calls_per_record"]
            s["speed_ratio"] = s["records_per_s"] / base["records_per_s"]
            s["cpu_speed_ratio"] = s["records_per_cpu_s"] / base["records_per_cpu_s"]
        results[name] = dict(loops=stats, identical_records=same, records=base["records"])
        if args.breakdown:
            for k, s in stats.items():
                s["calls_by_kind"] = {c: v / s["records"] for c, v in split[k].items()}
            results[name].update(replay_matches=replayed, examples=examples)
        print(json.dumps({name: results[name]}), flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(dict(args=vars(args), results=results), indent=1))
    print(
        "| set | loop | calls/record | ratio | tokens/record | records/s | ratio | "
        "records/CPU-s | ratio | drafted/call | accepted/call | identical |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        for loop, s in r["loops"].items():
            print(
                f"| {name} | {loop} | {s['calls_per_record']:.1f} | {s['calls_ratio']:.2f}x | "
                f"{s['tokens_per_record']:.1f} | {s['records_per_s']:.3f} | "
                f"{s['speed_ratio']:.2f}x | {s['records_per_cpu_s']:.3f} | "
                f"{s['cpu_speed_ratio']:.2f}x | {s['drafted_per_call']:.2f} | "
                f"{s['accepted_per_call']:.2f} | {r['identical_records']}/{r['records']} |"
            )
    if args.breakdown:
        print(
            "\nWhere the calls go, per record ("
            + "; ".join(f"{c}: {d}" for c, d in CATEGORIES.items())
            + ")"
        )
        print("| set | loop | " + " | ".join(CATEGORIES) + " | total | replay |")
        print("|---|---|" + "---:|" * (len(CATEGORIES) + 2))
        for name, r in results.items():
            for loop, s in r["loops"].items():
                kinds = s["calls_by_kind"]
                print(
                    f"| {name} | {loop} | "
                    + " | ".join(f"{kinds[c]:.2f}" for c in CATEGORIES)
                    + f" | {sum(kinds.values()):.2f} | {'ok' if r['replay_matches'] else 'DIFFERS'} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
