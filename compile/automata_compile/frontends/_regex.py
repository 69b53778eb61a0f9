"""Regex text → a small IR of code-point sets, with exact Python ``re`` semantics.

We parse with CPython's own ``re`` parser, so the accepted syntax, the escapes
(``\\uXXXX``, ``\\N{...}``), the flags and the error positions are those of
``re`` itself. (interegular was the first choice; its parser treats ``\\d \\w
\\s`` as ASCII, rejects ``\\u`` escapes and expands every range into a Python set,
so it cannot give ``re`` semantics.) Constructs a finite automaton cannot
express exactly raise `UnsupportedPatternError` with their offset.

The IR is four node types over code points (``Chars``, ``Seq``, ``Alt``,
``Repeat``) plus ``Terminal`` (a token-level edge) and ``Automaton`` (a
character automaton built by an extension), referenced from the pattern by a
named placeholder group ``(?P<__ext_N>)``.
"""

from __future__ import annotations

import re

from automata_compile._errors import InvalidPatternError, UnsupportedPatternError
from automata_compile.automata import Alt, Chars, Repeat, Seq
from automata_compile.automata import charsets as cs

try:  # Python >= 3.11
    from re import _constants as C
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C
    import sre_parse

PLACEHOLDER_PREFIX = "__ext_"


def parse(pattern: str, placeholders: dict[str, object] | None = None):
    """Parses ``pattern`` (full-match semantics) into the IR.

    Args:
      pattern: a Python ``re`` pattern (str).
      placeholders: IR nodes for groups named ``__ext_N`` (regex extensions).

    Raises:
      InvalidPatternError: ``re`` rejects the pattern.
      UnsupportedPatternError: backreferences, lookaround, conditionals, atomic groups,
        possessive quantifiers, anchors or word boundaries other than at the very start / end.
    """
    if not isinstance(pattern, str):
        raise InvalidPatternError(f"expected a str pattern, got {type(pattern).__name__}")
    try:
        parsed = sre_parse.parse(pattern, 0)
    except re.error as e:
        raise InvalidPatternError(e.msg, pattern=pattern, offset=e.pos) from None
    except (OverflowError, RecursionError) as e:
        raise InvalidPatternError(
            f"pattern too large or too deeply nested ({e})", pattern=pattern
        ) from None
    flags = parsed.state.flags
    if flags & re.LOCALE:
        raise UnsupportedPatternError("the LOCALE flag is not supported", pattern=pattern)
    names = {gid: name for name, gid in parsed.state.groupdict.items()}
    conv = _Converter(pattern, placeholders or {}, names, flags)
    return conv.top(list(parsed))


class _Converter:
    def __init__(self, pattern, placeholders, names, flags):
        self.pattern = pattern
        self.placeholders = placeholders
        self.names = names
        self.flags = flags
        self.sites = _construct_offsets(pattern, bool(flags & re.VERBOSE))
        self.seen: dict[str, int] = {}

    def unsupported(self, kind: str, what: str):
        i = self.seen.get(kind, 0)
        self.seen[kind] = i + 1
        offsets = self.sites.get(kind, [])
        offset = offsets[i] if i < len(offsets) else (offsets[-1] if offsets else None)
        raise UnsupportedPatternError(
            f"{what} cannot be expressed by a finite automaton", pattern=self.pattern, offset=offset
        )

    # Anchors are no-ops at the very start / end (full-match semantics); strip them there.
    def top(self, items):
        items = self._strip(items, leading=True)
        items = self._strip(items, leading=False)
        return self.seq(items, self.flags)

    def _strip(self, items, leading):
        items = list(items)
        at = 0 if leading else -1
        anchors = (
            {C.AT_BEGINNING, C.AT_BEGINNING_STRING} if leading else {C.AT_END, C.AT_END_STRING}
        )
        while items:
            op, av = items[at]
            if op is C.AT and av in anchors:
                items.pop(at)
                self._consume_anchor_site(leading)
                continue
            if op is C.SUBPATTERN:
                gid, add, rem, sub = av
                items[at] = (op, (gid, add, rem, _as_subpattern(sub, self._strip(sub, leading))))
            elif op is C.BRANCH:
                items[at] = (
                    op,
                    (None, [_as_subpattern(o, self._strip(o, leading)) for o in av[1]]),
                )
            break
        return items

    def _consume_anchor_site(self, leading):
        # Stripped anchors are the first (leading) or last (trailing) anchor sites in the source.
        sites = self.sites.get("anchor")
        if sites:
            sites.pop(0 if leading else -1)

    def seq(self, items, flags):
        parts = [self.node(op, av, flags) for op, av in items]
        return parts[0] if len(parts) == 1 else Seq(tuple(parts))

    def node(self, op, av, flags):
        if op is C.LITERAL:
            return Chars(self.chars_of(f"\\U{av:08x}", flags, literal=av))
        if op is C.NOT_LITERAL:
            return Chars(self.chars_of(f"[^\\U{av:08x}]", flags))
        if op is C.ANY:
            return Chars(cs.ALL if flags & re.DOTALL else cs.complement(((10, 10),)))
        if op is C.IN:
            return Chars(self.charset(av, flags))
        if op is C.BRANCH:
            return Alt(tuple(self.seq(list(o), flags) for o in av[1]))
        if op is C.SUBPATTERN:
            gid, add, rem, sub = av
            name = self.names.get(gid)
            if (
                name is not None
                and name.startswith(PLACEHOLDER_PREFIX)
                and name in self.placeholders
            ):
                return self.placeholders[name]
            return self.seq(list(sub), (flags | add) & ~rem)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, sub = av
            return Repeat(self.seq(list(sub), flags), lo, None if hi == C.MAXREPEAT else hi)
        if op is getattr(C, "POSSESSIVE_REPEAT", object()):
            self.unsupported("possessive", "a possessive quantifier")
        if op is getattr(C, "ATOMIC_GROUP", object()):
            self.unsupported("atomic", "an atomic group (?>...)")
        if op in (C.ASSERT, C.ASSERT_NOT):
            self.unsupported("lookaround", "a lookaround assertion")
        if op is C.GROUPREF:
            self.unsupported("backref", "a backreference")
        if op is C.GROUPREF_EXISTS:
            self.unsupported("conditional", "a conditional group (?(...)...)")
        if op is C.AT:
            what = {
                C.AT_BOUNDARY: "a word boundary \\b",
                C.AT_NON_BOUNDARY: "a non-boundary \\B",
            }.get(av, "an anchor in the middle of the pattern")
            self.unsupported("anchor", what)
        raise UnsupportedPatternError(
            f"regex construct {op} is not supported", pattern=self.pattern
        )

    def chars_of(self, class_pattern, flags, literal=None) -> cs.Ranges:
        if literal is not None and not flags & re.IGNORECASE:
            return cs.normalize(((literal, literal),))
        return cs.matched_by_re(class_pattern, flags & (re.IGNORECASE | re.ASCII | re.DOTALL))

    def charset(self, items, flags) -> cs.Ranges:
        negate = bool(items) and items[0][0] is C.NEGATE
        body = items[1:] if negate else items
        simple = not flags & re.IGNORECASE and all(op in (C.LITERAL, C.RANGE) for op, _ in body)
        if simple:
            ranges = cs.normalize([(av, av) if op is C.LITERAL else av for op, av in body])
            return cs.complement(ranges) if negate else ranges
        # Categories (\d \w \s) and IGNORECASE: let `re` define the set exactly.
        return cs.matched_by_re(_class_text(items), flags & (re.IGNORECASE | re.ASCII))


def _class_text(items) -> str:
    parts = []
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            parts.append(f"\\U{av:08x}")
        elif op is C.RANGE:
            parts.append(f"\\U{av[0]:08x}-\\U{av[1]:08x}")
        elif op is C.CATEGORY:
            parts.append(_CATEGORY_TEXT[av])
        else:  # pragma: no cover - re's parser puts nothing else in a class
            raise UnsupportedPatternError(f"character class item {op} is not supported")
    return f"[{'^' if negate else ''}{''.join(parts)}]"


_CATEGORY_TEXT = {
    C.CATEGORY_DIGIT: "\\d",
    C.CATEGORY_NOT_DIGIT: "\\D",
    C.CATEGORY_SPACE: "\\s",
    C.CATEGORY_NOT_SPACE: "\\S",
    C.CATEGORY_WORD: "\\w",
    C.CATEGORY_NOT_WORD: "\\W",
}


def _as_subpattern(original, items):
    return sre_parse.SubPattern(original.state, list(items))


def _construct_offsets(pattern: str, verbose: bool) -> dict[str, list[int]]:
    """Source offsets of constructs we may refuse, in source order, by kind."""
    sites: dict[str, list[int]] = {}
    add = lambda kind, i: sites.setdefault(kind, []).append(i)  # noqa: E731
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1 : i + 2]
            if nxt in ("b", "B", "A", "Z"):
                add("anchor", i)
            elif nxt.isdigit() and nxt != "0":
                add("backref", i)
            i += 2
            continue
        if c == "[":
            j = i + 1
            if pattern[j : j + 1] == "^":
                j += 1
            if pattern[j : j + 1] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if verbose and c == "#":
            while i < n and pattern[i] != "\n":
                i += 1
            continue
        if c in "^$":
            add("anchor", i)
        elif c == "(" and pattern.startswith("(?", i):
            rest = pattern[i + 2 : i + 4]
            if rest[:1] in ("=", "!") or rest in ("<=", "<!"):
                add("lookaround", i)
            elif rest[:1] == "(":
                add("conditional", i)
            elif rest[:1] == ">":
                add("atomic", i)
            elif rest == "P=":
                add("backref", i)
        elif c in "*+?}" and pattern[i + 1 : i + 2] == "+":
            add("possessive", i + 1)
        i += 1
    return sites
