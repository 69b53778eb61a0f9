"""The extraction job on the real model: valid records, field accuracy, speed, time breakdown.

    python benchmarks/extract_bench.py                      # this checkout, both labelled sets
    python benchmarks/extract_bench.py --baseline-root /tmp/base --baseline-checkpoint /tmp/hf

Runs ``python -m automata_jax.extract`` as a subprocess (a fresh process, as a user would),
twice per configuration: a first run with an empty job cache folder (the schema compiles, XLA
compiles the loop) and a rerun with the same folder (tables and XLA programs from the cache);
the dequantized weights come from the user's weights cache in both (run the job once before to
fill it). Reports per run: valid records, field accuracy with a Wilson 95% interval, records/s,
tokens and model calls per record, and the job's time breakdown (load, schema, XLA compile,
generation). Then times one prefill and one decode call of the job's batch shapes in-process
(the split of "generation").

Sets: ``bundled`` is the job's bundled docs repeated 3 times (24 records, the prompt was tuned
on them; gold: ``automata_jax/data/docs.gold.jsonl``), ``heldout`` is
``benchmarks/data/extract_heldout.jsonl`` (26 records written before any tuning, never tuned on).
Scoring: see ``benchmarks/data/EXTRACT_HELDOUT.md``.

With ``--baseline-root`` (a checkout of an older commit) and ``--baseline-checkpoint`` (a HF
safetensors folder of the same weights, for commits without GGUF support), the baseline job
runs on the bundled set side by side (interleaved with this checkout's runs) and the report
gives the records/s ratio.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "automata_jax" / "data" / "docs.jsonl"
DOCS_GOLD = ROOT / "automata_jax" / "data" / "docs.gold.jsonl"
HELDOUT = ROOT / "benchmarks" / "data" / "extract_heldout.jsonl"
HELDOUT_GOLD = ROOT / "benchmarks" / "data" / "extract_heldout.gold.jsonl"
FIELDS = ("name", "age", "occupation", "city")


def normalize(value) -> str:
    text = re.sub(r"\s+", " ", str(value)).strip().casefold()
    text = text.strip(" .,;:!?\"'()")
    return re.sub(r"^(a|an|the) ", "", text)


def field_right(got, gold) -> bool:
    if isinstance(gold, int) and not isinstance(gold, bool):
        return isinstance(got, int) and not isinstance(got, bool) and got == gold
    options = gold if isinstance(gold, list) else [gold]
    return got is not None and normalize(got) in {normalize(o) for o in options}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def write_input(name: str, folder: Path) -> Path:
    if name == "bundled":
        lines = DOCS.read_text("utf-8").splitlines()
        out = []
        for copy in range(3):
            for line in lines:
                doc = json.loads(line)
                out.append(json.dumps({"id": f"{doc['id']}#{copy}", "text": doc["text"]}))
        path = folder / "bundled24.jsonl"
        path.write_text("\n".join(out) + "\n", "utf-8")
        return path
    return HELDOUT


def gold_of(name: str) -> dict[str, dict]:
    path = DOCS_GOLD if name == "bundled" else HELDOUT_GOLD
    return {d["id"]: d for d in map(json.loads, path.read_text("utf-8").splitlines())}


def score(output: Path, gold: dict[str, dict]) -> dict:
    valid = records = right = fields = 0
    wrong = []
    for line in output.read_text("utf-8").splitlines():
        r = json.loads(line)
        records += 1
        doc = gold[str(r["id"]).split("#")[0]]
        obj = r.get("object") if r.get("ok") else None
        valid += obj is not None
        for f in FIELDS:
            fields += 1
            ok = obj is not None and field_right(obj.get(f), doc[f])
            right += ok
            if not ok and len(wrong) < 12:
                wrong.append(f"{doc['id']}.{f}: {None if obj is None else obj.get(f)!r}")
    lo, hi = wilson(right, fields)
    return dict(records=records, valid=valid, right=right, fields=fields, lo=lo, hi=hi, wrong=wrong)


def parse_summary(stderr: str) -> dict:
    out = {}
    m = re.search(r"done: (\d+) record\(s\).* in ([\d.]+) s: ([\d.]+) records/s", stderr)
    if m:
        out.update(records=int(m[1]), seconds=float(m[2]), records_per_s=float(m[3]))
    m = re.search(r"per record: ([\d.]+) tokens, ([\d.]+) model calls", stderr)
    if m:
        out.update(tokens=float(m[1]), calls=float(m[2]))
    m = re.search(
        r"time: load ([\d.]+) s, schema ([\d.]+) s, XLA compile ([\d.]+) s \((\d+) program.*"
        r"generation ([\d.]+) s",
        stderr,
    )
    if m:
        out.update(load=float(m[1]), schema=float(m[2]), compile=float(m[3]), hits=int(m[4]),
                   generation=float(m[5]))  # fmt: skip
    m = re.search(r"\((\d+\.\d) s\); schema", stderr)
    if m and "load" not in out:
        out["load"] = float(m[1])
    return out


def run_job(root: Path, args: list[str], input_path: Path, output: Path, cache: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{root / 'compile'}"}
    env.setdefault("JAX_PLATFORMS", "cpu")
    cmd = [sys.executable, "-m", "automata_jax.extract", "--input", str(input_path), "--output",
           str(output), "--cache-dir", str(cache), "--no-progress", *args]  # fmt: skip
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"job failed ({' '.join(cmd)}):\n{proc.stderr}")
    return {"wall": wall, **parse_summary(proc.stderr), "stderr": proc.stderr}


def split_prefill_decode(batch: int) -> dict:
    """Median seconds of the job's model calls: the prefill after the cached prompt prefix,
    a full-prompt prefill (no prefix cache), one decode step."""
    sys.path[:0] = [str(ROOT), str(ROOT / "compile")]
    import jax
    import jax.numpy as jnp

    from automata_jax.models import Gemma3, default_cache_dir, default_gguf_path, load_gguf

    config, params = load_gguf(default_gguf_path(), cache_dir=default_cache_dir())
    model = Gemma3(config)
    step = jax.jit(model.apply_step)

    def timed(t_prompt: int, t_new: int, length: int) -> float:
        cache = model.init_cache(batch, length)
        tokens = jnp.ones((batch, t_prompt), jnp.int32)
        pos = jnp.broadcast_to(jnp.arange(t_prompt), (batch, t_prompt))
        at = jnp.full((batch,), t_prompt - 1, jnp.int32)
        _, cache = step(params, tokens, pos, jnp.ones_like(tokens, bool), cache, at)
        one = jnp.ones((batch, t_new), jnp.int32)
        pos1 = jnp.full((batch, t_new), t_prompt, jnp.int32)
        at1 = jnp.full((batch,), t_new - 1, jnp.int32)
        args = (params, one, pos1, jnp.ones_like(one, bool), cache, at1)
        jax.block_until_ready(step(*args))
        times = []
        for _ in range(3):
            t = time.perf_counter()
            jax.block_until_ready(step(*args))
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    return {
        "prefill_suffix_32": timed(160, 32, 160 + 32 + 512),
        "prefill_full_256": timed(8, 256, 8 + 256 + 512),
        "decode_1": timed(192, 1, 192 + 512),
    }


def fmt(name: str, r: dict, s: dict | None) -> str:
    acc = ""
    if s is not None:
        acc = (f"{s['valid']}/{s['records']} valid, {s['right']}/{s['fields']} fields "
               f"({100 * s['right'] / s['fields']:.1f}%, 95% CI {100 * s['lo']:.1f}-"
               f"{100 * s['hi']:.1f}%), ")  # fmt: skip
    return (
        f"{name}: {acc}{r.get('records_per_s', float('nan')):.3f} records/s "
        f"({r.get('records', '?')} in {r.get('seconds', float('nan')):.1f} s, process "
        f"{r['wall']:.1f} s), {r.get('tokens', float('nan')):.1f} tokens and "
        f"{r.get('calls', float('nan')):.1f} model calls per record; time: load "
        f"{r.get('load', float('nan')):.1f} s, schema {r.get('schema', float('nan')):.1f} s, "
        f"XLA compile {r.get('compile', float('nan')):.1f} s ({r.get('hits', '?')} cached), "
        f"generation {r.get('generation', float('nan')):.1f} s"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sets", default="bundled,heldout")
    p.add_argument("--batch-size", type=int, default=None, help="default: the job's default")
    p.add_argument("--baseline-root", type=Path, default=None)
    p.add_argument("--baseline-checkpoint", type=Path, default=None)
    p.add_argument("--no-split", action="store_true", help="skip the prefill/decode timing")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = p.parse_args(argv)
    extra = [] if args.batch_size is None else ["--batch-size", str(args.batch_size)]
    results = {}
    with tempfile.TemporaryDirectory(prefix="extract_bench_") as tmp:
        tmp = Path(tmp)
        for name in args.sets.split(","):
            inp, gold = write_input(name, tmp), gold_of(name)
            configs = [("new", ROOT, ["--model", "gemma3-270m", *extra])]
            if args.baseline_root is not None and name == "bundled":
                base_args = ["--model", "gemma3-270m", *extra]
                if args.baseline_checkpoint is not None:
                    base_args += ["--checkpoint", str(args.baseline_checkpoint)]
                configs.insert(0, ("baseline", args.baseline_root, base_args))
            caches = {c[0]: tmp / f"cache-{name}-{c[0]}" for c in configs}
            for run in ("first run", "rerun"):  # interleaved: baseline, new, baseline, new
                for label, root, job_args in configs:
                    out = tmp / f"{name}-{label}-{run[0]}.jsonl"
                    r = run_job(root, job_args, inp, out, caches[label])
                    s = score(out, gold)
                    key = f"{name} / {label} / {run}"
                    results[key] = {**{k: v for k, v in r.items() if k != "stderr"}, **s}
                    print(fmt(key, r, s), flush=True)
                    if s["wrong"]:
                        print("  wrong: " + "; ".join(s["wrong"]), flush=True)
                    shutil.copy(out, tmp / f"{out.stem}.kept")
        for run in ("first run", "rerun"):
            b = results.get(f"bundled / baseline / {run}")
            n = results.get(f"bundled / new / {run}")
            if b and n and b.get("records_per_s") and n.get("records_per_s"):
                print(f"bundled {run}: records/s new / baseline = "
                      f"{n['records_per_s'] / b['records_per_s']:.2f}x "
                      f"(process wall: {b['wall'] / n['wall']:.2f}x)")  # fmt: skip
    if not args.no_split:
        split = split_prefill_decode(args.batch_size or 8)
        results["split"] = split
        print(
            "model calls at batch {}: prefill of 32 tokens after the cached prefix {:.2f} s, "
            "full 256-token prefill {:.2f} s, one decode step {:.3f} s".format(
                args.batch_size or 8, split["prefill_suffix_32"], split["prefill_full_256"],
                split["decode_1"],
            )
        )  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
