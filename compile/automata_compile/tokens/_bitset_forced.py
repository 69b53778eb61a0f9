"""Forced runs (fast-forward) of `BitsetTables`: canonical tokens whose edges' tests hold for
every bitset a row can hold (docs/any_order_bitset.md, "Fast-forward and speculation").

The runtime feeds a forced run without testing it (`automata_jax._fast_forward` moves the
row along ``forced_states``, and applies the run's effect on the bits, stored here as
``clear``/``set`` masks per run prefix), so a run may only hold tokens that are allowed under
*every* bitset the row can have when it is in the run's state. The rule, per token state
``q`` (token state q is byte state q of the event-contracted byte DFA,
`_bitset_compose._contract`):

1. **Candidate runs**: `tokens._forced.forced_runs` on the contracted byte DFA (its edges into
   an event go to the chain's end, so its forced bytes walk through events: ``ation":"``
   after ``"occup``) and the token table read with every bitset (an edge exists whatever its
   program): the forced text, its canonical tokenization in context, cut at a token the
   table does not allow, and rule 4 (right boundary). Every string of the bitset language
   from ``q`` is one of the contracted DFA's, so the forced text is sound.
2. **Bits a row may hold** ``maybe[q]``: a fixpoint over the edges from the start (bits 0):
   ``maybe[t] |= (maybe[s] & ~C) | A`` for each edge s -> t with program ``(U, S, C, A)``, a
   superset of every bitset a row can hold in ``q``. Bits outside it are known 0; so is the
   one key bit of a key position whose keys are one bit (a row is always in a live state).
3. **The cut**: along the run, with the bits known 0 and known 1 carried through each
   program, a run is kept up to its first token whose test could fail (``U`` not within the
   known 0s, ``S`` not within the known 1s) or whose next state could be dead (not
   ``live_always`` and no key bit known 0). A ``SET`` passes where the key is decided
   (``"occupat`` then ``ion":"``: its bit is known 0), a ``CLEAR`` where the object's bits
   may not be set; a ``REQUIRE`` only where its bits are known 1 (never, as built: no must-be-1
   analysis). A run cut inside its forced text ends on a boundary of the canonical
   tokenization (as a run cut by ``max_tokens``), so what is kept is canonical.

After ``,`` no key is forced (the contracted DFA offers every key there), so in any order the
runs are the keys' tails and ``":"`` once a key is decided, value openings, and whole keys
inside objects of one property.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from automata_compile.automata import ByteDFA
from automata_compile.tokens._bitset_compose import BitsetTables, _contract
from automata_compile.tokens._forced import DEFAULT_MAX_TOKENS, ForcedRuns, forced_runs


def maybe_bits(t: BitsetTables) -> np.ndarray:
    """uint32[Q, W]: per state, the bits a row may hold there (rule 2; 0 where unreachable).
    A worklist over the distinct (state, next state, program) edges, bitsets as Python ints."""
    q = t.next_state.shape[0]
    words = t.words
    src, cls = np.nonzero(t.next_state >= 0)
    code = (src.astype(np.int64) * q + t.next_state[src, cls]) * t.programs.shape[0]
    triples = np.unique(code + t.program[src, cls])
    prog, rest = triples % t.programs.shape[0], triples // t.programs.shape[0]
    src, dst = (rest // q).tolist(), (rest % q).tolist()

    clear = [_as_int(p[2]) for p in t.programs]
    add = [_as_int(p[3]) for p in t.programs]
    out: list[list[tuple[int, int]]] = [[] for _ in range(q)]
    for s, d, p in zip(src, dst, prog.tolist(), strict=True):
        out[s].append((d, p))
    maybe: list[int | None] = [None] * q  # None: not reached
    maybe[t.start] = 0
    todo = [t.start]
    while todo:
        s = todo.pop()
        m = maybe[s]
        for d, p in out[s]:
            after = (m & ~clear[p]) | add[p]
            old = maybe[d]
            if old is None or (old | after) != old:
                maybe[d] = after if old is None else old | after
                todo.append(d)
    result = np.zeros((q, words), np.uint32)
    for s, m in enumerate(maybe):
        if m:
            result[s] = _as_words(m, words)
    return result


@dataclasses.dataclass(frozen=True)
class BitsetForcedRuns(ForcedRuns):
    """`ForcedRuns` of bitset tables, with what each run does to the bits.

    Attributes:
      clear, set: uint32[Q, F, W]: after the first i + 1 tokens of state q's run a row's
        bits B are ``(B & ~clear[q, i]) | set[q, i]`` (the runtime applies them as it
        feeds the run: a run may set a key's bit, e.g. ``":`` after ``"nam``).
    """

    clear: np.ndarray | None = None
    set: np.ndarray | None = None


def _as_int(row) -> int:
    return sum(int(x) << (32 * i) for i, x in enumerate(np.asarray(row).tolist()))


def _as_words(x: int, words: int) -> list[int]:
    return [(x >> (32 * i)) & 0xFFFFFFFF for i in range(words)]


def _single_key(t: BitsetTables) -> list[int]:
    """Per state, the bit a row there must have unset (liveness: a key position whose keys
    are one bit), else 0."""
    out = []
    for s in range(t.next_state.shape[0]):
        m = 0 if t.live_always[s] else _as_int(t.live_mask[s])
        out.append(m if m and m & (m - 1) == 0 else 0)
    return out


def _cut(t: BitsetTables, maybe: int, single: list[int], state: int, run: list[int], full: int):
    """Rule 3: the longest prefix of ``run`` (from ``state``) whose tokens' tests hold and whose
    next states are live for every bitset a row may hold, as (kept tokens, [(clear, set)] after
    each). ``maybe``: the bits a row in ``state`` may hold; ``full``: all W words' bits."""
    zero = (full & ~maybe) | single[state]  # known 0
    one = 0  # known 1
    clear_acc = set_acc = 0
    kept = []
    s = state
    for tok in run:
        c = t.token_class[tok]
        n = int(t.next_state[s, c])
        if n < 0:
            break
        prog = t.program[s, c]
        if t.program_alts is not None and t.program_alts[prog].any():
            break  # REQUIRE alternatives: not proven to hold for every bitset (cut, sound)
        u, req, clr, add = (_as_int(x) for x in t.programs[prog])
        if u & ~zero or req & ~one:
            break
        zero2, one2 = (zero | clr) & ~add, (one & ~clr) | add
        if not t.live_always[n] and not (_as_int(t.live_mask[n]) & zero2):
            break
        zero, one = zero2, one2
        clear_acc, set_acc = clear_acc | clr, (set_acc & ~clr) | add
        kept.append((tok, clear_acc, set_acc))
        s = n
    return kept, s


def bitset_forced_runs(
    dfa: ByteDFA, t: BitsetTables, vocab, kinds, max_tokens: int = DEFAULT_MAX_TOKENS
) -> BitsetForcedRuns:
    """The forced runs of ``t`` (composed from ``dfa``, the byte DFA with event columns, by
    `compose_bitset`, with its events' ``kinds``), by the rule of the module docstring.

    Raises:
      CompileTimeoutError: an open `_fsa.limits` deadline passed.
    """
    ctrans = _contract(dfa, kinds)[0]
    cdfa = ByteDFA(trans=ctrans, accepting=np.asarray(dfa.accepting), start=dfa.start)
    q = t.next_state.shape[0]
    runs = forced_runs(
        cdfa,
        np.arange(q, dtype=np.int32),
        t.token_class,
        t.next_state,
        t.accepting,
        vocab,
        max_tokens,
    )
    words = t.words
    full = (1 << (32 * words)) - 1
    maybe = maybe_bits(t)
    single = _single_key(t)
    tokens, length, nxt = runs.tokens.copy(), runs.length.copy(), runs.next.copy()
    f = tokens.shape[1]
    clear = np.zeros((q, f, words), np.uint32)
    sets = np.zeros((q, f, words), np.uint32)
    for j in np.flatnonzero(length).tolist():
        run = tokens[j, : length[j]].tolist()
        kept, s = _cut(t, _as_int(maybe[j]), single, j, run, full)
        tokens[j, len(kept) :] = 0
        length[j], nxt[j] = len(kept), s
        for i, (_, c, a) in enumerate(kept):
            clear[j, i], sets[j, i] = _as_words(c, words), _as_words(a, words)
    none = np.full(q, -1, np.int32)  # no structural drafts on bitset tables (the runs are cut)
    return BitsetForcedRuns(
        tokens=tokens, length=length, next=nxt, draft=none, text=runs.text,
        context=runs.context, clear=clear, set=sets,
    )  # fmt: skip


def with_forced_runs(
    dfa: ByteDFA, t: BitsetTables, vocab, kinds, max_tokens: int = DEFAULT_MAX_TOKENS
) -> BitsetTables:
    """``t`` with its ``forced`` runs (`bitset_forced_runs`); none where ``max_tokens`` is 0."""
    if max_tokens <= 0:
        return t
    return dataclasses.replace(t, forced=bitset_forced_runs(dfa, t, vocab, kinds, max_tokens))
