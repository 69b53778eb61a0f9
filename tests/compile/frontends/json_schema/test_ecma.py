"""ECMA-262 pattern parsing (`_ecma`): identity escapes of ASCII punctuation, checked against
Python's ``re`` (the oracle: it reads ``\\:`` as ``:`` as Annex B does), and the escapes that
stay errors."""

from __future__ import annotations

import re
import string

import pytest

from automata_compile.frontends.json_schema import _content as sf
from automata_compile.frontends.json_schema._ecma import PatternError, pattern_language

PUNCTUATION = [c for c in map(chr, range(0x20, 0x7F)) if not c.isalnum()]


@pytest.mark.parametrize("ch", PUNCTUATION)
def test_an_escaped_ascii_punctuation_is_that_character(ch):
    body = rf"a\{ch}b"
    lang = pattern_language(f"^{body}$")
    for text in ["a" + ch + "b", "a\\" + ch + "b", "ab", "a" + ch, "axb", "a" + ch + "bb"]:
        assert sf.content_matches(lang, text) == bool(re.fullmatch(body, text)), (body, text)


def test_escaped_punctuation_inside_a_class():
    # azure-pipelines' branch filter: '\:' inside a negated class
    body = r"[^\/~\^\: \[\]\\]+(\/[^\/~\^\: \[\]\\]+)*"
    lang = pattern_language(f"^{body}$")
    for text in ["main", "releases/v1", "a:b", "a b", "a/", "/a", "x~y", "a^b", "a\\b", "a[b"]:
        assert sf.content_matches(lang, text) == bool(re.fullmatch(body, text)), text


@pytest.mark.parametrize("ch", [c for c in string.ascii_letters if c not in "tnvfrdDwWsSbBcxupPk"])
def test_an_escaped_letter_without_a_meaning_stays_an_error(ch):
    with pytest.raises(PatternError, match=re.escape(f"invalid escape \\{ch}")):
        pattern_language(rf"a\{ch}")
