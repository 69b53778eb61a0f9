"""The JSON Schema front end's deadline checkpoints (issue 20, item 3: every compile ends
by its deadline). Each loop that ran for seconds on a SchemaStore schema without reaching
`_fsa.check_time` (renovate: 22 s past its 30 s deadline) now checks it: under an already
expired deadline (``timeout_s=1e-9``) the `CompileTimeoutError` names that loop's step,
where before it came from a later phase (or, on renovate, tens of seconds late)."""

from __future__ import annotations

import pytest

import automata_compile as ac
from automata_compile._errors import CompileTimeoutError
from automata_compile.automata import Chars, Seq, _fsa
from automata_compile.frontends.json_schema import _emitter, _floors, _rules


@pytest.fixture(scope="module")
def vocab():
    return ac.Vocabulary.from_bytes(
        [bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256], special_ids=[256]
    )


def _chain(n: int):
    """An IR of ``n`` distinct nodes (a sequence of distinct characters)."""
    return Seq(tuple(Chars(((i, i),)) for i in range(n)))


def test_translation_checks_the_deadline(vocab):
    """Every 64 subschemas translated (fewer reach the later checkpoints first)."""
    props = {f"p{i}": {"type": "string", "maxLength": i + 1} for i in range(100)}
    schema = {"type": "object", "properties": props}
    with pytest.raises(CompileTimeoutError, match="in the translation of the schema"):
        ac.compile_json_schema(schema, vocab, timeout_s=1e-9)


def test_floors_check_the_deadline():
    ir = _chain(3000)
    with _fsa.limits(1e-9, "the schema"), pytest.raises(CompileTimeoutError) as info:
        _floors.shortest(ir, {})
    assert "in the any-order budget's floors" in str(info.value)
    assert _floors.shortest(ir, {}) == (True, 3000)  # no deadline: the same answer


def test_rule_calls_check_the_deadline():
    ir = _chain(3000)
    with _fsa.limits(1e-9, "the schema"), pytest.raises(CompileTimeoutError) as info:
        list(_rules.rule_calls(ir, set()))
    assert "in the schema's grammar rules" in str(info.value)


def test_any_order_walk_and_objects_check_the_deadline(vocab, monkeypatch):
    """The emitter checks per object and in the any-order budget's walk (each of its
    steps costs one pass over the properties: 250 on renovate's root object)."""
    steps = []
    check = _fsa.check_time

    def record(step, what=""):
        steps.append(step)
        check(step, what)

    monkeypatch.setattr(_fsa, "check_time", record)
    monkeypatch.setattr(_floors, "check_time", record, raising=False)
    props = {f"p{i}": {"type": "string", "maxLength": 3} for i in range(24)}
    small = [{"type": "object", "properties": {f"x{i}": {"type": "integer"}}} for i in range(16)]
    big = {"type": "object", "properties": props}
    walk = _emitter._Emitter._refused_by_floors
    walked = []

    def spy(self, *args):
        walked.append(1)
        return walk(self, *args)

    monkeypatch.setattr(_emitter._Emitter, "_refused_by_floors", spy)
    schema = {"type": "array", "prefixItems": [big, *small], "items": False}  # 17 objects
    ac.compile_json_schema(schema, vocab)
    assert walked, "the schema no longer reaches the any-order budget's walk"
    assert "the schema's objects" in steps
    assert "the any-order budget's floors" in steps


def test_any_order_sizing_names_the_property(vocab, monkeypatch):
    """A budget or deadline error while sizing an any-order object's labels names the
    property (buildkite's deadline said only "a property's byte DFA"; it is `steps`), and a
    deadline there says that declared order does not take this step."""

    def fail(self, label):
        raise CompileTimeoutError("sizing" + _fsa._where())

    monkeypatch.setattr(_emitter._Emitter, "_dfa_size", fail)
    inner = {"type": "object", "properties": {"a/b": {"type": "string"}, "c": {"type": "integer"}}}
    schema = {"type": "object", "properties": {"outer": inner}, "additionalProperties": False}
    with pytest.raises(CompileTimeoutError) as info:
        ac.compile_json_schema(schema, vocab)
    assert str(info.value) == (
        "sizing (while building #/properties/outer/properties/a~1b)" + _emitter.SIZING_HINT
    )


def test_a_deadline_after_the_any_order_fallback_says_where_declared_order_starts(
    vocab, monkeypatch
):
    """A deadline met after the objects tried in any order fell back to declared order
    (buildkite: 20 s of its 30 s went to that attempt; declared order compiles it in 12 s)
    says so; one met before any fallback does not."""
    from automata_compile.pipeline import _json_schema

    calls = []

    def budget_then_deadline(schema, opts, *args):
        calls.append(1)
        if len(calls) == 1:  # translated (its objects in any order), then past a budget
            _json_schema.byte_language(schema, opts)
            raise ac.StateBudgetExceededError("the byte DFA is past max_states")
        raise CompileTimeoutError("ran past timeout_s")

    monkeypatch.setattr(_json_schema, "_compile", budget_then_deadline)
    props = {name: {"type": "integer"} for name in "abc"}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    with pytest.warns(ac.OrderFallbackWarning), pytest.raises(CompileTimeoutError) as info:
        ac.compile_json_schema(schema, vocab)
    head, hint = str(info.value).split(";", 1)
    assert head == "ran past timeout_s"
    assert hint.startswith(" the objects it had tried in any property order fell back")
    assert hint.endswith('s, where property_order="declared" starts')
    calls.clear()
    calls.append(1)  # the first call is the deadline: no fallback, no hint
    with pytest.raises(CompileTimeoutError) as info:
        ac.compile_json_schema(schema, vocab)
    assert str(info.value) == "ran past timeout_s"
