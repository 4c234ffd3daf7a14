"""Identifiers written with spaced digit groups ("5590 3321", "AB-12 345", "KA-JM 2281"):
``labels.identifier_candidates``, ``labels.foreign_spans`` and the evidence rule that
ends a copied identifier after its groups, against explicit tables and a brute-force
reading over tokens."""

from __future__ import annotations

import random

import pytest

from structgen.extraction.evidence import apply_evidence, stem
from structgen.extraction.labels import foreign_spans, identifier_candidates


@pytest.mark.parametrize(
    ("text", "key", "want"),
    [
        ("invoice from Telia, account no. 5590 3321. Period", "account_number", ["5590 3321"]),
        ("Policy AB-12 345 issued to", "policy_number", ["AB-12 345"]),
        ("Plate: KA-JM 2281, blue", "plate_number", ["KA-JM 2281"]),
        ("Account 123 456 789 (current)", "account_number", ["123 456 789"]),
        ("IBAN DE89 3704 0044 0532 0130 00", "iban_number", ["DE89 3704 0044 0532 0130"]),
        # groups of fewer than three digits, words, decimals and amounts are not groups
        ("Ticket T-4471 12 seats", "ticket_id", ["T-4471"]),
        ("Invoice 1 250,50 EUR", "invoice_number", ["1"]),
        ("Invoice 4471 120.5 kWh", "invoice_number", ["4471"]),
        ("Invoice BL-778 on 2026-05-01", "invoice_number", ["BL-778"]),
        # letters alone: an upper-case head with a separator, no currency, then a group
        ("Invoice from 2026 on", "invoice_number", []),
        ("Booking EUR 1200 paid", "booking_reference", []),
        ("Booking IEEE 2026 paid", "booking_reference", []),
        ("Postal code: BS1 4DJ.", "postal_code", ["BS1"]),
    ],
)
def test_identifier_candidates_with_spaced_groups(text, key, want):
    assert identifier_candidates(text, key, stem) == want


def _spaced_reference(text: str) -> list[str]:
    """Brute force over space-separated tokens: after a token "Account" (and an optional
    "no."), a token holding a digit, or an upper-case head with a "-" ("KA-JM"), then
    every following token of three or more digits alone (a trailing "." ends the
    identifier); the head only when it holds a digit or groups follow."""
    toks = text.split(" ")
    out: list[str] = []
    for i, tok in enumerate(toks):
        if tok != "Account":
            continue
        j = i + 1 + (i + 1 < len(toks) and toks[i + 1] == "no.")
        if j >= len(toks):
            continue
        head = toks[j].rstrip(".")
        digit = any(c.isdigit() for c in head)
        upper = "-" in head and all(c.isupper() or c == "-" for c in head)
        if not head or not (digit or upper):
            continue
        parts = [head]
        k = j
        while not toks[k].endswith(".") and k + 1 < len(toks):
            nxt = toks[k + 1].rstrip(".")
            if not (nxt.isdigit() and len(nxt) >= 3):
                break
            parts.append(nxt)
            k += 1
        if digit or len(parts) > 1:
            value = " ".join(parts)
            if value not in out:
                out.append(value)
    return out


def test_spaced_identifiers_match_a_brute_force_reading():
    rng = random.Random(11)
    vocab = ["Account", "no.", "5590", "3321", "3321.", "12", "AB-12", "KA-JM", "and",
             "from", "4471", "x", "Account"]  # fmt: skip
    spaced = 0
    for _ in range(1500):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))
        want = _spaced_reference(text)
        assert identifier_candidates(text, "account_number", stem) == want, text
        spaced += any(" " in w for w in want)
    assert spaced > 60


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Policy AB-12 345 issued", ["AB-12 345"]),
        ("Case #8-17 300 units", ["#8-17 300"]),
        ("Case #88-17 30 units", ["#88-17"]),
        ("Ref SUP-09. 300 units", ["SUP-09."]),
        ("Ref SUP-09 300.5 units", ["SUP-09"]),
    ],
)
def test_foreign_spans_hold_an_identifiers_groups(text, want):
    assert [text[a:b] for a, b in foreign_spans(text)] == want


SERVICE = {
    "type": "object",
    "properties": {
        "plate": {"type": ["string", "null"], "maxLength": 15},
        "account_number": {"type": "string", "maxLength": 30},
        "make": {"type": "string"},
    },
    "required": ["plate", "account_number", "make"],
}


@pytest.mark.parametrize(
    ("text", "field", "before", "after"),
    [
        ("2019 Golf, reg. KA-JM 2281. Date", "plate", "KA-JM", "KA-JM 2281"),
        # digits alone: an identifier field's label reads them ("account no."), no other
        ("Telia, account no. 5590 3321. Period", "account_number", "5590", "5590 3321"),
        ("Telia, plate 5590 3321. Period", "plate", "5590", "5590"),
        ("2019 Golf, reg. ab-12 345. Date", "plate", "ab-12", "ab-12"),
        ("Policy DE89 3704 0044 due", "plate", "DE89", "DE89 3704 0044"),
        # written on its own somewhere too: the value may be right
        ("KA-JM 2281, old plate KA-JM. Date", "plate", "KA-JM", "KA-JM"),
        # two different continuations: the model's value stays
        ("AB-12 345 and AB-12 678", "plate", "AB-12", "AB-12"),
        # too long for the field's maxLength: the model's value stays
        ("reg. KA-JM 2281 2282 2283 4444", "plate", "KA-JM", "KA-JM"),
        # no identifier head: a word, a currency code
        ("Golf 2281 km", "make", "Golf", "Golf"),
        ("AB-12 345 and AB-12 345", "plate", None, None),
    ],
)
def test_a_copied_identifier_ends_after_its_spaced_groups(text, field, before, after):
    value = {"plate": "X", "account_number": "X", "make": "X", field: before}
    new, changed = apply_evidence(SERVICE, text, value)
    assert new[field] == after
    assert (field in changed) == (after != before)
