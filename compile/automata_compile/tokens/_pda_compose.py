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
from automata_compile.frontends.grammar._byte_pda import CALL, RETURN, SHIFT, BytePDA
from automata_compile.tokens._token_trie import TokenTrie

# Outcomes of one (state, token) beyond this mean the walk is enumerating stack contexts
# combinatorially: refuse rather than run away.
MAX_OUTCOMES = 4096


def compose_pda(pda: BytePDA, trie: TokenTrie, vocab) -> dict:
    """Builds the token-level tables.

    Returns a dict of NumPy arrays (see `TokenDFA`'s PDA block): ``token_class``,
    ``next_state``, ``accepting``, ``start``, ``edge_push``, ``push_seq``, ``push_len``,
    ``cd_state``, ``cd_class``, ``cd_pop``, ``cd_npop``, ``cd_target``, ``cd_push``.

    Raises:
      UnsupportedGrammarError: the vocabulary cannot spell some byte the grammar uses on
        its own (masks could not be exact), or a token's outcomes explode.
    """
    _check_bytes(pda, vocab)
    walker = _Walker(pda, trie)
    start = int(pda.starts[0])
    outcomes_of: dict[int, dict[int, tuple]] = {}  # state -> group -> outcomes
    todo, seen = [start], {start}
    while todo:
        q = todo.pop()
        res = walker.walk(q)
        outcomes_of[q] = res
        for outs in res.values():
            for target, _pushed, _popped in outs:
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
    # Group signature: its outcomes from every boundary state.
    sig: dict[int, list] = {}
    for q in sorted(outcomes_of):
        for g, outs in outcomes_of[q].items():
            sig.setdefault(g, []).append((q, outs))
    class_of_sig: dict[tuple, int] = {}
    group_class = np.zeros(trie.num_groups, np.int64)
    reps = [None]
    for g in sorted(sig):
        key = tuple(sig[g])
        c = class_of_sig.get(key)
        if c is None:
            c = class_of_sig[key] = len(reps)
            reps.append(key)
        group_class[g] = c
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


def _check_bytes(pda: BytePDA, vocab) -> None:
    used = np.flatnonzero((pda.kind != 0).any(axis=0))
    have = {t for t in vocab.tokens if t is not None and len(t) == 1}
    missing = [b for b in used if bytes([b]) not in have]
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
        self.child_start = [c.tolist() for c in trie.child_start]
        self.byte = [b.tolist() for b in trie.byte]
        self.terminal = [t.tolist() for t in trie.terminal]
        self.depth = trie.depth
        self.byte_memo: dict[tuple[int, int], tuple] = {}
        self.memo: dict[tuple, tuple] = {}

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

    def walk(self, q0: int) -> dict[int, tuple]:
        """group -> sorted outcomes (target, pushed, popped) of every token from ``q0``."""
        results: dict[int, tuple] = {}
        todo = [(0, 0, ((q0, (), ()),))]
        child_start, byte, terminal, step = self.child_start, self.byte, self.terminal, self.step
        depth = self.depth
        while todo:
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
                    results[g] = new
                todo.append((d + 1, child, new))
        return results
