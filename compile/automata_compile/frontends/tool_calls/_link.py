"""The root of a tool-call constraint and its link with the tools' byte PDAs.

The root rule is built here directly over bytes (it is small and regular):

* free text: the string-matching (KMP) automaton of the trigger's UTF-8 bytes, any byte
  that does not complete the trigger staying in the text (copy A before the first call,
  copy B after one; with ``parallel=False`` the trigger is dead in copy B);
* after the trigger: the format's envelope, then the tool names as a trie, then, at the
  end of name k, a call of tool k's unit (`_tools.tool_unit`), returning to one state
  that reads the end tag and goes back to text B.

The units keep their own states, rules and moves (offset into one `BytePDA`); the only
moves added are the root's calls (on the bytes a unit can start with) and a return from
each unit's rule-0 final states on the bytes the root reads after a call. A unit's rule 0
ends with a literal byte, so no other move depends on what follows the call.
"""

from __future__ import annotations

import numpy as np

from automata_compile import _alloc
from automata_compile._errors import GrammarConflictError
from automata_compile.automata import CALL, DEAD, RETURN, SHIFT, BytePDA, kmp_moves


class _Root:
    """A deterministic byte automaton under construction (states: dicts byte -> target)."""

    def __init__(self):
        self.edges: list[dict[int, int]] = []
        self.trie_lo = self.trie_hi = 0
        self.trie_first: list[int] = []
        self.calls: dict[int, int] = {}  # state -> tool index
        self.finals: set[int] = set()

    def new(self) -> int:
        self.edges.append({})
        return len(self.edges) - 1

    def edge(self, s: int, b: int, t: int, what: str) -> None:
        got = self.edges[s].get(b)
        if got is not None and got != t:
            raise GrammarConflictError(
                f"tool-call format: {what}: byte {bytes([b])!r} already continues otherwise here",
                rules=("<tools>",),
                example=bytes([b]),
            )
        self.edges[s][b] = t

    def lit(self, frontier, data: bytes, what: str, to: int | None = None) -> list[int]:
        """``data`` after any state of ``frontier``; the new frontier (``[to]`` if given)."""
        for i, b in enumerate(data):
            t = to if (to is not None and i == len(data) - 1) else self.new()
            for s in frontier:
                self.edge(s, b, t, what)
            frontier = [t]
        return frontier

    def opt(self, frontier, data: bytes, what: str) -> list[int]:
        return list(frontier) + self.lit(frontier, data, what) if data else list(frontier)

    def text(self, trigger: bytes, on_trigger: int | None, final: bool) -> list[int]:
        """Free text: KMP states 0..m-1 of ``trigger``; completing it goes to ``on_trigger``
        (None: the trigger may not appear)."""
        m = len(trigger)
        states = [self.new() for _ in range(m)]
        delta = []
        for moves in kmp_moves(trigger):
            row = [0] * 256
            for b, n in moves.items():
                row[b] = n
            delta.append(row)
        for j, s in enumerate(states):
            for b, n in enumerate(delta[j]):
                if n < m:
                    self.edges[s][b] = states[n]
                elif on_trigger is not None:
                    self.edges[s][b] = on_trigger
        if final:
            self.finals.update(states)
        return states


def root_and_calls(
    fmt, names, *, parallel: bool, require_call: bool, allow_text: bool = True
) -> tuple[_Root, int, int]:
    """The root automaton, its start state and the state a call returns to. Without
    ``allow_text`` the output is calls only: the trigger first, and after a call either
    the end or (``parallel``) an optional newline and the next trigger."""
    r = _Root()
    trig = fmt.trigger.encode()
    head = r.new()
    if allow_text:
        text_a = r.text(trig, head, final=not require_call)
        text_b = r.text(trig, head if parallel else None, final=True)
    else:
        text_a = [r.new()]
        r.lit(text_a, trig, "the trigger", to=head)
        text_b = [r.new()]
        r.finals.add(text_b[0])
        if parallel:
            r.lit(r.opt(text_b, b"\n", "between calls"), trig, "the trigger", to=head)
    f = r.opt([head], fmt.after_trigger.encode(), "after the trigger")
    if fmt.style == "json":
        f = r.lit(f, b'{"name":', "the envelope")
        f = r.opt(f, b" ", "the envelope")
        f = r.lit(f, b'"', "the envelope")
    trie: dict[bytes, int] = {}
    r.trie_lo = len(r.edges)  # the names' trie: states trie_lo .. trie_hi - 1
    for k, name in enumerate(names):
        data = name.encode()
        for i in range(1, len(data) + 1):
            if data[:i] not in trie:
                trie[data[:i]] = r.new()
                for s in f if i == 1 else [trie[data[: i - 1]]]:
                    r.edge(s, data[i - 1], trie[data[:i]], "tool names")
        r.calls[trie[data]] = k
    r.trie_hi = len(r.edges)
    r.trie_first = [p[0] for p in trie]  # each trie state's first name byte, in state order
    back = r.new()
    f = r.opt([back], fmt.before_end.encode(), "before the end tag")
    r.lit(f, fmt.end.encode(), "the end tag", to=text_b[0])
    return r, text_a[0], back


def link(root: _Root, start: int, back: int, units, names) -> BytePDA:
    """One byte PDA: rule 0 = the root, then each unit's rules (see the module docstring).

    Raises:
      GrammarConflictError: a unit can start with a byte that also continues a tool's
        name, or its end collides with what the root reads after a call (a format whose
        end tag or ``before_end`` could continue the arguments).
    """
    q0 = len(root.edges)
    sizes = [u.num_states for u in units]
    so = np.cumsum([q0] + sizes)  # state offsets
    ro = np.cumsum([1] + [len(u.names) for u in units])  # rule offsets
    q = int(so[-1])
    # the units' rows are written in place below (each array's pages touched once, with
    # no huge-page stalls: `_alloc`)
    shift = _alloc.empty((q, 256), np.int32)
    kind = _alloc.empty((q, 256), np.int8)
    arg = _alloc.empty((q, 256), np.int32)
    ret = _alloc.empty((q, 256), np.int32)
    shift[:q0], kind[:q0], arg[:q0], ret[:q0] = -1, 0, -1, -1
    ends = np.zeros(q, bool)
    rule_of = np.zeros(q, np.int32)
    for s, out in enumerate(root.edges):
        if out:
            b = np.fromiter(out.keys(), np.int64, len(out))
            shift[s, b] = np.fromiter(out.values(), np.int64, len(out))
    kind[:q0][shift[:q0] >= 0] = SHIFT
    arg[:q0] = shift[:q0]
    ends[list(root.finals)] = True
    after = shift[back] >= 0  # what the root reads after a call
    returns = [()]
    for k, u in enumerate(units):
        a, z = int(so[k]), int(so[k + 1])
        _offset(shift[a:z], u.shift, a, u.shift >= 0)
        kind[a:z] = u.kind
        av = arg[a:z]
        _offset(av, u.arg, a, u.kind == SHIFT)
        np.add(u.arg, int(ro[k]), out=av, where=u.kind == CALL)
        _offset(ret[a:z], u.ret, a, u.ret >= 0)
        ends[a:z] = u.ends
        rule_of[a:z] = u.rule_of + ro[k]
        fin = np.flatnonzero((u.rule_of == 0) & u.ends) + a
        if (kind[fin][:, after] != DEAD).any():
            raise GrammarConflictError(
                f"tool {names[k]!r}: its call can continue with a byte the format reads after "
                "a call (before_end / end tag)",
                rules=(names[k],),
                example=b"",
            )
        kind[np.ix_(fin, np.flatnonzero(after))] = RETURN
        returns.append((back,))
        returns.extend(tuple(int(x) + a for x in rs) for rs in u.returns[1:])
    for s, k in root.calls.items():
        u = units[k]
        first = u.kind[u.starts[0]] != DEAD
        if (first & (shift[s] >= 0)).any():
            raise GrammarConflictError(
                f"tool {names[k]!r}: its call starts with a byte that also continues a longer "
                "tool name",
                rules=(names[k],),
                example=names[k].encode(),
            )
        kind[s, first] = CALL
        arg[s, first] = ro[k]
        ret[s, first] = back
    starts = np.concatenate([[start]] + [u.starts + so[k] for k, u in enumerate(units)])
    rule_names = ["<tools>"]
    for name, u in zip(names, units, strict=True):
        rule_names.append(name)
        rule_names.extend(f"{name}/{n}" for n in u.names[1:])
    return BytePDA(
        names=tuple(rule_names),
        rule_of=rule_of,
        starts=starts.astype(np.int32),
        shift=shift,
        ends=ends,
        kind=kind,
        arg=arg,
        ret=ret,
        returns=tuple(returns),
    )


def _offset(out: np.ndarray, x: np.ndarray, a: int, keep: np.ndarray) -> None:
    """``out[:] = where(keep, x + a, -1)`` in place, without temporaries of ``out``'s size."""
    out.fill(-1)
    np.add(x, a, out=out, where=keep)
