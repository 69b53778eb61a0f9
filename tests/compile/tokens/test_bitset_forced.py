"""Forced runs of bitset tables (`automata_compile.tokens._bitset_forced`), against brute force:
from every (state, bits) pair a random walk reaches, the reference rule allows only tokens
that agree with the run's text, allows the run token by token, and the bits after each of
its tokens are the stored ones; the runs are the tokenizer's canonical tokens; a one-property object inside an
any-order one gets the exact token DFA's forced text."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import automata_compile as ac
from automata_compile.tokens import reference_advance, reference_mask
from automata_compile.tokens._bitset_forced import maybe_bits
from automata_jax import testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bitset_schemas import BOOL, nested_object  # noqa: E402
from bitset_schemas import INT99 as INT  # noqa: E402

STR = {"type": "string", "maxLength": 6}
NESTED = nested_object(INT)
ARRAY = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"id": INT, "tag": STR, "ok": BOOL},
                "required": ["id", "ok"],
                "additionalProperties": False,
            },
            "maxItems": 3,
        },
        "name": STR,
    },
    "required": ["items"],
    "additionalProperties": False,
}
ONE = {  # a one-property object (no bits) inside an any-order one
    "type": "object",
    "properties": {
        "point": {
            "type": "object",
            "properties": {"latitude": INT},
            "required": ["latitude"],
            "additionalProperties": False,
        },
        "flag": BOOL,
    },
    "required": ["point", "flag"],
    "additionalProperties": False,
}


SCHEMAS = {"nested": NESTED, "array": ARRAY, "one": ONE, "person": None}


@pytest.fixture(scope="module")
def vocab():
    return testing.default_vocabulary()


@pytest.fixture(scope="module")
def compiled(vocab):
    out = {}
    for name, schema in SCHEMAS.items():
        schema = testing.example_schema() if schema is None else schema
        for ws in ("compact", "pretty"):
            out[name, ws] = ac.compile_json_schema_bitset(schema, vocab, whitespace=ws)
    return out


def _reached(t, rng, walks=40, steps=80):
    """(state, bits) pairs of random walks under the reference rule."""
    seen = set()
    for _ in range(walks):
        q, bits = t.start, np.zeros(t.words, np.uint32)
        for _ in range(steps):
            seen.add((q, tuple(bits.tolist())))
            mask = reference_mask(t, q, bits)
            mask[list(t.eos_ids)] = False
            allowed = np.flatnonzero(mask)
            if not allowed.size:
                break
            q, bits = reference_advance(t, q, bits, int(rng.choice(allowed)))
    return seen


@pytest.mark.parametrize("ws", ["compact", "pretty"])
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_runs_are_forced_allowed_and_keep_the_bits(name, ws, compiled, vocab):
    t = compiled[name, ws]
    runs = t.forced
    assert runs is not None and runs.length.shape == (t.next_state.shape[0],)
    maybe = maybe_bits(t)
    checked = 0
    for q, bits in _reached(t, np.random.default_rng(0)):
        bits = np.asarray(bits, np.uint32)
        assert not (bits & ~maybe[q]).any()  # the fixpoint covers every reached bitset
        n = int(runs.length[q])
        if not n:
            continue
        checked += 1
        run = runs.tokens[q, :n].tolist()
        text = vocab.decode(run)
        assert runs.text[q].startswith(text)
        mask = reference_mask(t, q, bits)
        for tok in np.flatnonzero(mask):
            tb = vocab.tokens[tok]
            assert tb is not None and (text.startswith(tb) or tb.startswith(text)), (q, tb)
        s, b = q, bits
        for i, tok in enumerate(run):  # allowed, and the bits after it are the stored ones
            assert reference_mask(t, s, b)[tok]
            s, b = reference_advance(t, s, b, tok)
            np.testing.assert_array_equal(b, (bits & ~runs.clear[q, i]) | runs.set[q, i])
        assert s == runs.next[q]
    if name in ("nested", "person"):
        return  # few runs there: inside string escapes and numbers
    assert checked


def test_runs_are_canonical_in_context(compiled, vocab):
    """Each run is the tokenizer's encoding of its context and forced text, after the context
    (a prefix of it where the run was cut)."""
    for t in compiled.values():
        runs = t.forced
        for q in np.flatnonzero(runs.length):
            run = runs.tokens[q, : runs.length[q]].tolist()
            c, w = runs.context[q], runs.text[q]
            ids = vocab.encode((c + w).decode())
            pieces = b""
            for k, i in enumerate(ids):
                if pieces.lstrip(b" ") == c or pieces == c:
                    assert ids[k : k + len(run)] == run, (q, c, w)
                    break
                pieces += vocab.tokens[i]
            else:
                assert vocab.encode(w.decode())[: len(run)] == run


def test_runs_cross_a_key_only_where_its_bit_is_unset(compiled, vocab):
    """``":`` after ``"occupation`` is forced (a row there has that key's bit unset) and sets
    the bit; after ``,`` no key is forced (every unset key is a choice)."""
    t = compiled["person", "compact"]
    texts = {vocab.decode(t.forced.tokens[q, : t.forced.length[q]].tolist()): q
             for q in np.flatnonzero(t.forced.length)}  # fmt: skip
    assert b'":' in texts or b'":"' in texts
    q = texts.get(b'":"', texts.get(b'":'))
    assert t.forced.set[q, 0].any()
    for text in texts:
        assert not text.startswith(b',"')


def test_a_one_property_object_forces_what_the_token_dfa_forces(compiled, vocab):
    """After ``"point":`` the inner object's ``{"latitude":`` is forced as in the exact token
    DFA (any order compiles that object alone the same way)."""
    dfa = ac.compile_json_schema(ONE, vocab, whitespace="compact")
    t = compiled["one", "compact"]
    doc = '{"flag":true,"point":{"latitude":7}}'
    ids = vocab.encode(doc)
    if vocab.tokens[ids[0]].startswith(b" "):  # a SentencePiece dummy prefix: respell it
        ids = [vocab.tokens.index(vocab.tokens[ids[0]][1:])] + ids[1:]
    q, bits, p = t.start, np.zeros(t.words, np.uint32), dfa.start
    equal = 0
    for tok in ids:
        run_b = t.forced.tokens[q, : t.forced.length[q]].tolist()
        run_d = dfa.forced_run(p)[0]
        if run_b:
            assert vocab.decode(run_d).startswith(vocab.decode(run_b)), (run_b, run_d)
            equal += run_b == run_d
        q, bits = reference_advance(t, q, bits, tok)
        p = dfa.advance(p, tok)
        assert q >= 0 and p >= 0
    lat = [q for q in np.flatnonzero(t.forced.length) if b"latitude" in vocab.decode(
        t.forced.tokens[q, : t.forced.length[q]].tolist())]  # fmt: skip
    assert lat and equal


def test_no_runs_when_asked(vocab):
    t = ac.compile_json_schema_bitset(NESTED, vocab, max_forced_tokens=0)
    assert t.forced is None


def test_the_table_file_round_trips_and_refuses_clearly(compiled, vocab, tmp_path):
    """`save_bitset_tables` / `load_bitset_tables`: every field and run back; a reader of
    versions 1-3 (and `TokenDFA.load`) refuses the file; another vocabulary, a changed block,
    a plain token-DFA file are refused by name."""
    import zipfile

    from automata_compile import IncompatibleVocabularyError, TableFormatError, TokenDFA
    from automata_compile.tokens import _token_dfa, load_bitset_tables, save_bitset_tables
    from automata_compile.tokens._bitset_file import BITSET_FORMAT_VERSION

    t = compiled["person", "compact"]
    path = tmp_path / "person.npz"
    save_bitset_tables(t, path, vocab_fingerprint=vocab.fingerprint)
    back = load_bitset_tables(path, vocab=vocab)
    for f in ("token_class", "next_state", "program", "programs", "live_mask", "live_always",
              "accepting"):  # fmt: skip
        np.testing.assert_array_equal(getattr(back, f), getattr(t, f), f)
    assert (back.start, back.eos_ids, back.num_bits) == (t.start, t.eos_ids, t.num_bits)
    for f in ("tokens", "length", "next", "clear", "set"):
        np.testing.assert_array_equal(getattr(back.forced, f), getattr(t.forced, f), f)
    assert back.forced.text == t.forced.text and back.forced.context == t.forced.context
    q = int(np.flatnonzero(t.forced.length)[0])
    assert reference_mask(back, q, np.zeros(t.words, np.uint32)).tolist() == (
        reference_mask(t, q, np.zeros(t.words, np.uint32)).tolist()
    )
    # an old reader: its versions do not include the bitset block's
    assert BITSET_FORMAT_VERSION not in (1, 2, 3)
    assert BITSET_FORMAT_VERSION > _token_dfa.FORMAT_VERSION
    with pytest.raises(TableFormatError, match="load_bitset_tables"):
        TokenDFA.load(path)
    with pytest.raises(IncompatibleVocabularyError):
        load_bitset_tables(path, expected_fingerprint="other")
    # a changed block, then another version: rewrite one member
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    meta = json.loads(bytes(np.load(path)["meta"]).decode())

    def write(name, meta, arrays):
        with open(tmp_path / name, "wb") as out:
            raw = np.frombuffer(json.dumps(meta).encode(), np.uint8)
            np.savez(out, meta=raw, **arrays)
        return tmp_path / name

    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "meta"}
    arrays["bitset.live_always"] = ~arrays["bitset.live_always"]
    with pytest.raises(TableFormatError, match="block_sha256"):
        load_bitset_tables(write("changed.npz", meta, arrays))
    arrays["bitset.live_always"] = ~arrays["bitset.live_always"]
    with pytest.raises(TableFormatError, match="version 99"):
        load_bitset_tables(write("v99.npz", {**meta, "format_version": 99}, arrays))
    assert load_bitset_tables(write("same.npz", meta, arrays), vocab=vocab).num_bits == t.num_bits
    assert members  # the file is a zip of .npy members (no pickle)
    plain = ac.compile_json_schema(ONE, vocab)
    plain.save(tmp_path / "plain.npz")
    with pytest.raises(TableFormatError, match="TokenDFA.load"):
        load_bitset_tables(tmp_path / "plain.npz")
    with pytest.raises(TableFormatError, match="no such"):
        load_bitset_tables(tmp_path / "missing.npz")
