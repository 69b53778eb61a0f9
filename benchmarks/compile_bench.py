"""Compile time: `automata_compile.compile_regex` vs outlines-core's `Index`, side by side.

For a fixed set of patterns — classic small ones (number, date, email-ish, quoted string,
``.{0,50}``, ...) and JSON-Schema-sized regexes (500-5,000 characters) that outlines-core's own
``build_regex_from_schema`` makes from the realistic schemas below (flat, nested, enum-heavy,
array-heavy, optional properties, one large combination) — on the Gemma-3 (262,145 ids) and
Llama-3 (128,256 ids) vocabularies, in one run:

* ours: `compile_regex` time, median of ``--repeats`` runs, with the vocabulary's byte trie
  prebuilt (its build time is reported once per vocabulary, as outlines-core's `Vocabulary`
  construction is); Q (states), C (token classes), table bytes (token_class + next_state +
  accepting);
* outlines-core: ``Index(pattern, vocabulary)`` build time (median of ``--repeats`` when a build
  takes < 5 s, else one run) in a worker process, killed past ``--timeout`` seconds (reported as
  "> 60 s"); its number of states.

Both sides see the same token set: the outlines-core `Vocabulary` is built from our
`Vocabulary`'s exact bytes (``{token_bytes: [ids]}``, every id whose bytes are not None / empty),
with the first EOS id as its ``eos_token_id`` (outlines-core takes one EOS; ours allows all the
tokenizer's EOS ids). As a sanity check the allowed sets in the initial state are compared, and
the differences are reported.

Run: ``python benchmarks/compile_bench.py [--vocabs gemma3,llama3] [--repeats 3] [--timeout 60]``
Writes ``benchmarks/results/compile.json`` and prints a Markdown table; ``--write-md`` also
replaces the compile section of ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _bench_util  # noqa: E402

import automata_compile as ac
from automata_compile.tokens._token_trie import trie_for

ROOT = Path(__file__).resolve().parents[1]
TOKENIZERS = ROOT.parent / "shared" / "tokenizers"
RESULTS = ROOT / "benchmarks" / "results" / "compile.json"
BENCHMARKS_MD = ROOT / "BENCHMARKS.md"

# -- the patterns ---------------------------------------------------------------------------------

SMALL = {
    "number": r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    "date": r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    "email_ish": r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}",
    "quoted_string": r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"',
    "dot_0_50": r".{0,50}",
    "line_0_200": r"[^\n]{0,200}",
}

_STRING = {"type": "string"}
_COUNTRIES = (
    """Afghanistan Albania Algeria Argentina Australia Austria Bangladesh Belgium Brazil
Bulgaria Canada Chile China Colombia Croatia Czechia Denmark Egypt Estonia Ethiopia Finland France
Germany Greece Hungary Iceland India Indonesia Iran Iraq Ireland Israel Italy Japan Kenya Latvia
Lithuania Luxembourg Malaysia Mexico Morocco Netherlands Nigeria Norway Pakistan Peru Philippines
Poland Portugal Romania Russia Singapore Slovakia Slovenia Spain Sweden Switzerland Thailand Turkey
Ukraine Vietnam""".split()
    + ["New Zealand", "Saudi Arabia", "South Africa", "United Kingdom"]
)

FLAT = {
    "title": "Person",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "first_name": {"type": "string", "maxLength": 32},
        "last_name": {"type": "string", "maxLength": 32},
        "email": {"type": "string", "format": "email"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "height_m": {"type": "number"},
        "is_active": {"type": "boolean"},
        "signup_date": {"type": "string", "format": "date"},
        "country": {"type": "string", "pattern": "^[A-Z]{2}$"},
        "nickname": {"type": ["string", "null"]},
    },
}
FLAT["required"] = list(FLAT["properties"])

NESTED = {
    "title": "Order",
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "format": "uuid"},
        "created_at": {"type": "string", "format": "date-time"},
        "customer": {
            "type": "object",
            "properties": {
                "name": _STRING,
                "address": {
                    "type": "object",
                    "properties": {
                        "street": _STRING,
                        "city": _STRING,
                        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                        "country": {"type": "string", "enum": ["US", "CA", "MX"]},
                    },
                    "required": ["street", "city", "zip", "country"],
                },
            },
            "required": ["name", "address"],
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": _STRING,
                    "quantity": {"type": "integer"},
                    "price": {"type": "number"},
                },
                "required": ["sku", "quantity", "price"],
            },
            "minItems": 1,
        },
        "total": {"type": "number"},
        "paid": {"type": "boolean"},
    },
    "required": ["order_id", "created_at", "customer", "items", "total", "paid"],
}

ENUMS = {
    "title": "Ticket",
    "type": "object",
    "properties": {
        "status": {
            "enum": [
                "open",
                "in_progress",
                "blocked",
                "in_review",
                "resolved",
                "closed",
                "reopened",
            ]
        },
        "priority": {"enum": ["lowest", "low", "medium", "high", "highest", "critical"]},
        "category": {
            "enum": [
                "bug",
                "feature",
                "improvement",
                "task",
                "sub-task",
                "epic",
                "story",
                "incident",
                "question",
                "documentation",
            ]
        },  # fmt: skip
        "country": {"enum": _COUNTRIES},
        "currency": {
            "enum": "USD EUR GBP JPY CNY INR CAD AUD CHF SEK NOK DKK PLN BRL MXN ZAR".split()
        },
        "severity": {"type": "integer", "enum": [1, 2, 3, 4, 5]},
        "escalated": {"type": "boolean"},
    },
}
ENUMS["required"] = list(ENUMS["properties"])

ARRAYS = {
    "title": "Measurements",
    "type": "object",
    "properties": {
        "sensor": {"type": "string", "maxLength": 20},
        "readings": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 8},
        "flags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 4},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 5},
        "matrix": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "integer"}, "minItems": 3, "maxItems": 3},
            "minItems": 2,
            "maxItems": 3,
        },
        "points": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                "required": ["x", "y"],
            },
            "maxItems": 4,
        },
    },
}
ARRAYS["required"] = list(ARRAYS["properties"])

OPTIONAL = {
    "title": "Profile",
    "type": "object",
    "properties": {
        "username": {"type": "string", "maxLength": 24},
        "display_name": {"type": "string", "maxLength": 40},
        "bio": {"type": "string", "maxLength": 160},
        "website": {"type": "string", "format": "uri"},
        "followers": {"type": "integer", "minimum": 0},
        "verified": {"type": "boolean"},
        "joined": {"type": "string", "format": "date"},
    },
    "required": ["username"],
}

LARGE = {
    "title": "Shipment",
    "type": "object",
    "properties": {
        "order": NESTED,
        "ticket": ENUMS,
        "telemetry": ARRAYS,
        "carrier": {
            "enum": ["UPS", "FedEx", "DHL", "USPS", "Royal Mail", "La Poste", "Japan Post"]
        },
    },
    "required": ["order", "ticket", "telemetry", "carrier"],
}

SCHEMAS = {
    "schema_flat": FLAT,
    "schema_nested": NESTED,
    "schema_enum_heavy": ENUMS,
    "schema_array_heavy": ARRAYS,
    "schema_optional": OPTIONAL,
    "schema_large": LARGE,
}

VOCABS = {
    "gemma3": TOKENIZERS / "gemma3" / "tokenizer.json",
    "llama3": TOKENIZERS / "llama3" / "tokenizer.json",
}


def patterns() -> dict[str, str]:
    from outlines_core.json_schema import build_regex_from_schema

    out = dict(SMALL)
    for name, schema in SCHEMAS.items():
        out[name] = build_regex_from_schema(json.dumps(schema))
    return out


# -- outlines-core, in a worker process -----------------------------------------------------------


def _outlines_worker(conn, tokenizer_path: str, repeats: int, max_memory: int):
    """Builds the outlines-core Vocabulary once, then answers (pattern) -> result messages."""
    import resource

    # A cap on the worker's address space: a huge Index fails here instead of waking the
    # machine's OOM killer (which may pick another process).
    resource.setrlimit(resource.RLIMIT_AS, (max_memory, max_memory))
    import outlines_core

    vocab = ac.Vocabulary.from_file(tokenizer_path)
    t0 = time.perf_counter()
    table: dict[bytes, list[int]] = {}
    for i, t in enumerate(vocab.tokens):
        if t:
            table.setdefault(t, []).append(i)
    ovocab = outlines_core.Vocabulary(vocab.eos_ids[0], table)
    conn.send({"vocab_build_s": time.perf_counter() - t0, "num_tokens": len(ovocab)})
    while True:
        pattern = conn.recv()
        if pattern is None:
            return
        try:
            times, index = [], None
            for _ in range(repeats):
                t0 = time.perf_counter()
                index = outlines_core.Index(pattern, ovocab)
                times.append(time.perf_counter() - t0)
                if times[0] > 5.0:
                    break
            init = index.get_initial_state()
            allowed = sorted(set(index.get_allowed_tokens(init)) - set(vocab.eos_ids))
            conn.send(
                {
                    "index_s": statistics.median(times),
                    "runs": len(times),
                    "states": len(index.get_transitions()),
                    "initial_final": bool(index.is_final_state(init)),
                    "initial_allowed": allowed,
                }
            )
        except Exception as e:  # report outlines-core's refusals as results, not crashes
            conn.send({"error": f"{type(e).__name__}: {e}"})


class OutlinesRunner:
    """A worker per vocabulary; restarted after a timeout."""

    def __init__(self, tokenizer_path: Path, repeats: int, timeout: float, max_memory_gb: float):
        self.path, self.repeats, self.timeout = str(tokenizer_path), repeats, timeout
        self.max_memory = int(max_memory_gb * 2**30)
        self.proc = None
        self.vocab_info = None

    def _start(self):
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(
            target=_outlines_worker, args=(child, self.path, self.repeats, self.max_memory)
        )
        self.proc.start()
        info = self.conn.recv()
        if self.vocab_info is None:
            self.vocab_info = info

    def run(self, pattern: str) -> dict:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send(pattern)
        # Repeats happen only after a first build under 5 s, so `timeout` bounds the whole case.
        if self.conn.poll(self.timeout):
            try:
                result = self.conn.recv()
            except EOFError:  # the worker died: its address-space cap (or a crash)
                self.close(kill=True)
                return {
                    "error": f"worker died (exit code {self.proc_exitcode}); over the "
                    f"{self.max_memory / 2**30:.0f} GiB memory cap?"
                }
            if result.get("index_s", 0) > self.timeout:
                return {"timeout": True, "index_s": result["index_s"]}
            return result
        self.close(kill=True)
        return {"timeout": True}

    proc_exitcode = None

    def close(self, kill: bool = False):
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.conn.send(None)
        self.proc.join(timeout=30)
        self.proc_exitcode = self.proc.exitcode
        self.proc = None


# -- ours -----------------------------------------------------------------------------------------


def run_ours(pattern: str, vocab, repeats: int) -> dict:
    times, dfa = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        dfa = ac.compile_regex(pattern, vocab)
        times.append(time.perf_counter() - t0)
    allowed = dfa.next_state[dfa.start][dfa.token_class] >= 0
    return {
        "compile_s": statistics.median(times),
        "compile_runs_s": times,
        "states": dfa.num_states,
        "classes": dfa.num_classes,
        "table_bytes": dfa.nbytes,
        "initial_accepting": bool(dfa.accepting[dfa.start]),
        "initial_allowed": np.flatnonzero(allowed).tolist(),
    }


# -- reporting ------------------------------------------------------------------------------------


def machine() -> dict:
    from importlib.metadata import version

    return _bench_util.machine(outlines_core=version("outlines_core"))


def _fmt_s(x) -> str:
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = [
        "## Compile time: automata_compile vs outlines-core",
        "",
        _bench_util.machine_line(m, f"NumPy {m['numpy']}", f"outlines-core {m['outlines_core']}"),
        f"Command: `{m['command']}`. Results: `benchmarks/results/compile.json`.",
        "",
        "Ours: `compile_regex` median of "
        f"{results['repeats']} with the vocabulary's trie prebuilt. outlines-core: `Index(pattern, "
        "vocabulary)` build (median of the same number when a build takes < 5 s, else one run), "
        f"killed after {results['timeout_s']:.0f} s or at a "
        f"{results.get('max_memory_gb', 6):.0f} GiB address-space cap. Same token set on both sides (see the script's "
        "docstring). Q = states, C = token classes, bytes = token_class + next_state + accepting.",
        "",
    ]
    for vname, v in results["vocabularies"].items():
        lines += [
            f"**{vname}** ({v['size']:,} ids): vocabulary load {v['load_s']:.2f} s, our trie "
            f"{v['trie_s']:.2f} s ({v['trie_nodes']:,} nodes); outlines-core `Vocabulary` "
            f"{v['outlines_vocab_s']:.2f} s ({v['outlines_tokens']:,} distinct token strings).",
            "",
            "| pattern | chars | ours (s) | outlines-core (s) | speed-up | Q | C | table bytes | outlines states | initial allowed: ours / outlines |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for c in v["cases"]:
            o, u = c["ours"], c["outlines"]
            if u.get("timeout"):
                ot, sp, ost, agree = (
                    f"> {results['timeout_s']:.0f}",
                    "> " + (f"{results['timeout_s'] / o['compile_s']:.0f}x"),
                    "",
                    "n/a",
                )
            elif "error" in u and ("MemoryError" in u["error"] or "memory cap" in u["error"]):
                cap = results.get("max_memory_gb", 6)
                ot, sp, ost, agree = f"> {cap:.0f} GiB memory", "", "", "n/a"
            elif "error" in u:
                ot, sp, ost, agree = "error", "", "", u["error"][:60]
            else:
                ot = _fmt_s(u["index_s"])
                sp = f"{u['index_s'] / o['compile_s']:.1f}x"
                ost = f"{u['states']:,}"
                agree = f"{c['allowed_ours']:,} / {c['allowed_outlines']:,}" + (
                    ""
                    if c["only_ours"] == c["only_outlines"] == 0
                    else f" (only ours {c['only_ours']}, only outlines {c['only_outlines']})"
                )
            lines.append(
                f"| {c['name']} | {c['chars']:,} | {_fmt_s(o['compile_s'])} | {ot} | {sp} | "
                f"{o['states']:,} | {o['classes']:,} | {o['table_bytes']:,} | {ost} | {agree} |"
            )
        lines.append("")
    lines += [
        "Notes. (1) The machine is a shared 2-core box (other jobs ran alongside: see the load "
        "averages), so absolute times are noisy by up to ~2-3x between runs; both sides ran "
        "interleaved in the same run. (2) Initial-state differences: outlines-core never allows a "
        "token that ends inside a UTF-8 character where the text before it already matches the "
        "pattern (regex-automata's delayed match states), e.g. the lone lead bytes `b'\\xc3'` "
        "... at the start of `.{0,50}`; ours allows them (the continuation byte completes a "
        "valid string), as the exact-mask oracle tests require. EOS ids are excluded from the "
        "comparison (outlines-core takes one EOS id, ours all of the tokenizer's). "
        "(3) outlines-core's Index keeps states we minimize away, so its state counts are larger.",
        "",
    ]
    return "\n".join(lines)


def write_md(text: str) -> None:
    _bench_util.write_md_section("compile_bench", text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocabs", default="gemma3,llama3")
    parser.add_argument("--cases", default="", help="comma-separated pattern names (default all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--max-memory-gb", type=float, default=6.0, help="outlines worker cap")
    parser.add_argument("--no-outlines", action="store_true")
    parser.add_argument("--write-md", action="store_true", help="update BENCHMARKS.md")
    parser.add_argument("--output", default=str(RESULTS))
    parser.add_argument(
        "--from-json", default=None, help="only re-render the Markdown of a results file"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        text = markdown(json.loads(Path(args.from_json).read_text()))
        print(text)
        if args.write_md:
            write_md(text)
        return 0

    pats = patterns()
    if args.cases:
        pats = {k: pats[k] for k in args.cases.split(",")}
    results = {
        "machine": machine(),
        "repeats": args.repeats,
        "timeout_s": args.timeout,
        "max_memory_gb": args.max_memory_gb,
        "patterns": pats,
        "vocabularies": {},
    }
    for vname in args.vocabs.split(","):
        path = VOCABS[vname]
        if not path.is_file():
            print(f"skipping {vname}: {path} not present", file=sys.stderr)
            continue
        t0 = time.perf_counter()
        vocab = ac.Vocabulary.from_file(path)
        t1 = time.perf_counter()
        trie = trie_for(vocab)
        t2 = time.perf_counter()
        runner = (
            None
            if args.no_outlines
            else OutlinesRunner(path, args.repeats, args.timeout, args.max_memory_gb)
        )
        entry = {
            "size": vocab.size,
            "load_s": t1 - t0,
            "trie_s": t2 - t1,
            "trie_nodes": trie.num_nodes,
            "cases": [],
        }
        eos = set(vocab.eos_ids)
        for name, pattern in pats.items():
            ours = run_ours(pattern, vocab, args.repeats)
            outl = runner.run(pattern) if runner else {"skipped": True}
            case = {"name": name, "chars": len(pattern), "ours": ours, "outlines": outl}
            a = set(ours.pop("initial_allowed")) - eos
            if "initial_allowed" in outl:
                b = set(outl.pop("initial_allowed"))
                case.update(
                    allowed_ours=len(a),
                    allowed_outlines=len(b),
                    only_ours=len(a - b),
                    only_outlines=len(b - a),
                    only_ours_examples=[repr(vocab.tokens[i]) for i in sorted(a - b)[:8]],
                    only_outlines_examples=[repr(vocab.tokens[i]) for i in sorted(b - a)[:8]],
                )
            entry["cases"].append(case)
            shown = (
                "timeout"
                if outl.get("timeout")
                else outl.get("error") or f"{outl.get('index_s', float('nan')):.3f}s"
            )
            print(
                f"{vname:7s} {name:20s} {len(pattern):5d} chars  ours {ours['compile_s']:.3f}s "
                f"Q={ours['states']} C={ours['classes']}  outlines {shown}",
                flush=True,
            )
        if runner:
            entry["outlines_vocab_s"] = runner.vocab_info["vocab_build_s"]
            entry["outlines_tokens"] = runner.vocab_info["num_tokens"]
            runner.close()
        else:
            entry["outlines_vocab_s"], entry["outlines_tokens"] = float("nan"), 0
        results["vocabularies"][vname] = entry
    results["machine"]["loadavg_end"] = os.getloadavg()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    text = markdown(results) if not args.no_outlines else json.dumps(results["machine"])
    print(text)
    if args.write_md and not args.no_outlines:
        write_md(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
