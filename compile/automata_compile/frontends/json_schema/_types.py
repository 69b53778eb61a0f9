"""Typed languages: for each JSON type, the set of allowed values, and their algebra.

A (sub)schema becomes a `_T`: numbers as constraint records (`_Num`), strings as a
content language (an IR tree, see `_content`), arrays and objects as per-position /
per-property schemas with counts (`_Arr`, `_Obj`). ``allOf`` is `_meet`, ``anyOf`` is
`_join`, ``not`` is `_negate`; string parts use the automaton operations of `_content`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from automata_compile._errors import InvalidSchemaError
from automata_compile.automata import NEVER
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema import _strings
from automata_compile.frontends.json_schema._content import (
    TooComplexError,
    alt,
    lit,
)
from automata_compile.frontends.json_schema._resolver import _loc, _Refuse

_MAX_DNF = 256


class _Unroll(Exception):
    """A rule call (a recursive ``$ref``) met an operation that needs its language: an
    intersection with sibling constraints, a complement, ``unevaluated*``. The schema is
    then translated again with the reference unrolled (``recursion="unroll"``)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.pointer: str | None = None  # the innermost subschema it was raised in


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
        bounds = (lo, lo_excl, hi, hi_excl, mults, not_mults, excluded)
        if values is not None:
            values = frozenset(v for v in values if _num_ok(v, *bounds))
            bounds = (None, False, None, False, frozenset(), frozenset(), frozenset())
        self._init(values=values, **dict(zip(_BOUND_FIELDS, bounds, strict=True)))

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


_BOUND_FIELDS = ("lo", "lo_excl", "hi", "hi_excl", "mults", "not_mults", "excluded")


def _num_ok(v: Decimal, lo, lo_excl, hi, hi_excl, mults, not_mults, excluded) -> bool:
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
    language, all names, exact)``. ``at`` is the JSON pointer of the schema that made the
    object, for messages (None if unknown, and on the free object, which is one object)."""

    __slots__ = ("props", "required", "rest", "need", "min", "max", "ev", "at")
    _fields = __slots__

    def __init__(
        self,
        props=(),
        required=frozenset(),
        rest=None,
        need=(),
        min=0,
        max=None,
        ev=None,
        at=None,
    ):
        ev = _OBJ_EV0 if ev is None else ev
        if rest is None:
            rest = ((sf.ANY_STRING, None),)
        props = list(props)
        names = {n for n, _ in props}
        for name in dict.fromkeys(required):  # keeps the order of `required`
            if name not in names:
                props.append((name, _rest_schema(rest, name)))
        free = not props and not need and min == 0 and max is None and ev == _OBJ_EV0
        if free and tuple(rest) == ((sf.ANY_STRING, None),):
            at = None
        self._init(
            props=tuple(props),
            required=frozenset(required),
            rest=tuple(rest),
            need=tuple(need),
            min=min,
            max=max,
            ev=ev,
            at=at,
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
    """A typed language: for each JSON type, the allowed values; ``calls`` adds the
    languages of grammar rules (ids of `_Translator.rule_types`, recursive ``$ref``
    targets), which stay opaque: meeting or negating them raises `_Unroll`."""

    __slots__ = ("null", "bools", "nums", "string", "arrays", "objects", "calls")
    _fields = __slots__

    def __init__(
        self,
        null=False,
        bools=frozenset(),
        nums=(),
        string=NEVER,
        arrays=(),
        objects=(),
        calls=frozenset(),
    ):
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
            calls=frozenset(calls),
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
    if a.calls or b.calls:
        if a == b:
            return a
        raise _Unroll("a recursive $ref meets other constraints")
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
        frozenset().union(*(t.calls for t in ts)),
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
        min((p for p in (a.at, b.at) if p is not None), key=len, default=None),
    )


def _negate(t) -> _T:
    t = _top(t)
    if t.is_top():
        return _BOTTOM
    if t.is_bottom():
        return _TOP
    if t.calls:
        raise _Unroll("the complement of a recursive $ref")
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
    declared = _strings.none_of(names) if names else sf.ANY_STRING
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
    if t.null or t.bools or t.nums or t.arrays or t.objects or t.calls:
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
        return _T(objects=(_Obj(props, frozenset(v), rest=(), at=ptr),))
    raise InvalidSchemaError(f"{_loc(ptr)}: {v!r} is not a JSON value", pointer=ptr)


def _dec(x, ptr: str) -> Decimal:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise InvalidSchemaError(f"{_loc(ptr)}: expected a number, got {x!r}", pointer=ptr)
    if isinstance(x, float):
        if not math.isfinite(x):
            raise InvalidSchemaError(f"{_loc(ptr)}: {x!r} is not a JSON number", pointer=ptr)
        return Decimal(repr(x))
    return Decimal(x)
