r"""Koo et al.'s regex extensions (Table 1): named groups with a special meaning.

An extension is written as a named group ``(?P<NAME>ARGUMENT)``. `expand` finds
them with a small scanner (escapes, character classes and comments are skipped,
so ``\(?P<...`` or ``[(?P<X>)]`` are plain text), replaces each with a
placeholder group ``(?P<__ext_N>)`` whose IR node is a `Terminal` (a token-level
label with a predicate over the vocabulary) or an `Automaton` (a character
automaton), or splices plain regex text (the delimited lists).

Extensions
----------
``(?P<QUOTED_TEXT>)``
    A double-quoted string on one line: ``"``, then characters other than ``"``,
    ``\``, LF and CR, or escape pairs ``\`` + any character but LF/CR, then
    ``"``. The same language as ``"(?:[^"\\\n\r]|\\[^\n\r])*"``.
``(?P<UNQUOTED_TEXT>)``
    A one-line YAML 1.2 plain scalar (block context): non-empty; printable
    characters only, no line breaks (nor NEL, U+2028, U+2029, BOM) and no tabs
    (PyYAML rejects them); no leading or trailing space; does not start with an
    indicator ``- ? : , [ ] { } # & * ! | > ' " % @ ```, except ``- ? :``
    followed by a non-space; ``:`` only right before a non-space (no ``": "``,
    no final ``:``); ``#`` only right after a non-space (no ``" #"``). Values a
    YAML reader would type (``true``, ``12``) match too.
``(?P<TEXT_TOKEN>)``
    Exactly one text token: any id whose bytes are non-empty (not a special
    token, not EOS). Terminal label.
``(?P<PARAGRAPH_TOKEN>)``
    Exactly one text token without LF or CR bytes. Terminal label. E.g.
    ``Summary:(\n\* (?P<PARAGRAPH_TOKEN>)+){3,5}`` is a heading and three to
    five bullets.
``(?P<TEXT_UNTIL>STOP)``
    Any text (newlines included) up to and including the first occurrence of the
    literal STOP: it ends with STOP and contains it nowhere else. KMP automaton,
    ``len(STOP) + 1`` states.
``(?P<SUBSTRING_OF>REFERENCE)``
    Any substring of the literal REFERENCE, the empty one included. Suffix
    automaton: at most ``2 len(REFERENCE)`` states (an alternation of all
    substrings would be quadratic in size).
``(?P<DELIMITED_LIST>DELIM;ITEM[;MIN[;MAX]])``
    MIN to MAX matches of the regex ITEM separated by the regex DELIM, i.e.
    ``ITEM(?:DELIM ITEM){MIN-1,MAX-1}``. MIN defaults to 1, MAX to unbounded
    (also when empty); ``MIN=0`` also allows the empty string. E.g.
    ``\[(?P<DELIMITED_LIST>, ;\d+;2;4)\]`` matches ``[1, 22]`` to
    ``[1, 2, 3, 4]``.
``(?P<DELIMITED_SUBSEQUENCE_OF>DELIM;ITEM1;ITEM2;...;ITEMn)``
    One or more of the regex items, each at most once and in the given order,
    separated by the regex DELIM. E.g.
    ``(?P<DELIMITED_SUBSEQUENCE_OF>, ;red;green;blue)`` matches ``green`` and
    ``red, blue``, but not ``blue, red`` nor the empty string. (The expanded
    regex is quadratic in the number of items; the automaton stays small.)
``(?P<SPECIAL_TOKEN>NAME)``
    Exactly one special token, by its name in the tokenizer (e.g.
    ``<start_of_image>`` for Gemma-3, ``<|start_header_id|>`` for Llama-3); NAME is
    literal text. Terminal label. Unknown names raise an error listing close
    matches; EOS names are refused (EOS is allowed exactly where the pattern may
    end).

(Table 1's ``IMAGE`` is not provided: image tokens are out of scope here;
``SPECIAL_TOKEN`` covers image delimiters.)

Arguments
---------
* ``QUOTED_TEXT``, ``UNQUOTED_TEXT``, ``TEXT_TOKEN``, ``PARAGRAPH_TOKEN`` take none:
  the group must be empty.
* ``TEXT_UNTIL``, ``SUBSTRING_OF``, ``SPECIAL_TOKEN`` take literal text, which ends
  at the first unescaped ``)``. Escapes: ``\)`` is ``)``, ``\\`` is ``\``; a
  backslash before any other character that is not an ASCII letter or digit
  stands for that character (so ``re.escape(text)`` is always a valid argument);
  ``\n \r \t \f \v \a \xhh \uhhhh \Uhhhhhhhh \N{name}`` mean what they mean in
  Python; any other escape is an error. ``(`` needs no escape. The text is
  matched exactly, character by character: flags (``(?i)``, ``(?x)``) do not
  apply to it.
* ``DELIMITED_LIST`` and ``DELIMITED_SUBSEQUENCE_OF`` take regexes: the argument
  is regex syntax, ends at the matching ``)`` and is split into parts at every
  ``;`` at its top level (not escaped, not inside a group or a character class).
  Write a literal ``;`` in a part as ``\;`` or ``[;]``; for literal text use
  ``re.escape(text).replace(";", r"\;")``. The first part is always the
  delimiter. Parts are ordinary regexes: they may contain extensions, and the
  pattern's flags apply to them; groups inside them do not capture (the parts
  are repeated in the expansion). ``MIN``/``MAX`` are decimal integers
  (surrounding spaces ignored).

The scanner honours a verbose flag given at the start of the pattern
(``(?x)...``): ``#`` comments there hide extension syntax and ``;``.

Named groups with any other name keep their ``re`` meaning, except names that
differ from an extension name only by case or a small typo (difflib similarity
>= 0.85: ``PARAGRAPH_TOKENS``, ``TEXT_UNTILL``, ``quoted_text``): they raise
`InvalidPatternError` naming the extension, so a typo cannot silently become a
plain (empty) group. Rename the group if you meant a plain capture. Names
starting with ``__ext_`` are reserved.

Terminal labels
---------------
``TEXT_TOKEN``, ``PARAGRAPH_TOKEN`` and ``SPECIAL_TOKEN`` match one whole token
chosen by a predicate, not characters. Where a token also has a normal path (the
pattern spells its bytes from the current state), the normal edge wins; among
labels, ``SPECIAL_TOKEN`` labels come first (they are disjoint from text
tokens), then ``PARAGRAPH_TOKEN``, then ``TEXT_TOKEN``. Consequences:

* A label starts and ends at a token boundary; a token never mixes a normal path
  and a label. In ``\n\* (?P<PARAGRAPH_TOKEN>)+`` the tokens ``"*"``, ``" hello"``
  (the usual tokenization of ``* hello``: tokenizers attach the space to the
  word) are *not* allowed, because ``" hello"`` would straddle the literal space
  and the label; ``"* "`` then ``"hello"`` is. So not every tokenization of a
  matching text is accepted. When the text before a label ends with a space,
  consider leaving the space to the label: ``\n\*(?P<PARAGRAPH_TOKEN>)+``
  accepts ``"*"``, ``" hello"`` (and also ``*hello``).
* In ``(?P<TEXT_TOKEN>)+\.`` the token ``"."`` always ends the text (normal
  edge), while ``".x"`` is a text token.
* Labels constrain tokens, not characters: a run of byte-level tokens may stop
  in the middle of a UTF-8 character.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import unicodedata

import numpy as np

from automata_compile._errors import InvalidPatternError, UnsupportedPatternError
from automata_compile.automata import Terminal
from automata_compile.frontends import _ext_automata, _regex
from automata_compile.frontends._regex import PLACEHOLDER_PREFIX

_NO_ARGUMENT = ("QUOTED_TEXT", "UNQUOTED_TEXT", "TEXT_TOKEN", "PARAGRAPH_TOKEN")
_LITERAL = ("TEXT_UNTIL", "SUBSTRING_OF", "SPECIAL_TOKEN")
_REGEX_LIST = ("DELIMITED_LIST", "DELIMITED_SUBSEQUENCE_OF")
EXTENSIONS = _NO_ARGUMENT + _LITERAL + _REGEX_LIST
# Misspellings at least this similar (difflib ratio, case-insensitive) to an extension name
# are errors rather than plain groups.
MISSPELLING_CUTOFF = 0.85
# Terminal label precedence (lower wins): SPECIAL_TOKEN labels (by id), then these.
_LABEL_ORDER = {"PARAGRAPH_TOKEN": 1, "TEXT_TOKEN": 2}

_SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v", "a": "\a"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


@dataclasses.dataclass(frozen=True)
class Expanded:
    """A pattern with its extension groups replaced by placeholders.

    Attributes:
      pattern: the rewritten pattern text.
      placeholders: placeholder group name → IR node.
      predicates: per terminal label k (symbol 256 + k), bool[V] over token ids, in precedence order.
      terminal_names: the label names, for the artifact's metadata.
    """

    pattern: str
    placeholders: dict
    predicates: tuple = ()
    terminal_names: tuple = ()


def expand(pattern: str, vocab) -> Expanded:
    """Recognizes the extension groups of ``pattern`` (see the module docstring).

    Args:
      pattern: a regex with extension groups.
      vocab: the `Vocabulary` (terminal labels are predicates over its token ids).

    Returns:
      The rewritten pattern, its placeholders and the terminal labels in precedence order.
      A pattern without extensions is returned unchanged.

    Raises:
      InvalidPatternError: a malformed extension argument, a misspelled extension name, an
        unknown special token, or a regex error anywhere; with the offset in ``pattern``.
      UnsupportedPatternError: a construct no finite automaton expresses (the rewritten
        pattern is parsed here once, so the offset is in ``pattern``, not in the rewrite).
    """
    if not isinstance(pattern, str) or "(?P<" not in pattern:
        return Expanded(pattern=pattern, placeholders={})
    return _Expander(pattern, vocab).run()


# A rewritten text is a list of segments (text, offset in the original pattern, verbatim?);
# generated segments map to the offset of the extension group that produced them.
_Segment = tuple[str, int, bool]


class _Expander:
    def __init__(self, pattern: str, vocab):
        self.p = pattern
        self.n = len(pattern)
        self.vocab = vocab
        self.verbose = _has_global_verbose(pattern)
        self.interesting = re.compile(r"[\\\[(#]" if self.verbose else r"[\\\[(]")
        self.placeholders: dict[str, object] = {}
        self.labels: dict[str, tuple] = {}  # placeholder name → label key
        self.changed = False
        self._pure: dict[tuple[int, int], list[_Segment]] = {}

    def error(self, message: str, offset: int) -> InvalidPatternError:
        return InvalidPatternError(message, pattern=self.p, offset=offset)

    # -- driver -------------------------------------------------------------------------------

    def run(self) -> Expanded:
        segments = self.rewrite(0, self.n, strip_names=False)
        if not self.changed:
            return Expanded(pattern=self.p, placeholders={})
        text = "".join(s for s, _, _ in segments)
        keys = sorted(set(self.labels.values()))
        if keys and self.vocab is None:
            raise InvalidPatternError(
                f"terminal labels ({', '.join(k[2] for k in keys)}) need a vocabulary",
                pattern=self.p,
            )
        index = {key: k for k, key in enumerate(keys)}
        placeholders = dict(self.placeholders)
        for name, key in self.labels.items():
            placeholders[name] = Terminal(index[key])
        self._check(text, segments, placeholders)
        predicates = tuple(self._predicate(key) for key in keys)
        names = tuple(key[2] for key in keys)
        return Expanded(text, placeholders, predicates, names)

    def _check(self, text: str, segments: list[_Segment], placeholders: dict) -> None:
        """Parses the rewritten text once, so that errors name the user's pattern and offset."""
        try:
            _regex.parse(text, placeholders)
        except (InvalidPatternError, UnsupportedPatternError) as e:
            message = str(e)
            cut = message.find(
                " in pattern " if e.offset is None else f" at offset {e.offset} in pattern "
            )
            message = message[:cut] if cut >= 0 else message
            offset = _original_offset(segments, e.offset, self.n)
            raise type(e)(message, pattern=self.p, offset=offset) from None

    # -- scanning -----------------------------------------------------------------------------

    def skip(self, i: int) -> int | None:
        """End of the opaque item at ``i`` (escape, class, comment), or None for other chars."""
        p = self.p
        c = p[i]
        if c == "\\":
            return min(i + 2, self.n)
        if c == "[":
            j = i + 1
            if p.startswith("^", j):
                j += 1
            if p.startswith("]", j):
                j += 1
            while j < self.n and p[j] != "]":
                j += 2 if p[j] == "\\" else 1
            return min(j + 1, self.n)
        if p.startswith("(?#", i):
            j = p.find(")", i)
            return self.n if j < 0 else j + 1
        if self.verbose and c == "#":
            j = p.find("\n", i)
            return self.n if j < 0 else j + 1
        return None

    def rewrite(self, i: int, j: int, *, strip_names: bool) -> list[_Segment]:
        """Copies ``pattern[i:j]``, expanding extension groups (fresh placeholders per call)."""
        if strip_names and (i, j) in self._pure:
            return self._pure[(i, j)]
        before = len(self.placeholders) + len(self.labels)
        span = (i, j)
        out: list[_Segment] = []
        start = i  # start of the pending verbatim run
        while i < j:
            found = self.interesting.search(self.p, i, j)  # jump over plain text
            if found is None:
                break
            i = found.start()
            end = self.skip(i)
            if end is not None:
                i = end
                continue
            name = self.group_name(i, j)
            if name is None:
                i += 1
                continue
            close = i + 4 + len(name)
            if name in EXTENSIONS:
                out.append((self.p[start:i], start, True))
                gen, i = self.extension(name, i, close + 1, j)
                out.extend(gen)
                start = i
                self.changed = True
                continue
            self.check_plain_name(name, i + 4)
            if strip_names:
                out.append((self.p[start:i], start, True))
                out.append(("(?:", i, False))
                i = start = close + 1
                continue
            i = close + 1
        out.append((self.p[start:j], start, True))
        if strip_names and len(self.placeholders) + len(self.labels) == before:
            self._pure[span] = out
        return out

    def group_name(self, i: int, limit: int) -> str | None:
        """The name of a named group opening at ``i``, if one does."""
        if not self.p.startswith("(?P<", i):
            return None
        close = self.p.find(">", i + 4, limit)
        return None if close < 0 else self.p[i + 4 : close]

    def check_plain_name(self, name: str, offset: int) -> None:
        if name.startswith(PLACEHOLDER_PREFIX):
            raise self.error(
                f"group names starting with {PLACEHOLDER_PREFIX!r} are reserved for regex "
                "extensions; rename the group",
                offset,
            )
        upper = name.upper()
        close = [upper] if upper in EXTENSIONS else []
        close = close or difflib.get_close_matches(
            upper, EXTENSIONS, n=1, cutoff=MISSPELLING_CUTOFF
        )
        if close:
            raise self.error(
                f"unknown extension group name {name!r}; did you mean (?P<{close[0]}>...)? "
                "(extension names are upper case and exact; rename the group if you meant a "
                "plain capturing group)",
                offset,
            )

    # -- extension groups ---------------------------------------------------------------------

    def extension(self, name: str, at: int, a: int, limit: int) -> tuple[list[_Segment], int]:
        """Expands the extension group ``name`` opened at ``at`` (argument from ``a``).

        Returns the generated segments and the offset after the group's ``)``.
        """
        if name in _REGEX_LIST:
            end, cuts = self.regex_argument(at, a, limit)
            parts = list(zip([a, *(c + 1 for c in cuts)], [*cuts, end], strict=True))
            if name == "DELIMITED_LIST":
                return self.delimited_list(at, parts), end + 1
            return self.delimited_subsequence(at, parts), end + 1
        end = self.literal_end(at, a, limit)
        if name in _NO_ARGUMENT:
            if end > a:
                raise self.error(
                    f"(?P<{name}>) takes no argument, got {self.p[a:end]!r}; write (?P<{name}>)",
                    a,
                )
            if name == "QUOTED_TEXT":
                node = _ext_automata.quoted_text()
            elif name == "UNQUOTED_TEXT":
                node = _ext_automata.unquoted_text()
            else:
                return self.label(at, (_LABEL_ORDER[name], 0, name)), end + 1
            return self.placeholder(at, node), end + 1
        text = self.unescape(a, end)
        if not text:
            raise self.error(f"(?P<{name}>...) needs a non-empty argument", a)
        if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
            raise self.error(f"(?P<{name}>...): a lone surrogate cannot be spelled in UTF-8", a)
        if name == "TEXT_UNTIL":
            node = _ext_automata.text_until(text)
        elif name == "SUBSTRING_OF":
            node = _ext_automata.substring_of(text)
        else:
            token_id = self.special_token(text, a)
            return self.label(at, (0, token_id, f"SPECIAL_TOKEN:{text}")), end + 1
        return self.placeholder(at, node), end + 1

    def placeholder(self, at: int, node) -> list[_Segment]:
        name = f"{PLACEHOLDER_PREFIX}{len(self.placeholders) + len(self.labels)}"
        self.placeholders[name] = node
        return [(f"(?P<{name}>)", at, False)]

    def label(self, at: int, key: tuple) -> list[_Segment]:
        name = f"{PLACEHOLDER_PREFIX}{len(self.placeholders) + len(self.labels)}"
        self.labels[name] = key
        return [(f"(?P<{name}>)", at, False)]

    def literal_end(self, at: int, a: int, limit: int) -> int:
        i = a
        while i < limit:
            c = self.p[i]
            if c == "\\":
                i += 2
            elif c == ")":
                return i
            else:
                i += 1
        raise self.error(
            f"extension group {self.p[at : self.p.find('>', at) + 1]}...) is missing its closing "
            "')' (write a literal ')' in an argument as \\))",
            at,
        )

    def regex_argument(self, at: int, a: int, limit: int) -> tuple[int, list[int]]:
        """The matching ``)`` of a regex argument and its top-level ``;`` offsets."""
        depth, cuts, i = 0, [], a
        while i < limit:
            end = self.skip(i)
            if end is not None:
                i = end
                continue
            c = self.p[i]
            name = self.group_name(i, limit)
            if name in EXTENSIONS and name not in _REGEX_LIST:  # a literal argument: opaque
                i = self.literal_end(i, i + len(name) + 5, limit) + 1
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    return i, cuts
                depth -= 1
            elif c == ";" and depth == 0:
                cuts.append(i)
            i += 1
        raise self.error(
            f"extension group {self.p[at : self.p.find('>', at) + 1]}...) is missing its closing "
            "')' (write a literal ')' in an argument as \\))",
            at,
        )

    def unescape(self, a: int, end: int) -> str:
        p, out, i = self.p, [], a
        while i < end:
            c = p[i]
            if c != "\\":
                out.append(c)
                i += 1
                continue
            e = p[i + 1]
            if not (e.isascii() and e.isalnum()):
                out.append(e)
                i += 2
            elif e in _SIMPLE_ESCAPES:
                out.append(_SIMPLE_ESCAPES[e])
                i += 2
            elif e in _HEX_ESCAPES:
                width = _HEX_ESCAPES[e]
                digits = p[i + 2 : min(i + 2 + width, end)]
                if len(digits) != width or not all(d in "0123456789abcdefABCDEF" for d in digits):
                    raise self.error(f"bad escape \\{e}: expected {width} hex digits", i)
                code = int(digits, 16)
                if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                    raise self.error(f"bad escape \\{e}{digits}: not a character", i)
                out.append(chr(code))
                i += 2 + width
            elif e == "N" and p.startswith("{", i + 2) and "}" in p[i + 3 : end]:
                close = p.index("}", i + 3)
                try:
                    out.append(unicodedata.lookup(p[i + 3 : close]))
                except KeyError:
                    raise self.error(f"unknown character name {p[i + 3 : close]!r}", i) from None
                i = close + 1
            else:
                raise self.error(
                    f"bad escape \\{e} in an extension argument (write \\\\ for a backslash, "
                    "\\) for a parenthesis)",
                    i,
                )
        return "".join(out)

    def special_token(self, name: str, offset: int) -> int:
        specials = dict(getattr(self.vocab, "special_tokens", None) or {})
        if name not in specials:
            close = difflib.get_close_matches(name, list(specials), n=5, cutoff=0.5)
            hint = (
                f"close matches: {', '.join(close)}"
                if close
                else f"it has {len(specials)} named special tokens"
                + (f", e.g. {', '.join(sorted(specials)[:8])}" if specials else "")
            )
            raise self.error(
                f"unknown special token {name!r} for vocabulary "
                f"{getattr(self.vocab, 'name', '?')!r}; {hint}",
                offset,
            )
        token_id = int(specials[name])
        if token_id in tuple(self.vocab.eos_ids):
            raise self.error(
                f"special token {name!r} is an end-of-sequence token; EOS cannot be matched by "
                "(?P<SPECIAL_TOKEN>...): it is allowed exactly where the pattern may end",
                offset,
            )
        return token_id

    def _predicate(self, key: tuple) -> np.ndarray:
        matrix, lengths = self.vocab.token_matrix()
        if key[0] == 0:
            pred = np.zeros(lengths.shape[0], dtype=bool)
            pred[key[1]] = True
            return pred
        pred = lengths > 0
        if key[2] == "PARAGRAPH_TOKEN":
            pred &= ~((matrix == ord("\n")) | (matrix == ord("\r"))).any(axis=1)
        return pred

    # -- delimited lists ----------------------------------------------------------------------

    def part(self, span: tuple[int, int]) -> list[_Segment]:
        a, b = span
        close = "\n)" if self.verbose else ")"  # a verbose-mode comment must not eat the ')'
        return [("(?:", a, False), *self.rewrite(a, b, strip_names=True), (close, b, False)]

    def parse_count(self, span: tuple[int, int], what: str) -> int | None:
        raw = self.p[span[0] : span[1]].strip()
        if not raw:
            return None
        if not raw.isdigit():
            raise self.error(f"{what} must be a non-negative integer, got {raw!r}", span[0])
        return int(raw)

    def delimited_list(self, at: int, parts) -> list[_Segment]:
        if not 2 <= len(parts) <= 4:
            raise self.error(
                "(?P<DELIMITED_LIST>DELIM;ITEM[;MIN[;MAX]]) takes 2 to 4 ';'-separated parts, "
                f"got {len(parts)} (write a literal ';' as \\;)",
                at,
            )
        delim, item = parts[0], parts[1]
        if item[0] == item[1]:
            raise self.error("DELIMITED_LIST: ITEM is empty", item[0])
        lo = self.parse_count(parts[2], "DELIMITED_LIST: MIN") if len(parts) > 2 else None
        hi = self.parse_count(parts[3], "DELIMITED_LIST: MAX") if len(parts) > 3 else None
        lo = 1 if lo is None else lo
        if hi is not None and hi < lo:
            raise self.error(f"DELIMITED_LIST: MAX={hi} is less than MIN={lo}", parts[3][0])
        if hi == 0:
            return [("(?:)", at, False)]
        rep = f"{{{max(lo - 1, 0)},{'' if hi is None else hi - 1}}}"
        body = [*self.part(item), ("(?:", at, False), *self.part(delim), *self.part(item)]
        body.append((f"){rep}", at, False))
        if lo == 0:
            return [("(?:", at, False), *body, (")?", at, False)]
        return [("(?:", at, False), *body, (")", at, False)]

    def delimited_subsequence(self, at: int, parts) -> list[_Segment]:
        if len(parts) < 2:
            raise self.error(
                "(?P<DELIMITED_SUBSEQUENCE_OF>DELIM;ITEM1;...;ITEMn) needs a delimiter and at "
                "least one item, separated by ';' (write a literal ';' as \\;)",
                at,
            )
        delim, items = parts[0], parts[1:]
        for a, b in items:
            if a == b:
                raise self.error("DELIMITED_SUBSEQUENCE_OF: empty item", a)
        # One alternative per first chosen item j: ITEM_j (?:DELIM ITEM_k)? for each k > j.
        out: list[_Segment] = [("(?:", at, False)]
        for j, item in enumerate(items):
            if j:
                out.append(("|", at, False))
            out.extend(self.part(item))
            for later in items[j + 1 :]:
                out.append(("(?:", at, False))
                out.extend(self.part(delim))
                out.extend(self.part(later))
                out.append((")?", at, False))
        out.append((")", at, False))
        return out


def _has_global_verbose(pattern: str) -> bool:
    """Whether leading inline flags (the only place global flags may appear) include ``x``."""
    i = 0
    while m := _GLOBAL_FLAGS.match(pattern, i):
        if "x" in m.group(1):
            return True
        i = m.end()
    return False


def _original_offset(segments: list[_Segment], pos: int | None, n: int) -> int | None:
    if pos is None:
        return None
    at = 0
    for text, orig, verbatim in segments:
        if pos < at + len(text):
            return orig + (pos - at) if verbatim else orig
        at += len(text)
    return n
