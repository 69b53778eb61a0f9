"""`Vocabulary`: token id -> the exact bytes that token contributes to the decoded text.

The compiler works on bytes: it walks every token's bytes through a byte DFA.
This module holds the type; each tokenizer format has its own reader, and the
constructors here dispatch to them. Each turns a file into one table,
``tokens[id] -> bytes | None``:

* SentencePiece ``.model`` files (`_vocab_sentencepiece`): ``▁`` (U+2581) is a
  space, ``<0xNN>`` byte-fallback pieces are that one byte, control/unknown/unused
  pieces are None.
* Hugging Face ``tokenizer.json`` (`_vocab_hf`): the per-token part of the file's
  decoder is replayed (``ByteLevel`` inverts GPT-2's bytes-to-unicode map, so a
  token may be half of a UTF-8 character; ``Replace``, ``ByteFallback``,
  ``Metaspace``, ...). Added tokens marked ``special`` are None; other added
  tokens decode like any token.
* mistral-common tekken JSON (`_vocab_tekken`): base64 ``token_bytes``, offset by
  the number of special tokens, laid out exactly as mistral-common's
  ``Tekkenizer`` does.
* GGUF model files (`_gguf`): the tokenizer in the file's metadata.

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

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from automata_compile._errors import VocabularyError
from automata_compile.tokens._gguf import gguf_parts
from automata_compile.tokens._vocab_files import (
    Encoder,
    TokenBytes,
    VocabParts,
    existing,
    parse_json,
    read_bytes,
)
from automata_compile.tokens._vocab_hf import tokenizer_json_parts
from automata_compile.tokens._vocab_sentencepiece import sentencepiece_parts
from automata_compile.tokens._vocab_tekken import tekken_parts

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

_FINGERPRINT_LABEL = b"automata_jax/vocabulary/v1\n"


# `Vocabulary.encode_many` batches from this many texts on.
MIN_BATCH = 32


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

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """`encode` of each of ``texts``; one call into the tokenizer where it encodes a
        batch (``tokenizers``) and there are at least `MIN_BATCH` texts, else one `encode`
        per text. Raises as `encode`."""
        batch = getattr(self._encoder, "batch", None)
        if batch is None or len(texts) < MIN_BATCH:  # a batch's threads cost milliseconds
            return [self.encode(t) for t in texts]
        return [list(ids) for ids in batch(list(texts))]

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
        path = existing(path)
        if path.is_dir():
            for candidate in ("tokenizer.json", "tokenizer.model"):
                if (path / candidate).is_file():
                    return cls.from_file(path / candidate)
            raise VocabularyError(f"{path}: directory has no tokenizer.json or tokenizer.model")
        if ".model" in path.suffixes:
            return cls.from_sentencepiece(path)
        data = read_bytes(path)
        if data[:4] == b"GGUF":
            return cls.from_gguf(path)
        if data.lstrip()[:1] not in (b"{", b"["):  # not JSON: SentencePiece is protobuf
            return cls.from_sentencepiece(path)
        obj = parse_json(data, path)
        if "model" in obj:
            return _build(tokenizer_json_parts(obj, path, text=None))
        if isinstance(obj.get("vocab"), list) and "config" in obj:
            return _build(tekken_parts(obj, path))
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
        return _build(sentencepiece_parts(existing(path)))

    @classmethod
    def from_tokenizer_json(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads a Hugging Face ``tokenizer.json`` (or a directory holding one).

        EOS ids: the ``eos_token`` of a ``tokenizer_config.json`` and the
        ``eos_token_id`` of a ``generation_config.json`` next to the file, plus
        well-known end names (``<eos>``, ``<end_of_turn>``, ``<|eot_id|>``, ...)
        that are special tokens. Parsing does not need the ``tokenizers``
        package; `encode` does.
        """
        path = existing(path)
        if path.is_dir():
            path = path / "tokenizer.json"
            if not path.is_file():
                raise VocabularyError(f"{path}: no such file")
        obj = parse_json(read_bytes(path), path)
        return _build(tokenizer_json_parts(obj, path, text=None))

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
        return _build(tokenizer_json_parts(obj, Path(name), text=text, eos_ids=eos_ids, name=name))

    @classmethod
    def from_gguf(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads the tokenizer in a GGUF model file's metadata (llama.cpp, Ollama, LM Studio).

        SentencePiece (``tokenizer.ggml.model`` ``"llama"``) and byte-level BPE (``"gpt2"``)
        tokenizers; see `automata_compile.tokens._gguf` for the mapping and for how Gemma-3's
        GGUF (262,144 ids) differs from its ``tokenizer.json`` (262,145). `encode` rebuilds the
        SentencePiece model from the GGUF (needs ``protobuf``).
        """
        return _build(gguf_parts(path))

    @classmethod
    def from_tekken(cls, path: str | os.PathLike) -> Vocabulary:
        """Loads a mistral-common tekken JSON file (e.g. ``tekken_240911.json``).

        Ids ``[0, num_special)`` are special (the file's ``special_tokens`` list,
        or mistral-common's default list for older files, padded with
        ``<SPECIAL_i>`` fillers); id ``num_special + r`` is vocab rank ``r``.
        Parsing needs no extra package; `encode` needs ``mistral-common``.
        """
        path = existing(path)
        return _build(tekken_parts(parse_json(read_bytes(path), path), path))


# -- shared helpers ---------------------------------------------------------------------------


def _build(parts: VocabParts) -> Vocabulary:
    """Resolves EOS/BOS names, forces EOS/BOS to None, and makes the `Vocabulary`."""
    tokens, special, eos_ids, bos_id, name, loader, config_eos_names, well_known_eos = parts
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
