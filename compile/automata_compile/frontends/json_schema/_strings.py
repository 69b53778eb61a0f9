"""JSON string encoding: content languages → the JSON string literals that spell them.

A decoded character may be written raw or escaped (short escapes, ``\\uXXXX``,
surrogate pairs); `encode_json_string` replaces each character set of a content tree
by the IR of its spellings. An `Automaton` node keeps its states and gets IR labels,
so intersections and complements are encoded exactly, without regex text.
"""

from __future__ import annotations

import functools

from automata_compile.automata import NEVER, Alt, Automaton, Chars, Repeat, Seq
from automata_compile.frontends.json_schema._content import (
    _SURROGATES,
    ALL_CHARS,
    ANY_CHAR,
    ANY_STRING,
    EPS,
    MAX_CP,
    alt,
    char,
    chars,
    cs_complement,
    cs_contains,
    cs_diff,
    cs_inter,
    cs_norm,
    is_never,
    lit,
    rep,
    seq,
)

_HEX_LO = "0123456789abcdef"
_SHORT = {0x22: '"', 0x5C: "\\", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}


def _hex_digit_set(values):
    ranges = []
    for v in values:
        ranges.append((ord(_HEX_LO[v]), ord(_HEX_LO[v])))
        if v >= 10:
            ranges.append((ord(_HEX_LO[v].upper()), ord(_HEX_LO[v].upper())))
    return chars(ranges)


@functools.lru_cache(maxsize=8192)
def _hex_fixed(ranges: tuple, width: int):
    """Hex strings of exactly ``width`` digits (any letter case) whose value is in ``ranges``."""
    if not ranges:
        return NEVER
    full = 16**width - 1
    if ranges == ((0, full),):
        return rep(_hex_digit_set(range(16)), width, width)
    if width == 1:
        return _hex_digit_set([v for lo, hi in ranges for v in range(lo, hi + 1)])
    step = 16 ** (width - 1)
    by_sub: dict[tuple, list[int]] = {}
    for d in range(16):
        base = d * step
        sub = cs_inter(ranges, ((base, base + step - 1),))
        if sub:
            sub = tuple((lo - base, hi - base) for lo, hi in sub)
            by_sub.setdefault(sub, []).append(d)
    return alt(*(seq(_hex_digit_set(ds), _hex_fixed(sub, width - 1)) for sub, ds in by_sub.items()))


_BACKSLASH = char("\\")


@functools.lru_cache(maxsize=8192)
def _encode_set(ranges: tuple, escapes: str):
    """JSON string fragments that decode to exactly one character of ``ranges``."""
    if ranges == ALL_CHARS and escapes == "standard":
        escapes = "any"  # free text: every spelling of every character
    parts = []
    raw = cs_diff(ranges, ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), _SURROGATES))
    if raw:
        parts.append(chars(raw))
    short = [cp for cp in _SHORT if cs_contains(ranges, cp)]
    if escapes == "any" and cs_contains(ranges, 0x2F):
        short.append(0x2F)
    if short:
        parts.append(seq(_BACKSLASH, chars([(ord(_SHORT.get(cp, "/")),) * 2 for cp in short])))
    if escapes == "any":
        escapable = cs_diff(ranges, (_SURROGATES,))
    elif escapes == "minimal":
        escapable = cs_inter(ranges, ((0, 0x1F),))
    else:
        escapable = cs_inter(ranges, ((0, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, MAX_CP)))
        escapable = cs_diff(escapable, (_SURROGATES,))
    bmp = cs_inter(escapable, ((0, 0xFFFF),))
    if bmp:
        parts.append(seq(_BACKSLASH, char("u"), _hex_fixed(bmp, 4)))
    astral = cs_inter(escapable, ((0x10000, MAX_CP),))
    if astral:
        by_low: dict[tuple, list] = {}
        for lo, hi in astral:
            for high in range((lo - 0x10000) >> 10, ((hi - 0x10000) >> 10) + 1):
                base = 0x10000 + (high << 10)
                sub = cs_inter(((lo, hi),), ((base, base + 0x3FF),))
                low = tuple((a - base + 0xDC00, b - base + 0xDC00) for a, b in sub)
                by_low.setdefault(low, []).append((0xD800 + high, 0xD800 + high))
        for low, highs in by_low.items():
            parts.append(
                seq(
                    _BACKSLASH,
                    char("u"),
                    _hex_fixed(cs_norm(highs), 4),
                    _BACKSLASH,
                    char("u"),
                    _hex_fixed(low, 4),
                )
            )
    return alt(*parts)


@functools.lru_cache(maxsize=4096)
def encode_json_string(content, escapes: str = "standard"):
    """The JSON string literals (with quotes) whose decoded value is in ``content``.

    ``escapes="standard"``: a character is written raw, or escaped where JSON requires it
    (``"``, ``\\``, U+0000-U+001F: short escape or ``\\uXXXX``) or where ``json.dumps``
    with ``ensure_ascii=True`` escapes it (U+007F and above: ``\\uXXXX``, astral characters
    as a surrogate pair). ``escapes="any"``: additionally any character as ``\\uXXXX`` and
    ``/`` as ``\\/`` (every RFC 8259 spelling). ``escapes="minimal"``: only the escapes JSON
    requires (short escapes, ``\\u00XX`` for control characters without one): accepts
    ``json.dumps(..., ensure_ascii=False)`` output, with about a third fewer automaton
    states per character. Hex digits may be of either case. Where
    any character is allowed (free text), every spelling is accepted in both modes. Lone
    surrogate escapes (``\\ud800`` not followed by a low surrogate) are never accepted.
    Cached: an object's key language (the complement of its declared names) is spelled
    wherever the object is.
    """
    quote = char('"')
    return seq(quote, _encode(content, escapes), quote)


def _encode(node, escapes: str):
    return map_chars(node, lambda ranges: _encode_set(ranges, escapes))


def map_chars(node, spell, memo: dict | None = None):
    """Replaces every character set of a content tree by ``spell(ranges)`` (an IR tree):
    automaton edges then carry IR labels (see `automata._ir.Automaton`). A subtree shared
    by several parents (the tree is a DAG) is mapped once (``memo``, by ``id``, kept with
    the node so an id is never reused while cached)."""
    memo = {} if memo is None else memo
    hit = memo.get(id(node))
    if hit is None:
        hit = memo[id(node)] = (node, _map_chars(node, spell, memo))
    return hit[1]


def _map_chars(node, spell, memo: dict):
    if isinstance(node, Chars):
        return spell(node.ranges)
    if isinstance(node, Seq):
        return seq(*(map_chars(x, spell, memo) for x in node.items))
    if isinstance(node, Alt):
        return alt(*(map_chars(x, spell, memo) for x in node.options))
    if isinstance(node, Repeat):
        return rep(map_chars(node.item, spell, memo), node.min, node.max)
    if isinstance(node, Automaton):
        edges = tuple(
            tuple((x, dst) for label, dst in out for x in (spell(label),) if not is_never(x))
            for out in node.edges
        )
        return Automaton(edges=edges, start=node.start, finals=node.finals)
    raise ValueError("anchors must be resolved before encoding")


def json_string_literal(value: str, escapes: str = "standard"):
    return encode_json_string(lit(value), escapes)


def none_of(names):
    """All strings except the given ones (linear in the size of their trie)."""
    return _none_of(frozenset(names))


def name_trie(names) -> dict:
    """The names as nested dicts by character; ``None`` marks a node where a name ends."""
    trie: dict = {}
    for name in names:
        node = trie
        for ch in name:
            node = node.setdefault(ch, {})
        node[None] = True
    return trie


@functools.lru_cache(maxsize=4096)
def _none_of(names: frozenset):
    # by set: an object's declared names are complemented wherever it is negated or met.
    # A string that is no name leaves the names' trie (a prefix, then a character no name
    # continues with, then any string) or stops inside it (a prefix that ends no name).
    # The characters that occur in no name leave from every prefix: they are spelled once,
    # after any prefix, and only the few others (the names' own characters) per trie node;
    # the tail too is spelled once. Spelled per node, each copy of the same language was
    # its own NFA states and its own subset states (an open object of 120 properties:
    # 63,000 subset states for a 3,800-state minimal DFA; renovate.json's 110 forbidden
    # names: 132,000 for 1,300).
    trie = name_trie(names)
    used = cs_norm([(ord(ch), ord(ch)) for name in names for ch in name])

    def kids(node: dict):
        return sorted(k for k in node if k is not None)

    def leaving(node: dict):  # a prefix, then a character of the names that leaves it
        ks = kids(node)
        if not ks:
            return NEVER  # a name no name continues: ``last`` below
        other = chars(cs_diff(used, [(ord(k), ord(k)) for k in ks]))
        return alt(other, *(seq(char(k), leaving(node[k])) for k in ks))

    def stops(node: dict, where):  # the prefixes that stop at a node ``where`` holds
        ks = kids(node)
        return alt(
            *([EPS] if where(node) else []), *(seq(char(k), stops(node[k], where)) for k in ks)
        )

    prefix = stops(trie, lambda node: True)
    last = stops(trie, lambda node: not kids(node))  # a name that no name continues
    inside = stops(trie, lambda node: None not in node)  # a prefix that ends no name
    unused = chars(cs_complement(used))
    # after a name no name continues, any character is free text (every spelling of it),
    # as it was when each trie node had its own tail
    left = alt(leaving(trie), seq(prefix, unused), seq(last, ANY_CHAR))
    return alt(seq(left, ANY_STRING), inside)


# ------------------------------------------------------------------------------------------
