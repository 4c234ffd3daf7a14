"""String fields holding the same span of the text (structgen.extraction.overlaps): the
overlap test against a brute-force reading (word-bounded containment over every pair of
word runs), the candidate spans against a brute-force enumeration of word runs, the
pair rule against a stand-in model whose preferred values are known, and on the tiny
random Llama the moved field's value against the mean log-probabilities of every
candidate computed from full prompt log-probs (no shared-prefix start)."""

from __future__ import annotations

import json
import random
import re

from structgen.extraction.overlaps import (
    MAX_SPAN_WORDS,
    choose_overlaps,
    overlapping_pairs,
    overlaps,
    restates,
    string_values,
    text_spans,
)
from tests.extraction.test_choices import PreferringEngine, _mean_from_full_logprobs

SCHEMA = {
    "type": "object",
    "properties": {
        "full_name": {"type": "string", "maxLength": 40},
        "company": {"type": "string", "maxLength": 40},
        "city": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["full_name", "company"],
    "additionalProperties": False,
}
TEXT = "Please add my details: Wei Zhang, now at Lantern Robotics in Shenzhen."
COPIED = ("full_name", "company", "city", "tags[]")


def _words_ref(s):
    return s.casefold().split()


def _overlaps_ref(a, b):
    """Brute force: the shorter word list equals a run of the longer's words, where a
    word's edge characters are compared as written (so 'Wei' is not inside 'Weiss')."""
    x, y = _words_ref(a), _words_ref(b)
    if not x or not y:
        return False
    if len(x) > len(y):
        x, y = y, x
    return any(y[i : i + len(x)] == x for i in range(len(y) - len(x) + 1))


def test_overlaps_against_word_runs():
    rng = random.Random(23)
    vocab = ["wei", "Zhang", "lantern", "robotics", "Shenzhen", "Weiss", "zhang"]
    for _ in range(2000):
        a = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 3)))
        b = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 4)))
        assert overlaps(a, b) == _overlaps_ref(a, b) == overlaps(b, a), (a, b)
    assert overlaps("Sofia", "Sofia. elena@x.example")
    assert not overlaps("Sofia", "Sofiana")


def test_restates_a_date_or_time_in_another_notation():
    from structgen.fsm.dates import dates, times

    for span, value in [("14 June 2026", "2026-06-14"), ("from 8 pm", "20:00"),
                        ("Saturday 13 June 2026", "2026-06-13"), ("Spring Gala", "2026-06-14"),
                        ("2026-04-25 at 19:00", "19:00"), ("room 3", "2026-03-01")]:  # fmt: skip
        want = overlaps(span, value) or value in dates(span) or value in times(span)
        assert restates(span, value) == want
    assert restates("14 June 2026", "2026-06-14") and not restates("Spring Gala", "2026-06-14")


def test_a_pair_with_a_nullable_field_is_left_to_the_evidence_pass():
    raw = '{"full_name":"Wei Zhang","company":"Lantern Robotics","city":"Wei Zhang"}'
    engine = PreferringEngine({"city": "Shenzhen"})
    (out,) = choose_overlaps(engine, SCHEMA, ["p "], [raw], [TEXT], [COPIED])
    assert out == raw and engine.requests == 0


def test_string_values_and_pairs():
    value = {"full_name": "Wei Zhang", "company": "wei  zhang", "city": None,
             "tags": ["Wei Zhang"], "n": 3, "o": {"x": "Shenzhen", "y": "Shenzhen"}}  # fmt: skip
    strings = string_values(value)
    assert strings == {("full_name",): "Wei Zhang", ("company",): "wei  zhang",
                       ("o", "x"): "Shenzhen", ("o", "y"): "Shenzhen"}  # fmt: skip
    assert overlapping_pairs(strings, set(strings)) == [
        (("full_name",), ("company",)),
        (("o", "x"), ("o", "y")),
    ]
    assert overlapping_pairs(strings, {("full_name",), ("o", "x")}) == []


def _spans_ref(text, max_words):
    """Brute force: every run of 1..max_words words not crossing a clause end, edge
    punctuation stripped, then filtered as documented."""
    words = list(re.finditer(r"\S+", text))
    out = []
    for i in range(len(words)):
        for j in range(i, min(len(words), i + max_words)):
            inner = words[i:j]
            if any(w.group()[-1] in ".,;:!?)]}" for w in inner):
                break
            if any("\n" in text[inner_w.end() : words[k + 1].start()]
                   for k, inner_w in enumerate(words[i:j], start=i)):  # fmt: skip
                break
            span = (
                text[words[i].start() : words[j].end()]
                .lstrip("([{\"'“‘«")
                .rstrip(".,;:!?)]}\"'”’»")
            )
            parts = span.split()
            edge = {"a", "an", "the", "at", "by", "for", "from", "in", "on", "of", "to",
                    "with", "and", "or", "is", "are", "was", "as", "via", "per"}  # fmt: skip
            if (
                parts
                and parts[0] not in edge
                and parts[-1] not in edge
                and any(c.isupper() or c.isdigit() for c in span)
            ):
                if span not in out:
                    out.append(span)
    return out


def test_text_spans_against_brute_force():
    texts = [TEXT, "Dr. Elena Petrova, Head of Research at Quantix Labs, Sofia.\n+359 2 555",
             '(Room 3) "Blue Door" Bar; the 30th party! ok', ""]  # fmt: skip
    for text in texts:
        for n in (1, 3, MAX_SPAN_WORDS):
            got = text_spans(text, n)
            assert got == _spans_ref(text, n), text
            assert all(s in text for s in got)
    assert "Lantern Robotics" in text_spans(TEXT) and "at Lantern" not in text_spans(TEXT)


def test_the_field_the_model_prefers_least_moves():
    raw = '{"full_name":"Wei Zhang","company":"Wei Zhang","city":"Shenzhen","tags":[]}'
    engine = PreferringEngine({"full_name": "Wei Zhang", "company": "Lantern Robotics"})
    (out,) = choose_overlaps(engine, SCHEMA, ["p "], [raw], [TEXT], [COPIED])
    assert json.loads(out) == {**json.loads(raw), "company": "Lantern Robotics"}
    # the other way round: the model prefers the span as the company
    engine = PreferringEngine({"full_name": "Lantern Robotics", "company": "Wei Zhang"})
    (out,) = choose_overlaps(engine, SCHEMA, ["p "], [raw], [TEXT], [COPIED])
    assert json.loads(out)["company"] == "Wei Zhang"
    assert json.loads(out)["full_name"] == "Lantern Robotics"


def test_no_pair_uncopied_unparsable_outputs_are_left_alone():
    raw = '{"full_name":"Wei Zhang","company":"Lantern Robotics","city":null,"tags":["Wei Zhang"]}'
    same = '{"full_name":"Wei Zhang","company":"Wei Zhang"}'
    engine = PreferringEngine({"company": "Lantern Robotics"})
    got = choose_overlaps(engine, SCHEMA, ["p"] * 4, [raw, same, '{"a":', ""], [TEXT] * 4,
                          [COPIED, ("full_name",), COPIED, COPIED])  # fmt: skip
    assert got == [raw, same, '{"a":', ""] and engine.requests == 0


def test_candidates_overlap_no_other_field_and_keep_the_object_valid():
    raw = '{"full_name":"Wei Zhang","company":"Wei Zhang","city":"Shenzhen"}'
    engine = PreferringEngine({})
    choose_overlaps(engine, SCHEMA, ["p "], [raw], [TEXT], [COPIED])
    others = {"full_name": ["Shenzhen"], "company": ["Shenzhen"]}
    want = sum(
        1
        + len(
            [
                s
                for s in text_spans(TEXT)
                if not any(overlaps(s, o) for o in others[k] + ["Wei Zhang"]) and len(s) <= 40
            ]
        )  # fmt: skip
        for k in others
    )
    assert engine.requests == want


def test_on_the_tiny_model_the_move_follows_the_mean_logprobs(tiny_engine):
    schema = {"type": "object", "properties": {"a": {"type": "string"},
              "b": {"type": "string"}}, "required": ["a", "b"]}  # fmt: skip
    text = "Ana Lee met Bo Chen."
    prompt = "Text: " + text + " JSON:"
    raw = '{"a":"Ana Lee","b":"Ana Lee"}'
    (out,) = choose_overlaps(tiny_engine, schema, [prompt], [raw], [text], [("a", "b")])
    cands = [s for s in text_spans(text) if not overlaps(s, "Ana Lee")]
    margins = {}
    for key, prefix in (("a", prompt + '{"a":'), ("b", prompt + '{"a":"Ana Lee","b":')):
        tail = "," if key == "a" else "}"
        scores = {c: _mean_from_full_logprobs(tiny_engine, prefix, c, tail) for c in cands}
        best = max(cands, key=lambda c: (scores[c], -cands.index(c)))
        own = _mean_from_full_logprobs(tiny_engine, prefix, "Ana Lee", tail)
        margins[key] = (own - scores[best], best)
    key = min(margins, key=lambda k: margins[k][0])
    assert json.loads(out) == {**json.loads(raw), key: margins[key][1]}


def test_engine_extract_passes_score_overlaps_through(tiny_engine, monkeypatch):
    import structgen.extraction as extraction

    seen = {}
    monkeypatch.setattr(extraction, "extract", lambda e, s, t, **kw: seen.update(kw))
    tiny_engine.extract({"type": "object"}, "t", score_overlaps=True)
    assert seen["score_overlaps"] is True
