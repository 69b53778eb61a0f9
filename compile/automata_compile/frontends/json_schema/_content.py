"""Content languages of JSON strings, as IR trees over decoded code points.

The JSON Schema front end describes the *decoded* value of a string (``pattern``,
``format``, ``minLength``, property names, ``enum`` texts) as an IR tree of
`automata._ir` (``Chars``, ``Seq``, ``Alt``, ``Repeat``, ``Automaton``). This module
has the simplifying constructors (``seq``, ``alt``, ``rep``: flatten, merge character
sets, left-factor literal sets), the code-point set helpers ``cs_*``, the boolean
operations (delegated to `automata._char_dfa`, whose results are `Automaton` nodes),
and `to_regex`, which prints a tree without automaton nodes in Python `re` syntax
(for `json_schema_to_regex` only: compilation never goes through regex text).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import re

from automata_compile._errors import StateBudgetExceededError
from automata_compile.automata import NEVER, Alt, Automaton, Chars, Repeat, Seq, Terminal
from automata_compile.automata import char_dfa as _char_dfa
from automata_compile.automata import charsets as _cs
from automata_compile.automata import children as _kids

MAX_CP = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
BOL, EOL = 0x110000, 0x110001  # virtual anchor symbols (outside Unicode)
EPS = Seq(())

# An automaton or a translation grew past its budget (the translator turns it into a refusal
# naming the keyword and the place).
TooComplexError = StateBudgetExceededError


class NotPrintableError(Exception):
    """The tree holds an automaton node, which has no regex spelling here."""


@dataclasses.dataclass(frozen=True)
class Anchor:
    """An ECMA ``^`` (``kind="^"``) or ``$`` inside a parsed pattern; `_ecma.search_language`
    removes them before the tree is used."""

    kind: str


BOL_NODE = Anchor("^")
EOL_NODE = Anchor("$")


# ------------------------------------------------------------------------------------------
# code point sets: tuples of sorted, disjoint, non-adjacent (lo, hi) ranges
# ------------------------------------------------------------------------------------------


def cs_norm(ranges) -> tuple:
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if lo > hi:
            continue
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def cs_union(*sets) -> tuple:
    return cs_norm([r for s in sets for r in s])


def cs_complement(s, universe=((0, _SURROGATES[0] - 1), (_SURROGATES[1] + 1, MAX_CP))) -> tuple:
    out = []
    for ulo, uhi in universe:
        cur = ulo
        for lo, hi in s:
            if hi < cur or lo > uhi:
                continue
            if lo > cur:
                out.append((cur, lo - 1))
            cur = max(cur, hi + 1)
        if cur <= uhi:
            out.append((cur, uhi))
    return cs_norm(out)


cs_inter = _cs.intersect


def cs_diff(a, b) -> tuple:
    return cs_inter(a, cs_complement(b, universe=((0, EOL),)))


def cs_contains(s, cp: int) -> bool:
    i = bisect.bisect_right(s, (cp, EOL + 1)) - 1
    return i >= 0 and s[i][0] <= cp <= s[i][1]


ALL_CHARS = cs_complement(())


# ------------------------------------------------------------------------------------------
# constructors
# ------------------------------------------------------------------------------------------


def is_never(node) -> bool:
    return isinstance(node, Alt) and not node.options


def chars(ranges):
    """One character of the set (surrogates removed: they are not characters); NEVER if empty."""
    ranges = cs_norm(ranges)
    if any(lo <= _SURROGATES[1] and hi >= _SURROGATES[0] for lo, hi in ranges):
        ranges = cs_diff(ranges, (_SURROGATES,))
    return Chars(ranges) if ranges else NEVER


def char(c: str | int):
    cp = ord(c) if isinstance(c, str) else c
    return Chars(((cp, cp),))


def lit(text: str):
    return seq(*(char(ch) for ch in text))


ANY_CHAR = chars(ALL_CHARS)


def seq(*items):
    out: list = []
    for item in items:
        if is_never(item):
            return NEVER
        if isinstance(item, Seq):
            out.extend(item.items)
        else:
            out.append(item)
    # x x* -> x+ (also for x{n,} forms)
    merged: list = []
    for item in out:
        if merged and isinstance(item, Repeat) and item.max is None and item.item == merged[-1]:
            merged[-1] = rep(item.item, item.min + 1, None)
        elif (
            merged
            and isinstance(merged[-1], Repeat)
            and merged[-1].max is None
            and merged[-1].item == item
        ):
            merged[-1] = rep(item, merged[-1].min + 1, None)
        else:
            merged.append(item)
    out = merged
    if len(out) == 1:
        return out[0]
    return Seq(tuple(out))


def alt(*items):
    flat: list = []
    seen: set = set()
    ranges: list = []
    first_chars = -1
    nullable_eps = False
    for item in items:
        for sub in item.options if isinstance(item, Alt) else (item,):
            if isinstance(sub, Chars):
                if first_chars < 0:
                    first_chars = len(flat)
                    flat.append(sub)
                ranges.extend(sub.ranges)
            elif sub == EPS:
                nullable_eps = True
            elif sub not in seen:
                seen.add(sub)
                flat.append(sub)
    if first_chars >= 0:
        flat[first_chars] = chars(ranges)
    flat = _factor(flat)
    if nullable_eps:
        if not flat:
            return EPS
        if not any(nullable(x) for x in flat):
            inner = flat[0] if len(flat) == 1 else Alt(tuple(flat))
            return rep(inner, 0, 1)
    if not flat:
        return NEVER
    if len(flat) == 1:
        return flat[0]
    return Alt(tuple(flat))


def _head(node):
    return node.items[0] if isinstance(node, Seq) and node.items else node


def _tail(node):
    return seq(*node.items[1:]) if isinstance(node, Seq) else EPS


def _factor(items: list) -> list:
    """Left-factor alternatives that share a first element (turns literal sets into tries)."""
    if len(items) < 2:
        return items
    groups: dict = {}
    for item in items:
        groups.setdefault(_head(item), []).append(item)
    if len(groups) == len(items):
        return items
    out = []
    for head, members in groups.items():
        if len(members) == 1:
            out.append(members[0])
        else:
            out.append(seq(head, alt(*(_tail(m) for m in members))))
    return out


def rep(item, lo: int, hi: int | None):
    if hi is not None and hi < lo:
        return NEVER
    if is_never(item):
        return EPS if lo == 0 else NEVER
    if item == EPS or hi == 0:
        return EPS
    if lo == 1 and hi == 1:
        return item
    if isinstance(item, Repeat):
        # (x{a,b}){c,d} simplifications that keep the language
        if item.min == 0 and item.max is None:
            return item  # (x*){lo,hi} == x* for hi >= 1
        if item.min in (0, 1) and item.max == 1 and hi is None:
            return Repeat(item.item, 0 if (item.min == 0 or lo == 0) else 1, None)
    return Repeat(item, lo, hi)


def opt(item):
    return rep(item, 0, 1)


def star(item):
    return rep(item, 0, None)


ANY_STRING = star(ANY_CHAR)


# ------------------------------------------------------------------------------------------
# predicates
# ------------------------------------------------------------------------------------------


def _fold(node, f):
    """Seq: all children satisfy ``f``; Alt: any does; Repeat: min 0 or the item does;
    None for other nodes."""
    if isinstance(node, Seq):
        return all(f(x) for x in node.items)
    if isinstance(node, Alt):
        return any(f(x) for x in node.options)
    if isinstance(node, Repeat):
        return node.min == 0 or f(node.item)
    return None


@functools.lru_cache(maxsize=65536)
def nullable(node) -> bool:
    """Whether the empty string is in the language (anchors count as empty)."""
    if isinstance(node, (Chars, Terminal)):  # a rule call is one JSON value, never empty
        return False
    if isinstance(node, Automaton):
        if all(isinstance(label, tuple) for out in node.edges for label, _ in out):
            return node.start in node.finals
        return _char_dfa.matches(node, "")
    folded = _fold(node, nullable)
    return True if folded is None else folded  # anchors


def has_anchor(node) -> bool:
    return isinstance(node, Anchor) or any(has_anchor(k) for k in _kids(node))


@functools.lru_cache(maxsize=65536)
def printable(node) -> bool:
    """Whether `to_regex` can print the tree (it holds no automaton and no anchor).
    Memoized, as `size` (which asks it of every subtree) is: a tree of shared subtrees is
    otherwise walked again for each of its ancestors."""
    if isinstance(node, (Automaton, Anchor, Terminal)):
        return False
    return all(printable(k) for k in _kids(node))


def _trivially_nonempty(node) -> bool:
    if isinstance(node, Chars):
        return bool(node.ranges)
    return bool(_fold(node, _trivially_nonempty))


# ------------------------------------------------------------------------------------------
# boolean operations (on automata, see `automata._char_dfa`)
# ------------------------------------------------------------------------------------------


def intersect(*nodes):
    """The intersection of content languages (an `Automaton` node unless trivial, or a
    literal set where one of them is a small finite set: see `finite_strings`)."""
    nodes = tuple(dict.fromkeys(n for n in nodes if n != ANY_STRING))
    if not nodes:
        return ANY_STRING
    if any(is_never(n) for n in nodes):
        return NEVER
    if len(nodes) == 1:
        return nodes[0]
    sets = [finite_strings(n) for n in nodes]
    texts = min((t for t in sets if t is not None), key=len, default=None)
    if texts is not None:
        # each string tested against the others: no product automaton (an ``enum`` of
        # hundreds of names meeting a ``pattern`` that spells one of them)
        return alt(*(lit(x) for x in texts if _in_all(x, nodes, sets)))
    return _char_dfa.intersect(*nodes)


def _in_all(text: str, nodes, sets) -> bool:
    """Whether ``text`` is in every language of ``nodes`` (``sets``: their finite strings,
    or None), tested on automata, never by a backtracking regex."""
    return all(
        text in t if t is not None else _char_dfa.matches(n, text)
        for n, t in zip(nodes, sets, strict=True)
    )


# Strings a content language may spell for `intersect` to test them one by one, and the
# longest of them.
FINITE_MAX = 64
FINITE_CHARS = 4096


@functools.lru_cache(maxsize=65536)
def finite_strings(node) -> tuple[str, ...] | None:
    """The strings of ``node``'s language where it is finite and has at most `FINITE_MAX`
    of them (read off the tree: literals, character sets, bounded repeats, their sequences
    and unions), else None (also for automaton nodes and anchors)."""
    if isinstance(node, Chars):
        if sum(hi - lo + 1 for lo, hi in node.ranges) > FINITE_MAX or any(
            hi > MAX_CP for _, hi in node.ranges
        ):  # many characters, or a virtual anchor symbol
            return None
        return tuple(chr(c) for lo, hi in node.ranges for c in range(lo, hi + 1))
    if isinstance(node, Seq):
        parts, count = [], 1
        for item in node.items:
            part = finite_strings(item)
            if part is None:
                return None
            count *= len(part)
            if count > FINITE_MAX:
                return None
            parts.append(part)
        # joined once per string: a long literal costs its length, not its length squared
        return tuple(dict.fromkeys(map("".join, itertools.product(*parts))))
    if isinstance(node, Alt):
        acc: dict = {}
        for option in node.options:
            part = finite_strings(option)
            if part is None:
                return None
            acc.update(dict.fromkeys(part))
            if len(acc) > FINITE_MAX:
                return None
        return tuple(acc)
    if isinstance(node, Repeat):
        if node.max is None:
            return None
        part = finite_strings(node.item)
        if part is None:
            return None
        if not part or part == ("",):  # no string, or only the empty one: repeats add none
            return ("",) if node.min == 0 or part else ()
        # a nonempty string repeated k times for each k in [min, max] spells that many
        # strings; and the strings' length bounds the work (``"a{100000}"``)
        if node.max - node.min >= FINITE_MAX or node.max * max(map(len, part)) > FINITE_CHARS:
            return None
        out, acc = ("",), {}
        for k in range(node.max + 1):
            if k >= node.min:
                acc.update(dict.fromkeys(out))
                if len(acc) > FINITE_MAX:
                    return None
            if k < node.max:
                if len(out) * len(part) > FINITE_MAX:
                    return None
                out = tuple(dict.fromkeys(a + b for a in out for b in part))
        return tuple(acc)
    return None


def complement(node):
    """All strings not in the content language."""
    if is_never(node):
        return ANY_STRING
    if node == ANY_STRING:
        return NEVER
    return _char_dfa.complement(node)


def difference(a, b):
    if is_never(b) or is_never(a):
        return a
    if b == ANY_STRING:
        return NEVER
    return _char_dfa.difference(a, b)


def is_empty(node) -> bool:
    if is_never(node):
        return True
    if _trivially_nonempty(node):
        return False
    return _char_dfa.is_empty(node)


def disjoint(a, b) -> bool:
    return _char_dfa.disjoint(a, b)


def content_matches(node, text: str) -> bool:
    """Whether the decoded string ``text`` is in the content language ``node``."""
    if is_never(node):
        return False
    if printable(node):
        return _compiled(node).fullmatch(text) is not None
    return _char_dfa.matches(node, text)


@functools.lru_cache(maxsize=4096)
def _compiled(node):
    return re.compile(to_regex(node), re.DOTALL)


# ------------------------------------------------------------------------------------------
# printing (Python `re` syntax)
# ------------------------------------------------------------------------------------------

_SPECIAL = set(".^$*+?{}[]\\|()")
_CLASS_SPECIAL = set("\\]^-[")


def _esc(cp: int, in_class: bool) -> str:
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    ch = chr(cp)
    if cp > 0x7F and not ch.isprintable():
        return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"
    if ch in (_CLASS_SPECIAL if in_class else _SPECIAL) or ch in " #&~" and in_class:
        return "\\" + ch
    return ch


def _class_body(ranges) -> str:
    out = []
    for lo, hi in ranges:
        if lo == hi:
            out.append(_esc(lo, True))
        elif hi == lo + 1:
            out.append(_esc(lo, True) + _esc(hi, True))
        else:
            out.append(_esc(lo, True) + "-" + _esc(hi, True))
    return "".join(out)


def _chars_text(ranges) -> str:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _esc(ranges[0][0], False)
    if ranges == ((0x30, 0x39),):
        return "[0-9]"
    # surrogates never occur in text (the compiler works on UTF-8), so they may be counted
    # in or out of a class, whichever prints shorter
    with_surrogates = cs_union(ranges, (_SURROGATES,))
    if with_surrogates == ((0, MAX_CP),):
        return "[\\x00-\\U0010ffff]"
    neg = cs_complement(with_surrogates, universe=((0, MAX_CP),))
    pos = _class_body(ranges)
    neg_text = _class_body(neg)
    if len(neg_text) + 1 < len(pos):
        return "[^" + neg_text + "]"
    return "[" + pos + "]"


@functools.lru_cache(maxsize=65536)
def to_regex(node) -> str:
    """Prints a tree as a Python `re` pattern (meant for `re.fullmatch`).

    Raises:
      NotPrintableError: the tree holds an `Automaton` node (or an anchor).
    """
    if isinstance(node, Chars):
        text = _chars_text(node.ranges)
    elif isinstance(node, Seq):
        text = "".join(
            "(?:" + to_regex(x) + ")" if isinstance(x, Alt) else to_regex(x) for x in node.items
        )
    elif isinstance(node, Alt):
        text = (
            "|".join(to_regex(x) for x in node.options) if node.options else "[^\\x00-\\U0010ffff]"
        )
    elif isinstance(node, Repeat):
        inner = node.item
        body = to_regex(inner)
        if not (isinstance(inner, Chars) or (body.startswith("(?:") and _balanced_group(body))):
            body = "(?:" + body + ")"
        lo, hi = node.min, node.max
        if (lo, hi) == (0, 1):
            q = "?"
        elif (lo, hi) == (0, None):
            q = "*"
        elif (lo, hi) == (1, None):
            q = "+"
        elif hi is None:
            q = f"{{{lo},}}"
        elif lo == hi:
            q = f"{{{lo}}}"
        else:
            q = f"{{{lo},{hi}}}"
        text = body + q
    elif isinstance(node, Automaton):
        raise NotPrintableError(
            "an intersection, complement or counting automaton has no regular-expression "
            "spelling here"
        )
    else:
        raise NotPrintableError("anchors cannot be printed; use search_language first")
    return text


def _balanced_group(text: str) -> bool:
    """Whether ``text`` is exactly one ``(?:...)`` group."""
    depth = 0
    i = 0
    in_class = False
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            if ch == "]":
                in_class = False
        elif ch == "[":
            in_class = True
            if text[i + 1 : i + 2] == "^":
                i += 1
            if text[i + 1 : i + 2] == "]":
                i += 1
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and i != len(text) - 1:
                return False
        i += 1
    return True


@functools.lru_cache(maxsize=65536)
def size(node) -> int:
    """The length of the printed regex, or of an estimate for automaton nodes."""
    if printable(node):
        return len(to_regex(node))
    if isinstance(node, Terminal):
        return 10
    if isinstance(node, Automaton):
        return sum(
            (10 if isinstance(label, tuple) else size(label))
            for out in node.edges
            for label, _ in out
        )
    return sum(size(k) for k in _kids(node)) + 4
