"""Ratchet over the official JSON-Schema-Test-Suite (draft2020-12 and draft7).

The keyword files in ``FAST`` (draft2020-12) run in the quick suite; the rest is ``slow``.

Every test group whose schema compiles (strict, ``allow_extra_properties=True`` so
that silent schemas follow the spec) must accept each valid instance and reject each
invalid one, serialized canonically (compact, ``ensure_ascii=False``, keys in schema
order: see ``benchmarks/corpus.canonical``). Groups that do not pass are listed, with the
reason, in ``tests/fsm/data/json_schema_test_suite_skips.json``; the list may only shrink:
a listed group that passes fails the test until it is removed. No group may accept
an invalid instance, listed or not, and no compile may raise anything but the typed
errors.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.corpus import CORPORA, outcome

SUITE = CORPORA / "json-schema-test-suite" / "tests"
SKIPS_FILE = Path(__file__).parent.parent / "data" / "json_schema_test_suite_skips.json"
FAST = {
    "const.json",
    "enum.json",
    "type.json",
    "minimum.json",
    "maximum.json",
    "exclusiveMinimum.json",
    "exclusiveMaximum.json",
    "multipleOf.json",
    "oneOf.json",
    "allOf.json",
    "anyOf.json",
    "prefixItems.json",
    "items.json",
    "required.json",
}
DRAFTS = {"draft2020-12": None, "draft7": "http://json-schema.org/draft-07/schema#"}


def _groups() -> list:
    if not SUITE.exists():
        return [
            pytest.param(
                None,
                None,
                None,
                marks=pytest.mark.skip(
                    reason=f"JSON-Schema-Test-Suite not found at {SUITE} "
                    "(shared/ beside the checkout)"
                ),
            )
        ]
    params = []
    for draft, uri in DRAFTS.items():
        for path in sorted((SUITE / draft).glob("*.json")):
            for group in json.loads(path.read_text()):
                schema = group["schema"]
                if uri and isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": uri, **schema}
                gid = f"{draft}/{path.name}::{group['description']}"
                fast = draft == "draft2020-12" and path.name in FAST
                marks = [] if fast else [pytest.mark.slow]
                params.append(pytest.param(gid, schema, group["tests"], id=gid, marks=marks))
    return params


@pytest.fixture(scope="module")
def skips() -> dict[str, str]:
    return json.loads(SKIPS_FILE.read_text())


@pytest.mark.parametrize(("gid", "schema", "tests"), _groups())
def test_group(gid, schema, tests, skips) -> None:
    result, _, accepted = outcome(schema, [(t["data"], t["valid"]) for t in tests])
    assert accepted == 0, f"{gid}: {result}"
    if gid in skips:
        assert result != "pass", f"{gid} passes now: remove it from {SKIPS_FILE.name}"
    else:
        assert result == "pass", f"{gid}: {result}"


def test_skip_list_names_existing_groups(skips) -> None:
    if not SUITE.exists():
        pytest.skip("JSON-Schema-Test-Suite not found")
    known = {p.values[0] for p in _groups()}
    assert not set(skips) - known, sorted(set(skips) - known)[:5]
    assert all(reason for reason in skips.values())
