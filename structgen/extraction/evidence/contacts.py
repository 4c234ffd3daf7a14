"""The contact and address-town rules of ``structgen.extraction.evidence``.

A contact object the model left null takes the one phone number the text writes and the
name written right before it. A listing's ``agent`` (``{"name", "phone"}``) is a person
the text names next to a phone number ("Call Hannah Wright, 0113 496 0000, to arrange a
viewing"; "Agent: Lukas Frei, 061 555 12 34"); a 135M model often writes ``null`` for the
whole object although both values are there. ``contact_object`` reads them from the text.
A town field holding an address's street or postcode takes that address's town
(``address_town``).
"""

from __future__ import annotations

import re
from typing import Any

from structgen.extraction.evidence.fields import free_string_schema, is_nullable, schema_accepts
from structgen.extraction.evidence.names import SENTENCE_START_STRICT, is_name_word
from structgen.extraction.evidence.options import bool_value
from structgen.extraction.evidence.text import TextWords, name_stems
from structgen.extraction.labels import phone_field, phone_spans
from structgen.extraction.refs import resolve as _resolve

# between a name and its phone number: a comma, or "on", "at", "reachable at", "tel."
_JOINER = re.compile(r",? (?:(?:on|at|reachable|via|phone|tel)\.?:? )*\Z", re.I)
_MAX_NAME_WORDS = 3
_LAST_WORD = re.compile(r"(?<![\w'’&-])([^\W\d_][\w'’&-]*)\Z")  # a whole word ending the text


def _name_before(text: str, end: int) -> str | None:
    """The two or three capitalised name words (``names.is_name_word``) the text writes
    right before offset ``end`` (one space between them), less a first word that starts a
    sentence ("Call Hannah Wright"; not one after a label's colon, "Agent: Lukas Frei"),
    or None.
    """
    words: list[int] = []  # start offsets
    pos = end
    while len(words) < _MAX_NAME_WORDS:
        m = _LAST_WORD.search(text, 0, pos)
        if m is None or not is_name_word(m.group(1)):
            break
        words.insert(0, m.start(1))
        if m.start(1) < 2 or text[m.start(1) - 1] != " " or text[m.start(1) - 2] == " ":
            break
        pos = m.start(1) - 1
    if words and SENTENCE_START_STRICT.search(text, 0, words[0]):
        words = words[1:]  # "Call Hannah Wright": a sentence's first word is capitalised anyway
    return text[words[0] : end] if len(words) >= 2 else None


def contact_object(root: Any, sub: dict, name: str, node: dict, doc: TextWords) -> dict | None:
    """For a nullable object field the model left null or out whose properties are one
    free string field named for a name (a key with the word ``name``) and one phone field
    (``labels.phone_field``), both required, the object of the name and the phone number
    the text writes right after it (a comma, "on", "at", "reachable at" between), when the
    text writes exactly one phone number, no other string field of ``node`` holds it, the
    text does not mention the field's name only negated ("Private sale, no agent"), and
    the schema accepts the object; else None.
    """
    prop = _resolve(root, (sub.get("properties") or {}).get(name))
    if node.get(name) is not None or not isinstance(prop, dict) or not is_nullable(root, prop):
        return None
    props = prop.get("properties") or {}
    if len(props) != 2 or set(prop.get("required") or ()) != set(props):
        return None
    name_keys = [
        k for k in props if "name" in k.lower().split("_") and free_string_schema(root, props[k])
    ]
    phone_keys = [k for k in props if phone_field(k)]
    if len(name_keys) != 1 or len(phone_keys) != 1 or name_keys == phone_keys:
        return None
    if bool_value(doc, name_stems(name)) is False:
        return None  # "no agent"
    text = doc.text
    spans = phone_spans(text)
    if len({text[a:b] for a, b in spans}) != 1:
        return None
    held = {v for v in node.values() if isinstance(v, str)}
    if text[spans[0][0] : spans[0][1]] in held:
        return None
    found = set()
    for start, end in spans:
        joiner = _JOINER.search(text, max(0, start - 40), start)
        person = _name_before(text, joiner.start()) if joiner else None
        if person is not None:
            found.add((person, text[start:end]))
    if len(found) != 1:
        return None
    ((person, phone),) = found
    new = {name_keys[0]: person, phone_keys[0]: phone}
    new = {k: new[k] for k in props}  # the schema's order
    return new if schema_accepts(root, prop, new) else None


# an address as a text writes it: a street with its house number ("9 Birchcliffe Terrace",
# "Stadthausstrasse 4a"), then ", ", the town (one to three capitalised words) and a
# postcode before or after it ("Halifax HX7 8DB", "34119 Kassel", "Sarasota, FL 34231")
_POSTCODE = r"[A-Z0-9]*[0-9][A-Z0-9-]*(?: [A-Z0-9]*[0-9][A-Z0-9]*)?"
_TOWN = r"[^\W\d_](?:[^\W\d_]|['’-])*(?: [^\W\d_](?:[^\W\d_]|['’-])*){0,2}"
_END = r"(?=[ \t]*(?:[,.;)|\n]|\Z))"
_HOUSE_AFTER = re.compile(r"[ \t]+[0-9]+[a-zA-Z]?(?![\w-])")  # "Stadthausstrasse 4a"
_HOUSE_BEFORE = re.compile(r"(?<![\w-])[0-9]+[a-zA-Z]?,?[ \t]+\Z")  # "9 Birchcliffe Terrace"
_TOWN_AFTER_STREET = re.compile(
    rf",[ \t]+(?:(?P<pc1>{_POSTCODE})[ \t]+(?P<t1>{_TOWN}){_END}"
    rf"|(?P<t2>{_TOWN})(?:,?[ \t]+[A-Z]{{2}})?[ \t]+(?P<pc2>{_POSTCODE}){_END})"
)
_TOWN_AFTER_POSTCODE = re.compile(rf"[ \t]+(?P<t>{_TOWN}){_END}")
_WHOLE_POSTCODE = re.compile(rf"{_POSTCODE}\Z")


def address_town(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The address-town rule of the package docstring: for a free string field named for
    a town (a word of its name ``city`` or ``town``) whose value the text writes as an
    address's street (a house number right before or after it: "9 Birchcliffe Terrace",
    "Stadthausstrasse 4a") or postcode ("84000"), the town that address writes: after the
    street, ", ", the town with a postcode before or after it ("9 Birchcliffe Terrace,
    Halifax HX7 8DB": "Halifax"; "Wilhelmshöher Allee 190, 34119 Kassel": "Kassel"); after
    the postcode, its town ("84000 Avignon"). Returns the town when every occurrence of
    the value gives the same one and the schema accepts it; else None (no change).
    """
    props = sub.get("properties") or {}
    branch = free_string_schema(root, props.get(name))
    value = node.get(name)
    if branch is None or not isinstance(value, str) or not value.strip():
        return None
    if not {"cit", "town"}.intersection(name_stems(name)):
        return None
    value = value.strip()
    is_postcode = _WHOLE_POSTCODE.match(value) is not None
    found: set[str] = set()
    for m in re.finditer(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text):
        end = m.end()
        if is_postcode:
            town = _TOWN_AFTER_POSTCODE.match(text, end)
            found.add(town.group("t") if town else "")
            continue
        house = _HOUSE_AFTER.match(text, end)
        if house is None and _HOUSE_BEFORE.search(text, 0, m.start()) is None:
            found.add("")  # written as no street here
            continue
        town = _TOWN_AFTER_STREET.match(text, house.end() if house else end)
        found.add((town.group("t1") or town.group("t2")) if town else "")
    if len(found) != 1 or "" in found:
        return None
    (new,) = found
    if not all(is_name_word(w) for w in new.split(" ")) or new == value:
        return None
    return new if schema_accepts(root, branch, new) else None
