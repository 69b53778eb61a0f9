"""Runs the JSON-Schema-Test-Suite (draft 2020-12) against the compiled byte automaton.

For every test group, the schema is translated in strict mode to the compiler's IR and
compiled to its minimal byte DFA, or to its byte pushdown automaton where the IR calls
grammar rules (what `compile_json_schema` composes with a vocabulary),
so schemas whose IR holds automaton nodes (intersections, complements) are judged too.
The group is

* **exact** when the DFA accepts the UTF-8 bytes of every valid instance and of no
  invalid one,
  each instance serialized four ways (``json.dumps`` default and compact separators,
  ``ensure_ascii`` True and False), or when the translation raises `InvalidSchemaError`
  and every instance of the group is invalid (an unsatisfiable schema);
* **subset** when the compile warns that a keyword is enforced as a sound subset of its
  language (a `SubsetWarning` other than an object's declared-order fallback, which
  `key_orders` judges exactly) and the DFA accepts no invalid instance (it may reject
  valid ones: how many is in the detail);
* **refused** when the translation raises `UnsupportedSchemaError` (the keyword is tallied);
* **wrong** otherwise (a valid instance rejected, an invalid one accepted, or an
  `InvalidSchemaError` for a schema that some instance satisfies).

Usage: ``python tools/schema_coverage.py [--suite DIR] [--only FILE ...] [--out COVERAGE.md]``.
Without ``--out`` it prints the report; ``--only`` runs the named suite files (paths
relative to the suite folder, e.g. ``uniqueItems.json``) and writes nothing. The suite is looked for in ``../shared/data/json-schema-test-suite``
beside the checkout (``python tools/fetch_test_data.py --only suite`` puts it there).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import itertools
import json
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The suite sits in the shared folder beside the checkout (python tools/fetch_test_data.py
# puts it there); a plain clone of the suite's repository has a tests/ level.
SUITE_HOME = os.path.join(os.path.dirname(ROOT), "shared", "data", "json-schema-test-suite")
SUITE_CANDIDATES = (
    os.path.join(SUITE_HOME, "draft2020-12"),
    os.path.join(SUITE_HOME, "tests", "draft2020-12"),
)
HOW_TO_GET = "python tools/fetch_test_data.py --only suite"
# Options for the run: defaults, except that leap seconds are checked exactly (the
# default "utc" accepts 23:59:60 only at offset zero, a documented subset).
OPTIONS = {"leap_seconds": "exact"}
# Per-file deviations. format.json tests the default (annotation-only) meaning of
# `format`, optional/format/* its assertion; one schema cannot satisfy both, so
# format.json runs with assert_format=False.
# optional/bignum.json tests 53-digit numbers, past the default max_digits=20 (a documented
# bound of digit runs, as max_whitespace bounds whitespace): it runs with max_digits=None.
FILE_OPTIONS = {
    "format.json": {"assert_format": False},
    "optional/bignum.json": {"max_digits": None},
}
MAX_ORDERS = 2000
# State budget of the byte DFA that judges the instances. One group (ref.json, "Recursive
# references between schemas") passes through 100k-1M subset-construction states before
# minimizing to 3,902; `compile_json_schema` needs max_states=1_000_000 for it too.
MAX_STATES = 1_000_000


def find_suite(path: str | None = None) -> str | None:
    for p in (path,) if path else SUITE_CANDIDATES:
        if p and os.path.isdir(p):
            return p
    return None


SPELLINGS = [
    dict(separators=sep, ensure_ascii=ascii_)
    for sep in (None, (",", ":"))
    for ascii_ in (True, False)
]


def key_orders(value):
    """The value with its objects' keys in every order (JSON objects are unordered, and
    the generated language fixes one order: schema order for declared properties)."""
    if isinstance(value, dict):
        keys = list(value)
        for perm in itertools.permutations(keys):
            for kids in itertools.product(
                *(list(itertools.islice(key_orders(value[k]), MAX_ORDERS)) for k in perm)
            ):
                yield dict(zip(perm, kids, strict=True))
    elif isinstance(value, list):
        for kids in itertools.product(
            *(list(itertools.islice(key_orders(x), MAX_ORDERS)) for x in value)
        ):
            yield list(kids)
    else:
        yield value


class ByteMatcher:
    """``fullmatch(text)``: whether the byte DFA (or pushdown automaton) accepts the
    text's UTF-8 bytes."""

    def __init__(self, dfa):
        self.dfa = dfa

    def fullmatch(self, text: str) -> bool:
        return self.dfa.matches(text.encode("utf-8"))


def check_instance(rx, value, valid: bool) -> str | None:
    """None if the instance is classified right in every spelling, else the failing text."""
    orders = list(itertools.islice(key_orders(value), MAX_ORDERS))
    for opts in SPELLINGS:
        texts = [json.dumps(v, **opts) for v in orders]
        hit = next((t for t in texts if rx.fullmatch(t)), None)
        if valid and hit is None:
            return texts[0]
        if not valid and hit is not None:
            return hit
    return None


@dataclasses.dataclass
class GroupResult:
    file: str
    description: str
    outcome: str  # exact | subset | refused | wrong
    detail: str = ""
    keyword: str | None = None
    seconds: float = 0.0
    pda: bool = False  # judged by the byte pushdown automaton (the schema calls rules)
    declared_order: bool = False  # an object fell back to declared order (a warning)


def run_group(file: str, group: dict, options: dict) -> GroupResult:
    from automata_compile import (
        InvalidSchemaError,
        OrderFallbackWarning,
        StateBudgetExceededError,
        SubsetWarning,
        UnsupportedSchemaError,
    )
    from automata_compile.automata._byte_dfa import build_byte_dfa
    from automata_compile.frontends.json_schema import load_schema, parse_options
    from automata_compile.pipeline import byte_language

    desc = group["description"]
    tests = group["tests"]
    t0 = time.perf_counter()

    pda = None
    caught: list = []

    def result(outcome, detail="", keyword=None):
        seconds = time.perf_counter() - t0
        fell_back = any(type(w.message).__name__ == "OrderFallbackWarning" for w in caught)
        return GroupResult(
            file, desc, outcome, detail, keyword, seconds, pda is not None, fell_back
        )

    try:
        # a fallback to unrolling or to declared property order is judged like the rest
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ir, pda = byte_language(
                load_schema(group["schema"]), parse_options(options), max_states=MAX_STATES
            )
        rx = ByteMatcher(pda or build_byte_dfa(ir, max_states=MAX_STATES, what="the schema"))
    except UnsupportedSchemaError as e:
        return result("refused", str(e), e.keyword or "(complexity)")
    except StateBudgetExceededError as e:
        return result("refused", str(e), "(state budget)")
    except InvalidSchemaError as e:
        if all(not t["valid"] for t in tests):
            return result("exact", f"unsatisfiable: {e}")
        return result("wrong", f"InvalidSchemaError on a satisfiable schema: {e}")
    except Exception as e:  # noqa: BLE001 - a crash is a wrong answer, reported
        return result("wrong", f"crash: {type(e).__name__}: {e}")
    subset = [
        w.message
        for w in caught
        if isinstance(w.message, SubsetWarning) and not isinstance(w.message, OrderFallbackWarning)
    ]
    rejected = []
    for t in tests:
        text = check_instance(rx, t["data"], t["valid"])
        if text is not None and (not subset or not t["valid"]):
            verdict = "rejected valid" if t["valid"] else "accepted invalid"
            return result("wrong", f"{verdict} {text!r} ({t['description']})")
        if text is not None:
            rejected.append(text)
    if subset:
        keyword = subset[0].keyword
        return result("subset", f"{len(rejected)} valid instances rejected: {subset[0]}", keyword)
    return result("exact")


def run_suite(
    path: str, options: dict | None = None, only: list[str] | None = None
) -> list[GroupResult]:
    """Every group of the suite at ``path`` (``only``: of these files, relative paths)."""
    options = dict(OPTIONS if options is None else options)
    results = []
    for root, _, files in sorted(os.walk(path)):
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            full = os.path.join(root, name)
            rel = os.path.relpath(full, path)
            if only is not None and rel not in only:
                continue
            with open(full, encoding="utf-8") as f:
                groups = json.load(f)
            file_options = {**options, **FILE_OPTIONS.get(rel, {})}
            for group in groups:
                results.append(run_group(rel, group, file_options))
    return results


def _shown(path: str) -> str:
    """``path`` relative to the repository (no machine-specific absolute path in reports)."""
    rel = os.path.relpath(os.path.abspath(path), ROOT)
    return rel.replace(os.sep, "/") if not os.path.isabs(rel) else path


def totals_line(results: list[GroupResult]) -> str:
    """The report's totals line (the tests check that COVERAGE.md has the current one)."""
    c = collections.Counter(r.outcome for r in results)
    return (
        f"**Totals: {len(results)} groups — {c['exact']} exact, {c['subset']} sound subset, "
        f"{c['refused']} refused, {c['wrong']} wrong.**"
    )


def report(results: list[GroupResult], path: str) -> str:
    per_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in results:
        per_file[r.file][r.outcome] += 1
    totals = collections.Counter(r.outcome for r in results)
    refused_kw = collections.Counter(r.keyword for r in results if r.outcome == "refused")
    lines = [
        "# JSON Schema coverage",
        "",
        "Generated by `python tools/schema_coverage.py --out COVERAGE.md` from the official",
        f"JSON-Schema-Test-Suite, draft 2020-12 (`{_shown(path)}`, fetched by `{HOW_TO_GET}`),",
        "in strict mode with options",
        f"`{OPTIONS}` (all other options at their defaults), except `format.json`, which tests",
        "the annotation-only default meaning of `format` and runs with `assert_format=False`,",
        "and `optional/bignum.json`, whose 53-digit numbers are past the default bound of digit",
        "runs (`max_digits=20`), which runs with `max_digits=None`.",
        "",
        "A group is *exact* when the schema's compiled byte automaton (the IR built directly from",
        "the schema, determinized and minimized; a pushdown automaton where schema-free values or",
        'recursive `$ref` compile to grammar rules, `recursion="stack"`, the default) accepts',
        "every valid instance and no invalid one,",
        "each serialized with `json.dumps` default and compact separators,",
        "`ensure_ascii` True and False (objects are unordered: a valid instance must match with",
        "some order of its keys, an invalid one with none), or when an unsatisfiable schema raises",
        "`InvalidSchemaError` and every instance is invalid; *sound subset* when the compile",
        "enforces a keyword as a named sound subset of its language (a `SubsetWarning`, e.g.",
        "`uniqueItems` over an infinite item language: at most one item) and accepts no invalid",
        "instance (it may reject valid ones); *refused* when strict mode raises",
        "`UnsupportedSchemaError`; *wrong* otherwise.",
        "",
        totals_line(results),
        "",
        f"{sum(r.pda for r in results if r.outcome == 'exact')} of the exact groups compile to a "
        "pushdown automaton (grammar rules), the others to a DFA. "
        f"{sum(r.declared_order for r in results if r.outcome == 'exact')} exact groups have an "
        "object past its any-order budget, accepted in declared property order only (with an "
        "`OrderFallbackWarning`): every valid instance still matches in some key order.",
        "",
        "| file | groups | exact | subset | refused | wrong |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for file in sorted(per_file):
        c = per_file[file]
        lines.append(
            f"| {file} | {sum(c.values())} | {c['exact']} | {c['subset']} | {c['refused']} "
            f"| {c['wrong']} |"
        )
    lines.append(
        f"| **total** | **{len(results)}** | **{totals['exact']}** | **{totals['subset']}** "
        f"| **{totals['refused']}** | **{totals['wrong']}** |"
    )
    lines += ["", "## Refusals by keyword", "", "| keyword | groups |", "| --- | ---: |"]
    for kw, n in refused_kw.most_common():
        lines.append(f"| `{kw}` | {n} |")
    lines += ["", "## Refused groups", ""]
    for r in results:
        if r.outcome == "refused":
            reason = r.detail.split(" cannot be enforced exactly: ", 1)[-1].split(
                ". Pass strict=False"
            )[0]
            lines.append(f"- {r.file} — {r.description}: `{r.keyword}`: {reason}")
    subsets = [r for r in results if r.outcome == "subset"]
    if subsets:
        lines += ["", "## Groups compiled as a sound subset", ""]
        for r in subsets:
            lines.append(f"- {r.file} — {r.description}: `{r.keyword}`: {r.detail[:300]}")
    fell_back = [r for r in results if r.declared_order]
    if fell_back:
        lines += ["", "## Objects accepted in declared property order", ""]
        lines += [f"- {r.file} — {r.description} ({r.outcome})" for r in fell_back]
    wrong = [r for r in results if r.outcome == "wrong"]
    if wrong:
        lines += ["", "## Wrong groups", ""]
        for r in wrong:
            lines.append(f"- {r.file} — {r.description}: {r.detail[:300]}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=None, help="draft2020-12 folder of the test suite")
    ap.add_argument("--out", default=None, help="write the report here (e.g. COVERAGE.md)")
    ap.add_argument("--slowest", type=int, default=0, help="print the N slowest groups")
    ap.add_argument(
        "--only", nargs="+", default=None, help="only these suite files (e.g. uniqueItems.json)"
    )
    args = ap.parse_args(argv)
    path = find_suite(args.suite)
    if path is None:
        print(
            f"JSON-Schema-Test-Suite not found in {SUITE_HOME}: run `{HOW_TO_GET}`, "
            "or pass --suite DIR (its draft2020-12 folder)",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    results = run_suite(path, only=args.only)
    text = report(results, path)
    if args.out and args.only:
        ap.error("--only runs part of the suite: it cannot write the report (--out)")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text)
    totals = collections.Counter(r.outcome for r in results)
    print(
        f"{totals_line(results)} ({time.perf_counter() - t0:.1f}s)",
        file=sys.stderr,
    )
    for r in sorted(results, key=lambda r: -r.seconds)[: args.slowest]:
        print(f"  {r.seconds:6.2f}s {r.file} — {r.description}", file=sys.stderr)
    return 1 if totals["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
