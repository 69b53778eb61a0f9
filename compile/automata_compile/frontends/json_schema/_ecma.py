"""ECMA-262 patterns (Unicode mode) → content languages (IR trees over code points).

A recursive-descent parser for the pattern syntax JSON Schema uses (``u`` flag
semantics, Annex B leniencies), then `search_language`: a ``pattern`` is an
unanchored search, so the language is the strings that contain a match; anchors
inside the pattern are resolved on an automaton with virtual begin / end symbols.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import numpy as np

from automata_compile.automata import Alt, Repeat, Seq
from automata_compile.automata import char_dfa as _char_dfa
from automata_compile.automata import fsa as _fsa
from automata_compile.frontends.json_schema._content import (
    _SURROGATES,
    ANY_STRING,
    BOL,
    BOL_NODE,
    EOL,
    EOL_NODE,
    EPS,
    MAX_CP,
    Anchor,
    alt,
    char,
    chars,
    cs_complement,
    cs_diff,
    cs_norm,
    cs_union,
    has_anchor,
    rep,
    seq,
    star,
)


class PatternError(Exception):
    """An ECMA-262 pattern is malformed (``unsupported=False``) or uses a construct that
    has no regular equivalent (``unsupported=True``)."""

    def __init__(self, message: str, *, unsupported: bool):
        self.unsupported = unsupported
        super().__init__(message)


_DIGIT = ((0x30, 0x39),)
_WORD = cs_norm([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)])
_SPACE = cs_norm(
    [
        (0x09, 0x0D),
        (0x20, 0x20),
        (0xA0, 0xA0),
        (0x1680, 0x1680),
        (0x2000, 0x200A),
        (0x2028, 0x2029),
        (0x202F, 0x202F),
        (0x205F, 0x205F),
        (0x3000, 0x3000),
        (0xFEFF, 0xFEFF),
    ]
)
_LINE_TERMINATORS = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_DOT = cs_complement(_LINE_TERMINATORS)

_GC_ALIASES = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "Letter": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"),
    "Cased_Letter": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"),
    "Mark": ("Mn", "Mc", "Me"),
    "Combining_Mark": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"),
    "Number": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "Punctuation": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "punct": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"),
    "Symbol": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"),
    "Separator": ("Zs", "Zl", "Zp"),
    "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
    "Other": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_GC_LONG = {
    "Uppercase_Letter": "Lu",
    "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt",
    "Modifier_Letter": "Lm",
    "Other_Letter": "Lo",
    "Nonspacing_Mark": "Mn",
    "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me",
    "Decimal_Number": "Nd",
    "digit": "Nd",
    "Letter_Number": "Nl",
    "Other_Number": "No",
    "Connector_Punctuation": "Pc",
    "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe",
    "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po",
    "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk",
    "Other_Symbol": "So",
    "Space_Separator": "Zs",
    "Line_Separator": "Zl",
    "Paragraph_Separator": "Zp",
    "Control": "Cc",
    "cntrl": "Cc",
    "Format": "Cf",
    "Surrogate": "Cs",
    "Private_Use": "Co",
    "Unassigned": "Cn",
}


@functools.lru_cache(maxsize=1)
def _categories() -> dict[str, tuple]:
    acc: dict[str, list] = {}
    cur_cat, cur_lo = None, 0
    for cp in range(MAX_CP + 2):
        cat = unicodedata.category(chr(cp)) if cp <= MAX_CP else None
        if cat != cur_cat:
            if cur_cat is not None:
                acc.setdefault(cur_cat, []).append((cur_lo, cp - 1))
            cur_cat, cur_lo = cat, cp
    return {k: cs_norm(v) for k, v in acc.items()}


def _property_set(name: str) -> tuple:
    value = name
    if "=" in name:
        prop, value = name.split("=", 1)
        if prop not in ("General_Category", "gc"):
            raise PatternError(
                f"Unicode property {name!r} is not supported (only General_Category values)",
                unsupported=True,
            )
    if value == "Any":
        return ((0, MAX_CP),)
    if value == "ASCII":
        return ((0, 0x7F),)
    if value == "Assigned":
        return cs_complement(_categories()["Cn"], universe=((0, MAX_CP),))
    cats = _GC_ALIASES.get(value)
    if cats is None:
        short = _GC_LONG.get(value, value)
        if short not in _categories() and short not in ("Cs", "Co", "Cn", "Zl", "Zp"):
            raise PatternError(
                f"Unicode property {name!r} is not supported (only General_Category values)",
                unsupported=True,
            )
        cats = (short,)
    return cs_union(*(_categories().get(c, ()) for c in cats))


class _EcmaParser:
    """Recursive-descent parser for ECMA-262 regular expressions (``u`` flag semantics,
    with the Annex B leniencies for lone ``{``, ``}`` and ``]``)."""

    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.ngroups = pattern.count("(")

    def error(self, msg: str, unsupported: bool = False):
        raise PatternError(f"{msg} at offset {self.i}", unsupported=unsupported)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self):
        node = self.disjunction()
        if self.i < len(self.p):
            self.error(f"unbalanced {self.peek()!r}")
        return node

    def disjunction(self):
        branches = [self.alternative()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.alternative())
        return alt(*branches) if len(branches) > 1 else branches[0]

    def alternative(self):
        items = []
        while self.i < len(self.p) and self.peek() not in "|)":
            items.append(self.term())
        return seq(*items)

    def term(self):
        ch = self.peek()
        if ch == "^":
            self.i += 1
            return self._no_quantifier(BOL_NODE)
        if ch == "$":
            self.i += 1
            return self._no_quantifier(EOL_NODE)
        if ch == "\\" and self.peek(1) in ("b", "B"):
            self.error("word boundary assertions (\\b, \\B) are not supported", unsupported=True)
        if ch == "(" and self.p.startswith(("(?=", "(?!", "(?<=", "(?<!"), self.i):
            self.error("lookaround assertions are not supported", unsupported=True)
        atom = self.atom()
        return self.quantifier(atom)

    def _no_quantifier(self, node):
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._brace_quantifier(False)):
            self.error("a quantified assertion is not supported", unsupported=True)
        return node

    def _brace_quantifier(self, consume: bool):
        m = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.p, self.i)
        if not m:
            return None
        if consume:
            self.i = m.end()
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        return lo, hi

    def quantifier(self, atom):
        ch = self.peek()
        if ch == "*":
            lo, hi = 0, None
            self.i += 1
        elif ch == "+":
            lo, hi = 1, None
            self.i += 1
        elif ch == "?":
            lo, hi = 0, 1
            self.i += 1
        elif ch == "{":
            q = self._brace_quantifier(True)
            if q is None:
                return atom
            lo, hi = q
            if hi is not None and hi < lo:
                self.error("numbers out of order in {} quantifier")
        else:
            return atom
        if self.peek() == "?":  # lazy: same language
            self.i += 1
        if self.peek() in ("*", "+", "?") or (self.peek() == "{" and self._brace_quantifier(False)):
            self.error("nothing to repeat")
        if lo > 1000 or (hi is not None and hi > 1000):
            self.error("a repetition count above 1000 is not supported", unsupported=True)
        return rep(atom, lo, hi)

    def atom(self):
        ch = self.peek()
        if ch == "(":
            self.i += 1
            if self.p.startswith("?:", self.i):
                self.i += 2
            elif self.p.startswith("?<", self.i):
                end = self.p.find(">", self.i)
                if end < 0:
                    self.error("unterminated group name")
                self.i = end + 1
            elif self.peek() == "?":
                self.error("unknown group syntax")
            node = self.disjunction()
            if self.peek() != ")":
                self.error("missing )")
            self.i += 1
            return node
        if ch == ")":
            self.error("unbalanced )")
        if ch == "[":
            return chars(self.char_class())
        if ch == ".":
            self.i += 1
            return chars(_DOT)
        if ch == "\\":
            self.i += 1
            s = self.atom_escape(in_class=False)
            return chars(s)
        if ch in "*+?":
            self.error("nothing to repeat")
        if ch == "{" and self._brace_quantifier(False):
            self.error("nothing to repeat")
        self.i += 1
        return char(ch)

    def atom_escape(self, in_class: bool) -> tuple:
        ch = self.peek()
        if not ch:
            self.error("trailing backslash")
        self.i += 1
        simple = {"t": 9, "n": 10, "v": 11, "f": 12, "r": 13}
        if ch in simple:
            return ((simple[ch], simple[ch]),)
        if ch == "d":
            return _DIGIT
        if ch == "D":
            return cs_complement(_DIGIT)
        if ch == "w":
            return _WORD
        if ch == "W":
            return cs_complement(_WORD)
        if ch == "s":
            return _SPACE
        if ch == "S":
            return cs_complement(_SPACE)
        if ch == "b" and in_class:
            return ((8, 8),)
        if ch == "-" and in_class:
            return ((0x2D, 0x2D),)
        if ch == "c":
            letter = self.peek()
            if letter.isascii() and letter.isalpha():
                self.i += 1
                cp = ord(letter) % 32
                return ((cp, cp),)
            self.error("invalid \\c escape")
        if ch == "0" and not self.peek().isdigit():
            return ((0, 0),)
        if ch.isdigit():
            self.error("backreferences are not supported", unsupported=True)
        if ch == "k":
            self.error("named backreferences are not supported", unsupported=True)
        if ch == "x":
            h = self.p[self.i : self.i + 2]
            if len(h) == 2 and all(c in "0123456789abcdefABCDEF" for c in h):
                self.i += 2
                cp = int(h, 16)
                return ((cp, cp),)
            self.error("invalid \\x escape")
        if ch == "u":
            cp = self._unicode_escape()
            return ((cp, cp),)
        if ch in ("p", "P"):
            if self.peek() != "{":
                self.error("invalid property escape")
            end = self.p.find("}", self.i)
            if end < 0:
                self.error("invalid property escape")
            name = self.p[self.i + 1 : end]
            self.i = end + 1
            s = _property_set(name)
            return s if ch == "p" else cs_complement(s)
        if ch.isascii() and not ch.isalnum():
            # Unicode mode allows only the syntax characters ``^$\\.*+?()[]{}|`` and '/';
            # any other ASCII non-alphanumeric (``\:``, ``\#``, ``\ ``) is Annex B's identity
            # escape, the character itself (as in Python's ``re``), and common in hand-written
            # schemas. Letters and digits stay errors: ``\a``, ``\z`` differ across dialects.
            return ((ord(ch), ord(ch)),)
        self.error(f"invalid escape \\{ch}")
        raise AssertionError

    def _unicode_escape(self) -> int:
        if self.peek() == "{":
            end = self.p.find("}", self.i)
            h = self.p[self.i + 1 : end] if end > 0 else ""
            if not h or not all(c in "0123456789abcdefABCDEF" for c in h) or int(h, 16) > MAX_CP:
                self.error("invalid \\u{...} escape")
            self.i = end + 1
            return int(h, 16)
        h = self.p[self.i : self.i + 4]
        if len(h) != 4 or not all(c in "0123456789abcdefABCDEF" for c in h):
            self.error("invalid \\u escape")
        self.i += 4
        cp = int(h, 16)
        if 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i):
            h2 = self.p[self.i + 2 : self.i + 6]
            if len(h2) == 4 and all(c in "0123456789abcdefABCDEF" for c in h2):
                low = int(h2, 16)
                if 0xDC00 <= low <= 0xDFFF:
                    self.i += 6
                    return 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
        if 0xD800 <= cp <= 0xDFFF:
            self.error("a lone surrogate escape is not supported", unsupported=True)
        return cp

    def char_class(self) -> tuple:
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list = []
        while True:
            ch = self.peek()
            if not ch:
                self.error("unterminated character class")
            if ch == "]":
                self.i += 1
                break
            lo_set = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi_set = self.class_atom()
                if (
                    len(lo_set) != 1
                    or len(hi_set) != 1
                    or lo_set[0][0] != lo_set[0][1]
                    or hi_set[0][0] != hi_set[0][1]
                ):
                    # Annex B: a class escape in a range makes '-' literal
                    ranges.extend(lo_set)
                    ranges.append((0x2D, 0x2D))
                    ranges.extend(hi_set)
                    continue
                lo, hi = lo_set[0][0], hi_set[0][0]
                if lo > hi:
                    self.error("range out of order in character class")
                ranges.append((lo, hi))
            else:
                ranges.extend(lo_set)
        s = cs_norm(ranges)
        return cs_complement(s) if negate else cs_diff(s, (_SURROGATES,))

    def class_atom(self) -> tuple:
        ch = self.peek()
        if ch == "\\":
            self.i += 1
            return self.atom_escape(in_class=True)
        self.i += 1
        return ((ord(ch), ord(ch)),)


@functools.lru_cache(maxsize=1024)
def parse_ecma(pattern: str):
    """Parses an ECMA-262 pattern into a tree that may contain ``^``/``$`` anchor nodes."""
    return _EcmaParser(pattern).parse()


@functools.lru_cache(maxsize=1024)
def pattern_language(pattern: str):
    """The decoded strings that a JSON Schema ``pattern`` accepts (unanchored search)."""
    return search_language(parse_ecma(pattern))


# ------------------------------------------------------------------------------------------
# search semantics
# ------------------------------------------------------------------------------------------


def search_language(node):
    """The strings that contain a match of an ECMA pattern tree (which may hold anchors)."""
    if not has_anchor(node):
        return seq(ANY_STRING, node, ANY_STRING)
    branches = node.options if isinstance(node, Alt) else (node,)
    fast = []
    for b in branches:
        items = list(b.items) if isinstance(b, Seq) else [b]
        lead = bool(items) and items[0] == BOL_NODE
        trail = bool(items) and items[-1] == EOL_NODE
        core = items[int(lead) : len(items) - int(trail)] if items else []
        if any(has_anchor(x) for x in core):
            fast = None
            break
        fast.append(seq(EPS if lead else ANY_STRING, *core, EPS if trail else ANY_STRING))
    if fast is not None:
        return alt(*fast)
    return _anchored_search(node)


@functools.lru_cache(maxsize=256)
def _anchored_search(node):
    """General anchors: build ``U* P U*`` with virtual begin/end symbols and take the
    strings ``s`` with ``BOL s EOL`` in it (an `Automaton` node)."""
    bol, eol = chars([(BOL, BOL)]), chars([(EOL, EOL)])
    universe = ((0, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, MAX_CP), (BOL, EOL))
    universe_star = star(chars(universe))

    def sub(n):
        if isinstance(n, Anchor):
            return bol if n.kind == "^" else eol
        if isinstance(n, Seq):
            return seq(*(sub(k) for k in n.items))
        if isinstance(n, Alt):
            return alt(*(sub(k) for k in n.options))
        if isinstance(n, Repeat):
            return rep(sub(n.item), n.min, n.max)
        return n

    part, (d,) = _char_dfa.dfas(
        seq(universe_star, sub(node), universe_star), universe=universe, what="an anchored pattern"
    )
    d = _fsa.complete(d)
    (bol_atom,) = part.atoms_of(((BOL, BOL),))
    (eol_atom,) = part.atoms_of(((EOL, EOL),))
    trans = d.trans.copy()
    accepting = d.accepting[trans[:, eol_atom]]
    start = int(trans[d.start, bol_atom])
    trans[:, [bol_atom, eol_atom]] = _fsa.DEAD
    return _char_dfa.to_ir(part, _fsa.DFA(trans, np.asarray(accepting), start))
