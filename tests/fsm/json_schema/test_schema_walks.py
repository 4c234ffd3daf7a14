"""``ids.schema_nesting`` (one walk: the JSON nesting and whether a ``$ref`` is held) and
``check_schema_depth`` built on it give what the separate walks gave.

Reference: ``nesting.json_depth`` (depth and pointer), a plain search of every object for a
string ``$ref`` (the former ``schema_rules._has_ref``), and the former
``check_schema_depth``: ``check_ref_depth`` on every document, then ``nesting.check_depth``.
Documents: every schema of the JSON-Schema-Test-Suite, a seeded sample of MaskBench
(``../shared/corpora``) and synthetic ones past the depth limits.
"""

from __future__ import annotations

import json
import random

import pytest

from benchmarks.corpus import CORPORA
from structgen.errors import GrammarTooComplexError
from structgen.fsm.json_schema import ids
from structgen.fsm.nesting import MAX_SCHEMA_DEPTH, check_depth, json_depth

SUITE = CORPORA / "json-schema-test-suite" / "tests"
PLAIN = CORPORA / "jsonschemabench" / "plain"
PER_SUBSET = 25


def _has_ref(node) -> bool:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            if isinstance(cur.get("$ref"), str):
                return True
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return False


def _old_check(schema) -> int | str:
    """The former ``check_schema_depth``: its depth, or its error's message."""
    try:
        ids.check_ref_depth(schema)
        return check_depth(schema, MAX_SCHEMA_DEPTH, "JSON Schema")
    except GrammarTooComplexError as exc:
        return str(exc)


def _new_check(schema) -> int | str:
    try:
        return ids.check_schema_depth(schema)
    except GrammarTooComplexError as exc:
        return str(exc)


def _synthetic() -> list:
    n = MAX_SCHEMA_DEPTH + 10
    chain = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)}
    chain[f"d{n}"] = {"type": "integer"}
    deep: dict = {"type": "integer"}
    for _ in range(n):
        deep = {"type": "array", "items": deep}
    ref_deep: dict = {"$ref": "#/$defs/d0"}  # a chain reached from a $ref nested deep
    for _ in range(40):
        ref_deep = {"type": "array", "items": ref_deep}
    return [
        {"$defs": chain, "$ref": "#/$defs/d0"},
        {"$defs": chain, "items": ref_deep},
        {"$defs": chain, "$ref": "#/$defs/d0", "items": deep},  # both limits passed
        deep,
        {"$defs": {"x": deep}, "items": {"$ref": "#/$defs/x"}},
        {"enum": [{"$ref": "#/nothing"}]},  # a $ref in a value, not a subschema
        {"properties": {"$ref": {"type": "string"}}},  # a property named $ref
        True,
        [],
    ]


def _documents() -> list:
    docs = _synthetic()
    for path in sorted(SUITE.rglob("*.json")):
        for group in json.loads(path.read_text(encoding="utf-8")):
            docs.append(group["schema"])
    if PLAIN.is_dir():
        for subset in sorted(p for p in PLAIN.iterdir() if p.is_dir()):
            files = sorted(subset.glob("*.json"))
            for f in random.Random(0).sample(files, min(PER_SUBSET, len(files))):
                docs.append(json.loads(f.read_text(encoding="utf-8")))
    return docs


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/corpora not beside the checkout")
def test_schema_nesting_and_depth_checks_equal_the_separate_walks() -> None:
    docs = _documents()
    assert len(docs) > 1000
    refs = refused = 0
    for doc in docs:
        for limit in (MAX_SCHEMA_DEPTH, 2):
            depth, pointer, has_ref = ids.schema_nesting(doc, limit)
            assert (depth, pointer) == json_depth(doc, limit)
            assert has_ref == (depth > limit or _has_ref(doc))
        want = _old_check(doc)
        assert _new_check(doc) == want
        if isinstance(want, int):
            assert ids.schema_has_ref(doc) == _has_ref(doc)
            with ids.schema_depth_checked(doc):  # the block's memo
                assert ids.schema_has_ref(doc) == _has_ref(doc)
        refs += _has_ref(doc)
        refused += isinstance(want, str)
    assert refs > 100 and refused >= 4  # both paths taken
