"""State blocks: one `TokenDFA` whose states fall into blocks, each with its own token classes.

A constraint made of independent parts (a tool-call constraint: the frame of free text,
trigger and names, and one unit per tool) has one dense ``[states, classes]`` table whose
classes are the common refinement of every part's: each tool's keys and enums split the
vocabulary its own way, and one table carries every split in every row (98% of the cells
of a 100-tool table are dead). `split_blocks` gives each block of states the classes its
own rows, pushes and context-dependent edges tell apart, and stores the rows ragged: each
state's row is as wide as its block's classes (see `TokenDFA`, ``_BLOCK_ARRAYS``).

Exact by construction: two dense classes share a block class exactly when every state of
the block has the same next state, push and context-dependent edges for both.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from automata_compile._ranges import ranges
from automata_compile.tokens._rows import distinct_rows, distinct_rows_unordered
from automata_compile.tokens._token_dfa import DEAD, TokenDFA

__all__ = ["block_tables", "block_tables_walks", "split_blocks"]


def split_blocks(dfa: TokenDFA, block: np.ndarray) -> TokenDFA:
    """``dfa`` (without state blocks) with its states split into ``block``'s blocks.

    Args:
      dfa: a `TokenDFA` (a DFA or a PDA) without state blocks.
      block: int[Q], any partition of the states (ids need not be dense). States whose row
        allows nothing and that have no context-dependent edge (stack-only and unreached
        states) go to one extra block of width 1, whatever ``block`` says.

    Returns:
      The same automaton with ``class_block`` / ``row_start``: masks, steps and acceptance
      are identical for every configuration; `TokenDFA.dense` maps it back.
    """
    if dfa.is_blocked:
        raise ValueError("split_blocks: the TokenDFA already has state blocks")
    q, c = dfa.next_state.shape
    ns = dfa.next_state
    ep = dfa.edge_push if dfa.is_pda else None
    s, k = np.nonzero(ns >= 0 if ep is None else (ns >= 0) | (ep != 0))
    entries = (s, k, ns[s, k], None if ep is None else ep[s, k])
    cd = dfa.pda_arrays() if dfa.is_pda else None
    tables = block_tables(q, c, dfa.token_class, entries, cd, block)
    return dataclasses.replace(dfa, **tables)


def block_tables(q: int, c: int, token_class, entries, cd: dict | None, block) -> dict:
    """The state-block arrays of an automaton given by its allowed cells, without its dense
    ``[Q, C]`` table (see `split_blocks`, which this is the body of).

    Args:
      q, c: the states and (global) token classes.
      token_class: int[V], each token's global class.
      entries: (state, class, next state, push or None) int arrays: every cell of the dense
        table that is allowed (or pushes), each (state, class) once.
      cd: the PDA block (``cd_state`` ... ``cd_push``; ``edge_push`` unused) or None.
      block: int[Q], the partition of the states.

    Returns:
      ``token_class``, ``next_state``, ``class_block``, ``row_start`` and, for a PDA,
      ``edge_push`` and the context-dependent edges in block classes.
    """
    block = np.asarray(block)
    if block.shape != (q,):
        raise ValueError(f"split_blocks: expected one block per state ({q}), got {block.shape}")
    es, ek, et, ep = (None if x is None else np.asarray(x) for x in entries)
    es, ek = es.astype(np.int64), ek.astype(np.int64)
    key = es * c + ek
    if key.size and (np.diff(key) <= 0).any():
        order = np.argsort(key, kind="stable")
        es, ek, et = es[order], ek[order], et[order]
        ep = None if ep is None else ep[order]
    pda = cd is not None
    if pda:
        cd = {name: np.asarray(cd[name]) for name in CD_ARRAYS}
    has_entry = np.zeros(q, bool)
    has_entry[es] = True
    if pda:
        has_entry[cd["cd_state"]] = True
    ids, bl = np.unique(np.where(has_entry, block, -1), return_inverse=True)
    bl = bl.reshape(-1).astype(np.int32)  # the empty block (if any) is block 0
    nb = len(ids)
    local, rep_of = _sparse_classes(q, c, bl, nb, (es, ek, et, ep), cd)
    if local is None:  # a hash collision (never seen): compare the blocks' columns exactly
        local, rep_of = _exact_classes(q, c, bl, nb, (es, ek, et, ep), cd, has_entry)
    width = local.max(axis=1) + 1
    rows = width[bl]
    row_start = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int32)
    flat = np.full(int(rows.sum()), DEAD, np.int32)
    cell = bl[es].astype(np.int64) * c + ek
    own = rep_of[cell] == ek  # the representative's cells: the others are the same
    at = row_start[es[own]] + local.reshape(-1)[cell[own]]
    flat[at] = et[own]
    out = {
        "token_class": local.astype(np.int32)[:, np.asarray(token_class)],  # [NB, V]
        "next_state": flat,
        "class_block": bl,
        "row_start": row_start,
    }
    if pda:
        flat_push = np.zeros(flat.shape, flat.dtype)  # (calloc: pages with no push stay unwritten)
        if ep is not None:
            flat_push[at] = ep[own]
        out.update(edge_push=flat_push, **_cd_in_blocks(cd, local, bl))
    return out


CD_ARRAYS = ("cd_state", "cd_class", "cd_pop", "cd_npop", "cd_target", "cd_push")


def _mix(x: np.ndarray, seed: int) -> np.ndarray:
    """A 64-bit mix of uint64 values (splitmix64's finalizer), one stream per seed."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(seed)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _cd_signature(cd: dict) -> np.ndarray:
    """int64[E]: an id per distinct (pops, target, push) of the context-dependent edges."""
    sig = np.concatenate(
        [np.stack([cd["cd_npop"], cd["cd_target"], cd["cd_push"]], 1), cd["cd_pop"]], axis=1
    )
    return distinct_rows(sig.astype(np.int64))[1].astype(np.int64)  # ids only compared


def _sparse_classes(q, c, bl, nb, entries, cd) -> tuple:
    """(int64[NB, C]: each global class's class in each block (class 0: dead in every state
    of the block), int64[NB * C]: the first global class of each one's block class), keyed
    by two 64-bit hashes of the class's entries in the block (its next state and push, or
    its context-dependent edges, per state); (None, None) if the check that every class
    equals its block class's first class fails (a collision)."""
    es, ek, _, _ = entries
    val, cell, keys, counts, sid = _cell_hashes(q, c, bl, nb, entries, cd)
    live = np.flatnonzero(sum(counts) > 0)  # only these are grouped: the others are class 0
    local, rep_of = _group_cells(live, keys, nb, c)
    if not _like_representatives(live, counts, rep_of, c) or not _listed_like_representatives(
        es, ek, val, es * c + ek, cell, rep_of, local, cd, sid, c
    ):
        return None, None
    return local.reshape(nb, c), rep_of


def _cell_hashes(q, c, bl, nb, entries, cd) -> tuple:
    """The listed entries and context-dependent edges summed per (block, global class) cell:
    (each entry's value, each item's cell (entries first, then edges), two 32-bit hash
    sums per cell, [entries, edges] per cell, the edges' signature ids or None)."""
    es, ek, et, ep = entries
    val = et.astype(np.int64) * (q + 1) + (0 if ep is None else ep.astype(np.int64))
    n0 = es.size
    s_all, k_all, v_all = [es], [ek], [val]
    sid = None
    if cd is not None and cd["cd_state"].size:
        sid = _cd_signature(cd)
        s_all.append(cd["cd_state"].astype(np.int64))
        k_all.append(cd["cd_class"].astype(np.int64))
        v_all.append(-1 - sid)
    s_all, k_all, v_all = (np.concatenate(x) for x in (s_all, k_all, v_all))
    cell = bl[s_all].astype(np.int64) * c + k_all  # (block, class)
    # two 32-bit hashes per entry, summed per (block, class) exactly in float64 (fewer than
    # 2**20 entries per cell; an inexact sum would only be a weaker hash: checked after)
    with np.errstate(over="ignore"):  # one mix of (state, value): the check is exact
        h = _mix(
            s_all.astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93) ^ v_all.astype(np.uint64), 2
        )
    keys = [
        np.bincount(cell, weights=(h >> np.uint64(s)) & np.uint64(0xFFFFFFFF), minlength=nb * c)
        for s in (0, 32)
    ]
    counts = [
        np.bincount(cell[:n0], minlength=nb * c),
        np.bincount(cell[n0:], minlength=nb * c),
    ]
    return val, cell, keys, counts, sid


def _group_cells(live, keys, nb, c) -> tuple[np.ndarray, np.ndarray]:
    """(int64[NB * C]: each live cell's class in its block, numbered from 1 by first global
    class; int64[NB * C]: the first global class of its block class) for the live (block,
    class) cells grouped by (block, hash sums)."""
    kb, kc = live // c, live % c
    k1, k2 = keys[0][live], keys[1][live]
    # one stable sort of a 64-bit key of (block, hashes): ``live`` is in (block, class)
    # order, so each group's first entry is its first class; a key shared by two
    # different (block, hashes) (checked) falls back to sorting them all
    with np.errstate(over="ignore"):
        u = _mix(kb.astype(np.uint64) ^ (k1.astype(np.uint64) << np.uint64(32)), 3) ^ _mix(
            k2.astype(np.uint64), 4
        )
    order = np.argsort(u, kind="stable")
    su = u[order]
    new = np.ones(live.size, bool)
    new[1:] = su[1:] != su[:-1]
    gid = np.cumsum(new) - 1
    head = order[new][gid]
    if (
        (kb[head] != kb[order]).any()
        or (k1[head] != k1[order]).any()
        or (k2[head] != k2[order]).any()
    ):
        order = np.lexsort((kc, k2, k1, kb))
        sb, s1, s2 = kb[order], k1[order], k2[order]
        new = np.ones(live.size, bool)
        new[1:] = (sb[1:] != sb[:-1]) | (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])
        gid = np.cumsum(new) - 1
    first_c, group_block = kc[order][new], kb[order][new]
    gorder = np.lexsort((first_c, group_block))
    starts = np.searchsorted(group_block[gorder], np.arange(nb))
    rank = np.empty(len(gorder), np.int64)
    rank[gorder] = np.arange(len(gorder)) - starts[group_block[gorder]] + 1
    local = np.zeros(nb * c, np.int64)
    local[live[order]] = rank[gid]
    rep_of = np.zeros(nb * c, np.int64)  # the first global class of each cell's block class
    rep_of[live[order]] = first_c[gid]
    return local, rep_of


def _like_representatives(live, counts, rep_of, c) -> bool:
    """Whether every live cell has its representative's count of each kind."""
    cell_rep = (live // c) * c + rep_of[live]
    return not any((x[live] != x[cell_rep]).any() for x in counts)


def _listed_like_representatives(es, ek, val, key, cell, rep_of, local, cd, sid, c) -> bool:
    """The exact check of the listed items, after `_like_representatives`: each entry
    equals its representative's at the same state (so the sets are equal), and each
    class's context-dependent edges are among its representative's (deduplicated, they
    are as many as the representatives' own). ``key``: ``es * c + ek``, sorted."""
    n0 = es.size
    rk = rep_of[cell[:n0]]
    at = np.minimum(np.searchsorted(key, es * c + rk), max(n0 - 1, 0))
    if n0 and ((es[at] != es) | (ek[at] != rk) | (val[at] != val)).any():
        return False
    if sid is not None:
        cd_cell = cell[n0:]
        own = rep_of[cd_cell] == cd["cd_class"]
        ckey = np.stack([cd["cd_state"], local[cd_cell], sid], 1)
        if distinct_rows_unordered(ckey)[0].shape[0] != int(own.sum()):
            return False
    return True


def _exact_classes(q, c, bl, nb, entries, cd, has_entry) -> tuple:
    """`_sparse_classes` by comparing each block's dense columns (the collision fallback)."""
    es, ek, et, ep = entries
    ns = np.full((q, c), DEAD, np.int32)
    ns[es, ek] = et
    push = None
    if cd is not None:
        push = np.zeros((q, c), np.int32)
        if ep is not None:
            push[es, ek] = ep
    local = np.zeros((nb, c), np.int64)
    rep_of = np.zeros(nb * c, np.int64)
    for b in range(nb):
        states = np.flatnonzero(bl == b)
        if has_entry[states[0]]:
            local[b], reps = _block_classes(states, ns, push, cd)
            rep_of[b * c : (b + 1) * c] = reps[local[b]]
    return local, rep_of


def _block_classes(states, ns, ep, cd) -> tuple[np.ndarray, np.ndarray]:
    """(int64[C]: each dense class's class within ``states``' block, with class 0 for every
    class dead in all of them; int64[W]: one dense class per block class)."""
    cols = [ns[states].T]
    if ep is not None:
        cols.append(ep[states].T)
        m = np.isin(cd["cd_state"], states)
        if m.any():  # each class's context-dependent edges from these states, as one id
            sig = np.concatenate(
                [
                    np.stack([cd["cd_state"], cd["cd_npop"], cd["cd_target"], cd["cd_push"]], 1),
                    cd["cd_pop"],
                ],
                axis=1,
            )[m]
            _, sid = distinct_rows_unordered(sig)  # (ids: only compared)
            edges: dict[int, list] = {}
            for k, x in zip(cd["cd_class"][m].tolist(), sid.reshape(-1).tolist(), strict=True):
                edges.setdefault(k, []).append(x)
            ids: dict[tuple, int] = {(): 0}
            per_class = np.zeros((ns.shape[1], 1), np.int64)
            for k, xs in edges.items():
                per_class[k, 0] = ids.setdefault(tuple(sorted(xs)), len(ids))
            cols.append(per_class)
    sig = np.concatenate([x.astype(np.int64) for x in cols], axis=1)
    first, inverse = distinct_rows_unordered(sig)  # hashed, checked exactly
    # number block classes by first dense class, so dense class 0 (never allowed) is class 0
    order = np.argsort(first)
    rank = np.empty(len(first), np.int64)
    rank[order] = np.arange(len(first))
    return rank[inverse], first[order].astype(np.int64)


def block_tables_walks(q: int, c: int, token_class, entries, walks, cd: dict | None, block):
    """`block_tables` with most allowed cells given as rows instead of listed: a walk's
    cells for global class k are the live entries of its row for k over its wide states,
    so a row shared by many classes is hashed, checked and written once per block instead
    of once per class (at 1,000 BFCL tools, most of the 8,465 global classes share each
    tool's few rows).

    Args:
      entries: (state, class, next state, push) of the other allowed cells, each once.
      walks: (wide int[W], rows int[R, W], sink, class_row int[C]: each global class's row,
        -1 for none) per walk; the cells of row r at column w: (wide[w], rows[r, w]), push
        0, where not ``sink``.

    Returns:
      `block_tables`' arrays, or None where the walks' wide states overlap, a listed entry
      falls on a live row cell (the dense table's last write would decide) or a hash check
      fails: the caller then lists every cell (`block_tables`).
    """
    block = np.asarray(block)
    if block.shape != (q,):
        raise ValueError(f"split_blocks: expected one block per state ({q}), got {block.shape}")
    es, ek, et, ep = (np.asarray(x, np.int64) for x in entries)
    key = es * c + ek
    order = np.argsort(key, kind="stable")
    es, ek, et, ep, key = es[order], ek[order], et[order], ep[order], key[order]
    if key.size > 1 and (key[1:] == key[:-1]).any():
        return None
    owner = np.full(q, -1, np.int64)
    col = np.full(q, -1, np.int64)
    has_entry = np.zeros(q, bool)
    has_entry[es] = True
    for i, (wide, rows, sink, crow) in enumerate(walks):
        if (owner[wide] >= 0).any():
            return None
        owner[wide] = i
        col[wide] = np.arange(wide.shape[0])
        used = np.zeros(rows.shape[0] + 1, bool)
        used[crow] = True  # the rows some class has (-1: the last entry, dead)
        used = used[:-1]
        if used.any():
            live = rows[used] != sink if not used.all() else rows != sink
            has_entry[wide[live.any(axis=0)]] = True
    hit = np.flatnonzero(owner[es] >= 0)  # listed entries at wide states: on dead row cells?
    for i, at in _split_by(owner[es[hit]], hit):
        wide, rows, sink, crow = walks[i]
        r = crow[ek[at]]
        ok = r >= 0
        if (rows[r[ok], col[es[at[ok]]]] != sink).any():
            return None
    pda = cd is not None
    if pda:
        cd = {name: np.asarray(cd[name]) for name in CD_ARRAYS}
        has_entry[cd["cd_state"]] = True
    ids, bl = np.unique(np.where(has_entry, block, -1), return_inverse=True)
    bl = bl.reshape(-1).astype(np.int32)
    nb = len(ids)
    prepared = [_walk_rows(w, bl, q) for w in walks]
    got = _row_classes(q, c, bl, nb, (es, ek, et, ep), key, walks, prepared, cd)
    if got is None:
        return None
    local, rep_of, reps = got
    width = local.max(axis=1) + 1
    row_len = width[bl]
    row_start = np.concatenate([[0], np.cumsum(row_len)[:-1]]).astype(np.int32)
    flat = np.full(int(row_len.sum()), DEAD, np.int32)
    flat_push = np.zeros(flat.shape, flat.dtype)  # (calloc: pages with no push stay unwritten)
    cell = bl[es].astype(np.int64) * c + ek
    own = rep_of[cell] == ek
    at = row_start[es[own]] + local.reshape(-1)[cell[own]]
    flat[at] = et[own]
    flat_push[at] = ep[own]
    rcuts = np.searchsorted(reps // c, np.arange(nb + 1))
    for (wide, rows, _, crow), (ub, _, cell_of, lo, n) in zip(walks, prepared, strict=True):
        if not ub.size:
            continue
        # every (class, block of the walk) whose class is its block class's first
        sel, jj = _in_blocks(rcuts, ub)
        bc = reps[sel]
        kk = bc % c
        r = crow[kk]
        ok = r >= 0
        kk, jj, bc, r = kk[ok], jj[ok], bc[ok], r[ok]
        cnt = n[r, jj]
        sel = cnt > 0
        kk, jj, bc, cnt, r = kk[sel], jj[sel], bc[sel], cnt[sel], r[sel]
        start = lo[r, jj]
        pos = ranges(start, cnt)
        r_, w_ = cell_of[0][pos], cell_of[1][pos]
        flat[row_start[wide[w_]] + local.reshape(-1)[np.repeat(bc, cnt)]] = rows[r_, w_]
    out = {
        "token_class": local.astype(np.int32)[:, np.asarray(token_class)],
        "next_state": flat,
        "class_block": bl,
        "row_start": row_start,
    }
    if pda:
        out.update(edge_push=flat_push, **_cd_in_blocks(cd, local, bl))
    return out


def _split_by(key: np.ndarray, items: np.ndarray):
    """(key value, its items) for each distinct value of ``key`` (aligned with ``items``)."""
    order = np.argsort(key, kind="stable")
    k, it = key[order], items[order]
    cuts = np.flatnonzero(np.diff(k)) + 1
    pairs = zip(np.split(k, cuts), np.split(it, cuts), strict=True)
    return [(int(g[0]), x) for g, x in pairs if g.size]


def _walk_rows(walk, bl, q):
    """A walk's live cells grouped by (row, block of its column): (the walk's blocks ub,
    each column's index in ub, the cells (row, column) in (row, block) order, the first
    cell and the number of cells of each (row, block), int64[R, len(ub)])."""
    wide, rows, sink, crow = walk
    ub, cj = np.unique(bl[wide], return_inverse=True)
    cj = cj.reshape(-1)
    nub = ub.shape[0]
    live_r, live_w = np.nonzero(rows != sink)
    idx = live_r * nub + cj[live_w]
    order = np.argsort(idx, kind="stable")
    live_r, live_w, idx = live_r[order], live_w[order], idx[order]
    n = np.bincount(idx, minlength=rows.shape[0] * nub).reshape(rows.shape[0], nub)
    lo = (np.cumsum(n.reshape(-1)) - n.reshape(-1)).reshape(n.shape)
    return ub, cj, (live_r, live_w), lo, n


def _row_classes(q, c, bl, nb, entries, key, walks, prepared, cd):
    """`_sparse_classes` with the walks' rows: (local, rep_of, the block classes' first
    (block, class) cells with live entries, sorted) or None on a failed check.

    Only the (block, class) cells that differ from their block's *background* are hashed,
    grouped and checked: a walk's background row is the row most of its classes have, and
    a class whose row in every walk of a block is the background row there (restricted to
    the block's columns, compared by canonical ids: exact) and that has no listed entry or
    context-dependent edge in the block has the background's signature. At 1,000 BFCL
    tools that is two thirds of the 8.5 M (block, class) cells. The hashes are the same
    absolute sums as over every cell (background plus the differences), so the classes,
    their numbering and the tables are the same."""
    es, ek, _, _ = entries
    val, cell, keys, counts, sid = _cell_hashes(q, c, bl, nb, entries, cd)
    bg_key = [np.zeros(nb), np.zeros(nb)]  # the background's hash sums and cells per block
    bg_count = np.zeros(nb, np.int64)
    off = np.zeros(nb * c, bool)  # (block, class) cells off the background: listed...
    off[cell] = True
    info = []
    for (wide, rows, sink, crow), (ub, cj, (live_r, live_w), _, n) in zip(
        walks, prepared, strict=True
    ):
        nub, nr = ub.shape[0], rows.shape[0]
        # canonical ids of the rows restricted to each block's columns (last: the dead row)
        dead = np.full((1, rows.shape[1]), sink, rows.dtype)
        full_rows = np.concatenate([rows, dead])
        can = np.empty((nr + 1, nub), np.int64)
        for j in range(nub):
            can[:, j] = distinct_rows(full_rows[:, cj == j])[1]
        hr = [np.zeros((nr + 1) * nub), np.zeros((nr + 1) * nub)]
        if live_r.size:
            with np.errstate(over="ignore"):
                hc = _mix(
                    wide[live_w].astype(np.uint64) * np.uint64(0xD6E8FEB86659FD93)
                    ^ (rows[live_r, live_w].astype(np.uint64) * np.uint64(q + 1)),
                    2,
                )
            idx = live_r * nub + cj[live_w]
            hr = [
                np.bincount(
                    idx, weights=(hc >> np.uint64(s)) & np.uint64(0xFFFFFFFF), minlength=hr[0].size
                )
                for s in (0, 32)
            ]
        hr = [x.reshape(nr + 1, nub) for x in hr]
        nf = np.concatenate([n, np.zeros((1, nub), n.dtype)])
        rows_of = np.where(crow >= 0, crow, nr)
        ref = int(np.bincount(rows_of, minlength=nr + 1).argmax())
        for x, h in zip(bg_key, hr, strict=True):
            x[ub] += h[ref]
        bg_count[ub] += nf[ref]
        kk, jj = np.nonzero((can != can[ref])[rows_of])  # ...and rows off the background
        off[ub[jj].astype(np.int64) * c + kk] = True
        info.append((ub, can, rows_of, ref, hr, nf))
    d = np.flatnonzero(off)
    db = d // c
    cuts = np.searchsorted(db, np.arange(nb + 1))
    dkeys = [x[d] + b[db] for x, b in zip(keys, bg_key, strict=True)]
    wc = bg_count[db]
    for ub, _, rows_of, ref, hr, nf in info:  # the differences from the background
        at, j = _in_blocks(cuts, ub)
        r = rows_of[d[at] % c]
        for x, h in zip(dkeys, hr, strict=True):
            x[at] += h[r, j] - h[ref, j]
        wc[at] += nf[r, j] - nf[ref, j]
    # per block, the background's first class: the first class not off it (if any)
    pos = np.arange(d.shape[0]) - cuts[db]
    k0 = np.diff(cuts)
    miss = (d % c) != pos
    np.minimum.at(k0, db[miss], pos[miss])
    bg = np.flatnonzero((k0 < c) & (bg_count > 0))  # blocks with a live background class
    total_d = counts[0][d] + counts[1][d] + wc
    live = np.concatenate([d[total_d > 0], bg * c + k0[bg]])
    wcount = np.zeros(nb * c, np.int64)
    wcount[d] = wc
    wcount[bg * c + k0[bg]] = bg_count[bg]
    for x, dk, b in zip(keys, dkeys, bg_key, strict=True):
        x[d] = dk
        x[bg * c + k0[bg]] = b[bg]
    live.sort()
    local, rep_of = _group_cells(live, keys, nb, c)
    if not _like_representatives(live, [*counts, wcount], rep_of, c):
        return None
    lb = live // c
    lcuts = np.searchsorted(lb, np.arange(nb + 1))
    # rows: each class's row, restricted to the block, is its representative's
    for ub, can, rows_of, _, _, _ in info:
        at, j = _in_blocks(lcuts, ub)
        bc = live[at]
        if (can[rows_of[bc % c], j] != can[rows_of[rep_of[bc]], j]).any():
            return None
    if not _listed_like_representatives(es, ek, val, key, cell, rep_of, local, cd, sid, c):
        return None
    # the background classes: every other cell of a block is its background's
    bg_local = np.zeros(nb, np.int64)
    bg_local[bg] = local[bg * c + k0[bg]]
    on = ~off
    ob = np.flatnonzero(on) // c
    local[on] = bg_local[ob]
    rep_of[on] = np.minimum(k0, c - 1)[ob]
    reps = live[rep_of[live] == live % c]
    return local.reshape(nb, c), rep_of, reps


def _in_blocks(cuts: np.ndarray, ub: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions, index in ``ub`` of each) of the sorted cells whose block is one of
    ``ub`` (``cuts``: each block's first position, then the end)."""
    lo, hi = cuts[ub], cuts[ub + 1]
    m = hi - lo
    at = ranges(lo, m)
    return at, np.repeat(np.arange(ub.shape[0]), m)


def _cd_in_blocks(cd: dict, local: np.ndarray, bl: np.ndarray) -> dict:
    """The context-dependent edges in block classes, merged classes' duplicates dropped."""
    cls = local[bl[cd["cd_state"]], cd["cd_class"]]
    key = np.concatenate(
        [
            np.stack([cd["cd_state"], cls, cd["cd_npop"], cd["cd_target"], cd["cd_push"]], axis=1),
            cd["cd_pop"],
        ],
        axis=1,
    )
    first, _ = distinct_rows_unordered(key)
    # by state, then class, then the rest of the row (a total order: the rows are distinct)
    first = first[np.lexsort(key[first].T[::-1])]
    return {
        "cd_state": cd["cd_state"][first].astype(np.int32),
        "cd_class": cls[first].astype(np.int32),
        "cd_pop": cd["cd_pop"][first].astype(np.int32),
        "cd_npop": cd["cd_npop"][first].astype(np.int32),
        "cd_target": cd["cd_target"][first].astype(np.int32),
        "cd_push": cd["cd_push"][first].astype(np.int32),
    }
