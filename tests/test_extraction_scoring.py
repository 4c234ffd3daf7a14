"""The extraction dev set's scorer (benchmarks/extraction_scoring.py) against SCORING.md's
rules, and the dev set itself: every expected value is valid against its schema, and the
set has the coverage SCORING.md claims."""

from __future__ import annotations

import sys
import unicodedata
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import extraction_scoring as sc  # noqa: E402 - the scorer is a module beside the benchmark

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "level": {"enum": ["low", "high"]},
        "n": {"type": "integer"},
        "price": {"type": ["number", "null"]},
        "ok": {"type": "boolean"},
        "day": {"type": "string", "format": "date"},
        "at": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"},
        "to": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
        },
        "agent": {"type": ["object", "null"], "properties": {"name": {"type": "string"}}},
        "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
    },
    "$defs": {
        "item": {
            "type": "object",
            "properties": {"what": {"type": "string"}, "qty": {"type": "integer"}},
        }
    },
}
EXPECTED = {
    "name": "Zoë  Dubois",
    "level": "high",
    "n": 3,
    "price": None,
    "ok": False,
    "day": "2026-03-07",
    "at": "09:30",
    "to": {"city": "Lyon", "zip": "69002"},
    "agent": None,
    "items": [{"what": "Drill", "qty": 2}, {"what": "bits", "qty": 5}],
}
POINTERS = [
    "/name", "/level", "/n", "/price", "/ok", "/day", "/at", "/to/city", "/to/zip",
    "/agent", "/items",
]  # fmt: skip


def _verdicts(pred):
    return {f.pointer: f.right for f in sc.score_document(SCHEMA, EXPECTED, pred)}


def test_fields_are_the_leaves_in_schema_order():
    fields = sc.score_document(SCHEMA, EXPECTED, EXPECTED)
    assert [f.pointer for f in fields] == POINTERS
    assert all(f.right for f in fields)


def test_each_rule_accepts_its_equivalents():
    decomposed = unicodedata.normalize("NFD", "ZOË dubois ")  # NFD, other case, spaces
    pred = {
        "name": decomposed,
        "level": "high",
        "n": 3.0,  # numeric equality
        # "price" absent: null == absent
        "ok": False,
        "day": "2026-03-07T00:00:00",  # the same day, parsed
        "at": "09:30:00",
        "to": {"city": "lyon", "zip": "69002"},
        "agent": None,
        "items": [{"what": "BITS", "qty": 5}, {"what": "drill", "qty": 2}],  # any order
    }
    assert all(_verdicts(pred).values())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "Zoe Dubois"),  # accents matter
        ("level", "High"),  # enums exact
        ("n", 4),
        ("n", "3"),  # a string is not a number
        ("price", 0),  # 0 is not null
        ("ok", 0),  # booleans exact
        ("day", "2026-07-03"),
        ("at", "21:30"),
        ("agent", {"name": "x"}),
        ("items", [{"what": "drill", "qty": 2}]),  # a missing item
        ("items", [{"what": "drill", "qty": 2}, {"what": "drill", "qty": 2}]),  # multiset
    ],
)
def test_each_rule_rejects_a_different_value(field, value):
    pred = dict(EXPECTED, **{field: value})
    verdicts = _verdicts(pred)
    assert verdicts[f"/{field}"] is False
    assert all(v for p, v in verdicts.items() if p != f"/{field}")


def test_nested_fields_are_scored_one_by_one():
    pred = dict(EXPECTED, to={"city": "Lyon", "zip": "69003"})
    v = _verdicts(pred)
    assert v["/to/city"] and not v["/to/zip"]
    pred = dict(EXPECTED, to=None)
    v = _verdicts(pred)
    assert not v["/to/city"] and not v["/to/zip"]


def test_alternatives_and_failed_extractions():
    expected = dict(EXPECTED, name={"$any": ["Zoë Dubois", "Zoë"]})
    ok = sc.score_document(SCHEMA, expected, dict(EXPECTED, name="zoë"))
    assert all(f.right for f in ok)
    bad = sc.score_document(SCHEMA, expected, dict(EXPECTED, name="Dubois"))
    assert [f.pointer for f in bad if not f.right] == ["/name"]
    failed = sc.score_document(SCHEMA, EXPECTED, None)  # an extraction that raised
    assert len(failed) == len(POINTERS) and not any(f.right for f in failed)


def test_dates_written_otherwise_are_read_by_their_value():
    assert sc.values_equal({}, {"format": "date"}, "2026-04-30", "April 30, 2026")
    assert not sc.values_equal({}, {"format": "date"}, "2026-04-30", "2026-04-29")
    assert sc.values_equal({}, {}, "14:15", "2:15 pm")


def test_the_dev_set_is_valid_and_covers_what_scoring_md_says():
    docs = sc.load_documents()
    assert len(docs) >= 60 and len({d.domain for d in docs}) >= 12
    assert len({d.id for d in docs}) == len(docs)
    long_inputs = [d for d in docs if len(d.text.split()) >= 300]
    assert len(long_inputs) >= 5
    fmt = jsonschema.FormatChecker()
    for d in docs:
        assert set(d.expected) == set(d.schema["properties"]), d.id
        inst = {
            k: _first(v)
            for k, v in d.expected.items()
            if not (v is None and k not in d.schema["required"])
        }
        jsonschema.validate(inst, d.schema, format_checker=fmt)
        assert all(f.right for f in sc.score_document(d.schema, d.expected, inst)), d.id
    per_domain = Counter(d.domain for d in docs)
    assert min(per_domain.values()) >= 5
    non_ascii = [d for d in docs if any(ord(c) > 127 for c in str(d.expected))]
    assert len(non_ascii) >= 10


@pytest.mark.parametrize(
    ("name", "least"),
    [
        ("extraction_holdout", 30),
        ("extract_probe", 30),
        ("extract_probe2", 12),
        ("extract_probe3", 12),
        ("extract_probe4", 14),
        ("extract_probe5", 16),
        ("extract_probe6", 14),
        ("extract_probe7", 12),
        ("extract_probe8", 12),
        ("extract_probe9", 12),
        ("extract_probe10", 12),
        ("extract_probe11", 12),
        ("extract_probe12", 12),
    ],
)
def test_the_held_out_sets_are_valid(name, least):
    docs = sc.load_documents(sc.DATA_DIR.parent / name)
    assert len(docs) >= least and len({d.id for d in docs}) == len(docs)
    fmt = jsonschema.FormatChecker()
    for d in docs:
        assert set(d.expected) == set(d.schema["properties"]), d.id
        inst = {
            k: _first(v)
            for k, v in d.expected.items()
            if not (v is None and k not in d.schema["required"])
        }
        jsonschema.validate(inst, d.schema, format_checker=fmt)
        assert all(f.right for f in sc.score_document(d.schema, d.expected, inst)), d.id


def _first(v):
    if isinstance(v, dict) and "$any" in v:
        return _first(v["$any"][0])
    if isinstance(v, dict):
        return {k: _first(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_first(x) for x in v]
    return v
