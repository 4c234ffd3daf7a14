"""jsonschema as the reference for the fsm's JSON Schema tests."""

from __future__ import annotations

import json
from typing import Any

import jsonschema


def jsonschema_valid(schema: Any, instance: Any) -> bool:
    """``instance`` valid under ``schema`` for the draft its ``$schema`` names (default 2020-12)."""
    return jsonschema.validators.validator_for(schema)(schema).is_valid(instance)


def assert_agrees_with_jsonschema(grammar, schema: Any, good: list[str], bad: list[str]) -> None:
    """Every text of ``good`` is valid (jsonschema) and matched by ``grammar``; every text of
    ``bad`` is invalid and not matched (the cases themselves are checked first)."""
    for text in good:
        assert jsonschema_valid(schema, json.loads(text)), text
        assert grammar.matches(text), text
    for text in bad:
        assert not jsonschema_valid(schema, json.loads(text)), text
        assert not grammar.matches(text), text
