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

from automata_compile.tokens._token_dfa import DEAD, TokenDFA

__all__ = ["split_blocks"]


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
    block = np.asarray(block)
    q, c = dfa.next_state.shape
    if block.shape != (q,):
        raise ValueError(f"split_blocks: expected one block per state ({q}), got {block.shape}")
    ns = dfa.next_state
    ep = dfa.edge_push if dfa.is_pda else None
    has_cd = np.zeros(q, bool)
    if dfa.is_pda:
        has_cd[dfa.cd_state] = True
    empty = ~(ns >= 0).any(axis=1) & ~has_cd
    ids, bl = np.unique(np.where(empty, -1, block), return_inverse=True)
    bl = bl.reshape(-1).astype(np.int32)  # the empty block (if any) is block 0
    nb = len(ids)
    local = np.zeros((nb, c), np.int64)  # each dense class's class in each block
    reps: list[np.ndarray] = []
    for b in range(nb):
        states = np.flatnonzero(bl == b)
        if empty[states[0]]:
            reps.append(np.zeros(1, np.int64))
            continue
        local[b], rep = _block_classes(dfa, states, ns, ep)
        reps.append(rep)
    width = np.array([len(r) for r in reps], np.int64)
    rows = width[bl]
    row_start = np.concatenate([[0], np.cumsum(rows)[:-1]]).astype(np.int32)
    flat = np.full(int(rows.sum()), DEAD, np.int32)
    flat_push = np.zeros_like(flat) if ep is not None else None
    for b in range(nb):
        states = np.flatnonzero(bl == b)
        at = row_start[states][:, None] + np.arange(width[b])[None, :]
        flat[at] = ns[states][:, reps[b]]
        if ep is not None:
            flat_push[at] = ep[states][:, reps[b]]
    token_class = local[:, dfa.token_class].astype(np.int32)  # [NB, V]
    pda = {}
    if dfa.is_pda:
        cls = local[bl[dfa.cd_state], dfa.cd_class]
        key = np.concatenate(
            [
                np.stack([dfa.cd_state, cls, dfa.cd_npop, dfa.cd_target, dfa.cd_push], axis=1),
                dfa.cd_pop,
            ],
            axis=1,
        )
        _, first = np.unique(key, axis=0, return_index=True)  # merged classes: same edges
        first = first[np.lexsort((cls[first], dfa.cd_state[first]))]
        pda = dict(
            edge_push=flat_push,
            cd_state=dfa.cd_state[first],
            cd_class=cls[first].astype(np.int32),
            cd_pop=dfa.cd_pop[first],
            cd_npop=dfa.cd_npop[first],
            cd_target=dfa.cd_target[first],
            cd_push=dfa.cd_push[first],
        )
    return dataclasses.replace(
        dfa,
        token_class=token_class,
        next_state=flat,
        class_block=bl,
        row_start=row_start,
        **pda,
    )


def _block_classes(dfa: TokenDFA, states, ns, ep) -> tuple[np.ndarray, np.ndarray]:
    """(int64[C]: each dense class's class within ``states``' block, with class 0 for every
    class dead in all of them; int64[W]: one dense class per block class)."""
    cols = [ns[states].T]
    if ep is not None:
        cols.append(ep[states].T)
        m = np.isin(dfa.cd_state, states)
        if m.any():  # each class's context-dependent edges from these states, as one id
            sig = np.concatenate(
                [np.stack([dfa.cd_state, dfa.cd_npop, dfa.cd_target, dfa.cd_push], 1), dfa.cd_pop],
                axis=1,
            )[m]
            _, sid = np.unique(sig, axis=0, return_inverse=True)
            edges: dict[int, list] = {}
            for k, x in zip(dfa.cd_class[m].tolist(), sid.reshape(-1).tolist(), strict=True):
                edges.setdefault(k, []).append(x)
            ids: dict[tuple, int] = {(): 0}
            per_class = np.zeros((ns.shape[1], 1), np.int64)
            for k, xs in edges.items():
                per_class[k, 0] = ids.setdefault(tuple(sorted(xs)), len(ids))
            cols.append(per_class)
    sig = np.ascontiguousarray(np.concatenate([x.astype(np.int64) for x in cols], axis=1))
    _, first, inverse = np.unique(sig, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    # number block classes by first dense class, so dense class 0 (never allowed) is class 0
    order = np.argsort(first)
    rank = np.empty(len(first), np.int64)
    rank[order] = np.arange(len(first))
    return rank[inverse], first[order].astype(np.int64)
