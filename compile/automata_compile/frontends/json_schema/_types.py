"""Typed languages: for each JSON type, the set of allowed values, and their algebra.

A (sub)schema becomes a `_T`: numbers as constraint records (`_Num`), strings as a
content language (an IR tree, see `_content`), arrays and objects as per-position /
per-property schemas with counts (`_Arr`, `_Obj`). The operations on them (``allOf`` is
`_meet`, ``anyOf`` is `_join`, ``not`` is `_negate`) are in `_type_algebra`.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

from automata_compile._errors import InvalidSchemaError
from automata_compile.automata import NEVER
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._content import (
    TooComplexError,
    alt,
    lit,
)
from automata_compile.frontends.json_schema._resolver import _loc

# Alternatives of one JSON type that a product (a meet, a complement) may make: see `grown`.
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
    ``anyOf`` could not be split into exclusive branches. ``unique``: the JSON pointer of a
    ``uniqueItems: true`` that applies (items pairwise distinct, see `_unique`), or None."""

    __slots__ = ("prefix", "items", "min", "max", "contains", "ev", "unique")
    _fields = __slots__

    def __init__(self, prefix=(), items=None, min=0, max=None, contains=(), ev=None, unique=None):
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
            prefix=tuple(prefix),
            items=items,
            min=min,
            max=max,
            contains=tuple(contains),
            ev=ev,
            unique=unique,
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

    def grown(self, *factors: _T) -> _T:
        """This product (the meet of ``factors``, or a complement: no factors), refused where
        it multiplied the alternatives of one JSON type past `_MAX_DNF` and past those of
        every factor. A union only adds up its branches' alternatives (as many as the schema
        writes: ``anyOf`` of 300 objects is 300), and a meet with one alternative keeps the
        other side's count; products of several multiply, and are bounded here.

        Raises:
          TooComplexError: "too many alternatives".
        """
        for kind in ("nums", "arrays", "objects"):
            n = len(getattr(self, kind))
            if n > _MAX_DNF and all(n > len(getattr(f, kind)) for f in factors):
                raise TooComplexError("too many alternatives")
        return self

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
