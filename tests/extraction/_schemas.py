"""Schema builders the evidence rules' tests share."""

from __future__ import annotations


def strict_object(**props) -> dict:
    """An object schema of ``props`` (name -> subschema), every property required and no
    other key allowed: the shape extraction schemas take in the evidence tests."""
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }
