"""``format`` values as content languages (ECMA-262 regexes of the RFC grammars).

Each exact format is a regex over decoded characters, parsed by `_ecma`; formats that
cannot be exact (`FORMAT_LIMITS`) give a documented sound subset (``regex``: `_regex_format`).
"""

from __future__ import annotations

import functools

from automata_compile.frontends.json_schema._content import has_anchor
from automata_compile.frontends.json_schema._ecma import parse_ecma
from automata_compile.frontends.json_schema._regex_format import REGEX_LEFT_OUT, regex_subset

_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4 = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9A-Fa-f]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4})"
_IPV6 = (
    "(?:"
    + "|".join(
        [
            rf"(?:{_H16}:){{6}}{_LS32}",
            rf"::(?:{_H16}:){{5}}{_LS32}",
            rf"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
            rf"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}",
            rf"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
            rf"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}",
            rf"(?:(?:{_H16}:){{0,6}}{_H16})?::",
        ]
    )
    + ")"
)
_LEAP = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (
    r"(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
    r"|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)"
    rf"|{_LEAP}-02-29)"
)
# RFC 3339 ``time-secfrac = "." 1*DIGIT``: any number of digits, exactly. Not bounded by
# ``max_filler``: the digits are the string's content (``.5`` and ``.50`` are different
# strings, and a longer fraction is a different instant), as unbounded as any string; a
# schema bounds it with ``maxLength``.
_FRAC = r"(?:\.[0-9]+)?"
_NUMOFFSET = r"[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]"
_OFFSET = rf"(?:[Zz]|{_NUMOFFSET})"
_UTC_LEAP = rf"23:59:60{_FRAC}(?:[Zz]|[+-]00:00)"
_UNRESERVED = r"[A-Za-z0-9\-._~]"
_PCT = r"%[0-9A-Fa-f]{2}"
_SUB_DELIMS = r"[!$&'()*+,;=]"
_PCHAR = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|[:@])"
_SCHEME = r"[A-Za-z][A-Za-z0-9+\-.]*"
_IPVFUTURE = rf"[vV][0-9A-Fa-f]+\.(?:{_UNRESERVED}|{_SUB_DELIMS}|:)+"
_HOST = rf"(?:\[(?:{_IPV6}|{_IPVFUTURE})\]|{_IPV4}|(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*)"
_AUTHORITY = rf"(?:(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:)*@)?{_HOST}(?::[0-9]*)?"
_SEGMENT = rf"{_PCHAR}*"
_SEGMENT_NZ = rf"{_PCHAR}+"
_SEGMENT_NZ_NC = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|@)+"
_PATH_ABEMPTY = rf"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = rf"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_PATH_ROOTLESS = rf"{_SEGMENT_NZ}(?:/{_SEGMENT})*"
_PATH_NOSCHEME = rf"{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*"
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_HIER = rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_ROOTLESS}|)"
_URI = rf"{_SCHEME}:{_HIER}(?:\?{_QUERY})?(?:#{_QUERY})?"
_RELATIVE = rf"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_PATH_NOSCHEME}|)(?:\?{_QUERY})?(?:#{_QUERY})?"
_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]"
_LDH_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?"
_EMAIL = (
    rf"(?:{_ATEXT}+(?:\.{_ATEXT}+)*"
    r'|"(?:[ !#-\[\]-~]|\\[ -~])*")'
    rf"@(?:{_LDH_LABEL}(?:\.{_LDH_LABEL})*|\[{_IPV4}\]|\[IPv6:{_IPV6}\])"
)
_DUR_DATE = r"(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
_DUR_TIME = r"T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DURATION = rf"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)"
_HEX = "[0-9A-Fa-f]"
_UUID = rf"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
_JSON_POINTER = r"(?:/(?:[^~/]|~[01])*)*"
_REL_JSON_POINTER = rf"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER})"


def _nonreserved_label(n: int) -> str:
    """LDH labels of at most n characters without '--' in positions 3-4 (no R-LDH labels)."""
    x, y = "[A-Za-z0-9]", "[A-Za-z0-9\\-]"
    return rf"(?:{x}(?:{x}|{y}{x}|{y}{y}{x}|{y}(?:{x}{y}|-{x}){y}{{0,{n - 5}}}{x})?)"


# A subset of RFC 1123 host names whose total length is provably at most 253 characters:
# 1-3 labels of at most 63 characters, or 4-8 labels of at most 30.
_HOSTNAME_SUBSET = (
    rf"{_nonreserved_label(63)}(?:\.{_nonreserved_label(63)}){{0,2}}"
    rf"|{_nonreserved_label(30)}(?:\.{_nonreserved_label(30)}){{3,7}}"
)
_UCSCHAR = (
    r"\u{A0}-\u{D7FF}\u{F900}-\u{FDCF}\u{FDF0}-\u{FFEF}"
    + "".join(rf"\u{{{p:X}0000}}-\u{{{p:X}FFFD}}" for p in range(1, 14))
    + r"\u{E1000}-\u{EFFFD}"
)
_IPRIVATE = r"\u{E000}-\u{F8FF}\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}"


def _uri_grammar(unreserved: str, private: str) -> tuple[str, str]:
    """(absolute, relative reference) regexes of RFC 3986, or RFC 3987 with ucschar."""
    unres = rf"[A-Za-z0-9\-._~{unreserved}]"
    pchar = rf"(?:{unres}|{_PCT}|{_SUB_DELIMS}|[:@])"
    host = rf"(?:\[(?:{_IPV6}|{_IPVFUTURE})\]|{_IPV4}|(?:{unres}|{_PCT}|{_SUB_DELIMS})*)"
    authority = rf"(?:(?:{unres}|{_PCT}|{_SUB_DELIMS}|:)*@)?{host}(?::[0-9]*)?"
    abempty = rf"(?:/{pchar}*)*"
    absolute = rf"/(?:{pchar}+(?:/{pchar}*)*)?"
    rootless = rf"{pchar}+(?:/{pchar}*)*"
    noscheme = rf"(?:{unres}|{_PCT}|{_SUB_DELIMS}|@)+(?:/{pchar}*)*"
    query = rf"(?:{pchar}|[/?{private}])*"
    fragment = rf"(?:{pchar}|[/?])*"
    tail = rf"(?:\?{query})?(?:#{fragment})?"
    full = rf"{_SCHEME}:(?://{authority}{abempty}|{absolute}|{rootless}|){tail}"
    relative = rf"(?://{authority}{abempty}|{absolute}|{noscheme}|){tail}"
    return full, relative


_IRI, _IRI_RELATIVE = _uri_grammar(_UCSCHAR, _IPRIVATE)
_VARCHAR = rf"(?:[A-Za-z0-9_]|{_PCT})"
_URI_TEMPLATE = (
    rf"(?:[!#$&-;=?-\[\]_a-z~{_UCSCHAR}{_IPRIVATE}]|{_PCT}"  # ' allowed (RFC 6570 errata 6937)
    rf"|\{{[+#./;?&=,!@|]?{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?"
    rf"(?:,{_VARCHAR}(?:\.?{_VARCHAR})*(?::[1-9][0-9]{{0,3}}|\*)?)*\}})*"
)

_FORMATS_EXACT = {
    "date": _DATE,
    "duration": _DURATION,
    "email": _EMAIL,
    "ipv4": _IPV4,
    "ipv6": _IPV6,
    "uri": _URI,
    "uri-reference": rf"(?:{_URI}|{_RELATIVE})",
    "uuid": _UUID,
    "json-pointer": _JSON_POINTER,
    "relative-json-pointer": _REL_JSON_POINTER,
    "iri": _IRI,
    "iri-reference": rf"(?:{_IRI}|{_IRI_RELATIVE})",
    "uri-template": _URI_TEMPLATE,
}

_HOSTNAME_LEFT_OUT = (
    "only host names without '--' in positions 3-4 (so no Punycode A-labels 'xn--...', "
    "whose validation is not regular in practice), with labels of at most 63 characters, "
    "either 1-3 labels or 4-8 labels of at most 30 characters, are generated"
)

# Formats that `format_language` cannot produce exactly: each gives a sound subset (every
# generated string valid), compiled by default with a SubsetWarning saying what it leaves
# out (this text); ``subsets="refuse"`` refuses them.
FORMAT_LIMITS = {
    "hostname": _HOSTNAME_LEFT_OUT,
    # RFC 5890 2.3.2.1: an NR-LDH label (LDH, not '--' in positions 3-4) is IDNA-valid, and
    # the subset's labels all are; its total length is within 253 as for hostname.
    "idn-hostname": "internationalized labels (U-labels, A-labels) need IDNA validation: "
    "only ASCII host names are generated, and of those " + _HOSTNAME_LEFT_OUT,
    # RFC 6531 extends RFC 5321's Mailbox (UTF-8 in local part and domain): every
    # RFC 5321 mailbox is an RFC 6531 one.
    "idn-email": "internationalized addresses (UTF-8 local parts, U-label domains) need IDNA "
    "validation: only the ASCII addresses of format 'email' (RFC 5321) are generated",
    "regex": "the language of valid regexes is not regular: " + REGEX_LEFT_OUT,
}


def _time(leap_seconds: str) -> str:
    base = rf"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{_FRAC}{_OFFSET}"
    if leap_seconds == "none":
        return base
    if leap_seconds == "utc":
        return rf"(?:{base}|{_UTC_LEAP})"
    # exact: local time HH:MM:60 at offset +-OH:OM is valid iff HH:MM - offset = 23:59 UTC
    alts = [rf"23:59:60{_FRAC}(?:[Zz]|[+-]00:00)"]
    for h in range(24):
        for m in range(60):
            offs = []
            # positive offset: local = 23:59 + off
            if m == 59:
                oh, om = (h + 1) % 24, 0
            else:
                oh, om = h, m + 1
            if (oh, om) != (0, 0):
                offs.append(rf"\+{oh:02d}:{om:02d}")
            # negative offset: local = 23:59 - off
            oh, om = (23 - h) % 24, 59 - m
            if (oh, om) != (0, 0):
                offs.append(rf"-{oh:02d}:{om:02d}")
            alts.append(rf"{h:02d}:{m:02d}:60{_FRAC}(?:{'|'.join(offs)})")
    return rf"(?:{base}|{'|'.join(alts)})"


@functools.lru_cache(maxsize=64)
def format_language(name: str, leap_seconds: str = "utc"):
    """The content language of a ``format``; None if the format is unknown.

    Formats listed in `FORMAT_LIMITS` return their documented subset.
    """
    if name in ("time", "date-time"):
        t = _time(leap_seconds)
        pattern = t if name == "time" else rf"{_DATE}[Tt]{t}"
    elif name in _FORMATS_EXACT:
        pattern = _FORMATS_EXACT[name]
    elif name in ("hostname", "idn-hostname"):
        pattern = _HOSTNAME_SUBSET
    elif name == "idn-email":
        pattern = _EMAIL
    elif name == "regex":
        return regex_subset()
    else:
        return None
    return _parse_plain(pattern)


def _parse_plain(pattern: str):
    node = parse_ecma(pattern)
    assert not has_anchor(node)
    return node
