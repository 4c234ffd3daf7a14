"""The boolean and enum rules of ``structgen.extraction.evidence``.

A boolean field is decided by the text's mentions of its name and the negations in their
clauses (``bool_value``, with ``_BOOLEAN_ALIASES``); a string enum by the one option the
text mentions un-negated (``enum_value``), a currency symbol mentioning the ISO 4217 code
option it stands for (``_symbol_mentions``, ``_CURRENCY_SYMBOLS``); an array of string
enum options by the options the text mentions un-negated (``enum_items``).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from structgen.extraction.evidence.text import _WORD, TextWords, option_stems, stem, stems_match

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


_WINDOW_BOOL = 4


def bool_value(doc: TextWords, stems: list[str]) -> bool | None:
    """The boolean rule of the package docstring.

    Args:
        doc: the text's words.
        stems: the field name's stems (``text.name_stems``); the first may also be
            mentioned by its aliases (``_BOOLEAN_ALIASES``).

    Returns:
        True when some mention is in a clause without a negation, False when every
        mention is negated, None when the text does not mention the field (or ``stems``
        is empty).
    """
    if not stems:
        return None
    readings = []
    for k, (w, _, _, clause) in enumerate(doc.words):
        if not (stems_match(w, stems[0]) or w in _BOOLEAN_ALIASES.get(stems[0], ())):
            continue
        window = [
            j
            for j in range(max(0, k - _WINDOW_BOOL), min(len(doc.words), k + _WINDOW_BOOL + 1))
            if doc.words[j][3] == clause
        ]
        if all(any(stems_match(doc.words[j][0], s) for j in window) for s in stems[1:]):
            readings.append(not doc.negated(k))
    if not readings:
        return None
    return any(readings)


def enum_value(
    doc: TextWords,
    options: list[str],
    current: Any,
    denied: bool = False,
    stems: list[str] | None = None,
    absent: bool = False,
) -> tuple[bool, str | None]:
    """The enum rule of the package docstring: ``(decided, value)``; ``(False, None)``
    when it does not decide the field. ``denied``: the field is nullable and the text
    mentions its name only negated ("No dress code"), so with no option affirmed and the
    model's option unmentioned the value is null. ``stems``: the field name's stems
    (``text.name_stems``), for the option-beside-its-name rule (``_beside_name``).
    ``absent``: the text mentions the field's name only negated ("no cabin"), so with no
    option affirmed the option that says "none" (``NONE_OPTIONS``) is the value.
    """
    kept = _option_mentions(doc, options)
    if all(_CODE.fullmatch(o) for o in options):
        kept = _priced(doc, kept)
    if isinstance(current, str) and any(not doc.negates(a, b) for a, b in kept.get(current, ())):
        return False, None  # (an option the text mentions only negated is not kept for that)
    affirmed = [o for o in options if any(not doc.negates(a, b) for a, b in kept[o])]
    if not affirmed and denied and current is not None:
        return True, None
    if not affirmed and absent:
        nothing = [o for o in options if o.strip().lower() in NONE_OPTIONS]
        if len(nothing) == 1 and nothing[0] != current:
            return True, nothing[0]
    if len(affirmed) > 1 and stems:
        beside = [o for o in affirmed if _beside_name(doc, kept[o], stems)]
        if len(beside) == 1 and not _shares_clause(doc, kept, beside[0], affirmed):
            affirmed = beside
    if len(affirmed) != 1 or affirmed[0] == current:
        return False, None
    return True, affirmed[0]


# words a text writes for a level of a low-medium-high scale (an enum whose options hold
# ``low`` and ``high``): "normal priority" is ``medium``, "treat this as urgent" ``high``
SCALE_ALIASES = {
    "medium": ("normal", "moderate"),
    "high": ("urgent",),
}

# the options of an enum that say the thing is absent ("Seating only, no cabin": ``none``)
NONE_OPTIONS = frozenset({"none", "no"})

# words between an option's mention and its field's name that still make them one phrase
# ("outside cabin", "Cabin: outside", "an inside twin cabin")
_GAP_BESIDE = 1


def _shares_clause(
    doc: TextWords, kept: dict[str, list[tuple[int, int]]], option: str, affirmed: list[str]
) -> bool:
    """Whether another affirmed option is mentioned in a clause that mentions ``option``
    ("Low or high priority": the name goes with both).
    """
    clauses = {doc.words[a][3] for a, _ in kept[option]}
    return any(doc.words[a][3] in clauses for o in affirmed if o != option for a, _ in kept[o])


def _beside_name(doc: TextWords, found: list[tuple[int, int]], stems: list[str]) -> bool:
    """Whether an un-negated mention of an option stands beside a word of the field's
    name: at most ``_GAP_BESIDE`` words before or after it, in its clause ("4-berth
    outside cabin" for ``cabin``, where "Pets: none travelling" also mentions ``none``).
    """
    for a, b in found:
        if doc.negates(a, b):
            continue
        clause = doc.words[a][3]
        near = [*range(max(0, a - 1 - _GAP_BESIDE), a), *range(b + 1, b + 2 + _GAP_BESIDE)]
        for j in near:
            if j < len(doc.words) and doc.words[j][3] == clause:
                if any(stems_match(doc.words[j][0], s) for s in stems):
                    return True
    return False


# an ISO 4217-shaped option: three capital letters ("USD", "CAD")
_CODE = re.compile(r"[A-Z]{3}")


def _priced(
    doc: TextWords, kept: dict[str, list[tuple[int, int]]]
) -> dict[str, list[tuple[int, int]]]:
    """The mentions of currency-code options (``_CODE``) that stand beside an amount (a
    word of digits right before or after, or the amount after a symbol), when the text
    has some: "Vectorline CAD Professional ... USD 4,475.00" mentions ``USD`` only.
    ``kept`` as it is when no mention stands beside an amount.
    """

    def by_amount(a: int, b: int) -> bool:
        near = (a - 1, a, b + 1) if a == b else (a - 1, b + 1)
        return any(0 <= j < len(doc.raw) and doc.raw[j][:1].isdigit() for j in near)

    priced = {o: [ab for ab in found if by_amount(*ab)] for o, found in kept.items()}
    return priced if any(priced.values()) else kept


def _option_mentions(doc: TextWords, options: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Where the text mentions each option: ``{option: [(first word, last word), ...]}``,
    the option's words (``option_stems``) in order within one clause, a compound split
    differently (``_joined_mentions``), a word for a level of a low-high scale
    (``SCALE_ALIASES``), or a currency symbol standing for it; a mention inside a longer
    option's mention does not count ("free" inside "gluten free").
    """
    spans: dict[str, list[tuple[int, int]]] = {o: [] for o in options}
    for o in options:
        ws = option_stems(o)
        n = len(ws)
        for k in range(len(doc.words) - n + 1) if n else ():
            if doc.words[k][3] == doc.words[k + n - 1][3] and all(
                doc.words[k + i][0] == ws[i] for i in range(n)
            ):
                spans[o].append((k, k + n - 1))
    for o in options:
        spans[o].extend(ab for ab in _joined_mentions(doc, o) if ab not in spans[o])
    words = {w for o in options for w in option_stems(o)}
    scale = {"low", "high"} <= {o.lower() for o in options}
    for o in options if scale else ():
        for alias in SCALE_ALIASES.get(o.lower(), ()):
            if stem(alias) not in words:  # ("normal" as an option of its own: itself)
                spans[o].extend((k, k) for k, w in enumerate(doc.words) if w[0] == stem(alias))
    for o, k in _symbol_mentions(doc, options):
        spans[o].append((k, k))
    every = [(a, b) for found in spans.values() for a, b in found]
    inside = {
        (a, b) for a, b in every if any(x <= a and b <= y and y - x > b - a for x, y in every)
    }
    return {o: [ab for ab in found if ab not in inside] for o, found in spans.items()}


def _joined_mentions(doc: TextWords, option: str) -> list[tuple[int, int]]:
    """Where the text writes an option as one compound split differently: words joined
    by hyphens whose letters run together are the option's (``TextWords.compounds``:
    "Call-out" mentions ``callout``, "Wi-Fi" ``wifi``), and one word is an option of two
    or more words run together ("callout" mentions ``call_out``); compared as stems
    (``text.stem``) of the letters and digits run together, in text order.
    """
    words = [w.lower() for w in _WORD.findall(unicodedata.normalize("NFKC", option))]
    if not words:
        return []
    whole = stem("".join(words))
    found = [(k, k) for k in doc.by_stem.get(whole, ())] if len(words) > 1 else []
    found += [
        (k, end)
        for k, end, joined in doc.compounds
        if joined == whole and doc.raw[k : end + 1] != words  # (own words: plain mention)
    ]
    return sorted(found)


def enum_items(doc: TextWords, items: dict, array: dict, current: Any) -> list[str] | None:
    """The enum-array rule of the package docstring: an array of string enum options holds
    the options the text mentions un-negated (``_option_mentions``), in the order of their
    first mention ("GPS navigation and one child seat": ``["gps", "child_seat"]``), not
    the options it leaves unmentioned (a model listing the schema's options) nor
    nothing when it mentions some.

    Args:
        doc: the text's words.
        items: the array's item subschema (``$ref`` resolved).
        array: the array's subschema (``minItems``, ``maxItems``).
        current: the array as extracted.

    Returns:
        The new array, or None where the rule does not apply (items not all string
        options, the array already holds exactly the mentioned options, or the mentioned
        options do not fit ``minItems``/``maxItems``).
    """
    options = items.get("enum")
    if not isinstance(current, list) or not isinstance(options, list) or not options:
        return None
    if not all(isinstance(o, str) for o in options) or not all(isinstance(v, str) for v in current):
        return None
    mentions = _option_mentions(doc, list(dict.fromkeys(options)))
    first = {
        o: min(a for a, b in found if not doc.negates(a, b))
        for o, found in mentions.items()
        if any(not doc.negates(a, b) for a, b in found)
    }
    new = sorted(first, key=first.__getitem__)
    lo, hi = array.get("minItems", 0), array.get("maxItems")
    if set(new) == set(current) or len(new) < lo or (isinstance(hi, int) and len(new) > hi):
        return None
    return new


def _symbol_mentions(doc: TextWords, options: list[str]) -> list[tuple[str, int]]:
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
