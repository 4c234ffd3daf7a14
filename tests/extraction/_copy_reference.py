"""Shared by the copy-constraint wiring tests: a text, a schema, and the span rule written
out (a brute-force reference independent of ``fsm.copy``)."""

from __future__ import annotations

TEXT = 'Ann Lee, 37, "Bo" Park 12'
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "ok"],
}


def spans(text: str) -> set[str]:
    """Every substring of ``text`` that starts and ends at a unit boundary (not inside a
    run of letters and digits) and has no whitespace at either end."""

    def boundary(k: int) -> bool:
        return k in (0, len(text)) or not (text[k - 1].isalnum() and text[k].isalnum())

    return {
        text[i:j]
        for i in range(len(text))
        for j in range(i + 1, len(text) + 1)
        if boundary(i) and boundary(j) and not text[i].isspace() and not text[j - 1].isspace()
    }
