"""The subset construction (`_fsa.determinize`), vectorized one BFS level at a time.

The symbols are first cut into *classes*: maximal intervals that no NFA edge splits
(a JSON-Schema byte NFA has a few dozen). Each NFA state's edges become (class, target)
moves, and each edge target's epsilon closure (restricted to the states that matter: those
with edges, and the final state) is computed once. Then the DFA is built level by level:
for all states of a BFS level together, NumPy expands members → moves, groups the moves
into the distinct target sets (the classes of a state mostly share one), expands only
those into closures, and groups the result into the successor sets. Sets are hashed (a sum
of random 64-bit weights) and verified exactly against one representative per hash.
Python touches only the distinct successor sets of a level, to look them up by their
exact member bytes and number the new ones.

New states are numbered as the one-state-at-a-time construction numbers them (FIFO order,
successors in increasing symbol order), so the DFA is the same table, state for state
(an empty successor set, which that construction numbered as a state, is a dead edge here;
trimming makes the two equal).
"""

from __future__ import annotations

import array
import itertools
from typing import NamedTuple

import numpy as np

from automata_compile._ranges import ranges

DEAD = -1
# A level's arrays are not built past GUARD times the work budget (a memory guard: the
# budget itself is checked after the level, on the work a one-state-at-a-time construction
# would count at most).
GUARD = 4
# The epsilon closures of all edge targets are computed before the first level; their
# members (and the memoized closures of fan-out states) are not kept past CLOSURE_GUARD
# times the work budget (a memory guard: 128M members, about 2 GB, at the default budget;
# where it was not there, circle-ci's property sizing grew to 13 GB before any check).
CLOSURE_GUARD = 32
# A level of at most this many (member, class, target) moves is built in plain Python
# (`_small_level`): NumPy's per-call cost dominates there.
SMALL_LEVEL = 64


def determinize(
    nfa, start: int, final: int, num_symbols: int, check_time, *, classes=False, stats=None
):
    """(trans int32[Q, S], accepting bool[Q]): the subset construction from ``start``.

    With ``classes``, (table int32[Q, K], accepting, symbol_class int64[S]) instead: the
    table over symbol classes, ``trans = table[:, symbol_class]``.

    ``check_time(step)`` is called once per level. Work is the members, their edges and the
    members of each distinct successor set, never more than the one-state-at-a-time
    construction counted (which counted a successor set once per symbol interval of each
    state); it is checked after each level's new states are numbered (so a state budget is
    met first, as there), and, at `GUARD` times the budget, before a level's arrays are
    built, so a blow-up stops before its memory is spent. An empty successor set is no
    state: that edge is dead (the reference construction numbered an empty state, which
    trimming removes).

    ``stats``: a dict that receives, on success, ``work`` (the work counted), ``states``,
    ``moves_peak`` (the most moves of a level) and ``closure_peak`` (at least the closure
    sizes a level's distinct target sets sum to, as the guard checks them): what the
    budget checks saw (`_char_dfa` bounds a longer construction's checks with them).

    Raises:
      StateBudgetExceededError: more than ``nfa.budget.max_states`` DFA states, or more than
        ``nfa.budget.max_work`` units of work.
    """
    budget = nfa.budget
    n = len(nfa.edges)
    counts = np.fromiter(map(len, nfa.edges), np.int64, n)
    # (lo, hi, target) of every edge: one flat read of the ints, no list of tuples
    chain = itertools.chain.from_iterable
    flat = np.fromiter(chain(chain(nfa.edges)), np.int64, 3 * int(counts.sum())).reshape(-1, 3)
    src = np.repeat(np.arange(n, dtype=np.int64), counts)
    lo, hi, tgt = flat[:, 0], flat[:, 1], flat[:, 2]
    points = np.unique(np.concatenate([lo, hi + 1, [0, num_symbols]]))
    k = points.shape[0] - 1  # classes [points[c], points[c + 1])
    c0 = np.searchsorted(points, lo)
    span = np.searchsorted(points, hi + 1) - c0
    move_src = np.repeat(src, span)
    move_cls = ranges(c0, span)
    move_tgt = np.repeat(tgt, span)
    order = np.argsort(move_src, kind="stable")
    move_cls, move_tgt = move_cls[order], move_tgt[order]
    move_off = np.searchsorted(move_src[order], np.arange(n + 1))

    important = counts > 0
    important[final] = True
    check_time(step := "the subset construction")  # the arrays above: 4 s on renovate's pieces

    def tick(members: int) -> None:
        if members > CLOSURE_GUARD * budget.max_work:
            raise budget.work_exceeded("the epsilon closures of the subset construction")
        check_time("the epsilon closures")

    clo_off, clo_len, clo_mem = _closures(nfa.eps, np.append(tgt, start), important, n, tick)
    weights = np.random.default_rng(0x5B5E7).integers(1, 2**63, size=n, dtype=np.uint64)

    first = clo_mem[clo_off[start] : clo_off[start] + clo_len[start]]
    ids = {first.tobytes(): 0}
    accepting = [bool((first == final).any())]
    rows: list[np.ndarray] = []
    fr_mem, fr_len = first, np.array([first.shape[0]])
    work = 0
    moves_peak = closure_peak = 0
    max_closure = int(clo_len.max(initial=0))
    lists = None  # the tables as lists, for `_small_level` (built on first use)
    small = None  # the frontier as lists (members, sizes) while levels are small
    while True:
        if small is not None:  # the level's counts in plain Python, as below
            mem_l, len_l = small
            f = len(len_l)
            if not f:
                break
            off_l = lists.move_off
            work += len(mem_l) + sum([lists.counts[m] for m in mem_l])
            moves = sum([off_l[m + 1] - off_l[m] for m in mem_l])
        else:
            f = fr_len.shape[0]
            if not f:
                break
            m_cnt = move_off[fr_mem + 1] - move_off[fr_mem]
            work += fr_mem.shape[0] + int(counts[fr_mem].sum())
            moves = int(m_cnt.sum())
        if work + moves > GUARD * budget.max_work:  # memory guard; budget below
            raise budget.work_exceeded(step)
        moves_peak = max(moves_peak, moves)
        if moves <= SMALL_LEVEL:
            # (each target set's member is a move's target: a bound of its closures' sum)
            closure_peak = max(closure_peak, moves * max_closure)
            if lists is None:
                lists = _Lists.of(move_off, move_cls, move_tgt, clo_off, clo_len, clo_mem, counts)
            if small is None:
                small = fr_mem.tolist(), fr_len.tolist()
            row, new_mem, new_len, acc, work = _small_level(
                *small, k, lists, ids, budget, final, work, step
            )
            small = new_mem, new_len
            accepting.extend(acc)
            rows.append(row.reshape(f, k))
            if work > budget.max_work:
                raise budget.work_exceeded(step)
            check_time(step)
            continue
        if small is not None:  # back to arrays for a large level
            fr_mem, fr_len = np.array(small[0], np.int64), np.array(small[1], np.int64)
            small = None
            m_cnt = move_off[fr_mem + 1] - move_off[fr_mem]
        idx = ranges(move_off[fr_mem], m_cnt)
        fc = np.repeat(np.repeat(np.arange(f, dtype=np.int64), fr_len), m_cnt) * k + move_cls[idx]
        key = _sorted_unique(fc * n + move_tgt[idx])
        fc, t = key // n, key % n
        row = np.full(f * k, DEAD, np.int32)
        if fc.shape[0]:
            # Distinct target sets (many classes of a state share one), numbered by first
            # (parent, class); only their closures are expanded.
            t_starts, t_len, t_rep, t_inv = _distinct_sets(fc, t, weights)
            rank = np.empty(t_rep.shape[0], np.int64)
            rank[np.argsort(t_rep, kind="stable")] = np.arange(t_rep.shape[0])
            t_inv, t_rep = rank[t_inv], np.sort(t_rep)
            sel_len = t_len[t_rep]
            tt = t[ranges(t_starts[t_rep], sel_len)]
            c_cnt = clo_len[tt]
            closure_peak = max(closure_peak, int(c_cnt.sum()))
            if work + int(c_cnt.sum()) > GUARD * budget.max_work:
                raise budget.work_exceeded(step)
            tj = np.repeat(np.repeat(np.arange(t_rep.shape[0], dtype=np.int64), sel_len), c_cnt)
            key = _sorted_unique(tj * n + clo_mem[ranges(clo_off[tt], c_cnt)])
            grp, mem = key // n, key % n
            work += grp.shape[0]
            set_of = np.full(t_rep.shape[0], DEAD, np.int32)  # an empty closure: no state
            if grp.shape[0]:
                starts, g_len, rep, inv = _distinct_sets(grp, mem, weights)
                # Number new sets by their first (parent, class), as the FIFO construction does.
                set_id, new = _number_sets(rep, starts, g_len, mem, ids, budget, step)
                set_of[grp[starts]] = set_id[inv]
                new = np.array(new, np.int64)
                fr_len = g_len[rep[new]]
                fr_mem = mem[ranges(starts[rep[new]], fr_len)]
                has_final = np.add.reduceat((mem == final).astype(np.int64), starts) > 0
                accepting.extend(has_final[rep[new]].tolist())
            else:
                fr_len = np.zeros(0, np.int64)
            row[fc[t_starts]] = set_of[t_inv]
        else:
            fr_len = np.zeros(0, np.int64)
        rows.append(row.reshape(f, k))
        if work > budget.max_work:  # after the level's states, as a state budget comes first
            raise budget.work_exceeded(step)
        check_time(step)
    table = np.concatenate(rows)
    if stats is not None:
        stats.update(work=work, states=len(accepting), moves_peak=moves_peak)
        stats["closure_peak"] = closure_peak
    symbol_class = np.searchsorted(points, np.arange(num_symbols), side="right") - 1
    if classes:
        return table, np.array(accepting, bool), symbol_class
    return np.ascontiguousarray(table[:, symbol_class]), np.array(accepting, bool)


def _number_sets(rep, starts, g_len, mem, ids, budget, step):
    """Numbers the distinct sets of a level (``rep``: each one's first group) in the order
    of their first group, as `_fsa.Budget.number` does one at a time (a new set gets the
    next id; past ``max_states``, the same error at the same set), keyed by their member
    bytes. Returns (set_id int32[R], the indices of the new sets, in that order)."""
    order = np.argsort(rep, kind="stable")
    first = rep[order]
    buf = mem.astype(np.int64, copy=False).tobytes()  # 8 bytes a member, as `tobytes` keys
    get, max_states = ids.get, budget.max_states
    got, new = [], []
    for j, s, m in zip(order.tolist(), starts[first].tolist(), g_len[first].tolist(), strict=True):
        b = buf[8 * s : 8 * (s + m)]
        d = get(b)
        if d is None:
            d = len(ids)
            if d >= max_states:
                raise budget.states_exceeded(step)
            ids[b] = d
            new.append(j)
        got.append(d)
    set_id = np.empty(rep.shape[0], np.int32)
    set_id[order] = got
    return set_id, new


class _Lists(NamedTuple):
    """The move and closure tables as Python lists (`_small_level` reads them per item)."""

    move_off: list
    move_cls: list
    move_tgt: list
    clo_off: list
    clo_len: list
    clo_mem: list
    counts: list

    @classmethod
    def of(cls, *arrays: np.ndarray) -> _Lists:
        return cls(*(a.tolist() for a in arrays))


def _small_level(mem, lens, k, lists: _Lists, ids, budget, final, work, step):
    """One BFS level of `determinize` in plain Python, for a level of few moves (a chain of
    literal bytes is a level of one state and one move), where NumPy's per-call cost
    dominates. The same outcome as the vectorized level, item for item: the same row, the
    same sets numbered in the same order (first (parent, class)), the same work counted and
    the same budget checks in the same order.

    Returns (row int32[f * k], frontier members, frontier sizes (lists), accepting of the
    new sets, work).
    """
    move_off, move_cls, move_tgt, clo_off, clo_len, clo_mem, _ = lists
    # Target sets per (parent, class), in (parent, class) order.
    per_pc = []
    pos = 0
    for p, size in enumerate(lens):
        by_cls: dict[int, set] = {}
        for m in mem[pos : pos + size]:
            for i in range(move_off[m], move_off[m + 1]):
                c = move_cls[i]
                got = by_cls.get(c)
                if got is None:
                    by_cls[c] = {move_tgt[i]}
                else:
                    got.add(move_tgt[i])
        pos += size
        for c in sorted(by_cls):
            per_pc.append((p * k + c, tuple(sorted(by_cls[c]))))
    targets = dict.fromkeys(t for _, t in per_pc)  # distinct, in first-appearance order
    if per_pc:
        if work + sum(clo_len[t] for ts in targets for t in ts) > GUARD * budget.max_work:
            raise budget.work_exceeded(step)
    for ts in targets:
        union: set = set()
        for t in ts:
            union.update(clo_mem[clo_off[t] : clo_off[t] + clo_len[t]])
        targets[ts] = tuple(sorted(union))
        work += len(union)
    set_id: dict[tuple, int] = {}
    new_mem: list[int] = []
    new_len: list[int] = []
    acc: list[bool] = []
    for members in targets.values():
        if members and members not in set_id:  # an empty closure is no state
            sid, is_new = budget.number(ids, array.array("q", members).tobytes(), step)
            set_id[members] = sid
            if is_new:
                new_mem.extend(members)
                new_len.append(len(members))
                acc.append(final in members)
    row = np.full(len(lens) * k, DEAD, np.int32)
    for at, ts in per_pc:
        members = targets[ts]
        if members:
            row[at] = set_id[members]
    return row, new_mem, new_len, acc, work


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, sorted (a plain sort: faster than `np.unique` here)."""
    a = np.sort(a)
    return a[np.concatenate([[True], a[1:] != a[:-1]])] if a.shape[0] else a


# `_closures` keeps the closure of an epsilon fan-out (a state with several epsilon
# successors: an alternation's or a loop's entry, which many targets reach) once computed,
# computing it first where it is met less than this deep in such nested computations.
MEMO_DEPTH = 32


def _closures(eps, targets: np.ndarray, important: np.ndarray, n: int, tick=None):
    """CSR epsilon closures (important states only, sorted) of ``targets``: (off, len, mem)
    indexed by NFA state; states not in ``targets`` have length 0. ``tick(members)``, if
    given, is called every 1,024 targets, after a closure of more than 4,096 members and at
    the end with the members kept so far, the closures' and the memo's (it may raise).

    A search stops at a fan-out state whose closure is known and takes that closure whole
    (`MEMO_DEPTH`): the same sets as searching every state, without walking the members
    of an alternation again for every target that reaches it."""
    imp = important.tolist()
    memo: dict[int, frozenset] = {}
    busy: set[int] = set()  # fan-outs whose closure is being computed (a cycle: search on)
    kept = [0]  # the memo's members

    def important_reach(t: int, depth: int) -> set:
        seen, stack, known = {t}, [t], []
        while stack:
            for z in eps[stack.pop()]:
                if z in seen:
                    continue
                seen.add(z)
                m = memo.get(z)
                if m is None and depth < MEMO_DEPTH and len(eps[z]) > 1 and z not in busy:
                    busy.add(z)
                    m = memo[z] = frozenset(important_reach(z, depth + 1))
                    busy.discard(z)
                    kept[0] += len(m)
                if m is None:
                    stack.append(z)
                else:
                    known.append(m)
        out = {y for y in seen if imp[y]}
        for m in known:
            out.update(m)
        return out

    tlist = np.unique(targets).tolist()
    bounds = [0]  # the closures' ends in ``out``, in ``tlist`` order
    out: list[int] = []
    for t in tlist:
        if not eps[t]:
            if imp[t]:
                out.append(t)
        else:
            reach = important_reach(t, 0)
            out.extend(sorted(reach))
            if tick is not None and len(reach) > 4096:
                tick(len(out) + kept[0])
        bounds.append(len(out))
        if tick is not None and len(bounds) & 1023 == 0:
            tick(len(out) + kept[0])
    if tick is not None:
        tick(len(out) + kept[0])
    at = np.asarray(tlist, np.int64)
    ends = np.asarray(bounds, np.int64)
    off = np.zeros(n, np.int64)
    length = np.zeros(n, np.int64)
    off[at] = ends[:-1]
    length[at] = np.diff(ends)
    # `important_reach` refers to itself (a cycle the paused collector would keep): let go
    # of the memo now rather than at the next collection
    memo.clear()
    return off, length, np.array(out, np.int64)


def _distinct_sets(grp: np.ndarray, mem: np.ndarray, weights: np.ndarray):
    """Groups of sorted (group, member) pairs and their distinct member sets.

    Returns (starts, g_len, rep, inv): each group's offset and size, the first group of
    each distinct set, and each group's set. Sets are hashed (sum of random weights) and
    checked exactly against their representative; a collision falls back to exact keys.
    """
    starts = np.flatnonzero(np.concatenate([[True], grp[1:] != grp[:-1]]))
    g_len = np.diff(np.append(starts, grp.shape[0]))
    g_hash = np.add.reduceat(weights[mem], starts, dtype=np.uint64)
    _, rep, inv = np.unique(g_hash, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    if not _same_sets(mem, starts, g_len, rep[inv]):  # a 64-bit collision: 2**-64
        rep, inv = _exact_groups(mem, starts, g_len)
    return starts, g_len, rep, inv


def _same_sets(mem, starts, g_len, rep_start_of) -> bool:
    """Whether every group equals the group its hash picked as representative."""
    other = starts[rep_start_of]
    if not (g_len == g_len[rep_start_of]).all():
        return False
    return bool((mem[ranges(starts, g_len)] == mem[ranges(other, g_len)]).all())


def _exact_groups(mem, starts, g_len):
    """(first group of each distinct set, set of each group), by exact member bytes."""
    seen: dict[bytes, int] = {}
    rep, inv = [], []
    for g, (s, m) in enumerate(zip(starts.tolist(), g_len.tolist(), strict=True)):
        b = mem[s : s + m].tobytes()
        j = seen.get(b)
        if j is None:
            j = seen[b] = len(rep)
            rep.append(g)
        inv.append(j)
    return np.array(rep, np.int64), np.array(inv, np.int64)
