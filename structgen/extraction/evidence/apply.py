"""The evidence pass's driver: ``apply_evidence`` runs the rules over one object.

Each object of the schema is walked once: the boolean, enum and number rules in schema
order (``options``, ``numbers``), then per field the amount, identifier, phone, separator,
span-start, name-run, label, appositive and place-list rules, then the repeat, range,
string repeat, sibling-cut, honorific and date order rules, then per field the foreign
numeral, phone fragment and e-mail shape rules, then the contact rule (``contacts``), then
the null rules (``nulls``); last, unsupported array items are dropped
(``items.trim_items``) and arrays of counted goods, measurements, keyed values and quoted
titles read from their phrases, clauses and runs (``counted``). The rules: the package docstring,
``structgen.extraction.evidence``.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import jsonschema

from structgen.extraction.evidence.contacts import address_town, contact_object
from structgen.extraction.evidence.counted import (
    counted_items,
    dosed_items,
    measured_items,
    pair_items,
    quoted_items,
    unit_items,
)
from structgen.extraction.evidence.dates import (
    date_range,
    dates_in_order,
    named_date,
    nested_dates_in_order,
    relative_date,
    renamed_date,
    stated_order,
)
from structgen.extraction.evidence.fields import field_kind, is_nullable, schema_accepts
from structgen.extraction.evidence.names import (
    after_honorific,
    appositive_role,
    capital_run,
    dangling_cut,
    date_tail,
    label_word_cut,
    place_list,
    possessive_cut,
    sentence_cut,
    sibling_cut,
)
from structgen.extraction.evidence.nulls import (
    clear_field,
    clearable,
    copied_nulls,
    denied_items,
    denied_string,
    placeholder,
)
from structgen.extraction.evidence.numbers import (
    all_negated,
    amount_value,
    assign_numbers,
    dated_numerals,
    denied_count,
    denied_number,
    duration_value,
    foreign_value,
    grouped_reading,
    marked_numerals,
    number_candidates,
    range_values,
    repeated_numbers,
    stated_zero,
    total_value,
    unit_value,
    unmarked_numerals,
    with_halves,
)
from structgen.extraction.evidence.options import (
    NONE_OPTIONS,
    bool_value,
    enum_items,
    enum_value,
)
from structgen.extraction.evidence.records import (
    day_number_items,
    identified_items,
    leg_items,
    unit_numbers,
    weekly_items,
)
from structgen.extraction.evidence.roles import role_name, swapped_roles
from structgen.extraction.evidence.rows import amount_fields, amount_items, cell_items, row_items
from structgen.extraction.evidence.strings import (
    email_shape,
    host_value,
    iban_value,
    identifier_shape,
    identifier_value,
    invented_email,
    label_list,
    label_value,
    not_a_phone,
    pattern_shape,
    phone_value,
    repeated_strings,
    spaced_identifier,
    span_end,
    span_start,
    times_in_order,
    uri_shape,
)
from structgen.extraction.evidence.text import TextWords, name_stems
from structgen.extraction.items import trim_items
from structgen.extraction.labels import amount_spans, foreign_spans
from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import date_spans
from structgen.fsm.numerals import numeral_spans


def apply_evidence(schema: Any, text: str, value: Any) -> tuple[Any, list[str]]:
    """One finished object with its boolean, number and enum fields decided by the
    text's mentions of their names and options, and its arrays' unsupported items
    dropped (package docstring).

    Args:
        schema: the JSON Schema (a dict) ``value`` is valid under.
        text: the document the object was extracted from.
        value: the extracted object (a dict; anything else is returned as it is).

    Returns:
        ``(object, changed)``: the object (a new dict where a field changed) and the
        dotted paths of the fields changed, in schema order (arrays trimmed last).
    """
    if not isinstance(schema, dict) or not isinstance(value, dict):
        return value, []
    doc = TextWords(text)
    spans = with_halves(numeral_spans(text), text)  # "ten and a half": 10.5
    amounts = amount_spans(text)
    dates = date_spans(text)
    foreign = (foreign_spans(text), foreign_spans(text, identifiers=False))
    out = json.loads(json.dumps(value))
    changed: list[str] = []

    def walk(sub: Any, node: dict, path: str, depth: int) -> None:
        sub = _resolve(schema, sub)
        if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
            return
        pointed: dict[str, list] = {}  # number field -> the numerals its mentions point at
        denied_numbers: set[str] = set()  # fields the text denies ("no reduction"): null
        for name, prop in (sub.get("properties") or {}).items():
            kind, branch = field_kind(schema, prop)
            stems = name_stems(name)
            if name not in node and kind == "number" and stems:
                # left out: the numeral right after the field's name ("wind 20 km/h")
                pointed[name] = number_candidates(
                    doc,
                    spans,
                    stems,
                    branch,
                    window=1,
                    name_first=True,
                    skip=dated_numerals(name, spans, dates),
                )
                continue
            if name not in node and kind != "enum":
                continue
            if kind == "boolean" and isinstance(node[name], bool):
                found = bool_value(doc, stems)
                if found is not None and found != node[name]:
                    node[name] = found
                    changed.append(path + name)
            elif kind == "enum" and (node.get(name) is None or isinstance(node[name], str)):
                options = list(dict.fromkeys(o for o in branch["enum"] if isinstance(o, str)))
                nullable = is_nullable(schema, prop)
                nothing = nullable or not NONE_OPTIONS.isdisjoint(
                    o.strip().lower() for o in options
                )
                absent = nothing and bool_value(doc, stems) is False  # "no cabin"
                denied = nullable and absent
                decided, found_e = enum_value(doc, options, node.get(name), denied, stems, absent)
                if decided:
                    node[name] = found_e
                    changed.append(path + name)
            elif kind == "number" and stems and stated_zero(doc, stems, schema, prop, full=True):
                if node[name] != 0:  # "Joining fee: waived (normally £30)"
                    node[name] = 0
                    changed.append(path + name)
                denied_numbers.add(name)  # no currency-marked numeral fills it again
            elif kind == "number" and stems:
                skip = dated_numerals(name, spans, dates)  # no 14 of "14 August" for days
                skip |= unmarked_numerals(stems, spans, amounts, text)  # money takes no year
                marked = marked_numerals(stems, spans, amounts)  # money: marked first
                pointed[name] = number_candidates(
                    doc, spans, stems, branch, skip=skip, marked=marked
                )
                if pointed[name]:
                    continue  # decided below, one numeral to one field
                if node[name] is not None and denied_number(doc, stems, schema, prop):
                    node[name] = None
                    changed.append(path + name)
                    denied_numbers.add(name)  # no currency-marked numeral fills it again
                elif node[name] != 0 and denied_count(doc, stems, schema, prop):
                    node[name] = 0  # "no checked baggage": a count the text denies
                    changed.append(path + name)
                    denied_numbers.add(name)  # "didn't leave a deposit": no amount refills it
                elif node[name] != 0 and stated_zero(doc, stems, schema, prop):
                    node[name] = 0  # "Joining fee: waived", "Deposit: none required"
                    changed.append(path + name)
                    denied_numbers.add(name)  # no currency-marked numeral fills it again
            elif denied_string(schema, sub, name, prop, node[name], doc):
                # denied string: "No email given", "she left no email"
                clear_field(schema, prop, node, name)
                changed.append(path + name)
            elif isinstance(node[name], dict):
                if stems and is_nullable(schema, prop) and all_negated(doc, stems):
                    node[name] = None  # denied object: "standing ticket, no seat"
                    changed.append(path + name)
                    continue
                walk(prop, node[name], f"{path}{name}.", depth + 1)
            elif isinstance(node[name], list):  # items: the enum-array and string repeat rules
                arr = _resolve(schema, prop)
                items = _resolve(schema, arr.get("items")) if isinstance(arr, dict) else None
                if node[name] and denied_items(doc, stems) and schema_accepts(schema, prop, []):
                    node[name] = []  # denied array: "No apologies.", "Apologies: none"
                    changed.append(path + name)
                    continue
                mentioned = enum_items(doc, items, arr, node[name]) if items else None
                if mentioned is not None:
                    node[name] = mentioned
                    changed.append(path + name)
                listed = label_list(schema, sub, name, node, text)
                if listed is not None:  # "Attending: Åsa Lindqvist, Henrik Berg"
                    node[name] = listed
                    changed.append(path + name)
                for i, item in enumerate(node[name]):
                    if isinstance(items, dict) and isinstance(item, dict):
                        for key, new in repeated_strings(schema, items, item, doc).items():
                            item[key] = new
                            changed.append(f"{path}{name}[{i}].{key}")
        # one numeral, one field: the fuller, nearer mention takes it; a tie leaves both
        # fields to the model
        for name, num in assign_numbers(pointed).items():
            new: Any = _plain(num)
            current = node.get(name)
            if isinstance(current, bool) or (
                isinstance(current, (int, float)) and Decimal(str(current)) == num
            ):
                continue
            node[name] = new
            changed.append(path + name)
        for name, prop in (sub.get("properties") or {}).items():
            amount = total_value(schema, prop, name, node.get(name), amounts, text)
            if amount is None:
                amount = amount_value(schema, prop, name, node.get(name), amounts)
            if amount is not None and name not in denied_numbers:
                node[name] = _plain(amount)
                changed.append(path + name)
            labelled = identifier_value(schema, prop, name, node.get(name), text)
            labelled = labelled or iban_value(schema, prop, name, node.get(name), text)
            labelled = labelled or phone_value(schema, prop, name, node.get(name), text)
            labelled = labelled or identifier_shape(schema, sub, name, node, text)
            labelled = labelled or host_value(schema, sub, name, node, text)
            if labelled is not None:
                node[name] = labelled
                changed.append(path + name)
            grouped = grouped_reading(schema, prop, node.get(name), spans)
            if grouped is not None:
                node[name] = int(grouped)
                changed.append(path + name)
            in_unit = unit_value(schema, prop, name, node.get(name), text, spans)
            if in_unit is None:  # "for 7 days" for ``duration_days`` left null or out
                in_unit = duration_value(schema, prop, name, node.get(name), text, spans)
            if in_unit is not None:  # "two years" for ``warranty_months``: 24
                node[name] = _plain(in_unit)
                changed.append(path + name)
            started = span_start(schema, prop, node.get(name), text)
            if started is not None:
                node[name] = started
                changed.append(path + name)
            ended = span_end(schema, prop, node.get(name), text)
            if ended is not None:  # "5.0.0-beta" of "5.0.0-beta.3"
                node[name] = ended
                changed.append(path + name)
            cut = sentence_cut(schema, prop, node.get(name), text)
            if cut is not None:  # "Sparse retrieval at scale. Journal of ..."
                node[name] = cut
                changed.append(path + name)
            cut = (
                date_tail(schema, prop, node.get(name))
                or possessive_cut(schema, prop, node.get(name), name)
                or dangling_cut(schema, prop, node.get(name))
            )
            if cut is not None:  # "Toronto on Feb 21st", "Greg Hollis's 7-year-old Labrador"
                node[name] = cut
                changed.append(path + name)
            spaced = spaced_identifier(schema, prop, node.get(name), text)
            if spaced is not None:
                node[name] = spaced
                changed.append(path + name)
            unlabelled = label_word_cut(schema, prop, name, node.get(name))
            if unlabelled is not None:  # "Patient Øyvind Hansen" for ``patient_name``
                node[name] = unlabelled
                changed.append(path + name)
            run = (
                capital_run(schema, sub, name, node, text)
                or label_value(schema, sub, name, node, text)
                or role_name(schema, sub, name, node, text)
                or address_town(schema, sub, name, node, text)
                or named_date(schema, sub, name, node, doc)
                or renamed_date(schema, sub, name, node, doc)
                or appositive_role(schema, sub, name, node, text)
                or place_list(schema, sub, name, node, text)
            )
            if run is not None:
                node[name] = run
                changed.append(path + name)
        for name, num in repeated_numbers(schema, sub, node, doc, spans).items():
            node[name] = _plain(num)
            changed.append(path + name)
        owner = path[:-1].rsplit(".", 1)[-1] if path else ""
        for name, num in range_values(schema, sub, node, doc, spans, owner).items():
            node[name] = _plain(num)
            changed.append(path + name)
        for name, new_s in repeated_strings(schema, sub, node, doc).items():
            node[name] = new_s
            changed.append(path + name)
        for name, new_s in sibling_cut(schema, sub, node, text).items():
            node[name] = new_s
            changed.append(path + name)
        for name, new_s in swapped_roles(schema, sub, node, doc).items():
            node[name] = new_s  # "Home: Tampere Lynx" held by ``away_team``
            changed.append(path + name)
        for name, prop in (sub.get("properties") or {}).items():
            titled = after_honorific(schema, prop, node.get(name))
            if titled is not None:
                node[name] = titled
                changed.append(path + name)
        for name, new_d in date_range(schema, sub, node, text).items():
            node[name] = new_d  # "Period: 01.09.2026 - 30.09.2026" for both ends
            changed.append(path + name)
        for name, new_d in dates_in_order(schema, sub, node, text).items():
            node[name] = new_d
            changed.append(path + name)
        for name, new_r in relative_date(schema, sub, node, text).items():
            node[name] = new_r  # "Submitted 02/02/2027 ... When: yesterday"
            changed.append(path + name)
        for name, new_t in times_in_order(schema, sub, node, text).items():
            node[name] = new_t  # "from 5:30pm ... out by 10:45pm": start and end
            changed.append(path + name)
        for name, prop in (sub.get("properties") or {}).items():
            stated = stated_order(schema, prop, node.get(name), text)
            if stated is not None:  # "03/02/2026 (DD/MM/YYYY)" read month first
                node[name] = stated
                changed.append(path + name)
        for name, prop in (sub.get("properties") or {}).items():
            decided, num_f = foreign_value(schema, prop, name, node, spans, foreign)
            if decided:  # a numeral of a phone, e-mail, identifier or date: not this field
                node[name] = None if num_f is None else _plain(num_f)
                changed.append(path + name)
            elif not_a_phone(schema, prop, name, node.get(name), text) and clearable(
                schema, sub, name, prop
            ):
                clear_field(schema, prop, node, name)  # "1" of "June 1" is no phone number
                changed.append(path + name)
            else:  # an e-mail field holding no address: "email": "Carlos Diaz"
                shaped, address = email_shape(schema, sub, name, node, text)
                if not shaped:  # a URI field holding no URL of the text: "keynote:"
                    shaped, address = uri_shape(schema, sub, name, node, text)
                if not shaped:  # an address the text does not write: invented
                    shaped, address = invented_email(schema, sub, name, node, text)
                if not shaped:  # a patterned identifier the text does not write: a DOI
                    shaped, address = pattern_shape(schema, sub, name, node, doc)
                if shaped and address is not None:
                    node[name] = address
                    changed.append(path + name)
                elif shaped and clearable(schema, sub, name, prop):
                    clear_field(schema, prop, node, name)
                    changed.append(path + name)
        for name in sub.get("properties") or {}:
            contact = contact_object(schema, sub, name, node, doc)
            if contact is not None:  # "Call Hannah Wright, 0113 496 0000": the agent
                node[name] = contact
                changed.append(path + name)
        for name, prop in (sub.get("properties") or {}).items():
            if placeholder(schema, prop, node.get(name)) and clearable(schema, sub, name, prop):
                clear_field(schema, prop, node, name)  # "Breed unknown": no breed
                changed.append(path + name)
        copied = copied_nulls(schema, sub, node, doc, text, spans)
        for name in copied:  # a sibling's value for a field the text never names
            node[name] = None
            changed.append(path + name)
        _schema_order(node, sub.get("properties") or {})

    walk(schema, out, "", 0)
    changed += nested_dates_in_order(schema, schema, out, text)
    checker = jsonschema.validators.validator_for(schema)(schema)
    if not changed or not checker.is_valid(out):
        out, changed = value, []
    trimmed, dropped = trim_items(schema, text, out)
    trimmed, counted = _counted(schema, text, trimmed, checker)
    return trimmed, list(dict.fromkeys(changed + dropped + counted))  # changed twice: once


def _schema_order(node: dict, props: dict) -> None:
    """Put ``node``'s schema properties back in the schema's order, in place (a field a
    rule added went to the end); other keys keep their places. The grammar writes an
    object's members in the order of its ``properties``, so ``raw_text`` (the JSON of the
    value) stays a text the schema's grammar accepts.
    """
    rank = {name: i for i, name in enumerate(props)}
    slots = [i for i, key in enumerate(node) if key in rank]
    named = sorted((key for key in node if key in rank), key=rank.__getitem__)
    keys = list(node)
    if all(keys[i] == key for i, key in zip(slots, named)):
        return
    for i, key in zip(slots, named):
        keys[i] = key
    items = {key: node[key] for key in keys}
    node.clear()
    node.update(items)


def _counted(schema: dict, text: str, value: dict, checker: Any) -> tuple[dict, list[str]]:
    """``value`` with each top-level array of counted goods, measurements, keyed values,
    quoted titles, measured or dosed goods, weekly sessions, identified records, travel
    legs, day numbers, table rows or labelled amounts read from the text
    (``counted.counted_items``, ``measured_items``,
    ``pair_items``, ``quoted_items``, ``unit_items``, ``dosed_items``,
    ``records.weekly_items``, ``identified_items``, ``leg_items``, ``day_number_items``,
    ``rows.row_items``, ``amount_items``),
    kept only where the whole object stays valid.
    """
    props = _resolve(schema, schema).get("properties") or {}
    out, changed = value, []
    for name, prop in props.items():
        current = out.get(name)
        if not isinstance(current, list):
            continue
        new = counted_items(schema, prop, text, current)
        if new is None:
            new = measured_items(schema, prop, text, current)
        if new is None:
            new = pair_items(schema, prop, text, current)
        if new is None:
            new = quoted_items(schema, prop, text, current)
        if new is None:
            new = unit_items(schema, prop, text, current)
        if new is None:
            new = dosed_items(schema, prop, text, current)
        if new is None:
            new = weekly_items(schema, prop, text, current)
        if new is None:
            new = identified_items(schema, prop, text, current)
        if new is None:
            new = leg_items(schema, prop, text, current)
        if new is None:
            new = day_number_items(schema, prop, text, current)
        if new is None:
            new = row_items(schema, prop, text, current)
        if new is None:
            listed = [k for k, p in props.items() if amount_fields(schema, _items_of(schema, p))]
            new = amount_items(schema, prop, text, current, listed, name)
        if new is None:
            new = cell_items(schema, prop, text, current)
        if new is None:  # no records read: the model's items, numbers by their unit
            new = unit_numbers(schema, prop, text, current)
        if new is None or new == current:
            continue
        trial = dict(out)
        trial[name] = new
        if checker.is_valid(trial):
            out, changed = trial, changed + [name]
    return out, changed


def _items_of(schema: dict, prop: Any) -> Any:
    """An array property's ``items`` subschema (None for anything else)."""
    prop = _resolve(schema, prop)
    return prop.get("items") if isinstance(prop, dict) else None


def _plain(num: Decimal) -> int | float:
    """A Decimal as the JSON number it stands for (an int when whole)."""
    return int(num) if num == num.to_integral_value() else float(num)
