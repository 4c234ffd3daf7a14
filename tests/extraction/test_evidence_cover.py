"""Number fields decided by their fullest mention, one numeral to one field
(``evidence.numbers.number_candidates`` and ``assign_numbers``)."""

from __future__ import annotations

import itertools
from decimal import Decimal

import jsonschema
import pytest

from structgen.extraction.evidence import apply_evidence
from structgen.extraction.evidence.numbers import assign_numbers, number_candidates
from structgen.extraction.evidence.text import TextWords, name_stems
from structgen.fsm.numerals import numeral_spans

NUM = {"type": "number", "minimum": 0}


def _schema(*names: str) -> dict:
    return {
        "type": "object",
        "properties": {n: NUM for n in names},
        "required": list(names),
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("text", "names", "before", "after"),
    [
        (  # two fees: each name's full mention, not the nearer bare "fee"
            "Monthly fee SEK 349; joining fee SEK 199. Minimum term: six months.",
            ("monthly_fee", "joining_fee"),
            {"monthly_fee": 199, "joining_fee": 349},
            {"monthly_fee": 349, "joining_fee": 199},
        ),
        (  # "Net pay" takes its numeral; gross (named by "Gross" only) the next one
            "Gross salary NOK 48 750,00. Tax withheld NOK 14 625,00. Net pay NOK 34 125,00.",
            ("gross_pay", "income_tax", "net_pay"),
            {"gross_pay": 2026, "income_tax": 14625, "net_pay": 34125},
            {"gross_pay": 48750, "income_tax": 14625, "net_pay": 34125},
        ),
        (
            "Gross pay $3,412.80; federal income tax $412.55; net pay $2,486.31 after tax.",
            ("gross_pay", "income_tax", "net_pay"),
            {"gross_pay": 2486.31, "income_tax": 412.55, "net_pay": 2486.31},
            {"gross_pay": 3412.8, "income_tax": 412.55, "net_pay": 2486.31},
        ),
        (  # the whole name "total value" beats each line's bare "value"
            "2 x scarf, value 35.00 EUR each; 1 x honey, value 12.50 EUR. "
            "Total declared value: 106.50 EUR.",
            ("total_value",),
            {"total_value": 35},
            {"total_value": 106.5},
        ),
    ],
)
def test_the_fullest_mention_decides_and_one_numeral_goes_to_one_field(text, names, before, after):
    schema = _schema(*names)
    value, _ = apply_evidence(schema, text, before)
    assert value == after
    jsonschema.validate(value, schema)


def test_an_equal_claim_on_one_numeral_leaves_both_fields_to_the_model():
    schema = _schema("salary_min", "salary_max")
    before = {"salary_min": 1, "salary_max": 2}
    assert apply_evidence(schema, "Salary 50,000 or 60,000.", before) == (before, [])


def test_candidates_rank_cover_then_distance():
    doc = TextWords("Monthly fee SEK 349; joining fee SEK 199.")
    spans = numeral_spans(doc.text)
    got = number_candidates(doc, spans, name_stems("monthly_fee"), NUM)
    assert [(rank, value) for rank, _, value in got] == [
        ((-2, 2, 1, 0), Decimal(349)),
        # "joining fee" covers only the money word "fee": cover 0 (session 35, h17)
        ((0, 2, 1, 0), Decimal(199)),
    ]


def _brute_force(candidates: dict) -> dict:
    """The assignment rule read literally: process ranks best first; at each rank the
    heads (best untaken numeral of each undecided field) at that rank that no other head
    shares are taken, shared ones block their numeral and decide nothing."""
    out, taken, done = {}, set(), set()
    for rank in sorted({c[0] for cs in candidates.values() for c in cs}):
        heads = {}
        for name, cs in candidates.items():
            if name in done:
                continue
            free = [c for c in cs if c[1] not in taken]
            if free and free[0][0] == rank:
                heads[name] = free[0]
        for name, head in heads.items():
            done.add(name)
            if sum(h[1] == head[1] for h in heads.values()) == 1:
                out[name] = head[2]
        taken.update(h[1] for h in heads.values())
    return out


def test_assignment_matches_a_brute_force_reading():
    ranks = [(-2, 0, 0), (-1, 0, 0), (-1, 1, 1), (-1, 2, 0)]
    for combo in itertools.product(range(3), repeat=3):
        for pick in itertools.product(ranks, repeat=3):
            candidates = {}
            for f, (n, r) in enumerate(zip(combo, pick)):
                cs = [(r, n, Decimal(n))]
                other = (n + 1) % 3
                cs.append(((r[0] + 1, r[1], r[2]), other, Decimal(other)))
                candidates[f"f{f}"] = sorted(cs, key=lambda c: (c[0], c[1]))
            assert assign_numbers(candidates) == _brute_force(candidates), candidates
