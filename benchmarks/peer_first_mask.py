"""Time to first mask of the peers (XGrammar, llguidance) on the SchemaStore and BFCL schemas.

The yardstick for issue 20's goal (compile + first mask p50 <= 50 ms, p90 <= 300 ms):
what a native engine that builds its masks ahead (XGrammar: C++, an adaptive token-mask
cache per grammar position, context-dependent tokens checked at each step) and one that
builds them lazily (llguidance: Rust, a derivative-based lexer and an Earley parser, the
mask of a state computed when it is reached) take on the same files, Llama-3 vocabulary.

Per schema: XGrammar = ``GrammarCompiler(cache_enabled=False).compile_json_schema`` +
``GrammarMatcher`` + the first ``fill_next_token_bitmask``; llguidance =
``LLMatcher(grammar_from_json_schema)`` + the first ``compute_bitmask``. The tokenizer
setup (once per vocabulary) is timed apart. Each schema runs in the same process, in
name order, cold (caches off where the peer has one). A peer's refusal is recorded with
its message, not timed.

XGrammar pulls in torch (CUDA wheels, ~6 GB), so it is not a bench extra; run this in a
separate virtual environment::

    python -m venv /tmp/venv-peers
    /tmp/venv-peers/bin/pip install xgrammar llguidance check-jsonschema
    /tmp/venv-peers/bin/pip install --no-deps bfcl-eval   # for --bfcl N
    /tmp/venv-peers/bin/python benchmarks/peer_first_mask.py --bfcl 40 --out F.json

Our side of the same schemas comes from `schema_corpus_bench.py` (SchemaStore) and
`first_mask_ab.py --bfcl 40` (the same BFCL sample), on the same machine, reported next to
this in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import schema_corpus_bench as scb  # noqa: E402  (numpy and the standard library only)
from _bench_util import machine  # noqa: E402

TOKENIZER = scb.TOKENIZERS / "llama3" / "tokenizer.json"


def _allowed(bits, vocab_size: int) -> int:
    """How many tokens a bitmask (int32 words, token i at bit i % 32 of word i // 32) allows."""
    flags = np.unpackbits(np.ascontiguousarray(bits).view(np.uint8), bitorder="little")
    return int(flags[:vocab_size].sum())


def xgrammar_runner(tokenizer_path: Path, threads: int):
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_path))
    info = xgr.TokenizerInfo.from_huggingface(tok)
    compiler = xgr.GrammarCompiler(info, max_threads=threads, cache_enabled=False)

    def run(schema):
        cg = compiler.compile_json_schema(json.dumps(schema), strict_mode=False)
        matcher = xgr.GrammarMatcher(cg)
        bits = xgr.allocate_token_bitmask(1, info.vocab_size)
        matcher.fill_next_token_bitmask(bits)
        return _allowed(bits.numpy(), info.vocab_size)

    return run


def llguidance_runner(tokenizer_path: Path):
    import llguidance as llg
    import llguidance.numpy as lln

    text = tokenizer_path.read_text()
    eos = [128001, 128009]  # <|end_of_text|>, <|eot_id|>
    lltok = llg.LLTokenizer(text, eos_token=eos)

    def run(schema):
        grammar = llg.LLMatcher.grammar_from_json_schema(schema)
        m = llg.LLMatcher(lltok, grammar, log_level=0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        bits = lln.allocate_token_bitmask(1, lltok.vocab_size)
        lln.fill_next_token_bitmask(m, bits, 0)
        if m.is_error():
            raise RuntimeError(m.get_error())
        return _allowed(bits, lltok.vocab_size)

    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", default="xgrammar,llguidance")
    parser.add_argument("--schemastore", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--bfcl", type=int, default=0, help="BFCL function schemas (sampled)")
    parser.add_argument("--threads", type=int, default=8, help="XGrammar's max_threads")
    parser.add_argument("--tokenizer", type=Path, default=TOKENIZER)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    schemas = {f"schemastore:{k}": v for k, v in scb.schemastore_schemas().items()}
    if args.schemastore:
        schemas = {f"schemastore:{k}": schemas[f"schemastore:{k}"] for k in args.schemastore}
    if args.bfcl:  # the same sample as first_mask_ab.py --bfcl N
        schemas.update({f"bfcl:{k}": v for k, v in scb.bfcl_schemas(args.bfcl).items()})
    out = {"machine": machine(), "peers": {}}
    for peer in args.peers.split(","):
        t0 = time.perf_counter()
        if peer == "xgrammar":
            run = xgrammar_runner(args.tokenizer, args.threads)
        elif peer == "llguidance":
            run = llguidance_runner(args.tokenizer)
        else:
            sys.exit(f"--peers: unknown peer {peer!r} (xgrammar, llguidance)")
        setup_s = time.perf_counter() - t0
        version = importlib.metadata.version(peer)
        rows = {}
        for name, schema in schemas.items():
            t = time.perf_counter()
            try:
                allowed = run(schema)
                rows[name] = {"first_mask_s": time.perf_counter() - t, "allowed": allowed}
            except Exception as e:  # a peer's refusal: recorded, not timed
                rows[name] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
            r = rows[name]
            shown = f"{r['first_mask_s'] * 1e3:.1f} ms" if "first_mask_s" in r else r["error"]
            print(f"{peer} {name}: {shown}", flush=True)
        summary = {}
        for corpus in sorted({name.split(":")[0] for name in rows}):
            mine = {k: r for k, r in rows.items() if k.startswith(corpus + ":")}
            times = [r["first_mask_s"] for r in mine.values() if "first_mask_s" in r]
            summary[corpus] = {
                "refused": len(mine) - len(times),
                **(scb.stats(times) if times else {}),
            }
        out["peers"][peer] = {
            "version": version,
            "tokenizer_setup_s": setup_s,
            "schemas": rows,
            "summary": summary,
        }
        print(peer, json.dumps(out["peers"][peer]["summary"]), flush=True)
    args.out.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
