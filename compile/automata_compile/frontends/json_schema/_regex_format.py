"""``format: regex`` as a sound regular subset of regex syntax (an ECMA-262 pattern).

The language of valid regexes is not regular (parentheses nest without bound, a named
group may not repeat a name, ``{n,m}`` needs ``n <= m``), so the format is enforced as a
subset every string of which is a valid pattern for ECMA-262, with and without the ``u``
flag, and for Python's ``re`` (what `jsonschema`'s format checker compiles), and which
keeps what people write: literals, escapes, ``.``, classes with ordered ranges, anchors,
``\\b``, groups, alternation and quantifiers, lazy or not. `REGEX_LEFT_OUT` lists the rest.
"""

from __future__ import annotations

from automata_compile.frontends.json_schema._content import alt, char, opt, seq, star
from automata_compile.frontends.json_schema._ecma import parse_ecma

# Group nesting bound: parentheses at most this deep (a regular language needs a bound).
MAX_GROUP_DEPTH = 3

REGEX_LEFT_OUT = (
    "only a regular subset valid for ECMA-262 (with and without the u flag) and for "
    "Python's re is generated: groups nest at most 3 deep; no named groups (Python's re "
    "has no (?<name>...)), backreferences, lookaround, \\c, \\p, \\0, \\u{...} or flag "
    "groups; ']', '{', '}' are escaped and control characters other than tab, LF and CR "
    "written as escapes; counts in {n}, {n,}, {n,m} have at most 4 digits and no leading "
    "zeros, and in {n,m} n has fewer digits than m or both at most 2; anchors "
    "and \\b, \\B take no quantifier; class ranges only within the digits or the ASCII "
    "letters of one case, from 0, 1, a or A or up to 9, z or Z (not c-k, nor between "
    "escapes such as \\x00-\\x1F); in a class no "
    "unescaped '[' and no '^' as first member, '-' only first, last or escaped, and no two "
    "of '&', '~', '|' side by side (Python warns of future set operations on '&&', '~~', "
    "'||')"
)

# tab, line feed, carriage return, printable ASCII but the syntax characters
# ^ $ \ . * + ? ( ) [ ] { } |, and non-ASCII
_LITERAL = r"[\t\n\r -#%-',\-/->@-Z_-z~\u{A0}-\u{D7FF}\u{E000}-\u{10FFFF}]"
# unescaped inside a class: also '.', '$', '*', '+', '?', '(', ')', '{', '}' and '^' (not
# first); never '\\', ']', '[', and '-' only first or last. '&', '~' and '|' are
# `_CLASS_SPECIAL`: never side by side (Python warns on '&&', '~~', '||': set operations).
_CLASS_CHAR = r"[\t\n\r -%'-,./-Z\^_-{}\u{A0}-\u{D7FF}\u{E000}-\u{10FFFF}]"
_CLASS_CHAR_NOT_CARET = r"[\t\n\r -%'-,./-Z_-{}\u{A0}-\u{D7FF}\u{E000}-\u{10FFFF}]"
_CLASS_SPECIAL = "[&~|]"
_HEX = "[0-9A-Fa-f]"
_CHAR_ESCAPES = rf"\\(?:[nrtfv]|x{_HEX}{{2}}|u{_HEX}{{4}})"
_SET_ESCAPES = r"\\[dDwWsS]"
# identity escapes valid in both modes: the syntax characters and '/' (and '-' in a class)
_IDENTITY = r"\\[\^$\\.*+?()\[\]{}|/]"
_CLASS_IDENTITY = r"\\[\^$\\.*+?()\[\]{}|/\-]"


def _ordered_ranges() -> str:
    """Class ranges ``x-y`` with ``x <= y`` provably, within the digits, the lower-case or
    the upper-case ASCII letters, from the first (``0``, ``a``, ``A``; or ``1``) or to the
    last (``9``, ``z``, ``Z``): ``0-9``, ``a-f``, ``1-9``, ``2-9``, ``x-z``...

    Any ordered pair (``c-k``) would be regular too, but it makes the automaton tell apart
    every token holding such a pair: 4,432 token classes and 30 MB of tables for Llama-3
    instead of 924 and 5 MB (BENCHMARKS.md); ranges between escapes (``\\x00-\\x1F``)
    would need the automaton to remember the first endpoint."""
    alts = []
    for letters in ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
        first, last = letters[0], letters[-1]
        alts += [f"{first}-[{first}-{last}]", f"[{first}-{last}]-{last}"]
    alts.append("1-[1-9]")
    return "(?:" + "|".join(alts) + ")"


def _ordered_counts() -> str:
    """``n,m`` with ``n <= m`` provably: canonical decimals, ``m`` of at most 4 digits,
    ``n`` of fewer digits than ``m``, or both of one or two digits."""
    num = {1: "[0-9]", 2: "[1-9][0-9]", 3: "[1-9][0-9]{2}", 4: "[1-9][0-9]{3}"}
    alts = [f"{num[a]},{num[b]}" for b in range(2, 5) for a in range(1, b)]
    alts += [f"{d},[{d}-9]" for d in range(10)]
    for a in range(1, 10):
        for b in range(10):
            later = f"|[{a + 1}-9][0-9]" if a < 9 else ""
            alts.append(f"{a}{b},(?:{a}[{b}-9]{later})")
    return "(?:" + "|".join(alts) + ")"


def _class() -> str:
    escapes = rf"{_CLASS_IDENTITY}|{_SET_ESCAPES}|{_CHAR_ESCAPES}|{_ordered_ranges()}"
    item = rf"(?:{_CLASS_CHAR}|{escapes})"
    not_caret = rf"(?:{_CLASS_CHAR_NOT_CARET}|{escapes})"

    def items(first: str) -> str:
        """A nonempty item sequence starting with ``first``, no two special characters
        side by side."""
        plain = rf"(?:{item}|{_CLASS_SPECIAL}{item})"
        return rf"(?:(?:{first}|{_CLASS_SPECIAL}{item}){plain}*{_CLASS_SPECIAL}?|{_CLASS_SPECIAL})"

    return rf"\[\^?(?:-(?:{items(item)}-?)?|{items(not_caret)}-?)\]"


def _quantifier() -> str:
    count = "(?:0|[1-9][0-9]{0,3})"
    return rf"(?:(?:[?*+]|\{{{count},?\}}|\{{{_ordered_counts()}\}})\??)"


def regex_subset():
    """The subset as a content language (IR over the format string's characters).

    Built from ECMA patterns of its pieces, each parsed once: the atoms (with a class
    several kilobytes long) are shared by every nesting depth."""
    atom = parse_ecma(rf"{_LITERAL}|{_IDENTITY}|{_SET_ESCAPES}|{_CHAR_ESCAPES}|\.|{_class()}")
    assertion = parse_ecma(r"\^|\$|\\[bB]")
    quantifier = opt(parse_ecma(_quantifier()))
    bar, open_, close = char("|"), parse_ecma(r"\((?:\?:)?"), char(")")
    alternation = None
    for depth in range(MAX_GROUP_DEPTH + 1):
        unit = atom if depth == 0 else alt(atom, seq(open_, alternation, close))
        term = alt(seq(unit, quantifier), assertion)
        alternation = star(alt(term, bar))  # term* ('|' term*)*: terms and bars in any order
    return alternation
