"""Byte PDA ∘ detokenizer → token-level PDA tables (Koo et al. §3.2; XGrammar's split).

Every token is walked, byte by byte over the vocabulary trie, from every state a
token can start in, with a *symbolic* stack: pushes made inside the token are
known; a return with nothing of its own to pop reads the row's real stack, and
the walk branches over the return states that could be there (the return states
of the rule's call sites). Each (state, token) thus gives

* one outcome that pops nothing: a **context-independent** edge
  ``(target, pushed symbols)``, stored in ``next_state`` / ``edge_push`` and read by
  the runtime's gather, like a DFA edge; or
* outcomes that each pop k >= 1 symbols: **context-dependent** edges
  ``(popped symbols, target, pushed symbols)``, stored as a short per-state list
  that the runtime compares against the row's top k stack symbols. The PDA is
  deterministic, so at most one of them matches a given stack.

Tokens with the same outcomes from every state form one class, as in `_compose`.
Token-level states are the states a token boundary can fall on (reached from the
start through token edges); other byte-PDA states keep empty rows (they only
appear on the stack). Every reached configuration can still be completed because
the vocabulary is required to spell every byte on its own (checked).
"""

from __future__ import annotations

import numpy as np

from automata_compile._errors import StateBudgetExceededError, UnsupportedGrammarError
from automata_compile.automata._fsa import check_time
from automata_compile.frontends.grammar._byte_pda import CALL, RETURN, SHIFT, BytePDA
from automata_compile.tokens._token_dfa import TokenDFA
from automata_compile.tokens._token_trie import TokenTrie, trie_for

# Outcomes of one (state, token) beyond this mean the walk is enumerating stack contexts
# combinatorially: refuse rather than run away.
MAX_OUTCOMES = 4096
STEP = "the composition of the grammar with the vocabulary"
# States whose tokens are walked together (one NumPy pass over the trie for all of them).
WALK_BATCH = 16


def token_pda(pda: BytePDA, vocab, *, spec_kind: str, spec: str) -> TokenDFA:
    """``pda`` composed with ``vocab``'s tokens: a `TokenDFA` with the PDA block (the one
    artifact format of DFAs and PDAs), labelled with the spec it was compiled from."""
    tables = compose_pda(pda, trie_for(vocab), vocab)
    return TokenDFA(
        token_class=tables.pop("token_class").astype(np.int32),
        next_state=tables.pop("next_state"),
        accepting=tables.pop("accepting"),
        start=tables.pop("start"),
        eos_ids=tuple(vocab.eos_ids),
        vocab_fingerprint=vocab.fingerprint,
        spec_kind=spec_kind,
        spec=spec,
        **tables,
    )


def compose_pda(pda: BytePDA, trie: TokenTrie, vocab) -> dict:
    """Builds the token-level tables.

    Returns a dict of NumPy arrays (see `TokenDFA`'s PDA block): ``token_class``,
    ``next_state``, ``accepting``, ``start``, ``edge_push``, ``push_seq``, ``push_len``,
    ``cd_state``, ``cd_class``, ``cd_pop``, ``cd_npop``, ``cd_target``, ``cd_push``.
    ``trie`` is ``vocab``'s (`trie_for`); the single-byte tokens are read from it.

    Raises:
      UnsupportedGrammarError: the vocabulary cannot spell some byte the grammar uses on
        its own (masks could not be exact), or a token's outcomes explode.
      CompileTimeoutError: an open `_fsa.limits` deadline passed (checked per batch of
        states walked, per trie level and every few thousand nodes of a Python walk).
    """
    _check_bytes(pda, trie)
    walker = _Walker(pda, trie)
    start = int(pda.starts[0])
    walked: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # state -> (groups, outcome ids)
    todo, seen = [start], {start}
    while todo:
        check_time(STEP)
        batch, todo = todo[-WALK_BATCH:], todo[:-WALK_BATCH]
        for q, (groups, ids) in zip(batch, walker.walk(batch), strict=True):
            walked[q] = groups, ids
            for oid in _distinct(ids).tolist():
                for target, _pushed, _popped in walker.outcomes[oid]:
                    if target not in seen:
                        seen.add(target)
                        todo.append(target)
    boundary = sorted(walked)
    cols = [walked[q] for q in boundary]
    classes = _classes_hashed(trie.num_groups, cols)
    if classes is None:  # a hash collision (never seen): sort the signatures instead
        classes = _classes_exact(trie.num_groups, cols)
    group_class, reps_of = classes
    reps = [None] + [[] for _ in range(len(reps_of))]
    for col, (groups, ids) in enumerate(cols if len(reps_of) else ()):
        pos = reps_of.searchsorted(groups)
        hit = np.flatnonzero(reps_of[np.minimum(pos, len(reps_of) - 1)] == groups)
        for c, oid in zip((pos[hit] + 1).tolist(), ids[hit].tolist(), strict=True):
            reps[c].append((boundary[col], walker.outcomes[oid]))
    tg = trie.token_group
    token_class = np.where(tg >= 0, group_class[np.maximum(tg, 0)], 0).astype(np.int32)
    q_count, c_count = pda.num_states, len(reps)
    next_state = np.full((q_count, c_count), -1, np.int32)
    edge_push = np.zeros((q_count, c_count), np.int32)
    pushes: dict[tuple, int] = {(): 0}
    cd = []
    for c in range(1, c_count):
        for q, outs in reps[c]:
            if len(outs) == 1 and not outs[0][2]:
                target, pushed, _ = outs[0]
                next_state[q, c] = target
                edge_push[q, c] = pushes.setdefault(pushed, len(pushes))
            else:
                for target, pushed, popped in outs:
                    cd.append((q, c, popped, target, pushes.setdefault(pushed, len(pushes))))
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
    return {
        "token_class": token_class,
        "next_state": next_state,
        "accepting": pda.ends.copy(),
        "start": start,
        "edge_push": edge_push,
        "push_seq": push_seq,
        "push_len": push_len,
        "cd_state": col[:, 0].astype(np.int32),
        "cd_class": col[:, 1].astype(np.int32),
        "cd_pop": cd_pop,
        "cd_npop": np.array([len(e[2]) for e in cd], np.int32),
        "cd_target": col[:, 3].astype(np.int32),
        "cd_push": col[:, 4].astype(np.int32),
    }


def _distinct(ids: np.ndarray) -> np.ndarray:
    """The distinct values of small non-negative ``ids``, ascending (by counting)."""
    if ids.size == 0:
        return ids
    return np.flatnonzero(np.bincount(ids))


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit finalizer (splitmix64's) over uint64 arrays."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _classes_hashed(num_groups: int, cols: list) -> tuple | None:
    """Token-group classes from the per-state walks, without a dense signature matrix.

    A group's signature is its outcome id from every boundary state (column), dead where
    absent; equal signatures form one class. Each group's signature is hashed as a sum of
    per-(column, outcome) hashes over its live entries, the hashes are grouped with one
    sort of G keys, and every group is then checked against its class's first group
    (same live count, same outcome in each of its live columns), so the result is exact.

    Returns:
      (group_class, reps): int class per group (0 = dead in every state, others numbered by
      first group) and, ascending, the first group of each class 1.. ; None on a collision.
    """
    g1 = num_groups + 1  # the last row stays dead: the all-dead signature always exists
    h = np.zeros(g1, np.uint64)
    live = np.zeros(g1, np.int64)
    for col, (groups, ids) in enumerate(cols):
        salt = _mix(np.array([col + 1], np.uint64))
        h[groups] += _mix(ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + salt)
        live[groups] += 1
    _, first, inverse = np.unique(h, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    rep = first[inverse]  # each group's class representative
    if not np.array_equal(live, live[rep]):
        return None
    buf = np.full(g1, -1, np.int64)
    for groups, ids in cols:
        buf[groups] = ids
        same = np.array_equal(buf[rep[groups]], ids)
        buf[groups] = -1
        if not same:
            return None
    return _number(first, inverse)


def _classes_exact(num_groups: int, cols: list) -> tuple:
    """`_classes_hashed` by sorting the dense signature matrix (G x states)."""
    sig = np.full((num_groups + 1, len(cols)), -1, np.int64)  # last row: all dead
    for col, (groups, ids) in enumerate(cols):
        sig[groups, col] = ids
    void = np.ascontiguousarray(sig).view(np.dtype((np.void, 8 * sig.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(void, return_index=True, return_inverse=True)
    return _number(first, inverse.reshape(-1))


def _number(first: np.ndarray, inverse: np.ndarray) -> tuple:
    """Classes numbered by first group, the dead class (the last row's) moved to 0."""
    dead = inverse[-1]
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(order.shape[0])
    rank = np.where(rank < rank[dead], rank + 1, rank)
    rank[dead] = 0
    return rank[inverse[:-1]], np.sort(first[np.arange(first.shape[0]) != dead])


def _check_bytes(pda: BytePDA, trie: TokenTrie) -> None:
    """Every byte the grammar uses is a token on its own (a terminal at trie level 1)."""
    used = np.flatnonzero((pda.kind != 0).any(axis=0))
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


class _Walker:
    """Walks tokens from one state with a symbolic stack; memoizes per (configs, byte)."""

    def __init__(self, pda: BytePDA, trie: TokenTrie):
        self.pda = pda
        self.kind = pda.kind.tolist()
        self.arg = pda.arg.tolist()
        self.ret = pda.ret.tolist()
        self.rule_of = pda.rule_of.tolist()
        self.starts = pda.starts.tolist()
        self.returns = pda.returns
        self.depth = trie.depth
        self.byte_memo: dict[tuple[int, int], tuple] = {}
        self.memo: dict[tuple, tuple] = {}
        self.trie = trie
        self.outcomes: list[tuple] = []
        self.outcome_id: dict[tuple, int] = {}
        self.contexts: list[tuple] = [((), ())]
        self.context_id: dict[tuple, int] = {((), ()): 0}
        self.lists: tuple | None = None  # see `_dfs`
        self.single_memo = np.full(4 * pda.num_states, -1, np.int64)  # see `single_ids`

    def byte_outcomes(self, q: int, b: int) -> tuple:
        """(popped, target, pushed) for byte ``b`` from ``q`` with nothing pushed yet."""
        key = (q, b)
        out = self.byte_memo.get(key)
        if out is None:
            acc: list = []
            self._sim(q, b, [], (), acc, 0)
            out = self.byte_memo[key] = tuple(acc)
        return out

    def _sim(self, q, b, pushed, popped, acc, steps):
        kind, arg, ret = self.kind, self.arg, self.ret
        while True:
            steps += 1
            if steps > 10_000:  # pragma: no cover - left recursion is refused before
                raise RuntimeError("byte PDA did not settle; please report this grammar")
            k = kind[q][b]
            if k == SHIFT:
                acc.append((popped, arg[q][b], tuple(pushed)))
                return
            if k == CALL:
                if ret[q][b] >= 0:
                    pushed = pushed + [ret[q][b]]
                q = self.starts[arg[q][b]]
            elif k == RETURN:
                if pushed:
                    q = pushed[-1]
                    pushed = pushed[:-1]
                else:
                    for r in self.returns[self.rule_of[q]]:
                        if r in popped:
                            raise UnsupportedGrammarError(
                                f"byte {bytes([b])!r} can end rule "
                                f"{self.pda.names[self.rule_of[r]]!r} and the rules around it "
                                "an unbounded number of times at once (a recursion that is "
                                "neither tail nor closed by a byte of its own); make it a "
                                "repetition or close it with a delimiter",
                                rules=(self.pda.names[self.rule_of[r]],),
                            )
                        self._sim(r, b, [], popped + (r,), acc, steps)
                    return
            else:
                return

    def step(self, configs: tuple, b: int) -> tuple:
        key = (configs, b)
        out = self.memo.get(key)
        if out is not None:
            return out
        new = []
        for q, pushed, popped in configs:
            for pops, target, push in self.byte_outcomes(q, b):
                stack = list(pushed)
                extra = popped
                ok = True
                for s in pops:
                    if stack:
                        if stack[-1] != s:
                            ok = False
                            break
                        stack.pop()
                    else:
                        extra = extra + (s,)
                if ok:
                    new.append((target, tuple(stack) + push, extra))
        if len(new) > MAX_OUTCOMES:
            raise StateBudgetExceededError(
                f"a token reaches more than {MAX_OUTCOMES} stack contexts from one state; the "
                "grammar's nesting is too ambiguous to enumerate per token"
            )
        out = self.memo[key] = tuple(sorted(set(new)))
        return out

    def intern(self, outs: tuple) -> int:
        oid = self.outcome_id.get(outs)
        if oid is None:
            oid = self.outcome_id[outs] = len(self.outcomes)
            self.outcomes.append(outs)
        return oid

    def walk(self, q0s: list) -> list:
        """[(groups, outcome ids)] of every token live from each state of ``q0s``; outcomes
        are interned tuples of (target, pushed, popped).

        Lanes with a single configuration (a state plus a fixed context of pushed / popped
        symbols, interned as ``ctx``) are walked level by level with NumPy for all trie nodes
        and all states of ``q0s`` at once (``src`` = the lane's start state); a lane whose
        byte calls or returns is stepped in Python and, if it stays a single configuration
        (the usual case), rejoins the NumPy walk with its new context. Only lanes that
        branch over unknown stack contents finish in Python.
        """
        trie, kind, arg, q_count = self.trie, self.pda.kind, self.pda.arg, self.pda.num_states
        out_s, out_g, out_o, extra_s, extra_g, extra_o = [], [], [], [], [], []
        node = np.zeros(len(q0s), np.int64)
        cur = np.array(q0s, np.int64)
        ctx = np.zeros(len(q0s), np.int64)
        src = np.arange(len(q0s))
        for d in range(1, trie.depth + 1):
            check_time(STEP)
            if node.size == 0:
                break
            rep, child = trie.children(d, node)
            if child.size == 0:
                break
            c, x, s = cur[rep], ctx[rep], src[rep]
            b = trie.byte[d][child]
            k = kind[c, b]
            shift = k == SHIFT
            node, cur = child[shift], arg[c[shift], b[shift]].astype(np.int64)
            ctx, src = x[shift], s[shift]
            other = np.flatnonzero((k == CALL) | (k == RETURN))
            if other.size:
                seeds = ([], [], [], [])
                for y in other.tolist():
                    pushed, popped = self.contexts[int(x[y])]
                    configs = self.step(((int(c[y]), pushed, popped),), int(b[y]))
                    if len(configs) == 1:
                        q, pushed, popped = configs[0]
                        seeds[0].append(int(child[y]))
                        seeds[1].append(q)
                        seeds[2].append(self.context((pushed, popped)))
                        seeds[3].append(int(s[y]))
                    elif configs:
                        n0 = len(extra_g)
                        self._dfs(d, int(child[y]), configs, extra_g, extra_o)
                        extra_s.extend([int(s[y])] * (len(extra_g) - n0))
                if seeds[0]:
                    node, cur, ctx, src = (
                        np.concatenate([a, np.array(e, np.int64)])
                        for a, e in zip((node, cur, ctx, src), seeds, strict=True)
                    )
            term = trie.terminal[d][node]
            hit = np.flatnonzero(term >= 0)
            if hit.size:
                out_s.append(src[hit])
                out_g.append(term[hit])
                out_o.append(self.single_ids(cur[hit] + q_count * ctx[hit]))
        if extra_g:
            out_s.append(np.array(extra_s, np.int64))
            out_g.append(np.array(extra_g, np.int64))
            out_o.append(np.array(extra_o, np.int64))
        if not out_g:
            return [(np.zeros(0, np.int64), np.zeros(0, np.int64)) for _ in q0s]
        s, g, o = (np.concatenate(a) for a in (out_s, out_g, out_o))
        order = np.argsort(s, kind="stable")
        cuts = np.searchsorted(s[order], np.arange(len(q0s) + 1))
        g, o = g[order], o[order]
        return [(g[lo:hi], o[lo:hi]) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]

    def context(self, key: tuple) -> int:
        cid = self.context_id.get(key)
        if cid is None:
            cid = self.context_id[key] = len(self.contexts)
            self.contexts.append(key)
        return cid

    def single_ids(self, keys: np.ndarray) -> np.ndarray:
        """Outcome ids of single configurations keyed ``state + Q * context``, memoized in a
        dense array (interned on first sight, in key order)."""
        memo = self.single_memo
        top = int(keys.max())
        if top >= memo.shape[0]:
            grown = np.full(max(2 * memo.shape[0], top + 1), -1, np.int64)
            grown[: memo.shape[0]] = memo
            memo = self.single_memo = grown
        ids = memo[keys]
        miss = ids < 0
        if miss.any():
            q_count = self.pda.num_states
            for key in np.unique(keys[miss]).tolist():
                memo[key] = self.single(key % q_count, key // q_count)
            ids = memo[keys]
        return ids

    def single(self, q: int, cid: int) -> int:
        pushed, popped = self.contexts[cid]
        return self.intern(((q, pushed, popped),))

    def _dfs(self, d0: int, node0: int, configs0: tuple, out_g: list, out_o: list) -> None:
        """Python walk of the subtree under ``node0`` (level ``d0``, reached with ``configs0``)."""
        if self.lists is None:  # the trie as Python lists, made on the first Python walk
            t = self.trie
            self.lists = tuple([a.tolist() for a in x] for x in (t.child_start, t.byte, t.terminal))
        (child_start, byte, terminal), step = self.lists, self.step
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
