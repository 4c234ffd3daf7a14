"""Boolean, number, enum and null values decided by where the text mentions them.

A 135M model writing JSON under a grammar has two systematic failures that the text
itself can settle: it writes ``false`` for most booleans whatever the text says, and it
picks the wrong one of the text's numerals for a number field (``"guests": 12`` for
"two guests"). ``apply_evidence`` revisits such fields of a finished object with two
rules, stated on the field's name (its key split at ``_``, case changes and digits, each
word reduced to a stem; generic words such as ``has``, ``is``, ``allowed``,
``included``, ``required``, ``number`` do not count):

* **boolean**: the text *mentions* the field when all the name's words occur (as
  stems, or one stem the prefix of the other, four letters at least) within a window
  of four words. A mention in a clause (text between ``.``, ``;``, ``!``, ``?``,
  ``,``, ``(``, ``)``, ``·``, ``|`` and line breaks, except a soft wrap: a line break
  between a letter or digit and a lowercase letter, as a hard-wrapped paragraph has,
  ``unwrapped``) with a negation (``no``, ``not``, ``without``, ``never``, ``none``,
  ``non``, ``n't``, ``ex``, ``former``, ``quit``, ...) reads false, one without reads
  true; the field is true when some mention reads true, false when every mention reads
  false.
  Unmentioned: the model's value stays. A field whose first name word is ``park`` is
  also mentioned by ``garage`` and ``carport`` (``_BOOLEAN_ALIASES``: "a double
  garage" is parking).
* **number** (``integer`` / ``number``): a text word matching any of the name's words
  is a mention, and so is an alias of one (``_NUMBER_ALIASES``: ``old`` and ``aged``
  for ``age``, as in "58 years old" and "a forty-six-year-old"; ``min``,
  ``hr``/``hrs``, ``sec`` for ``minutes``, ``hours``, ``seconds``; ``people``,
  ``persons``, ``adults`` for ``guests``; ``people``, ``persons``, ``portions`` for
  ``servings``; ``stars`` for ``rating``; ``square``, ``sq``, ``sqm`` for ``m2``, as
  in "31 square metres" and "162 sq m"); the numeral
  (``structgen.fsm.numerals.numeral_spans``) nearest to a mention, in the same clause
  and at most three words away, whose reading the field's type and bounds accept, is
  the value (a tie goes to the numeral before the mention: English writes "4 guests").
  Unmentioned, or when two sibling number fields would take the same numeral: the
  model's value stays; a nullable number field that no numeral decides and whose
  name's words the text mentions only in clauses with a negation ("Rate and
  experience are not stated") is null (**denied number**).
* **enum** (string options): an option is *mentioned* where its words (split at
  non-letters and underscores, as the text's words are, each reduced to a stem) occur
  as consecutive words of one clause; a mention inside a longer option's mention does
  not count ("premium economy" is not a mention of ``economy``); a currency symbol
  mentions the one ISO 4217 code option it stands for ("£489,950": ``GBP``;
  ``_CURRENCY_SYMBOLS``). When the model's value (a string option, null, or the field
  left out) is not mentioned and exactly one option is mentioned without a negation
  (one before the mention in its clause with at most two words between, or right after
  it as its predicate: "not a feature request", "remote: no", "remote is not
  possible"; "a feature request and not an emergency" and "cannot log in to her
  account", a negated verb, affirm it), that option is the value; when none is and the field
  is nullable and its name is mentioned only negated ("No dress code", as the boolean
  rule reads it), the value is null; otherwise the model's value stays. Options are
  never matched inside a word ("low" is not in "below").
* **separator**: a number field whose value equals a numeral only in that numeral's
  decimal-separator reading, written with trailing zeros (``48`` from "€48,000", ``1.8``
  from "1.800 EUR"), while its other reading is a whole number (``48000``, ``1800``:
  ``structgen.fsm.numerals`` reads "48,000" both ways) takes the whole reading, when
  every such numeral agrees and the field's type and bounds accept it: the model
  stopped at the separator, and no one writes 48 as "48,000".
* **span start**: a string field (not enum or const) whose value the text writes
  only inside longer chunks (every occurrence directly preceded, with no space, by
  letters, digits, ``_`` or ``-``, ``.``, ``@``, ``#``, ``+``, ``&``) starts where that
  chunk starts (its leading punctuation skipped), when every occurrence gives the same
  extension and the field's schema accepts it (formats checked): greedy copying
  commits to a start late (``"0932"`` for "SUP-0932", ``"alsayed@crescent.example"``
  for "fatima.alsayed@crescent.example"). A value that starts a chunk somewhere stays.
* **repeat**: a number field that is not nullable and holds the same value as an
  earlier sibling number field (schema order, after the number rule), where the text
  writes that value as one numeral only, copied its sibling's numeral (a 135M model
  writes ``"systolic": 142, "diastolic": 142`` for "BP 142/91"): it takes the numeral
  the text writes next, in the same clause with at most two words between ("118 over
  76"), when a reading of it fits the field's type and bounds and no sibling holds it.
  A value the text writes twice, or whose next numeral does not fit, stays.
* **string repeat**: a string field with a ``pattern`` (an airport code, say) that
  holds the same value as an earlier sibling string field (``"from_airport": "FRA",
  "to_airport": "FRA"`` for "FRA → New York JFK"), where the text writes that value
  once as one word, takes the first word the text writes after it, in the same clause
  with at most two words between, that its schema accepts and no sibling holds. This
  rule also runs on each object item of an array (the other rules do not: a mention
  does not say which item it belongs to).
* **amount**: a number field named for money (``labels.is_amount_field``: ``price``,
  ``total``, ``amount``, ``cost``, ``fee``, ``paid``, ...) whose value is none of the
  readings of the numerals the text writes with a currency mark (``labels.amount_spans``:
  "£489,950", "CHF 1'150'000"), where exactly one such numeral fits the field's type and
  bounds, takes that numeral (the model copied the area, 162, as the price); a nullable
  one does so from null too (the model wrote null for "bought ... for €49").
* **identifier**: a string field named for an identifier (``labels.identifier_field``:
  ``invoice_number``, ``booking_reference``, ``ticket_id``) takes the one identifier the
  text writes right after the field's label (``labels.identifier_candidates``: "invoice
  BL-778", "booking code LM55RT") when the model's value differs and the field's schema
  accepts it; with none or two different ones, the model's value stays.
* **phone**: a string field named for a phone number (``labels.phone_field``) takes the
  one phone number the text writes (``labels.phone_runs``) when the model's value is
  none of them ("1234 or wei.zhang@lantern." for "0755 8888 1234"); with two or more,
  the model's value stays.
* **identifier null**: a nullable number field whose value the text writes only inside
  chunks a sibling string field holds (17 in "#88-17", the ``ticket_id``) is null: that
  numeral is part of another field's identifier.
* **date order**: when two ``format: date`` fields of one object hold the same date
  and the text writes exactly as many dates (every reading ``structgen.fsm.dates``
  gives) as the object has date fields, the date fields take them in text order (an
  event's ``date`` and ``rsvp_by``, a booking's ``check_in`` and ``check_out``).
* **date null**: a nullable string field without ``format`` or ``pattern``, its name
  nowhere in the text, whose value reads as a date or time (``fsm.dates``) that a
  sibling field holds is null (an appointment's ``location`` = "11 a.m.", the ``time``).
* **null**: a nullable string or number field whose value equals a sibling field's
  value (after the rules above), and whose name the text never mentions (no text word
  matches a stem of it), is null: the model copied a value the text gives to another
  field into one the text does not give (``"rsvp_by"`` = the event's date).

* **array items**: items the text does not support are dropped (``items.trim_items``:
  from the first repeat of an earlier item on, and items whose parts the text writes
  apart), run after the rules above.

A replacement is kept only when the object stays valid under the schema (``jsonschema``).
The rules read the text only (no model call); ``extract(evidence=...)`` turns them on,
and ``EVIDENCE_DEFAULT`` is the measured default (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from decimal import Decimal
from typing import Any

import jsonschema

from structgen.extraction.items import trim_items
from structgen.extraction.labels import (
    amount_spans,
    identifier_candidates,
    identifier_field,
    is_amount_field,
    phone_field,
    phone_runs,
)
from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import dates, times
from structgen.fsm.numerals import numeral_spans

__all__ = [
    "EVIDENCE_DEFAULT",
    "apply_evidence",
    "name_stems",
    "option_stems",
    "stem",
    "unwrapped",
]

EVIDENCE_DEFAULT = True

_GENERIC = frozenset(
    "has have is are was can may allowed allow included include includes required "
    "require needed number num no nr count id of the a an in on at per to for by with".split()
)
_NEGATIONS = frozenset(
    "no not without never none non nothing neither nor cannot cant isnt doesnt dont "
    "wont wasnt arent excluded excluding ex former quit stopped".split()
)
_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "er", "ies", "es", "ed", "s", "e", "y")
_WORD = re.compile(r"[^\W_]+")
_CLAUSE = re.compile(r"[.;!?,()\[\]·|\n]+(?:\s|$)|[;!?()\[\]·|\n]")
# a line break inside a sentence (a hard-wrapped paragraph): between a letter or digit
# and a lowercase letter, with only spaces or tabs around it
_SOFT_WRAP = re.compile(r"(?<=[^\W_])([ \t]*)\n(?=[ \t]*[^\W\d_])")
# words that mention a field whose name holds the key (both as ``stem`` gives them) in
# the number rule: how English writes an age ("58 years old", "aged 58"), the usual
# abbreviations of time units ("50 min", "2 hrs") and the nouns English counts guests,
# servings and ratings in ("four people", "feeds six people", "four stars")
_NUMBER_ALIASES = {
    "age": frozenset({"old", "aged"}),
    "guest": frozenset({"peopl", "person", "adult"}),
    "serv": frozenset({"peopl", "person", "portion"}),
    "rat": frozenset({"star"}),
    "minut": frozenset({"min"}),
    "hour": frozenset({"hr", "hrs"}),
    "second": frozenset({"sec"}),
    "m2": frozenset({"squar", "sq", "sqm"}),
}
# words that mention a boolean field whose name's first word is the key: a garage is
# parking ("a double garage", "no garage")
_BOOLEAN_ALIASES = {"park": frozenset({"garag", "carport"})}
# currency symbols as mentions of an enum's ISO 4217 code options ("£489,950": GBP)
_CURRENCY_SYMBOLS = {
    "EUR": ("€",),
    "GBP": ("£",),
    "USD": ("$",),
    "JPY": ("¥", "円"),
    "CNY": ("¥", "元"),
    "INR": ("₹",),
    "KRW": ("₩",),
    "RUB": ("₽",),
    "TRY": ("₺",),
    "ILS": ("₪",),
    "VND": ("₫",),
    "PHP": ("₱",),
    "THB": ("฿",),
    "UAH": ("₴",),
    "NGN": ("₦",),
}
_COPULAS = frozenset("is are was were be".split())
_WINDOW_BOOL = 4
_WINDOW_NUMBER = 3
_JOINED = re.compile(r"[^\W]|[-.@#+&]")  # characters a chunk of the text is made of
_GAP_REPEAT = 2  # words between a repeated numeral and the next one ("118 over 76")
_GAP_NEGATION = 2  # words between a negation and the option it negates ("not a feature request")


def stem(word: str) -> str:
    """``word`` lowercased with one common English suffix removed (at least three letters
    stay): ``servings`` and ``serves`` -> ``serv``, ``smoker`` -> ``smok``.
    """
    w = word.lower()
    for suf in _SUFFIXES:
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)]
    return w


def unwrapped(text: str) -> str:
    """``text`` with every soft line wrap written as a space, so that a clause does not
    end there: a line break between a letter or digit and a lowercase letter, with only
    spaces or tabs around it (``in eight`` / ``weeks`` on two lines of a hard-wrapped
    paragraph). A blank line, punctuation before the break or a capital after it keep
    the break. Same length as ``text``, so offsets carry over.
    """

    def space(m: re.Match) -> str:
        return m.group(1) + (" " if text[m.end() :].lstrip(" \t")[:1].islower() else "\n")

    return _SOFT_WRAP.sub(space, text)


def name_stems(key: str) -> list[str]:
    """The stems of a field name's words that count for a mention (module docstring):
    ``breakfast_included`` -> ``["breakfast"]``, ``area_m2`` -> ``["area", "m2"]``.
    """
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", key)
    words = [w for w in re.split(r"[\W_]+", spaced) if w]
    return [stem(w) for w in words if w.lower() not in _GENERIC and len(w) >= 2]


def option_stems(option: str) -> list[str]:
    """The stems of an enum option's words, split as the text's words are (a value, not
    an identifier: ``PostNord`` stays one word), as a mention must show them in order:
    ``"feature_request"`` -> ``["featur", "request"]``, ``"La Poste"`` -> ``["la", "post"]``.
    """
    return [stem(w) for w in _WORD.findall(unicodedata.normalize("NFKC", option))]


def _matches(a: str, b: str) -> bool:
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 4 and long_.startswith(short)


class _Text:
    """A text as normalised words with their offsets and clause numbers."""

    def __init__(self, text: str) -> None:
        self.text = text
        bounds = [m.start() for m in _CLAUSE.finditer(unwrapped(text))]
        self.words: list[tuple[str, int, int, int]] = []  # (stem, start, end, clause)
        self.raw: list[str] = []
        clause = 0
        for m in _WORD.finditer(text):
            while clause < len(bounds) and bounds[clause] < m.start():
                clause += 1
            word = unicodedata.normalize("NFKC", m.group()).lower()
            self.words.append((stem(word), m.start(), m.end(), clause))
            self.raw.append(word)

    def word_at(self, offset: int) -> int:
        """The index of the word holding (or first after) a character offset."""
        for k, (_, _start, end, _) in enumerate(self.words):
            if end > offset:
                return k
        return len(self.words)

    def is_negation(self, j: int) -> bool:
        """Whether word ``j`` is a negation (``_NEGATIONS``, ``...n't``, the ``t`` of
        ``don't`` as the word split leaves it).
        """
        raw, start = self.raw[j], self.words[j][1]
        return (
            raw in _NEGATIONS
            or raw.endswith("n't")
            or raw == "t"
            and j > 0
            and (self.text[start - 1 : start] in "'’" and self.raw[j - 1].endswith("n"))
        )

    def negated(self, k: int) -> bool:
        """Whether word ``k``'s clause holds a negation."""
        clause = self.words[k][3]
        return any(c == clause and self.is_negation(j) for j, (*_, c) in enumerate(self.words))

    def negates(self, a: int, b: int) -> bool:
        """Whether the mention of words ``a..b`` is negated: a negation before it in its
        clause ("not a feature request", "no dress code"), or right after it as its
        predicate ("remote: no", "remote is not possible"); a negation later in the
        clause is about something else ("a feature request and not an emergency").
        """
        clause = self.words[a][3]
        before = range(max(0, a - 1 - _GAP_NEGATION), a)
        if any(self.words[j][3] == clause and self.is_negation(j) for j in before):
            return True
        after = [j for j in (b + 1, b + 2) if j < len(self.words) and self.words[j][3] == clause]
        if after and self.is_negation(after[0]):
            return True
        return len(after) == 2 and self.raw[after[0]] in _COPULAS and self.is_negation(after[1])


def _bool_value(doc: _Text, stems: list[str]) -> bool | None:
    """The boolean rule of the module docstring; None when the text does not mention it."""
    if not stems:
        return None
    readings = []
    for k, (w, _, _, clause) in enumerate(doc.words):
        if not (_matches(w, stems[0]) or w in _BOOLEAN_ALIASES.get(stems[0], ())):
            continue
        window = [
            j
            for j in range(max(0, k - _WINDOW_BOOL), min(len(doc.words), k + _WINDOW_BOOL + 1))
            if doc.words[j][3] == clause
        ]
        if all(any(_matches(doc.words[j][0], s) for j in window) for s in stems[1:]):
            readings.append(not doc.negated(k))
    if not readings:
        return None
    return any(readings)


def _enum_value(
    doc: _Text, options: list[str], current: Any, denied: bool = False
) -> tuple[bool, str | None]:
    """The enum rule of the module docstring: ``(decided, value)``; ``(False, None)``
    when it does not decide the field. ``denied``: the field is nullable and the text
    mentions its name only negated ("No dress code"), so with no option affirmed and the
    model's option unmentioned the value is null.
    """
    stems = {o: option_stems(o) for o in options}
    spans: dict[str, list[tuple[int, int]]] = {o: [] for o in options}
    for o, ws in stems.items():
        n = len(ws)
        for k in range(len(doc.words) - n + 1) if n else ():
            if doc.words[k][3] == doc.words[k + n - 1][3] and all(
                doc.words[k + i][0] == ws[i] for i in range(n)
            ):
                spans[o].append((k, k + n - 1))
    for o, k in _symbol_mentions(doc, options):
        spans[o].append((k, k))
    every = [(a, b) for found in spans.values() for a, b in found]
    kept = {
        o: [
            (a, b)
            for a, b in found
            if not any(x <= a and b <= y and y - x > b - a for x, y in every)
        ]
        for o, found in spans.items()
    }
    if isinstance(current, str) and kept.get(current):
        return False, None
    affirmed = [o for o in options if any(not doc.negates(a, b) for a, b in kept[o])]
    if not affirmed and denied and current is not None:
        return True, None
    if len(affirmed) != 1 or affirmed[0] == current:
        return False, None
    return True, affirmed[0]


def _symbol_mentions(doc: _Text, options: list[str]) -> list[tuple[str, int]]:
    """``(option, word index)`` of each currency symbol in the text that stands for one
    ISO 4217 option (``_CURRENCY_SYMBOLS``; a symbol two options share mentions neither,
    ``$`` after a letter is another dollar: ``A$``, ``HK$``, but ``US$``); the index is
    the word after the symbol (the amount), else the last word.
    """
    if not doc.words:
        return []
    by_symbol: dict[str, list[str]] = {}
    for o in options:
        for sym in _CURRENCY_SYMBOLS.get(o.upper(), ()):
            by_symbol.setdefault(sym, []).append(o)
    found = []
    for sym, opts in by_symbol.items():
        if len(opts) != 1:
            continue
        for m in re.finditer(re.escape(sym), doc.text):
            before = doc.text[max(0, m.start() - 2) : m.start()]
            if sym == "$" and before[-1:].isalpha() and before != "US":
                continue
            found.append((opts[0], min(doc.word_at(m.end()), len(doc.words) - 1)))
    return found


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float)) and not isinstance(value, bool)


def _mentions(doc: _Text, stems: list[str]) -> list[int]:
    """Indices of the text's words that match some of a field name's stems, or are one of
    a stem's aliases (``_NUMBER_ALIASES``: "old" for ``age``, "min" for ``minutes``).
    """
    aliases = frozenset().union(*(_NUMBER_ALIASES.get(s, ()) for s in stems))
    return [
        k
        for k, (w, *_) in enumerate(doc.words)
        if w in aliases or any(_matches(w, s) for s in stems)
    ]


def _nullable(root: Any, sub: Any) -> bool:
    """Whether a property's subschema accepts null (type, enum or an anyOf/oneOf branch)."""
    sub = _resolve(root, sub)
    if not isinstance(sub, dict):
        return False
    types = sub.get("type")
    if types == "null" or isinstance(types, list) and "null" in types:
        return True
    if isinstance(sub.get("enum"), list) and None in sub["enum"]:
        return True
    branches = [b for key in ("anyOf", "oneOf") for b in sub.get(key) or ()]
    return any(_nullable(root, b) for b in branches)


def _accepts(sub: dict, value: Decimal) -> bool:
    types = sub.get("type")
    types = [types] if isinstance(types, str) else list(types or ())
    if "integer" in types and "number" not in types and value != value.to_integral_value():
        return False
    lo, hi = sub.get("minimum"), sub.get("maximum")
    if lo is not None and value < Decimal(str(lo)) or hi is not None and value > Decimal(str(hi)):
        return False
    xlo, xhi = sub.get("exclusiveMinimum"), sub.get("exclusiveMaximum")
    if isinstance(xlo, (int, float)) and not isinstance(xlo, bool) and value <= Decimal(str(xlo)):
        return False
    return not (
        isinstance(xhi, (int, float)) and not isinstance(xhi, bool) and value >= Decimal(str(xhi))
    )


def _number_value(doc: _Text, spans: list, stems: list[str], sub: dict) -> Decimal | None:
    """The number rule of the module docstring; None when no mention decides it."""
    mentions = _mentions(doc, stems)
    best: tuple[int, int, Decimal] | None = None
    for start, end, values in spans:
        first, last = doc.word_at(start), doc.word_at(max(start, end - 1))
        if first >= len(doc.words):
            continue
        fitting = [v for v in values if _accepts(sub, v)]
        if not fitting:
            continue
        for k in mentions:
            if doc.words[k][3] != doc.words[first][3] or first <= k <= last:
                continue
            dist = first - k if k < first else k - last
            if dist > _WINDOW_NUMBER:
                continue
            rank = (dist, 0 if last < k else 1)
            if best is None or rank < best[:2]:
                best = (*rank, fitting[0])
    return None if best is None else best[2]


def _repeated_numbers(
    root: Any, sub: dict, node: dict, doc: _Text, spans: list
) -> dict[str, Decimal]:
    """The repeat rule of the module docstring: ``{field: new value}`` for the
    non-nullable number fields of one object that repeat an earlier sibling's value the
    text writes once, each taking the numeral the text writes next after it.
    """
    found: dict[str, Decimal] = {}
    held: list[tuple[str, Decimal]] = []  # number siblings so far, schema order
    for name, prop in (sub.get("properties") or {}).items():
        kind, branch = _kind(root, prop)
        current = node.get(name)
        if kind != "number" or not _scalar(current) or isinstance(current, str):
            continue
        value = Decimal(str(current))
        earlier = any(v == value for _, v in held)
        held.append((name, value))
        if not earlier or _nullable(root, prop):
            continue
        places = [k for k, (_, _, values) in enumerate(spans) if value in values]
        if len(places) != 1 or places[0] + 1 >= len(spans):
            continue  # written twice (both may be right) or never: the model decides
        start, end, _ = spans[places[0]]
        n_start, n_end, n_values = spans[places[0] + 1]
        last, first = doc.word_at(max(start, end - 1)), doc.word_at(n_start)
        if first >= len(doc.words) or doc.words[first][3] != doc.words[last][3]:
            continue  # the next numeral is in another clause
        if first - last - 1 > _GAP_REPEAT:
            continue
        taken = {v for _, v in held} | set(_node_numbers(node))
        fitting = [v for v in n_values if _accepts(branch, v) and v not in taken]
        if fitting:
            found[name] = fitting[0]
            held[-1] = (name, fitting[0])
    return found


def _repeated_strings(root: Any, sub: dict, node: dict, doc: _Text) -> dict[str, str]:
    """The string repeat rule of the module docstring: ``{field: new value}`` for the
    string fields with a ``pattern`` of one object that repeat an earlier sibling's
    value the text writes once (as one word), each taking the first word the text writes
    after it, in the same clause with at most ``_GAP_REPEAT`` words between, that the
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
        for j in range(k + 1, min(len(doc.words), k + 2 + _GAP_REPEAT)):
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


def _grouped_reading(root: Any, prop: Any, value: Any, spans: list) -> Decimal | None:
    """The separator rule of the module docstring: the thousands reading of the numeral
    whose decimal reading with trailing zeros ``value`` equals, or None (no change).
    """
    kind, branch = _kind(root, prop)
    if kind != "number" or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = Decimal(str(value))
    found: set[Decimal] = set()
    for _, _, values in spans:
        if number not in values:
            continue
        zeroed = [
            r
            for r in values
            if r == number and int(r.as_tuple().exponent) < 0 and r.as_tuple().digits[-1] == 0
        ]
        whole = [r for r in values if r != number and int(r.as_tuple().exponent) >= 0]
        if not zeroed or len(whole) != 1:
            return None  # some numeral reads as the value plainly: the model decides
        found.add(whole[0])
    if len(found) != 1:
        return None
    (grouped,) = found
    return grouped if _accepts(branch, grouped) else None


def _span_start(root: Any, prop: Any, value: Any, text: str) -> str | None:
    """The span-start rule of the module docstring: the value extended to the start of
    the chunk the text writes it in, or None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not value.strip() or not isinstance(sub, dict):
        return None
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    if types - {"null"} != {"string"} or "enum" in sub or "const" in sub:
        return None
    found: set[str] = set()
    at = text.find(value)
    while at >= 0:
        start = at
        while start > 0 and _JOINED.fullmatch(text[start - 1]):
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
    return new if _schema_accepts(root, sub, new) else None


def _schema_accepts(root: Any, sub: Any, value: Any) -> bool:
    """Whether ``sub`` (a property's subschema, ``$ref`` resolved) accepts ``value``,
    formats checked; False for a subschema that does not stand alone.
    """
    try:
        cls = jsonschema.validators.validator_for(root)
        return cls(sub, format_checker=cls.FORMAT_CHECKER).is_valid(value)
    except Exception:  # a subschema that does not stand alone (a $ref inside)
        return False


def _amount_value(root: Any, prop: Any, name: str, value: Any, amounts: list) -> Decimal | None:
    """The amount rule of the module docstring: the one currency-marked numeral a money
    field may hold, when the model's value is none of them; else None (no change).
    """
    kind, branch = _kind(root, prop)
    if kind != "number" or isinstance(value, (str, bool)) or not is_amount_field(name_stems(name)):
        return None
    if value is None and not _nullable(root, prop):
        return None
    number = None if value is None else Decimal(str(value))
    if number is not None and any(number in values for _, _, values in amounts):
        return None
    fitting = [[v for v in values if _accepts(branch, v)] for _, _, values in amounts]
    distinct = {f[0] for f in fitting if f}
    return distinct.pop() if len(distinct) == 1 else None


def _identifier_value(root: Any, prop: Any, name: str, value: Any, text: str) -> str | None:
    """The identifier rule of the module docstring: the one identifier the text writes
    after the field's label, when the model's value differs; else None (no change).
    """
    sub = _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not identifier_field(name):
        return None
    if "enum" in sub or "const" in sub or "format" in sub:
        return None
    found = identifier_candidates(text, name, stem)
    if len(found) != 1 or found[0] == value:
        return None
    return found[0] if _schema_accepts(root, sub, found[0]) else None


def _phone_value(root: Any, prop: Any, name: str, value: Any, text: str) -> str | None:
    """The phone rule of the module docstring: the one phone number the text writes,
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
    return found[0] if _schema_accepts(root, sub, found[0]) else None


def _inside_sibling(root: Any, prop: Any, name: str, node: dict, text: str, spans: list) -> bool:
    """The identifier null rule of the module docstring: whether a nullable number field
    holds a numeral the text writes only inside a chunk that a sibling string field holds
    ("88-17" as ``ticket_id``: 17 is not the ``order_number``).
    """
    value = node.get(name)
    kind, _ = _kind(root, prop)
    if kind != "number" or not _scalar(value) or isinstance(value, str):
        return False
    if not _nullable(root, prop):
        return False
    held = {v for k, v in node.items() if k != name and isinstance(v, str) and v}
    places = [(a, b) for a, b, values in spans if Decimal(str(value)) in values]
    if not places:
        return False
    for a, b in places:
        start, end = a, b
        while start > 0 and _JOINED.fullmatch(text[start - 1]):
            start -= 1
        while end < len(text) and _JOINED.fullmatch(text[end]):
            end += 1
        chunk = text[start:end].strip("-.#@+&")
        if chunk == text[a:b] or not any(chunk in h for h in held):
            return False
    return True


def _denied(doc: _Text, stems: list[str], root: Any, prop: Any) -> bool:
    """The denied-number rule of the module docstring: a nullable field whose name's
    words the text mentions, every mention in a clause with a negation.
    """
    if not _nullable(root, prop):
        return False
    mentions = [k for k, (w, *_) in enumerate(doc.words) if any(_matches(w, s) for s in stems)]
    return bool(mentions) and all(doc.negated(k) for k in mentions)


def _is_date_field(root: Any, prop: Any) -> bool:
    sub = _resolve(root, prop)
    if not isinstance(sub, dict) or sub.get("format") != "date" or "enum" in sub:
        return False
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    return types - {"null"} == {"string"}


def _dates_in_order(root: Any, sub: dict, node: dict, text: str) -> dict[str, str]:
    """The date-order rule of the module docstring: ``{field: new date}`` when two date
    fields of one object hold the same date and the text writes exactly as many dates
    (every reading, ``fsm.dates``) as the object has date fields, taken in text order.
    """
    names = [k for k, p in (sub.get("properties") or {}).items() if _is_date_field(root, p)]
    held = [node.get(k) for k in names]
    if len(names) < 2 or not any(isinstance(v, str) and held.count(v) > 1 for v in held):
        return {}
    written = dates(text)
    if len(written) != len(names):
        return {}
    return {k: d for k, d, v in zip(names, written, held) if d != v}


def _a_siblings_date(root: Any, prop: Any, name: str, node: dict, doc: _Text) -> bool:
    """The date-null rule of the module docstring: whether a nullable plain string field
    holds a date or time (as ``fsm.dates`` reads it) that a sibling field holds.
    """
    value, sub = node.get(name), _resolve(root, prop)
    if not isinstance(value, str) or not isinstance(sub, dict) or not _nullable(root, prop):
        return False
    if any(k in sub for k in ("format", "pattern", "enum", "const")):
        return False
    if _mentions(doc, name_stems(name)):
        return False  # the text names the field: the model decides
    read = set(dates(value)) | set(times(value))
    return any(k != name and isinstance(v, str) and v in read for k, v in node.items())


def _node_numbers(node: dict) -> list[Decimal]:
    """The number values (not booleans) directly in one object."""
    return [
        Decimal(str(v))
        for v in node.values()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    ]


def _kind(root: Any, sub: Any) -> tuple[str | None, dict]:
    """``("boolean" | "number" | "enum" | None, the non-null branch)`` of a property's
    subschema; "enum" is an ``enum`` with at least two string options.
    """
    sub = _resolve(root, sub)
    if isinstance(sub, dict) and isinstance(sub.get("enum"), list) and "const" not in sub:
        strings = [o for o in sub["enum"] if isinstance(o, str)]
        return ("enum", sub) if len(set(strings)) >= 2 else (None, {})
    if not isinstance(sub, dict) or "enum" in sub or "const" in sub:
        return None, {}
    for key in ("anyOf", "oneOf"):
        branches = sub.get(key)
        if isinstance(branches, list):
            rest = [b for b in (_resolve(root, b) for b in branches) if b != {"type": "null"}]
            if len(rest) != 1 or not isinstance(rest[0], dict):
                return None, {}
            return _kind(root, rest[0])
    types = sub.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    main = types - {"null"}
    if main == {"boolean"}:
        return "boolean", sub
    if main and main <= {"integer", "number"}:
        return "number", sub
    return None, {}


def apply_evidence(schema: Any, text: str, value: Any) -> tuple[Any, list[str]]:
    """One finished object with its boolean, number and enum fields decided by the
    text's mentions of their names and options, and its arrays' unsupported items
    dropped (module docstring).

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
    doc = _Text(text)
    spans = numeral_spans(text)
    amounts = amount_spans(text)
    out = json.loads(json.dumps(value))
    changed: list[str] = []

    def walk(sub: Any, node: dict, path: str, depth: int) -> None:
        sub = _resolve(schema, sub)
        if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
            return
        numbers: dict[str, Decimal] = {}
        for name, prop in (sub.get("properties") or {}).items():
            kind, branch = _kind(schema, prop)
            if name not in node and kind != "enum":
                continue
            stems = name_stems(name)
            if kind == "boolean" and isinstance(node[name], bool):
                found = _bool_value(doc, stems)
                if found is not None and found != node[name]:
                    node[name] = found
                    changed.append(path + name)
            elif kind == "enum" and (node.get(name) is None or isinstance(node[name], str)):
                options = list(dict.fromkeys(o for o in branch["enum"] if isinstance(o, str)))
                denied = _nullable(schema, prop) and _bool_value(doc, stems) is False
                decided, found_e = _enum_value(doc, options, node.get(name), denied)
                if decided:
                    node[name] = found_e
                    changed.append(path + name)
            elif kind == "number" and stems:
                found_n = _number_value(doc, spans, stems, branch)
                if found_n is not None:
                    numbers[name] = found_n
                elif node[name] is not None and _denied(doc, stems, schema, prop):
                    node[name] = None
                    changed.append(path + name)
            elif isinstance(node[name], dict):
                walk(prop, node[name], f"{path}{name}.", depth + 1)
            elif isinstance(node[name], list):  # items: only the string repeat rule
                arr = _resolve(schema, prop)
                items = _resolve(schema, arr.get("items")) if isinstance(arr, dict) else None
                for i, item in enumerate(node[name]):
                    if isinstance(items, dict) and isinstance(item, dict):
                        for key, new in _repeated_strings(schema, items, item, doc).items():
                            item[key] = new
                            changed.append(f"{path}{name}[{i}].{key}")
        shared = [v for v in numbers.values()]
        for name, num in numbers.items():
            if shared.count(num) > 1:
                continue  # two siblings point at one numeral: the model decides
            new: Any = int(num) if num == num.to_integral_value() else float(num)
            current = node[name]
            if isinstance(current, bool) or (
                isinstance(current, (int, float)) and Decimal(str(current)) == num
            ):
                continue
            node[name] = new
            changed.append(path + name)
        for name, prop in (sub.get("properties") or {}).items():
            amount = _amount_value(schema, prop, name, node.get(name), amounts)
            if amount is not None:
                node[name] = int(amount) if amount == amount.to_integral_value() else float(amount)
                changed.append(path + name)
            labelled = _identifier_value(schema, prop, name, node.get(name), text)
            labelled = labelled or _phone_value(schema, prop, name, node.get(name), text)
            if labelled is not None:
                node[name] = labelled
                changed.append(path + name)
            grouped = _grouped_reading(schema, prop, node.get(name), spans)
            if grouped is not None:
                node[name] = int(grouped)
                changed.append(path + name)
            started = _span_start(schema, prop, node.get(name), text)
            if started is not None:
                node[name] = started
                changed.append(path + name)
        for name, num in _repeated_numbers(schema, sub, node, doc, spans).items():
            node[name] = int(num) if num == num.to_integral_value() else float(num)
            changed.append(path + name)
        for name, new_s in _repeated_strings(schema, sub, node, doc).items():
            node[name] = new_s
            changed.append(path + name)
        for name, new_d in _dates_in_order(schema, sub, node, text).items():
            node[name] = new_d
            changed.append(path + name)
        copied = [
            name
            for name, prop in (sub.get("properties") or {}).items()
            if _scalar(node.get(name))
            and _nullable(schema, prop)
            and not _mentions(doc, name_stems(name))
            and any(k != name and _scalar(v) and v == node[name] for k, v in node.items())
        ]
        copied += [
            name
            for name, prop in (sub.get("properties") or {}).items()
            if name not in copied
            and (
                _inside_sibling(schema, prop, name, node, text, spans)
                or _a_siblings_date(schema, prop, name, node, doc)
            )
        ]
        for name in copied:  # a sibling's value for a field the text never names
            node[name] = None
            changed.append(path + name)

    walk(schema, out, "", 0)
    checker = jsonschema.validators.validator_for(schema)(schema)
    if not changed or not checker.is_valid(out):
        out, changed = value, []
    trimmed, dropped = trim_items(schema, text, out)
    return trimmed, changed + dropped
