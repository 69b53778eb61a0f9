"""The tables cache (`pipeline._cache`, ``compile_json_schema(cache_dir=...)``): a cached
artifact loads the same tables and replays the warnings of the compile that wrote it; any
change of schema, options, vocabulary or compiler compiles afresh."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from automata_compile import (
    OrderFallbackWarning,
    SubsetWarning,
    TokenSubsetWarning,
    UnsupportedSchemaError,
    Vocabulary,
    compile_grammar,
    compile_json_schema,
    compile_regex,
)
from automata_compile.pipeline import _cache
from automata_compile.pipeline._cache import read_warnings, write_warnings

VOCAB = Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [None], eos_ids=[256])

# A remote reference (left out: a SubsetWarning at its pointer, keyword $ref) and, with
# strict=False, a keyword dropped (a plain UserWarning).
SCHEMA = {
    "type": "object",
    "properties": {
        "a": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "uniqueItems": True},
        "remote": {"$ref": "https://example.com/other.json"},
    },
}
OPTIONS = {"strict": False}


def _compile(cache_dir, schema=SCHEMA, **options):
    """``(tables, artifact, hit, the compile's warnings)``; a warning that the cache ignored
    a file is left out of them and raised again as `IgnoredArtifact`."""
    options = {**OPTIONS, **options}
    calls = []

    def build():
        calls.append(1)
        return compile_json_schema(schema, VOCAB, **options)

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        dfa, artifact, hit = _cache.cached_tables(
            cache_dir, kind="json_schema", spec=[schema, options], vocab=VOCAB, build=build
        )
    assert len(calls) == (not hit)
    caught = [
        (type(w.message), str(w.message), getattr(w.message, "pointer", None))
        for w in record
        if not str(w.message).startswith("ignoring cached tables")
    ]
    ignored = [w.message for w in record if str(w.message).startswith("ignoring cached tables")]
    if ignored:
        raise IgnoredArtifact(hit, caught, str(ignored[0]))
    return dfa, artifact, hit, caught


class IgnoredArtifact(Exception):
    def __init__(self, hit, caught, message):
        super().__init__(message)
        self.hit, self.caught = hit, caught


def test_a_cache_hit_replays_the_compiles_warnings(tmp_path):
    dfa, artifact, hit, caught = _compile(tmp_path)
    assert not hit and artifact.is_file()
    kinds = {(c[0], c[2]) for c in caught}
    assert kinds == {(SubsetWarning, "/properties/remote/$ref"), (UserWarning, None)}, caught

    loaded, again, hit, replayed = _compile(tmp_path)
    assert hit and again == artifact
    assert replayed == caught  # the same classes, messages and pointers
    np.testing.assert_array_equal(loaded.next_state, dfa.next_state)
    np.testing.assert_array_equal(loaded.token_class, dfa.token_class)


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_an_artifact_without_its_warnings_compiles_again(tmp_path, damage):
    _, artifact, _, caught = _compile(tmp_path)
    notes = artifact.with_suffix(".warnings.json")
    if damage == "missing":  # an artifact written before warnings were cached: no warning
        notes.unlink()
        _, _, hit, again = _compile(tmp_path)
    else:
        notes.write_text('{"warnings": [{"category": 1}]}')
        with pytest.raises(IgnoredArtifact) as e:
            _compile(tmp_path)
        hit, again = e.value.hit, e.value.caught
    assert not hit and again == caught
    _, _, hit, _ = _compile(tmp_path)  # the compile wrote both files again
    assert hit


def test_warnings_round_trip_with_their_classes_and_fields(tmp_path):
    caught = [
        SubsetWarning("left out", "/a", keyword="$ref"),
        OrderFallbackWarning("declared order", "/b"),
        TokenSubsetWarning("tokens left out"),
        UserWarning("not enforced"),
    ]
    path = tmp_path / "w.json"
    write_warnings(path, caught)
    back = read_warnings(path)
    assert [type(w) for w in back] == [type(w) for w in caught]
    assert [str(w) for w in back] == [str(w) for w in caught]
    assert [(getattr(w, "pointer", None), getattr(w, "keyword", None)) for w in back] == [
        ("/a", "$ref"),
        ("/b", "properties"),
        ("", ""),
        (None, None),
    ]


def test_another_schema_option_or_compiler_compiles_afresh(tmp_path, monkeypatch):
    _, first, _, _ = _compile(tmp_path)
    _, other, hit, _ = _compile(tmp_path, max_whitespace=2)
    assert not hit and other != first
    _, other, hit, _ = _compile(tmp_path, schema={**SCHEMA, "required": ["a"]})
    assert not hit and other != first
    monkeypatch.setattr(_cache, "compiler_fingerprint", lambda: "another compiler")
    _, other, hit, _ = _compile(tmp_path)
    assert not hit and other != first


def test_a_corrupt_artifact_is_compiled_again_with_a_warning(tmp_path):
    _, artifact, _, _ = _compile(tmp_path)
    artifact.write_bytes(b"not an npz")
    with pytest.raises(IgnoredArtifact, match=r"ignoring cached tables .*\(.*\); compiling again"):
        _compile(tmp_path)
    assert _compile(tmp_path)[2]  # rewritten


def test_compile_json_schema_cache_dir(tmp_path):
    """The public knob: the second call loads, with the same tables and warnings."""

    def run():
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            dfa = compile_json_schema(SCHEMA, VOCAB, cache_dir=tmp_path, **OPTIONS)
        return dfa, sorted(str(w.message) for w in record)

    dfa, caught = run()
    assert len(list(tmp_path.glob("json_schema-*.npz"))) == 1 and caught
    again, replayed = run()
    assert replayed == caught
    assert again.accepts(list(b'{"a":[1,2]}')) and not again.accepts(list(b'{"a":1}'))
    np.testing.assert_array_equal(again.next_state, dfa.next_state)


def test_the_compiler_fingerprint_follows_its_sources(tmp_path, monkeypatch):
    """A copy of the package's sources has the same fingerprint; an edit to one file, or a
    new one, changes it; a compiled ``__pycache__`` file does not."""
    import shutil

    import automata_compile

    root = Path(automata_compile.__file__).parent
    copy = tmp_path / "automata_compile"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(automata_compile, "__file__", str(copy / "__init__.py"))
    fingerprint = _cache.compiler_fingerprint.__wrapped__  # not the per-process memo
    base = fingerprint()
    assert base == _cache.compiler_fingerprint()  # the memo: the real package's
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    assert fingerprint() == base
    (copy / "tokens" / "_rows.py").write_text("# changed\n", encoding="utf-8")
    assert fingerprint() != base
    (copy / "tokens" / "_rows.py").write_bytes((root / "tokens" / "_rows.py").read_bytes())
    assert fingerprint() == base
    (copy / "grammars" / "new.lark").write_text("start: /x/", encoding="utf-8")
    assert fingerprint() != base


def test_another_vocabulary_compiles_afresh(tmp_path):
    other = Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [None, None], eos_ids=[257])
    compile_regex("ab", VOCAB, cache_dir=tmp_path)
    compile_regex("ab", other, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("regex-*.npz"))) == 2


@pytest.mark.parametrize(
    "compile_once",
    [
        lambda d: compile_regex(r"[ab]{2,4}c", VOCAB, cache_dir=d),
        lambda d: compile_grammar('start: ("(" start ")")*', VOCAB, cache_dir=d),
    ],
    ids=["regex", "grammar"],
)
def test_regexes_and_grammars_cache_too(tmp_path, compile_once):
    first = compile_once(tmp_path)
    (artifact,) = tmp_path.glob("*.npz")
    stamp = artifact.stat().st_mtime_ns
    again = compile_once(tmp_path)
    assert artifact.stat().st_mtime_ns == stamp  # loaded, not written again
    assert again.is_pda == first.is_pda
    np.testing.assert_array_equal(again.next_state, first.next_state)
    np.testing.assert_array_equal(again.token_class, first.token_class)


def test_a_refusal_keeps_its_warnings_and_saves_nothing(tmp_path):
    def build():
        warnings.warn(SubsetWarning("left out", "/x", keyword="$ref"), stacklevel=2)
        raise UnsupportedSchemaError("refused")

    with pytest.warns(SubsetWarning, match="left out"):
        with pytest.raises(UnsupportedSchemaError, match="refused"):
            _cache.cached_tables(tmp_path, kind="k", spec=1, vocab=VOCAB, build=build)
    assert not list(tmp_path.iterdir())
