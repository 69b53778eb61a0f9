"""`TokenDFA`: reference semantics, validation, and the ``.npz`` artifact (round trip, no pickle,
and every way loading can fail: TableFormatError, IncompatibleVocabularyError)."""

from __future__ import annotations

import doctest
import io
import json
import zipfile

import numpy as np
import pytest

import automata_compile as ac
from automata_compile import IncompatibleVocabularyError, TableFormatError, TokenDFA
from automata_compile.tokens import _token_dfa as tdfa

TOKENS = [b"1", b"2", b"12", b"-", b"x", b"", None, None]  # 6: <eos>, 7: <pad>
EOS, PAD = 6, 7


@pytest.fixture(scope="module")
def vocab():
    return ac.Vocabulary.from_bytes(TOKENS, eos_ids=[EOS], special_tokens={"<pad>": PAD})


@pytest.fixture(scope="module")
def dfa(vocab):
    return ac.compile_regex(r"-?[12]{1,3}", vocab)


def _arrays(dfa):
    return dict(
        token_class=dfa.token_class,
        next_state=dfa.next_state,
        accepting=dfa.accepting,
        start=dfa.start,
        eos_ids=dfa.eos_ids,
        vocab_fingerprint=dfa.vocab_fingerprint,
    )


# -- semantics ------------------------------------------------------------------------------------


def test_docstring_examples():
    import automata_compile
    from automata_compile.pipeline import _regex

    for module in (automata_compile, _regex, tdfa):
        result = doctest.testmod(module)
        assert result.failed == 0


def test_reference_semantics(dfa, vocab):
    assert dfa.vocab_size == len(TOKENS)
    assert dfa.token_class.dtype == np.int32 and dfa.next_state.dtype == np.int32
    assert dfa.accepting.dtype == np.bool_
    assert dfa.nbytes == dfa.token_class.nbytes + dfa.next_state.nbytes + dfa.accepting.nbytes
    start = dfa.start
    mask = dfa.allowed(start)
    assert mask.tolist() == [True, True, True, True, False, False, False, False]
    assert dfa.accepts([3, 2]) and dfa.accepts([0, 1, 0]) and dfa.accepts([2, 0])
    assert not dfa.accepts([2, 2]) and not dfa.accepts([3]) and not dfa.accepts([])
    assert dfa.walk([4]) == -1 and dfa.walk([5]) == -1 and dfa.walk([PAD]) == -1
    s = dfa.walk([2])
    assert dfa.accepting[s] and dfa.allowed(s)[EOS]
    assert dfa.advance(s, EOS) == s  # EOS in an accepting state: finished, state unchanged
    assert dfa.advance(start, EOS) == -1
    assert dfa.walk([2, EOS]) == s
    # Special, EOS and empty tokens are class 0, the never-allowed class.
    assert dfa.token_class[[4, 5, EOS, PAD]].tolist()[1:] == [0, 0, 0]
    assert (dfa.next_state[:, 0] == -1).all()
    assert dfa.eos_ids == (EOS,) and dfa.vocab_fingerprint == vocab.fingerprint
    assert dfa.spec_kind == "regex" and dfa.spec == r"-?[12]{1,3}"
    r = repr(dfa)
    assert "states=" in r and "classes=" in r and len(r) < 200


def test_spec_recorded(vocab):
    dfa = ac.compile_regex("1", vocab, spec_kind="json_schema", spec='{"const": 1}')
    assert dfa.spec_kind == "json_schema" and dfa.spec == '{"const": 1}'


@pytest.mark.parametrize(
    "change,words",
    [
        (dict(token_class=np.zeros(8, np.int64)), "token_class must be int32"),
        (dict(next_state=np.zeros((2, 2), np.int64)), "next_state must be int32"),
        (dict(accepting=np.zeros(99, bool)), "accepting must be bool"),
        (dict(start=99), "start state 99 out of range"),
        (dict(eos_ids=(99,)), "eos id 99 out of range"),
    ],
)
def test_validation(dfa, change, words):
    kwargs = {**_arrays(dfa), **change}
    with pytest.raises(TableFormatError, match=words):
        TokenDFA(**kwargs)


def test_validation_of_values(dfa):
    bad = dfa.next_state.copy()
    bad[0, 1] = dfa.num_states
    with pytest.raises(TableFormatError, match="next_state values"):
        TokenDFA(**{**_arrays(dfa), "next_state": bad})
    bad = dfa.next_state.copy()
    bad[0, 0] = 0
    with pytest.raises(TableFormatError, match="class 0"):
        TokenDFA(**{**_arrays(dfa), "next_state": bad})
    bad = dfa.token_class.copy()
    bad[0] = dfa.num_classes
    with pytest.raises(TableFormatError, match="token_class values"):
        TokenDFA(**{**_arrays(dfa), "token_class": bad})
    with pytest.raises(TableFormatError, match="empty tables"):
        TokenDFA(
            **{
                **_arrays(dfa),
                "next_state": np.zeros((0, 1), np.int32),
                "accepting": np.zeros(0, bool),
            }
        )


# -- artifacts ------------------------------------------------------------------------------------


def test_round_trip(dfa, vocab, tmp_path):
    path = tmp_path / "t.npz"
    dfa.save(path)
    back = TokenDFA.load(path, vocab=vocab)
    for k in ("token_class", "next_state", "accepting"):
        a, b = getattr(dfa, k), getattr(back, k)
        assert a.dtype == b.dtype and np.array_equal(a, b)
    for k in ("start", "eos_ids", "vocab_fingerprint", "spec_kind", "spec", "compiler_version"):
        assert getattr(dfa, k) == getattr(back, k)
    assert back.terminals == dfa.terminals
    assert TokenDFA.load(str(path)).num_states == dfa.num_states  # str paths, no vocab check


def test_artifact_has_no_pickled_objects(dfa, tmp_path):
    path = tmp_path / "t.npz"
    dfa.save(path)
    with np.load(path, allow_pickle=False) as data:
        assert set(data.files) - {*tdfa._FORCED_ARRAYS, tdfa._DRAFT_ARRAY} == {
            "accepting",
            "meta",
            "next_state",
            "token_class",
        }
        for name in data.files:
            assert data[name].dtype != object
        meta = json.loads(bytes(data["meta"]).decode("utf-8"))
    assert meta["format"] == tdfa.FORMAT_LABEL and meta["format_version"] == tdfa.FORMAT_VERSION
    assert meta["vocab_fingerprint"] == dfa.vocab_fingerprint
    assert {"compiler_version", "start", "eos_ids", "spec_kind", "spec", "vocab_size"} <= set(meta)
    # Every member is a plain .npy (no pickle opcode stream).
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == [f"{n}.npy" for n in sorted(data.files)]
        for name in z.namelist():
            assert z.read(name)[:6] == b"\x93NUMPY"


def test_incompatible_vocabulary(dfa, vocab, tmp_path):
    path = tmp_path / "t.npz"
    dfa.save(path)
    other = ac.Vocabulary.from_bytes([*TOKENS[:4], b"y", b"", None, None], eos_ids=[EOS])
    with pytest.raises(IncompatibleVocabularyError) as err:
        TokenDFA.load(path, vocab=other)
    msg = str(err.value)
    assert str(path) in msg and "recompile" in msg and dfa.vocab_fingerprint[:16] in msg
    with pytest.raises(IncompatibleVocabularyError):
        TokenDFA.load(path, expected_fingerprint="0" * 64)
    with pytest.raises(IncompatibleVocabularyError):
        dfa.check_vocabulary(other.fingerprint)
    dfa.check_vocabulary(vocab.fingerprint)
    # Same bytes, different EOS ids: a different vocabulary too.
    eos2 = ac.Vocabulary.from_bytes(TOKENS, eos_ids=[PAD], special_ids=[EOS])
    with pytest.raises(IncompatibleVocabularyError):
        TokenDFA.load(path, vocab=eos2)


def _rewrite(path, out, *, meta=None, drop=(), extra=None, arrays=None):
    with np.load(path, allow_pickle=False) as data:
        content = {k: data[k] for k in data.files if k not in drop}
    if meta is not None:
        content["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    content.update(arrays or {})
    content.update(extra or {})
    np.savez(out, **content)
    return out


@pytest.fixture
def saved(dfa, tmp_path):
    path = tmp_path / "good.npz"
    dfa.save(path)
    with np.load(path) as data:
        meta = json.loads(bytes(data["meta"]).decode())
    return path, meta


def test_missing_file(tmp_path):
    with pytest.raises(TableFormatError, match="no such tables file"):
        TokenDFA.load(tmp_path / "absent.npz")


def test_corrupt_files(saved, tmp_path):
    path, _ = saved
    raw = path.read_bytes()
    cases = {
        "garbage.npz": b"this is not a zip file at all" * 10,
        "empty.npz": b"",
        "truncated.npz": raw[: len(raw) // 2],
        "truncated_tail.npz": raw[:-20],
        "flipped.npz": raw[:40] + bytes(b ^ 0xFF for b in raw[40:80]) + raw[80:],
    }
    for name, content in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        with pytest.raises(TableFormatError) as err:
            TokenDFA.load(p)
        assert name in str(err.value), str(err.value)


def test_random_corruptions_raise_table_format_error(saved, tmp_path):
    # Regression: corrupt deflate data (zlib.error), a corrupt zip header (NotImplementedError)
    # and a .npy file (TypeError) used to escape as non-library exceptions.
    path, _ = saved
    raw = path.read_bytes()
    rng = np.random.default_rng(0)
    p = tmp_path / "fuzzed.npz"
    for _ in range(400):
        b = bytearray(raw)
        mode = rng.integers(3)
        if mode == 0:
            for j in rng.integers(0, len(b), size=rng.integers(1, 5)):
                b[j] = rng.integers(256)
        elif mode == 1:
            b = b[: rng.integers(len(b))]
        else:
            j = int(rng.integers(len(b)))
            b[j : j + int(rng.integers(1, 30))] = rng.bytes(int(rng.integers(0, 30)))
        p.write_bytes(bytes(b))
        try:
            TokenDFA.load(p)
        except TableFormatError:
            pass  # anything else (zlib.error, NotImplementedError, ...) fails the test


def test_a_directory_is_not_a_tables_file(tmp_path):
    with pytest.raises(TableFormatError):
        TokenDFA.load(tmp_path)


def test_foreign_npz(tmp_path):
    p = tmp_path / "foreign.npz"
    np.savez(p, weights=np.zeros(3))
    with pytest.raises(TableFormatError, match="not an automata-jax tables file"):
        TokenDFA.load(p)
    p2 = tmp_path / "plain.npy"
    np.save(p2, np.zeros(3))
    with pytest.raises(TableFormatError):
        TokenDFA.load(p2)


def test_pickled_payload_is_refused(saved, tmp_path):
    path, _ = saved
    # A foreign file whose "meta" is an object array (would need pickle to load).
    p = _rewrite(path, tmp_path / "pickled.npz", extra={"meta": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(TableFormatError):
        TokenDFA.load(p)


@pytest.mark.parametrize(
    "edit,words",
    [
        (lambda m: m.update(format="something-else"), "format label"),
        (lambda m: m.pop("format"), "format label"),
        (lambda m: m.update(format_version=tdfa.FORMAT_VERSION + 1), "format version"),
        (lambda m: m.update(format_version="1"), "format version"),
        (lambda m: m.pop("format_version"), "format version"),
        (lambda m: m.pop("start"), "corrupt metadata"),
        (lambda m: m.update(start="zero"), "corrupt metadata"),
        (lambda m: m.pop("eos_ids"), "corrupt metadata"),
        (lambda m: m.update(start=10_000), "start state"),
        (lambda m: m.update(eos_ids=[10_000]), "eos id"),
    ],
)
def test_bad_metadata(saved, tmp_path, edit, words):
    path, meta = saved
    meta = dict(meta)
    edit(meta)
    p = _rewrite(path, tmp_path / "edited.npz", meta=meta)
    with pytest.raises(TableFormatError, match=words) as err:
        TokenDFA.load(p)
    assert "edited.npz" in str(err.value)


def test_metadata_that_is_not_json(saved, tmp_path):
    path, _ = saved
    for i, blob in enumerate([b"{not json", b"\xff\xfe", b"[1, 2]", b'"a string"']):
        p = _rewrite(
            path, tmp_path / f"meta{i}.npz", extra={"meta": np.frombuffer(blob, dtype=np.uint8)}
        )
        with pytest.raises(TableFormatError):
            TokenDFA.load(p)


@pytest.mark.parametrize("missing", ["meta", "token_class", "next_state", "accepting"])
def test_missing_arrays(saved, tmp_path, missing):
    path, _ = saved
    p = _rewrite(path, tmp_path / "partial.npz", drop=(missing,))
    with pytest.raises(TableFormatError, match=f"missing {missing}"):
        TokenDFA.load(p)


def test_bad_arrays(saved, tmp_path, dfa):
    path, _ = saved
    for i, arrays in enumerate(
        [
            {"token_class": dfa.token_class.astype(np.int64)},
            {"next_state": dfa.next_state.astype(np.float32)},
            {"accepting": dfa.accepting[:1]},
            {"next_state": np.full_like(dfa.next_state, 99)},
        ]
    ):
        p = _rewrite(path, tmp_path / f"arr{i}.npz", arrays=arrays)
        with pytest.raises(TableFormatError, match=f"arr{i}.npz"):
            TokenDFA.load(p)


def test_save_to_a_file_object_and_load_from_bytes(dfa, tmp_path):
    buf = io.BytesIO()
    dfa.save(tmp_path / "x.npz")
    buf.write((tmp_path / "x.npz").read_bytes())
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as data:
        assert "meta" in data.files


def test_real_vocabulary_round_trip(gemma3_vocab, llama3_vocab, tmp_path):
    dfa = ac.compile_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", gemma3_vocab)
    path = tmp_path / "gemma.npz"
    dfa.save(path)
    back = TokenDFA.load(path, vocab=gemma3_vocab)
    assert np.array_equal(back.token_class, dfa.token_class)
    assert back.vocab_size == 262_145
    with pytest.raises(IncompatibleVocabularyError):
        TokenDFA.load(path, vocab=llama3_vocab)
    # Compressed: the int32[V] token_class of a date pattern compresses well.
    assert path.stat().st_size < dfa.nbytes / 4
