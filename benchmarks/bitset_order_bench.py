"""The bitset any-order design, compile side: sizes and compile CPU against today's paths.

For each schema (the 6 SchemaStore schemas of `first_mask_ab.py`, ``--bfcl N`` BFCL function
schemas, ``--suite N`` official suite groups), one process compiles it on Llama-3 three ways,
rotating their order each round: the default (``property_order="any"``: `compile_json_schema`,
its token DFA minimized, forced runs included), ``property_order="declared"``, and the bitset
path (`pipeline._bitset.compile_json_schema_bitset`: no minimization, no forced runs). It
records CPU time (min over ``--rounds``), table sizes (states x classes; for the bitset path
also the states reachable through edges, programs, bits, events) and why a schema is not
eligible. ``--unroll`` adds the SchemaStore schemas with ``recursion="unroll"`` (every path
then a DFA: a different language for schema-free values, reported apart). ``--check N``
compares the masks of the default and bitset tables along N random walks per eligible schema
whose default compile kept any order everywhere (no `OrderFallbackWarning`).

Run: ``python benchmarks/bitset_order_bench.py --bfcl 40 --suite 60 --unroll --check 5``;
writes ``benchmarks/results/bitset_order.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402
from _bench_util import ROOT, machine  # noqa: E402
from first_mask_ab import SCHEMASTORE  # noqa: E402

import automata_compile as ac  # noqa: E402
from automata_compile.frontends.json_schema import BitsetIneligible  # noqa: E402
from automata_compile.pipeline._bitset import compile_json_schema_bitset  # noqa: E402
from automata_compile.tokens import (  # noqa: E402
    BitsetPDATables,
    reference_advance,
    reference_mask,
    reference_pda_advance,
    reference_pda_mask,
)

RESULTS = ROOT / "benchmarks" / "results" / "bitset_order.json"


def _timed(fn):
    t = time.process_time()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            out = fn()
        except BitsetIneligible as e:
            return time.process_time() - t, None, str(e), False
        except ac.AutomataError as e:
            return time.process_time() - t, None, f"{type(e).__name__}: {e}"[:200], False
    fell_back = any(issubclass(x.category, ac.OrderFallbackWarning) for x in w)
    return time.process_time() - t, out, None, fell_back


def _check(old, new, vocab, walks: int, seed: str) -> bool:
    if isinstance(new, BitsetPDATables):
        return _check_pda(old, new, vocab, walks, seed)
    rng = random.Random(seed)
    for _ in range(walks):
        so, sn = old.start, new.start
        bits = np.zeros(new.words, np.uint32)
        for _ in range(60):
            mo = old.next_state[so, old.token_class] >= 0
            mo[list(vocab.eos_ids)] = bool(old.accepting[so])
            if not np.array_equal(mo, reference_mask(new, sn, bits)):
                return False
            allowed = np.flatnonzero(mo)
            allowed = allowed[~np.isin(allowed, vocab.eos_ids)]
            if not allowed.size:
                break
            short = [t for t in allowed.tolist() if len(vocab.tokens[t] or b"") <= 2]
            tok = rng.choice(short if short and rng.random() < 0.8 else allowed.tolist())
            so = int(old.next_state[so, old.token_class[tok]])
            sn, bits = reference_advance(new, sn, bits, tok)
    return True


def _check_pda(old, new, vocab, walks: int, seed: str) -> bool:
    """`_check` for a schema with grammar rules: stacks and bits (`reference_pda_mask`)."""
    rng = random.Random(seed)
    for _ in range(walks):
        so, stack_o = old.start, ()
        sn, stack_n, bits = new.start, (), np.zeros(new.words, np.uint32)
        for _ in range(60):
            mo = old.allowed(so, stack_o)
            if not np.array_equal(mo, reference_pda_mask(new, sn, stack_n, bits)):
                return False
            allowed = np.flatnonzero(mo)
            allowed = allowed[~np.isin(allowed, vocab.eos_ids)]
            if not allowed.size:
                break
            short = [t for t in allowed.tolist() if len(vocab.tokens[t] or b"") <= 2]
            tok = rng.choice(short if short and rng.random() < 0.8 else allowed.tolist())
            so, stack_o = old.advance_config(so, stack_o, tok)
            sn, stack_n, bits = reference_pda_advance(new, sn, stack_n, bits, tok)
    return True


def run_one(name, schema, vocab, rounds: int, check: int, **options) -> dict:
    variants = {
        "any": lambda: ac.compile_json_schema(schema, vocab, **options),
        "declared": lambda: ac.compile_json_schema(
            schema, vocab, property_order="declared", **options
        ),
        "bitset": lambda: compile_json_schema_bitset(schema, vocab, **options),
    }
    times = {k: [] for k in variants}
    outs, errs, fb = {}, {}, {}
    names = list(variants)
    for r in range(rounds):
        for k in names[r % 3 :] + names[: r % 3]:
            dt, out, err, fell = _timed(variants[k])
            times[k].append(dt)
            outs[k], errs[k], fb[k] = out, err, fell
            if err is not None and k == "bitset":
                break
    row = {}
    for k in variants:
        out = outs[k]
        d = {"cpu_s": min(times[k]), "error": errs[k], "fell_back": fb[k]}
        if out is not None:
            tab = out.tables if isinstance(out, BitsetPDATables) else out
            d["states"], d["classes"] = (int(x) for x in tab.next_state.shape)
            if k == "bitset":
                if isinstance(out, BitsetPDATables):
                    d["pda"] = True
                    has = (tab.next_state >= 0).any(axis=1)
                    has[tab.cd_state] = True
                    d["reachable"] = int(has.sum())  # token-level states (with an edge)
                else:
                    d["reachable"] = out.reachable_states()
                d["programs"] = int(out.programs.shape[0])
                d["bits"] = out.num_bits
                d["counted_objects"] = len(out.counted_objects)
            elif getattr(out, "is_pda", False):
                d["pda"] = True
        row[k] = d
    same_kind = outs["any"] is not None and bool(getattr(outs["any"], "is_pda", False)) == (
        isinstance(outs["bitset"], BitsetPDATables)
    )
    exact = not fb["any"] and not fb["bitset"]  # neither fell back to declared order
    if check and outs["bitset"] is not None and same_kind and exact:
        row["check"] = _check(outs["any"], outs["bitset"], vocab, check, name)
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bfcl", type=int, default=0)
    parser.add_argument("--suite", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--unroll", action="store_true")
    parser.add_argument("--check", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args(argv)
    vocab = ac.Vocabulary.from_file(scb.TOKENIZERS / "llama3" / "tokenizer.json")
    warm = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
            "additionalProperties": False}  # fmt: skip
    run_one("warm", warm, vocab, 1, 0)
    store = scb.schemastore_schemas()
    corpora = {"schemastore": ({n: store[n] for n in SCHEMASTORE}, {})}
    if args.unroll:
        corpora["schemastore-unroll"] = (
            {n: store[n] for n in SCHEMASTORE},
            {"recursion": "unroll"},
        )
    if args.bfcl:
        corpora["bfcl"] = (scb.bfcl_schemas(args.bfcl), {})
    if args.suite:
        corpora["test-suite"] = (scb.suite_schemas(args.suite), {})
    results = {"machine": machine(), "corpora": {}}
    for corpus, (schemas, options) in corpora.items():
        rows = results["corpora"][corpus] = {}
        for name, schema in schemas.items():
            rows[name] = r = run_one(name, schema, vocab, args.rounds, args.check, **options)
            a, d, b = r["any"], r["declared"], r["bitset"]
            print(
                f"{corpus:18} {name[:40]:40} any {a['cpu_s']:6.3f} {a.get('states', '-')}x"
                f"{a.get('classes', '-')}  decl {d['cpu_s']:6.3f} {d.get('states', '-')}x"
                f"{d.get('classes', '-')}  bitset {b['cpu_s']:6.3f} "
                + (
                    f"{b['states']}x{b['classes']} reach {b['reachable']} P {b['programs']} "
                    f"bits {b['bits']} counted {b['counted_objects']} fb {b['fell_back']} "
                    f"check {r.get('check')}"
                    if b["error"] is None
                    else f"- ({b['error'][:70]})"
                ),
                file=sys.stderr,
                flush=True,
            )
    summary = {}
    for corpus, rows in results["corpora"].items():
        ok = [
            r for r in rows.values() if r["bitset"]["error"] is None and r["any"]["error"] is None
        ]
        s = summary[corpus] = {"schemas": len(rows), "eligible": len(ok)}
        for k in ("any", "declared", "bitset"):
            xs = [r[k]["cpu_s"] for r in ok if r[k]["error"] is None]
            if xs:
                s[k + "_p50_s"] = statistics.median(xs)
                s[k + "_p90_s"] = float(np.percentile(xs, 90))
        s["pda"] = sum(1 for r in ok if r["bitset"].get("pda"))
        s["checked"] = sum(1 for r in ok if r.get("check") is True)
        s["check_failed"] = sum(1 for r in ok if r.get("check") is False)
        s["ineligible_reasons"] = sorted(
            {r["bitset"]["error"].split(":")[0][:60] for r in rows.values() if r["bitset"]["error"]}
        )
    results["summary"] = summary
    results["machine"]["loadavg_end"] = list(__import__("os").getloadavg())
    Path(args.out).write_text(json.dumps(results, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
