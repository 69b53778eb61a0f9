"""Forced text: per token-DFA state, the text every continuation starts with, as canonical tokens.

A JSON-Schema constraint forces long stretches (after ``{"`` the key ``name": "`` may be the
only continuation). The runtime can feed such text to the model in one multi-token step
instead of one step per token (llguidance's / XGrammar's fast-forward tokens; DOMINO's
pre-computed forced paths), and feeding the tokenizer's *canonical* spelling avoids the odd,
non-canonical tokenizations that masking alone permits (Cognetta et al. §3.3, coalescence).

The rule, per token state ``q`` (all of it decided here, at compile time):

1. **Forced bytes** ``w``. ``q`` has a representative byte-DFA state ``s`` (one of the byte
   states minimization merged into ``q``; see `_compose.compose`). Walk from ``s`` while the
   state is not accepting (EOS is a choice), has no terminal-label edge, and has exactly one
   byte edge; ``w`` is the bytes walked, capped at `MAX_FORCED_BYTES` and cut back to the last
   complete UTF-8 character. Every string of the byte language from ``s`` starts with ``w``,
   so every token continuation from ``q`` does too (the token language from ``q`` spells a
   subset of it): ``w`` is sound. It is the exact forced text of the byte language; where the
   vocabulary cannot spell one of two byte alternatives the token-level forced text could be
   longer, and we do not chase that. An accepting ``q`` forces nothing.
2. **Context** ``c``: the last ≤ `CONTEXT_BYTES` bytes of the shortest byte string leading from
   the start to ``s`` (cut forward to a UTF-8 character start), i.e. a real text the state
   is reached with.
3. **Canonical tokens.** ``ids = vocab.encode(c + w)``; the tokens after the token boundary
   that falls exactly at ``|c|`` are the run (a SentencePiece dummy-prefix space before ``c``
   is allowed for). If no token boundary falls there (the tokenizer merges across the start
   of the forced text), the run is ``vocab.encode(w)`` alone instead (it must decode to ``w``
   exactly, else ``q`` gets no run). The run is cut at the first token the DFA does not allow
   from the state it is fed in, and at ``max_tokens`` tokens.
4. **Right boundary.** If the run spells all of ``w`` (free text or a choice follows), a
   canonical tokenization of the *whole* output could merge its last tokens with what follows
   (``name": "`` then a string value: `` "`` + ``J`` → `` "J``). So, with ``t_1..t_n`` fed from
   states ``q_0 = q, .., q_{n-1}``: find the smallest ``i`` such that some token the DFA
   allows in ``q_{i-1}`` is strictly longer than ``bytes(t_i..t_n)`` and starts with them, and
   keep only ``t_1..t_{i-1}``; the dropped tail is left to a normal masked step. (A run cut
   short by ``max_tokens`` or by a disallowed token ends inside ``w``, where the canonical
   tokenization of ``w`` already decided the boundary, so the rule does not apply there.)

Every kept token is allowed from the state it is fed in (asserted), so a runtime that feeds
the run stays in the language by construction; ``forced_next[q]`` is the state after it.

5. **Structural drafts** (``ForcedRuns.draft``). Where ``w`` is forced but rules 3-4 leave
   ``q`` no run (rule 4 dropped all of it: ``":"`` after a JSON key, which ``":"",``, an empty
   string value, would extend), the first token of the canonical run (rule 3, before the cuts)
   is ``q``'s *structural draft*, if the DFA allows it from ``q``: the tokenizer's own
   spelling of the forced text, which a model trained on that tokenizer almost always writes
   (``":"`` rather than ``"`` ``:`` ``"``). Not forced (the constraint allows the others), so
   the runtime may only *propose* it: speculative decoding drafts it, and the model verifies.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import threading
import warnings
import weakref

import numpy as np

from automata_compile._errors import VocabularyError
from automata_compile.automata import NUM_BYTES, ByteDFA, check_time

DEFAULT_MAX_TOKENS = 16
MAX_FORCED_BYTES = 512
CONTEXT_BYTES = 48


@dataclasses.dataclass(frozen=True)
class ForcedRuns:
    """Forced canonical token runs of every token state.

    Attributes:
      tokens: int32[Q, F], the run of each state, padded with 0 past ``length``.
      length: int32[Q], tokens in each run (0 = nothing forced).
      next: int32[Q], the state after the run (the state itself where ``length`` is 0).
      draft: int32[Q], each state's structural draft (rule 5; -1 where none).
      text: the forced bytes ``w`` of each state (before tokenization; for tests and tools).
      context: the context ``c`` each run was tokenized after.
    """

    tokens: np.ndarray
    length: np.ndarray
    next: np.ndarray
    draft: np.ndarray
    text: tuple[bytes, ...]
    context: tuple[bytes, ...]


def forced_runs(
    byte_dfa: ByteDFA,
    byte_state: np.ndarray,
    token_class: np.ndarray,
    next_state: np.ndarray,
    accepting: np.ndarray,
    vocab,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> ForcedRuns:
    """Computes the forced runs of a token DFA (see the module docstring for the rule).

    Args:
      byte_dfa: the byte DFA the token DFA was composed from.
      byte_state: int32[Q], a representative byte state of each token state.
      token_class, next_state, accepting: the token DFA's tables.
      vocab: the `Vocabulary` (its `encode` is the tokenizer's canonical encoding).
      max_tokens: F, the most tokens per run (>= 1).

    Raises:
      CompileTimeoutError: an open `_fsa.limits` deadline passed (checked per state).
    """
    q = next_state.shape[0]
    f = max(int(max_tokens), 1)
    tokens = np.zeros((q, f), np.int32)
    length = np.zeros(q, np.int32)
    nxt = np.arange(q, dtype=np.int32)
    draft = np.full(q, -1, np.int32)
    texts: list[bytes] = [b""] * q
    contexts: list[bytes] = [b""] * q
    trans = byte_dfa.trans
    # Byte states with one way on: not accepting, no terminal-label edge, one byte edge.
    single = (
        ~byte_dfa.accepting
        & ~(trans[:, NUM_BYTES:] >= 0).any(axis=1)
        & ((trans[:, :NUM_BYTES] >= 0).sum(axis=1) == 1)
    )
    candidates = np.flatnonzero(~accepting & single[byte_state])
    if candidates.size:
        context_of = _contexts(_shortest_paths(byte_dfa), byte_state[candidates])
        only = np.argmax(trans[:, :NUM_BYTES] >= 0, axis=1)  # the byte of a single state
        walk = (single.tolist(), only.tolist(), trans[np.arange(len(only)), only].tolist())
    todo = []  # (state, forced bytes, context)
    for k, j in enumerate(candidates.tolist()):
        check_time("the forced-run extraction")
        w = _utf8_prefix(_forced_bytes(walk, int(byte_state[j])))
        if w:
            texts[j], contexts[j] = w, context_of[k]
            todo.append((j, w, context_of[k]))
    try:
        runs = _canonical_runs(vocab, [(c, w) for _, w, c in todo])
    except ImportError as e:  # the tokenizer's library is missing: no runs at all
        warnings.warn(f"forced tokens skipped: {e}", stacklevel=2)
        runs = []
    for (j, w, _), run in zip(todo, runs, strict=False):  # runs is [] when skipped
        check_time("the forced-run extraction")
        if not run:
            continue
        states = [j]
        for t in run[:f]:
            n = int(next_state[states[-1], token_class[t]])
            if n < 0:
                break
            states.append(n)
        kept = run[: len(states) - 1]
        if sum(len(vocab.tokens[t]) for t in kept) == len(w):
            index = _prefix_index(vocab)
            kept = _drop_mergeable_tail(kept, states, index, token_class, next_state, vocab)
        for i, t in enumerate(kept):  # the invariant the runtime relies on
            assert next_state[states[i], token_class[t]] == states[i + 1] >= 0, (j, i, t)
        if not kept and next_state[j, token_class[run[0]]] >= 0:  # rule 5
            draft[j] = run[0]
        length[j] = len(kept)
        tokens[j, : len(kept)] = kept
        nxt[j] = states[len(kept)]
    return ForcedRuns(tokens, length, nxt, draft, tuple(texts), tuple(contexts))


def _forced_bytes(walk, s: int) -> bytes:
    """The bytes walked from byte state ``s`` while the state has one way on (rule 1):
    ``walk`` = (single, byte, next) per byte state, as lists."""
    single, byte, nxt = walk
    out = bytearray()
    while len(out) < MAX_FORCED_BYTES and single[s]:
        out.append(byte[s])
        s = nxt[s]
    return bytes(out)


def _utf8_prefix(data: bytes) -> bytes:
    """The longest prefix of ``data`` that is whole UTF-8 characters (b"" if it starts mid-character)."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
            return data[:cut]
        except UnicodeDecodeError:
            continue
    return b""


def _shortest_paths(dfa: ByteDFA) -> tuple[np.ndarray, np.ndarray]:
    """Level-by-level BFS over byte edges: (parent state, byte) per state; -1 = start/unreached."""
    q = dfa.num_states
    parent = np.full(q, -1, np.int64)
    via = np.full(q, -1, np.int64)
    seen = np.zeros(q, bool)
    seen[dfa.start] = True
    frontier = np.array([dfa.start])
    trans = dfa.trans[:, :NUM_BYTES]
    while frontier.size:
        src, byte = np.nonzero(trans[frontier] >= 0)
        dst = trans[frontier[src], byte]
        new = ~seen[dst]
        dst, src, byte = dst[new], frontier[src[new]], byte[new]
        dst, first = np.unique(dst, return_index=True)  # the first (smallest) way in
        parent[dst], via[dst] = src[first], byte[first]
        seen[dst] = True
        frontier = dst
    return parent, via


def _contexts(paths, states: np.ndarray) -> list[bytes]:
    """`_context` of each of ``states``, their paths walked back together in NumPy."""
    parent, via = paths
    cur = states.astype(np.int64)
    back = np.zeros((cur.shape[0], CONTEXT_BYTES), np.uint8)  # the path's bytes, last first
    length = np.zeros(cur.shape[0], np.int64)
    for i in range(CONTEXT_BYTES):
        up = parent[cur]
        on = up >= 0
        if not on.any():
            break
        back[on, i] = via[cur[on]]
        length += on
        cur = np.where(on, up, cur)
    rows = back.tolist()
    return [_cut_context(bytes(r[:n][::-1])) for r, n in zip(rows, length.tolist(), strict=True)]


def _context(paths, s: int) -> bytes:
    """The last `CONTEXT_BYTES` bytes of the shortest path to byte state ``s`` (rule 2;
    the reference of `_contexts`)."""
    parent, via = paths
    out = bytearray()
    while parent[s] >= 0 and len(out) < CONTEXT_BYTES:
        out.append(int(via[s]))
        s = int(parent[s])
    out.reverse()
    return _cut_context(bytes(out))


def _cut_context(data: bytes) -> bytes:
    """``data`` cut forward to a character start; empty if it is not UTF-8 then."""
    while data and (data[0] & 0xC0) == 0x80:  # cut forward to a character start
        data = data[1:]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return b""
    return data


def _canonical_runs(vocab, pairs: list[tuple[bytes, bytes]]) -> list[list[int]]:
    """`_canonical` of every (context, forced) pair, the tokenizer called once per pass
    over all of them (`Vocabulary.encode_many`)."""
    runs: list[list[int] | None] = [None] * len(pairs)
    first = [i for i, (c, _) in enumerate(pairs) if c]
    encoded = _encode_many(vocab, [(pairs[i][0] + pairs[i][1]).decode("utf-8") for i in first])
    for i, ids in zip(first, encoded, strict=True):  # unspellable: no run (as `_canonical`)
        runs[i] = _after(vocab, ids, *pairs[i]) if ids is not None else []
    alone = [i for i in range(len(pairs)) if runs[i] is None]
    encoded = _encode_many(vocab, [pairs[i][1].decode("utf-8") for i in alone])
    for i, ids in zip(alone, encoded, strict=True):
        runs[i] = (_after(vocab, ids, b"", pairs[i][1]) if ids is not None else None) or []
    return runs


# Canonical encodings memoized per vocabulary, across compiles (`_encode_many`): the texts
# of forced runs recur from one schema to the next (keys and the punctuation around them;
# about 70% of them on BFCL's schemas). At most this many texts per vocabulary.
ENCODE_CACHE_ENTRIES = 32768
_ENCODINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_ENCODINGS_LOCK = threading.Lock()
_MISSING = object()


def _encode_many(vocab, texts: list[str]) -> list[list[int] | None]:
    """``vocab.encode_many(texts)``; where that raises `VocabularyError` (a vocabulary that
    cannot spell a text), each text alone, None for those that fail. Memoized per
    vocabulary in an LRU of `ENCODE_CACHE_ENTRIES` texts (the tokenizer is a pure function
    of the text), and each distinct text is encoded once."""
    with _ENCODINGS_LOCK:
        cache = _ENCODINGS.get(vocab)
        if cache is None:
            cache = _ENCODINGS[vocab] = collections.OrderedDict()
        out = [cache.get(t, _MISSING) for t in texts]
        for t, ids in zip(texts, out, strict=True):
            if ids is not _MISSING:
                cache.move_to_end(t)
    todo = list(dict.fromkeys(t for t, ids in zip(texts, out, strict=True) if ids is _MISSING))
    if not todo:
        return out
    found = dict(zip(todo, _encode_uncached(vocab, todo), strict=True))
    with _ENCODINGS_LOCK:
        for t, ids in found.items():
            cache[t] = ids
            cache.move_to_end(t)
        while len(cache) > ENCODE_CACHE_ENTRIES:
            cache.popitem(last=False)
    return [found[t] if ids is _MISSING else ids for t, ids in zip(texts, out, strict=True)]


def _encode_uncached(vocab, texts: list[str]) -> list[tuple[int, ...] | None]:
    """`_encode_many` without the memo (the ids as tuples: they are shared)."""
    try:
        return [tuple(ids) for ids in vocab.encode_many(texts)]
    except VocabularyError:
        out = []
        for t in texts:
            try:
                out.append(tuple(vocab.encode(t)))
            except VocabularyError:
                out.append(None)
        return out


def _canonical(vocab, context: bytes, forced: bytes) -> list[int]:
    """The tokenizer's tokens for ``forced`` after ``context`` (see rule 3); [] if none fit
    (the one-pair reference of `_canonical_runs`)."""
    try:
        if context:
            run = _after(vocab, vocab.encode((context + forced).decode("utf-8")), context, forced)
            if run is not None:
                return run
        run = _after(vocab, vocab.encode(forced.decode("utf-8")), b"", forced)
    except VocabularyError:
        return []
    return run or []


def _after(vocab, ids: list[int], context: bytes, forced: bytes) -> list[int] | None:
    """The ids after the token boundary at the end of ``context``, or None."""
    pieces = [vocab.tokens[i] for i in ids]
    if any(p is None for p in pieces):
        return None
    text = b"".join(pieces)
    if text == context + forced:
        offset = 0
    elif text == b" " + context + forced:  # a SentencePiece dummy prefix
        offset = 1
    else:
        return None
    pos = 0
    for k, p in enumerate(pieces):
        if pos == offset + len(context):
            return [int(i) for i in ids[k:]]
        pos += len(p)
    return None


_INDEXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# `_PrefixIndex.extending` keeps this many prefixes' answers (views of its ids).
PREFIX_MEMO_ENTRIES = 65536


def _prefix_index(vocab) -> _PrefixIndex:
    """One `_PrefixIndex` per vocabulary (built on first use, ~0.5 s for 262k tokens)."""
    index = _INDEXES.get(vocab)
    if index is None:
        index = _INDEXES[vocab] = _PrefixIndex(vocab)
    return index


class _PrefixIndex:
    """Token ids sorted by bytes, to list the tokens that extend a byte string."""

    def __init__(self, vocab):
        tokens = vocab.tokens
        ids = sorted((i for i, t in enumerate(tokens) if t), key=tokens.__getitem__)
        self.keys = [tokens[i] for i in ids]
        self.ids = np.array(ids, dtype=np.int64)
        self._found: dict[bytes, np.ndarray] = {}  # prefix -> `extending` (forced texts recur)

    def extending(self, prefix: bytes) -> np.ndarray:
        """Ids of tokens strictly longer than ``prefix`` that start with it."""
        hit = self._found.get(prefix)
        if hit is not None:
            return hit
        lo = bisect.bisect_right(self.keys, prefix)  # skips the exact match itself
        upper = _successor(prefix)
        hi = len(self.keys) if upper is None else bisect.bisect_left(self.keys, upper, lo)
        if len(self._found) >= PREFIX_MEMO_ENTRIES:
            self._found.clear()
        out = self._found[prefix] = self.ids[lo:hi]
        return out


def _successor(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with ``prefix``."""
    data = bytearray(prefix)
    while data and data[-1] == 0xFF:
        data.pop()
    if not data:
        return None
    data[-1] += 1
    return bytes(data)


def _drop_mergeable_tail(run, states, index: _PrefixIndex, token_class, next_state, vocab):
    """Rule 4: keeps ``run[:i-1]`` for the smallest i whose tail some allowed longer token extends."""
    pieces = [vocab.tokens[t] for t in run]
    for i in range(len(run)):
        cands = index.extending(b"".join(pieces[i:]))
        if cands.size and (next_state[states[i]][token_class[cands]] >= 0).any():
            return run[:i]
    return run
