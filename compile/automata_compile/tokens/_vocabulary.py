"""`Vocabulary`: token id -> the exact bytes that token contributes to the decoded text.

The compiler works on bytes: it walks every token's bytes through a byte DFA.
This module reads the three tokenizer formats we support and turns each into
one table, ``tokens[id] -> bytes | None``:

* SentencePiece ``.model`` files: ``▁`` (U+2581) is a space, ``<0xNN>``
  byte-fallback pieces are that one byte, control/unknown/unused pieces are
  None.
* Hugging Face ``tokenizer.json``: the per-token part of the file's decoder is
  replayed (``ByteLevel`` inverts GPT-2's bytes-to-unicode map, so a token may
  be half of a UTF-8 character; ``Replace``, ``ByteFallback``, ``Metaspace``,
  ...). Added tokens marked ``special`` are None; other added tokens decode
  like any token.
* mistral-common tekken JSON: base64 ``token_bytes``, offset by the number of
  special tokens, laid out exactly as mistral-common's ``Tekkenizer`` does.

One deliberate difference from the libraries' own ``decode``: they drop the
leading space of the *first* token of a sequence (SentencePiece's dummy prefix;
HF ``Metaspace`` and a final ``Strip`` decoder). A `Vocabulary` never does: the
text of a token sequence is the exact concatenation of its tokens' bytes, the
same at every position. What a sampler shows the user may therefore differ
from ``sp.decode`` by one leading space; the constrained language is stated
over the concatenation.

Example:
  >>> vocab = Vocabulary.from_bytes([b"a", b"b", b"ab", b"<eos>"], eos_ids=[3])
  >>> vocab.size, vocab.special_ids, vocab.decode([2, 0, 3])
  (4, (3,), b'aba')
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from automata_compile._errors import VocabularyError

__all__ = ["Vocabulary"]

# End-of-sequence / beginning-of-sequence names recognized when a file does not say (or says
# only part: Gemma-3's tokenizer_config.json names <end_of_turn> but generation also stops on
# <eos>). Only names that are special tokens of the vocabulary are used.
_WELL_KNOWN_EOS = (
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|endoftext|>",
    "<|im_end|>",
    "<|end|>",
)
_WELL_KNOWN_BOS = ("<bos>", "<s>", "<|begin_of_text|>", "<|startoftext|>")

_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_FINGERPRINT_LABEL = b"automata_jax/vocabulary/v1\n"

TokenBytes = bytes | None
Encoder = Callable[[str], list[int]]


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Vocabulary:
    """A tokenizer's vocabulary as exact byte strings, indexed by token id.

    Build one with `from_file` (or the format-specific constructors) or, for
    tests and fixtures, `from_bytes`. Instances are immutable; derived data
    (`fingerprint`, `token_matrix`, the encoder) is computed once and cached.

    Attributes:
      tokens: ``tokens[id]`` is the exact bytes token ``id`` contributes to the
        decoded text (possibly part of a UTF-8 character), or None for ids
        that are never emitted as text: control, unknown, special and
        added-special tokens, BOS/EOS/PAD, unused ids.
      eos_ids: end-of-sequence ids, sorted (e.g. Gemma-3: ``<eos>`` and
        ``<end_of_turn>``; Llama-3: ``<|end_of_text|>``, ``<|eot_id|>``).
        Always among the None ids.
      special_tokens: name -> id for every named id whose bytes are None
        (``"<start_of_image>"``, ``"<eos>"``, ...). Do not mutate.
      name: where the vocabulary came from (a file name), for messages.
      bos_id: the beginning-of-sequence id, if the tokenizer has one.
    """

    tokens: tuple[TokenBytes, ...]
    eos_ids: tuple[int, ...]
    special_tokens: dict[str, int] = dataclasses.field(default_factory=dict)
    name: str = "custom"
    bos_id: int | None = None
    # Returns the encode function on first use (loads the underlying tokenizer lazily).
    _encoder_loader: Callable[[], Encoder] | None = None

    def __post_init__(self):
        tokens = tuple(self.tokens)
        for i, t in enumerate(tokens):
            if t is not None and type(t) is not bytes:
                raise TypeError(
                    f"Vocabulary.tokens[{i}]: expected bytes or None, got {type(t).__name__}"
                )
        size = len(tokens)
        eos = tuple(sorted({int(i) for i in self.eos_ids}))
        ids = list(eos) + list(self.special_tokens.values())
        if self.bos_id is not None:
            ids.append(self.bos_id)
        for i in ids:
            if not 0 <= i < size:
                raise VocabularyError(
                    f"vocabulary {self.name!r}: token id {i} out of range [0, {size})"
                )
            if tokens[i] is not None:
                raise VocabularyError(
                    f"vocabulary {self.name!r}: EOS/BOS/special id {i} has text bytes {tokens[i]!r};"
                    " such ids must be None (never emitted as text)"
                )
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "eos_ids", eos)
        object.__setattr__(self, "special_tokens", dict(self.special_tokens))

    def __repr__(self) -> str:
        return (
            f"Vocabulary(name={self.name!r}, size={self.size}, eos_ids={self.eos_ids},"
            f" bos_id={self.bos_id}, special={len(self.special_ids)})"
        )

    # -- derived data -----------------------------------------------------------------------

    @property
    def size(self) -> int:
        """The full id range: ``len(tokens)`` (model logits have this width or more)."""
        return len(self.tokens)

    @functools.cached_property
    def special_ids(self) -> tuple[int, ...]:
        """Ids whose bytes are None (never emitted as text), ascending."""
        return tuple(i for i, t in enumerate(self.tokens) if t is None)

    @functools.cached_property
    def _packed(self) -> tuple[np.ndarray, bytes]:
        lengths = np.fromiter(
            (-1 if t is None else len(t) for t in self.tokens), dtype=np.int32, count=self.size
        )
        return lengths, b"".join(t for t in self.tokens if t)

    @functools.cached_property
    def fingerprint(self) -> str:
        """SHA-256 hex digest of the size, every token's bytes (None distinct from b"") and eos ids.

        Stable across processes and loads; two vocabularies with the same
        fingerprint are interchangeable for compiled tables.
        """
        lengths, flat = self._packed
        h = hashlib.sha256(_FINGERPRINT_LABEL)
        h.update(np.int64(self.size).tobytes())
        h.update(lengths.astype("<i8").tobytes())
        h.update(flat)
        h.update(np.asarray(self.eos_ids, dtype="<i8").tobytes())
        return h.hexdigest()

    def token_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """All tokens as one zero-padded byte matrix, for vectorized walks (cached, read-only).

        Returns:
          ``(matrix, lengths)``: ``matrix`` is uint8[V, Lmax] (Lmax = the longest
          token, at least 1), row ``i`` holding token ``i``'s bytes then zeros;
          ``lengths`` is int32[V], the byte length of each token, -1 for None.
        """
        return self._token_matrix

    @functools.cached_property
    def _token_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        lengths, flat = self._packed
        n = np.maximum(lengths, 0)
        width = max(int(n.max(initial=0)), 1)
        matrix = np.zeros((self.size, width), dtype=np.uint8)
        rows = np.repeat(np.arange(self.size), n)
        starts = np.cumsum(n) - n
        cols = np.arange(len(flat)) - np.repeat(starts, n)
        matrix[rows, cols] = np.frombuffer(flat, dtype=np.uint8)
        lengths = lengths.copy()
        matrix.setflags(write=False)
        lengths.setflags(write=False)
        return matrix, lengths

    # -- text --------------------------------------------------------------------------------

    def decode(self, ids: Iterable[int]) -> bytes:
        """The concatenated bytes of ``ids``, skipping None (special) ids.

        Unlike the tokenizer libraries, no leading space is dropped (see the
        module docstring), and the result may be invalid UTF-8 if the ids end
        inside a character.

        Raises:
          VocabularyError: an id is outside ``[0, size)``.
        """
        out = []
        size = self.size
        for i in ids:
            i = int(i)
            if not 0 <= i < size:
                raise VocabularyError(
                    f"vocabulary {self.name!r}: token id {i} out of range [0, {size})"
                )
            t = self.tokens[i]
            if t is not None:
                out.append(t)
        return b"".join(out)

    def encode(self, text: str) -> list[int]:
        """The tokenizer's canonical encoding of ``text``, with no special tokens (no BOS).

        Loads the underlying tokenizer (sentencepiece, tokenizers or
        mistral-common) on first use. Special-token names in ``text`` are
        encoded as plain text. SentencePiece models with a dummy prefix encode
        ``text`` as ``" " + text`` (so ``decode(encode(t)) == b" " + t.encode()``
        there). A vocabulary built with `from_bytes` has no tokenizer: it uses
        a greedy longest-match tokenization.

        Raises:
          ImportError: the tokenizer's library is not installed.
          VocabularyError: ``from_bytes`` vocabulary that cannot spell ``text``.
        """
        return list(self._encoder(text))

    @functools.cached_property
    def _encoder(self) -> Encoder:
        if self._encoder_loader is not None:
            return self._encoder_loader()
        return _greedy_encoder(self)

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def from_bytes(
        cls,
        tokens: Sequence[bytes | None],
        *,
        eos_ids: Iterable[int],
        special_ids: Iterable[int] = (),
        special_tokens: Mapping[str, int] | None = None,
        name: str = "custom",
        bos_id: int | None = None,
    ) -> Vocabulary:
        """A vocabulary from explicit byte strings (tests, fixtures, custom tokenizers).

        Args:
          tokens: ``tokens[id]`` = that token's bytes, or None.
          eos_ids: end-of-sequence ids.
          special_ids: ids never emitted as text. They, ``eos_ids``, ``bos_id``
            and the ids of ``special_tokens`` get None bytes whatever
            ``tokens`` holds there.
          special_tokens: optional names of special ids.
          name: shown in messages.
          bos_id: optional beginning-of-sequence id.
        """
        toks = [
            None if t is None else bytes(t) if isinstance(t, bytearray | memoryview) else t
            for t in tokens
        ]
        special_tokens = dict(special_tokens or {})
        eos_ids = list(eos_ids)
        none_ids = [*special_ids, *eos_ids, *special_tokens.values()]
        if bos_id is not None:
            none_ids.append(bos_id)
        for i in none_ids:
            if not 0 <= i < len(toks):
                raise VocabularyError(
                    f"vocabulary {name!r}: token id {i} out of range [0, {len(toks)})"
                )
            toks[i] = None
        return cls(tuple(toks), tuple(eos_ids), special_tokens, name, bos_id)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads any supported tokenizer file, dispatching on its format.

        * a directory: its ``tokenizer.json`` (else ``tokenizer.model``);
        * ``*.model`` (also ``tokenizer.model.v3``-style names): SentencePiece;
        * JSON with a ``"model"`` key: Hugging Face ``tokenizer.json``;
        * JSON with a ``"vocab"`` list and ``"config"``: mistral-common tekken;
        * a file starting with ``GGUF``: the tokenizer in a GGUF model's metadata;
        * other binary files are tried as SentencePiece models.

        Raises:
          VocabularyError: missing, unreadable, corrupt or unsupported file
            (the message names the path and the cause).
        """
        path = _existing(path)
        if path.is_dir():
            for candidate in ("tokenizer.json", "tokenizer.model"):
                if (path / candidate).is_file():
                    return cls.from_file(path / candidate)
            raise VocabularyError(f"{path}: directory has no tokenizer.json or tokenizer.model")
        if ".model" in path.suffixes:
            return cls.from_sentencepiece(path)
        data = _read_bytes(path)
        if data[:4] == b"GGUF":
            return cls.from_gguf(path)
        if data.lstrip()[:1] not in (b"{", b"["):  # not JSON: SentencePiece is protobuf
            return cls.from_sentencepiece(path)
        obj = _parse_json(data, path)
        if "model" in obj:
            return _from_tokenizer_json_obj(obj, path, text=None)
        if isinstance(obj.get("vocab"), list) and "config" in obj:
            return _from_tekken_obj(obj, path)
        raise VocabularyError(
            f"{path}: unknown tokenizer JSON (no 'model' key as in a Hugging Face tokenizer.json,"
            " no 'vocab' list and 'config' as in a tekken file)"
        )

    @classmethod
    def from_sentencepiece(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads a SentencePiece ``.model`` file (needs ``sentencepiece``).

        ``▁`` maps to a space in every piece, including the first: the dummy
        prefix SentencePiece adds when encoding is kept, not stripped.
        """
        path = _existing(path)
        spm = _import_sentencepiece()
        try:
            sp = spm.SentencePieceProcessor(model_file=str(path))
        except (RuntimeError, OSError, ValueError) as e:  # what sentencepiece raises on bad files
            raise VocabularyError(f"{path}: not a readable SentencePiece model ({e})") from e
        n = sp.get_piece_size()
        pieces = sp.id_to_piece(list(range(n)))
        tokens: list[TokenBytes] = []
        special: dict[str, int] = {}
        for i, piece in enumerate(pieces):
            if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
                tokens.append(None)
                special[piece] = i
            elif sp.is_byte(i):
                m = _BYTE_PIECE.fullmatch(piece)
                if m is None:
                    raise VocabularyError(f"{path}: byte piece {i} is {piece!r}, expected '<0xNN>'")
                tokens.append(bytes([int(m.group(1), 16)]))
            else:
                tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
        eos = [sp.eos_id()] if sp.eos_id() >= 0 else []
        bos = sp.bos_id() if sp.bos_id() >= 0 else None
        str_path = str(path)

        def loader() -> Encoder:
            proc = _import_sentencepiece().SentencePieceProcessor(model_file=str_path)
            return lambda text: proc.encode(text, out_type=int, add_bos=False, add_eos=False)

        return _build(tokens, special, eos, bos, path.name, loader)

    @classmethod
    def from_tokenizer_json(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads a Hugging Face ``tokenizer.json`` (or a directory holding one).

        EOS ids: the ``eos_token`` of a ``tokenizer_config.json`` and the
        ``eos_token_id`` of a ``generation_config.json`` next to the file, plus
        well-known end names (``<eos>``, ``<end_of_turn>``, ``<|eot_id|>``, ...)
        that are special tokens. Parsing does not need the ``tokenizers``
        package; `encode` does.
        """
        path = _existing(path)
        if path.is_dir():
            path = path / "tokenizer.json"
            if not path.is_file():
                raise VocabularyError(f"{path}: no such file")
        obj = _parse_json(_read_bytes(path), path)
        return _from_tokenizer_json_obj(obj, path, text=None)

    @classmethod
    def from_hf_tokenizer(
        cls,
        tokenizer: Any,
        *,
        name: str = "tokenizers.Tokenizer",
        eos_ids: Iterable[int] | None = None,
    ) -> Vocabulary:
        """A vocabulary from an in-memory ``tokenizers.Tokenizer``.

        Args:
          tokenizer: the tokenizer (it is serialized, not modified).
          name: shown in messages.
          eos_ids: end-of-sequence ids; default: well-known end names among
            its special tokens.
        """
        try:
            text = tokenizer.to_str()
        except AttributeError as e:
            raise TypeError(
                f"expected a tokenizers.Tokenizer, got {type(tokenizer).__name__}"
            ) from e
        obj = json.loads(text)
        return _from_tokenizer_json_obj(obj, Path(name), text=text, eos_ids=eos_ids, name=name)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads the tokenizer in a GGUF model file's metadata (llama.cpp, Ollama, LM Studio).

        SentencePiece (``tokenizer.ggml.model`` ``"llama"``) and byte-level BPE (``"gpt2"``)
        tokenizers; see `automata_compile.tokens._gguf` for the mapping and for how Gemma-3's
        GGUF (262,144 ids) differs from its ``tokenizer.json`` (262,145). `encode` rebuilds the
        SentencePiece model from the GGUF (needs ``protobuf``).
        """
        from automata_compile.tokens._gguf import vocabulary_from_gguf

        return vocabulary_from_gguf(path)

    @classmethod
    def from_tekken(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads a mistral-common tekken JSON file (e.g. ``tekken_240911.json``).

        Ids ``[0, num_special)`` are special (the file's ``special_tokens`` list,
        or mistral-common's default list for older files, padded with
        ``<SPECIAL_i>`` fillers); id ``num_special + r`` is vocab rank ``r``.
        Parsing needs no extra package; `encode` needs ``mistral-common``.
        """
        path = _existing(path)
        return _from_tekken_obj(_parse_json(_read_bytes(path), path), path)


# -- shared helpers ---------------------------------------------------------------------------


def _build(
    tokens: list[TokenBytes],
    special: dict[str, int],
    eos_ids: Iterable[int],
    bos_id: int | None,
    name: str,
    loader: Callable[[], Encoder] | None,
    *,
    config_eos_names: Iterable[str] = (),
    well_known_eos: bool = True,
) -> Vocabulary:
    """Resolves EOS/BOS names, forces EOS/BOS to None, and makes the `Vocabulary`."""
    eos = set(eos_ids)
    # Names from a config or the well-known list count if they name a special token; a config
    # name may also name a (text) token, which then becomes special.
    by_piece = None
    for nm in config_eos_names:
        if nm in special:
            eos.add(special[nm])
        else:
            if by_piece is None:
                by_piece = _text_index(tokens)
            i = by_piece.get(nm.encode("utf-8"))
            if i is not None:
                eos.add(i)
                special[nm] = i
    for nm in _WELL_KNOWN_EOS if well_known_eos else ():
        if nm in special:
            eos.add(special[nm])
    if bos_id is None:
        bos_id = next((special[nm] for nm in _WELL_KNOWN_BOS if nm in special), None)
    for i in [*eos, *([bos_id] if bos_id is not None else [])]:
        if 0 <= i < len(tokens) and tokens[i] is not None:
            special.setdefault(tokens[i].decode("utf-8", "replace"), i)
            tokens[i] = None
    return Vocabulary(tuple(tokens), tuple(eos), special, name, bos_id, loader)


def _text_index(tokens: list[TokenBytes]) -> dict[bytes, int]:
    index: dict[bytes, int] = {}
    for i, t in enumerate(tokens):
        if t is not None:
            index.setdefault(t, i)
    return index


def _greedy_encoder(vocab: Vocabulary) -> Encoder:
    index: dict[bytes, int] = {}
    for i, t in enumerate(vocab.tokens):
        if t:
            index.setdefault(t, i)
    longest = max((len(t) for t in index), default=0)

    def encode(text: str) -> list[int]:
        data = text.encode("utf-8")
        ids, pos = [], 0
        while pos < len(data):
            for n in range(min(longest, len(data) - pos), 0, -1):
                i = index.get(data[pos : pos + n])
                if i is not None:
                    ids.append(i)
                    pos += n
                    break
            else:
                raise VocabularyError(
                    f"vocabulary {vocab.name!r} cannot spell {text!r}: no token starts with"
                    f" {data[pos : pos + 4]!r} (byte offset {pos})"
                )
        return ids

    return encode


def _existing(path: str | os.PathLike) -> Path:
    p = Path(path)
    if not p.exists():
        raise VocabularyError(f"{p}: no such file or directory")
    return p


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise VocabularyError(f"{path}: cannot read ({e})") from e


def _parse_json(data: bytes, path: Path) -> dict:
    try:
        import orjson  # optional: about twice as fast on Gemma's 33 MB tokenizer.json

        loads, errors = orjson.loads, (orjson.JSONDecodeError, UnicodeDecodeError)
    except ImportError:
        loads, errors = json.loads, (json.JSONDecodeError, UnicodeDecodeError)
    try:
        obj = loads(data)
    except errors as e:
        raise VocabularyError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(obj, dict):
        raise VocabularyError(
            f"{path}: expected a JSON object at top level, got {type(obj).__name__}"
        )
    return obj


def _import_sentencepiece():
    try:
        import sentencepiece
    except ImportError as e:
        raise ImportError(
            "Reading SentencePiece .model files needs the sentencepiece package: pip install sentencepiece"
        ) from e
    return sentencepiece


def _import_tokenizers():
    try:
        import tokenizers
    except ImportError as e:
        raise ImportError(
            "Encoding with a tokenizer.json needs the tokenizers package: pip install tokenizers"
        ) from e
    return tokenizers


# -- Hugging Face tokenizer.json --------------------------------------------------------------


def _from_tokenizer_json_obj(
    obj: dict,
    path: Path,
    *,
    text: str | None,
    eos_ids: Iterable[int] | None = None,
    name: str | None = None,
) -> Vocabulary:
    try:
        return _tokenizer_json_vocab(obj, path, text=text, eos_ids=eos_ids, name=name)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        if isinstance(e, VocabularyError):
            raise
        raise VocabularyError(f"{path}: malformed tokenizer.json ({type(e).__name__}: {e})") from e


def _tokenizer_json_vocab(
    obj: dict, path: Path, *, text: str | None, eos_ids: Iterable[int] | None, name: str | None
) -> Vocabulary:
    model = obj["model"]
    kind = model.get("type")
    if kind is None:  # very old files have no "type"; infer it
        kind = (
            "BPE"
            if "merges" in model
            else "Unigram"
            if isinstance(model.get("vocab"), list)
            else None
        )
    if kind in ("BPE", "WordLevel", "WordPiece"):
        pieces_by_id = {int(i): p for p, i in model["vocab"].items()}
    elif kind == "Unigram":
        pieces_by_id = {i: entry[0] for i, entry in enumerate(model["vocab"])}
    else:
        raise VocabularyError(f"{path}: unsupported tokenizer model type {kind!r}")
    added = obj.get("added_tokens") or []
    size = max([-1, *pieces_by_id, *(int(a["id"]) for a in added)]) + 1

    to_bytes = _hf_token_decoder(obj.get("decoder"), path)
    pieces: list[str | None] = [None] * size
    for i, p in pieces_by_id.items():
        pieces[i] = p
    special: dict[str, int] = {}
    special_ids = set()
    for a in added:
        i, content = int(a["id"]), a["content"]
        pieces[i] = content  # added tokens win over the model's piece for the same id
        if a.get("special", False):
            special_ids.add(i)
            special[content] = i
    unk = model.get("unk_token") if kind != "Unigram" else model.get("unk_id")
    if kind == "Unigram" and unk is not None:
        special_ids.add(int(unk))
        special.setdefault(pieces[int(unk)], int(unk))
    elif isinstance(unk, str) and unk in model["vocab"]:
        special_ids.add(int(model["vocab"][unk]))
        special.setdefault(unk, int(model["vocab"][unk]))
    tokens: list[TokenBytes] = [
        None if (p is None or i in special_ids) else to_bytes(p) for i, p in enumerate(pieces)
    ]

    config_eos: list[str] = []
    bos_id = None
    explicit = list(eos_ids) if eos_ids is not None else []
    if text is None:  # loaded from a file: read the configs next to it
        cfg = _sidecar_json(path.parent / "tokenizer_config.json")
        gen = _sidecar_json(path.parent / "generation_config.json")
        tok_name = _token_name(cfg.get("eos_token"))
        gen_eos = gen.get("eos_token_id")
        if eos_ids is None and tok_name:
            config_eos.append(tok_name)
        if eos_ids is None and gen_eos is not None:
            explicit.extend(int(i) for i in (gen_eos if isinstance(gen_eos, list) else [gen_eos]))
        bos_name = _token_name(cfg.get("bos_token"))
        if bos_name is not None:
            bos_id = special.get(bos_name)
    json_text = text
    file_path = str(path)

    def loader() -> Encoder:
        tk = _import_tokenizers()
        tok = (
            tk.Tokenizer.from_str(json_text)
            if json_text is not None
            else tk.Tokenizer.from_file(file_path)
        )
        try:  # special-token names in the text are encoded as plain text
            tok.encode_special_tokens = True
        except AttributeError as e:
            raise ImportError(
                "Vocabulary.encode needs tokenizers>=0.15: pip install -U tokenizers"
            ) from e
        return lambda s: tok.encode(s, add_special_tokens=False).ids

    return _build(
        tokens,
        special,
        explicit,
        bos_id,
        name or path.name,
        loader,
        config_eos_names=config_eos,
        well_known_eos=eos_ids is None,
    )


def _sidecar_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    obj = _parse_json(_read_bytes(path), path)
    return obj


def _token_name(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


@functools.lru_cache(maxsize=1)
def _gpt2_byte_decoder() -> tuple[dict[int, str], re.Pattern]:
    """GPT-2's bytes_to_unicode map, inverted: a translate table char -> latin-1 char of the byte."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    byte_to_char = {b: b for b in printable}
    n = 0
    for b in range(256):
        if b not in byte_to_char:
            byte_to_char[b] = 256 + n
            n += 1
    table = {c: chr(b) for b, c in byte_to_char.items()}
    mapped = "".join(re.escape(chr(c)) for c in sorted(table))
    return table, re.compile(f"[^{mapped}]")


def _hf_token_decoder(decoder: dict | None, path: Path) -> Callable[[str], bytes]:
    """The per-token effect of a tokenizer.json ``decoder``, as a function piece -> bytes.

    Steps that act only on the start or end of the whole decoded text (the
    first token's leading space in ``Metaspace``; ``Strip`` after ``Fuse``) are
    deliberately not applied: a `Vocabulary` is position-independent.
    """
    if decoder is None:
        raise VocabularyError(
            f"{path}: tokenizer.json has no decoder (tokenizers would join tokens with spaces);"
            " only concatenating decoders are supported"
        )
    steps = decoder["decoders"] if decoder.get("type") == "Sequence" else [decoder]
    funcs: list[Callable[[str | bytes], str | bytes]] = []
    fused = False
    for step in steps:
        kind = step.get("type")
        if kind == "ByteLevel":
            table, unmapped = _gpt2_byte_decoder()

            def byte_level(p, table=table, unmapped=unmapped):
                if isinstance(p, bytes) or unmapped.search(p):
                    return p if isinstance(p, bytes) else p.encode("utf-8")
                return p.translate(table).encode("latin-1")

            funcs.append(byte_level)
        elif kind == "Replace":
            pattern = step["pattern"]
            if "String" not in pattern:
                raise VocabularyError(f"{path}: unsupported Replace decoder pattern {pattern!r}")
            old, new = pattern["String"], step["content"]

            def replace(p, old=old, new=new):
                if isinstance(p, bytes):
                    return p.replace(old.encode("utf-8"), new.encode("utf-8"))
                return p.replace(old, new)

            funcs.append(replace)
        elif kind == "ByteFallback":

            def byte_fallback(p):
                if isinstance(p, str) and len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
                    try:
                        return bytes([int(p[3:5], 16)])
                    except ValueError:
                        return p
                return p

            funcs.append(byte_fallback)
        elif kind == "Fuse":
            fused = True  # joining is what concatenation does anyway
        elif kind == "Strip":
            if fused:
                continue  # acts on the whole text's ends only: position-dependent, skipped
            content, start, stop = step["content"], int(step["start"]), int(step["stop"])

            def strip(p, content=content, start=start, stop=stop):
                s = p.decode("utf-8", "surrogateescape") if isinstance(p, bytes) else p
                a = 0
                while a < min(start, len(s)) and s[a] == content:
                    a += 1
                b = len(s)
                while len(s) - b < stop and b > a and s[b - 1] == content:
                    b -= 1
                out = s[a:b]
                return out.encode("utf-8", "surrogateescape") if isinstance(p, bytes) else out

            funcs.append(strip)
        elif kind == "Metaspace":
            old = step.get("replacement", "\u2581")

            def metaspace(p, old=old):
                if isinstance(p, bytes):
                    return p.replace(old.encode("utf-8"), b" ")
                return p.replace(old, " ")

            funcs.append(metaspace)
        else:
            raise VocabularyError(
                f"{path}: unsupported decoder {kind!r} (supported: ByteLevel, Replace, ByteFallback,"
                " Fuse, Strip, Metaspace); its tokens do not decode by concatenation"
            )

    def to_bytes(piece: str) -> bytes:
        p: str | bytes = piece
        for f in funcs:
            p = f(p)
        return p if isinstance(p, bytes) else p.encode("utf-8")

    return to_bytes


# -- mistral-common tekken --------------------------------------------------------------------

# mistral-common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS: the special tokens of tekken files that
# predate the "special_tokens" list (version <= v7), in rank order.
_TEKKEN_DEFAULT_SPECIALS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)


def _from_tekken_obj(obj: dict, path: Path) -> Vocabulary:
    try:
        config = obj["config"]
        num_special = int(config["default_num_special_tokens"])
        vocab_size = int(config["default_vocab_size"])
        entries = obj["vocab"]
        listed = obj.get("special_tokens")
        if listed is None:
            version = str(config.get("version", "v1"))
            if not re.fullmatch(r"v\d+", version) or int(version[1:]) > 7:
                raise VocabularyError(
                    f"{path}: tekken {version} file without a 'special_tokens' list"
                )
            names = list(_TEKKEN_DEFAULT_SPECIALS)
        else:
            ranked = sorted(listed, key=lambda t: int(t["rank"]))
            if [int(t["rank"]) for t in ranked] != list(range(len(ranked))):
                raise VocabularyError(
                    f"{path}: tekken special token ranks are not 0..{len(ranked) - 1}"
                )
            names = [t["token_str"] for t in ranked]
        if len(names) > num_special or len(set(names)) != len(names):
            raise VocabularyError(
                f"{path}: {len(names)} special tokens for {num_special} special ids"
            )
        names += [f"<SPECIAL_{i}>" for i in range(len(names), num_special)]
        inner = vocab_size - num_special
        if not 0 <= inner <= len(entries):
            raise VocabularyError(
                f"{path}: default_vocab_size {vocab_size} needs {inner} vocab entries, file has {len(entries)}"
            )
        tokens: list[TokenBytes] = [None] * num_special
        b64 = base64.b64decode
        for r in range(inner):
            e = entries[r]
            if e["rank"] != r:
                raise VocabularyError(f"{path}: vocab entry {r} has rank {e['rank']}")
            tokens.append(b64(e["token_bytes"], validate=True))
    except (KeyError, TypeError, ValueError, binascii.Error) as e:
        if isinstance(e, VocabularyError):
            raise
        raise VocabularyError(f"{path}: malformed tekken file ({type(e).__name__}: {e})") from e
    special = {nm: i for i, nm in enumerate(names)}
    eos = [special["</s>"]] if "</s>" in special else []
    bos = special.get("<s>")
    str_path = str(path)

    def loader() -> Encoder:
        try:
            from mistral_common.tokens.tokenizers.tekken import Tekkenizer
        except ImportError as e:
            raise ImportError(
                "Encoding with a tekken vocabulary needs mistral-common: pip install mistral-common"
            ) from e
        tok = Tekkenizer.from_file(str_path)
        return lambda text: tok.encode(text, bos=False, eos=False)

    return _build(tokens, special, eos, bos, path.name, loader)
