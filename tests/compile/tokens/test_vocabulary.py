"""Tests of `automata_compile.Vocabulary` against the tokenizer libraries as oracles.

Real files: Gemma-3 and Llama-3 ``tokenizer.json`` (shared/tokenizers), mistral-common's
SentencePiece ``tokenizer.model.v1`` and ``tekken_240911.json``. The oracles are the libraries'
own ``encode``/``decode``; the one documented difference is that a `Vocabulary` never drops the
leading space of the first token (SentencePiece's dummy prefix).
"""

from __future__ import annotations

import base64
import doctest
import json
import re
import shutil

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automata_compile import Vocabulary, VocabularyError

SAMPLES = [
    "Hello, world!",
    "hello",
    " leading space",
    "  two leading spaces",
    "trailing space ",
    "a  b   c    d",
    "\t\ttabs\tand\nnewlines\n\n\r\n",
    "\n",
    "Crème brûlée, naïve façade, Ærøskøbing, Łódź, İstanbul",
    "Ελληνικά και Русский текст",
    "日本語のテキストと中文文本，한국어",
    "emoji: 😀👍🏽 👨‍👩‍👧‍👦 🇫🇷",
    "rare: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ꙮ 𓀀 \u200b\u00a0\ufeff",
    'def f(x):\n    return {"a": [1, 2.5e-3, null]}  # code\n',
    "for (int i = 0; i < n; ++i) { s += a[i]; }",
    '{"name": "Ada", "age": 36, "tags": ["x", "y"]}',
    "<start_of_image> <eos> <s> </s> <|eot_id|> [INST] <unused0>",
    "0123456789 3.14159 -42 1e10",
    "      ",
    "",
]


def _tokenizers():
    return pytest.importorskip("tokenizers", reason="needs tokenizers (pip install tokenizers)")


def _sp_processor(path):
    spm = pytest.importorskip("sentencepiece", reason="needs sentencepiece")
    return spm.SentencePieceProcessor(model_file=str(path))


def _sp_dummy_prefix(path) -> bool:
    """Whether the SentencePiece model prepends a space when encoding (read from its proto)."""
    pb = pytest.importorskip("sentencepiece.sentencepiece_model_pb2", reason="needs protobuf")
    proto = pb.ModelProto()
    proto.ParseFromString(path.read_bytes())
    return proto.normalizer_spec.add_dummy_prefix


@pytest.fixture(scope="module")
def tekkenizer(tekken_path):
    """mistral-common's own Tekkenizer for the same file (the oracle)."""
    tekken = pytest.importorskip(
        "mistral_common.tokens.tokenizers.tekken", reason="needs mistral-common"
    )
    return tekken.Tekkenizer.from_file(tekken_path)


def _lossy(b: bytes | None) -> str:
    """What the libraries return for one token decoded alone (invalid UTF-8 -> U+FFFD)."""
    return "" if b is None else b.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def gemma3_tk(gemma3_tokenizer_path):
    return _tokenizers().Tokenizer.from_file(str(gemma3_tokenizer_path))


@pytest.fixture(scope="module")
def llama3_tk(llama3_tokenizer_path):
    return _tokenizers().Tokenizer.from_file(str(llama3_tokenizer_path))


# ----------------------------------------------------------------------------- from_bytes


def test_docstring_examples():
    from automata_compile.tokens import _vocabulary

    result = doctest.testmod(_vocabulary, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_public_surface():
    import automata_compile

    assert automata_compile.Vocabulary is Vocabulary
    for name in ("from_file", "from_sentencepiece", "from_tokenizer_json", "from_tekken"):
        assert callable(getattr(Vocabulary, name))
    for name in ("from_hf_tokenizer", "from_bytes", "decode", "encode", "token_matrix"):
        assert callable(getattr(Vocabulary, name))


def test_from_bytes_basics():
    vocab = Vocabulary.from_bytes(
        [b"a", b"b", b"ab", b"<eos>", b"", b"\xc3"],
        eos_ids=[3],
        special_ids=[0],
        special_tokens={"<eos>": 3},
        name="tiny",
        bos_id=None,
    )
    assert vocab.size == 6
    assert vocab.tokens == (None, b"b", b"ab", None, b"", b"\xc3")
    assert vocab.special_ids == (0, 3)
    assert vocab.eos_ids == (3,)
    assert vocab.special_tokens == {"<eos>": 3}
    assert vocab.decode([2, 0, 1, 3, 4, 5]) == b"abb\xc3"
    assert "size=6" in repr(vocab) and len(repr(vocab)) < 200
    with pytest.raises(VocabularyError, match="out of range"):
        vocab.decode([6])


def test_eos_and_bos_are_never_text():
    vocab = Vocabulary.from_bytes([b"x", b"</s>", b"<s>"], eos_ids=[1], bos_id=2)
    assert vocab.tokens == (b"x", None, None)
    assert vocab.special_ids == (1, 2)
    with pytest.raises(VocabularyError, match="must be None"):
        Vocabulary((b"x", b"y"), (1,))


def test_from_bytes_validation():
    with pytest.raises(VocabularyError, match="out of range"):
        Vocabulary.from_bytes([b"a"], eos_ids=[1])
    with pytest.raises(TypeError, match=r"tokens\[1\]: expected bytes or None, got str"):
        Vocabulary.from_bytes([b"a", "b", None], eos_ids=[2])
    assert Vocabulary.from_bytes([bytearray(b"a"), None], eos_ids=[1]).tokens == (b"a", None)


def test_token_matrix():
    vocab = Vocabulary.from_bytes([b"ab", b"", b"xyz", None, b"\xff"], eos_ids=[3])
    matrix, lengths = vocab.token_matrix()
    assert matrix.dtype == np.uint8 and matrix.shape == (5, 3)
    assert lengths.dtype == np.int32 and lengths.tolist() == [2, 0, 3, -1, 1]
    assert matrix.tolist() == [[97, 98, 0], [0, 0, 0], [120, 121, 122], [0, 0, 0], [255, 0, 0]]
    assert vocab.token_matrix()[0] is matrix  # cached
    with pytest.raises(ValueError):
        matrix[0, 0] = 1  # read-only: the cache cannot be corrupted
    empty = Vocabulary.from_bytes([None], eos_ids=[0])
    assert empty.token_matrix()[0].shape == (1, 1)


def test_fingerprint_distinguishes_everything():
    base = Vocabulary.from_bytes([b"a", b"b", None], eos_ids=[2])
    same = Vocabulary.from_bytes([b"a", b"b", b"ignored"], eos_ids=[2], name="other name")
    assert base.fingerprint == same.fingerprint
    assert re.fullmatch("[0-9a-f]{64}", base.fingerprint)
    variants = [
        Vocabulary.from_bytes([b"a", b"c", None], eos_ids=[2]),  # bytes
        Vocabulary.from_bytes([b"a", b"", None], eos_ids=[2]),  # b"" vs None below
        Vocabulary.from_bytes([b"a", None, None], eos_ids=[2]),
        Vocabulary.from_bytes([b"ab", b"", None], eos_ids=[2]),  # same concatenation
        Vocabulary.from_bytes([b"a", b"b", None, None], eos_ids=[2]),  # size
        Vocabulary.from_bytes([b"a", None, None], eos_ids=[1, 2]),  # eos ids
    ]
    prints = {base.fingerprint, *(v.fingerprint for v in variants)}
    assert len(prints) == len(variants) + 1


def test_from_bytes_greedy_encode():
    vocab = Vocabulary.from_bytes([b"a", b"b", b"ab", b"abb", None], eos_ids=[4])
    assert vocab.encode("abab") == [2, 2]  # greedy longest match, no canonical tokenizer
    assert vocab.encode("abba") == [3, 0]
    assert vocab.decode(vocab.encode("babba")) == b"babba"
    with pytest.raises(VocabularyError, match="cannot spell"):
        vocab.encode("abc")


# ----------------------------------------------------------------------------- real files


def test_gemma3_layout(gemma3_vocab):
    v = gemma3_vocab
    assert v.size == 262_145 and v.name == "tokenizer.json"
    assert v.eos_ids == (1, 106)  # <eos> and <end_of_turn>
    assert v.bos_id == 2
    for name, i in {
        "<pad>": 0,
        "<eos>": 1,
        "<bos>": 2,
        "<unk>": 3,
        "<start_of_turn>": 105,
        "<end_of_turn>": 106,
        "<start_of_image>": 255_999,
        "<end_of_image>": 256_000,
        "<image_soft_token>": 262_144,  # beyond the model vocab: an added token
    }.items():
        assert v.special_tokens[name] == i and v.tokens[i] is None
    assert set(v.special_ids) == set(v.special_tokens.values())
    # Added tokens marked special=false decode as their text (the decoder leaves them alone).
    assert v.tokens[6] == b"<unused0>" and v.tokens[262_143] == b"<unused6241>"
    assert v.tokens[4] == b"<mask>" and v.tokens[5] == b"[multimodal]"


def test_llama3_layout(llama3_vocab):
    v = llama3_vocab
    assert v.size == 128_256
    assert v.eos_ids == (128_001, 128_009)  # <|end_of_text|>, <|eot_id|> (no <|eom_id|> in 3.0)
    assert v.bos_id == 128_000
    assert v.special_ids == tuple(range(128_000, 128_256))
    assert v.special_tokens["<|start_header_id|>"] == 128_006
    # Byte-level: all 256 single bytes are tokens; pieces may split a character.
    assert {t for t in v.tokens if t is not None and len(t) == 1} == {
        bytes([b]) for b in range(256)
    }
    assert any(t is not None and not _valid_utf8(t) for t in v.tokens[:128_000])


def test_mistral_sp_layout(mistral_sp_vocab, mistral_sp_path):
    v = mistral_sp_vocab
    sp = _sp_processor(mistral_sp_path)
    assert v.size == sp.get_piece_size() == 32_000
    assert v.eos_ids == (2,) and v.bos_id == 1
    assert v.special_tokens == {"<unk>": 0, "<s>": 1, "</s>": 2}
    assert v.special_ids == (0, 1, 2)
    assert v.tokens[sp.piece_to_id("▁Hello")] == b" Hello"


def test_tekken_layout(tekken_vocab, tekkenizer):
    v, tok = tekken_vocab, tekkenizer
    assert v.size == tok.n_words == 131_072
    assert v.special_ids == tuple(range(1000))
    assert v.eos_ids == (tok.eos_id,) == (2,)
    assert v.bos_id == tok.bos_id == 1
    assert v.special_tokens["[INST]"] == 3 and v.special_tokens["<SPECIAL_999>"] == 999
    assert {v.special_tokens[t["token_str"]] for t in tok._all_special_tokens} == set(range(1000))
    assert [v.tokens[1000 + b] for b in range(256)] == [bytes([b]) for b in range(256)]


@pytest.mark.parametrize("fixture", ["gemma3_vocab", "mistral_sp_vocab"])
def test_byte_fallback_pieces_are_single_bytes(fixture, request):
    v = request.getfixturevalue(fixture)
    if fixture == "gemma3_vocab":
        piece_to_id = request.getfixturevalue("gemma3_tk").token_to_id
    else:
        piece_to_id = _sp_processor(request.getfixturevalue("mistral_sp_path")).piece_to_id
    for b in range(256):
        assert v.tokens[piece_to_id(f"<0x{b:02X}>")] == bytes([b])


def _valid_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ----------------------------------------------------------------------------- per-token oracles


@pytest.mark.parametrize("which", ["gemma3", "llama3"])
def test_every_token_matches_tokenizers_decode(which, request):
    """Each id decoded alone by `tokenizers` equals our bytes (lossily decoded), all ids."""
    v = request.getfixturevalue(f"{which}_vocab")
    tk = request.getfixturevalue(f"{which}_tk")
    assert tk.get_vocab_size(with_added_tokens=True) == v.size
    decoded = tk.decode_batch([[i] for i in range(v.size)], skip_special_tokens=True)
    mismatches = [i for i in range(v.size) if decoded[i] != _lossy(v.tokens[i])]
    assert mismatches == []
    # Special tokens are exactly the ids the library skips.
    kept = tk.decode_batch([[i] for i in v.special_ids], skip_special_tokens=False)
    assert kept == [tk.id_to_token(i) for i in v.special_ids]


def test_every_token_matches_sentencepiece_decode(mistral_sp_vocab, mistral_sp_path):
    """sp.decode([id]) equals our bytes with the dummy prefix's space dropped (its rule)."""
    v, sp = mistral_sp_vocab, _sp_processor(mistral_sp_path)
    assert _sp_dummy_prefix(mistral_sp_path)
    for i in range(v.size):
        expected = sp.decode([i])
        if v.tokens[i] is None:
            assert sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)
            continue
        ours = _lossy(v.tokens[i])
        # SentencePiece drops the leading U+2581 of the first piece (add_dummy_prefix); a
        # byte-fallback <0x20> is a real space and stays.
        dummy = sp.id_to_piece(i).startswith("\u2581") and not sp.is_byte(i)
        assert expected == (ours[1:] if dummy else ours), (i, sp.id_to_piece(i))
        # Behind another piece, nothing is dropped: the exact concatenation.
        assert sp.decode([sp.piece_to_id("a"), i]) == "a" + ours or not _valid_utf8(v.tokens[i])


def test_every_token_matches_tekken_bytes(tekken_vocab, tekkenizer):
    tok = tekkenizer
    for i in range(tekken_vocab.size):
        piece = tok.id_to_byte_piece(i)  # b"" for special ids (IGNORE policy)
        assert (tekken_vocab.tokens[i] or b"") == piece, i


# ----------------------------------------------------------------------------- encode round trips


@pytest.mark.parametrize("text", SAMPLES)
def test_hf_round_trip(text, gemma3_vocab, llama3_vocab, gemma3_tk, llama3_tk):
    for vocab, tk in ((gemma3_vocab, gemma3_tk), (llama3_vocab, llama3_tk)):
        ids = vocab.encode(text)
        assert vocab.decode(ids) == text.encode("utf-8")
        assert not set(ids) & set(vocab.special_ids)  # special names in text are plain text
        # The library decodes the same run of ids to the same text.
        assert tk.decode(ids, skip_special_tokens=False) == text
        # And our encode is the library's canonical one, except special names become text.
        if not any(name in text for name in vocab.special_tokens):
            assert ids == tk.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("text", SAMPLES)
def test_sentencepiece_round_trip(text, mistral_sp_vocab, mistral_sp_path):
    """With add_dummy_prefix, encode(t) spells " " + t (empty text stays empty)."""
    v, sp = mistral_sp_vocab, _sp_processor(mistral_sp_path)
    ids = v.encode(text)
    assert ids == sp.encode(text)
    prefix = b" " if text and _sp_dummy_prefix(mistral_sp_path) else b""
    assert v.decode(ids) == prefix + text.encode("utf-8")
    assert sp.decode(ids) == text  # the library drops that space again


@pytest.mark.parametrize("text", SAMPLES)
def test_tekken_round_trip(text, tekken_vocab, tekkenizer):
    tok = tekkenizer
    ids = tekken_vocab.encode(text)
    assert ids == tok.encode(text, bos=False, eos=False)
    assert min(ids, default=1000) >= 1000
    assert tekken_vocab.decode(ids) == text.encode("utf-8")
    assert tok.decode(ids) == text


_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\u2581"), max_size=40
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=_TEXT)
def test_round_trip_property(text, gemma3_vocab, llama3_vocab, mistral_sp_vocab, tekken_vocab):
    """Any text without U+2581 round-trips exactly (SentencePiece: after its dummy-prefix space).

    U+2581 itself is the one exception in SentencePiece-style vocabularies: it is
    the space marker, so its own pieces decode to b" " (the libraries agree).
    """
    data = text.encode("utf-8")
    for vocab in (gemma3_vocab, llama3_vocab, tekken_vocab):
        assert vocab.decode(vocab.encode(text)) == data
    assert mistral_sp_vocab.decode(mistral_sp_vocab.encode(text)) == (b" " + data if text else b"")


def test_space_marker_is_not_round_tripped(gemma3_vocab, gemma3_tk):
    ids = gemma3_vocab.encode("a\u2581b")
    assert gemma3_vocab.decode(ids) == b"a b" and gemma3_tk.decode(ids) == "a b"


# ----------------------------------------------------------------------------- identity


def test_fingerprints(
    gemma3_vocab, llama3_vocab, mistral_sp_vocab, tekken_vocab, llama3_tokenizer_path
):
    prints = [v.fingerprint for v in (gemma3_vocab, llama3_vocab, mistral_sp_vocab, tekken_vocab)]
    assert len(set(prints)) == 4
    again = Vocabulary.from_tokenizer_json(llama3_tokenizer_path)
    assert again is not llama3_vocab and again.fingerprint == llama3_vocab.fingerprint
    assert again.tokens == llama3_vocab.tokens
    # A directory loads its tokenizer.json.
    assert Vocabulary.from_file(llama3_tokenizer_path.parent).fingerprint == prints[1]


def test_fingerprint_is_the_documented_digest(mistral_sp_vocab, mistral_sp_path):
    """The digest is a pure function of the content, as documented (so stable across processes)."""
    assert (
        Vocabulary.from_sentencepiece(mistral_sp_path).fingerprint == mistral_sp_vocab.fingerprint
    )
    assert mistral_sp_vocab.fingerprint == _reference_fingerprint(mistral_sp_vocab)


def _reference_fingerprint(vocab) -> str:
    """The documented digest, recomputed the slow way."""
    import hashlib
    import struct

    h = hashlib.sha256(b"automata_jax/vocabulary/v1\n" + struct.pack("<q", vocab.size))
    h.update(b"".join(struct.pack("<q", -1 if t is None else len(t)) for t in vocab.tokens))
    h.update(b"".join(t for t in vocab.tokens if t))
    h.update(b"".join(struct.pack("<q", i) for i in vocab.eos_ids))
    return h.hexdigest()


def test_from_hf_tokenizer(llama3_tk, llama3_vocab):
    v = Vocabulary.from_hf_tokenizer(llama3_tk, name="llama3")
    assert v.name == "llama3"
    assert v.fingerprint == llama3_vocab.fingerprint  # eos from well-known names agree
    assert v.encode("Hi there <|eot_id|>") == llama3_vocab.encode("Hi there <|eot_id|>")
    explicit = Vocabulary.from_hf_tokenizer(llama3_tk, eos_ids=[128_009])
    assert explicit.eos_ids == (128_009,)
    assert llama3_tk.encode("<|eot_id|>", add_special_tokens=False).ids == [128_009]  # untouched
    with pytest.raises(TypeError, match="tokenizers.Tokenizer"):
        Vocabulary.from_hf_tokenizer(object())


def test_token_matrix_real(llama3_vocab):
    matrix, lengths = llama3_vocab.token_matrix()
    assert matrix.shape == (llama3_vocab.size, int(lengths.max()))
    for i in (0, 220, 9906, 128_000, 127_999):
        t = llama3_vocab.tokens[i]
        assert lengths[i] == (-1 if t is None else len(t))
        assert bytes(matrix[i, : max(lengths[i], 0)]) == (t or b"")
        assert not matrix[i, max(lengths[i], 0) :].any()


# ----------------------------------------------------------------------------- bad input


def test_missing_path(tmp_path):
    missing = tmp_path / "nope.json"
    for load in (
        Vocabulary.from_file,
        Vocabulary.from_tokenizer_json,
        Vocabulary.from_sentencepiece,
        Vocabulary.from_tekken,
    ):
        with pytest.raises(VocabularyError, match=re.escape(str(missing))):
            load(missing)


@pytest.mark.parametrize(
    "file_name, content, cause",
    [
        ("tokenizer.json", b'{"model": {"type": "BPE", "vocab": {"a": 0}', "not valid JSON"),
        ("tokenizer.json", b"[1, 2]", "JSON object"),
        ("odd.json", b'{"hello": 1}', "unknown tokenizer JSON"),
        ("tokenizer.model", b"\x00\x01garbage", "SentencePiece"),
        ("tokenizer.bin", b"\x08\x96\x01 not a model", "SentencePiece"),
        ("tokenizer.json", b'{"model": {"type": "BPE", "vocab": ["a"]}}', "malformed"),
        (
            "tokenizer.json",
            b'{"model": {"type": "WordPiece", "vocab": {"a": 0}}, "decoder": {"type": "WordPiece"}}',
            "unsupported decoder 'WordPiece'",
        ),
        (
            "tokenizer.json",
            b'{"model": {"type": "BPE", "vocab": {"a": 0}}, "decoder": null}',
            "no decoder",
        ),
        ("tekken.json", b'{"vocab": [], "config": {}}', "malformed tekken"),
        (
            "tekken.json",
            b'{"vocab": [{"rank": 0, "token_bytes": "!!", "token_str": null}], "config":'
            b' {"default_num_special_tokens": 20, "default_vocab_size": 21, "version": "v3"}}',
            "malformed tekken",
        ),
    ],
)
def test_corrupt_or_unsupported_files(tmp_path, file_name, content, cause):
    path = tmp_path / file_name
    path.write_bytes(content)
    with pytest.raises(VocabularyError) as info:
        Vocabulary.from_file(path)
    assert str(path) in str(info.value) and cause in str(info.value)


def test_directory_without_tokenizer(tmp_path):
    with pytest.raises(VocabularyError, match="no tokenizer.json"):
        Vocabulary.from_file(tmp_path)


def test_tokenizer_config_eos(tmp_path):
    """EOS comes from tokenizer_config.json / generation_config.json next to the file."""
    obj = {
        "added_tokens": [
            {"id": 3, "content": "<stop>", "special": True},
            {"id": 4, "content": "<eos>", "special": True},
            {"id": 5, "content": "<done>", "special": True},
        ],
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": {"a": 0, "Ġb": 1, "Ã©": 2}, "merges": []},
    }
    (tmp_path / "tokenizer.json").write_text(json.dumps(obj))
    assert Vocabulary.from_file(tmp_path).eos_ids == (4,)  # well-known name only
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": {"content": "<stop>"}})
    )
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [5]}))
    v = Vocabulary.from_file(tmp_path)
    assert v.eos_ids == (3, 4, 5)
    assert v.tokens[:3] == (b"a", b" b", "é".encode())
    assert v.special_tokens == {"<stop>": 3, "<eos>": 4, "<done>": 5}


def test_sentencepiece_style_json_decoder(tmp_path):
    """Replace + ByteFallback + Fuse + Strip (Llama-2 style): Strip after Fuse is not applied."""
    obj = {
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True}],
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "vocab": {"<unk>": 0, "<0xE2>": 1, "▁hi": 2, "x▁": 3},
            "merges": [],
        },
    }
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(obj))
    v = Vocabulary.from_file(path)
    assert v.tokens == (None, b"\xe2", b" hi", b"x ")
    assert v.special_tokens == {"<unk>": 0}


def test_unigram_metaspace_json(tmp_path):
    obj = {
        "added_tokens": [],
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"},
        "model": {
            "type": "Unigram",
            "unk_id": 0,
            "vocab": [["<unk>", 0.0], ["▁a", -1.0], ["b", -2.0]],
        },
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(obj))
    v = Vocabulary.from_tokenizer_json(path)
    assert v.tokens == (None, b" a", b"b")  # the first token's space is kept, as everywhere


def test_tekken_with_special_tokens_list(tmp_path, tekken_path):
    """Newer tekken files list their special tokens; fillers complete the special range."""
    vocab = [
        {"rank": r, "token_bytes": base64.b64encode(bytes([r])).decode(), "token_str": None}
        for r in range(256)
    ]
    obj = {
        "config": {"default_num_special_tokens": 4, "default_vocab_size": 200, "version": "v13"},
        "vocab": vocab,
        "special_tokens": [
            {"rank": 1, "token_str": "<s>", "is_control": True},
            {"rank": 0, "token_str": "<unk>", "is_control": True},
            {"rank": 2, "token_str": "</s>", "is_control": True},
        ],
    }
    path = tmp_path / "tekken_custom.json"
    path.write_text(json.dumps(obj))
    v = Vocabulary.from_file(path)
    assert v.size == 200 and v.special_ids == (0, 1, 2, 3)
    assert v.special_tokens == {"<unk>": 0, "<s>": 1, "</s>": 2, "<SPECIAL_3>": 3}
    assert v.eos_ids == (2,) and v.bos_id == 1
    assert v.tokens[4:7] == (b"\x00", b"\x01", b"\x02")
    del obj["special_tokens"]
    path.write_text(json.dumps(obj))
    with pytest.raises(VocabularyError, match="without a 'special_tokens' list"):
        Vocabulary.from_file(path)
    # A copy of the real file under another name is still recognized by content.
    copy = tmp_path / "vocab.json"
    shutil.copyfile(tekken_path, copy)
    assert Vocabulary.from_file(copy).size == 131_072


def test_sentencepiece_file_names(tmp_path, mistral_sp_path, mistral_sp_vocab):
    """``tokenizer.model.v1`` and extension-less SentencePiece files load by content."""
    copy = tmp_path / "spm"
    shutil.copyfile(mistral_sp_path, copy)
    assert Vocabulary.from_file(copy).fingerprint == mistral_sp_vocab.fingerprint
