"""Byte DFA with bitset events ∘ detokenizer → token tables with event programs.

The byte DFA's terminal columns ``256 + e`` are *events* here (docs/any_order_bitset.md), not
token-level edges: an event state has exactly one out-edge, its event, taken as soon as the
state is reached. A token's walk composes the events it crosses into one program
``(U, S, C, A)`` over the bitset before the token (bits that must be 0, bits that must be 1,
bits cleared, bits set after). The vocabulary composes with the event-contracted DFA through
the ordinary vectorized walk (`_compose`); only tokens holding a byte that enters an event
chain are walked again, with their programs, and their columns replace the base walk's.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from automata_compile.automata import NUM_BYTES, ByteDFA
from automata_compile.automata import dfa_ops as _dfa_ops
from automata_compile.tokens import _compose
from automata_compile.tokens._forced import ForcedRuns
from automata_compile.tokens._token_trie import TokenTrie

# Event kinds, as `frontends.json_schema._bitset_events` numbers them (a test pins both).
SET, CLEAR, REQUIRE = 0, 1, 2
# A state whose event edges are several REQUIREs into one state (a union's members closing on
# different required sets): one event that holds iff one of the masks is set (composition only).
REQUIRE_ANY = 3


class EventConflict(ValueError):
    """The byte DFA has a state with an event edge next to another edge (or accepting):
    the events of a token edge would not be one program. ``events``: the event ids at the
    conflicting states (`pipeline._bitset` spells their objects otherwise)."""

    def __init__(self, message: str, events=()):
        super().__init__(message)
        self.events = frozenset(int(e) for e in events)


@dataclasses.dataclass(frozen=True)
class BitsetTables:
    """A token automaton whose edges also test and update a bitset per row.

    Attributes:
      token_class: int32[V], each token's class (0: never allowed).
      next_state: int32[Q, C], -1 = no edge.
      program: int32[Q, C], each edge's program id (0: no event).
      programs: uint32[P, 4, W]: per program its U (must be 0 before), S (must be 1
        before), C (cleared), A (set after) masks; program 0 is all zeros.
      live_mask: uint32[Q, W]: a key position's keys (the state is live iff one is unset).
      live_always: bool[Q]: the state is live under every bitset.
      accepting: bool[Q].
      start: the initial state.
      eos_ids: the vocabulary's end-of-sequence ids.
      num_bits: bits used (W = ceil(num_bits / 32), at least 1).
      program_alts: uint32[P, K, W] (K >= 1): a program also holds only if one of its K
        alternatives is all set before (a union's ``}`` whose members close on different
        required sets); all zeros (always holds) for a program with no such choice. ``S`` is
        the bits every alternative needs.
      counted_objects: pointers of the objects spelled by the counting automaton instead
        (`pipeline._bitset.compile_json_schema_bitset`), no bits.
      forced: `ForcedRuns` of the states or None (`tokens._bitset_forced`).
    """

    token_class: np.ndarray
    next_state: np.ndarray
    program: np.ndarray
    programs: np.ndarray
    live_mask: np.ndarray
    live_always: np.ndarray
    accepting: np.ndarray
    start: int
    eos_ids: tuple
    num_bits: int
    program_alts: np.ndarray | None = None
    counted_objects: tuple = ()
    forced: ForcedRuns | None = None

    def __post_init__(self):
        if self.program_alts is None:
            p, _, w = self.programs.shape
            object.__setattr__(self, "program_alts", np.zeros((p, 1, w), np.uint32))

    @property
    def words(self) -> int:
        return int(self.programs.shape[2])

    def reachable_states(self) -> int:
        """States reachable from the start through edges (any bitset)."""
        return int(_reachable(self.next_state, self.start).sum())


def _reachable(next_state: np.ndarray, start: int) -> np.ndarray:
    """bool[Q]: the states reachable from ``start`` through edges (any bitset)."""
    seen = np.zeros(next_state.shape[0], dtype=bool)
    seen[start] = True
    todo = [start]
    while todo:
        nxt = np.unique(next_state[todo])
        nxt = nxt[nxt >= 0]
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        todo = nxt.tolist()
    return seen


def _contract(dfa: ByteDFA, kinds):
    """(byte table whose edges into an event state go to the end of its chain of events,
    whether each state is an event state, its event or -1, its event's next state, the
    disjunctions: per extra event ``len(kinds) + i``, the REQUIRE events it joins, each
    state's chain end: int64[Q + 1], the last entry -1).

    A state whose only edges are several REQUIREs into one state gets one REQUIRE_ANY event.

    Raises:
      EventConflict: an event state has another edge, accepts, or is the start."""
    trans = np.asarray(dfa.trans)
    events = trans[:, NUM_BYTES:]
    is_event = (events >= 0).any(axis=1)
    ev = np.full(trans.shape[0], -1, np.int64)
    ev_next = np.full(trans.shape[0], -1, np.int64)
    rows = np.flatnonzero(is_event)
    joins: dict = {}
    if rows.size:
        bad = dfa.accepting[rows] | (trans[rows, :NUM_BYTES] >= 0).any(axis=1)
        bad |= rows == dfa.start
        col = np.argmax(events[rows] >= 0, axis=1)
        ev[rows] = col
        ev_next[rows] = events[rows, col]
        is_req = np.asarray(kinds, dtype=np.int64) == REQUIRE
        for i in np.flatnonzero((events[rows] >= 0).sum(axis=1) > 1).tolist():
            s = int(rows[i])
            es = np.flatnonzero(events[s] >= 0)
            if not is_req[es].all() or len(set(events[s, es].tolist())) != 1:
                bad[i] = True
            elif not bad.any():
                ev[s] = joins.setdefault(tuple(es.tolist()), len(kinds) + len(joins))
        if bad.any():  # every conflicting state's events at once
            raise EventConflict(
                "an event state has another edge (bytes, an event into another state, or a "
                "non-REQUIRE event), or accepts",
                np.flatnonzero((events[rows[bad]] >= 0).any(axis=0)),
            )
    # each event state's chain end (chains of several events: follow them)
    end = np.arange(trans.shape[0] + 1, dtype=np.int64)
    end[rows] = ev_next[rows]
    while rows.size:  # pointer jumping: chains of n events take log n rounds
        hop = is_event[end[rows]]
        if not hop.any():
            break
        end[rows] = np.where(hop, end[end[rows]], end[rows])
    byte = trans[:, :NUM_BYTES].astype(np.int64)
    end[-1] = -1
    ctrans = np.where(byte >= 0, end[byte], -1).astype(np.int32)
    return ctrans, is_event, ev, ev_next, list(joins), end


def _first_events(byte, is_event, ev, accepting, kinds) -> tuple:
    """Per state: (live_always bool[Q], SET bits reachable as first events: list of sets).

    A state is a key position iff every first event reachable on byte paths is a SET and no
    accepting state is reachable before an event; its keys are those SET bits."""
    q = byte.shape[0]
    src = np.repeat(np.arange(q), NUM_BYTES)
    dst = byte.reshape(-1)
    keep = (dst >= 0) & ~is_event[src]
    pairs = np.unique(src[keep] * q + dst[keep])
    src, dst = pairs // q, pairs % q
    preds: list[list[int]] = [[] for _ in range(q)]
    for s, t in zip(src.tolist(), dst.tolist(), strict=True):
        preds[t].append(s)
    # FE as Python ints: bit e for event e, bit E for "not a key position" (accept)
    n_ev = len(kinds)
    other = 1 << n_ev
    fe = [0] * q
    own = [0] * q  # what a predecessor inherits from reaching t: its event, or its FE
    for s in range(q):
        if is_event[s]:
            own[s] = 1 << int(ev[s])
        elif accepting[s]:
            fe[s] = other
    todo = list(range(q))
    for s in range(q):
        if not is_event[s]:
            own[s] = fe[s]
    inq = [True] * q
    while todo:
        t = todo.pop()
        inq[t] = False
        gift = own[t]
        if not gift:
            continue
        for p in preds[t]:
            if fe[p] | gift != fe[p]:
                fe[p] |= gift
                own[p] = fe[p]
                if not inq[p]:
                    inq[p] = True
                    todo.append(p)
    set_events = sum(1 << e for e, k in enumerate(kinds) if k == SET)
    always = np.zeros(q, dtype=bool)
    keys = []
    for s in range(q):
        f = fe[s]
        always[s] = bool(f & ~set_events) or f == 0
        keys.append(f & set_events)
    return always, keys


def compose_bitset(
    dfa: ByteDFA, trie: TokenTrie, vocab, kinds, masks, num_bits: int
) -> BitsetTables:
    """Builds the tables (see `BitsetTables`) for ``vocab`` of ``dfa`` whose column ``256 + e`` is
    event e of kind ``kinds[e]`` (SET, CLEAR, REQUIRE) with mask ``masks[e]`` (W uint32 words).

    Raises:
      EventConflict: an event state is not alone on its path (a determinization conflict).
    """
    q = dfa.num_states
    words = max(1, (num_bits + 31) // 32)
    masks = np.asarray(masks, dtype=np.uint32).reshape(len(kinds), words)
    kinds = list(kinds)
    ctrans, is_event, ev, ev_next, joins, _ = _contract(dfa, kinds)
    events = _event_alternatives(kinds, masks, joins)
    byte = np.asarray(dfa.trans[:, :NUM_BYTES])
    always, key_events = _first_events(
        byte, is_event, ev, dfa.accepting, kinds + [REQUIRE_ANY] * len(joins)
    )
    live_mask = np.zeros((q, words), np.uint32)
    for s, k in enumerate(key_events):
        while k:
            e = (k & -k).bit_length() - 1
            live_mask[s] |= masks[e]
            k &= k - 1
    # the base walk: the contracted DFA, every token as if it crossed no event
    cdfa = ByteDFA(trans=ctrans, accepting=np.asarray(dfa.accepting), start=dfa.start)
    walk = _compose._walk(cdfa, trie, ())
    base_class, rep = _compose._classes(q, trie, walk)
    base_next = _compose._columns(q, trie, walk, base_class, rep)
    # the tokens that may cross an event: those holding a byte that enters an event chain
    enters = (byte >= 0) & is_event[np.maximum(byte, 0)]
    event_bytes = np.flatnonzero(enters.any(axis=0))
    matrix, lengths = vocab.token_matrix()
    lengths = lengths.astype(np.int64)
    by_byte = _tokens_by_byte(vocab)
    etok = np.unique(np.concatenate([by_byte[b] for b in event_bytes.tolist()] + [[]]))
    etok = etok.astype(np.int64)
    ps, pt, pend, prog, palt = _event_walk(
        byte, is_event, ev, ev_next, events, matrix, lengths, etok
    )
    # statically dead: a key position none of whose keys can be unset after the token
    lm = live_mask[pend]
    a = prog[:, 3 * words : 4 * words]
    dead = ~always[pend] & ~((lm & ~a) != 0).any(axis=1)
    ps, pt, pend = ps[~dead], pt[~dead], pend[~dead]
    prog = np.concatenate([prog[~dead], palt[~dead]], axis=1)
    zero = np.zeros((1, prog.shape[1]), np.uint32)
    rows = np.ascontiguousarray(np.concatenate([zero, prog]))
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)
    _, first_row, pid = np.unique(keys, return_index=True, return_inverse=True)
    uniq = rows[first_row]
    pid = pid.reshape(-1)
    # program 0 = the zero program (the least key: np.unique sorts it first)
    assert not uniq[0].any()
    pid = pid[1:]
    num_p = uniq.shape[0]
    # columns: the dead one, the base classes that tokens outside etok read, then one per
    # distinct column of the event-walked tokens (grouped by their sparse pairs); int32
    # codes next * P + program
    group, rep_pairs = _group_sparse(
        q, etok.shape[0], np.searchsorted(etok, pt), ps, pend * num_p + pid
    )
    plain = np.ones(lengths.shape[0], bool)
    plain[etok] = False
    plain &= (lengths > 0) & (base_class > 0)
    used_base = np.unique(base_class[plain])
    n_b, n_g = used_base.shape[0], int(group.max(initial=-1)) + 1
    code = np.full((q, 1 + n_b + n_g), -1, np.int32)
    sub = base_next[:, used_base]
    code[:, 1 : 1 + n_b] = np.where(sub >= 0, sub * num_p, -1)
    code[rep_pairs[0], 1 + n_b + rep_pairs[1]] = rep_pairs[2]
    tok_col = np.zeros(lengths.shape[0], np.int64)
    tok_col[plain] = 1 + np.searchsorted(used_base, base_class[plain])
    tok_col[etok] = 1 + n_b + group
    first, col_id = _dfa_ops.unique_columns(code)
    table = code[:, first]
    token_class = col_id[tok_col].astype(np.int32)
    next_state = np.where(table >= 0, table // num_p, -1).astype(np.int32)
    program = np.where(table >= 0, table % num_p, 0).astype(np.int32)
    return BitsetTables(
        token_class=token_class,
        next_state=next_state,
        program=program,
        programs=np.ascontiguousarray(uniq[:, : 4 * words].reshape(num_p, 4, words)),
        program_alts=np.ascontiguousarray(uniq[:, 4 * words :].reshape(num_p, -1, words)),
        live_mask=live_mask,
        live_always=always,
        accepting=np.asarray(dfa.accepting, dtype=bool),
        start=int(dfa.start),
        eos_ids=tuple(vocab.eos_ids),
        num_bits=num_bits,
    )


def _group_sparse(q: int, n: int, tok, state, code):
    """Groups n tokens by their sparse columns (pairs ``(tok, state, code)``): hashed, then
    verified exactly. Returns (group id per token, the pairs (state, group, code) of each
    group's first token)."""
    order = np.lexsort((state, tok))
    tok, state, code = tok[order], state[order], code[order].astype(np.int64)
    rng = np.random.default_rng(0xB175)
    wa = rng.integers(1, 2**63, size=q, dtype=np.uint64)
    term = wa[state] * ((code.astype(np.uint64) + np.uint64(2)) * np.uint64(0x9E3779B97F4A7C15))
    counts = np.bincount(tok, minlength=n)
    start = np.cumsum(counts) - counts
    h = np.zeros(n, np.uint64)
    has = counts > 0
    if tok.size:
        h[has] = np.add.reduceat(term, start[has])
    h += counts.astype(np.uint64) * np.uint64(0xD1B54A32D192ED03)
    _, first, group = np.unique(h, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    rep = first[group]  # each token's group representative
    # exact check: every token's pairs are its representative's
    same = counts[rep] == counts
    if tok.size:
        off = np.arange(tok.shape[0]) - start[tok]
        at = start[rep[tok]] + np.minimum(off, np.maximum(counts[rep[tok]] - 1, 0))
        ok = (state[at] == state) & (code[at] == code)
        same[tok[~ok]] = False
    if not same.all():  # pragma: no cover - about 2**-64
        raise RuntimeError("bitset column hashing collided; please report this schema")
    is_rep = rep[tok] == tok
    return group, (state[is_rep], group[tok[is_rep]], code[is_rep])


_BY_BYTE: dict = {}


def _tokens_by_byte(vocab) -> list:
    """Per byte value, the ids of the tokens holding it (sorted; cached per vocabulary)."""
    key = vocab.fingerprint
    hit = _BY_BYTE.get(key)
    if hit is None:
        matrix, lengths = vocab.token_matrix()
        inside = np.arange(matrix.shape[1])[None, :] < lengths[:, None]
        tok, pos = np.nonzero(inside)
        b = matrix[tok, pos].astype(np.int64)
        pairs = np.unique(b * matrix.shape[0] + tok)
        b, tok = pairs // matrix.shape[0], pairs % matrix.shape[0]
        cuts = np.searchsorted(b, np.arange(NUM_BYTES + 1))
        hit = [tok[cuts[i] : cuts[i + 1]] for i in range(NUM_BYTES)]
        _BY_BYTE.clear()  # one vocabulary at a time
        _BY_BYTE[key] = hit
    return hit


def _event_alternatives(kinds, masks, joins):
    """(kinds int64[E], alternatives uint32[E, J, W], valid bool[E, J]) of the events and
    the REQUIRE_ANY events ``joins`` (each the REQUIRE events it joins) appended after them."""
    e0, words = masks.shape
    j = max([1] + [len(x) for x in joins])
    alts = np.zeros((e0 + len(joins), j, words), np.uint32)
    valid = np.zeros((e0 + len(joins), j), dtype=bool)
    alts[:e0, 0], valid[:e0, 0] = masks, True
    for i, join in enumerate(joins):
        alts[e0 + i, : len(join)] = masks[list(join)]
        valid[e0 + i, : len(join)] = True
    kinds = np.asarray(list(kinds) + [REQUIRE_ANY] * len(joins), dtype=np.int64)
    return kinds, alts, valid


def _event_walk(byte, is_event, ev, ev_next, events, matrix, lengths, etok):
    """Every live (start state, token) pair of the tokens ``etok``, walked with events
    (``events``: `_event_alternatives`).

    Returns (start, token, end, program uint32[N, 4W], alternatives uint32[N, K*W]) of the
    pairs that end alive (`_normal_alternatives`)."""
    kinds, ealts, evalid = events
    words = ealts.shape[2]
    firsts = matrix[etok, 0]
    ps, pt = [], []
    for b in np.unique(firsts).tolist():
        states = np.flatnonzero(byte[:, b] >= 0)
        toks = etok[firsts == b]
        ps.append(np.repeat(states, toks.shape[0]))
        pt.append(np.tile(toks, states.shape[0]))
    if not ps:
        z = np.zeros(0, np.int64)
        return z, z, z, np.zeros((0, 4 * words), np.uint32), np.zeros((0, words), np.uint32)
    start = np.concatenate(ps).astype(np.int64)
    tok = np.concatenate(pt).astype(np.int64)
    cur = start.copy()
    # per pair: U, C, A [N, 3, W]; its REQUIRE alternatives [N, K, W] (S: one of them must
    # be all set before), which are valid [N, K]
    prog = np.zeros((start.shape[0], 3, words), np.uint32)
    alts = np.zeros((start.shape[0], 1, words), np.uint32)
    valid = np.ones((start.shape[0], 1), dtype=bool)
    done = [[], [], [], [], [], []]
    for pos in range(matrix.shape[1]):
        if not start.size:
            break
        nxt = byte[cur, matrix[tok, pos]].astype(np.int64)
        ok = nxt >= 0
        start, tok, nxt, prog = start[ok], tok[ok], nxt[ok], prog[ok]
        alts, valid = alts[ok], valid[ok]
        while True:
            at = is_event[nxt]
            if not at.any():
                break
            idx = np.flatnonzero(at)
            e = ev[nxt[idx]]
            sub, sa, sv = prog[idx], alts[idx], valid[idx]
            u, c, a = sub[:, 0], sub[:, 1], sub[:, 2]
            m = ealts[e, 0]
            k = kinds[e][:, None]
            is_set, is_clear = k == SET, k == CLEAR
            # SET(b): b must be 0 before unless cleared: alternatives needing it die
            sv = sv & ~(is_set[:, :, None] & ((sa & (m & ~c)[:, None, :]) != 0)).any(axis=2)
            fail = (is_set & ((a & m) != 0)).any(axis=1)
            # REQUIRE / REQUIRE_ANY: every alternative times every one of the event's
            req = np.flatnonzero(kinds[e] >= REQUIRE)
            if req.size:
                ra, rv = ealts[e[req]], evalid[e[req]]  # [n, J, W], [n, J]
                need = ra & ~a[req][:, None, :]
                rv = rv & ~((need & (c | u)[req][:, None, :]) != 0).any(axis=2)
                both = sa[req][:, :, None, :] | need[:, None, :, :]  # [n, K, J, W]
                bv = sv[req][:, :, None] & rv[:, None, :]
                n_, kk, jj = both.shape[:3]
                both = both.reshape(n_, kk * jj, words)
                bv = bv.reshape(n_, kk * jj)
                keep = np.flatnonzero(~np.isin(np.arange(idx.shape[0]), req))
                width = max(kk * jj, kk)
                na = np.zeros((idx.shape[0], width, words), np.uint32)
                nv = np.zeros((idx.shape[0], width), dtype=bool)
                na[req], nv[req] = both, bv
                na[keep, :kk], nv[keep, :kk] = sa[keep], sv[keep]
                sa, sv = na, nv
            u2 = np.where(is_set, u | (m & ~c), u)
            c2 = np.where(is_clear, c | m, c)
            a2 = np.where(is_set, a | m, np.where(is_clear, a & ~m, a))
            prog[idx] = np.stack([u2, c2, a2], axis=1)
            fail |= ~sv.any(axis=1)
            if sa.shape[1] > alts.shape[1]:
                grow = sa.shape[1] - alts.shape[1]
                alts = np.concatenate([alts, np.zeros((alts.shape[0], grow, words), np.uint32)], 1)
                valid = np.concatenate([valid, np.zeros((valid.shape[0], grow), bool)], 1)
            alts[idx, : sa.shape[1]], valid[idx, : sa.shape[1]] = sa, sv
            valid[idx, sa.shape[1] :] = False
            alts, valid = _compact(alts, valid)
            nxt[idx] = ev_next[nxt[idx]]
            if fail.any():
                keep = np.ones(nxt.shape[0], dtype=bool)
                keep[idx[fail]] = False
                start, tok, nxt, prog = start[keep], tok[keep], nxt[keep], prog[keep]
                alts, valid = alts[keep], valid[keep]
        fin = lengths[tok] == pos + 1
        done[0].append(start[fin])
        done[1].append(tok[fin])
        done[2].append(nxt[fin])
        done[3].append(prog[fin])
        done[4].append(alts[fin])
        done[5].append(valid[fin])
        start, tok, cur, prog = start[~fin], tok[~fin], nxt[~fin], prog[~fin]
        alts, valid = alts[~fin], valid[~fin]
    k = max([1] + [x.shape[1] for x in done[4]])
    pad = [np.concatenate([x, np.zeros((x.shape[0], k - x.shape[1], words), np.uint32)], 1)
           for x in done[4]]  # fmt: skip
    padv = [np.concatenate([x, np.zeros((x.shape[0], k - x.shape[1]), bool)], 1) for x in done[5]]
    p3 = np.concatenate(done[3] + [np.zeros((0, 3, words), np.uint32)])
    s_, alt = _normal_alternatives(
        np.concatenate(pad + [np.zeros((0, k, words), np.uint32)]),
        np.concatenate(padv + [np.zeros((0, k), bool)]),
    )
    prog4 = np.stack([p3[:, 0], s_, p3[:, 1], p3[:, 2]], axis=1).reshape(-1, 4 * words)
    return (*(np.concatenate(d + [np.zeros(0, np.int64)]) for d in done[:3]), prog4, alt)


def _compact(alts, valid):
    """Moves each row's valid alternatives first and drops the columns no row uses."""
    if alts.shape[1] == 1:
        return alts, valid
    order = np.argsort(~valid, axis=1, kind="stable")
    alts = np.take_along_axis(alts, order[:, :, None], axis=1)
    valid = np.take_along_axis(valid, order, axis=1)
    k = max(1, int(valid.sum(axis=1).max(initial=1)))
    return alts[:, :k], valid[:, :k]


def _within(small, big) -> bool:
    """Whether the mask ``small`` (a tuple of words) is a subset of ``big``."""
    return all(a & ~b == 0 for a, b in zip(small, big, strict=True))


def _normal_alternatives(alts, valid):
    """(S uint32[N, W], alternatives uint32[N, K*W]): one form per set of alternatives.
    Alternatives that hold a smaller one are dropped; one left: it is S and the
    alternatives are zeros (always hold); several: S is their common bits and the
    alternatives are sorted, padded by repeating the last."""
    n, k, words = alts.shape
    s = alts[:, 0].copy()
    many = np.flatnonzero(valid.sum(axis=1) > 1)
    lists = []
    for i in many.tolist():
        rows = {tuple(x) for x in alts[i][valid[i]].tolist()}
        lists.append(sorted(r for r in rows if not any(_within(o, r) for o in rows if o != r)))
    width = max([1] + [len(x) for x in lists])
    out = np.zeros((n, width, words), np.uint32)
    for i, rows in zip(many.tolist(), lists, strict=True):
        arr = np.asarray(rows, dtype=np.uint32)
        if arr.shape[0] == 1:
            s[i] = arr[0]
            continue
        s[i] = np.bitwise_and.reduce(arr, axis=0)
        out[i, : arr.shape[0]] = arr
        out[i, arr.shape[0] :] = arr[-1]
    return s, out.reshape(n, width * words)


def reference_mask(t: BitsetTables, state: int, bits: np.ndarray) -> np.ndarray:
    """The runtime rule in NumPy: bool[V], the tokens allowed in ``state`` with bitset
    ``bits`` (uint32[W]); EOS where the state accepts."""
    nxt = t.next_state[state]
    p = t.programs[t.program[state]]  # [C, 4, W]
    u, s, c, a = p[:, 0], p[:, 1], p[:, 2], p[:, 3]
    ok = nxt >= 0
    ok &= ((bits & u) == 0).all(axis=1) & ((bits & s) == s).all(axis=1)
    alt = t.program_alts[t.program[state]]  # [C, K, W]
    ok &= ((bits & alt) == alt).all(axis=2).any(axis=1)
    after = (bits & ~c) | a
    tn = np.maximum(nxt, 0)
    ok &= t.live_always[tn] | ((t.live_mask[tn] & ~after) != 0).any(axis=1)
    mask = ok[t.token_class]
    mask[list(t.eos_ids)] = bool(t.accepting[state])
    return mask


def reference_advance(t: BitsetTables, state: int, bits: np.ndarray, token: int):
    """(next state, next bitset) after an allowed ``token`` (not EOS)."""
    c = t.token_class[token]
    p = t.programs[t.program[state, c]]
    return int(t.next_state[state, c]), (bits & ~p[2]) | p[3]


def minimize_bitset(t: BitsetTables) -> BitsetTables:
    """The minimal equivalent tables: states reachable from the start, merged by Moore
    refinement (initial blocks: accepting, always live, live mask; an edge's label: its
    class, next block and program), then equal class columns merged. For the sizes the
    design would ship (`compose_bitset` leaves the contracted byte DFA's states as they are);
    the masks and advances are those of ``t`` along every walk (tested)."""
    q = t.next_state.shape[0]
    keep = np.flatnonzero(_reachable(t.next_state, t.start))
    local = np.full(q + 1, -1, np.int64)
    local[keep] = np.arange(keep.shape[0])
    ns = local[t.next_state[keep]]  # -1 stays -1 (the last slot)
    prog = t.program[keep].astype(np.int64)
    num_p = max(int(t.programs.shape[0]), 1)
    label = np.concatenate(
        [t.accepting[keep, None], t.live_always[keep, None], t.live_mask[keep]], axis=1
    ).astype(np.int64)
    _, block = np.unique(label, axis=0, return_inverse=True)
    block = block.reshape(-1)
    weights = np.random.default_rng(0xB10C).integers(1, 2**63, size=ns.shape[1], dtype=np.uint64)
    count = int(block.max()) + 1
    while True:
        code = np.where(ns >= 0, block[np.maximum(ns, 0)] * num_p + prog, -1)
        h = (code.astype(np.uint64) + np.uint64(2)) @ weights
        h += block.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        _, first, new = np.unique(h, return_index=True, return_inverse=True)
        new = new.reshape(-1)
        # exact: every state's (block, row) is its new block's representative's
        rep = first[new]
        if not ((block == block[rep]).all() and (code == code[rep]).all()):  # pragma: no cover
            raise RuntimeError("bitset minimization hashing collided; please report this schema")
        block = new
        if new.max() + 1 == count:
            break
        count = int(new.max()) + 1
    reps = first
    next_state = np.where(ns[reps] >= 0, block[np.maximum(ns[reps], 0)], -1)
    program = prog[reps]
    code = np.where(next_state >= 0, next_state * num_p + program, -1)
    first_col, col_id = _dfa_ops.unique_columns(code)
    table = code[:, first_col]
    return BitsetTables(
        token_class=col_id[t.token_class].astype(np.int32),
        next_state=np.where(table >= 0, table // num_p, -1).astype(np.int32),
        program=np.where(table >= 0, table % num_p, 0).astype(np.int32),
        programs=t.programs,
        program_alts=t.program_alts,
        live_mask=t.live_mask[keep][reps],
        live_always=t.live_always[keep][reps],
        accepting=t.accepting[keep][reps],
        start=int(block[local[t.start]]),
        eos_ids=t.eos_ids,
        num_bits=t.num_bits,
    )
