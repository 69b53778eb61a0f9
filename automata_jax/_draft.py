"""Drafts for speculative decoding: an n-gram lookup in each row's own prompt and output.

Prompt lookup (Saxena, 2023): the last ``n`` tokens a row has written are searched for
in everything it has seen (its prompt, then its output so far); at the most recent
earlier occurrence, the ``K`` tokens that followed it are the draft. Extraction copies
names, numbers and dates from the document, so those tokens are often drafted right.
Longer n-grams are tried first (a longer match predicts better); a row with no match
drafts nothing.

**Alternate spellings** (``keys``). A JSON string spells a document's word without the
space before it: the document's `` Ada Lovelace`` is ``▁Ada ▁Lovelace``, the value
``"Ada Lovelace"`` is ``" Ada ▁Lovelace``, so the output's ``Ada`` never matches the
prompt's ``▁Ada`` and the rest of the value is not drafted. `draft_keys` gives each
prompt slot a second id, the same token without its leading space (built on the host
from the vocabulary's bytes, at prompt-preparation time); a slot matches an n-gram token
that equals either its id or its key, and the draft is the slots' own ids that follow
(`` Lovelace``), as the value continues.

**Where a copy stops** (`STOP`). A copied span ends where the document starts a new clause:
`bare_twins` marks tokens whose first byte after leading spaces is punctuation or a line
break (`CLAUSE_START`: ``, . ; : ! ? ( ) [ ] { } "``, ``\n``, ``\r``) as *stops* (and, with
``lowercase_stops``, tokens that start a lowercase ASCII word after a space), and
`prompt_lookup` returns the first draft position copied from a stop slot. A stop's key is
`STOP` (-2) without a twin, ``-3 - twin`` with one (see `stop_key`). Speculative decoding ends the draft there with the constraint's *exit* token and the
forced run after it (`automata_jax._speculative`), so a draft can close a value.

Everything is a fixed-shape array operation on the device (``n`` shifted compares of
``[B, L]`` per n-gram size, one max, one gather), with no host round trip.
"""

# ruff: noqa: F722 (jaxtyping shape strings)

from __future__ import annotations

from collections.abc import Sequence

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int

from automata_jax._errors import RuntimeShapeError

_NOT_IN_A_STRING = frozenset(b'"\\') | frozenset(range(0x20))
CLAUSE_START = frozenset(b',.;:!?()[]{}"\n\r')
STOP = -2  # a draft key: a copy stops before this slot (its token starts a new clause)


def stop_key(twin):
    """The key of a stop slot whose token has bare twin ``twin`` (-1: none): `STOP` or
    ``-3 - twin`` (every key ``<= STOP`` is a stop; `alternate` recovers the twin)."""
    return np.where(np.asarray(twin) >= 0, -3 - np.asarray(twin), STOP).astype(np.int32)


def alternate(keys):
    """The alternate id a key spells (-1 and `STOP`: none, never equal to a token id)."""
    return jnp.where(keys <= -3, -3 - keys, keys)


def bare_twins(tokens: Sequence[bytes | None], *, lowercase_stops: bool = False) -> np.ndarray:
    """Each token's twin without its leading space, as a JSON string spells it (host side).

    Args:
      tokens: ``tokens[id]``, the exact bytes of each token id (None: no text), as
        `automata_compile.Vocabulary.tokens`.
      lowercase_stops: also stop a copy before a token that starts a lowercase ASCII word
        after a space (`` who``, `` turned``): where a capitalized name or a one-word value
        ends in running text (Latin-script prose; a guess, verified like any draft).

    Returns:
      int32[V]: ``twins[id]`` is the id whose bytes are ``tokens[id]`` without its leading
      space, where such a token exists and its bytes need no escape inside a JSON string
      (no quote, backslash or control byte), else -1; for a token that starts a new clause
      (its first byte after leading spaces is in `CLAUSE_START`), ``stop_key(twin)``.

    Example:
      >>> bare_twins([b"Ada", b" Ada", b" Lovelace", None, b' "', b",", b"\\n"]).tolist()
      [-1, 0, -1, -1, -2, -2, -2]
      >>> bare_twins([b"who", b" who", b" Ada"], lowercase_stops=True).tolist()
      [-1, -3, -1]
    """
    ids = {t: i for i, t in enumerate(tokens) if t is not None}
    twins = np.full(len(tokens), -1, np.int32)
    for i, t in enumerate(tokens):
        if t is not None and len(t) > 1 and t[:1] == b" ":
            bare = t[1:]
            if bare in ids and not _NOT_IN_A_STRING.intersection(bare):
                twins[i] = ids[bare]
        lead = None if t is None else t.lstrip(b" ")[:1]
        stop = bool(lead) and lead[0] in CLAUSE_START
        if lowercase_stops and t is not None and len(t) > 1 and t[:1] == b" ":
            stop = stop or 0x61 <= t[1] <= 0x7A
        if stop:
            twins[i] = stop_key(twins[i])
    return twins


def bare_spellings(tokens: Sequence[bytes | None], encode, ids, *, pieces: int = 3) -> np.ndarray:
    """Each token's bare word as the tokenizer spells it in two or more tokens (host side).

    A document's `` Bergen`` is one token, but the JSON string spells ``Bergen`` ``Ber``
    ``gen`` (no bare twin): after the output's ``Ber`` the lookup finds nothing. A slot
    whose token has such a *bare spelling* drafts the spelling's rest (``gen``) and then
    the document's tokens after the slot (see `prompt_lookup`'s ``spellings``).

    Args:
      tokens: ``tokens[id]``, the exact bytes of each token id (None: no text).
      encode: the tokenizer, ``str -> list[int]`` (`automata_compile.Vocabulary.encode`).
      ids: the token ids to spell (e.g. ``np.unique(prompt_tokens)``; the rest get -1).
      pieces: the most tokens a spelling may have.

    Returns:
      int32[V, pieces]: ``spellings[id]`` is ``encode(bare)`` padded with -1 where ``tokens[id]``
      starts with a space, its bare bytes are UTF-8 that needs no escape inside a JSON string
      and starts no new clause, and the encoding has 2 to ``pieces`` tokens that spell it back;
      else all -1.

    Example:
      >>> toks = [b"Ber", b"gen", b" Bergen", b" Ada", b"Ada"]
      >>> enc = {"Bergen": [0, 1], "Ada": [4]}.__getitem__
      >>> bare_spellings(toks, enc, [2, 3], pieces=2).tolist()
      [[-1, -1], [-1, -1], [0, 1], [-1, -1], [-1, -1]]
    """
    out = np.full((len(tokens), pieces), -1, np.int32)
    for i in np.asarray(ids, np.int64).ravel().tolist():
        t = tokens[i] if 0 <= i < len(tokens) else None
        if t is None or len(t) < 2 or t[:1] != b" ":
            continue
        bare = t[1:]
        if _NOT_IN_A_STRING.intersection(bare) or bare[0] in CLAUSE_START or bare[:1] == b" ":
            continue
        try:
            text = bare.decode("utf-8")
        except UnicodeDecodeError:
            continue
        spelled = list(encode(text))
        if 2 <= len(spelled) <= pieces and b"".join(tokens[j] or b"\0" for j in spelled) == bare:
            out[i, : len(spelled)] = spelled
    return out


def draft_keys(prompt_tokens, twins: np.ndarray, spellings: np.ndarray | None = None) -> np.ndarray:
    """`generate`'s ``draft_keys`` for these prompts: each slot's bare twin (-1: none).

    Args:
      prompt_tokens: int[B, T], the (padded) prompts.
      twins: int32[V], from `bare_twins`.
      spellings: optional int32[V, R], from `bare_spellings`.

    Returns:
      int32[B, T] (``twins`` of each slot's token), or with ``spellings`` int32[B, T, 1 + R]:
      the twin, then the slot's bare spelling.

    Raises:
      RuntimeShapeError: a prompt token is outside ``[0, V)`` or the shapes are wrong.
    """
    tokens = np.asarray(prompt_tokens)
    twins = np.asarray(twins)
    if tokens.ndim != 2 or twins.ndim != 1:
        raise RuntimeShapeError(
            f"draft_keys: expected prompt_tokens [B, T] and twins [V], got shapes "
            f"{list(tokens.shape)} and {list(twins.shape)}"
        )
    if tokens.size and (tokens.min() < 0 or tokens.max() >= twins.shape[0]):
        raise RuntimeShapeError(
            f"draft_keys: prompt token ids must lie in [0, {twins.shape[0]}), got "
            f"[{tokens.min()}, {tokens.max()}]"
        )
    keys = twins[tokens].astype(np.int32)
    if spellings is None:
        return keys
    spellings = np.asarray(spellings)
    if spellings.ndim != 2 or spellings.shape[0] != twins.shape[0] or spellings.shape[1] < 2:
        raise RuntimeShapeError(
            f"draft_keys: expected spellings [{twins.shape[0]}, R >= 2], got shape "
            f"{list(spellings.shape)}"
        )
    return np.concatenate([keys[..., None], spellings[tokens].astype(np.int32)], axis=-1)


def prompt_lookup(
    history: Int[Array, "B L"],
    valid: Bool[Array, "B L"],
    end: Int[Array, " B"],
    *,
    ngram_sizes: tuple[int, ...],
    draft_len: int,
    keys: Int[Array, "B L"] | None = None,
    spellings: Int[Array, "B L R"] | None = None,
    unigrams_before: Int[Array, " B"] | None = None,
) -> tuple[Int[Array, "B K"], Int[Array, " B"]]:
    """Each row's draft: the tokens after the latest earlier occurrence of its last n-gram.

    Args:
      history: int32[B, L], each row's tokens: its (left-padded) prompt then its output.
      valid: bool[B, L], False on padding (never matched, never drafted).
      end: int32[B], the number of known slots of each row (slots ``>= end`` are ignored).
      ngram_sizes: static, the n-gram lengths to try, longest first.
      draft_len: static K, the most tokens drafted per row.
      keys: optional int32[B, L], each slot's alternate spelling (-1: none; ``<= STOP``:
        the slot starts a new clause, see `stop_key`; see `draft_keys`): a slot matches a
        token equal to its id or its alternate id.
      spellings: optional int32[B, L, R], each slot's bare spelling (`bare_spellings`; -1
        padded; all -1: none). Where no n-gram of two or more tokens matches, a slot whose
        spelling starts with the row's last token matches too (before the 1-gram lookup),
        and its draft is the spelling's rest, then the tokens after the slot.
      unigrams_before: optional int32[B]: a one-token n-gram matches only slots before this
        one (a row's output start: its own structure, ``":"``, is no copy to draft from).

    Returns:
      ``(drafts int32[B, K], count int32[B], stop int32[B])``: row b's draft is
      ``drafts[b, :count[b]]`` (the slots after it hold arbitrary ids); ``stop[b]`` is its
      first position copied from a `STOP` slot (K where none, or without ``keys``).

    Example:
      >>> import jax.numpy as jnp
      >>> h = jnp.asarray([[5, 6, 7, 8, 5, 6]])
      >>> d, n, _ = prompt_lookup(h, h >= 0, jnp.asarray([6]), ngram_sizes=(2, 1), draft_len=3)
      >>> d[0, : int(n[0])].tolist()
      [7, 8, 5]
    """
    b, length = history.shape
    slots = jnp.arange(length, dtype=jnp.int32)
    rows_end = end.astype(jnp.int32)
    best = jnp.full((b,), -1, jnp.int32)
    alt = None if keys is None else alternate(keys)
    last_at = jnp.clip(rows_end - 1, 0, length - 1)[:, None]
    last = jnp.take_along_axis(history, last_at, axis=1)  # [B, 1]
    last_ok = jnp.take_along_axis(valid, last_at, axis=1) & (rows_end >= 1)[:, None]
    shift = jnp.zeros((b,), jnp.int32)  # spelled tokens drafted before the slots after best
    spelled = jnp.full((b, draft_len), -1, jnp.int32)

    def spelling_match(best, shift, spelled):
        pieces = jnp.sum(jnp.cumprod(spellings >= 0, axis=2), axis=2).astype(jnp.int32)
        match = (spellings[:, :, 0] == last) & (pieces >= 2) & last_ok & valid
        match = match & (slots[None, :] < rows_end[:, None] - 1)
        latest = jnp.max(jnp.where(match, slots[None, :], -1), axis=1)
        found = (best < 0) & (latest >= 0)
        rest = jnp.take_along_axis(spellings, jnp.maximum(latest, 0)[:, None, None], axis=1)[:, 0]
        rest = jnp.pad(rest[:, 1:], ((0, 0), (0, max(0, draft_len - rest.shape[1] + 1))))
        rest = rest[:, :draft_len]
        n_rest = jnp.take_along_axis(pieces, jnp.maximum(latest, 0)[:, None], axis=1)[:, 0] - 1
        return (
            jnp.where(found, latest, best),
            jnp.where(found, n_rest, shift),
            jnp.where(found[:, None], rest, spelled),
        )

    for n in sorted(set(ngram_sizes), reverse=True):
        if spellings is not None and n == 1:
            best, shift, spelled = spelling_match(best, shift, spelled)
        match = (slots[None, :] < rows_end[:, None] - 1) & (slots[None, :] >= n - 1)
        if n == 1 and unigrams_before is not None:
            match = match & (slots[None, :] < unigrams_before[:, None])
        for i in range(n):  # static: the n-gram's i-th token from its end
            at = jnp.clip(rows_end - 1 - i, 0, length - 1)[:, None]
            want = jnp.take_along_axis(history, at, axis=1)
            want_ok = jnp.take_along_axis(valid, at, axis=1) & (rows_end - 1 - i >= 0)[:, None]
            shifted = jnp.pad(history[:, : length - i], ((0, 0), (i, 0)))
            shifted_ok = jnp.pad(valid[:, : length - i], ((0, 0), (i, 0)))
            same = shifted == want
            if keys is not None:
                same = same | (jnp.pad(alt[:, : length - i], ((0, 0), (i, 0))) == want)
            match = match & same & shifted_ok & want_ok
        latest = jnp.max(jnp.where(match, slots[None, :], -1), axis=1)
        best = jnp.where(best < 0, latest, best)
    if spellings is not None and 1 not in ngram_sizes:
        best, shift, spelled = spelling_match(best, shift, spelled)
    j = jnp.arange(draft_len, dtype=jnp.int32)[None, :]
    from_spelling = j < shift[:, None]  # the spelling's rest comes first
    offsets = best[:, None] + 1 + j - shift[:, None]
    at = jnp.clip(offsets, 0, length - 1)
    drafts = jnp.where(from_spelling, spelled, jnp.take_along_axis(history, at, axis=1))
    ok = (best >= 0)[:, None] & (offsets < rows_end[:, None])
    ok = ok & jnp.take_along_axis(valid, at, axis=1)
    ok = ok | ((best >= 0)[:, None] & from_spelling)
    count = jnp.sum(jnp.cumprod(ok.astype(jnp.int32), axis=1), axis=1)
    stop = jnp.full((b,), draft_len, jnp.int32)
    if keys is not None:
        go_on = (jnp.take_along_axis(keys, at, axis=1) > STOP) | from_spelling
        stop = jnp.sum(jnp.cumprod(go_on.astype(jnp.int32), axis=1), axis=1)
    return drafts.astype(jnp.int32), count.astype(jnp.int32), stop.astype(jnp.int32)
