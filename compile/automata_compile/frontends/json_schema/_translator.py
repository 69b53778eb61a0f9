"""Schema → typed language: the traversal, references, combinators and conditionals."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from fractions import Fraction

from automata_compile._errors import InvalidSchemaError, SubsetWarning, UnsupportedSchemaError
from automata_compile.automata import NEVER
from automata_compile.automata import fsa as _fsa
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._content import (
    TooComplexError,
)
from automata_compile.frontends.json_schema._keywords import _dialect, _Keywords
from automata_compile.frontends.json_schema._numbers import _MAX_MODULUS, _modulus
from automata_compile.frontends.json_schema._one_of import one_of_subset
from automata_compile.frontends.json_schema._resolver import (
    _join_uri,
    _loc,
    _ptr_join,
    _Refuse,
    _Resolver,
)
from automata_compile.frontends.json_schema._type_algebra import (
    _arr_meet,
    _is_empty,
    _join,
    _meet,
    _negate,
    _obj_meet,
)
from automata_compile.frontends.json_schema._types import (
    _ARR_EV0,
    _BOTTOM,
    _FREE_ARR,
    _FREE_NUM,
    _FREE_OBJ,
    _OBJ_EV0,
    _T,
    _TOP,
    _Arr,
    _literal,
    _Num,
    _Obj,
    _only,
    _Unroll,
)

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$recursiveAnchor",
        "$defs",
        "definitions",
        "$vocabulary",
        "discriminator",
        "xml",
        "externalDocs",
    }
)
_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
# where a TooComplexError is attributed, in this order
_COMPLEX_KEYWORDS = (
    "allOf",
    "oneOf",
    "anyOf",
    "not",
    "if",
    "patternProperties",
    "propertyNames",
    "pattern",
    "format",
    "multipleOf",
    "contains",
    "$ref",
)
_DEFAULT_BASE = "https://automata-jax.invalid/schema.json"


@dataclasses.dataclass
class _Options:
    whitespace: str = "default"
    max_whitespace: int = 20
    max_filler: int = 20
    max_digits: int | None = 20
    max_nesting_depth: int = 2
    max_recursion_depth: int = 3
    strict: bool = True
    string_escapes: str = "standard"
    leap_seconds: str = "utc"
    assert_format: bool = True
    property_order: str = "any"
    # True: objects that declare properties and say nothing of others accept only those,
    # where that is a sound subset (`_closing`)
    closed_objects: bool = False
    # Where a keyword can only be enforced as a sound subset of its language: "warn" takes
    # the subset with a `SubsetWarning` naming it, "refuse" raises `UnsupportedSchemaError`.
    subsets: str = "warn"
    recursion: str = "stack"
    # per compile: objects forced to declared order (JSON pointers) after an any-order
    # attempt outgrew a whole-schema budget (part of the language), then the objects built in
    # any order and those already warned about (a log, left out of equality and `key`)
    declared_at: frozenset = frozenset()
    any_ordered: list = dataclasses.field(default_factory=list, compare=False)
    order_warned: set = dataclasses.field(default_factory=set, compare=False)
    # (keyword, pointer) of the sound subsets already warned about: one SubsetWarning each
    # per compile, however often the schema is translated (a retry, a shared $defs entry)
    subset_warned: set = dataclasses.field(default_factory=set, compare=False)
    # ("closed_objects", pointer) of the references `_closing` did not follow, warned once
    closing_warned: set = dataclasses.field(default_factory=set, compare=False)
    # A `_bitset_events.BitsetEvents` (hashed by identity): any-order objects spelled as a loop
    # with bitset events (docs/any_order_bitset.md); None (the default): the counting automaton.
    bitset: object = None
    # How null / true / false are spelled: "json", or "python" (None / True / False, for
    # the Python-call style of tool calls; everything else is the same in both).
    spelling: str = "json"

    def key(self) -> tuple:
        """The options that decide the language, as a hashable cache key."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self) if f.compare)

    def literals(self) -> tuple[str, str, str]:
        return ("None", "True", "False") if self.spelling == "python" else ("null", "true", "false")


class _Translator(_Keywords):
    def __init__(self, root, opts: _Options):
        self.opts = opts
        self.resolver = _Resolver(root)
        self.translated = 0  # subschemas translated (memo misses): the deadline's pace
        self.stack: list[tuple[int, int]] = []  # ($ref target id, instance depth)
        self.scope: list[str] = []  # dynamic scope: schema resources entered, outermost first
        text = json.dumps(root)
        self.dynamic = "$dynamicRef" in text
        self.track_ev = "unevaluated" in text
        self.depth = 0
        # translations by (node, base, dynamic scope), each with the $ref targets it looked
        # up and the stack entries of those targets it saw (`_context`): the only part of the
        # stack a translation reads, so a definition reached by many $ref paths is
        # translated once, not once per path
        self.memo: dict = {}
        self.refs_seen: set[int] = set()  # $ref targets looked up by the open translation
        # how many `non_monotone_part`s the open translation is inside, and whether it met
        # a remote reference (its language then depends on that: `_remote`)
        self.non_monotone = 0
        self.remote_met = False
        self.remote_left_out: list[tuple[str, str, str]] = []  # (keyword, pointer, reason)
        self.truncated: str | None = None
        # recursive $ref targets compiled as grammar rules (recursion="stack"): the rule id
        # of each target, and each rule's typed language and JSON pointer
        self.rule_ids: dict[int, int] = {}
        self.rule_types: list[_T | None] = []
        self.rule_ptrs: list[str] = []
        self.empty_at: str | None = None
        # the pointer where each typed language was first translated (a shared rule's name)
        self.first_at: dict[_T, str] = {}
        schema_uri = root.get("$schema", "") if isinstance(root, dict) else ""
        self.legacy_ref = _dialect(schema_uri) == "legacy"

    # -- refusals ------------------------------------------------------------------------------

    def refuse(self, keyword: str, ptr: str, reason: str):
        where = _loc(ptr)
        if self.opts.strict:
            raise UnsupportedSchemaError(
                f"{keyword!r} at {where} cannot be enforced exactly: {reason}. Pass strict=False to drop it (with a warning), or change the schema.",
                keyword=keyword,
                pointer=ptr,
            )
        warnings.warn(f"{keyword!r} at {where} is not enforced: {reason}", stacklevel=4)

    def subset(self, keyword: str, ptr: str, reason: str) -> None:
        """Enforce ``keyword`` at ``ptr`` as a sound subset of its language: warn by name
        (``subsets="warn"``, the default), or refuse (``subsets="refuse"``). ``reason`` says
        what the subset leaves out."""
        where = _loc(ptr)
        if self.opts.subsets == "refuse":
            raise UnsupportedSchemaError(
                f"{keyword!r} at {where} cannot be enforced exactly: {reason}. The default "
                "(subsets='warn') accepts a sound subset instead, with a SubsetWarning.",
                keyword=keyword,
                pointer=ptr,
            )
        if (keyword, ptr) in self.opts.subset_warned:
            return
        self.opts.subset_warned.add((keyword, ptr))
        warnings.warn(
            SubsetWarning(
                f"{keyword!r} at {where} is enforced as a sound subset: {reason}",
                ptr,
                keyword=keyword,
            ),
            stacklevel=4,
        )

    def invalid(self, ptr: str, msg: str):
        raise InvalidSchemaError(f"{_loc(ptr)}: {msg}", pointer=ptr)

    # -- entry -----------------------------------------------------------------------------------

    def schema(self, node, base: str, ptr: str) -> _T:
        with _fsa.location(_loc(ptr)):
            return self._entry(node, base, ptr)

    def _entry(self, node, base: str, ptr: str) -> _T:
        if node is True:
            return _TOP
        if node is False:
            return _BOTTOM
        if not isinstance(node, dict):
            self.invalid(
                ptr, f"a schema must be an object or a boolean, got {type(node).__name__} {node!r}"
            )
        if isinstance(node.get("$id"), str) and not node["$id"].startswith("#"):
            base = _join_uri(base, node["$id"]).split("#", 1)[0]
        key = (id(node), base, tuple(self.scope) if self.dynamic else ())
        entries = self.memo.setdefault(key, [])
        polarity = self.non_monotone > 0
        for out, seen, context, _, remote in entries:
            if self._context(seen) == context and (remote is None or remote == polarity):
                self.refs_seen |= seen
                self.remote_met |= remote is not None
                return out
        # one translation per distinct (subschema, context): the deadline is checked every 64
        # (renovate: 1,889 translations in 8-10 s, no check before this one)
        self.translated += 1
        if self.translated & 63 == 0:
            _fsa.check_time("the translation of the schema")
        entered = not self.scope or self.scope[-1] != base
        if entered:
            self.scope.append(base)
        outer, self.refs_seen = self.refs_seen, set()
        outer_remote, self.remote_met = self.remote_met, False
        try:
            out = self._schema(node, base, ptr)
        except _Unroll as e:
            e.pointer = ptr if e.pointer is None else e.pointer
            raise
        except TooComplexError as e:
            keyword = next((k for k in _COMPLEX_KEYWORDS if k in node), "allOf")
            self.refuse(
                keyword,
                _ptr_join(ptr, keyword),
                f"the constraints here outgrow the automaton budget ({e})",
            )
            out = _TOP
        finally:
            if entered:
                self.scope.pop()
            seen, self.refs_seen = self.refs_seen, outer | self.refs_seen
            remote = polarity if self.remote_met else None
            self.remote_met |= outer_remote
        if out.is_bottom() and node and self.empty_at is None:
            self.empty_at = ptr
        entries.append((out, frozenset(seen), self._context(seen), node, remote))
        self.first_at.setdefault(out, ptr)
        return out

    def _context(self, targets) -> tuple:
        """The stack entries of ``targets`` with their depths relative to the current
        one: what `_ref` reads of the stack (a target already open, how often, at which
        depth) when it meets them, so equal contexts give equal translations."""
        return tuple((t, d - self.depth) for t, d in self.stack if t in targets)

    @contextlib.contextmanager
    def non_monotone_part(self):
        """Translations of a part whose language, made smaller, can make the whole larger
        (``not``, an ``if`` condition, a ``oneOf`` branch, ``contains``): no subset of a
        value may be taken there (`_remote`)."""
        self.non_monotone += 1
        try:
            yield
        finally:
            self.non_monotone -= 1

    def sub(self, node, base, ptr, *, descend: bool) -> _T:
        if descend:
            self.depth += 1
        try:
            return self.schema(node, base, ptr)
        finally:
            if descend:
                self.depth -= 1

    def _schema(self, s: dict, base: str, ptr: str) -> _T:
        parts: list[_T] = []
        if "$schema" in s and _dialect(s["$schema"]) is None:
            self.refuse(
                "$schema",
                _ptr_join(ptr, "$schema"),
                f"the meta-schema {s['$schema']!r} is not a known JSON Schema dialect (it may change which keywords apply)",
            )
        if "$ref" in s:
            parts.append(self._ref(s["$ref"], base, _ptr_join(ptr, "$ref")))
            if self.legacy_ref:
                return parts[0]
        if "$dynamicRef" in s:
            p = _ptr_join(ptr, "$dynamicRef")
            parts.append(self._ref(s["$dynamicRef"], base, p, dynamic=True))
        if "$recursiveRef" in s:
            self.refuse(
                "$recursiveRef",
                _ptr_join(ptr, "$recursiveRef"),
                "draft 2019-09 recursive references are not supported (use $dynamicRef)",
            )
        if "type" in s:
            parts.append(self._type(s["type"], _ptr_join(ptr, "type")))
        if "enum" in s:
            vals = s["enum"]
            p = _ptr_join(ptr, "enum")
            if not isinstance(vals, list):
                self.invalid(p, "enum must be an array")
            if not vals:
                self.invalid(p, "enum is empty: no value can match")
            parts.append(_join(*(_literal(v, p) for v in vals)))
        if "const" in s:
            parts.append(_literal(s["const"], _ptr_join(ptr, "const")))
        num = self._numeric(s, ptr)
        if num is not None:
            parts.append(_only(nums=(num,)))
        string = self._string(s, ptr)
        if string is not None:
            parts.append(_only(string=string))
        parts.extend(self._array(s, base, ptr))
        parts.extend(self._object(s, base, ptr))
        for kw in ("allOf", "anyOf", "oneOf"):
            if kw in s:
                parts.append(self._combinator(kw, s[kw], base, _ptr_join(ptr, kw)))
        if "not" in s:
            p = _ptr_join(ptr, "not")
            with self.non_monotone_part():
                inner = self.sub(s["not"], base, p, descend=False)
            try:
                parts.append(_negate(inner))
            except (_Refuse, TooComplexError) as e:
                self.refuse(
                    "not",
                    p,
                    getattr(e, "reason", f"its complement outgrows the automaton budget ({e})"),
                )
        if "if" in s and ("then" in s or "else" in s or self.track_ev):  # a lone if annotates
            parts.append(self._conditional(s, base, ptr))
        out = _TOP
        for part in parts:
            out = _meet(out, part)
        if "multipleOf" in s and any(_modulus(m) > _MAX_MODULUS for n in out.nums for m in n.mults):
            self.refuse(
                "multipleOf",
                _ptr_join(ptr, "multipleOf"),
                f"multiples of {s['multipleOf']!r} need a remainder automaton with more than {_MAX_MODULUS} states",
            )
            out = out.replace(
                nums=tuple(
                    n.replace(mults=frozenset()) if n.values is None else n for n in out.nums
                )
            )
        if "unevaluatedProperties" in s:
            out = self._unevaluated_properties(out, s["unevaluatedProperties"], base, ptr)
        if "unevaluatedItems" in s:
            out = self._unevaluated_items(out, s["unevaluatedItems"], base, ptr)
        if s.get("nullable") is True:
            out = _join(out, _T(null=True))
        return out

    def _unevaluated(self, keyword: str, parts, all_at: int, sub, base, ptr):
        """(schema of the unevaluated, ids of the parts whose evaluated set is unknown).

        ``part.ev[all_at]`` says everything was evaluated, ``part.ev[-1]`` that the set is
        exact. A part is unknown where an ``anyOf`` below could not be split into exclusive
        branches; that is refused once (in lenient mode the part stays unconstrained)."""
        p = _ptr_join(ptr, keyword)
        u = self.sub(sub, base, p, descend=True)
        unknown = {id(x) for x in parts if not x.ev[all_at] and not x.ev[-1]}
        if unknown:
            self.refuse(
                keyword,
                p,
                "an anyOf below it could not be split into exclusive branches, so what it "
                "evaluated is unknown",
            )
        return u, unknown

    def _unevaluated_properties(self, out: _T, sub, base, ptr) -> _T:
        """Names that no keyword here evaluated (in-place subschemas included) must match."""

        def restrict(o: _Obj, u: _T):
            names, keys, _, _ = o.ev
            rest = [(keys, None)] if not sf.is_never(keys) else []
            if not u.is_bottom():
                rest.append((sf.complement(keys), None if u.is_top() else u))
            return _obj_meet(o, _Obj(tuple((n, None) for n in sorted(names)), rest=tuple(rest)))

        objects = self._close_unevaluated(
            "unevaluatedProperties",
            out,
            out.objects,
            2,
            restrict,
            sub,
            base,
            ptr,
            closed_ev=(frozenset(), NEVER, True, True),
        )
        return out.replace(objects=objects)

    def _unevaluated_items(self, out: _T, sub, base, ptr) -> _T:
        """Items that no keyword here evaluated (prefixItems, items, contains) must match."""

        def restrict(a: _Arr, u: _T):
            count, _, cons, _ = a.ev
            return _arr_meet(a, _Arr((None,) * count, _join(u, *cons)))

        arrays = self._close_unevaluated(
            "unevaluatedItems",
            out,
            out.arrays,
            1,
            restrict,
            sub,
            base,
            ptr,
            closed_ev=(0, True, (), True),
        )
        return out.replace(arrays=arrays)

    def _close_unevaluated(
        self, keyword: str, out: _T, parts, all_at: int, restrict, sub, base, ptr, *, closed_ev
    ):
        """``parts`` (the objects or the arrays of ``out``) with ``keyword`` applied: each part
        whose evaluated set is known and not everything is ``restrict(part, schema)`` (dropped
        when that is empty); every part's evaluation record is then ``closed_ev`` (all
        evaluated)."""
        if out.calls:
            raise _Unroll(f"{keyword} beside a recursive $ref")
        u, unknown = self._unevaluated(keyword, parts, all_at, sub, base, ptr)
        kept = []
        for x in parts:
            if not x.ev[all_at] and id(x) not in unknown:
                x = restrict(x, u)
                if x is None or x.surely_empty():
                    continue
            kept.append(x.replace(ev=closed_ev))
        return tuple(kept)

    def _ref(self, ref, base, ptr, dynamic: bool = False) -> _T:
        keyword = "$dynamicRef" if dynamic else "$ref"
        if not isinstance(ref, str):
            self.invalid(ptr, f"{keyword} must be a string")
        try:
            node, nbase, nptr = self.resolver.resolve(ref, base, ptr)
        except _Refuse as e:
            return self._remote(keyword, ptr, e.reason)
        doc, _, frag = _join_uri(base, ref).partition("#")
        if dynamic and frag and not frag.startswith("/"):
            if f"{doc}#{frag}" in self.resolver.dynamic_anchors:
                # the initial target is a $dynamicAnchor: the outermost resource of the
                # dynamic scope with a $dynamicAnchor of that name is the target
                for resource in self.scope:
                    hit = self.resolver.dynamic_anchors.get(f"{resource}#{frag}")
                    if hit is not None:
                        node, nptr, nbase = hit
                        break
        target = id(node)
        self.refs_seen.add(target)
        if (target, self.depth) in self.stack:
            self.invalid(
                ptr, f"$ref {ref!r} loops back to itself without descending into the instance"
            )
        if self.opts.recursion == "stack" and not self.dynamic:
            if any(t == target for t, _ in self.stack):
                return _T(calls={self._rule_id(target, nptr)})
        elif sum(1 for t, _ in self.stack if t == target) > self.opts.max_recursion_depth:
            self.truncated = self.truncated or ptr
            return _BOTTOM
        self.stack.append((target, self.depth))
        try:
            out = self.schema(node, nbase, nptr)
        finally:
            self.stack.pop()
        k = self.rule_ids.get(target)
        if k is not None and self.rule_types[k] is None:
            # the outermost expansion of a recursive target is its rule's language (with
            # no truncation, a subschema's language does not depend on the path to it)
            self.rule_types[k] = out
        return out

    def _remote(self, keyword: str, ptr: str, reason: str) -> _T:
        """A reference outside the schema (``reason``; never fetched): no value there is
        accepted, a sound subset named by a `SubsetWarning` (a property whose schema is in
        another file is left out), where every part around it is monotone. Under ``not``, an ``if`` condition, ``oneOf`` or
        ``contains`` leaving values out could accept invalid instances: refused there
        (``strict=False``: not enforced, with a warning)."""
        self.remote_met = True
        if self.non_monotone:
            self.refuse(
                keyword,
                ptr,
                f"{reason}; under not, an if condition, oneOf or contains, leaving its "
                "values out could accept invalid instances",
            )
            return _TOP
        self.remote_left_out.append((keyword, ptr, reason))
        self.subset(
            keyword,
            ptr,
            f"{reason}; no value is accepted where it applies (as if it were false: an "
            "optional property is left out, an array there is empty)",
        )
        return _BOTTOM

    def _rule_id(self, target: int, ptr: str) -> int:
        k = self.rule_ids.get(target)
        if k is None:
            k = self.rule_ids[target] = len(self.rule_types)
            self.rule_types.append(None)
            self.rule_ptrs.append(ptr)
        return k

    def _type(self, t, ptr) -> _T:
        names = t if isinstance(t, list) else [t]
        out = []
        for name in names:
            if name not in _TYPES:
                self.invalid(ptr, f"unknown type {name!r} (expected one of {', '.join(_TYPES)})")
            out.append(
                {
                    "null": _T(null=True),
                    "boolean": _T(bools={True, False}),
                    "integer": _T(nums=(_Num(mults=frozenset({Fraction(1)})),)),
                    "number": _T(nums=(_FREE_NUM,)),
                    "string": _T(string=sf.ANY_STRING),
                    "array": _T(arrays=(_FREE_ARR,)),
                    "object": _T(objects=(_FREE_OBJ,)),
                }[name]
            )
        if not out:
            self.invalid(ptr, "type is an empty list")
        return _join(*out)

    def _combinator(self, kw, subs, base, ptr) -> _T:
        if not isinstance(subs, list) or not subs:
            self.invalid(ptr, f"{kw} must be a non-empty array of schemas")
        with self.non_monotone_part() if kw == "oneOf" else contextlib.nullcontext():
            ts = [self.sub(x, base, _ptr_join(ptr, i), descend=False) for i, x in enumerate(subs)]
        if kw == "allOf":
            out = _TOP
            for t in ts:
                out = _meet(out, t)
            return out
        if kw == "anyOf":
            return self._any_of(ts, ptr)
        # oneOf: exactly one branch
        live = [(i, t) for i, t in enumerate(ts) if not t.is_bottom()]
        ts_live = [t for _, t in live]
        try:
            overlap = [
                (i, j)
                for i in range(len(ts_live))
                for j in range(i + 1, len(ts_live))
                if not _is_empty(_meet(ts_live[i], ts_live[j]))
            ]
            if not overlap:
                return _join(*ts_live)
            negs = [_negate(t) for t in ts_live]
            out = []
            for i, t in enumerate(ts_live):
                x = t
                for j in range(len(ts_live)):
                    if j != i:
                        x = _meet(x, negs[j])
                out.append(x)
            return _join(*out)
        except (_Refuse, TooComplexError):
            pass
        out, notes = one_of_subset(ts_live, [i for i, _ in live])
        if out.is_bottom():
            self.refuse(
                "oneOf",
                ptr,
                "its branches overlap, the overlap cannot be excluded exactly, and the sound "
                f"subset is empty ({'; '.join(notes)}); it is treated as anyOf",
            )
            return _join(*ts_live)
        if notes:
            self.subset(
                "oneOf",
                ptr,
                "its branches overlap and the overlap cannot be excluded exactly, so a value "
                "matching one branch is accepted only where it provably matches no other "
                f"branch: {'; '.join(notes)}",
            )
        return out

    def _any_of(self, ts: list, ptr: str) -> _T:
        """A union; where unevaluated* may look at it, split into exclusive combinations of
        branches (an instance valid under several branches has all their annotations)."""
        ts = [t for t in ts if not t.is_bottom()]
        annotated = any(o.ev != _OBJ_EV0 for t in ts for o in t.objects) or any(
            a.ev != _ARR_EV0 for t in ts for a in t.arrays
        )
        if not self.track_ev or not annotated or len(ts) < 2:
            return _join(*ts)
        if len(ts) <= 4:
            try:
                negs = [_negate(t) for t in ts]
                terms = []
                for mask in range(1, 1 << len(ts)):
                    x = _TOP
                    for i, t in enumerate(ts):
                        x = _meet(x, t if mask >> i & 1 else negs[i])
                    terms.append(x)
                return _join(*terms)
            except (_Refuse, TooComplexError):
                pass
        out = _join(*ts)
        return out.replace(
            objects=tuple(o.replace(ev=o.ev[:3] + (False,)) for o in out.objects),
            arrays=tuple(a.replace(ev=a.ev[:3] + (False,)) for a in out.arrays),
        )

    def _conditional(self, s, base, ptr) -> _T:
        with self.non_monotone_part():
            cond = self.sub(s["if"], base, _ptr_join(ptr, "if"), descend=False)
        then = self.sub(s.get("then", True), base, _ptr_join(ptr, "then"), descend=False)
        other = self.sub(s.get("else", True), base, _ptr_join(ptr, "else"), descend=False)
        try:
            return _join(_meet(cond, then), _meet(_negate(cond), other))
        except (_Refuse, TooComplexError) as e:
            self.refuse(
                "if",
                _ptr_join(ptr, "if"),
                f"its complement is not expressible ({getattr(e, 'reason', 'too complex')})",
            )
            return _join(then, other)
