"""The official JSON-Schema-Test-Suite (draft 2020-12, with optional/ and optional/format/).

Every group is refused by name in strict mode, exact, or a named sound subset (see
tools/schema_coverage.py); zero wrong answers. COVERAGE.md must report the same totals.
A sample of exact groups is also compiled to a byte-level `TokenDFA`, which must agree
with `re.fullmatch` on every spelling of every instance.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import sys

import pytest

import automata_compile as ac

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)


def _tool():
    spec = importlib.util.spec_from_file_location(
        "schema_coverage", os.path.join(ROOT, "tools", "schema_coverage.py")
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["schema_coverage"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


sc = _tool()
SUITE = sc.find_suite()
pytestmark = pytest.mark.skipif(
    SUITE is None,
    reason=f"JSON-Schema-Test-Suite not found (looked in {', '.join(sc.SUITE_CANDIDATES)}): "
    f"run `{sc.HOW_TO_GET}` to download it",
)


@pytest.fixture(scope="module")
def results():
    return sc.run_suite(SUITE)


def test_no_wrong_answers(results):
    wrong = [f"{r.file} — {r.description}: {r.detail}" for r in results if r.outcome == "wrong"]
    assert not wrong, "\n".join(wrong)


def test_refusals_are_named(results):
    for r in results:
        if r.outcome == "refused":
            assert r.keyword and r.detail, r


def test_coverage_report_is_current(results):
    line = sc.totals_line(results)
    with open(os.path.join(ROOT, "COVERAGE.md"), encoding="utf-8") as f:
        text = f.read()
    assert line in text, (
        f"COVERAGE.md is stale; regenerate with: python tools/schema_coverage.py --out COVERAGE.md ({line})"
    )


def _groups():
    for root, _, files in sorted(os.walk(SUITE or ".")):
        for name in sorted(files):
            if name.endswith(".json"):
                rel = os.path.relpath(os.path.join(root, name), SUITE)
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    for group in json.load(f):
                        yield rel, group


def test_token_dfa_agrees_with_re_on_the_suite():
    """Byte-level DFA == `re` on every spelling of every instance, for small regexes."""
    vocab = ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )
    checked = 0
    for rel, group in _groups():
        options = {
            **sc.OPTIONS,
            **sc.FILE_OPTIONS.get(rel, {}),
            "property_order": "declared",
            "recursion": "unroll",
        }
        try:
            regex = ac.json_schema_to_regex(group["schema"], **options)
        except (ac.UnsupportedSchemaError, ac.InvalidSchemaError):
            continue
        if len(regex) > 8000:
            continue
        dfa = ac.compile_regex(regex, vocab)
        rx = re.compile(regex)
        for test in group["tests"]:
            for value in itertools.islice(sc.key_orders(test["data"]), 24):
                for opts in sc.SPELLINGS:
                    text = json.dumps(value, **opts)
                    assert bool(dfa.accepts(list(text.encode("utf-8")))) == bool(
                        rx.fullmatch(text)
                    ), (rel, group["description"], text)
        checked += 1
    assert checked >= 120, checked
