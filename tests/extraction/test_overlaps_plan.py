"""The overlaps pass's planning without a regex per pair (structgen.extraction.overlaps):
the word-boundary containment against ``re``'s ``(?<!\\w)...(?!\\w)`` search it stands for
(every code point's ``\\w``; random strings with letters, digits, marks, case-folding
characters and punctuation), ``place_inside`` against its former regex, the date and time
values' alphabet the candidate tests lean on, and ``_candidate_jobs`` against the former
per-candidate loop (verbatim below, built of the public tests ``restates``,
``restates_number``, ``shaped`` and ``only_shaped``) on every document of the data sets
with every pair of its string fields, siblings' values copied in, dates and numbers."""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
from pathlib import Path

import jsonschema
import pytest

from structgen.extraction import overlaps as ov
from structgen.extraction.choices import CandidateJob, value_spans, with_field
from structgen.fsm.dates import dates, times

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
SETS = ["extraction", "extraction_holdout", "extract_probe", "extract_probe2",
        "extract_probe3", "extract_probe4"]  # fmt: skip


def _overlaps_ref(a, b):
    """The former ``overlaps``: a regex built for the pair."""
    a, b = ov._norm(a), ov._norm(b)
    if not a or not b:
        return False
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return re.search(r"(?<!\w)" + re.escape(short) + r"(?!\w)", long) is not None


def _place_inside_ref(a, a_value, b, b_value):
    """The former ``place_inside``: a regex built for the pair."""
    a_norm, b_norm = ov._norm(a_value), ov._norm(b_value)
    if a_norm == b_norm:
        return False
    (shorter, value, short), long = (
        ((a, a_value, a_norm), b_norm)
        if len(a_norm) < len(b_norm)
        else ((b, b_value, b_norm), a_norm)
    )
    if not shorter or not ov.names_place(shorter[-1]) or ov.shaped(value):
        return False
    return re.search(r"(?<!\w)" + re.escape(short) + r"(?!\w)\W*\w", long) is not None


def _candidate_jobs_ref(engine, checker, doc, prompt, raw, text, value, strings, numbers,
                        pairs, spans):  # fmt: skip
    """The former ``_candidate_jobs``: every test per candidate and per other value."""
    context = ov.prompt_text(engine, prompt)
    restating = {a for a, b in pairs if b in numbers}
    name_spans, all_spans = ov.text_spans(text), ov.text_spans(text, names_only=False)
    jobs = []
    for keys in dict.fromkeys(k for pair in pairs for k in pair if k in strings):
        others = [s for k, s in strings.items() if k != keys]
        siblings = [n for k, n in numbers.items() if k[:-1] == keys[:-1]]
        cands = []
        for spans_k in [all_spans] if keys in restating else [name_spans, all_spans]:
            for c in spans_k:
                if (
                    any(ov.restates(c, s) for s in others)
                    or any(ov.restates_number(c, n) for n in siblings)
                    or (ov.shaped(c) and not ov.only_shaped(strings[keys]))
                ):
                    continue
                if checker.is_valid(with_field(value, keys, c)):
                    cands.append(c)
                    if len(cands) == ov.MAX_SPAN_CANDIDATES:
                        break
            if cands:
                break
        jobs.append(CandidateJob(doc, keys, [strings[keys], *cands], context, raw, spans[keys]))
    return jobs


def test_is_word_is_re_word_on_every_code_point():
    word = re.compile(r"\w")
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        assert ov._is_word(ch) == (word.match(ch) is not None), hex(cp)


# letters, digits, other numerals, a combining mark, case-folding letters, punctuation
_ALPHABET = ["a", "b", "A", "é", "ß", "ss", "İ", "i̇", "1", "٣", "²", "_", "\u0301", " ", "  ",
             "-", ".", "'", "(", "+", "\n", "ﬁ", "Σ", "ς"]  # fmt: skip


def _random_string(rng, most):
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, most)))


def test_overlaps_against_the_regex_search():
    rng = random.Random(14)
    for _ in range(30000):
        a = _random_string(rng, 4)
        b = _random_string(rng, 9) if rng.random() < 0.5 else a + _random_string(rng, 3)
        if rng.random() < 0.3:
            b = _random_string(rng, 3) + a + _random_string(rng, 3)
        assert ov.overlaps(a, b) == _overlaps_ref(a, b), (a, b)
        assert ov.overlaps(b, a) == _overlaps_ref(b, a), (b, a)


def test_place_inside_against_the_regex_search():
    rng = random.Random(15)
    keys = [("city",), ("company",), ("trip", "from_station"), ("venue",), ()]
    for _ in range(30000):
        a = _random_string(rng, 4)
        b = _random_string(rng, 3) + a + _random_string(rng, 5)
        if rng.random() < 0.2:
            a = a + rng.choice(["1", "2026-03-07", " 2:15 pm", ""])
        ka, kb = rng.choice(keys), rng.choice(keys)
        for x in [(ka, a, kb, b), (kb, b, ka, a)]:
            assert ov.place_inside(*x) == _place_inside_ref(*x), x
    assert ov.place_inside(("location",), "Lyon", ("title",), "Lyon jazz festival")
    assert not ov.place_inside(("location",), "Lyon", ("title",), "Festival of Lyon.")


def _documents():
    for name in SETS:
        path = DATA / name / "documents.jsonl"
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                yield rec, json.loads((DATA / name / rec["schema"]).read_text())


def test_dates_and_times_write_only_date_time_characters():
    extra = ["12:345", "at 25:00", "noon", "midnight", "7 o'clock", "2026-02-30", "31.12.2026",
             "3/4/2026", "0099-01-01", "23:59:59 and 1 pm", "9999-12-31"]  # fmt: skip
    texts = [rec["text"] for rec, _ in _documents()] + extra
    seen = 0
    for text in texts:
        for v in dates(text) + times(text):
            assert ov._date_time_like(v), (text, v)
            seen += 1
    assert seen > 100
    assert not ov._date_time_like("") and not ov._date_time_like("2026-03-07 ")


def _plans(rng):
    """Per document of every set: (schema, value, text, pairs) for _candidate_jobs, with
    every pair of its string fields, a sibling's value copied in, and the number fields."""
    for rec, schema in _documents():
        value = rec["expected"]
        if not isinstance(value, dict):
            continue
        strings = ov.string_values(value)
        keys = list(strings)
        variants = [value]
        if len(keys) >= 2:  # one field holding a sibling's value, and part of it
            a, b = rng.sample(keys, 2)
            variants.append(with_field(value, a, strings[b]))
            words = strings[b].split()
            if len(words) > 1:
                variants.append(with_field(value, a, words[-1]))
        for v in variants:
            strings = ov.string_values(v)
            numbers = ov.number_values(v)
            pairs = list(itertools.combinations(list(strings), 2))
            pairs += [(a, b) for a in strings for b in numbers if a[:-1] == b[:-1]]
            if pairs:
                yield schema, v, rec["text"], strings, numbers, pairs


@pytest.mark.slow
def test_candidate_jobs_against_the_per_candidate_loop():
    rng = random.Random(23)
    checked = fields = cands = 0
    for schema, value, text, strings, numbers, pairs in _plans(rng):
        cls = jsonschema.validators.validator_for(schema)
        checker = cls(schema, format_checker=cls.FORMAT_CHECKER)
        raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        spans = value_spans(raw)
        args = (None, checker, 0, "p ", raw, text, value, strings, numbers, pairs, spans)
        got, want = ov._candidate_jobs(*args), _candidate_jobs_ref(*args)
        assert got == want, text
        checked += 1
        fields += len(want)
        cands += sum(len(j.candidates) for j in want)
    assert checked > 200 and fields > 1000 and cands > 10000, (checked, fields, cands)


def test_candidate_jobs_against_the_per_candidate_loop_on_dates_and_numbers():
    schema = {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "venue": {"type": "string"},
            "date": {"type": "string"},
            "start": {"type": "string"},
            "occupation": {"type": "string", "maxLength": 12},
            "age": {"type": "integer"},
            "rooms": {"type": "number"},
        },
    }
    checker = jsonschema.Draft202012Validator(schema)
    text = ("Spring Gala, Saturday 13 June 2026 at 7 pm, Village Hall (Oslo). Tom Berg, "
            "fifty-one, a baker; 2.5 rooms, 12:30, 2026-06-13, noon. 51 Main St.")  # fmt: skip
    values = [
        {"title": "Spring Gala", "venue": "Village Hall", "date": "2026-06-13",
         "start": "19:00", "occupation": "51", "age": 51, "rooms": 2.5},
        {"title": "13 June 2026", "venue": "Spring Gala", "date": "2026-06-13",
         "start": "12:00", "occupation": "fifty-one", "age": 51, "rooms": 2.5},
        {"title": "Oslo", "venue": "Oslo", "date": "13 June", "start": "7 pm",
         "occupation": "2.5", "age": 50, "rooms": 51},
    ]  # fmt: skip
    for value in values:
        strings, numbers = ov.string_values(value), ov.number_values(value)
        pairs = list(itertools.combinations(list(strings), 2))
        pairs += [(a, b) for a in strings for b in numbers]
        raw = json.dumps(value, separators=(",", ":"))
        args = (None, checker, 3, "p ", raw, text, value, strings, numbers, pairs, value_spans(raw))
        got, want = ov._candidate_jobs(*args), _candidate_jobs_ref(*args)
        assert got == want
        assert any(len(j.candidates) > 1 for j in want)


def test_text_spans_names_are_the_names_among_all_spans():
    for rec, _ in _documents():
        every = ov.text_spans(rec["text"], names_only=False)
        assert ov.text_spans(rec["text"]) == [c for c in every if ov._names_something(c)]
