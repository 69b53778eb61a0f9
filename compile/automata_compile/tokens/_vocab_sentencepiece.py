"""SentencePiece ``.model`` files as vocabulary parts (read by `Vocabulary.from_sentencepiece`).

``▁`` (U+2581) is a space in every piece, including the first: the dummy prefix SentencePiece
adds when encoding is kept, not stripped. ``<0xNN>`` byte-fallback pieces are that one byte;
control, unknown and unused pieces are None.
"""

from __future__ import annotations

import re
from pathlib import Path

from automata_compile._errors import VocabularyError
from automata_compile.tokens._vocab_files import Encoder, TokenBytes, VocabParts

__all__ = ["BYTE_PIECE", "import_sentencepiece", "sentencepiece_parts"]

BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def sentencepiece_parts(path: Path) -> VocabParts:
    """The tokens, special names, EOS and BOS of the SentencePiece model at ``path`` (exists).

    Raises:
      ImportError: ``sentencepiece`` is not installed.
      VocabularyError: not a readable model, or a byte piece not spelled ``<0xNN>``.
    """
    spm = import_sentencepiece()
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
            m = BYTE_PIECE.fullmatch(piece)
            if m is None:
                raise VocabularyError(f"{path}: byte piece {i} is {piece!r}, expected '<0xNN>'")
            tokens.append(bytes([int(m.group(1), 16)]))
        else:
            tokens.append(piece.replace("\u2581", " ").encode("utf-8"))
    eos = [sp.eos_id()] if sp.eos_id() >= 0 else []
    bos = sp.bos_id() if sp.bos_id() >= 0 else None
    str_path = str(path)

    def loader() -> Encoder:
        proc = import_sentencepiece().SentencePieceProcessor(model_file=str_path)
        return lambda text: proc.encode(text, out_type=int, add_bos=False, add_eos=False)

    return VocabParts(tokens, special, eos, bos, path.name, loader)


def import_sentencepiece():
    """The ``sentencepiece`` module, or an ImportError that says what to install."""
    try:
        import sentencepiece
    except ImportError as e:
        raise ImportError(
            "Reading SentencePiece .model files needs the sentencepiece package: pip install sentencepiece"
        ) from e
    return sentencepiece
