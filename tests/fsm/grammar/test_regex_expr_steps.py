"""``regex_expr``'s one-step stretches (``schema_rules._STEP``) and ``RefSharing``'s walks.

A stretch of regular atoms is read in one step; these cases pin what a stretch may hold
(escapes and classes that contain metacharacters, literal braces, placeholders of
definitions that are no rule) and where it must stop (a quantifier that binds to a rule,
a group, an alternation), and that ``RefSharing`` walks each reference's target once.
"""

from __future__ import annotations

import pytest

from structgen.errors import UnsupportedSchemaError
from structgen.fsm.grammar.ir import Alt, Pattern, Ref, Repeat, Seq
from structgen.fsm.grammar.schema_rules import regex_expr
from structgen.fsm.json_schema.refs import RefSharing
from structgen.fsm.regex.definitions import PLACEHOLDER_BASE

R = chr(PLACEHOLDER_BASE + 3)  # a rule's placeholder
D = chr(PLACEHOLDER_BASE + 4)  # a plain definition's placeholder
REF = Ref("d3", 0, 0)


def expr(text: str):
    return regex_expr(text, {3: "d3"})


@pytest.mark.parametrize(
    "text",
    [
        r"\(\)\|a",  # escaped metacharacters
        r"[()|*]x",  # a class holding them
        r"[]a(]b",  # a class opening with its ']'
        r"[^](]c",
        r"\x28\u0029\U0001F600",  # escapes of fixed length
        r"\N{LEFT PARENTHESIS}",
        "{a}{",  # braces that open no quantifier
        "a{2,3}?b+c*?",  # quantifiers inside the stretch
    ],
)
def test_stretches_stay_one_pattern_before_a_rule(text: str) -> None:
    assert expr(text + R) == Seq((Pattern(text), REF))
    assert expr(R + text) == Seq((REF, Pattern(text)))


def test_a_text_that_is_one_placeholder() -> None:
    assert expr(R) == REF
    assert expr(D) == Pattern(D)


def test_a_plain_definitions_placeholder_is_regex_text() -> None:
    assert expr("a" + D + "*b" + R) == Seq((Pattern("a" + D + "*b"), REF))


@pytest.mark.parametrize(
    ("quantifier", "lo", "hi"),
    [("*", 0, None), ("+", 1, None), ("?", 0, 1), ("{2}", 2, 2), ("{2,}", 2, None)],
)
def test_a_quantifier_after_a_rule_repeats_it(quantifier: str, lo: int, hi) -> None:
    assert expr("a" + R + quantifier + "b") == Seq(
        (Pattern("a"), Repeat(REF, lo, hi), Pattern("b"))
    )
    # a lazy suffix is the same language; a second quantifier repeats the repetition
    assert expr(R + quantifier + "?") == Repeat(REF, lo, hi)
    assert expr(R + quantifier + "?*") == Repeat(Repeat(REF, lo, hi), 0, None)


def test_groups_and_alternatives_around_rules() -> None:
    inner = Seq((Pattern(","), REF))
    assert expr("x(?:a|" + R + ")y|(?:b)z") == Alt(
        (Seq((Pattern("x"), Alt((Pattern("a"), REF)), Pattern("y"))), Pattern("(?:b)z"))
    )
    assert expr("(" + R + ")(?:," + R + "){1,3}") == Seq((REF, Repeat(inner, 1, 3)))
    assert expr("(?:a|b)*c") == Pattern("(?:a|b)*c")


def test_a_rule_inside_inline_flags_or_a_named_group_is_refused() -> None:
    for opening in ("(?i:", "(?P<n>"):
        with pytest.raises(UnsupportedSchemaError):
            expr(opening + "a" + R + ")")
    assert expr("(?i:ab)" + R) == Seq((Pattern("(?i:ab)"), REF))


def test_each_targets_references_are_walked_once() -> None:
    targets = {
        "#a": {"items": {"$ref": "#a"}, "properties": {"b": {"$ref": "#b"}}},
        "#b": {"anyOf": [{"$ref": "#c"}, {"$ref": "#b"}]},
        "#c": {"not": {"$ref": "#b"}},
    }
    resolved: list[str] = []

    def resolve(ref: str, pointer: str):
        resolved.append(ref)
        return targets[ref]

    sharing = RefSharing(resolve)
    for _ in range(2):  # the converter asks once per $ref it meets
        assert sharing.is_recursive("#a") and sharing.is_recursive("#b")
        assert sharing.is_recursive("#c")
    assert sharing.group("#a") == {"#a"} and sharing.group("#c") == {"#b", "#c"}
    assert sorted(resolved) == ["#a", "#b", "#c"]


def test_placeholders_in_lists_every_placeholder_as_a_full_scan_does() -> None:
    """``_placeholders_in`` (``in`` per definition up to ``_FEW_DEFINITIONS``, else every
    occurrence listed) against a scan of every character, for grammar sizes on both sides
    of the cut and texts naming placeholders past the grammar's definitions."""
    import random

    from structgen.fsm.grammar.schema_rules import _FEW_DEFINITIONS, _placeholders_in

    rng = random.Random(0)
    for _ in range(3000):
        alphabet = [chr(PLACEHOLDER_BASE + rng.randrange(40)) for _ in range(rng.randrange(6))]
        alphabet += list("ab(|)\\\U0001f600")
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(60)))
        want = {ord(c) - PLACEHOLDER_BASE for c in text if ord(c) >= PLACEHOLDER_BASE}
        for num in (0, 1, 5, _FEW_DEFINITIONS, _FEW_DEFINITIONS + 1, 40):
            assert _placeholders_in(text, num) == want, (text, num)


def test_a_rules_placeholder_reads_as_one_shared_ref() -> None:
    """Every occurrence of one rule's placeholder is the same ``Ref`` (immutable), equal to
    a fresh one; a single-character step (``)``, ``|``, a placeholder) reads as the step
    regex would."""
    got = expr("(?:" + R + "|a" + D + ")(?:," + R + ")*")
    first = got.items[0].items[0]
    second = got.items[1].item.items[1]
    assert first == REF and first is second
    assert got == Seq((Alt((REF, Pattern("a" + D))), Repeat(Seq((Pattern(","), REF)), 0, None)))
