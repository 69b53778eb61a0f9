r"""Tests of Koo et al.'s regex extensions (`automata_compile.frontends._extensions`).

Oracles, written from the documented semantics and independent of the automata:

* byte-level extensions: a `Lang` with ``viable(text)`` (a prefix of some string of the
  language) and ``complete(text)``; a token is allowed iff the decoded prefix plus its bytes
  is viable (a trailing partial UTF-8 character is viable iff some character completing it
  is: one representative per character class is tried), EOS iff the prefix is complete;
* terminal labels: the token sequence is mapped to a string in which each label edge is a
  private-use marker character, and the `regex` module's partial matching of a plain regex
  over text + markers decides; a token takes its normal path when it has one, else the first
  label (in precedence order) whose predicate it satisfies.

Masks (`TokenDFA.allowed`) are compared with the oracle over *every* token of the vocabulary
at every state of random walks (a tiny hand-made vocabulary always; Llama-3 / Gemma-3 when
the shared tokenizers are present).
"""

from __future__ import annotations

import difflib
import itertools
import random
import re
import time

import numpy as np
import pytest

import automata_compile as ac
from automata_compile.automata import _byte_dfa
from automata_compile.frontends import _ext_automata, _extensions, _regex

# -- vocabularies ----------------------------------------------------------------------------

# fmt: off
_TINY_TEXT = [
    *(bytes([c]) for c in range(256)),  # every byte, so every valid prefix can be completed
    b"\n", b"a", b"\\", b"\x80",  # duplicates of single bytes (they share a trie group)
    "\x85".encode(), "\u2028".encode(), "\ufeff".encode(),
    b' "', b'",', b'\\"', b"\\\\", b": ", b" #", b"#x", b"ab", b"an", b"ana",
    b"nan", b"anana", b"--", b"->", b"-->", b"---", b"<!--", b"END", b"\n\n", b"* ", b"\n* ", b"\n*", b"Summary:", b"key: ",
    b"red", b"green", b", ", b"blue", b", g", b"cat", b"dog", b"bird", b"light blue", b", l",
    b"a b", b"x:y", b" -", b"- ", b"-1", b"? ", b"the ", b"quick", b" fox\n", b"say \"",
    "é".encode(), b"\xc3", b"\xa9", "→".encode(), b"\xe2\x86", b"\x92", b"\xe2", "😀".encode(),
    b"\xf0\x9f", b"\x98\x80", "ü".encode(), "€".encode(), "ab→".encode(),
]
# fmt: on
_TINY_SPECIAL = {"<eos>": 0, "<img>": 1, "</img>": 2, "<pad>": 3}


@pytest.fixture(scope="module")
def tiny():
    """~330 tokens: every single byte, UTF-8 pieces (of é → 😀), boundary-crossing tokens."""
    tokens = [None] * len(_TINY_SPECIAL) + list(_TINY_TEXT)
    return ac.Vocabulary.from_bytes(tokens, eos_ids=[0], special_tokens=_TINY_SPECIAL, name="tiny")


def _real(request, name):
    return request.getfixturevalue(f"{name}_vocab")


# -- oracle helpers --------------------------------------------------------------------------

# Character-class boundaries of every language tested here (printable / white / line breaks /
# BOM / surrogates): within an interval between consecutive boundaries (plus each language's
# special characters) all characters behave alike, so one representative per interval decides.
# fmt: off
_BOUNDS = [0, 0x09, 0x0A, 0x0B, 0x0D, 0x0E, 0x20, 0x21, 0x7F, 0x80, 0x85, 0x86, 0xA0, 0x2028,
           0x202A, 0xD800, 0xE000, 0xE100, 0xFEFF, 0xFF00, 0xFFFE, 0x10000, 0x110000]
# fmt: on


def _completions(tail: bytes) -> tuple[int, int]:
    """The code-point range whose UTF-8 encodings start with ``tail`` (a valid partial char)."""
    n = 2 if tail[0] < 0xE0 else 3 if tail[0] < 0xF0 else 4
    lo, hi = {2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, 0x10FFFF)}[n]

    def key(c):
        return chr(c).encode("utf-8", "surrogatepass")[: len(tail)]

    a, b = lo, hi + 1
    while a < b:  # first code point with key >= tail
        m = (a + b) // 2
        a, b = (m + 1, b) if key(m) < tail else (a, m)
    first = a
    a, b = lo, hi + 1
    while a < b:  # first code point with key > tail
        m = (a + b) // 2
        a, b = (m + 1, b) if key(m) <= tail else (a, m)
    return first, a - 1


def _representatives(lo: int, hi: int, specials) -> list[str]:
    points = sorted(set(_BOUNDS) | {ord(c) for c in specials} | {ord(c) + 1 for c in specials})
    reps = []
    for a, b in zip(points, points[1:], strict=False):
        c = max(a, lo)
        if c <= min(b - 1, hi) and not 0xD800 <= c <= 0xDFFF:
            reps.append(chr(c))
    return reps


def _split_utf8(data: bytes):
    """(text, partial tail or b"") of ``data``, or None if it is not a prefix of valid UTF-8."""
    try:
        return data.decode("utf-8"), b""
    except UnicodeDecodeError as e:
        if e.reason == "unexpected end of data" and e.end == len(data):
            try:
                return data[: e.start].decode("utf-8"), data[e.start :]
            except UnicodeDecodeError:
                return None
        return None


class Lang:
    """A character language given by ``viable`` and ``complete`` predicates."""

    def __init__(self, viable, complete, specials="", exclude=""):
        self.viable, self.complete, self.specials = viable, complete, specials + exclude
        self.exclude = set(exclude)  # characters bytes never spell (label markers)

    def byte_viable(self, text: str, data: bytes) -> bool:
        """Whether ``text`` followed by the bytes ``data`` is a viable prefix."""
        split = _split_utf8(data)
        if split is None or not self.exclude.isdisjoint(split[0]):
            return False
        more, tail = split
        if not tail:
            return self.viable(text + more)
        lo, hi = _completions(tail)
        reps = [c for c in _representatives(lo, hi, self.specials) if c not in self.exclude]
        return any(self.viable(text + more + c) for c in reps)


def around(prefix: str, inner: Lang, suffix: str) -> Lang:
    """The language prefix · inner · suffix (prefix and suffix literal)."""

    def complete(s):
        if not (s.startswith(prefix) and s.endswith(suffix)) or len(s) < len(prefix) + len(suffix):
            return False
        return inner.complete(s[len(prefix) : len(s) - len(suffix)])

    def viable(s):
        if len(s) <= len(prefix):
            return prefix.startswith(s)
        if not s.startswith(prefix):
            return False
        r = s[len(prefix) :]
        if inner.viable(r):
            return True
        return any(
            suffix.startswith(r[i:]) and inner.complete(r[:i])
            for i in range(max(0, len(r) - len(suffix)), len(r) + 1)
        )

    return Lang(viable, complete, inner.specials + prefix + suffix)


def finite(words) -> Lang:
    words = set(words)
    prefixes = {w[:i] for w in words for i in range(len(w) + 1)}
    return Lang(prefixes.__contains__, words.__contains__, "".join(words))


def _pick(dfa, mask, rng, *, eos_weight=0.0):
    """A random allowed token, uniform over allowed token classes (None = EOS)."""
    eos = list(dfa.eos_ids)
    ids = np.flatnonzero(mask)
    text_ids = ids[~np.isin(ids, eos)]
    if text_ids.size == 0 or (mask[eos].any() and rng.random() < eos_weight):
        return None
    classes = np.unique(dfa.token_class[text_ids])
    c = classes[rng.randrange(len(classes))]
    members = text_ids[dfa.token_class[text_ids] == c]
    return int(members[rng.randrange(len(members))])


def check_byte_masks(dfa, vocab, lang: Lang, *, walks: int, steps: int, seed: int = 0):
    """Compares every state's mask along random walks with the oracle; returns visited texts."""
    rng = random.Random(seed)
    tokens = vocab.tokens
    eos = list(vocab.eos_ids)
    seen = []
    for _ in range(walks):
        state, data = dfa.start, b""
        for _ in range(steps + 1):
            mask = dfa.allowed(state)
            split = _split_utf8(data)
            assert split is not None, data
            text, tail = split
            expect = np.zeros(vocab.size, dtype=bool)
            for t, b in enumerate(tokens):
                if b:
                    expect[t] = lang.byte_viable(text, tail + b)
            if not tail:
                expect[eos] = lang.complete(text)
            diff = np.flatnonzero(mask != expect)
            assert diff.size == 0, (
                f"after {data!r}: {len(diff)} mask differences, e.g. "
                f"{[(int(t), tokens[t], bool(mask[t])) for t in diff[:5]]}"
            )
            seen.append(data)
            tok = _pick(dfa, mask, rng)
            if tok is None:
                break
            state = dfa.advance(state, tok)
            data += tokens[tok]
    return seen


# -- the extensions' languages, written from the docstring --------------------------------------

_QUOTED = re.compile(r'"(?:[^"\\\n\r]|\\[^\n\r])*"')


def quoted_lang() -> Lang:
    def complete(s):
        return _QUOTED.fullmatch(s) is not None

    def viable(s):  # an open string can always be closed with '"' or 'x"' (after a backslash)
        return s == "" or complete(s) or complete(s + '"') or complete(s + 'x"')

    return Lang(viable, complete, '"\\\n\r')


# YAML 1.2 productions [126]-[133] (ns-plain-first / ns-plain-safe-out / ns-plain-char /
# nb-ns-plain-in-line) transcribed with lookarounds; ns-char without NEL, LS, PS and BOM, and
# white space = spaces only (PyYAML rejects tabs in plain scalars).
_NS = "[\x21-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
_IND = re.escape("-?:,[]{}#&*!|>'\"%@`")
_PLAIN = re.compile(
    rf"(?:(?![{_IND}]){_NS}|[-?:](?={_NS}))"  # ns-plain-first
    rf"(?:[ ]*(?:(?![:#]){_NS}|(?<={_NS})#|:(?={_NS})))*"  # (s-white* ns-plain-char)*
)


def unquoted_lang() -> Lang:
    def complete(s):
        return _PLAIN.fullmatch(s) is not None

    def viable(s):  # every viable prefix is completed by one more ordinary character
        return complete(s + "x")

    return Lang(viable, complete, " \t:#" + "-?:,[]{}#&*!|>'\"%@`")


def until_lang(stop: str) -> Lang:
    def complete(s):
        return s.endswith(stop) and s.find(stop) == len(s) - len(stop)

    def viable(s):  # without the stop phrase yet, continuing with it reaches a first occurrence
        return stop not in s or complete(s)

    return Lang(viable, complete, stop)


def substring_lang(ref: str) -> Lang:
    return Lang(ref.__contains__, ref.__contains__, ref)


def _compile(pattern, vocab, **kw):
    return ac.compile_regex(pattern, vocab, **kw)


# -- byte-level extensions: masks vs oracle -----------------------------------------------------

REFERENCE = (
    "Le café «Zum Löwen» → served crème brûlée; the 2nd café (1923) served it too. "
    "A café is a café: 😀 naïve déjà-vu, ana anana banana."
)

BYTE_CASES = [
    # (id, pattern, oracle)
    ("quoted", r"name: (?P<QUOTED_TEXT>), ok", lambda: around("name: ", quoted_lang(), ", ok")),
    ("unquoted", r"key: (?P<UNQUOTED_TEXT>)\n", lambda: around("key: ", unquoted_lang(), "\n")),
    # "-->": after "--", another "-" keeps two dashes matched (a KMP fallback to state 2).
    ("until-overlap", r"<!--(?P<TEXT_UNTIL>-->)!", lambda: around("<!--", until_lang("-->"), "!")),
    (
        "until-tag",
        r"Answer: (?P<TEXT_UNTIL></answer>)",
        lambda: around("Answer: ", until_lang("</answer>"), ""),
    ),
    (
        "substring",
        '"(?P<SUBSTRING_OF>' + re.escape(REFERENCE) + ')"',
        lambda: around('"', substring_lang(REFERENCE), '"'),
    ),
    (
        "list",
        r"\[(?P<DELIMITED_LIST>, ;cat|dog|bird;2;4)\]",
        lambda: finite(
            "[" + ", ".join(w) + "]"
            for k in (2, 3, 4)
            for w in itertools.product(["cat", "dog", "bird"], repeat=k)
        ),
    ),
    (
        "subsequence",
        r"(?P<DELIMITED_SUBSEQUENCE_OF>, ;red;green;blue;light blue)\.",
        lambda: finite(
            ", ".join(w) + "."
            for k in range(1, 5)
            for w in itertools.combinations(["red", "green", "blue", "light blue"], k)
        ),
    ),
]


@pytest.mark.parametrize("case", BYTE_CASES, ids=[c[0] for c in BYTE_CASES])
def test_byte_extensions_tiny(case, tiny):
    _, pattern, oracle = case
    dfa = _compile(pattern, tiny)
    check_byte_masks(dfa, tiny, oracle(), walks=12, steps=25)


@pytest.mark.parametrize("case", BYTE_CASES, ids=[c[0] for c in BYTE_CASES])
def test_byte_extensions_llama3(case, request):
    """Every token of Llama-3 (byte-level BPE: tokens may end inside a UTF-8 character)."""
    vocab = _real(request, "llama3")
    _, pattern, oracle = case
    dfa = _compile(pattern, vocab)
    check_byte_masks(dfa, vocab, oracle(), walks=1, steps=5, seed=1)


def test_nested_extension_in_list(tiny):
    """Parts of a delimited list may use extensions (each copy gets its own placeholder)."""
    regex = pytest.importorskip("regex")
    oracle = regex.compile(r'\{"(?:[^"\\\n\r]|\\[^\n\r])*"(?:; "(?:[^"\\\n\r]|\\[^\n\r])*"){0,2}\}')
    lang = Lang(
        lambda s: oracle.fullmatch(s, partial=True) is not None,
        lambda s: oracle.fullmatch(s) is not None,
        '"\\\n\r{}; ',
    )
    dfa = _compile(r"\{(?P<DELIMITED_LIST>\; ;(?P<QUOTED_TEXT>);1;3)\}", tiny)
    check_byte_masks(dfa, tiny, lang, walks=10, steps=30)


def test_unquoted_text_reads_back_with_pyyaml(tiny):
    """Strings the automaton accepts are read back unchanged by a YAML parser."""
    yaml = pytest.importorskip("yaml")
    dfa = _compile(r"(?P<UNQUOTED_TEXT>)", tiny)
    rng = random.Random(3)
    done = 0
    for _ in range(300):
        state, data = dfa.start, b""
        for _ in range(12):
            tok = _pick(dfa, dfa.allowed(state), rng, eos_weight=0.2)
            if tok is None:
                break
            state = dfa.advance(state, tok)
            data += tiny.tokens[tok]
        if dfa.accepting[state] and not data.endswith(
            (b"\xc3", b"\xe2", b"\x86", b"\xf0", b"\x9f")
        ):
            s = data.decode("utf-8")
            assert yaml.load(f"k: {s}\n", Loader=yaml.BaseLoader) == {"k": s}, s
            done += 1
    assert done > 50


@pytest.mark.parametrize(
    "text, ok",
    [
        ("hello world", True),
        ("-1", True),
        ("-", False),
        ("- x", False),
        ("a: b", False),
        ("a:b", True),
        ("a:", False),
        ("a #b", False),
        ("a#b", True),
        (" a", False),
        ("a ", False),
        ("#a", False),
        ("'a'", False),
        ("[a]", False),
        ("a [b] {c}", True),
        ("a\tb", False),
        ("a  b", True),
        ("a\nb", False),
        ("?x", True),
        (":x", True),
        ("x\u2028", False),
        ("true", True),
        ("12", True),
        ("naïve → 😀", True),
        ("a\x7fb", False),
        ("", False),
    ],
)
def test_unquoted_text_table(text, ok, tiny):
    node = _ext_automata.unquoted_text()
    assert _run_automaton(node, text) is ok
    assert (_PLAIN.fullmatch(text) is not None) is ok


def _run_automaton(node, text: str) -> bool:
    q = node.start
    for ch in map(ord, text):
        for ranges, t in node.edges[q]:
            if any(lo <= ch <= hi for lo, hi in ranges):
                q = t
                break
        else:
            return False
    return q in node.finals


# -- terminal labels: masks vs a marker-regex oracle --------------------------------------------

_MARK = {"PARAGRAPH_TOKEN": "\ue000", "TEXT_TOKEN": "\ue001"}


def _predicate(vocab, label):
    if label.startswith("SPECIAL_TOKEN:"):
        pred = np.zeros(vocab.size, dtype=bool)
        pred[vocab.special_tokens[label.split(":", 1)[1]]] = True
        return pred
    pred = np.array([bool(t) for t in vocab.tokens])
    if label == "PARAGRAPH_TOKEN":
        pred &= np.array([not t or (b"\n" not in t and b"\r" not in t) for t in vocab.tokens])
    return pred


def check_terminal_masks(dfa, vocab, oracle_rx: str, labels, *, walks, steps, seed=0):
    """``labels``: [(name, marker)] in precedence order; ``oracle_rx`` spells labels as markers."""
    regex = pytest.importorskip("regex")
    rx = regex.compile(oracle_rx)
    lang = Lang(
        lambda s: rx.fullmatch(s, partial=True) is not None,
        lambda s: rx.fullmatch(s) is not None,
        "\n" + re.sub(r"[^ -~]", "", oracle_rx),
        exclude="".join(m for _, m in labels),
    )
    preds = [(_predicate(vocab, name), m) for name, m in labels]
    rng = random.Random(seed)
    runs = []
    for _ in range(walks):
        state, text, tail, toks = dfa.start, "", b"", []
        for _ in range(steps + 1):
            mask = dfa.allowed(state)
            expect = np.zeros(vocab.size, dtype=bool)
            how = {}
            for t, b in enumerate(vocab.tokens):
                if b and lang.byte_viable(text, tail + b):
                    expect[t], how[t] = True, None
                    continue
                if tail:
                    continue
                for pred, m in preds:
                    if pred[t] and lang.viable(text + m):
                        expect[t], how[t] = True, m
                        break
            if not tail:
                expect[list(vocab.eos_ids)] = lang.complete(text)
            diff = np.flatnonzero(mask != expect)
            assert diff.size == 0, (
                f"after {toks}: {len(diff)} differences, e.g. "
                f"{[(int(t), vocab.tokens[t], bool(mask[t])) for t in diff[:5]]}"
            )
            tok = _pick(dfa, mask, rng, eos_weight=0.1)
            if tok is None:
                break
            toks.append(tok)
            state = dfa.advance(state, tok)
            if how[tok] is None:
                text, tail = _split_utf8(text.encode() + tail + (vocab.tokens[tok] or b""))
            else:
                text += how[tok]
        runs.append((toks, dfa.accepting[state]))
    return runs


BULLETS = r"Summary:(\n\* (?P<PARAGRAPH_TOKEN>)+){3,5}"
BULLETS_ORACLE = "Summary:(\n\\* \ue000+){3,5}"
TERMINAL_CASES = [
    ("bullets", BULLETS, BULLETS_ORACLE, [("PARAGRAPH_TOKEN", "\ue000")]),
    # The normal edge wins: "?" always ends the question; "?x" is a text token.
    ("text-token", r"Q: (?P<TEXT_TOKEN>)+\?", "Q: \ue001+\\?", [("TEXT_TOKEN", "\ue001")]),
    # Precedence among labels: PARAGRAPH_TOKEN before TEXT_TOKEN.
    (
        "precedence",
        r"(?:(?P<PARAGRAPH_TOKEN>)a|(?P<TEXT_TOKEN>)b)+",
        "(?:\ue000a|\ue001b)+",
        [("PARAGRAPH_TOKEN", "\ue000"), ("TEXT_TOKEN", "\ue001")],
    ),
]


@pytest.mark.parametrize("case", TERMINAL_CASES, ids=[c[0] for c in TERMINAL_CASES])
def test_terminals_tiny(case, tiny):
    _, pattern, oracle, labels = case
    dfa = _compile(pattern, tiny)
    assert dfa.terminals == tuple(name for name, _ in labels)
    check_terminal_masks(dfa, tiny, oracle, labels, walks=15, steps=25)


@pytest.mark.parametrize("case", TERMINAL_CASES, ids=[c[0] for c in TERMINAL_CASES])
def test_terminals_llama3(case, request):
    vocab = _real(request, "llama3")
    _, pattern, oracle, labels = case
    dfa = _compile(pattern, vocab)
    check_terminal_masks(dfa, vocab, oracle, labels, walks=1, steps=4, seed=2)


def test_special_token_tiny(tiny):
    labels = [("SPECIAL_TOKEN:<img>", "\ue002"), ("SPECIAL_TOKEN:</img>", "\ue003")]
    dfa = _compile(
        r"see (?P<SPECIAL_TOKEN><img>)(?P<TEXT_TOKEN>){1,2}(?P<SPECIAL_TOKEN></img>)", tiny
    )
    assert dfa.terminals == ("SPECIAL_TOKEN:<img>", "SPECIAL_TOKEN:</img>", "TEXT_TOKEN")
    check_terminal_masks(
        dfa,
        tiny,
        "see \ue002\ue001{1,2}\ue003",
        labels + [("TEXT_TOKEN", "\ue001")],
        walks=10,
        steps=8,
    )
    img, end = tiny.special_tokens["<img>"], tiny.special_tokens["</img>"]
    s, e = tiny.encode("see "), tiny.encode("e")
    assert dfa.accepts([*s, img, *e, end])
    assert not dfa.accepts([*s, end, *e, img])


def test_special_token_gemma3(gemma3_vocab):
    vocab = gemma3_vocab
    pattern = r"Image: (?P<SPECIAL_TOKEN><start_of_image>)\n(?P<PARAGRAPH_TOKEN>)+"
    dfa = _compile(pattern, vocab)
    soi = vocab.special_tokens["<start_of_image>"]
    head = vocab.encode("Image: ")
    state = dfa.walk(head)
    mask = dfa.allowed(state)
    assert np.flatnonzero(mask).tolist() == [soi]  # exactly that one id, nothing else
    labels = [("SPECIAL_TOKEN:<start_of_image>", "\ue002"), ("PARAGRAPH_TOKEN", "\ue000")]
    check_terminal_masks(dfa, vocab, "Image: \ue002\n\ue000+", labels, walks=1, steps=3, seed=5)


def test_special_tokens_llama3_header(llama3_vocab):
    vocab = llama3_vocab
    dfa = _compile(
        r"(?P<SPECIAL_TOKEN><|start_header_id|>)assistant(?P<SPECIAL_TOKEN><|end_header_id|>)"
        r"\n\n(?P<TEXT_UNTIL>.)",
        vocab,
    )
    start, end = (vocab.special_tokens[n] for n in ("<|start_header_id|>", "<|end_header_id|>"))
    assert dfa.accepts([start, *vocab.encode("assistant"), end, *vocab.encode("\n\nHi there.")])
    assert not dfa.accepts([*vocab.encode("assistant"), end, *vocab.encode("\n\nHi.")])
    assert np.flatnonzero(dfa.allowed(dfa.start)).tolist() == [start]


def test_bulleted_list_walks(request, tiny):
    """Random walks until EOS: a heading, then 3-5 bullets of newline-free tokens."""
    vocabs = [tiny]
    for name in ("gemma3", "llama3"):
        try:
            vocabs.append(_real(request, name))
        except pytest.skip.Exception:
            pass
    for vocab in vocabs:
        dfa = _compile(BULLETS, vocab)
        newline = np.array([bool(t) and b"\n" in t for t in vocab.tokens])
        rng = random.Random(7)
        counts = set()
        for _ in range(40):
            state, toks = dfa.start, []
            while True:
                mask = dfa.allowed(state)
                # Uniform over token classes, but often a token with a newline (a new bullet).
                if rng.random() < 0.3 and (mask & newline).any():
                    tok = int(rng.choice(np.flatnonzero(mask & newline)))
                else:
                    tok = _pick(dfa, mask, rng, eos_weight=0.3)
                if tok is None:
                    assert dfa.accepting[state]
                    break
                toks.append(tok)
                state = dfa.advance(state, tok)
                assert state >= 0
                assert len(toks) < 500
            text = vocab.decode(toks)
            lines = text.split(b"\n")
            assert lines[0] == b"Summary:"
            assert 3 <= len(lines) - 1 <= 5, text
            counts.add(len(lines) - 1)
            for line in lines[1:]:
                assert line.startswith(b"* ") and len(line) > 2, text
            # Tokens after each "* " are whole newline-free text tokens.
            pos, starts = 0, []
            for t in toks:
                starts.append(pos)
                pos += len(vocab.tokens[t])
            bodies = [m.end() for m in re.finditer(rb"\n\* ", text)]
            assert all(b in starts for b in bodies), "a bullet body starts mid-token"
        assert counts == {3, 4, 5}, (vocab.name, counts)


# -- SUBSTRING_OF and TEXT_UNTIL sizes ------------------------------------------------------------


def _reference(n: int, seed=0) -> str:
    rng = random.Random(seed)
    words = REFERENCE.replace(".", "").split() + ["automaton", "token", "état", "→", "😀"]
    out = []
    while sum(map(len, out)) + len(out) < n:
        out.append(rng.choice(words))
    return " ".join(out)[:n]


def test_substring_of_5000_is_linear_and_exact():
    ref = _reference(5000)
    assert len(ref) == 5000
    node = _ext_automata.substring_of(ref)
    assert len(node.edges) <= 2 * len(ref)
    assert sum(len(e) for e in node.edges) <= 3 * len(ref)
    # A vocabulary of every character of the reference, random substrings, and other words.
    rng = random.Random(1)
    pieces = {c.encode() for c in ref} | {bytes([b]) for b in range(256)}
    for _ in range(400):
        i = rng.randrange(len(ref))
        pieces.add(ref[i : i + rng.randint(2, 8)].encode())
    pieces |= {b"zebra", b"qq", b"\xc3", b"\xa9", b"\xf0\x9f", b'"'}
    vocab = ac.Vocabulary.from_bytes([None, *sorted(pieces)], eos_ids=[0], name="ref-pieces")
    t0 = time.process_time()  # CPU time: a loose bound against blow-ups, not a benchmark
    dfa = _compile('"(?P<SUBSTRING_OF>' + re.escape(ref) + ')"', vocab)
    elapsed = time.process_time() - t0
    assert elapsed < 10, f"SUBSTRING_OF(5000 chars) took {elapsed:.1f}s of CPU"
    assert dfa.num_states <= 2 * len(ref) + 2, dfa
    check_byte_masks(dfa, vocab, around('"', substring_lang(ref), '"'), walks=6, steps=40)


@pytest.mark.parametrize(
    "stop", ["a" * 300, "ab" * 150, "abaababaabaab" * 20, "x", "ananas", "\n\n", "é→😀é"]
)
def test_text_until_is_linear(stop):
    node = _ext_automata.text_until(stop)
    m = len(stop)
    assert len(node.edges) == m + 1
    # Edges that do not return to the start: m forward + at most m backward (Simon).
    assert sum(1 for out in node.edges for _, t in out if t != 0) <= 2 * m
    # The automaton agrees with the definition on random strings over the stop's alphabet.
    rng = random.Random(0)
    alphabet = sorted(set(stop)) + ["z"]
    lang = until_lang(stop)
    for _ in range(300):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 2 * m + 3)))
        if rng.random() < 0.5:
            s += stop
        assert _run_automaton(node, s) is lang.complete(s), s


def test_substring_of_automaton_matches_definition():
    rng = random.Random(4)
    for ref in ["abcbc", "aaaa", "abab", "mississippi", "é→é→😀"]:
        node = _ext_automata.substring_of(ref)
        assert len(node.edges) <= max(2 * len(ref) - 1, 1)
        alphabet = sorted(set(ref)) + ["z"]
        for _ in range(300):
            s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
            assert _run_automaton(node, s) is (s in ref), (ref, s)


# -- scanner and argument syntax ------------------------------------------------------------------


def _languages_equal(a: str, b: str, vocab=None) -> bool:
    """Whether two patterns (extensions allowed in ``a``) have the same byte DFA."""

    def byte_dfa(p):
        e = _extensions.expand(p, vocab)
        return _byte_dfa.build_byte_dfa(_regex.parse(e.pattern, e.placeholders), len(e.predicates))

    x, y = byte_dfa(a), byte_dfa(b)
    if x.trans.shape != y.trans.shape:
        return False
    # Both are minimal: compare by a synchronized BFS.
    m = {x.start: y.start}
    todo = [x.start]
    while todo:
        p = todo.pop()
        q = m[p]
        if x.accepting[p] != y.accepting[q]:
            return False
        for s in range(x.trans.shape[1]):
            a_, b_ = int(x.trans[p, s]), int(y.trans[q, s])
            if (a_ < 0) != (b_ < 0):
                return False
            if a_ >= 0:
                if a_ in m:
                    if m[a_] != b_:
                        return False
                else:
                    m[a_] = b_
                    todo.append(a_)
    return True


@pytest.mark.parametrize(
    "pattern, plain",
    [
        # Argument escapes of literal arguments.
        (r"(?P<TEXT_UNTIL>\)\\)", r"(?:[^)]|\)+[^)\\])*\)+\\"),
        (r"(?P<SUBSTRING_OF>f(x\))", "|f|f\\(|f\\(x|f\\(x\\)|\\(|\\(x|\\(x\\)|x|x\\)|\\)"),
        (
            r"(?P<SUBSTRING_OF>\n\x41\u00e9\N{SNOWMAN}\;)",
            "|".join(re.escape("\nAé☃;"[i:j]) for i in range(6) for j in range(i, 6)),
        ),
        # Scanner: character classes, escapes and comments hide extension syntax.
        (r"[(?P<TEXT_TOKEN>)]", r"[(?P<TEXT_TOKEN>)]"),
        (r"\(?P<TEXT_TOKEN>a\)", r"\(?P<TEXT_TOKEN>a\)"),
        (r"(?#(?P<TEXT_TOKEN>)a", "a"),
        ("(?x) a # (?P<PARAGRAPH_TOKENS>)\n b", "ab"),
        # Plain named groups keep their meaning.
        (r"(?P<text>a|b)(?P<token>c)", r"(?:a|b)c"),
        # Delimited lists: parts are regexes, ';' splits only at the top level.
        (r"(?P<DELIMITED_LIST>\;;a[;]b|(c;d))", r"(?:a;b|c;d)(?:;(?:a;b|c;d))*"),
        (r"(?P<DELIMITED_LIST>, ;\d;0;2)", r"(?:\d(?:, \d)?)?"),
        (r"(?P<DELIMITED_LIST>, ;\d;; )", r"\d(?:, \d)*"),
        (r"(?P<DELIMITED_LIST>,;x;0;0)", r""),
        (r"(?P<DELIMITED_LIST>;x(?P<n>y);3)", r"(?:xy){3,}"),
        (r"(?i)(?P<DELIMITED_LIST>-;ab)", r"(?i)ab(?:-ab)*"),
        ("(?x)(?P<DELIMITED_LIST>,;a # a comment ; ) ( \n)", "a(?:,a)*"),
        (r"(?P<DELIMITED_SUBSEQUENCE_OF>,;a;b;c)", r"a(?:,b)?(?:,c)?|b(?:,c)?|c"),
        (r"(?P<DELIMITED_SUBSEQUENCE_OF>\s;\d+;x)", r"\d+(?:\sx)?|x"),
        # Extensions inside ordinary groups and quantifiers.
        (r"(?:(?P<QUOTED_TEXT>),)*", r'(?:"(?:[^"\\\n\r]|\\[^\n\r])*",)*'),
        # Flags do not apply to literal arguments.
        (r"(?i)(?P<SUBSTRING_OF>Ab)", r"|(?-i:A|Ab|b)"),
    ],
)
def test_expansion_equivalences(pattern, plain):
    assert _languages_equal(pattern, plain)


# Not ns-char: C0 controls and space, DEL and C1 (NEL included), LS, PS, surrogates, BOM, U+FFFE/F.
_NOT_NS = "\\x00-\\x20\\x7f-\\x9f\\u2028\\u2029\\ud800-\\udfff\\ufeff\\ufffe\\uffff"
# The same language as the YAML productions, as a plain regex: a first character, then units
# of (colons, a non-colon) or (spaces, then a non-colon-non-hash or colons and a non-colon).
UNQUOTED_PLAIN = (
    f"(?:[^{_NOT_NS}{_IND}]|[-?:]:*[^{_NOT_NS}:])"
    f"(?::*[^{_NOT_NS}:]| +(?::+[^{_NOT_NS}:]|[^{_NOT_NS}:#]))*"
)


def test_unquoted_text_equals_its_plain_regex():
    assert _languages_equal("(?P<UNQUOTED_TEXT>)", UNQUOTED_PLAIN)
    rng = random.Random(5)
    alphabet = "ab :#-?,[]'\"\t\n\x85\xa0é😀"
    for _ in range(2000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
        assert (re.fullmatch(UNQUOTED_PLAIN, s) is not None) is (_PLAIN.fullmatch(s) is not None), s


def test_re_escape_is_a_valid_literal_argument():
    rng = random.Random(9)
    alphabet = "ab();\\|[]{}.*+?^$#- \n\té→😀"
    for _ in range(200):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        e = _extensions.expand(f"(?P<TEXT_UNTIL>{re.escape(s)})", None)
        node = e.placeholders["__ext_0"]
        assert _run_automaton(node, s) and not _run_automaton(node, s[:-1])


def test_no_extension_returns_pattern_unchanged():
    e = _extensions.expand(r"(?P<name>a)[b](?#c)", None)
    assert e.pattern == r"(?P<name>a)[b](?#c)" and e.placeholders == {} and e.predicates == ()


def test_artifact_records_terminals_and_round_trips(tmp_path, tiny):
    dfa = _compile(BULLETS, tiny)
    assert dfa.terminals == ("PARAGRAPH_TOKEN",)
    dfa.save(tmp_path / "b.npz")
    back = ac.TokenDFA.load(tmp_path / "b.npz", vocab=tiny)
    assert back.terminals == ("PARAGRAPH_TOKEN",)
    assert (back.next_state == dfa.next_state).all()


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, offset, suggestion",
    [
        (r"Summary:(\n\* (?P<PARAGRAPH_TOKENS>)+){3,5}", 18, "PARAGRAPH_TOKEN"),
        (r"(?P<TEXT_UNTILL>end)", 4, "TEXT_UNTIL"),
        (r"a(?P<quoted_text>)", 5, "QUOTED_TEXT"),
        (r"(?P<Special_Token><eos>)", 4, "SPECIAL_TOKEN"),
        (r"(?P<DELIMITED_SUBSEQUENCE>,;a;b)", 4, "DELIMITED_SUBSEQUENCE_OF"),
        (r"(?P<SUBSTRING>abc)", 4, "SUBSTRING_OF"),
        (r"(?P<DELIMITED_LIST>,;(?P<TEXT_TOKENS>))", 25, "TEXT_TOKEN"),
    ],
)
def test_misspelled_extension_names(pattern, offset, suggestion, tiny):
    with pytest.raises(ac.InvalidPatternError, match=re.escape(f"(?P<{suggestion}>")) as info:
        _compile(pattern, tiny)
    assert info.value.offset == offset


@pytest.mark.parametrize("name", ["text", "quoted", "token", "special", "list", "items", "UNTIL"])
def test_plain_group_names_are_not_misspellings(name, tiny):
    assert _compile(f"(?P<{name}>a)b", tiny).accepts(tiny.encode("ab"))


@pytest.mark.parametrize(
    "pattern, message, offset",
    [
        (r"(?P<QUOTED_TEXT>x)", "takes no argument", 16),
        (r"(?P<PARAGRAPH_TOKEN>a)", "takes no argument", 20),
        (r"(?P<TEXT_UNTIL>)", "non-empty argument", 15),
        (r"(?P<SUBSTRING_OF>)", "non-empty argument", 17),
        (r"ab(?P<TEXT_UNTIL>abc", "missing its closing ')'", 2),
        (r"(?P<TEXT_UNTIL>a\q)", r"bad escape \q", 16),
        (r"(?P<TEXT_UNTIL>a\x4)", "expected 2 hex digits", 16),
        (r"(?P<TEXT_UNTIL>a\N{NO SUCH CHAR})", "unknown character name", 16),
        ("(?P<SUBSTRING_OF>a\ud800)", "lone surrogate", 17),
        (r"(?P<SUBSTRING_OF>a\ud800)", "not a character", 18),
        (r"(?P<DELIMITED_LIST>,)", "2 to 4", 0),
        (r"(?P<DELIMITED_LIST>,;a;1;2;3)", "2 to 4", 0),
        (r"(?P<DELIMITED_LIST>,;;1)", "ITEM is empty", 21),
        (r"(?P<DELIMITED_LIST>,;a;one)", "MIN must be a non-negative integer", 23),
        (r"(?P<DELIMITED_LIST>,;a;3;2)", "MAX=2 is less than MIN=3", 25),
        (r"(?P<DELIMITED_LIST>,;a(b;2)", "missing its closing ')'", 0),
        (r"(?P<DELIMITED_SUBSEQUENCE_OF>,)", "at least one item", 0),
        (r"(?P<DELIMITED_SUBSEQUENCE_OF>,;a;;b)", "empty item", 33),
        (r"xy(?P<DELIMITED_LIST>,;a{2,1})", "min repeat greater than max repeat", 25),
        (r"(?P<__ext_0>a)", "reserved", 4),
        (r"(?P<SPECIAL_TOKEN><imgg>)", "close matches: <img>", 18),
        (r"(?P<SPECIAL_TOKEN><eos>)", "end-of-sequence", 18),
    ],
)
def test_malformed_arguments(pattern, message, offset, tiny):
    with pytest.raises(ac.InvalidPatternError, match=re.escape(message)) as info:
        _compile(pattern, tiny)
    assert info.value.offset == offset
    assert info.value.pattern == pattern


def test_errors_after_an_extension_point_into_the_users_pattern(tiny):
    with pytest.raises(ac.UnsupportedPatternError, match="word boundary") as info:
        _compile(r"(?P<TEXT_UNTIL>abc)x\by", tiny)
    assert info.value.offset == 20 and info.value.pattern == r"(?P<TEXT_UNTIL>abc)x\by"
    with pytest.raises(ac.InvalidPatternError, match="unbalanced parenthesis") as info:
        _compile(r"(?P<QUOTED_TEXT>)ab)", tiny)
    assert info.value.offset == 19


def test_unknown_special_token_suggests_close_names(gemma3_vocab):
    with pytest.raises(ac.InvalidPatternError, match="<start_of_image>") as info:
        _compile(r"(?P<SPECIAL_TOKEN><start_of_img>)", gemma3_vocab)
    assert "unknown special token '<start_of_img>'" in str(info.value)
    with pytest.raises(ac.InvalidPatternError, match="end-of-sequence"):
        _compile(r"(?P<SPECIAL_TOKEN><end_of_turn>)", gemma3_vocab)


def test_misspelling_cutoff_is_documented():
    """The docstring's cutoff and examples agree with the implementation."""
    doc = _extensions.__doc__
    assert f"{_extensions.MISSPELLING_CUTOFF}" in doc
    for typo in ("PARAGRAPH_TOKENS", "TEXT_UNTILL"):
        assert typo in doc
        assert difflib.get_close_matches(
            typo, _extensions.EXTENSIONS, 1, _extensions.MISSPELLING_CUTOFF
        )
    for name in _extensions.EXTENSIONS:
        assert f"(?P<{name}>" in doc
