"""Arrays of records read from the lists a text introduces with a label and from its
table rows: labelled amounts ("Payments: hall hire £960.00; insurance £118.40") and
lines of numbers ("Ferryhill Rovers  14  10  3  1  33", "03/03/2027 - 52.4 l - £79.12").

A 135M model writing an array of records under the schema's grammar mostly closes it at
once (``[]``) or pairs parts from different places; the text writes each record in one
place, so the records are read from there.

**Labelled amounts** (``amount_items``): an array whose item object holds exactly one free
string (no enum, format or pattern: what the money is for) and one number field named for
money (``labels.is_amount_field``: ``amount``, ``price``, ``cost``, ...). The text's
*amount lists* (``amount_lists``) are the clauses after a label of one to three words and
``:`` at the text's or a sentence's start or after a line break ("Receipts:", "Work carried
out:"), up to the sentence's end, split into entries at ``;`` where the list writes one,
else at ``,`` and "and" (never inside brackets); every entry writes a currency-marked
numeral (``labels.amount_spans``) after at least one word, and the entry's words before its
first such numeral, a leading article, "and", "our", "plus" and a trailing "of", "at",
"for", "-" or ":" dropped, are the description ("a grant of 500,00 € from the city":
"grant"; where a count "N x" ends the words and ``=`` and another amount follow that
numeral, the line's total is the amount: "room 4 x CHF 285.00 = CHF 1,140.00" is "room",
1140; "members' subscriptions £1,560.00 (52 members at £30.00 each)": "members'
subscriptions", 1560). A list of two or more entries is an amount list. An array takes the
one list whose label shares a word stem with the array's name; where the object's arrays
of this shape are as many as the lists no label names, they take those lists in schema
and text order; otherwise the model's array stays.

**Table rows** (``row_items``): an array whose item object holds one free string or one
date field (``format: date``) and two or more number fields, nothing else. A *row* is one
line of the text that writes the date (any notation ``fsm.dates`` reads) or the string
(words with a letter, before the first numeral; a leading rank numeral dropped), and
after it exactly as many numerals as the item has number fields, with nothing between
them but units and currency marks (words of at most three letters, symbols, ``-``,
``|``); the numerals go to the number fields in schema order. The text's longest run of
two or more consecutive rows (``table_rows``) is the array, when it is the only run that
long. Without such rows, an item keyed by a date is read from the text's one sentence
that writes two or more dates, each followed by exactly as many numerals before the next
("on 6 April 2027, 41.2 litres for 758,08 kr, and on 22 April 2027, thirty litres
exactly for 561,00 kr": ``dated_entries``).

**Cell rows** (``cell_items``): an array whose item object holds free strings, pattern
strings (no ``format``) and numbers, at least one string and one number, nothing else. A
line is cut into cells at column gaps (two or more spaces, a tab), bars, dashes between
spaces and dot leaders, a leading rank ("1.") and cells wholly in brackets dropped; each
cell is a pattern field's value, a number cell (one numeral, at most two words of unit or
currency, no code such as "CN-5510") or a string cell (starting with a letter), as many of
each kind as the item has fields, taken in schema order; a line whose first string cell
starts with "total", "subtotal", "sum", "grand", "net" or "gross" is no record. The text's
one longest run of two or more consecutive such lines is the array.

The rules give their records only where each value fits its field and the count fits
``minItems`` / ``maxItems``; else None (the model's array stays). No model call.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.fields import (
    field_kind,
    free_string_schema,
    schema_accepts,
    string_schema,
)
from structgen.extraction.evidence.text import stem
from structgen.extraction.labels import amount_spans, is_amount_field
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import date_spans, dates
from structgen.fsm.numerals import numeral_spans

__all__ = [
    "amount_fields",
    "amount_lists",
    "amount_items",
    "row_fields",
    "table_rows",
    "dated_entries",
    "row_items",
    "cell_fields",
    "cell_row",
    "cell_items",
]

_LABEL = re.compile(r"(?:^|(?<=[.!?]\s)|(?<=\n))[ \t]*([^\W\d_][\w'’ -]{0,40}?)[ \t]*:[ \t]+")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n\s*\n")
_LEAD = re.compile(r"^(?:(?:a|an|the|and|our|plus|also)\s+)+", re.IGNORECASE)
_TRAIL = re.compile(r"(?:\s+(?:of|at|for|is|was|were|are|came to|to)|\s*[-–:,])+$", re.IGNORECASE)
_MARK_END = re.compile(r"(?:[£$€¥₹]|\b[A-Z]{3}|\bkr|\bRs\.?)\s*$")
_WORD = re.compile(r"[^\W\d_][\w'’]*")
_TIMES_COUNT = re.compile(r"\s+\d+\s*[x×]$")
_EQUALS = re.compile(r"\s*(?:[£$€¥₹]|[A-Z]{3}|kr)?\s*=\s*(?:[£$€¥₹]|[A-Z]{3}|kr)?\s*")
_MAX_LABEL_WORDS = 3
_MAX_DESC_WORDS = 8


def _name_words(name: str) -> list[str]:
    return [w.lower() for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name) if w]


def amount_fields(root: Any, items: Any) -> tuple[str, str] | None:
    """``(description, amount)`` field names of an array's item schema when it is a
    labelled amount (module docstring), else None.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    props = items["properties"]
    if len(props) != 2:
        return None
    desc = amount = None
    for name, prop in props.items():
        kind, _ = field_kind(root, prop)
        if kind == "number" and is_amount_field([stem(w) for w in _name_words(name)]):
            amount = name
        elif free_string_schema(root, prop) is not None:
            desc = name
    if desc is None or amount is None:
        return None
    return desc, amount


def _outside_brackets(text: str) -> str:
    """``text`` with every bracketed part blanked (same length)."""
    depth, out = 0, []
    for ch in text:
        depth += ch in "(["
        out.append(ch if depth == 0 else " ")
        depth -= ch in ")]" and depth > 0
    return "".join(out)


def _entries(body: str) -> list[tuple[int, int]]:
    """The entries of a list's body, as offsets: split at ``;`` where the body writes one
    outside brackets, else at ``,`` and "and".
    """
    flat = _outside_brackets(body)
    sep = re.compile(r";") if ";" in flat else re.compile(r",\s+(?:and\s+)?|\s+and\s+")
    out, at = [], 0
    for m in sep.finditer(flat):
        out.append((at, m.start()))
        at = m.end()
    out.append((at, len(body)))
    return [(a, b) for a, b in out if body[a:b].strip()]


def amount_lists(text: str) -> list[tuple[str, list[tuple[str, tuple[Decimal, ...]]]]]:
    """The text's amount lists (module docstring), in text order.

    Returns:
        ``(label, [(description, readings), ...])`` per list of two or more entries.
    """
    amounts = amount_spans(text)
    found = []
    for m in _LABEL.finditer(text):
        label = m.group(1).strip()
        if len(_WORD.findall(label)) > _MAX_LABEL_WORDS or len(_WORD.findall(label)) == 0:
            continue
        end = _SENTENCE_END.search(text, m.end())
        stop = end.start() if end else len(text)
        nxt = _LABEL.search(text, m.end())
        if nxt is not None and nxt.start() < stop:
            stop = nxt.start()
        body = text[m.end() : stop]
        entries = []
        for a, b in _entries(body):
            start = m.end() + a
            first = next((s for s in amounts if start <= s[0] < m.end() + b), None)
            if first is None:
                break
            desc = text[start : first[0]]
            desc = _MARK_END.sub("", desc)
            desc = _TRAIL.sub("", _LEAD.sub("", " ".join(desc.split())))
            readings = first[2]
            times = _TIMES_COUNT.search(desc)
            line_total = _line_total(text, first, amounts, m.end() + b)
            if times is not None and line_total is not None:
                # "room 4 x CHF 285.00 = CHF 1,140.00": the line's total, not the unit price
                desc, readings = desc[: times.start()], line_total[2]
            words = _WORD.findall(desc)
            if not words or len(desc.split()) > _MAX_DESC_WORDS:
                break
            entries.append((desc, readings))
        else:
            if len(entries) >= 2:
                found.append((label, entries))
    return found


def _line_total(text: str, first: tuple, amounts: list, stop: int) -> tuple | None:
    """The amount written after ``=`` right after ``first`` (a currency mark between
    allowed), before ``stop``, or None.
    """
    for span in amounts:
        if first[1] < span[0] < stop:
            return span if _EQUALS.fullmatch(text[first[1] : span[0]]) else None
    return None


def _named(label: str, name: str) -> bool:
    stems = {stem(w) for w in _name_words(name)}
    return any(stem(w.lower()) in stems for w in _WORD.findall(label))


def amount_items(
    root: Any, array: Any, text: str, current: list, arrays: list[str], name: str
) -> list[dict] | None:
    """The items of an array of labelled amounts read from the text's amount lists
    (module docstring), or None.

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted (unused: the lists decide).
        arrays: the names of the object's arrays of this shape, in schema order.
        name: this array's property name (one of ``arrays``).

    Returns:
        A new list of item dicts, in text order, or None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    fields = amount_fields(root, array.get("items"))
    if fields is None:
        return None
    desc, amount = fields
    lists = amount_lists(text)
    named = [entries for label, entries in lists if _named(label, name)]
    if len(named) > 1:
        return None
    if named:
        entries = named[0]
    else:
        free = [e for label, e in lists if not any(_named(label, a) for a in arrays)]
        unnamed = [a for a in arrays if not any(_named(label, a) for label, _ in lists)]
        if len(free) != len(unnamed) or name not in unnamed:
            return None
        entries = free[unnamed.index(name)]
    props = _resolve(root, array.get("items"))["properties"]
    out = []
    for description, readings in entries:
        value = next((v for v in readings if schema_accepts(root, props[amount], _plain(v))), None)
        if value is None or not schema_accepts(root, props[desc], description):
            return None
        out.append({k: {desc: description, amount: _plain(value)}[k] for k in props})
    return _fitting(array, out)


def row_fields(root: Any, items: Any) -> tuple[str, str, list[str]] | None:
    """``(label field, "date" | "string", number fields in schema order)`` of an array's
    item schema when it is a table row (module docstring), else None.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    label = kind_of_label = None
    numbers = []
    for key, prop in items["properties"].items():
        kind, _ = field_kind(root, prop)
        sub = _resolve(root, prop)
        if kind == "number":
            numbers.append(key)
        elif label is None and isinstance(sub, dict) and sub.get("format") == "date":
            label, kind_of_label = key, "date"
        elif label is None and free_string_schema(root, prop) is not None:
            label, kind_of_label = key, "string"
        else:
            return None
    if label is None or len(numbers) < 2:
        return None
    return label, kind_of_label, numbers


_FILLER = re.compile(r"(?:[\s|:;,–—/-]|[^\W\d_]{1,3}\b\.?|[£$€¥₹%])*")
_NUMERIC_DATE = re.compile(r"(\d{1,2})[./-](\d{1,2})[./-]\d{2,4}$")


def _row(line: str, kind: str, count: int) -> tuple[Any, list[Decimal]] | None:
    """One line read as a table row: ``(label, numbers)``, the label a date's written
    text or a string, or None where the line is no row (module docstring).
    """
    if kind == "date":
        spans = date_spans(line)
        if not spans or line[: spans[0][0]].strip(" \t-|"):
            return None
        label, at = line[spans[0][0] : spans[0][1]], spans[0][1]
    else:
        at = 0
    nums = [s for s in numeral_spans(line[at:]) if s[0] == 0 or not line[at + s[0] - 1].isalnum()]
    nums = [(a + at, b + at, v) for a, b, v in nums]
    if kind == "string":
        rank = re.match(r"\s*\d+[.)]?\s+(?=[^\W\d_])", line)
        if rank is not None and nums and nums[0][0] < rank.end():
            nums, at = nums[1:], rank.end()
        if not nums:
            return None
        label = " ".join(line[at : nums[0][0]].split()).strip(" -–|:,")
        if not _WORD.search(label) or len(label.split()) > _MAX_DESC_WORDS:
            return None
        at = nums[0][0]
    if len(nums) != count:
        return None
    cursor = at
    for a, b, _ in nums:
        if not _FILLER.fullmatch(line[cursor:a]):
            return None
        cursor = b
    if not _FILLER.fullmatch(line[cursor:]):
        return None
    return label, [v[0] for _, _, v in nums]


def _date_order(rows: list[tuple[str, list]]) -> list[str] | None:
    """The rows' written dates as ISO dates, an ambiguous numeric date read in the order
    the run's unambiguous ones show (a first part above 12: day first); None where the
    run shows no order or both.
    """
    day_first = month_first = False
    for written, _ in rows:
        m = _NUMERIC_DATE.search(written)
        if m is not None:
            day_first |= int(m[1]) > 12
            month_first |= int(m[2]) > 12
    out = []
    for written, _ in rows:
        readings = dates(written)
        if len(readings) == 2 and day_first != month_first:
            out.append(readings[1] if day_first else readings[0])
        elif len(readings) == 1:
            out.append(readings[0])
        else:
            return None
    return out


def table_rows(text: str, kind: str, count: int) -> list[tuple[Any, list[Decimal]]]:
    """The text's one longest run of two or more consecutive table rows (module
    docstring), dates as ISO dates, or ``[]`` where there is none, two runs share the
    longest length or a run's dates cannot be read.
    """
    runs: list[list] = []
    current: list = []
    for line in [*text.splitlines(), ""]:
        row = _row(line, kind, count) if line.strip() else None
        if row is not None:
            current.append(row)
            continue
        if len(current) >= 2:
            runs.append(current)
        current = []
    if not runs:
        return []
    best = max(len(r) for r in runs)
    longest = [r for r in runs if len(r) == best]
    if len(longest) != 1:
        return []
    rows = longest[0]
    if kind == "date":
        iso = _date_order(rows)
        if iso is None:
            return []
        rows = [(d, nums) for d, (_, nums) in zip(iso, rows, strict=True)]
    return rows


def dated_entries(text: str, count: int) -> list[tuple[str, list[Decimal]]]:
    """The records of the text's one sentence that writes two or more whole dates, each
    followed, before the next date or the sentence's end, by exactly ``count`` numerals
    ("on 6 April 2027, 41.2 litres for 758,08 kr, and on 22 April 2027, thirty litres for
    561,00 kr"), dates as ISO dates; ``[]`` where no sentence or two do so, or a date has
    two readings. Raises: never.
    """
    found = []
    at = 0
    for end in [*(m.start() for m in _SENTENCE_END.finditer(text)), len(text)]:
        sentence, offset = text[at:end], at
        at = end + 1
        spans = date_spans(sentence)
        if len(spans) < 2:
            continue
        records = []
        for i, (a, b) in enumerate(spans):
            stop = spans[i + 1][0] if i + 1 < len(spans) else len(sentence)
            nums = [v[0] for _, _, v in numeral_spans(sentence[b:stop])]
            readings = dates(sentence[a:b])
            if len(nums) != count or len(readings) != 1:
                break
            records.append((readings[0], nums))
        else:
            found.append((offset, records))
    return found[0][1] if len(found) == 1 else []


def row_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of table rows read from the text's rows (module
    docstring), or None.

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted (unused: the rows decide).

    Returns:
        A new list of item dicts, in text order, or None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    fields = row_fields(root, array.get("items"))
    if fields is None:
        return None
    label, kind, numbers = fields
    rows = table_rows(text, kind, len(numbers))
    if not rows and kind == "date":
        rows = dated_entries(text, len(numbers))
    if not rows:
        return None
    props = _resolve(root, array.get("items"))["properties"]
    out = []
    for head, readings in rows:
        record: dict[str, Any] = {label: head}
        for key, value in zip(numbers, readings, strict=True):
            record[key] = _plain(value)
        if not all(schema_accepts(root, props[k], v) for k, v in record.items()):
            return None
        out.append({k: record[k] for k in props})
    return _fitting(array, out)


def _fitting(array: dict, out: list[dict]) -> list[dict] | None:
    if len(out) < array.get("minItems", 0) or len(out) > array.get("maxItems", len(out)):
        return None
    return out


def _plain(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


# cell rows: a line cut into cells at a column gap (two or more spaces, a tab), a bar, a
# dash between spaces or a dot leader
_CELL_GAP = re.compile(r"\s{2,}|\t|\s*\|\s*|\s+[-–—]\s+|\s*\.{3,}\s*")
_CELL_RANK = re.compile(r"\s*\d{1,2}[.)]\s+(?=[^\W\d_])")
_TOTAL_WORDS = frozenset({"total", "subtotal", "sum", "grand", "net", "gross"})
_MAX_UNIT_WORDS = 2
_CODE = re.compile(r"[^\W_][-#/_]\d")  # a numeral joined into a code: "CN-5510"


def cell_fields(root: Any, items: Any) -> tuple[list[str], list[str], list[str]] | None:
    """``(free string fields, pattern string fields, number fields)``, each in schema
    order, of an array's item schema when it is a cell row (``cell_items``), else None.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    strings, patterns, numbers = [], [], []
    for key, prop in items["properties"].items():
        kind, _ = field_kind(root, prop)
        sub = string_schema(root, prop)
        if kind == "number":
            numbers.append(key)
        elif sub is not None and "format" not in sub:
            (patterns if "pattern" in sub else strings).append(key)
        else:
            return None
    if not numbers or not strings and not patterns:
        return None
    return strings, patterns, numbers


def _cells(line: str) -> list[str]:
    """A line's cells (module docstring of ``cell_items``), a leading rank ("1.") and
    cells wholly in brackets (an aside: "(£108 per pupil)") dropped.
    """
    rank = _CELL_RANK.match(line)
    if rank is not None:
        line = line[rank.end() :]
    cells = [c.strip(" :;,") for c in _CELL_GAP.split(line)]
    return [c for c in cells if c and not (c[0] in "([" and c[-1] in ")]")]


def _number_cell(cell: str) -> tuple[Decimal, ...] | None:
    """The readings of a cell that writes one numeral and at most two words of unit or
    currency ("12 pallets", "NOK 14 200,00", "£1,150.00"), else None (a code such as
    "CN-5510" is none).
    """
    if _CODE.search(cell):
        return None
    nums = [s for s in numeral_spans(cell) if s[0] == 0 or not cell[s[0] - 1].isalnum()]
    if len(nums) != 1:
        return None
    a, b, readings = nums[0]
    rest = cell[:a] + " " + cell[b:]
    if any(ch.isdigit() for ch in rest) or len(rest.split()) > _MAX_UNIT_WORDS:
        return None
    return readings


def cell_row(root: Any, props: dict, fields: tuple, line: str) -> dict | None:
    """One line read as a record of an item with ``fields`` (``cell_fields``), or None
    where the line is no such row: every cell is either a pattern field's value (the
    first such field in schema order whose pattern accepts it), a number cell
    (``_number_cell``) or a string cell starting with a letter; the number cells go to
    the number fields and the string cells to the free string fields, each in order, as
    many of each as fields; a row whose first string cell starts with a total's word
    ("TOTAL", "Subtotal", "Grand total") is none: a total is not a record.
    """
    strings, patterns, numbers = fields
    record: dict[str, Any] = {}
    texts, nums = [], []
    for cell in _cells(line):
        key = next(
            (k for k in patterns if k not in record and re.search(props[k]["pattern"], cell)),
            None,
        )
        if key is not None:
            record[key] = cell
            continue
        readings = _number_cell(cell)
        if readings is not None:
            nums.append(readings)
        elif cell[0].isalpha():
            texts.append(cell)
        else:
            return None
    if len(record) != len(patterns) or len(texts) != len(strings) or len(nums) != len(numbers):
        return None
    if texts and _WORD.match(texts[0]) and _WORD.match(texts[0])[0].lower() in _TOTAL_WORDS:
        return None
    record.update(zip(strings, texts, strict=True))
    for key, readings in zip(numbers, nums, strict=True):
        fit = [v for v in readings if schema_accepts(root, props[key], _plain(v))]
        if not fit:
            return None
        record[key] = _plain(fit[0])
    if not all(schema_accepts(root, props[k], v) for k, v in record.items()):
        return None
    return {k: record[k] for k in props}


def cell_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of cell rows read from the text's one longest run of two or
    more consecutive lines that are rows, or None.

    An item of free strings, pattern strings (no ``format``) and numbers, at least one
    number and one string, nothing else (``cell_fields``), is read from lines cut into
    cells at column gaps (two or more spaces, a tab, ``|``, a dash between spaces, a dot
    leader: "Long Meadow    winter wheat    12.5    104.2", "CN-5510  12 pallets  8 640
    kg  NOK 14 200,00", "A5 flyers - 2,500 copies - £142.00", "Coach hire ....
    £1,150.00", "10 km    0:49:30"), each line a record (``cell_row``). A blank line or
    a line that is no row ends a run; two runs of the longest length give None.

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted (unused: the rows decide).

    Returns:
        A new list of item dicts, in text order, fitting ``minItems`` / ``maxItems``, or
        None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    fields = cell_fields(root, array.get("items"))
    if fields is None:
        return None
    props = _resolve(root, array.get("items"))["properties"]
    runs: list[list[dict]] = []
    run: list[dict] = []
    for line in [*text.splitlines(), ""]:
        row = cell_row(root, props, fields, line) if line.strip() else None
        if row is not None:
            run.append(row)
            continue
        if len(run) >= 2:
            runs.append(run)
        run = []
    if not runs:
        return None
    best = max(len(r) for r in runs)
    longest = [r for r in runs if len(r) == best]
    return _fitting(array, longest[0]) if len(longest) == 1 else None
