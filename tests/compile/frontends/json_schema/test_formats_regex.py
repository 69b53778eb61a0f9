"""``format`` values enforced as named sound subsets: ``regex`` (`_regex_format`),
``hostname``, ``idn-hostname``, ``idn-email``.

Soundness is checked against independent oracles: random walks over the compiled byte
automaton must give strings that Python's ``re`` compiles (warnings as errors), that
ECMA-262 accepts with and without the ``u`` flag (`regress`, and Node.js where it is
installed) and that `jsonschema`'s format checker accepts; the official suite's invalid
instances must all be rejected.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import shutil
import subprocess
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

import automata_compile as ac
from automata_compile.frontends.json_schema._regex_format import MAX_GROUP_DEPTH

try:  # an ECMA-262 regex engine (Rust's regress; the test extra installs it)
    import regress
except ImportError:
    regress = None

ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)
FORMAT_DIR = os.path.join(
    os.path.dirname(ROOT),
    "shared",
    "data",
    "json-schema-test-suite",
    "draft2020-12",
    "optional",
    "format",
)
CHECKER = Draft202012Validator.FORMAT_CHECKER
SUBSET_FORMATS = ("regex", "hostname", "idn-hostname", "idn-email")
# bytes a walk favours: the regex syntax, so that walks reach classes, groups, quantifiers
SYNTAX = set(b"()[]{}|?*+^$\\-.,:0123456789xudwsbnBDWS")


@pytest.fixture(scope="module")
def vocab():
    return ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )


@pytest.fixture(scope="module")
def dfas(vocab):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ac.SubsetWarning)
        return {
            f: ac.compile_json_schema({"type": "string", "format": f}, vocab)
            for f in SUBSET_FORMATS
        }


def accepts(dfa, text: str) -> bool:
    return bool(dfa.accepts(list(json.dumps(text).encode("utf-8"))))


def _weight(byte: int, late: bool) -> float:
    if byte == 0x22:  # the closing quote: rarely at first, then soon
        return 30 if late else 0.5
    return 8 if byte in SYNTAX else 1 if byte < 0x80 else 0.05


_MOVES: dict = {}  # (automaton id, state) -> (accepting, next states, cumulative weights)


def walk(dfa, rnd: random.Random, max_len: int = 80) -> str | None:
    """A random string of the automaton's language (a JSON string, decoded), or None.

    A DFA walk (no stack) over bytes; each state's moves are read from the tables once."""
    state, buf = dfa.start, []
    while len(buf) < 4 * max_len:
        key = (id(dfa), state)
        if key not in _MOVES:
            row = dfa.step(np.full(256, state), np.arange(256))
            allowed = (row >= 0).nonzero()[0].tolist()
            cum = [list(itertools.accumulate(_weight(t, late) for t in allowed)) for late in (0, 1)]
            _MOVES[key] = (bool(dfa.accepting[state]), allowed, row[allowed].tolist(), cum)
        done, allowed, targets, cum = _MOVES[key]
        if done:
            return json.loads(bytes(buf).decode("utf-8"))
        i = rnd.choices(range(len(allowed)), cum_weights=cum[len(buf) > max_len])[0]
        buf.append(allowed[i])
        state = targets[i]
    return None


def python_error(pattern: str) -> str | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            re.compile(pattern)
    except (re.error, Warning, OverflowError, RecursionError) as e:
        return f"re: {e}"
    return None


def ecma_error(pattern: str) -> str | None:
    """Why `regress` refuses the pattern with flags '' or 'u' (None: valid, or no regress)."""
    if regress is None:
        return None
    for flags in ("", "u"):
        try:
            regress.Regex(pattern, flags)
        except Exception as e:  # noqa: BLE001 - regress raises its own error type
            return f"regress({flags!r}): {e}"
    return None


def node_errors(patterns: list[str]) -> list[str]:
    """Patterns Node.js's RegExp refuses (with flags '' or 'u')."""
    script = (
        "const ps = JSON.parse(require('fs').readFileSync(0, 'utf8')); const bad = [];"
        "for (const p of ps) for (const f of ['', 'u']) {"
        "  try { new RegExp(p, f) } catch (e) { bad.push(f + ' ' + p + ' ' + e.message) } }"
        "console.log(JSON.stringify(bad))"
    )
    out = subprocess.run(
        ["node", "-e", script],
        input=json.dumps(patterns),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def regex_walks(dfas):
    rnd = random.Random(20)
    walks = [walk(dfas["regex"], rnd) for _ in range(1000)]
    return [w for w in walks if w is not None]


def group_depth(pattern: str) -> int:
    """How deep the groups of a (valid) pattern nest: unescaped parentheses outside classes."""
    depth = deepest = 0
    escaped = in_class = False
    for c in pattern:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c in "()":
            depth += 1 if c == "(" else -1
            deepest = max(deepest, depth)
    return deepest


def test_walks_reach_the_syntax(regex_walks):
    """The walks exercise what the subset is about (the oracle below is not vacuous)."""
    assert len(regex_walks) > 700
    joined = "".join(regex_walks)
    for piece in ("[^", "(?:", "{", ",", "}", "|", "\\b", "\\x", "\\u", "*?", "-"):
        assert piece in joined, piece
    assert max(group_depth(w) for w in regex_walks) == MAX_GROUP_DEPTH
    assert any(re.search(r"\[[^\]]*[0-9a-zA-Z]-[0-9a-zA-Z]", w) for w in regex_walks)


def test_every_walk_is_a_valid_python_regex(regex_walks):
    for pattern in regex_walks:
        assert python_error(pattern) is None, (pattern, python_error(pattern))
        assert CHECKER.conforms(pattern, "regex"), pattern


@pytest.mark.skipif(regress is None, reason="regress not installed (pip install regress)")
def test_every_walk_is_a_valid_ecma_regex(regex_walks):
    for pattern in regex_walks:
        assert ecma_error(pattern) is None, (pattern, ecma_error(pattern))


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js not installed")
def test_every_walk_is_a_valid_ecma_regex_in_node(regex_walks):
    assert node_errors(regex_walks) == []


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_random_walks_are_valid(dfas, seed):
    """Every format's walks conform (`jsonschema`); regex walks also compile everywhere."""
    rnd = random.Random(seed)
    for fmt in SUBSET_FORMATS:
        text = walk(dfas[fmt], rnd)
        if text is None:
            continue
        assert CHECKER.conforms(text, fmt), (fmt, text)
        if fmt == "regex":
            assert python_error(text) is None and ecma_error(text) is None, text


REGEX_CASES = [
    # (pattern, in the subset)
    (r"^[a-z0-9-]+$", True),
    (r"^(?:[A-Fa-f0-9]{2}:){5}[A-Fa-f0-9]{2}$", True),
    (r"\bword\b|^\d{1,3}(\.\d{1,3}){3}$", True),
    (r"[^\x00\x1F\x7F]+|\u4e00", True),
    (r"[\x00-\x1F]", False),  # ranges between escapes are left out
    (r"a+?b*?c??d{2,}?e{0,10}", True),
    (r"^$|[-.\w]", True),
    (r"(((a)))", True),
    (r"((((a))))", False),  # deeper than MAX_GROUP_DEPTH
    (r"(?<name>a)", False),  # Python's re has no (?<name>)
    (r"(a)\1", False),
    (r"(?=a)", False),
    (r"a{3,2}", False),
    (r"a{,3}", False),  # not a quantifier with the u flag
    (r"a**", False),
    (r"\b*", False),
    (r"[z-a]", False),
    (r"[c-k]", False),  # ordered, but left out (neither from 0/1/a/A nor up to 9/z/Z)
    (r"[0-7a-fB-Z2-9]", True),
    (r"[\w-a]", False),
    (r"[]", False),
    (r"[^]", False),
    (r"]", False),
    (r"{", False),
    (r"\-", False),  # an identity escape the u flag refuses outside a class
    (r"\p{L}", False),
    (r"[a&&b]", False),  # Python warns: a future set operation
    (r"(abc", False),
    (r"^(abc]", False),
]


@pytest.fixture(scope="module")
def regex_text():
    """The subset printed as a Python regex of JSON texts (`json_schema_to_regex`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ac.SubsetWarning)
        return re.compile(ac.json_schema_to_regex({"type": "string", "format": "regex"}))


@pytest.mark.parametrize("pattern,inside", REGEX_CASES)
def test_regex_cases(dfas, regex_text, pattern, inside):
    assert accepts(dfas["regex"], pattern) == inside
    assert bool(regex_text.fullmatch(json.dumps(pattern))) == inside
    if inside:
        assert python_error(pattern) is None and ecma_error(pattern) is None


def _suite(name):
    path = os.path.join(FORMAT_DIR, f"{name}.json")
    if not os.path.exists(path):
        pytest.skip(f"JSON-Schema-Test-Suite not found at {FORMAT_DIR}")
    with open(path, encoding="utf-8") as f:
        return [t for g in json.load(f) for t in g["tests"] if isinstance(t["data"], str)]


def _covered(fmt: str, text: str) -> bool:
    """Valid instances the subset is documented to cover."""
    if fmt in ("hostname", "idn-hostname"):
        labels = text.split(".")
        return (
            text.isascii()
            and all(len(lb) <= 63 and lb[2:4] != "--" for lb in labels)
            and (len(labels) <= 3 or (len(labels) <= 8 and all(len(lb) <= 30 for lb in labels)))
        )
    if fmt == "idn-email":
        return text.isascii()
    # regex: what Python's re refuses is left out (named groups, lookbehind, '[]', '\\cA')
    return python_error(text) is None


SUITE_FILES = [(f, f) for f in SUBSET_FORMATS] + [("regex", "ecmascript-regex")]


@pytest.mark.parametrize("fmt,file", SUITE_FILES)
def test_official_suite(dfas, fmt, file):
    tests = _suite(file)
    assert tests
    for t in tests:
        got = accepts(dfas[fmt], t["data"])
        if not t["valid"]:
            assert not got, (fmt, t["data"], t["description"])
        elif _covered(fmt, t["data"]):
            assert got, (fmt, t["data"], t["description"])


@pytest.mark.parametrize("fmt", SUBSET_FORMATS)
def test_refuse_names_keyword_and_pointer(fmt):
    schema = {"properties": {"f": {"type": "string", "format": fmt}}}
    with pytest.raises(ac.UnsupportedSchemaError) as info:
        ac.json_schema_to_regex(schema, subsets="refuse")
    assert info.value.keyword == "format" and info.value.pointer == "/properties/f/format"
    assert "#/properties/f/format" in str(info.value)


def test_one_subset_warning_per_pointer():
    schema = {
        "type": "object",
        "properties": {f: {"type": "string", "format": f} for f in SUBSET_FORMATS},
        "additionalProperties": False,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ac.json_schema_to_regex(schema, property_order="declared")
    subset = [w.message for w in caught if isinstance(w.message, ac.SubsetWarning)]
    assert sorted(w.pointer for w in subset) == sorted(
        f"/properties/{f}/format" for f in SUBSET_FORMATS
    )
    assert all(w.keyword == "format" for w in subset)
    assert len(caught) == len(subset)


def test_a_shared_definition_warns_once():
    schema = {
        "$defs": {"r": {"type": "string", "format": "regex"}},
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/r"},
            "b": {"type": "array", "items": {"$ref": "#/$defs/r"}},
        },
        "additionalProperties": False,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ac.json_schema_to_regex(schema, property_order="declared")
    assert [w.message.pointer for w in caught] == ["/$defs/r/format"]


def test_hostname_without_strict_is_the_same_subset(dfas, vocab):
    with pytest.warns(ac.SubsetWarning, match="Punycode"):
        lenient = ac.compile_json_schema(
            {"type": "string", "format": "hostname"}, vocab, strict=False
        )
    for text in ("www.example.com", "a--b.com", "xn--9n2bp8q.com", "-a.com", "a" * 64):
        assert accepts(lenient, text) == accepts(dfas["hostname"], text), text
    assert accepts(lenient, "www.example.com") and not accepts(lenient, "xn--9n2bp8q.com")


def test_format_as_annotation_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ac.json_schema_to_regex({"type": "string", "format": "regex"}, assert_format=False)
