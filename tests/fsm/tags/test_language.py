"""Structural tags: the automaton's language against a plain-Python reading.

References: ``_reference.tag_reference`` (a left-to-right scan with every split tried),
with contents checked by Python's ``re`` and by ``json`` + ``jsonschema``.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from structgen.errors import (
    InvalidGrammarError,
    InvalidSchemaError,
    RegexError,
    RequestError,
    UnsupportedGrammarError,
    UnsupportedSchemaError,
)
from structgen.fsm import compile_spec
from structgen.fsm.spec import JsonSchema, StructuralTag, TagStructure
from tests.fsm._reference import jsonschema_valid
from tests.fsm.tags._reference import tag_reference

ALPHABET = "ab<>1"


def _regex_ok(pattern: str):
    return lambda s: re.fullmatch(pattern, s) is not None


CASES = [  # triggers, (begin, content regex, end) per structure
    (["<"], [("<", "1", ">")]),  # room for three regions in six characters
    (["<a"], [("<a>", "1+", ">")]),
    (["<a", "b"], [("<a>", "1*", ">"), ("bb", "1", "a")]),
    (["a"], [("ab", "(?:1|<)*", ">")]),  # a trigger inside free text and contents
    (["<"], [("<a", "1", "a"), ("<b", "[ab]", ">")]),  # two structures, one trigger
    (["aa"], [("aa", "1", "a")]),  # a self-overlapping trigger
]


FLAGS = list(itertools.product([0, 1], [0, 1]))


@pytest.mark.parametrize(
    "case,at_least_one,stop_after_first",
    [(0, *f) for f in FLAGS] + [(1, 1, 0), (2, 0, 1)] + [(i, 0, 0) for i in range(1, len(CASES))],
)
def test_language_matches_reference(case: int, at_least_one: int, stop_after_first: int) -> None:
    """Every string over ``ab<>1`` up to length 6 (0, 1 and several regions)."""
    triggers, structures = CASES[case]
    spec = StructuralTag(
        [TagStructure(b, e, regex=c) for b, c, e in structures],
        triggers,
        at_least_one=bool(at_least_one),
        stop_after_first=bool(stop_after_first),
    )
    grammar = compile_spec(spec)
    ref_structures = [(b, _regex_ok(c), e) for b, c, e in structures]
    seen = {True: 0, False: 0}
    for n in range(7):
        for chars in itertools.product(ALPHABET, repeat=n):
            s = "".join(chars)
            expected = tag_reference(
                s,
                triggers,
                ref_structures,
                at_least_one=bool(at_least_one),
                stop_after_first=bool(stop_after_first),
            )
            assert grammar.matches(s) == expected, (s, spec)
            seen[expected] += 1
    assert seen[True] and seen[False]


SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
    "required": ["name", "n"],
}


def _json_ok(schema):
    def ok(text: str) -> bool:
        if text != text.strip():
            return False
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return False
        return jsonschema_valid(schema, value)

    return ok


JSON_TEXTS = [
    "",
    "hello",
    'hi <tool_call>{"name": "x", "n": 1}</tool_call> bye',
    '<tool_call>{"name":"x","n":1}</tool_call><tool_call>{"name": "y", "n": 22}</tool_call>',
    'a<tool_call>{"name":"x","n":-1}</tool_call>',
    'a<tool_call>{"name":"x"}</tool_call>',
    "a<tool_call>",
    "a<tool_ca",
    'a<tool_call>{"name":"x","n":1}</tool_call',
    '<tool_call>{"name":"</tool_call>","n":3}</tool_call>',
    'x<tool_call>{"n":1,"name":"a"}</tool_call>y<tool_call>',
    '<tool_call> {"name":"x","n":1}</tool_call>',
]


@pytest.mark.parametrize("at_least_one", [False, True])
def test_json_regions_against_jsonschema(at_least_one: bool) -> None:
    spec = StructuralTag(
        [TagStructure("<tool_call>", "</tool_call>", schema=SCHEMA)],
        ["<tool_call>"],
        at_least_one=at_least_one,
    )
    grammar = compile_spec(spec)
    ref = [("<tool_call>", _json_ok(SCHEMA), "</tool_call>")]
    for text in JSON_TEXTS:
        expected = tag_reference(text, ["<tool_call>"], ref, at_least_one=at_least_one)
        assert grammar.matches(text) == expected, text
    assert grammar.matches(JSON_TEXTS[3]) and not grammar.matches(JSON_TEXTS[4])


def test_stop_after_first_ends_the_output() -> None:
    spec = StructuralTag(
        [TagStructure("<f>", "</f>", schema=SCHEMA)], stop_after_first=True, at_least_one=True
    )
    g = compile_spec(spec)
    assert g.matches('think <f>{"name":"a","n":0}</f>')
    assert not g.matches('<f>{"name":"a","n":0}</f> more')
    assert not g.matches("no region")


def test_errors_name_structure_and_pointer() -> None:
    bad = {"type": "object", "properties": {"x": {"type": "nope"}}}
    tag = StructuralTag(
        [TagStructure("<a>", "</a>", regex="1"), TagStructure("<b>", "</b>", schema=bad)]
    )
    with pytest.raises(InvalidSchemaError) as info:
        compile_spec(tag)
    assert info.value.pointer == "/structures/1/schema/properties/x/type"
    lookahead = JsonSchema({"type": "object", "patternProperties": {"(?=a)": {}}}, strict=True)
    with pytest.raises(UnsupportedSchemaError) as info:
        compile_spec(StructuralTag([TagStructure("<a>", "</a>", schema=lookahead)]))
    assert info.value.pointer == "/structures/0/schema/patternProperties/(?=a)"
    with pytest.raises(RegexError, match="/structures/0/regex"):
        compile_spec(StructuralTag([TagStructure("<a>", "</a>", regex="(")]))
    with pytest.raises(InvalidGrammarError, match="/structures/0.*none of the triggers"):
        compile_spec(StructuralTag([TagStructure("<a>", "</a>", regex="1")], ["<b"]))
    with pytest.raises(UnsupportedGrammarError, match="/structures/0/grammar"):
        compile_spec(StructuralTag([TagStructure("<a>", "</a>", grammar='root ::= "x"')]))
    with pytest.raises(RequestError):
        TagStructure("<a>", "</a>")
    with pytest.raises(RequestError):
        StructuralTag([])


def test_regex_content_anchors_and_flags() -> None:
    g = compile_spec(StructuralTag([TagStructure("<a>", "</a>", regex="(?i)^x+$")]))
    assert g.matches("<a>xX</a>") and not g.matches("<a>y</a>")


def test_any_text_content_stops_at_its_end() -> None:
    spec = StructuralTag.from_dict(
        {
            "type": "structural_tag",
            "format": {
                "type": "triggered_tags",
                "triggers": ["<think"],
                "tags": [
                    {
                        "type": "tag",
                        "begin": "<think>",
                        "content": {"type": "any_text"},
                        "end": "</think>",
                    }
                ],
            },
        }
    )
    g = compile_spec(spec)
    assert g.matches("a<think>x y</think>b<think></think>")
    assert g.matches("a<think>x</think>y</think>")  # a stray end is free text
    assert not g.matches("a<think>x<think>")  # the region never closes
