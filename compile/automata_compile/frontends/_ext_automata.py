"""Character automata for the regex extensions (`Automaton` IR nodes, see `_extensions`).

Each builder returns a deterministic automaton over code points whose edges are
`Ranges`; `_byte_dfa` spells them in UTF-8. Sizes are linear in the argument:

* `text_until` is the string-matching (KMP) automaton of the stop phrase, built
  from the failure function; it has ``m + 1`` states and, by Simon's theorem,
  at most ``2m`` edges that do not return to the start, plus one "anything
  else" edge per state.
* `substring_of` is the suffix automaton of the reference (at most ``2n - 1``
  states and ``3n - 4`` edges), every state accepting.
"""

from __future__ import annotations

from automata_compile.automata import Automaton, kmp_moves
from automata_compile.automata import charsets as cs


def _one(c: str) -> cs.Ranges:
    return ((ord(c), ord(c)),)


def _of(chars: str) -> cs.Ranges:
    return cs.normalize((ord(c), ord(c)) for c in chars)


def _minus(a: cs.Ranges, b: cs.Ranges) -> cs.Ranges:
    return cs.intersect(a, cs.complement(b))


def quoted_text() -> Automaton:
    """``"`` + (a character other than ``" \\ LF CR``, or ``\\`` + a character other than
    ``LF CR``)* + ``"``; the same language as ``"(?:[^"\\\\\\n\\r]|\\\\[^\\n\\r])*"``."""
    plain = cs.complement(_of('"\\\n\r'))
    escaped = cs.complement(_of("\n\r"))
    edges = (
        ((_one('"'), 1),),  # 0: before the opening quote
        ((plain, 1), (_one("\\"), 2), (_one('"'), 3)),  # 1: inside
        ((escaped, 1),),  # 2: after a backslash
        (),  # 3: after the closing quote
    )
    return Automaton(edges=edges, start=0, finals=frozenset({3}))


# YAML 1.2 (§5.1 c-printable) minus line breaks, white space and the BOM; we also exclude
# NEL, LS and PS, which YAML 1.1 (and PyYAML) treat as line breaks.
_PRINTABLE = cs.normalize(
    [
        (0x09, 0x09),
        (0x0A, 0x0A),
        (0x0D, 0x0D),
        (0x20, 0x7E),
        (0x85, 0x85),
        (0xA0, 0xD7FF),
        (0xE000, 0xFFFD),
        (0x10000, 0x10FFFF),
    ]
)
_WHITE = _of(" ")  # YAML also allows tabs; PyYAML (and other YAML 1.1 readers) do not
NS_CHAR = _minus(_PRINTABLE, _of(" \t\n\r\x85\ufeff\u2028\u2029"))
YAML_INDICATORS = "-?:,[]{}#&*!|>'\"%@`"


def unquoted_text() -> Automaton:
    """A one-line YAML 1.2 plain scalar in block context (``ns-plain-one-line(flow-out)``).

    Non-empty; no leading or trailing space; words separated by spaces only (no
    tabs, which YAML allows but PyYAML rejects); the first character is not an
    indicator, except ``- ? :`` followed by a non-space character; ``:`` only
    directly before a non-space character (so no ``": "`` and no trailing ``:``);
    ``#`` only directly after a non-space character (so no ``" #"``); only
    printable characters, no line breaks.
    """
    colon = _one(":")
    first = _minus(NS_CHAR, _of(YAML_INDICATORS))
    edges = (
        ((first, 1), (_of("-?:"), 2)),  # 0 S: start
        ((_WHITE, 3), (colon, 2), (_minus(NS_CHAR, colon), 1)),  # 1 A: after a plain char (final)
        ((colon, 2), (_minus(NS_CHAR, colon), 1)),  # 2 C: after ':' (or a leading - ?)
        ((_WHITE, 3), (colon, 2), (_minus(NS_CHAR, _of(":#")), 1)),  # 3 W: after white space
    )
    return Automaton(edges=edges, start=0, finals=frozenset({1}))


def text_until(stop: str) -> Automaton:
    """Any text up to and including the first occurrence of ``stop`` (non-empty).

    State ``j`` = the longest suffix of the text read so far that is a prefix of
    ``stop`` has length ``j``; state ``m`` (= ``len(stop)``) is final and has no
    edges. Non-trivial edges of state ``j > 0`` are those of its failure state plus
    the forward edge, so the construction costs O(number of edges) = O(m).
    """
    m = len(stop)
    moves = kmp_moves([ord(c) for c in stop])
    edges = []
    for d in moves:
        out = [(((c, c),), t) for c, t in sorted(d.items())]
        out.append((cs.complement(cs.normalize((c, c) for c in d)), 0))
        edges.append(tuple(out))
    edges.append(())
    return Automaton(edges=tuple(edges), start=0, finals=frozenset({m}))


def substring_of(reference: str) -> Automaton:
    """Any substring of ``reference`` (including the empty string): its suffix automaton."""
    link = [-1]
    length = [0]
    nxt: list[dict[int, int]] = [{}]
    last = 0
    for ch in map(ord, reference):
        cur = len(nxt)
        nxt.append({})
        length.append(length[last] + 1)
        link.append(0)
        p = last
        while p != -1 and ch not in nxt[p]:
            nxt[p][ch] = cur
            p = link[p]
        if p != -1:
            q = nxt[p][ch]
            if length[p] + 1 == length[q]:
                link[cur] = q
            else:
                clone = len(nxt)
                nxt.append(dict(nxt[q]))
                length.append(length[p] + 1)
                link.append(link[q])
                while p != -1 and nxt[p].get(ch) == q:
                    nxt[p][ch] = clone
                    p = link[p]
                link[q] = link[cur] = clone
        last = cur
    edges = tuple(tuple((((c, c),), t) for c, t in sorted(d.items())) for d in nxt)
    return Automaton(edges=edges, start=0, finals=frozenset(range(len(nxt))))
