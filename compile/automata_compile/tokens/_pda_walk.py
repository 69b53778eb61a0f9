"""Walks a byte PDA's states over the vocabulary trie with a symbolic stack.

Every token is walked from every start state, byte by byte, level by level of the
trie, for all start states at once. A *lane* is (trie node, current state, context,
start): the context holds the symbols pushed inside the token and those popped
below it (the return states read off the row's real stack). Pushes made inside the
token are known; a return with nothing of its own to pop branches over the return
states of the rule's call sites, and such branching lanes finish in a Python walk.

As in `_compose`, start states are split by how many tokens they let through:

* *narrow* states walk sparse lanes;
* *wide* states (free text: most tokens start there) are walked together with
  hash-consed *rows* (the current state of every wide start at a trie node, given
  by the parent's row and the byte's class), so their cost follows the number of
  distinct rows, not nodes × states. A row holds plain shifts only: a wide lane whose
  byte calls or returns is *diverted* to the sparse lanes, with an empty context.

With ``truncate=True`` (walking one rule for `_pda_units`) a lane that would pop
below the token's own pushes stops there and is reported as an *exit*: what
follows depends on the rule's call sites, so the walk itself depends only on the
rule and the rules it calls.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from automata_compile._errors import StateBudgetExceededError, UnsupportedGrammarError
from automata_compile._ranges import ranges
from automata_compile.automata import CALL, RETURN, SHIFT, BytePDA, check_time
from automata_compile.tokens._rows import (
    step_rows,
    unique_rows,
    unique_rows_unordered,
    unique_small,
)
from automata_compile.tokens._token_trie import TokenTrie

# Outcomes of one (state, token) beyond this mean the walk is enumerating stack contexts
# combinatorially: refuse rather than run away, or, with ``Walker(cut=True)``, leave the
# token (and every token it prefixes) out from there (`Walker.step`).
MAX_OUTCOMES = 4096
CONTEXTS_REFUSED = "stack contexts from one state"
STEP = "the composition of the grammar with the vocabulary"
# A start state is wide when the trie nodes below the first bytes it takes exceed this share
# of all nodes (measured on Llama-3: 0.002-0.005 walk fastest; 0.05 took 1.3-2x longer).
WIDE_SHARE = 0.005
# The row walk hands its live (node, start) pairs to the lanes below this many (deep in the
# trie a few long tokens remain, and a level of rows costs more than a level of lanes).
HANDOFF = 512
# A tool's rule walks (`Walker(min_wide_bytes=...)`, from `_unit_blocks`) also need a wide
# start to take at least this many bytes: a state that takes one to three (a literal key's
# next letter, ``,`` / ``}``) follows few children of the large subtrees below them, which
# sparse lanes look up (`_children`) and rows enumerate whole. The outcomes are the same
# either way, only their form differs (rows or sparse entries), and so are the tables
# (`test_unit_blocks`); 4 was the fastest of 1, 2, 4, 16 and 64 on 100 BFCL tools' rule
# walks (1: the other walks' rule, unchanged).
MIN_WIDE_BYTES = 4
_EXIT = "exit"


@dataclasses.dataclass
class Walk:
    """Every token's outcomes from a set of start states, split as in `_compose`.

    Attributes:
      src, group, oid: int64[P], sparse entries: start state, token group, outcome id
        (an index into the walker's ``outcomes``).
      wide: int64[W], the wide start states.
      rows: int32[U, W], distinct rows of end states over the wide starts (``sink`` =
        dead); a row entry stands for the outcome (end state, nothing pushed or popped).
      default_row: the row of every group not in ``other_group`` (-1: dead from every wide
        start): the most common one as walked (edits in `_pda_compose` keep it).
      other_group: int32[L], ascending, the groups whose row is not ``default_row``.
      other_row: int32[L], their rows (-1: dead), never ``default_row``. The rows of the
        groups are stored as exceptions to the most common: a dense int64[G] per walk made a
        tool-call constraint's walks (and their cache) ~18x larger (207 MB at 100 BFCL
        tools on Llama-3, against 1.5 M exceptions).
      sink: the dead marker in ``rows``.
      exits: with ``truncate``, int64[E, 5] rows (start, level, child node, state, context
        id): the lane at ``state`` pops below its own pushes on the child's byte.
    """

    src: np.ndarray
    group: np.ndarray
    oid: np.ndarray
    wide: np.ndarray
    rows: np.ndarray
    default_row: int
    other_group: np.ndarray
    other_row: np.ndarray
    sink: int
    exits: np.ndarray

    def group_rows(self, num_groups: int) -> np.ndarray:
        """int64[G]: each group's row, -1 if dead from every wide start (the dense view)."""
        out = np.full(num_groups, self.default_row, np.int64)
        out[self.other_group] = self.other_row
        return out


def byte_shifts(pda: BytePDA, starts: list, rule_of: list, q: int, b: int) -> list:
    """(popped, shift state, pushed) for byte ``b`` from ``q`` with nothing pushed yet: the
    byte PDA's calls and returns followed to each state that shifts ``b`` (``starts`` and
    ``rule_of``: ``pda.starts`` and ``pda.rule_of`` as lists, read per call).

    Raises:
      UnsupportedGrammarError: ``b`` can end a rule and the rules around it an unbounded
        number of times at once.
    """
    acc: list = []
    _settle(pda, starts, rule_of, q, b, [], (), acc, 0)
    return acc


def _settle(pda, starts, rule_of, q, b, pushed, popped, acc, steps):
    kind, arg, ret = pda.kind, pda.arg, pda.ret
    while True:
        steps += 1
        if steps > 10_000:  # pragma: no cover - left recursion is refused before
            raise RuntimeError("byte PDA did not settle; please report this grammar")
        k = kind[q, b]
        if k == SHIFT:
            acc.append((popped, q, tuple(pushed)))
            return
        if k == CALL:
            if ret[q, b] >= 0:
                pushed = pushed + [int(ret[q, b])]
            q = starts[arg[q, b]]
        elif k == RETURN:
            if pushed:
                q = pushed[-1]
                pushed = pushed[:-1]
            else:
                for r in pda.returns[rule_of[q]]:
                    if r in popped:
                        raise UnsupportedGrammarError(
                            f"byte {bytes([b])!r} can end rule "
                            f"{pda.names[rule_of[r]]!r} and the rules around it "
                            "an unbounded number of times at once (a recursion that is "
                            "neither tail nor closed by a byte of its own); make it a "
                            "repetition or close it with a delimiter",
                            rules=(pda.names[rule_of[r]],),
                        )
                    _settle(pda, starts, rule_of, r, b, [], popped + (r,), acc, steps)
                return
        else:
            return


def pop_symbols(pushed: tuple, popped: tuple, pops: tuple) -> tuple | None:
    """A configuration's (pushed, popped) after popping ``pops`` in order: each from the top of
    ``pushed`` while it lasts, then below the walk's start (appended to ``popped``); None where
    a pop does not match the top."""
    stack = list(pushed)
    extra = popped
    for s in pops:
        if stack:
            if stack[-1] != s:
                return None
            stack.pop()
        else:
            extra = extra + (s,)
    return tuple(stack), extra


class Walker:
    """Walks tokens from states of ``pda``; interns outcomes and contexts, memoizes steps."""

    def __init__(
        self, pda: BytePDA, trie: TokenTrie, *, min_wide_bytes: int = 1, cut: bool = False
    ):
        self.pda = pda
        self.cut = cut  # see `step`
        self.cuts = 0  # the (configurations, byte) steps cut
        self.min_wide_bytes = min_wide_bytes  # see `MIN_WIDE_BYTES`
        self.kind, self.arg, self.ret = pda.kind, pda.arg, pda.ret  # read per memo miss only
        self.rule_of = pda.rule_of.tolist()
        self.starts = pda.starts.tolist()
        self.depth = trie.depth
        self.trie = trie
        self.byte_memo: dict[tuple[int, int], tuple] = {}
        self.step_memo: dict[tuple, tuple] = {}  # see `step`
        self.own_memo: dict[tuple, object] = {}
        self.subtree_memo: dict[tuple, tuple[list, list]] = {}  # see `walk_subtree`
        self.outcomes: list[tuple] = []
        self.outcome_id: dict[tuple, int] = {}
        self.contexts: list[tuple] = [((), ())]
        self.context_id: dict[tuple, int] = {((), ()): 0}
        # see `single_ids`: the keys seen (sorted) and their outcome ids
        self.single_keys = np.zeros(0, np.int64)
        self.single_outcomes = np.zeros(0, np.int64)
        self._dense_table = None
        self._dense_rules = None  # bool per rule: its rows of the dense table are written
        self._byte_classes: dict[bytes, tuple] = {}  # see `dense_table`
        self._allowed = None
        self.memo: dict = {}  # derived data other modules keep per walker

    # -- one byte ---------------------------------------------------------------------------------

    def byte_outcomes(self, q: int, b: int) -> tuple:
        """(popped, target, pushed) for byte ``b`` from ``q`` with nothing pushed yet."""
        key = (q, b)
        out = self.byte_memo.get(key)
        if out is None:
            arg = self.arg
            out = self.byte_memo[key] = tuple(
                (popped, int(arg[s, b]), pushed)
                for popped, s, pushed in byte_shifts(self.pda, self.starts, self.rule_of, q, b)
            )
        return out

    def step(self, configs: tuple, b: int) -> tuple:
        """The configurations after byte ``b``: (state, pushed, popped) triples, sorted."""
        key = (configs, b)
        out = self.step_memo.get(key)
        if out is not None:
            return out
        new = []
        for q, pushed, popped in configs:
            for pops, target, push in self.byte_outcomes(q, b):
                after = pop_symbols(pushed, popped, pops)
                if after is not None:
                    new.append((target, after[0] + push, after[1]))
        if len(new) > MAX_OUTCOMES:
            if not self.cut:
                raise StateBudgetExceededError(
                    f"a token reaches more than {MAX_OUTCOMES} {CONTEXTS_REFUSED}; the "
                    "grammar's nesting is too ambiguous to enumerate per token"
                )
            # a sound subset: the tokens through this byte are left out (dead) from here;
            # a token of one byte pops once, so it stays (a rule has far fewer call sites)
            self.cuts += 1
            new = []
        out = self.step_memo[key] = tuple(sorted(set(new)))
        return out

    def step_own(self, q: int, pushed: tuple, b: int):
        """Byte ``b`` from ``q`` over the token's own pushes only: ``(state, pushed)``,
        None (dead) or ``_EXIT`` (it would pop below them)."""
        key = (q, pushed, b)
        if key in self.own_memo:
            return self.own_memo[key]
        kind, arg, ret, stack = self.kind, self.arg, self.ret, list(pushed)
        out = None
        for _ in range(10_000):
            k = kind[q, b]
            if k == SHIFT:
                out = (int(arg[q, b]), tuple(stack))
                break
            if k == CALL:
                if ret[q, b] >= 0:
                    stack.append(int(ret[q, b]))
                q = self.starts[arg[q, b]]
            elif k == RETURN:
                if not stack:
                    out = _EXIT
                    break
                q = stack.pop()
            else:
                break
        else:  # pragma: no cover - left recursion is refused before
            raise RuntimeError("byte PDA did not settle; please report this grammar")
        self.own_memo[key] = out
        return out

    # -- interning --------------------------------------------------------------------------------

    def intern(self, outs: tuple) -> int:
        oid = self.outcome_id.get(outs)
        if oid is None:
            oid = self.outcome_id[outs] = len(self.outcomes)
            self.outcomes.append(outs)
        return oid

    def context(self, key: tuple) -> int:
        cid = self.context_id.get(key)
        if cid is None:
            cid = self.context_id[key] = len(self.contexts)
            self.contexts.append(key)
        return cid

    def single_ids(self, keys: np.ndarray) -> np.ndarray:
        """Outcome ids of single configurations keyed ``state + Q * context``, memoized in
        sorted arrays (interned on first sight, in key order). Sparse: a dense memo over
        every (state, context) pair grew to 464 MB for the 19,000 keys compose-spec.json
        uses (51,099 states, 640 contexts), and filling it was a tenth of its compile."""
        known, ids = self.single_keys, self.single_outcomes
        pos = np.searchsorted(known, keys)
        hit = pos < known.shape[0]
        hit[hit] = known[pos[hit]] == keys[hit]
        if hit.all():
            return ids[pos]
        q_count = self.pda.num_states
        new = np.unique(keys[~hit])
        new_ids = np.array(
            [self.intern(((k % q_count, *self.contexts[k // q_count]),)) for k in new.tolist()],
            np.int64,
        )
        at = np.searchsorted(known, new)
        known = self.single_keys = np.insert(known, at, new)
        ids = self.single_outcomes = np.insert(ids, at, new_ids)
        return ids[np.searchsorted(known, keys)]

    # -- the level walk ---------------------------------------------------------------------------

    def walk(self, q0s, *, truncate: bool = False, injected: dict | None = None) -> Walk:
        """Outcomes of every token from each state of ``q0s`` (see the module docstring).

        ``injected`` maps a level d to lanes that enter the walk there, as (child at level d,
        state before the child's byte, context, start, byte) arrays: the exits of a walk
        made elsewhere (`_pda_units.loop_walks`), finished here.
        """
        trie, q_count = self.trie, self.pda.num_states
        q0s = np.asarray(q0s, np.int64)
        injected = injected or {}
        last = max(injected, default=0)
        wide_mask = self.wide(q0s)
        dense = _Dense(self, q0s[wide_mask]) if wide_mask.any() else None
        lanes = _Lanes(q0s[~wide_mask])
        out = ([], [], [])
        extra = ([], [], [])
        exits: list[tuple] = []
        for d in range(1, trie.depth + 1):
            check_time(STEP)
            if lanes.node.size == 0 and (dense is None or dense.done) and d > last:
                break
            if dense is not None and not dense.done and dense.few():
                lanes.add(dense.handoff())  # a handful of long tokens: lanes cost less per level
            other = lanes.advance(self, d)
            if dense is not None and not dense.done:
                other = [np.concatenate(p) for p in zip(other, dense.advance(d), strict=True)]
            if d in injected:
                calls = lanes.shift(self, injected[d])
                other = [np.concatenate(p) for p in zip(other, calls, strict=True)]
            seeds = self._special(d, other, truncate, exits, extra)
            lanes.add(seeds)
            term = trie.terminal[d][lanes.node]
            hit = np.flatnonzero(term >= 0)
            if hit.size:
                out[0].append(lanes.src[hit])
                out[1].append(term[hit].astype(np.int64))
                out[2].append(self.single_ids(lanes.cur[hit] + q_count * lanes.ctx[hit]))
        for a, e in zip(out, extra, strict=True):
            if e:
                a.append(np.array(e, np.int64))
        src, group, oid = (np.concatenate(a) if a else np.zeros(0, np.int64) for a in out)
        if dense is None:
            wide = np.zeros(0, np.int64)
            rows, default, other = np.zeros((0, 0), np.int32), -1, np.zeros(0, np.int32)
            other_rows = other
        else:
            wide, (rows, default, other, other_rows) = dense.wide, dense.finish()
        ex = np.array(exits, np.int64).reshape(-1, 5)
        return Walk(src, group, oid, wide, rows, default, other, other_rows, q_count, ex)

    def wide(self, q0s: np.ndarray) -> np.ndarray:
        """bool per state of ``q0s``: walked with rows (the trie nodes below the bytes it
        takes exceed ``WIDE_SHARE`` of all nodes, and it takes ``min_wide_bytes`` bytes or
        more)."""
        allowed = (self.pda.kind[q0s] != 0).astype(np.int64)
        wide = allowed @ self.trie.first_byte_nodes > WIDE_SHARE * self.trie.num_nodes
        if self.min_wide_bytes > 1:
            wide &= allowed.sum(axis=1) >= self.min_wide_bytes
        return wide

    def _special(self, d: int, other: list, truncate: bool, exits: list, extra: tuple):
        """Steps lanes whose byte calls or returns, in Python. Returns the lanes that stay a
        single configuration, as (child, state, context, start) arrays; records exits
        (``truncate``) or walks branching lanes to the end of their subtree."""
        child, cur, ctx, src, byte = other
        seeds: tuple[list, list, list, list] = ([], [], [], [])
        for y in range(child.shape[0]):
            c, x, s, b, n = int(cur[y]), int(ctx[y]), int(src[y]), int(byte[y]), int(child[y])
            pushed, popped = self.contexts[x]
            if truncate:
                res = self.step_own(c, pushed, b)
                if res is None:
                    continue
                if res is _EXIT:
                    exits.append((s, d, n, c, x))
                    continue
                configs = ((res[0], res[1], ()),)
            else:
                configs = self.step(((c, pushed, popped),), b)
            if len(configs) == 1:
                q, pushed, popped = configs[0]
                seeds[0].append(n)
                seeds[1].append(q)
                seeds[2].append(self.context((pushed, popped)))
                seeds[3].append(s)
            elif configs:
                self.walk_subtree(d, n, configs, s, extra)
        return [np.array(a, np.int64) for a in seeds]

    def walk_subtree(self, d: int, node: int, configs: tuple, src: int, out: tuple) -> None:
        """Appends (src, group, outcome id) of every token under ``node`` (level ``d``),
        reached with ``configs``, to the lists ``out``.

        The (group, outcome) pairs depend on (d, node, configs) only, and many walks reach
        the same subtree the same way (100 tool units: ~14,000 exits, ~100 distinct), so
        they are kept per walker. Outcome ids are interned on the first walk, in the same
        order as without the memo."""
        key = (d, node, configs)
        got = self.subtree_memo.get(key)
        if got is None:
            g: list = []
            o: list = []
            self._dfs(d, node, configs, g, o)
            got = self.subtree_memo[key] = (g, o)
        out[0].extend([src] * len(got[0]))
        out[1].extend(got[0])
        out[2].extend(got[1])

    def _dfs(self, d0: int, node0: int, configs0: tuple, out_g: list, out_o: list) -> None:
        """Python walk of the subtree under ``node0`` (level ``d0``, reached with ``configs0``)."""
        (child_start, byte, terminal), step = self.trie.lists, self.step
        g = terminal[d0][node0]
        if g >= 0:
            out_g.append(g)
            out_o.append(self.intern(configs0))
        todo = [(d0, node0, configs0)]
        depth = self.depth
        visited = 0
        while todo:
            visited += 1
            if visited & 4095 == 0:
                check_time(STEP)
            d, node, configs = todo.pop()
            if d >= depth:
                continue
            cs = child_start[d]
            by, term = byte[d + 1], terminal[d + 1]
            for child in range(cs[node], cs[node + 1]):
                new = step(configs, by[child])
                if not new:
                    continue
                g = term[child]
                if g >= 0:
                    out_g.append(g)
                    out_o.append(self.intern(new))
                todo.append((d + 1, child, new))

    def allowed_bytes(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets int64[S + 1], bytes int64[...], index int64[len(states)]): the bytes
        each of ``states`` does not refuse, state ``states[i]``'s at ``offsets[index[i]]``.
        Over every state of the PDA (computed once) when ``states`` are many of them, else
        over ``states``' distinct rows only: the root's walk at 1,000 tools reads a few
        thousand of the PDA's 182,000 rows, and listing them all took ~0.2 s a request."""
        q = self.pda.num_states
        if self._allowed is None and states.shape[0] * ALLOWED_ROWS_RATIO < q:
            rows, index = np.unique(states, return_inverse=True)
            offsets, flat = _allowed_in(self.pda.kind[rows])
            return offsets, flat, index.reshape(-1)
        if self._allowed is None:
            self._allowed = _allowed_in(self.pda.kind)
        return (*self._allowed, states)

    def dense_table(self, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(columns, first_byte, byte_class) for the row walk of ``starts``: ``columns[b, q]``
        is the shift target, ``Q`` (the sink) when dead and ``Q + 1`` when the byte calls or
        returns; column ``Q`` is the sink's. Byte-major, so that a level's step reads one
        byte's contiguous row (`step_rows`). Bytes that act alike on the states of the
        starts' rules share a class: a row walk reads no others, as shifts never leave a
        rule (the frame of 1,000 tools has 14,000 of the PDA's 200,000 states)."""
        pda, q = self.pda, self.pda.num_states
        if self._dense_table is None:
            # only the walked rules' states are written (a row walk reads no others), when
            # they are first walked: 1,000 tools' frame is 14,000 of 200,000 states
            dtype = np.int16 if q + 1 < np.iinfo(np.int16).max else np.int32
            self._dense_table = np.empty((256, q + 1), dtype=dtype)
            self._dense_table[:, q] = q
            self._dense_rules = np.zeros(len(pda.names), bool)
        table = self._dense_table
        rules = np.unique(pda.rule_of[starts])
        new = rules[~self._dense_rules[rules]]
        if new.size:
            fill = np.flatnonzero(np.isin(pda.rule_of, new))
            kind = pda.kind[fill]
            rows = np.where(kind == SHIFT, pda.arg[fill], q)
            rows[(kind == CALL) | (kind == RETURN)] = q + 1
            table[:, fill] = rows.T
            self._dense_rules[new] = True
        got = self._byte_classes.get(rules.tobytes())
        if got is None:
            rows = np.append(np.flatnonzero(np.isin(pda.rule_of, rules)), q)
            cols, byte_class = unique_rows(table[:, rows])
            first_byte = np.full(cols.shape[0], 256, np.int64)
            np.minimum.at(first_byte, byte_class, np.arange(256))
            got = self._byte_classes[rules.tobytes()] = (first_byte, byte_class.astype(np.int64))
        return (table, *got)


class _Lanes:
    """Sparse lanes: (trie node at the current level, state, context id, start state)."""

    def __init__(self, q0s: np.ndarray):
        self.node = np.zeros(q0s.shape[0], np.int64)
        self.cur = q0s.astype(np.int64)
        self.ctx = np.zeros(q0s.shape[0], np.int64)
        self.src = q0s.astype(np.int64)

    def advance(self, walker: Walker, d: int) -> list:
        """Moves every lane to its children at level ``d`` by shifts; returns the lanes whose
        byte calls or returns, as (child, state, context, start, byte) arrays."""
        trie, kind, arg = walker.trie, walker.pda.kind, walker.pda.arg
        if self.node.size == 0:
            z = np.zeros(0, np.int64)
            return [z, z, z, z, z]
        rep, child = _children(walker, d, self.node, self.cur)
        c, x, s = self.cur[rep], self.ctx[rep], self.src[rep]
        b = trie.byte[d][child].astype(np.int64)
        k = kind[c, b]
        shift = k == SHIFT
        self.node, self.cur = child[shift], arg[c[shift], b[shift]].astype(np.int64)
        self.ctx, self.src = x[shift], s[shift]
        o = np.flatnonzero((k == CALL) | (k == RETURN))
        return [child[o], c[o], x[o], s[o], b[o]]

    def shift(self, walker: Walker, pending: list) -> list:
        """Adds the ``pending`` lanes (child, state, context, start, byte) whose byte shifts;
        returns those whose byte calls or returns (the dead ones are dropped)."""
        child, c, x, s, b = pending
        k = walker.pda.kind[c, b]
        sh = k == SHIFT
        self.add([child[sh], walker.pda.arg[c[sh], b[sh]].astype(np.int64), x[sh], s[sh]])
        o = (k == CALL) | (k == RETURN)
        return [a[o] for a in pending]

    def add(self, seeds: list) -> None:
        if seeds[0].size:
            self.node, self.cur, self.ctx, self.src = (
                np.concatenate([a, e])
                for a, e in zip((self.node, self.cur, self.ctx, self.src), seeds, strict=True)
            )


# a level's distinct rows in any order: `_Dense.finish` numbers every level's rows again
# (`unique_rows`, in byte order), and nothing else depends on a level's order
_level_rows = unique_rows_unordered

# `Walker.allowed_bytes` lists only the asked states' rows when they are fewer than
# 1 / ALLOWED_ROWS_RATIO of the PDA's states (the same bytes either way)
ALLOWED_ROWS_RATIO = 8


def _allowed_in(kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets int64[len(kind) + 1], bytes int64[...]): the bytes each row does not refuse."""
    q, b = np.nonzero(kind != 0)
    offsets = np.searchsorted(q, np.arange(kind.shape[0] + 1))
    return offsets.astype(np.int64), b.astype(np.int64)


def _children(walker: Walker, d: int, node: np.ndarray, state: np.ndarray):
    """(lane index, child) of every child of each lane's node on a byte its state takes
    (or might: the caller checks). A lane whose state takes fewer bytes than its node has
    children looks those bytes up (binary search in `TokenTrie.child_keys`); the others
    list the node's children (after a run of spaces a node has thousands of children, of
    which a state in a JSON number takes a few)."""
    trie = walker.trie
    cs = trie.child_start[d - 1]
    fanout = cs[node + 1] - cs[node]
    offsets, flat, state = walker.allowed_bytes(state)
    n_allowed = offsets[state + 1] - offsets[state]
    look = n_allowed < fanout
    if not look.any():
        return trie.children(d, node)
    lanes = np.flatnonzero(look)
    other = np.flatnonzero(~look)
    rep_o, child_o = trie.children(d, node[other])
    k = n_allowed[lanes]
    rep = np.repeat(lanes, k)
    at = ranges(offsets[state[lanes]], k)
    key = node[rep] * 256 + flat[at]
    keys = trie.child_keys[d]
    pos = np.minimum(np.searchsorted(keys, key), keys.shape[0] - 1)
    hit = keys[pos] == key
    return np.concatenate([other[rep_o], rep[hit]]), np.concatenate([child_o, pos[hit]])


class _Dense:
    """The row walk of the wide start states (see the module docstring)."""

    def __init__(self, walker: Walker, wide: np.ndarray):
        self.walker, self.wide = walker, wide
        self.columns, self.first_byte, self.byte_class = walker.dense_table(wide)
        self.sink = walker.pda.num_states
        self.rows = wide[None, :].astype(self.columns.dtype)  # the root's row
        # the live nodes of the previous level (ascending) and their rows: a level reads
        # only their children, not every node of the level (deep levels: a few live)
        self.live_node = np.zeros(1, np.int64)
        self.live_row = np.zeros(1, np.int64)
        self.hit_group: list[np.ndarray] = []  # per level, the groups ending at a live row
        self.hit_row: list[np.ndarray] = []  # and their rows (offset by the earlier levels')
        self.levels: list[np.ndarray] = []
        self.offset = 0
        self.done = False

    def few(self) -> bool:
        """Whether the live (node, wide start) pairs, past the first levels, are few enough
        to walk as lanes."""
        if len(self.levels) < 4:
            return False
        live = self.live_row
        return live.size <= HANDOFF and np.count_nonzero(self.rows[live] != self.sink) <= HANDOFF

    def handoff(self) -> list:
        """Ends the row walk: its live (node, start) pairs as lanes (node, state, empty
        context, start) at the last level walked. Their outcomes come out plain and sparse;
        `_pda_compose` moves them back into rows."""
        self.done = True
        nodes = self.live_node
        cur = self.rows[self.live_row]
        n, w = np.nonzero(cur != self.sink)
        state = cur[n, w].astype(np.int64)
        return [nodes[n], state, np.zeros_like(state), self.wide[w]]

    def advance(self, d: int) -> list:
        """One trie level; returns the diverted lanes as (child, state, context, start, byte)."""
        trie, nc, sink = self.walker.trie, self.first_byte.shape[0], self.sink
        z = np.zeros(0, np.int64)
        if self.live_node.size == 0:
            self.done = True
            return [z, z, z, z, z]
        rep, sel = trie.children(d, self.live_node)  # ascending, as the live nodes are
        if sel.size == 0:
            self.done = True
            return [z, z, z, z, z]
        key = self.live_row[rep] * nc + self.byte_class[trie.byte[d][sel]]
        ukey, key_of = unique_small(key, self.rows.shape[0] * nc)
        row = ukey // nc
        cur = step_rows(self.columns, self.first_byte[ukey % nc], self.rows, row)
        diverted = [z, z, z, z, z]
        div = cur == sink + 1
        if div.any():
            kk, ww = np.nonzero(div)  # row-major: grouped by key
            cur[kk, ww] = sink
            diverted = self._diverted(d, sel, key_of, row, kk, ww)
        rows, row_of_key = _level_rows(cur)
        live = ~(rows == sink).all(axis=1)
        ids = row_of_key[key_of]
        keep = live[ids]
        self.live_node, self.live_row = sel[keep], ids[keep]
        term = trie.terminal[d][self.live_node]
        hit = term >= 0
        self.hit_group.append(term[hit].astype(np.int64))
        self.hit_row.append(self.live_row[hit] + self.offset)
        self.levels.append(rows)
        self.offset += rows.shape[0]
        self.rows = rows
        return diverted

    def _diverted(self, d, sel, key_of, row, kk, ww) -> list:
        """The (node, wide start) pairs whose byte calls or returns, as sparse lanes (the
        diverted cells ``(kk, ww)`` of the level's keys, grouped by key; ``row``: each
        key's row of the previous level)."""
        per_key = np.bincount(kk, minlength=row.shape[0])
        nodes = np.flatnonzero(per_key[key_of] > 0)
        k = key_of[nodes]
        counts = per_key[k]
        starts = np.concatenate([[0], np.cumsum(per_key)])[k]
        idx = ranges(starts, counts)
        child = np.repeat(sel[nodes], counts)
        w = ww[idx]
        state = self.rows[row[kk[idx]], w].astype(np.int64)
        byte = self.walker.trie.byte[d][child].astype(np.int64)
        return [child.astype(np.int64), state, np.zeros_like(state), self.wide[w], byte]

    def finish(self) -> tuple:
        """(canonical rows, default row, other groups, their rows) as `Walk` holds them:
        equal rows across levels get one id."""
        if not self.levels:
            z = np.zeros(0, np.int32)
            return np.zeros((0, self.wide.shape[0]), np.int32), -1, z, z
        canon, canon_of = unique_rows(np.concatenate(self.levels))
        group = np.concatenate(self.hit_group)
        row = canon_of[np.concatenate(self.hit_row)]
        return (
            canon.astype(np.int32),
            *_sparse_row_exceptions(group, row, self.walker.trie.num_groups),
        )


def _sparse_row_exceptions(group: np.ndarray, row: np.ndarray, num_groups: int) -> tuple:
    """`_row_exceptions` of the int[G] array that is ``row`` at the (distinct) ``group`` and
    -1 elsewhere, without writing it when -1 stays the most common value (the usual case:
    a walk's wide starts end in a few of the vocabulary's groups)."""
    counts = np.bincount(row + 1) if row.size else np.zeros(1, np.int64)
    counts[0] += num_groups - group.shape[0]
    default = int(np.argmax(counts)) - 1  # (ties: the smallest value, as `_row_exceptions`)
    if default >= 0:
        dense = np.full(num_groups, -1, np.int64)
        dense[group] = row
        return _row_exceptions(dense)
    order = np.argsort(group)
    return -1, group[order].astype(np.int32), row[order].astype(np.int32)


def _row_exceptions(row: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """(the most common value of ``row`` (int[G], -1 = dead), the indices of the others,
    their values): a walk's rows per group as `Walk` stores them."""
    if row.size == 0:
        return -1, np.zeros(0, np.int32), np.zeros(0, np.int32)
    default = int(np.argmax(np.bincount(row + 1))) - 1
    other = np.flatnonzero(row != default)
    return default, other.astype(np.int32), row[other].astype(np.int32)
