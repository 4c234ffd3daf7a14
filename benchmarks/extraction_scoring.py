"""The extraction dev set's scorer: field by field, the rules of ``data/extraction/SCORING.md``.

A document's fields are the leaves of its schema's property tree: every property of an
object, recursing into nested objects, with arrays (and objects expected to be null) as
single fields. Each field is right or wrong under the rule of its type; a document is
fully right when all its fields are. ``bench_extract.py`` and ``tests/test_extraction_scoring.py``
use it; it depends on nothing of structgen.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DATA_DIR",
    "Document",
    "FieldScore",
    "load_documents",
    "normalize_string",
    "score_document",
    "values_equal",
]

DATA_DIR = Path(__file__).resolve().parent / "data" / "extraction"

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{1,2}:\d{2}(:\d{2})?$")
_TEMPORAL_FORMATS = ("date", "date-time", "time")


@dataclass(frozen=True)
class Document:
    """One dev-set document.

    Attributes:
        id: ``"<domain>-NN"``.
        domain: the domain, also the schema's file name.
        schema: the JSON Schema (a dict).
        text: the document's text.
        expected: the expected values; a leaf may be ``{"$any": [alternative, ...]}``.
    """

    id: str
    domain: str
    schema: dict
    text: str
    expected: dict


@dataclass(frozen=True)
class FieldScore:
    """One field's verdict.

    Attributes:
        pointer: the field's JSON pointer, e.g. ``"/recipient/city"``.
        right: whether the prediction equals the expected value under the field's rule.
        expected: the expected value (alternatives as written in the data).
        predicted: the predicted value (``None`` when absent).
    """

    pointer: str
    right: bool
    expected: Any
    predicted: Any


def load_documents(data_dir: Path = DATA_DIR) -> list[Document]:
    """The dev set, in file order.

    Args:
        data_dir: the folder holding ``documents.jsonl`` and ``schemas/``.

    Returns:
        One :class:`Document` per line of ``documents.jsonl``.
    """
    schemas: dict[str, dict] = {}
    docs = []
    for line in (data_dir / "documents.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        path = row["schema"]
        if path not in schemas:
            schemas[path] = json.loads((data_dir / path).read_text(encoding="utf-8"))
        docs.append(Document(row["id"], row["domain"], schemas[path], row["text"], row["expected"]))
    return docs


def normalize_string(s: str) -> str:
    """NFC, case-folded, runs of whitespace collapsed to one space, ends stripped."""
    return " ".join(unicodedata.normalize("NFC", s).casefold().split())


def score_document(schema: dict, expected: dict, predicted: Any) -> list[FieldScore]:
    """Score one prediction field by field.

    Args:
        schema: the document's JSON Schema (local ``$ref`` to ``#/$defs`` resolved).
        expected: the expected object (every property of the schema present; ``None`` for
            a value the text does not give).
        predicted: the extracted object; anything that is not a dict (a failed extraction,
            ``None``) scores every field wrong.

    Returns:
        One :class:`FieldScore` per field, in the schema's property order.
    """
    pred = predicted if isinstance(predicted, dict) else {}
    out: list[FieldScore] = []
    _score_object(schema, schema, expected, pred, "", out)
    if not isinstance(predicted, dict):
        out = [FieldScore(f.pointer, False, f.expected, None) for f in out]
    return out


def _resolve(root: dict, sub: Any) -> dict:
    while isinstance(sub, dict) and "$ref" in sub:
        ref = sub["$ref"]
        if not ref.startswith("#/"):
            raise ValueError(f"only local $ref is supported by the scorer: {ref!r}")
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        sub = node
    return sub if isinstance(sub, dict) else {}


def _types(sub: dict) -> set[str]:
    t = sub.get("type")
    if t is None:
        return set()
    return {t} if isinstance(t, str) else set(t)


def _score_object(
    root: dict, sub: dict, expected: dict, pred: dict, ptr: str, out: list[FieldScore]
) -> None:
    for name, prop in sub.get("properties", {}).items():
        exp = expected.get(name)
        got = pred.get(name)
        p = f"{ptr}/{name}"
        ps = _resolve(root, prop)
        if "object" in _types(ps) and "properties" in ps and isinstance(exp, dict):
            if "$any" not in exp:
                _score_object(root, ps, exp, got if isinstance(got, dict) else {}, p, out)
                continue
        out.append(FieldScore(p, values_equal(root, ps, exp, got), exp, got))


def values_equal(root: dict, sub: dict, expected: Any, predicted: Any) -> bool:
    """Whether ``predicted`` equals ``expected`` under the rule of ``sub``'s type.

    Rules (SCORING.md): ``{"$any": [...]}`` is right when any alternative is; null equals
    absent (``None``); enum and const exact; booleans exact; numbers numerically equal
    (booleans are not numbers); dates and times by their parsed value; strings after
    :func:`normalize_string`; arrays as multisets, item by item under the items' rule;
    objects property by property.
    """
    sub = _resolve(root, sub)
    if isinstance(expected, dict) and "$any" in expected:
        return any(values_equal(root, sub, alt, predicted) for alt in expected["$any"])
    if expected is None or predicted is None:
        return expected is None and predicted is None
    if "enum" in sub or "const" in sub:
        return type(expected) is type(predicted) and expected == predicted
    if isinstance(expected, bool) or isinstance(predicted, bool):
        return expected is predicted
    if isinstance(expected, (int, float)):
        return isinstance(predicted, (int, float)) and math.isclose(
            expected, predicted, rel_tol=1e-9, abs_tol=1e-9
        )
    if isinstance(expected, str):
        if not isinstance(predicted, str):
            return False
        if (
            sub.get("format") in _TEMPORAL_FORMATS
            or _ISO_DATE.match(expected)
            or _CLOCK.match(expected)
        ):
            a, b = _parse_temporal(expected), _parse_temporal(predicted)
            if a is not None:
                return _same_moment(a, b)
        return normalize_string(expected) == normalize_string(predicted)
    if isinstance(expected, list):
        if not isinstance(predicted, list) or len(predicted) != len(expected):
            return False
        items = _resolve(root, sub.get("items", {}))
        left = list(predicted)
        for e in expected:
            hit = next((i for i, g in enumerate(left) if values_equal(root, items, e, g)), None)
            if hit is None:
                return False
            left.pop(hit)
        return True
    if isinstance(expected, dict):
        if not isinstance(predicted, dict):
            return False
        props = sub.get("properties", {})
        keys = set(expected) | set(predicted)
        return all(
            values_equal(root, props.get(k, {}), expected.get(k), predicted.get(k)) for k in keys
        )
    return expected == predicted


def _same_moment(a: Any, b: Any) -> bool:
    """A date equals a date-time at that day's midnight; a time equals a date-time's clock."""
    if b is None:
        return False
    if type(a) is dt.date and isinstance(b, dt.datetime):
        return b.time() == dt.time() and b.date() == a
    if isinstance(a, dt.time) and isinstance(b, dt.datetime):
        return b.time() == a
    return type(a) is type(b) and a == b


def _parse_temporal(s: str) -> dt.date | dt.time | dt.datetime | None:
    """An ISO 8601 date, time (``HH:MM[:SS]``) or date-time; else a dateutil reading."""
    s = s.strip()
    for parse in (dt.date.fromisoformat, dt.time.fromisoformat, dt.datetime.fromisoformat):
        try:
            return parse(s)
        except ValueError:
            pass
    try:
        from dateutil import parser
    except ImportError:
        return None
    try:
        return parser.parse(s)
    except (ValueError, OverflowError):
        return None
