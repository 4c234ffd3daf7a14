"""``CopyJsonSchema``'s per-process caches (copied pointers, lowerings): each is bounded
alone, so ``copied_fields`` must not depend on the other cache holding its key. Reference:
a conversion with no cache (``CopyJsonSchema._convert``)."""

from __future__ import annotations

from structgen.fsm.json_schema import copy as schema_copy
from structgen.fsm.json_schema.copy import CopyJsonSchema


def _spec(text: str) -> CopyJsonSchema:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    return CopyJsonSchema(schema, copy_from=(text,))


def test_copied_fields_when_the_plan_is_dropped_and_the_lowering_kept(monkeypatch) -> None:
    monkeypatch.setattr(schema_copy._PLANS, "max_entries", 1)
    schema_copy._PLANS.clear()
    schema_copy._LOWERED.clear()
    a, b = _spec("Ann is 30"), _spec("Bob is 41")
    lowered, want = a._convert(None)  # no cache
    assert want == ("/properties/name", "/properties/age")
    assert a.lower() == lowered
    b.lower()  # b's plan drops a's; a's lowering is still kept
    assert a.cache_key() in schema_copy._LOWERED and a.cache_key() not in schema_copy._PLANS
    assert a.copied_fields() == want
    assert a.lower() == lowered and b.copied_fields() == b._convert(None)[1]


def test_lowerings_are_least_recently_used(monkeypatch) -> None:
    monkeypatch.setattr(schema_copy._LOWERED, "max_entries", 2)
    schema_copy._LOWERED.clear()
    specs = [_spec(f"Ann is {n}") for n in (30, 31, 32)]
    specs[0].lower()
    specs[1].lower()
    specs[0].lower()  # a hit: now the most recently used
    specs[2].lower()
    assert list(schema_copy._LOWERED) == [specs[0].cache_key(), specs[2].cache_key()]
