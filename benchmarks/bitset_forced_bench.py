"""The extraction job's schema on the real model: bitset any-order tables with forced runs
beside the token-DFA tables (declared order, the job's choice; exact any order), fast-forward on.

Real Gemma-3 270M (the job's GGUF, `automata_jax.extract` defaults: its prompt, greedy, batch 8,
speculation as the job picks it on this backend unless ``--speculate``), the first ``--records``
records of the bundled set, the person schema (``automata_jax/data/person.json``, compact
whitespace). Per tables: **declared** (`compile_json_schema(property_order="declared")`: keys
forced, what the job uses), **any** (`compile_json_schema` defaults: exact any order),
**bitset** (`compile_json_schema_bitset`, forced runs through the keys' SET where the key is
the only one left to write, `tokens._bitset_forced`) and **bitset, no runs**
(``max_forced_tokens=0``: the plain loop), and **any** with fast-forward off. Each batch is run once to compile, then
``--repeats`` times interleaved; reports model calls per record, tokens per record, records per
CPU-second (process time, all threads) and per wall second (medians), valid records, and
whether each row's output equals any's.

Run: ``python benchmarks/bitset_forced_bench.py [--records 8] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_util import machine  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax import _assets  # noqa: E402
from automata_jax.extract import _job, _prep  # noqa: E402
from automata_jax.extract import _run as run  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--speculate", choices=("auto", "on", "off"), default="auto")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    print(machine(), file=sys.stderr)
    jargs = _job.parse_args(["--output", "/dev/null", "--speculate", args.speculate])
    schema = _assets.example_schema()
    vocab = run.load_vocabulary(jargs)
    runner = run.Runner.create(jargs, vocab)
    template = _job._prompt_template(jargs, schema)
    schema_json = json.dumps(schema, ensure_ascii=False)
    fields = _prep.schema_fields(schema)
    docs = [json.loads(x) for x in _assets.example_docs_path().read_text().splitlines()]
    docs = docs[: args.records]
    prompts = [
        template.encode(vocab, text=d["text"], schema_json=schema_json, record_id=d.get("id", i),
                        fields=fields)
        for i, d in enumerate(docs)
    ]  # fmt: skip
    runner.set_prefix(template.prefix_ids(vocab))
    v = runner.model.config.vocab_size
    opts = {"whitespace": "compact"}
    t0 = time.perf_counter()
    tables = {
        "declared": aj.ConstraintTables.from_dfas(
            ac.compile_json_schema(schema, vocab, property_order="declared", **opts), vocab_size=v
        ),
        "any": aj.ConstraintTables.from_dfas(ac.compile_json_schema(schema, vocab, **opts),
                                             vocab_size=v),
        "bitset": aj.ConstraintTables.from_bitset(
            ac.compile_json_schema_bitset(schema, vocab, **opts), vocab_size=v
        ),
        "bitset, no runs": aj.ConstraintTables.from_bitset(
            ac.compile_json_schema_bitset(schema, vocab, max_forced_tokens=0, **opts),
            vocab_size=v,
        ),
    }  # fmt: skip
    print(f"compiled in {time.perf_counter() - t0:.1f} s; speculate={runner.speculate}")
    validator = _prep.schema_validator(schema)

    tables["any, fast-forward off"] = tables["any"]

    def go(name):
        runner.tables = tables[name]
        runner.fast_forward = name != "any, fast-forward off"
        out = []
        for i in range(0, len(prompts), runner.batch_size):
            out += runner.generate(prompts[i : i + runner.batch_size], seed_offset=0)
        return out

    outs = {}
    for name in tables:  # compile
        t1 = time.perf_counter()
        outs[name] = go(name)
        print(f"  {name}: first run {time.perf_counter() - t1:.1f} s", flush=True)
    cpu = {k: [] for k in tables}
    wall = {k: [] for k in tables}
    for _ in range(args.repeats):
        for name in tables:
            c0, w0 = time.process_time(), time.perf_counter()
            got = go(name)
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
            assert [o.tokens for o in got] == [o.tokens for o in outs[name]]
    n = len(prompts)
    print(f"\n{n} records, batch {runner.batch_size}, {args.repeats} timed repeats (medians)")
    print("| tables | model calls / record | tokens / record | records / CPU-s | records / s "
          "| valid | same output as any |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in tables:
        o = outs[name]
        valid = 0
        for r in o:
            if r.finished and r.error is None:
                obj = json.loads(vocab.decode(r.tokens).decode())
                valid += _prep.first_error(validator, obj) is None
        same = sum(a.tokens == b.tokens for a, b in zip(o, outs["any"], strict=True))
        print(
            f"| {name} | {statistics.mean(r.model_calls for r in o):.2f} "
            f"| {statistics.mean(r.num_tokens for r in o):.2f} "
            f"| {n / statistics.median(cpu[name]):.3f} | {n / statistics.median(wall[name]):.3f} "
            f"| {valid}/{n} | {same}/{n} |"
        )
    for name in tables:
        print(f"  {name} row 0: {vocab.decode(outs[name][0].tokens).decode()!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
