"""Compile budgets and deadlines (issue 11, item 3): `StateBudgetExceededError` and
`CompileTimeoutError` name what grew and where; the `_cli.progress` spinner."""

from __future__ import annotations

import io
import json
import threading
import time

import pytest

import automata_compile as ac
from automata_compile import _cli
from automata_compile._errors import (
    AutomataError,
    CompileTimeoutError,
    StateBudgetExceededError,
    UnsupportedSchemaError,
)
from automata_compile.automata import _char_dfa, _fsa

# A case of /work/wt/core's benchmarks/schema_automata_bench.py: a pattern with maxLength
# is an intersection of string automata, built while translating #/properties/url.
URL = r"^https?://[A-Za-z0-9.-]+(?::[0-9]+)?(?:/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?$"
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "url": {"type": "string", "pattern": URL, "maxLength": 64},
    },
}


@pytest.fixture(scope="module")
def vocab():
    return ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )


def test_timeout_names_the_schema_location(vocab):
    # 1e-9 s has passed at the first checkpoint: deterministic, no wall-clock assertion.
    with pytest.raises(CompileTimeoutError) as info:
        ac.compile_json_schema(SCHEMA, vocab, timeout_s=1e-9)
    msg = str(info.value)
    assert msg.startswith("compiling the schema ran past timeout_s=1e-09 s in ")
    assert "(while building #/properties/url)" in msg and msg.endswith("raise timeout_s")
    assert isinstance(info.value, AutomataError) and isinstance(info.value, TimeoutError)
    assert not isinstance(info.value, StateBudgetExceededError)


def test_timeout_is_not_dropped_in_lenient_mode(vocab):
    """Lenient mode turns too-large string automata into warnings; a timeout stays an error."""
    with pytest.raises(CompileTimeoutError, match="#/properties/url"):
        ac.compile_json_schema(SCHEMA, vocab, timeout_s=1e-9, strict=False)


def test_timeout_in_the_byte_dfa_names_the_step(vocab):
    # No string automaton under this schema: the first checkpoint is the byte DFA's.
    with pytest.raises(CompileTimeoutError) as info:
        ac.compile_json_schema(
            {"type": "array", "items": {"type": "integer"}}, vocab, timeout_s=1e-9
        )
    assert "of the schema's byte DFA" in str(info.value)
    assert "while building" not in str(info.value)


def test_generous_timeout_compiles_the_same_tables(vocab):
    a = ac.compile_json_schema(SCHEMA, vocab)
    b = ac.compile_json_schema(SCHEMA, vocab, timeout_s=3600)
    assert a.num_states == b.num_states and a.accepts(list(b'{"url": "http://a.b"}'))
    assert b.accepts(list(b'{"url": "http://a.b"}'))


def test_regex_timeout(vocab):
    with pytest.raises(
        CompileTimeoutError, match=r"compiling the pattern ran past timeout_s=1e-09 s"
    ):
        ac.compile_regex("[a-z]{1,30}@[a-z]{1,30}", vocab, timeout_s=1e-9)


@pytest.mark.parametrize("bad", [0, -1, True, "1"])
def test_timeout_must_be_positive(vocab, bad):
    with pytest.raises(ValueError, match="timeout_s must be a positive number"):
        ac.compile_regex("a", vocab, timeout_s=bad)


def test_tiny_state_budget(vocab):
    # the object first falls back to declared order (warned by name), then that too is refused
    with (
        pytest.raises(StateBudgetExceededError) as info,
        pytest.warns(ac.OrderFallbackWarning, match=r"\[object #\]"),
    ):
        ac.compile_json_schema(SCHEMA, vocab, max_states=5)
    # SCHEMA allows free-form extra properties: a pushdown automaton whose root rule is the
    # schema itself (other rules would be named)
    assert str(info.value).startswith(
        "the subset construction of the schema's byte DFA exceeds max_states=5"
    )


def test_string_automaton_budget_names_the_location(vocab, monkeypatch):
    monkeypatch.setattr(_char_dfa, "MAX_STATES", 10)
    # maxLength 63, not 64: string automata are cached, and SCHEMA's are built already.
    schema = {"properties": {"url": {"type": "string", "pattern": URL, "maxLength": 63}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        ac.compile_json_schema(schema, vocab)
    msg = str(info.value)
    assert "exceeds max_states=10 states" in msg and "(while building #/properties/url)" in msg


# -- the progress helper ----------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _wait_for_output(stream, cap: float = 60.0) -> None:
    """The fake slow function: runs until the helper has printed (or a generous cap)."""
    end = time.monotonic() + cap
    while not stream.getvalue() and time.monotonic() < end:
        time.sleep(0.005)


def test_progress_prints_after_its_delay():
    out = io.StringIO()
    with _cli.progress("compiling the schema", enabled=True, delay=0.01, interval=0.01, stream=out):
        _wait_for_output(out)
    assert out.getvalue().startswith("compiling the schema ... still running after ")
    assert out.getvalue().count("\n") == 1  # a non-terminal gets a line every 10 s, not a spinner


def test_progress_silent_before_its_delay():
    out = _Tty()
    started = threading.Event()
    with _cli.progress("compiling", enabled=True, delay=600, stream=out):
        started.set()  # a fast compile: done long before the delay
    assert started.is_set() and out.getvalue() == ""


def test_progress_spinner_on_a_terminal_is_cleared():
    out = _Tty()
    with _cli.progress("compiling", delay=0.01, interval=0.01, stream=out):  # enabled: a tty
        _wait_for_output(out)
    text = out.getvalue()
    assert text.startswith("\r") and " compiling ... " in text and text.endswith("\r\x1b[K")


def test_progress_off_unless_a_terminal_or_asked():
    out = io.StringIO()
    with _cli.progress("compiling", delay=0, interval=0.001, stream=out):
        time.sleep(0.05)
    assert out.getvalue() == ""


def test_grammar_and_dataclass_timeouts(vocab):
    import dataclasses

    with pytest.raises(
        CompileTimeoutError, match=r"^(rule '[^']+': )?compiling the grammar ran past"
    ):
        ac.compile_grammar('start: /[a-z]{1,20}@[a-z]{1,20}/ ("," start)?', vocab, timeout_s=1e-9)

    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    with pytest.raises(
        CompileTimeoutError,
        match=r"^compiling dataclass \S*Point ran past timeout_s=1e-09 s in the NFA construction",
    ):
        ac.compile_dataclass(Point, vocab, timeout_s=1e-9)


# -- checkpoints of the PDA composition and of the forced-run extraction ------------------------
# Each step is run alone under a deadline already past (1e-9 s), so the first checkpoint it
# meets raises: no wall-clock assertion.


def test_pda_composition_has_timeout_checkpoints(vocab):
    from automata_compile.automata import build_byte_pda
    from automata_compile.frontends.grammar import read_grammar
    from automata_compile.tokens._pda_compose import compose_pda
    from automata_compile.tokens._token_trie import trie_for

    pda = build_byte_pda(read_grammar('start: "[" start? "]"', vocab, start="start"))
    compose_pda(pda, trie_for(vocab), vocab)  # no deadline: composes
    with _fsa.limits(1e-9, "the grammar"), pytest.raises(CompileTimeoutError) as info:
        compose_pda(pda, trie_for(vocab), vocab)
    assert "in the composition of the grammar with the vocabulary" in str(info.value)


def test_grammar_timeout_covers_the_composition(vocab, monkeypatch):
    """compile_grammar's timeout_s is open while the grammar is composed with the vocabulary."""
    from automata_compile.pipeline import _grammar as gc

    build = gc.build_byte_pda

    def build_then_expire(*args, **kwargs):
        pda = build(*args, **kwargs)
        monkeypatch.setattr(_fsa.time, "monotonic", lambda: float("inf"))
        return pda

    monkeypatch.setattr(gc, "build_byte_pda", build_then_expire)
    with pytest.raises(CompileTimeoutError, match="composition of the grammar"):
        ac.compile_grammar('start: "[" start? "]"', vocab, timeout_s=3600)


def test_forced_run_extraction_has_timeout_checkpoints(vocab):
    from automata_compile.automata import _byte_dfa
    from automata_compile.frontends import _regex
    from automata_compile.tokens import _compose, _forced
    from automata_compile.tokens._token_trie import trie_for

    byte_dfa = _byte_dfa.build_byte_dfa(_regex.parse(r'\{"name": "[a-z]+"\}', None))
    token_class, next_state, accepting, _, byte_state = _compose.compose(
        byte_dfa, trie_for(vocab), return_byte_states=True
    )
    args = (byte_dfa, byte_state, token_class, next_state, accepting, vocab)
    assert _forced.forced_runs(*args).length.any()  # no deadline: forced text found
    with _fsa.limits(1e-9, "the pattern"), pytest.raises(CompileTimeoutError) as info:
        _forced.forced_runs(*args)
    assert "in the forced-run extraction" in str(info.value)


def test_json_schema_compiles_end_within_30_s_by_default(vocab):
    """Issue 20: every compile ends within 30 s with a result or a named error."""
    import inspect

    default = inspect.signature(ac.compile_json_schema).parameters["timeout_s"].default
    assert default == 30.0
    # None: no limit of its own, and an enclosing deadline still applies
    from automata_compile.automata import _fsa

    assert ac.compile_json_schema({"type": "boolean"}, vocab, timeout_s=None).num_states > 1
    with _fsa.limits(1e-9, "the job"), pytest.raises(CompileTimeoutError, match="the job"):
        ac.compile_json_schema(SCHEMA, vocab, timeout_s=None)


def test_a_long_max_length_string_compiles_exactly(vocab):
    """Issue 20: ``maxLength: 1024`` is a chain of about 20,000 byte states (a character is
    1-4 UTF-8 bytes or an escape); refining it took a round per link over every state and
    passed the minimization's work budget. Exactly 1024 characters, however spelled, are
    accepted; 1025 are refused."""
    dfa = ac.compile_json_schema({"type": "string", "maxLength": 1024}, vocab)

    def accepts(text: str, ascii_only: bool) -> bool:
        return dfa.accepts(list(json.dumps(text, ensure_ascii=ascii_only).encode()))

    mixed = "".join('aé\n😀"\\€\x01'[i % 8] for i in range(1025))
    for ch in ("a", "é", "\n", "😀", mixed):
        text = (ch * 1025)[:1025]
        for ascii_only in (False, True):  # raw UTF-8, and \uXXXX escapes (surrogate pairs)
            assert accepts(text[:1024], ascii_only), (ch[:3], ascii_only)
            assert not accepts(text, ascii_only), (ch[:3], ascii_only)
    assert accepts("", True)


def test_the_type_algebra_stops_at_the_deadline():
    """Intersections of a schema's types multiply (the complement of n alternatives meets each
    of m): they check the deadline as the automata constructions do (renovate.json's `not`
    ran 87 s past a 30 s deadline before)."""
    from automata_compile.frontends.json_schema._type_algebra import _pairs

    met = []
    with _fsa.limits(1e-6, "a test schema"):
        time.sleep(0.01)
        with pytest.raises(ac.CompileTimeoutError, match="intersections of the schema's types"):
            _pairs([1, 2], [3, 4], None, lambda x, y: met.append((x, y)))
    assert met == []


def test_order_fallback_names_why_the_whole_schema_failed():
    """The any-order fallback's warning says "outgrows its budget" for a state budget only;
    another failure of the whole schema (here nesting too deep to translate) is named as
    such, not reported as a budget."""
    from automata_compile.frontends.json_schema._options import parse_options
    from automata_compile.pipeline._json_schema import order_fallback

    def options():
        opts = parse_options({})
        opts.any_ordered.append("/properties/x")
        return opts

    def warned(error):
        opts = options()
        with pytest.warns(ac.OrderFallbackWarning) as record:
            retry = order_fallback(opts, error)
        assert retry.declared_at == frozenset({"/properties/x"}) and not retry.any_ordered
        return str(record[0].message)

    budget = warned(StateBudgetExceededError("max_states=5"))
    assert "any property order outgrows its budget (max_states=5)" in budget
    nesting = ac.UnsupportedSchemaError("#: the schema nests too deeply to translate")
    text = warned(nesting)
    assert "fails to compile (#: the schema nests too deeply" in text and "budget" not in text
    keyword = ac.UnsupportedSchemaError("no", keyword="uniqueItems")
    assert order_fallback(options(), keyword) is None  # a keyword's refusal: no fallback
