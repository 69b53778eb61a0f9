"""Schema → typed language: the per-type keywords (numbers, strings, arrays, objects)."""

from __future__ import annotations

from fractions import Fraction

from automata_compile.automata import char_dfa as _char_dfa
from automata_compile.automata import fsa as _fsa
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema import _ecma, _formats
from automata_compile.frontends.json_schema._content import (
    TooComplexError,
    alt,
    rep,
)
from automata_compile.frontends.json_schema._resolver import _ptr_join
from automata_compile.frontends.json_schema._type_algebra import (
    _meet,
)
from automata_compile.frontends.json_schema._types import (
    _BOTTOM,
    _T,
    _TOP,
    _Arr,
    _dec,
    _Num,
    _Obj,
    _only,
)

# Probes of `_length_cut` past the bound that surely fits: the bound found is then within
# 1/8 of the gap to the largest that fits (each probe costs up to the intersection's budget).
LENGTH_CUT_PROBES = 3


def _length_cut(langs, lo: int, hi: int | None):
    """``(language, n)``: the strings of every language in ``langs`` with ``lo`` to ``n``
    characters, for the largest ``n < hi`` found whose automaton fits the intersection's
    budget, or ``n = hi`` (exact) where the others' strings are at most ``hi`` long anyway
    (``format: hostname`` with ``maxLength: 253``: its counter only multiplied states);
    None where there is no length bound (``hi`` None), no other constraint, or the others
    alone outgrow the budget, or no ``n >= lo`` fits.

    A bounded intersection has at most ``k * (n + 1)`` states for the others' ``k``-state
    DFA, so ``n = MAX_STATES // k - 1`` fits; up to `LENGTH_CUT_PROBES` bisection steps
    then look for a larger ``n`` (an email ``format`` of 172 states with ``maxLength``
    254: 115, where no probe fits)."""
    if hi is None or not langs:
        return None
    try:
        rest = sf.intersect(*langs)
        _, (d,) = _char_dfa.dfas(rest, what="a length bound")
    except TooComplexError:
        return None
    longest = _fsa.longest(d)
    if longest is not None and longest <= hi:  # the others bound the length already: exact
        if lo == 0:
            return rest, hi
        try:
            return sf.intersect(rep(sf.ANY_CHAR, lo, None), rest), hi
        except TooComplexError:
            pass

    def bounded(n):
        try:
            return sf.intersect(rep(sf.ANY_CHAR, lo, n), rest)
        except TooComplexError:
            return None

    fits = min(hi - 1, _char_dfa.MAX_STATES // max(d.num_states, 1) - 1)
    best = bounded(fits) if fits >= lo else None
    if best is None:
        return None
    top = hi  # the smallest bound known not to fit
    for _ in range(LENGTH_CUT_PROBES):
        if top - fits <= max(1, hi // 16):
            break
        mid = (fits + top) // 2
        got = bounded(mid)
        if got is None:
            top = mid
        else:
            fits, best = mid, got
    return best, fits


class _Keywords:
    """Keyword handlers of `_translator._Translator` (a mixin: uses its refuse/invalid/sub)."""

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
            lang = _formats.format_language(f, self.opts.leap_seconds)
            if f in _formats.FORMAT_LIMITS:
                self.subset("format", p, f"format {f!r}: {_formats.FORMAT_LIMITS[f]}")
            if lang is not None:
                langs.append(("format", lang))
        if not langs:
            return None
        try:
            return sf.intersect(*(lang for _, lang in langs))
        except TooComplexError as e:
            names = ", ".join(k for k, _ in langs)
            why = f"the intersection of {names} outgrows the automaton budget ({e})"
            cut = _length_cut([x for k, x in langs if not k.endswith("Length")], a, b)
            if cut is not None:  # a sound subset: the strings of at most n characters
                lang, n = cut
                if n < b:
                    self.subset(
                        "maxLength",
                        _ptr_join(ptr, "maxLength"),
                        f"{why}: strings of at most {n} characters are accepted, not {b}",
                    )
                return lang
            self.refuse(langs[-1][0], ptr, why)
            return langs[0][1]

    def _pattern(self, pattern, ptr, keyword):
        if not isinstance(pattern, str):
            self.invalid(ptr, f"{keyword} must be a string")
        try:
            return _ecma.pattern_language(pattern)
        except _ecma.PatternError as e:
            if e.unsupported:
                self.refuse(keyword, ptr, f"pattern {pattern!r}: {e}")
                return None
            self.invalid(ptr, f"invalid ECMA-262 pattern {pattern!r}: {e}")
        except TooComplexError as e:
            self.refuse(keyword, ptr, f"pattern {pattern!r} outgrows the automaton budget ({e})")
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
            with self.non_monotone_part():
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
        unique = s.get("uniqueItems", False)
        p_unique = _ptr_join(ptr, "uniqueItems")
        if not isinstance(unique, bool):
            self.invalid(p_unique, f"uniqueItems must be a boolean, got {unique!r}")
        # the emitter builds the distinct items (`_unique`), exactly or as a named subset
        arr = _Arr(prefix, items, mn, mx, contains, ev, unique=p_unique if unique else None)
        return [_only(arrays=(arr,))]

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
            out.append(_only(objects=(_Obj(tuple(declared), rest=rest, ev=ev, at=ptr),)))
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
            out.append(_only(objects=(_Obj(required=tuple(req), min=mn, max=mx, at=ptr),)))
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
