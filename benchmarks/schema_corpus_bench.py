"""Real-world JSON Schemas: compile every one, and time to first mask.

Three corpora, on the Llama-3 vocabulary (128,256 ids):

* **SchemaStore** schemas vendored by the ``check-jsonschema`` package (GitHub workflows, GitLab
  CI, Azure Pipelines, Renovate, ...; ``pip install check-jsonschema``, a bench extra). Each is
  compiled with `compile_json_schema` in strict mode; a refusal is reported with its exception,
  keyword and JSON pointer, and the schema is then tried again in lenient mode (keywords that
  cannot be enforced are dropped, with warnings) so the table also says how large the rest is.
* **The official JSON Schema Test Suite** (draft 2020-12), one schema per test group, as
  `tools/schema_coverage.py` reads it, strict mode.
* **BFCL function schemas**: the argument schemas of the Berkeley Function Calling
  Leaderboard's functions (``pip install --no-deps bfcl-eval``; every category with function
  documents), converted from BFCL's dialect by `_bfcl.parameters_schema`, deduplicated, and
  sampled (``--bfcl-limit``, default 150) in a fixed order (by the sha256 of the schema), strict mode.

Every compile runs in a worker process with a wall-clock limit (``--timeout``): a compile past it
is killed and reported as a timeout, so nothing hangs. *Time to first mask* is compile plus the
device table build (`automata_jax.ConstraintTables.from_dfas`, waited for), the delay a user sees
before the first constrained step can run; its p50 / p90 / max over the compiled schemas are
reported (goal: p50 <= 50 ms, nothing over 5 s). ``--profile N`` profiles the N slowest
compiles with cProfile and prints where the time goes.

Run: ``python benchmarks/schema_corpus_bench.py [--timeout 60] [--suite-limit N] [--write-md]``.
Writes ``benchmarks/results/schema_corpus.json``; ``--write-md`` also replaces this benchmark's
section of ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import json
import multiprocessing as mp
import pstats
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from _bench_util import ROOT, machine, machine_line, portable_paths, write_md_section  # noqa: E402

TOKENIZERS = ROOT.parent / "shared" / "tokenizers"
SUITE = ROOT.parent / "shared" / "data" / "json-schema-test-suite" / "draft2020-12"
RESULTS = ROOT / "benchmarks" / "results" / "schema_corpus.json"
MD_MARK = "schema_corpus_bench"


def schemastore_schemas() -> dict[str, object]:
    """The SchemaStore schemas that check-jsonschema vendors, by file name."""
    try:
        import check_jsonschema
    except ImportError:
        sys.exit("check-jsonschema is not installed: pip install check-jsonschema")
    folder = Path(check_jsonschema.__file__).parent / "builtin_schemas" / "vendor"
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def suite_schemas(limit: int | None) -> dict[str, object]:
    """One schema per test group of the official suite (draft 2020-12), optional files too."""
    out = {}
    for path in sorted(SUITE.rglob("*.json")):
        for i, group in enumerate(json.loads(path.read_text())):
            out[f"{path.relative_to(SUITE)}#{i}"] = group["schema"]
    items = list(out.items())
    return dict(items[:limit] if limit else items)


def bfcl_schemas(limit: int | None) -> dict[str, object]:
    """BFCL's distinct function argument schemas (JSON Schema), the first ``limit`` by the
    sha256 of their canonical JSON text, named ``file:function``."""
    import _bfcl

    found: dict[str, tuple[str, object]] = {}
    for path in sorted(_bfcl.data_dir().glob("BFCL_v4_*.json")):
        try:
            rows = _bfcl._jsonl(path)
        except _bfcl.BfclDataError:
            continue  # a file that is not JSON lines (format_sensitivity)
        for q in rows:
            for fn in q.get("function") or []:
                schema = _bfcl.parameters_schema(fn)
                text = json.dumps(schema, sort_keys=True)
                name = f"{path.stem.removeprefix('BFCL_v4_')}:{fn['name']}"
                found.setdefault(hashlib.sha256(text.encode()).hexdigest(), (name, schema))
    picked = [found[k] for k in sorted(found)][:limit]
    out = {}
    for name, schema in picked:
        while name in out:
            name += "'"
        out[name] = schema
    return out


def heldout_schemas() -> dict[str, object]:
    """Real schemas from installed packages that no compile budget or default was tuned on
    (first run in session 26): the JSON Schema meta-schemas of draft-04/06/07
    (``jsonschema-specifications``, a dependency of ``jsonschema``), Jupyter's notebook
    schemas (``nbformat``, a test extra) and the Debug Adapter Protocol (``debugpy``'s
    copy, where installed: the whole file, then each of its definitions as a root)."""
    import importlib.util

    found: dict[str, object] = {}

    def package(name: str) -> Path | None:
        spec = importlib.util.find_spec(name)
        return None if spec is None or spec.origin is None else Path(spec.origin).parent

    specs = package("jsonschema_specifications")
    if specs is not None:
        for draft in ("draft4", "draft6", "draft7"):
            path = specs / "schemas" / draft / "metaschema.json"
            found[f"metaschema-{draft}"] = json.loads(path.read_text())
    nb = package("nbformat")
    if nb is not None:
        for path in sorted(nb.glob("v*/nbformat.v*.schema.json")):
            found[path.name] = json.loads(path.read_text())
    dbg = package("debugpy")
    if dbg is not None:
        for path in dbg.rglob("debugProtocol.json"):
            dap = json.loads(path.read_text())
            found["debugProtocol.json"] = dap
            for k in sorted(dap["definitions"]):
                found[f"dap#{k}"] = {
                    "$ref": f"#/definitions/{k}",
                    "definitions": dap["definitions"],
                }
            break
    return found


# -- the worker -----------------------------------------------------------------------------------


def _compile_one(vocab, schema, strict: bool, profile: bool, options: dict) -> dict:
    import automata_compile as ac
    import automata_jax as aj

    prof = cProfile.Profile() if profile else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        try:
            dfa = ac.compile_json_schema(schema, vocab, strict=strict, **options)
        except ac.AutomataError as e:
            return {
                "refused": type(e).__name__,
                "keyword": getattr(e, "keyword", None),
                "pointer": getattr(e, "pointer", None),
                "message": str(e)[:300],
                "seconds": time.perf_counter() - t0,
                "compile_cpu_s": time.process_time() - c0,
            }
        finally:
            if prof:
                prof.disable()
        compile_s = time.perf_counter() - t0
        compile_cpu_s = time.process_time() - c0  # the worker's CPU time: steadier under load
        t1 = time.perf_counter()
        tables = aj.ConstraintTables.from_dfas(dfa, vocab_size=vocab.size)
        tables.next_state.block_until_ready()
        table_s = time.perf_counter() - t1
    result = {
        "digest": table_digest(dfa),
        "compile_s": compile_s,
        "compile_cpu_s": compile_cpu_s,
        "table_s": table_s,
        "first_mask_s": compile_s + table_s,
        "states": dfa.num_states,
        "classes": dfa.num_classes,
        "table_bytes": dfa.nbytes,
        "warnings": len(caught),
        "order_fallbacks": sum(type(w.message).__name__ == "OrderFallbackWarning" for w in caught),
    }
    if prof:
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
        result["profile"] = portable_paths(out.getvalue())
    return result


def table_digest(dfa) -> str:
    """A short digest of ``dfa``'s tables under `canonical_arrays` (equal tables, equal
    digests, whatever their state numbering): how A/B runs check that a change kept them."""
    digest = hashlib.sha256()
    for a in canonical_arrays(dfa):
        if a is not None:
            digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()[:16]


def canonical_arrays(dfa) -> tuple:
    """The token DFA's arrays with states and classes numbered canonically, so that equal
    arrays mean isomorphic DFAs (the same language, and the same forced runs) however a
    compiler version numbers them: classes by their first token id (class 0, the dead
    class, first), states in breadth-first order from the start over the classes in that
    order. A PDA (not in state blocks) is numbered so too, see `_canonical_pda`; a PDA in
    state blocks is returned as it is (its composer numbers it)."""
    if dfa.is_pda and dfa.is_blocked:
        forced = (dfa.forced_tokens, dfa.forced_len, dfa.forced_next)
        arrays = (dfa.token_class, dfa.next_state, dfa.accepting, np.int64(dfa.start))
        return (*arrays, *forced, *dfa.pda_arrays().values())
    tc, ns = np.asarray(dfa.token_class), np.asarray(dfa.next_state)
    first = np.full(ns.shape[1], tc.shape[0], dtype=np.int64)
    first[tc[::-1]] = np.arange(tc.shape[0])[::-1]
    first[0] = -1
    class_order = np.argsort(first, kind="stable")
    class_id = np.empty_like(class_order)
    class_id[class_order] = np.arange(class_order.shape[0])
    if dfa.is_pda:
        return _canonical_pda(dfa, class_order, class_id)
    ns = ns[:, class_order]
    order, seen = [int(dfa.start)], np.zeros(ns.shape[0], dtype=bool)
    seen[dfa.start] = True
    for s in order:  # grows while it is read: breadth-first
        row = ns[s][ns[s] >= 0]
        _, idx = np.unique(row, return_index=True)
        for t in row[np.sort(idx)].tolist():
            if not seen[t]:
                seen[t] = True
                order.append(t)
    order = np.asarray(order)
    state_id = np.full(ns.shape[0] + 1, -1, dtype=np.int64)
    state_id[order] = np.arange(order.shape[0])
    out = [class_id[tc], state_id[ns[order]], np.asarray(dfa.accepting)[order], np.int64(0)]
    if dfa.forced_tokens is not None:
        out += [np.asarray(dfa.forced_tokens)[order], np.asarray(dfa.forced_len)[order],
                state_id[np.asarray(dfa.forced_next)[order]]]  # fmt: skip
    return tuple(out)


def _canonical_pda(dfa, class_order, class_id) -> tuple:
    """A PDA's arrays with states numbered breadth-first from the start (see the loops),
    ``push_seq`` rows and context-dependent edges sorted. The arrays are an isomorphic image
    of the PDA (stack symbols are states), so equal arrays mean isomorphic PDAs; two
    numberings of one PDA can differ only where a tie keeps its own order (a false "not
    equal", never a false "equal")."""
    ns = np.asarray(dfa.next_state)[:, class_order]
    ep = np.asarray(dfa.edge_push)[:, class_order]
    seq, seq_len = np.asarray(dfa.push_seq), np.asarray(dfa.push_len)
    cd_state, cd_class = np.asarray(dfa.cd_state), class_id[np.asarray(dfa.cd_class)]
    cd_pop, cd_npop = np.asarray(dfa.cd_pop), np.asarray(dfa.cd_npop)
    cd_target, cd_push = np.asarray(dfa.cd_target), np.asarray(dfa.cd_push)
    q = ns.shape[0]
    by_state = np.argsort(cd_state, kind="stable")
    cut = np.searchsorted(cd_state[by_state], np.arange(q + 1))
    rank = np.full(q + 1, q, dtype=np.int64)  # breadth-first rank so far (q: not yet)
    order = [int(dfa.start)]
    rank[dfa.start] = 0

    def reach(targets):
        for t in np.concatenate(targets).tolist():
            if rank[t] == q:
                rank[t] = len(order)
                order.append(t)

    def expand(s):  # what a state's context-independent edges reach
        reach([ns[s][ns[s] >= 0], *(seq[r, : seq_len[r]] for r in ep[s][ep[s] > 0])])

    # First what the context-independent edges reach (no ties: targets and pushes in class
    # order); then, in passes over that order, the context-dependent edges whose popped
    # symbols all have ranks, by class and those ranks (a pass ranks more states, a later
    # pass takes the edges that waited; a tie left keeps its own order).
    for s in order:
        expand(s)
    expanded = len(order)
    taken = np.zeros(cd_state.shape[0], dtype=bool)
    while not taken.all():
        before = int(taken.sum())
        for i, s in enumerate(order):  # grows while it is read
            if i >= expanded:
                expand(s)
                expanded = i + 1
            mine = by_state[cut[s] : cut[s + 1]]
            mine = mine[~taken[mine]]
            pops = rank[np.where(cd_pop[mine] >= 0, cd_pop[mine], q)]
            pops[cd_pop[mine] < 0] = -1
            mine, pops = mine[(pops < q).all(axis=1)], pops[(pops < q).all(axis=1)]
            for e in mine[np.lexsort((*pops.T[::-1], cd_class[mine]))]:
                targets = [cd_target[e : e + 1], seq[cd_push[e], : seq_len[cd_push[e]]]]
                reach(targets)
            taken[mine] = True
        if int(taken.sum()) == before:  # the rest pop symbols nothing ranks
            for s in order:
                mine = by_state[cut[s] : cut[s + 1]]
                for e in mine[~taken[mine]]:
                    reach([cd_target[e : e + 1], cd_pop[e, : cd_npop[e]]])
            taken[:] = True
    order = np.asarray(order + np.flatnonzero(rank[:q] == q).tolist())
    state_id = np.full(q + 1, -1, dtype=np.int64)  # index -1 reads the last slot: -1
    state_id[order] = np.arange(q)
    seq = np.where(seq >= 0, state_id[seq], -1)
    rows = np.concatenate([seq_len[:, None], seq], axis=1)[1:]
    seq_order = np.concatenate([[0], 1 + np.lexsort(rows.T[::-1])])  # row 0 (nothing) first
    seq_id = np.empty_like(seq_order)
    seq_id[seq_order] = np.arange(seq_order.shape[0])
    pop = np.where(cd_pop >= 0, state_id[cd_pop], -1)
    head = np.stack([state_id[cd_state], cd_class, cd_npop], 1)
    cd = np.concatenate([head, pop, np.stack([state_id[cd_target], seq_id[cd_push]], 1)], 1)
    cd = cd[np.lexsort(cd.T[::-1])] if cd.shape[0] else cd
    out = [class_id[np.asarray(dfa.token_class)], state_id[ns[order]],
           np.asarray(dfa.accepting)[order], np.int64(0), seq_id[ep[order]],
           seq[seq_order], seq_len[seq_order], cd]  # fmt: skip
    if dfa.forced_tokens is not None:
        out += [np.asarray(dfa.forced_tokens)[order], np.asarray(dfa.forced_len)[order],
                state_id[np.asarray(dfa.forced_next)[order]]]  # fmt: skip
    return tuple(out)


def _worker(conn, tokenizer_path: str, checkout: str | None = None):
    if checkout:  # compile with another checkout's code (an A/B run, `first_mask_ab.py`)
        sys.path[:0] = [checkout, str(Path(checkout) / "compile")]
    import automata_compile as ac
    import automata_jax as aj  # noqa: F401 (import cost paid once, not in the first timing)

    vocab = ac.Vocabulary.from_file(tokenizer_path)
    ac.compile_json_schema({"type": "integer"}, vocab)  # builds the trie once
    conn.send("ready")
    while (job := conn.recv()) is not None:
        schema, strict, profile, options = job
        try:
            conn.send(_compile_one(vocab, schema, strict, profile, options))
        except Exception as e:  # a crash is a finding: report it, do not stop the run
            conn.send({"crash": f"{type(e).__name__}: {e}"[:300]})


class Worker:
    """One compile process with the vocabulary loaded; killed and restarted after a timeout."""

    def __init__(self, tokenizer_path: Path, timeout: float, checkout: str | None = None):
        self.path, self.timeout, self.proc = str(tokenizer_path), timeout, None
        self.checkout = checkout

    def run(self, schema, *, strict: bool = True, profile: bool = False, **options) -> dict:
        """``options``: more `compile_json_schema` keywords."""
        if self.proc is None:
            ctx = mp.get_context("spawn")
            self.conn, child = ctx.Pipe()
            self.proc = ctx.Process(
                target=_worker, args=(child, self.path, self.checkout), daemon=True
            )
            self.proc.start()
            self.conn.recv()
        self.conn.send((schema, strict, profile, options))
        if self.conn.poll(self.timeout):
            try:
                return self.conn.recv()
            except EOFError:
                self.close()
                return {"crash": "worker died (out of memory?)"}
        self.close()
        return {"timeout": self.timeout}

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.proc = None


# -- report ---------------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def stats(values: list[float]) -> dict:
    """p50 / p90 / max / n of ``values`` (the A/B benchmarks' summary)."""
    xs = sorted(values)
    return {"p50": statistics.median(xs), "p90": _pct(xs, 0.9), "max": xs[-1], "n": len(xs)}


def _outcome(r: dict) -> str:
    if "timeout" in r:
        return f"timeout (> {r['timeout']:.0f} s)"
    if "crash" in r:
        return f"crash: {r['crash']}"
    if "refused" in r:
        keyword = f" `{r['keyword']}`" if r.get("keyword") else ""
        where = f" at `{r['pointer']}`" if r.get("pointer") else ""
        return f"refused: {r['refused']}{keyword}{where}"
    return "compiled"


def summary(results: dict) -> dict:
    out = {}
    for corpus, rows in results["corpora"].items():
        ok = [r["strict"] for r in rows.values() if "first_mask_s" in r["strict"]]
        ttfm = [r["first_mask_s"] for r in ok]
        out[corpus] = {
            "schemas": len(rows),
            "compiled": len(ok),
            "refused": sum("refused" in r["strict"] for r in rows.values()),
            "timeouts": sum("timeout" in r["strict"] for r in rows.values()),
            "crashes": sum("crash" in r["strict"] for r in rows.values()),
            "first_mask_p50_s": statistics.median(ttfm) if ttfm else None,
            "first_mask_p90_s": _pct(ttfm, 0.9),
            "first_mask_max_s": max(ttfm, default=None),
            "order_fallbacks": sum(r.get("order_fallbacks", 0) > 0 for r in ok),
        }
    return out


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = [
        "## Real-world JSON Schemas: compile outcome and time to first mask",
        "",
        machine_line(m),
        f"Command: `{m['command']}`. Results: `benchmarks/results/schema_corpus.json`. "
        f"Vocabulary: Llama-3 (128,256 ids). Each compile in a worker killed after "
        f"{results['timeout']:.0f} s. Time to first mask = `compile_json_schema` + "
        "`ConstraintTables.from_dfas` (waited for).",
        "",
        "| corpus | schemas | compiled | of which an object in declared order | refused "
        "| timeouts | crashes | p50 | p90 | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for corpus, s in results["summary"].items():

        def f(x):
            return "" if x is None else f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"

        lines.append(
            f"| {corpus} | {s['schemas']} | {s['compiled']} | {s.get('order_fallbacks', 0)} "
            f"| {s['refused']} | {s['timeouts']} "
            f"| {s['crashes']} | {f(s['first_mask_p50_s'])} | {f(s['first_mask_p90_s'])} "
            f"| {f(s['first_mask_max_s'])} |"
        )
    lines += [
        "",
        "SchemaStore schemas (check-jsonschema's vendored copies), strict mode; where strict mode "
        "refuses, the lenient column says what the rest compiles to:",
        "",
        "| schema | strict | time (s) | Q | C | table bytes | lenient |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, r in results["corpora"].get("schemastore", {}).items():
        s, le = r["strict"], r.get("lenient")
        t = s.get("first_mask_s", s.get("seconds"))
        lenient = ""
        if le is not None:
            lenient = _outcome(le)
            if "states" in le:
                lenient += f", {le['first_mask_s']:.2f} s, Q={le['states']:,}"
        size = (
            f"{s['states']:,} | {s['classes']:,} | {s['table_bytes']:,}" if "states" in s else " | "
        )
        time_s = "" if t is None else f"{t:.2f}"
        lines.append(f"| {name} | {_outcome(s)} | {time_s} | {size} | {lenient} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per compile")
    parser.add_argument("--suite-limit", type=int, default=None, help="first N suite groups")
    parser.add_argument("--no-suite", action="store_true", help="no test-suite corpus")
    parser.add_argument("--no-bfcl", action="store_true", help="no BFCL corpus")
    parser.add_argument("--bfcl-limit", type=int, default=150, help="BFCL schemas sampled")
    parser.add_argument("--no-schemastore", action="store_true", help="no SchemaStore corpus")
    parser.add_argument("--profile", type=int, default=0, help="profile the N slowest compiles")
    parser.add_argument("--write-md", action="store_true", help="update BENCHMARKS.md")
    parser.add_argument("--out", default=str(RESULTS), help="results JSON file")
    parser.add_argument(
        "--property-order",
        choices=("any", "strict_any", "declared"),
        default="any",
        help="objects' key order",
    )
    parser.add_argument(
        "--closed-objects",
        action="store_true",
        help="close objects silent on undeclared properties (the job's option)",
    )
    parser.add_argument(
        "--only", nargs="+", default=None, help="SchemaStore file names to run (e.g. travis.json)"
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="compile_json_schema's cache_dir: run twice, the second run loads the tables",
    )
    args = parser.parse_args(argv)
    opts = {"property_order": args.property_order}
    if args.closed_objects:
        opts["closed_objects"] = True
    if args.cache_dir:
        opts["cache_dir"] = args.cache_dir

    tok = TOKENIZERS / "llama3" / "tokenizer.json"
    if not tok.is_file():
        sys.exit(f"needs {tok} (the shared tokenizers folder beside the checkout)")
    corpora = {} if args.no_schemastore else {"schemastore": schemastore_schemas()}
    if args.only and corpora:
        corpora["schemastore"] = {
            k: v for k, v in corpora["schemastore"].items() if k in set(args.only)
        }
    if not args.no_bfcl:
        import _bfcl

        try:
            corpora["bfcl"] = bfcl_schemas(args.bfcl_limit)
        except _bfcl.BfclDataError as e:
            sys.exit(f"{e} (or pass --no-bfcl)")
    if not args.no_suite:
        if not SUITE.is_dir():
            sys.exit(f"needs the JSON Schema Test Suite at {SUITE} (or pass --no-suite)")
        corpora["test-suite"] = suite_schemas(args.suite_limit)

    results = {"machine": machine(), "timeout": args.timeout, "options": opts, "corpora": {}}
    worker = Worker(tok, args.timeout)
    try:
        for corpus, schemas in corpora.items():
            rows = results["corpora"][corpus] = {}
            for name, schema in schemas.items():
                row = rows[name] = {"strict": worker.run(schema, **opts)}
                if corpus == "schemastore" and "refused" in row["strict"]:
                    row["lenient"] = worker.run(schema, strict=False, **opts)
                print(f"{corpus:12} {name:40} {_outcome(row['strict'])}", file=sys.stderr)
        results["summary"] = summary(results)
        if args.profile:
            slow = sorted(
                (
                    (r["strict"]["compile_s"], c, n)
                    for c, rows in results["corpora"].items()
                    for n, r in rows.items()
                    if "compile_s" in r["strict"]
                ),
                reverse=True,
            )[: args.profile]
            for _, corpus, name in slow:
                r = worker.run(corpora[corpus][name], profile=True, **opts)
                results["corpora"][corpus][name]["profile"] = r.get("profile")
                print(f"== profile: {corpus} {name}\n{r.get('profile')}")
    finally:
        worker.close()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    text = markdown(results)
    print(text)
    if args.write_md:
        write_md_section(MD_MARK, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
