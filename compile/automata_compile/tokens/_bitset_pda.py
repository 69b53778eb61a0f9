"""Bitset events in a grammar's root rule ∘ detokenizer → PDA token tables with programs.

A schema with grammar rules (schema-free values, recursive ``$ref``) whose any-order objects
all lie in the root rule (docs/any_order_bitset.md, "Schemas with grammar rules"): the
root's byte DFA has rule calls in columns ``256 + j`` (j < R) and events in ``256 + R + e``.
Its event chains are contracted as in `_bitset_compose` and the byte PDA of the contracted
root and the other rules composes with the vocabulary through the ordinary `compose_pda`
(the *base* tables: every token as if it crossed no event). The tokens holding a byte that
enters an event chain are then walked again from every boundary state with a symbolic stack
(as `_pda_walk` does) and their events composed into one program per outcome (a
context-independent edge, or a context-dependent one per popped context); tokens whose
outcomes carry a program get classes of their own, copies of their base class's columns with
the programs (an outcome whose program fails statically is dropped).

Rules other than the root hold no events, so a call leaves the bits as they are: the runtime
carries the stack and the bits side by side (`reference_pda_mask` / `reference_pda_advance`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from automata_compile.automata import (
    NUM_BYTES,
    ByteDFA,
    build_byte_pda,
    check_time,
)
from automata_compile.tokens._bitset_compose import (
    CLEAR,
    REQUIRE_ANY,
    SET,
    EventConflict,
    _contract,
    _first_events,
)
from automata_compile.tokens._pda_compose import _token_dfa, compose_pda
from automata_compile.tokens._pda_walk import byte_shifts, pop_symbols
from automata_compile.tokens._token_dfa import TokenDFA
from automata_compile.tokens._token_trie import trie_for

_FAIL = None  # an outcome whose program fails statically
_ZERO = (0, 0, 0, (0,))  # U, C, A, alternatives of S (Python ints)


@dataclasses.dataclass(frozen=True)
class BitsetPDATables:
    """PDA token tables whose edges also test and update a bitset per row.

    Attributes:
      tables: the token-level PDA (`TokenDFA` with the PDA block, dense).
      program: int32[Q, C], each context-independent edge's program id (0: no event).
      cd_program: int32[E], each context-dependent edge's program id.
      programs, program_alts, live_mask, live_always, num_bits, counted_objects: as in
        `BitsetTables` (states outside the root rule are always live).
    """

    tables: TokenDFA
    program: np.ndarray
    cd_program: np.ndarray
    programs: np.ndarray
    program_alts: np.ndarray
    live_mask: np.ndarray
    live_always: np.ndarray
    num_bits: int
    counted_objects: tuple = ()

    @property
    def words(self) -> int:
        return int(self.programs.shape[2])

    @property
    def start(self) -> int:
        return int(self.tables.start)


def _apply(prog, kind: int, alts: tuple):
    """``prog`` (U, C, A, S alternatives) then an event; `_FAIL` where it fails statically
    (`_bitset_compose._event_walk`, in Python ints)."""
    if prog is _FAIL:
        return _FAIL
    u, c, a, ss = prog
    if kind == SET:
        m = alts[0]
        if a & m:
            return _FAIL
        ss = tuple(s for s in ss if not s & m & ~c)
        if not ss:
            return _FAIL
        return (u | (m & ~c), c, a | m, ss)
    if kind == CLEAR:
        m = alts[0]
        return (u, c | m, a & ~m, ss)
    new = set()
    for s in ss:
        for r in alts:
            need = r & ~a
            if not need & (c | u):
                new.add(s | need)
    if not new:
        return _FAIL
    kept = tuple(sorted(x for x in new if not any(o != x and o & ~x == 0 for o in new)))
    return (u, c, a, kept)


class _EventSteps:
    """`_pda_walk.Walker.step` with a program per configuration: (state, pushed, popped,
    program) after each byte, the events of the root's byte edge taken composed in."""

    def __init__(self, pda, chain_of: dict, events: list):
        self.pda = pda
        self.kind, self.arg = pda.kind, pda.arg
        self.starts = pda.starts.tolist()
        self.rule_of = pda.rule_of.tolist()
        self.chain_of = chain_of
        self.events = events
        self.byte_memo: dict = {}
        self.step_memo: dict = {}
        self.ids: dict = {}
        self.configs: list = []
        self.hot: list = []
        self.alive: list = []  # per id: bool per byte, some configuration moves on it
        self.id_memo: dict = {}

    def byte_outcomes(self, q: int, b: int) -> tuple:
        """(popped, target, pushed, events) for byte ``b`` from ``q`` with nothing pushed yet:
        `_pda_walk.byte_shifts`, with the events of the root's byte edge taken."""
        key = (q, b)
        out = self.byte_memo.get(key)
        if out is None:
            arg = self.arg
            out = self.byte_memo[key] = tuple(
                (popped, int(arg[s, b]), pushed, self.chain_of.get((s, b), ()))
                for popped, s, pushed in byte_shifts(self.pda, self.starts, self.rule_of, q, b)
            )
        return out

    def step(self, configs: tuple, b: int) -> tuple:
        key = (configs, b)
        out = self.step_memo.get(key)
        if out is not None:
            return out
        new = []
        for q, pushed, popped, prog in configs:
            for pops, target, push, chain in self.byte_outcomes(q, b):
                after = pop_symbols(pushed, popped, pops)
                if after is None:
                    continue
                p = prog
                for e in chain:
                    p = _apply(p, *self.events[e])
                new.append((target, after[0] + push, after[1], p))
        out = self.step_memo[key] = tuple(sorted(set(new), key=repr))
        return out

    def intern(self, configs: tuple) -> int:
        """An id for ``configs`` (-1: none), numbered in `configs`; `hot` says whether one of
        them has crossed an event (a program other than zero, or failing)."""
        if not configs:
            return -1
        i = self.ids.get(configs)
        if i is None:
            i = self.ids[configs] = len(self.configs)
            self.configs.append(configs)
            self.hot.append(any(c[3] != _ZERO for c in configs))
            qs = [c[0] for c in configs]
            self.alive.append((self.kind[qs] != 0).any(axis=0).tolist())
        return i

    def step_id(self, i: int, b: int) -> int:
        """`step` on interned ids (memoized by ``i * 256 + b``)."""
        key = i * 256 + b
        out = self.id_memo.get(key)
        if out is None:
            out = self.id_memo[key] = self.intern(self.step(self.configs[i], b))
        return out


def _to_words(x: int, words: int) -> list:
    return [(x >> (32 * i)) & 0xFFFFFFFF for i in range(words)]


def compose_bitset_pda(
    grammar,
    root: ByteDFA,
    vocab,
    kinds,
    masks,
    num_bits: int,
    *,
    max_states: int | None = None,
    spec: str = "",
) -> BitsetPDATables:
    """The tables (see `BitsetPDATables`) of ``grammar`` whose root rule's byte DFA is
    ``root`` (columns: bytes, R rule calls, then event e of kind ``kinds[e]`` with mask
    ``masks[e]``, W uint32 words).

    Raises:
      EventConflict: an event state is not alone on its path, or has a rule call.
      GrammarConflictError and the other errors of `build_byte_pda` / `compose_pda`.
    """
    r = len(grammar.names)
    words = max(1, (num_bits + 31) // 32)
    masks = np.asarray(masks, dtype=np.uint32).reshape(len(kinds), words)
    kinds = list(kinds)
    trans = np.asarray(root.trans)
    byte, calls, evcols = (
        trans[:, :NUM_BYTES],
        trans[:, NUM_BYTES : NUM_BYTES + r],
        trans[:, NUM_BYTES + r :],
    )
    view = ByteDFA(
        trans=np.concatenate([byte, evcols], axis=1), accepting=root.accepting, start=root.start
    )
    ctrans, is_event, ev, ev_next, joins, end = _contract(view, kinds)
    if (calls[is_event] >= 0).any():
        at = np.flatnonzero(is_event & (calls >= 0).any(axis=1))
        raise EventConflict(
            "an event state has a rule call", np.flatnonzero((evcols[at] >= 0).any(axis=0))
        )
    ccalls = np.where(calls >= 0, end[np.maximum(calls, 0)], -1)
    ccalls = np.where(calls >= 0, ccalls, -1).astype(np.int32)
    croot = ByteDFA(
        trans=np.concatenate([ctrans, ccalls], axis=1).astype(np.int32),
        accepting=np.asarray(root.accepting),
        start=root.start,
    )
    pda = build_byte_pda(grammar, max_states=max_states, what="the schema", root=croot)
    trie = trie_for(vocab)
    base = compose_pda(pda, trie, vocab)
    # events as Python ints: (kind, alternatives)
    ints = [sum(int(w) << (32 * i) for i, w in enumerate(m)) for m in masks.tolist()]
    events = [(k, (ints[e],)) for e, k in enumerate(kinds)]
    events += [(REQUIRE_ANY, tuple(ints[e] for e in join)) for join in joins]
    kinds_ext = kinds + [REQUIRE_ANY] * len(joins)
    # each root byte edge into an event chain: the chain's events
    chain_of = {}
    for s, b in zip(*np.nonzero((byte >= 0) & is_event[np.maximum(byte, 0)]), strict=True):
        chain, x = [], int(byte[s, b])
        while is_event[x]:
            chain.append(int(ev[x]))
            x = int(ev_next[x])
        chain_of[(int(s), int(b))] = tuple(chain)
    # liveness (a state with a rule call is a value position: not a key position)
    acc = np.asarray(root.accepting, bool) | (calls >= 0).any(axis=1)
    always_root, key_events = _first_events(byte, is_event, ev, acc, kinds_ext)
    q = pda.num_states
    n_root = trans.shape[0]
    live_always = np.ones(q, bool)
    live_always[:n_root] = always_root
    live_int = [0] * q
    for s, k in enumerate(key_events):
        while k:
            e = (k & -k).bit_length() - 1
            live_int[s] |= ints[e]
            k &= k - 1
    # the event walk: tokens holding a byte that enters an event chain, from every boundary
    # state, over the trie nodes above them
    ev_bytes = sorted({b for _, b in chain_of})
    steps = _EventSteps(pda, chain_of, events)
    outs = _walk_event_tokens(steps, trie, base, ev_bytes)
    # static death at the end: a key position none of whose keys can be unset
    sig: dict = {}  # group -> {(state, popped): program}
    for (s, g), configs in outs.items():
        for target, _pushed, popped, prog in configs:
            if prog is not _FAIL and prog != _ZERO and not live_always[target]:
                if not live_int[target] & ~prog[2]:
                    prog = _FAIL
            if prog != _ZERO:
                sig.setdefault(g, {})[(s, popped)] = prog
    return _refined(base, vocab, trie, sig, live_always, live_int, num_bits, words, spec)


_MARKS: dict = {}


def _trie_marks(trie, ev_bytes: tuple) -> tuple:
    """Per trie level, as Python lists: keep (a terminal at or below whose path holds one of
    ``ev_bytes``) and cold (a child worth walking with no program yet: such a terminal and an
    event byte on its edge or below it). Cached per trie and byte set (one at a time)."""
    key = (id(trie), ev_bytes)
    hit = _MARKS.get(key)
    if hit is not None and hit[0] is trie:
        return hit[1]
    depth = trie.depth
    is_ev = np.zeros(256, bool)
    is_ev[list(ev_bytes)] = True
    path = [np.zeros(1, bool)]
    for d in range(1, depth + 1):
        path.append(path[d - 1][trie.parent[d]] | is_ev[trie.byte[d]])
    keep = [None] * (depth + 1)
    cold = [None] * (depth + 1)
    below = np.zeros(0, bool)
    ahead = np.zeros(0, bool)
    for d in range(depth, -1, -1):
        k = path[d] & (trie.terminal[d] >= 0)
        a = np.zeros(k.shape[0], bool)
        if d < depth:
            np.logical_or.at(k, trie.parent[d + 1], below)
            np.logical_or.at(a, trie.parent[d + 1], ahead)
        keep[d] = k
        if d > 0:
            cold[d] = k & (is_ev[trie.byte[d]] | a)
        below, ahead = k, (cold[d] if d > 0 else a)
    out = ([k.tolist() for k in keep], [None] + [c.tolist() for c in cold[1:]])
    _MARKS.clear()
    _MARKS[key] = (trie, out)
    return out


def _walk_event_tokens(steps: _EventSteps, trie, base: dict, ev_bytes) -> dict:
    """(boundary state, token group) -> configurations with programs, for the groups whose
    walk crosses an event (a program other than zero, or failing). A walk that has crossed
    none yet follows only the trie nodes with one of ``ev_bytes`` at or below them."""
    child_start, byte, terminal = trie.lists
    depth = trie.depth
    keep_l, cold_l = _trie_marks(trie, tuple(ev_bytes))
    ns = base["next_state"]
    boundary = np.flatnonzero((ns >= 0).any(axis=1))
    boundary = np.union1d(boundary, base["cd_state"]).tolist()
    out: dict = {}
    visited = 0
    step_id, hot, configs_of, alive = steps.step_id, steps.hot, steps.configs, steps.alive
    for s in boundary:
        todo = [(0, 0, steps.intern(((s, (), (), _ZERO),)))]
        while todo:
            visited += 1
            if visited & 4095 == 0:
                check_time("the bitset event walk of the grammar")
            d, node, cid = todo.pop()
            if d >= depth:
                continue
            kd = keep_l[d + 1] if hot[cid] else cold_l[d + 1]
            by, term, ok = byte[d + 1], terminal[d + 1], alive[cid]
            for child in range(child_start[d][node], child_start[d][node + 1]):
                if not (kd[child] and ok[by[child]]):
                    continue
                new = step_id(cid, by[child])
                if new < 0:
                    continue
                if hot[new] and term[child] >= 0:
                    out[(s, term[child])] = configs_of[new]
                todo.append((d + 1, child, new))
    return out


def _refined(base, vocab, trie, sig, live_always, live_int, num_bits, words, spec):
    """The base tables with one more class per (base class, programs) of the event tokens."""
    token_class = base["token_class"].astype(np.int64)
    group_class = np.zeros(trie.num_groups, np.int64)
    tg = trie.token_group
    emitted = tg >= 0
    group_class[tg[emitted]] = token_class[emitted]
    ns, push = base["next_state"], base["edge_push"]
    q, c0 = ns.shape
    new_of: dict = {}
    base_of = []
    group_new = {}
    for g, items in sig.items():
        key = (int(group_class[g]), tuple(sorted(items.items(), key=repr)))
        n = new_of.get(key)
        if n is None:
            n = new_of[key] = len(base_of)
            base_of.append(key)
        group_new[g] = n
    bcol = np.array([k[0] for k in base_of], np.int64)
    next_state = np.concatenate([ns, ns[:, bcol]], axis=1)
    edge_push = np.concatenate([push, push[:, bcol]], axis=1)
    program = np.zeros(next_state.shape, np.int32)
    # context-dependent edges: the base's, and each new class's copies of its base's
    cd = {k: base[k] for k in ("cd_state", "cd_class", "cd_pop", "cd_npop", "cd_target", "cd_push")}
    by_class: dict = {}
    for i, c in enumerate(cd["cd_class"].tolist()):
        by_class.setdefault(c, []).append(i)
    rows = list(range(cd["cd_class"].shape[0]))
    cls = cd["cd_class"].astype(np.int64).tolist()
    for n, b in enumerate(bcol.tolist()):
        for i in by_class.get(b, ()):
            rows.append(i)
            cls.append(c0 + n)
    rows_a = np.array(rows, np.int64)
    cd_state = cd["cd_state"][rows_a]
    cd_class = np.array(cls, np.int32)
    cd_pop, cd_npop = cd["cd_pop"][rows_a], cd["cd_npop"][rows_a]
    cd_target, cd_push = cd["cd_target"][rows_a], cd["cd_push"][rows_a]
    cd_program = np.zeros(rows_a.shape[0], np.int32)
    cd_alive = np.ones(rows_a.shape[0], bool)
    where = {}
    for i in range(rows_a.shape[0]):
        if cd_class[i] >= c0:
            pops = tuple(cd_pop[i, : cd_npop[i]].tolist())
            where[(int(cd_state[i]), int(cd_class[i]), pops)] = i
    # programs
    prog_id: dict = {_ZERO: 0}
    for n, (_b, items) in enumerate(base_of):
        col = c0 + n
        for (s, popped), prog in items:
            if next_state[s, col] >= 0 and not popped and (s, col, ()) not in where:
                if prog is _FAIL:
                    next_state[s, col] = -1
                    edge_push[s, col] = 0
                else:
                    program[s, col] = prog_id.setdefault(prog, len(prog_id))
                continue
            i = where[(s, col, popped)]
            if prog is _FAIL:
                cd_alive[i] = False
            else:
                cd_program[i] = prog_id.setdefault(prog, len(prog_id))
    keep = np.flatnonzero(cd_alive)
    order = keep[np.lexsort((cd_class[keep], cd_state[keep]))]
    # token classes
    new_class = np.full(trie.num_groups, -1, np.int64)
    for g, n in group_new.items():
        new_class[g] = c0 + n
    tc = token_class.copy()
    moved = emitted.copy()
    moved[emitted] = new_class[tg[emitted]] >= 0
    tc[moved] = new_class[tg[moved]]
    tables = dict(base)
    tables.update(
        token_class=tc.astype(np.int32),
        next_state=next_state.astype(np.int32),
        edge_push=edge_push.astype(np.int32),
        cd_state=cd_state[order].astype(np.int32),
        cd_class=cd_class[order],
        cd_pop=cd_pop[order],
        cd_npop=cd_npop[order],
        cd_target=cd_target[order],
        cd_push=cd_push[order],
    )
    cd_program = cd_program[order]
    # the programs as words
    progs = sorted(prog_id.items(), key=lambda kv: kv[1])
    k = max([1] + [len(p[3]) for p, _ in progs if len(p[3]) > 1])
    programs = np.zeros((len(progs), 4, words), np.uint32)
    alts = np.zeros((len(progs), k, words), np.uint32)
    for p, i in progs:
        u, c, a, ss = p
        s_all = ss[0]
        for x in ss[1:]:
            s_all &= x
        programs[i] = [_to_words(x, words) for x in (u, s_all, c, a)]
        if len(ss) > 1:
            for j in range(k):
                alts[i, j] = _to_words(ss[min(j, len(ss) - 1)], words)
    live_mask = np.array([_to_words(x, words) for x in live_int], np.uint32).reshape(-1, words)
    return BitsetPDATables(
        tables=_token_dfa(tables, vocab, spec_kind="json_schema", spec=spec),
        program=program,
        cd_program=cd_program,
        programs=programs,
        program_alts=alts,
        live_mask=live_mask,
        live_always=live_always,
        num_bits=num_bits,
    )


def _holds(t: BitsetPDATables, pid: int, target: int, bits: np.ndarray):
    """(whether program ``pid`` into ``target`` is allowed under ``bits``, the bits after)."""
    u, s, c, a = t.programs[pid]
    ok = not (bits & u).any() and ((bits & s) == s).all()
    alt = t.program_alts[pid]
    ok = ok and bool(((bits & alt) == alt).all(axis=1).any())
    after = (bits & ~c) | a
    live = t.live_always[target] or bool((t.live_mask[target] & ~after).any())
    return ok and live, after


def reference_pda_mask(t: BitsetPDATables, state: int, stack: tuple, bits) -> np.ndarray:
    """The runtime rule with a stack (bottom first) and a bitset: bool[V], EOS where the
    configuration accepts (as `TokenDFA.allowed`)."""
    tab = t.tables
    ns = tab.next_state[state]
    p = t.programs[t.program[state]]  # [C, 4, W]
    u, s, c, a = p[:, 0], p[:, 1], p[:, 2], p[:, 3]
    ok = (ns >= 0) & ((bits & u) == 0).all(axis=1) & ((bits & s) == s).all(axis=1)
    alt = t.program_alts[t.program[state]]  # [C, K, W]
    ok &= ((bits & alt) == alt).all(axis=2).any(axis=1)
    after = (bits & ~c) | a
    tn = np.maximum(ns, 0)
    ok &= t.live_always[tn] | ((t.live_mask[tn] & ~after) != 0).any(axis=1)
    for e in tab._cd_edges(state).tolist():
        if tab._pops_match(e, stack):
            good = _holds(t, int(t.cd_program[e]), int(tab.cd_target[e]), bits)[0]
            ok[tab.cd_class[e]] |= good
    mask = ok[tab.token_class]
    mask[list(tab.eos_ids)] = bool(tab.accepting[state]) and all(tab.accepting[s] for s in stack)
    return mask


def reference_pda_advance(t: BitsetPDATables, state: int, stack: tuple, bits, token: int):
    """(state, stack, bits) after an allowed ``token`` (not EOS)."""
    tab = t.tables
    c = int(tab.token_class[token])
    nxt = int(tab.next_state[state, c])
    if nxt >= 0:
        _, after = _holds(t, int(t.program[state, c]), nxt, bits)
        return nxt, tuple(stack) + tab._pushed(tab.edge_push[state, c]), after
    for e in tab._cd_edges(state).tolist():
        if tab.cd_class[e] == c and tab._pops_match(e, stack):
            _, after = _holds(t, int(t.cd_program[e]), int(tab.cd_target[e]), bits)
            kept = tuple(stack)[: len(stack) - int(tab.cd_npop[e])]
            return int(tab.cd_target[e]), kept + tab._pushed(tab.cd_push[e]), after
    raise ValueError("token not allowed")


__all__ = [
    "BitsetPDATables",
    "compose_bitset_pda",
    "reference_pda_advance",
    "reference_pda_mask",
]
