"""Typed language → IR of JSON texts (values, arrays, objects, whitespace, strings).

With ``recursion="stack"`` the IR may call grammar rules (`_rules.Rules`): schema-free
arrays and objects, recursive ``$ref`` targets and large shared values are ``Terminal(j)``
calls, so the schema compiles to a pushdown automaton instead of an unrolled DFA."""

from __future__ import annotations

from fractions import Fraction

from automata_compile.automata._ir import NEVER, Automaton
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema import _strings
from automata_compile.frontends.json_schema._numbers import (
    _constrained_number,
    _number_literal,
    integer_text,
    number_text,
)
from automata_compile.frontends.json_schema._resolver import _Refuse
from automata_compile.frontends.json_schema._rules import SHARE_MIN_SIZE
from automata_compile.frontends.json_schema._translator import _Options
from automata_compile.frontends.json_schema._types import _Arr, _meet, _negate, _Num, _Obj, _top


class _Emitter:
    def __init__(self, opts: _Options, refuse, rules=None):
        self.opts = opts
        self.refuse = refuse
        self.rules = rules  # a `_rules.Rules` (recursion="stack"), or None: no calls
        ws = opts.whitespace
        if ws == "compact":
            self.comma, self.colon, self.open_pad, self.close_pad = (
                sf.char(","),
                sf.char(":"),
                sf.EPS,
                sf.EPS,
            )
        elif ws == "default":
            sp = sf.opt(sf.char(" "))
            self.comma, self.colon, self.open_pad, self.close_pad = (
                sf.seq(sf.char(","), sp),
                sf.seq(sf.char(":"), sp),
                sf.EPS,
                sf.EPS,
            )
        elif ws == "pretty":
            w = sf.rep(sf.chars([(9, 10), (13, 13), (32, 32)]), 0, opts.max_whitespace)
            self.comma, self.colon, self.open_pad, self.close_pad = (
                sf.seq(w, sf.char(","), w),
                sf.seq(w, sf.char(":"), w),
                w,
                w,
            )
        else:
            raise ValueError(f"whitespace must be 'default', 'compact' or 'pretty', got {ws!r}")
        self.memo: dict = {}
        self.keys: dict = {}
        self.free: dict = {}

    def string(self, content):
        return _strings.encode_json_string(content, self.opts.string_escapes)

    def key(self, name: str):
        hit = self.keys.get(name)
        if hit is None:
            hit = self.keys[name] = self.string(sf.lit(name))
        return hit

    def wrap(self, open_ch: str, body, close_ch: str, nullable_body: bool):
        return sf.seq(sf.char(open_ch), self.open_pad, body, self.close_pad, sf.char(close_ch))

    def any_json(self, depth: int):
        """Any JSON value: unrolled to ``depth`` levels of arrays and objects, or, with
        rules, scalars inline and calls of the free array and object rules (no bound)."""
        if self.rules is not None:
            depth = -1
        hit = self.free.get(depth)
        if hit is not None:
            return hit
        parts = [
            sf.lit("null"),
            sf.lit("true"),
            sf.lit("false"),
            number_text(self.opts.max_filler),
            self.string(sf.ANY_STRING),
        ]
        if depth < 0:
            parts.append(self.rules.call("json_array", lambda: self.free_array(self.any_json(-1))))
            parts.append(
                self.rules.call("json_object", lambda: self.free_object(self.any_json(-1)))
            )
        elif depth > 0:
            inner = self.any_json(depth - 1)
            parts.append(self.free_array(inner))
            parts.append(self.free_object(inner))
        node = sf.alt(*parts)
        self.free[depth] = node
        return node

    def free_array(self, inner):
        return self.wrap("[", sf.opt(sf.seq(inner, sf.star(sf.seq(self.comma, inner)))), "]", True)

    def free_object(self, inner):
        item = sf.seq(self.string(sf.ANY_STRING), self.colon, inner)
        return self.wrap("{", sf.opt(sf.seq(item, sf.star(sf.seq(self.comma, item)))), "}", True)

    def value(self, t):
        if t is None or t.is_top():
            return self.any_json(self.opts.max_nesting_depth)
        hit = self.memo.get(t)
        if hit is not None:
            return hit
        parts = []
        if t.null:
            parts.append(sf.lit("null"))
        for b in sorted(t.bools, reverse=True):
            parts.append(sf.lit("true" if b else "false"))
        for n in t.nums:
            parts.append(self.number(n))
        if not sf.is_never(t.string):
            parts.append(self.string(t.string))
        for a in t.arrays:
            parts.append(self.array(a))
        for o in t.objects:
            parts.append(self.object(o))
        for k in sorted(t.calls):
            parts.append(self.rules.call(("ref", k), lambda k=k: self.value(self.rules.types[k])))
        node = sf.alt(*parts)
        if self.rules is not None and t in self.rules.shared and sf.size(node) >= SHARE_MIN_SIZE:
            node = self.rules.call(("shared", t), lambda inline=node: inline)
        self.memo[t] = node
        return node

    def number(self, n: _Num):
        if n.values is not None:
            return sf.alt(*(_number_literal(v, self.opts.max_filler) for v in sorted(n.values)))
        if n.is_free():
            return number_text(self.opts.max_filler)
        if (
            n.lo is None
            and n.hi is None
            and not n.not_mults
            and not n.excluded
            and n.mults == {Fraction(1)}
        ):
            return integer_text(self.opts.max_filler)
        return _constrained_number(n, self.opts.max_filler)

    def array(self, a: _Arr):
        if a.contains:
            try:
                return self.wrap("[", self._array_counted(a), "]", True)
            except (_Refuse, sf.TooComplexError) as e:
                reason = getattr(e, "reason", None) or f"the counting automaton is too large ({e})"
                self.refuse("contains", a.contains[-1][4], reason)
                return self.array(a.replace(contains=()))
        k = len(a.prefix)
        mx = a.max
        items = a.items
        if items is not None and items.is_bottom():
            mx = k if mx is None else min(mx, k)
        item_node = self.value(items) if mx is None or mx > k else NEVER
        # elements after the prefix
        if k == 0:
            lo_t = max(a.min - 1, 0)
            hi_t = None if mx is None else mx - 1
            if mx == 0:
                body = sf.EPS
            else:
                body = sf.seq(item_node, sf.rep(sf.seq(self.comma, item_node), lo_t, hi_t))
                if a.min == 0:
                    body = sf.opt(body)
            return self.wrap("[", body, "]", a.min == 0)
        tail = sf.EPS
        if mx is None or mx > k:
            tail = sf.rep(
                sf.seq(self.comma, item_node), max(a.min - k, 0), None if mx is None else mx - k
            )
        body = tail
        for j in range(min(k, mx if mx is not None else k) - 1, -1, -1):
            el = sf.seq(self.comma if j > 0 else sf.EPS, self.value(a.prefix[j]), body)
            body = sf.opt(el) if j >= a.min else el
        return self.wrap("[", body, "]", a.min == 0)

    def _array_counted(self, a: _Arr):
        """Arrays with ``contains`` counts: an automaton over (position, length, counts)
        whose edges are element languages (an `Automaton` node with IR labels)."""
        cons = a.contains
        if len(cons) > 3:
            raise _Refuse("contains", "more than three contains constraints on one array")
        negs = [_negate(c) for c, *_ in cons]
        caps = [cmax + 1 if cmax is not None else cmin for _, cmin, cmax, _, _ in cons]
        k = len(a.prefix)
        span = max([k] + [c[3] for c in cons])
        lcap = a.max if a.max is not None else max(a.min, 1)
        g = _Counting((0, 0, (0,) * len(cons)))
        while g.todo:
            key = g.todo.pop()
            pos, length, counts = key
            if length >= a.min and all(c[1] <= n for c, n in zip(cons, counts, strict=True)):
                g.final(key)
            if a.max is not None and length >= a.max:
                continue
            el = _top(a.prefix[pos] if pos < k else a.items)
            if el.is_bottom():
                continue
            sep = self.comma if length > 0 else sf.EPS
            npos = min(pos + 1, span)
            nlen = length + 1 if a.max is not None else min(length + 1, lcap)
            # constraints whose count this element can still change
            live = [
                i
                for i, (_, _, _, first, _) in enumerate(cons)
                if pos >= first and min(counts[i] + 1, caps[i]) != counts[i]
            ]
            for mask in range(1 << len(live)):
                t, new = el, list(counts)
                for bit, i in enumerate(live):
                    if mask >> bit & 1:
                        t = _meet(t, cons[i][0])
                        new[i] = min(counts[i] + 1, caps[i])
                    else:
                        t = _meet(t, negs[i])
                if t.is_bottom() or any(
                    c[2] is not None and n > c[2] for c, n in zip(cons, new, strict=True)
                ):
                    continue
                g.add(key, (npos, nlen, tuple(new)), sf.seq(sep, self.value(t)))
        return g.automaton()

    def object(self, o: _Obj):
        names = [n for n, _ in o.props]
        declared = _strings.none_of(names) if names else sf.ANY_STRING
        items = []
        for n, s in o.props:
            if s is not None and s.is_bottom():
                continue
            items.append((n, sf.seq(self.key(n), self.colon, self.value(s)), n in o.required, s))
        rest_nodes = []
        for k, s in o.rest:
            if s is not None and s.is_bottom():
                continue
            kd = sf.intersect(k, declared) if names else k
            if sf.is_empty(kd):
                continue
            rest_nodes.append(sf.seq(self.string(kd), self.colon, self.value(s)))
        rest = sf.alt(*rest_nodes)
        if o.need or o.min > 0 or o.max is not None:
            return self.wrap("{", self._object_counted(o, items, rest, declared), "}", True)
        emitted = NEVER  # prefixes with at least one property
        empty_ok = True  # the empty prefix is possible
        for _, node, required, _ in items:
            if required:
                emitted = sf.seq(
                    sf.opt(sf.seq(emitted, self.comma))
                    if empty_ok
                    else sf.seq(emitted, self.comma),
                    node,
                )
                empty_ok = False
            elif not empty_ok:
                emitted = sf.seq(emitted, sf.opt(sf.seq(self.comma, node)))
            elif sf.is_never(emitted) or sf.size(node) <= sf.size(emitted):
                # E (, p)? | p: repeats the item (cheaper than repeating the prefix)
                emitted = sf.alt(sf.seq(emitted, sf.opt(sf.seq(self.comma, node))), node)
            else:
                # (E ,)? p | E: repeats the prefix
                emitted = sf.alt(sf.seq(sf.opt(sf.seq(emitted, self.comma)), node), emitted)
        if sf.is_never(rest):
            body = sf.alt(emitted, sf.EPS if empty_ok else NEVER)
        else:
            body = sf.seq(
                sf.alt(emitted, rest if empty_ok else NEVER), sf.star(sf.seq(self.comma, rest))
            )
            if empty_ok:
                body = sf.opt(body)
        return self.wrap("{", body, "}", empty_ok)

    def _object_counted(self, o: _Obj, items, rest, declared):
        cap = o.max if o.max is not None else max(o.min, 1)
        need_nodes = []
        for k, s in o.need:
            kd = sf.intersect(k, declared)
            if not sf.is_empty(kd):
                need_nodes.append(sf.seq(self.string(kd), self.colon, self.value(s)))
        witness = sf.alt(*need_nodes)
        need = bool(o.need)
        n = len(items)
        g = _Counting((0, 0, not need))
        while g.todo:
            i, c, w = key = g.todo.pop()
            sep = self.comma if c > 0 else sf.EPS
            nc = c + 1 if o.max is not None else min(c + 1, cap)
            targets = []
            if i < n:
                name, node, required, schema = items[i]
                if not required:
                    targets.append(((i + 1, c, w), sf.EPS))
                if o.max is None or c + 1 <= o.max:
                    targets.append(((i + 1, nc, w), sf.seq(sep, node)))
                    if need and not w:
                        wit = [
                            sf.seq(self.key(name), self.colon, self.value(_meet(schema, s)))
                            for k, s in o.need
                            if sf.content_matches(k, name) and not _meet(schema, s).is_bottom()
                        ]
                        if wit:
                            targets.append(((i + 1, nc, True), sf.seq(sep, sf.alt(*wit))))
            else:
                if c >= o.min and w:
                    g.final(key)
                if o.max is None or c + 1 <= o.max:
                    if not sf.is_never(rest):
                        targets.append(((n, nc, w), sf.seq(sep, rest)))
                    if need and not sf.is_never(witness):
                        targets.append(((n, nc, True), sf.seq(sep, witness)))
            for tgt, label in targets:
                g.add(key, tgt, label)
        return g.automaton()


class _Counting:
    """A counting construction: states are keys numbered on first sight (the start is 0),
    explored from ``todo``; edges are IR labels, merged by alternation."""

    def __init__(self, start):
        self.states = {start: 0}
        self.edges: dict = {}
        self.finals: set = set()
        self.todo = [start]

    def sid(self, key) -> int:
        if key not in self.states:
            self.states[key] = len(self.states)
            self.todo.append(key)
        return self.states[key]

    def final(self, key) -> None:
        self.finals.add(self.sid(key))

    def add(self, src, dst, label) -> None:
        e = (self.sid(src), self.sid(dst))
        self.edges[e] = sf.alt(self.edges.get(e, NEVER), label)

    def automaton(self):
        """An `Automaton` node (the byte DFA builds it as is; no regex is printed)."""
        if not self.finals:
            return NEVER
        out: list[list] = [[] for _ in range(len(self.states))]
        for (p, q), label in self.edges.items():
            if not sf.is_never(label):
                out[p].append((label, q))
        return Automaton(edges=tuple(tuple(x) for x in out), start=0, finals=frozenset(self.finals))
