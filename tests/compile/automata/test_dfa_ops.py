"""`automata._dfa_ops`: trimming, restriction, minimization and column dedup on dense tables.

Random dense DFAs (``int32[Q, S]``, -1 = no edge) are judged by what they accept: every
string of up to ``Q + 1`` symbols, run directly on the tables (a language of a Q-state
DFA is non-empty iff it holds a string shorter than Q), and exact equivalence by a
search of the pairs of states two DFAs reach on the same strings. Minimality is
checked against a brute-force Myhill-Nerode count: the number of distinct residual
languages of the reachable states, each told apart by strings of up to ``Q`` symbols.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from automata_compile.automata import _dfa_ops


@st.composite
def dense_dfas(draw, max_states: int = 6, max_symbols: int = 3):
    q = draw(st.integers(1, max_states))
    s = draw(st.integers(1, max_symbols))
    cells = draw(st.lists(st.integers(-1, q - 1), min_size=q * s, max_size=q * s))
    trans = np.array(cells, np.int32).reshape(q, s)
    accepting = np.array(draw(st.lists(st.booleans(), min_size=q, max_size=q)), bool)
    start = draw(st.integers(0, q - 1))
    return trans, accepting, start


def run(trans, accepting, start, word) -> bool:
    q = start
    for a in word:
        q = int(trans[q, a])
        if q < 0:
            return False
    return bool(accepting[q])


def words(num_symbols: int, max_len: int):
    return [w for n in range(max_len + 1) for w in itertools.product(range(num_symbols), repeat=n)]


def language(dfa, ws) -> set:
    trans, accepting, start = dfa[:3]
    return {w for w in ws if run(trans, accepting, start, w)}


def equivalent(a, b) -> bool:
    """Exact equivalence: no reachable pair of states (-1 = dead) disagrees on acceptance."""
    (ta, aa, sa), (tb, ab, sb) = a[:3], b[:3]
    seen, todo = {(sa, sb)}, [(sa, sb)]
    while todo:
        p, q = todo.pop()
        if (p >= 0 and bool(aa[p])) != (q >= 0 and bool(ab[q])):
            return False
        for sym in range(ta.shape[1]):
            nxt = (int(ta[p, sym]) if p >= 0 else -1, int(tb[q, sym]) if q >= 0 else -1)
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return True


def reachable(trans, start) -> set[int]:
    seen, todo = {start}, [start]
    while todo:
        q = todo.pop()
        for t in trans[q].tolist():
            if t >= 0 and t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


def nerode_classes(trans, accepting, start) -> int:
    """Distinct non-empty residual languages of the reachable states (brute force)."""
    q, s = trans.shape
    ws = words(s, q)
    residuals = {
        frozenset(w for w in ws if run(trans, accepting, r, w)) for r in reachable(trans, start)
    }
    residuals.discard(frozenset())
    return len(residuals)


SETTINGS = settings(max_examples=100, deadline=None)


@SETTINGS
@given(dfa=dense_dfas())
def test_trim_keeps_the_language_and_only_useful_states(dfa):
    trans, accepting, start = dfa
    q, s = trans.shape
    ws = words(s, q + 1)
    want = language(dfa, ws)
    out = _dfa_ops.trim(trans, accepting, start, return_kept=True)
    if out is None:
        assert not want  # empty iff no word shorter than Q is accepted
        return
    t2, a2, s2, kept = out
    assert t2.dtype == np.int32 and kept[s2] == start
    assert kept.tolist() == sorted(kept.tolist())  # the kept states keep their order
    assert language((t2, a2, s2), ws) == want
    assert equivalent((t2, a2, s2), dfa)
    # every kept state is reachable from the start and can reach acceptance
    assert reachable(t2, s2) == set(range(t2.shape[0]))
    for r in range(t2.shape[0]):
        assert language((t2, a2, r), words(s, t2.shape[0])), r
    # kept maps new ids to old ones: the same transitions, renumbered
    new_of = {int(old): new for new, old in enumerate(kept.tolist())}
    for new, old in enumerate(kept.tolist()):
        assert a2[new] == accepting[old]
        for a in range(s):
            t = int(trans[old, a])
            assert t2[new, a] == new_of.get(t, -1)


@SETTINGS
@given(dfa=dense_dfas(), data=st.data())
def test_restrict_drops_exactly_the_other_states(dfa, data):
    trans, accepting, start = dfa
    q, s = trans.shape
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=q, max_size=q)), bool)
    keep[start] = True
    t2, a2, s2 = _dfa_ops.restrict(trans, accepting, start, keep)
    assert t2.shape == (int(keep.sum()), s)
    # the restricted DFA accepts a word iff the original's run stays among the kept states
    for w in words(s, q + 1):
        cur, ok = start, True
        for a in w:
            cur = int(trans[cur, a])
            if cur < 0 or not keep[cur]:
                ok = False
                break
        assert run(t2, a2, s2, w) == (ok and bool(accepting[cur])), w


@SETTINGS
@given(dfa=dense_dfas())
def test_minimize_gives_the_minimal_equivalent_dfa(dfa):
    trans, accepting, start = dfa
    trimmed = _dfa_ops.trim(trans, accepting, start)
    if trimmed is None:
        return
    t, a, s0 = trimmed
    m_trans, m_acc, m_start, block = _dfa_ops.minimize(t, a, s0)
    assert equivalent((m_trans, m_acc, m_start), (t, a, s0))
    ws = words(t.shape[1], t.shape[0] + 1)
    assert language((m_trans, m_acc, m_start), ws) == language((t, a, s0), ws)
    assert m_trans.shape[0] == nerode_classes(t, a, s0)
    # block is a homomorphism onto the minimal DFA
    assert block.shape == (t.shape[0],) and m_start == block[s0]
    for r in range(t.shape[0]):
        assert m_acc[block[r]] == a[r]
        for sym in range(t.shape[1]):
            nxt = int(t[r, sym])
            assert m_trans[block[r], sym] == (block[nxt] if nxt >= 0 else -1)


def _moore_full_rounds(trans, accepting, weights):
    """`_dfa_ops.minimize`'s refinement as it was first written: every round sorts every
    state by (block, signature). Returns (rounds, block) before the final renumbering."""
    q = trans.shape[0]
    src, sym = np.nonzero(trans >= 0)
    dst = trans[src, sym]
    block = accepting.astype(np.int64)
    if block.min() == 1:
        block[:] = 0
    num_blocks = int(block.max()) + 1
    rounds = 0
    while True:
        rounds += 1
        sig = np.zeros(q, dtype=np.uint64)
        np.add.at(sig, src, weights[sym] * (block[dst] + 1).astype(np.uint64))
        order = np.lexsort((sig, block))
        b_sorted, s_sorted = block[order], sig[order]
        starts_block = np.ones(q, dtype=bool)
        starts_block[1:] = b_sorted[1:] != b_sorted[:-1]
        starts_group = starts_block.copy()
        starts_group[1:] |= s_sorted[1:] != s_sorted[:-1]
        count = int(starts_group.sum())
        if count == num_blocks:
            return rounds, block
        is_new = starts_group & ~starts_block
        group_id = np.where(starts_block, b_sorted, num_blocks + np.cumsum(is_new) - 1)
        group_id = group_id[np.maximum.accumulate(np.where(starts_group, np.arange(q), 0))]
        block = np.empty_like(block)
        block[order] = group_id
        num_blocks = count


# Every state accepting after the trim: the first count used to start from two block ids,
# and a later split gave a new block an id already in use (found by hypothesis).
_ALL_ACCEPTING = (
    np.array([[0, 0, 1], [4, 0, 2], [-1, 0, 0], [0, 0, 0], [0, 0, -1], [0, 0, 0]], np.int32),
    np.array([True, True, True, False, True, False]),
    0,
)


@SETTINGS
@given(dfa=dense_dfas(max_states=24, max_symbols=4))
@example(dfa=_ALL_ACCEPTING)
def test_minimize_rounds_match_a_full_refinement(dfa):
    """Rounds that sort only the blocks a changed signature can split give the blocks
    (and the round count, which the work budget charges) of full rounds."""
    trimmed = _dfa_ops.trim(*dfa)
    if trimmed is None:
        return
    t, a, s0 = trimmed
    w = _dfa_ops.symbol_weights(t.shape[1])
    rounds, ref = _moore_full_rounds(t, a, w)
    ticks = []
    *_, block = _dfa_ops.minimize(t, a, s0, tick=lambda: ticks.append(1))
    ref = _dfa_ops._verify_or_refine(t, a, _dfa_ops._first_member_order(ref))
    assert np.array_equal(block, ref) and len(ticks) == rounds


@pytest.mark.parametrize("all_accepting", [False, True])
def test_minimize_rounds_match_a_full_refinement_on_larger_tables(all_accepting):
    """As above on random tables of up to 300 states (all accepting: one first block)."""
    rng = np.random.default_rng(11)
    for _ in range(40):
        q, s = int(rng.integers(2, 300)), int(rng.integers(1, 6))
        trans = rng.integers(-1, q, size=(q, s)).astype(np.int32)
        accepting = np.ones(q, bool) if all_accepting else rng.random(q) < 0.3
        trimmed = _dfa_ops.trim(trans, accepting, 0)
        if trimmed is None:
            continue
        t, a, s0 = trimmed
        rounds, ref = _moore_full_rounds(t, a, _dfa_ops.symbol_weights(s))
        ticks = []
        *_, block = _dfa_ops.minimize(t, a, s0, tick=functools.partial(ticks.append, 1))
        ref = _dfa_ops._verify_or_refine(t, a, _dfa_ops._first_member_order(ref))
        assert np.array_equal(block, ref) and len(ticks) == rounds


def test_minimize_merges_a_redundant_cycle():
    # two copies of (ab)* interleaved: states 0,2 and 1,3 are equivalent
    trans = np.array([[1, -1], [-1, 2], [3, -1], [-1, 0]], np.int32)
    accepting = np.array([True, False, True, False])
    m_trans, m_acc, m_start, block = _dfa_ops.minimize(trans, accepting, 0)
    assert m_trans.shape[0] == 2
    assert block[0] == block[2] and block[1] == block[3] and block[0] != block[1]
    assert run(m_trans, m_acc, m_start, [0, 1, 0, 1]) and not run(m_trans, m_acc, m_start, [0])


def test_minimize_with_class_weights_matches_the_full_table():
    # symbols 1 and 2 always move alike: a table over classes {0}, {1, 2} with summed weights
    # must give the same blocks as the full table
    rng = np.random.default_rng(7)
    q = 12
    col0 = rng.integers(0, q, q)
    col1 = rng.integers(0, q, q)
    full = np.stack([col0, col1, col1], axis=1).astype(np.int32)
    accepting = rng.random(q) < 0.4
    accepting[0] = True
    w = _dfa_ops.symbol_weights(3)
    classes = full[:, :2].copy()
    cw = np.array([w[0], w[1] + w[2]], np.uint64)
    *_, block_full = _dfa_ops.minimize(full, accepting, 0)
    *_, block_cls = _dfa_ops.minimize(classes, accepting, 0, weights=cw)
    assert np.array_equal(block_full, block_cls)


def test_minimize_work_budget():
    # A chain of n states needs about n refinement rounds; each sorts only the state whose
    # successor just split off, so the work is linear (it was rounds x states).
    n = 50
    trans = np.full((n, 1), -1, np.int32)
    trans[:-1, 0] = np.arange(1, n)
    accepting = np.zeros(n, bool)
    accepting[-1] = True
    with pytest.raises(_dfa_ops.WorkBudgetExceeded):
        _dfa_ops.minimize(trans, accepting, 0, max_work=n + 10)
    ticks = []
    out = _dfa_ops.minimize(trans, accepting, 0, max_work=3 * n, tick=lambda: ticks.append(1))
    assert out[0].shape[0] == n and len(ticks) >= n - 1


def test_minimize_empty_table():
    trans = np.zeros((0, 3), np.int32)
    out = _dfa_ops.minimize(trans, np.zeros(0, bool), 0)
    assert out[0].shape == (0, 3) and out[3].shape == (0,)


@settings(max_examples=100, deadline=None)
@given(
    mat=st.integers(1, 5).flatmap(
        lambda r: st.lists(
            st.lists(st.integers(-1, 3), min_size=r, max_size=r), min_size=1, max_size=12
        )
    )
)
@pytest.mark.parametrize("block", [256, 2])  # rows hashed a block at a time
def test_unique_columns_against_a_dict(mat, block):
    m = np.array(mat, np.int32).T  # rows x columns
    saved, _dfa_ops.UNIQUE_COLUMNS_BLOCK = _dfa_ops.UNIQUE_COLUMNS_BLOCK, block
    try:
        first, ids = _dfa_ops.unique_columns(m)
    finally:
        _dfa_ops.UNIQUE_COLUMNS_BLOCK = saved
    order: dict[tuple, int] = {}
    for j in range(m.shape[1]):
        order.setdefault(tuple(m[:, j].tolist()), j)
    want_first = list(order.values())
    want_ids = [want_first.index(order[tuple(m[:, j].tolist())]) for j in range(m.shape[1])]
    assert first.tolist() == want_first
    assert ids.tolist() == want_ids


def test_symbol_weights_are_fixed_odd_and_distinct():
    w = _dfa_ops.symbol_weights(300)
    assert w.dtype == np.uint64 and (w & np.uint64(1)).all()
    assert len(set(w.tolist())) == 300
    assert np.array_equal(w, _dfa_ops.symbol_weights(300))
    assert np.array_equal(w[:10], _dfa_ops.symbol_weights(10))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda q: st.tuples(
            st.just(q),
            st.lists(st.tuples(st.integers(0, q - 1), st.integers(0, q - 1)), max_size=120),
            st.lists(st.integers(0, q - 1), min_size=1, max_size=4),
        )
    )
)
def test_closure_in_python_equals_the_vectorized_bfs(case):
    """`_closure` on a small graph (plain Python) and on a large one (NumPy levels): the same set."""
    q, edges, seeds = case
    src = np.array([a for a, _ in edges], np.int64)
    dst = np.array([b for _, b in edges], np.int64)
    seeds = np.array(seeds)
    small = _dfa_ops._closure_small(seeds, src, dst, q)
    saved = _dfa_ops.SMALL_GRAPH
    _dfa_ops.SMALL_GRAPH = -1
    try:
        big = _dfa_ops._closure(seeds, src, dst, q)
    finally:
        _dfa_ops.SMALL_GRAPH = saved
    np.testing.assert_array_equal(small, big)


@settings(max_examples=150, deadline=None)
@given(dense_dfas(max_states=7, max_symbols=3), st.integers(0, 2**32 - 1))
def test_verify_or_refine_repairs_a_wrong_partition(dfa, seed):
    # As if a hash had collided: any coarser (or wrong) block assignment is refined to the
    # coarsest congruence below it, and a congruence is returned as it is.
    trans, accepting, start = dfa
    t = _dfa_ops.trim(trans, accepting, start)
    if t is None:
        return
    trans, accepting, start = t
    q = trans.shape[0]
    *_, exact = _dfa_ops.minimize(trans, accepting, start)
    assert np.array_equal(
        _dfa_ops._verify_or_refine(trans, accepting, exact.astype(np.int64)), exact
    )
    wrong = np.random.default_rng(seed).integers(0, 2, q).astype(np.int64)
    fixed = _dfa_ops._verify_or_refine(trans, accepting, wrong)
    # it refines ``wrong`` and the minimal partition: each block lies within one block of both
    for blk in np.unique(fixed):
        members = np.flatnonzero(fixed == blk)
        assert len(set(wrong[members].tolist())) == 1
        assert len(set(exact[members].tolist())) == 1
    # ... and the result is a congruence: members agree on acceptance and successor blocks
    lut = np.append(fixed, -1)
    for blk in np.unique(fixed):
        members = np.flatnonzero(fixed == blk)
        assert len({(bool(accepting[m]), *lut[trans[m]].tolist()) for m in members}) == 1


@settings(max_examples=150, deadline=None)
@given(dense_dfas(max_states=7, max_symbols=3))
def test_trim_of_a_reachable_table_may_skip_the_forward_search(dfa):
    # a table whose states are all reachable (as a subset construction builds it): the
    # co-reachable states alone give the same result
    trans, accepting, start = dfa
    q = trans.shape[0]
    reach = _dfa_ops._closure(np.array([start]), *np.nonzero(trans >= 0)[:1], trans[trans >= 0], q)
    trans, accepting, start = _dfa_ops.restrict(trans, accepting, start, reach)
    got = _dfa_ops.trim(trans, accepting, start, all_reachable=True)
    want = _dfa_ops.trim(trans, accepting, start)
    assert (got is None) == (want is None)
    if want is not None:
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


# -- bounded repeats: the chains of copies that JSON strings' maxLength produce --------------


def bounded_repeat(x, low: int, high: int):
    """The DFA of ``L(x){low,high}`` by a subset construction over (iterations done, state
    of ``x``): a chain of ``high`` copies, as `Repeat` builds it, not minimized."""
    trans, accepting, start = x

    def closure(items):
        todo, out = list(items), set(items)
        while todo:
            i, y = todo.pop()
            if accepting[y] and i + 1 < high and (i + 1, start) not in out:
                out.add((i + 1, start))
                todo.append((i + 1, start))
        return frozenset(out)

    def accepts(subset) -> bool:
        return any(i >= 0 and accepting[y] and i + 1 >= low for i, y in subset)

    first = closure({(0, start)}) | {(-1, -1)}  # (-1, -1): the start, distinct from a loop
    ids, order, rows = {first: 0}, [first], []
    for subset in order:
        row = []
        for a in range(trans.shape[1]):
            nxt = closure({(i, int(trans[y, a])) for i, y in subset if i >= 0 and trans[y, a] >= 0})
            if not nxt:
                row.append(-1)
                continue
            if nxt not in ids:
                ids[nxt] = len(order)
                order.append(nxt)
            row.append(ids[nxt])
        rows.append(row)
    acc = np.array([accepts(s) or (low == 0 and k == 0) for k, s in enumerate(order)])
    return np.array(rows, np.int32).reshape(-1, trans.shape[1]), acc, 0


def in_repeat(x, low: int, high: int, word) -> bool:
    """Brute force: ``word`` splits into ``low``..``high`` pieces, each accepted by ``x``."""
    n = len(word)
    counts = [set() for _ in range(n + 1)]  # counts[j]: piece counts that spell word[:j]
    counts[0].add(0)
    empty = run(*x, ())
    for j in range(n + 1):
        if empty and counts[j]:  # empty pieces: any count up to ``high``
            counts[j] |= set(range(min(counts[j]), high + 1))
        for k in counts[j]:
            for e in range(j + 1, n + 1):
                if k < high and run(*x, word[j:e]):
                    counts[e].add(k + 1)
    return any(low <= k <= high for k in counts[n]) or (n == 0 and low == 0)


@settings(max_examples=40, deadline=None)
@given(
    x=dense_dfas(max_states=3, max_symbols=2),
    low=st.integers(0, 6),
    extra=st.integers(0, 30),
)
def test_minimize_bounded_repeats_like_full_rounds(x, low, extra):
    """On X{m,n} (random small X), the minimal DFA accepts the repeat's language, and
    its blocks are those of full rounds (the refinement as first written)."""
    x = _dfa_ops.trim(*x)
    if x is None:
        return
    high = max(low, 1) + extra
    t, a, s0 = bounded_repeat(x, low, high)
    trimmed = _dfa_ops.trim(t, a, s0)
    if trimmed is None:
        return
    for w in words(t.shape[1], 6):
        assert run(t, a, s0, w) == in_repeat(x, low, high, w), w
    t, a, s0 = trimmed
    m_trans, m_acc, m_start, block = _dfa_ops.minimize(t, a, s0)
    assert equivalent((m_trans, m_acc, m_start), (t, a, s0))
    _, ref = _moore_full_rounds(t, a, _dfa_ops.symbol_weights(t.shape[1]))
    ref = _dfa_ops._verify_or_refine(t, a, _dfa_ops._first_member_order(ref))
    assert np.array_equal(block, ref)
    assert m_trans.shape[0] == int(ref.max()) + 1


def test_minimize_a_long_bounded_repeat_in_linear_work():
    """(ab|c){0,500} over 3 symbols with a second, redundant copy of each link: about a
    round per link, each sorting a few states. Full rounds need rounds x states, about
    2,000 x 3,000 here; this takes a few times the number of states."""
    x = (np.array([[1, -1, 2], [-1, 2, -1], [-1, -1, -1]], np.int32), np.array([0, 0, 1], bool), 0)
    t, a, s0 = _dfa_ops.trim(*bounded_repeat(x, 0, 500))
    q = t.shape[0]
    # two copies of every state, the odd states' edges into the second copy: twice the
    # states, the same language, half of them redundant
    twin = np.concatenate([t, t])
    odd = twin[1:q:2]
    twin[1:q:2] = np.where(odd >= 0, odd + q, odd)
    m_trans, m_acc, m_start, block = _dfa_ops.minimize(
        twin, np.concatenate([a, a]), s0, max_work=8 * 2 * q
    )
    assert m_trans.shape[0] == q and np.array_equal(block[:q], block[q:])
    assert equivalent((m_trans, m_acc, m_start), (t, a, s0))


def test_minimize_when_every_signature_collides():
    """Zero weights make every signature equal: the exact check then splits the blocks
    itself, and the result (numbered by first member) is the one hashing gives."""
    rng = np.random.default_rng(3)
    for _ in range(60):
        q, s = int(rng.integers(2, 60)), int(rng.integers(1, 4))
        trans = rng.integers(-1, q, size=(q, s)).astype(np.int32)
        trimmed = _dfa_ops.trim(trans, rng.random(q) < 0.3, 0)
        if trimmed is None:
            continue
        hashed = _dfa_ops.minimize(*trimmed)
        exact = _dfa_ops.minimize(*trimmed, weights=np.zeros(s, np.uint64))
        assert all(np.array_equal(x, y) for x, y in zip(hashed, exact, strict=True))
