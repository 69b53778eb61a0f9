"""Rule IRs → a deterministic byte-level pushdown automaton (scannerless, LL(1) over bytes).

Each rule body is compiled to a minimal DFA whose symbols are bytes and calls
(symbol ``256 + j`` = "call rule j", via `_byte_dfa.cached_byte_dfa`). The states of
all rule DFAs are numbered globally; stack symbols are *return states*. On byte
``b`` in state ``q`` exactly one move applies, decided by ``b`` alone:

* **shift**: the rule's DFA has a byte edge ``q --b--> q'``;
* **call** rule j with return state r (edge ``q --j--> r``): push r, go to j's start
  and decide again; taken when ``b`` is in FIRST(j), or j is nullable and ``b`` can
  come after the call;
* **return**: ``q`` is final; pop r, go to r and decide again; taken when ``b`` is in
  FOLLOW(rule of q).

FIRST / FOLLOW / nullable are computed per state (SLL(1) over bytes). When two
moves share a byte the grammar is refused (`GrammarConflictError`) with the rules,
an example input and the byte; a rule that can reach itself without consuming a
byte is refused (`LeftRecursionError`). Because every rule is productive and
every rule DFA is trimmed, every configuration reached this way can still be
completed: a byte is accepted iff the prefix stays viable. A configuration
``(q, stack)`` accepts iff ``ends[q]`` and ``ends[r]`` for every r on the stack.
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from automata_compile._errors import (
    AutomataError,
    GrammarConflictError,
    LeftRecursionError,
    StateBudgetExceededError,
    UnsupportedGrammarError,
)
from automata_compile.automata import _byte_dfa

DEAD, SHIFT, CALL, RETURN = 0, 1, 2, 3
_BYTES = [bytes([b]) for b in range(256)]


@dataclasses.dataclass(frozen=True, eq=False)
class BytePDA:
    """Attributes (Q = states of all rules, R = rules):

    names: rule names (rule 0 = the synthetic root).
    rule_of: int32[Q], the rule of each state.
    starts: int32[R], each rule's start state; ``starts[0]`` is the initial state.
    shift: int32[Q, 256], byte edges within a rule; -1 = none.
    ends: bool[Q], the rule can end here (final, possibly after nullable calls).
    kind: int8[Q, 256], the move on each byte: DEAD / SHIFT / CALL / RETURN.
    arg: int32[Q, 256], SHIFT: the next state; CALL: the callee; else -1.
    ret: int32[Q, 256], CALL: the return state pushed, -1 for a tail call (push nothing);
      else -1.
    returns: per rule, the return states of its call sites (what a RETURN may pop).
    """

    names: tuple
    rule_of: np.ndarray
    starts: np.ndarray
    shift: np.ndarray
    ends: np.ndarray
    kind: np.ndarray
    arg: np.ndarray
    ret: np.ndarray
    returns: tuple

    @property
    def num_states(self) -> int:
        return int(self.rule_of.shape[0])

    def step(self, state: int, stack: tuple, b: int):
        """The configuration after byte ``b`` (stack bottom first); None if it is dead."""
        q, stack = state, list(stack)
        while True:
            k = self.kind[q, b]
            if k == SHIFT:
                return int(self.arg[q, b]), tuple(stack)
            if k == CALL:
                if self.ret[q, b] >= 0:
                    stack.append(int(self.ret[q, b]))
                q = int(self.starts[self.arg[q, b]])
            elif k == RETURN and stack:
                q = stack.pop()
            else:
                return None

    def matches(self, data: bytes) -> bool:
        """Full match of ``data``, run byte by byte with a stack (for tests and the JSON
        Schema suite runner)."""
        config = (int(self.starts[0]), ())
        for b in data:
            config = self.step(*config, b)
            if config is None:
                return False
        q, stack = config
        return bool(self.ends[q]) and all(self.ends[r] for r in stack)


def build_byte_pda(
    grammar, *, max_states: int | None = None, what: str = "the grammar", root=None
) -> BytePDA:
    """Compiles every rule and checks determinism; ``what`` names the input in budget
    errors (each also names the rule). ``root``: a `ByteDFA` (columns: bytes, then one per
    rule call) to use for rule 0 instead of compiling its body (the bitset path's root with
    its events contracted, `tokens._bitset_pda`).

    Raises:
      GrammarConflictError, LeftRecursionError, UnsupportedGrammarError (unproductive rule),
      StateBudgetExceededError.
    """
    names = grammar.names
    r_count = len(names)
    budget = max_states or _byte_dfa.DEFAULT_MAX_STATES
    dfas = []
    for j, (name, body) in enumerate(zip(names, grammar.bodies, strict=False)):
        if j == 0 and root is not None:
            dfas.append(root)
            continue
        try:
            dfas.append(_byte_dfa.cached_byte_dfa(body, r_count, max_states=budget, what=what))
        except AutomataError as e:
            if j == 0:  # the synthetic root stands for the input itself, which ``what`` names
                raise
            raise type(e)(f"rule {name!r}: {e}") from None
    offsets = np.cumsum([0] + [d.num_states for d in dfas])
    q_count = int(offsets[-1])
    if q_count > budget:
        raise StateBudgetExceededError(
            f"{what}'s rules have {q_count} states in all, over max_states={budget}"
        )
    shift = np.full((q_count, 256), -1, np.int32)
    final = np.zeros(q_count, bool)
    rule_of = np.zeros(q_count, np.int32)
    calls: list[list[tuple[int, int]]] = [[] for _ in range(q_count)]
    for i, d in enumerate(dfas):
        o = int(offsets[i])
        t = d.trans[:, :256]
        shift[o : o + d.num_states] = np.where(t >= 0, t + o, -1)
        final[o : o + d.num_states] = d.accepting
        rule_of[o : o + d.num_states] = i
        for s, j in zip(*np.nonzero(d.trans[:, 256:] >= 0), strict=False):
            calls[o + s].append((int(j), o + int(d.trans[s, 256 + j])))
    starts = np.array([int(offsets[i]) + d.start for i, d in enumerate(dfas)], np.int32)
    a = _Analysis(names, starts, shift, final, rule_of, calls)
    a.check_productive()
    a.fixpoints()
    a.check_left_recursion()
    kind, arg, ret = a.actions()
    # Tail calls: a return state with no move but ending its rule is never pushed (the
    # callee returns straight to the caller's caller), so right recursion keeps the stack flat
    # and a byte never has to pop an unbounded run of such frames.
    tail = final & (shift < 0).all(axis=1) & np.array([not c for c in calls])
    ret = np.where((ret >= 0) & tail[np.maximum(ret, 0)], -1, ret).astype(np.int32)
    returns = [set() for _ in range(r_count)]
    calling = [q for q in range(q_count) if calls[q]]
    changed = True
    while changed:  # a tail-called rule returns to wherever its caller returns
        changed = False
        for q in calling:
            for j, r in calls[q]:
                add = returns[int(rule_of[q])] if tail[r] else {r}
                if not add <= returns[j]:
                    returns[j] |= add
                    changed = True
    return BytePDA(
        names=tuple(names),
        rule_of=rule_of,
        starts=starts,
        shift=shift,
        ends=a.ends,
        kind=kind,
        arg=arg,
        ret=ret,
        returns=tuple(tuple(sorted(r)) for r in returns),
    )


class _Analysis:
    def __init__(self, names, starts, shift, final, rule_of, calls):
        self.names, self.starts, self.shift = names, starts, shift
        self.final, self.rule_of, self.calls = final, rule_of, calls
        self.q_count = shift.shape[0]
        self.byte_moves = None

    # -- shortest strings (productivity and examples) ------------------------------------------

    def check_productive(self) -> None:
        """Refuses a rule that derives no finite string: the least fixpoint of "a final state
        of the rule is reachable by byte edges and calls of productive rules" (the rules
        `_shortest` gives a string, without spelling the strings: they are needed only for
        a conflict's example)."""
        r_count = len(self.names)
        self.short: list[bytes | None] | None = None
        q, b = np.nonzero(self.shift >= 0)
        pairs = np.unique(q.astype(np.int64) * self.q_count + self.shift[q, b])
        offs = np.searchsorted(pairs // self.q_count, np.arange(self.q_count + 1)).tolist()
        adj = (pairs % self.q_count).tolist()
        starts, final, calls = self.starts.tolist(), self.final.tolist(), self.calls
        productive = [False] * r_count
        changed = True
        while changed:
            changed = False
            for j in range(r_count):
                if productive[j]:
                    continue
                seen, todo = {starts[j]}, [starts[j]]
                while todo:
                    x = todo.pop()
                    if final[x]:
                        productive[j] = changed = True
                        break
                    nxt = adj[offs[x] : offs[x + 1]]
                    nxt += [r for k, r in calls[x] if productive[k]]
                    for t in nxt:
                        if t not in seen:
                            seen.add(t)
                            todo.append(t)
        bad = [self.names[j] for j in range(1, r_count) if not productive[j]]
        if bad:
            raise UnsupportedGrammarError(
                f"rule(s) {', '.join(map(repr, bad))} derive no finite string (every "
                "alternative needs the rule itself); add a base case",
                rules=tuple(bad),
            )

    def _shortest(self) -> None:
        """``short``: each rule's shortest string (round-robin to a fixpoint), None for a rule
        with none. A rule is recomputed only when a rule it calls got a shorter string since
        its last pass (a pass over the same strings would find the same paths)."""
        r_count = len(self.names)
        self.short = [None] * r_count
        callers: list[set[int]] = [set() for _ in range(r_count)]
        for q, out in enumerate(self.calls):
            for j, _ in out:
                callers[j].add(int(self.rule_of[q]))
        dirty = set(range(r_count))
        while dirty:
            for j in range(r_count):
                if j not in dirty:
                    continue
                dirty.discard(j)
                paths = self._paths(int(self.starts[j]))
                best = min((p for q, p in paths.items() if self.final[q]), key=len, default=None)
                if best is not None and (self.short[j] is None or len(best) < len(self.short[j])):
                    self.short[j] = best
                    dirty |= callers[j]

    def _byte_moves(self) -> list[list[tuple[bytes, int]]]:
        """Per state, ``(byte, target)`` for each target of its byte edges with the smallest
        byte leading there (the one a shortest path spells), in byte order."""
        if self.byte_moves is None:
            q, b = np.nonzero(self.shift >= 0)
            t = self.shift[q, b]
            _, first = np.unique(q.astype(np.int64) * self.q_count + t, return_index=True)
            first.sort()
            q, b, t = q[first].tolist(), b[first].tolist(), t[first].tolist()
            self.byte_moves = [[] for _ in range(self.q_count)]
            for x, y, z in zip(q, b, t, strict=True):
                self.byte_moves[x].append((_BYTES[y], z))
        return self.byte_moves

    def _paths(self, start: int) -> dict[int, bytes]:
        """Shortest byte string from ``start`` to each state of its rule (calls spelled by
        the callee's shortest string); among equal lengths, the first found (bytes in order,
        then calls)."""
        byte_moves, calls, short = self._byte_moves(), self.calls, self.short
        best = {start: b""}
        heap = [(0, start)]
        while heap:
            n, q = heapq.heappop(heap)
            p = best[q]
            if len(p) < n:
                continue
            moves = byte_moves[q] + [(short[j], r) for j, r in calls[q] if short[j] is not None]
            for s, t in moves:
                cand = p + s
                if t not in best or len(cand) < len(best[t]):
                    best[t] = cand
                    heapq.heappush(heap, (len(cand), t))
        return best

    # -- nullable / FIRST / FOLLOW --------------------------------------------------------------

    def fixpoints(self) -> None:
        """``ends`` (nullable rest), FIRST per state and FOLLOW per rule; only states with
        calls add anything beyond their own edges."""
        starts, calls = self.starts, self.calls
        calling = [q for q in range(self.q_count) if calls[q]]
        ends = self.final.copy()
        changed = True
        while changed:
            changed = False
            for q in calling:
                if not ends[q] and any(ends[starts[j]] and ends[r] for j, r in calls[q]):
                    ends[q] = changed = True
        first = self.shift >= 0
        changed = True
        while changed:
            changed = False
            for q in calling:
                for j, r in calls[q]:
                    add = first[starts[j]] | (first[r] if ends[starts[j]] else False)
                    if (add & ~first[q]).any():
                        first[q] |= add
                        changed = True
        follow = np.zeros((len(self.names), 256), bool)
        changed = True
        while changed:
            changed = False
            for q in calling:
                for j, r in calls[q]:
                    add = first[r] | (follow[self.rule_of[q]] if ends[r] else False)
                    if (add & ~follow[j]).any():
                        follow[j] |= add
                        changed = True
        self.ends, self.first, self.follow = ends, first, follow

    def check_left_recursion(self) -> None:
        """Refuses a rule that reaches a call of itself without consuming a byte."""
        starts, ends = self.starts, self.ends
        left: list[set[int]] = []
        for j in range(len(self.names)):
            seen, todo, out = {int(starts[j])}, [int(starts[j])], set()
            while todo:
                q = todo.pop()
                for k, r in self.calls[q]:
                    out.add(k)
                    if ends[starts[k]] and r not in seen:
                        seen.add(r)
                        todo.append(r)
            left.append(out)
        color = [0] * len(self.names)

        def visit(j, path):
            color[j] = 1
            for k in sorted(left[j]):
                if color[k] == 1:
                    cycle = path[path.index(k) :] + [k]
                    names = [self.names[i] for i in cycle]
                    raise LeftRecursionError(
                        "left recursion: " + " -> ".join(map(repr, names)) + " (each rule can "
                        "start with the next without consuming input); only the immediate form "
                        "'a: a x | y' is rewritten, rewrite this one as a repetition",
                        rules=tuple(dict.fromkeys(names)),
                    )
                if color[k] == 0:
                    visit(k, path + [k])
            color[j] = 2

        for j in range(len(self.names)):
            if color[j] == 0:
                visit(j, [j])

    # -- the move on each byte ------------------------------------------------------------------

    def actions(self):
        q_count = self.q_count
        kind = np.where(self.shift >= 0, SHIFT, DEAD).astype(np.int8)
        arg = self.shift.copy()
        ret = np.full((q_count, 256), -1, np.int32)
        starts, ends, first, follow = self.starts, self.ends, self.first, self.follow
        for q in range(q_count):
            if not self.calls[q] and not self.final[q]:
                continue  # its byte edges only: no choice to make
            rule = int(self.rule_of[q])
            moves = [(f"continue rule {self.names[rule]!r}", self.shift[q] >= 0, None)]
            for j, r in self.calls[q]:
                on = first[starts[j]].copy()
                if ends[starts[j]]:
                    on |= first[r] | (follow[rule] if ends[r] else False)
                moves.append((f"enter rule {self.names[j]!r}", on, (j, r)))
            if self.final[q]:
                moves.append((f"end rule {self.names[rule]!r}", follow[rule], "return"))
            for x in range(len(moves)):
                for y in range(x + 1, len(moves)):
                    both = moves[x][1] & moves[y][1]
                    if both.any():
                        self._conflict(q, moves[x], moves[y], int(np.flatnonzero(both)[0]))
            for _, on, what in moves[1:]:
                if what == "return":
                    kind[q, on] = RETURN
                else:
                    kind[q, on] = CALL
                    arg[q, on] = what[0]
                    ret[q, on] = what[1]
        return kind, arg, ret

    def _conflict(self, q, m1, m2, b) -> None:
        rule = int(self.rule_of[q])
        if self.short is None:
            self._shortest()
        prefix = self._paths(int(self.starts[rule])).get(q, b"")
        involved = [self.names[rule]] + [
            m[2] and m[2] != "return" and self.names[m[2][0]] or self.names[rule] for m in (m1, m2)
        ]
        raise GrammarConflictError(
            f"grammar conflict in rule {self.names[rule]!r} after {prefix!r} (text within the "
            f"rule): on the next byte {bytes([b])!r} the parser could {m1[0]} or {m2[0]}; the "
            "grammar is ambiguous or needs more than one byte of lookahead there. Rewrite it "
            "(left-factor the alternatives, or merge the terminals into one rule).",
            rules=tuple(dict.fromkeys(involved)),
            example=prefix + bytes([b]),
        )
