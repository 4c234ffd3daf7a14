"""Regexes (over the JSON string body) for the ``format`` values we assert.

Each regex accepts only strings valid for the format (RFC 3339 date/time/duration,
RFC 4122 uuid, dotted-quad IPv4 without leading zeros, RFC 4291 IPv6 text forms,
RFC 1123 hostnames of at most three labels, RFC 3986 URIs with an ASCII subset of
characters, a conservative ``local@domain`` email, RFC 6570 URI templates exactly). Some
valid spellings are rejected (e.g. long hostnames, quoted email local parts); nothing
invalid is accepted.
None of them contains a character that needs escaping in JSON.
"""

from __future__ import annotations

__all__ = ["FORMATS"]

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
_URI_CHAR = r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"

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

FORMATS = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + "[Tt]" + _TIME,
    "duration": _DURATION,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "email": r"[A-Za-z0-9_%+\-]+(?:\.[A-Za-z0-9_%+\-]+)*@" + _LABEL + r"(?:\." + _LABEL + ")+",
    "ipv4": _IPV4,
    "ipv6": _ipv6(),
    "hostname": _LABEL + r"(?:\." + _LABEL + "){0,2}",
    "uri": "[A-Za-z][A-Za-z0-9+.-]*:" + _URI_CHAR + "*",
    "uri-template": _URI_TEMPLATE,
}
