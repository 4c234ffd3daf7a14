"""Arrays of counted goods, of measurements, of keyed values and of quoted titles read
from the text's item phrases, measurement clauses, runs of keyed values and runs of
quoted spans (``counted_items``, ``measured_items``, ``pair_items``, ``quoted_items``),
each item's parts from one local region of the text.

A list of goods writes each item as one local phrase: its count, what is counted, and
its price after it ("12 x SKU-4471 tea bowl @ USD 18.40", "four LED panels at ¥12,800
each", "two Zenith phone cases and one Zenith screen protector"). A small model fills
such an item's fields from different places of the text (the description from an
invoice number, the count's numeral repeated as the price, one item for three). The rule
reads the phrases instead, for an array whose item object has exactly:

* a *count* field: an integer field whose name holds ``quantity``, ``qty`` or ``count``;
* a *description* field: the one free string field (no enum, format or pattern);
* at most one *price* field: a number field whose name holds ``price``, ``value``,
  ``cost`` or ``amount``.

An item phrase is a whole-number numeral (digits or English words, ``numeral_spans``)
outside brackets (a bracket's count is a detail of its item: "3 trays of samosas (24
pieces per tray) at £18.00") that starts a word and is not part of a code (no ``#``,
``-``, ``/``, letter or digit right before it), then an optional ``x`` / ``×``, then one
to six words up to a punctuation mark or a stop word (``at``, ``à``, ``@``, ``for``,
``each``, ``and``, ``because``, ...) with at least one letter word; its price is the
first currency-marked numeral (``labels.amount_spans``) after it, before the next phrase
and with no ``;`` or sentence end between. Where at most one word follows the count (a
container, "five bottles à 79 kr", or none, "follow-up report, 1 at $1,250.00") and a list
entry names the goods before it (one to five words, no digit, after a ``:``, ``;`` or line
start and before ", ": "rapeseed oil, five bottles"), those words are the description;
a unit of measure right after the count is no part of it ("2 kg smoked lamb sausage").
With a price field only phrases with a price are items (the field's reading is the
numeral's first reading it accepts); without one, the phrases are items when there are two
or more of them joined by a list joiner, or one whose count is some model item's count.

A list of measurements writes one per clause ("Potassium was 5.9 mmol/L, flagged high;
sodium 139 mmol/L, normal"): ``measured_items`` reads an array whose item object holds one
free string (what is measured), one number, an enum (its flag) and optionally a string
``unit``, one item per measurement clause (``measurements``), where every clause names
exactly one of the enum's options, or implies one (``implied_flags``: "below range",
"above the reference range", a value outside the clause's written reference range).

A list of keyed values writes key and value next to each other, the pairs joined by
``,`` or ``;`` ("Mathematics: A; English: B+; Physics: A*"): ``pair_items`` reads an array
whose item object holds exactly two free strings from the text's one run of at least
``MIN_PAIRS`` such pairs (``keyed_runs``); a name list ("Ines Carvalho, Mark Obi") is no run.

A list of titles writes each in quotes ("'The Left Hand of Darkness'; 'A Short History
of Nearly Everything'"): ``quoted_items`` reads an array whose item object holds one free
string from the one run of quoted spans (``quoted_runs``) that holds the model's strings.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.fields import (
    accepts_number,
    field_kind,
    free_string_schema,
    is_nullable,
)
from structgen.extraction.labels import amount_spans
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.numerals import numeral_spans

__all__ = [
    "counted_fields",
    "item_phrases",
    "counted_items",
    "measured_fields",
    "measurements",
    "implied_flags",
    "measured_items",
    "pair_fields",
    "keyed_runs",
    "pair_items",
    "quoted_runs",
    "quoted_items",
    "unit_fields",
    "measured_goods",
    "unit_items",
    "dosed_fields",
    "dosed_goods",
    "dosed_items",
]

_COUNT_WORDS = ("quantity", "qty", "count")
_PRICE_WORDS = ("price", "value", "cost", "amount")
_STOP = frozenset(
    "at for each and because from with to in on per value priced costing or by as "
    "which that who were was is are à".split()
)
_MAX_WORDS = 6
_TIMES = re.compile(r"\s*[x×]\s+|\s*×\s*", re.IGNORECASE)
_TOKEN = re.compile(r"\s*([^\s,;:.()@!?]+(?:\.[^\s,;:.()@!?]+)*)")
_JOINER = re.compile(r"\s*(?:,|;|&|and|,\s*and)\s*$", re.IGNORECASE)


def _name_words(name: str) -> list[str]:
    return [w for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]


def counted_fields(root: Any, items: Any) -> tuple[str, str, str | None] | None:
    """``(count, description, price or None)`` field names of an array's item schema
    (module docstring), or None where the item object is not of that shape.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    count = desc = price = None
    for name, prop in items["properties"].items():
        words = [w.lower() for w in _name_words(name)]
        kind, branch = field_kind(root, prop)
        if kind == "number" and any(w in _COUNT_WORDS for w in words):
            types = branch.get("type")
            types = {types} if isinstance(types, str) else set(types or ())
            if "integer" not in types or count is not None:
                return None
            count = name
        elif kind == "number" and any(w in _PRICE_WORDS for w in words):
            if price is not None:
                return None
            price = name
        elif free_string_schema(root, prop) is not None:
            if desc is not None:
                return None
            desc = name
        else:
            return None
    if count is None or desc is None:
        return None
    return count, desc, price


def item_phrases(text: str) -> list[tuple[int, int, Decimal, str, tuple[Decimal, ...] | None]]:
    """The item phrases of ``text`` (module docstring), in text order.

    Returns:
        ``(start, end, count, description, price readings or None)`` per phrase:
        ``start`` / ``end`` the character offsets of the count and of the description's
        end; the count a positive whole number.
    """
    spans = numeral_spans(text)
    amounts = amount_spans(text)
    inside = _bracketed(text)
    found: list[list[Any]] = []
    for start, end, values in spans:
        count = values[0]
        if count <= 0 or count != count.to_integral_value():
            continue
        if inside[start]:
            continue  # a detail of an item: "3 trays of samosas (24 pieces per tray)"
        if start > 0 and not (text[start - 1].isspace() or text[start - 1] in "(:"):
            continue
        if any(a <= start < b for a, b, _ in amounts):
            continue  # a price, not a count
        at = end
        times = _TIMES.match(text, at)
        if times is not None:
            at = times.end()
        elif end < len(text) and not text[end].isspace():
            continue  # "12kg", "3/4"
        words: list[str] = []
        desc_end = at
        while len(words) <= _MAX_WORDS:
            token = _TOKEN.match(text, desc_end)
            if token is None or token.group(1).lower() in _STOP:
                break
            if words and token.group(1)[0].isdigit() and not re.search(r"[^\W\d_]", token.group(1)):
                break  # the next numeral
            words.append(token.group(1))
            desc_end = token.end()
        named = _named_before(text, start) if len(words) <= 1 else None
        if named is None and (not words or len(words) > _MAX_WORDS):
            continue
        if named is None and not any(re.fullmatch(r"[^\W\d_][\w'’-]*", w) for w in words):
            continue
        desc = text[at:desc_end].strip()
        if named is not None:
            desc = named  # "rapeseed oil, five bottles à 79 kr": the goods, not "bottles"
        elif len(words) > 1 and words[0].lower() in _UNITS:
            desc = text[at:desc_end].strip()[len(words[0]) :].strip()  # "2 kg smoked ham"
        found.append([start, desc_end, count, desc, None])
    for i, phrase in enumerate(found):
        limit = found[i + 1][0] if i + 1 < len(found) else len(text)
        for a, _b, readings in amounts:
            if a < phrase[1] or a >= limit:
                continue
            between = text[phrase[1] : a]
            if ";" in between or re.search(r"[.!?](\s|$)", between):
                break
            phrase[4] = readings
            break
    return [tuple(p) for p in found]  # type: ignore[misc]


# units of measure a count may carry before the goods' name ("2 kg smoked lamb sausage")
_UNITS = frozenset("kg g mg lb lbs oz l ml cl m cm mm km".split())
_BEFORE = re.compile(r"(?:^|(?<=[:;\n]))[ \t]*([^\W\d_][^:;,\n()]*?)[ \t]*,[ \t]*$")
_MAX_BEFORE_WORDS = 5


def _named_before(text: str, start: int) -> str | None:
    """The goods named before a count, as a list entry writes them: the words between a
    ``:``, ``;`` or line start and ", " right before the count ("You ordered: free-range
    eggs, 3 trays at ..."; one to five words, no digit), else None.
    """
    line_start = max(text.rfind(c, 0, start) for c in ":;\n") + 1
    m = _BEFORE.search(text, line_start, start)
    if m is None:
        return None
    name = m.group(1).strip()
    if any(ch.isdigit() for ch in name) or not 1 <= len(name.split()) <= _MAX_BEFORE_WORDS:
        return None
    return name


def _bracketed(text: str) -> list[bool]:
    """Per character of ``text``, whether it lies inside round brackets."""
    depth, out = 0, []
    for ch in text:
        depth += ch == "("
        out.append(depth > 0)
        depth -= ch == ")" and depth > 0
    return out


def _number(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


def counted_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of counted goods as the text's item phrases write them
    (module docstring), or None where the array's items are not of that shape, the text
    has no item phrase that qualifies, or a price fits none of its readings.

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted (model order).

    Returns:
        A new list of item dicts (count, description and, where the shape has one, price),
        or None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    items = _resolve(root, array.get("items"))
    fields = counted_fields(root, items)
    if fields is None:
        return None
    count, desc, price = fields
    phrases = item_phrases(text)
    if price is not None:
        phrases = [p for p in phrases if p[4] is not None]
    elif len(phrases) >= 2:
        joined = all(
            _JOINER.match(text[a[1] : b[0]]) for a, b in zip(phrases, phrases[1:], strict=False)
        )
        if not joined:
            return None
    elif phrases:
        counts = {
            Decimal(str(i.get(count)))
            for i in current
            if isinstance(i, dict) and isinstance(i.get(count), int)
        }
        if phrases[0][2] not in counts:
            return None
    if not phrases:
        return None
    props = items["properties"]
    _, count_branch = field_kind(root, props[count])
    price_branch = field_kind(root, props[price])[1] if price is not None else None
    out = []
    for _, _, n, description, readings in phrases:
        if not accepts_number(count_branch, n):
            return None
        item: dict[str, Any] = {desc: description, count: int(n)}
        if price is not None:
            fitting = [v for v in readings or () if accepts_number(price_branch, v)]
            if not fitting:
                return None
            item[price] = _number(fitting[0])
        out.append({k: item[k] for k in props if k in item})
    return out


_UNIT_NAMES = ("unit", "units")
_CLAUSE_END = re.compile(r"[;\n|]|[.!?](?=\s|$)")
_NAME_WORD = re.compile(r"[^\W\d_][\w'’/-]*$")
_LINK_WORDS = frozenset("was is were are at of".split())
_MAX_NAME_WORDS = 3


def measured_fields(root: Any, items: Any) -> tuple[str, str, str | None, str | None] | None:
    """``(name, value, unit or None, flag or None)`` field names of an array's item
    schema when it is a measurement: exactly one free string (what is measured), one
    number, at most one string field named ``unit`` / ``units`` and at most one enum;
    the enum (a flag the text names per item) required. None for any other shape.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    name = value = unit = flag = None
    for key, prop in items["properties"].items():
        kind, _ = field_kind(root, prop)
        if kind == "number" and value is None:
            value = key
        elif kind == "enum" and flag is None:
            flag = key
        elif free_string_schema(root, prop) is not None and key.lower() in _UNIT_NAMES:
            if unit is not None:
                return None
            unit = key
        elif free_string_schema(root, prop) is not None and name is None:
            name = key
        else:
            return None
    if name is None or value is None or flag is None:
        return None
    return name, value, unit, flag


def _whole(text: str, start: int, end: int) -> bool:
    """Whether the numeral at ``text[start:end]`` is a word of its own: neither a letter,
    digit nor ``-`` / ``/`` glued to either side ("HbA1c", "B12", "2026-01-27").
    """
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or before in "-/") and not (after.isalnum() or after in "-/")


def _own_numerals(text: str) -> list[tuple[int, int, tuple[Decimal, ...]]]:
    """``numeral_spans`` of ``text``, where a span glued to a name word on its left
    takes in a numeral after a space ("T4 19": "4 19") split there: the glued part is
    the name's ("T4"), the rest read as a numeral of its own ("19").
    """
    out = []
    for start, end, values in numeral_spans(text):
        gap = re.search(r"\s+", text[start:end])
        if gap is not None and not _whole(text, start, start + gap.start()):
            at = start + gap.end()
            out += [(at + a, at + b, v) for a, b, v in numeral_spans(text[at:end])]
        else:
            out.append((start, end, values))
    return out


def measurements(text: str) -> list[tuple[str, tuple[Decimal, ...], str | None, str]]:
    """The measurement clauses of ``text``: a clause (between ``;``, ``|``, a line end
    or a sentence end) that starts with one to three name words, then optionally a
    ``:`` or a link word ("was", "is"), then a numeral that is a word of its own, then
    its unit (``%`` or the token after the numeral's space, none where a punctuation
    mark or the clause's end follows), then no word ("100 g almond flour" names what it
    measures after the unit: no measurement clause).

    Returns:
        ``(name, value readings, unit or None, the clause's rest after the unit)`` per
        clause, in text order.
    """
    spans = _own_numerals(text)
    found = []
    start = 0
    for end_m in [*_CLAUSE_END.finditer(text), None]:
        end = end_m.start() if end_m is not None else len(text)
        clause_spans = [s for s in spans if start <= s[0] < end and _whole(text, s[0], s[1])]
        if clause_spans:
            n_start, n_end, values = clause_spans[0]
            head = text[start:n_start].strip().rstrip(":").strip()
            words = head.split()
            while words and words[-1].lower() in _LINK_WORDS:
                words.pop()
            tail = text[n_end:end]
            unit_m = re.match(r"(\s*%|\s+[^\s,;()\[\]]+)", tail)
            unit = unit_m.group(1).strip() if unit_m is not None else None
            rest = tail[unit_m.end() :] if unit_m is not None else tail
            if (
                1 <= len(words) <= _MAX_NAME_WORDS
                and all(_NAME_WORD.match(w) for w in words)
                and not re.match(r"\s*[^\W\d_]", rest)  # "100 g almond flour": named after
            ):
                found.append((" ".join(words), values, unit, rest))
        start = end_m.end() if end_m is not None else len(text)
    return found


_RANGE_WORDS = (("low", "below|under"), ("high", "above|over"), ("normal", "within|inside|in"))
_RANGE_NOUN = r"(?:the\s+)?(?:(?:reference|normal|ref\.?)\s+)?(?:range|limits?|interval)(?!\w)"
_RANGE_PHRASE = re.compile(
    rf"(?<!\w)(?:below|under|above|over|within|inside|in|outside)\s+{_RANGE_NOUN}", re.I
)
_NUM = r"(\d+(?:\.\d+)?)"
_REF_RANGE = re.compile(
    rf"(?<!\w)(?:ref(?:erence)?\.?(?:\s+range)?|normal\s+range|range)\s*:?\s*{_NUM}\s*[-–]\s*{_NUM}",
    re.IGNORECASE,
)


def implied_flags(rest: str, value: Decimal, options: list[str]) -> list[str]:
    """The flag options a measurement clause's ``rest`` (after the unit) implies without
    naming one: "below range" / "under the reference range" -> ``low``, "above (the
    normal) range" -> ``high``, "within range" -> ``normal``; else a written reference
    range ("[ref 0.4-4.0]", "reference range 12-22") against ``value``: under its lower
    end ``low``, over its upper end ``high``, else ``normal``. Only options spelt
    ``low`` / ``high`` / ``normal`` (any case) are implied.

    Returns:
        The options implied (empty where none, several where the rest implies several:
        the caller then keeps the model's array). Raises: never.
    """
    by_name = {o.lower(): o for o in options}
    implied = [
        by_name[name]
        for name, words in _RANGE_WORDS
        if name in by_name and re.search(rf"(?<!\w)(?:{words})\s+{_RANGE_NOUN}", rest, re.I)
    ]
    if implied:
        return implied
    ranges = _REF_RANGE.findall(rest)
    if len(ranges) != 1:
        return []
    low, high = (Decimal(x) for x in ranges[0])
    if low > high:
        return []
    name = "low" if value < low else "high" if value > high else "normal"
    return [by_name[name]] if name in by_name else []


def measured_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of measurements as the text's measurement clauses write
    them (``measurements``): each clause one item, its name, first numeral reading the
    number field accepts, unit, and the one enum option its rest names as a whole word.
    None where the shape is not a measurement (``measured_fields``), the text has fewer
    than two such clauses and its one clause's value is no model item's value, or some
    clause names no option or two (or its value or unit does not fit the field).

    Args and returns as :func:`counted_items`. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    items = _resolve(root, array.get("items"))
    fields = measured_fields(root, items)
    if fields is None:
        return None
    name, value, unit, flag = fields
    found = measurements(text)
    if unit is not None:
        found = [m for m in found if m[2] is not None]
    if not found:
        return None
    props = items["properties"]
    _, value_branch = field_kind(root, props[value])
    if len(found) == 1:
        values = {
            Decimal(str(i.get(value)))
            for i in current
            if isinstance(i, dict) and isinstance(i.get(value), (int, float))
        }
        if not values & set(found[0][1]):
            return None
    options = []
    if flag is not None:
        options = [o for o in field_kind(root, props[flag])[1]["enum"] if isinstance(o, str)]
    out = []
    for label, readings, unit_text, rest in found:
        fitting = [v for v in readings if accepts_number(value_branch, v)]
        if not fitting:
            return None
        item: dict[str, Any] = {name: label, value: _number(fitting[0])}
        if unit is not None:
            item[unit] = unit_text
        if flag is not None:
            said = _RANGE_PHRASE.sub(" ", rest)  # "above the normal range" names no "normal"
            named = [o for o in options if re.search(rf"(?<!\w){re.escape(o)}(?!\w)", said, re.I)]
            if not named:
                named = implied_flags(rest, fitting[0], options)
            if len(named) != 1:
                return None
            item[flag] = named[0]
        out.append({k: item[k] for k in props if k in item})
    return out


_PAIR = re.compile(
    r"(?P<key>[^\W\d_][\w'’-]*(?: [^\W\d_][\w'’-]*){0,2}):? "
    r"(?P<value>[^\s,;]+?)(?=[,;]|\.(?:\s|$)|$)"
)
_PAIR_JOINER = re.compile(r"\s*[,;]\s*(?:and\s+)?")
MIN_PAIRS = 3


def pair_fields(root: Any, items: Any) -> tuple[str, str] | None:
    """``(key, value)`` field names of an array's item schema when it holds exactly two
    properties, both free strings (``subject`` and ``grade``), in schema order; else None.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    props = list(items["properties"].items())
    if len(props) != 2 or any(free_string_schema(root, p) is None for _, p in props):
        return None
    return props[0][0], props[1][0]


def keyed_runs(text: str) -> list[list[tuple[str, str]]]:
    """The runs of keyed values of ``text``: at least ``MIN_PAIRS`` pairs in a row, each
    one to three words (the key; the first a letter word) then an optional ``:`` and one
    token without spaces (the value, ending at ``,``, ``;`` or a sentence end), the pairs
    joined by ``,`` or ``;`` only ("Mathematics: A; English: B+; Physics: A*", "French
    16/20, Mathematics 14/20, Biology 17.5/20").

    Returns:
        Each run as its ``(key, value)`` pairs, in text order.
    """
    runs: list[list[tuple[str, str]]] = []
    run: list[tuple[str, str]] = []
    last_end = -1
    pos = 0
    while pos < len(text):
        m = _PAIR.search(text, pos)
        if m is None:
            break
        key_words = m.group("key").split()
        start = m.start()
        if run and _PAIR_JOINER.fullmatch(text[last_end:start]) is None:
            runs.append(run) if len(run) >= MIN_PAIRS else None
            run = []
        if (
            re.fullmatch(r"[^\W\d_][^\W\d]{2,}\W*", m.group("value"))
            and m.group("value")[0].isupper()
        ):
            # a name word ("Alice Smith, Bob Jones"): no value; the run ends
            runs.append(run) if len(run) >= MIN_PAIRS else None
            run = []
            pos = m.start("value")
            continue
        run.append((" ".join(key_words), m.group("value")))
        last_end = m.end()
        pos = m.end()
    if len(run) >= MIN_PAIRS:
        runs.append(run)
    return runs


def pair_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of keyed values (``pair_fields``) as the text's one run of
    keyed values writes them (``keyed_runs``): the key into the first field, the value
    into the second. None where the shape differs, the text has no run or several, or
    a value does not fit its field.

    Args and returns as :func:`counted_items`. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    fields = pair_fields(root, array.get("items"))
    if fields is None:
        return None
    runs = keyed_runs(text)
    if len(runs) != 1:
        return None
    key, value = fields
    return [{key: k, value: v} for k, v in runs[0]]


_QUOTED = re.compile(
    r"(?:(?<=^)|(?<=[\s(:]))(?:'(?P<a>[^'\n]{2,120}?)'|\"(?P<b>[^\"\n]{2,120}?)\"|"
    r"“(?P<c>[^”\n]{2,120}?)”|‘(?P<d>[^’\n]{2,120}?)’)(?!\w)"
)
_QUOTE_JOINER = re.compile(r"\s*(?:[,;&]|and|or)\s*(?:(?:and|or)\s+)?", re.IGNORECASE)


def quoted_runs(text: str) -> list[list[str]]:
    """The runs of quoted spans of ``text``: each span written in ``'...'``, ``"..."``,
    ``“...”`` or ``‘...’`` (the opening quote at the text's start or after a space,
    ``(`` or ``:``; two to 120 characters on one line, starting and ending with no
    space; no word character right after the closing quote), consecutive spans in one
    run where only ``,``, ``;``, ``&``, "and" or "or" lies between them.

    Returns:
        Each run as its spans' texts (without the quotes), in text order.
    """
    runs: list[list[str]] = []
    last_end = -1
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.group("a", "b", "c", "d") if g is not None)
        if inner != inner.strip():
            continue
        if runs and _QUOTE_JOINER.fullmatch(text[last_end : m.start()]):
            runs[-1].append(inner)
        else:
            runs.append([inner])
        last_end = m.end()
    return runs


def quoted_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array whose item object holds exactly one free string field
    (``free_string_schema``: a title, a name) as the text's run of quoted spans writes
    them (``quoted_runs``): the one run of at least two spans holding some model item's
    string exactly, one item per span in text order. A span that is a model item's
    string keeps that item; another takes the fields other than the string from the
    model's items where they all agree on them. None where the shape differs, no run or
    several hold a model item's string, a model item's string is in no span of the run,
    or the model's items disagree on a field a new item needs.

    Args and returns as :func:`counted_items`. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    items = _resolve(root, array.get("items"))
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    free = [k for k, p in items["properties"].items() if free_string_schema(root, p) is not None]
    if len(free) != 1 or not current or not all(isinstance(i, dict) for i in current):
        return None
    key = free[0]
    strings = [i.get(key) for i in current]
    runs = [r for r in quoted_runs(text) if len(r) >= 2 and set(strings) & set(r)]
    if len(runs) != 1 or not set(strings) <= set(runs[0]):
        return None
    by_string = {i.get(key): i for i in current}
    others = [{k: v for k, v in i.items() if k != key} for i in current]
    shared = others[0] if all(o == others[0] for o in others) else None
    out = []
    for span in dict.fromkeys(runs[0]):
        if span in by_string:
            out.append(by_string[span])
        elif shared is None:
            return None
        else:
            item = {key: span, **shared}
            out.append({k: item[k] for k in items["properties"] if k in item})
    return out


# the written forms of the units a list of measured goods uses, by a short name: a
# unit token of the text is one of these (case-folded), or one of an enum's options
_UNIT_FORMS = {
    "g": ("g", "gram", "grams", "gr"),
    "kg": ("kg", "kilo", "kilos", "kilogram", "kilograms"),
    "mg": ("mg", "milligram", "milligrams"),
    "mcg": ("mcg", "µg", "microgram", "micrograms"),
    "ml": ("ml", "millilitre", "millilitres", "milliliter", "milliliters"),
    "l": ("l", "litre", "litres", "liter", "liters"),
    "tsp": ("tsp", "teaspoon", "teaspoons"),
    "tbsp": ("tbsp", "tablespoon", "tablespoons"),
    "cup": ("cup", "cups"),
    "clove": ("clove", "cloves"),
    "pinch": ("pinch", "pinches"),
    "oz": ("oz", "ounce", "ounces"),
    "lb": ("lb", "lbs", "pound", "pounds"),
}
_UNIT_OF = {form: short for short, forms in _UNIT_FORMS.items() for form in forms}
# fractions a list of measured goods writes in words or one character
_FRACTIONS = re.compile(r"(?<![\w])(?:(half)[ \t]+an?|([½¼¾]))(?![\w])", re.IGNORECASE)
_FRACTION_VALUE = {
    "half": Decimal("0.5"),
    "½": Decimal("0.5"),
    "¼": Decimal("0.25"),
    "¾": Decimal("0.75"),
}
_AND_A_HALF = re.compile(r"[ \t]+and[ \t]+a[ \t]+half(?![\w])", re.IGNORECASE)
_UNIT_TOKEN = re.compile(r"[ \t]*([^\W\d_]+|µg)\.?(?![\w])")
_OF = re.compile(r"[ \t]+of(?=[ \t])", re.IGNORECASE)
_NAME_TOKEN = re.compile(r"[ \t]+([^\W\d_][\w'’-]*)")
_MAX_GOOD_WORDS = 4
# between two goods of one list: a separator, after a short note on the first one
# ("2 lemons, zested; 200 g ground almonds")
_GOODS_JOINER = re.compile(
    r"[ \t]*(?:,[ \t]*[^\W\d_]+(?:[ \t]+[^\W\d_]+)?[ \t]*)?(?:,[ \t]*and|[,;&]|and)[ \t]*",
    re.IGNORECASE,
)


def unit_fields(root: Any, items: Any) -> tuple[str, str, str] | None:
    """``(name, quantity, unit)`` field names of an array's item schema when it is a
    measured good: exactly three properties, one free string (what is measured out),
    one number and one field named ``unit`` / ``units`` that is a free string or an enum
    of strings (either may allow null). None for any other shape.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    props = items["properties"]
    if len(props) != 3:
        return None
    name = quantity = unit = None
    for key, prop in props.items():
        kind, _ = field_kind(root, prop)
        if key.lower() in _UNIT_NAMES and (
            kind == "enum" or free_string_schema(root, prop) is not None
        ):
            unit = key
        elif kind == "number":
            quantity = key
        elif free_string_schema(root, prop) is not None:
            name = key
    if name is None or quantity is None or unit is None:
        return None
    return name, quantity, unit


def measured_goods(text: str) -> list[tuple[int, int, Decimal, str | None, str]]:
    """The measured goods a text writes: a positive numeral that starts a word and is no
    price ("1.5", "three", "two and a half", "half a", "½"), then optionally a unit
    (``_UNIT_FORMS``, glued or not: "200g", "3 tbsp", "1 l of"), then one to
    ``_MAX_GOOD_WORDS`` words up to a punctuation mark, a stop word or a numeral ("800 g
    tomatoes", "2 egg whites", "4 cloves garlic", "half a teaspoon of baking powder").

    Returns:
        ``(start, end, quantity, unit as written or None, name)`` per good, in text order.
    """
    amounts = amount_spans(text)
    numerals = [(a, b, v[0]) for a, b, v in numeral_spans(text) if v and v[0] > 0]
    numerals += [
        (m.start(), m.end(), _FRACTION_VALUE[(m[1] or m[2]).lower()])
        for m in _FRACTIONS.finditer(text)
    ]
    found = []
    for start, end, quantity in sorted(numerals):
        if start > 0 and not (text[start - 1].isspace() or text[start - 1] in "(:;,"):
            continue  # part of a code: "SKU-4471", "T4"
        if any(a <= start < b for a, b, _ in amounts):
            continue  # a price
        half = _AND_A_HALF.match(text, end)
        if half is not None:
            quantity, end = quantity + Decimal("0.5"), half.end()
        at, unit = end, None
        token = _UNIT_TOKEN.match(text, at)
        if token is not None and token.group(1).casefold() in _UNIT_OF:
            unit, at = token.group(1), token.end()
            of = _OF.match(text, at)
            at = of.end() if of is not None else at
        elif end < len(text) and not text[end].isspace():
            continue  # "3/4", "12kg" of no known unit
        words: list[str] = []
        while len(words) < _MAX_GOOD_WORDS:
            word = _NAME_TOKEN.match(text, at)
            if word is None or word.group(1).lower() in _STOP:
                break
            words.append(word.group(1))
            at = word.end()
        if not words:
            continue
        found.append((start, at, quantity, unit, " ".join(words)))
    return found


def _goods_runs(text: str, goods: list) -> list[list]:
    """The runs of two or more goods a list joins (``_GOODS_JOINER`` between each good
    and the next), in text order.
    """
    runs: list[list] = []
    run: list = []
    for good in goods:
        if run and _GOODS_JOINER.fullmatch(text[run[-1][1] : good[0]]):
            run.append(good)
            continue
        if len(run) >= 2:
            runs.append(run)
        run = [good]
    if len(run) >= 2:
        runs.append(run)
    return runs


def _anchors(good: tuple, item: Any, name: str, quantity: str, unit: str) -> bool:
    """Whether a model item is this good of the text: its name inside the good's or the
    good's inside its (case-folded), or its quantity and unit the good's ("150", "g").
    """
    if not isinstance(item, dict):
        return False
    _, _, amount, written, good_name = good
    held = item.get(name)
    if isinstance(held, str) and held.strip():
        a, b = held.casefold(), good_name.casefold()
        if a in b or b in a:
            return True
    count, held_unit = item.get(quantity), item.get(unit)
    if isinstance(count, bool) or not isinstance(count, (int, float)) or written is None:
        return False
    same_unit = isinstance(held_unit, str) and _UNIT_OF.get(held_unit.casefold()) == _UNIT_OF.get(
        written.casefold()
    )
    return same_unit and Decimal(str(count)) == amount


def unit_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of measured goods (``unit_fields``: a name, a quantity and
    a unit) as the text's longest list of measured goods writes them
    (``measured_goods``, joined by ``_GOODS_JOINER``), or None: the items are not of that
    shape, the text has no such list, two lists are longest, no good of the list is a
    model item (``_anchors``: its name, case-folded, one inside the other, or its
    quantity and unit), or a value does not fit
    (a unit the enum has no option for, a good without a unit where the unit is not
    nullable, a quantity the schema refuses).

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted (model order).

    Returns:
        A new list of item dicts, in text order, or None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    items = _resolve(root, array.get("items"))
    fields = unit_fields(root, items)
    if fields is None:
        return None
    name, quantity, unit = fields
    runs = _goods_runs(text, measured_goods(text))
    if not runs:
        return None
    longest = max(len(r) for r in runs)
    runs = [r for r in runs if len(r) == longest]
    if len(runs) != 1:
        return None
    goods = runs[0]
    if not any(_anchors(good, i, name, quantity, unit) for good in goods for i in current):
        return None
    props = items["properties"]
    _, q_branch = field_kind(root, props[quantity])
    unit_sub = _resolve(root, props[unit])
    options = [o for o in unit_sub.get("enum", ()) if isinstance(o, str)]
    out = []
    for _, _, amount, written, good in goods:
        if not accepts_number(q_branch, amount):
            return None
        if written is None:
            if not is_nullable(root, props[unit]):
                return None
            value = None
        elif options:
            short = _UNIT_OF[written.casefold()]
            fits = [o for o in options if _UNIT_OF.get(o.casefold()) == short]
            if len(fits) != 1:
                return None
            value = fits[0]
        else:
            value = written
        item = {name: good, quantity: _number(amount), unit: value}
        out.append({k: item[k] for k in props})
    return out


# how a text writes each schedule option (by the option's words, ``_`` as a space) of
# a list of dosed goods besides the option's own words
_SCHEDULE_PHRASES = {
    "once daily": (
        "once a day",
        "once daily",
        "every morning",
        "every evening",
        "every night",
        "each morning",
        "each evening",
        "each night",
        "at night",
        "at bedtime",
        "in the morning",
        "in the evening",
    ),
    "twice daily": ("twice a day", "two times a day", "morning and evening"),
    "three times daily": ("three times a day", "3 times a day", "three times daily"),
    "four times daily": ("four times a day", "4 times a day"),
    "as needed": ("when needed", "if needed", "as required", "when required", "as needed"),
    "weekly": ("once a week", "every week", "each week"),
    "monthly": ("once a month", "every month", "each month"),
}
_DOSE_NAME = re.compile(r"([^\W\d_][\w'’-]*(?:[ \t]+[^\W\d_][\w'’-]*){0,2})[ \t]+\Z")


def dosed_fields(root: Any, items: Any) -> tuple[str, str, str, str] | None:
    """``(name, dose, unit, schedule)`` field names of an array's item schema when it is
    a dosed good: exactly four properties, one free string (what is dosed), one number,
    one field named ``unit`` / ``units`` that is an enum or a free string, and one enum
    (how often). None for any other shape, and for a measurement (``measured_fields``).
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    props = items["properties"]
    if len(props) != 4 or measured_fields(root, items) is not None:
        return None
    name = dose = unit = schedule = None
    for key, prop in props.items():
        kind, _ = field_kind(root, prop)
        if key.lower() in _UNIT_NAMES and (
            kind == "enum" or free_string_schema(root, prop) is not None
        ):
            unit = key
        elif kind == "number":
            dose = key
        elif kind == "enum":
            schedule = key
        elif free_string_schema(root, prop) is not None:
            name = key
    if None in (name, dose, unit, schedule):
        return None
    return name, dose, unit, schedule  # type: ignore[return-value]


def dosed_goods(text: str) -> list[tuple[int, int, str, Decimal, str]]:
    """The dosed goods a text writes: one to three words (a name: no stop word, after a
    punctuation mark, a stop word or the text's start) right before a positive numeral,
    then a unit (``_UNIT_FORMS``): "bisoprolol 5 mg", "alendronic acid 70 mg",
    "prednisolone forty milligrams".

    Returns:
        ``(start, end, name, dose, unit as written)`` per good, in text order; ``start``
        the name's first character, ``end`` the unit's last.
    """
    found = []
    for start, end, values in numeral_spans(text):
        if not values or values[0] <= 0:
            continue
        token = _UNIT_TOKEN.match(text, end)
        if token is None or token.group(1).casefold() not in _UNIT_OF:
            continue
        head = _DOSE_NAME.search(text, 0, start)
        if head is None:
            continue
        words = head.group(1).split()
        while words and words[0].lower() in _STOP:
            words.pop(0)
        if not words or any(w.lower() in _STOP for w in words):
            continue
        name_start = start - len(head.group(0)) + head.group(0).find(words[0])
        found.append((name_start, token.end(), " ".join(words), values[0], token.group(1)))
    return found


def _schedules(clause: str, options: list[str]) -> set[str]:
    """The options of a schedule enum a clause writes (``_SCHEDULE_PHRASES``, or the
    option's own words), a phrase inside a longer phrase found not counted.
    """
    low = " " + re.sub(r"\s+", " ", clause.casefold()) + " "
    hits = []
    for o in options:
        own = o.replace("_", " ").casefold()
        for phrase in {own, *_SCHEDULE_PHRASES.get(own, ())}:
            for m in re.finditer(r"(?<![\w])" + re.escape(phrase) + r"(?![\w])", low):
                hits.append((m.start(), m.end(), o))
    kept = [
        h
        for h in hits
        if not any(a <= h[0] and h[1] <= b and b - a > h[1] - h[0] for a, b, _ in hits)
    ]
    return {o for _, _, o in kept}


def dosed_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of dosed goods (``dosed_fields``: a name, a dose, a unit and
    a schedule enum) as the text writes them (``dosed_goods``), each good's schedule the
    one option its clause writes (from the good to the next one or the sentence's end:
    "once a day", "when needed", ``_SCHEDULE_PHRASES``), or None: the items are not of
    that shape, the text writes no good, a good's clause writes no option or two, a
    unit has no option, no good is a model item (its name, case-folded, one inside the
    other), or a dose does not fit.

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted (model order).

    Returns:
        A new list of item dicts, in text order, or None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    items = _resolve(root, array.get("items"))
    fields = dosed_fields(root, items)
    if fields is None:
        return None
    name, dose, unit, schedule = fields
    goods = dosed_goods(text)
    held = [i.get(name) for i in current if isinstance(i, dict)]
    held = [h.casefold() for h in held if isinstance(h, str) and h.strip()]
    if not goods or not any(
        h in g[2].casefold() or g[2].casefold() in h for h in held for g in goods
    ):
        return None
    props = items["properties"]
    _, dose_branch = field_kind(root, props[dose])
    unit_options = [o for o in _resolve(root, props[unit]).get("enum", ()) if isinstance(o, str)]
    _, schedule_branch = field_kind(root, props[schedule])
    options = [o for o in schedule_branch["enum"] if isinstance(o, str)]
    out = []
    for i, (_, end, good, amount, written) in enumerate(goods):
        limit = goods[i + 1][0] if i + 1 < len(goods) else len(text)
        stop = re.search(r"[.!?](?:\s|$)", text[end:limit])
        found = _schedules(text[end : end + stop.start() if stop else limit], options)
        if len(found) != 1 or not accepts_number(dose_branch, amount):
            return None
        if unit_options:
            fits = [
                o
                for o in unit_options
                if _UNIT_OF.get(o.casefold()) == _UNIT_OF[written.casefold()]
            ]
            if len(fits) != 1:
                return None
            value = fits[0]
        else:
            value = written
        item = {name: good, dose: _number(amount), unit: value, schedule: found.pop()}
        out.append({k: item[k] for k in props})
    return out
