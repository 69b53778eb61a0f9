"""Byte PDA ∘ detokenizer → token-level PDA tables (Koo et al. §3.2; XGrammar's split).

Every token is walked, byte by byte over the vocabulary trie, from every state a
token can start in, with a *symbolic* stack (`_pda_walk`): pushes made inside the
token are known; a return with nothing of its own to pop reads the row's real
stack, and the walk branches over the return states that could be there (the return
states of the rule's call sites). Each (state, token) thus gives

* one outcome that pops nothing: a **context-independent** edge
  ``(target, pushed symbols)``, stored in ``next_state`` / ``edge_push`` and read by
  the runtime's gather, like a DFA edge; or
* outcomes that each pop k >= 1 symbols: **context-dependent** edges
  ``(popped symbols, target, pushed symbols)``, stored as a short per-state list
  that the runtime compares against the row's top k stack symbols. The PDA is
  deterministic, so at most one of them matches a given stack.

The root rule is walked per compilation; every other rule's walk up to its exits,
and every free string's, is cached by its structure (`_pda_units`), so what a JSON
Schema shares with every other (a free value's arrays, objects and strings) is walked
once per vocabulary.

Tokens with the same outcomes from every state form one class, as in `_compose`.
Token-level states are the states a token boundary can fall on (reached from the
start through token edges); other byte-PDA states keep empty rows (they only
appear on the stack). Every reached configuration can still be completed because
the vocabulary is required to spell every byte on its own (checked).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from automata_compile._errors import TokenSubsetWarning, UnsupportedGrammarError
from automata_compile._ranges import ranges
from automata_compile.automata import BytePDA, check_time
from automata_compile.tokens._blocks import block_tables, block_tables_walks
from automata_compile.tokens._pda_units import rule_walks, walk_states
from automata_compile.tokens._pda_walk import (
    CONTEXTS_REFUSED,
    MAX_OUTCOMES,
    STEP,
    Walk,
    Walker,
)
from automata_compile.tokens._rows import unique_rows
from automata_compile.tokens._token_dfa import TokenDFA
from automata_compile.tokens._token_trie import TokenTrie, trie_for


def token_pda(
    pda: BytePDA, vocab, *, spec_kind: str, spec: str, block=None, cut: bool = False
) -> TokenDFA:
    """``pda`` composed with ``vocab``'s tokens: a `TokenDFA` with the PDA block (the one
    artifact format of DFAs and PDAs), labelled with the spec it was compiled from.
    ``block``: int[Q], a partition of the byte PDA's states: the tables get state blocks
    (`_blocks`), built from the allowed cells without the dense table. ``cut``: see
    `compose_pda`."""
    tables = compose_pda(pda, trie_for(vocab), vocab, block, cut=cut)
    return _token_dfa(tables, vocab, spec_kind=spec_kind, spec=spec)


def _token_dfa(tables: dict, vocab, *, spec_kind: str, spec: str) -> TokenDFA:
    """The `TokenDFA` of `compose_pda`'s ``tables`` (consumed) for ``vocab``, labelled with
    the spec it was compiled from (also `_unit_blocks.token_pda_units`')."""
    return TokenDFA(
        token_class=tables.pop("token_class").astype(np.int32, copy=False),
        next_state=tables.pop("next_state"),
        accepting=tables.pop("accepting"),
        start=tables.pop("start"),
        eos_ids=tuple(vocab.eos_ids),
        vocab_fingerprint=vocab.fingerprint,
        spec_kind=spec_kind,
        spec=spec,
        **tables,
    )


def compose_pda(pda: BytePDA, trie: TokenTrie, vocab, block=None, *, cut: bool = False) -> dict:
    """Builds the token-level tables. ``cut``: a token whose walk from a state reaches more
    than `_pda_walk.MAX_OUTCOMES` stack contexts is left out there, with one
    `TokenSubsetWarning`, instead of refused (a JSON Schema's last form with
    ``subsets="warn"``, `pipeline._json_schema._cut_last`: the draft-07 meta-schema, whose
    schema rule is called from 30-odd places, so a token closing k nested schemas pops one
    of 30**k stacks).

    Returns a dict of NumPy arrays (see `TokenDFA`'s PDA block): ``token_class``,
    ``next_state``, ``accepting``, ``start``, ``edge_push``, ``push_seq``, ``push_len``,
    ``cd_state``, ``cd_class``, ``cd_pop``, ``cd_npop``, ``cd_target``, ``cd_push``.
    ``trie`` is ``vocab``'s (`trie_for`); the single-byte tokens are read from it.

    Raises:
      UnsupportedGrammarError: the vocabulary cannot spell some byte the grammar uses on
        its own (masks could not be exact), or a token's outcomes explode.
      CompileTimeoutError: an open `_fsa.limits` deadline passed (checked per trie level
        of a walk and every few thousand nodes of a Python walk).
    """
    _check_bytes(pda, trie)
    walker = Walker(pda, trie, cut=cut)
    start = int(pda.starts[0])
    live = (pda.kind != 0).any(axis=1)
    parts = walk_states(walker, np.flatnonzero(live & (pda.rule_of == 0)), vocab.fingerprint)
    for rule in range(1, len(pda.names)):
        parts += rule_walks(pda, rule, trie, vocab.fingerprint, walker)
    plain = _plain_targets(walker)
    parts = _normalized(parts, plain, pda.num_states)
    boundary = _reached(parts, walker, start)
    parts = [_restricted(p, boundary) for p in parts]
    classes = _classes_hashed(parts, trie.num_groups, len(walker.outcomes))
    if classes is None:  # a hash collision (never seen): key the signatures exactly instead
        classes = _classes_exact(parts, trie.num_groups)
    if walker.cuts:
        warnings.warn(
            TokenSubsetWarning(
                f"tokens that reach more than {MAX_OUTCOMES} {CONTEXTS_REFUSED} (closing "
                f"several nested values at once) are left out of the masks from there "
                f"({walker.cuts} token prefixes): a sound subset, the same texts are written "
                "with shorter tokens"
            ),
            stacklevel=2,
        )
    return _tables(pda, trie, walker, parts, *classes, block=block)


# -- the walks, made canonical --------------------------------------------------------------------


def _plain_targets(walker: Walker) -> np.ndarray:
    """Per outcome id, its target when it is one configuration that pushes and pops
    nothing (what a dense row entry stands for), else -1."""
    return np.array(
        [o[0][0] if len(o) == 1 and not o[0][1] and not o[0][2] else -1 for o in walker.outcomes],
        np.int64,
    ).reshape(-1)


def _normalized(parts: list, plain: np.ndarray, q_count: int) -> list:
    """``parts`` with every plain sparse outcome from a state that some part walks with rows
    moved into that part's row for its group (a token can leave a loop and come back,
    say), so that a (state, group) outcome has one spelling and equal signatures compare
    equal."""
    owner = np.full(q_count, -1, np.int64)  # the part walking each state with rows
    col = np.full(q_count, -1, np.int64)
    for k, p in enumerate(parts):
        owner[p.wide] = k
        col[p.wide] = np.arange(p.wide.shape[0])
    moved = [[] for _ in parts]
    out = []
    for p in parts:
        move = (owner[p.src] >= 0) & (plain[p.oid] >= 0)
        at = np.flatnonzero(move)
        at = at[np.argsort(owner[p.src[at]], kind="stable")]  # by owner, in entry order
        own = owner[p.src[at]]
        for m in np.split(at, np.flatnonzero(np.diff(own)) + 1) if at.size else ():
            moved[int(owner[p.src[m[0]]])].append((p.group[m], col[p.src[m]], plain[p.oid[m]]))
        keep = ~move
        out.append(dataclasses.replace(p, src=p.src[keep], group=p.group[keep], oid=p.oid[keep]))
    for k, p in enumerate(out):
        if moved[k]:
            g, w, t = (np.concatenate(x) for x in zip(*moved[k], strict=True))
            out[k] = _with_entries(p, g, w, t)
    return out


def _with_entries(p: Walk, g: np.ndarray, w: np.ndarray, t: np.ndarray) -> Walk:
    """``p`` with row entry ``w`` of group ``g``'s row set to end state ``t``."""
    ug, gi = np.unique(g, return_inverse=True)
    old = _rows_of(p, ug)
    sink_row = np.full((1, p.wide.shape[0]), p.sink, p.rows.dtype)
    base = np.concatenate([p.rows, sink_row])
    new = base[np.where(old >= 0, old, p.rows.shape[0])]
    new[gi.reshape(-1), w] = t
    rows, row_of = unique_rows(np.concatenate([p.rows, new]))
    row_of = np.append(row_of, -1)  # row -1 (dead) stays dead
    new_ids = row_of[p.rows.shape[0] : -1]
    other_row = row_of[p.other_row]
    pos = np.searchsorted(p.other_group, ug)
    had = pos < p.other_group.shape[0]
    had[had] = p.other_group[pos[had]] == ug[had]  # already an exception: changed in place
    other_row[pos[had]] = new_ids[had]
    group = np.concatenate([p.other_group, ug[~had]])
    order = np.argsort(group, kind="stable")
    row = np.concatenate([other_row, new_ids[~had]])[order]
    return dataclasses.replace(
        p, rows=rows, **_exceptions(int(row_of[p.default_row]), group[order], row)
    )


def _exceptions(default: int, group: np.ndarray, row: np.ndarray) -> dict:
    """`Walk`'s default_row / other_group / other_row fields, without the groups whose row
    became the default one."""
    keep = row != default
    return {
        "default_row": default,
        "other_group": group[keep].astype(np.int32),
        "other_row": row[keep].astype(np.int32),
    }


def _rows_of(p: Walk, groups: np.ndarray) -> np.ndarray:
    """int64: the row of each of ``groups`` in walk ``p`` (-1: dead from its wide starts)."""
    n = p.other_group.shape[0]
    if n == 0:
        return np.full(groups.shape[0], p.default_row, np.int64)
    pos = np.minimum(np.searchsorted(p.other_group, groups), n - 1)
    return np.where(p.other_group[pos] == groups, p.other_row[pos].astype(np.int64), p.default_row)


def _reached(parts: list, walker: Walker, start: int, collapse=None) -> np.ndarray:
    """bool[Q]: the states reached from ``start`` through token outcomes (the boundary).
    ``collapse``: (node int64[Q], extra src, extra dst): edges lead to ``node[target]``,
    plus the extra edges (`_unit_blocks`: a cached unit is one node, leading to the root
    states its rows reach)."""
    q_count, num_groups = walker.pda.num_states, walker.trie.num_groups
    n_out = len(walker.outcomes)
    lens = np.array([len(o) for o in walker.outcomes], np.int64).reshape(-1)
    tgt = np.array([c[0] for o in walker.outcomes for c in o], np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)])
    srcs, tgts = [], []
    for p in parts:
        pair = np.unique(p.src * n_out + p.oid)
        s, o = pair // n_out, pair % n_out
        k = lens[o]
        srcs.append(np.repeat(s, k))
        tgts.append(tgt[ranges(offs[o], k)])
        if p.wide.size:
            used = np.zeros(p.rows.shape[0] + 1, bool)
            used[p.other_row] = True  # the rows some group ends in (-1, dead: the last entry)
            used[p.default_row] |= p.other_group.shape[0] < num_groups
            ends = p.rows[np.flatnonzero(used[:-1])]
            r, w = np.nonzero(ends != p.sink)
            srcs.append(p.wide[w])
            tgts.append(ends[r, w].astype(np.int64))
    if collapse is not None:
        node, extra_src, extra_dst = collapse
        tgts = [node[t] for t in tgts]
        srcs.append(extra_src)
        tgts.append(extra_dst)
    edge = np.unique(np.concatenate(srcs) * q_count + np.concatenate(tgts))
    src, dst = edge // q_count, edge % q_count
    offs = np.searchsorted(src, np.arange(q_count + 1))
    reached = np.zeros(q_count, bool)
    reached[start] = True
    frontier = np.array([start], np.int64)
    while frontier.size:  # breadth first, each state's edges read once
        lo, n = offs[frontier], offs[frontier + 1] - offs[frontier]
        at = ranges(lo, n)
        frontier = np.unique(dst[at])
        frontier = frontier[~reached[frontier]]
        reached[frontier] = True
    return reached


def _restricted(p: Walk, keep: np.ndarray) -> Walk:
    """``p`` without the start states outside ``keep``."""
    s = keep[p.src]
    w = keep[p.wide]
    rows, rest = p.rows[:, w], {}  # no rows: every group dead
    if not w.all() and p.rows.shape[0]:
        rows, row_of = unique_rows(p.rows[:, w])
        dead = (rows == p.sink).all(axis=1)
        ids = np.append(np.where(dead[row_of], -1, row_of), -1)  # row -1 (dead) stays dead
        rest = _exceptions(int(ids[p.default_row]), p.other_group, ids[p.other_row])
    return dataclasses.replace(
        p, src=p.src[s], group=p.group[s], oid=p.oid[s], wide=p.wide[w], rows=rows, **rest
    )


# -- token classes --------------------------------------------------------------------------------


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit finalizer (splitmix64's) over uint64 arrays."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _sparse(parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(np.concatenate([getattr(p, f) for p in parts]) for f in ("src", "group", "oid"))


def _others(p: Walk, num_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """(groups, rows) of walk ``p``'s groups whose row is not its default one, with the
    virtual all-dead group ``num_groups`` (row -1) where the default row is not dead."""
    if p.default_row < 0:
        return p.other_group, p.other_row
    return np.append(p.other_group, num_groups), np.append(p.other_row, -1)


def _signature(parts: list, num_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, group, oid) int64: every walk's sparse entries, then walk k's rows that are not
    its default row as pairs (``base + k``, group, row id), ``base`` past every start
    state: a group's class signature, with one entry per (state or walk, group). Groups
    with the same pairs have the same rows in every walk (the default where they have
    none); a group dead from every start has no pairs where dead is the default."""
    src, group, oid = _sparse(parts)
    base = int(src.max(initial=-1)) + 1
    others = [_others(p, num_groups) for p in parts]
    walk = [np.full(g.shape[0], base + k, np.int64) for k, (g, _) in enumerate(others)]
    return (
        np.concatenate([src, *walk]),
        np.concatenate([group, *(g.astype(np.int64) for g, _ in others)]),
        np.concatenate([oid, *(r.astype(np.int64) for _, r in others)]),
    )


def _classes_hashed(parts: list, num_groups: int, num_outcomes: int) -> tuple | None:
    """Token-group classes: equal outcomes from every boundary state.

    A group's signature is its sparse (state, outcome) pairs and its row in every walk
    with rows (`_signature`); all of it is hashed, the hashes grouped by one sort of G
    keys, and every group is then checked against its class's first group (the same
    number of pairs and of rows that are not their walk's default, each sparse pair present
    in the first group's, the same row wherever it is not the default), so the result is
    exact. Work and memory follow the sparse pairs and the rows that are not their walk's
    default, not walks x groups.

    Returns:
      (group_class, reps): class per group (0 = dead from every state, others numbered by
      first group) and, ascending, the first group of each class 1.. ; None on a collision.
    """
    src, group, oid = _sparse(parts)
    g1 = num_groups + 1  # the last, virtual group: dead from every state (the dead class)
    q_salt = _mix(np.arange(1, int(src.max(initial=0)) + 2, dtype=np.uint64))
    o_salt = _mix(np.arange(num_outcomes + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
    h = np.zeros(g1, np.uint64)
    np.add.at(h, group, _mix(q_salt[src] ^ o_salt[oid]))
    count = np.bincount(group, minlength=g1)
    others = [_others(p, num_groups) for p in parts]
    defaults = np.zeros(1, np.uint64)  # every group's default rows, added once
    for k, (p, (og, orow)) in enumerate(zip(parts, others, strict=True)):
        salt = _mix(np.array([k + 1], np.uint64)) * np.uint64(0xD6E8FEB86659FD93)
        row_hash = _mix(np.arange(p.rows.shape[0] + 1, dtype=np.uint64) + salt)  # last: dead
        d = row_hash[p.default_row]
        defaults += d
        h[og] += row_hash[orow] - d  # a walk's other groups are distinct: a plain +=
        count[og] += 1
    h = _mix(h + defaults + count.astype(np.uint64))
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rep = first[inverse]  # rep[g] <= g: a real group's representative is a real group
    if not np.array_equal(count, count[rep]):
        return None
    row = np.full(g1, -2, np.int64)  # one walk's other rows at a time (-2: the default)
    for og, orow in others:  # with equal counts: the same rows in every walk
        row[og] = orow
        same = np.array_equal(row[rep[og]], orow)
        row[og] = -2
        if not same:
            return None
    # Every sparse pair of every group is its representative's: look them up by (state, class).
    n_cls = first.shape[0]
    key = src * n_cls + inverse[group]
    is_rep = rep[group] == group
    rk, ro = key[is_rep], oid[is_rep]
    order = np.argsort(rk)
    rk, ro = rk[order], ro[order]
    pos = np.minimum(np.searchsorted(rk, key), max(rk.shape[0] - 1, 0))
    if key.size and not (np.array_equal(rk[pos], key) and np.array_equal(ro[pos], oid)):
        return None
    return _number(first, inverse)


def _classes_exact(parts: list, num_groups: int) -> tuple:
    """`_classes_hashed` keyed by each group's exact signature (bytes), without hashing."""
    src, group, oid = _signature(parts, num_groups)
    order = np.lexsort((oid, src, group))
    pairs = np.stack([src[order], oid[order]], axis=1)
    cuts = np.searchsorted(group[order], np.arange(num_groups + 2))
    seen: dict[bytes, int] = {}
    first, inverse = [], np.empty(num_groups + 1, np.int64)
    for g in range(num_groups + 1):
        sig = pairs[cuts[g] : cuts[g + 1]].tobytes()
        c = seen.setdefault(sig, len(seen))
        if c == len(first):
            first.append(g)
        inverse[g] = c
    return _number(np.array(first, np.int64), inverse)


def _number(first: np.ndarray, inverse: np.ndarray) -> tuple:
    """Classes numbered by first group, the dead class (the last row's) moved to 0."""
    dead = inverse[-1]
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    rank = np.where(rank < rank[dead], rank + 1, rank)
    rank[dead] = 0
    return rank[inverse[:-1]], np.sort(first[np.arange(first.shape[0]) != dead])


# -- the tables -----------------------------------------------------------------------------------


def _tables(pda, trie, walker, parts, group_class, reps, block=None) -> dict:
    """The token-level tables from each class's first group (see `compose_pda`); with
    ``block``, in state blocks (`_blocks.block_tables`), from the allowed cells alone."""
    # one gather: a token of no group (-1) reads the appended dead class 0
    lookup = np.zeros(group_class.shape[0] + 1, np.int32)
    lookup[:-1] = group_class
    token_class = lookup[trie.token_group]
    q_count, c_count = pda.num_states, reps.shape[0] + 1
    classes = np.arange(1, c_count)
    if block is None:
        next_state = np.full((q_count, c_count), -1, np.int32)
        edge_push = np.zeros((q_count, c_count), np.int32)
    walks = []  # with blocks: (walk, each class's row) of the walks with rows
    for p in parts:  # dense entries: plain edges, nothing pushed
        check_time(STEP)  # a part's rows can be GBs (dependabot: 4 s past its deadline here)
        row = _rows_of(p, reps) if p.wide.size else np.zeros(0, np.int64)
        ok = np.flatnonzero(row >= 0)
        if block is not None:
            if p.wide.size:
                walks.append((p, row))
            continue
        ends = p.rows[row[ok]]
        r, w = np.nonzero(ends != p.sink)
        next_state[p.wide[w], classes[ok][r]] = ends[r, w]
    check_time(STEP)
    src, group, oid = _sparse(parts)
    check_time(STEP)
    is_rep = np.zeros(trie.num_groups, bool)
    is_rep[reps] = True
    sel = is_rep[group]
    s, c, o = src[sel], group_class[group[sel]], oid[sel]
    order = np.lexsort((s, c))
    s, c, o = s[order], c[order], o[order]
    # Push sequences are numbered in (class, state) order of first use, outcome by outcome.
    distinct, first_at = np.unique(o, return_index=True)
    pushes: dict[tuple, int] = {(): 0}
    ci_target = np.full(len(walker.outcomes), -1, np.int64)
    ci_push = np.zeros(len(walker.outcomes), np.int64)
    for x in distinct[np.argsort(first_at)].tolist():
        outs = walker.outcomes[x]
        for target, pushed, popped in outs:
            p_id = pushes.setdefault(pushed, len(pushes))
            if len(outs) == 1 and not popped:
                ci_target[x], ci_push[x] = target, p_id
    ci = ci_target[o] >= 0
    if block is None:
        next_state[s[ci], c[ci]] = ci_target[o[ci]]
        pu = ci & (ci_push[o] != 0)  # edge_push starts at 0 (untouched pages stay unallocated)
        edge_push[s[pu], c[pu]] = ci_push[o[pu]]
    else:
        listed = (s[ci], c[ci], ci_target[o[ci]], ci_push[o[ci]])
    cd = [
        (q, k, popped, target, pushes[pushed])
        for q, k, x in zip(s[~ci].tolist(), c[~ci].tolist(), o[~ci].tolist(), strict=True)
        for target, pushed, popped in walker.outcomes[x]
    ]
    longest = max(len(p) for p in pushes)
    push_seq = np.full((len(pushes), max(longest, 1)), -1, np.int32)
    push_len = np.zeros(len(pushes), np.int32)
    for p, i in pushes.items():
        push_seq[i, : len(p)] = p
        push_len[i] = len(p)
    cd.sort()
    kmax = max((len(e[2]) for e in cd), default=1)
    cd_pop = np.full((len(cd), kmax), -1, np.int32)
    for i, e in enumerate(cd):
        cd_pop[i, : len(e[2])] = e[2]
    col = np.array(cd, dtype=object).reshape(len(cd), 5)
    edges = {
        "cd_state": col[:, 0].astype(np.int32),
        "cd_class": col[:, 1].astype(np.int32),
        "cd_pop": cd_pop,
        "cd_npop": np.array([len(e[2]) for e in cd], np.int32),
        "cd_target": col[:, 3].astype(np.int32),
        "cd_push": col[:, 4].astype(np.int32),
    }
    common = {
        "accepting": pda.ends.copy(),
        "start": int(pda.starts[0]),
        "push_seq": push_seq,
        "push_len": push_len,
    }
    if block is not None:
        return common | _block_tables(q_count, c_count, token_class, walks, listed, edges, block)
    return (
        common
        | edges
        | {
            "token_class": token_class,
            "next_state": next_state,
            "edge_push": edge_push,
        }
    )


def _block_tables(q_count, c_count, token_class, walks, listed, edges, block) -> dict:
    """The state blocks from the walks' rows (each row hashed and written once per block,
    not once per class: `block_tables_walks`) and the listed cells; where that declines
    (overlapping cells, a failed hash check), from every allowed cell listed, the walks'
    first and each (state, class) at its last write, as the dense table's assignments."""
    rows = []
    for p, row in walks:
        crow = np.full(c_count, -1, np.int64)  # class 0: dead everywhere
        crow[1:] = row
        rows.append((p.wide, p.rows, p.sink, crow))
    out = block_tables_walks(q_count, c_count, token_class, listed, rows, edges, block)
    if out is not None:
        return out
    classes = np.arange(1, c_count)
    cells = []
    for p, row in walks:
        ok = np.flatnonzero(row >= 0)
        cells.append(_walk_cells(p, row[ok], classes[ok]))
    cells.append(listed)
    return block_tables(q_count, c_count, token_class, _last_cells(cells, c_count), edges, block)


def _walk_cells(p: Walk, rows: np.ndarray, classes: np.ndarray) -> tuple:
    """(state, class, target, push 0) of walk ``p``'s allowed wide cells for ``classes``
    whose rows are ``rows``: each row's live cells, repeated per class (no dense
    ``[classes, wide]`` block)."""
    live_r, live_w = np.nonzero(p.rows != p.sink)  # sorted by row
    count = np.bincount(live_r, minlength=p.rows.shape[0])
    offs = np.concatenate([[0], np.cumsum(count)])
    n = count[rows]
    at = ranges(offs[rows], n)
    w = live_w[at]
    target = p.rows[live_r[at], w]
    return p.wide[w], np.repeat(classes, n), target, np.zeros(w.shape[0], np.int64)


def _last_cells(cells: list, c_count: int) -> tuple:
    """The cells concatenated, each (state, class) once: its last write (as the dense
    table's assignments keep), in (state, class) order. One unstable sort when no cell is
    written twice (the usual case); a stable one keeps the last write otherwise."""
    s, c, t, u = (np.concatenate([np.asarray(x[i], np.int64) for x in cells]) for i in range(4))
    key = s * c_count + c
    order = np.argsort(key)
    sk = key[order]
    if sk.size > 1 and (sk[1:] == sk[:-1]).any():
        order = np.argsort(key, kind="stable")
        sk = key[order]
        last = np.ones(sk.shape[0], bool)
        last[:-1] = sk[1:] != sk[:-1]
        order = order[last]
    return s[order], c[order], t[order], u[order]


def _check_bytes(pda: BytePDA, trie: TokenTrie) -> None:
    """Every byte the grammar uses is a token on its own (a terminal at trie level 1)."""
    used = np.flatnonzero(pda.kind.any(axis=0))
    have = np.zeros(256, bool)
    if trie.depth:
        have[trie.byte[1][trie.terminal[1] >= 0]] = True
    missing = used[~have[used]].tolist()
    if missing:
        raise UnsupportedGrammarError(
            f"the vocabulary has no single-byte token for byte(s) "
            f"{', '.join(hex(b) for b in missing[:8])}{'…' if len(missing) > 8 else ''}, which "
            "the grammar uses; grammar masks are exact only for vocabularies that can spell "
            "every byte alone (byte-level BPE, byte fallback)"
        )
