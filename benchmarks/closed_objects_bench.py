"""The extraction job on the real model with ordinary pydantic schemas, objects open
(JSON Schema's own semantics: undeclared properties allowed) vs closed (``closed_objects=True``,
the job's default): how many records end as a valid object within ``--max-new-tokens``.

    python benchmarks/closed_objects_bench.py [--max-new-tokens 256] [--out FILE]

Schemas and documents: ``benchmarks/data/closed_objects/NAME.json`` (``model_json_schema()``
of a pydantic model, with no ``additionalProperties``) and ``NAME.jsonl``. Sets: ``recipe``
and ``event`` were the probe that showed the failure (looked at while building the option);
``invoice`` and ``contact`` were written after, and never run before this benchmark's first
run (held out). Each (schema, variant) runs ``automata_jax.extract.main`` in this process on
the default model (Gemma-3 270M base, greedy, the job's generic prompt for a base model), the
job's options but ``closed_objects``. Reports valid records with a Wilson 95% interval per
set and variant, and why the others failed (the text a cut-off record ends with).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from extract_bench import wilson

DATA = Path(__file__).resolve().parent / "data" / "closed_objects"
SETS = {"probe": ("recipe", "event"), "held-out": ("invoice", "contact")}


def run(name: str, closed: bool, max_new_tokens: int, folder: Path) -> list[dict]:
    from automata_jax.extract import _job

    out = folder / f"{name}-{'closed' if closed else 'open'}.jsonl"
    saved = _job.SCHEMA_OPTIONS
    _job.SCHEMA_OPTIONS = {**saved, "closed_objects": closed}
    try:
        args = ["--schema", str(DATA / f"{name}.json"), "--input", str(DATA / f"{name}.jsonl")]
        args += ["--output", str(out), "--cache-dir", str(folder / "cache"), "--no-progress"]
        if _job.main([*args, "--max-new-tokens", str(max_new_tokens)]) != 0:
            sys.exit(f"the job failed on {name}")
    finally:
        _job.SCHEMA_OPTIONS = saved
    return [json.loads(line) for line in out.read_text("utf-8").splitlines()]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = p.parse_args()
    results: dict = {"max_new_tokens": args.max_new_tokens, "date": time.strftime("%F %R UTC")}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for split, names in SETS.items():
            for closed in (False, True):
                variant = "closed" if closed else "open"
                records = []
                for name in names:
                    for r in run(name, closed, args.max_new_tokens, Path(tmp)):
                        records.append({"schema": name, **r})
                ok = sum(r["ok"] for r in records)
                lo, hi = wilson(ok, len(records))
                results[f"{split}/{variant}"] = records
                rows.append((split, variant, ok, len(records), lo, hi))
    print("| set | objects | valid records | 95% interval |")
    print("| --- | --- | ---: | --- |")
    for split, variant, ok, n, lo, hi in rows:
        print(f"| {split} | {variant} | {ok}/{n} | {lo:.2f}-{hi:.2f} |")
    for key, records in results.items():
        if isinstance(records, list):
            for r in records:
                if not r["ok"]:
                    tail = r.get("text", "")[-90:]
                    print(f"{key} {r['schema']} {r['id']}: {r['error'][:60]} ...{tail!r}")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", "utf-8")


if __name__ == "__main__":
    main()
