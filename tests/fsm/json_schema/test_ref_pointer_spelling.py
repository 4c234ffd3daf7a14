"""``RefIndex``'s canonical spelling of references: a plain pointer into the root resource
(no ``%``, no ``~``) is kept as written; escaped, percent-encoded, anchored and embedded
references are spelled by ``pointer_of`` from their tokens.
"""

from __future__ import annotations

import pytest

from structgen.fsm.json_schema.ids import RefIndex

DEFS = {
    "Node": {"type": "string"},
    "a/b": {"type": "integer"},
    "c~d": {"type": "null"},
    "e f": {"type": "boolean"},
    "list": {"prefixItems": [{"type": "number"}, {"$anchor": "second", "type": "string"}]},
}


@pytest.mark.parametrize(
    ("ref", "canonical", "target"),
    [
        ("#/$defs/Node", "#/$defs/Node", DEFS["Node"]),
        ("#/$defs/list/prefixItems/0", "#/$defs/list/prefixItems/0", {"type": "number"}),
        ("#/$defs/a~1b", "#/$defs/a~1b", DEFS["a/b"]),
        ("#/$defs/c~0d", "#/$defs/c~0d", DEFS["c~d"]),
        ("#/$defs/e%20f", "#/$defs/e f", DEFS["e f"]),
        ("#/%24defs/Node", "#/$defs/Node", DEFS["Node"]),
        ("#second", "#/$defs/list/prefixItems/1", {"type": "string"}),
        ("#", "#", None),
    ],
)
def test_reference_spelling(ref: str, canonical: str, target) -> None:
    index = RefIndex({"$defs": DEFS, "properties": {"p": {"$ref": ref}}})
    assert index.root["properties"]["p"]["$ref"] == canonical
    assert index.resolve(canonical, "") == (index.root if target is None else target)


def test_a_plain_pointer_inside_an_embedded_resource_is_relative_to_it() -> None:
    schema = {
        "$defs": {
            "sub": {
                "$id": "http://example.com/sub.json",
                "properties": {"p": {"$ref": "#/$defs/Q"}},
                "$defs": {"Q": {"type": "null"}},
            }
        },
    }
    index = RefIndex(schema)
    assert index.root["$defs"]["sub"]["properties"]["p"]["$ref"] == "#/$defs/sub/$defs/Q"


def test_a_pointer_to_nothing_stays_as_written() -> None:
    index = RefIndex({"properties": {"p": {"$ref": "#/$defs/Missing"}}})
    assert index.root["properties"]["p"]["$ref"] == "#/$defs/Missing"
