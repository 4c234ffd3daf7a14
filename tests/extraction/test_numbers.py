"""Copied numbers chosen as whole numerals by score (structgen.extraction.numbers): the
number fields found in a schema, the candidates (against ``numerals``), the numeral
chosen against a stand-in model whose preferred value is known (the expected value of a
small text), and on the tiny random Llama against the summed log-probabilities of every
candidate computed from full prompt log-probs (no shared-prefix start)."""

from __future__ import annotations

import json

from structgen.extraction.numbers import choose_numbers, number_fields, numeral_candidates
from structgen.fsm.numerals import json_numeral, numerals
from tests.extraction.test_choices import PreferringEngine, _mean_from_full_logprobs

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "visit": {
            "type": "object",
            "properties": {"weeks": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        },
        "price": {"type": ["number", "null"]},
        "level": {"enum": [1, 2, 3]},
        "doses": {"type": "array", "items": {"type": "integer"}},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
TEXT = "Robert Klein, 58 years old, seen 2026-02-11; back in 4 weeks. Fee 1,250.50."


def test_number_fields():
    assert number_fields(SCHEMA) == [("age",), ("visit", "weeks"), ("price",)]


def test_candidates_are_the_texts_numerals_as_json_values():
    want = list(dict.fromkeys(json_numeral(v) for v in numerals(TEXT)))
    assert [json.dumps(c) for c in numeral_candidates(TEXT)] == want
    assert numeral_candidates(TEXT)[:2] == [58, 2026]


def test_the_whole_numeral_replaces_greedys_first_digit():
    raw = '{"name":"Robert Klein","age":2,"visit":{"weeks":4},"price":1250.5}'
    engine = PreferringEngine({"age": 58})
    (out,) = choose_numbers(engine, SCHEMA, ["p "], [raw], [TEXT], [("age", "visit.weeks")])
    assert json.loads(out) == {**json.loads(raw), "age": 58}
    # age: numerals within 0..120 (58, 4: the date's month and day are not numerals) and
    # greedy's own 2; weeks: every integer numeral; price is not copied, so not scored
    ints = [c for c in numeral_candidates(TEXT) if isinstance(c, int)]
    assert ints == [58, 2026, 4]
    assert engine.requests == len([c for c in ints if 0 <= c <= 120]) + 1 + len(ints)


def test_uncopied_null_unparsable_and_unchanged_outputs_are_left_alone():
    raw = '{"name":"R","age":58,"visit":{"weeks":null}}'
    engine = PreferringEngine({"age": 58})
    got = choose_numbers(engine, SCHEMA, ["p", "p", "p"], [raw, '{"age":', ""], [TEXT] * 3,
                         [("age", "visit.weeks")] * 3)  # fmt: skip
    assert got == [raw, '{"age":', ""]  # 58 kept (greedy's value is the best), null kept
    engine = PreferringEngine({"age": 58})
    (out,) = choose_numbers(engine, SCHEMA, ["p"], ['{"name":"R","age":2}'], [TEXT], [()])
    assert out == '{"name":"R","age":2}' and engine.requests == 0


def _sum_from_full_logprobs(engine, prefix, value, tail):
    """Reference: summed log-prob of the tokens after ``prefix``'s (the mean times
    their count, from a request that asks for every prompt log-prob)."""
    tok = engine.tokenizer
    base = tok.encode(prefix, add_special_tokens=False)
    full = tok.encode(prefix + json.dumps(value) + tail, add_special_tokens=False)
    first = 0
    while first < min(len(base), len(full)) and base[first] == full[first]:
        first += 1
    first = max(1, min(first, len(full) - 1))
    return _mean_from_full_logprobs(engine, prefix, value, tail) * (len(full) - first)


def test_on_the_tiny_model_the_choice_is_the_best_summed_logprob(tiny_engine):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    text = "It costs 12 or 7 or 305."
    prompt = "Text: " + text + " JSON:"
    (out,) = choose_numbers(tiny_engine, schema, [prompt], ['{"n":7}'], [text], [("n",)])
    scores = {
        c: _sum_from_full_logprobs(tiny_engine, prompt + '{"n":', c, "}") for c in (12, 7, 305)
    }
    assert json.loads(out)["n"] == max(scores, key=scores.get)


def test_engine_extract_passes_score_numbers_through(tiny_engine, monkeypatch):
    import structgen.extraction as extraction

    seen = {}
    monkeypatch.setattr(extraction, "extract", lambda e, s, t, **kw: seen.update(kw))
    tiny_engine.extract({"type": "object"}, "t", score_numbers=False)
    assert seen["score_numbers"] is False
