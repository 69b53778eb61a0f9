"""The algebra of typed languages: ``allOf`` is `_meet`, ``anyOf`` is `_join`, ``not`` is `_negate`.

Operates on the records of `_types` (`_T`, `_Num`, `_Arr`, `_Obj`); string parts use the
automaton operations of `_content`. A rule call (a recursive ``$ref``) that meets other
constraints raises `_types._Unroll`.
"""

from __future__ import annotations

import functools

from automata_compile.automata import NEVER
from automata_compile.automata import fsa as _fsa
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema import _strings
from automata_compile.frontends.json_schema._content import TooComplexError, alt, lit
from automata_compile.frontends.json_schema._resolver import _Refuse
from automata_compile.frontends.json_schema._types import (
    _BOTTOM,
    _FREE_ARR,
    _FREE_NUM,
    _FREE_OBJ,
    _T,
    _TOP,
    _Arr,
    _arr_ev_union,
    _Num,
    _Obj,
    _obj_ev_union,
    _top,
    _Unroll,
    min_,
)


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


@functools.lru_cache(maxsize=20000)
def _meet_cached(a: _T, b: _T) -> _T:
    nums = _pairs(a.nums, b.nums, _FREE_NUM, _num_meet)
    arrays = _pairs(a.arrays, b.arrays, _FREE_ARR, _arr_meet)
    objects = _pairs(a.objects, b.objects, _FREE_OBJ, _obj_meet)
    return _T(
        a.null and b.null,
        a.bools & b.bools,
        nums,
        sf.intersect(a.string, b.string),
        arrays,
        objects,
    ).grown(a, b)


def _pairs(xs, ys, free, meet):
    if len(xs) == 1 and xs[0] == free:
        return ys
    if len(ys) == 1 and ys[0] == free:
        return xs
    if len(xs) * len(ys) > MAX_PAIRS:
        raise TooComplexError(
            f"{len(xs):,} alternatives meet {len(ys):,}: more than {MAX_PAIRS:,} intersections"
        )
    out: dict = {}  # distinct, in order: `_T` keeps the first of equal alternatives too
    for x in xs:
        for y in ys:
            # the pairs multiply (a complement of n alternatives meets each of m): a
            # schema's deadline must stop them, as it stops the automata constructions
            _fsa.check_time("the intersections of the schema's types")
            z = meet(x, y)  # None, one alternative, or a list of them (`_obj_meet`)
            for w in z if isinstance(z, list) else (z,):
                if w is not None and not w.surely_empty():
                    out[w] = None
    return list(out)


# Intersections of alternatives one meet may compute (two typed languages of `_MAX_DNF`
# alternatives each meet in full): a complement's alternatives multiply with each
# alternative it excludes, and past this they are refused (`TooComplexError`, which names
# the keyword) in a deterministic amount of work, not by the deadline.
MAX_PAIRS = 65_536


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
        a.unique if a.unique is not None else b.unique,
    )


def _obj_meet(a: _Obj, b: _Obj) -> _Obj | list[_Obj] | None:
    if a.need and b.need:
        # one object holds one existential constraint: where one side's witnesses are all
        # declared names, it is that union of objects, each requiring one (exact)
        for side, other in ((a, b), (b, a)):
            split = _settled(side)
            if split is not None:
                return [z for x in split if (z := _obj_meet(x, other)) is not None]
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


def _settled(o: _Obj) -> list[_Obj] | None:
    """``o`` with its existential constraint (``need``) rewritten exactly as a union of
    objects, one requiring each witness, where every witness is a declared name of ``o``;
    else None. Done only where a meet needs it (two existential constraints at once):
    kept whole, the constraint costs the emitter one flag, while the union's alternatives
    differ only in the name they require, and the subset construction of the byte DFA
    follows them side by side (travis.json: past 100,000 sets for a DFA of 356 states)."""
    names = {lit(n): n for n, _ in o.props}
    if not o.need or not all(k in names for k, _ in o.need):
        return None
    out = []
    for k, s in o.need:
        n = names[k]
        props = tuple((m, _meet(ps, s) if m == n else ps) for m, ps in o.props)
        out.append(_Obj(props, o.required | {n}, o.rest, (), o.min, o.max, o.ev, o.at))
    return out


def _negate(t) -> _T:
    t = _top(t)
    if t.is_top():
        return _BOTTOM
    if t.is_bottom():
        return _TOP
    if t.calls:
        raise _Unroll("the complement of a recursive $ref")
    return _negate_cached(t)


# cached by typed language: a definition negated at many places (``not``, ``oneOf``
# exclusions, ``if`` conditions reached by many $ref paths) is negated once
@functools.lru_cache(maxsize=20000)
def _negate_cached(t: _T) -> _T:
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
    ).grown()


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
    if a.unique is not None and not (a.max is not None and a.max <= 1):
        raise _Refuse("not", "the complement of uniqueItems (arrays with a repeated item)")
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
