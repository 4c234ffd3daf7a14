"""The string rules of ``structgen.extraction.evidence``.

A value the text writes only inside longer chunks starts where the chunk starts
(``span_start``) and ends where it ends (``span_end``), and an identifier it writes only
before spaced digit groups ends after them (``spaced_identifier``: "KA-JM" of "KA-JM
2281"); a patterned field repeating a sibling's value takes the next word
(``repeated_strings``); an identifier field takes the one identifier after its label
(``identifier_value``), or, holding no digit, the one identifier the text writes that
no sibling holds (``identifier_shape``), a host-name field the one host name
(``host_value``) and a phone field the one phone number (``phone_value``), all read by
``structgen.extraction.labels``, and holds no fragment of another number
(``not_a_phone``); a free string field left null, or holding a string unrelated to it,
takes the value after the one label naming it (``label_value``); a ``format: uri`` field
holds a URL the text writes (``uri_shape``), an e-mail field no address the text does
not write (``invented_email``); time fields holding one time take the text's times in
order (``times_in_order``). Where a copied name starts and ends (name run, place
list, sibling cut, honorific): ``names.py``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jsonschema

from structgen.extraction.evidence.dates import time_field
from structgen.extraction.evidence.fields import (
    free_string_schema,
    schema_accepts,
    string_schema,
)
from structgen.extraction.evidence.text import (
    GAP_REPEAT,
    JOINED,
    TextWords,
    name_stems,
    stem,
    stems_match,
)
from structgen.extraction.labels import (
    email_addresses,
    email_field,
    host_field,
    host_names,
    iban_field,
    iban_runs,
    identifier_candidates,
    identifier_chunks,
    identifier_field,
    identifier_head,
    phone_field,
    phone_runs,
    spaced_end,
)
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import times

# a title written before a name with its full stop ("Mr. Henrik Lund", "Prof. Dr. ...")
_TITLE = r"(?:Mr|Mrs|Ms|Mx|Dr|Prof|Mme)"
# "Label: value" between separators (start of text, "|", ";", "·", a line break or a
# sentence end before; a separator or ", " after; a title's full stop ends no value: "Owner:
# Mr. Henrik Lund"); the label may carry a bracketed gloss
# before its colon ("Lejer (tenant): ..."), and the value a bracketed note after it
# ("Landlord: Haveforeningen Solsikken (CVR 29417703)"): groups label, gloss, value
_LABEL = re.compile(
    r"(?:\A|[|;·\n]|[.!?] )[ \t]*([^\W\d_][^\W\d_ ]*(?: [^\W\d_]+){0,2})"
    r"(?:[ \t]*\(([^\W\d_]+(?: [^\W\d_]+){0,2})\))?:[ \t]+"
    rf"((?:{_TITLE}\.[ \t]+)*[^|;·\n,.:()]*[^\W_](?:\.[^\W_]+)*)(?:[ \t]*\([^()\n]*\))?[ \t]*"
    r"(?=\Z|[|;·\n,]|[.!?](?:\s|\Z))"
)
# a label's last word that names no field but the thing itself ("Tenant name",
# "Lending institution"): dropped before the label's words are matched to a field's
_LABEL_HEADS = frozenset({"name", "institution", "organisation", "organization"})

_WORD_CHAR_RUN = re.compile(r"[^\W_]+")
# an identifier's run past a comma into the next phrase's lowercase words ("H-42, areal")
_CLAUSE_AFTER_ID = re.compile(r",[ \t]+[a-z][^,]*\Z")

# a URL as a text writes it: a scheme, "://", then no space or quote (trailing sentence
# punctuation is not part of it: ``urls``)
_URL = re.compile(r"(?<![\w+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"'`]+")

_URI_FORMATS = frozenset({"uri", "iri"})


def repeated_strings(root: Any, sub: dict, node: dict, doc: TextWords) -> dict[str, str]:
    """The string repeat rule of the package docstring: ``{field: new value}`` for the
    string fields with a ``pattern`` of one object that repeat an earlier sibling's
    value the text writes once (as one word), each taking the first word the text writes
    after it, in the same clause with at most ``GAP_REPEAT`` words between, that the
    field's schema accepts and no sibling holds.
    """
    found: dict[str, str] = {}
    held: list[str] = []  # string siblings so far, schema order
    for name, prop in (sub.get("properties") or {}).items():
        branch = _resolve(root, prop)
        current = node.get(name)
        if not isinstance(current, str) or not isinstance(branch, dict):
            continue
        earlier = current in held
        held.append(current)
        if not earlier or "pattern" not in branch or "enum" in branch or "const" in branch:
            continue
        places = [k for k, (_, a, b, _) in enumerate(doc.words) if doc.text[a:b] == current]
        if len(places) != 1:
            continue  # written twice (both may be right) or not as one word
        k = places[0]
        clause = doc.words[k][3]
        for j in range(k + 1, min(len(doc.words), k + 2 + GAP_REPEAT)):
            if doc.words[j][3] != clause:
                break
            word = doc.text[doc.words[j][1] : doc.words[j][2]]
            if word in held or word in node.values():
                continue
            try:
                cls = jsonschema.validators.validator_for(root)
                ok = cls(branch, format_checker=cls.FORMAT_CHECKER).is_valid(word)
            except Exception:  # a subschema that does not stand alone (a $ref inside)
                break
            if ok:
                found[name] = word
                held[-1] = word
                break
    return found


def span_start(root: Any, prop: Any, value: Any, text: str) -> str | None:
    """The span-start rule of the package docstring: the value extended to the start of
    the chunk the text writes it in, or None (no change).
    """
    sub = string_schema(root, prop)
    if not isinstance(value, str) or not value.strip() or sub is None:
        return None
    found: set[str] = set()
    at = text.find(value)
    while at >= 0:
        start = at
        while start > 0 and JOINED.fullmatch(text[start - 1]):
            start -= 1
        while start < at and not text[start].isalnum():
            start += 1  # leading punctuation of the chunk ("(", "-") is not copied
        if start == at:
            return None  # this occurrence starts a chunk: the value may be right
        found.add(text[start:at] + value)
        at = text.find(value, at + 1)
    if len(found) != 1:
        return None
    (new,) = found
    return new if schema_accepts(root, sub, new) else None


def span_end(root: Any, prop: Any, value: Any, text: str) -> str | None:
    """The span-end rule (the span-start rule's mirror): a string value the text writes
    only inside longer chunks, each occurrence directly followed, with no space, by one
    of ``-``, ``.``, ``@``, ``#``, ``+``, ``&`` and more of its chunk (letters, digits,
    ``_`` and those between them: "5.0.0-beta" of "5.0.0-beta.3"; a sentence's "." is
    no part of a chunk) and none starting or ending inside a word, is extended to where
    that chunk ends, when every occurrence gives the same extension and the field's
    schema accepts it; else None (no change). Greedy copying stops at a token boundary
    inside a chunk.
    """
    sub = string_schema(root, prop)
    if not isinstance(value, str) or not value.strip() or sub is None:
        return None
    found: set[str] = set()
    at = text.find(value)
    while at >= 0:
        end = at + len(value)
        stop = end
        while stop < len(text) and (
            text[stop].isalnum()
            or text[stop] == "_"
            or JOINED.fullmatch(text[stop])
            and stop + 1 < len(text)
            and (text[stop + 1].isalnum() or text[stop + 1] == "_")
        ):
            stop += 1
        if stop == end:
            return None  # this occurrence ends a chunk: the value may be right
        if at > 0 and text[at - 1].isalnum() or text[end].isalnum() or text[end] == "_":
            return None  # inside a word ("x" of "example", "Lond" of "London"): not this rule
        found.add(value + text[end:stop])
        at = text.find(value, at + 1)
    if len(found) != 1:
        return None
    (new,) = found
    return new if schema_accepts(root, sub, new) else None


def spaced_identifier(root: Any, prop: Any, value: Any, text: str) -> str | None:
    """The spaced-identifier rule of the package docstring: the value extended over the
    digit groups the text writes after it, one space each (``labels.spaced_end``:
    "AB-12" of "AB-12 345", "KA-JM" of "KA-JM 2281"), when the value is an identifier head
    (``labels.identifier_head``) and every whole-chunk occurrence of it goes on the same
    way; else None (no change).
    """
    sub = string_schema(root, prop)
    if not isinstance(value, str) or not identifier_head(value) or sub is None:
        return None
    found: set[str] = set()
    at = text.find(value)
    while at >= 0:
        end = at + len(value)
        after = text[end : end + 2]  # a sentence's "." after it is no part of a chunk
        whole = (at == 0 or not JOINED.fullmatch(text[at - 1])) and not (
            after[:1].isalnum() or JOINED.fullmatch(after[:1] or " ") and after[1:].isalnum()
        )
        if whole:
            grown = spaced_end(text, end)
            if grown == end:
                return None  # written on its own: the value may be right
            found.add(text[at:grown])
        at = text.find(value, at + 1)
    if len(found) != 1:
        return None
    (new,) = found
    return new if schema_accepts(root, sub, new) else None


def identifier_value(root: Any, prop: Any, name: str, value: Any, text: str) -> str | None:
    """The identifier rule of the package docstring: the one identifier the text writes
    after the field's label, when the model's value differs; else, for a value ending in
    ``.`` (a sentence's full stop: no identifier ends with one, "RR 482 913 057 PL."),
    the value without it, and for an identifier holding a digit that runs on past ", "
    into lowercase words ("H-42, areal"), the identifier; else None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not identifier_field(name):
        return None
    if "enum" in sub or "const" in sub or "format" in sub:
        return None
    found = identifier_candidates(text, name, stem)
    if len(found) != 1:
        run_on = _CLAUSE_AFTER_ID.search(value)
        if run_on and any(c.isdigit() for c in value[: run_on.start()]):
            value_head = value[: run_on.start()]  # "H-42, areal"
        else:
            value_head = value
        head = value_head.rstrip(".")
        found = [head] if head else []
    if len(found) != 1 or found[0] == value:
        return None
    return found[0] if schema_accepts(root, sub, found[0]) else None


def identifier_shape(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The identifier shape rule of the package docstring: for a free string field named
    for an identifier (``labels.identifier_field``) whose value holds no digit (a name,
    a heading, a label: "Folktandvården Plus" for ``patient_id``; two characters at least,
    written nowhere inside a longer chunk, whose ends the span rules decide), the one
    identifier the text writes (``labels.identifier_chunks``: "P-2207-14") that no
    sibling's value holds (the "LR19" of a registration "LR19 XFD" is none) and the
    field's schema accepts; else None (no change).
    """
    props = sub.get("properties") or {}
    branch = free_string_schema(root, props.get(name))
    value = node.get(name)
    if branch is None or not isinstance(value, str) or not identifier_field(name):
        return None
    if any(c.isdigit() for c in value) or len(value.strip()) < 2 or _in_chunk(value, text):
        return None  # a fragment of a chunk is the span rules' ("x" of "x0932")
    held = [_folded(v) for v in sibling_strings(root, sub, node, name)]
    free = [c for c in identifier_chunks(text) if not any(_folded(c) in h for h in held)]
    if len(free) != 1:
        return None
    return free[0] if schema_accepts(root, branch, free[0]) else None


def _in_chunk(value: str, text: str) -> bool:
    """Whether ``text`` writes ``value`` inside a longer chunk somewhere (a letter, digit,
    ``_`` or one of ``JOINED``'s marks right before or after an occurrence).
    """
    at = text.find(value)
    while at >= 0:
        end = at + len(value)
        if at > 0 and JOINED.fullmatch(text[at - 1]):
            return True
        if end < len(text) and JOINED.fullmatch(text[end]) and text[end + 1 : end + 2].strip():
            return True  # (a sentence's full stop after it is no part of a chunk)
        at = text.find(value, at + 1)
    return False


def host_value(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The host-name rule of the package docstring: for a free string field named for a
    host name (``labels.host_field``: ``domain``, ``website``) whose value is none of the
    host names the text writes (``labels.host_names``; a person's or a company's name),
    the one such host name no sibling holds, when the field's schema accepts it; else
    None (no change).
    """
    props = sub.get("properties") or {}
    branch = free_string_schema(root, props.get(name))
    value = node.get(name)
    if branch is None or not isinstance(value, str) or not host_field(name):
        return None
    written = host_names(text)
    if _folded(value) in {_folded(h) for h in written}:
        return None
    return _one_free(root, sub, node, name, branch, written)


def iban_value(root: Any, prop: Any, name: str, value: Any, text: str) -> str | None:
    """The IBAN rule of the package docstring: the one IBAN the text writes
    (``labels.iban_runs``, as written) for a string field named for one, when the
    model's value differs and the schema accepts it; else None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not iban_field(name):
        return None
    if "enum" in sub or "const" in sub or "format" in sub:
        return None
    found = iban_runs(text)
    if len(found) != 1 or found[0] == value:
        return None
    return found[0] if schema_accepts(root, sub, found[0]) else None


def phone_value(root: Any, prop: Any, name: str, value: Any, text: str) -> str | None:
    """The phone rule of the package docstring: the one phone number the text writes,
    when the model's value is none of them; else None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not phone_field(name):
        return None
    if any(k in sub for k in ("enum", "const", "format")):
        return None
    found = phone_runs(text)
    if len(found) != 1 or value in found:
        return None
    return found[0] if schema_accepts(root, sub, found[0]) else None


def sibling_strings(root: Any, sub: dict, node: dict, name: str) -> list[str]:
    """The values (two characters at least) of ``node``'s other string fields that are
    not ``enum`` or ``const`` (an option is a label, not a span of the text).
    """
    props = sub.get("properties") or {}
    found = []
    for key, value in node.items():
        branch = _resolve(root, props.get(key))
        if key == name or not isinstance(value, str) or len(value.strip()) < 2:
            continue
        if isinstance(branch, dict) and "enum" not in branch and "const" not in branch:
            found.append(value)
    return found


def label_value(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The label rule of the package docstring: for a free string field, the value the
    text writes after the one label naming it ("Title: Data Engineer |" for
    ``job_title``, "Employee: Søren Haugen" for ``employee``), where the model left the
    field null or out, or holds a string that neither holds that value nor lies inside
    it (a heading, a label or a sibling's value: "LØNNSSLIPP / PAYSLIP"); else None (no
    change: where the model's value and the labelled one overlap, the span-end rules
    decide its ends).
    """
    props = sub.get("properties") or {}
    branch = free_string_schema(root, props.get(name))
    current = node.get(name)
    if branch is None or current is not None and not isinstance(current, str):
        return None
    new = labelled(props, name, text)
    if new is None:
        return None
    if _denial(new) or current is None and new in sibling_strings(root, sub, node, name):
        return None  # (a value the label names for this field alone is its own)
    if current is not None and (
        _folded(new) in _folded(current) or _folded(current) in _folded(new)
    ):
        return None
    return new if schema_accepts(root, branch, new) else None


def labelled(props: dict, name: str, text: str) -> str | None:
    """The one value the text writes after a label naming field ``name`` of an object
    with properties ``props`` and no other of its fields (``_LABEL``: "Landlord:
    Haveforeningen Solsikken (CVR 29417703)" gives "Haveforeningen Solsikken"), or None
    (no such label, or two values). Raises: never.
    """
    found = {label[2] for label in _labels(text) if _labelled_field(props, label) == [name]}
    return next(iter(found)) if len(found) == 1 else None


@functools.lru_cache(maxsize=64)  # a pure function of the text, read once per field
def _labels(text: str) -> tuple[tuple[str, str | None, str], ...]:
    """The ``(label, gloss, value)`` of every ``_LABEL`` match of ``text``, in order."""
    return tuple((m.group(1), m.group(2), m.group(3)) for m in _LABEL.finditer(text))


def _folded(value: str) -> str:
    """A string compared as the scorer compares: case-folded, runs of spaces one."""
    return " ".join(value.casefold().split())


def _denial(value: str) -> bool:
    """Whether a labelled value says the field has none ("Email: none", "Email: not
    given", "Email: n/a"): it starts with a negation (``TextWords.is_negation``) or is n/a.
    """
    words = TextWords(value)
    return bool(words.words) and words.is_negation(0) or value.strip().lower() == "n/a"


def _labelled_field(props: dict, label: tuple[str, str | None, str]) -> list[str]:
    """The fields a label (``_labels``) names: those its words name, else, where they name
    none, those its bracketed gloss names ("Lejer (tenant)" names ``tenant_name``;
    "Registrar (borrower)" names ``registrar``, not ``borrower``).
    """
    named = _label_names(props, label[0])
    return named or (_label_names(props, label[1]) if label[1] else [])


def _label_names(props: dict, label: str) -> list[str]:
    """The fields a label names (``_names_label``); of several, the one whose every
    name word the label writes, where there is one ("Employee" names ``employee``, not
    ``employee_id``).
    """
    named = [k for k in props if _names_label(k, label)]
    if len(named) > 1:
        label_words = [stem(w) for w in _WORD_CHAR_RUN.findall(label.lower())]
        whole = [
            k for k in named if [stem(w) for w in _WORD_CHAR_RUN.findall(k.lower())] == label_words
        ]
        named = whole if len(whole) == 1 else named
    return named


def _names_label(name: str, label: str) -> bool:
    """Whether a label's words name the field: each matches a word of the name (as
    stems), the last the name's last ("Title" for ``job_title``, not for ``title_case``);
    a last word of ``_LABEL_HEADS`` after another is dropped first ("Lending institution"
    for ``lender``: both stems ``lend``; a name ending in the word ``name`` is named
    without it too: "Tenant" for ``tenant_name``), and such a label names no identifier field
    (``labels.identifier_field``: "Student name" is not ``student_id``'s).
    """
    label_words = _WORD_CHAR_RUN.findall(label)
    if len(label_words) > 1 and label_words[-1].lower() in _LABEL_HEADS:
        if identifier_field(name):
            return False  # "Student name" names no ``student_id``
        label_words.pop()  # "Tenant name", "Lending institution"
    words, label_words = name_stems(name), [stem(w) for w in label_words]
    if len(words) > 1 and name.lower().endswith("name") and words[-1] == stem("name"):
        words = words[:-1]  # "Tenant:" for ``tenant_name`` (as "Tenant name:" is)
    return (
        bool(words and label_words)
        and label_words[-1] == words[-1]
        and all(w in words for w in label_words)
    )


def not_a_phone(root: Any, prop: Any, name: str, value: Any, text: str) -> bool:
    """The phone fragment rule of the package docstring: whether a phone field's value
    holds fewer digits than a phone number has (7, ``labels.phone_runs``) while the text
    writes no phone number: the "1" of "June 1", a fragment of another number.
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not phone_field(name):
        return False
    if any(k in sub for k in ("enum", "const", "format", "pattern")):
        return False
    return sum(c.isdigit() for c in value) < 7 and not phone_runs(text)


def email_shape(root: Any, sub: dict, name: str, node: dict, text: str) -> tuple[bool, Any]:
    """The e-mail shape rule of the package docstring: ``(decided, value)`` for a free
    string field named for an e-mail address whose value has no ``@`` ("Carlos Diaz"):
    the one address the text writes that no sibling holds, else None (the caller clears
    the field where the schema lets it); ``(False, None)`` when the rule does not apply.
    """
    prop = (sub.get("properties") or {}).get(name)
    value = node.get(name)
    if not isinstance(value, str) or "@" in value or not email_field(name):
        return False, None
    branch = _resolve(root, prop)
    if not isinstance(branch, dict) or any(k in branch for k in ("enum", "const", "format")):
        return False, None
    if "pattern" in branch:
        return False, None
    held = set(sibling_strings(root, sub, node, name))
    free = [a for a in email_addresses(text) if a not in held]
    if len(free) == 1 and schema_accepts(root, branch, free[0]):
        return True, free[0]
    return (True, None) if not email_addresses(text) else (False, None)


def urls(text: str) -> list[str]:
    """The URLs ``text`` writes (a scheme, ``://``, no spaces; a trailing ``.``, ``,``,
    ``;``, ``:``, ``!``, ``?`` or unmatched ``)`` dropped), distinct, in text order.
    """
    found = []
    for m in _URL.finditer(text):
        url = m.group().rstrip(".,;:!?")
        while url.endswith(")") and url.count(")") > url.count("("):
            url = url[:-1].rstrip(".,;:!?")
        found.append(url)
    return list(dict.fromkeys(found))


def _one_free(
    root: Any, sub: dict, node: dict, name: str, branch: dict, written: list[str]
) -> str | None:
    """The one value of ``written`` (addresses, URLs the text writes) that no sibling of
    field ``name`` holds and ``branch`` (the field's subschema) accepts; None when there
    is not exactly one such value.
    """
    held = set(sibling_strings(root, sub, node, name))
    free = [w for w in written if w not in held]
    return free[0] if len(free) == 1 and schema_accepts(root, branch, free[0]) else None


def uri_shape(root: Any, sub: dict, name: str, node: dict, text: str) -> tuple[bool, Any]:
    """The URI shape rule of the package docstring: ``(decided, value)`` for a string
    field of ``format: uri`` (or ``iri``) whose value is no URL the text writes
    (``"keynote:"``, a scheme the grammar let through): the one URL the text writes that
    no sibling holds, else None when the text writes no URL (the caller clears the field
    where the schema lets it); ``(False, None)`` when the rule does not apply.

    Args:
        root: the whole schema.
        sub: the object's subschema.
        name: the field's name.
        node: the object.
        text: the document.
    """
    value = node.get(name)
    branch = _resolve(root, (sub.get("properties") or {}).get(name))
    if not isinstance(value, str) or not isinstance(branch, dict):
        return False, None
    if branch.get("format") not in _URI_FORMATS or any(k in branch for k in ("enum", "const")):
        return False, None
    written = urls(text)
    if value in written:
        return False, None
    free = _one_free(root, sub, node, name, branch, written)
    if free is not None:
        return True, free
    return (True, None) if not written else (False, None)


def invented_email(root: Any, sub: dict, name: str, node: dict, text: str) -> tuple[bool, Any]:
    """The invented e-mail rule of the package docstring: ``(decided, value)`` for a field
    named for an e-mail address or of ``format: email`` holding an address the text does
    not write (case ignored; the grammar's fallback where the text has no address to copy):
    the one address the text writes that no sibling holds, else None when the text writes
    no address nor the value's local part as a word (an address spelt out in words is the
    model's to read; the caller clears the field where the schema lets it);
    ``(False, None)`` when the rule does not apply.

    Args:
        root: the whole schema.
        sub: the object's subschema.
        name: the field's name.
        node: the object.
        text: the document.
    """
    value = node.get(name)
    branch = _resolve(root, (sub.get("properties") or {}).get(name))
    if not isinstance(value, str) or "@" not in value or not isinstance(branch, dict):
        return False, None
    if not (email_field(name) or branch.get("format") in ("email", "idn-email")):
        return False, None
    if any(k in branch for k in ("enum", "const")):
        return False, None
    written = email_addresses(text)
    if value.casefold() in {a.casefold() for a in written}:
        return False, None
    free = _one_free(root, sub, node, name, branch, written)
    if free is not None:
        return True, free
    local = value.split("@", 1)[0]
    if written or re.search(rf"(?<![^\W_]){re.escape(local)}(?![^\W_])", text, re.I):
        return False, None  # its local part is written: "alice.wong at gmail"
    return True, None


# a chunk of the text a patterned value may be: no space, quote or bracket; sentence
# punctuation after it is not part of it
_CHUNK = re.compile(r"[^\s,;()\[\]<>\"'`]+")


def _patterned_chunks(
    root: Any, branch: dict, doc: TextWords, stems: list[str]
) -> list[tuple[str, bool]]:
    """The chunks of the text (``_CHUNK``; one behind a label, ``doi:10.1/x``, read
    without it) that hold a digit and that ``branch`` (a field's subschema) accepts, each
    with whether it is written right after a word of the field's name (``stems``): its
    label, or the word before it with only spaces, ``:`` or ``#`` between. Text order,
    first occurrences.
    """
    found: dict[str, bool] = {}
    for m in _CHUNK.finditer(doc.text):
        chunk, label = m.group().rstrip(".:!?"), ""
        if ":" in chunk and not schema_accepts(root, branch, chunk):
            label, chunk = chunk.split(":", 1)
        if not any(c.isdigit() for c in chunk) or not schema_accepts(root, branch, chunk):
            continue
        names = [stem(w) for w in _WORD_CHAR_RUN.findall(label)]
        before = doc.word_at(m.start()) - 1
        if not label and before >= 0:
            if not doc.text[doc.words[before][2] : m.start()].strip(" \t:#"):
                names = [doc.words[before][0]]
        named = any(stems_match(w, s) for w in names for s in stems)
        found[chunk] = found.get(chunk, False) or named
    return list(found.items())


def pattern_shape(root: Any, sub: dict, name: str, node: dict, doc: TextWords) -> tuple[bool, Any]:
    """The pattern shape rule of the package docstring: ``(decided, value)`` for a string
    field with a ``pattern`` (no ``format``, ``enum`` or ``const``; not a time of day,
    ``dates.time_field``) whose values are identifiers holding a digit (a DOI, a flight
    number). A value holding a digit that the text does not write (invented: the
    grammar let the model make one up) takes the one chunk the text writes that the
    pattern accepts and no sibling holds, else None when the text writes no such chunk
    (the caller clears the field where the schema lets it). A field left null or out
    (where the schema lets it) takes the one such chunk written right after a word of
    its name ("doi:10.1016/j.is.2021.04.007" for ``doi``). ``(False, None)`` when the
    rule does not apply.

    Args:
        root: the whole schema.
        sub: the object's subschema.
        name: the field's name.
        node: the object.
        doc: the document's words.
    """
    branch = _resolve(root, (sub.get("properties") or {}).get(name))
    if not isinstance(branch, dict) or "pattern" not in branch:
        return False, None
    if any(k in branch for k in ("enum", "const", "format")) or time_field(root, branch):
        return False, None
    value = node.get(name)
    if value is None and name not in node and name in (sub.get("required") or ()):
        return False, None
    if isinstance(value, str) and (not any(c.isdigit() for c in value) or value in doc.text):
        return False, None
    if value is not None and not isinstance(value, str):
        return False, None
    held = set(sibling_strings(root, sub, node, name))
    written = [(w, named) for w, named in _patterned_chunks(root, branch, doc, name_stems(name))
               if w not in held]  # fmt: skip
    if value is None:
        named = [w for w, n in written if n]
        return (True, named[0]) if len(named) == 1 else (False, None)
    if len(written) == 1:
        return True, written[0][0]
    return (True, None) if not written else (False, None)


# "Label: a, b and c" up to the sentence's end (a list's items hold no "." nor ";")
_LIST_LABEL = re.compile(
    r"(?:\A|[|;·\n]|[.!?] )[ \t]*([^\W\d_][^\W\d_ ]*(?: [^\W\d_]+){0,3}):[ \t]+"
    r"([^|;·\n.:]*[^\W_]\)?)[ \t]*(?=\Z|[|;·\n]|[.!?](?:\s|\Z))"
)
_LIST_SPLIT = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+|\s*&\s*")


# a bracketed note ending a listed item: "Bronwen Lewis (unwell)"
_ITEM_NOTE = re.compile(r"\s*\([^()]*\)\s*\Z")


def label_list(root: Any, sub: dict, name: str, node: dict, text: str) -> list[str] | None:
    """The label-list rule of the package docstring: for an array of free strings, the
    items of the one list the text writes after a label naming the field ("Attending: Åsa
    Lindqvist, Henrik Berg and Yusuf Demir.", "Absent with apologies: Marco Rossi"): the
    label's last word (of at most three), or its first word before one to three lowercase
    words ("Vaccines given so far: ..."), is a word of the field's name (as stems) and of
    no sibling's, the list runs to the sentence's end, split at commas, "and" and "&",
    each item without a bracketed note after it ("Bronwen Lewis (unwell)": "Bronwen
    Lewis"). None (no change) when no such label or two, a list the schema rejects
    (``maxItems``, the items' bounds), or the items the field holds already (in any
    order).
    """
    props = sub.get("properties") or {}
    arr = _resolve(root, props.get(name))
    if not isinstance(arr, dict) or not isinstance(node.get(name), list):
        return None
    if free_string_schema(root, arr.get("items")) is None:
        return None
    stems = name_stems(name)
    found = set()
    for m in _LIST_LABEL.finditer(text):
        written = _WORD_CHAR_RUN.findall(m.group(1))
        words = [stem(w) for w in written]
        if not words:
            continue
        # the naming word: the label's last ("Absent with apologies"), or its first before
        # lowercase qualifiers ("Vaccinations up to date", "Vaccines given so far")
        naming = [words[-1]] if len(words) <= 3 else []
        if len(words) > 1 and all(w.islower() for w in written[1:]):
            naming.append(words[0])
        word = next((w for w in naming if any(stems_match(w, s) for s in stems)), None)
        if word is None:
            continue
        if any(k != name and any(stems_match(word, s) for s in name_stems(k)) for k in props):
            continue
        parts = (_ITEM_NOTE.sub("", p) for p in _LIST_SPLIT.split(m.group(2).strip()))
        items = tuple(p for p in parts if p)  # "Bronwen Lewis (unwell)": the name
        if items and not _denial(items[0]):
            found.add(items)
    if len(found) != 1:
        return None
    new = list(next(iter(found)))
    if sorted(new) == sorted(x for x in node[name] if isinstance(x, str)):
        return None
    if len(set(new)) != len(new):
        return None
    return new if schema_accepts(root, arr, new) else None


def times_in_order(root: Any, sub: dict, node: dict, text: str) -> dict[str, str]:
    """The time-order rule of the package docstring: when two or more time fields of one
    object (``dates.time_field``; not ``enum`` or ``const``) hold the same time and the
    text writes exactly as many distinct times (``fsm.dates.times``: "from 5:30pm ... by
    10:45pm", "kl. 18:00-23:30") as the object has time fields, the fields take them in
    text order (schema order), each in a form its schema accepts; else no change.

    Returns:
        ``{name: new value}`` of the fields that change (empty: no change).
    """
    props = sub.get("properties") or {}
    fields = []
    for key, prop in props.items():
        branch = _resolve(root, prop)
        if not isinstance(branch, dict) or "enum" in branch or "const" in branch:
            continue
        if time_field(root, branch):
            fields.append((key, branch))
    held = [node.get(k) for k, _ in fields]
    if len(fields) < 2 or not any(isinstance(v, str) and held.count(v) > 1 for v in held):
        return {}
    written = [t for t in times(text) if len(t) == 5]  # HH:MM, in order of first mention
    if len(written) != len(fields):
        return {}
    out: dict[str, str] = {}
    for (key, branch), t in zip(fields, written):
        value = next((v for v in (t, t + ":00") if schema_accepts(root, branch, v)), None)
        if value is None:
            return {}
        if value != node.get(key):
            out[key] = value
    return out
