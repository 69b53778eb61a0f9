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


def draft_keys(prompt_tokens, twins: np.ndarray) -> np.ndarray:
    """`generate`'s ``draft_keys`` for these prompts: each slot's bare twin (-1: none).

    Args:
      prompt_tokens: int[B, T], the (padded) prompts.
      twins: int32[V], from `bare_twins`.

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
    return twins[tokens].astype(np.int32)


def prompt_lookup(
    history: Int[Array, "B L"],
    valid: Bool[Array, "B L"],
    end: Int[Array, " B"],
    *,
    ngram_sizes: tuple[int, ...],
    draft_len: int,
    keys: Int[Array, "B L"] | None = None,
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
    for n in sorted(set(ngram_sizes), reverse=True):
        match = (slots[None, :] < rows_end[:, None] - 1) & (slots[None, :] >= n - 1)
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
    offsets = best[:, None] + 1 + jnp.arange(draft_len, dtype=jnp.int32)[None, :]
    at = jnp.clip(offsets, 0, length - 1)
    drafts = jnp.take_along_axis(history, at, axis=1)
    ok = (best >= 0)[:, None] & (offsets < rows_end[:, None])
    ok = ok & jnp.take_along_axis(valid, at, axis=1)
    count = jnp.sum(jnp.cumprod(ok.astype(jnp.int32), axis=1), axis=1)
    stop = jnp.full((b,), draft_len, jnp.int32)
    if keys is not None:
        go_on = jnp.take_along_axis(keys, at, axis=1) > STOP
        stop = jnp.sum(jnp.cumprod(go_on.astype(jnp.int32), axis=1), axis=1)
    return drafts.astype(jnp.int32), count.astype(jnp.int32), stop.astype(jnp.int32)
