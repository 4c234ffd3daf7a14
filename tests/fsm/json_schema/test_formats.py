"""The URI/IRI, JSON pointer and IDN host name formats: the JSON-Schema-Test-Suite's format
cases and RFC examples (every invalid string rejected; every valid one accepted unless it
falls outside the documented conservative subset), strings drawn from each format's
regex checked by a reference (``jsonschema``'s FormatChecker where it checks the format, a
parser written from the RFC grammar where it does not), and the formats no automaton
decides refused under ``strict``."""

from __future__ import annotations

import functools
import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.corpus import CORPORA
from structgen.errors import UnsupportedSchemaError
from structgen.fsm import compile_json_schema
from structgen.fsm.json_schema.formats import FORMATS

from .._reference import assert_agrees_with_jsonschema

FORMAT_SUITE = CORPORA / "json-schema-test-suite" / "tests" / "draft2020-12" / "optional" / "format"
NEW = [
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "json-pointer",
    "relative-json-pointer",
    "idn-hostname",
    "hostname",
]
_IDN_CHARS = re.compile("[-.A-Za-z0-9\u00df-\u00f6\u00f8-\u00ff\uac00-\ud7a3]*")


def _outside_subset(fmt: str, value: str) -> bool:
    """Valid strings the conservative regexes do not generate (see ``formats``)."""
    if "pointer" in fmt:
        return bool(re.search(r'["\\\x00-\x1f]', value))
    if "hostname" in fmt:
        return "xn--" in value.lower() or not _IDN_CHARS.fullmatch(value) or value.count(".") > 2
    return False


@functools.lru_cache(maxsize=None)
def _grammar(fmt: str):
    return compile_json_schema({"type": "string", "format": fmt})


def _matches(grammar, value: str) -> bool:
    return grammar.matches(json.dumps(value, ensure_ascii=False))


@pytest.mark.skipif(
    not FORMAT_SUITE.is_dir(), reason="JSON-Schema-Test-Suite not beside the checkout"
)
@pytest.mark.parametrize("fmt", NEW)
def test_format_suite_cases(fmt) -> None:
    num_valid = 0
    for group in json.loads((FORMAT_SUITE / f"{fmt}.json").read_text(encoding="utf-8")):
        grammar = compile_json_schema(group["schema"])  # untyped: non-strings pass too
        for case in group["tests"]:
            value, valid = case["data"], case["valid"]
            ok = grammar.matches(json.dumps(value, ensure_ascii=False))
            if not valid:
                assert not ok, (fmt, value, case["description"])
            elif not (isinstance(value, str) and _outside_subset(fmt, value)):
                assert ok, (fmt, value, case["description"])
                num_valid += isinstance(value, str)
    assert num_valid >= 3


URI_VALID = [  # RFC 3986 section 1.1.2 and edge cases of its grammar
    "ftp://ftp.is.co.za/rfc/rfc1808.txt",
    "http://www.ietf.org/rfc/rfc2396.txt",
    "ldap://[2001:db8::7]/c=GB?objectClass?one",
    "mailto:John.Doe@example.com",
    "news:comp.infosystems.www.servers.unix",
    "tel:+1-816-555-1212",
    "telnet://192.0.2.16:80/",
    "urn:oasis:names:specification:docbook:dtd:xml:4.1.2",
    "http://user:pw@host:/p%20q?a=b/c?d#f/g?",
    "s:",
    "s://",
    "s:/a//b",
    "http://[v7.a:b]/",
]
URI_INVALID = [
    "",
    "http://a b",
    "http://x/#a#b",
    "http://[1::2::3]/",
    "a:b[c",
    ":foo",
    "1a:b",
    "http://%zz",
    "http://a/%2",
    "http://a:b@c@d/",
    "http://a:8x/",
    "ht tp://a",
    "s:a\u00e9",
]
REFERENCE_VALID = ["", "#", "?", "../a/b", "g;x?y#s", "//g", "./this:that", "a/b:c", "%41"]
REFERENCE_INVALID = ["1:b", "a b", "//a/b c", "#a#b", "[::1]", "%x1", "a\\b"]


def test_uri_and_uri_reference_rfc_examples() -> None:
    uri, ref = _grammar("uri"), _grammar("uri-reference")
    for value in URI_VALID:
        assert _matches(uri, value) and _matches(ref, value), value
    for value in URI_INVALID:
        assert not _matches(uri, value), value
    for value in REFERENCE_VALID:
        assert _matches(ref, value) and not _matches(uri, value), value
    for value in REFERENCE_INVALID + [v for v in URI_INVALID if v]:
        assert not _matches(ref, value), value


def test_iri_allows_ucschar_and_iprivate_in_the_query_only() -> None:
    iri, ref = _grammar("iri"), _grammar("iri-reference")
    for value in ["http://\u00e9x.com/\u00e9?\u00e9#\u00e9", "urn:\U00010348", "x:?\ue000"]:
        assert _matches(iri, value) and _matches(ref, value), value
    for value in ["x:/\ue000", "x:#\ue000", "x:\ufdd0", "http://a/\u00a0 ", "x:\u0085"]:
        assert not _matches(iri, value) and not _matches(ref, value), value
    assert _matches(ref, "\u00e9/a") and not _matches(iri, "\u00e9/a")
    uri = _grammar("uri")
    assert not _matches(uri, "http://\u00e9x.com/")


def _is_json_pointer(value: str) -> bool:
    """RFC 6901 section 3: ``*( "/" reference-token )``, ``~`` only in ``~0``/``~1``."""
    if value and not value.startswith("/"):
        return False
    return all(re.fullmatch("(?:[^~]|~[01])*", token) for token in value.split("/")[1:])


def _is_relative_json_pointer(value: str) -> bool:
    """draft-bhutton-relative-json-pointer-00: non-negative-integer [index-manipulation]
    ( "#" / json-pointer )."""
    m = re.fullmatch("(0|[1-9][0-9]*)([+-][1-9][0-9]*)?(.*)", value, re.DOTALL)
    return bool(m) and (m.group(3) == "#" or _is_json_pointer(m.group(3)))


IDN_CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
REFERENCES = {
    "json-pointer": _is_json_pointer,
    "relative-json-pointer": _is_relative_json_pointer,
    "idn-hostname": lambda value: IDN_CHECKER.conforms(value, "idn-hostname"),
}


@pytest.mark.parametrize("fmt", sorted(REFERENCES))
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_format_regex_is_sound(fmt, data) -> None:
    """Every string the format's regex matches is valid under the reference."""
    value = data.draw(st.from_regex(FORMATS[fmt], fullmatch=True))
    assert REFERENCES[fmt](value), value
    assert _matches(_grammar(fmt), value)


def test_format_references_agree_with_hand_cases() -> None:
    """The references of the soundness test can fail."""
    assert _is_json_pointer("/a~0b/~1") and not _is_json_pointer("/a~2")
    assert not _is_json_pointer("a") and _is_json_pointer("")
    assert _is_relative_json_pointer("0#") and _is_relative_json_pointer("2+1/a")
    assert not _is_relative_json_pointer("01/a") and not _is_relative_json_pointer("-1")
    assert REFERENCES["idn-hostname"]("\uc2e4\ub840.com")
    assert not REFERENCES["idn-hostname"]("ab--c") and not REFERENCES["idn-hostname"]("-a")


@pytest.mark.parametrize(
    "label",
    ["\u00df\ud7a3" * 4, "\ud7a3\u00df" * 4, "a\ud7a3b\u00dfc\uac00d\u00ff", "\uac00" * 8],
)
def test_idn_labels_at_the_length_limit_encode(label) -> None:
    """The longest non-ASCII labels the regex allows (far-apart code points: the longest
    punycode) still encode to an A-label of at most 63 octets."""
    grammar = _grammar("idn-hostname")
    assert _matches(grammar, label) and IDN_CHECKER.conforms(label, "idn-hostname")
    assert not _matches(grammar, label + "a")


def test_regex_format_is_refused_under_strict() -> None:
    """Valid regular expressions nest parentheses to any depth: no automaton decides them."""
    schema = {"type": "object", "properties": {"re": {"type": "string", "format": "regex"}}}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == "format" and info.value.pointer == "/properties/re"
    assert "'regex'" in str(info.value)
    grammar = compile_json_schema(schema, strict=False)
    assert grammar.matches('{"re":"(a"}')  # not checked: any string
    assert any("'regex'" in w and "/properties/re" in w for w in grammar.warnings)


DRAFT3 = "http://json-schema.org/draft-03/schema#"


def test_a_format_of_the_documents_draft_that_is_not_enforced_is_refused() -> None:
    schema = {"$schema": DRAFT3, "type": "string", "format": "color"}
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_json_schema(schema)
    assert info.value.keyword == "format" and "'color'" in str(info.value)
    assert compile_json_schema(schema, strict=False).warnings
    idn = {"$schema": "http://json-schema.org/draft-07/schema#", "format": "idn-email"}
    with pytest.raises(UnsupportedSchemaError):
        compile_json_schema({**idn, "type": "string"})


@pytest.mark.parametrize(
    ("draft", "fmt"),
    [
        (None, "phone"),  # draft 3's formats are defined by no later draft
        (None, "color"),
        ("https://json-schema.org/draft/2020-12/schema", "utc-millisec"),
        ("http://json-schema.org/draft-04/schema#", "idn-email"),  # defined from draft 7
        ("http://json-schema.org/draft-06/schema#", "duration"),  # from 2019-09: enforced
    ],
)
def test_a_format_of_another_draft_is_an_annotation(draft, fmt) -> None:
    # a format the document's draft does not define is unchecked (jsonschema's checker for
    # that draft accepts any string for it): any string, under strict too, with a warning,
    # unless structgen enforces the format anyway (duration)
    schema = {"type": "string", "format": fmt} | ({"$schema": draft} if draft else {})
    grammar = compile_json_schema(schema)
    if fmt == "duration":
        assert grammar.matches('"P1D"') and not grammar.matches('"x y"')
        return
    assert any(repr(fmt) in w for w in grammar.warnings)
    assert_agrees_with_jsonschema(grammar, schema, ['"x y"', '""', '"#zz"'], ["1"])


@pytest.mark.parametrize("fmt", ["url", "datetime", "partial-date", "byte", ""])
def test_a_format_no_draft_defines_is_an_annotation(fmt: str) -> None:
    # the drafts leave such a format unchecked, as jsonschema's FormatChecker does: any
    # string, under strict too, named in a warning; a pattern next to it still applies
    schema = {"type": "object", "properties": {"s": {"type": "string", "format": fmt}}}
    grammar = compile_json_schema(schema)
    assert any(repr(fmt) in w and "/properties/s" in w for w in grammar.warnings)
    assert_agrees_with_jsonschema(grammar, schema, ['{"s":"x y"}', '{"s":""}'], ['{"s":1}'])
    patterned = {"type": "string", "format": fmt, "pattern": "^a+$"}
    grammar = compile_json_schema(patterned)
    assert_agrees_with_jsonschema(grammar, patterned, ['"aa"'], ['"b"', '""'])
