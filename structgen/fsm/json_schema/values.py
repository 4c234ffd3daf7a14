"""``const``/``enum`` values -> regex: the spellings of every JSON value equal to one of them.

JSON Schema compares instances by JSON equality (``jsonschema``: Python ``==`` on the
parsed values, booleans never equal to numbers): numbers by value, objects whatever
their key order, arrays item by item, strings by their characters. A value is written:

* a number: the spellings ``json.dumps`` writes for an equal ``int`` or ``float``
  (``-2`` and ``-2.0``; ``2.5``; zero also ``-0``, ``-0.0``; the float's exponent form
  where it has one, ``1e+16``, ``1e-07``), each kept only where it parses to an equal
  Python value (``9007199254740993.0`` parses to the float ...992: not equal to the int
  ...993). Other spellings of the same value (``1.00``, ``2.50``, ``25e-1``) are valid
  JSON Schema instances too but are not written: there are infinitely many, and a model
  allowed trailing zeros can emit them until ``max_tokens``. Under an integer-only
  ``type`` just the integer spelling (as ``integer_regex``: structgen writes integers
  without a fraction);
* an object of at most ``MAX_ANY_ORDER_KEYS`` keys: its members in every order (each
  set of remaining members one shared alternative), while ``ANY_ORDER_BUDGET`` such sets
  last for one keyword; a larger object only in its listed order (never another value);
* strings, booleans, null: their canonical ``json.dumps`` spelling (``ensure_ascii=False``);
* whitespace between tokens as the converter's ``ws``.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any, Callable

from ..regex.escape import escape_literal

__all__ = [
    "values_regex",
    "number_spellings",
    "json_text",
    "MAX_ANY_ORDER_KEYS",
    "ANY_ORDER_BUDGET",
]

_encode_str = json.encoder.encode_basestring  # json.dumps(str, ensure_ascii=False)'s own

MAX_ANY_ORDER_KEYS = 5
ANY_ORDER_BUDGET = 4096  # member sets (2**keys per object) one const/enum may spend


def _decimal(mag: Fraction) -> str | None:
    """Shortest plain decimal text of a positive finite decimal fraction (None otherwise)."""
    k = 0
    while (mag * 10**k).denominator != 1:
        k += 1
        if k > 1100:  # not a finite decimal (JSON numbers always are)
            return None
    digits = str((mag * 10**k).numerator).rjust(k + 1, "0")
    return digits if k == 0 else digits[:-k] + "." + digits[-k:]


def number_spellings(value: int | float, integer_only: bool = False) -> str | None:
    """Regex of the JSON number spellings equal to ``value`` (see the module docstring);
    None when no spelling is left (``integer_only`` and ``value`` is not an integer).

    A spelling without fraction or exponent parses to an ``int``, equal when ``value``
    is exactly that integer (an integral float: ``int(value)``, which may differ from
    its shortest repr, ``3.989215633769381e+16``); one with them parses to the float
    nearest its decimal value, equal when that is ``value``: always for a float
    ``value`` spelled from its shortest repr, for an ``int`` when the float holds it
    exactly.
    """
    decimal = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    exact_int = int(value) if isinstance(value, int) or value.is_integer() else None
    try:
        float_ok = isinstance(value, float) or float(value) == value
    except OverflowError:
        float_ok = False
    float_ok = float_ok and not integer_only
    if decimal == 0:
        return "-?0" + (r"(?:\.0)?" if float_ok else "")
    sign = "-" if decimal < 0 else ""
    text = _decimal(abs(decimal))
    whole = abs(decimal).denominator == 1
    parts = []
    if exact_int is not None and exact_int != decimal:  # a float whose repr rounds
        parts.append(escape_literal(str(exact_int)))
    if exact_int is not None and exact_int == decimal:
        parts.append(escape_literal(str(exact_int)) + (r"(?:\.0)?" if float_ok else ""))
    elif float_ok and text is not None:
        parts.append(escape_literal(sign + text) + (r"\.0" if whole else ""))
    if float_ok:
        spelled = json.dumps(float(value))
        if "e" in spelled:
            parts.append(escape_literal(spelled))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def json_text(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``: for a string the encoder's own function
    called directly (the same text, without building a ``JSONEncoder`` per call).

    Raises:
        TypeError: a value JSON cannot encode (as ``json.dumps``).
    """
    if type(value) is str:
        return _encode_str(value)
    return json.dumps(value, ensure_ascii=False)


class _Writer:
    def __init__(self, ws: str, share: Callable[[str], str]) -> None:
        self.ws = ws
        self.sep = ws + "," + ws
        self.share = share
        self.budget = ANY_ORDER_BUDGET

    def value(self, value: Any, integer_only: bool = False) -> str | None:
        if isinstance(value, bool) or value is None or isinstance(value, str):
            return escape_literal(json_text(value))
        if isinstance(value, (int, float)):
            return number_spellings(value, integer_only)
        ws = self.ws
        if isinstance(value, list):
            items = [self.value(v) for v in value]
            if any(i is None for i in items):
                return None
            if not items:  # one whitespace run between the brackets, not two
                return "\\[" + ws + "\\]"
            return "\\[" + ws + self.sep.join(items) + ws + "\\]"
        members = []
        for key, v in value.items():
            text = self.value(v)
            if text is None:
                return None
            members.append(
                escape_literal(json.dumps(key, ensure_ascii=False)) + ws + ":" + ws + text
            )
        if not members:  # one whitespace run between the braces, not two
            return "\\{" + ws + "\\}"
        if 1 < len(members) <= MAX_ANY_ORDER_KEYS and self.budget >= 2 ** len(members):
            self.budget -= 2 ** len(members)
            body = self._any_order(members, {})
        else:
            body = self.sep.join(members)
        return "\\{" + ws + body + ws + "\\}"

    def _any_order(self, members: list[str], memo: dict) -> str:
        """All orders of ``members``: the first one, then all orders of the others."""
        key = tuple(members)
        if key not in memo:
            if len(members) == 1:
                memo[key] = members[0]
            else:
                alts = [
                    m + self.sep + self._any_order(members[:i] + members[i + 1 :], memo)
                    for i, m in enumerate(members)
                ]
                memo[key] = self.share("(?:" + "|".join(alts) + ")")
        return memo[key]


def values_regex(
    values: list[Any],
    ws: str,
    integer_only: bool = False,
    share: Callable[[str], str] = lambda text: text,
) -> list[str]:
    """One regex per value (in order; duplicates and values with no spelling left out).

    Args:
        values: JSON values (``const`` as a one-element list, or ``enum``).
        ws: the whitespace regex between tokens (``""`` for compact).
        integer_only: the schema's ``type`` admits integers but not numbers.
        share: ``share(text) -> text or placeholder`` for the any-order alternatives
            (the converter's shared definitions; identity by default).
    """
    writer = _Writer(ws, share)
    out = [writer.value(v, integer_only) for v in values]
    return list(dict.fromkeys(r for r in out if r is not None))
