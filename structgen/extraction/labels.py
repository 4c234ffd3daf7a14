"""Values the text marks for a field: an identifier after its label, an amount by its currency.

Two readings of a text that the evidence pass (``structgen.extraction.evidence``) uses:

* **identifiers**: a field whose name ends in an identifier word (``_ID_WORDS``:
  ``id``, ``number``, ``no``, ``nr``, ``num``, ``ref``, ``reference``, ``code``) holds an
  identifier, and English writes one right after its label: "Invoice BL-778",
  "INVOICE No. 2026-0415", "Booking reference QX7P2M", "booking code LM55RT", "Ticket
  T-4471". ``identifier_candidates`` gives the chunks (letters, digits and ``-``, ``_``,
  ``/``, ``.`` with no space, at least one digit, trailing ``.`` dropped) the text writes
  directly after a word matching one of the name's words (``invoice``, ``booking``,
  ``ticket``, and ``reference`` / ``ref``, which label on their own; a weaker
  identifier word only when the name has no other word),
  with at most one identifier word (``No.``, ``number``, ``ref.``, ``code``), then at most
  one ``is`` or ``was`` ("My employee number is C-3391"), and one of ``:``, ``#``, ``°``
  between. A name word that is only an identifier word (``postal_code``'s
  ``code``) is no label on its own when the name has another word. An identifier goes on
  over groups of three or more digits, each after one space, that end a chunk
  (``spaced_end``: "account no. 5590 3321", "AB-12 345", "reg. KA-JM 2281"; not a decimal
  or thousands comma after the group, "1 250,50"); a chunk of letters alone is one only
  when upper-case, no currency code, and followed by such a group ("KA-JM 2281").
  ``identifier_chunks`` gives every identifier the text writes, labelled or not: a chunk
  that starts with a letter or ``#`` and holds a digit (the foreign spans' identifiers
  below, "P-2207-14", "E-20417"), with its spaced digit groups, trailing ``.`` dropped,
  none inside an e-mail address or a URL, none a currency mark's amount ("EUR1,250").
* **host names**: a field whose name holds ``domain``, ``hostname``, ``website`` or
  ``homepage`` holds a host name; ``host_names`` gives the ones the text writes: two or
  more dot-joined labels of letters, digits and inner ``-``, the last of two or more
  lowercase ASCII letters ("greenfieldbakery.co.uk", "zielinski-foto.pl"), not inside an
  e-mail address or a longer chunk (a URL's host counts: "https://example.org/a" gives
  "example.org").
* **amounts**: ``amount_spans`` gives the numerals (``structgen.fsm.numerals``) written
  with a currency mark next to them: a currency symbol (``$``, ``€``, ``£``, ...) or an
  ISO 4217 code (``EUR``, ``CHF``, ...) or ``kr`` (not inside a longer word: ``USDC``
  is none) directly before or after, one space at most between ("£489,950",
  "CHF 1'150'000", "1 950 000 SEK", "1,299 kr", "EUR1,250").
* **IBANs**: a field whose name holds the word ``iban`` holds an International Bank
  Account Number; ``iban_runs`` gives the ones the text writes: two upper-case letters,
  two check digits, then 11 to 30 upper-case letters and digits, either unbroken or in
  groups of four with one space each and a last group of one to four ("GB29 NWBK 6016
  1331 9268 19", "NO93 8601 1117 947"), not inside a longer chunk, whose ISO 13616
  check (mod 97 of the rearranged digits is 1) holds, as written (spaces kept).
* **phone numbers**: a field whose name holds ``phone``, ``tel``, ``telephone``,
  ``mobile`` or ``cell`` holds a phone number; ``phone_runs`` gives the runs of digits,
  spaces and ``().-/`` (a leading ``+`` or ``(`` kept, balanced parentheses, one line)
  with 7 to 15 digits (E.164's most) that ``fsm.dates`` does not read as a date; a
  run is maximal, its trailing non-digits dropped, and one whose first character a
  letter, digit, ``_``, ``+`` or ``(`` follows, or whose last digit a letter or ``_``
  precedes, is none: "+359 2 555 0143", "(04) 123 4567",
  "512-555-0176".
* **foreign spans**: ``foreign_spans`` gives where the text writes digits that belong to
  a phone number (``phone_spans``), an e-mail address, an identifier (a chunk of
  letters, digits and ``-``, ``_``, ``/``, ``.``, ``#`` with no space that starts with a
  letter or ``#`` and holds a digit: "SUP-0932", "#88-17", "LM55RT", with its spaced
  digit groups: the 345 of "AB-12 345"), a date
  (``fsm.dates.date_spans``: "June 1, 2019", "2026-05-09") or a clock time
  (``fsm.dates.date_time_parts``: "17:30"): such digits are not a count, an age or an
  amount.
"""

from __future__ import annotations

import re
from decimal import Decimal

from structgen.fsm.dates import date_spans, date_time_parts, dates
from structgen.fsm.numerals import numeral_spans

__all__ = [
    "identifier_candidates",
    "identifier_chunks",
    "identifier_field",
    "identifier_head",
    "iban_field",
    "iban_runs",
    "spaced_end",
    "amount_spans",
    "CURRENCY_MARK",
    "is_amount_field",
    "foreign_spans",
    "email_addresses",
    "email_field",
    "host_field",
    "host_names",
    "phone_field",
    "phone_runs",
    "phone_spans",
]

_ID_WORDS = frozenset("id number no nr num ref reference code".split())
_LABEL_ID_WORDS = frozenset({"ref", "reference"})  # identifier words that label on their own
_SYMBOLS = "$€£¥₹₩₽₺₪₫₱฿₴₦円元"
_CODES = (
    "EUR USD GBP CHF JPY CNY SEK NOK DKK PLN CZK HUF AUD CAD NZD INR KRW RUB TRY ILS "
    "VND PHP THB UAH NGN BRL MXN ZAR SGD HKD"
).split()
_MARK = rf"(?:[{re.escape(_SYMBOLS)}]|(?<![^\W\d_])(?:{'|'.join(_CODES)}|kr)(?![^\W\d_]))"
# a currency mark: a symbol ("€"), an ISO 4217 code or "kr", not inside a word
CURRENCY_MARK = re.compile(_MARK)
_MARK_BEFORE = re.compile(rf"{_MARK} ?$")
_MARK_AFTER = re.compile(rf"^ ?{_MARK}")
# money words in a number field's name (its words as ``evidence.stem`` gives them)
_AMOUNT_STEMS = frozenset("pric total amount cost fee paid rent charg budget".split())
_NAME_WORD = re.compile(r"[A-Za-z]+")
_PHONE_WORDS = frozenset("phone tel telephone mobile cell".split())
_HOST_WORDS = frozenset("domain hostname website homepage".split())
# a host name: dot-joined labels, the last of letters; not inside an address or a chunk
_HOST = re.compile(r"(?<![\w@.\-])(?:[^\W_](?:[\w\-]*[^\W_])?\.)+[a-z]{2,}(?![\w@\-]|\.[^\W_])")
_PHONE = re.compile(r"(?<![\w+(])[+(]?\d[\d ().\-/]*")
_FILLER = re.compile(
    r"[ \t]*(?:(?:no|nr|number|num|ref|reference|code|id)\b\.?[ \t]*)?(?:(?:is|was)[ \t]+)?"
    r"[:#°]?[ \t]*",
    re.I,
)
# an IBAN as written: country, check digits, then groups of four with one space each and
# a last group of one to four, or one unbroken run; not inside a longer chunk
_IBAN = re.compile(
    r"(?<![\w\-/.])[A-Z]{2}[0-9]{2}(?:(?: [A-Z0-9]{4})+(?: [A-Z0-9]{1,3})?|[A-Z0-9]{11,30})"
    r"(?![\w\-/]|[.,][\w])"
)
_EMAIL = re.compile(r"[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+")
# an identifier: starts with a letter or "#", holds a digit, no space ("SUP-0932", "#88-17")
_ID_CHUNK = re.compile(r"(?<![\w#\-/.])(?:#|[^\W\d_])[\w\-/.#]*?\d[\w\-/.#]*")
_CHUNK = re.compile(r"[^\W_](?:[\w\-/.]*[^\W_])?")
# one more group of an identifier: a space, three digits or more, the chunk's end (no
# letter, "-", "/" or a decimal or thousands mark and digit after: "1 250,50" is none)
_SPACED_GROUP = re.compile(r"[ \u00a0\u202f][0-9]{3,}(?![\w\-/]|[.,'][0-9])")
_UPPER_HEAD = re.compile(r"[A-Z]{1,4}(?:[\-/][A-Z]{1,4})+")


def _name_words(key: str) -> list[str]:
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", key)
    return [w.lower() for w in _NAME_WORD.findall(spaced)]


def identifier_head(value: str) -> bool:
    """Whether ``value`` is an upper-case identifier head that spaced digit groups may
    continue (module docstring): a chunk of upper-case letters, digits and ``-``, ``_``,
    ``/``, ``.`` with a letter and a digit ("AB-12", "DE89"), or upper-case letters with a
    ``-`` or ``/`` that are no currency code ("KA-JM"). Digits alone ("5590", "12") are
    none: "12 345" is also a thousands numeral.
    """
    if _CHUNK.fullmatch(value) is None or value.upper() != value:
        return False
    if not any(c.isalpha() for c in value):
        return False
    if any(c.isdigit() for c in value):
        return True
    return _UPPER_HEAD.fullmatch(value) is not None and CURRENCY_MARK.fullmatch(value) is None


def spaced_end(text: str, end: int) -> int:
    """Where an identifier chunk of ``text`` ending at ``end`` ends with the digit groups
    written after it, one space each ("5590 3321", "AB-12 345": module docstring); ``end``
    when none follows or the chunk does not end in a letter or digit.
    """
    if end == 0 or not text[end - 1].isalnum():
        return end
    while (group := _SPACED_GROUP.match(text, end)) is not None:
        end = group.end()
    return end


def identifier_field(key: str) -> bool:
    """Whether a field's name ends in an identifier word (``invoice_number``,
    ``booking_reference``, ``ticket_id``, ``tracking_no``).
    """
    words = _name_words(key)
    return bool(words) and words[-1] in _ID_WORDS


def identifier_candidates(text: str, key: str, stem) -> list[str]:
    """The identifiers ``text`` writes after a label of the field ``key`` (module
    docstring), distinct, in text order.

    Args:
        text: the document.
        key: the field's name; must satisfy ``identifier_field``.
        stem: the word stemmer the mentions are compared with (``evidence.stem``).

    Returns:
        The candidate chunks; empty when the text writes none.
    """
    words = _name_words(key)
    labels = [stem(w) for w in words if w not in _ID_WORDS or w in _LABEL_ID_WORDS]
    labels = labels or [stem(words[-1])]
    found: list[str] = []
    for m in re.finditer(r"[^\W\d_]+", text):
        w = stem(m.group())
        if not any(w == s or len(s) >= 4 and w.startswith(s) for s in labels):
            continue
        at = _FILLER.match(text, m.end()).end()
        chunk = _CHUNK.match(text, at)
        if chunk is None:
            continue
        end = spaced_end(text, chunk.end())
        if not any(c.isdigit() for c in chunk.group()) and (
            end == chunk.end() or not identifier_head(chunk.group())
        ):
            continue  # letters alone: only an upper-case head of digit groups ("KA-JM 2281")
        value = text[chunk.start() : end].rstrip(".")
        if value not in found:
            found.append(value)
    return found


def identifier_chunks(text: str) -> list[str]:
    """Every identifier ``text`` writes, labelled or not (module docstring), distinct, in
    text order.
    """
    skip = [m.span() for m in _EMAIL.finditer(text)]
    skip += [m.span() for m in re.finditer(r"[A-Za-z][A-Za-z0-9+.\-]*://\S+", text)]
    skip += [(a, b) for a, b, _ in amount_spans(text)]
    found: list[str] = []
    for m in _ID_CHUNK.finditer(text):
        end = spaced_end(text, m.end())
        if any(a < end and m.start() < b for a, b in skip):
            continue
        value = text[m.start() : end].rstrip(".")
        if value and value not in found:
            found.append(value)
    return found


def host_field(key: str) -> bool:
    """Whether a field's name holds a host-name word (``domain``, ``domain_name``,
    ``website``, ``hostname``, ``homepage``).
    """
    return any(w in _HOST_WORDS for w in _name_words(key))


def host_names(text: str) -> list[str]:
    """The host names ``text`` writes (module docstring), distinct, in text order."""
    return list(dict.fromkeys(m.group() for m in _HOST.finditer(text)))


def iban_field(key: str) -> bool:
    """Whether a field's name holds the word ``iban`` (``iban``, ``payer_iban``)."""
    return "iban" in _name_words(key)


def iban_runs(text: str) -> list[str]:
    """The IBANs ``text`` writes (module docstring), as written, distinct, in text order.

    Args:
        text: the document.

    Returns:
        The runs whose ISO 13616 check holds; empty when the text writes none.
    """
    found: list[str] = []
    for m in _IBAN.finditer(text):
        compact = m.group().replace(" ", "")
        if not 15 <= len(compact) <= 34:
            continue
        moved = compact[4:] + compact[:4]
        if int("".join(str(int(c, 36)) for c in moved)) % 97 == 1 and m.group() not in found:
            found.append(m.group())
    return found


def is_amount_field(stems: list[str]) -> bool:
    """Whether a number field's name (its stems) names an amount of money (``price``,
    ``total``, ``amount``, ``cost``, ``fee``, ``price_paid``, ``rent``, ...).
    """
    return any(s in _AMOUNT_STEMS for s in stems)


def amount_spans(text: str) -> list[tuple[int, int, tuple[Decimal, ...]]]:
    """The numerals of ``text`` written with a currency mark (module docstring), as
    ``numeral_spans`` gives them: ``(start, end, readings)``, in text order.
    """
    return [
        (start, end, values)
        for start, end, values in numeral_spans(text)
        if _MARK_BEFORE.search(text[max(0, start - 5) : start])
        or _MARK_AFTER.match(text[end : end + 5])
    ]


def phone_field(key: str) -> bool:
    """Whether a field's name holds a phone word (``phone``, ``agent_tel``, ``mobile``)."""
    return any(w in _PHONE_WORDS for w in _name_words(key))


def email_field(key: str) -> bool:
    """Whether a field's name holds an e-mail word (``email``, ``contact_mail``,
    ``e_mail``).
    """
    words = _name_words(key)
    return any(w in ("email", "mail") for w in words) or "e_mail" in key.lower()


def email_addresses(text: str) -> list[str]:
    """The e-mail addresses ``text`` writes (a local part, ``@``, a dotted domain;
    trailing ``.`` and ``-`` dropped), distinct, in text order.
    """
    return list(dict.fromkeys(m.group().rstrip(".-") for m in _EMAIL.finditer(text)))


def phone_runs(text: str) -> list[str]:
    """The phone numbers ``text`` writes (module docstring), distinct, in text order."""
    return list(dict.fromkeys(text[a:b] for a, b in phone_spans(text)))


def phone_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` writes a phone number (module docstring): ``(start, end)`` character
    offsets of each occurrence, in text order.
    """
    found: list[tuple[int, int]] = []
    for m in _PHONE.finditer(text):
        run = re.sub(r"\D+$", "", m.group())
        end = m.start() + len(run)
        if re.match(r"\w", text[end : end + 1]):
            continue  # a letter touches its last digit: part of a longer chunk
        digits = sum(c.isdigit() for c in run)
        if run.count("(") != run.count(")") or "\n" in run or not 7 <= digits <= 15:
            continue
        if dates(run):
            continue
        found.append((m.start(), end))
    return found


def foreign_spans(text: str, identifiers: bool = True) -> list[tuple[int, int]]:
    """Where ``text`` writes digits of a phone number, an e-mail address, an identifier
    or a date or clock time (module docstring).

    Args:
        text: any text.
        identifiers: whether identifiers count (not for a field that holds one:
            ``order_number`` is 4471 in "Order #4471").

    Returns:
        ``(start, end)`` character offsets, in text order; spans may overlap.
    """
    spans = phone_spans(text)
    spans += [m.span() for m in _EMAIL.finditer(text)]
    if identifiers:
        spans += [(m.start(), spaced_end(text, m.end())) for m in _ID_CHUNK.finditer(text)]
    spans += date_spans(text) + date_time_parts(text)
    return sorted(spans)
