"""Canonical BPE tokenizations as a pair test over merge trees (host side).

A token sequence is *canonical* when it is the tokenizer's own encoding of its text. For a
BPE model without a splitting pre-tokenizer, canonicity is a property of each token alone
and of adjacent token pairs (Vieira et al. 2025, "Language Models over Canonical BPE"):

* token ``t`` alone is canonical iff BPE on its characters gives ``[t]``; that run also
  gives ``t``'s merge tree;
* the pair ``(a, b)`` is canonical iff no merge fires across the boundary when BPE runs on
  ``text(a) + text(b)``. Only symbols on ``a``'s *right spine* (``a``, its right child, that
  one's right child, ... down to a character) and on ``b``'s *left spine* ever touch the
  boundary. Each spine symbol lives until ``consumed(u)``, the rank of the merge that
  absorbed it into its parent (``INF`` for the token itself). A merge ``(u, v)`` of rank
  ``k`` fires at time ``time(u, v) = max(k, created(u), created(v))`` (HF's BPE applies the
  lowest-ranked pair present: a merge ranked before one of its parts exists fires as soon
  as both do). The pair is non-canonical iff some merge has ``u`` on ``a``'s right spine,
  ``v`` on ``b``'s left spine, ``time < consumed(u)`` and ``time <= consumed(v)`` (ties go
  to the leftmost pair: the cross pair beats ``b``'s own, loses to ``a``'s).

Time is a rank only where a token's own merges apply in non-decreasing rank. Gemma-3's
merge list is not in training order; tokens that apply theirs out of order are marked
non-canonical here (never allowed under ``canonical=True``), a documented restriction
rather than a guess. With the 256 byte-fallback tokens and the tokens BPE never produces,
263 of Gemma-3's 255,731 text tokens (0.1%) are not kept. The test was checked against the
``tokenizers`` library on 60,000 random Gemma-3 pairs (half with a short right token):
0 mismatches (tests/runtime/test_canonical.py keeps a full-vocabulary comparison).

Refused (`CanonicalError`), because the test would not be exact:

* a pre-tokenizer that splits text (Llama-3's regex: whether two tokens' bytes fall in one
  pre-token depends on context beyond the pair; e.g. ``"  " + "x"`` is ``" " + " x"``) or
  ``ignore_merges`` (a whole pre-token in the vocabulary wins over the merges).

Byte-fallback tokens (``<0x..>``) are canonical only as the bytes of a character that has
no token of its own, a condition over up to four tokens, not a pair; they are marked
non-canonical (never allowed under ``canonical=True``).

Special tokens (no text: EOS, ...) are exempt: always allowed, and no pair test after them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from automata_compile._errors import VocabularyError

__all__ = ["INF_RANK", "CanonicalBPE", "CanonicalError", "canonical_bpe", "pair_canonical"]

INF_RANK = np.iinfo(np.int32).max


class CanonicalError(VocabularyError):
    """A tokenizer whose canonical tokenizations are not a pair test (named with why)."""


@dataclasses.dataclass(frozen=True, eq=False)
class CanonicalBPE:
    """The merge trees' spines of a BPE vocabulary, for the pair test (numpy arrays).

    Attributes:
      vocab_size: V.
      ok: bool[V], the token alone is canonical (False for byte-fallback tokens, tokens BPE
        never produces, and ids without a piece).
      exempt: bool[V], special tokens: always allowed, no pair test around them.
      left_sym, left_life: int32[V, DL], each token's left spine (symbol id, consumed rank),
        padded with (-1, 0); entries whose symbol is never a merge's right part are dropped
        (they cannot conflict).
      right_sym, right_life: int32[V, DR], the right spine likewise (symbols never a merge's
        left part dropped).
      merge_left, merge_right: int32[M], merge ``k`` (rank ``k``) joins these symbol ids.
    """

    vocab_size: int
    ok: np.ndarray
    exempt: np.ndarray
    left_sym: np.ndarray
    left_life: np.ndarray
    right_sym: np.ndarray
    right_life: np.ndarray
    merge_left: np.ndarray
    merge_right: np.ndarray
    merge_time: np.ndarray


def _bpe_tree(chars: list[str], ranks: dict[tuple[str, str], int]):
    """HF BPE on one word: lowest rank first, leftmost among ties. Returns the final symbols,
    each as (piece, rank that made it or -1, left subtree, right subtree), and whether the
    applied ranks increased."""
    syms = [(c, -1, None, None) for c in chars]
    last, monotone = -1, True
    while len(syms) > 1:
        best, at = None, -1
        for i in range(len(syms) - 1):
            r = ranks.get((syms[i][0], syms[i + 1][0]))
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            break
        monotone &= best >= last  # the same merge again ("aaaa") is not out of order
        last = best
        a, b = syms[at], syms[at + 1]
        syms[at : at + 2] = [(a[0] + b[0], best, a, b)]
    return syms, monotone


def _spine(node, side: int, ids: dict[str, int]) -> list[tuple[int, int]]:
    out, life = [], INF_RANK
    while node is not None:
        out.append((ids.get(node[0], -1), life))
        life = node[1]
        node = node[side]
    return out


CACHE_FORMAT = "automata_compile/canonical-bpe/v1"  # bump when the arrays' meaning changes
_FIELDS = ("ok", "exempt", "left_sym", "left_life", "right_sym", "right_life", "merge_left",
           "merge_right", "merge_time")  # fmt: skip


def canonical_bpe(
    path: str | os.PathLike,
    vocab_size: int | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
) -> CanonicalBPE:
    """The pair-test arrays of a ``tokenizer.json`` BPE model (see the module docstring).

    Args:
      path: a Hugging Face ``tokenizer.json`` with a BPE model.
      vocab_size: V, the model's logits width (default: the tokenizer's size).
      cache_dir: optional folder for an on-disk cache (the replay takes about a minute
        for Gemma-3): ``{cache_dir}/canonical/{stem}-{sha256[:16]}-{V}.npz`` (no pickle),
        holding `CACHE_FORMAT`, the tokenizer file's full SHA-256 and V; a file that does
        not match is ignored and rewritten. Written to a temporary name and renamed.

    Raises:
      CanonicalError: not a BPE model, a splitting pre-tokenizer, ``ignore_merges``, or a
        kept token whose merges do not apply in increasing rank.
    """
    path = Path(path)
    if cache_dir is None:
        return _build(path, vocab_size)
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    key = "default" if vocab_size is None else str(int(vocab_size))
    file = Path(cache_dir) / "canonical" / f"{path.stem}-{digest[:16]}-{key}.npz"
    meta = np.array([CACHE_FORMAT, digest, key])
    try:
        with np.load(file, allow_pickle=False) as z:
            if z["meta"].tolist() == meta.tolist():
                return CanonicalBPE(vocab_size=int(z["ok"].shape[0]), **{f: z[f] for f in _FIELDS})
    except (OSError, KeyError, ValueError):
        pass  # missing, unreadable or of another format: rebuilt below
    out = _build(path, vocab_size)
    file.parent.mkdir(parents=True, exist_ok=True)
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, meta=meta, **{k: getattr(out, k) for k in _FIELDS})
    os.replace(tmp, file)
    return out


def _build(path: Path, vocab_size: int | None) -> CanonicalBPE:
    obj = json.loads(path.read_text(encoding="utf-8"))
    model = obj.get("model") or {}
    if model.get("type") != "BPE" or "merges" not in model:
        raise CanonicalError(f"{path}: canonical=True needs a BPE model with merges")
    pre = obj.get("pre_tokenizer")
    norm = obj.get("normalizer") or {}
    space_to_meta = (
        norm.get("type") == "Replace"
        and norm.get("pattern") == {"String": " "}
        and norm.get("content") == "\u2581"
    )
    harmless_split = (  # split on " " after " " became "\u2581": never matches
        space_to_meta
        and pre is not None
        and pre.get("type") == "Split"
        and pre.get("pattern") == {"String": " "}
    )
    if pre is not None and not harmless_split:
        raise CanonicalError(
            f"{path}: canonical=True supports BPE without a splitting pre-tokenizer; this one "
            f"has {pre.get('type')!r} (a regex split makes canonicity depend on more than a "
            "token pair)"
        )
    if model.get("ignore_merges"):
        raise CanonicalError(f"{path}: canonical=True does not support ignore_merges=True")
    if model.get("continuing_subword_prefix") or model.get("end_of_word_suffix"):
        raise CanonicalError(f"{path}: canonical=True does not support subword affixes")
    vocab: dict[str, int] = model["vocab"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    ranks = {}
    for r, m in enumerate(merges):
        ranks.setdefault(m, r)
    size = max(vocab.values()) + 1
    special = {int(a["id"]) for a in obj.get("added_tokens") or []}
    v = size if vocab_size is None else int(vocab_size)
    ok = np.zeros(v, bool)
    exempt = np.zeros(v, bool)
    exempt[[i for i in special if i < v]] = True
    exempt[np.arange(v) >= size] = False
    left_parts = {m[0] for m in merges}
    right_parts = {m[1] for m in merges}
    lefts: list[list[tuple[int, int]]] = [[] for _ in range(v)]
    rights: list[list[tuple[int, int]]] = [[] for _ in range(v)]
    byte_fallback = bool(model.get("byte_fallback"))
    created = np.full(size, -1, np.int64)
    for piece, i in vocab.items():
        if i >= v or i in special:
            continue
        if byte_fallback and len(piece) == 6 and piece.startswith("<0x") and piece[-1] == ">":
            continue  # a byte-fallback token: not canonical here (see the docstring)
        if any(c not in vocab for c in piece):
            continue  # a character without a token: HF spells it in bytes
        syms, monotone = _bpe_tree(list(piece), ranks)
        if len(syms) != 1 or syms[0][0] != piece:
            continue
        if not monotone:
            continue  # merges out of rank order: rank is not a time here (see the docstring)
        ok[i] = True
        created[i] = syms[0][1]
        lefts[i] = [(s, c) for s, c in _spine(syms[0], 2, vocab) if s >= 0]
        rights[i] = [(s, c) for s, c in _spine(syms[0], 3, vocab) if s >= 0]
    pieces = {i: p for p, i in vocab.items()}
    for i in range(v):  # drop spine symbols that can never take part in a merge there
        lefts[i] = [(s, c) for s, c in lefts[i] if pieces.get(s) in right_parts]
        rights[i] = [(s, c) for s, c in rights[i] if pieces.get(s) in left_parts]
    left_sym, left_life = _pad(lefts)
    right_sym, right_life = _pad(rights)
    ml = np.array([vocab.get(a, -1) for a, _ in merges], np.int32)
    mr = np.array([vocab.get(b, -1) for _, b in merges], np.int32)
    # a merge ranked before one of its parts exists fires as soon as both exist
    effective = np.maximum(np.arange(len(merges)), np.maximum(created[ml], created[mr]))
    effective = np.where((ml >= 0) & (mr >= 0), effective, INF_RANK).astype(np.int32)
    return CanonicalBPE(
        vocab_size=v,
        ok=ok,
        exempt=exempt,
        left_sym=left_sym,
        left_life=left_life,
        right_sym=right_sym,
        right_life=right_life,
        merge_left=ml,
        merge_right=mr,
        merge_time=effective,
    )


def _pad(spines: list[list[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(1, max(len(s) for s in spines))
    sym = np.full((len(spines), width), -1, np.int32)
    life = np.zeros((len(spines), width), np.int32)
    for i, s in enumerate(spines):
        for j, (a, c) in enumerate(s):
            sym[i, j], life[i, j] = a, c
    return sym, life


def pair_canonical(c: CanonicalBPE, a: int, b: int) -> bool:
    """The pair test on the host for one pair (reference for the device mask): True iff
    ``b`` may follow ``a`` (``b`` alone canonical or exempt, and no merge crosses)."""
    if c.exempt[b]:
        return True
    if not c.ok[b]:
        return False
    if c.exempt[a] or not c.ok[a]:
        return True
    best: dict[int, int] = {}
    rs = {
        int(s): int(life) for s, life in zip(c.right_sym[a], c.right_life[a], strict=True) if s >= 0
    }
    for k, u, w in zip(c.merge_time, c.merge_left, c.merge_right, strict=True):
        if int(u) in rs and k < rs[int(u)]:
            best[int(w)] = min(best.get(int(w), INF_RANK), int(k))
    return not any(
        s >= 0 and int(s) in best and best[int(s)] <= life
        for s, life in zip(c.left_sym[b], c.left_life[b], strict=True)
    )
