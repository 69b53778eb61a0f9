"""``uniqueItems: true``: arrays whose items are pairwise distinct under JSON equality.

Pairwise distinct items are not a regular language in general, but they are over a finite
set of item values (an ``enum``/``const`` of scalars, booleans, null, bounded integers):
each value is used at most once, so a counting automaton over the set of values used so
far is exact (any order; its length is the set's size, its position too). Past a budget
(`MAX_UNIQUE_SETS` states or `MAX_UNIQUE_STATES` byte-automaton states more than one copy
of each value) the values are accepted in one canonical order only, strictly increasing:
a sound subset in which every valid set of items keeps one spelling. Over an infinite
item language the sound subset is at most one item. Both subsets warn by name
(`SubsetWarning`), or raise with ``subsets="refuse"``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from automata_compile.automata import Alt, Automaton, Chars, Repeat, Seq
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._emitter import MAX_SCHEMA_ORDER_STATES, _Counting
from automata_compile.frontends.json_schema._type_algebra import _is_empty, _meet
from automata_compile.frontends.json_schema._types import _T, _Arr, _Num, _top

# Exact (any order) while the counting automaton has at most this many states (sets of
# values used) and its edges add at most this many byte-automaton states to one copy of
# each value; the same budgets as one any-order object (`_emitter.MAX_ORDER_SETS`).
MAX_UNIQUE_SETS = 4096
MAX_UNIQUE_STATES = 20_000
# An item language with more values than this is treated as infinite (at most one item).
MAX_VALUES = 4096
# The canonical order's automaton: at most this many (next value, count) states.
MAX_CANONICAL_STATES = 200_000


def unique_array(em, a: _Arr):
    """Array ``a`` with pairwise distinct items (a ``unique`` pointer and room for two
    items), or None where that is refused in lenient mode (then ``a`` without it); ``em``
    is the `_emitter._Emitter` (its value spellings, separators and warnings)."""
    ptr = a.unique
    k = len(a.prefix)
    reach = k + 1 if a.max is None else min(a.max, k + 1)
    kinds = [_top(a.at(j)) for j in range(reach)]
    per_kind = [item_values(t) for t in kinds]
    if any(v is None for v in per_kind):
        return _one_item(em, a, ptr)
    keys = sorted({key for vals in per_kind for key in vals}, key=_order)
    index = {key: i for i, key in enumerate(keys)}
    allowed = [frozenset(index[key] for key in vals) for vals in per_kind]
    labels = [em.value(_literal_type(key)) for key in keys]
    members = [
        (frozenset(i for i, key in enumerate(keys) if _in(key, c)), cmin, cmax, first)
        for c, cmin, cmax, first, _ in a.contains
    ]
    cap = len(keys) if a.max is None else min(a.max, len(keys))
    why = _exact_fits(em, labels, cap)
    if why is None:
        return em.wrap("[", _exact(em, a, labels, allowed, members), "]", a.min == 0)
    states = len(keys) * (max(k, a.min, 1) + 1 if a.max is None or a.max >= len(keys) else cap + 1)
    if states > MAX_CANONICAL_STATES:
        em.refuse(
            "uniqueItems",
            ptr,
            f"{len(keys):,} distinct item values, too many to count even in one fixed order",
        )
        return None
    em.subset(
        "uniqueItems",
        ptr,
        f"{len(keys):,} distinct item values are too many to accept in any order ({why}): "
        "items accepted in one fixed order only (null, false, true, numbers ascending, "
        "strings in code-point order), so every set of distinct items keeps one spelling",
    )
    return em.wrap("[", _canonical(em, a, labels, allowed, members), "]", a.min == 0)


def _one_item(em, a: _Arr, ptr: str):
    """Infinite item language: at most one item (refused where minItems asks for two)."""
    if a.min >= 2:
        em.refuse(
            "uniqueItems",
            ptr,
            f"the items' language is infinite, so distinct items are not a regular language, "
            f"and minItems {a.min} rules out the sound subset of at most one item",
        )
        return None
    em.subset(
        "uniqueItems",
        ptr,
        "the items' language is infinite, so distinct items are not a regular language: "
        "at most one item is accepted (maxItems 1)",
    )
    return em.array(a.replace(max=1, unique=None))


def _exact_fits(em, labels, cap: int) -> str | None:
    """None where any order fits its budget (then its states are charged), else why not:
    the sets of at most ``cap`` of the n values, and each value's label copied once per set
    without it that has room for one more; the states that adds count towards the schema's
    any-order total too (objects share it, `_emitter.MAX_SCHEMA_ORDER_STATES`)."""
    n = len(labels)
    if sum(math.comb(n, j) for j in range(cap + 1)) > MAX_UNIQUE_SETS:
        return f"more than {MAX_UNIQUE_SETS:,} sets of values"
    copies = sum(math.comb(n - 1, j) for j in range(cap))
    extra = (copies - 1) * sum(em.label_size(x) for x in labels)
    if extra > MAX_UNIQUE_STATES:
        return f"{MAX_UNIQUE_STATES:,} automaton states more than one copy of each value"
    if em.order_states + extra > MAX_SCHEMA_ORDER_STATES:
        return (
            f"the schema's arrays and objects in any order would add more than "
            f"{MAX_SCHEMA_ORDER_STATES:,} automaton states"
        )
    em.order_states += extra
    return None


def _exact(em, a: _Arr, labels, allowed, members):
    """Any order: a counting automaton over (values used, contains counts)."""
    k = len(a.prefix)
    g = _Counting((frozenset(), (0,) * len(members)))
    while g.todo:
        key = g.todo.pop()
        used, counts = key
        n = len(used)
        if n >= a.min and _counts_ok(members, counts):
            g.final(key)
        if a.max is not None and n >= a.max:
            continue
        sep = em.comma if n else sf.EPS
        for i in sorted(allowed[min(n, k)] - used):
            new = _count(members, counts, n, i)
            if new is not None:
                g.add(key, (used | {i}, new), sf.seq(sep, labels[i]))
    return g.automaton()


def _canonical(em, a: _Arr, labels, allowed, members):
    """One fixed order: states (next value allowed, items so far, contains counts); each
    value is written (then the next) or skipped, so the labels are copied once per count."""
    k, n = len(a.prefix), len(labels)
    bounded = a.max is not None and a.max < n
    cap = a.max if bounded else max(k, a.min, 1)
    g = _Counting((0, 0, (0,) * len(members)))
    while g.todo:
        key = g.todo.pop()
        i, c, counts = key
        if i == n:
            if c >= a.min and _counts_ok(members, counts):
                g.final(key)
            continue
        g.add(key, (i + 1, c, counts), sf.EPS)
        if bounded and c >= a.max or i not in allowed[min(c, k)]:
            continue
        new = _count(members, counts, c, i)
        if new is not None:
            nc = c + 1 if bounded else min(c + 1, cap)
            g.add(key, (i + 1, nc, new), sf.seq(em.comma if c else sf.EPS, labels[i]))
    return g.automaton()


def _count(members, counts, pos: int, i: int):
    """``counts`` after value ``i`` at position ``pos``; None past a maxContains."""
    out = []
    for (vals, _, cmax, first), n in zip(members, counts, strict=True):
        if pos >= first and i in vals:
            n += 1
            if cmax is not None and n > cmax:
                return None
        out.append(n)
    return tuple(out)


def _counts_ok(members, counts) -> bool:
    return all(cmin <= n for (_, cmin, _, _), n in zip(members, counts, strict=True))


# -- the values of a finite item language ------------------------------------------------------


def item_values(t: _T) -> set | None:
    """The values of ``t`` as keys (``("null",)``, ``("bool", b)``, ``("num", Decimal)``,
    ``("str", text)``; equal keys are equal JSON values, so 1 and 1.0 are one), or None where
    they are infinite or more than `MAX_VALUES` (arrays and objects count as infinite)."""
    if t.arrays or t.objects or t.calls:
        return None
    out: set = set()
    if t.null:
        out.add(("null",))
    out.update(("bool", b) for b in t.bools)
    for n in t.nums:
        vals = _num_values(n)
        if vals is None:
            return None
        out.update(("num", v) for v in vals)
    if not sf.is_never(t.string):
        words = _words(t.string, MAX_VALUES)
        if words is None:
            return None
        out.update(("str", w) for w in words)
    return out if len(out) <= MAX_VALUES else None


def _num_values(n: _Num):
    """The numbers of ``n``: its values, or the integers in its bounds; None if infinite."""
    if n.values is not None:
        return n.values
    if n.lo is None or n.hi is None or not n.integer:
        return None
    step = max(m for m in n.mults if m.denominator == 1)
    lo, hi = math.ceil(Fraction(n.lo) / step), math.floor(Fraction(n.hi) / step)
    if hi - lo + 1 > MAX_VALUES:
        return None
    vals = {Decimal(int(x * step)) for x in range(lo, hi + 1)}
    return _Num(values=vals, **{f: getattr(n, f) for f in _BOUNDS}).values


_BOUNDS = ("lo", "lo_excl", "hi", "hi_excl", "mults", "not_mults", "excluded")


def _words(node, limit: int):
    """The strings of a finite content language (an IR tree), or None where it is infinite,
    holds a terminal, or has more than ``limit`` strings."""
    if isinstance(node, Chars):
        count = sum(hi - lo + 1 for lo, hi in node.ranges)
        if count > limit:
            return None
        return {chr(c) for lo, hi in node.ranges for c in range(lo, hi + 1)}
    if isinstance(node, Seq):
        out = {""}
        for item in node.items:
            ws = _words(item, limit)
            if ws is None or len(out) * len(ws) > limit:
                return None
            out = {a + b for a in out for b in ws}
        return out
    if isinstance(node, Alt):
        out = set()
        for item in node.options:
            ws = _words(item, limit)
            if ws is None:
                return None
            out |= ws
            if len(out) > limit:
                return None
        return out
    if isinstance(node, Repeat):
        ws = _words(node.item, limit)
        if ws is None:
            return None
        if not ws:  # the item has no string: only zero repetitions
            return {""} if node.min == 0 else set()
        if ws == {""}:
            return ws
        if node.max is None:
            return None
        return _words(
            Alt(tuple(Seq((node.item,) * j) for j in range(node.min, node.max + 1))), limit
        )
    if isinstance(node, Automaton):
        return _automaton_words(node, limit)
    return None


def _automaton_words(a: Automaton, limit: int):
    """The strings of an automaton node; None on a cycle (even a dead one: sound, since a
    finite language is then only treated as infinite) or past ``limit``."""
    labels: dict = {}
    out: set = set()
    on_path: set = set()
    steps = [64 * limit]  # paths walked: a DAG may have many paths per string

    def walk(state: int, prefix: str) -> bool:
        steps[0] -= 1
        if state in on_path or steps[0] < 0:
            return False
        on_path.add(state)
        if state in a.finals:
            out.add(prefix)
        for label, target in a.edges[state]:
            if id(label) not in labels:
                node = Chars(label) if isinstance(label, tuple) else label
                labels[id(label)] = _words(node, limit)
            ws = labels[id(label)]
            if ws is None:
                return False
            for w in ws:
                if not walk(target, prefix + w) or len(out) > limit:
                    return False
        on_path.discard(state)
        return True

    return out if walk(a.start, "") else None


def _order(key) -> tuple:
    """The canonical order: null, false, true, numbers ascending, strings by code point."""
    rank = ("null", "bool", "num", "str").index(key[0])
    return (rank, *key[1:])


def _literal_type(key) -> _T:
    if key[0] == "null":
        return _T(null=True)
    if key[0] == "bool":
        return _T(bools={key[1]})
    if key[0] == "num":
        return _T(nums=(_Num(values=frozenset({key[1]})),))
    return _T(string=sf.lit(key[1]))


def _in(key, t) -> bool:
    """Whether the value ``key`` is in the typed language ``t``."""
    return not _is_empty(_meet(_literal_type(key), t))
