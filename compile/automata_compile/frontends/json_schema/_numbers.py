"""Numbers as content languages: decimal ranges, literals and ``multipleOf`` automata."""

from __future__ import annotations

import functools
import json
import math
from decimal import Decimal, localcontext
from fractions import Fraction

from automata_compile.automata import NEVER, Automaton
from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._types import _Num

_DIGIT = sf.chars([(0x30, 0x39)])
_DIGIT19 = sf.chars([(0x31, 0x39)])
_ZERO = sf.char("0")
_MINUS = sf.char("-")
_DOT = sf.char(".")


def _digits(lo: int, hi: int):
    return sf.chars([(0x30 + lo, 0x30 + hi)]) if lo <= hi else NEVER


_E = sf.chars([(0x45, 0x45), (0x65, 0x65)])

# Digit runs are bounded by ``max_digits`` = d (None: unbounded), so a model cannot loop
# on digits: at most d digits in an integer part, in an exponent after its leading zeros
# and in a fraction (`frac_any`: in all, its trailing zeros included: counting the digits
# before the zeros too would multiply the two counters); a fraction compared with a bound
# (`_frac_text`) has at most d digits up to its last non-zero digit, then the zeros.
# json.dumps writes at most 16 integer digits, 20 fraction digits (0.000 and 17
# significant digits) and 3 exponent digits for a double, and at most 20 digits for a
# 64-bit integer, so every d >= MIN_DIGITS keeps those spellings.
MIN_DIGITS = 20


def _run(lo: int, d: int | None):
    """lo .. d digits (lo or more where d is None)."""
    return sf.rep(_DIGIT, lo, None if d is None else max(d, lo))


@functools.cache
def _uint(d: int | None):
    """Canonical unsigned integers of at most d digits."""
    return sf.alt(_ZERO, sf.seq(_DIGIT19, _run(0, None if d is None else d - 1)))


@functools.cache
def _c1(d: int | None):
    """Canonical fraction digit strings (non-empty, no trailing zero), at most d digits."""
    if d is not None and d <= 0:
        return NEVER
    return sf.seq(_run(0, None if d is None else d - 1), _DIGIT19)


# Filler runs (zeros that do not change the value) are bounded by ``max_filler`` = k, as
# whitespace runs are by ``max_whitespace``: at most k trailing zeros in a fraction
# (``12.`` + k zeros is the longest integer spelling of 12) and at most k leading zeros in
# an exponent, so a model cannot loop on zeros.
@functools.cache
def frac_zero(k: int):
    """'' or '.0…0' with 1..k zeros (the fraction of an integer)."""
    return sf.opt(sf.seq(_DOT, sf.rep(_ZERO, 1, k))) if k > 0 else sf.EPS


@functools.cache
def frac_any(k: int, d: int | None = None):
    """'' or '.digits' with at most k trailing zeros and at most d digits in all (d <= k:
    one counter; a bound on the digits before the zeros would multiply the two runs)."""
    if d is not None and d <= k:
        return sf.opt(sf.seq(_DOT, sf.rep(_DIGIT, 1, d)))
    zeros = sf.rep(_ZERO, 1, k) if k > 0 else NEVER
    if d is None:
        return sf.opt(sf.seq(_DOT, sf.alt(sf.seq(_c1(None), sf.rep(_ZERO, 0, k)), zeros)))
    # j trailing zeros after the last non-zero digit, d digits in all
    body = sf.alt(*(sf.seq(_c1(d - j), sf.rep(_ZERO, j, j)) for j in range(k + 1)), zeros)
    return sf.opt(sf.seq(_DOT, body))


@functools.cache
def _exp(k: int, d: int | None = None):
    digits = sf.alt(
        sf.seq(sf.rep(_ZERO, 0, k), _DIGIT19, _run(0, None if d is None else d - 1)),
        sf.rep(_ZERO, 1, k) if k else NEVER,
    )
    return sf.seq(_E, sf.opt(sf.chars([(0x2B, 0x2B), (0x2D, 0x2D)])), digits)


@functools.cache
def number_text(k: int, d: int | None = None):
    """Every JSON number (RFC 8259 grammar) with filler runs of at most k zeros and digit
    runs of at most d digits."""
    return sf.seq(sf.opt(_MINUS), _uint(d), frac_any(k, d), sf.opt(_exp(k, d)))


@functools.cache
def plain_text(k: int, d: int | None = None):
    """Plain decimals (no exponent) with at most k trailing fraction zeros."""
    return sf.seq(sf.opt(_MINUS), _uint(d), frac_any(k, d))


def _uint_fixed(lo: str, hi: str):
    """Digit strings of length len(lo) between lo and hi (inclusive, same length)."""
    if not lo:
        return sf.EPS
    if lo == hi:
        return sf.lit(lo)
    a, b = int(lo[0]), int(hi[0])
    n = len(lo) - 1
    if a == b:
        return sf.seq(sf.char(lo[0]), _uint_fixed(lo[1:], hi[1:]))
    parts = []
    if lo[1:] == "0" * n:
        a0 = a
    else:
        a0 = a + 1
        parts.append(sf.seq(sf.char(lo[0]), _uint_fixed(lo[1:], "9" * n)))
    if hi[1:] == "9" * n:
        b0 = b
    else:
        b0 = b - 1
        tail = sf.seq(sf.char(hi[0]), _uint_fixed("0" * n, hi[1:]))
    if a0 <= b0:
        parts.append(sf.seq(_digits(a0, b0), sf.rep(_DIGIT, n, n)))
    if b0 != b:
        parts.append(tail)
    return sf.alt(*parts)


# The fraction digits of mantissas 1.x with 1.x e308 <= DBL_MAX = 1.7976931348623157e308
# (at most 16 digits: json.dumps writes 17 significant digits at most).
def _max_frac(f: str, i: int):
    """Digit strings g of 1..len(f)-i digits with 0.g <= 0.f[i:]."""
    d = int(f[i])
    rest = len(f) - i - 1
    same = sf.seq(sf.char(f[i]), sf.opt(_max_frac(f, i + 1)) if rest else sf.EPS)
    return sf.alt(sf.seq(_digits(0, d - 1), sf.rep(_DIGIT, 0, rest)), same)


_MAX_DOUBLE_FRAC = _max_frac("7976931348623157", 0)

# Integral floats written as json.dumps writes them (1e+16 <= |x| < 1.7e308): at most 16
# fraction digits and an exponent of at least 16, so the value is an integer; the bound
# keeps it a finite double (parsers turn larger ones into infinity).
_BIG_EXP = sf.alt(
    sf.seq(
        _DIGIT19,
        sf.opt(sf.seq(_DOT, sf.rep(_DIGIT, 1, 16))),
        _E,
        sf.opt(sf.char("+")),
        sf.alt(
            sf.seq(sf.char("1"), _digits(6, 9)),
            sf.seq(_digits(2, 9), _DIGIT),
            sf.seq(_digits(1, 2), _DIGIT, _DIGIT),
            sf.seq(sf.lit("30"), _digits(0, 7)),
        ),
    ),
    sf.seq(
        sf.char("1"),
        sf.opt(sf.seq(_DOT, _MAX_DOUBLE_FRAC)),
        _E,
        sf.opt(sf.char("+")),
        sf.lit("308"),
    ),
)


@functools.cache
def integer_text(k: int, d: int | None = None):
    """Unconstrained integers: '12' (at most d digits), '12.0…0' (1..k zeros) and
    json.dumps's '1e+16' forms."""
    return sf.seq(sf.opt(_MINUS), sf.alt(sf.seq(_uint(d), frac_zero(k)), _BIG_EXP))


def _uint_range(lo: int, hi: int | None, d: int | None = None):
    """Canonical decimal integers (no leading zeros) in [lo, hi]; with no ``hi``, of at
    most d digits (or as many as ``lo`` has)."""
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
            parts.append(sf.seq(_DIGIT19, _run(length - 1, None if d is None else d - 1)))
            break
        parts.append(_uint_fixed(str(lo), str(top)))
        lo = top + 1
        length += 1
    return sf.alt(*parts)


def _split_dec(d: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    with localcontext() as ctx:
        ctx.prec = 1000
        text = format(d, "f")
    ip, _, fp = text.partition(".")
    return int(ip), fp.rstrip("0")


def _lead(lo: int, hi: int, d: int | None = None):
    """Canonical digit strings (at most d digits) whose first digit is in [lo, hi]."""
    r = None if d is None else d - 1
    return sf.alt(sf.seq(_digits(max(lo, 1), hi), sf.opt(_c1(r))), sf.seq(_digits(lo, hi), _c1(r)))


def _frac_cmp(f: str, op: str, nonempty: bool = False, d: int | None = None):
    """Canonical digit strings g (no trailing zero; non-empty if ``nonempty``; at most d
    digits) with 0.g <op> 0.f, op in le lt ge gt; f has no trailing zero. The values'
    spellings are these followed by zeros (bounded in `_frac_text`)."""
    if d is not None and d <= 0:
        return sf.EPS if not nonempty and _zero_ok(f, op) else NEVER
    if not f:
        if op == "le":
            return NEVER if nonempty else sf.EPS
        if op == "lt":
            return NEVER
        if op == "ge":
            return _c1(d) if nonempty else sf.opt(_c1(d))
        return _c1(d)
    dig, rest = int(f[0]), f[1:]
    same = sf.seq(sf.char(f[0]), _frac_cmp(rest, op, f[0] == "0", None if d is None else d - 1))
    if op in ("le", "lt"):
        parts = [] if nonempty else [sf.EPS]
        return sf.alt(*parts, _lead(0, dig - 1, d), same)
    return sf.alt(_lead(dig + 1, 9, d), same)


def _zero_ok(f: str, op: str) -> bool:
    """Whether 0.0 <op> 0.f (f without trailing zeros)."""
    return op == "le" or (op == "lt" and bool(f)) or (op == "ge" and not f)


def _frac_text(conds, k: int, d: int | None = None):
    """The fraction part texts ('' or '.digits', at most d digits then at most k trailing
    zeros) of the values 0.g meeting every (f, op) in ``conds``."""
    ne = sf.intersect(*(_frac_cmp(f, op, True, d) for f, op in conds))
    parts = [sf.seq(_DOT, ne, sf.rep(_ZERO, 0, k))]
    if all(_zero_ok(f, op) for f, op in conds):
        parts.append(frac_zero(k))
    return sf.alt(*parts)


def _nonneg_range(lo, lo_incl, hi, hi_incl, integer: bool, k: int, d: int | None = None):
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
        return sf.seq(_uint_range(a, b, d), frac_zero(k))
    li, lf = _split_dec(lo)
    anyfrac = frac_any(k, d)
    lo_cond = (lf, "ge" if lo_incl else "gt")
    if hi is None:
        return sf.alt(
            sf.seq(_uint_range(li + 1, None, d), anyfrac),
            sf.seq(sf.lit(str(li)), _frac_text([lo_cond], k, d)),
        )
    hi_i, hf = _split_dec(hi)
    hi_cond = (hf, "le" if hi_incl else "lt")
    if li == hi_i:
        return sf.seq(sf.lit(str(li)), _frac_text([lo_cond, hi_cond], k, d))
    parts = [
        sf.seq(sf.lit(str(li)), _frac_text([lo_cond], k, d)),
        sf.seq(_uint_range(li + 1, hi_i - 1), anyfrac) if hi_i - 1 >= li + 1 else NEVER,
        sf.seq(sf.lit(str(hi_i)), _frac_text([hi_cond], k, d)),
    ]
    return sf.alt(*parts)


def _interval_nonempty(a, a_incl, b, b_incl) -> bool:
    return b is None or b > a or (b == a and a_incl and b_incl)


def _range_node(n: _Num, integer: bool, k: int, d: int | None = None):
    lo, hi = n.lo, n.hi
    zero = Decimal(0)
    parts = []
    # non-negative texts 'x': x in [max(lo, 0), hi]
    if lo is None or lo < zero:
        a, a_incl = zero, True
    else:
        a, a_incl = lo, not n.lo_excl
    if _interval_nonempty(a, a_incl, hi, not n.hi_excl):
        parts.append(_nonneg_range(a, a_incl, hi, not n.hi_excl, integer, k, d))
    # negative texts '-y' (x = -y): y in [max(-hi, 0), -lo]
    if hi is None or hi > zero:
        b, b_incl = zero, True
    else:
        b, b_incl = -hi, not n.hi_excl
    top, top_incl = (None, True) if lo is None else (-lo, not n.lo_excl)
    if _interval_nonempty(b, b_incl, top, top_incl):
        parts.append(sf.seq(_MINUS, _nonneg_range(b, b_incl, top, top_incl, integer, k, d)))
    return sf.alt(*parts)


def _number_literal(v: Decimal, k: int):
    sign = v < 0
    ip, fp = _split_dec(abs(v))
    frac = sf.seq(_DOT, sf.lit(fp), sf.rep(_ZERO, 0, k)) if fp else frac_zero(k)
    body = sf.seq(sf.lit(str(ip)), frac)
    parts = [sf.seq(_MINUS, body) if sign else body]
    if v == 0:
        parts.append(sf.seq(_MINUS, body))
    f = float(v)
    if math.isfinite(f) and Decimal(repr(f)) == v:
        text = json.dumps(f)
        if "e" in text:
            parts.append(sf.lit(text))
    return sf.alt(*parts)


_MAX_MODULUS = 400


def _modulus(m: Fraction) -> int:
    """The integer a with m = a / 10^d for the least d (the remainder automaton's size)."""
    d = 0
    while (m * 10**d).denominator != 1:
        d += 1
    return int(m * 10**d)


def _mult_automaton(m: Fraction, negate: bool):
    """`Automaton` of plain decimals that are (``negate``: are not) multiples of m: the
    remainder of the digits read so far, modulo the numerator of m at its decimal scale."""
    d = 0
    while (m * 10**d).denominator != 1:
        d += 1
    a = int(m * 10**d)
    if a > _MAX_MODULUS:
        raise sf.TooComplexError(f"multipleOf {m}: modulus {a} too large")
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
            trans[src][str(dig)] = sid(("F", j + 1, (10 * r + dig) % a))
        elif dig == 0:
            trans[src]["0"] = sid(("F", j, r))
        elif negate:
            trans[src][str(dig)] = sid(("X",))

    start = sid(("S",))
    while todo:
        key = todo.pop()
        src = index[key]
        kind = key[0]
        if kind in ("S", "N"):
            if kind == "S":
                trans[src]["-"] = sid(("N",))
            trans[src]["0"] = sid(("I0",))
            for dig in range(1, 10):
                trans[src][str(dig)] = sid(("I", dig % a))
        elif kind in ("I", "I0"):
            r = key[1] if kind == "I" else 0
            if kind == "I":
                for dig in range(10):
                    trans[src][str(dig)] = sid(("I", (10 * r + dig) % a))
            trans[src]["."] = sid(("D", r))
        elif kind == "D":
            for dig in range(10):
                frac_digit(src, 0, key[1], dig)
        elif kind == "F":
            for dig in range(10):
                frac_digit(src, key[1], key[2], dig)
        else:
            for dig in range(10):
                trans[src][str(dig)] = src
    edges = tuple(tuple((((ord(c), ord(c)),), t) for c, t in sorted(row.items())) for row in trans)
    return Automaton(
        edges=edges, start=start, finals=frozenset(q for q, x in enumerate(accept) if x)
    )


def _constrained_number(n: _Num, k: int, d: int | None = None):
    integer = n.integer
    node = _range_node(n, integer, k, d)
    mults = [_mult_automaton(m, False) for m in n.mults if m != 1]
    mults += [_mult_automaton(m, True) for m in n.not_mults]
    if mults:  # the remainder automata loop on zeros: bound their filler runs too
        node = sf.intersect(node, *mults, plain_text(k, d))
    if n.excluded:
        node = sf.difference(node, sf.alt(*(_number_literal(v, k) for v in n.excluded)))
    return node
