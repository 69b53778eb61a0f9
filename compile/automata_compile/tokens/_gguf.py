"""GGUF files: the header reader, and the tokenizer held in a GGUF's metadata as a `Vocabulary`.

GGUF (llama.cpp's format, https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) is a
header of typed key/value metadata and tensor descriptions followed by the tensor data. This
module reads the header only: `read_gguf_header` parses it with NumPy (no ``gguf`` package, and
about 0.3 s for a 262k-token vocabulary where ``gguf.GGUFReader`` takes 20 s); the tensor data is
left to the runtime (`automata_jax.models.load_gguf` dequantizes it with the ``gguf`` package).

The tokenizer (``tokenizer.ggml.*`` keys) becomes a `Vocabulary` as follows:

* ``tokenizer.ggml.model == "llama"`` (SentencePiece: Gemma, Llama-2, Mistral): the pieces are
  SentencePiece pieces, so ``▁`` is a space, byte tokens (type 6) ``<0xNN>`` are that byte,
  control (3), unknown (2) and unused (5) tokens are None, normal (1) and user-defined (4)
  tokens are their text. This is exactly what `Vocabulary.from_sentencepiece` does with the
  ``tokenizer.model`` the GGUF was converted from.
* ``tokenizer.ggml.model == "gpt2"`` (byte-level BPE: Llama-3, Qwen): pieces spell bytes through
  GPT-2's bytes-to-unicode map, as in a ``tokenizer.json`` with a ``ByteLevel`` decoder.

EOS ids: ``tokenizer.ggml.eos_token_id``, ``eot_token_id``, ``eom_token_id``, plus the
well-known end names that are special tokens (as for the other formats). BOS:
``tokenizer.ggml.bos_token_id``.

Gemma-3 (``gemma-3-270m-q4_k_m.gguf`` against Google's ``tokenizer.json``): the GGUF lists
262,144 tokens, the ``tokenizer.json`` 262,145 ids. The extra id 262,144 is
``<image_soft_token>``, an added special token of the multimodal models with no row in the
270M/1B embedding (its logits are 262,144 wide); both vocabularies give it no text. Ids below
262,144 spell the same bytes but for two classes: ``<mask>`` and the 6,242 ``<unusedN>`` ids
are control tokens in the GGUF (as in the SentencePiece model), never emitted, while the
``tokenizer.json`` lists them as non-special added tokens that spell their names; and
``<start_of_image>`` / ``<end_of_image>`` are user-defined text in the GGUF but special in the
``tokenizer.json``. EOS (``<eos>``, ``<end_of_turn>``), BOS, PAD, UNK and the turn markers
agree. Tables compiled for either vocabulary work with the model: the runtime trims a DFA's
columns to the logits width when the trimmed ids can never be emitted
(`ConstraintTables.from_dfas`), and refuses otherwise; the two tables differ only in whether
those names may be spelled by their single token.

`Vocabulary.encode` of a GGUF vocabulary rebuilds the SentencePiece model from the pieces,
scores and types (needs ``sentencepiece`` and ``protobuf``); on Gemma-3 it encodes as the
``tokenizer.json`` does (tested on 300 random texts), but for the two image markers above.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from automata_compile._errors import GGUFError
from automata_compile.tokens._vocab_files import VocabParts
from automata_compile.tokens._vocab_hf import gpt2_byte_decoder
from automata_compile.tokens._vocab_sentencepiece import BYTE_PIECE, import_sentencepiece

__all__ = ["GGUFHeader", "GGUFTensorInfo", "gguf_parts", "read_gguf_header"]

_MAGIC = b"GGUF"
_DEFAULT_ALIGNMENT = 32

# GGUF metadata value types -> (numpy dtype) for the fixed-width ones.
_SCALAR = {
    0: np.dtype("<u1"),
    1: np.dtype("<i1"),
    2: np.dtype("<u2"),
    3: np.dtype("<i2"),
    4: np.dtype("<u4"),
    5: np.dtype("<i4"),
    6: np.dtype("<f4"),
    7: np.dtype("<u1"),  # bool
    10: np.dtype("<u8"),
    11: np.dtype("<i8"),
    12: np.dtype("<f8"),
}
_STRING, _ARRAY, _BOOL = 8, 9, 7

# tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6


@dataclasses.dataclass(frozen=True)
class GGUFTensorInfo:
    """One tensor of a GGUF file, as its header describes it.

    Attributes:
      name: the GGUF tensor name (``blk.0.attn_q.weight``).
      shape: ggml order, fastest dimension first (``ne0, ne1, ...``); a matrix stored row-major
        as ``[rows, cols]`` has ``shape == (cols, rows)``.
      ggml_type: the ``GGMLQuantizationType`` value (0 F32, 1 F16, 8 Q8_0, 12 Q4_K, ...).
      offset: absolute byte offset of its data in the file.
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int


@dataclasses.dataclass(frozen=True, eq=False)
class GGUFHeader:
    """The parsed header of a GGUF file.

    Attributes:
      path: the file.
      version: GGUF version (2 or 3).
      metadata: key -> value; strings are ``str``, arrays of strings ``list[str]``, numeric
        arrays 1-D NumPy arrays, scalars Python numbers / bools.
      tensors: the tensor descriptions in file order.
      data_offset: where the tensor data section starts.
    """

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: tuple[GGUFTensorInfo, ...]
    data_offset: int

    def get(self, key: str, expected: type | tuple[type, ...] | None = None) -> Any:
        """The value of ``key``; GGUFError naming the file and key when absent or mistyped."""
        if key not in self.metadata:
            raise GGUFError(f"{self.path}: missing metadata key {key!r}")
        value = self.metadata[key]
        if expected is not None and not isinstance(value, expected):
            raise GGUFError(
                f"{self.path}: metadata key {key!r} is {type(value).__name__} {value!r:.80}, "
                f"expected {expected}"
            )
        return value


class _Cursor:
    def __init__(self, data: memoryview, path: Path):
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int, what: str) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise GGUFError(
                f"{self.path}: truncated header: {what} needs {n} bytes at offset {self.pos}, "
                f"the file has {len(self.data)}"
            )
        out = self.data[self.pos : end]
        self.pos = end
        return out

    def u32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "little")

    def u64(self, what: str) -> int:
        return int.from_bytes(self.take(8, what), "little")

    def string(self, what: str) -> str:
        n = self.u64(what)
        raw = self.take(n, what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError as e:
            raise GGUFError(
                f"{self.path}: {what} at offset {self.pos - n} is not UTF-8: {e}"
            ) from e

    def value(self, vtype: int, key: str) -> Any:
        if vtype == _STRING:
            return self.string(f"value of {key!r}")
        if vtype == _ARRAY:
            etype = self.u32(f"array type of {key!r}")
            count = self.u64(f"array length of {key!r}")
            if etype == _STRING:
                return [self.string(f"element {i} of {key!r}") for i in range(count)]
            if etype == _ARRAY:
                return [self.value(_ARRAY, f"{key}[{i}]") for i in range(count)]
            dtype = self._dtype(etype, key)
            arr = np.frombuffer(self.take(count * dtype.itemsize, f"array {key!r}"), dtype)
            return arr.astype(bool) if etype == _BOOL else arr.copy()
        dtype = self._dtype(vtype, key)
        scalar = np.frombuffer(self.take(dtype.itemsize, f"value of {key!r}"), dtype)[0]
        return bool(scalar) if vtype == _BOOL else scalar.item()

    def _dtype(self, vtype: int, key: str) -> np.dtype:
        if vtype not in _SCALAR:
            raise GGUFError(f"{self.path}: metadata key {key!r} has unknown value type {vtype}")
        return _SCALAR[vtype]


def read_gguf_header(path: str | os.PathLike) -> GGUFHeader:
    """Reads the metadata and tensor descriptions of a GGUF file (not the tensor data).

    Raises:
      GGUFError: no such file, not a GGUF file, a big-endian or version-1 GGUF, a truncated or
        malformed header (the message names the file, the key and the offset).
    """
    path = Path(path)
    if not path.is_file():
        raise GGUFError(f"{path}: no such GGUF file")
    with open(path, "rb") as f:
        head = f.read(8)
        if head[:4] != _MAGIC:
            raise GGUFError(f"{path}: not a GGUF file (starts with {head[:4]!r}, expected b'GGUF')")
        version = int.from_bytes(head[4:8], "little")
        if version not in (2, 3):
            if int.from_bytes(head[4:8], "big") in (2, 3):
                raise GGUFError(f"{path}: a big-endian GGUF file; only little-endian is supported")
            raise GGUFError(f"{path}: GGUF version {version}; only versions 2 and 3 are supported")
    data = np.memmap(path, dtype=np.uint8, mode="r")
    cur = _Cursor(memoryview(data), path)
    cur.pos = 8
    n_tensors = cur.u64("tensor count")
    n_kv = cur.u64("metadata count")
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string("metadata key")
        vtype = cur.u32(f"value type of {key!r}")
        metadata[key] = cur.value(vtype, key)
    raw = []
    for _ in range(n_tensors):
        name = cur.string("tensor name")
        ndim = cur.u32(f"rank of tensor {name!r}")
        shape = tuple(cur.u64(f"shape of tensor {name!r}") for _ in range(ndim))
        ggml_type = cur.u32(f"type of tensor {name!r}")
        offset = cur.u64(f"offset of tensor {name!r}")
        raw.append((name, shape, ggml_type, offset))
    alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment < 1:
        raise GGUFError(f"{path}: metadata key 'general.alignment' is {alignment!r}")
    data_offset = -(-cur.pos // alignment) * alignment
    tensors = tuple(GGUFTensorInfo(n, s, t, data_offset + o) for n, s, t, o in raw)
    return GGUFHeader(path, version, metadata, tensors, data_offset)


def gguf_parts(path: str | os.PathLike) -> VocabParts:
    """The tokenizer stored in a GGUF file's metadata, as `Vocabulary` parts (see the module doc).

    Raises:
      GGUFError: not a GGUF file, no tokenizer in it, an unsupported ``tokenizer.ggml.model``,
        or token lists that disagree (the message names the file and the key).
    """
    header = read_gguf_header(path)
    path = header.path
    model = header.get("tokenizer.ggml.model", str)
    pieces = header.get("tokenizer.ggml.tokens", list)
    n = len(pieces)
    types = header.metadata.get("tokenizer.ggml.token_type")
    if types is None:
        types = np.full(n, _NORMAL, np.int32)
    if len(types) != n:
        raise GGUFError(
            f"{path}: 'tokenizer.ggml.token_type' has {len(types)} entries, "
            f"'tokenizer.ggml.tokens' {n}"
        )
    types = np.asarray(types).tolist()
    tokens: list[bytes | None] = []
    special: dict[str, int] = {}
    if model == "llama":
        for i, (piece, kind) in enumerate(zip(pieces, types, strict=True)):
            if kind in (_CONTROL, _UNKNOWN, _UNUSED):
                tokens.append(None)
                special[piece] = i
            elif kind == _BYTE:
                m = BYTE_PIECE.fullmatch(piece)
                if m is None:
                    raise GGUFError(
                        f"{path}: 'tokenizer.ggml.tokens'[{i}] is the byte token {piece!r}, "
                        "expected '<0xNN>'"
                    )
                tokens.append(bytes([int(m.group(1), 16)]))
            else:
                tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
    elif model == "gpt2":
        table, unmapped = gpt2_byte_decoder()
        for i, (piece, kind) in enumerate(zip(pieces, types, strict=True)):
            if kind in (_CONTROL, _UNKNOWN, _UNUSED):
                tokens.append(None)
                special[piece] = i
            elif kind == _USER_DEFINED:  # added tokens are stored as plain text
                tokens.append(piece.encode("utf-8"))
            else:
                bad = unmapped.search(piece)
                if bad is not None:
                    raise GGUFError(
                        f"{path}: 'tokenizer.ggml.tokens'[{i}] = {piece!r} has "
                        f"{bad.group()!r}, not a GPT-2 byte character"
                    )
                tokens.append(piece.translate(table).encode("latin-1"))
    else:
        raise GGUFError(
            f"{path}: metadata key 'tokenizer.ggml.model' is {model!r}; supported: 'llama' "
            "(SentencePiece) and 'gpt2' (byte-level BPE)"
        )
    eos = []
    for key in ("eos_token_id", "eot_token_id", "eom_token_id"):
        value = header.metadata.get(f"tokenizer.ggml.{key}")
        if value is not None:
            if not 0 <= int(value) < n:
                raise GGUFError(f"{path}: 'tokenizer.ggml.{key}' = {value} is not in [0, {n})")
            eos.append(int(value))
    bos = header.metadata.get("tokenizer.ggml.bos_token_id")
    if bos is not None and not 0 <= int(bos) < n:
        raise GGUFError(f"{path}: 'tokenizer.ggml.bos_token_id' = {bos} is not in [0, {n})")
    loader = None
    if model == "llama":
        scores = header.metadata.get("tokenizer.ggml.scores")
        add_prefix = bool(header.metadata.get("tokenizer.ggml.add_space_prefix", True))
        unk = header.metadata.get("tokenizer.ggml.unknown_token_id")
        str_path = str(path)

        def loader():
            return _sentencepiece_encoder(pieces, scores, types, add_prefix, str_path, unk)

    return VocabParts(tokens, special, eos, None if bos is None else int(bos), path.name, loader)


def _sentencepiece_encoder(pieces, scores, types, add_prefix: bool, where: str, unk=None):
    """A SentencePiece BPE model rebuilt from the GGUF's pieces, scores and types."""
    spm = import_sentencepiece()
    proto = sentencepiece_proto(pieces, scores, types, add_prefix, where, unk)
    proc = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())
    return lambda text: proc.encode(text, out_type=int, add_bos=False, add_eos=False)


def sentencepiece_proto(pieces, scores, types, add_prefix: bool, where: str, unk=None):
    """The ``ModelProto`` of `_sentencepiece_encoder`.

    SentencePiece needs one piece of type UNKNOWN (0.2.2 refuses a model without one: "unk is
    not defined"; 0.2.3 accepts it). llama.cpp's converter writes Gemma-3's ``<unk>`` as a
    CONTROL token, so where no piece is UNKNOWN, the piece at ``tokenizer.ggml.unknown_token_id``
    (``unk``) is made so. Encoding is unchanged: neither kind is ever matched in text, and
    byte fallback spells what no piece covers.
    """
    try:
        from sentencepiece import sentencepiece_model_pb2 as pb
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"encoding with the tokenizer of {where} needs 'protobuf': pip install protobuf"
        ) from e
    if scores is None:
        raise GGUFError(f"{where}: no 'tokenizer.ggml.scores'; cannot rebuild its tokenizer")
    types = list(types)
    if _UNKNOWN not in types:
        if unk is None or not 0 <= int(unk) < len(pieces):
            raise GGUFError(
                f"{where}: no token of type UNKNOWN and 'tokenizer.ggml.unknown_token_id' is "
                f"{unk!r}; SentencePiece needs an unknown piece to rebuild the tokenizer"
            )
        types[int(unk)] = _UNKNOWN
    proto = pb.ModelProto()
    proto.trainer_spec.model_type = pb.TrainerSpec.BPE
    proto.trainer_spec.byte_fallback = True
    proto.trainer_spec.vocab_size = len(pieces)
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = add_prefix
    proto.normalizer_spec.remove_extra_whitespaces = False
    proto.normalizer_spec.escape_whitespaces = True
    kinds = {
        _NORMAL: pb.ModelProto.SentencePiece.NORMAL,
        _UNKNOWN: pb.ModelProto.SentencePiece.UNKNOWN,
        _CONTROL: pb.ModelProto.SentencePiece.CONTROL,
        _USER_DEFINED: pb.ModelProto.SentencePiece.USER_DEFINED,
        _UNUSED: pb.ModelProto.SentencePiece.UNUSED,
        _BYTE: pb.ModelProto.SentencePiece.BYTE,
    }
    for piece, score, kind in zip(pieces, np.asarray(scores).tolist(), types, strict=True):
        if kind == _USER_DEFINED:  # stored with raw spaces; SentencePiece matches escaped text
            piece = piece.replace(" ", "\u2581")
        proto.pieces.add(piece=piece, score=score, type=kinds.get(kind, kinds[_NORMAL]))
    return proto
