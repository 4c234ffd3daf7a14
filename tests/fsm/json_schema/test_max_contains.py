"""``contains`` with ``minContains`` and ``maxContains``: every array of up to four values
from a small pool, serialized compactly, is matched by the grammar exactly when
``jsonschema`` finds it valid (the elements past ``maxContains`` are written from the
complement of ``contains``)."""

from __future__ import annotations

import itertools
import json

import pytest

from structgen.fsm import compile_json_schema

from .._reference import jsonschema_valid

POOL = [1, 5, "a", 2.5, None, True, [], {"k": 1}]

CASES = [
    {"contains": {"type": "integer"}, "maxContains": 2},
    {"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3},
    {"contains": {"type": "integer"}, "minContains": 0, "maxContains": 1},
    {"contains": {"type": "integer"}, "minContains": 0, "maxContains": 0},
    {"contains": {"type": "integer"}, "minContains": 3, "maxContains": 2},  # no array
    {"contains": {"type": "integer", "minimum": 3}, "maxContains": 1, "items": {"type": "integer"}},
    {"contains": {"const": "a"}, "maxContains": 1, "items": {"type": ["string", "integer"]}},
    {"contains": {"type": "array"}, "minContains": 1, "maxContains": 1},
    {"contains": {"type": "integer"}, "maxContains": 1, "items": {"type": "integer"}},
]


@pytest.mark.parametrize("keywords", CASES, ids=lambda k: json.dumps(k, separators=(",", ":")))
def test_contains_counts_agree_with_jsonschema(keywords):
    schema = {"type": "array", **keywords}
    try:
        grammar = compile_json_schema(schema)
    except Exception as exc:  # only an unsatisfiable schema may refuse, with the typed error
        assert keywords.get("maxContains", 99) < keywords.get("minContains", 1), exc
        return
    checked = 0
    for n in range(5):
        for values in itertools.product(POOL, repeat=n):
            text = json.dumps(list(values), separators=(",", ":"))
            want = jsonschema_valid(schema, list(values))
            assert grammar.matches(text) == want, (text, want)
            checked += want
    assert checked  # the schema has valid arrays, and the grammar took them
