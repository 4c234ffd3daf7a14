"""Arrays of records read one record per local region of the text: weekly sessions per
day group, identified records per identifier, travel legs per "from X to Y" sentence,
day numbers per day clause (``day_number_items``: "Mon 8.5 h, Tue 7.5 h").

An array whose item is a *weekly session* (``weekly_fields``: exactly one enum whose
options each name one weekday, ``mon`` / ``Monday`` / ``tuesday``; two time-of-day
strings, the first the start and the second the end; at most one more field, a free
string that allows null, the place) is read from the text's day groups
(``day_groups``): each run of weekday names joined by ``,`` ``&`` "and" "or"
("Mondays and Wednesdays", "every Tuesday", "a Friday seminar") is a local region that
runs to the next day group or the sentence's end. The region's first time range
(``time_ranges``: "10:15-11:45", "from 14:00 to 15:00", "6 pm to 8 pm", "9.00 until
11.00") gives both times of every day of the group; the place is what follows "in" or
"at" after the range, up to a comma, semicolon, bracket or the sentence's end, with the
field's own name dropped from its front ("in room K-204" gives ``K-204`` for ``room``,
"in Engineering Hall 1.12" the whole), and null where the region writes none ("(no
room)"). One record per day, in text order.

The text's records replace the model's array only when every day group has a time
range, some model item holds one of their times (an anchor), each value fits its field
and the count fits ``minItems`` / ``maxItems``; else the model's array stays.

An array whose item is an *identified record* (``identified_fields``: one string field
with a ``pattern``, one free string, one number, at most one boolean: a container, a
parcel, a lot) is read one record per identifier the text writes, its region running
to the next identifier or the sentence's end (``identified_items``), under the same
anchor and fit conditions.

An array whose item is a *travel leg* (``leg_fields``: a from and a to field by their
names' first word, a date, optionally a mode enum, a carrier, a time and a nullable
string) is read one record per sentence writing one "from X to Y" leg (``leg_items``).
"""

from __future__ import annotations

import re
from typing import Any

from structgen.extraction.evidence.dates import time_field
from structgen.extraction.evidence.fields import (
    accepts_number,
    field_kind,
    free_string_schema,
    is_nullable,
    schema_accepts,
)
from structgen.extraction.evidence.numbers import with_halves
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import dates, times
from structgen.fsm.numerals import numeral_spans

__all__ = [
    "weekly_fields",
    "day_groups",
    "time_ranges",
    "weekly_items",
    "identified_fields",
    "identified_items",
    "leg_fields",
    "leg_items",
    "day_number_fields",
    "day_number_items",
    "unit_numbers",
]

_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY = re.compile(
    r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.IGNORECASE
)
_DAY_JOINER = re.compile(r"\s*(?:,\s*(?:and|or)?|&|and|or)\s*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_TIME = r"(?P<{0}h>[01]?[0-9]|2[0-3])(?:[:.h](?P<{0}m>[0-5][0-9]))?\s*(?P<{0}ap>[ap]\.?m\.?)?"
_RANGE = re.compile(
    r"(?<![\w:.])"
    + _TIME.format("a")
    + r"\s*(?:-|–|—|to|until|till)\s*"
    + _TIME.format("b")
    + r"(?![\w:])",
    re.IGNORECASE,
)
_PLACE = re.compile(r"\b(?:in|at)\s+(?P<v>[^,;()]+?)\s*(?=[,;()]|[.!?](?:\s|$)|$)")
_NONE = re.compile(r"\bno\s+(?P<w>\w+)", re.IGNORECASE)


def weekly_fields(root: Any, items: Any) -> tuple[str, dict[str, str], str, str, str | None]:
    """``(day, options, start, end, place)`` of an array's item schema when it is a
    weekly session (module docstring); ``options`` maps each weekday (``monday``...) to
    the enum option naming it; ``place`` is None where the item has no place field.

    Raises:
        ValueError: the item schema is not of that shape.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        raise ValueError("not an object item")
    day = place = None
    options: dict[str, str] = {}
    clock: list[str] = []
    for key, prop in items["properties"].items():
        sub = _resolve(root, prop)
        kind, _ = field_kind(root, prop)
        if kind == "enum" and day is None:
            named = _weekday_options(sub.get("enum") or ())
            if named is None:
                raise ValueError("an enum that is not of weekdays")
            day, options = key, named
        elif isinstance(sub, dict) and sub.get("type") == "string" and time_field(root, sub):
            clock.append(key)
        elif place is None and free_string_schema(root, prop) is not None:
            if not is_nullable(root, prop):
                raise ValueError("a place that cannot be null")
            place = key
        else:
            raise ValueError(f"field {key!r} of no weekly session part")
    if day is None or len(clock) != 2:
        raise ValueError("no weekday enum or not two times")
    return day, options, clock[0], clock[1], place


def _weekday_options(enum: Any) -> dict[str, str] | None:
    """Each weekday's option (a prefix of three or more letters of its name, any case),
    or None where some option names no weekday or a weekday has two.
    """
    out: dict[str, str] = {}
    for option in enum:
        if option is None:
            continue
        if not isinstance(option, str) or len(option) < 3:
            return None
        days = [d for d in _DAYS if d.startswith(option.lower())]
        if len(days) != 1 or days[0] in out:
            return None
        out[days[0]] = option
    return out if len(out) >= 5 else None


def day_groups(text: str) -> list[tuple[int, int, list[str]]]:
    """The text's runs of weekday names joined by ``,`` ``&`` "and" "or", each as
    ``(start, end, days)``: character offsets of the run and its weekdays (lower-case
    full names) in text order.
    """
    groups: list[tuple[int, int, list[str]]] = []
    for m in _DAY.finditer(text):
        day = m[1].lower()
        if groups and _DAY_JOINER.fullmatch(text[groups[-1][1] : m.start()] or "x") is not None:
            start, _, days = groups[-1]
            groups[-1] = (start, m.end(), days + [day])
        else:
            groups.append((m.start(), m.end(), [day]))
    return groups


def _hhmm(hour: str, minute: str | None, ap: str | None) -> str | None:
    h, mi = int(hour), int(minute or 0)
    if ap:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ap[0].lower() == "p" else 0)
    return f"{h:02d}:{mi:02d}"


def time_ranges(text: str) -> list[tuple[int, int, str, str]]:
    """The text's time ranges ("10:15-11:45", "14:00 to 15:00", "6 pm to 8 pm", "6 to
    8 pm"), each as ``(start, end, first, last)``: character offsets and both times as
    ``HH:MM``. A bare hour needs a.m./p.m. on one side or a minute on the other; an
    end's a.m./p.m. holds for a start written without one.
    """
    out = []
    for m in _RANGE.finditer(text):
        if m["am"] is None and m["aap"] is None and m["bm"] is None and m["bap"] is None:
            continue  # "5-10": two numbers, not a time range
        first = _hhmm(m["ah"], m["am"], m["aap"] or (m["bap"] if m["am"] is None else None))
        last = _hhmm(m["bh"], m["bm"], m["bap"])
        if first is not None and last is not None:
            out.append((m.start(), m.end(), first, last))
    return out


def _place(region: str, field: str) -> tuple[bool, str | None]:
    """``(found, value)``: the place a region writes after its time range, the field's
    name dropped from its front; ``(True, None)`` for "no <field>".
    """
    name = field.lower().replace("_", " ")
    for m in _NONE.finditer(region):
        if m["w"].lower() in (name, name + "s"):
            return True, None
    m = _PLACE.search(region)
    if m is None:
        return False, None
    value = m["v"].strip()
    if value.lower().startswith(name + " "):
        value = value[len(name) + 1 :].strip()
    return True, value or None


def weekly_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of weekly sessions (``weekly_fields``) as the text's day
    groups write them (module docstring), or None: not that shape, a day group without
    a time range, no model item holding one of the times, or a value or count the
    schema refuses.

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
    try:
        day, options, start, end, place = weekly_fields(root, array.get("items"))
    except ValueError:
        return None
    groups = day_groups(text)
    if not groups:
        return None
    ranges = time_ranges(text)
    ends = [m.start() for m in _SENTENCE_END.finditer(text)] + [len(text)]
    out: list[dict] = []
    for k, (_, g_end, days) in enumerate(groups):
        stop = min(e for e in ends if e >= g_end)
        if k + 1 < len(groups):
            stop = min(stop, groups[k + 1][0])
        inside = [r for r in ranges if r[0] >= g_end and r[1] <= stop]
        if not inside:
            return None
        r_start, r_end, first, last = inside[0]
        record: dict = {day: None, start: first, end: last}
        if place is not None:
            found, value = _place(text[r_end:stop], place)
            if not found:
                found, value = _place(text[g_end:r_start], place)
            record[place] = value
        for d in days:
            if d not in options:
                return None
            out.append({**record, day: options[d]})
    held = {v for i in current if isinstance(i, dict) for v in (i.get(start), i.get(end))}
    if not held & {v for r in out for v in (r[start], r[end])}:
        return None
    if len(out) < array.get("minItems", 0) or len(out) > array.get("maxItems", len(out)):
        return None
    props = _resolve(root, array.get("items"))["properties"]
    for record in out:
        for key, value in record.items():
            if not schema_accepts(root, props[key], value):
                return None
    return out


def identified_fields(root: Any, items: Any) -> tuple[str, str, str, str | None]:
    """``(key, name, number, flag)`` of an array's item schema when it is an identified
    record (``identified_items``): one string field with a ``pattern`` (the record's
    identifier), one free string, one number and at most one boolean.

    Raises:
        ValueError: the item schema is not of that shape.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        raise ValueError("not an object item")
    found: dict[str, list[str]] = {"key": [], "name": [], "number": [], "flag": []}
    for key, prop in items["properties"].items():
        sub = _resolve(root, prop)
        kind, _ = field_kind(root, prop)
        if kind == "number":
            found["number"].append(key)
        elif kind == "boolean":
            found["flag"].append(key)
        elif free_string_schema(root, prop) is not None:
            found["name"].append(key)
        elif isinstance(sub, dict) and sub.get("type") == "string" and "pattern" in sub:
            found["key"].append(key)
        else:
            raise ValueError(f"field {key!r} of no identified record part")
    if [len(found[k]) for k in ("key", "name", "number")] != [1, 1, 1] or len(found["flag"]) > 1:
        raise ValueError("not one identifier, one free string and one number")
    flag = found["flag"][0] if found["flag"] else None
    return found["key"][0], found["name"][0], found["number"][0], flag


_LEAD = re.compile(r"^[\s,:;–—-]*(?:(?:with|of|containing|holding)\s+)?", re.IGNORECASE)


def identified_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of identified records (``identified_fields``) read one
    record per place the text writes an identifier (a whole-word match of the field's
    ``pattern``, anchors dropped), its region running to the next identifier or the
    sentence's end: the free string is the region's words after the identifier (a
    leading "with" / "of" / "containing" dropped) up to the first comma, semicolon or
    bracket ("MSKU4417203, frozen cod fillets, 21,450 kg gross": "frozen cod fillets";
    "CAIU7712048 with green coffee in jute bags, twenty-two thousand kilograms": "green
    coffee in jute bags"); the number is the region's first numeral outside brackets
    (first reading); the boolean is true where the region writes the field's name
    outside a negation ("ethanol (UN 1170, class 3, hazardous)"), else the model's value
    for that identifier, else false. Or None: not that shape, fewer than two
    identifiers, an identifier written twice, no identifier among the model's items
    (the anchor), or a value or count the schema refuses.

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
    try:
        key, name, number, flag = identified_fields(root, array.get("items"))
    except ValueError:
        return None
    props = _resolve(root, array.get("items"))["properties"]
    pattern = _resolve(root, props[key]).get("pattern", "")
    body = pattern.removeprefix("^").removesuffix("$")
    try:
        finder = re.compile(rf"(?<![\w-])(?:{body})(?![\w-])")
    except re.error:
        return None
    hits = [m for m in finder.finditer(text) if schema_accepts(root, props[key], m[0])]
    ids = [m[0] for m in hits]
    if len(ids) < 2 or len(set(ids)) != len(ids):
        return None
    model = {i.get(key): i for i in current if isinstance(i, dict)}
    if not set(ids) & set(model):
        return None
    ends = [m.start() for m in _SENTENCE_END.finditer(text)] + [len(text)]
    flag_name = flag.lower().replace("_", " ") if flag else None
    out: list[dict] = []
    for k, m in enumerate(hits):
        stop = min(e for e in ends if e >= m.end())
        if k + 1 < len(hits):
            stop = min(stop, hits[k + 1].start())
        region = text[m.end() : stop]
        lead = _LEAD.match(region)
        rest = region[lead.end() :] if lead else region
        words = re.split(r"[,;()]", rest, maxsplit=1)[0].strip()
        if not words:
            return None
        depth, outside = 0, []
        for ch in region:
            depth += ch == "("
            outside.append(ch if depth == 0 else " ")
            depth -= ch == ")" and depth > 0
        numerals = numeral_spans("".join(outside))
        if not numerals:
            return None
        record = {key: m[0], name: words, number: _plain(numerals[0][2][0])}
        if flag is not None:
            said = flag_name is not None and re.search(
                rf"(?<!\bnot )(?<!\bno )\b{re.escape(flag_name)}\b", region, re.IGNORECASE
            )
            prior = model.get(m[0], {}).get(flag)
            record[flag] = True if said else (prior if isinstance(prior, bool) else False)
        out.append(record)
    if len(out) < array.get("minItems", 0) or len(out) > array.get("maxItems", len(out)):
        return None
    for record in out:
        for field, value in record.items():
            if not schema_accepts(root, props[field], value):
                return None
    return out


def _plain(value: Any) -> int | float:
    """A Decimal as the JSON number it stands for (an int when whole)."""
    return int(value) if value == value.to_integral_value() else float(value)


_FROM_NAMES = ("from", "origin", "departure")
_TO_NAMES = ("to", "destination", "arrival")
# how a text writes each way of travel besides the option's own word
_MODE_WORDS = {
    "bus": ("coach", "coaches"),
    "ferry": ("boat", "sailing"),
    "flight": ("plane", "flies"),
    "train": ("rail",),
}
_LEG = re.compile(
    r"\bfrom\s+(?P<a>[A-ZÀ-Þ][\w'’-]*(?:\s+[A-ZÀ-Þ][\w'’-]*)*)"
    r"\s+to\s+(?P<b>[A-ZÀ-Þ][\w'’-]*(?:\s+[A-ZÀ-Þ][\w'’-]*)*)"
)
_CAPS = re.compile(r"(?<![\w-])[A-ZÀ-Þ][^\W\d_]*(?:\s+[A-ZÀ-Þ][^\W\d_]*)*(?![\w-])")


def leg_fields(root: Any, items: Any) -> dict[str, str]:
    """The parts of an array's item schema when it is a travel leg (``leg_items``), as
    ``{part: field}`` with parts ``from``, ``to`` (free strings whose name's first word
    is from/origin/departure and to/destination/arrival), ``mode`` (an enum, optional),
    ``carrier`` (one more free string, optional), ``date`` (``format: date``), ``time``
    (a time of day, optional) and ``extra`` (a nullable free string, optional).

    Raises:
        ValueError: the item schema is not of that shape.
    """
    items = _resolve(root, items)
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        raise ValueError("not an object item")
    parts: dict[str, str] = {}

    def put(part: str, key: str) -> None:
        if part in parts:
            raise ValueError(f"two {part} fields")
        parts[part] = key

    for key, prop in items["properties"].items():
        sub = _resolve(root, prop)
        kind, _ = field_kind(root, prop)
        first = re.split(r"[_\W]+", key.lower())[0]
        if kind == "enum":
            put("mode", key)
        elif isinstance(sub, dict) and sub.get("format") == "date":
            put("date", key)
        elif isinstance(sub, dict) and sub.get("type") == "string" and time_field(root, sub):
            put("time", key)
        elif free_string_schema(root, prop) is not None:
            if first in _FROM_NAMES:
                put("from", key)
            elif first in _TO_NAMES:
                put("to", key)
            elif is_nullable(root, prop):
                put("extra", key)
            else:
                put("carrier", key)
        else:
            raise ValueError(f"field {key!r} of no travel leg part")
    if not {"from", "to", "date"} <= set(parts):
        raise ValueError("no from, to and date fields")
    return parts


def leg_items(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The items of an array of travel legs (``leg_fields``) read one record per sentence
    that writes one "from X to Y" leg (capitalised place names): ``from`` X, ``to``
    Y; the date the sentence's one date (``structgen.fsm.dates.dates``), or the
    previous leg's where it writes "same day"; the time its first time of day; the
    mode the enum option whose word or a word of ``_MODE_WORDS`` it writes first
    ("Eurostar train ..., coach 5" -> ``train``, "overnight coach" -> ``bus``); the
    carrier its first run of capitalised words, after a label's colon ("Leg two:
    FlixBus N702 ..." -> "FlixBus"); the nullable string the word or code after the
    field's name ("seat 14C" -> "14C"), null where none follows ("seat not yet
    assigned", "no reserved seat"). Or None: not that shape, fewer than two legs, a
    sentence with two legs, a part missing, no model item with a leg's from or to
    (the anchor), or a value or count the schema refuses.

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
    try:
        parts = leg_fields(root, array.get("items"))
    except ValueError:
        return None
    props = _resolve(root, array.get("items"))["properties"]
    starts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)]
    sentences = [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)])]
    out: list[dict] = []
    for sentence in sentences:
        legs = list(_LEG.finditer(sentence))
        if not legs:
            continue
        if len(legs) != 1:
            return None
        leg = legs[0]
        record = {parts["from"]: leg["a"], parts["to"]: leg["b"]}
        found = dates(sentence)
        if len(found) == 1:
            record[parts["date"]] = found[0]
        elif not found and out and re.search(r"\bsame day\b", sentence, re.IGNORECASE):
            record[parts["date"]] = out[-1][parts["date"]]
        else:
            return None
        if "time" in parts:
            clock = [t for t in times(sentence) if len(t) == 5]
            if not clock:
                return None
            record[parts["time"]] = clock[0]
        if "mode" in parts:
            options = [o for o in _resolve(root, props[parts["mode"]]).get("enum") or ()]
            said = sorted(
                (m.start(), o)
                for o in options
                if isinstance(o, str)
                for w in (o, *_MODE_WORDS.get(o.lower(), ()))
                for m in re.finditer(rf"\b{re.escape(w)}\b", sentence, re.IGNORECASE)
            )
            if not said:
                return None
            record[parts["mode"]] = said[0][1]  # the first written
        if "carrier" in parts:
            head = sentence[: leg.start()]
            head = head.split(":", 1)[1] if ":" in head else head
            caps = _CAPS.search(head)
            if caps is None:
                return None
            record[parts["carrier"]] = caps[0]
        if "extra" in parts:
            name = parts["extra"].lower().replace("_", " ")
            m = re.search(rf"\b{re.escape(name)}\s+(?P<v>\w*\d\w*)\b", sentence, re.IGNORECASE)
            record[parts["extra"]] = m["v"] if m else None
        out.append(record)
    if len(out) < 2:
        return None
    ends = {i.get(parts[p]) for i in current if isinstance(i, dict) for p in ("from", "to")}
    if not ends & {r[parts[p]] for r in out for p in ("from", "to")}:
        return None
    if len(out) < array.get("minItems", 0) or len(out) > array.get("maxItems", len(out)):
        return None
    for record in out:
        if set(record) != set(props):
            return None
        for field, value in record.items():
            if not schema_accepts(root, props[field], value):
                return None
    return out


# a three-letter weekday name ("Mon", "Tue.") or a whole one, and what may stand between it
# and its number ("Mon 8.5 h", "Monday: seven hours", "Thursday - ten and a half")
_DAY_ANY = re.compile(
    r"\b(mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:rs?(?:day)?)?|fri(?:day)?"
    r"|sat(?:urday)?|sun(?:day)?)s?\b\.?",
    re.IGNORECASE,
)
_KEY_GAP = re.compile(r"[ \t]*(?:[:=-][ \t]*)?")
_CLAUSE_BREAK = re.compile(r"[;\n]|,(?!\d)|[.!?](?=\s|$)")
_MONTH_AFTER = re.compile(
    r"[ \t]*(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b", re.IGNORECASE
)


def day_number_fields(root: Any, items: Any) -> tuple[str, dict[str, str], str]:
    """``(day, options, number)`` of an array's item schema when it is a *day number*:
    exactly two properties, an enum whose options each name one weekday (``mon`` /
    ``Monday``; ``options`` maps each weekday's full lower-case name to its option) and a
    number. Raises ValueError for any other item schema.
    """
    items = _resolve(root, items)
    props = items.get("properties") if isinstance(items, dict) else None
    if not isinstance(props, dict) or len(props) != 2:
        raise ValueError("not two properties")
    day = number = None
    options: dict[str, str] | None = None
    for key, sub in props.items():
        kind, branch = field_kind(root, sub)
        if kind == "enum" and day is None:
            options = _weekday_options(branch.get("enum") or ())
            day = key if options is not None else None
        elif kind == "number" and number is None:
            number = key
    if day is None or number is None or options is None:
        raise ValueError("no weekday enum and number")
    return day, options, number


def day_number_items(
    root: Any, array: Any, text: str, current: list, spans: list | None = None
) -> list[dict] | None:
    """The items of an array of day numbers (``day_number_fields``: hours per weekday) as
    the text's longest run of day clauses writes them, or None (no change).

    A *day clause* is text between ``;``, a line break, a comma not before a digit or a
    sentence end that names exactly one weekday ("Mon", "Tue.", "Thursday"; a short form
    in lower case, "sat", is another word); it gives the
    record ``{day, number}`` when a numeral (``spans``, "and a half" read: 10.5) follows
    the day name right away (a ``:``, ``=`` or ``-`` between allowed) and is not a date's
    day ("Monday 9 November"); one that gives none ("Wednesday I was off sick") is no
    record but keeps the run going; any other clause ends it. The one longest run of two
    or more records ("Mon 8.5 h, Tue 7.5 h, Wed 9 h"; "Monday seven hours, Tuesday eight,
    Wednesday I was off sick, Thursday ten and a half") replaces the model's array, in
    text order, when its days are distinct, some model item's number is among its numbers
    (an anchor; an empty model array needs none), every number fits the field and the
    count fits ``minItems`` / ``maxItems``.

    Args:
        root: the whole schema (``$ref`` resolution).
        array: the array property's subschema.
        text: the document.
        current: the array's items as extracted.
        spans: the text's numerals (``numeral_spans`` read with ``numbers.with_halves``);
            read from ``text`` when None.

    Returns:
        A new list of item dicts, or None. Raises: never.
    """
    array = _resolve(root, array)
    if not isinstance(array, dict):
        return None
    try:
        day, options, number = day_number_fields(root, array.get("items"))
    except ValueError:
        return None
    if spans is None:
        spans = with_halves(numeral_spans(text), text)
    starts = {s: (e, v) for s, e, v in spans}
    runs: list[list[tuple[str, Any]]] = [[]]
    at = 0
    for brk in [*_CLAUSE_BREAK.finditer(text), None]:
        end = brk.start() if brk is not None else len(text)
        clause_days = [
            m
            for m in _DAY_ANY.finditer(text, at, end)
            if (len(m[1]) > 4 or not m[1].islower()) and _full_day(m[1]) in options
        ]  # "sat", "sun", "wed" in lower case are other words
        at = brk.end() if brk is not None else end
        if len(clause_days) != 1:
            if runs[-1]:
                runs.append([])
            continue
        m = clause_days[0]
        gap = _KEY_GAP.match(text, m.end())
        found = starts.get(gap.end())
        if found is None or _MONTH_AFTER.match(text, found[0]) or len(found[1]) != 1:
            continue  # "Wednesday I was off sick": no record, the run goes on
        runs[-1].append((options[_full_day(m[1])], found[1][0]))
    best = sorted((r for r in runs if len(r) >= 2), key=len, reverse=True)
    if not best or len(best) > 1 and len(best[1]) == len(best[0]):
        return None
    run = best[0]
    if len({d for d, _ in run}) != len(run):
        return None
    held = {
        i.get(number)
        for i in current
        if isinstance(i, dict) and isinstance(i.get(number), (int, float))
    }
    if current and not any(h == v for h in held for _, v in run):
        return None
    if len(run) < array.get("minItems", 0) or len(run) > array.get("maxItems", len(run)):
        return None
    prop = _resolve(root, array.get("items"))["properties"][number]
    out = [{day: d, number: _plain(v)} for d, v in run]
    if not all(schema_accepts(root, prop, r[number]) for r in out):
        return None
    return out


def _full_day(prefix: str) -> str:
    """The full lower-case weekday name a three-letter prefix starts."""
    return next(d for d in _DAYS if d.startswith(prefix.lower()))


# units a number field's last name word may name, with the words the text writes them as
_UNIT_WORDS = {
    "mg": ("mg", "milligram", "milligrams"),
    "g": ("g", "gram", "grams"),
    "kg": ("kg", "kilo", "kilos", "kilogram", "kilograms"),
    "ml": ("ml", "millilitre", "millilitres", "milliliter", "milliliters"),
    "l": ("l", "litre", "litres", "liter", "liters"),
    "km": ("km", "kilometre", "kilometres", "kilometer", "kilometers"),
    "mm": ("mm", "millimetre", "millimetres", "millimeter", "millimeters"),
    "cm": ("cm", "centimetre", "centimetres", "centimeter", "centimeters"),
    "mcg": ("mcg", "µg", "microgram", "micrograms"),
}
_MAX_UNIT_GAP = 2  # most words between an item's name and its numeral


def unit_numbers(root: Any, array: Any, text: str, current: list) -> list[dict] | None:
    """The model's items with each number field named for a unit (its name's last word
    ``mg``, ``kg``, ``ml``, ``km``, ...: ``dose_mg``) set to the numeral the text writes
    with that unit right after the item's one free string value ("metformin 500 mg,
    atorvastatin 20 mg": ``dose_mg`` 500 for "metformin"; at most two words between the
    value and the numeral, the unit right after the numeral), where every occurrence of
    the value gives the same numeral, its reading fits the field and the model's number
    differs; None where nothing changes. Raises: never.
    """
    array = _resolve(root, array)
    items = _resolve(root, array.get("items")) if isinstance(array, dict) else None
    if not isinstance(items, dict) or not isinstance(items.get("properties"), dict):
        return None
    props = items["properties"]
    strings = [k for k, p in props.items() if free_string_schema(root, p) is not None]
    units = {}
    for key, prop in props.items():
        last = re.split(r"[_\W]+", key.lower())[-1]
        if field_kind(root, prop)[0] == "number" and last in _UNIT_WORDS and "_" in key:
            units[key] = _UNIT_WORDS[last]
    if len(strings) != 1 or not units:
        return None
    (name,) = strings
    out, changed = [], False
    for item in current:
        if not isinstance(item, dict) or not isinstance(item.get(name), str) or not item[name]:
            out.append(item)
            continue
        new = dict(item)
        for key, words in units.items():
            found = _unit_after(text, item[name], words)
            if found is None:
                continue
            fit = [v for v in found if accepts_number(_resolve(root, props[key]), v)]
            if fit and (not isinstance(item.get(key), (int, float)) or fit[0] != item[key]):
                new[key] = _plain(fit[0])
                changed = True
        out.append(new)
    return out if changed else None


def _unit_after(text: str, value: str, words: tuple[str, ...]) -> tuple | None:
    """The readings of the numeral the text writes with one of ``words`` right after it,
    at most ``_MAX_UNIT_GAP`` words after each occurrence of ``value`` (whole words, case
    ignored); None where an occurrence gives none or two give different ones.
    """
    unit = "|".join(re.escape(w) for w in words)
    found = None
    for m in re.finditer(r"(?<!\w)" + re.escape(value) + r"(?!\w)", text, re.IGNORECASE):
        rest = text[m.end() : m.end() + 60]
        gap = re.match(r"(?:\s+[^\W\d][\w'-]*){0,%d}\s+" % _MAX_UNIT_GAP, rest)
        start = gap.end() if gap is not None else 0
        spans = numeral_spans(rest[start:])
        if not spans or spans[0][0] != 0:
            return None
        a, b, readings = spans[0]
        if not re.match(r"\s*(?:" + unit + r")\b", rest[start + b :], re.IGNORECASE):
            return None
        if found is not None and found != readings:
            return None
        found = readings
    return found
