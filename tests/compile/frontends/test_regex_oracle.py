"""Exact-mask oracle tests of `compile_regex` on real vocabularies.

Along random walks through the token DFA, every sampled token's allowed bit must equal
brute-force partial matching with the `regex` package on the decoded prefix + the token's
bytes, and ``accepting`` must equal full matching with `re` (our semantics).

Tokens (and prefixes) may end inside a UTF-8 character. Such a byte string is allowed iff some
code point whose encoding starts with the incomplete tail extends the complete part into a
prefix of the language. The candidate code points form one range; instead of trying all of
them (up to 2**18), we try one representative per cell of the pattern's alphabet partition:
the `regex` engine looks at a character only through the pattern's atoms (literals, classes,
categories, ``.``), so characters between two consecutive atom boundaries behave alike.

``\\d \\s \\w`` differ between `regex` and `re` on some non-ASCII characters (and ``\\s`` on
``\\x1c-\\x1f``); the pattern handed to `regex` spells them as the explicit code-point sets that
`re` uses, so the oracle states `re`'s semantics throughout.

The three real vocabularies: mistral-common's SentencePiece v1 (32k), Gemma-3 (262k), and
Llama-3 (128k); tests skip with the reason when a file is absent.
"""

from __future__ import annotations

import codecs
import functools
import re
import zlib

import numpy as np
import pytest

import automata_compile as ac

regex = pytest.importorskip("regex", reason="the oracle needs the `regex` package")

try:  # Python >= 3.11
    from re import _constants as C
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C
    import sre_parse

MAX_CP = 0x10FFFF

# (name, pattern). Every pattern's language is non-empty and every sub-expression satisfiable,
# so `regex` partial matching is exactly "is a prefix of some string of the language".
PATTERNS = [
    ("number", r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?"),
    ("date", r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"),
    (
        "time",
        r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,3})?)?(Z|[+-][0-9]{2}:[0-9]{2})",
    ),
    ("shared_prefixes", r"(in|int|into|integer|interval|internal)( (in|int|integer|internals?))*"),
    ("keywords", r"(true|false|null|nullable|trueish)(, (true|false|null))*"),
    ("quoted_string", r'"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'),
    ("bounded_repeats", r"(ab|c){2,5}x{0,3}(yz){1,2}"),
    ("cjk", r"[\u4e00-\u9fff]{1,6}(、[\u4e00-\u9fff]{1,6}){0,3}。?"),
    ("accented_latin", r"(café|naïve|über|Ærøskøbing|façade|[a-zà-öø-ÿ]+)( [a-zà-öø-ÿ]+){0,3}"),
    ("emoji", r"(😀|👍🏽|🇫🇷|👨‍👩‍👧|[\U0001F300-\U0001F5FF])+( ok)?"),
    ("whitespace_json", r'\s*\{\s*"a"\s*:\s*[0-9]+\s*(,\s*"b"\s*:\s*(true|false)\s*)?\}\s*'),
    ("unicode_digits", r"\d{1,3}(,\d{3})*(\.\d+)?"),
    ("word_list", r"\w+( \w+){0,2}"),
    ("free_text_line", r"[^\n]{0,24}\n"),
    ("dot_bounded", r".{0,10}"),
    (
        "json_object",
        r'\{"name": "[^"\\]{0,12}", "age": (0|[1-9][0-9]{0,2}), "tags": \[("[a-z]+"(, "[a-z]+"){0,2})?\]\}',
    ),
    ("scripts", r"(Ελληνικά|Русский|日本語|한국어|עברית|العربية)( (Ελληνικά|Русский|日本語))*"),
    ("email_ish", r"[a-z0-9._%+-]{1,16}@[a-z0-9-]{1,12}\.(com|org|net|co\.uk)"),
]

VOCABS = ["mistral_sp_vocab", "gemma3_vocab", "llama3_vocab"]

WALKS = 4
STEPS = 8
SAMPLE_ANY = 1500  # uniformly random tokens per step
SAMPLE_ALLOWED = 1500  # tokens the DFA allows (all of them when fewer)
SAMPLE_NEAR = 800  # tokens starting with a byte some allowed token starts with
SAMPLE_PARTIAL = 200  # tokens that are not complete UTF-8 on their own


# -- the oracle -----------------------------------------------------------------------------------


@functools.cache
def _all_codepoints() -> str:
    return np.arange(MAX_CP + 1, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")


@functools.cache
def _re_set(one_char_pattern: str) -> tuple[tuple[int, int], ...]:
    """Code points `re` matches with a one-character pattern, as inclusive ranges."""
    rx = re.compile(f"(?:{one_char_pattern})+")
    return tuple((m.start(), m.end() - 1) for m in rx.finditer(_all_codepoints()))


def _spell(ranges) -> str:
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


_CATEGORY_ESCAPES = "dDsSwW"


def for_regex_engine(pattern: str) -> str:
    """``pattern`` with ``\\d \\s \\w`` (and negations) spelled as `re`'s exact code-point sets."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            esc = pattern[i + 1]
            if esc in _CATEGORY_ESCAPES:
                ranges = _re_set(f"\\{esc}")
                out.append(_spell(ranges) if in_class else f"[{_spell(ranges)}]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            i += 1
            for lead in ("^", "]"):
                if pattern[i : i + 1] == lead:
                    out.append(lead)
                    i += 1
            continue
        if c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def atom_boundaries(pattern: str) -> np.ndarray:
    """Sorted code points where some atom of ``pattern`` changes membership (cell starts)."""
    points = {0, 0xD800, 0xE000}

    def add_ranges(ranges):
        for a, b in ranges:
            points.add(a)
            points.add(b + 1)

    def visit(items):
        for op, av in items:
            if op in (C.LITERAL, C.NOT_LITERAL):
                add_ranges([(av, av)])
            elif op is C.ANY:
                add_ranges([(10, 10)])
            elif op is C.IN:
                for iop, iav in av:
                    if iop is C.LITERAL:
                        add_ranges([(iav, iav)])
                    elif iop is C.RANGE:
                        add_ranges([iav])
                    elif iop is C.CATEGORY:
                        add_ranges(_re_set(_category_text(iav)))
            elif op is C.SUBPATTERN:
                visit(av[-1])
            elif op is C.BRANCH:
                for option in av[1]:
                    visit(option)
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                visit(av[2])
            elif op is C.AT:
                pass
            else:  # pragma: no cover - the oracle patterns use nothing else
                raise AssertionError(f"oracle cannot partition {op}")

    parsed = sre_parse.parse(pattern)
    assert not parsed.state.flags & re.IGNORECASE, "the oracle partition ignores case folding"
    visit(list(parsed))
    return np.array(sorted(p for p in points if p <= MAX_CP), dtype=np.int64)


def _category_text(cat) -> str:
    return {
        C.CATEGORY_DIGIT: r"\d",
        C.CATEGORY_NOT_DIGIT: r"\d",
        C.CATEGORY_SPACE: r"\s",
        C.CATEGORY_NOT_SPACE: r"\s",
        C.CATEGORY_WORD: r"\w",
        C.CATEGORY_NOT_WORD: r"\w",
    }[cat]


def split_utf8(data: bytes):
    """(complete text, incomplete tail bytes), or None if ``data`` is not a UTF-8 prefix."""
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError:
        pass
    dec = codecs.getincrementaldecoder("utf-8")()
    try:
        text = dec.decode(data, final=False)
    except UnicodeDecodeError:
        return None
    return text, dec.getstate()[0]


_LENGTH_BOUNDS = {2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, MAX_CP)}


def tail_range(tail: bytes) -> tuple[int, int] | None:
    """The code points whose UTF-8 encoding starts with ``tail`` (1-3 bytes), as [lo, hi]."""
    lead = tail[0]
    n = 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 0
    if n == 0 or len(tail) >= n:
        return None
    bits = lead & (0x7F >> n)
    for b in tail[1:]:
        if b >> 6 != 0b10:
            return None
        bits = bits << 6 | (b & 0x3F)
    free = 6 * (n - len(tail))
    lo, hi = bits << free, (bits << free) | ((1 << free) - 1)
    blo, bhi = _LENGTH_BOUNDS[n]
    lo, hi = max(lo, blo), min(hi, bhi)
    if lo > hi or 0xD800 <= lo <= hi <= 0xDFFF:  # nothing, or only surrogates (not characters)
        return None
    return lo, hi


class Oracle:
    """Prefix and full membership for one pattern, by brute force with `regex` / `re`."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self.full = re.compile(pattern)
        self.partial = regex.compile(for_regex_engine(pattern))
        self.bounds = atom_boundaries(pattern)

    def representatives(self, lo: int, hi: int):
        i = np.searchsorted(self.bounds, lo, side="right")
        j = np.searchsorted(self.bounds, hi, side="right")
        for c in (lo, *self.bounds[i:j].tolist()):
            if not 0xD800 <= c <= 0xDFFF:
                yield chr(c)

    def is_prefix(self, data: bytes) -> bool:
        """Whether ``data`` is a byte prefix of (the UTF-8 of) some string of the language."""
        split = split_utf8(data)
        if split is None:
            return False
        text, tail = split
        if not tail:
            return self.partial.fullmatch(text, partial=True) is not None
        rng = tail_range(tail)
        if rng is None:
            return False
        return any(
            self.partial.fullmatch(text + c, partial=True) is not None
            for c in self.representatives(*rng)
        )

    def is_member(self, data: bytes) -> bool:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return self.full.fullmatch(text) is not None


# -- oracle self-checks (fast, no vocabulary) -----------------------------------------------------


def test_split_utf8_and_tail_ranges():
    assert split_utf8("é".encode()) == ("é", b"")
    assert split_utf8(b"a\xc3") == ("a", b"\xc3")
    assert split_utf8(b"\xf0\x9f\x98") == ("", b"\xf0\x9f\x98")
    assert split_utf8(b"\xc3a") is None
    assert split_utf8(b"\x80") is None
    assert split_utf8(b"\xed\xa0\x80") is None  # a surrogate
    assert tail_range(b"\xc3") == (0xC0, 0xFF)
    assert tail_range(b"\xe0") == (0x800, 0xFFF)  # overlong E0 80..9F excluded
    assert tail_range(b"\xf0\x9f\x98") == (0x1F600, 0x1F63F)
    assert tail_range(b"\xf4") == (0x100000, 0x10FFFF)
    assert tail_range(b"\xc1") is None  # only overlong encodings start with C0 / C1
    assert tail_range(b"\xe0\x80") is None  # overlong
    assert tail_range(b"\xed\xa0") is None  # surrogates
    assert tail_range(b"\xf4\x90") is None  # above U+10FFFF
    for cp in (0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF, 0x1F600, 0x4E2D):
        enc = chr(cp).encode()
        for k in range(1, len(enc)):
            lo, hi = tail_range(enc[:k])
            assert lo <= cp <= hi


def test_oracle_matches_re_semantics_for_categories():
    # The `regex` spelling of \d \s \w agrees with `re` on every code point.
    text = _all_codepoints()
    for cat in (r"\d", r"\s", r"\w"):
        ours = regex.compile(f"(?:{for_regex_engine(cat)})+")
        ref = re.compile(f"(?:{cat})+")
        got = [(m.start(), m.end()) for m in ours.finditer(text)]
        want = [(m.start(), m.end()) for m in ref.finditer(text)]
        # `regex` also matches lone surrogates where `re` does: compare outside them only.
        strip = lambda spans: [s for s in spans if not 0xD800 <= s[0] <= 0xDFFF]  # noqa: E731
        assert strip(got) == strip(want), cat


def test_category_spelling_inside_classes():
    spelled = for_regex_engine(r"a[^\w-]\d[\s,]\\d")
    assert "\\w" not in spelled and "\\s" not in spelled and spelled.endswith("\\\\d")
    rx = regex.compile(spelled)
    assert rx.fullmatch("a!٣\x1c\\d") and not rx.fullmatch("a_1 \\d")
    assert re.fullmatch(r"a[^\w-]\d[\s,]\\d", "a!٣\x1c\\d")


def test_oracle_partial_characters():
    o = Oracle(r"a[é-ë]b|c😀")
    assert o.is_prefix(b"a\xc3")
    assert not o.is_prefix(b"a\xc4")
    assert o.is_prefix(b"a\xc3\xa9")
    assert not o.is_prefix(b"a\xc3\xa8")  # è
    assert o.is_prefix(b"c\xf0\x9f\x98")
    assert not o.is_prefix(b"c\xf0\x9f\x99")
    assert o.is_member("aéb".encode()) and not o.is_member(b"a\xc3")


# -- the walks ------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _token_tables(fingerprint: str, vocab):
    tokens = vocab.tokens
    first = np.array([t[0] if t else -1 for t in tokens], dtype=np.int64)
    partial = np.array([i for i, t in enumerate(tokens) if t and not _is_utf8(t)], dtype=np.int64)
    text_ids = np.array([i for i, t in enumerate(tokens) if t is not None], dtype=np.int64)
    return first, partial, text_ids


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _check_byte_complete(vocab):
    singles = {t for t in vocab.tokens if t is not None and len(t) == 1}
    # With every byte a token, "prefix of the language" = "completable with this vocabulary".
    assert len(singles) == 256, f"{vocab.name}: only {len(singles)} single-byte tokens"


@pytest.mark.parametrize("name,pattern", PATTERNS, ids=[p[0] for p in PATTERNS])
@pytest.mark.parametrize("vocab_fixture", VOCABS)
def test_masks_match_regex_oracle(vocab_fixture, name, pattern, request):
    vocab = request.getfixturevalue(vocab_fixture)
    _check_byte_complete(vocab)
    dfa = ac.compile_regex(pattern, vocab)
    oracle = Oracle(pattern)
    first, partial_ids, text_ids = _token_tables(vocab.fingerprint, vocab)
    tokens = vocab.tokens
    eos = np.asarray(vocab.eos_ids, dtype=np.int64)
    specials = np.asarray(vocab.special_ids, dtype=np.int64)
    rng = np.random.default_rng(zlib.crc32(f"{vocab_fixture}/{name}".encode()))
    mismatches = []
    checked = 0
    for _walk in range(WALKS):
        state, prefix = dfa.start, b""
        for _step in range(STEPS):
            accepting = bool(dfa.accepting[state])
            assert accepting == oracle.is_member(prefix), (name, prefix, accepting)
            assert oracle.is_prefix(prefix), (name, prefix)  # every reachable state is live
            row = dfa.next_state[state][dfa.token_class]
            mask = dfa.allowed(state)
            # EOS iff accepting; special ids never as text.
            assert mask[eos].tolist() == [accepting] * eos.size
            non_eos_specials = np.setdiff1d(specials, eos)
            assert not mask[non_eos_specials].any()
            allowed = np.flatnonzero(row >= 0)
            allowed_first = np.unique(first[allowed])
            near = np.flatnonzero(np.isin(first, allowed_first))
            sample = np.unique(
                np.concatenate(
                    [
                        rng.choice(text_ids, min(SAMPLE_ANY, text_ids.size), replace=False),
                        rng.permutation(allowed)[:SAMPLE_ALLOWED],
                        rng.permutation(near)[:SAMPLE_NEAR],
                        rng.permutation(partial_ids)[:SAMPLE_PARTIAL],
                    ]
                )
            )
            for t in sample.tolist():
                want = oracle.is_prefix(prefix + tokens[t])
                if want != (row[t] >= 0):
                    mismatches.append((prefix, t, tokens[t], want))
            checked += sample.size
            assert not mismatches, (
                f"{vocab.name} {name!r}: {len(mismatches)} wrong allowed bits, e.g. "
                f"(prefix, id, bytes, oracle) = {mismatches[:5]}"
            )
            if allowed.size == 0:
                assert accepting, (name, prefix)  # a state with no token must force EOS
                break
            # Next token: a random class among the allowed ones, then a random member.
            classes = np.unique(dfa.token_class[allowed])
            cls = rng.choice(classes)
            members = allowed[dfa.token_class[allowed] == cls]
            t = int(rng.choice(members))
            state = int(dfa.next_state[state, dfa.token_class[t]])
            prefix += tokens[t]
            assert state >= 0
    assert checked > 0
