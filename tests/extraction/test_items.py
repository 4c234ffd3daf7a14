"""Array items the text does not support, dropped (``structgen.extraction.items``):
repeats, and items whose parts the text writes apart; checked against a brute-force
reading of the rule over word lists."""

from __future__ import annotations

import itertools
import random

import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.items import (
    MAX_ITEM_GAP,
    _Words,
    copies_previous,
    item_supported,
    trim_items,
)

MEDS = {
    "type": "object",
    "properties": {
        "patient": {"type": "string"},
        "medications": {
            "type": "array",
            "maxItems": 6,
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "dose_mg": {"type": "number"}},
                "required": ["name", "dose_mg"],
            },
        },
    },
}
MEDS_TEXT = "Mr. Roy Dahl, 71. BP 155/88. Meds: metformin 500 mg, aspirin 75 mg. Walks daily."


def _greedy_overfilled() -> dict:
    """What greedy writes: the real items, then invented ones, then a loop to maxItems."""
    daily = {"name": "daily", "dose_mg": 155}
    return {
        "patient": "Roy Dahl",
        "medications": [
            {"name": "metformin", "dose_mg": 500},
            {"name": "aspirin", "dose_mg": 75},
            daily,
            {"name": "Walks", "dose_mg": 88},
            daily,
            daily,
        ],
    }


def test_an_overfilled_array_keeps_the_texts_items():
    value, changed = trim_items(MEDS, MEDS_TEXT, _greedy_overfilled())
    assert value["medications"] == [
        {"name": "metformin", "dose_mg": 500},
        {"name": "aspirin", "dose_mg": 75},
    ]
    assert changed == ["medications"] and value["patient"] == "Roy Dahl"


def test_the_evidence_pass_trims_arrays_last():
    value, changed = apply_evidence(MEDS, MEDS_TEXT, _greedy_overfilled())
    assert len(value["medications"]) == 2 and changed == ["medications"]
    text = "No regular medication. Blood pressure, measured twice this morning: 118 over 76."
    invented = {"name": "Blood pressure", "dose_mg": 76}  # 8 words between its parts
    value, _ = apply_evidence(MEDS, text, {"medications": [invented] * 6})
    assert value["medications"] == []


def test_min_items_brings_back_the_earliest_items():
    schema = {**MEDS, "properties": {**MEDS["properties"]}}
    schema["properties"]["medications"] = {**MEDS["properties"]["medications"], "minItems": 2}
    wrong = [{"name": "daily", "dose_mg": 155}, {"name": "Walks", "dose_mg": 500}]
    value, _ = trim_items(schema, MEDS_TEXT, {"medications": wrong + wrong})
    assert value["medications"] == wrong  # unsupported, but the schema wants two
    schema["properties"]["medications"]["minItems"] = 3  # only two distinct items exist
    before = {"medications": wrong + wrong}
    assert trim_items(schema, MEDS_TEXT, before) == (before, [])  # would break the schema


def test_repeats_end_the_array_and_scalar_items_are_kept():
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}}
    value, _ = trim_items(schema, "red, blue", {"tags": ["red", "blue", "red", "green"]})
    assert value == {"tags": ["red", "blue"]}  # one anchor per item: only the repeat rule
    assert trim_items(schema, "1 true", {"tags": [1, True, "1"]})[0] == {"tags": [1, True, "1"]}


def test_values_are_whole_words_and_dates_in_any_notation():
    text = (
        "Flight LH 401 Frankfurt FRA to JFK, 9 Oct 2026, 13:55. "
        "Return trip booked apart for the 20/07/2026."
    )
    words = _Words(text)
    assert words.occurrences("fra") == words.occurrences("FRA") and len(words.occurrences("FRA"))
    assert [t[:2] for t in words.occurrences("fra")] == [(4, 4)]  # not inside "Frankfurt"
    seg = {"flight": "LH 401", "from": "FRA", "to": "JFK", "date": "2026-10-09", "at": "13:55"}
    assert item_supported(seg, words)
    assert not item_supported({**seg, "date": "2026-07-20"}, words)  # the later sentence
    assert not item_supported({**seg, "to": "FRA"}, words)  # one span, two values


def _reference(item_words: list[list[str]], text_words: list[str], max_gap: int) -> bool:
    """The rule read off word lists: every anchor placed where the text has its words,
    no two places sharing a word, neighbours at most ``max_gap`` words apart."""
    places = []
    for anchor in item_words:
        n = len(anchor)
        at = [
            (i, i + n - 1)
            for i in range(len(text_words) - n + 1)
            if text_words[i : i + n] == anchor
        ]
        if at:
            places.append(at)
    if len(places) < 2:
        return True
    for choice in itertools.product(*places):
        spans = sorted(choice)
        if any(b[0] <= a[1] for a, b in zip(spans, spans[1:])):
            continue
        if all(b[0] - a[1] - 1 <= max_gap for a, b in zip(spans, spans[1:])):
            return True
    return False


@pytest.mark.parametrize("seed", range(4))
def test_item_supported_matches_a_brute_force_reading(seed):
    rng = random.Random(seed)
    vocab = ["kiwi", "plum", "fig", "Fig", "pear", "7", "12", "and", "x"]
    for _ in range(150):
        text_words = [rng.choice(vocab) for _ in range(rng.randint(3, 16))]
        if any(a.isdigit() and b.isdigit() for a, b in zip(text_words, text_words[1:])):
            continue  # "12 7" is one numeral with two readings (fsm.numerals), not two
        text = " ".join(text_words)
        item, item_words = {}, []
        for k in range(rng.randint(1, 4)):
            if rng.random() < 0.3:
                num = rng.choice([7, 12, 30])
                item[f"n{k}"] = num
                item_words.append([str(num)])
            else:
                size = rng.randint(1, 2)
                start = rng.randrange(len(text_words))
                words = text_words[start : start + size]
                if rng.random() < 0.3:
                    words = [rng.choice(vocab) for _ in range(size)]
                item[f"s{k}"] = " ".join(words)
                item_words.append([w.casefold() for w in words])
        folded = [w.casefold() for w in text_words]
        for gap in (0, 2, MAX_ITEM_GAP):
            got = item_supported(item, _Words(text), gap)
            assert got == _reference(item_words, folded, gap), (text, item, gap)


def test_an_item_copying_a_value_the_text_writes_once_is_dropped():
    text = "Meds: lisinopril 10 mg daily. Non-smoker. Review in 4 weeks."
    value = {
        "medications": [{"name": "lisinopril", "dose_mg": 10}, {"name": "Review", "dose_mg": 10}]
    }
    out, changed = trim_items(MEDS, text, value)
    assert out["medications"] == [{"name": "lisinopril", "dose_mg": 10}]
    assert changed == ["medications"]
    words = _Words(text)
    assert copies_previous({"name": "Review", "dose_mg": 10}, {"name": "x", "dose_mg": 10}, words)
    assert not copies_previous(
        {"name": "Review", "dose_mg": 4}, {"name": "x", "dose_mg": 10}, words
    )
    # an earlier item claims the mention even when it is not the one just before:
    # "Review"/10 (4 words from "10", so written together) repeats lisinopril's 10
    loop = [
        {"name": "lisinopril", "dose_mg": 10},
        {"name": "daily", "dose_mg": 142},
        {"name": "smoker", "dose_mg": 142},
        {"name": "Review", "dose_mg": 10},
    ]
    note = "BP 142/91. Current medication: lisinopril 10 mg daily. Non-smoker. Review in 4 weeks."
    out, _ = trim_items(MEDS, note, {"medications": loop})
    assert out["medications"] == [{"name": "lisinopril", "dose_mg": 10}]
    # the same value written twice belongs to two records: both items are kept
    twice = "Meds: metformin 500 mg, aspirin 75 mg, then 500 mg of vitamin C."
    rows = [{"name": "metformin", "dose_mg": 500}, {"name": "vitamin C", "dose_mg": 500}]
    assert trim_items(MEDS, twice, {"medications": rows}) == ({"medications": rows}, [])
    assert not copies_previous({"a": True}, {"a": True}, _Words("true true"))


def test_items_rule_keeps_every_expected_dev_set_value():
    """Checked against the truth: no expected object of the dev set loses an item."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import extraction_scoring as scoring

    for doc in scoring.load_documents():
        assert trim_items(doc.schema, doc.text, doc.expected) == (doc.expected, []), doc.id


TAGS_TEXT = "Tags: red, blue. Sizes: small."


def _nullable_tags(low: int) -> dict:
    """Two string arrays: ``tags`` nullable with ``minItems`` in its array branch."""
    return {
        "type": "object",
        "properties": {
            "tags": {
                "anyOf": [
                    {"type": "array", "items": {"type": "string"}, "minItems": low},
                    {"type": "null"},
                ]
            },
            "sizes": {"type": "array", "items": {"type": "string"}},
        },
    }


def test_min_items_of_an_array_branch_is_kept():
    schema = _nullable_tags(2)
    before = {"tags": ["red", "red", "red"], "sizes": ["small", "small"]}
    value, changed = trim_items(schema, TAGS_TEXT, before)
    # tags has one distinct item, below its minItems: it stays; sizes loses its repeat
    assert value == {"tags": ["red", "red", "red"], "sizes": ["small"]}
    assert changed == ["sizes"]
    schema = _nullable_tags(1)
    value, changed = trim_items(schema, TAGS_TEXT, before)
    assert value == {"tags": ["red"], "sizes": ["small"]} and changed == ["tags", "sizes"]


@pytest.mark.parametrize("low", [0, 1, 2, 3, 4])
def test_trimmed_arrays_never_drop_below_min_items(low):
    import jsonschema

    schema = {
        "type": "object",
        "properties": {
            "m": {"$ref": "#/$defs/meds"},
            "n": {"type": ["array", "null"], "items": {"type": "string"}, "minItems": low},
        },
        "$defs": {"meds": {**MEDS["properties"]["medications"], "minItems": low}},
    }
    rng = random.Random(low)
    pool = _greedy_overfilled()["medications"]
    for _ in range(40):
        m = [rng.choice(pool) for _ in range(rng.randint(max(low, 1), 6))]
        n = [rng.choice(["Walks", "daily", "Dahl", "green"]) for _ in range(max(low, 1) + 1)]
        before = {"m": m, "n": n}
        value, changed = trim_items(schema, MEDS_TEXT, before)
        assert jsonschema.Draft202012Validator(schema).is_valid(value)
        for key in ("m", "n"):
            assert len(value[key]) >= min(low, len(before[key]))
            assert (key in changed) == (value[key] != before[key])
            assert all(item in before[key] for item in value[key])
        # where the items before the first repeat reach minItems, the kept ones are
        # among them, in the order written; else every item stays
        for key in ("m", "n"):
            items = before[key]
            first = next((k for k in range(len(items)) if items[k] in items[:k]), len(items))
            idx = [items.index(item) for item in value[key]]
            if first >= low:
                assert idx == sorted(set(idx)) and all(k < first for k in idx)
            else:
                assert value[key] == items
