"""Walks of parts of a byte PDA, cached across compilations by the parts' structure.

Two kinds of part are walked on their own, renumbered canonically, and cached by a
digest of the renumbered part and the vocabulary's fingerprint:

* **rules**: a token walked from a state of rule R, stopped where it would pop below
  its own pushes (an *exit*, `_pda_walk`), depends only on R and the rules R calls
  (its *closure*), not on where R is called from. JSON Schemas share rules (a free
  value's ``json_array`` / ``json_object``). The exits are finished per compilation
  with the real call sites: the byte is stepped with the symbolic stack (branching
  over return states) and the rest of the subtree walked in Python.
* **loops**: a wide state inside a loop of shifts (a free string's content, its
  escapes) walks most of the trie without leaving the loop; that walk, stopped where
  a byte leaves the loop, depends only on the loop. Every free string is the same
  loop. Its exits (a closing quote and what follows in the token) are finished as
  lanes of the enclosing walk.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
import weakref

import numpy as np

from automata_compile.automata import CALL, DEAD, RETURN, SHIFT, BytePDA
from automata_compile.tokens._pda_walk import Walk, Walker
from automata_compile.tokens._token_trie import TokenTrie

# Cached walks (each holds its sparse entries, rows and the groups whose row is not the
# most common one: a median of ~0.3 MB, at most ~1.5 MB, for BFCL tools on Llama-3; 46 MB
# for 100 tools). The LRU keeps at most CACHE_SIZE walks and CACHE_BYTES of their arrays:
# a tool-call constraint has a rule per tool, and a request repeating 1,000 known tools
# must find them all here.
CACHE_SIZE = 8192
CACHE_BYTES = 1 << 30
# A wide state's walk comes from the loop cache when the trie nodes below the bytes that
# keep it in its loop exceed this share of all nodes (a free string's content: nearly all).
LOOP_SHARE = 0.02
# The wide states of one walk are walked with rows in chunks of at most this many: a row
# holds one entry per wide start, and thousands of starts that each take one common byte (a
# tool-call constraint's name trie: 9,209 at 1,000 tools) made rows of thousands of mostly
# dead entries, never few enough to hand off to lanes (1,000 BFCL tools, warm, without the
# tables: root walk 12 -> 6 s, normalize 6 -> 1.2 s; 1024 chosen, not tuned).
ROW_CHUNK = 1024
# Larger loops (an object whose free keys lead back to the next key) are schema-specific:
# their walk is no one else's, so they are walked with the rest.
MAX_LOOP_STATES = 64


@dataclasses.dataclass(frozen=True)
class _Closure:
    """Rule R and the rules it calls, renumbered: ``states[i]`` is local state i's global id.
    ``key`` digests the renumbered structure; the sub-PDA itself (`_closure_pda`) is built
    only when its walk is not cached."""

    rules: np.ndarray
    states: np.ndarray
    key: str
    whole: BytePDA  # the PDA the closure was taken from


@dataclasses.dataclass(frozen=True)
class _PartWalk:
    """The walks of a part, in its local numbers."""

    walks: tuple  # of `Walk`
    outcomes: tuple  # per local outcome id: ((target, pushed, popped),)
    contexts: tuple  # per local context id: (pushed, popped)


_CACHE: collections.OrderedDict[str, tuple[_PartWalk, int]] = collections.OrderedDict()
_LOCK = threading.Lock()
_cache_bytes = 0


def _nbytes(pw: _PartWalk) -> int:
    return sum(
        getattr(w, f.name).nbytes
        for w in pw.walks
        for f in dataclasses.fields(w)
        if isinstance(getattr(w, f.name), np.ndarray)
    )


def _cached(key: str, make) -> _PartWalk:
    global _cache_bytes
    with _LOCK:
        got = _CACHE.get(key)
        if got is not None:
            _CACHE.move_to_end(key)
            return got[0]
    got = make()
    size = _nbytes(got)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = (got, size)
            _cache_bytes += size
        while len(_CACHE) > 1 and (len(_CACHE) > CACHE_SIZE or _cache_bytes > CACHE_BYTES):
            _cache_bytes -= _CACHE.popitem(last=False)[1][1]
    return got


def clear_cache() -> None:
    """Empties the walk cache and the finished unit blocks built from it (`_unit_blocks`)."""
    global _cache_bytes
    with _LOCK:
        _CACHE.clear()
        _cache_bytes = 0
    from automata_compile.tokens import _unit_blocks  # it imports this module

    _unit_blocks.clear_cache()


def walk_states(walker: Walker, q0s, fingerprint: str, *, truncate: bool = False) -> list:
    """The walks of ``q0s``: wide states in a loop from the loop cache (one walk per kind
    of loop, for all the copies of it), the others walked here, together with the loops'
    exits."""
    q0s = np.asarray(q0s, np.int64)
    by_key: dict[str, list] = collections.defaultdict(list)
    subs = {}
    served = np.zeros(q0s.shape[0], bool)
    for idx, order, loop in _loops(walker, q0s):
        by_key[loop[2]].append(order)
        subs[loop[2]] = loop
        served[idx] = True
    parts, injected = [], collections.defaultdict(list)
    for digest, orders in by_key.items():
        sub, starts, _ = subs[digest]
        pw = _cached(
            f"{fingerprint}:loop:{digest}",
            lambda sub=sub, starts=starts: _walk_part(sub, walker.trie, fingerprint, starts),
        )
        (walk,) = pw.walks
        parts.append(_mapped(walk, pw, orders, walker))
        ex = walk.exits
        for d in np.unique(ex[:, 1]).tolist():
            e = ex[ex[:, 1] == d]
            child = e[:, 2]
            byte = walker.trie.byte[d][child].astype(np.int64)
            for order in orders:  # each copy of the loop exits on the same (node, byte)s
                start, state = order[e[:, 0]], order[e[:, 3]]
                injected[d].append((child, state, np.zeros_like(child), start, byte))
    lanes = {d: [np.concatenate(a) for a in zip(*v, strict=True)] for d, v in injected.items()}
    rest = q0s[~served]  # walked here: the lanes and the first chunk of rows with the exits
    wide = walker.wide(rest)
    chunks = np.split(rest[wide], np.arange(ROW_CHUNK, int(wide.sum()), ROW_CHUNK))
    chunks[0] = np.concatenate([rest[~wide], chunks[0]])
    parts[:0] = [
        walker.walk(c, truncate=truncate, injected=lanes if i == 0 else None)
        for i, c in enumerate(chunks)
    ]
    return parts


def rule_walks(
    pda: BytePDA,
    rule: int,
    trie: TokenTrie,
    fingerprint: str,
    walker: Walker,
    min_wide_bytes: int = 1,
) -> list:
    """The walks of every live state of ``rule`` (not the start rule), in ``pda``'s numbers,
    their exits finished with ``walker`` (a `Walker` of ``pda``, which interns the outcomes).
    ``min_wide_bytes``: see `_pda_walk.MIN_WIDE_BYTES` (a walk made on a cache miss; the
    cache keeps either form: they give the same tables)."""
    closure = _closure(pda, rule)
    key = f"{fingerprint}:rule:{closure.key}"
    pw = _cached(
        key, lambda: _walk_part(_closure_pda(closure), trie, fingerprint, None, min_wide_bytes)
    )
    return [_to_global(w, pw, closure.states, walker) for w in pw.walks]


def _rule_starts(pda: BytePDA) -> np.ndarray:
    """int64[R + 1]: the first state of each rule (rules' states are contiguous), kept per
    PDA while it lives (a tool-call constraint's thousands of rules each ask)."""
    key = id(pda)
    hit = _FIRST.get(key)
    if hit is not None and hit[0]() is pda:
        return hit[1]
    first = np.searchsorted(pda.rule_of, np.arange(len(pda.names) + 1))
    _FIRST[key] = (weakref.ref(pda, lambda _, key=key: _FIRST.pop(key, None)), first)
    return first


_FIRST: dict = {}


def _closure(pda: BytePDA, rule: int) -> _Closure:
    kind, arg = pda.kind, pda.arg
    first = _rule_starts(pda)
    order, seen = [rule], {rule}
    i = 0
    while i < len(order):
        r = order[i]
        lo, hi = first[r], first[r + 1]
        calls = arg[lo:hi][kind[lo:hi] == CALL]  # row-major: by state, then byte
        for j in dict.fromkeys(calls.tolist()):
            if j not in seen:
                seen.add(j)
                order.append(j)
        i += 1
    rules = np.array(order, np.int64)
    sizes = first[rules + 1] - first[rules]
    states = np.concatenate([np.arange(first[r], first[r + 1]) for r in order])
    local, rule_local = _local_numbers(pda, rules, states)
    # The key digests the renumbered (kind, arg, ret) at every entry that is not dead with no
    # return state: the dense arrays of `_closure_pda` hold exactly that plus -1 / 0 elsewhere,
    # so equal keys mean equal sub-PDAs, for a fraction of the bytes (most bytes are dead).
    k = kind[states]
    r = pda.ret[states]
    q, b = np.nonzero((k != 0) | (r >= 0))
    kv = k[q, b]
    g = arg[states[q], b].astype(np.int64)
    delta = _in_rule(states)[q, 0]  # local - global of the entry's state
    av = np.where(kv == SHIFT, g + delta, -1)
    av[kv == CALL] = rule_local(g[kv == CALL])
    rv = r[q, b].astype(np.int64)
    rv = np.where(rv >= 0, rv + delta, -1)
    digest = hashlib.blake2b(digest_size=16)
    for x in (sizes.astype(np.int64), local(pda.starts[rules]), q * 256 + b, kv, av, rv):
        digest.update(np.ascontiguousarray(x, np.int64).tobytes())
        digest.update(b"|")
    return _Closure(rules, states, digest.hexdigest(), pda)


def _local_numbers(pda: BytePDA, rules: np.ndarray, states: np.ndarray):
    """(local id of global states, local id of global rules): functions of int arrays, for
    the states and rules of the closure (``states``: its rules' states, rule by rule, in
    ``rules``' order); anything else maps to some number (the callers mask it). Binary
    searches over the closure's rules, not ``int[Q]`` lookups: one per rule of a constraint
    with thousands of rules and states was quadratic."""
    first = _rule_starts(pda)
    lo = first[rules]
    size = first[rules + 1] - lo
    base = np.cumsum(size) - size
    by_lo = np.argsort(lo, kind="stable")
    lo_sorted, base_sorted = lo[by_lo], base[by_lo]
    rank = np.argsort(rules, kind="stable")
    rules_sorted = rules[rank]

    def local(g):
        i = np.searchsorted(lo_sorted, g, side="right") - 1
        return base_sorted[i] + (g - lo_sorted[i])

    def rule_local(g):
        return rank[np.minimum(np.searchsorted(rules_sorted, g), rank.shape[0] - 1)]

    return local, rule_local


def _closure_pda(closure: _Closure) -> BytePDA:
    """The closure's rules as a PDA of their own, in local numbers (rule 0 = the rule)."""
    pda, rules, states = closure.whole, closure.rules, closure.states
    order = rules.tolist()
    local, rule_local = _local_numbers(pda, rules, states)
    first = _rule_starts(pda)
    sizes = first[rules + 1] - first[rules]
    k = pda.kind[states]
    g = pda.arg[states]
    delta = _in_rule(states)
    shift = np.where(k == SHIFT, g + delta, -1).astype(np.int32)
    a = shift.copy()
    call = k == CALL
    a[call] = rule_local(g[call])
    r = pda.ret[states]
    r = np.where(r >= 0, r + delta, -1).astype(np.int32)
    starts = local(pda.starts[rules])
    return BytePDA(
        names=tuple(pda.names[j] for j in order),
        rule_of=np.repeat(np.arange(rules.shape[0]), sizes).astype(np.int32),
        starts=starts.astype(np.int32),
        shift=shift,
        ends=pda.ends[states],
        kind=k,
        arg=a,
        ret=r,
        returns=tuple(() for _ in order),  # a truncated walk never pops below its own pushes
    )


def _in_rule(states: np.ndarray) -> np.ndarray:
    """int32[n, 1]: local minus global number of each of a closure's ``states``. A SHIFT's
    target and a pushed return state lie in their state's rule (`BytePDA`), whose states
    are contiguous in both numberings, so their local number is the global one plus this
    (no search per entry: with closures of up to 76,000 states x 256 bytes, that search
    took 10 s of gitlab-ci.json's outlined rules)."""
    return (np.arange(states.shape[0], dtype=np.int64) - states).astype(np.int32)[:, None]


def _walk_part(
    sub: BytePDA, trie: TokenTrie, fingerprint: str, starts=None, min_wide_bytes: int = 1
) -> _PartWalk:
    """Walks ``starts`` of ``sub`` (default: rule 0's live states, with loops from the
    cache), stopped at exits."""
    walker = Walker(sub, trie, min_wide_bytes=min_wide_bytes)
    if starts is None:
        live = np.flatnonzero((sub.rule_of == 0) & (sub.kind != 0).any(axis=1))
        walks = walk_states(walker, live, fingerprint, truncate=True)
    else:
        walks = [walker.walk(starts, truncate=True)]
    return _PartWalk(tuple(walks), tuple(walker.outcomes), tuple(walker.contexts))


def _outcome_map(pw: _PartWalk, gmap: list, walker: Walker) -> np.ndarray:
    """Global outcome id of each of ``pw``'s local ones (``gmap``: local state -> global)."""

    def glob(t):
        return tuple(gmap[s] for s in t)

    ids = [
        walker.intern(tuple((gmap[t], glob(pu), glob(po)) for t, pu, po in outs))
        for outs in pw.outcomes
    ]
    return np.array(ids, np.int64).reshape(-1)


def _mapped(w: Walk, pw: _PartWalk, copies: list, walker: Walker) -> Walk:
    """``w`` (of part ``pw``) in the whole PDA's numbers, once per copy of the part
    (``copies``: each copy's global state per local state), without its exits."""
    q_count = walker.pda.num_states
    src, oid, wide, rows = [], [], [], []
    for states in copies:
        omap = _outcome_map(pw, states.tolist(), walker)
        src.append(states[w.src])
        oid.append(omap[w.oid])
        wide.append(states[w.wide])
        rows.append(np.append(states, q_count)[w.rows])  # the local sink: last state + 1
    return Walk(
        np.concatenate(src), np.tile(w.group, len(copies)), np.concatenate(oid),
        np.concatenate(wide), np.concatenate(rows, axis=1).astype(np.int32), w.default_row,
        w.other_group, w.other_row, q_count, np.zeros((0, 5), np.int64),
    )  # fmt: skip


def _to_global(w: Walk, pw: _PartWalk, states: np.ndarray, walker: Walker) -> Walk:
    """``w`` (of a rule's part ``pw``) in the whole PDA's numbers, its exits finished."""
    gmap = states.tolist()
    out = _mapped(w, pw, [states], walker)
    extra: tuple[list, list, list] = ([], [], [])
    trie_byte = walker.trie.byte
    stepped: dict[tuple, tuple] = {}  # many exits share (node, state, context): step once
    for s, d, node, c, x in w.exits.tolist():
        configs = stepped.get((d, node, c, x))
        if configs is None:
            pushed, _ = pw.contexts[x]
            configs = stepped[d, node, c, x] = walker.step(
                ((gmap[c], tuple(gmap[p] for p in pushed), ()),), int(trie_byte[d][node])
            )
        if configs:
            walker.walk_subtree(d, node, configs, gmap[s], extra)
    if not extra[0]:
        return out
    return dataclasses.replace(
        out,
        src=np.concatenate([out.src, np.array(extra[0], np.int64)]),
        group=np.concatenate([out.group, np.array(extra[1], np.int64)]),
        oid=np.concatenate([out.oid, np.array(extra[2], np.int64)]),
    )


# -- loops ----------------------------------------------------------------------------------------


def _loops(walker: Walker, q0s: np.ndarray):
    """Yields (indices in ``q0s``, the loop's states in BFS order, (sub-PDA, its starts,
    digest)) for each loop of shifts (strongly connected component, up to ``MAX_LOOP_STATES``) holding
    wide states of ``q0s`` whose walks mostly stay in it; those are the sub-PDA's starts.

    (Loops drawn among heavy states only, to keep a string inside an array body its own
    loop, walked 1.7-3x slower on the suite's schemas: more tokens leave such a loop and
    come back, through escapes and multi-byte characters, and are walked per compile.)
    """
    pda, trie = walker.pda, walker.trie
    wide = np.flatnonzero(walker.wide(q0s))
    if wide.size == 0:
        return
    rules = np.unique(pda.rule_of[q0s])
    key = ("loops", rules.tobytes())
    if key not in walker.memo:  # only the rules walked: the frame of 1,000 tools, not its tools
        walker.memo[key] = _components(pda, np.flatnonzero(np.isin(pda.rule_of, rules)))
    comp = walker.memo[key]
    size = np.bincount(comp)
    q = q0s[wide]
    q_wide = wide[size[comp[q]] <= MAX_LOOP_STATES]
    q = q0s[q_wide]
    inside = (pda.kind[q] == SHIFT) & (comp[np.maximum(pda.arg[q], 0)] == comp[q][:, None])
    weight = inside.astype(np.int64) @ trie.first_byte_nodes
    keep = weight > LOOP_SHARE * trie.num_nodes
    q_wide, q, weight = q_wide[keep], q[keep], weight[keep]
    for c in np.unique(comp[q]).tolist():
        m = np.flatnonzero(comp[q] == c)
        root = int(q[m[np.argmax(weight[m])]])  # the heaviest first: a canonical BFS root
        order = _bfs(pda.kind, pda.arg, comp, root)
        yield q_wide[m], order, _loop_pda(pda, order, q[m])


def _components(pda: BytePDA, states: np.ndarray | None = None) -> np.ndarray:
    """int64[Q]: the strongly connected component of each state in the graph of shifts
    (Tarjan's algorithm, iterative), computed for ``states`` (ascending; default: all).
    Shifts never leave a rule, so for the states of whole rules these are the whole PDA's
    components, in the same relative order; every other state is a component of its own."""
    q_count, kind, arg = pda.num_states, pda.kind, pda.arg
    sub = np.arange(q_count) if states is None else np.asarray(states, np.int64)
    qq, b = np.nonzero(kind[sub] == SHIFT)
    q = sub[qq]
    pairs = np.unique(q.astype(np.int64) * q_count + arg[q, b])
    offs = np.searchsorted(pairs // q_count, np.arange(q_count + 1)).tolist()
    adj = (pairs % q_count).tolist()
    index, low = [-1] * q_count, [0] * q_count
    on, comp, stack = [False] * q_count, [-1] * q_count, []
    n = c = 0
    for root in sub.tolist():
        if index[root] >= 0:
            continue
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on[root] = True
        work = [[root, offs[root]]]
        while work:
            top = work[-1]
            v, i = top
            if i < offs[v + 1]:
                top[1] = i + 1
                w = adj[i]
                if index[w] < 0:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on[w] = True
                    work.append([w, offs[w]])
                elif on[w] and index[w] < low[v]:
                    low[v] = index[w]
                continue
            work.pop()
            if work and low[v] < low[work[-1][0]]:
                low[work[-1][0]] = low[v]
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp[w] = c
                    if w == v:
                        break
                c += 1
    out = np.array(comp, np.int64)
    rest = out < 0  # states outside ``states``: their own components, after the others
    out[rest] = c + np.arange(int(rest.sum()))
    return out


def _bfs(kind, arg, comp, q: int) -> np.ndarray:
    """The states of ``q``'s loop in BFS order from ``q`` (bytes ascending)."""
    order, seen = [q], {q}
    i = 0
    while i < len(order):
        s = order[i]
        t = arg[s][(kind[s] == SHIFT)]
        for x in dict.fromkeys(t.tolist()):
            if x not in seen and comp[x] == comp[q]:
                seen.add(x)
                order.append(x)
        i += 1
    return np.array(order, np.int64)


def _loop_pda(pda: BytePDA, order: np.ndarray, starts: np.ndarray) -> tuple:
    """The loop as a one-rule PDA: shifts inside it kept, every other move a return (an
    exit of the truncated walk); ``starts`` in its numbers; and a digest of both."""
    local = np.full(pda.num_states, -1, np.int64)
    local[order] = np.arange(order.shape[0])
    k = pda.kind[order]
    t = np.where(k == SHIFT, local[np.maximum(pda.arg[order], 0)], -1)
    inside = (k == SHIFT) & (t >= 0)
    kind = np.where(inside, SHIFT, np.where(k == DEAD, DEAD, RETURN)).astype(pda.kind.dtype)
    arg = np.where(inside, t, -1).astype(np.int32)
    n = order.shape[0]
    sub = BytePDA(
        names=("loop",),
        rule_of=np.zeros(n, np.int32),
        starts=np.zeros(1, np.int32),
        shift=arg,
        ends=np.zeros(n, bool),
        kind=kind,
        arg=arg,
        ret=np.full(arg.shape, -1, np.int32),
        returns=((),),
    )
    local_starts = np.sort(local[starts])
    digest = hashlib.blake2b(
        kind.tobytes() + arg.tobytes() + local_starts.tobytes(), digest_size=16
    )
    return sub, local_starts, digest.hexdigest()
