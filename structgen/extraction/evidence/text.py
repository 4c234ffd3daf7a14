"""How the evidence rules read a text and a field's name.

The text's words (``TextWords``: each word's stem, offsets and clause number; clauses end at
``.``, ``;``, ``,``, brackets, ``·``, ``|`` and hard line breaks, not at a soft wrap,
``unwrapped``), negations in a clause, the stems of a field name's words
(``name_stems``) and of an enum option's (``option_stems``), and the words that mention a
field (``name_mentions``, with ``NUMBER_ALIASES``). The rules: ``structgen.extraction.evidence``.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_GENERIC = frozenset(
    "has have is are was can may allowed allow included include includes required requested "
    "require needed number num no nr count id of the a an in on at per to for by with".split()
)


_NEGATIONS = frozenset(
    "no not without never none non nothing neither nor cannot cant isnt doesnt dont "
    "wont wasnt arent excluded excluding ex former quit stopped declined declines refused".split()
)

# "no" before these (after at most one word) says what something costs, not that it is
# absent: "included at no charge", "at no extra cost"
_PRICE_NOUNS = frozenset(("charge", "cost"))


# "no." as the abbreviation of "number": before digits, "#" or an identifier's upper-case
# head and digits ("Claim no. 7781-0932", "Tracking no. RR 482 913 057 PL"), not a negation
_NUMBER_ABBREVIATION = re.compile(r"\.[ \t]*(?:[#\d]|[A-Z]{1,4}[- ]?\d)")


_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "er", "ies", "es", "ed", "s", "e", "y")


_WORD = re.compile(r"[^\W_]+")


_CLAUSE = re.compile(r"[.;!?,()\[\]·|\n]+(?:\s|$)|[;!?()\[\]·|\n]")


# a line break inside a sentence (a hard-wrapped paragraph): between a letter or digit
# and a lowercase letter, with only spaces or tabs around it
_SOFT_WRAP = re.compile(r"(?<=[^\W_])([ \t]*)\n(?=[ \t]*[^\W\d_])")


# words that mention a field whose name holds the key (both as ``stem`` gives them) in
# the number rule: how English writes an age ("58 years old", "aged 58"), the usual
# abbreviations of time units ("50 min", "2 hrs"), the nouns English counts guests,
# passengers, servings and ratings in ("four people", "six people in total", "feeds six
# people", "four stars") and the
# words a forecast writes its highs and lows with ("maximum 41°C")
NUMBER_ALIASES = {
    "age": frozenset({"old", "aged"}),
    "guest": frozenset({"peopl", "person", "adult"}),
    "serv": frozenset({"peopl", "person", "portion"}),
    "passeng": frozenset({"peopl", "person"}),
    "rat": frozenset({"star"}),
    "minut": frozenset({"min"}),
    "hour": frozenset({"hr", "hrs"}),
    "second": frozenset({"sec"}),
    "m2": frozenset({"squar", "sq", "sqm"}),
    "high": frozenset({"maximum"}),
    "low": frozenset({"minimum"}),
    "student": frozenset({"pupil", "child", "kid"}),
    "mm": frozenset({"millimetr"}),
    "km": frozenset({"kilometr"}),
    "kg": frozenset({"kilogram", "kilo"}),
}


# English plurals that no suffix rule makes singular ("Children's ticket" mentions the
# option "child")
_IRREGULAR_PLURALS = {"children": "child", "women": "woman", "men": "man"}

_COPULAS = frozenset("is are was were be".split())


JOINED = re.compile(r"[^\W]|[-.@#+&]")  # characters a chunk of the text is made of


# words a hyphen joins into one compound ("call-out", "Wi-Fi"): at most this many
COMPOUND_WORDS = 3


GAP_REPEAT = 2  # words between a repeated numeral and the next one ("118 over 76")


_GAP_NEGATION = 2  # words between a negation and the option it negates ("not a feature request")


@functools.lru_cache(maxsize=16384)  # a pure function of the word, called per word per rule
def stem(word: str) -> str:
    """``word`` lowercased with one common English suffix removed (at least three letters
    stay): ``servings`` and ``serves`` -> ``serv``, ``smoker`` -> ``smok``; an irregular
    plural is its singular (``_IRREGULAR_PLURALS``: ``children`` -> ``child``).
    """
    w = word.lower()
    w = _IRREGULAR_PLURALS.get(w, w)
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
    """The stems of a field name's words that count for a mention (package docstring):
    ``breakfast_included`` -> ``["breakfast"]``, ``area_m2`` -> ``["area", "m2"]``.
    """
    return list(_name_stems(key))


@functools.lru_cache(maxsize=1024)  # a pure function of the field name
def _name_stems(key: str) -> tuple[str, ...]:
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", key)
    words = [w for w in re.split(r"[\W_]+", spaced) if w]
    return tuple(stem(w) for w in words if w.lower() not in _GENERIC and len(w) >= 2)


# the stems (``stem``) of the words of a field name that name a place ("location",
# "venue", "city", "from_station", "to_airport"): ``names_place``
PLACE_STEMS = frozenset(
    "loc venu addres plac cit town villag countr region station airport destin".split()
)


def names_place(key: str) -> bool:
    """Whether the field name ``key`` names a place: a word of it (``name_stems``) is
    one of ``PLACE_STEMS`` ("location", "pickup_location", "city", "from_station";
    not "company", "title", "state"). Raises: never.
    """
    return not PLACE_STEMS.isdisjoint(name_stems(key))


def option_stems(option: str) -> list[str]:
    """The stems of an enum option's words, split as the text's words are (a value, not
    an identifier: ``PostNord`` stays one word), as a mention must show them in order:
    ``"feature_request"`` -> ``["featur", "request"]``, ``"La Poste"`` -> ``["la", "post"]``.
    """
    return [stem(w) for w in _WORD.findall(unicodedata.normalize("NFKC", option))]


def stems_match(a: str, b: str) -> bool:
    """Whether two stems name the same word: equal, or the shorter one (4 characters or
    more) starts the longer. Raises: never.
    """
    if a == b:
        return True
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    return len(short) >= 4 and long_.startswith(short)


class TextWords:
    """A text as normalised words with their offsets and clause numbers.

    Args:
        text: the text (any string).

    Attributes:
        text: the text as given.
        words: one ``(stem, start, end, clause)`` per word (a run of letters and
            digits): its stem (``stem`` of its NFKC lowercase form), its character offsets
            in ``text`` and its clause's number (clauses as the module docstring says,
            counted from 0).
        raw: each word's NFKC lowercase form, parallel to ``words``.
    """

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

    @functools.cached_property
    def by_stem(self) -> dict[str, list[int]]:
        """Each stem's word indices, in text order (computed once per text)."""
        out: dict[str, list[int]] = {}
        for k, (w, *_) in enumerate(self.words):
            out.setdefault(w, []).append(k)
        return out

    @functools.cached_property
    def compounds(self) -> list[tuple[int, int, str]]:
        """``(first word, last word, stem)`` of every run of two to ``COMPOUND_WORDS``
        words joined by hyphens with no space ("call-out", "Wi-Fi", "e-mail"), the stem
        (``stem``) of their letters run together, in text order (computed once per text).
        """
        out, text, tw = [], self.text, self.words
        for k in range(len(tw)):
            end = k
            while (
                end - k + 1 < COMPOUND_WORDS
                and end + 1 < len(tw)
                and tw[end][2] + 1 == tw[end + 1][1]
                and text[tw[end][2]] == "-"
            ):
                end += 1
                out.append((k, end, stem("".join(self.raw[k : end + 1]))))
        return out

    def word_at(self, offset: int) -> int:
        """The index of the word holding (or first after) a character offset."""
        for k, (_, _start, end, _) in enumerate(self.words):
            if end > offset:
                return k
        return len(self.words)

    def is_negation(self, j: int) -> bool:
        """Whether word ``j`` is a negation (``_NEGATIONS``, ``...n't``, the ``t`` of
        ``don't`` as the word split leaves it; not "no." before a number or identifier,
        ``_NUMBER_ABBREVIATION``, nor "no" before "charge" or "cost", ``_PRICE_NOUNS``).
        """
        raw, start, end = self.raw[j], self.words[j][1], self.words[j][2]
        if raw == "no" and _NUMBER_ABBREVIATION.match(self.text, end):
            return False  # "Claim no. 7781-0932": number
        if raw == "no" and _PRICE_NOUNS.intersection(self.raw[j + 1 : j + 3]):
            return False  # "included at no charge": a price
        if raw == "than" and j > 0 and self.raw[j - 1] in ("rather", "other"):
            return True  # "major rather than a blocker"
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


def name_mentions(doc: TextWords, stems: list[str]) -> list[int]:
    """Indices of the text's words that match some of a field name's stems, or are one of
    a stem's aliases (``NUMBER_ALIASES``: "old" for ``age``, "min" for ``minutes``).
    """
    aliases = frozenset().union(*(NUMBER_ALIASES.get(s, ()) for s in stems))
    return [
        k
        for k, (w, *_) in enumerate(doc.words)
        if w in aliases or any(stems_match(w, s) for s in stems)
    ]
