"""Typed language → IR of JSON texts (values, arrays, objects, whitespace, strings).

With ``recursion="stack"`` the IR may call grammar rules (`_rules.Rules`): schema-free
arrays and objects, recursive ``$ref`` targets and large shared values are ``Terminal(j)``
calls, so the schema compiles to a pushdown automaton instead of an unrolled DFA."""

from __future__ import annotations

import contextlib
import warnings
from fractions import Fraction

from automata_compile._errors import (
    CompileTimeoutError,
    EmptyLanguageError,
    OrderFallbackWarning,
    StateBudgetExceededError,
    UnsupportedSchemaError,
)
from automata_compile.automata import NEVER, Automaton, fingerprint
from automata_compile.automata import byte_dfa as _byte_dfa
from automata_compile.automata import char_dfa as _char_dfa
from automata_compile.automata import fsa as _fsa
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema import _floors, _strings
from automata_compile.frontends.json_schema._bitset_events import (
    CLEAR,
    REQUIRE,
    SET,
    BitsetIneligible,
    BitsetSkip,
    events_in,
)
from automata_compile.frontends.json_schema._numbers import (
    _constrained_number,
    _number_literal,
    integer_text,
    number_text,
)
from automata_compile.frontends.json_schema._resolver import _loc, _ptr_join, _Refuse
from automata_compile.frontends.json_schema._rules import SHARE_MIN_SIZE, rule_calls
from automata_compile.frontends.json_schema._translator import _Options
from automata_compile.frontends.json_schema._type_algebra import (
    _meet,
    _negate,
)
from automata_compile.frontends.json_schema._types import (
    _FREE_ARR,
    _FREE_OBJ,
    _Arr,
    _Num,
    _Obj,
    _top,
)


class _Emitter:
    def __init__(
        self,
        opts: _Options,
        refuse,
        rules=None,
        free_calls: bool = True,
        share_min_size: int = SHARE_MIN_SIZE,
        subset=None,
    ):
        self.opts = opts
        self.refuse = refuse
        # `_Translator.subset`: warn once per (keyword, pointer) and compile, or refuse with
        # ``subsets="refuse"``
        self.subset = subset
        self.rules = rules  # a `_rules.Rules` (recursion="stack"), or None: no calls
        self.free_calls = free_calls  # see `_free_rule`
        self.share_min_size = share_min_size  # a shared value this large becomes a rule
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
        # id(label) -> (label, its minimal automaton / its minimal byte DFA's states)
        self.minimal: dict = {}
        self.dfa_sizes: dict = {}
        self.minimal_ids: set = set()  # ids of `_minimal`'s minimal automata (kept in .minimal)
        self.floors: dict = {}  # `_floors.shortest`'s memo
        self.objects = 0  # objects emitted: the deadline is checked every 16
        # estimated states any order added, over the schema's objects and uniqueItems arrays
        self.order_states = 0

    def label_size(self, label) -> int:
        """States of ``label``'s minimal byte DFA (the cost of one more copy of it)."""
        return self._dfa_size(self._minimal(label))

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
        null, true, false = self.opts.literals()
        parts = [
            sf.lit(null),
            sf.lit(true),
            sf.lit(false),
            number_text(self.opts.max_filler, self.opts.max_digits),
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
        null, true, false = self.opts.literals()
        if t.null:
            parts.append(sf.lit(null))
        for b in sorted(t.bools, reverse=True):
            parts.append(sf.lit(true if b else false))
        for n in t.nums:
            parts.append(self.number(n))
        if not sf.is_never(t.string):
            parts.append(self.string(t.string))
        for a in t.arrays:
            parts.append(self._free_rule("json_array", a, t.arrays) or self.array(a))
        if self.opts.bitset is not None and len(t.objects) > 1 and not self._skipped(t.objects):
            parts.append(self._objects_bitset(t.objects))
        else:
            for o in t.objects:
                parts.append(self._free_rule("json_object", o, t.objects) or self.object(o))
        for k in sorted(t.calls):
            parts.append(self.rules.call(("ref", k), lambda k=k: self.value(self.rules.types[k])))
        node = sf.alt(*parts)
        if (
            self.rules is not None
            and t in self.rules.shared
            and sf.size(node) >= self.share_min_size
        ):
            node = self.rules.call(("shared", t), lambda inline=node: inline)
        self.memo[t] = node
        return node

    def _free_rule(self, name: str, c, alternatives):
        """A call of the free array / object rule for a schema-free container ``c`` that is
        the value's only array / object, else None: composition then walks the shared rule,
        not an inline copy of it. (A union around the value may still spell another array
        there; that grammar conflicts at ``[`` / ``{`` and `byte_language` spells it inline.)"""
        if not self.free_calls or self.rules is None or len(alternatives) != 1:
            return None
        if c not in (_FREE_ARR, _FREE_OBJ):
            return None
        make = self.free_array if name == "json_array" else self.free_object
        return self.rules.call(name, lambda: make(self.any_json(-1)))

    def number(self, n: _Num):
        if n.values is not None:
            return sf.alt(*(_number_literal(v, self.opts.max_filler) for v in sorted(n.values)))
        if n.is_free():
            return number_text(self.opts.max_filler, self.opts.max_digits)
        if (
            n.lo is None
            and n.hi is None
            and not n.not_mults
            and not n.excluded
            and n.mults == {Fraction(1)}
        ):
            return integer_text(self.opts.max_filler, self.opts.max_digits)
        return _constrained_number(n, self.opts.max_filler, self.opts.max_digits)

    def array(self, a: _Arr):
        if a.unique is not None:
            from automata_compile.frontends.json_schema import _unique  # it builds on this module

            node = None if a.max is not None and a.max <= 1 else _unique.unique_array(self, a)
            return self.array(a.replace(unique=None)) if node is None else node
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

    def _skipped(self, objects) -> bool:
        """Whether a union member is spelled by the counting automaton (then all of them are:
        one member's ``{`` with a CLEAR next to another's without)."""
        skip = self.opts.bitset.skip
        ptrs = [o.at if o.at is not None else "" for o in objects]
        if not any(p in skip for p in ptrs):
            return False
        skip.update(ptrs)
        return True

    def _objects_bitset(self, objects):
        """A union of objects with bitset events: one ``{`` and one CLEAR for all of them,
        then the members' bodies, whose keys share one bit per property name (the members'
        paths read the same text), so that neither ``{`` nor a key both declare leaves a
        state with one event per member."""
        ev = self.opts.bitset
        names: dict = {}
        bodies = [self.object(o, open_brace=False, union_bits=names) for o in objects]
        owners = [o.at if o.at is not None else "" for o in objects]
        return sf.seq(sf.char("{"), ev.event(CLEAR, names.values(), owners), sf.alt(*bodies))

    def object(self, o: _Obj, open_brace: bool = True, union_bits: dict | None = None):
        """The object's language; ``open_brace=False``: without its ``{`` (and its CLEAR
        event: the caller opens it), its keys' bits from ``union_bits`` (see
        `_objects_bitset`)."""
        self.objects += 1
        if self.objects & 15 == 0:
            _fsa.check_time("the schema's objects")
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
        # with one kind of property the two orders are one language
        ptr = o.at if o.at is not None else ""
        if (
            self.opts.property_order in ("any", "strict_any")
            and len(items) + (not sf.is_never(rest)) > 1
            and ptr not in self.opts.declared_at
        ):
            ev = self.opts.bitset
            counted = bool(o.need or o.min > 0 or o.max is not None)
            if ev is not None and not counted and ptr not in ev.skip:
                return self._object_bitset(o, items, rest, ptr, open_brace, union_bits)
            inner = events_in([x[1] for x in items] + [rest]) if ev is not None else ()
            if inner:
                owners = ev.owners_of(inner) - ev.skip
                if not owners:
                    raise BitsetIneligible(
                        f"the object at {_loc(ptr)} counts its properties (minProperties, "
                        "maxProperties or a required pattern) and holds a bitset object"
                    )
                raise BitsetSkip(owners)
            try:
                node = self._object_counted(o, items, rest, declared, True)
                self.opts.any_ordered.append(ptr)
                return self._wrap_object(node, open_brace)
            except _OrderBudget as e:
                self._order_refused(o, items, e)
        if o.need or o.min > 0 or o.max is not None:
            return self._wrap_object(
                self._object_counted(o, items, rest, declared, False), open_brace
            )
        if len(items) > MAX_NESTED_CHAIN:
            return self._wrap_object(self._declared_flat(items, rest), open_brace)
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
        return self._wrap_object(body, open_brace)

    def _declared_flat(self, items, rest):
        """The body of a declared-order object (no counts) as an `Automaton` node of 2n + 3
        states, linear and flat where the nested IR of `object` is as deep as the object
        has properties (past Python's recursion limit at a few hundred): ``none[k]`` /
        ``some[k]`` before declared property k with none / some property written, each
        optional property skipped by an empty edge, each written one entered by itself
        (from ``none``) or after a comma (from ``some``); then the other properties
        (``rest``), each after a comma but the first where nothing came before."""
        n = len(items)
        none, some, others = range(n + 1), range(n + 1, 2 * n + 2), 2 * n + 2
        edges: list[list] = [[] for _ in range(2 * n + 3)]
        for k, (_, node, required, _) in enumerate(items):
            edges[none[k]].append((node, some[k + 1]))
            edges[some[k]].append((sf.seq(self.comma, node), some[k + 1]))
            if not required:
                edges[none[k]].append((sf.EPS, none[k + 1]))
                edges[some[k]].append((sf.EPS, some[k + 1]))
        finals = {none[n], some[n]}
        if not sf.is_never(rest):
            after = sf.seq(self.comma, rest)
            edges[none[n]].append((rest, others))
            edges[some[n]].append((after, others))
            edges[others].append((after, others))
            finals.add(others)
        return Automaton(edges=tuple(map(tuple, edges)), start=0, finals=frozenset(finals))

    def _wrap_object(self, body, open_brace: bool):
        if open_brace:
            return self.wrap("{", body, "}", True)
        return sf.seq(self.open_pad, body, self.close_pad, sf.char("}"))

    def _object_bitset(
        self, o: _Obj, items, rest, ptr: str, open_brace: bool = True, names: dict | None = None
    ):
        """The object as a loop over its properties with bitset events
        (docs/any_order_bitset.md): ``{`` CLEAR, a declared key's closing quote SET(bit),
        ``}`` REQUIRE (its required bits). A counted object keeps its counting automaton
        (exact, or declared order past its budget, as by default) unless it holds a bitset
        object (then the schema is not eligible). ``names``: a union's bits by name."""
        ev = self.opts.bitset
        if names is None:
            names = {}
        bits = []
        for name, *_ in items:
            if name not in names:
                names[name] = ev.new_bit()
            bits.append(names[name])
        required = [b for b, item in zip(bits, items, strict=True) if item[2]]
        ev.add_object(ptr, bits, required)
        alts = []
        for b, (name, _, _, schema) in zip(bits, items, strict=True):
            key = sf.seq(self.key(name), ev.event(SET, [b], [ptr]))
            alts.append(sf.seq(key, self.colon, self.value(schema)))
        if not sf.is_never(rest):
            alts.append(rest)
        item = sf.alt(*alts)
        close = sf.seq(
            self.close_pad,
            sf.char("}"),
            *([ev.event(REQUIRE, required, [ptr])] if required else []),
        )
        # one copy of the items (an `Automaton` node: the byte DFA may build it as a piece)
        edges = (
            (
                (
                    sf.seq(sf.char("{"), ev.event(CLEAR, bits, [ptr]), self.open_pad)
                    if open_brace
                    else self.open_pad,
                    1,
                ),
            ),
            # the empty object only where nothing is required: a `}` that its REQUIRE refuses
            # must not end a path that otherwise stays live (docs/any_order_bitset.md)
            ((sf.EPS, 2),) + (() if required else ((close, 4),)),
            ((item, 3),),
            ((self.comma, 2), (close, 4)),
            (),
        )
        return Automaton(edges=edges, start=0, finals=frozenset({4}))

    def _object_counted(self, o: _Obj, items, rest, declared, any_order: bool):
        """Objects as an automaton over (position, count, witness seen) whose edges are
        property languages (IR labels). The position is the index of the next declared
        property (declared order: each is written or skipped, then the others) or the set
        of declared properties written (any order: each at most once, the others anywhere).
        In any order the construction stops with `_OrderBudget` past its budget."""
        cap = o.max if o.max is not None else max(o.min, 1)
        need_nodes = []
        for k, s in o.need:
            kd = sf.intersect(k, declared)
            if not sf.is_empty(kd):
                need_nodes.append(sf.seq(self.string(kd), self.colon, self.value(s)))
        witness = sf.alt(*need_nodes)
        need = bool(o.need)
        n = len(items)
        wits = []  # per declared property: its spellings that are also a witness
        for name, _, _, schema in items:
            wit = [
                sf.seq(self.key(name), self.colon, self.value(_meet(schema, s)))
                for k, s in o.need
                if need and sf.content_matches(k, name) and not _meet(schema, s).is_bottom()
            ]
            wits.append(sf.alt(*wit))
        required = frozenset(i for i, item in enumerate(items) if item[2])
        budget = None
        if any_order and EARLY_REFUSAL:
            reason = self._refused_by_floors(o, items, rest, witness, wits, required)
            if reason is not None:  # the sizes would pass the budget too: build none
                refused = _OrderBudget([], 0, [])
                refused.reason = reason
                raise refused
        if any_order:
            # each label is copied once per set: minimal copies keep the subset construction
            # of the byte automaton near the size of its result
            # (a label with rule calls stays as is: `_whole` keeps it one node, so that
            # its byte DFA, built to size it, is spliced for each copy)
            # budget and deadline errors name the property being sized
            at = o.at if o.at is not None else ""

            @contextlib.contextmanager
            def where(name=None):
                if name is None:
                    what = f"the other properties of the object at {_loc(at)}"
                else:
                    what = _loc(_ptr_join(at, "properties", name))
                try:
                    with _fsa.location(what):
                        yield
                except CompileTimeoutError as e:  # say which option skips this step
                    raise CompileTimeoutError(f"{e}{SIZING_HINT}") from None

            def m(x, name=None):
                with where(name):
                    return _whole(self._minimal(x))

            def size(x, name=None):
                with where(name):
                    return self._dfa_size(x)

            names = [item[0] for item in items]
            items = [(name, m(node, name), req, schema) for name, node, req, schema in items]
            rest, witness = m(rest), m(witness)
            wits = [m(x, name) for x, name in zip(wits, names, strict=True)]
            try:
                budget = _OrderBudget(
                    [size(x[1], x[0]) for x in items],
                    size(rest) + size(witness),
                    [size(x, name) for x, name in zip(wits, names, strict=True)],
                )
            except StateBudgetExceededError:
                # a label whose byte DFA alone passes its budget (its size is not known):
                # the object falls back to declared order, warned (this refused the schema)
                refused = _OrderBudget([], 0, [])
                refused.reason = "one property's byte automaton alone passes its budget"
                raise refused from None
        g = _Counting((frozenset() if any_order else 0, 0, not need))
        while g.todo:
            pos, c, w = key = g.todo.pop()
            sep = self.comma if c > 0 else sf.EPS
            nc = c + 1 if o.max is not None else min(c + 1, cap)
            room = o.max is None or c + 1 <= o.max
            targets = []
            if any_order:
                if c >= o.min and w and required <= pos:
                    g.final(key)
                nexts = [(pos | {i}, i) for i in range(n) if i not in pos] if room else []
            elif pos < n:
                if not items[pos][2]:
                    targets.append(((pos + 1, c, w), sf.EPS))
                nexts = [(pos + 1, pos)] if room else []
            else:
                if c >= o.min and w:
                    g.final(key)
                nexts = []
            for nxt, i in nexts:
                targets.append(((nxt, nc, w), sf.seq(sep, items[i][1])))
                if not w and not sf.is_never(wits[i]):
                    targets.append(((nxt, nc, True), sf.seq(sep, wits[i])))
            if room and (any_order or pos == n):
                if not sf.is_never(rest):
                    targets.append(((pos, nc, w), sf.seq(sep, rest)))
                if need and not sf.is_never(witness):
                    targets.append(((pos, nc, True), sf.seq(sep, witness)))
            for tgt, label in targets:
                if any_order and o.max is not None and tgt[1] + len(required - tgt[0]) > o.max:
                    continue  # the required properties no longer fit
                g.add(key, tgt, label)
            if budget is not None:
                budget.charge(len(g.states), nexts, w, room)
        if budget is not None:
            budget.charge_schema(self)
        return g.automaton()

    def _refused_by_floors(self, o: _Obj, items, rest, witness, wits, required) -> str | None:
        """The any-order budget's refusal reason, decided from floors of the labels' sizes
        (`_floors.size_floor`), or None where they do not decide it (then the sizes are
        built, as ever).

        The walk is the counting construction's (`_object_counted`), the same states in
        the same order (they do not depend on the labels, only on which labels are empty:
        so each of ``rest``, ``witness`` and ``wits`` must be NEVER or surely nonempty,
        and `_minimal` keeps either), charging the floors. Every label is charged at the
        start, so from then on the excess over declared order is a sum of sizes times
        nonnegative counts: the true sizes reach each floor's excess, and pass
        ``MAX_ORDER_STATES`` at the same state or earlier. Decided only where that comes
        before the count of states passes ``MAX_ORDER_SETS`` (which the sizes do not
        move): the true construction raises the same reason."""
        memo = self.floors
        for x in (rest, witness, *wits):
            if not sf.is_never(x) and not _floors.shortest(x, memo)[0]:
                return None

        def floor(x):
            return 0 if sf.is_never(x) else _floors.size_floor(x, memo)

        sizes = [floor(x[1]) for x in items]
        budget = _OrderBudget(sizes, floor(rest) + floor(witness), [floor(x) for x in wits])
        n, need = len(items), bool(o.need)
        cap = o.max if o.max is not None else max(o.min, 1)
        # at most this many states are charged before the count decides (each charges at
        # most ``declared``): where that cannot pass the budget, no walk
        keys = min(2**n * (cap + 1) * 2, MAX_ORDER_SETS)
        if (keys - 1) * budget.declared <= MAX_ORDER_STATES:
            return None
        rest_ok, wit_ok = not sf.is_never(rest), need and not sf.is_never(witness)
        start = (frozenset(), 0, not need)
        states, todo, steps = {start: 0}, [start], 0
        while todo:
            steps += 1
            if steps & 255 == 0:  # each step is O(properties): 250 of them in renovate
                _fsa.check_time("the any-order budget's floors")
            pos, c, w = todo.pop()
            nc = c + 1 if o.max is not None else min(c + 1, cap)
            room = o.max is None or c + 1 <= o.max
            nexts = [(pos | {i}, i) for i in range(n) if i not in pos] if room else []
            targets = []
            for nxt, i in nexts:
                targets.append((nxt, nc, w))
                if not w and not sf.is_never(wits[i]):
                    targets.append((nxt, nc, True))
            if room:
                if rest_ok:
                    targets.append((pos, nc, w))
                if wit_ok:
                    targets.append((pos, nc, True))
            for tgt in targets:
                if o.max is not None and tgt[1] + len(required - tgt[0]) > o.max:
                    continue
                if tgt not in states:
                    states[tgt] = len(states)
                    todo.append(tgt)
            try:
                budget.charge(len(states), nexts, w, room)
            except _OrderBudget:
                return None if len(states) > MAX_ORDER_SETS else budget.reason
        return None

    def _minimal(self, label):
        """``label`` as a minimal character automaton; as is where that outgrows its budget
        or the label holds what character automata cannot (a terminal, e.g. a rule call).
        Memoized across schemas by the label's structure (`char_dfa.minimal`)."""
        hit = self.minimal.get(id(label))
        if hit is None:
            out = label
            if not sf.is_never(label):
                m = _char_dfa.minimal(label, what="a property")
                out = label if m is None else m
                if m is not None:
                    self.minimal_ids.add(id(m))
            hit = self.minimal[id(label)] = (label, out)
        return hit[1]

    def _dfa_size(self, label) -> int:
        """The states of ``label``'s minimal byte DFA (0 for the empty language); a rule call
        is one edge there, as in the byte PDA."""
        hit = self.dfa_sizes.get(id(label))
        if hit is None:
            n = None
            if id(label) in self.minimal_ids:  # a minimal automaton over ASCII: its own size
                n = _char_dfa.ascii_states(label)
                parts = _char_dfa.chain_parts(label) if n is None else None
                if parts is not None and all(c < 0x80 for c in parts[0]):  # a name, a value
                    n = _byte_dfa.lead_then_states(bytes(parts[0]), parts[1])
            if n is None:
                calls = 1 + max(rule_calls(label, set()), default=-1)
                key = (fingerprint(label), calls, _byte_dfa.DEFAULT_MAX_STATES)
                if key in _OVER_BUDGET:
                    raise StateBudgetExceededError(_OVER_BUDGET[key])
                try:
                    n = (
                        0
                        if sf.is_never(label)
                        else _byte_dfa.cached_byte_dfa(label, calls, what="a property").num_states
                    )
                except EmptyLanguageError:
                    n = 0
                except StateBudgetExceededError as e:
                    if len(_OVER_BUDGET) >= 1024:
                        _OVER_BUDGET.clear()
                    _OVER_BUDGET[key] = str(e)
                    raise
            hit = self.dfa_sizes[id(label)] = (label, n)
        return hit[1]

    def _order_refused(self, o: _Obj, items, e: _OrderBudget) -> None:
        """``property_order="strict_any"`` raises; otherwise the object falls back to its
        declared order (a subset of its instances' spellings, never an invalid one), with
        one warning naming it."""
        ptr = o.at if o.at is not None else ""
        msg = (
            f"the object at {_loc(ptr)} has {len(items)} properties; accepting them in any "
            f"order needs an automaton state per set of properties already written "
            f"({2 ** len(items):,} sets, each with its own copy of the property values), past the "
            f"budget of one object ({e.reason})"
        )
        if self.opts.property_order == "strict_any":
            raise UnsupportedSchemaError(
                f'{msg}. Pass property_order="any" (the default) to accept this object in '
                'the schema\'s declared order with a warning, or property_order="declared" '
                "(--property-order declared on the command line) for declared order everywhere.",
                keyword="properties",
                pointer=ptr,
            )
        order_fallback_warning(self.opts, ptr, msg)


def order_fallback_warning(opts: _Options, ptr: str, why: str) -> None:
    """The one warning (per compile) of an object that falls back from any order to
    declared order."""
    if ptr in opts.order_warned:
        return
    opts.order_warned.add(ptr)
    warnings.warn(
        OrderFallbackWarning(
            f"{why}: its properties are accepted in the schema's declared order only "
            f"(valid instances in another order are rejected) [object {_loc(ptr)}]",
            ptr,
        ),
        stacklevel=2,
    )


# Labels (by structure, rule count and state budget) whose byte DFA passed its state or
# work budget (`_dfa_size`), with the error's message: deterministic, so a label that recurs (a common
# property in many objects, across compiles) is refused again without its construction.
_OVER_BUDGET: dict = {}

# Budget of one any-order object (see `_OrderBudget`), measured in BENCHMARKS.md: about
# 0.4 ms of compile time per state for Llama-3 on two loaded CPU cores.
MAX_ORDER_SETS = 4096
# Refuse any order from floors of the labels' sizes where they decide it
# (`_Emitter._refused_by_floors`); False: always from the sizes (the tests compare).
EARLY_REFUSAL = True
MAX_ORDER_STATES = 20_000
# The same over all objects of one schema, in the order they are built: past it, the next
# objects fall back to declared order (each named by a warning) instead of making the
# schema's automaton, and its compile time, grow with every object.
MAX_SCHEMA_ORDER_STATES = 40_000


# A declared-order object of more properties than this is a flat automaton
# (`_Emitter._declared_flat`), not IR nested one level per property (printable as a regex,
# but every recursive pass over the IR recurses that deep: past ~250 the recursion limit).
# Below it the nested IR stays: at 64, citation-file-format's 71-property object as a flat
# automaton compiled past the 30 s deadline (12.7 s CPU nested; not yet diagnosed).
MAX_NESTED_CHAIN = 128

# Added to a deadline error met while sizing an any-order object's labels: the step that
# declared order does not take (buildkite: the deadline there; 24 s in all declared).
SIZING_HINT = (
    "; it was sizing an object's property values for any property order, which "
    'property_order="declared" does not do'
)

# Any-order labels kept whole (`_whole`); False: as they are (the same byte DFA, slower).
WHOLE_LABELS = True


def _whole(label):
    """``label`` as one IR node that sequences and alternations keep whole (their builders
    flatten and factor a `Seq` or an `Alt`): an automaton of one edge, the same language.
    The byte DFA built to size it (`_Emitter._dfa_size`) is then spliced wherever the
    counting construction copies it (`_byte_dfa._Bytes`), instead of its Thompson NFA
    (thousands of states for a property whose value is free JSON, once per set)."""
    if not WHOLE_LABELS or type(label) is Automaton or sf.is_never(label):
        return label
    return Automaton(edges=(((label, 1),), ()), start=0, finals=frozenset({1}))


class _OrderBudget(Exception):
    """The budget of one any-order object, raised past it: the states of its counting
    automaton (sets of properties written, with counts: ``MAX_ORDER_SETS``) and the
    byte-DFA states their edges add beyond declared order (``MAX_ORDER_STATES``): the byte
    automaton copies each edge's label, and the minimal DFA keeps a copy of a property
    value's states per set, so the estimate is the sum of the labels' minimal byte-DFA
    sizes over the edges (declared order: each label once). Nested objects count in
    their parent's labels with their own size."""

    def __init__(self, sizes, rest_size, wit_sizes):
        super().__init__()
        self.reason = ""
        self.states = 0
        self.sizes, self.rest_size, self.wit_sizes = sizes, rest_size, wit_sizes
        # declared order copies each label once: the budget bounds what any order adds
        self.declared = sum(sizes) + rest_size + sum(wit_sizes)

    def charge_schema(self, emitter) -> None:
        """Adds this object's estimate to the schema's total (``MAX_SCHEMA_ORDER_STATES``);
        past it, this object is refused any order too."""
        extra = max(self.states - self.declared, 0)
        if emitter.order_states + extra > MAX_SCHEMA_ORDER_STATES:
            self.reason = (
                f"the schema's objects in any order would add more than "
                f"{MAX_SCHEMA_ORDER_STATES:,} automaton states to declared order"
            )
            raise self
        emitter.order_states += extra

    def charge(self, states: int, nexts, w: bool, room: bool) -> None:
        """Adds the labels of one state's edges (``nexts``: its declared-property edges;
        ``room``: whether it has room for another property); ``states`` counting states."""
        self.states += (self.rest_size if room else 0) + sum(
            self.sizes[i] + (0 if w else self.wit_sizes[i]) for _, i in nexts
        )
        if states > MAX_ORDER_SETS:
            self.reason = f"more than {MAX_ORDER_SETS:,} states counting the properties written"
        elif self.states - self.declared > MAX_ORDER_STATES:
            self.reason = f"{MAX_ORDER_STATES:,} automaton states more than declared order"
        else:
            return
        raise self


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
