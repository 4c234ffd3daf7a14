"""``format: uri-template`` (RFC 6570, levels 1-4), checked against a small hand-written
parser of the RFC's ABNF (section 2): ``jsonschema`` only asserts this format when the
optional ``uri_template`` package is installed, which it is not here."""

from __future__ import annotations

import json
import random
import string

import pytest

from structgen.fsm import compile_json_schema

_LITERAL_ASCII = set(range(0x21, 0x7F)) - {ord(c) for c in "\"'%<>\\^`{|}"}
_UCS = [(0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF), (0xE1000, 0xEFFFD)] + [
    (p << 16, (p << 16) + 0xFFFD) for p in range(1, 14)
]
_IPRIVATE = [(0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD)]
_HEX = set(string.hexdigits)


def _pct(s: str, i: int) -> bool:
    return (
        s[i] == "%"
        and i + 2 < len(s) + 0
        and len(s) > i + 2
        and s[i + 1] in _HEX
        and s[i + 2] in _HEX
    )


def _varname(name: str) -> bool:
    i, prev_dot, n = 0, True, 0
    while i < len(name):
        if name[i] == ".":
            if prev_dot:
                return False
            prev_dot = True
            i += 1
            continue
        if name[i] == "%":
            if not (
                i + 2 < len(name) + 1
                and len(name) > i + 2
                and name[i + 1] in _HEX
                and name[i + 2] in _HEX
            ):
                return False
            i += 3
        elif name[i].isascii() and (name[i].isalnum() or name[i] == "_"):
            i += 1
        else:
            return False
        prev_dot = False
        n += 1
    return n > 0 and not prev_dot


def _varspec(spec: str) -> bool:
    if spec.endswith("*"):
        return _varname(spec[:-1])
    if ":" in spec:
        name, _, length = spec.partition(":")
        return (
            _varname(name)
            and length.isdigit()
            and length.isascii()
            and 1 <= len(length) <= 4
            and length[0] != "0"
        )
    return _varname(spec)


def rfc6570_valid(s: str) -> bool:
    """True when ``s`` is a URI-Template of RFC 6570 section 2."""
    i = 0
    while i < len(s):
        c = s[i]
        if c == "{":
            end = s.find("}", i)
            if end < 0:
                return False
            body = s[i + 1 : end]
            if body[:1] and body[0] in "+#./;?&=,!@|":
                body = body[1:]
            if not all(_varspec(v) for v in body.split(",")):
                return False
            i = end + 1
        elif c == "%":
            if not _pct(s, i):
                return False
            i += 3
        elif ord(c) in _LITERAL_ASCII or any(a <= ord(c) <= b for a, b in _UCS + _IPRIVATE):
            i += 1
        else:
            return False
    return True


FIXED = [
    "http://example.com/~{username}/",
    "http://example.com/dictionary/{term:1}/{term}",
    "http://example.com/search{?q,lang}",
    "{+path:6}/here",
    "{#x,hello,y}",
    "X{.var:3}",
    "{/list*,path:4}",
    "{;keys*}",
    "?fixed=yes{&x}",
    "{=x}",
    "{var}",
    "{",
    "}",
    "{}",
    "{a..b}",
    "{.a}",
    "{a.}",
    "{a:0}",
    "{a:10000}",
    "{a:9999}",
    "{a*:3}",
    "{%2Fa}",
    "{%2}",
    "a b",
    "it's",
    "100%",
    "%zz",
    "%41",
    "é/\U000f0001",
    "\U000f0000{x}",
    'a"b',
    "a\\b",
    "a^b",
    "a|b",
    "{x|y}",
    "{a,}",
    "{,a}",
    "{ab,cd}",
    "",
    "\x7f",
    "\ud7ff",
]
_PIECES = [
    "a",
    "{",
    "}",
    "%",
    "41",
    "{x}",
    "{+y*}",
    ":",
    "3",
    ".",
    ",",
    "*",
    "é",
    "/",
    "?",
    "=",
    "'",
    " ",
    "zz",
    "%2F",
    "\U000f0002",
    "&",
    "{a:12}",
    "|",
]


def _samples() -> list[str]:
    rng = random.Random(6570)
    return FIXED + [
        "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 6))) for _ in range(1500)
    ]


def test_reference_parser_sanity() -> None:
    assert rfc6570_valid("http://example.com/search{?q,lang}")
    assert not rfc6570_valid("http://example.com/resource/{")


@pytest.mark.parametrize("whitespace", ["compact"])
def test_uri_template_matches_rfc6570(whitespace) -> None:
    grammar = compile_json_schema(
        {"type": "string", "format": "uri-template"}, whitespace=whitespace
    )
    assert not grammar.warnings
    samples = _samples()
    assert (
        sum(map(rfc6570_valid, samples)) > 200 and sum(not rfc6570_valid(s) for s in samples) > 200
    )
    for s in samples:
        assert grammar.matches(json.dumps(s, ensure_ascii=False)) == rfc6570_valid(s), s


def test_uri_template_with_length_and_mcpspec_instance() -> None:
    grammar = compile_json_schema({"type": "string", "format": "uri-template", "maxLength": 8})
    for s in ["{a}", "{abcdef}", "{abcdefg}", "x{", "12345678"]:
        assert grammar.matches(json.dumps(s)) == (rfc6570_valid(s) and len(s) <= 8), s
    # MaskBench MCPspec CompleteRequest: this invalid instance was accepted (format ignored)
    ref = {
        "type": "object",
        "properties": {
            "type": {"const": "ref/resource"},
            "uri": {"type": "string", "format": "uri-template"},
        },
        "required": ["type", "uri"],
    }
    grammar = compile_json_schema(ref)
    assert not grammar.matches('{"type":"ref/resource","uri":"http://example.com/resource/{"}')
    assert grammar.matches('{"type":"ref/resource","uri":"http://example.com/resource/{id}"}')
