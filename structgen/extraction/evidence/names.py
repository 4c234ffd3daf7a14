"""Where a copied name starts and ends: rules of ``structgen.extraction.evidence``.

A name the model cut short takes the capitalised words next to it (``capital_run``); a
place field takes the whole comma-joined list of place names it is written in
(``place_list``); a value running on into a sibling's value is cut before it
(``sibling_cut``), and one running across a sentence end is cut there (``sentence_cut``);
a courtesy title before a name goes (``after_honorific``); a role
left null takes the appositive after a name ("Elena Petrova, Head of Research at ...":
``appositive_role``).
"""

from __future__ import annotations

import re
from typing import Any

from structgen.extraction.evidence.fields import free_string_schema, node_numbers, schema_accepts
from structgen.extraction.evidence.strings import labelled, sibling_strings
from structgen.extraction.evidence.text import name_stems, stem, stems_match
from structgen.extraction.labels import iban_field, iban_runs
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import date_spans
from structgen.fsm.numerals import numeral_spans

# English function words (lowercase): capitalised, they do not continue a name
# (``is_name_word``); a value cut before a sibling's value does not end with one ("...
# reception at"); a span's extension stops at one (``structgen.extraction.spans``)
FUNCTION_WORDS = frozenset(
    "the a an and or of at on in to for from by with via as is are was were be "
    "her his its our your their my we i he she it they you this that these those".split()
)

# capitalised words of a date, not of a name ("Call Hannah Wright Monday")
_CALENDAR_WORDS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april "
    "may june july august september october november december".split()
)

_MAX_RUN_WORDS = 3  # capitalised words the name-run rule adds on each side

_WORD_CHAR = re.compile(r"[^\W_]")

_WORD_BEFORE = re.compile(r"([^\W\d_][\w'’&-]*) $")  # a word, one space, then the value

_WORD_AFTER = re.compile(r" ([^\W\d_][\w'’&-]*[^\W_])(?![\w'’&-])")

# the same across an ampersand between two names ("Harlow & Finch Auctioneers")
_AMP_BEFORE = re.compile(r"([^\W\d_][\w'’-]*) & $")
_AMP_AFTER = re.compile(r" & ([^\W\d_][\w'’-]*[^\W_])(?![\w'’&-])")

# a sentence starts at the given offset: the text's start, or after ". ", "! ", "? ", ": "
# or a line break; the full stop of a title or an initial before a name ends no sentence
# ("Prof. Dr. Ursula Keller-Brandt", "Mr. Dmitri Volkov", "J. Smith")
_SENTENCE_START = re.compile(
    r"(?:\A|(?<!\bDr)(?<!\bProf)(?<!\bMrs)(?<!\bMr)(?<!\bMs)(?<!\bMx)(?<!\bMme)(?<!\b[A-Z])\.\s*"
    r"|[!?:\n]\s*|\n)\s*\Z"
)

# a courtesy title before a name that ends the value ("E-ticket for Mr. Dmitri Volkov");
# "Dr." stays: a provider is "Dr. Sato"
_HONORIFIC = re.compile(r"(?<![^\W_])(?:Mr|Mrs|Ms|Miss|Mx)\.? +(\S+(?: +\S+){0,3})\Z")

# a place field's name words (``text.stem``) and the parts of a comma-joined place list
_PLACE_STEMS = frozenset({"loc", "venu", "addres", "plac"})

_STRICT_WORD = re.compile(r"[^\W\d_][\w'’-]*")

_PART_AFTER = re.compile(r", ([^\W\d_][^,.;:|·()\n]*[^\W_])")

# a sentence or line starts at the end offset of a search (``.search(text, 0, offset)``):
# the text's start, or after ".", "!", "?" or a line break, spaces allowed; unlike
# ``_SENTENCE_START`` not after ":", where a label's value may start a list
SENTENCE_START_STRICT = re.compile(r"(?:\A|[.!?\n])\s*\Z")

_LIST_END = re.compile(r"[ \t]*(?:\Z|[.;|·\n])")

_CLAUSE_BREAK = re.compile(r"[.,;|·]\s|\s[—–-]\s")  # "Sofia. elena@...", "Volkov, booking"

_TRAILING = " \t\n,.;:|·-–—(/"

# a name of two to four words, its "'s", then a lowercase word or a digit
_POSSESSIVE = re.compile(r"((?:[^\W\d_][\w-]*)(?: [^\W\d_][\w-]*){1,3})['’]s +(?=[a-z0-9])")

# what joins a name to a date it runs on into ("Toronto on Feb 21st", "Hall, 12 January")
_DATE_TAIL_JOIN = re.compile(
    r"(?:,(?:\s*(?:born|dated))?|\s(?:on|at|by|from|until|since|born|dated))\s*\Z", re.IGNORECASE
)
# a bracketed note ending a value, after its date: "14/03/1951 (day/month/year)"
_BRACKET_NOTE = re.compile(r"\s*[(\[][^()\[\]]*[)\]]\s*\Z")


def _word_spans(value: str, text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` offsets of ``value`` in ``text`` where it is not inside a
    word (no letter or digit right before or after).
    """
    return [
        (m.start(), m.end())
        for m in re.finditer(re.escape(value), text)
        if not _WORD_CHAR.match(text[m.start() - 1 : m.start()])
        and not _WORD_CHAR.match(text[m.end() : m.end() + 1])
    ]


def is_name_word(word: str) -> bool:
    """Whether a text word can continue a name: capitalised with a lowercase letter
    ("Hotel", "McKay"), not a capitalised function word ("The", "Her": ``FUNCTION_WORDS``)
    or a day or month name.

    Args:
        word: one word as the text writes it (any string; empty: False).
    """
    return (
        word[:1].isupper()
        and any(c.islower() for c in word)
        and word.lower() not in FUNCTION_WORDS
        and word.lower() not in _CALENDAR_WORDS
    )


# a name heading a sentence: its first word starts the text or follows a sentence end (not a
# label's ":"), and " - ", the sentence's end, or a comma and one to four words ending the
# sentence follow the name ("Riverside Dental Care - TREATMENT ESTIMATE.", "SERVICE RECORD.
# Autohaus Kessler, Karlsruhe."; not "Tom Berg, 51, a baker"); an opener's first word is
# capitalised anyway ("Dear Carlos Mendes, ...")
_HEADING_START = re.compile(r"(?:\A|[.!?\n])\s*\Z")
_HEADING_END = re.compile(
    r" [-–] |\.(?:\s|\Z)|, [^\W\d_][\w'’&-]*(?: [^\W\d_][\w'’&-]*){0,3}\.(?:\s|\Z)"
)
_OPENERS = frozenset(
    "dear hello hi hey thanks thank welcome attn attention re to from congratulations "
    "regards sincerely cheers please".split()
)


def _heading_name(text: str, start: int, end: int, word: str) -> bool:
    """Whether the name ``text[start:end]`` heads its sentence as a name does (above)."""
    if word.lower() in _OPENERS or not _HEADING_START.search(text, 0, start):
        return False
    return _HEADING_END.match(text, end) is not None


def capital_run(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The name-run rule of the package docstring: the value extended over the
    capitalised words the text writes right before and after it, or None (no change).
    """
    prop = (sub.get("properties") or {}).get(name)
    if free_string_schema(root, prop) is None:
        return None
    value = node.get(name)
    if not isinstance(value, str) or not is_name_word(value.split()[0] if value.split() else ""):
        return None
    found: set[str] = set()
    for start, end in _word_spans(value, text):
        for _ in range(_MAX_RUN_WORDS):
            before = _WORD_BEFORE.search(text, 0, start)
            joined = before is None and _AMP_BEFORE.search(text, 0, start)
            before = before or joined
            if before is None or not is_name_word(before.group(1)):
                break
            if not joined and _SENTENCE_START.search(text, 0, before.start(1)):
                if not _heading_name(text, before.start(1), end, before.group(1)):
                    break  # the sentence's first word is capitalised anyway (not before "&")
            start = before.start(1)
        last = text[start:end].split()[-1]
        for _ in range(_MAX_RUN_WORDS):
            after = _WORD_AFTER.match(text, end) or _AMP_AFTER.match(text, end)
            if after is None or not is_name_word(last) or not last[-1].isalnum():
                break  # "Highland Print Co. Three": the sentence ended
            if not is_name_word(after.group(1)):
                break
            end, last = after.end(1), after.group(1)
        found.add(text[start:end])
    if len(found) != 1:
        return None  # not written, or written with different neighbours
    (new,) = found
    # a sibling holding the whole new value ran on past its own end (the cut rule's case)
    siblings = [s for s in sibling_strings(root, sub, node, name) if new not in s]
    if new == value or any(s in new and s not in value for s in siblings):
        return None
    if any(w in s for w in new.replace(value, " ").split() for s in siblings):
        return None  # the added words are a sibling's
    return new if schema_accepts(root, _resolve(root, prop), new) else None


# a sentence end inside a value: a word of three or more lowercase letters, its full stop,
# spaces, a capital ("Sparse retrieval at scale. Journal of ..."); an abbreviation before
# a name is short or capitalised ("Dr. Sato", "K.K. bills", "St. Louis")
_SENTENCE_END = re.compile(r"(?<![^\W\d_])[a-z]{3,}(\.) +(?=[^\W\d_a-z])")
# the same full stop ending a value, where the text's sentence ends after it (spaces and a
# capital, or the end of the text)
_SENTENCE_END_TAIL = re.compile(r"(?<![^\W\d_])[a-z]{3,}\.\Z")
_AFTER_SENTENCE = re.compile(r"(?: +[^\W\d_a-z]|\s*\Z|\s*\n)")


def sentence_cut(root: Any, prop: Any, value: Any, text: str) -> str | None:
    """The sentence-cut rule of the package docstring: a free string value the text
    writes that runs across a sentence end is cut before it ("Sparse retrieval at scale.
    Journal of Information Systems" -> "Sparse retrieval at scale"), and one that ends
    with the full stop of a sentence end (a word of three or more lowercase letters, its
    ".", then in the text at every occurrence spaces and a capital, a line break or the
    text's end) loses it ("... an empty table." -> "... an empty table"); else None (no
    change).
    """
    if not isinstance(value, str) or free_string_schema(root, prop) is None or value not in text:
        return None
    end = _SENTENCE_END.search(value)
    if end is not None:
        new = value[: end.start(1)]
    elif _SENTENCE_END_TAIL.search(value) and all(
        _AFTER_SENTENCE.match(text, m.end()) for m in re.finditer(re.escape(value), text)
    ):
        new = value[:-1]  # "... with an empty table." where the text's sentence ends
    else:
        return None
    return new if schema_accepts(root, _resolve(root, prop), new) else None


def date_tail(root: Any, prop: Any, value: Any) -> str | None:
    """The date-tail rule of the package docstring: a free string value that runs on
    into a date it ends with (or ends with and a bracketed note: "14/03/1951
    (day/month/year)"), after ``on``, ``at``, ``by``, ``from``, ``until``, ``since``,
    ``born``, ``dated`` or a comma, ``born`` or ``dated`` after it ("Toronto on Feb 21st",
    "Village Hall, 12 January 2026", "Ingrid Søndergaard, born 14/03/1951"), is cut
    before that word (``fsm.dates.date_spans`` reads the date); else None (no change).
    """
    if not isinstance(value, str) or free_string_schema(root, prop) is None:
        return None
    note = _BRACKET_NOTE.search(value)
    body = value[: note.start()] if note is not None else value
    tail = [span for span in date_spans(value) if span[1] == len(body.rstrip(" .,"))]
    if not tail:
        return None
    head = _DATE_TAIL_JOIN.search(value[: tail[0][0]])
    if head is None:
        return None
    new = value[: head.start()].rstrip(_TRAILING)
    if not any(c.isalpha() for c in new):
        return None
    return new if schema_accepts(root, _resolve(root, prop), new) else None


# the end of a value cut off inside the text's next phrase: an opening bracket and at most
# two words with no closing one ("Dev Anand Krishnan (booking"), or a ``:``, ``,`` or
# ``;`` and an article, "and", "or", "of" or "with" ("HIST 214: The"; lowercase but for
# "The", so "Portland, OR" and "Vitamin A" stay; "Nimbus the" is the name-run rule's)
_OPEN_BRACKET_END = re.compile(r"\s*[(\[][^()\[\]]*\Z")
_FUNCTION_END = re.compile(r"[,:;]\s*(?:[Tt]he|an?|and|or|of|with)\s*\Z")
# or a currency sign with no amount after it, and the preposition before it ("ElektroMarkt
# Graz for €": the price's "€ 349,90" cut off)
_CURRENCY_SIGNS = "€$£¥₹"
_CURRENCY_END = re.compile(r"(?:\s+(?:for|at|of|from|to|by|in|on))?\s*[€$£¥₹]\s*\Z")
# or the next phrase's label: a clause break (". ", ", ", "; ", " - "), one to three words
# (the first capitalised) and a colon ending the value ("27/01844/H. Your reference:")
_LABEL_END = re.compile(
    r"(?:[.,;]|\s[-–])\s+[^\W\d_a-z][\w'’.\-]*(?:\s[^\W\d_][\w'’.\-]*){0,2}:\s*\Z"
)


def dangling_cut(root: Any, prop: Any, value: Any) -> str | None:
    """The dangling-end rule of the package docstring: a free string value that ends
    inside the text's next phrase, with an opening bracket and at most two words after
    it and no closing one ("Trip plan for Dev Anand Krishnan (booking"), or with a
    ``:``, ``,`` or ``;`` and then an article, "and", "or", "of" or "with" as its last
    word ("HIST 214: The"), or with a currency sign and no amount after it, a preposition
    before it allowed ("ElektroMarkt Graz for €"), or with a clause break and the next
    phrase's label, one to three words (the first capitalised) and a colon ("27/01844/H.
    Your reference:"), is cut before it (and the punctuation before that); else None (no
    change).
    """
    if not isinstance(value, str) or free_string_schema(root, prop) is None:
        return None
    m = _OPEN_BRACKET_END.search(value)
    if m is not None and len(value[m.end() - len(m.group().lstrip(" ([")) :].split()) <= 2:
        cut = m.start()
    else:
        m = _FUNCTION_END.search(value) or _CURRENCY_END.search(value) or _LABEL_END.search(value)
        if m is None:
            return None
        cut = m.start()
    new = value[:cut].rstrip(_TRAILING)
    if not any(c.isalnum() for c in new):
        return None
    return new if schema_accepts(root, _resolve(root, prop), new) else None


def possessive_cut(root: Any, prop: Any, value: Any, name: str = "") -> str | None:
    """The possessive rule of the package docstring: a free string value that is a name
    (two to four capitalised words, ``is_name_word``) run on past its "'s" into
    lowercase words or digits ("Greg Hollis's 7-year-old Labrador") is that name; a
    possessive before a capitalised word is part of a name ("St Aidan's Academy") and
    stays, and so does the value of a field named for a title (a word ``title`` in
    ``name``: "Grandma Halina's potato soup" is a recipe's title). Else None (no change).
    """
    if not isinstance(value, str) or free_string_schema(root, prop) is None:
        return None
    if "title" in (w.lower() for w in re.split(r"[_\W]+|(?<=[a-z])(?=[A-Z])", name)):
        return None
    m = _POSSESSIVE.match(value)
    if m is None or not all(is_name_word(w) for w in m.group(1).split()):
        return None
    new = m.group(1)
    return new if schema_accepts(root, _resolve(root, prop), new) else None


def label_word_cut(root: Any, prop: Any, name: str, value: Any) -> str | None:
    """The label-word rule of the package docstring: a free string value whose first word
    is a word of the field's name (as stems) followed by a name ("Patient Øyvind Hansen"
    for ``patient_name``, "passenger Aisha" for ``passenger``) is the name: greedy copied
    the text's label with it. Else None (no change).
    """
    if not isinstance(value, str) or free_string_schema(root, prop) is None:
        return None
    first, _, rest = value.strip().partition(" ")
    rest = rest.strip()
    stems = name_stems(name)
    if not rest or not is_name_word(rest.split()[0]) or not stems:
        return None
    if not any(stems_match(stem(w), s) for w in _STRICT_WORD.findall(first) for s in stems):
        return None
    return rest if schema_accepts(root, _resolve(root, prop), rest) else None


def sibling_cut(root: Any, sub: dict, node: dict, text: str) -> dict[str, str]:
    """The sibling-cut rule of the package docstring: ``{field: new value}`` for the free
    string fields of one object whose value runs on into a sibling's value, cut before
    it (trailing punctuation, currency signs and function words dropped: "ElektroMarkt
    Graz for € 349,90" with a ``price`` of 349.9 is "ElektroMarkt Graz"). An IBAN the
    text writes (``labels.iban_runs``) is one value: its digit groups are no sibling's;
    so is the value the text writes after the field's own label (``strings.labelled``).
    """
    found: dict[str, str] = {}
    ibans: list[str] | None = None
    for name, prop in (sub.get("properties") or {}).items():
        branch = free_string_schema(root, prop)
        value = node.get(name)
        if branch is None or not isinstance(value, str):
            continue
        if iban_field(name):
            ibans = iban_runs(text) if ibans is None else ibans
            if value in ibans:
                continue
        if value == labelled(sub.get("properties") or {}, name, text):
            continue  # the text's own value after the field's label ends where it ends
        cuts = [
            start
            for s in sibling_strings(root, sub, node, name)
            if s not in value[: len(s)]
            for start, _ in _word_spans(s, value)
            if start > 0
        ]
        held = set(node_numbers(node))
        cuts += [  # "Quick garlic prawns for two": the servings' numeral
            start
            for start, _, readings in numeral_spans(value)
            if value[start - 1 : start].isspace() and held.intersection(readings)
        ]  # a numeral inside a chunk ("88-17") is part of an identifier, not a value
        if not cuts:
            continue
        head = value[: min(cuts)]
        breaks = list(_CLAUSE_BREAK.finditer(head))
        if breaks and breaks[-1].start() > 0:
            head = head[: breaks[-1].start()]  # "..., booking code LM55RT": the clause goes
        while True:  # a currency sign goes with the amount cut off after it
            stripped = head.rstrip(_TRAILING + _CURRENCY_SIGNS)
            words = stripped.split()
            if words and words[-1].lower() in FUNCTION_WORDS:
                stripped = stripped[: len(stripped) - len(words[-1])]
            if stripped == head:
                break
            head = stripped
        if head and head in text and schema_accepts(root, branch, head):
            found[name] = head
    return found


def after_honorific(root: Any, prop: Any, value: Any) -> str | None:
    """The honorific rule of the package docstring: the name after "Mr.", "Mrs.", "Ms.",
    "Miss" or "Mx" that ends the value, or None (no change).
    """
    branch = free_string_schema(root, prop)
    if branch is None or not isinstance(value, str):
        return None
    m = _HONORIFIC.search(value)
    if m is None or not all(is_name_word(w) for w in m.group(1).split()):
        return None
    new = m.group(1)
    return new if schema_accepts(root, branch, new) else None


def place_list(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The place-list rule of the package docstring: a place field's value extended to
    the whole comma-joined list of names it is written in, or None (no change).
    """
    props = sub.get("properties") or {}
    value = node.get(name)
    if free_string_schema(root, props.get(name)) is None or not isinstance(value, str):
        return None
    if not _PLACE_STEMS.intersection(name_stems(name)) or _place_part(value) is None:
        return None
    found: set[str] = set()
    for start, end in _word_spans(value, text):
        if _WORD_BEFORE.search(text, 0, start) or _WORD_AFTER.match(text, end):
            return None  # a name runs on past the value: the name-run rule's case
        while text[:start].endswith(", "):
            words = text[: start - 2].split(" ")
            size = next((n for n in range(4, 0, -1) if _place_part(" ".join(words[-n:]))), 0)
            first = start - 2 - len(" ".join(words[-size:]))
            if not size or SENTENCE_START_STRICT.search(text, 0, first):
                break  # no name before the comma, or one that starts the sentence
            start = first
        while (after := _PART_AFTER.match(text, end)) and _place_part(after.group(1)):
            end = after.end(1)
        if not _LIST_END.match(text, end):
            return None  # the sentence goes on after the last part: not a place list
        found.add(text[start:end])
    if len(found) != 1:
        return None
    (new,) = found
    parts = new.split(", ")
    siblings = sibling_strings(root, sub, node, name)
    if new == value or any(s in p for s in siblings for p in parts):
        return None  # a part is a sibling's ("Greenleaf Pharmacy, Dublin": the company)
    return new if schema_accepts(root, _resolve(root, props[name]), new) else None


def _place_part(part: str) -> str | None:
    """``part`` when it is one part of a place list: one to four words, each a name
    word, ``&`` or a number, the first a name word ("Paws & Claws", "Elm Street").
    """
    words = part.split(" ")
    ok = (
        0 < len(words) <= 4
        and _STRICT_WORD.fullmatch(words[0]) is not None
        and is_name_word(words[0])
        and all(
            w == "&" or w.isdigit() or _STRICT_WORD.fullmatch(w) and is_name_word(w) for w in words
        )
    )
    return part if ok else None


# a field named for a person's role (the last word of its name) and one named for a name
_ROLE_WORDS = frozenset({"title", "role", "position", "occupation", "designation"})

# ", Head of Research at ..." / ", Office Manager, ...": an appositive after a name, its
# words capitalised or lowercase function words, ending before " at " or ", "
_APPOSITIVE = re.compile(r", ([^\W\d_][\w'’&-]*(?: [^\W\d_][\w'’&-]*){0,4})(?= at |, )")


def appositive_role(root: Any, sub: dict, name: str, node: dict, text: str) -> str | None:
    """The appositive rule of the package docstring: for a free string field named for a
    role (``job_title``, ``role``, ``position``) that the model left null or out, the
    phrase the text writes right after a sibling name field's value, between commas or
    before " at " ("Dr. Elena Petrova, Head of Research at Quantix Labs": "Head of
    Research"), or None (no change).
    """
    props = sub.get("properties") or {}
    branch = free_string_schema(root, props.get(name))
    words = name.lower().split("_")
    if branch is None or node.get(name) is not None or words[-1] not in _ROLE_WORDS:
        return None
    siblings = sibling_strings(root, sub, node, name)
    found: set[str] = set()
    for key, value in node.items():
        if key == name or "name" not in key.lower().split("_") or value not in siblings:
            continue
        for _, end in _word_spans(value, text):
            m = _APPOSITIVE.match(text, end)
            if m is None:
                continue
            parts = m.group(1).split(" ")
            inner_ok = all(is_name_word(w) or w in FUNCTION_WORDS or w == "&" for w in parts)
            if is_name_word(parts[0]) and is_name_word(parts[-1]) and inner_ok:
                found.add(m.group(1))
    if len(found) != 1:
        return None
    (new,) = found
    if any(new in s or s in new for s in siblings):
        return None  # the phrase is (or holds) another field's value: "Name, Company, City"
    return new if schema_accepts(root, branch, new) else None
