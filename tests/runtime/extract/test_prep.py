"""The job's schema cache (`extract._prep.compile_schema_cached`): a cached artifact loads
the same tables and replays the warnings of the compile that wrote it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from automata_compile import (
    OrderFallbackWarning,
    SubsetWarning,
    TokenSubsetWarning,
    Vocabulary,
)
from automata_jax.extract._prep import _read_warnings, _write_warnings, compile_schema_cached

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


def _compile(cache_dir):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        dfa, artifact, hit = compile_schema_cached(SCHEMA, VOCAB, cache_dir, **OPTIONS)
    caught = [
        (type(w.message), str(w.message), getattr(w.message, "pointer", None))
        for w in record
        if issubclass(w.category, UserWarning)
    ]
    return dfa, artifact, hit, caught


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
def test_an_artifact_without_its_warnings_compiles_again(tmp_path, damage, capsys):
    _, artifact, _, caught = _compile(tmp_path)
    notes = artifact.with_suffix(".warnings.json")
    if damage == "missing":  # an artifact written before warnings were cached
        notes.unlink()
    else:
        notes.write_text('{"warnings": [{"category": 1}]}')
    _, _, hit, again = _compile(tmp_path)
    assert not hit and again == caught
    assert ("recompiling" in capsys.readouterr().err) == (damage == "corrupt")
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
    _write_warnings(path, caught)
    back = _read_warnings(path)
    assert [type(w) for w in back] == [type(w) for w in caught]
    assert [str(w) for w in back] == [str(w) for w in caught]
    assert [(getattr(w, "pointer", None), getattr(w, "keyword", None)) for w in back] == [
        ("/a", "$ref"),
        ("/b", "properties"),
        ("", ""),
        (None, None),
    ]
