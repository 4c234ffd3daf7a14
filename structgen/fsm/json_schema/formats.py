"""Regexes (over the JSON string body) for the ``format`` values we assert.

Each regex accepts only strings valid for the format: RFC 3339 date/time/duration,
RFC 4122 uuid, dotted-quad IPv4 without leading zeros, RFC 4291 IPv6 text forms, host
names of at most three labels (RFC 1123 labels that are not IDNA A-labels: no ``--`` in
the 3rd and 4th place), RFC 3986 ``URI``/``URI-reference`` and RFC 3987
``IRI``/``IRI-reference`` exactly, a conservative ``local@domain`` email, RFC 6570 URI
templates exactly, RFC 6901 JSON pointers and relative JSON pointers
(draft-bhutton-relative-json-pointer-00), and a subset of IDNA2008 ``idn-hostname``
(see ``_IDN_LABEL``). Some valid spellings are rejected (long or punycode host names,
quoted email local parts, pointers holding ``"``, a backslash or control characters); nothing
invalid is accepted. ``UNDECIDABLE`` names the formats no regular language matches;
``DRAFT_FORMATS`` the formats some draft defines (any other is an annotation).
None of the strings they match contains a character that needs escaping in JSON, so each
regex is the same over the decoded string and over the JSON string body.
"""

from __future__ import annotations

__all__ = ["DRAFT_FORMATS", "FORMATS", "UNDECIDABLE"]

_YEAR = "[0-9]{4}"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (
    "(?:" + _YEAR + "-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    "|" + _LEAP_YEAR + "-02-29)"
)
_TIME = (
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
    r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
)
_DUR_TIME = "T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = "(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)"
_DURATION = "P(?:" + _DUR_DATE + "(?:" + _DUR_TIME + ")?|" + _DUR_TIME + "|[0-9]+W)"
_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_IPV4 = _OCTET + r"(?:\." + _OCTET + "){3}"
_H16 = "[0-9a-fA-F]{1,4}"
_LS32 = "(?:" + _H16 + ":" + _H16 + "|" + _IPV4 + ")"


def _ipv6() -> str:
    forms = [f"(?:{_H16}:){{6}}{_LS32}", f"::(?:{_H16}:){{5}}{_LS32}"]
    for before in range(0, 7):  # [h16 (":" h16){0,before}] "::" tail
        after = 4 - before
        head = _H16 if before == 0 else f"(?:{_H16}:){{0,{before}}}{_H16}"
        if after >= 0:
            tail = f"(?:{_H16}:){{{after}}}{_LS32}" if after else _LS32
        elif before == 5:
            tail = _H16
        else:
            tail = ""
        forms.append(f"(?:{head})?::{tail}")
    return "(?:" + "|".join(forms) + ")"


_LABEL = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"

# RFC 6570 URI Template (levels 1-4): literals (any character but controls, space and
# "'%<>\\^`{|}, or a %XX escape) and {expressions}: an optional operator, then
# comma-separated variable names ([A-Za-z0-9_] or %XX, dot-separated) each with an
# optional :prefix length (1-9999) or * explode. Code points from U+F0000 are written
# as escapes (raw, they are shared-definition placeholders in pattern text).
_UCS = "".join(
    "%s-%s" % (chr(a), chr(b)) if a < 0xF0000 else "\\U%08x-\\U%08x" % (a, b)
    for a, b in [(0xA0, 0xD7FF), (0xE000, 0xFDCF), (0xFDF0, 0xFFEF)]
    + [(p << 16, (p << 16) + 0xFFFD) for p in range(1, 14)]
    + [(0xE1000, 0xEFFFD), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]
)
_PCT = "%[0-9A-Fa-f]{2}"
_VARCHAR = "(?:[A-Za-z0-9_]|" + _PCT + ")"
_VARSPEC = _VARCHAR + r"(?:\.?" + _VARCHAR + r")*(?::[1-9][0-9]{0,3}|\*)?"
_URI_TEMPLATE = (
    "(?:[!#$&(-;=?-\\[\\]_a-z~"
    + _UCS
    + "]|"
    + _PCT
    + "|\\{[+#./;?&=,!@|]?"
    + _VARSPEC
    + "(?:,"
    + _VARSPEC
    + ")*\\})*"
)


def _class(ranges: list[tuple[int, int]]) -> str:
    r"""Character-class body for code-point ranges (from U+F0000 as ``\U`` escapes)."""
    return "".join(
        "%s-%s" % (chr(a), chr(b)) if b < 0xF0000 else "\\U%08x-\\U%08x" % (a, b) for a, b in ranges
    )


# RFC 3987 ucschar and iprivate (the non-ASCII characters an IRI may hold)
_UCSCHAR = _class(
    [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF)]
    + [(p << 16, (p << 16) + 0xFFFD) for p in range(1, 14)]
    + [(0xE1000, 0xEFFFD)]
)
_IPRIVATE = _class([(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)])


def _uri(unreserved: str, private: str) -> tuple[str, str]:
    """RFC 3986 ``URI`` and ``URI-reference`` (RFC 3987 ``IRI``/``IRI-reference`` when
    ``unreserved`` adds ucschar and ``private`` is iprivate, allowed in the query only).
    ``host`` is ``IP-literal`` or ``reg-name`` (an IPv4 address is one of the latter).
    """
    unres = "-A-Za-z0-9._~" + unreserved  # "-" first: a literal
    sub = "!$&'()*+,;="
    pchar = "(?:[" + unres + sub + ":@]|" + _PCT + ")"
    segment = pchar + "*"
    segment_nz = pchar + "+"
    segment_nz_nc = "(?:[" + unres + sub + "@]|" + _PCT + ")+"
    ip_future = "[vV][0-9A-Fa-f]+\\.[-A-Za-z0-9._~" + sub + ":]+"
    ip_literal = "\\[(?:" + _ipv6() + "|" + ip_future + ")\\]"
    reg_name = "(?:[" + unres + sub + "]|" + _PCT + ")*"
    userinfo = "(?:[" + unres + sub + ":]|" + _PCT + ")*"
    authority = "(?:" + userinfo + "@)?(?:" + ip_literal + "|" + reg_name + ")(?::[0-9]*)?"
    abempty = "(?:/" + segment + ")*"
    absolute = "/(?:" + segment_nz + abempty + ")?"
    query = "(?:\\?(?:" + pchar + "|[/?" + private + "])*)?"
    fragment = "(?:#(?:" + pchar + "|[/?])*)?"
    tail = query + fragment
    scheme = "[A-Za-z][A-Za-z0-9+.-]*"
    hier = "(?://" + authority + abempty + "|" + absolute + "|" + segment_nz + abempty + ")?"
    relative = "(?://" + authority + abempty + "|" + absolute + "|" + segment_nz_nc + abempty + ")?"
    uri = scheme + ":" + hier + tail
    return uri, "(?:" + uri + "|" + relative + tail + ")"


_URI, _URI_REFERENCE = _uri("", "")
_IRI, _IRI_REFERENCE = _uri(_UCSCHAR, _IPRIVATE)

# RFC 6901: "/"-prefixed reference tokens, "~" only as ~0 or ~1; the characters JSON
# escapes (", \\, controls) are not generated
_POINTER = '(?:/(?:[^"\\\\\\x00-\\x1f/~]|~[01])*)*'
# draft-bhutton-relative-json-pointer-00: a non-negative integer, an optional index
# manipulation (+/- a positive integer), then "#" or a JSON pointer
_RELATIVE_POINTER = "(?:0|[1-9][0-9]*)(?:[+-][1-9][0-9]*)?(?:#|" + _POINTER + ")"

# IDNA2008 host names (RFC 5890/5891, as the idna package checks them): ASCII LDH labels
# without "--" in the 3rd and 4th place (that is the A-label prefix), or labels of one to
# eight lowercase Latin-1 letters, Hangul syllables and ASCII letters/digits (all PVALID,
# left-to-right, NFC in any sequence; their A-label stays within 63 octets); at most three
# labels, as "hostname"
_AN = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"
_IDN_ASCII = (
    f"(?:{_AN}(?:{_LDH}?{_AN})?|{_AN}{_LDH}{_LDH}{_AN}"
    f"|{_AN}{_LDH}(?:{_AN}{_LDH}|-{_AN}){_LDH}{{0,58}}{_AN})"
)
_IDN_LABEL = "(?:" + _IDN_ASCII + "|[a-z0-9\u00df-\u00f6\u00f8-\u00ff\uac00-\ud7a3]{1,8})"
_IDN_HOSTNAME = _IDN_LABEL + r"(?:\." + _IDN_LABEL + "){0,2}"

UNDECIDABLE = {
    "regex": "the strings that are regular expressions nest parentheses to any depth:"
    " no finite automaton recognizes them",
}
"""Formats no regular language matches exactly: refused under ``strict`` (the reason)."""

FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + "[Tt]" + _TIME,
    "duration": _DURATION,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "email": r"[A-Za-z0-9_%+\-]+(?:\.[A-Za-z0-9_%+\-]+)*@" + _LABEL + r"(?:\." + _LABEL + ")+",
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "hostname": _IDN_ASCII + r"(?:\." + _IDN_ASCII + "){0,2}",
    "uri": _URI,
    "uri-reference": _URI_REFERENCE,
    "iri": _IRI,
    "iri-reference": _IRI_REFERENCE,
    "uri-template": _URI_TEMPLATE,
    "json-pointer": _POINTER,
    "relative-json-pointer": _RELATIVE_POINTER,
    "idn-hostname": _IDN_HOSTNAME,
}

_DRAFT3_FORMATS = frozenset(
    {
        "date-time", "date", "time", "utc-millisec", "regex", "color", "style", "phone",
        "uri", "email", "ip-address", "ipv6", "host-name",
    }
)  # fmt: skip
_DRAFT4_FORMATS = frozenset({"date-time", "email", "hostname", "ipv4", "ipv6", "uri"})
_DRAFT6_FORMATS = _DRAFT4_FORMATS | {"uri-reference", "uri-template", "json-pointer"}
_DRAFT7_FORMATS = _DRAFT6_FORMATS | {
    "date", "time", "iri", "iri-reference", "idn-email", "idn-hostname",
    "relative-json-pointer", "regex",
}  # fmt: skip
_DRAFT2019_FORMATS = _DRAFT7_FORMATS | {"duration", "uuid"}

DRAFT_FORMATS = {
    "Draft3Validator": _DRAFT3_FORMATS,
    "Draft4Validator": _DRAFT4_FORMATS,
    "Draft6Validator": _DRAFT6_FORMATS,
    "Draft7Validator": _DRAFT7_FORMATS,
    "Draft201909Validator": _DRAFT2019_FORMATS,
    "Draft202012Validator": _DRAFT2019_FORMATS,
}
"""The ``format`` values each draft defines, by the name of ``jsonschema``'s validator class
for the draft (draft 3 section 5.23, draft 4 section 7.3, draft 6 and 7 section 8.3,
2019-09 and 2020-12 section 7.3). A value the document's draft does not define (draft 3's
``phone`` in a 2020-12 schema, ``url``, OpenAPI's ``byte``, ``""``) is left unchecked by the
drafts (2020-12 section 7.2.3; ``jsonschema``'s ``FormatChecker`` accepts every string for
it), so the converter ignores it with a warning; a draft of no entry here uses 2020-12's.
"""
