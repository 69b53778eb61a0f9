"""The decode loops' control flow and op count per iteration, outside the model call.

Traces (and compiles, on this backend) `generate` on the first batch of a set with the real
Gemma-3 270M, for fast-forward alone and for the speculative loop, and counts in the decode
`while_loop`'s body:

* jaxpr: equations (primitives) outside the model call, and the nested control flow
  (``while`` from `lax.while_loop`/`fori_loop`, ``scan``, ``cond`` from `lax.cond`/`lax.switch`),
  with a scan's equations counted once per trip (as an unrolled loop would run them);
* compiled HLO: the body's instructions outside the model's conditional, split into kernels
  (fusions and unfused compute ops: what XLA:GPU launches one by one), nested ``while``
  and ``conditional`` (each reads its predicate back to the host on XLA:GPU).

The model call is the ``cond``/``conditional`` whose branches hold a matrix product (the
width switch), or the unconditional call where there is one branch; the deferred cache write
after the switch counts as loop work.

Run: ``python benchmarks/speculative_inventory.py [--set extract] [--hlo]``
"""

from __future__ import annotations

import argparse
import collections
import functools
import re
import sys
from pathlib import Path

import jax
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "compile"), str(ROOT / "benchmarks")]

import speculative_bench as sb  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax._tables import bucket  # noqa: E402
from automata_jax.models import Gemma3, default_cache_dir, default_gguf_path, load_gguf  # noqa: E402

LOOPS = {
    "ff": dict(fast_forward=True),
    "ff+spec+lcspell": dict(fast_forward=True, speculate=True),
}
CONTROL = ("while", "scan", "cond")
MODEL_PRIMS = ("dot_general", "conv_general_dilated")


def sub_jaxprs(eqn):
    """The jaxprs an equation calls (closed or open)."""
    out = []
    for value in eqn.params.values():
        for v in value if isinstance(value, tuple | list) else (value,):
            if isinstance(v, jax.extend.core.ClosedJaxpr):
                out.append(v.jaxpr)
            elif isinstance(v, jax.extend.core.Jaxpr):
                out.append(v)
    return out


def has_model(jaxpr) -> bool:
    return any(
        e.primitive.name in MODEL_PRIMS or any(has_model(j) for j in sub_jaxprs(e))
        for e in jaxpr.eqns
    )


def count_jaxpr(jaxpr, counts, trips=1, depth=0):
    """Adds to ``counts`` the equations and control flow of ``jaxpr`` outside the model."""
    for e in jaxpr.eqns:
        name = e.primitive.name
        subs = sub_jaxprs(e)
        if name in MODEL_PRIMS:
            counts["model eqns"] += trips
            continue
        if name == "cond" and any(has_model(j) for j in subs):
            counts["model switch (cond)"] += trips
            continue
        if name in ("pjit", "jit", "closed_call", "custom_jvp_call", "custom_vjp_call", "remat"):
            if has_model(subs[0]) and not any(x.primitive.name == "cond" for x in subs[0].eqns):
                counts["model eqns"] += trips  # the model called unconditionally
                continue
            count_jaxpr(subs[0], counts, trips, depth)
            continue
        counts["eqns"] += trips
        counts["eqns (scan bodies once)"] += 1 if trips else 0
        if name in CONTROL:
            counts[name] += trips
            inner = trips * (e.params.get("length", 1) if name == "scan" else 1)
            for j in subs:
                count_jaxpr(j, counts, inner, depth + 1)
        else:
            for j in subs:
                count_jaxpr(j, counts, trips, depth)


def decode_while(jaxpr):
    """The decode loop: the (last) while whose body calls the model."""
    found = None
    for e in jaxpr.eqns:
        for j in sub_jaxprs(e):
            if e.primitive.name == "while" and has_model(e.params["body_jaxpr"].jaxpr):
                found = e
            else:
                inner = decode_while(j)
                found = inner or found
    return found


# --- compiled HLO -----------------------------------------------------------------------------
FREE = {
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all",
    "opt-barrier", "partition-id", "replica-id",
}  # fmt: skip
INSTR = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*? ([a-z][\w\-]*)\((.*)$")
CALLS = re.compile(
    r"(?:body|condition|to_apply|calls|true_computation|false_computation)=%?([\w.\-]+)"
)
TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"')
BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")


def parse_hlo(text):
    """{computation: [(opcode, [called computations])]} and the entry's name."""
    comps, cur, entry = {}, None, None
    for line in text.splitlines():
        head = re.match(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$", line)  # not indented
        if head:
            cur = head.group(2)
            comps[cur] = []
            entry = cur if head.group(1) else entry
            continue
        m = INSTR.match(line)
        if m and cur is not None:
            called = CALLS.findall(line)
            b = BRANCHES.search(line)
            if b:
                called += [c.strip().lstrip("%") for c in b.group(1).split(",")]
            trips = TRIPS.search(line)
            comps[cur].append((m.group(2), called, int(trips.group(1)) if trips else 1))
    return comps, entry


def hlo_model(comps, name, seen=None) -> bool:
    seen = set() if seen is None else seen
    if name in seen:
        return False
    seen.add(name)
    return any(
        op in ("dot", "convolution") or (op == "custom-call" and not called)
        or any(hlo_model(comps, c, seen) for c in called)
        for op, called, _ in comps.get(name, ())
    )  # fmt: skip


def count_hlo(comps, name, counts, depth=0, trips=1):
    """Adds ``name``'s instructions outside the model to ``counts``; ``kernels run`` counts
    a nested while's body once per (known) trip."""
    for op, called, n in comps.get(name, ()):
        if op in FREE:
            continue
        if op == "conditional" and any(hlo_model(comps, c) for c in called):
            counts["model conditional"] += 1
            continue
        if op in ("while", "conditional"):
            counts[op] += 1
            counts["host syncs run"] += trips * (n if op == "while" else 1)
            for c in called:
                count_hlo(comps, c, counts, depth + 1, trips * (n if op == "while" else 1))
        elif op in ("call", "async-start"):
            for c in called:
                count_hlo(comps, c, counts, depth, trips)
        elif op in ("dot", "convolution", "custom-call"):
            counts["model ops"] += 1
        else:
            counts["kernels"] += 1
            counts["kernels run"] += trips
            counts["fusions" if op == "fusion" else "unfused ops"] += 1


def hlo_decode_body(comps, entry):
    """The decode while's body: the while (reachable from the entry) whose body holds the model."""
    best = None
    stack, seen = [entry], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        for op, called, _ in comps.get(name, ()):
            if op == "while":
                body = [c for c in called if hlo_model(comps, c)]
                cond = [c for c in called if c not in body]
                if body:
                    best = (body[0], cond[0] if cond else None)
            stack.extend(called)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", default="extract")
    parser.add_argument("--loops", default=",".join(LOOPS))
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--hlo", action="store_true", help="also compile and count the HLO")
    parser.add_argument("--dump", default=None, help="a folder to write the compiled HLO to")
    parser.add_argument(
        "--as-backend", default=None,
        help="trace the loops' static choices for this backend (e.g. gpu), compile here",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.as_backend:  # `generate` reads it for `LoopConfig.backend`
        jax.default_backend = lambda: args.as_backend
    path = default_gguf_path()
    vocab = ac.Vocabulary.from_gguf(path)
    config, params = load_gguf(path, cache_dir=default_cache_dir())
    model = Gemma3(config)
    cache_fn = functools.partial(model.init_cache, dtype=params["embed_tokens"].dtype)
    prompts, ids, dfas = sb.load_sets([args.set], vocab, 8)[args.set]
    rows = [r % len(prompts) for r in range(args.batch)]
    length = bucket(max(len(prompts[r]) for r in rows), 64)
    tokens, mask = aj.pad_prompts([prompts[r] for r in rows], length=length)
    cids = np.asarray([ids[r] for r in rows], np.int32)
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=config.vocab_size)
    twins = aj.bare_twins(vocab.tokens, lowercase_stops=True)
    keys = aj.draft_keys(
        tokens, twins, aj.bare_spellings(vocab.tokens, vocab.encode, np.unique(tokens))
    )
    print(f"backend {jax.default_backend()} (compiled on {jax.devices()[0].platform}), set {args.set}, batch {args.batch}, "
          f"forced-run width {tables.forced_tokens.shape[-1]}")  # fmt: skip
    rows_out = []
    for name in args.loops.split(","):
        kw = LOOPS[name]
        extra = dict(draft_keys=keys) if "speculate" in kw else {}

        def run(p, t, kw=kw, extra=extra):
            return aj.generate(model.apply_step, p, t, tables, cids, cache=cache_fn,
                               sampler=aj.Greedy(), max_new_tokens=args.max_new_tokens,
                               rng=jax.random.key(0), prompt_mask=mask, **kw, **extra)  # fmt: skip

        closed = jax.make_jaxpr(run)(params, tokens)
        loop = decode_while(closed.jaxpr)
        counts = collections.Counter()
        count_jaxpr(loop.params["body_jaxpr"].jaxpr, counts)
        cond_counts = collections.Counter()
        count_jaxpr(loop.params["cond_jaxpr"].jaxpr, cond_counts)
        row = {"loop": name, "jaxpr": dict(counts), "jaxpr cond eqns": cond_counts["eqns"]}
        if args.hlo:
            text = jax.jit(run).lower(params, tokens).compile().as_text()
            if args.dump:
                Path(args.dump).mkdir(parents=True, exist_ok=True)
                (Path(args.dump) / f"{name}.hlo.txt").write_text(text)
            comps, entry = parse_hlo(text)
            body, _ = hlo_decode_body(comps, entry)
            hc = collections.Counter()
            count_hlo(comps, body, hc)
            row["hlo"] = dict(hc)
        rows_out.append(row)
        print(row, flush=True)
    keys_j = ["eqns", "eqns (scan bodies once)", "scan", "while", "cond", "model switch (cond)"]
    print("\n| loop | " + " | ".join(f"jaxpr {k}" for k in keys_j) + " | HLO kernels (fusions + unfused) "
          "| HLO kernels run | HLO while | HLO conditional | predicates read back per iteration |")  # fmt: skip
    print("|---|" + "---:|" * (len(keys_j) + 5))
    for r in rows_out:
        hc = r.get("hlo", {})
        print(f"| {r['loop']} | " + " | ".join(str(r["jaxpr"].get(k, 0)) for k in keys_j)
              + f" | {hc.get('kernels', '-')} ({hc.get('fusions', '-')} + {hc.get('unfused ops', '-')})"
              f" | {hc.get('kernels run', '-')} | {hc.get('while', 0) if hc else '-'} | {hc.get('conditional', 0) if hc else '-'}"
              f" | {hc.get('host syncs run', 0) + 2 if hc else '-'} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
