"""String languages for the JSON Schema compiler: regex trees, small automata, ECMA-262
patterns, JSON string encoding and `format` regexes.

Everything about the *content* of JSON strings lives here. A content language is a
regex tree (`Node`) over decoded code points; `encode_json_string` maps it to the
language of JSON string literals whose decoded value is in it (each character raw or
escaped). Boolean operations that regexes lack (intersection, complement: `allOf` of two
patterns, property names that are none of the declared ones, `not`) go through small
deterministic automata over a partition of the code points and come back as regex trees
by state elimination. `to_regex` prints a tree in Python `re` syntax using only what the
compiler accepts (classes, groups, alternation, counted repetition; no anchors, no `\\d`).

Node kinds: ``c`` (a set of code points, as sorted disjoint inclusive ranges), ``s``
(sequence), ``a`` (alternation), ``r`` (repetition ``lo..hi``, ``hi=None`` unbounded),
``^``/``$`` (ECMA anchors; only inside translated patterns, removed by `search_language`).
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata

MAX_CP = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_BOL, _EOL = 0x110000, 0x110001  # virtual anchor symbols (outside Unicode)


class TooComplexError(Exception):
    """An automaton or regex grew past its budget (callers turn it into a schema error)."""


class PatternError(Exception):
    """An ECMA-262 pattern is malformed (``unsupported=False``) or uses a construct that
    has no regular equivalent (``unsupported=True``)."""

    def __init__(self, message: str, *, unsupported: bool):
        self.unsupported = unsupported
        super().__init__(message)


# ------------------------------------------------------------------------------------------
# code point sets: tuples of sorted, disjoint, non-adjacent (lo, hi) ranges
# ------------------------------------------------------------------------------------------


def cs_norm(ranges) -> tuple:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def cs_union(*sets) -> tuple:
    return cs_norm([r for s in sets for r in s])


def cs_complement(s, universe=((0, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, MAX_CP))) -> tuple:
    out = []
    for ulo, uhi in universe:
        cur = ulo
        for lo, hi in s:
            if hi < cur or lo > uhi:
                continue
            if lo > cur:
                out.append((cur, lo - 1))
            cur = max(cur, hi + 1)
        if cur <= uhi:
            out.append((cur, uhi))
    return cs_norm(out)


def cs_inter(a, b) -> tuple:
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def cs_diff(a, b) -> tuple:
    return cs_inter(a, cs_complement(b, universe=((0, _EOL),)))


def cs_contains(s, cp: int) -> bool:
    i = bisect.bisect_right(s, (cp, _EOL + 1)) - 1
    return i >= 0 and s[i][0] <= cp <= s[i][1]


ALL_CHARS = cs_complement(())


# ------------------------------------------------------------------------------------------
# regex trees
# ------------------------------------------------------------------------------------------


class Node:
    """An immutable regex tree node with a cached structural hash."""

    __slots__ = ("kind", "kids", "ranges", "lo", "hi", "_hash", "_text")

    def __init__(self, kind, kids=(), ranges=(), lo=0, hi=0):
        self.kind = kind
        self.kids = kids
        self.ranges = ranges
        self.lo = lo
        self.hi = hi
        self._hash = hash((kind, kids, ranges, lo, hi))
        self._text = None

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        if not isinstance(other, Node) or self._hash != other._hash:
            return False
        return (self.kind, self.kids, self.ranges, self.lo, self.hi) == (
            other.kind,
            other.kids,
            other.ranges,
            other.lo,
            other.hi,
        )

    def __repr__(self):
        return f"Node({to_regex(self)!r})"


EPS = Node("s")
NEVER = Node("a")
BOL_NODE = Node("^")
EOL_NODE = Node("$")


def chars(ranges) -> Node:
    ranges = cs_norm(ranges)
    return Node("c", ranges=ranges) if ranges else NEVER


def char(c: str | int) -> Node:
    cp = ord(c) if isinstance(c, str) else c
    return Node("c", ranges=((cp, cp),))


def lit(text: str) -> Node:
    return seq(*(char(ch) for ch in text))


ANY_CHAR = chars(ALL_CHARS)


def seq(*items: Node) -> Node:
    out: list[Node] = []
    for item in items:
        if item is NEVER or (item.kind == "a" and not item.kids):
            return NEVER
        if item.kind == "s":
            out.extend(item.kids)
        else:
            out.append(item)
    # x x* -> x+ (also for x{n,} forms)
    merged: list[Node] = []
    for item in out:
        if merged and item.kind == "r" and item.hi is None and item.kids[0] == merged[-1]:
            merged[-1] = rep(item.kids[0], item.lo + 1, None)
        elif (
            merged
            and merged[-1].kind == "r"
            and merged[-1].hi is None
            and merged[-1].kids[0] == item
        ):
            merged[-1] = rep(item, merged[-1].lo + 1, None)
        else:
            merged.append(item)
    out = merged
    if len(out) == 1:
        return out[0]
    return Node("s", kids=tuple(out))


def alt(*items: Node) -> Node:
    flat: list[Node] = []
    seen: set[Node] = set()
    ranges: list = []
    first_chars = -1
    nullable_eps = False
    for item in items:
        for sub in item.kids if item.kind == "a" else (item,):
            if sub.kind == "c":
                if first_chars < 0:
                    first_chars = len(flat)
                    flat.append(sub)
                ranges.extend(sub.ranges)
            elif sub == EPS:
                nullable_eps = True
            elif sub not in seen:
                seen.add(sub)
                flat.append(sub)
    if first_chars >= 0:
        flat[first_chars] = chars(ranges)
    flat = _factor(flat)
    if nullable_eps:
        if not flat:
            return EPS
        if not any(nullable(x) for x in flat):
            inner = flat[0] if len(flat) == 1 else Node("a", kids=tuple(flat))
            return rep(inner, 0, 1)
    if not flat:
        return NEVER
    if len(flat) == 1:
        return flat[0]
    return Node("a", kids=tuple(flat))


def _head(node: Node) -> Node:
    return node.kids[0] if node.kind == "s" else node


def _tail(node: Node) -> Node:
    return seq(*node.kids[1:]) if node.kind == "s" else EPS


def _factor(items: list[Node]) -> list[Node]:
    """Left-factor alternatives that share a first element (turns literal sets into tries)."""
    if len(items) < 2:
        return items
    groups: dict[Node, list[Node]] = {}
    for item in items:
        groups.setdefault(_head(item), []).append(item)
    if len(groups) == len(items):
        return items
    out = []
    for head, members in groups.items():
        if len(members) == 1:
            out.append(members[0])
        else:
            out.append(seq(head, alt(*(_tail(m) for m in members))))
    return out


def rep(item: Node, lo: int, hi: int | None) -> Node:
    if hi is not None and hi < lo:
        return NEVER
    if item is NEVER or (item.kind == "a" and not item.kids):
        return EPS if lo == 0 else NEVER
    if item == EPS or hi == 0:
        return EPS
    if lo == 1 and hi == 1:
        return item
    if item.kind == "r":
        # (x{a,b}){c,d} simplifications that keep the language
        if item.lo == 0 and item.hi is None:
            return item  # (x*){lo,hi} == x* for hi >= 1
        if item.lo in (0, 1) and item.hi == 1 and hi is None:
            return Node(
                "r", kids=(item.kids[0],), lo=0 if (item.lo == 0 or lo == 0) else 1, hi=None
            )
    return Node("r", kids=(item,), lo=lo, hi=hi)


def opt(item: Node) -> Node:
    return rep(item, 0, 1)


def star(item: Node) -> Node:
    return rep(item, 0, None)


@functools.lru_cache(maxsize=65536)
def nullable(node: Node) -> bool:
    k = node.kind
    if k == "c":
        return False
    if k == "s":
        return all(nullable(x) for x in node.kids)
    if k == "a":
        return any(nullable(x) for x in node.kids)
    if k == "r":
        return node.lo == 0 or nullable(node.kids[0])
    return True  # anchors match the empty string


def has_anchor(node: Node) -> bool:
    if node.kind in "^$":
        return True
    return any(has_anchor(k) for k in node.kids)


def is_never(node: Node) -> bool:
    return node.kind == "a" and not node.kids


# -- printing (Python `re` syntax) ---------------------------------------------------------

_SPECIAL = set(".^$*+?{}[]\\|()")
_CLASS_SPECIAL = set("\\]^-[")


def _esc(cp: int, in_class: bool) -> str:
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    ch = chr(cp)
    if cp > 0x7F and not ch.isprintable():
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
    if ch in (_CLASS_SPECIAL if in_class else _SPECIAL) or ch in " #&~" and in_class:
        return "\\" + ch
    return ch


def _class_body(ranges) -> str:
    out = []
    for lo, hi in ranges:
        if lo == hi:
            out.append(_esc(lo, True))
        elif hi == lo + 1:
            out.append(_esc(lo, True) + _esc(hi, True))
        else:
            out.append(_esc(lo, True) + "-" + _esc(hi, True))
    return "".join(out)


def _chars_text(ranges) -> str:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _esc(ranges[0][0], False)
    if ranges == ((0x30, 0x39),):
        return "[0-9]"
    # surrogates never occur in text (the compiler works on UTF-8), so they may be counted
    # in or out of a class, whichever prints shorter
    with_surrogates = cs_union(ranges, (_SURROGATES,))
    if with_surrogates == ((0, MAX_CP),):
        return "[\\x00-\\U0010ffff]"
    neg = cs_complement(with_surrogates, universe=((0, MAX_CP),))
    pos = _class_body(ranges)
    neg_text = _class_body(neg)
    if len(neg_text) + 1 < len(pos):
        return "[^" + neg_text + "]"
    return "[" + pos + "]"


def to_regex(node: Node) -> str:
    """Prints a tree as a Python `re` pattern (meant for `re.fullmatch`)."""
    if node._text is not None:
        return node._text
    k = node.kind
    if k == "c":
        text = _chars_text(node.ranges)
    elif k == "s":
        text = "".join(
            "(?:" + to_regex(x) + ")" if x.kind == "a" else to_regex(x) for x in node.kids
        )
    elif k == "a":
        text = "|".join(to_regex(x) for x in node.kids) if node.kids else "[^\\x00-\\U0010ffff]"
    elif k == "r":
        inner = node.kids[0]
        body = to_regex(inner)
        if not (inner.kind == "c" or (body.startswith("(?:") and _balanced_group(body))):
            body = "(?:" + body + ")"
        lo, hi = node.lo, node.hi
        if (lo, hi) == (0, 1):
            q = "?"
        elif (lo, hi) == (0, None):
            q = "*"
        elif (lo, hi) == (1, None):
            q = "+"
        elif hi is None:
            q = f"{{{lo},}}"
        elif lo == hi:
            q = f"{{{lo}}}"
        else:
            q = f"{{{lo},{hi}}}"
        text = body + q
    elif k == "^":
        raise ValueError("anchors cannot be printed; use search_language first")
    else:
        raise ValueError("anchors cannot be printed; use search_language first")
    node._text = text
    return text


def _balanced_group(text: str) -> bool:
    """Whether ``text`` is exactly one ``(?:...)`` group."""
    depth = 0
    i = 0
    in_class = False
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if text[i + 1 : i + 2] == "^":
                i += 1
            if text[i + 1 : i + 2] == "]":
                i += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and i != len(text) - 1:
                return False
        i += 1
    return True


def size(node: Node) -> int:
    return len(to_regex(node))


@functools.lru_cache(maxsize=4096)
def _compiled(node: Node):
    return re.compile(to_regex(node), re.DOTALL)


def content_matches(node: Node, text: str) -> bool:
    """Whether the decoded string ``text`` is in the content language ``node``."""
    if is_never(node):
        return False
    return _compiled(node).fullmatch(text) is not None


# ------------------------------------------------------------------------------------------
# automata over a partition of the code points
# ------------------------------------------------------------------------------------------

_MAX_NFA = 60000
_MAX_DFA = 4000
_MAX_ELIM_TEXT = 200000


def _collect_sets(node: Node, acc: set):
    if node.kind == "c":
        acc.add(node.ranges)
    for k in node.kids:
        _collect_sets(k, acc)


class _Partition:
    """Splits the code points into atoms: maximal sets that no char set of the inputs splits."""

    def __init__(self, sets, universe):
        bounds = {u[0] for u in universe} | {u[1] + 1 for u in universe}
        for s in sets:
            for lo, hi in s:
                bounds.add(lo)
                bounds.add(hi + 1)
        points = sorted(bounds)
        self.sets = list(sets)
        by_sig: dict[tuple, list] = {}
        for lo, nxt in zip(points, points[1:], strict=False):
            hi = nxt - 1
            if not any(ulo <= lo and hi <= uhi for ulo, uhi in universe):
                continue
            sig = tuple(i for i, s in enumerate(self.sets) if cs_contains(s, lo))
            by_sig.setdefault(sig, []).append((lo, hi))
        self.atoms = [cs_norm(r) for r in by_sig.values()]
        self.members: dict[tuple, frozenset] = {s: frozenset() for s in self.sets}
        for a, sig in enumerate(by_sig):
            for i in sig:
                s = self.sets[i]
                self.members[s] = self.members[s] | {a}

    def atoms_of(self, ranges) -> frozenset:
        return self.members[ranges]


class _NFA:
    def __init__(self):
        self.eps: list[list[int]] = []
        self.moves: list[list[tuple[frozenset, int]]] = []

    def new(self) -> int:
        self.eps.append([])
        self.moves.append([])
        if len(self.eps) > _MAX_NFA:
            raise TooComplexError("automaton too large")
        return len(self.eps) - 1

    def build(self, node: Node, part: _Partition, start: int) -> int:
        """Adds ``node`` from ``start``; returns its end state."""
        k = node.kind
        if k == "c":
            end = self.new()
            self.moves[start].append((part.atoms_of(node.ranges), end))
            return end
        if k == "s":
            cur = start
            for x in node.kids:
                cur = self.build(x, part, cur)
            return cur
        if k == "a":
            end = self.new()
            for x in node.kids:
                s = self.new()
                self.eps[start].append(s)
                self.eps[self.build(x, part, s)].append(end)
            return end
        if k == "r":
            inner, lo, hi = node.kids[0], node.lo, node.hi
            cur = start
            for _ in range(lo):
                cur = self.build(inner, part, cur)
            if hi is None:
                loop = self.new()
                self.eps[cur].append(loop)
                self.eps[self.build(inner, part, loop)].append(loop)
                return loop
            end = self.new()
            for _ in range(hi - lo):
                self.eps[cur].append(end)
                cur = self.build(inner, part, cur)
            self.eps[cur].append(end)
            return end
        raise ValueError(f"unexpected node kind {k!r}")


class DFA:
    """A partial DFA over atom indices: ``trans[q][atom] -> q'``; missing means dead."""

    def __init__(self, part: _Partition, trans, accept, start=0):
        self.part = part
        self.trans: list[dict[int, int]] = trans
        self.accept: list[bool] = accept
        self.start = start

    @property
    def natoms(self) -> int:
        return len(self.part.atoms)

    @classmethod
    def from_nodes(cls, part: _Partition, node: Node) -> DFA:
        nfa = _NFA()
        s = nfa.new()
        f = nfa.build(node, part, s)

        def closure(states):
            stack = list(states)
            seen = set(states)
            while stack:
                q = stack.pop()
                for r in nfa.eps[q]:
                    if r not in seen:
                        seen.add(r)
                        stack.append(r)
            return frozenset(seen)

        start = closure([s])
        index = {start: 0}
        order = [start]
        trans: list[dict[int, int]] = []
        accept: list[bool] = []
        i = 0
        while i < len(order):
            cur = order[i]
            i += 1
            accept.append(f in cur)
            moves: dict[int, set] = {}
            for q in cur:
                for atoms, r in nfa.moves[q]:
                    for a in atoms:
                        moves.setdefault(a, set()).add(r)
            row = {}
            for a, targets in moves.items():
                tgt = closure(targets)
                j = index.get(tgt)
                if j is None:
                    j = index[tgt] = len(order)
                    order.append(tgt)
                    if len(order) > _MAX_DFA:
                        raise TooComplexError("automaton too large")
                row[a] = j
            trans.append(row)
        return cls(part, trans, accept)

    def complete(self) -> DFA:
        n = len(self.trans)
        trans = [dict(r) for r in self.trans] + [{}]
        for row in trans:
            for a in range(self.natoms):
                row.setdefault(a, n)
        return DFA(self.part, trans, self.accept + [False], self.start)

    def complement(self) -> DFA:
        d = self.complete()
        return DFA(d.part, d.trans, [not x for x in d.accept], d.start)

    def product(self, other: DFA, op) -> DFA:
        a, b = self.complete(), other.complete()
        index = {(a.start, b.start): 0}
        order = [(a.start, b.start)]
        trans, accept = [], []
        i = 0
        while i < len(order):
            p, q = order[i]
            i += 1
            accept.append(op(a.accept[p], b.accept[q]))
            row = {}
            for atom in range(self.natoms):
                pair = (a.trans[p][atom], b.trans[q][atom])
                j = index.get(pair)
                if j is None:
                    j = index[pair] = len(order)
                    order.append(pair)
                    if len(order) > _MAX_DFA:
                        raise TooComplexError("automaton too large")
                row[atom] = j
            trans.append(row)
        return DFA(self.part, trans, accept).trim()

    def live(self) -> set:
        """States reachable from the start that can reach acceptance."""
        reach = {self.start}
        stack = [self.start]
        while stack:
            q = stack.pop()
            for r in self.trans[q].values():
                if r not in reach:
                    reach.add(r)
                    stack.append(r)
        rev: dict[int, set] = {}
        for q in reach:
            for r in self.trans[q].values():
                rev.setdefault(r, set()).add(q)
        good = {q for q in reach if self.accept[q]}
        stack = list(good)
        while stack:
            q = stack.pop()
            for p in rev.get(q, ()):
                if p not in good:
                    good.add(p)
                    stack.append(p)
        return good

    def is_empty(self) -> bool:
        return not self.live()

    def trim(self) -> DFA:
        good = self.live()
        if not good:
            return DFA(self.part, [{}], [False], 0)
        keep = sorted(good, key=lambda q: (q != self.start, q))
        renum = {q: i for i, q in enumerate(keep)}
        trans = [{a: renum[r] for a, r in self.trans[q].items() if r in renum} for q in keep]
        return DFA(self.part, trans, [self.accept[q] for q in keep], 0)

    def minimize(self) -> DFA:
        d = self.trim()
        n = len(d.trans)
        block = [1 if acc else 0 for acc in d.accept]
        nblocks = len(set(block))
        while True:
            sigs = {}
            new = []
            for q in range(n):
                sig = (block[q], tuple(sorted((a, block[r]) for a, r in d.trans[q].items())))
                new.append(sigs.setdefault(sig, len(sigs)))
            if len(sigs) == nblocks:
                break
            block, nblocks = new, len(sigs)
        reps: dict[int, int] = {}
        for q in range(n):
            reps.setdefault(block[q], q)
        order = sorted(reps, key=lambda b: (b != block[d.start], reps[b]))
        renum = {b: i for i, b in enumerate(order)}
        trans = [{a: renum[block[r]] for a, r in d.trans[reps[b]].items()} for b in order]
        accept = [d.accept[reps[b]] for b in order]
        return DFA(d.part, trans, accept, 0)

    def to_node(self) -> Node:
        """State elimination: the regex tree of the DFA's language."""
        d = self.minimize()
        if d.is_empty():
            return NEVER
        n = len(d.trans)
        init, final = n, n + 1
        edges: dict[int, dict[int, Node]] = {q: {} for q in range(n + 2)}
        redges: dict[int, set] = {q: set() for q in range(n + 2)}

        def add(p, q, node):
            if is_never(node):
                return
            old = edges[p].get(q)
            edges[p][q] = node if old is None else alt(old, node)
            redges[q].add(p)

        for q, row in enumerate(d.trans):
            by_target: dict[int, list] = {}
            for a, r in row.items():
                by_target.setdefault(r, []).extend(d.part.atoms[a])
            for r, ranges in by_target.items():
                add(q, r, chars(ranges))
        add(init, d.start, EPS)
        for q in range(n):
            if d.accept[q]:
                add(q, final, EPS)
        remaining = set(range(n))
        while remaining:
            k = min(
                remaining,
                key=lambda s: (
                    (len(redges[s] - {s}) * len(set(edges[s]) - {s})),
                    sum(size(x) for x in edges[s].values()),
                ),
            )
            remaining.discard(k)
            loop = edges[k].pop(k, None)
            redges[k].discard(k)
            mid = star(loop) if loop is not None else EPS
            ins = [(p, edges[p].pop(k)) for p in redges[k]]
            outs = list(edges[k].items())
            for q, _ in outs:
                redges[q].discard(k)
            edges[k] = {}
            redges[k] = set()
            for p, pin in ins:
                for q, qout in outs:
                    add(p, q, seq(pin, mid, qout))
            if sum(size(x) for p in edges for x in edges[p].values()) > _MAX_ELIM_TEXT:
                raise TooComplexError("regular expression too large")
        return edges[init].get(final, NEVER)


def _universe(with_anchors: bool):
    u = ((0, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, MAX_CP))
    return u + ((_BOL, _EOL),) if with_anchors else u


def _dfas(*nodes: Node, anchors: bool = False) -> list[DFA]:
    sets: set = set()
    for n in nodes:
        _collect_sets(n, sets)
    part = _Partition(sorted(sets), _universe(anchors))
    return [DFA.from_nodes(part, n) for n in nodes]


def intersect(*nodes: Node) -> Node:
    """The intersection of content languages, as a regex tree."""
    nodes = tuple(n for n in nodes if n != _ANY_STRING)
    if not nodes:
        return _ANY_STRING
    if any(is_never(n) for n in nodes):
        return NEVER
    if len(nodes) == 1:
        return nodes[0]
    return _intersect_cached(nodes)


@functools.lru_cache(maxsize=1024)
def _intersect_cached(nodes):
    dfas = _dfas(*nodes)
    acc = dfas[0]
    for d in dfas[1:]:
        acc = acc.product(d, lambda x, y: x and y)
    return acc.to_node()


@functools.lru_cache(maxsize=1024)
def complement(node: Node) -> Node:
    """All strings not in the content language."""
    if is_never(node):
        return _ANY_STRING
    if node == _ANY_STRING:
        return NEVER
    (d,) = _dfas(node)
    return d.complement().to_node()


def difference(a: Node, b: Node) -> Node:
    if is_never(b) or is_never(a):
        return a
    if b == _ANY_STRING:
        return NEVER
    return _difference_cached(a, b)


@functools.lru_cache(maxsize=1024)
def _difference_cached(a, b):
    da, db = _dfas(a, b)
    return da.product(db, lambda x, y: x and not y).to_node()


@functools.lru_cache(maxsize=4096)
def is_empty(node: Node) -> bool:
    if is_never(node):
        return True
    if not has_anchor(node) and _trivially_nonempty(node):
        return False
    (d,) = _dfas(node)
    return d.is_empty()


def _trivially_nonempty(node: Node) -> bool:
    k = node.kind
    if k == "c":
        return bool(node.ranges)
    if k == "s":
        return all(_trivially_nonempty(x) for x in node.kids)
    if k == "a":
        return any(_trivially_nonempty(x) for x in node.kids)
    if k == "r":
        return node.lo == 0 or _trivially_nonempty(node.kids[0])
    return False


def disjoint(a: Node, b: Node) -> bool:
    if is_never(a) or is_never(b):
        return True
    da, db = _dfas(a, b)
    return da.product(db, lambda x, y: x and y).is_empty()


_ANY_STRING = star(ANY_CHAR)
ANY_STRING = _ANY_STRING


def search_language(node: Node) -> Node:
    """The strings that contain a match of an ECMA pattern tree (which may hold anchors)."""
    if not has_anchor(node):
        return seq(_ANY_STRING, node, _ANY_STRING)
    branches = node.kids if node.kind == "a" else (node,)
    fast = []
    for b in branches:
        items = list(b.kids) if b.kind == "s" else [b]
        lead = bool(items) and items[0] == BOL_NODE
        trail = bool(items) and items[-1] == EOL_NODE
        core = items[int(lead) : len(items) - int(trail)] if items else []
        if any(has_anchor(x) for x in core):
            fast = None
            break
        fast.append(seq(EPS if lead else _ANY_STRING, *core, EPS if trail else _ANY_STRING))
    if fast is not None:
        return alt(*fast)
    return _anchored_search(node)


@functools.lru_cache(maxsize=256)
def _anchored_search(node: Node) -> Node:
    """General anchors: build ``U* P U*`` with virtual begin/end symbols and take the
    strings ``s`` with ``BOL s EOL`` in it."""
    bol, eol = chars([(_BOL, _BOL)]), chars([(_EOL, _EOL)])
    universe_star = star(
        chars([(0, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, MAX_CP), (_BOL, _EOL)])
    )

    def sub(n: Node) -> Node:
        if n.kind == "^":
            return bol
        if n.kind == "$":
            return eol
        if n.kind == "s":
            return seq(*(sub(k) for k in n.kids))
        if n.kind == "a":
            return alt(*(sub(k) for k in n.kids))
        if n.kind == "r":
            return rep(sub(n.kids[0]), n.lo, n.hi)
        return n

    (d,) = _dfas(seq(universe_star, sub(node), universe_star), anchors=True)
    d = d.complete()
    part = d.part
    bol_atom = next(iter(part.atoms_of(((_BOL, _BOL),))))
    eol_atom = next(iter(part.atoms_of(((_EOL, _EOL),))))
    marker_atoms = {bol_atom, eol_atom}
    start = d.trans[d.start][bol_atom]
    accept = [d.accept[d.trans[q][eol_atom]] for q in range(len(d.trans))]
    trans = [{a: r for a, r in row.items() if a not in marker_atoms} for row in d.trans]
    return DFA(part, trans, accept, start).to_node()


# ------------------------------------------------------------------------------------------
# ECMA-262 patterns (Unicode mode semantics) -> content regex trees
# ------------------------------------------------------------------------------------------

_DIGIT = ((0x30, 0x39),)
_WORD = cs_norm([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
_SPACE = cs_norm(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
_LINE_TERMINATORS = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_DOT = cs_complement(_LINE_TERMINATORS)

_GC_ALIASES = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "Letter": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"),
    "Cased_Letter": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"),
    "Mark": ("Mn", "Mc", "Me"),
    "Combining_Mark": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"),
    "Number": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "Punctuation": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "punct": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"),
    "Symbol": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"),
    "Separator": ("Zs", "Zl", "Zp"),
    "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
    "Other": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_GC_LONG = {
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po",
    "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Other_Symbol": "So",
    "Space_Separator": "Zs",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Surrogate": "Cs",
    "Private_Use": "Co",
    "Unassigned": "Cn",
}


@functools.lru_cache(maxsize=1)
def _categories() -> dict[str, tuple]:
    acc: dict[str, list] = {}
    cur_cat, cur_lo = None, 0
    for cp in range(MAX_CP + 2):
        cat = unicodedata.category(chr(cp)) if cp <= MAX_CP else None
        if cat != cur_cat:
            if cur_cat is not None:
                acc.setdefault(cur_cat, []).append((cur_lo, cp - 1))
            cur_cat, cur_lo = cat, cp
    return {k: cs_norm(v) for k, v in acc.items()}


def _property_set(name: str) -> tuple:
    value = name
    if "=" in name:
        prop, value = name.split("=", 1)
        if prop not in ("General_Category", "gc"):
            raise PatternError(
                f"Unicode property {name!r} is not supported (only General_Category values)",
                unsupported=True,
            )
    if value == "Any":
        return ((0, MAX_CP),)
    if value == "ASCII":
        return ((0, 0x7F),)
    if value == "Assigned":
        return cs_complement(_categories()["Cn"], universe=((0, MAX_CP),))
    cats = _GC_ALIASES.get(value)
    if cats is None:
        short = _GC_LONG.get(value, value)
        if short not in _categories() and short not in ("Cs", "Co", "Cn", "Zl", "Zp"):
            raise PatternError(
                f"Unicode property {name!r} is not supported (only General_Category values)",
                unsupported=True,
            )
        cats = (short,)
    return cs_union(*(_categories().get(c, ()) for c in cats))


class _EcmaParser:
    """Recursive-descent parser for ECMA-262 regular expressions (``u`` flag semantics,
    with the Annex B leniencies for lone ``{``, ``}`` and ``]``)."""

    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.ngroups = pattern.count("(")

    def error(self, msg: str, unsupported: bool = False):
        raise PatternError(f"{msg} at offset {self.i}", unsupported=unsupported)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self) -> Node:
        node = self.disjunction()
        if self.i < len(self.p):
            self.error(f"unbalanced {self.peek()!r}")
        return node

    def disjunction(self) -> Node:
        branches = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.alternative())
        return alt(*branches) if len(branches) > 1 else branches[0]

    def alternative(self) -> Node:
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            items.append(self.term())
        return seq(*items)

    def term(self) -> Node:
        ch = self.peek()
        if ch == "^":
            self.i += 1
            return self._no_quantifier(BOL_NODE)
        if ch == "$":
            self.i += 1
            return self._no_quantifier(EOL_NODE)
        if ch == "\\" and self.peek(1) in ("b", "B"):
            self.error("word boundary assertions (\\b, \\B) are not supported", unsupported=True)
        if ch == "(" and self.p.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.i):
            self.error("lookaround assertions are not supported", unsupported=True)
        atom = self.atom()
        return self.quantifier(atom)

    def _no_quantifier(self, node: Node) -> Node:
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._brace_quantifier(False)):
            self.error("a quantified assertion is not supported", unsupported=True)
        return node

    def _brace_quantifier(self, consume: bool):
        m = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.p, self.i)
        if not m:
            return None
        if consume:
            self.i = m.end()
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        return lo, hi

    def quantifier(self, atom: Node) -> Node:
        ch = self.peek()
        if ch == "*":
            lo, hi = 0, None
            self.i += 1
        elif ch == "+":
            lo, hi = 1, None
            self.i += 1
        elif ch == "?":
            lo, hi = 0, 1
            self.i += 1
        elif ch == "{":
            q = self._brace_quantifier(True)
            if q is None:
                return atom
            lo, hi = q
            if hi is not None and hi < lo:
                self.error("numbers out of order in {} quantifier")
        else:
            return atom
        if self.peek() == "?":  # lazy: same language
            self.i += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._brace_quantifier(False)):
            self.error("nothing to repeat")
        if lo > 1000 or (hi is not None and hi > 1000):
            self.error("a repetition count above 1000 is not supported", unsupported=True)
        return rep(atom, lo, hi)

    def atom(self) -> Node:
        ch = self.peek()
        if ch == "(":
            self.i += 1
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?<", self.i):
                end = self.p.find(">", self.i)
                if end < 0:
                    self.error("unterminated group name")
                self.i = end + 1
            elif self.peek() == "?":
                self.error("unknown group syntax")
            node = self.disjunction()
            if self.peek() != ")":
                self.error("missing )")
            self.i += 1
            return node
        if ch == ")":
            self.error("unbalanced )")
        if ch == "[":
            return chars(self.char_class())
        if ch == ".":
            self.i += 1
            return chars(_DOT)
        if ch == "\\":
            self.i += 1
            s = self.atom_escape(in_class=False)
            return chars(s)
        if ch in "*+?":
            self.error("nothing to repeat")
        if ch == "{" and self._brace_quantifier(False):
            self.error("nothing to repeat")
        self.i += 1
        return char(ch)

    def atom_escape(self, in_class: bool) -> tuple:
        ch = self.peek()
        if not ch:
            self.error("trailing backslash")
        self.i += 1
        simple = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}
        if ch in simple:
            return ((simple[ch], simple[ch]),)
        if ch == "d":
            return _DIGIT
        if ch == "D":
            return cs_complement(_DIGIT)
        if ch == "w":
            return _WORD
        if ch == "W":
            return cs_complement(_WORD)
        if ch == "s":
            return _SPACE
        if ch == "S":
            return cs_complement(_SPACE)
        if ch == "b" and in_class:
            return ((8, 8),)
        if ch == "-" and in_class:
            return ((0x2D, 0x2D),)
        if ch == "c":
            letter = self.peek()
            if letter.isascii() and letter.isalpha():
                self.i += 1
                cp = ord(letter) % 32
                return ((cp, cp),)
            self.error("invalid \\c escape")
        if ch == "0" and not self.peek().isdigit():
            return ((0, 0),)
        if ch.isdigit():
            self.error("backreferences are not supported", unsupported=True)
        if ch == "k":
            self.error("named backreferences are not supported", unsupported=True)
        if ch == "x":
            h = self.p[self.i : self.i + 2]
            if len(h) == 2 and all(c in "0123456789abcdefABCDEF" for c in h):
                self.i += 2
                cp = int(h, 16)
                return ((cp, cp),)
            self.error("invalid \\x escape")
        if ch == "u":
            cp = self._unicode_escape()
            return ((cp, cp),)
        if ch in ("p", "P"):
            if self.peek() != "{":
                self.error("invalid property escape")
            end = self.p.find("}", self.i)
            if end < 0:
                self.error("invalid property escape")
            name = self.p[self.i + 1 : end]
            self.i = end + 1
            s = _property_set(name)
            return s if ch == "p" else cs_complement(s)
        if ch in "^$\\.*+?()[]{}|/":
            return ((ord(ch), ord(ch)),)
        self.error(f"invalid escape \\{ch}")
        raise AssertionError

    def _unicode_escape(self) -> int:
        if self.peek() == "{":
            end = self.p.find("}", self.i)
            h = self.p[self.i + 1 : end] if end > 0 else ""
            if not h or not all(c in "0123456789abcdefABCDEF" for c in h) or int(h, 16) > MAX_CP:
                self.error("invalid \\u{...} escape")
            self.i = end + 1
            return int(h, 16)
        h = self.p[self.i : self.i + 4]
        if len(h) != 4 or not all(c in "0123456789abcdefABCDEF" for c in h):
            self.error("invalid \\u escape")
        self.i += 4
        cp = int(h, 16)
        if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
            h2 = self.p[self.i + 2 : self.i + 6]
            if len(h2) == 4 and all(c in "0123456789abcdefABCDEF" for c in h2):
                low = int(h2, 16)
                if 0xDC00 <= low <= 0xDFFF:
                    self.i += 6
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
        if 0xD800 <= cp <= 0xDFFF:
            self.error("a lone surrogate escape is not supported", unsupported=True)
        return cp

    def char_class(self) -> tuple:
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list = []
        while True:
            ch = self.peek()
            if not ch:
                self.error("unterminated character class")
            if ch == "]":
                self.i += 1
                break
            lo_set = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi_set = self.class_atom()
                if (
                    len(lo_set) != 1
                    or len(hi_set) != 1
                    or lo_set[0][0] != lo_set[0][1]
                    or hi_set[0][0] != hi_set[0][1]
                ):
                    # Annex B: a class escape in a range makes '-' literal
                    ranges.extend(lo_set)
                    ranges.append((0x2D, 0x2D))
                    ranges.extend(hi_set)
                    continue
                lo, hi = lo_set[0][0], hi_set[0][0]
                if lo > hi:
                    self.error("range out of order in character class")
                ranges.append((lo, hi))
            else:
                ranges.extend(lo_set)
        s = cs_norm(ranges)
        return cs_complement(s) if negate else cs_diff(s, (_SURROGATES,))

    def class_atom(self) -> tuple:
        ch = self.peek()
        if ch == "\\":
            self.i += 1
            return self.atom_escape(in_class=True)
        self.i += 1
        return ((ord(ch), ord(ch)),)


@functools.lru_cache(maxsize=1024)
def parse_ecma(pattern: str) -> Node:
    """Parses an ECMA-262 pattern into a tree that may contain ``^``/``$`` anchor nodes."""
    return _EcmaParser(pattern).parse()


@functools.lru_cache(maxsize=1024)
def pattern_language(pattern: str) -> Node:
    """The decoded strings that a JSON Schema ``pattern`` accepts (unanchored search)."""
    return search_language(parse_ecma(pattern))


# ------------------------------------------------------------------------------------------
# JSON string encoding
# ------------------------------------------------------------------------------------------

_HEX_LO = "0123456789abcdef"
_SHORT = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}


def _hex_digit_set(values) -> Node:
    ranges = []
    for v in values:
        ranges.append((ord(_HEX_LO[v]), ord(_HEX_LO[v])))
        if v >= 10:
            ranges.append((ord(_HEX_LO[v].upper()), ord(_HEX_LO[v].upper())))
    return chars(ranges)


@functools.lru_cache(maxsize=8192)
def _hex_fixed(ranges: tuple, width: int) -> Node:
    """Hex strings of exactly ``width`` digits (any letter case) whose value is in ``ranges``."""
    if not ranges:
        return NEVER
    full = 16**width - 1
    if ranges == ((0, full),):
        return rep(_hex_digit_set(range(16)), width, width)
    if width == 1:
        return _hex_digit_set([v for lo, hi in ranges for v in range(lo, hi + 1)])
    step = 16 ** (width - 1)
    by_sub: dict[tuple, list[int]] = {}
    for d in range(16):
        base = d * step
        sub = cs_inter(ranges, ((base, base + step - 1),))
        if sub:
            sub = tuple((lo - base, hi - base) for lo, hi in sub)
            by_sub.setdefault(sub, []).append(d)
    return alt(*(seq(_hex_digit_set(ds), _hex_fixed(sub, width - 1)) for sub, ds in by_sub.items()))


_BACKSLASH = char("\\")


@functools.lru_cache(maxsize=8192)
def _encode_set(ranges: tuple, escapes: str) -> Node:
    """JSON string fragments that decode to exactly one character of ``ranges``."""
    if ranges == ALL_CHARS and escapes == "standard":
        escapes = "any"  # free text: every spelling of every character
    parts = []
    raw = cs_diff(ranges, ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), _SURROGATES))
    if raw:
        parts.append(chars(raw))
    short = [cp for cp in _SHORT if cs_contains(ranges, cp)]
    if escapes == "any" and cs_contains(ranges, 0x2F):
        short.append(0x2F)
    if short:
        parts.append(seq(_BACKSLASH, chars([(ord(_SHORT.get(cp, "/")),) * 2 for cp in short])))
    if escapes == "any":
        escapable = cs_diff(ranges, (_SURROGATES,))
    elif escapes == "minimal":
        escapable = cs_inter(ranges, ((0, 0x1F),))
    else:
        escapable = cs_inter(ranges, ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, MAX_CP)))
        escapable = cs_diff(escapable, (_SURROGATES,))
    bmp = cs_inter(escapable, ((0, 0xFFFF),))
    if bmp:
        parts.append(seq(_BACKSLASH, char("u"), _hex_fixed(bmp, 4)))
    astral = cs_inter(escapable, ((0x10000, MAX_CP),))
    if astral:
        by_low: dict[tuple, list] = {}
        for lo, hi in astral:
            for high in range((lo - 0x10000) >> 10, ((hi - 0x10000) >> 10) + 1):
                base = 0x10000 + (high << 10)
                sub = cs_inter(((lo, hi),), ((base, base + 0x3FF),))
                low = tuple((a - base + 0xDC00, b - base + 0xDC00) for a, b in sub)
                by_low.setdefault(low, []).append((0xD800 + high, 0xD800 + high))
        for low, highs in by_low.items():
            parts.append(
                seq(
                    _BACKSLASH,
                    char("u"),
                    _hex_fixed(cs_norm(highs), 4),
                    _BACKSLASH,
                    char("u"),
                    _hex_fixed(low, 4),
                )
            )
    return alt(*parts)


def encode_json_string(content: Node, escapes: str = "standard") -> Node:
    """The JSON string literals (with quotes) whose decoded value is in ``content``.

    ``escapes="standard"``: a character is written raw, or escaped where JSON requires it
    (``"``, ``\\``, U+0000-U+001F: short escape or ``\\uXXXX``) or where ``json.dumps``
    with ``ensure_ascii=True`` escapes it (U+007F and above: ``\\uXXXX``, astral characters
    as a surrogate pair). ``escapes="any"``: additionally any character as ``\\uXXXX`` and
    ``/`` as ``\\/`` (every RFC 8259 spelling). ``escapes="minimal"``: only the escapes JSON
    requires (short escapes, ``\\u00XX`` for control characters without one): accepts
    ``json.dumps(..., ensure_ascii=False)`` output, with about a third fewer automaton
    states per character. Hex digits may be of either case. Where
    any character is allowed (free text), every spelling is accepted in both modes. Lone
    surrogate escapes (``\\ud800`` not followed by a low surrogate) are never accepted.
    """
    quote = char('"')
    return seq(quote, _encode(content, escapes), quote)


def _encode(node: Node, escapes: str) -> Node:
    k = node.kind
    if k == "c":
        return _encode_set(node.ranges, escapes)
    if k == "s":
        return seq(*(_encode(x, escapes) for x in node.kids))
    if k == "a":
        return alt(*(_encode(x, escapes) for x in node.kids))
    if k == "r":
        return rep(_encode(node.kids[0], escapes), node.lo, node.hi)
    raise ValueError("anchors must be resolved before encoding")


def json_string_literal(value: str, escapes: str = "standard") -> Node:
    return encode_json_string(lit(value), escapes)


def none_of(names) -> Node:
    """All strings except the given ones (linear in the size of their trie)."""
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True

    def build(node: dict) -> Node:
        kids = [k for k in node if k is not None]
        other = chars(cs_complement(cs_norm([(ord(k), ord(k)) for k in kids])))
        parts = [] if None in node else [EPS]
        parts.append(seq(other, _ANY_STRING))
        parts.extend(seq(char(k), build(node[k])) for k in sorted(kids))
        return alt(*parts)

    return build(trie)


# ------------------------------------------------------------------------------------------
# formats (decoded-content languages)
# ------------------------------------------------------------------------------------------

_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = (
    "(?:"
    + "|".join(
        [
            rf"(?:{_H16}:){{6}}{_LS32}",
            rf"::(?:{_H16}:){{5}}{_LS32}",
            rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (
    r"(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    r"|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
    rf"|{_LEAP}-02-29)"
)
_FRAC = r"(?:\.[0-9]+)?"
_NUMOFFSET = r"[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]"
_OFFSET = rf"(?:[Zz]|{_NUMOFFSET})"
_UTC_LEAP = rf"23:59:60{_FRAC}(?:[Zz]|[+-]00:00)"
_UNRESERVED = r"[A-Za-z0-9\-._~]"
_PCT = r"%[0-9A-Fa-f]{2}"
_SUB_DELIMS = r"[!$&'()*+,;=]"
_PCHAR = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|[:@])"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_IPVFUTURE = rf"[vV][0-9A-Fa-f]+\.(?:{_UNRESERVED}|{_SUB_DELIMS}|:)+"
_HOST = rf"(?:\[(?:{_IPV6}|{_IPVFUTURE})\]|{_IPV4}|(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*)"
_AUTHORITY = rf"(?:(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:)*@)?{_HOST}(?::[0-9]*)?"
_SEGMENT = rf"{_PCHAR}*"
_SEGMENT_NZ = rf"{_PCHAR}+"
_SEGMENT_NZ_NC = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|@)+"
_PATH_ABEMPTY = rf"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = rf"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_PATH_ROOTLESS = rf"{_SEGMENT_NZ}(?:/{_SEGMENT})*"
_PATH_NOSCHEME = rf"{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_HIER = rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_ROOTLESS}|)"
_URI = rf"{_SCHEME}:{_HIER}(?:\?{_QUERY})?(?:#{_QUERY})?"
_RELATIVE = rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME}|)(?:\?{_QUERY})?(?:#{_QUERY})?"
_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]"
_LDH_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
_EMAIL = (
    rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*"
    r'|"(?:[ !#-\[\]-~]|\\[ -~])*")'
    rf"@(?:{_LDH_LABEL}(?:\.{_LDH_LABEL})*|\[{_IPV4}\]|\[IPv6:{_IPV6}\])"
)
_DUR_DATE = r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION = rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)"
_HEX = "[0-9A-Fa-f]"
_UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
_REL_JSON_POINTER = rf"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"


def _nonreserved_label(n: int) -> str:
    """LDH labels of at most n characters without '--' in positions 3-4 (no R-LDH labels)."""
    x, y = "[A-Za-z0-9]", "[A-Za-z0-9\\-]"
    return rf"(?:{x}(?:{x}|{y}{x}|{y}{y}{x}|{y}(?:{x}{y}|-{x}){y}{{0,{n - 5}}}{x})?)"


# A subset of RFC 1123 host names whose total length is provably at most 253 characters:
# 1-3 labels of at most 63 characters, or 4-8 labels of at most 30.
_HOSTNAME_SUBSET = (
    rf"{_nonreserved_label(63)}(?:\.{_nonreserved_label(63)}){{0,2}}"
    rf"|{_nonreserved_label(30)}(?:\.{_nonreserved_label(30)}){{3,7}}"
)
_UCSCHAR = (
    r"\u{A0}-\u{D7FF}\u{F900}-\u{FDCF}\u{FDF0}-\u{FFEF}"
    + "".join(rf"\u{{{p:X}0000}}-\u{{{p:X}FFFD}}" for p in range(1, 14))
    + r"\u{E1000}-\u{EFFFD}"
)
_IPRIVATE = r"\u{E000}-\u{F8FF}\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}"


def _uri_grammar(unreserved: str, private: str) -> tuple[str, str]:
    """(absolute, relative reference) regexes of RFC 3986, or RFC 3987 with ucschar."""
    unres = rf"[A-Za-z0-9\-._~{unreserved}]"
    pchar = rf"(?:{unres}|{_PCT}|{_SUB_DELIMS}|[:@])"
    host = rf"(?:\[(?:{_IPV6}|{_IPVFUTURE})\]|{_IPV4}|(?:{unres}|{_PCT}|{_SUB_DELIMS})*)"
    authority = rf"(?:(?:{unres}|{_PCT}|{_SUB_DELIMS}|:)*@)?{host}(?::[0-9]*)?"
    abempty = rf"(?:/{pchar}*)*"
    absolute = rf"/(?:{pchar}+(?:/{pchar}*)*)?"
    rootless = rf"{pchar}+(?:/{pchar}*)*"
    noscheme = rf"(?:{unres}|{_PCT}|{_SUB_DELIMS}|@)+(?:/{pchar}*)*"
    query = rf"(?:{pchar}|[/?{private}])*"
    fragment = rf"(?:{pchar}|[/?])*"
    tail = rf"(?:\?{query})?(?:#{fragment})?"
    full = rf"{_SCHEME}:(?://{authority}{abempty}|{absolute}|{rootless}|){tail}"
    relative = rf"(?://{authority}{abempty}|{absolute}|{noscheme}|){tail}"
    return full, relative


_IRI, _IRI_RELATIVE = _uri_grammar(_UCSCHAR, _IPRIVATE)
_VARCHAR = rf"(?:[A-Za-z0-9_]|{_PCT})"
_URI_TEMPLATE = (
    rf"(?:[!#$&-;=?-\[\]_a-z~{_UCSCHAR}{_IPRIVATE}]|{_PCT}"  # ' allowed (RFC 6570 errata 6937)
    rf"|\{{[+#./;?&=,!@|]?{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
    rf"(?:,{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?)*\}})*"
)

_FORMATS_EXACT = {
    "date": _DATE,
    "duration": _DURATION,
    "email": _EMAIL,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "uri-reference": rf"(?:{_URI}|{_RELATIVE})",
    "uuid": _UUID,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": _REL_JSON_POINTER,
    "iri": _IRI,
    "iri-reference": rf"(?:{_IRI}|{_IRI_RELATIVE})",
    "uri-template": _URI_TEMPLATE,
}

# formats that `format_language` cannot produce exactly, with the reason (strict mode refuses)
FORMAT_LIMITS = {
    "hostname": "Punycode A-labels ('xn--...') need IDNA validation, which is not regular in "
    "practice; only host names without '--' in positions 3-4, with labels of at most 63 "
    "characters, either 1-3 labels or 4-8 labels of at most 30 characters, are generated",
    "idn-hostname": "internationalized host names need IDNA validation",
    "idn-email": "internationalized e-mail addresses need IDNA validation",
    "regex": "the language of valid ECMA-262 regexes is not regular",
}


def _time(leap_seconds: str) -> str:
    base = rf"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}{_OFFSET}"
    if leap_seconds == "none":
        return base
    if leap_seconds == "utc":
        return rf"(?:{base}|{_UTC_LEAP})"
    # exact: local time HH:MM:60 at offset +-OH:OM is valid iff HH:MM - offset = 23:59 UTC
    alts = [rf"23:59:60{_FRAC}(?:[Zz]|[+-]00:00)"]
    for h in range(24):
        for m in range(60):
            offs = []
            # positive offset: local = 23:59 + off
            if m == 59:
                oh, om = (h + 1) % 24, 0
            else:
                oh, om = h, m + 1
            if (oh, om) != (0, 0):
                offs.append(rf"\+{oh:02d}:{om:02d}")
            # negative offset: local = 23:59 - off
            oh, om = (23 - h) % 24, 59 - m
            if (oh, om) != (0, 0):
                offs.append(rf"-{oh:02d}:{om:02d}")
            alts.append(rf"{h:02d}:{m:02d}:60{_FRAC}(?:{'|'.join(offs)})")
    return rf"(?:{base}|{'|'.join(alts)})"


@functools.lru_cache(maxsize=64)
def format_language(name: str, leap_seconds: str = "utc") -> Node | None:
    """The content language of a ``format``; None if the format is unknown.

    Formats listed in `FORMAT_LIMITS` return their documented subset.
    """
    if name in ("time", "date-time"):
        t = _time(leap_seconds)
        pattern = t if name == "time" else rf"{_DATE}[Tt]{t}"
    elif name in _FORMATS_EXACT:
        pattern = _FORMATS_EXACT[name]
    elif name == "hostname":
        pattern = _HOSTNAME_SUBSET
    else:
        return None
    return _parse_plain(pattern)


def _parse_plain(pattern: str) -> Node:
    node = parse_ecma(pattern)
    assert not has_anchor(node)
    return node
