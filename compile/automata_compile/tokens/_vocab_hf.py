"""Hugging Face ``tokenizer.json`` as vocabulary parts (read by `Vocabulary.from_tokenizer_json`).

The per-token part of the file's decoder is replayed (``ByteLevel`` inverts GPT-2's
bytes-to-unicode map, so a token may be half of a UTF-8 character; ``Replace``,
``ByteFallback``, ``Metaspace``, ...). Added tokens marked ``special`` are None; other added
tokens decode like any token. Steps that act only on the ends of the whole decoded text (the
first token's leading space in ``Metaspace``; ``Strip`` after ``Fuse``) are not applied: a
`Vocabulary` is position-independent.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from automata_compile._errors import VocabularyError
from automata_compile.tokens._vocab_files import (
    Encoder,
    TokenBytes,
    VocabParts,
    parse_json,
    read_bytes,
)

__all__ = ["gpt2_byte_decoder", "tokenizer_json_parts"]


def tokenizer_json_parts(
    obj: dict,
    path: Path,
    *,
    text: str | None,
    eos_ids: Iterable[int] | None = None,
    name: str | None = None,
) -> VocabParts:
    """The parts of a parsed ``tokenizer.json`` (``text``: its JSON when not read from ``path``).

    Raises:
      VocabularyError: malformed file, unsupported model type or decoder.
    """
    try:
        return _tokenizer_json_vocab(obj, path, text=text, eos_ids=eos_ids, name=name)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        if isinstance(e, VocabularyError):
            raise
        raise VocabularyError(f"{path}: malformed tokenizer.json ({type(e).__name__}: {e})") from e


def _tokenizer_json_vocab(
    obj: dict, path: Path, *, text: str | None, eos_ids: Iterable[int] | None, name: str | None
) -> VocabParts:
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

        def encode(s: str) -> list[int]:
            return tok.encode(s, add_special_tokens=False).ids

        def batch(texts: list[str]) -> list[list[int]]:  # `Vocabulary.encode_many`
            return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]

        encode.batch = batch
        return encode

    return VocabParts(
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
    obj = parse_json(read_bytes(path), path)
    return obj


def _token_name(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


@functools.lru_cache(maxsize=1)
def gpt2_byte_decoder() -> tuple[dict[int, str], re.Pattern]:
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
            table, unmapped = gpt2_byte_decoder()

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


def _import_tokenizers():
    try:
        import tokenizers
    except ImportError as e:
        raise ImportError(
            "Encoding with a tokenizer.json needs the tokenizers package: pip install tokenizers"
        ) from e
    return tokenizers
