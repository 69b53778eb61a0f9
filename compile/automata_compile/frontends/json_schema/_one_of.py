"""``oneOf`` as a sound subset where the overlap of its branches cannot be excluded exactly.

Exactly one branch must match: ``∪_i (A_i ∩ ⋂_{j≠i} ¬A_j)``. Where some ``¬A_j`` is not
expressible (the complement of ``uniqueItems``, of an existential property constraint
from ``propertyNames``/``patternProperties``/``minProperties``, or one past a budget),
``A_j`` is replaced by a superset ``R_j`` whose complement is: ``∪_i (A_i ∩ ⋂_{j≠i} ¬R_j)``
still accepts only values matching exactly one branch (sound), and leaves out those of
``A_i`` that match ``R_j`` but not ``A_j``. A value has one JSON type, so this is done per
type (numbers, strings, arrays, objects), and only for pairs of branches that may overlap
there: each type stays exact where it can. The supersets, tried in order until the
complement and its meet with ``A_i`` are computable: the exact branch; the branch with what
cannot be complemented dropped, at every depth (``unique`` of arrays, existential ``need``
of objects, counted ``contains`` over a relaxed schema); its shape (array lengths; object
sizes, allowed, required and forbidden names); that shape open to any name (a complement
with no existential constraint); the branch's type alone (every array, every object, ...).
An existential constraint over declared names stays one constraint (one flag in the
emitter); a meet that would hold two rewrites one as required names (`_type_algebra`).
"""

from __future__ import annotations

from automata_compile.frontends.json_schema._content import TooComplexError
from automata_compile.frontends.json_schema._resolver import _Refuse
from automata_compile.frontends.json_schema._type_algebra import _is_empty, _join, _meet, _negate
from automata_compile.frontends.json_schema._types import (
    _BOTTOM,
    _T,
    _Arr,
    _Obj,
    _top,
    _Unroll,
)

# the types a oneOf is split by, and how a message names their values
_KINDS = (("nums", "numbers"), ("string", "strings"), ("arrays", "arrays"), ("objects", "objects"))


def one_of_subset(ts: list[_T], labels: list) -> tuple[_T, list[str]]:
    """The sound subset of ``oneOf`` over the branch languages ``ts``, and one note per
    branch and type excluded through a superset (``labels[j]`` names branch ``j``; no
    notes: the result is exact).

    Raises:
      _Unroll: a branch is a recursive ``$ref`` (its complement needs it unrolled).
    """
    if any(t.calls for t in ts):
        raise _Unroll("the complement of a recursive $ref")
    key = (tuple(ts), tuple(labels))
    hit = _SUBSETS.get(key)
    if hit is None:
        if len(_SUBSETS) > 2000:
            _SUBSETS.clear()
        hit = _SUBSETS[key] = _subset(ts, labels)
    return hit


# oneOf subsets by branch languages: an unrolled schema translates one oneOf many times
_SUBSETS: dict = {}
# complements of the supersets of branch languages, by (level, language): or the exception
_NEGATED: dict = {}


def _subset(ts: list[_T], labels: list) -> tuple[_T, list[str]]:
    notes: list[str] = []
    fields = {
        "null": sum(t.null for t in ts) == 1,
        "bools": frozenset(b for b in (True, False) if sum(b in t.bools for t in ts) == 1),
    }
    for kind, word in _KINDS:
        parts = [_T(**{kind: getattr(t, kind)}) for t in ts]
        live = [i for i, p in enumerate(parts) if not _is_empty(p)]
        terms = []
        for i in live:
            x = parts[i]
            for j in live:
                if j == i or not _may_overlap(x, parts[j]):
                    continue
                x, note = _exclude(x, parts[j])
                if note is not None:
                    notes.append(f"{word} are excluded from branch {labels[j]} {note}")
                if x.is_bottom():
                    break
            terms.append(x)
        fields[kind] = getattr(_join(*terms), kind)
    return _T(**fields), list(dict.fromkeys(notes))


def _may_overlap(a: _T, b: _T) -> bool:
    """False only where ``a ∩ b`` is provably empty (an overlap check that fails counts
    as an overlap)."""
    try:
        return not _is_empty(_meet(a, b))
    except (_Refuse, TooComplexError):
        return True


def _exclude(x: _T, a: _T) -> tuple[_T, str | None]:
    """``x ∩ ¬R`` for the tightest superset ``R`` of ``a`` (one type) whose complement and
    meet with ``x`` are computable, and a note naming the superset (None: ``R = a``)."""
    cause = None
    for level, superset in _LEVELS:
        try:
            neg = _NEGATED.get((level, a))
            if neg is None:
                if len(_NEGATED) > 20000:
                    _NEGATED.clear()
                try:
                    neg = _negate(superset(a))
                except (_Refuse, TooComplexError) as e:
                    neg = e
                _NEGATED[(level, a)] = neg
            if isinstance(neg, Exception):
                raise neg
            out = _meet(x, neg)
            _check_counted(out, x)
        except (_Refuse, TooComplexError) as e:
            cause = cause or getattr(e, "reason", None) or f"its complement is too complex ({e})"
            continue
        return out, None if level == "exact" else f"{_SUPERSETS[level]} ({cause})"
    return _BOTTOM, f"by type alone: none is accepted where that branch has any ({cause})"


_SUPERSETS = {
    "relaxed": "through a superset of it: uniqueItems, existential property constraints and "
    "counted contains over them dropped",
    "shape": "through its shape alone (array lengths; object sizes, allowed, required and "
    "forbidden property names)",
    "open shape": "through its sizes and required and forbidden property names alone",
}


def _check_counted(out: _T, x: _T) -> None:
    """Raises `_Refuse` where ``out`` holds an array the emitter cannot count that ``x``
    did not: a ``contains`` (from a complement) whose own complement is not expressible,
    or more than three on one array."""
    old = set(_arrays(x))
    for a in _arrays(out):
        if a in old or not a.contains:
            continue
        if len(a.contains) > 3:
            raise _Refuse("contains", "more than three contains constraints on one array")
        for c, *_ in a.contains:
            _negate(c)


def _arrays(t, seen=None):
    """Every array record in ``t``, at any depth (each distinct subschema walked once)."""
    seen = set() if seen is None else seen
    t = _top(t)
    if id(t) in seen:
        return
    seen.add(id(t))
    for a in t.arrays:
        yield a
        for s in (*a.prefix, a.items, *(c for c, *_ in a.contains)):
            if s is not None:
                yield from _arrays(s, seen)
    for o in t.objects:
        for s in (*(s for _, s in o.props), *(s for _, s in o.rest), *(s for _, s in o.need)):
            if s is not None:
                yield from _arrays(s, seen)


def relax(t):
    """A superset of ``t`` without what `_negate` cannot complement: ``uniqueItems`` of
    arrays that may hold two items, existential property constraints of objects, and the
    upper count of a ``contains`` whose schema was relaxed (a larger schema counts more)."""
    t = _top(t)
    if t.is_top() or t.is_bottom():
        return t
    if t.calls:
        raise _Unroll("the complement of a recursive $ref")
    hit = _RELAXED.get(t)
    if hit is None:
        if len(_RELAXED) > 20000:
            _RELAXED.clear()
        hit = _RELAXED[t] = t.replace(
            arrays=tuple(_relax_arr(a) for a in t.arrays),
            objects=tuple(_relax_obj(o) for o in t.objects),
        )
    return hit


# relaxed languages by language: unrolled schemas share subtrees, walked once each
_RELAXED: dict = {}


def _relax_opt(s):
    return None if s is None else relax(s)


def _relax_arr(a: _Arr) -> _Arr:
    contains = []
    for c, mn, mx, start, ptr in a.contains:
        rc = relax(c)
        if rc == c:
            contains.append((c, mn, mx, start, ptr))
        elif mn > 0:
            contains.append((rc, mn, None, start, ptr))
    one = a.max is not None and a.max <= 1
    return _Arr(
        tuple(_relax_opt(p) for p in a.prefix),
        _relax_opt(a.items),
        a.min,
        a.max,
        tuple(contains),
        unique=a.unique if one else None,
    )


def _relax_obj(o: _Obj) -> _Obj:
    return _Obj(
        tuple((n, _relax_opt(s)) for n, s in o.props),
        o.required,
        tuple((k, _relax_opt(s)) for k, s in o.rest),
        (),
        o.min,
        o.max,
        at=o.at,
    )


def shape(t, closed: bool = True):
    """A superset of ``t`` that keeps only array lengths, and object sizes, required and
    forbidden names, and (``closed``) which names are allowed at all: complementable, and
    without ``closed`` its complement meets any object (no existential constraint)."""
    t = _top(t)
    if t.is_top() or t.is_bottom():
        return t
    if t.calls:
        raise _Unroll("the complement of a recursive $ref")
    objects = []
    for o in t.objects:
        props = tuple(
            (n, s if s is not None and s.is_bottom() else None)
            for n, s in o.props
            if closed or (s is not None and s.is_bottom())
        )
        rest = tuple((k, None) for k, _ in o.rest) if closed else None
        objects.append(_Obj(props, o.required, rest, min=o.min, max=o.max, at=o.at))
    return t.replace(arrays=tuple(_Arr(min=a.min, max=a.max) for a in t.arrays), objects=objects)


_LEVELS = (
    ("exact", lambda a: a),
    ("relaxed", relax),
    ("shape", shape),
    ("open shape", lambda a: shape(a, closed=False)),
)
