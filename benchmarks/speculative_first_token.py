"""An oracle estimate of fewer iterations at a value's start (issue 22, session 12; not built).

Replays the tuning set's real run (bundled extraction only, never the held-out set) with the
recording oracle (`speculative_bench.OracleModel`: the same calls, drafts and acceptances) and
takes each row's calls where nothing was drafted after a chosen, unforced head. For each, it
asks whether a draft source would have held the model's choice one call earlier (so the row
saves that call); a batch's decode iterations are its longest row's calls. Sources:

* ``keyend``: where every allowed token extends or prefixes every other (the bytes are forced,
  only where the token ends is free: `"`, `":`, `":"`, `":"",` after ``"occupation``), the
  one after which the most tokens are allowed (``":"`` opens a free string). The exit draft
  stops before such a state today (its forced run ends there); a per-state table of this pick
  would let it go on;
* ``next``: at a value's first token, the document's next token after the row's last copy (the
  latest prompt position of the output's last value), skipped to one the constraint allows;
* ``word``: the same, skipped to the next word start, without its space inside a string (as
  `aj.bare_twins`); ``tree2`` / ``tree3``: any of the next 2 / 3 word starts (a draft tree).

Priced with the in-loop call costs (``--costs``, `speculative_costs.py --in-loop`): today's
calls at their widths; with a source, today's decode time scaled by the iterations left
(optimistic: the draft's extra slot and a tree's wider call are taken as free).

Run: ``python benchmarks/speculative_first_token.py --limit 8 [--verbose]``
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "compile"), str(ROOT / "benchmarks")]

import speculative_bench as sb  # noqa: E402

import automata_compile as ac  # noqa: E402
import automata_jax as aj  # noqa: E402
from automata_jax._tables import bucket  # noqa: E402
from automata_jax.models import Gemma3, default_cache_dir, default_gguf_path, load_gguf  # noqa: E402


def calls_of(oracle, target, tokens, mask, tables, cids, kw, max_new):
    """Replays with the recording oracle: [(fed tokens, positions, mask)] per call."""
    oracle.sink.clear()
    out = aj.generate(
        oracle.apply_step, {"target": jnp.asarray(target)}, tokens, tables, cids,
        sampler=aj.Greedy(), max_new_tokens=max_new, rng=jax.random.key(0), prompt_mask=mask,
        cache=oracle.init_cache, **kw,
    )  # fmt: skip
    jax.device_get(out)
    return list(oracle.sink), jax.device_get(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument(
        "--costs", default=str(ROOT / "benchmarks/results/speculative_costs_s12_in_loop.json")
    )
    parser.add_argument("--verbose", action="store_true", help="print every row's calls")
    args = parser.parse_args(argv)
    table = json.loads(Path(args.costs).read_text())["table"]
    at = "@after" if "1x1@after" in table else ""
    cost = {k.split("@")[0]: v["rel_min"] for k, v in table.items() if k.endswith(at) and "x" in k}
    prefill = table["prefill"]["min"] / table[f"1x1{at}"]["min"]

    path = default_gguf_path()
    vocab = ac.Vocabulary.from_gguf(path)
    config, params = load_gguf(path, cache_dir=default_cache_dir())
    model = Gemma3(config)
    cache_fn = functools.partial(model.init_cache, dtype=params["embed_tokens"].dtype)
    prompts, ids, dfas = sb.load_sets(["extract"], vocab, 0)["extract"]
    prompts = prompts[: args.limit]
    dfa = dfas[0]
    twins = aj.bare_twins(vocab.tokens, lowercase_stops=True)
    bare = aj.bare_twins(vocab.tokens)  # id -> id without its leading space (or -1)
    length = bucket(max(len(p) for p in prompts), 64)
    tables = aj.ConstraintTables.from_dfas(dfas, vocab_size=config.vocab_size)
    oracle = sb.OracleModel(config.vocab_size)
    text = lambda i: (vocab.tokens[i] or b"").decode("utf-8", "replace")  # noqa: E731
    variants = ("keyend", "next", "word", "tree2", "tree3")
    totals = dict(ff=0.0, spec=0.0, **{v: 0.0 for v in variants})
    iters = dict(ff=[], spec=[], **{v: [] for v in variants})
    hits_at = {v: [] for v in variants}
    for start in range(0, len(prompts), args.batch):
        rows = list(range(start, min(start + args.batch, len(prompts))))
        full = rows + [rows[0]] * (args.batch - len(rows))
        tokens, mask = aj.pad_prompts([prompts[r] for r in full], length=length)
        cids = np.zeros(args.batch, np.int32)
        out = jax.device_get(
            aj.generate(
                model.apply_step,
                params,
                tokens,
                tables,
                cids,
                sampler=aj.Greedy(),
                max_new_tokens=args.max_new_tokens,
                rng=jax.random.key(0),
                prompt_mask=mask,
                cache=cache_fn,
                fast_forward=True,
            )  # fmt: skip
        )
        lengths = np.asarray(out.lengths)
        target = np.zeros((args.batch, length + args.max_new_tokens + 2), np.int32)
        for r in range(args.batch):
            seq = list(tokens[r][mask[r]]) + list(out.tokens[r][: lengths[r]])
            target[r, : len(seq)] = seq
        spellings = aj.bare_spellings(vocab.tokens, vocab.encode, np.unique(tokens))
        keys = aj.draft_keys(tokens, twins, spellings)
        spec_kw = dict(fast_forward=True, speculate=True, draft_keys=keys)
        ff_calls, _ = calls_of(oracle, target, tokens, mask, tables, cids,
                               dict(fast_forward=True), args.max_new_tokens)  # fmt: skip
        spec_calls, rep = calls_of(oracle, target, tokens, mask, tables, cids, spec_kw,
                                   args.max_new_tokens)  # fmt: skip
        assert (rep.tokens == out.tokens).all()

        def price(calls, verifying):
            total = 0.0
            for fed, _, m in calls:
                w = fed.shape[1]
                if w >= length:
                    total += prefill
                    continue
                total += cost.get(f"{w}x5" if verifying(fed, m) else f"{w}x1", cost["9x5"])
            return total

        t_ff = price(ff_calls, lambda fed, m: False)
        t_spec = price(spec_calls, lambda fed, m: fed.shape[1] in (5, 9) and m.sum(1).max() > 3)
        totals["ff"] += t_ff
        totals["spec"] += t_spec
        n_iter = len(spec_calls) - 1
        iters["ff"].append(len(ff_calls) - 1)
        iters["spec"].append(n_iter)
        # Per row: its calls (iteration index, output index of the first fed token, head).
        prompt_len = mask.sum(1)
        saved = {v: np.zeros(args.batch, int) for v in variants}
        row_calls = np.zeros(args.batch, int)
        for r in range(len(rows)):
            seq = [int(x) for x in out.tokens[r][: lengths[r]]]
            ptoks = [int(x) for x in tokens[r][mask[r]]]
            ptext = "".join(text(i) for i in ptoks)
            doc_from = ptext.find("Text:") + 5
            char, doc_start = 0, len(ptoks)
            for j, i in enumerate(ptoks):
                if char >= doc_from:
                    doc_start = j
                    break
                char += len(text(i))
            forced = np.append(sb.forced_flags(tables, 0, seq), False)
            for fed_tokens, fed_pos, fed_mask in spec_calls:
                if fed_tokens.shape[1] >= length:
                    continue
                cols = np.flatnonzero(fed_mask[r])
                if not len(cols):
                    continue
                row_calls[r] += 1
                i0 = int(fed_pos[r, cols[0]]) - int(prompt_len[r])
                if i0 >= len(seq) or forced[i0]:
                    continue
                head = 1
                while head < len(cols) and i0 + head < len(seq) and forced[i0 + head]:
                    head += 1
                before = "".join(text(i) for i in seq[:i0])
                if args.verbose:
                    fed = "".join(text(int(i)) for i in fed_tokens[r, cols])
                    print(f"row {r} call at {i0}: {before[-14:]!r} fed {fed!r} head {head}")
                if len(cols) > head:
                    continue  # something was drafted
                # ``keyend``: the allowed tokens form one chain of prefixes (the bytes are
                # forced, only their tokenization is free: `"`, `":`, `":"` after a key) and
                # the model took the longest: a per-state "longest forced-bytes token" table
                # would have drafted it after the forced run.
                q = dfa.start
                for t in seq[:i0]:
                    q = dfa.advance(q, t)
                allowed = dfa.allowed(q)
                ids_ok = [int(t) for t in np.flatnonzero(allowed)]
                ok = [vocab.tokens[t] or b"" for t in ids_ok]
                # Tokens every other allowed token extends or prefixes (the bytes are forced,
                # only where the token ends is free); the one after which the most tokens
                # are allowed (`":"` opens a free string, `":"","` an empty one).
                chain = [
                    t for t, x in zip(ids_ok, ok, strict=True)
                    if len(ok) > 1 and all(y.startswith(x) or x.startswith(y) for y in ok)
                ]  # fmt: skip
                pick = max(
                    chain, key=lambda t: int(dfa.allowed(dfa.advance(q, t)).sum()), default=-1
                )
                if args.verbose:
                    print("   allowed", len(ok), ok[:6], "pick", text(pick) if pick >= 0 else None)
                if pick == seq[i0] and len(chain) == len(ok):
                    saved["keyend"][r] += 1
                    hits_at["keyend"].append(f"{before[-12:]!r} -> {text(seq[i0])!r}")
                    continue
                if not (before.endswith('":"') or before.endswith('":')):
                    continue  # not a value's first token
                # The row's last copy: the latest prompt occurrence of the output's last
                # value's tokens (its last 1-2 tokens), in the document.
                values = [k for k in range(i0) if not forced[k]]
                ptr = doc_start
                if values:
                    tail = seq[values[-1] - 1 : values[-1] + 1] if len(values) > 1 else []
                    for n_gram in (tail, seq[values[-1] : values[-1] + 1]):
                        if not n_gram:
                            continue
                        for p in range(len(ptoks) - len(n_gram), doc_start - 1, -1):
                            if ptoks[p : p + len(n_gram)] == n_gram or (
                                len(n_gram) == 1
                                and (bare[ptoks[p]] == n_gram[0] or ptoks[p] == n_gram[0])
                            ):
                                ptr = p + len(n_gram)
                                break
                        if ptr != doc_start:
                            break
                q = dfa.start
                for t in seq[:i0]:
                    q = dfa.advance(q, t)
                allowed = dfa.allowed(q)
                string = before.endswith('":"')
                doc = ptoks[ptr:]
                choice = seq[i0]
                cands = {}
                nxt = [t for t in doc if allowed[t]]
                cands["next"] = nxt[:1]
                words = []
                for t in doc:
                    s = vocab.tokens[t] or b""
                    if s.startswith(b"\xe2\x96\x81") or s.startswith(b" "):
                        t2 = bare[t] if string and bare[t] >= 0 else t
                        if allowed[t2]:
                            words.append(t2)
                    elif s[:1].isdigit() and allowed[t] and not string:
                        words.append(t)
                cands["word"] = words[:1]
                cands["tree2"] = words[:2]
                cands["tree3"] = words[:3]
                for v in variants[1:]:
                    if choice in cands[v]:
                        saved[v][r] += 1
                        hits_at[v].append(f"{before[-12:]!r} -> {text(choice)!r}")
        for v in variants:
            new_rows = row_calls - saved[v]
            new_iter = int(new_rows.max())
            iters[v].append(new_iter)
            decode = t_spec - prefill
            totals[v] += prefill + decode * new_iter / max(n_iter, 1)
    print(f"batches: {len(iters['ff'])}; costs: prefill {prefill:.2f}, {cost}")
    print(
        "| source | decode iterations per batch | priced time (one-token calls) | vs ff | vs spec |"
    )
    print("|---|---|---:|---:|---:|")
    for k in ("ff", "spec", *variants):
        print(
            f"| {k} | {iters[k]} | {totals[k]:.1f} | {totals['ff'] / totals[k]:.2f}x | "
            f"{totals['spec'] / totals[k]:.2f}x |"
        )
    for v in variants:
        print(v, "hits:", len(hits_at[v]), hits_at[v][:12])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
