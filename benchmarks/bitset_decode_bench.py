"""Decode overhead of bitset any-order tables in `generate`, beside the plain token-DFA tables.

Llama-3 vocabulary (128,256 ids), the near-free `FakeModel` (the worst case for constraint
overhead: the step is almost all mask and advance) or the tiny random-weight Gemma-3 model
(``--model tiny``). Per schema, tables: **bitset** (`ConstraintTables.from_bitset` of
`compile_json_schema_bitset`), **any** (`compile_json_schema` defaults: exact any order, or
declared order for an object past the budget) and **declared**, each with fast-forward off;
``any`` also with ``fast_forward=True``. Temperature-1 sampling of B rows with one rng key,
``--tokens`` new tokens; each loop is compiled once, then timed ``--repeats`` times
interleaved (median ms per step = wall time / the longest row). The outputs of bitset and any
are compared: with equal masks the samples are equal, so they match where any kept any order
everywhere (the same language).

Run: ``python benchmarks/bitset_decode_bench.py [--schemas github-issue-config.json,changie.json]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import machine  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax import testing  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemas", default="github-issue-config.json,changie.json")
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", choices=("fake", "tiny"), default="fake")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    vocab = ac.Vocabulary.from_file(scb.TOKENIZERS / "llama3" / "tokenizer.json")
    if args.model == "fake":
        model = testing.FakeModel(vocab_size=vocab.size)
        params = model.init_params()
    else:
        model, params = testing.tiny_model(vocab.size)
    print(machine(), file=sys.stderr)
    store = scb.schemastore_schemas()
    for name in args.schemas.split(","):
        schema = store[name]
        t0 = time.perf_counter()
        bt = ac.compile_json_schema_bitset(schema, vocab)
        tables = {"bitset": aj.ConstraintTables.from_bitset(bt, vocab_size=vocab.size)}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            anyd = ac.compile_json_schema(schema, vocab)
        fell_back = any(issubclass(w.category, ac.OrderFallbackWarning) for w in caught)
        tables["any"] = aj.ConstraintTables.from_dfas([anyd], vocab_size=vocab.size)
        decl = ac.compile_json_schema(schema, vocab, property_order="declared")
        tables["declared"] = aj.ConstraintTables.from_dfas([decl], vocab_size=vocab.size)
        print(f"\n{name}: compiled in {time.perf_counter() - t0:.1f} s; any fell back: {fell_back}")
        for k, t in tables.items():
            print(f"  {k}: {t!r}")
        for b in (int(x) for x in args.batches.split(",")):
            prompts, mask = aj.pad_prompts([[1, 100 + i] for i in range(b)])
            ids = np.zeros(b, np.int32)
            runs = [(k, t, False) for k, t in tables.items()] + [("any ff", tables["any"], True)]

            def go(t, ff, prompts=prompts, mask=mask, ids=ids):
                return aj.generate(
                    model.apply_step, params, prompts, t, ids, sampler=aj.Temperature(1.0),
                    max_new_tokens=args.tokens, rng=jax.random.key(0), prompt_mask=mask,
                    cache=model.init_cache, fast_forward=ff,
                )  # fmt: skip

            outs = {k: go(t, ff) for k, t, ff in runs}  # compile
            times = {k: [] for k, _, _ in runs}
            for _ in range(args.repeats):
                for k, t, ff in runs:
                    t1 = time.perf_counter()
                    jax.block_until_ready(go(t, ff).tokens)
                    times[k].append(time.perf_counter() - t1)
            same = np.array_equal(np.asarray(outs["bitset"].tokens), np.asarray(outs["any"].tokens))
            cells = []
            for k, _, _ in runs:
                steps = int(np.asarray(outs[k].lengths).max())
                ms = statistics.median(times[k]) * 1e3
                cells.append(f"{k} {ms / max(steps, 1):.2f} ms/step ({steps} steps, {ms:.0f} ms)")
            print(f"  B={b}: " + "; ".join(cells) + f"; bitset == any: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
