"""The grammar rules a schema's IR calls (``recursion="stack"``), collected into a `GrammarIR`.

A call ``Terminal(j)`` stands for one whole JSON value: a schema-free array or object, a
recursive ``$ref`` target, or a *shared* value: a typed language used at several value
positions whose IR is at least `SHARE_MIN_SIZE` (a definition referenced from many places
compiles once instead of once per use). The emitter places calls only at whole-value positions (the
root, an array element, a member value after the colon), so the byte pushdown automaton
built from the rules stays LL(1) at the rule boundaries: what follows a JSON value is
``,`` ``}`` ``]``, whitespace or the end, and no value can continue with one of those
bytes (a rule called here ends with ``]``, ``}``, a closing quote, a literal or a number,
and a number is inline, never a call of its own). A conflict can still arise *at* a
call: where alternatives of a union share a position, one calling a rule and another
spelling a value inline that starts with the same byte (``anyOf`` of objects, one
declaring a nested object where the other allows any value); `pipeline._json_schema`
then spells the shared values the conflict names inline (`_outline.Outliner`), then
every shared value, then schema-free values, and last compiles the schema with
``recursion="unroll"`` and warns.
"""

from __future__ import annotations

from automata_compile.automata import (
    NEVER,
    Alt,
    Automaton,
    Chars,
    Event,
    GrammarIR,
    Repeat,
    Seq,
    Terminal,
    check_time,
    map_terminals,
)
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._resolver import _loc

ROOT = "<root>"
# IR size (`_content.size`, about the length of its regex) from which a typed language used
# at two or more value positions becomes a rule; smaller values are cheaper inline.
SHARE_MIN_SIZE = 300
# IR size from which every value below the root (property value, array element, used once
# or more) becomes a rule where the schema's automaton outgrew max_states in every other
# form (`pipeline._json_schema`): a rule call is the same language, and the rule's states
# are built once instead of once per copy in a repeat, an any-order object or a union.
OUTLINE_MIN_SIZE = 64


class Rules:
    """Rule ids by key, in order of first call; rule 0 is the root value. A body is built
    after the root's (``make()``, which may call further rules, itself included).

    Attributes:
      types: the typed language of each recursive ``$ref`` target (`_Translator.rule_types`).
      ptrs: the JSON pointer of each target, for rule names.
      first_at: the JSON pointer where each typed language was first translated
        (`_Translator.first_at`): a shared value's rule is named after it
        (``shared:#/definitions/step``; see `_pointer`), so an error in that rule says
        where to look.
    """

    def __init__(self, types, ptrs, shared=frozenset(), first_at=None):
        self.types, self.ptrs = types, ptrs
        self.shared = shared  # typed languages used at several value positions
        self.first_at = {} if first_at is None else first_at
        self.ids: dict = {}
        self.names: list[str] = [ROOT]
        self.makers: list = [None]

    @staticmethod
    def is_shared(name: str) -> bool:
        """Whether rule ``name`` was made for a shared value (the others: free values and
        recursive ``$ref`` targets, rules in any case)."""
        return name.startswith("shared")

    def call(self, key, make) -> Terminal:
        """``Terminal(j)`` for the rule of ``key`` (``"json_array"``, ``"json_object"``,
        ``("ref", k)`` or ``("shared", typed language)``); ``make()`` builds its body."""
        j = self.ids.get(key)
        if j is None:
            j = self.ids[key] = len(self.names)
            if isinstance(key, str):
                name = key
            elif key[0] == "ref":
                name = _loc(self.ptrs[key[1]])
            else:
                at = _pointer(key[1], self.first_at)
                name = f"shared{j}" if at is None else f"shared:{_loc(at)}"
            while name in self.names:
                name += "'"
            self.names.append(name)
            self.makers.append(make)
        return Terminal(j)

    def grammar(self, root) -> GrammarIR:
        """The rules, with calls of rules that derive no finite value replaced by NEVER
        (a recursive ``$ref`` that never bottoms out) and unreachable rules dropped."""
        bodies = [root]
        while len(bodies) < len(self.names):
            bodies.append(self.makers[len(bodies)]())
        live: set[int] = set()
        changed = True
        while changed:
            changed = False
            for j, b in enumerate(bodies):
                if j not in live and _nonempty(b, live, {}):
                    live.add(j)
                    changed = True
        if len(live) < len(bodies):
            dead = {j: (j if j in live else None) for j in range(len(bodies))}
            bodies = [_rewrite(b, dead, {}) for b in bodies]
        reach, todo, popped = {0}, [0], 0
        while todo:
            popped += 1
            if popped & 15 == 0:
                check_time("the schema's grammar rules")
            for j in rule_calls(bodies[todo.pop()], set()):
                if j not in reach:
                    reach.add(j)
                    todo.append(j)
        order = sorted(reach)
        if len(order) < len(bodies):
            remap = {j: i for i, j in enumerate(order)}
            bodies = [_rewrite(bodies[j], remap, {}) for j in order]
        return GrammarIR(names=tuple(self.names[j] for j in order), bodies=tuple(bodies))


def derives_a_value(grammar: GrammarIR) -> bool:
    """Whether the root derives some text (every kept rule does; an any-order or counting
    object can be empty without being NEVER, e.g. when a required property is)."""
    return _nonempty(grammar.bodies[0], set(range(len(grammar.bodies))), {})


def _pointer(t, first_at: dict) -> str | None:
    """Where typed language ``t`` comes from: where it was first translated, else the
    schema of its first object (a language made by merging, e.g. ``allOf`` members), else
    None."""
    at = first_at.get(t)
    if at is None:
        at = next((o.at for o in t.objects if o.at is not None), None)
    return at


def shared_types(roots, min_uses: int = 2) -> set:
    """The typed languages referenced at ``min_uses`` or more value positions (array
    elements, property values) of the typed-language DAG below ``roots``; each node's
    children are counted once, so a use inside a shared parent counts once."""
    uses: dict = {}
    seen: set = set()
    todo = [t for t in roots if t is not None]
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        kids = [x for a in t.arrays for x in (*a.prefix, a.items, *(c[0] for c in a.contains))]
        kids += [s for o in t.objects for s in (*(s for _, s in o.props), *(s for _, s in o.rest))]
        kids += [s for o in t.objects for _, s in o.need]
        for x in kids:
            if x is not None and not x.is_top() and not x.is_bottom():
                uses[x] = uses.get(x, 0) + 1
                todo.append(x)
    return {t for t, n in uses.items() if n >= min_uses}


def _kids(node):
    if isinstance(node, Automaton):
        return tuple(
            label for out in node.edges for label, _ in out if not isinstance(label, tuple)
        )
    return sf._kids(node)


def rule_calls(node, seen: set):
    """The rule ids called anywhere in ``node``."""
    if isinstance(node, Terminal):
        if not isinstance(node, Event):  # an event is no call
            yield node.index
        return
    for k in _kids(node):
        if id(k) not in seen:
            seen.add(id(k))
            if len(seen) & 1023 == 0:
                check_time("the schema's grammar rules")
            yield from rule_calls(k, seen)


def _nonempty(node, live: set, memo: dict) -> bool:
    """Whether the IR derives some string, calls of rules outside ``live`` being empty."""
    hit = memo.get(id(node))
    if hit is None:
        hit = memo[id(node)] = (node, _nonempty_node(node, live, memo))
    return hit[1]


def _nonempty_node(node, live: set, memo: dict) -> bool:
    if isinstance(node, Terminal):
        return isinstance(node, Event) or node.index in live
    if isinstance(node, Chars):
        return bool(node.ranges)
    if isinstance(node, Seq):
        return all(_nonempty(x, live, memo) for x in node.items)
    if isinstance(node, Alt):
        return any(_nonempty(x, live, memo) for x in node.options)
    if isinstance(node, Repeat):
        return node.min == 0 or _nonempty(node.item, live, memo)
    if isinstance(node, Automaton):
        seen, todo = {node.start}, [node.start]
        while todo:
            q = todo.pop()
            if q in node.finals:
                return True
            for label, r in node.edges[q]:
                if r not in seen and (isinstance(label, tuple) or _nonempty(label, live, memo)):
                    seen.add(r)
                    todo.append(r)
        return False
    return True  # anchors


def _rewrite(node, remap: dict, memo: dict):
    """``node`` with ``Terminal(j)`` renumbered to ``remap[j]`` (NEVER where None)."""

    def leaf(t):
        if isinstance(t, Event):
            return t
        j = remap[t.index]
        return NEVER if j is None else Terminal(j)

    return map_terminals(node, leaf, memo, seq=sf.seq, alt=sf.alt, rep=sf.rep)
