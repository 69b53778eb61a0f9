"""Token tables of a PDA made of a root and independent units (a tool-call constraint: the
frame, then one unit per tool), with each unit's finished state block cached across
requests.

A unit's block (its states' rows, its own token classes and class map, its push
sequences and context-dependent edges) depends only on the unit and on the root's
*fixed* states (free text, trigger, envelope, end tag: the same for every request of a
format and flags), never on the other units or the names' trie, as long as no token walked
from the unit reaches a trie state (checked; never seen). So it is computed once, from
the unit's walks alone, and kept with every state number written relative to the unit
(``F + i`` for the unit's i-th state, a fixed root state's rank below ``F``). A request
walks only the root (`_pda_units.walk_states`; the root's walk itself is kept for the last
few roots, `_root_walks`) and the units it has not seen, and assembles the tables: the
root's blocks (`_pda_compose._tables` over the root's walks), then each unit's rows
renumbered by its offset.

The automaton is the one `_pda_compose.compose_pda` builds (tests compare masks, states
and stacks with the dense tables); only the partition differs: each unit is one block with
exactly its own classes, and the root's states are split by the caller (``root_block``).
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading
import types

import numpy as np

from automata_compile import _alloc
from automata_compile.tokens._pda_compose import (
    _check_bytes,
    _classes_exact,
    _classes_hashed,
    _normalized,
    _plain_targets,
    _reached,
    _restricted,
    _tables,
    _token_dfa,
)
from automata_compile.tokens._pda_units import rule_walks, walk_states
from automata_compile.tokens._pda_walk import MIN_WIDE_BYTES, Walker
from automata_compile.tokens._token_dfa import TokenDFA
from automata_compile.tokens._token_trie import trie_for

CACHE_BYTES = 2 << 30
_CACHE: collections.OrderedDict = collections.OrderedDict()
_LOCK = threading.Lock()
_cache_bytes = 0
# The root's walks and tables of the last few requests (`_root_walks`), keyed by the root's
# byte PDA, its units' keys and the vocabulary: at 1,000 BFCL tools on Llama-3 ~1.5 s to
# build and 189 MB to keep (its walks' rows, mostly), so at most 2 such roots.
ROOT_CACHE_SIZE = 4
ROOT_CACHE_BYTES = 512 << 20
_ROOTS: collections.OrderedDict = collections.OrderedDict()
_roots_bytes = 0
_NONE = -(2**30)  # a cell with no state / push in a cached block (`_Block`)
_CD = ("cd_state", "cd_class", "cd_pop", "cd_npop", "cd_target", "cd_push")


class UnitNotCacheable(Exception):
    """A unit's rows reach a state outside the unit and the root's fixed states."""


@dataclasses.dataclass(frozen=True)
class PdaUnit:
    """A unit's place in the PDA: states ``lo .. lo + n - 1`` (contiguous, units after the
    root and in order), rules ``rules[0] .. rules[1] - 1``, and its cache key (the caller's:
    it must name everything the unit's block depends on but the vocabulary)."""

    lo: int
    n: int
    rules: tuple[int, int]
    key: str


@dataclasses.dataclass(frozen=True)
class PdaRoot:
    """The root's states: ``0 .. q0 - 1``; ``trie_lo .. trie_hi - 1`` are the names' trie
    (request-dependent), the others fixed for a format and flags."""

    q0: int
    trie_lo: int
    trie_hi: int

    @property
    def count(self) -> int:
        return self.q0 - (self.trie_hi - self.trie_lo)


@dataclasses.dataclass(frozen=True)
class _Block:
    """A unit's finished block, states relative (module docstring; -1: none)."""

    token_class: np.ndarray  # int16 / int32[V]
    has: np.ndarray  # bool[n]: states with a row (the others: the empty block, width 1)
    width: int
    # every state's row in state order: the unit's own states as local ids (the assembly
    # adds the offset), every other cell _NONE (dead, or a root state: root_at / root_to)
    next_state: np.ndarray  # int32[cells]
    edge_push: np.ndarray  # int32[cells], the unit's push ids minus 1 (none: _NONE)
    root_at: np.ndarray  # int32[E]: the cells whose next state is a fixed root state
    root_to: np.ndarray  # int32[E]: those states, relative
    push_seq: np.ndarray  # int32[P, L], relative; row 0 empty
    push_len: np.ndarray
    cd: dict  # cd_state local, cd_class, cd_pop / cd_target relative, cd_npop, cd_push local
    exits: np.ndarray  # relative ids (< PdaRoot.count) of the root states its rows reach

    @property
    def nbytes(self) -> int:
        arrays = [getattr(self, f.name) for f in dataclasses.fields(self)]
        arrays += list(self.cd.values())
        return sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))


def clear_cache() -> None:
    global _cache_bytes, _roots_bytes
    with _LOCK:
        _CACHE.clear()
        _cache_bytes = 0
        _ROOTS.clear()
        _roots_bytes = 0


def clear_root_cache() -> None:
    """Empties the roots' walks and tables only (`_root_walks`); the units' blocks stay."""
    global _roots_bytes
    with _LOCK:
        _ROOTS.clear()
        _roots_bytes = 0


def _get(key):
    with _LOCK:
        got = _CACHE.get(key)
        if got is not None:
            _CACHE.move_to_end(key)
        return got


def _put(key, block: _Block) -> None:
    global _cache_bytes
    with _LOCK:
        if key in _CACHE:
            return
        _CACHE[key] = block
        _cache_bytes += block.nbytes
        while len(_CACHE) > 1 and _cache_bytes > CACHE_BYTES:
            _cache_bytes -= _CACHE.popitem(last=False)[1].nbytes


def token_pda_units(
    pda, vocab, *, spec_kind: str, spec: str, fixed: PdaRoot, units: list[PdaUnit], root_block
) -> TokenDFA:
    """`_pda_compose.token_pda` for a root and units (`compose_units`)."""
    tables = compose_units(pda, vocab, fixed=fixed, units=units, root_block=root_block)
    return _token_dfa(tables, vocab, spec_kind=spec_kind, spec=spec)


def compose_units(pda, vocab, *, fixed: PdaRoot, units: list[PdaUnit], root_block) -> dict:
    """The token tables of ``pda`` (as `_pda_compose.compose_pda` returns them, with state
    blocks): the root's states in ``root_block``'s blocks (int[q0]), each unit one block.

    Raises:
      UnitNotCacheable: a unit's rows reach a state outside it and the root's fixed states
        (the caller then composes the whole PDA at once).
      UnsupportedGrammarError: as `compose_pda`.
    """
    trie = trie_for(vocab)
    _check_bytes(pda, trie)
    _check_layout(pda, fixed, units)
    key = [(vocab.fingerprint, u.key) for u in units]
    blocks = [_get(k) for k in key]
    walker = Walker(pda, trie)
    start = int(pda.starts[0])
    live = pda.kind.any(axis=1)  # no [states, 256] temporary
    parts, entry = _root_walks(
        walker, np.flatnonzero(live & (pda.rule_of == 0)), fixed, units, vocab
    )
    # the root's tables are a function of the key (the root's byte PDA, the units' keys, the
    # vocabulary) and ``root_block``: kept from the first request that builds them, reused
    # when no unit needs walking (`_RootWalk.tables`)
    all_cached = all(b is not None for b in blocks)
    root_block = np.asarray(root_block, np.int64)
    block_key = hashlib.blake2b(root_block.tobytes(), digest_size=20).hexdigest()
    if all_cached:
        with _LOCK:
            out = entry.tables.get(block_key)
        if out is not None:
            return _assemble(out, blocks, units, fixed)
    n_root = len(parts)
    owner = []
    for i, u in enumerate(units):
        if blocks[i] is None:
            for rule in range(*u.rules):
                got = rule_walks(pda, rule, trie, vocab.fingerprint, walker, MIN_WIDE_BYTES)
                parts += got
                owner += [i] * len(got)
    parts = _normalized(parts, _plain_targets(walker), pda.num_states)
    boundary = _reached(parts, walker, start, collapse=_collapsed(fixed, units, blocks))
    parts = [_restricted(p, boundary) for p in parts]
    by_unit: dict[int, list] = collections.defaultdict(list)
    for i, p in zip(owner, parts[n_root:], strict=True):
        by_unit[i].append(p)
    for i, u in enumerate(units):
        if blocks[i] is None:
            blocks[i] = _unit_block(by_unit[i], u, fixed, walker, trie, pda)
            _put(key[i], blocks[i])
    root = parts[:n_root]
    classes = _classes_hashed(root, trie.num_groups, len(walker.outcomes))
    if classes is None:
        classes = _classes_exact(root, trie.num_groups)
    block = np.zeros(pda.num_states, np.int64)
    block[: fixed.q0] = root_block
    out = _tables(pda, trie, walker, root, *classes, block=block)
    _keep_tables(entry, block_key, out)
    return _assemble(out, blocks, units, fixed)


@dataclasses.dataclass
class _RootWalk:
    """The root's walks (arrays read-only) and the walker's interned outcomes and contexts
    right after them (the walks' outcome ids index ``outcomes``); ``tables``: the root's
    tables (`_tables`' dict, arrays read-only) by a digest of ``root_block``. They are the
    same whichever units' blocks were cached when they were built (a cached unit's block
    and the boundary through it are exact: the module docstring; `test_unit_blocks`
    compares cold, warm and partly cached requests' arrays)."""

    key: str
    walks: tuple
    outcomes: tuple
    contexts: tuple
    nbytes: int
    tables: dict = dataclasses.field(default_factory=dict)


def _keep_tables(entry: _RootWalk, block_key: str, out: dict) -> None:
    global _roots_bytes
    size = 0
    for x in out.values():
        if isinstance(x, np.ndarray):
            x.flags.writeable = False  # shared with later requests (`_assemble` copies)
            size += x.nbytes
    with _LOCK:
        if block_key not in entry.tables and _ROOTS.get(entry.key) is entry:
            entry.tables[block_key] = out
            entry.nbytes += size
            _roots_bytes += size


def _root_walks(walker: Walker, q0s: np.ndarray, fixed: PdaRoot, units, vocab) -> tuple:
    """`walk_states` of the root's states ``q0s`` on the fresh ``walker``, or the same walks
    from the cache with the walker's outcomes and contexts as the walk left them (so every
    later outcome id is the same). A token walked from the root reads the root's states and
    the units' (tokens that end a name run into the call): the key digests the root's byte
    PDA (its states' moves, the start rule's returns), every unit's place, rules and key,
    and the vocabulary's fingerprint."""
    global _roots_bytes
    if len(walker.outcomes) or len(walker.contexts) != 1:
        raise AssertionError("compose_units: the root is walked first")
    pda = walker.pda
    q0 = fixed.q0
    h = hashlib.blake2b(digest_size=20)
    head = [vocab.fingerprint, dataclasses.astuple(fixed), int(pda.num_states), len(pda.names),
            pda.starts.tolist(), repr(pda.returns[0]),
            [(u.lo, u.n, tuple(u.rules), u.key) for u in units]]  # fmt: skip
    h.update(repr(head).encode())
    for x in (pda.kind[:q0], pda.arg[:q0], pda.ret[:q0], pda.ends[:q0], q0s):
        h.update(b"|%s|%s|" % (x.dtype.str.encode(), repr(x.shape).encode()))
        h.update(np.ascontiguousarray(x).tobytes())
    key = h.hexdigest()
    with _LOCK:
        got = _ROOTS.get(key)
        if got is not None:
            _ROOTS.move_to_end(key)
    if got is not None:
        walker.outcomes = list(got.outcomes)
        walker.outcome_id = {o: i for i, o in enumerate(got.outcomes)}
        walker.contexts = list(got.contexts)
        walker.context_id = {c: i for i, c in enumerate(got.contexts)}
        return list(got.walks), got
    parts = walk_states(walker, q0s, vocab.fingerprint)
    size = 0
    for p in parts:
        for f in dataclasses.fields(p):
            x = getattr(p, f.name)
            if isinstance(x, np.ndarray):
                x.flags.writeable = False  # shared with later requests
                size += x.nbytes
    walk = _RootWalk(key, tuple(parts), tuple(walker.outcomes), tuple(walker.contexts), size)
    with _LOCK:
        if key not in _ROOTS:
            _ROOTS[key] = walk
            _roots_bytes += size
        while len(_ROOTS) > 1 and (
            len(_ROOTS) > ROOT_CACHE_SIZE or _roots_bytes > ROOT_CACHE_BYTES
        ):
            _roots_bytes -= _ROOTS.popitem(last=False)[1].nbytes
    return parts, walk


def _check_layout(pda, fixed: PdaRoot, units: list[PdaUnit]) -> None:
    lo = fixed.q0
    for u in units:
        if u.lo != lo:
            raise ValueError("compose_units: units must follow the root, in order")
        lo += u.n
    if lo != pda.num_states or (pda.rule_of[: fixed.q0] != 0).any():
        raise ValueError("compose_units: the root's and units' states must cover the PDA")


def _collapsed(fixed: PdaRoot, units, blocks):
    """(node per state: a cached unit's states are its first state, extra edges (its
    first state, the root states it reaches)) for `_reached`, or None."""
    cached = [(u, b) for u, b in zip(units, blocks, strict=True) if b is not None]
    if not cached:
        return None
    node = np.arange(units[-1].lo + units[-1].n, dtype=np.int64)
    src, dst = [], []
    for u, b in cached:
        node[u.lo : u.lo + u.n] = u.lo
        src.append(np.full(b.exits.shape[0], u.lo, np.int64))
        dst.append(_decode(b.exits, u, fixed))
    return node, np.concatenate(src), np.concatenate(dst)


def _encode(x: np.ndarray, u: PdaUnit, fixed: PdaRoot) -> np.ndarray:
    """State numbers (>= 0; -1 kept) relative to unit ``u`` (module docstring)."""
    x = np.asarray(x, np.int64)
    t = fixed.trie_hi - fixed.trie_lo
    out = np.where(x < fixed.trie_lo, x, x - t)
    inside = (x >= u.lo) & (x < u.lo + u.n)
    out = np.where(inside, fixed.count + x - u.lo, out)
    bad = (x >= 0) & ~inside & (((x >= fixed.trie_lo) & (x < fixed.trie_hi)) | (x >= fixed.q0))
    if bad.any():
        raise UnitNotCacheable(f"a unit's rows reach state {int(x[bad][0])}")
    return np.where(x < 0, x, out)


def _decode(x: np.ndarray, u: PdaUnit, fixed: PdaRoot) -> np.ndarray:
    x = np.asarray(x, np.int64)
    t = fixed.trie_hi - fixed.trie_lo
    out = np.where(x < fixed.trie_lo, x, x + t)
    out = np.where(x >= fixed.count, u.lo + x - fixed.count, out)
    return np.where(x < 0, x, out)


def _unit_block(parts, u: PdaUnit, fixed: PdaRoot, walker, trie, pda) -> _Block:
    """Unit ``u``'s block from its walks alone: its own classes (`_classes_hashed` over its
    walks), its rows dense over its states (`_tables`), then made relative."""
    # its states and outcomes numbered densely (the hashes' salts and `_tables`' outcome
    # arrays span them, not the whole PDA's states and every outcome of the request); its
    # rows keep the whole PDA's state numbers (values only)
    if parts:
        ids, oid = _unique_inverse(np.concatenate([p.oid for p in parts]))
    else:
        ids, oid = np.zeros(0, np.int64), np.zeros(0, np.int64)
    cuts = np.cumsum([p.oid.shape[0] for p in parts])[:-1]
    local = [
        dataclasses.replace(p, src=p.src - u.lo, wide=p.wide - u.lo, oid=o.astype(np.int64))
        for p, o in zip(parts, np.split(oid.reshape(-1), cuts), strict=True)
    ]
    walker = types.SimpleNamespace(outcomes=[walker.outcomes[i] for i in ids.tolist()])
    classes = _unit_classes(local, trie.num_groups, len(walker.outcomes))
    for p in local:
        if (p.src < 0).any() or (p.src >= u.n).any() or (p.wide < 0).any() or (p.wide >= u.n).any():
            raise UnitNotCacheable("a unit's walk starts outside it")
    view = types.SimpleNamespace(
        num_states=u.n, ends=pda.ends[u.lo : u.lo + u.n], starts=np.array([0])
    )
    t = _tables(view, trie, walker, local, *classes)
    ns, ep = t["next_state"], t["edge_push"]
    width = ns.shape[1]
    has = (ns >= 0).any(axis=1) | (ep != 0).any(axis=1)
    has[t["cd_state"]] = True
    cd = {name: t[name] for name in _CD}
    cd["cd_pop"] = _encode(cd["cd_pop"], u, fixed).astype(np.int32)
    cd["cd_target"] = _encode(cd["cd_target"], u, fixed).astype(np.int32)
    rel = _encode(ns[has], u, fixed).astype(np.int32)
    exits = np.concatenate([rel.reshape(-1), cd["cd_target"]])
    exits = np.unique(exits[(exits >= 0) & (exits < fixed.count)])
    row_len = np.where(has, width, 1)
    flat = np.full(int(row_len.sum()), -1, np.int32)
    flat_push = np.zeros_like(flat)
    at = np.concatenate([[0], np.cumsum(row_len)[:-1]])[has]
    at = (at[:, None] + np.arange(width)[None, :]).reshape(-1)
    flat[at] = rel.reshape(-1)
    flat_push[at] = ep[has].reshape(-1)
    root_at = np.flatnonzero((flat >= 0) & (flat < fixed.count)).astype(np.int32)
    root_to = flat[root_at]
    # the assembly adds the unit's offset, then clamps at -1: one pass each, in place
    flat = np.where(flat >= fixed.count, flat - fixed.count, _NONE).astype(np.int32)
    flat_push = np.where(flat_push > 0, flat_push - 1, _NONE).astype(np.int32)
    tc = t["token_class"]
    return _Block(
        token_class=tc.astype(np.int16) if width < 2**15 else tc.astype(np.int32),
        has=has,
        width=width,
        next_state=flat,
        edge_push=flat_push,
        root_at=root_at,
        root_to=root_to,
        push_seq=_encode(t["push_seq"], u, fixed).astype(np.int32),
        push_len=t["push_len"],
        cd=cd,
        exits=exits,
    )


def _unique_inverse(x: np.ndarray) -> tuple:
    """``np.unique(x, return_inverse=True)`` of non-negative ids: by a mask over their range
    where it is not much longer than ``x`` (no sort), else by `np.unique`."""
    hi = int(x.max(initial=-1)) + 1
    if x.ndim != 1 or x.dtype != np.int64 or hi > 8 * x.shape[0] + 1024 or x.min(initial=0) < 0:
        return np.unique(x, return_inverse=True)
    seen = np.zeros(hi, bool)
    seen[x] = True
    ids = np.flatnonzero(seen)
    rank = np.empty(hi, np.int64)  # read at the ids only
    rank[ids] = np.arange(ids.shape[0])
    return ids, rank[x]


def _unit_classes(parts, num_groups: int, num_outcomes: int) -> tuple:
    """`_pda_compose._classes_hashed` (or `_classes_exact`) of a unit's walks, over the
    groups they name (their sparse entries and the rows that are not their walk's default
    one) and the first group they do not name, which stands for every other group (all of
    them have every walk's default row and no entry): a few thousand groups, not 128,000.
    The same classes and numbering (by first group; the dead class 0)."""
    if not parts:  # nothing walked: every group dead
        return np.zeros(num_groups, np.int64), np.zeros(0, np.int64)
    # the named groups as a mask (no sort of the walks' entries: tens of thousands a tool),
    # then each group's rank among them by one scatter (no binary searches)
    named = np.zeros(num_groups + 1, bool)  # the last: "every group named"
    for p in parts:
        named[p.group] = True
        named[p.other_group] = True
    free = np.flatnonzero(~named[:num_groups])
    first_free = int(free[0]) if free.size else num_groups  # the first group not named
    named[first_free] = True
    named = named[:num_groups]
    universe = np.flatnonzero(named)
    rank = np.empty(num_groups, np.int64)  # read at named groups only
    rank[universe] = np.arange(universe.shape[0])
    compact = [
        dataclasses.replace(
            p,
            group=rank[p.group].astype(np.int64),
            other_group=rank[p.other_group].astype(np.int32),
        )
        for p in parts
    ]
    n = universe.shape[0]
    got = _classes_hashed(compact, n, num_outcomes)
    if got is None:
        got = _classes_exact(compact, n)
    group_class, reps = got
    rest = group_class[np.searchsorted(universe, first_free)] if first_free < num_groups else 0
    out = np.full(num_groups, rest, group_class.dtype)
    out[universe] = group_class
    return out, universe[reps]


def _assemble(out: dict, blocks: list[_Block], units: list[PdaUnit], fixed: PdaRoot) -> dict:
    """The root's tables (``out``: `_tables` over the root's walks, every unit state in the
    empty block 0) with each unit's block in place of its states' empty rows."""
    q0 = fixed.q0
    rs = out["row_start"]
    if out["class_block"][q0:].any():
        raise AssertionError("compose_units: a unit state has a row in the root's tables")
    root_cells = int(rs[q0]) if q0 < rs.shape[0] else out["next_state"].shape[0]
    nb_root = out["token_class"].shape[0]
    with_rows = [b.has.any() for b in blocks]
    nb = nb_root + sum(with_rows)
    v = out["token_class"].shape[1]
    token_class = _alloc.empty((nb, v), np.int32)  # no huge-page stalls (`_alloc`)
    token_class[:nb_root] = out["token_class"]
    q = fixed.q0 + sum(u.n for u in units)
    class_block = np.zeros(q, np.int32)
    class_block[:q0] = out["class_block"][:q0]
    row_len = np.empty(q, np.int64)
    row_len[:q0] = np.diff(np.append(rs[:q0], root_cells))
    total = root_cells + sum(b.next_state.shape[0] for b in blocks)
    next_state = _alloc.empty(total, np.int32)
    edge_push = _alloc.empty(total, np.int32)
    next_state[:root_cells] = out["next_state"][:root_cells]
    edge_push[:root_cells] = out["edge_push"][:root_cells]
    push_seq, push_len = [out["push_seq"]], [out["push_len"]]
    n_push = out["push_seq"].shape[0]
    cds = [{name: out[name] for name in _CD}]
    at, k = root_cells, nb_root
    for u, b, rows in zip(units, blocks, with_rows, strict=True):
        if rows:
            token_class[k] = b.token_class
            class_block[u.lo : u.lo + u.n][b.has] = k
            k += 1
        row_len[u.lo : u.lo + u.n] = np.where(b.has, b.width, 1)
        cells = b.next_state.shape[0]
        got = next_state[at : at + cells]
        np.add(b.next_state, u.lo, out=got)  # the unit's states; _NONE stays below -1
        np.maximum(got, -1, out=got)
        got[b.root_at] = _decode(b.root_to, u, fixed)
        pushed = edge_push[at : at + cells]
        np.add(b.edge_push, n_push, out=pushed)
        np.maximum(pushed, 0, out=pushed)
        at += cells
        push_seq.append(_decode(b.push_seq[1:], u, fixed))
        push_len.append(b.push_len[1:])
        cd = dict(b.cd)
        cd["cd_state"] = cd["cd_state"] + u.lo
        cd["cd_pop"] = _decode(cd["cd_pop"], u, fixed)
        cd["cd_target"] = _decode(cd["cd_target"], u, fixed)
        cd["cd_push"] = np.where(cd["cd_push"] > 0, cd["cd_push"] + n_push - 1, 0)
        cds.append(cd)
        n_push += b.push_seq.shape[0] - 1
    width = max(x.shape[1] for x in push_seq)
    kmax = max(max(x["cd_pop"].shape[1] for x in cds), 1)
    result = {
        "token_class": token_class,
        "next_state": next_state,
        "edge_push": edge_push,
        "class_block": class_block,
        "row_start": np.concatenate([[0], np.cumsum(row_len)[:-1]]).astype(np.int32),
        "push_seq": np.concatenate([_pad(x, width) for x in push_seq]).astype(np.int32),
        "push_len": np.concatenate(push_len).astype(np.int32),
        "accepting": out["accepting"].copy(),
        "start": out["start"],
    }
    for name in _CD:
        xs = [x[name] for x in cds]
        if name == "cd_pop":
            xs = [_pad(x, kmax) for x in xs]
        result[name] = np.concatenate(xs).astype(np.int32)
    return result


def _pad(x: np.ndarray, width: int) -> np.ndarray:
    """int[N, w] padded with -1 to int[N, width]."""
    x = np.asarray(x)
    if x.shape[1] == width:
        return x
    out = np.full((x.shape[0], width), -1, x.dtype)
    out[:, : x.shape[1]] = x
    return out
