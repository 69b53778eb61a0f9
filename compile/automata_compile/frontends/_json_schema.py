"""JSON Schema -> regular expression (Python `re` syntax, full-match semantics).

`json_schema_to_regex(schema, **options)` returns a regex whose language is the set of
JSON texts (in the accepted surface syntax, below) that are valid instances of the
schema; `compile_json_schema(schema, vocab, **options)` compiles it to a `TokenDFA`.

How it works: each (sub)schema is translated into a *typed language* (`_T`): for each
JSON type, the set of allowed values as a union of constraint records (numbers: interval,
multipleOf, finite sets; strings: a regex tree over decoded characters; arrays and
objects: per-position / per-property schemas, counts). Keywords are intersections of such
languages (`allOf` and sibling keywords), `anyOf` a union, `not`/`if`/`oneOf` use
complements where they are expressible. The result is printed as a regex; strings go
through `_schema_formats` (ECMA-262 patterns, formats, JSON escapes).

Accepted surface syntax (a restriction of JSON's spelling, never of the values):
  * properties appear in schema order: the declared ``properties`` in definition order
    (after merging ``allOf``), then required-but-undeclared names, then any other
    properties (``additionalProperties``/``patternProperties``), in any order; a declared
    name never repeats. Other names may repeat (a regex cannot rule it out): every
    occurrence is validated, but ``minProperties`` counts occurrences and ``not``/``oneOf``/
    ``if`` judge each one, so a text with a repeated name (which RFC 8259 leaves without a
    defined meaning) can parse, last value winning, to an invalid instance.
  * ``enum``/``const`` objects keep the key order of the literal.
  * numbers: an unconstrained ``number`` accepts the full JSON grammar; an unconstrained
    ``integer`` accepts ``12``, ``12.0``/``12.00`` (a float with zero fraction is an integer
    per the specification) and exponent forms from 1e16 to 1.7e308 (``1e+16``, as
    ``json.dumps`` writes large floats; larger ones overflow a double); a number with any
    numeric keyword (bounds, ``multipleOf``, ``not``) accepts plain decimals only (no
    exponent). ``enum``/``const`` numbers accept every plain spelling (``1``, ``1.0``,
    ``-0``) and the ``json.dumps`` spelling of the float.
  * strings: see `_schema_formats.encode_json_string` (option ``string_escapes``).

Options (all keyword-only):
  whitespace: ``"default"`` accepts ``json.dumps`` output with its default separators
    (``", "`` and ``": "``) and compact output (``","`` and ``":"``), i.e. one optional
    space after ``,`` and ``:`` and nowhere else; ``"compact"`` accepts no whitespace at
    all; ``"pretty"`` accepts up to ``max_whitespace`` characters of JSON whitespace
    (space, tab, newline, carriage return) around every structural character (what
    ``json.dumps(indent=...)`` writes, within that bound).
  max_whitespace: bound of each whitespace run in ``"pretty"`` mode (default 20), so a
    model cannot loop on whitespace.
  max_nesting_depth: schema-free values (under ``{}``, ``true``, absent
    ``additionalProperties``, ``items``, ...) nest at most this many levels of arrays and
    objects (default 2). Each level multiplies the automaton of every free value by about
    two; prefer ``additionalProperties: false`` where extra properties are not wanted.
  max_recursion_depth: a recursive ``$ref`` is expanded at most this many times inside
    itself (default 3); deeper branches are cut (a recursive structure then has to end).
  strict: ``True`` (default) raises `UnsupportedSchemaError` for anything that cannot be
    enforced exactly; ``False`` drops it (accepting more) with a `warnings.warn` naming
    what is not enforced and where (``format: hostname`` is then enforced as its subset,
    see `_schema_formats.FORMAT_LIMITS`, rather than dropped).
  string_escapes: ``"standard"`` (default), ``"any"`` or ``"minimal"``; see
    `encode_json_string`.
  leap_seconds: for ``time``/``date-time``: ``"utc"`` (default) accepts second 60 only as
    ``23:59:60`` with offset ``Z``/``+00:00``/``-00:00``; ``"exact"`` accepts every valid
    leap second (local time 23:59:60 UTC at any offset; about 1,500 more automaton
    states per field); ``"none"`` rejects second 60.
  assert_format: ``True`` (default) enforces ``format`` (the specification's optional
    format-assertion behaviour); ``False`` treats it as an annotation, as a 2020-12
    validator does by default. Unknown format names are annotations either way.

Formats enforced exactly: ``date-time``, ``date``, ``time`` (see ``leap_seconds``),
``duration``, ``email`` (RFC 5321 mailbox, address literals included), ``ipv4``, ``ipv6``,
``uri``, ``uri-reference``, ``iri``, ``iri-reference``, ``uri-template``, ``uuid``,
``json-pointer``, ``relative-json-pointer``.

References: local ``$ref`` (JSON pointers, ``$anchor``, embedded ``$id`` resources,
``$defs``/``definitions``), and ``$dynamicRef``/``$dynamicAnchor`` resolved along the
static evaluation path; recursion is unrolled to ``max_recursion_depth``. ``$schema``
naming draft-04/06/07 makes ``$ref`` override its siblings; 2019-09, 2020-12 and the
OpenAPI 3.1 dialect are 2020-12; any other meta-schema is refused (it may change which
keywords apply). ``unevaluatedProperties``/``unevaluatedItems`` are exact: each object and
array alternative carries what was evaluated, and ``anyOf`` is split into exclusive
combinations of its branches where the schema uses them.

Refused in strict mode (`UnsupportedSchemaError`, with ``keyword`` and ``pointer``):
``uniqueItems: true`` (unless at most one item), remote ``$ref``/``$dynamicRef`` (documents
outside the schema), ``$recursiveRef``, unknown ``$schema`` meta-schemas, ECMA patterns
with backreferences, lookaround or ``\\b``, ``format`` values without an exact regex
(``hostname`` because of Punycode A-labels, ``idn-hostname``, ``idn-email``, ``regex``),
``not``/``if``/``oneOf`` whose complement is not expressible (e.g. objects that must have
some undeclared property), ``unevaluated*`` under an ``anyOf`` of more than four annotated
branches, and constraints whose automaton outgrows a budget (``multipleOf`` whose
remainder automaton needs more than 400 states, intersections of large string languages).
Bad schemas raise `InvalidSchemaError` with the JSON pointer: non-schema values,
unresolvable local ``$ref``, ``$ref`` cycles, an empty ``enum``, contradictory bounds
(``minimum > maximum``, ``minLength > maxLength``, ``minItems > maxItems``, ...), and a
schema no JSON value satisfies. Messages show pointers as URI fragments (``#/items``).

Example:
  >>> import re
  >>> from automata_compile import json_schema_to_regex
  >>> rx = json_schema_to_regex({"type": "object", "properties": {"n": {"type": "integer",
  ...     "minimum": 1}}, "required": ["n"], "additionalProperties": False})
  >>> bool(re.fullmatch(rx, '{"n": 12}')), bool(re.fullmatch(rx, '{"n":0}'))
  (True, False)
"""

from __future__ import annotations

import dataclasses
import json
import math
import urllib.parse
import warnings
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

from automata_compile._errors import InvalidSchemaError, UnsupportedSchemaError
from automata_compile.frontends import _schema_formats as sf
from automata_compile.frontends._schema_formats import (
    EPS,
    NEVER,
    Node,
    TooComplexError,
    alt,
    char,
    chars,
    lit,
    opt,
    rep,
    seq,
    star,
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
_MAX_DNF = 256
_MAX_MODULUS = 400


class _Refuse(Exception):
    """Internal: a construct that cannot be expressed exactly (becomes a refusal)."""

    def __init__(self, keyword: str, reason: str):
        self.keyword = keyword
        self.reason = reason
        super().__init__(reason)


# ------------------------------------------------------------------------------------------
# typed languages
# ------------------------------------------------------------------------------------------


class _Hashed:
    """Frozen record with a cached structural hash (records nest deeply)."""

    __slots__ = ("_h",)
    _fields: tuple[str, ...] = ()

    def _init(self, **kw):
        for k in self._fields:
            object.__setattr__(self, k, kw[k])
        object.__setattr__(self, "_h", hash((type(self).__name__, *(kw[k] for k in self._fields))))

    def __setattr__(self, k, v):
        raise AttributeError("immutable")

    def __hash__(self):
        return self._h

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not type(self) or other._h != self._h:
            return False
        return all(getattr(self, k) == getattr(other, k) for k in self._fields)

    def replace(self, **kw):
        d = {k: getattr(self, k) for k in self._fields}
        d.update(kw)
        return type(self)(**d)


class _Num(_Hashed):
    """A set of numbers: bounds, multiples, exclusions, or a finite set of values."""

    __slots__ = ("lo", "lo_excl", "hi", "hi_excl", "mults", "not_mults", "values", "excluded")
    _fields = __slots__

    def __init__(
        self,
        lo=None,
        lo_excl=False,
        hi=None,
        hi_excl=False,
        mults=frozenset(),
        not_mults=frozenset(),
        values=None,
        excluded=frozenset(),
    ):
        if mults:
            mults = frozenset(_reduce_mults(mults))
        if values is not None:
            probe = dict(
                lo=lo,
                lo_excl=lo_excl,
                hi=hi,
                hi_excl=hi_excl,
                mults=mults,
                not_mults=not_mults,
                excluded=excluded,
            )
            values = frozenset(v for v in values if _num_ok(v, **probe))
            lo = hi = None
            lo_excl = hi_excl = False
            mults = not_mults = excluded = frozenset()
        self._init(
            lo=lo,
            lo_excl=lo_excl,
            hi=hi,
            hi_excl=hi_excl,
            mults=mults,
            not_mults=not_mults,
            values=values,
            excluded=excluded,
        )

    @property
    def integer(self) -> bool:
        return any(m.denominator == 1 for m in self.mults)

    def is_free(self) -> bool:
        return self == _FREE_NUM

    def surely_empty(self) -> bool:
        if self.values is not None:
            return not self.values
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            if lo > hi or (lo == hi and (self.lo_excl or self.hi_excl)):
                return True
            for m in self.mults:
                q = Fraction(lo) / m
                first = math.ceil(q)
                if self.lo_excl and first == q:
                    first += 1
                x = first * m
                if x > Fraction(hi) or (self.hi_excl and x == Fraction(hi)):
                    return True
        return False


def _reduce_mults(mults) -> list[Fraction]:
    """Keeps one least common multiple (multiples of m are multiples of m's divisors)."""
    ms = [Fraction(m) for m in mults]
    num = 0
    den = 0
    for m in ms:
        num = m.numerator if num == 0 else math.lcm(num, m.numerator)
        den = m.denominator if den == 0 else math.gcd(den, m.denominator)
    return [Fraction(num, den)]


def _num_ok(v: Decimal, *, lo, lo_excl, hi, hi_excl, mults, not_mults, excluded) -> bool:
    if lo is not None and (v < lo or (lo_excl and v == lo)):
        return False
    if hi is not None and (v > hi or (hi_excl and v == hi)):
        return False
    f = Fraction(v)
    if any((f / m).denominator != 1 for m in mults):
        return False
    if any((f / m).denominator == 1 for m in not_mults):
        return False
    return v not in excluded


class _Arr(_Hashed):
    """Arrays: per-position schemas, the schema of the other items, length bounds and
    ``contains`` counts ``(schema, min, max, first position counted, JSON pointer)``.
    ``None`` = any. ``ev`` records what the schema evaluated (for ``unevaluatedItems``):
    ``(prefix positions, all items, contains schemas, exact)``; ``exact`` is False where an
    ``anyOf`` could not be split into exclusive branches."""

    __slots__ = ("prefix", "items", "min", "max", "contains", "ev")
    _fields = __slots__

    def __init__(self, prefix=(), items=None, min=0, max=None, contains=(), ev=None):
        ev = _ARR_EV0 if ev is None else ev
        if items is not None and items.is_bottom():
            max = len(prefix) if max is None else min_(max, len(prefix))
        for i, p in enumerate(prefix):
            if p is not None and p.is_bottom():
                max = i if max is None else min_(max, i)
                break
        if max is not None:
            prefix = prefix[:max]
            if len(prefix) >= max:
                items = None
        while prefix and prefix[-1] == items:
            prefix = prefix[:-1]
        self._init(
            prefix=tuple(prefix), items=items, min=min, max=max, contains=tuple(contains), ev=ev
        )

    def at(self, i: int):
        return self.prefix[i] if i < len(self.prefix) else self.items

    def surely_empty(self) -> bool:
        return self.max is not None and self.min > self.max


def min_(a, b):
    return a if a <= b else b


_ARR_EV0 = (0, False, (), True)
_OBJ_EV0 = (frozenset(), NEVER, False, True)


def _arr_ev_union(a, b):
    return (max(a[0], b[0]), a[1] or b[1], tuple(dict.fromkeys(a[2] + b[2])), a[3] and b[3])


def _obj_ev_union(a, b):
    return (a[0] | b[0], alt(a[1], b[1]), a[2] or b[2], a[3] and b[3])


class _Obj(_Hashed):
    """Objects: declared properties (in order; a BOTTOM schema means the name must be
    absent), required names, rules ``(key language, schema)`` for the other names (their
    key languages are disjoint; a name no rule matches is forbidden), witness rules of
    which at least one other property must match, and count bounds. ``None`` = any.
    ``ev`` records the evaluated names (for ``unevaluatedProperties``): ``(names, key
    language, all names, exact)``."""

    __slots__ = ("props", "required", "rest", "need", "min", "max", "ev")
    _fields = __slots__

    def __init__(
        self, props=(), required=frozenset(), rest=None, need=(), min=0, max=None, ev=None
    ):
        ev = _OBJ_EV0 if ev is None else ev
        if rest is None:
            rest = ((sf.ANY_STRING, None),)
        props = list(props)
        names = {n for n, _ in props}
        for name in dict.fromkeys(required):  # keeps the order of `required`
            if name not in names:
                props.append((name, _rest_schema(rest, name)))
        self._init(
            props=tuple(props),
            required=frozenset(required),
            rest=tuple(rest),
            need=tuple(need),
            min=min,
            max=max,
            ev=ev,
        )

    def schema_for(self, name: str):
        for n, s in self.props:
            if n == name:
                return s
        return _rest_schema(self.rest, name)

    def surely_empty(self) -> bool:
        if self.max is not None and (self.min > self.max or len(self.required) > self.max):
            return True
        return any(n in self.required and s is not None and s.is_bottom() for n, s in self.props)


def _rest_schema(rest, name: str):
    for key, s in rest:
        if sf.content_matches(key, name):
            return s
    return _BOTTOM


class _T(_Hashed):
    """A typed language: for each JSON type, the allowed values."""

    __slots__ = ("null", "bools", "nums", "string", "arrays", "objects")
    _fields = __slots__

    def __init__(self, null=False, bools=frozenset(), nums=(), string=NEVER, arrays=(), objects=()):
        nums = tuple(dict.fromkeys(n for n in nums if not n.surely_empty()))
        if any(n.is_free() for n in nums):
            nums = (_FREE_NUM,)
        arrays = tuple(dict.fromkeys(a for a in arrays if not a.surely_empty()))
        if _FREE_ARR in arrays:
            arrays = (_FREE_ARR,)
        objects = tuple(dict.fromkeys(o for o in objects if not o.surely_empty()))
        if _FREE_OBJ in objects:
            objects = (_FREE_OBJ,)
        if len(nums) > _MAX_DNF or len(arrays) > _MAX_DNF or len(objects) > _MAX_DNF:
            raise TooComplexError("too many alternatives")
        self._init(
            null=null,
            bools=frozenset(bools),
            nums=nums,
            string=string,
            arrays=arrays,
            objects=objects,
        )

    def is_bottom(self) -> bool:
        return self == _BOTTOM

    def is_top(self) -> bool:
        return self == _TOP


_FREE_NUM = _Num()
_FREE_ARR = _Arr()
_FREE_OBJ = _Obj()
_BOTTOM = _T()
_TOP = _T(True, {True, False}, (_FREE_NUM,), sf.ANY_STRING, (_FREE_ARR,), (_FREE_OBJ,))


def _top(t):
    return _TOP if t is None else t


def _only(**kw) -> _T:
    """TOP restricted on the given types."""
    base = dict(
        null=True,
        bools={True, False},
        nums=(_FREE_NUM,),
        string=sf.ANY_STRING,
        arrays=(_FREE_ARR,),
        objects=(_FREE_OBJ,),
    )
    base.update(kw)
    return _T(**base)


# -- meet / join / negate ------------------------------------------------------------------


def _meet(a, b) -> _T:
    a, b = _top(a), _top(b)
    if a is b or b.is_top() or a.is_bottom():
        return a
    if a.is_top() or b.is_bottom():
        return b
    return _meet_cached(a, b)


_MEET_CACHE: dict = {}


def _meet_cached(a: _T, b: _T) -> _T:
    key = (a, b)
    hit = _MEET_CACHE.get(key)
    if hit is not None:
        return hit
    nums = _pairs(a.nums, b.nums, _FREE_NUM, _num_meet)
    arrays = _pairs(a.arrays, b.arrays, _FREE_ARR, _arr_meet)
    objects = _pairs(a.objects, b.objects, _FREE_OBJ, _obj_meet)
    out = _T(
        a.null and b.null,
        a.bools & b.bools,
        nums,
        sf.intersect(a.string, b.string),
        arrays,
        objects,
    )
    if len(_MEET_CACHE) > 20000:
        _MEET_CACHE.clear()
    _MEET_CACHE[key] = out
    return out


def _pairs(xs, ys, free, meet):
    if len(xs) == 1 and xs[0] == free:
        return ys
    if len(ys) == 1 and ys[0] == free:
        return xs
    out = []
    for x in xs:
        for y in ys:
            z = meet(x, y)
            if z is not None and not z.surely_empty():
                out.append(z)
    return out


def _join(*ts) -> _T:
    ts = [_top(t) for t in ts]
    ts = [t for t in ts if not t.is_bottom()]
    if not ts:
        return _BOTTOM
    if len(ts) == 1:
        return ts[0]
    if any(t.is_top() for t in ts):
        return _TOP
    nums = [n for t in ts for n in t.nums]
    finite = [n for n in nums if n.values is not None]
    if len(finite) > 1:
        nums = [n for n in nums if n.values is None] + [
            _Num(values=frozenset().union(*(n.values for n in finite)))
        ]
    return _T(
        any(t.null for t in ts),
        frozenset().union(*(t.bools for t in ts)),
        nums,
        alt(*(t.string for t in ts)),
        [x for t in ts for x in t.arrays],
        [x for t in ts for x in t.objects],
    )


def _num_meet(a: _Num, b: _Num):
    if a.values is not None or b.values is not None:
        vals = a.values if a.values is not None else b.values
        other = b if a.values is not None else a
        if other.values is not None:
            return _Num(values=a.values & b.values)
        return _Num(
            values=vals,
            lo=other.lo,
            lo_excl=other.lo_excl,
            hi=other.hi,
            hi_excl=other.hi_excl,
            mults=other.mults,
            not_mults=other.not_mults,
            excluded=other.excluded,
        )
    lo, lo_excl = a.lo, a.lo_excl
    if b.lo is not None and (lo is None or b.lo > lo or (b.lo == lo and b.lo_excl)):
        lo, lo_excl = b.lo, b.lo_excl
    hi, hi_excl = a.hi, a.hi_excl
    if b.hi is not None and (hi is None or b.hi < hi or (b.hi == hi and b.hi_excl)):
        hi, hi_excl = b.hi, b.hi_excl
    return _Num(
        lo=lo,
        lo_excl=lo_excl,
        hi=hi,
        hi_excl=hi_excl,
        mults=a.mults | b.mults,
        not_mults=a.not_mults | b.not_mults,
        excluded=a.excluded | b.excluded,
    )


def _arr_meet(a: _Arr, b: _Arr):
    n = max(len(a.prefix), len(b.prefix))
    prefix = tuple(_meet(a.at(i), b.at(i)) for i in range(n))
    items = _meet(a.items, b.items) if (a.items is not None or b.items is not None) else None
    mx = b.max if a.max is None else (a.max if b.max is None else min_(a.max, b.max))
    return _Arr(
        prefix,
        items,
        max(a.min, b.min),
        mx,
        tuple(dict.fromkeys(a.contains + b.contains)),
        _arr_ev_union(a.ev, b.ev),
    )


def _obj_meet(a: _Obj, b: _Obj):
    if a.need and b.need:
        raise TooComplexError("two existential property constraints")
    names = list(dict.fromkeys([n for n, _ in a.props] + [n for n, _ in b.props]))
    props = [(n, _meet(a.schema_for(n), b.schema_for(n))) for n in names]
    rest = []
    for ka, sa in a.rest:
        for kb, sb in b.rest:
            k = sf.intersect(ka, kb)
            if sf.is_empty(k):
                continue
            s = _meet(sa, sb)
            if not s.is_bottom():
                rest.append((k, None if s.is_top() else s))
    need = []
    for side, other in ((a, b), (b, a)):
        if not side.need:
            continue
        own = {n for n, _ in side.props}
        for kw, sw in side.need:
            for ko, so in other.rest:
                k = sf.intersect(kw, ko)
                if not sf.is_empty(k):
                    s = _meet(sw, so)
                    if not s.is_bottom():
                        need.append((k, s))
            for n, so in other.props:
                if n not in own and sf.content_matches(kw, n):
                    s = _meet(sw, so)
                    if not s.is_bottom():
                        need.append((lit(n), s))
        if not need:
            return None
    mx = b.max if a.max is None else (a.max if b.max is None else min_(a.max, b.max))
    return _Obj(
        props,
        a.required | b.required,
        tuple(rest),
        tuple(need),
        max(a.min, b.min),
        mx,
        _obj_ev_union(a.ev, b.ev),
    )


def _negate(t) -> _T:
    t = _top(t)
    if t.is_top():
        return _BOTTOM
    if t.is_bottom():
        return _TOP
    nums = [_FREE_NUM]
    for n in t.nums:
        nums = _pairs(nums, _num_negate(n), _FREE_NUM, _num_meet) if nums else []
    arrays = [_FREE_ARR]
    for a in t.arrays:
        arrays = _pairs(arrays, _arr_negate(a), _FREE_ARR, _arr_meet) if arrays else []
    objects = [_FREE_OBJ]
    for o in t.objects:
        objects = _pairs(objects, _obj_negate(o), _FREE_OBJ, _obj_meet) if objects else []
    return _T(
        not t.null,
        frozenset({True, False}) - t.bools,
        nums,
        sf.complement(t.string),
        arrays,
        objects,
    )


def _num_negate(n: _Num) -> list:
    if n.values is not None:
        return [_Num(excluded=n.values)]
    out = []
    if n.lo is not None:
        out.append(_Num(hi=n.lo, hi_excl=not n.lo_excl))
    if n.hi is not None:
        out.append(_Num(lo=n.hi, lo_excl=not n.hi_excl))
    out.extend(_Num(not_mults=frozenset({m})) for m in n.mults)
    out.extend(_Num(mults=frozenset({m})) for m in n.not_mults)
    if n.excluded:
        out.append(_Num(values=n.excluded))
    return out


def _arr_negate(a: _Arr) -> list:
    out = []
    if a.min > 0:
        out.append(_Arr(max=a.min - 1))
    if a.max is not None:
        out.append(_Arr(min=a.max + 1))
    for i, p in enumerate(a.prefix):
        if p is not None:
            np_ = _negate(p)
            if not np_.is_bottom():
                out.append(_Arr(prefix=(None,) * i + (np_,), min=i + 1))
    if a.items is not None:
        ni = _negate(a.items)
        if not ni.is_bottom():
            out.append(_Arr(contains=((ni, 1, None, len(a.prefix), ""),)))
    for c, mn, mx, start, ptr in a.contains:
        if mn > 0:
            out.append(_Arr(contains=((c, 0, mn - 1, start, ptr),)))
        if mx is not None:
            out.append(_Arr(contains=((c, mx + 1, None, start, ptr),)))
    return out


def _obj_negate(o: _Obj) -> list:
    if o.need:
        raise _Refuse("not", "the complement of an existential property constraint")
    out = []
    if o.min > 0:
        out.append(_Obj(max=o.min - 1))
    if o.max is not None:
        out.append(_Obj(min=o.max + 1))
    names = [n for n, _ in o.props]
    for n, s in o.props:
        if n in o.required:
            out.append(_Obj(props=((n, _BOTTOM),)))
        ns = _negate(s)
        if not ns.is_bottom():
            out.append(_Obj(props=((n, ns),), required=frozenset({n})))
    declared = sf.none_of(names) if names else sf.ANY_STRING
    witnesses = []
    covered = NEVER
    for k, s in o.rest:
        covered = alt(covered, k)
        ns = _negate(s)
        if not ns.is_bottom():
            witnesses.append((sf.intersect(k, declared), ns))
    uncovered = sf.intersect(sf.complement(covered), declared)
    if not sf.is_empty(uncovered):
        witnesses.append((uncovered, None))
    witnesses = [(k, s) for k, s in witnesses if not sf.is_empty(k)]
    if witnesses:
        out.append(_Obj(need=tuple(witnesses)))
    return out


def _is_empty(t) -> bool:
    t = _top(t)
    if t.null or t.bools or t.nums or t.arrays or t.objects:
        return False
    try:
        return sf.is_empty(t.string)
    except TooComplexError:
        return False


def _literal(v, ptr: str) -> _T:
    if v is None:
        return _T(null=True)
    if isinstance(v, bool):
        return _T(bools={v})
    if isinstance(v, (int, float)):
        return _T(nums=(_Num(values=frozenset({_dec(v, ptr)})),))
    if isinstance(v, str):
        return _T(string=lit(v))
    if isinstance(v, list):
        return _T(arrays=(_Arr(tuple(_literal(x, ptr) for x in v), _BOTTOM, len(v), len(v)),))
    if isinstance(v, dict):
        props = tuple((k, _literal(x, ptr)) for k, x in v.items())
        return _T(objects=(_Obj(props, frozenset(v), rest=()),))
    raise InvalidSchemaError(f"{_loc(ptr)}: {v!r} is not a JSON value", pointer=ptr)


def _dec(x, ptr: str) -> Decimal:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise InvalidSchemaError(f"{_loc(ptr)}: expected a number, got {x!r}", pointer=ptr)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise InvalidSchemaError(f"{_loc(ptr)}: {x!r} is not a JSON number", pointer=ptr)
        return Decimal(repr(x))
    return Decimal(x)


# ------------------------------------------------------------------------------------------
# $ref resolution
# ------------------------------------------------------------------------------------------

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = (
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "additionalItems",
    "items",
    "contentSchema",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")


def _loc(ptr: str) -> str:
    """A JSON pointer as shown in messages: as a URI fragment (``#`` is the root)."""
    return "#" + ptr


def _ptr_join(ptr: str, *tokens) -> str:
    for t in tokens:
        ptr += "/" + str(t).replace("~", "~0").replace("/", "~1")
    return ptr


def _join_uri(base: str, ref: str) -> str:
    if ref.startswith("#"):
        return base.split("#", 1)[0] + ref
    if urllib.parse.urlsplit(ref).scheme:
        return ref
    return urllib.parse.urljoin(base, ref)


class _Resolver:
    def __init__(self, root):
        self.root = root
        self.resources: dict[str, tuple[Any, str]] = {}
        self.anchors: dict[str, tuple[Any, str, str]] = {}
        self.dynamic_anchors: dict[str, tuple[Any, str, str]] = {}
        self.resources[_DEFAULT_BASE] = (root, "")
        self._walk(root, _DEFAULT_BASE, "")

    def _walk(self, node, base: str, ptr: str):
        if not isinstance(node, dict):
            return
        sid = node.get("$id")
        if isinstance(sid, str) and not sid.startswith("#"):
            base = _join_uri(base, sid).split("#", 1)[0]
            self.resources[base] = (node, ptr)
        for key in ("$anchor", "$dynamicAnchor"):
            a = node.get(key)
            if isinstance(a, str):
                self.anchors[base + "#" + a] = (node, ptr, base)
                if key == "$dynamicAnchor":
                    self.dynamic_anchors[base + "#" + a] = (node, ptr, base)
        for key in _SCHEMA_MAPS:
            sub = node.get(key)
            if isinstance(sub, dict):
                for k, v in sub.items():
                    self._walk(v, base, _ptr_join(ptr, key, k))
        for key in _SCHEMA_ONE:
            sub = node.get(key)
            if isinstance(sub, dict):
                self._walk(sub, base, _ptr_join(ptr, key))
        for key in _SCHEMA_LISTS:
            sub = node.get(key)
            if isinstance(sub, list):
                for i, v in enumerate(sub):
                    self._walk(v, base, _ptr_join(ptr, key, i))
        dep = node.get("dependencies")
        if isinstance(dep, dict):
            for k, v in dep.items():
                self._walk(v, base, _ptr_join(ptr, "dependencies", k))

    def resolve(self, ref: str, base: str, where: str):
        """Returns (schema, base URI, JSON pointer) of a reference."""
        uri = _join_uri(base, ref)
        doc, _, frag = uri.partition("#")
        frag = urllib.parse.unquote(frag)
        if doc not in self.resources:
            raise _Refuse(
                "$ref",
                f"the remote reference {ref!r} (to {doc!r}) cannot be fetched; only references inside the schema are supported",
            )
        node, ptr = self.resources[doc]
        if frag == "" or frag.startswith("/"):
            cur_base = doc
            for tok in frag.split("/")[1:] if frag else []:
                tok = tok.replace("~1", "/").replace("~0", "~")
                if isinstance(node, dict) and tok in node:
                    node = node[tok]
                elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
                    node = node[int(tok)]
                else:
                    raise InvalidSchemaError(
                        f"{_loc(where)}: $ref {ref!r} does not resolve (no {tok!r} at {_loc(ptr)})",
                        pointer=where,
                    )
                ptr = _ptr_join(ptr, tok)
                if (
                    isinstance(node, dict)
                    and isinstance(node.get("$id"), str)
                    and not node["$id"].startswith("#")
                ):
                    cur_base = _join_uri(cur_base, node["$id"]).split("#", 1)[0]
            return node, cur_base, ptr
        hit = self.anchors.get(doc + "#" + frag)
        if hit is None:
            raise InvalidSchemaError(
                f"{_loc(where)}: $ref {ref!r} does not resolve (no anchor {frag!r})", pointer=where
            )
        return hit[0], hit[2], hit[1]


# ------------------------------------------------------------------------------------------
# schema -> typed language
# ------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Options:
    whitespace: str = "default"
    max_whitespace: int = 20
    max_nesting_depth: int = 2
    max_recursion_depth: int = 3
    strict: bool = True
    string_escapes: str = "standard"
    leap_seconds: str = "utc"
    assert_format: bool = True


class _Translator:
    def __init__(self, root, opts: _Options):
        self.opts = opts
        self.resolver = _Resolver(root)
        self.stack: list[tuple[int, int]] = []  # ($ref target id, instance depth)
        self.scope: list[str] = []  # dynamic scope: schema resources entered, outermost first
        text = json.dumps(root)
        self.dynamic = "$dynamicRef" in text
        self.track_ev = "unevaluated" in text
        self.depth = 0
        self.memo: dict = {}
        self.truncated: str | None = None
        self.empty_at: str | None = None
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

    def invalid(self, ptr: str, msg: str):
        raise InvalidSchemaError(f"{_loc(ptr)}: {msg}", pointer=ptr)

    # -- entry -----------------------------------------------------------------------------------

    def schema(self, node, base: str, ptr: str) -> _T:
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
        key = (id(node), base, tuple(self.stack), tuple(self.scope) if self.dynamic else ())
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        entered = not self.scope or self.scope[-1] != base
        if entered:
            self.scope.append(base)
        try:
            out = self._schema(node, base, ptr)
        except TooComplexError as e:
            keyword = next((k for k in _COMPLEX_KEYWORDS if k in node), "allOf")
            self.refuse(
                keyword,
                _ptr_join(ptr, keyword),
                f"the constraints here are too complex for a regular expression ({e})",
            )
            out = _TOP
        finally:
            if entered:
                self.scope.pop()
        if out.is_bottom() and node and self.empty_at is None:
            self.empty_at = ptr
        self.memo[key] = (out, node)
        return out

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
            inner = self.sub(s["not"], base, p, descend=False)
            try:
                parts.append(_negate(inner))
            except (_Refuse, TooComplexError) as e:
                self.refuse("not", p, getattr(e, "reason", "its complement is too complex"))
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

    def _unevaluated_properties(self, out: _T, sub, base, ptr) -> _T:
        """Names that no keyword here evaluated (in-place subschemas included) must match."""
        p = _ptr_join(ptr, "unevaluatedProperties")
        u = self.sub(sub, base, p, descend=True)
        objects = []
        refused = False
        for o in out.objects:
            names, keys, all_, exact = o.ev
            if not all_ and not exact:
                if not refused:
                    refused = True
                    self.refuse(
                        "unevaluatedProperties",
                        p,
                        "an anyOf below it could not be split into exclusive branches, so what it "
                        "evaluated is unknown",
                    )
            elif not all_:
                rest = [(keys, None)] if not sf.is_never(keys) else []
                if not u.is_bottom():
                    rest.append((sf.complement(keys), None if u.is_top() else u))
                rule = _Obj(tuple((n, None) for n in sorted(names)), rest=tuple(rest))
                o = _obj_meet(o, rule)
                if o is None or o.surely_empty():
                    continue
            objects.append(o.replace(ev=(frozenset(), NEVER, True, True)))
        return out.replace(objects=tuple(objects))

    def _unevaluated_items(self, out: _T, sub, base, ptr) -> _T:
        """Items that no keyword here evaluated (prefixItems, items, contains) must match."""
        p = _ptr_join(ptr, "unevaluatedItems")
        u = self.sub(sub, base, p, descend=True)
        arrays = []
        refused = False
        for a in out.arrays:
            count, all_, cons, exact = a.ev
            if not all_ and not exact:
                if not refused:
                    refused = True
                    self.refuse(
                        "unevaluatedItems",
                        p,
                        "an anyOf below it could not be split into exclusive branches, so what it "
                        "evaluated is unknown",
                    )
            elif not all_:
                a = _arr_meet(a, _Arr((None,) * count, _join(u, *cons)))
                if a.surely_empty():
                    continue
            arrays.append(a.replace(ev=(0, True, (), True)))
        return out.replace(arrays=tuple(arrays))

    def _ref(self, ref, base, ptr, dynamic: bool = False) -> _T:
        keyword = "$dynamicRef" if dynamic else "$ref"
        if not isinstance(ref, str):
            self.invalid(ptr, f"{keyword} must be a string")
        try:
            node, nbase, nptr = self.resolver.resolve(ref, base, ptr)
        except _Refuse as e:
            self.refuse(keyword, ptr, e.reason)
            return _TOP
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
        if (target, self.depth) in self.stack:
            self.invalid(
                ptr, f"$ref {ref!r} loops back to itself without descending into the instance"
            )
        if sum(1 for t, _ in self.stack if t == target) > self.opts.max_recursion_depth:
            self.truncated = self.truncated or ptr
            return _BOTTOM
        self.stack.append((target, self.depth))
        try:
            return self.schema(node, nbase, nptr)
        finally:
            self.stack.pop()

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
        ts = [self.sub(x, base, _ptr_join(ptr, i), descend=False) for i, x in enumerate(subs)]
        if kw == "allOf":
            out = _TOP
            for t in ts:
                out = _meet(out, t)
            return out
        if kw == "anyOf":
            return self._any_of(ts, ptr)
        # oneOf: exactly one branch
        ts_live = [t for t in ts if not t.is_bottom()]
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
        except (_Refuse, TooComplexError) as e:
            reason = (
                getattr(e, "reason", None)
                or "the branches overlap and the overlap is too complex to exclude"
            )
            self.refuse(
                "oneOf",
                ptr,
                f"branches overlap and cannot be made exclusive ({reason}); it is treated as anyOf",
            )
            return _join(*ts_live)

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

    # -- numbers --------------------------------------------------------------------------------

    def _numeric(self, s, ptr):
        kws = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
        if not any(k in s for k in kws):
            return None
        lo = hi = None
        lo_excl = hi_excl = False

        def tighten_lo(v, excl):
            nonlocal lo, lo_excl
            if lo is None or v > lo or (v == lo and excl):
                lo, lo_excl = v, excl

        def tighten_hi(v, excl):
            nonlocal hi, hi_excl
            if hi is None or v < hi or (v == hi and excl):
                hi, hi_excl = v, excl

        for k in kws[:4]:
            if k not in s:
                continue
            v = s[k]
            p = _ptr_join(ptr, k)
            if isinstance(v, bool) and k.startswith("exclusive"):  # draft-04 style
                continue
            d = _dec(v, p)
            if k == "minimum":
                tighten_lo(d, s.get("exclusiveMinimum") is True)
            elif k == "maximum":
                tighten_hi(d, s.get("exclusiveMaximum") is True)
            elif k == "exclusiveMinimum":
                tighten_lo(d, True)
            else:
                tighten_hi(d, True)
        mults = frozenset()
        if "multipleOf" in s:
            p = _ptr_join(ptr, "multipleOf")
            m = _dec(s["multipleOf"], p)
            if m <= 0:
                self.invalid(p, f"multipleOf must be > 0, got {s['multipleOf']!r}")
            mults = frozenset({Fraction(m)})
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_excl or hi_excl))):
            self.invalid(
                ptr,
                f"contradictory numeric bounds: no number is {'>' if lo_excl else '>='} {lo} and {'<' if hi_excl else '<='} {hi}",
            )
        return _Num(lo=lo, lo_excl=lo_excl, hi=hi, hi_excl=hi_excl, mults=mults)

    # -- strings --------------------------------------------------------------------------------

    def _string(self, s, ptr):
        langs = []
        mn, mx = s.get("minLength"), s.get("maxLength")
        for k, v in (("minLength", mn), ("maxLength", mx)):
            if v is not None and not _is_count(v):
                self.invalid(_ptr_join(ptr, k), f"{k} must be a non-negative integer, got {v!r}")
        if mn is not None or mx is not None:
            a, b = int(mn or 0), None if mx is None else int(mx)
            if b is not None and a > b:
                self.invalid(ptr, f"contradictory string bounds: minLength {a} > maxLength {b}")
            if a > 0 or b is not None:
                langs.append(("minLength" if mx is None else "maxLength", rep(sf.ANY_CHAR, a, b)))
        if "pattern" in s:
            p = _ptr_join(ptr, "pattern")
            lang = self._pattern(s["pattern"], p, "pattern")
            if lang is not None:
                langs.append(("pattern", lang))
        if "format" in s and self.opts.assert_format:
            p = _ptr_join(ptr, "format")
            f = s["format"]
            if not isinstance(f, str):
                self.invalid(p, "format must be a string")
            lang = sf.format_language(f, self.opts.leap_seconds)
            if f in sf.FORMAT_LIMITS:
                if f == "hostname" and not self.opts.strict:
                    warnings.warn(f"'format' at {_loc(p)}: {sf.FORMAT_LIMITS[f]}", stacklevel=3)
                else:
                    self.refuse("format", p, f"format {f!r}: {sf.FORMAT_LIMITS[f]}")
                    lang = None
            if lang is not None:
                langs.append(("format", lang))
        if not langs:
            return None
        try:
            return sf.intersect(*(lang for _, lang in langs))
        except TooComplexError:
            names = ", ".join(k for k, _ in langs)
            self.refuse(
                langs[-1][0],
                ptr,
                f"the intersection of {names} is too large for a regular expression",
            )
            return langs[0][1]

    def _pattern(self, pattern, ptr, keyword):
        if not isinstance(pattern, str):
            self.invalid(ptr, f"{keyword} must be a string")
        try:
            return sf.pattern_language(pattern)
        except sf.PatternError as e:
            if e.unsupported:
                self.refuse(keyword, ptr, f"pattern {pattern!r}: {e}")
                return None
            self.invalid(ptr, f"invalid ECMA-262 pattern {pattern!r}: {e}")
        except TooComplexError:
            self.refuse(keyword, ptr, f"pattern {pattern!r} is too complex")
            return None

    # -- arrays ---------------------------------------------------------------------------------

    def _array(self, s, base, ptr) -> list[_T]:
        kws = (
            "items",
            "prefixItems",
            "additionalItems",
            "minItems",
            "maxItems",
            "contains",
            "uniqueItems",
        )
        if not any(k in s for k in kws):
            return []
        prefix: tuple = ()
        items = None
        evaluates_all = "additionalItems" in s or (
            "items" in s and not isinstance(s["items"], list)
        )
        if isinstance(s.get("prefixItems"), list):
            prefix = tuple(
                self.sub(x, base, _ptr_join(ptr, "prefixItems", i), descend=True)
                for i, x in enumerate(s["prefixItems"])
            )
        if isinstance(s.get("items"), list):  # draft <= 2019-09 tuple form
            prefix = tuple(
                self.sub(x, base, _ptr_join(ptr, "items", i), descend=True)
                for i, x in enumerate(s["items"])
            )
            if "additionalItems" in s:
                items = self.sub(
                    s["additionalItems"], base, _ptr_join(ptr, "additionalItems"), descend=True
                )
        elif "items" in s:
            items = self.sub(s["items"], base, _ptr_join(ptr, "items"), descend=True)
        mn, mx = s.get("minItems", 0), s.get("maxItems")
        for k, v in (("minItems", mn), ("maxItems", mx)):
            if v is not None and not _is_count(v):
                self.invalid(_ptr_join(ptr, k), f"{k} must be a non-negative integer, got {v!r}")
        mn, mx = int(mn), (None if mx is None else int(mx))
        if mx is not None and mn > mx:
            self.invalid(ptr, f"contradictory array bounds: minItems {mn} > maxItems {mx}")
        contains = ()
        ev_contains = ()
        if "contains" in s:
            c = self.sub(s["contains"], base, _ptr_join(ptr, "contains"), descend=True)
            ev_contains = (c,)
            cmin, cmax = s.get("minContains", 1), s.get("maxContains")
            for k, v in (("minContains", cmin), ("maxContains", cmax)):
                if v is not None and not _is_count(v):
                    self.invalid(
                        _ptr_join(ptr, k), f"{k} must be a non-negative integer, got {v!r}"
                    )
            cmin, cmax = int(cmin), (None if cmax is None else int(cmax))
            if cmax is not None and cmin > cmax:
                self.invalid(
                    ptr, f"contradictory contains bounds: minContains {cmin} > maxContains {cmax}"
                )
            if cmin > 0 or cmax is not None:
                contains = ((c, cmin, cmax, 0, _ptr_join(ptr, "contains")),)
        ev = (len(prefix), evaluates_all, ev_contains, True)
        arr = _Arr(prefix, items, mn, mx, contains, ev)
        out = [_only(arrays=(arr,))]
        if s.get("uniqueItems") is True:
            if not _trivially_unique(arr):
                self.refuse(
                    "uniqueItems",
                    _ptr_join(ptr, "uniqueItems"),
                    "pairwise distinct items are not a regular language",
                )
        return out

    # -- objects --------------------------------------------------------------------------------

    def _object(self, s, base, ptr) -> list[_T]:
        kws = (
            "properties",
            "patternProperties",
            "additionalProperties",
            "required",
            "propertyNames",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependentSchemas",
            "dependencies",
        )
        if not any(k in s for k in kws):
            return []
        out = []
        props = s.get("properties", {})
        if not isinstance(props, dict):
            self.invalid(_ptr_join(ptr, "properties"), "properties must be an object")
        pats = s.get("patternProperties", {})
        if not isinstance(pats, dict):
            self.invalid(_ptr_join(ptr, "patternProperties"), "patternProperties must be an object")
        additional = s.get("additionalProperties", True)
        p_add = _ptr_join(ptr, "additionalProperties")
        if "properties" in s or "patternProperties" in s or "additionalProperties" in s:
            pat_langs = []
            for pat, sub in pats.items():
                p = _ptr_join(ptr, "patternProperties", pat)
                lang = self._pattern(pat, p, "patternProperties")
                t = self.sub(sub, base, p, descend=True)
                if lang is None:
                    continue
                pat_langs.append((lang, t))
            declared = []
            for name, sub in props.items():
                t = self.sub(sub, base, _ptr_join(ptr, "properties", name), descend=True)
                for lang, pt in pat_langs:
                    if sf.content_matches(lang, name):
                        t = _meet(t, pt)
                declared.append((name, t))
            add_t = self.sub(additional, base, p_add, descend=True)
            try:
                rest = _rest_rules(pat_langs, add_t)
            except TooComplexError:
                self.refuse(
                    "patternProperties",
                    _ptr_join(ptr, "patternProperties"),
                    "too many overlapping patterns",
                )
                rest = ((sf.ANY_STRING, None),)
            ev = (
                frozenset(props),
                alt(*(lang for lang, _ in pat_langs)),
                "additionalProperties" in s,
                True,
            )
            out.append(_only(objects=(_Obj(tuple(declared), rest=rest, ev=ev),)))
        req = s.get("required", [])
        if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
            self.invalid(_ptr_join(ptr, "required"), "required must be an array of strings")
        mn, mx = s.get("minProperties", 0), s.get("maxProperties")
        for k, v in (("minProperties", mn), ("maxProperties", mx)):
            if v is not None and not _is_count(v):
                self.invalid(_ptr_join(ptr, k), f"{k} must be a non-negative integer, got {v!r}")
        mn, mx = int(mn), (None if mx is None else int(mx))
        if mx is not None and mn > mx:
            self.invalid(
                ptr, f"contradictory object bounds: minProperties {mn} > maxProperties {mx}"
            )
        if req or mn or mx is not None:
            out.append(_only(objects=(_Obj(required=tuple(req), min=mn, max=mx),)))
        if "propertyNames" in s:
            p = _ptr_join(ptr, "propertyNames")
            names = self.sub(s["propertyNames"], base, p, descend=False)
            out.append(_only(objects=(_Obj(rest=((names.string, None),)),)))
        deps = dict(s.get("dependentRequired", {}))
        dep_schemas = dict(s.get("dependentSchemas", {}))
        for k, v in s.get("dependencies", {}).items():
            (deps if isinstance(v, list) else dep_schemas)[k] = v
        for name, needed in deps.items():
            absent = _Obj(props=((name, _BOTTOM),))
            present = _Obj(required=(name, *needed))
            out.append(_only(objects=(absent, present)))
        for name, sub in dep_schemas.items():
            p = _ptr_join(
                ptr, "dependentSchemas" if "dependentSchemas" in s else "dependencies", name
            )
            t = self.sub(sub, base, p, descend=False)
            absent = _Obj(props=((name, _BOTTOM),))
            present = _meet(_T(objects=(_Obj(required=frozenset([name])),)), t)
            out.append(_only(objects=(absent, *present.objects)))
        return out


_DIALECTS = {
    "json-schema.org/draft/2020-12/schema": "2020-12",
    "json-schema.org/draft/2019-09/schema": "2019-09",
    "json-schema.org/draft-07/schema": "legacy",
    "json-schema.org/draft-06/schema": "legacy",
    "json-schema.org/draft-04/schema": "legacy",
    "spec.openapis.org/oas/3.1/dialect/base": "2020-12",
}


def _dialect(uri) -> str | None:
    """'2020-12', '2019-09' or 'legacy' (draft-04..07: $ref overrides its siblings)."""
    if not isinstance(uri, str):
        return None
    key = uri.split("://", 1)[-1].rstrip("#")
    return _DIALECTS.get(key)


def _is_count(v) -> bool:
    return (
        not isinstance(v, bool) and isinstance(v, (int, float)) and v >= 0 and float(v).is_integer()
    )


def _rest_rules(pat_langs, add_t: _T):
    """Partitions the undeclared names by which patterns match them."""
    if not pat_langs:
        return (
            ((sf.ANY_STRING, None if add_t.is_top() else add_t),) if not add_t.is_bottom() else ()
        )
    if len(pat_langs) > 6:
        raise TooComplexError("too many patterns")
    rules = []
    n = len(pat_langs)
    for mask in range(1, 1 << n):
        inside = [pat_langs[i] for i in range(n) if mask >> i & 1]
        outside = [pat_langs[i][0] for i in range(n) if not mask >> i & 1]
        k = sf.intersect(*(lang for lang, _ in inside))
        for o in outside:
            if sf.is_empty(k):
                break
            k = sf.difference(k, o)
        if sf.is_empty(k):
            continue
        t = _TOP
        for _, pt in inside:
            t = _meet(t, pt)
        if not t.is_bottom():
            rules.append((k, None if t.is_top() else t))
    if not add_t.is_bottom():
        k = sf.complement(alt(*(lang for lang, _ in pat_langs)))
        if not sf.is_empty(k):
            rules.append((k, None if add_t.is_top() else add_t))
    return tuple(rules)


def _trivially_unique(arr: _Arr) -> bool:
    return arr.max is not None and arr.max <= 1


# ------------------------------------------------------------------------------------------
# typed language -> regex
# ------------------------------------------------------------------------------------------

_DIGIT = chars([(0x30, 0x39)])
_DIGIT19 = chars([(0x31, 0x39)])
_ZERO = char("0")
_MINUS = char("-")
_DOT = char(".")


def _digits(lo: int, hi: int) -> Node:
    return chars([(0x30 + lo, 0x30 + hi)]) if lo <= hi else NEVER


_UINT = alt(_ZERO, seq(_DIGIT19, star(_DIGIT)))
_FRAC_ANY = opt(seq(_DOT, rep(_DIGIT, 1, None)))
_FRAC_ZERO = opt(seq(_DOT, rep(_ZERO, 1, None)))
_EXP = seq(
    chars([(0x45, 0x45), (0x65, 0x65)]),
    opt(chars([(0x2B, 0x2B), (0x2D, 0x2D)])),
    rep(_DIGIT, 1, None),
)
_NUMBER = seq(opt(_MINUS), _UINT, _FRAC_ANY, opt(_EXP))
# Integral floats written as json.dumps writes them (1e+16 <= |x| < 1.7e308): at most 16
# fraction digits and an exponent of at least 16, so the value is an integer; the bound
# keeps it a finite double (parsers turn larger ones into infinity).
_E = chars([(0x45, 0x45), (0x65, 0x65)])
_BIG_EXP = alt(
    seq(
        _DIGIT19,
        opt(seq(_DOT, rep(_DIGIT, 1, 16))),
        _E,
        opt(char("+")),
        alt(
            seq(char("1"), _digits(6, 9)),
            seq(_digits(2, 9), _DIGIT),
            seq(_digits(1, 2), _DIGIT, _DIGIT),
            seq(lit("30"), _digits(0, 7)),
        ),
    ),
    seq(
        char("1"), opt(seq(_DOT, _digits(0, 6), rep(_DIGIT, 0, 15))), _E, opt(char("+")), lit("308")
    ),
)
_INTEGER = seq(opt(_MINUS), alt(seq(_UINT, _FRAC_ZERO), _BIG_EXP))


def _uint_fixed(lo: str, hi: str) -> Node:
    """Digit strings of length len(lo) between lo and hi (inclusive, same length)."""
    if not lo:
        return EPS
    if lo == hi:
        return lit(lo)
    a, b = int(lo[0]), int(hi[0])
    n = len(lo) - 1
    if a == b:
        return seq(char(lo[0]), _uint_fixed(lo[1:], hi[1:]))
    parts = []
    if lo[1:] == "0" * n:
        a0 = a
    else:
        a0 = a + 1
        parts.append(seq(char(lo[0]), _uint_fixed(lo[1:], "9" * n)))
    if hi[1:] == "9" * n:
        b0 = b
    else:
        b0 = b - 1
        tail = seq(char(hi[0]), _uint_fixed("0" * n, hi[1:]))
    if a0 <= b0:
        parts.append(seq(_digits(a0, b0), rep(_DIGIT, n, n)))
    if b0 != b:
        parts.append(tail)
    return alt(*parts)


def _uint_range(lo: int, hi: int | None) -> Node:
    """Canonical decimal integers (no leading zeros) in [lo, hi]."""
    if hi is not None and lo > hi:
        return NEVER
    parts = []
    if lo == 0:
        parts.append(_ZERO)
        lo = 1
        if hi is not None and hi < 1:
            return _ZERO
    length = len(str(lo))
    while True:
        top = 10**length - 1
        if hi is not None and hi <= top:
            parts.append(_uint_fixed(str(lo), str(hi)))
            break
        if hi is None and lo == 10 ** (length - 1):
            parts.append(seq(_DIGIT19, rep(_DIGIT, length - 1, None)))
            break
        parts.append(_uint_fixed(str(lo), str(top)))
        lo = top + 1
        length += 1
    return alt(*parts)


def _split_dec(d: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    with localcontext() as ctx:
        ctx.prec = 1000
        text = format(d, "f")
    ip, _, fp = text.partition(".")
    return int(ip), fp.rstrip("0")


def _frac_cmp(f: str, op: str) -> Node:
    """Digit strings g (possibly empty) with 0.g <op> 0.f, op in le lt ge gt."""
    if not f:
        if op == "le":
            return star(_ZERO)
        if op == "lt":
            return NEVER
        if op == "ge":
            return star(_DIGIT)
        return seq(star(_DIGIT), _DIGIT19, star(_DIGIT))
    d, rest = int(f[0]), f[1:]
    if op in ("le", "lt"):
        return alt(EPS, seq(_digits(0, d - 1), star(_DIGIT)), seq(char(f[0]), _frac_cmp(rest, op)))
    return alt(seq(_digits(d + 1, 9), star(_DIGIT)), seq(char(f[0]), _frac_cmp(rest, op)))


def _frac_text(g: Node, integer: bool) -> Node:
    """The fraction part text ('' or '.digits') for a digit-string language g."""
    if integer:
        g = sf.intersect(g, star(_ZERO))
    nonempty = sf.intersect(g, rep(_DIGIT, 1, None))
    parts = [seq(_DOT, nonempty)]
    if sf.nullable(g):
        parts.append(EPS)
    return alt(*parts)


def _nonneg_range(lo, lo_incl, hi, hi_incl, integer: bool) -> Node:
    """Plain decimals 'I' or 'I.F' with value in the interval (lo >= 0)."""
    if integer:  # 'I' or 'I.000': the integers of the interval
        a = math.ceil(lo)
        if a == lo and not lo_incl:
            a += 1
        b = None
        if hi is not None:
            b = math.floor(hi)
            if b == hi and not hi_incl:
                b -= 1
        return seq(_uint_range(a, b), _FRAC_ZERO)
    li, lf = _split_dec(lo)
    anyfrac = _FRAC_ZERO if integer else _FRAC_ANY
    if hi is None:
        parts = [seq(_uint_range(li + 1, None), anyfrac)]
        parts.append(
            seq(lit(str(li)), _frac_text(_frac_cmp(lf, "ge" if lo_incl else "gt"), integer))
        )
        return alt(*parts)
    hi_i, hf = _split_dec(hi)
    if li == hi_i:
        g = sf.intersect(
            _frac_cmp(lf, "ge" if lo_incl else "gt"), _frac_cmp(hf, "le" if hi_incl else "lt")
        )
        return seq(lit(str(li)), _frac_text(g, integer))
    parts = [
        seq(lit(str(li)), _frac_text(_frac_cmp(lf, "ge" if lo_incl else "gt"), integer)),
        seq(_uint_range(li + 1, hi_i - 1), anyfrac) if hi_i - 1 >= li + 1 else NEVER,
        seq(lit(str(hi_i)), _frac_text(_frac_cmp(hf, "le" if hi_incl else "lt"), integer)),
    ]
    return alt(*parts)


def _interval_nonempty(a, a_incl, b, b_incl) -> bool:
    return b is None or b > a or (b == a and a_incl and b_incl)


def _range_node(n: _Num, integer: bool) -> Node:
    lo, hi = n.lo, n.hi
    zero = Decimal(0)
    parts = []
    # non-negative texts 'x': x in [max(lo, 0), hi]
    if lo is None or lo < zero:
        a, a_incl = zero, True
    else:
        a, a_incl = lo, not n.lo_excl
    if _interval_nonempty(a, a_incl, hi, not n.hi_excl):
        parts.append(_nonneg_range(a, a_incl, hi, not n.hi_excl, integer))
    # negative texts '-y' (x = -y): y in [max(-hi, 0), -lo]
    if hi is None or hi > zero:
        b, b_incl = zero, True
    else:
        b, b_incl = -hi, not n.hi_excl
    top, top_incl = (None, True) if lo is None else (-lo, not n.lo_excl)
    if _interval_nonempty(b, b_incl, top, top_incl):
        parts.append(seq(_MINUS, _nonneg_range(b, b_incl, top, top_incl, integer)))
    return alt(*parts)


def _number_literal(v: Decimal) -> Node:
    sign = v < 0
    ip, fp = _split_dec(abs(v))
    body = seq(lit(str(ip)), seq(_DOT, lit(fp), star(_ZERO)) if fp else _FRAC_ZERO)
    parts = [seq(_MINUS, body) if sign else body]
    if v == 0:
        parts.append(seq(_MINUS, body))
    f = float(v)
    if math.isfinite(f) and Decimal(repr(f)) == v:
        text = json.dumps(f)
        if "e" in text:
            parts.append(lit(text))
    return alt(*parts)


def _modulus(m: Fraction) -> int:
    """The integer a with m = a / 10^d for the least d (the remainder automaton's size)."""
    d = 0
    while (m * 10**d).denominator != 1:
        d += 1
    return int(m * 10**d)


def _mult_dfa(part, m: Fraction, negate: bool) -> sf.DFA:
    """DFA of plain decimals that are (``negate``: are not) multiples of m, over a partition
    whose atoms separate the digits, '-' and '.'."""
    d = 0
    while (m * 10**d).denominator != 1:
        d += 1
    a = int(m * 10**d)
    if a > _MAX_MODULUS:
        raise TooComplexError(f"multipleOf {m}: modulus {a} too large")
    atom = {ch: next(iter(part.atoms_of(((ord(ch), ord(ch)),)))) for ch in "0123456789.-"}
    index: dict = {}
    trans: list[dict] = []
    accept: list[bool] = []
    todo: list = []

    def ok(r, j):  # digits so far have value r (mod a) at scale 10^j: a multiple?
        return (r * 10 ** (d - j)) % a == 0

    def accepting(key) -> bool:
        kind = key[0]
        if kind in ("S", "N", "D"):
            return False
        if kind == "X":
            return negate
        mult = True if kind == "I0" else ok(key[1], 0) if kind == "I" else ok(key[2], key[1])
        return mult != negate

    def sid(key) -> int:
        if key not in index:
            index[key] = len(trans)
            trans.append({})
            accept.append(accepting(key))
            todo.append(key)
        return index[key]

    def frac_digit(src, j, r, dig):
        if j < d:
            trans[src][atom[str(dig)]] = sid(("F", j + 1, (10 * r + dig) % a))
        elif dig == 0:
            trans[src][atom["0"]] = sid(("F", j, r))
        elif negate:
            trans[src][atom[str(dig)]] = sid(("X",))

    start = sid(("S",))
    while todo:
        key = todo.pop()
        src = index[key]
        kind = key[0]
        if kind in ("S", "N"):
            if kind == "S":
                trans[src][atom["-"]] = sid(("N",))
            trans[src][atom["0"]] = sid(("I0",))
            for dig in range(1, 10):
                trans[src][atom[str(dig)]] = sid(("I", dig % a))
        elif kind in ("I", "I0"):
            r = key[1] if kind == "I" else 0
            if kind == "I":
                for dig in range(10):
                    trans[src][atom[str(dig)]] = sid(("I", (10 * r + dig) % a))
            trans[src][atom["."]] = sid(("D", r))
        elif kind == "D":
            for dig in range(10):
                frac_digit(src, 0, key[1], dig)
        elif kind == "F":
            for dig in range(10):
                frac_digit(src, key[1], key[2], dig)
        else:
            for dig in range(10):
                trans[src][atom[str(dig)]] = src
    return sf.DFA(part, trans, accept, start)


def _constrained_number(n: _Num) -> Node:
    integer = n.integer
    node = _range_node(n, integer)
    mults = [m for m in n.mults if m != 1]
    if mults or n.not_mults:
        sets: set = set()
        sf._collect_sets(node, sets)
        sets |= {((ord(c), ord(c)),) for c in "0123456789.-"}
        part = sf._Partition(sorted(sets), sf._universe(False))
        dfa = sf.DFA.from_nodes(part, node)
        for m in mults:
            dfa = dfa.product(_mult_dfa(part, m, False), lambda x, y: x and y)
        for m in n.not_mults:
            dfa = dfa.product(_mult_dfa(part, m, True), lambda x, y: x and y)
        node = dfa.to_node()
    if n.excluded:
        node = sf.difference(node, alt(*(_number_literal(v) for v in n.excluded)))
    return node


class _Emitter:
    def __init__(self, opts: _Options, refuse):
        self.opts = opts
        self.refuse = refuse
        ws = opts.whitespace
        if ws == "compact":
            self.comma, self.colon, self.open_pad, self.close_pad = char(","), char(":"), EPS, EPS
        elif ws == "default":
            sp = opt(char(" "))
            self.comma, self.colon, self.open_pad, self.close_pad = (
                seq(char(","), sp),
                seq(char(":"), sp),
                EPS,
                EPS,
            )
        elif ws == "pretty":
            w = rep(chars([(9, 10), (13, 13), (32, 32)]), 0, opts.max_whitespace)
            self.comma, self.colon, self.open_pad, self.close_pad = (
                seq(w, char(","), w),
                seq(w, char(":"), w),
                w,
                w,
            )
        else:
            raise ValueError(f"whitespace must be 'default', 'compact' or 'pretty', got {ws!r}")
        self.memo: dict = {}
        self.keys: dict = {}
        self.free: dict = {}

    def string(self, content: Node) -> Node:
        return sf.encode_json_string(content, self.opts.string_escapes)

    def key(self, name: str) -> Node:
        hit = self.keys.get(name)
        if hit is None:
            hit = self.keys[name] = self.string(lit(name))
        return hit

    def wrap(self, open_ch: str, body: Node, close_ch: str, nullable_body: bool) -> Node:
        return seq(char(open_ch), self.open_pad, body, self.close_pad, char(close_ch))

    def any_json(self, depth: int) -> Node:
        hit = self.free.get(depth)
        if hit is not None:
            return hit
        parts = [lit("null"), lit("true"), lit("false"), _NUMBER, self.string(sf.ANY_STRING)]
        if depth > 0:
            inner = self.any_json(depth - 1)
            parts.append(self.wrap("[", opt(seq(inner, star(seq(self.comma, inner)))), "]", True))
            item = seq(self.string(sf.ANY_STRING), self.colon, inner)
            parts.append(self.wrap("{", opt(seq(item, star(seq(self.comma, item)))), "}", True))
        node = alt(*parts)
        self.free[depth] = node
        return node

    def value(self, t) -> Node:
        if t is None or t.is_top():
            return self.any_json(self.opts.max_nesting_depth)
        hit = self.memo.get(t)
        if hit is not None:
            return hit
        parts = []
        if t.null:
            parts.append(lit("null"))
        for b in sorted(t.bools, reverse=True):
            parts.append(lit("true" if b else "false"))
        for n in t.nums:
            parts.append(self.number(n))
        if not sf.is_never(t.string):
            parts.append(self.string(t.string))
        for a in t.arrays:
            parts.append(self.array(a))
        for o in t.objects:
            parts.append(self.object(o))
        node = alt(*parts)
        self.memo[t] = node
        return node

    def number(self, n: _Num) -> Node:
        if n.values is not None:
            return alt(*(_number_literal(v) for v in sorted(n.values)))
        if n.is_free():
            return _NUMBER
        if (
            n.lo is None
            and n.hi is None
            and not n.not_mults
            and not n.excluded
            and n.mults == {Fraction(1)}
        ):
            return _INTEGER
        return _constrained_number(n)

    def array(self, a: _Arr) -> Node:
        if a.contains:
            try:
                return self.wrap("[", self._array_counted(a), "]", True)
            except (_Refuse, TooComplexError) as e:
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
                body = EPS
            else:
                body = seq(item_node, rep(seq(self.comma, item_node), lo_t, hi_t))
                if a.min == 0:
                    body = opt(body)
            return self.wrap("[", body, "]", a.min == 0)
        tail = EPS
        if mx is None or mx > k:
            tail = rep(
                seq(self.comma, item_node), max(a.min - k, 0), None if mx is None else mx - k
            )
        body = tail
        for j in range(min(k, mx if mx is not None else k) - 1, -1, -1):
            el = seq(self.comma if j > 0 else EPS, self.value(a.prefix[j]), body)
            body = opt(el) if j >= a.min else el
        return self.wrap("[", body, "]", a.min == 0)

    def _array_counted(self, a: _Arr) -> Node:
        """Arrays with ``contains`` counts: an automaton over (position, length, counts)
        whose edges are element languages, turned into a regex by state elimination."""
        cons = a.contains
        if len(cons) > 3:
            raise _Refuse("contains", "more than three contains constraints on one array")
        negs = [_negate(c) for c, *_ in cons]
        caps = [cmax + 1 if cmax is not None else cmin for _, cmin, cmax, _, _ in cons]
        k = len(a.prefix)
        span = max([k] + [c[3] for c in cons])
        lcap = a.max if a.max is not None else max(a.min, 1)
        states: dict = {}
        edges: dict = {}

        def sid(key):
            if key not in states:
                states[key] = len(states)
            return states[key]

        start = (0, 0, (0,) * len(cons))
        sid(start)
        todo, seen, finals = [start], {start}, set()
        while todo:
            key = todo.pop()
            pos, length, counts = key
            if length >= a.min and all(c[1] <= n for c, n in zip(cons, counts, strict=True)):
                finals.add(sid(key))
            if a.max is not None and length >= a.max:
                continue
            el = _top(a.prefix[pos] if pos < k else a.items)
            if el.is_bottom():
                continue
            sep = self.comma if length > 0 else EPS
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
                nkey = (npos, nlen, tuple(new))
                e = (sid(key), sid(nkey))
                edges[e] = alt(edges.get(e, NEVER), seq(sep, self.value(t)))
                if nkey not in seen:
                    seen.add(nkey)
                    todo.append(nkey)
        return _eliminate(len(states), edges, 0, finals)

    def object(self, o: _Obj) -> Node:
        names = [n for n, _ in o.props]
        declared = sf.none_of(names) if names else sf.ANY_STRING
        items = []
        for n, s in o.props:
            if s is not None and s.is_bottom():
                continue
            items.append((n, seq(self.key(n), self.colon, self.value(s)), n in o.required, s))
        rest_nodes = []
        for k, s in o.rest:
            if s is not None and s.is_bottom():
                continue
            kd = sf.intersect(k, declared) if names else k
            if sf.is_empty(kd):
                continue
            rest_nodes.append(seq(self.string(kd), self.colon, self.value(s)))
        rest = alt(*rest_nodes)
        if o.need or o.min > 0 or o.max is not None:
            return self.wrap("{", self._object_counted(o, items, rest, declared), "}", True)
        emitted = NEVER  # prefixes with at least one property
        empty_ok = True  # the empty prefix is possible
        for _, node, required, _ in items:
            if required:
                emitted = seq(
                    opt(seq(emitted, self.comma)) if empty_ok else seq(emitted, self.comma), node
                )
                empty_ok = False
            elif not empty_ok:
                emitted = seq(emitted, opt(seq(self.comma, node)))
            elif sf.is_never(emitted) or sf.size(node) <= sf.size(emitted):
                # E (, p)? | p: repeats the item (cheaper than repeating the prefix)
                emitted = alt(seq(emitted, opt(seq(self.comma, node))), node)
            else:
                # (E ,)? p | E: repeats the prefix
                emitted = alt(seq(opt(seq(emitted, self.comma)), node), emitted)
        if sf.is_never(rest):
            body = alt(emitted, EPS if empty_ok else NEVER)
        else:
            body = seq(alt(emitted, rest if empty_ok else NEVER), star(seq(self.comma, rest)))
            if empty_ok:
                body = opt(body)
        return self.wrap("{", body, "}", empty_ok)

    def _object_counted(self, o: _Obj, items, rest: Node, declared: Node) -> Node:
        cap = o.max if o.max is not None else max(o.min, 1)
        need_nodes = []
        for k, s in o.need:
            kd = sf.intersect(k, declared)
            if not sf.is_empty(kd):
                need_nodes.append(seq(self.string(kd), self.colon, self.value(s)))
        witness = alt(*need_nodes)
        need = bool(o.need)
        n = len(items)
        states: dict = {}
        edges: dict = {}

        def sid(key):
            if key not in states:
                states[key] = len(states)
            return states[key]

        def add(src, dst, label):
            e = (sid(src), sid(dst))
            edges[e] = alt(edges.get(e, NEVER), label)

        start = (0, 0, not need)
        sid(start)
        todo, seen, finals = [start], {start}, set()
        while todo:
            i, c, w = key = todo.pop()
            sep = self.comma if c > 0 else EPS
            nc = c + 1 if o.max is not None else min(c + 1, cap)
            targets = []
            if i < n:
                name, node, required, schema = items[i]
                if not required:
                    targets.append(((i + 1, c, w), EPS))
                if o.max is None or c + 1 <= o.max:
                    targets.append(((i + 1, nc, w), seq(sep, node)))
                    if need and not w:
                        wit = [
                            seq(self.key(name), self.colon, self.value(_meet(schema, s)))
                            for k, s in o.need
                            if sf.content_matches(k, name) and not _meet(schema, s).is_bottom()
                        ]
                        if wit:
                            targets.append(((i + 1, nc, True), seq(sep, alt(*wit))))
            else:
                if c >= o.min and w:
                    finals.add(sid(key))
                if o.max is None or c + 1 <= o.max:
                    if not sf.is_never(rest):
                        targets.append(((n, nc, w), seq(sep, rest)))
                    if need and not sf.is_never(witness):
                        targets.append(((n, nc, True), seq(sep, witness)))
            for tgt, label in targets:
                add(key, tgt, label)
                if tgt not in seen:
                    seen.add(tgt)
                    todo.append(tgt)
        return _eliminate(len(states), edges, 0, finals)


def _eliminate(n: int, edges: dict, start: int, finals) -> Node:
    """State elimination over regex-labelled edges; the language from start to finals."""
    init, final = n, n + 1
    out: dict[int, dict[int, Node]] = {q: {} for q in range(n + 2)}
    inc: dict[int, set] = {q: set() for q in range(n + 2)}

    def add(p, q, node):
        if sf.is_never(node):
            return
        old = out[p].get(q)
        out[p][q] = node if old is None else alt(old, node)
        inc[q].add(p)

    for (p, q), node in edges.items():
        add(p, q, node)
    add(init, start, EPS)
    for q in finals:
        add(q, final, EPS)
    remaining = set(range(n))
    while remaining:
        k = min(remaining, key=lambda s: (len(inc[s] - {s}) * len(set(out[s]) - {s}), s))
        remaining.discard(k)
        loop = out[k].pop(k, None)
        inc[k].discard(k)
        mid = star(loop) if loop is not None else EPS
        ins = [(p, out[p].pop(k)) for p in inc[k]]
        outs = list(out[k].items())
        for q, _ in outs:
            inc[q].discard(k)
        out[k] = {}
        inc[k] = set()
        for p, pin in ins:
            for q, qout in outs:
                add(p, q, seq(pin, mid, qout))
    return out[init].get(final, NEVER)


# ------------------------------------------------------------------------------------------
# public API
# ------------------------------------------------------------------------------------------


def _load(schema):
    if not isinstance(schema, (str, bytes, bytearray)):
        try:
            json.dumps(schema)
        except (TypeError, ValueError) as e:
            raise InvalidSchemaError(f"#: the schema is not JSON data: {e}", pointer="") from None
    if isinstance(schema, (str, bytes, bytearray)):
        try:
            schema = json.loads(schema)
        except ValueError as e:
            raise InvalidSchemaError(f"#: the schema is not valid JSON: {e}", pointer="") from None
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchemaError(
            f"#: a JSON Schema must be an object or a boolean, got {type(schema).__name__}",
            pointer="",
        )
    return schema


def _options(kw) -> _Options:
    opts = _Options(**kw)
    if opts.string_escapes not in ("standard", "any", "minimal"):
        raise ValueError(
            f"string_escapes must be 'standard', 'any' or 'minimal', got {opts.string_escapes!r}"
        )
    if opts.leap_seconds not in ("utc", "exact", "none"):
        raise ValueError(
            f"leap_seconds must be 'utc', 'exact' or 'none', got {opts.leap_seconds!r}"
        )
    for name in ("max_whitespace", "max_nesting_depth", "max_recursion_depth"):
        v = getattr(opts, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"{name} must be a non-negative int, got {v!r}")
    return opts


def _regex_node(schema, opts: _Options) -> Node:
    tr = _Translator(schema, opts)
    try:
        t = tr.schema(schema, _DEFAULT_BASE, "")
        node = _Emitter(opts, tr.refuse).value(t)
    except _Refuse as e:
        raise UnsupportedSchemaError(
            f"{e.keyword!r} cannot be enforced exactly: {e.reason}", keyword=e.keyword, pointer=""
        ) from None
    except TooComplexError as e:
        raise UnsupportedSchemaError(
            f"#: the schema is too complex to express as a regular expression ({e}); simplify it or lower max_recursion_depth/max_nesting_depth",
            keyword=None,
            pointer="",
        ) from None
    except RecursionError:
        raise UnsupportedSchemaError(
            "#: the schema nests too deeply to translate", keyword=None, pointer=""
        ) from None
    if sf.is_never(node):
        where = tr.empty_at if tr.empty_at is not None else ""
        detail = f" (the first unsatisfiable subschema is at {_loc(where)})" if where else ""
        if tr.truncated is not None:
            detail += f"; the recursive $ref at {_loc(tr.truncated)} was unrolled to max_recursion_depth={opts.max_recursion_depth}, which may be too shallow"
        raise InvalidSchemaError(
            f"the schema is unsatisfiable: no JSON value matches it{detail}", pointer=where
        )
    return node


def json_schema_to_regex(schema, **options) -> str:
    """Translates a JSON Schema (dict, bool or JSON text) into a Python `re` regex.

    The regex matches (with `re.fullmatch`) exactly the JSON texts, in the accepted
    surface syntax, of the instances valid under the schema. See the module docstring
    for the options and for what is refused.

    Raises:
      InvalidSchemaError: the schema is malformed, contradictory or unsatisfiable.
      UnsupportedSchemaError: strict mode, and a keyword cannot be enforced exactly.
    """
    schema = _load(schema)
    return sf.to_regex(_regex_node(schema, _options(options)))


def compile_json_schema(schema, vocab, *, max_states: int | None = None, **options):
    """Compiles a JSON Schema into a `TokenDFA` for ``vocab`` (see `json_schema_to_regex`).

    Example:
      >>> import automata_compile as ac
      >>> vocab = ac.Vocabulary.from_bytes([bytes([i]) for i in range(256)] + [b"<eos>"],
      ...                                  eos_ids=[256], special_ids=[256])
      >>> dfa = ac.compile_json_schema({"type": "boolean"}, vocab)
      >>> dfa.accepts(list(b"true")), dfa.accepts(list(b"yes"))
      (True, False)
    """
    from automata_compile._compile import compile_regex

    schema = _load(schema)
    regex = json_schema_to_regex(schema, **options)
    spec = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return compile_regex(regex, vocab, max_states=max_states, spec_kind="json_schema", spec=spec)
