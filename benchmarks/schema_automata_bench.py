"""Intersections and complements in JSON Schemas: before / after the automaton core (issue 9).

Cases: ``pattern`` + ``maxLength``, ``format`` + ``maxLength``, ``not`` and ``allOf`` of
patterns, and ``propertyNames``, on realistic patterns (URLs, e-mail addresses, dates,
identifiers, semantic versions), and stacked bounded repeats (regexes). Each case is
compiled (`compile_json_schema` / `compile_regex`) for the Gemma-3 vocabulary, in a fresh
process cut after ``--timeout`` seconds; the result is the token DFA's states and the
compile time (median of ``--repeats``, trie prebuilt), or the error that refused it.

To compare two versions of the compiler, run the script once per version with that
version's ``compile/`` folder first on ``PYTHONPATH`` and ``--output``, then render both:

  PYTHONPATH=OLD/compile python benchmarks/schema_automata_bench.py --output before.json
  PYTHONPATH=compile python benchmarks/schema_automata_bench.py --output after.json
  python benchmarks/schema_automata_bench.py --render before.json after.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "gemma3" / "tokenizer.json"

URL = r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%!$&'()*+,;=:@-]*)*$"
EMAIL = r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$"
IDENT = r"^[A-Za-z_][A-Za-z0-9_]*$"
SEMVER = r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$"
DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"


def _s(**kw):
    return {"type": "string", **kw}


CASES = {
    "pattern URL + maxLength 64": _s(pattern=URL, maxLength=64),
    "pattern email + maxLength 40": _s(pattern=EMAIL, maxLength=40),
    "pattern identifier + maxLength 32": _s(pattern=IDENT, maxLength=32),
    "pattern semver + maxLength 20": _s(pattern=SEMVER, maxLength=20),
    "format email + maxLength 40": _s(format="email", maxLength=40),
    "format uri + maxLength 64": _s(format="uri", maxLength=64),
    "format date-time + maxLength 25": _s(format="date-time", maxLength=25),
    "format uuid + minLength 36": _s(format="uuid", minLength=36),
    "not enum (identifier, no keyword)": _s(pattern=IDENT, **{"not": {"enum": ["class", "def"]}}),
    "not pattern (no whitespace)": _s(**{"not": {"pattern": r"\s"}}),
    "not format (anything but an email)": _s(**{"not": {"format": "email"}}),
    "allOf patterns (password rules)": _s(
        allOf=[
            {"pattern": "[0-9]"},
            {"pattern": "[A-Z]"},
            {"pattern": "[a-z]"},
            {"pattern": r"^\S{8,64}$"},
        ]
    ),
    "allOf date pattern + format date": {"allOf": [_s(pattern=DATE), _s(format="date")]},
    "allOf URL pattern + format uri": {"allOf": [_s(pattern=URL), _s(format="uri")]},
    "propertyNames identifier, maxLength 16": {
        "type": "object",
        "propertyNames": {"pattern": IDENT, "maxLength": 16},
        "additionalProperties": {"type": "integer"},
    },
}


# Stacked bounded repeats (regexes, `compile_regex`): before issue 9 the first took 73 s
# and the second did not finish.
REPEATS = {
    "(.{0,100}){10}": "(.{0,100}){10}",
    "(.{0,100}){100}": "(.{0,100}){100}",
    "(.{0,50}){10}": "(.{0,50}){10}",
    "([a-z]{0,20}){5}": "([a-z]{0,20}){5}",
    "((ab|.){0,100}){10}": "((ab|.){0,100}){10}",
}


def _one(kind: str, spec, repeats: int, conn) -> None:
    import automata_compile as ac

    vocab = ac.Vocabulary.from_file(str(TOKENIZER))
    ac.compile_regex("a", vocab)  # builds the trie once
    compile_ = ac.compile_json_schema if kind == "schema" else ac.compile_regex
    times = []
    row: dict = {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        try:
            dfa = compile_(spec, vocab)
        except ac.AutomataError as e:
            row = {"error": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - t0}
            break
        times.append(time.perf_counter() - t0)
        row = {"states": dfa.num_states, "classes": dfa.num_classes}
    if times:
        row["seconds"] = statistics.median(times)
    conn.send(row)


def run(repeats: int, timeout: float) -> dict:
    """Each case in a fresh process (so a case that never ends is cut at ``timeout``)."""
    import multiprocessing as mp

    out: dict = {"cases": {}, "repeats": {}}
    for kind, table, key in (("schema", CASES, "cases"), ("regex", REPEATS, "repeats")):
        for name, spec in table.items():
            parent, child = mp.Pipe()
            proc = mp.Process(target=_one, args=(kind, spec, repeats, child))
            t0 = time.perf_counter()
            proc.start()
            if parent.poll(timeout):
                row = parent.recv()
            else:
                row = {"error": f"timeout: still running after {timeout:.0f} s", "seconds": timeout}
            proc.kill()
            proc.join()
            row["wall"] = time.perf_counter() - t0
            out[key][name] = row
            print(f"{name}: {row}", flush=True)
    return out


def _cell(row: dict) -> str:
    if row.get("error", "").startswith("timeout"):
        return f"did not finish in {row['seconds']:.0f} s (cut)"
    if "error" in row:
        msg = row["error"].split(": ", 1)[-1].replace("|", "&#124;")
        return f"refused ({row['seconds']:.2f} s): {msg[:110]}"
    return f"{row['states']:,} states, {row['seconds']:.2f} s"


def render(before: dict, after: dict) -> str:
    lines = []
    for key, title in (("cases", "schema"), ("repeats", "regex")):
        lines += [
            "",
            f"| {title} | before (main at 87f12b6) | after |",
            "| --- | --- | --- |",
        ]
        for name in after[key]:
            b = before[key].get(name)
            cell_b = _cell(b) if b else "n/a"
            lines.append(
                f"| {name.replace('|', '&#124;')} | {cell_b} | {_cell(after[key][name])} |"
            )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=150, help="seconds per case")
    ap.add_argument("--output", default=None, help="write the results (JSON) here")
    ap.add_argument("--render", nargs=2, metavar=("BEFORE", "AFTER"), default=None)
    args = ap.parse_args(argv)
    if args.render:
        b, a = (json.loads(Path(p).read_text()) for p in args.render)
        print(render(b, a))
        return 0
    results = run(args.repeats, args.timeout)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
