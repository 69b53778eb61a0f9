"""Objects in any property order vs declared order (issue 11): states and compile time.

Cases: the bundled ``automata_jax/data/person.json`` and realistic extraction objects of
4, 6, 8 and 10 properties (strings, bounded integers, enums, numbers, booleans, a date,
an array of strings; half of them required), closed (``additionalProperties: false``)
and open (undeclared properties allowed, the default). Each is compiled with
``property_order="any"`` and ``"declared"`` side by side in one run for the Llama-3
vocabulary (trie prebuilt); the result is the token DFA's states and the median compile
time, or the error that refused it (the any-order budget). ``--no-budget`` lifts the
any-order budget to show what it prevents. First it prints the budget's estimate for 1..10
properties (no compile), which shows where the budget bites.

  python benchmarks/object_order_bench.py [--repeats 3] [--no-budget]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ROOT.parent / "shared" / "tokenizers" / "llama3" / "tokenizer.json"
RESULTS = ROOT / "benchmarks" / "results" / "object_order.json"

POOL = {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "role": {"enum": ["admin", "editor", "viewer"]},
    "active": {"type": "boolean"},
    "email": {"type": "string"},
    "score": {"type": "number"},
    "joined": {"type": "string", "format": "date"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "city": {"type": "string"},
    "manager": {"type": ["string", "null"]},
}


def extraction_object(n: int, closed: bool) -> dict:
    names = list(POOL)[:n]
    schema = {
        "type": "object",
        "properties": {k: POOL[k] for k in names},
        "required": names[: n // 2],
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


def cases() -> dict:
    out = {"person.json": json.loads((ROOT / "automata_jax" / "data" / "person.json").read_text())}
    for n in (4, 6, 8, 10):
        out[f"{n} properties, closed"] = extraction_object(n, True)
    for n in (4, 6):
        out[f"{n} properties, open"] = extraction_object(n, False)
    out["issue 11 item (4 declared, open)"] = {
        "type": "object",
        "properties": {
            "run": {"type": "string"},
            "parameters": {"type": "object"},
            "cache": {"type": "boolean"},
            "validate": {"type": "boolean"},
        },
    }
    out["6 booleans/enums, closed"] = {
        "type": "object",
        "properties": {f"f{i}": POOL["active" if i % 2 else "role"] for i in range(6)},
        "additionalProperties": False,
    }
    return out


def run_case(schema, vocab, order: str, repeats: int) -> dict:
    import automata_compile as ac
    from automata_compile.frontends.json_schema import _emitter

    costs = []
    charge = _emitter._OrderBudget.charge

    def recording(self, sets, nexts, w, room):
        try:
            charge(self, sets, nexts, w, room)
        finally:
            costs.append((sets, self.states))

    _emitter._OrderBudget.charge = recording
    times = []
    try:
        for _ in range(repeats):
            costs.clear()
            t0 = time.perf_counter()
            try:
                dfa = ac.compile_json_schema(schema, vocab, property_order=order, timeout_s=120)
            except ac.AutomataError as e:
                took = time.perf_counter() - t0
                return {"error": f"{type(e).__name__}: {e}"[:200], "error_s": took, **_cost(costs)}
            times.append(time.perf_counter() - t0)
    finally:
        _emitter._OrderBudget.charge = charge
    return {"states": dfa.num_states, "compile_s": statistics.median(times), **_cost(costs)}


def _cost(costs) -> dict:
    if not costs:
        return {}
    return {"sets": max(s for s, _ in costs), "estimated_states": max(c for _, c in costs)}


def estimates() -> dict:
    """The any-order budget's estimate (byte-DFA states) for 1..10 properties of the
    extraction object, closed and open, with the budget lifted (no compile)."""
    from automata_compile.frontends.json_schema import _emitter, parse_options, schema_ir

    saved = _emitter.MAX_ORDER_SETS, _emitter.MAX_ORDER_STATES
    _emitter.MAX_ORDER_SETS = _emitter.MAX_ORDER_STATES = 10**12
    charge = _emitter._OrderBudget.charge
    seen = []

    def recording(self, *args):
        charge(self, *args)
        seen.append(self.states)

    _emitter._OrderBudget.charge = recording
    out = {}
    try:
        for closed in (True, False):
            for n in range(1, 11):
                seen.clear()
                schema_ir(extraction_object(n, closed), parse_options({}))
                out[f"{n} {'closed' if closed else 'open'}"] = max(seen, default=0)
    finally:
        _emitter._OrderBudget.charge = charge
        _emitter.MAX_ORDER_SETS, _emitter.MAX_ORDER_STATES = saved
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-budget", action="store_true")
    ap.add_argument("--output", type=Path, default=RESULTS)
    ap.add_argument("--estimates-only", action="store_true", help="print the estimates, exit")
    args = ap.parse_args()
    est = estimates()
    print(json.dumps({"estimated_states": est}), flush=True)
    if args.estimates_only:
        return
    import automata_compile as ac
    from automata_compile.frontends.json_schema import _emitter
    from automata_compile.tokens._token_trie import trie_for

    if args.no_budget:
        _emitter.MAX_ORDER_SETS = _emitter.MAX_ORDER_STATES = 10**12
    vocab = ac.Vocabulary.from_file(TOKENIZER)
    trie_for(vocab)
    rows = {}
    for name, schema in cases().items():
        rows[name] = {
            order: run_case(schema, vocab, order, args.repeats) for order in ("any", "declared")
        }
        print(json.dumps({name: rows[name]}), flush=True)
    from _bench_util import machine

    out = {
        "machine": machine(),
        "budget": {
            "max_order_sets": _emitter.MAX_ORDER_SETS,
            "max_order_states": _emitter.MAX_ORDER_STATES,
        },
        "rows": rows,
        "estimated_states": est,
    }
    args.output.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
