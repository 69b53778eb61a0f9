"""Finite automata over an integer alphabet ``0..S-1``: the one automaton core.

The same code serves byte automata (S = 256 bytes + terminal labels, see `_byte_dfa`)
and character automata over a partition of the code points (S = atoms, see
`_char_dfa`). An `NFA` has interval edges and epsilon edges; `determinize` is the
subset construction; a `DFA` is a dense table ``int32[Q, S]`` (-1 = no edge) on which
`product` (intersection, difference, ...), `complement`, `is_empty`, `minimize` and
`bounded` (intersection with the strings of at most ``n`` symbols) work.

Every construction has a budget: a number of states and a number of work units (NFA
states and edges visited by the subset construction, pairs explored by a product).
Past it, `StateBudgetExceededError` names what grew, instead of running for minutes.
A compile may also carry a wall-clock deadline (`limits`), checked at the same
checkpoints (each new state, each subset/product/minimization round), raising
`CompileTimeoutError`; front ends record the input location being built (`location`,
e.g. a schema's JSON pointer) so both errors can name it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import gc
import threading
import time

import numpy as np

from automata_compile._errors import CompileTimeoutError, StateBudgetExceededError
from automata_compile.automata import _dfa_ops, _subset

DEAD = -1
DEFAULT_MAX_STATES = 100_000
DEFAULT_MAX_WORK = 4_000_000
MINIMIZE_WORK_FACTOR = 5


@dataclasses.dataclass(frozen=True)
class _Deadline:
    at: float
    timeout_s: float
    what: str


_DEADLINE: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar(
    "automata_deadline", default=None
)
_WHERE: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "automata_where", default=()
)


@contextlib.contextmanager
def limits(timeout_s: float | None, what: str):
    """While open, constructions past ``timeout_s`` seconds (from now) raise
    `CompileTimeoutError` naming ``what``. ``None`` keeps an enclosing deadline (or none).
    Cyclic garbage collection is paused while it is open (`gc_paused`)."""
    if timeout_s is None:
        with gc_paused():
            yield
        return
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    token = _DEADLINE.set(_Deadline(time.monotonic() + timeout_s, float(timeout_s), what))
    try:
        with gc_paused():
            yield
    finally:
        _DEADLINE.reset(token)


_GC_LOCK = threading.Lock()
_gc_holders = 0  # open `gc_paused` blocks, all threads together
_gc_was_enabled = False


@contextlib.contextmanager
def gc_paused():
    """Pauses Python's cyclic garbage collector while open (re-entrant, thread-safe: the
    last block to close re-enables it, if it was enabled when the first opened).

    A compile allocates millions of small acyclic objects (NFA edge lists, tuples, dicts);
    each full collection re-traverses all of them, which cost 5-20% of a compile. Nothing
    is leaked: reference counting frees them as before, and any cycle is collected once
    the collector runs again."""
    global _gc_holders, _gc_was_enabled
    with _GC_LOCK:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


@contextlib.contextmanager
def location(where: str):
    """While open, budget and timeout errors say they happened while building ``where``."""
    token = _WHERE.set((*_WHERE.get(), where))
    try:
        yield
    finally:
        _WHERE.reset(token)


def _where() -> str:
    stack = _WHERE.get()
    return f" (while building {stack[-1]})" if stack else ""


def check_time(step: str, what: str = "") -> None:
    """Raises `CompileTimeoutError` if the open `limits` deadline has passed."""
    d = _DEADLINE.get()
    if d is not None and time.monotonic() > d.at:
        inner = f" of {what}" if what else ""
        raise CompileTimeoutError(
            f"compiling {d.what} ran past timeout_s={d.timeout_s:g} s in {step}{inner}"
            f"{_where()}; simplify it or raise timeout_s"
        )


@dataclasses.dataclass(frozen=True)
class Budget:
    """Limits of one construction; ``what`` names the input in error messages."""

    what: str = "the automaton"
    max_states: int = DEFAULT_MAX_STATES
    max_work: int = DEFAULT_MAX_WORK

    def number(self, ids: dict, key, step: str) -> tuple[int, bool]:
        """The id of state ``key`` in ``ids`` and whether it is new: a new key gets the next
        id, ``len(ids)``.

        Raises:
          StateBudgetExceededError: a new id would pass ``max_states`` (``step`` is named).
        """
        d = ids.get(key)
        if d is not None:
            return d, False
        d = len(ids)
        if d >= self.max_states:
            raise self.states_exceeded(step)
        ids[key] = d
        return d, True

    def states_exceeded(self, step: str) -> StateBudgetExceededError:
        return StateBudgetExceededError(
            f"{step} of {self.what}{_where()} exceeds max_states={self.max_states} states; simplify it "
            "(large bounded repeats and intersections multiply states) or raise max_states"
        )

    def work_exceeded(self, step: str) -> StateBudgetExceededError:
        return StateBudgetExceededError(
            f"{step} of {self.what}{_where()} exceeds its work budget ({self.max_work:,} units; large "
            "sets of NFA states, as stacked bounded repeats like ((ab|.){0,100}){10} "
            "produce); simplify it or raise max_states"
        )


class NFA:
    """A nondeterministic automaton with interval edges ``(lo, hi, target)`` and epsilon
    edges; states are allocated on demand, at most ``max_states``."""

    def __init__(self, budget: Budget, max_states: int):
        self.edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []
        self.budget = budget
        self.max_states = max_states

    def state(self) -> int:
        n = len(self.edges)
        if n & 1023 == 0:
            check_time("the NFA construction", self.budget.what)
        if n >= self.max_states:
            raise self._past_max_states()
        self.edges.append([])
        self.eps.append([])
        return len(self.edges) - 1

    def _past_max_states(self) -> StateBudgetExceededError:
        return StateBudgetExceededError(
            f"{self.budget.what}{_where()} needs more than {self.max_states} NFA states; simplify it "
            "(large bounded repeats multiply states) or raise max_states"
        )

    def reserve(self, k: int) -> None:
        """Checks that ``k`` more states may be made, as ``k`` calls of `state` would: the
        same deadline checks and the same error past ``max_states`` (the caller appends
        their rows)."""
        n = len(self.edges)
        if k and (n == 0 or (n + k - 1) >> 10 != (n - 1) >> 10):  # a multiple of 1024 met
            check_time("the NFA construction", self.budget.what)
        if n + k > self.max_states:
            raise self._past_max_states()


@dataclasses.dataclass(frozen=True, eq=False)
class DFA:
    """A dense deterministic automaton.

    Attributes:
      trans: int32[Q, S]; -1 = no edge.
      accepting: bool[Q].
      start: initial state.
    """

    trans: np.ndarray
    accepting: np.ndarray
    start: int

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])

    @property
    def num_symbols(self) -> int:
        return int(self.trans.shape[1])

    def run(self, symbols) -> bool:
        """Whether the DFA accepts the symbol sequence."""
        q = self.start
        for a in symbols:
            q = int(self.trans[q, a])
            if q < 0:
                return False
        return bool(self.accepting[q])


def determinize(nfa: NFA, start: int, final: int, num_symbols: int) -> DFA:
    """Subset construction from ``start`` to the single accepting NFA state ``final``
    (vectorized per BFS level, see `_subset`).

    Raises:
      StateBudgetExceededError: more than ``budget.max_states`` DFA states, or more than
        ``budget.max_work`` NFA states, moves and closure members visited in total.
    """
    what = nfa.budget.what
    trans, accepting = _subset.determinize(
        nfa, start, final, num_symbols, lambda step: check_time(step, what)
    )
    return DFA(trans, accepting, 0)


def minimal_dfa(
    nfa: NFA, start: int, final: int, num_symbols: int, stats: dict | None = None
) -> DFA | None:
    """``minimize(determinize(...), nfa.budget)``, the same table, computed over symbol
    classes (intervals no NFA edge splits): trimming and minimization then work on a
    table a few times narrower, widened once at the end. ``stats``: see
    `_subset.determinize`."""
    what = nfa.budget.what
    table, accepting, symbol_class = _subset.determinize(
        nfa,
        start,
        final,
        num_symbols,
        lambda step: check_time(step, what),
        classes=True,
        stats=stats,
    )
    weights = np.zeros(table.shape[1], np.uint64)
    np.add.at(weights, symbol_class, _dfa_ops.symbol_weights(num_symbols))
    out = _minimize_table(table, accepting, 0, nfa.budget, weights, all_reachable=True)
    if out is None:
        return None
    return DFA(np.ascontiguousarray(out.trans[:, symbol_class]), out.accepting, out.start)


def nfa_accepts(nfa: NFA, start: int, final: int, symbols) -> bool:
    """Whether the NFA accepts the symbol sequence (on-the-fly subset simulation: no
    determinization, so it also judges automata too large to determinize)."""

    def closure(states: set) -> set:
        stack = list(states)
        while stack:
            for z in nfa.eps[stack.pop()]:
                if z not in states:
                    states.add(z)
                    stack.append(z)
        return states

    cur = closure({start})
    for a in symbols:
        cur = closure({t for x in cur for lo, hi, t in nfa.edges[x] if lo <= a <= hi})
        if not cur:
            return False
    return final in cur


def trim(dfa: DFA) -> DFA | None:
    """The useful part (reachable and co-reachable), or None if the language is empty."""
    out = _dfa_ops.trim(dfa.trans, dfa.accepting, dfa.start)
    return None if out is None else DFA(*out)


def minimize(dfa: DFA, budget: Budget | None = None) -> DFA | None:
    """The minimal trimmed DFA of the same language, or None if it is empty.

    Raises:
      StateBudgetExceededError: partition refinement past ``5 * budget.max_work`` states
        sorted, summed over rounds (a round sorts the states whose successors changed
        block: a long chain, e.g. ``.{0,10000}``, needs a round per link, of a few states).
    """
    return _minimize_table(dfa.trans, dfa.accepting, dfa.start, budget)


def _minimize_table(
    trans, accepting, start, budget: Budget | None, weights=None, all_reachable: bool = False
) -> DFA | None:
    t = _dfa_ops.trim(trans, accepting, start, all_reachable=all_reachable)
    if t is None:
        return None
    t = DFA(*t)
    cap = None if budget is None else MINIMIZE_WORK_FACTOR * budget.max_work
    try:
        what = "" if budget is None else budget.what
        trans, accepting, start, _ = _dfa_ops.minimize(
            t.trans,
            t.accepting,
            t.start,
            cap,
            tick=lambda: check_time("the minimization", what),
            weights=weights,
        )
    except _dfa_ops.WorkBudgetExceeded:
        raise budget.work_exceeded("the minimization") from None
    return DFA(trans, accepting, start)


def is_empty(dfa: DFA) -> bool:
    return trim(dfa) is None


def complete(dfa: DFA) -> DFA:
    """Adds a non-accepting sink state for the missing edges (the sink is the last state)."""
    q = dfa.num_states
    trans = np.where(dfa.trans >= 0, dfa.trans, q).astype(np.int32)
    trans = np.concatenate([trans, np.full((1, dfa.num_symbols), q, np.int32)])
    return DFA(trans, np.append(dfa.accepting, False), dfa.start)


def complement(dfa: DFA) -> DFA:
    """The DFA of every symbol string ``dfa`` rejects."""
    c = complete(dfa)
    return DFA(c.trans, ~c.accepting, c.start)


def product(a: DFA, b: DFA, op: str, budget: Budget) -> DFA:
    """The product automaton for ``op`` in ``"and"`` (intersection), ``"minus"`` (a but not
    b), ``"or"`` (union); only reachable pairs are built.

    Raises:
      StateBudgetExceededError: more than ``budget.max_states`` pairs.
    """
    if a.num_symbols != b.num_symbols:
        raise ValueError("product of automata over different alphabets")
    if op != "and":  # a missing edge of b must still be followed (to the sink)
        b = complete(b)
    if op == "or":
        a = complete(a)
    qb = b.num_states + 1  # codes p * qb + q; a dead side is the extra state
    ta = np.concatenate([a.trans, np.full((1, a.num_symbols), DEAD, np.int32)])
    tb = np.concatenate([b.trans, np.full((1, b.num_symbols), DEAD, np.int32)])
    ta[ta < 0] = a.num_states
    tb[tb < 0] = b.num_states
    ids = {a.start * qb + b.start: 0}
    order = [(a.start, b.start)]
    rows = []
    i = 0
    while i < len(order):
        p, q = order[i]
        i += 1
        live = (ta[p] != a.num_states) & (tb[q] != b.num_states)
        codes = ta[p][live].astype(np.int64) * qb + tb[q][live]
        row = np.full(a.num_symbols, DEAD, np.int32)
        uniq, inv = np.unique(codes, return_inverse=True)
        targets = np.empty(uniq.shape[0], np.int32)
        for k, code in enumerate(uniq.tolist()):
            targets[k], new = budget.number(ids, code, "a product")
            if new:
                order.append(divmod(code, qb))
        row[live] = targets[inv.reshape(-1)]
        rows.append(row)
        check_time("a product", budget.what)
    pa = np.array([p for p, _ in order])
    pb = np.array([q for _, q in order])
    acc_a = np.append(a.accepting, False)[pa]
    acc_b = np.append(b.accepting, False)[pb]
    accepting = {"and": acc_a & acc_b, "minus": acc_a & ~acc_b, "or": acc_a | acc_b}[op]
    return DFA(np.stack(rows), accepting, 0)


def longest(dfa: DFA) -> int | None:
    """The length of the longest accepted string; None where there is none or no longest
    (a cycle on an accepting path: the language is infinite)."""
    t = trim(dfa)
    if t is None:
        return None
    succ = [np.unique(row[row >= 0]).tolist() for row in t.trans]
    indegree = np.zeros(t.num_states, np.int64)
    for out in succ:
        indegree[out] += 1
    order = [q for q in range(t.num_states) if indegree[q] == 0]
    for q in order:  # Kahn: a trimmed DFA is acyclic iff every state gets ordered
        for r in succ[q]:
            indegree[r] -= 1
            if indegree[r] == 0:
                order.append(r)
    if len(order) < t.num_states:
        return None
    depth = np.full(t.num_states, -1, np.int64)
    depth[t.start] = 0
    for q in order:
        if depth[q] >= 0:
            for r in succ[q]:
                depth[r] = max(depth[r], depth[q] + 1)
    return int(depth[t.accepting].max())


def bounded(dfa: DFA, max_len: int, budget: Budget) -> DFA:
    """The strings of ``dfa`` with at most ``max_len`` symbols (a layered product with a
    counter); states that no longer matter for the count are shared.

    Raises:
      StateBudgetExceededError: more than ``budget.max_states`` (state, length) pairs.
    """
    layer = {dfa.start: 0}
    rows: list[np.ndarray] = []
    accepting: list[bool] = []
    states: list[int] = [dfa.start]
    for depth in range(max_len + 1):
        nxt: dict[int, int] = {}
        base = len(states)
        for q in list(layer):
            row = np.full(dfa.num_symbols, DEAD, np.int32)
            if depth < max_len:
                succ = dfa.trans[q]
                for t in np.unique(succ[succ >= 0]).tolist():
                    d = nxt.get(t)
                    if d is None:
                        d = nxt[t] = base + len(nxt)
                        if d >= budget.max_states:
                            raise budget.states_exceeded("a length bound")
                    row[succ == t] = d
            rows.append(row)
            accepting.append(bool(dfa.accepting[q]))
        states.extend(nxt)
        check_time("a length bound", budget.what)
        layer = nxt
        if not layer:
            break
    return DFA(np.stack(rows), np.array(accepting, bool), 0)
