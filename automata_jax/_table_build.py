"""The steps of `ConstraintTables.from_dfas`: check the inputs, pick the padded sizes, and
lay the DFAs (and PDA blocks, forced runs, bitmasks) out as padded NumPy arrays."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from automata_compile import IncompatibleVocabularyError, TokenDFA
from automata_jax._capacity import (
    DEFAULT_STACK_SIZE,
    FINE_DENSE_CELLS,
    TableCapacity,
    bucket,
    cells_bucket,
    check_fits,
    fine_bucket,
)
from automata_jax._errors import RuntimeShapeError, TableCapacityError

Sizes = tuple[int, int, int]  # (K, Q, C) padded


def load_dfas(dfas) -> list[TokenDFA]:
    """A `TokenDFA`, an artifact path or a sequence of them, as a list of `TokenDFA`s."""
    if isinstance(dfas, (TokenDFA, str, os.PathLike)) or type(dfas).__name__ == "BitsetTables":
        dfas = [dfas]
    for d in dfas:
        if type(d).__name__ == "BitsetTables":  # no import: the runtime loads no compiler
            raise RuntimeShapeError(
                "ConstraintTables.from_dfas: got BitsetTables (from compile_json_schema_bitset); "
                "build its tables with ConstraintTables.from_bitset"
            )
    return [d if isinstance(d, TokenDFA) else TokenDFA.load(d) for d in dfas]


def check_vocab_size(vocab_size) -> int:
    if not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise RuntimeShapeError(f"vocab_size: expected a positive int, got {vocab_size!r}")
    return int(vocab_size)


def shared_fingerprint(dfas: Sequence[TokenDFA]) -> str:
    """The one vocabulary fingerprint of ``dfas`` ("" for none)."""
    fingerprints = {d.vocab_fingerprint for d in dfas}
    if len(fingerprints) > 1:
        listing = "; ".join(
            f"#{i} ({d.spec_kind} {d.spec[:30]!r}): {d.vocab_fingerprint[:16]}…"
            for i, d in enumerate(dfas)
        )
        raise IncompatibleVocabularyError(
            f"ConstraintTables.from_dfas: expected every DFA to share one vocabulary, got "
            f"{len(fingerprints)} fingerprints ({listing}); compile all constraints with "
            "the same tokenizer."
        )
    return next(iter(fingerprints), "")


def resolve_eos_ids(
    dfas: Sequence[TokenDFA], eos_ids: Sequence[int] | None, vocab_size: int
) -> tuple[int, ...]:
    """``eos_ids`` (default: the union of the DFAs'), sorted, checked against the vocabulary."""
    if eos_ids is None:
        eos_ids = sorted({int(i) for d in dfas for i in d.eos_ids})
    eos_ids = tuple(sorted({int(i) for i in eos_ids}))
    if not eos_ids:
        raise RuntimeShapeError(
            "eos_ids: expected at least one EOS id (from the DFAs or the eos_ids argument), "
            "got none"
        )
    bad_eos = [i for i in eos_ids if not 0 <= i < vocab_size]
    if bad_eos:
        raise RuntimeShapeError(
            f"eos_ids: expected ids in [0, {vocab_size}), got {bad_eos} (vocab_size is the "
            "model's logits width)"
        )
    return eos_ids


def capacity_sizes(
    dfas: Sequence[TokenDFA], capacity, *, bitmask: bool, defaults_kept: bool
) -> tuple[Sizes, int]:
    """``(K, Q, C)`` and the stack bound S of a fixed `TableCapacity` that every DFA fits."""
    if not isinstance(capacity, TableCapacity):
        raise RuntimeShapeError(
            f"capacity: expected a TableCapacity, got {type(capacity).__name__}"
        )
    if not defaults_kept:
        raise RuntimeShapeError(
            "capacity: min_states, min_classes, min_constraints and stack_size come "
            "from the TableCapacity; leave them at their defaults"
        )
    if bitmask and not capacity.mask_rows:
        raise RuntimeShapeError('capacity: mask_impl="bitmask" needs TableCapacity.mask_rows >= 1')
    check_fits(dfas, capacity)
    return (capacity.constraints, capacity.states, capacity.classes), capacity.stack


def bucket_sizes(
    dfas: Sequence[TokenDFA], min_constraints: int, min_states: int, min_classes: int
) -> Sizes:
    """``(K, Q, C)``: each rounded up to a power of two (`bucket`); Q and C to a quarter
    power of two (`fine_bucket`) where the dense table would pass ``FINE_DENSE_CELLS``
    (github-issue-forms.json on Llama-3: 18,575 x 5,146 is 32,768 x 8,192 as powers of
    two, 1 GB of int32; 20,480 x 6,144 so)."""
    q = max((d.num_states for d in dfas), default=1)
    c = max((d.num_classes for d in dfas), default=1)
    fine = bucket(q, min_states) * bucket(c, min_classes) > FINE_DENSE_CELLS
    up = fine_bucket if fine else bucket
    return bucket(len(dfas), min_constraints), up(q, min_states), up(c, min_classes)


def block_sizes(dfas: Sequence[TokenDFA], capacity, sizes: Sizes) -> tuple[int, int] | None:
    """``(NB, R)`` of the state-block layout (class maps per constraint, flat row cells per
    constraint, both padded), or None for the dense layout: a batch without state blocks."""
    if capacity is not None:
        return (capacity.blocks, capacity.cells) if capacity.blocks else None
    if not any(d.is_blocked for d in dfas):
        return None
    return bucket(max(d.num_blocks for d in dfas), 1), cells_bucket(max(d.num_cells for d in dfas))


def dfa_arrays(
    dfas: Sequence[TokenDFA],
    vocab_size: int,
    eos_ids: tuple[int, ...],
    sizes: Sizes,
    blocks: tuple[int, int] | None = None,
) -> dict:
    """The DFA part of the tables, padded to ``sizes`` (EOS ids get class 0), in the dense
    layout or (``blocks``: (NB, R)) the state-block one (see `automata_jax._layout`)."""
    kp, qp, cp = sizes
    nbp = blocks[0] if blocks else 1
    token_class = np.zeros((kp * nbp, vocab_size), np.int32)
    if blocks:  # each constraint's rows, then one dead row that padded states read
        next_state = np.full((kp, blocks[1] + cp), -1, np.int32)
        class_map = np.repeat(np.arange(kp, dtype=np.int32)[:, None] * nbp, qp, axis=1)
        row_start = np.zeros((kp, qp), np.int32)
        row_len = np.zeros((kp, qp), np.int32)
    else:
        next_state = np.full((kp, qp, cp), -1, np.int32)
    accepting = np.zeros((kp, qp), bool)
    viable = np.zeros((kp, qp), bool)
    start = np.zeros((kp,), np.int32)
    eos = np.zeros((vocab_size,), bool)
    eos[list(eos_ids)] = True
    for i, d in enumerate(dfas):
        q = d.num_states
        used = []  # per class map: which of its classes some token has
        for b, tc in enumerate(d.token_class if d.is_blocked else [d.token_class]):
            tc = _fit_vocabulary(tc, vocab_size, i, d)
            tc[list(eos_ids)] = 0
            token_class[i * nbp + b] = tc
            used.append(np.bincount(tc, minlength=d.num_classes) > 0)
        viable[i, :q] = d.accepting | _allows_a_token(d, used)
        if blocks:
            cells = d.flat_rows()
            next_state[i, : cells.size] = cells
            next_state_rows = d.flat_starts()
            row_start[i, :q] = next_state_rows
            row_start[i, q:] = blocks[1]  # the dead row
            row_len[i, :q] = d.row_width
            class_map[i, :q] = i * nbp + (d.class_block if d.is_blocked else 0)
        else:
            next_state[i, :q, : d.num_classes] = d.next_state
        accepting[i, :q] = d.accepting
        start[i] = d.start
    out = {
        "token_class": token_class,
        "next_state": next_state,
        "accepting": accepting,
        "viable": viable,
        "start": start,
        "eos_mask": eos,
    }
    if blocks:
        out.update(class_map=class_map, row_start=row_start, row_len=row_len, row_width=cp)
    return out


def _allows_a_token(d: TokenDFA, used: list) -> np.ndarray:
    """bool[Q]: whether each state's row allows a class that some token has (``used``:
    per class map), read from the flat rows without gathering them."""
    if not d.is_blocked:
        return (d.next_state[:, used[0]] >= 0).any(axis=1)
    width = d.row_width
    # each cell's class is used in its state's block: the blocks' masks, state by state
    cell_used = np.concatenate([used[b][:w] for b, w in zip(d.class_block, width, strict=True)])
    ok = (d.next_state >= 0) & cell_used
    rows = width > 0  # (every row has a cell; an empty one would read its neighbour's)
    out = np.zeros(d.num_states, bool)
    if ok.size and rows.any():
        out[rows] = np.logical_or.reduceat(ok, d.flat_starts()[rows])
    return out


def resolve_stack_size(dfas: Sequence[TokenDFA], stack_size, *, fixed: bool, bitmask: bool) -> int:
    """S: ``stack_size`` (default 64 with a grammar in the batch, else 0), checked."""
    any_pda = any(d.is_pda for d in dfas)
    if stack_size is None:
        stack_size = DEFAULT_STACK_SIZE if any_pda else 0
    if isinstance(stack_size, bool) or not isinstance(stack_size, (int, np.integer)):
        raise RuntimeShapeError(f"stack_size: expected an int >= 1, got {stack_size!r}")
    stack_size = int(stack_size)
    if stack_size < (1 if any_pda else 0):
        raise RuntimeShapeError(f"stack_size: expected an int >= 1, got {stack_size}")
    if (any_pda or stack_size and fixed) and bitmask:
        raise RuntimeShapeError(
            'mask_impl: expected "gather" for a batch with a grammar constraint (a bitmask '
            'cannot see the stack), got "bitmask"'
        )
    return stack_size


def pda_arrays(
    dfas: Sequence[TokenDFA], sizes: Sizes, capacity, viable: np.ndarray, cells: int = 0
) -> dict[str, np.ndarray]:
    """The PDA block ({} when none is needed); marks states with only context-dependent
    edges as viable (in place). ``cells``: R of the state-block layout (0: dense), where
    ``edge_push`` is flat like ``next_state``."""
    kp, qp, cp = sizes
    if capacity is not None:
        pda = _pda_block(dfas, kp, qp, cp, capacity, cells) if capacity.stack else {}
    else:
        pda = _pda_block(dfas, kp, qp, cp, None, cells) if any(d.is_pda for d in dfas) else {}
    for i, d in enumerate(dfas):
        if d.is_pda:  # states with only context-dependent edges are not dead
            viable[i, np.unique(d.cd_state)] = True
    return pda


def forced_tables(dfas: Sequence[TokenDFA], kp: int, qp: int, fixed: int | None = None) -> dict:
    """forced_tokens / forced_len / forced_states padded to [K, Q, F]; {} if nothing is
    forced. ``fixed``: F from a capacity (0: none; longer runs are cut to F tokens)."""
    longest = max(
        (int(d.forced_len.max(initial=0)) for d in dfas if d.forced_len is not None), default=0
    )
    if fixed is not None:
        longest = fixed
    if longest == 0:
        return {}
    f = bucket(longest, 1) if fixed is None else fixed
    tokens = np.zeros((kp, qp, f), np.int32)
    length = np.zeros((kp, qp), np.int32)
    states = np.zeros((kp, qp, f), np.int32)
    for i, d in enumerate(dfas):
        if d.forced_len is None:
            continue
        q = d.num_states
        n = min(f, d.max_forced)
        tokens[i, :q, :n] = d.forced_tokens[:, :n]
        length[i, :q] = np.minimum(d.forced_len, f)
        cur = np.arange(q)
        for j in range(f):
            live = d.forced_len > j
            if j < n:
                cur = cur.copy()
                cur[live] = d.step(cur[live], d.forced_tokens[live, j])
            states[i, :q, j] = cur
    return dict(forced_tokens=tokens, forced_len=length, forced_states=states)


def exit_tables(
    dfas: Sequence[TokenDFA], token_class: np.ndarray, eos_ids: tuple[int, ...], kp: int, qp: int
) -> dict:
    """``exit_tokens`` int32[K, Q]: per state, the token that ends the current stretch of free
    text and enters the longest forced run (-1: none); speculative decoding drafts it where a
    copied span stops (`automata_jax._speculative`). Only a proposal: drafts are verified.

    The rule, per state ``q`` (host side, from the DFA arrays only). A *candidate* is an
    allowed non-EOS token ``t`` (the lowest id of its class) after which the state forces a
    run, or allows nothing but EOS (the constraint's end). Each candidate reaches a state
    ``r`` (after its run) in ``1 + run`` tokens. Take the ``r`` reached by the longest such
    path (ties: the lowest token id); among the candidates that reach that same ``r`` (they
    spell the same text), take the fewest tokens (a longer token: what a BPE tokenizer
    writes; ties: the lowest id). E.g. inside a JSON string value followed by a key, ``"``
    then ``,"``, ``age``, ``":`` and ``","`` then ``age``, ``":`` reach the same state, and
    ``","`` is the exit.
    """
    exits = np.full((kp, qp), -1, np.int32)
    nbp = token_class.shape[0] // kp
    not_eos = np.ones(token_class.shape[1], dtype=bool)
    not_eos[list(eos_ids)] = False
    scale = np.int64(1 << 40)  # lexicographic keys: (run, then token id)
    for i, d in enumerate(dfas):
        if d.forced_len is None:
            continue
        q_n = d.num_states
        forced_len = np.asarray(d.forced_len)
        end = np.arange(q_n)  # the state after each state's whole forced run
        for j in range(d.max_forced):
            live = forced_len > j
            end = end.copy()
            end[live] = d.step(end[live], d.forced_tokens[live, j])
        # The allowed (state, class) pairs, sparse and row by row (most pairs are dead), block
        # by block (each block its own class map); a state's pairs stay contiguous.
        only_eos = np.zeros(q_n, bool)
        pairs = []
        for b, states, _, block_rows, _ in d.blocks():
            tc = token_class[i * nbp + b]
            c_n = block_rows.shape[1]
            ids = np.flatnonzero((tc < c_n) & not_eos)
            # each class's lowest non-EOS token id (``ids`` ascend: written in reverse, the
            # last write to a class is its first id, as `canonical_numbering` relies on)
            rep = np.full(c_n, -1, np.int64)
            rep[tc[ids][::-1]] = ids[::-1]
            r, cols = np.nonzero((block_rows >= 0) & (rep >= 0)[None, :])
            only_eos[states] = np.asarray(d.accepting)[states] & (
                np.bincount(r, minlength=states.shape[0]) == 0
            )
            pairs.append((states[r], block_rows[r, cols].astype(np.int64), rep[cols]))
        rows, to, token = (np.concatenate([p[k] for p in pairs]) for k in range(3))
        run = forced_len[to]
        cand = (run > 0) | only_eos[to]
        if not cand.any():
            continue
        rows, to, run, token = rows[cand], to[cand], run[cand], token[cand]
        reach = np.where(run > 0, end[to], to)
        total = 1 + run.astype(np.int64)
        starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])  # one segment per state
        seg = np.repeat(np.arange(starts.shape[0]), np.diff(np.r_[starts, rows.shape[0]]))
        # The farthest reach (ties: the lowest token id; one token per class, so a state's
        # keys are distinct) ...
        longest = total * scale - token
        is_far = longest == np.maximum.reduceat(longest, starts)[seg]
        target = np.empty(starts.shape[0], np.int64)
        target[seg[is_far]] = reach[is_far]
        # ... and the fewest tokens among the candidates reaching it (ties: the lowest id).
        fewest = np.where(reach == target[seg], total * scale + token, np.iinfo(np.int64).max)
        exits[i, rows[starts]] = np.minimum.reduceat(fewest, starts) % scale
    return {"exit_tokens": exits}


def structure_tables(dfas: Sequence[TokenDFA], kp: int, qp: int) -> dict:
    """``structure_drafts`` int32[K, Q]: each DFA's `TokenDFA.structure_draft` padded with -1
    (all -1 for a DFA without one: an artifact of an older compiler). Built whenever the
    forced runs are, so tables of one capacity keep one pytree structure."""
    out = np.full((kp, qp), -1, np.int32)
    for i, d in enumerate(dfas):
        if d.structure_draft is not None:
            out[i, : d.num_states] = d.structure_draft
    return {"structure_drafts": out}


def _pda_block(
    dfas: list[TokenDFA],
    kp: int,
    qp: int,
    cp: int,
    capacity: TableCapacity | None = None,
    cells: int = 0,
) -> dict[str, np.ndarray]:
    """The PDA arrays of the batch, padded (DFAs: no pushes, no context-dependent edges).

    Every size is bucketed to a power of two with a floor (pushes 16 x 8, context edges 64,
    16 per state, 8 popped symbols), so grammars of similar size share one compilation;
    or taken from ``capacity``.
    """
    if capacity is not None:
        pp, lp, n = capacity.pushes, capacity.push_len, capacity.context_edges
        kpop, e = capacity.pops, capacity.edges_per_state
    else:
        pdas = [d for d in dfas if d.is_pda]
        pp = bucket(max(d.push_seq.shape[0] for d in pdas), 16)
        lp = bucket(max(d.push_seq.shape[1] for d in pdas), 8)
        n = bucket(max(d.cd_state.shape[0] for d in pdas), 64)
        kpop = bucket(max(d.cd_pop.shape[1] for d in pdas), 8)
        per_state = [np.bincount(d.cd_state, minlength=1).max(initial=0) for d in pdas]
        e = bucket(max(per_state), 16)
    out = {
        "edge_push": np.zeros((kp, cells + cp) if cells else (kp, qp, cp), np.int32),
        "push_seq": np.full((kp, pp, lp), -1, np.int32),
        "push_len": np.zeros((kp, pp), np.int32),
        "cd_first": np.zeros((kp, qp), np.int32),
        "cd_count": np.zeros((kp, qp), np.int32),
        "edges_per_state": e,
        "cd_class": np.zeros((kp, n), np.int32),
        "cd_pop": np.full((kp, n, kpop), -1, np.int32),
        "cd_npop": np.zeros((kp, n), np.int32),
        "cd_target": np.zeros((kp, n), np.int32),
        "cd_push": np.zeros((kp, n), np.int32),
    }
    for i, d in enumerate(dfas):
        if not d.is_pda:
            continue
        if cells:
            flat = d.flat_rows("edge_push")
            out["edge_push"][i, : flat.size] = flat
        else:
            q, c = d.next_state.shape
            out["edge_push"][i, :q, :c] = d.edge_push
        p, length = d.push_seq.shape
        out["push_seq"][i, :p, :length] = d.push_seq
        out["push_len"][i, :p] = d.push_len
        m = d.cd_state.shape[0]
        for name in ("cd_class", "cd_npop", "cd_target", "cd_push"):
            out[name][i, :m] = getattr(d, name)
        out["cd_pop"][i, :m, : d.cd_pop.shape[1]] = d.cd_pop
        q = d.num_states  # cd_state is sorted: each state's edges are one run
        out["cd_first"][i, :q] = np.searchsorted(d.cd_state, np.arange(q))
        out["cd_count"][i, :q] = np.bincount(d.cd_state, minlength=q)
    return out


def _fit_vocabulary(tc: np.ndarray, vocab_size: int, index: int, dfa: TokenDFA) -> np.ndarray:
    """A class map of the DFA padded (class 0) or truncated to ``vocab_size`` ids."""
    tc = np.asarray(tc, np.int32)
    if tc.shape[0] <= vocab_size:
        return np.concatenate([tc, np.zeros(vocab_size - tc.shape[0], np.int32)])
    extra = np.flatnonzero(tc[vocab_size:])
    if extra.size:
        raise IncompatibleVocabularyError(
            f"ConstraintTables.from_dfas: DFA #{index} ({dfa.spec_kind} {dfa.spec[:30]!r}) "
            f"covers {tc.shape[0]} token ids and may emit id {vocab_size + int(extra[0])}, but "
            f"the model's logits width is {vocab_size}; expected a vocabulary of at most "
            f"{vocab_size} ids (compile for the model's tokenizer)."
        )
    return tc[:vocab_size].copy()


def bitmasks(
    token_class: np.ndarray,
    dfas: Sequence[TokenDFA],
    kp: int,
    qp: int,
    fixed_rows: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Deduplicated packed allowed-token masks of every real (constraint, state), each
    state's from its block's rows and class map (``token_class``: the tables', EOS at 0).

    Row 0 is the all-zero mask (padding, dead). Rows are padded to a power of two, or to
    ``fixed_rows`` (a capacity's ``mask_rows``).
    """
    v = token_class.shape[1]
    nbp = token_class.shape[0] // kp
    words = (v + 31) // 32
    rows: dict[bytes, int] = {bytes(words * 4): 0}
    packed_rows = [np.zeros(words, np.uint32)]
    mask_row = np.zeros((kp, qp), np.int32)
    chunk = max(1, (1 << 24) // max(v, 1))  # ~16 MB of bools at a time
    for k, d in enumerate(dfas):
        for b, states, _, block_rows, _ in d.blocks():
            tc = token_class[k * nbp + b]
            # States with the same set of allowed classes have the same token mask.
            patterns, inverse = np.unique(block_rows >= 0, axis=0, return_inverse=True)
            pattern_row = np.zeros(len(patterns), np.int32)
            for lo in range(0, len(patterns), chunk):
                allowed = patterns[lo : lo + chunk][:, tc]  # bool[n, V]
                packed = np.packbits(allowed, axis=1, bitorder="little")
                packed = np.pad(packed, ((0, 0), (0, words * 4 - packed.shape[1])))
                for j, row in enumerate(packed):
                    key = row.tobytes()
                    idx = rows.get(key)
                    if idx is None:
                        idx = rows[key] = len(packed_rows)
                        packed_rows.append(np.frombuffer(key, "<u4").astype(np.uint32))
                    pattern_row[lo + j] = idx
            mask_row[k, states] = pattern_row[inverse.reshape(-1)]
    m = bucket(len(packed_rows), 8)
    if fixed_rows is not None:
        if len(packed_rows) > fixed_rows:
            raise TableCapacityError(
                f"ConstraintTables.from_dfas: the batch needs mask_rows={len(packed_rows):,} "
                f"distinct bitmask rows, but capacity.mask_rows is {fixed_rows:,}"
            )
        m = fixed_rows
    bits = np.zeros((m, words), np.uint32)
    bits[: len(packed_rows)] = np.stack(packed_rows)
    return bits, mask_row
