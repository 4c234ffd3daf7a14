"""String fields that hold the same span of the text, one of them chosen again by score.

Two string fields of one record name different things (a company and a city, a title
and a company, a guest and a hotel), so they never hold the same span of the text, nor
one inside the other; but a small model that copies spans often writes a sibling's span
into a field ("company": "Wei Zhang" beside "full_name": "Wei Zhang"; "title":
"Northwind Logistics" beside "company": "Northwind"). ``choose_overlaps`` finds such
pairs among the copied string fields reached through objects that do not accept null
(``overlapping_pairs``: equal after case folding and whitespace collapsing, or one inside
the other at word boundaries, but for a place field's value inside a longer one as a
modifier that no other field holds, ``place_inside``: "location": "Lyon" beside "title":
"Lyon jazz festival" names the place the festival is named for; a nullable field copying
a sibling's value is left to the evidence pass, which makes it null where the text does
not name it) and moves one field
of each pair to another span. Each field of a pair gets candidates: the spans of the
text of up to ``MAX_SPAN_WORDS`` words inside one clause (``text_spans``) that restate no
other string field's value (``restates``: overlap it, or write its date or time in
another notation), that write no date or time and are no lone numeral (``shaped``: the
shape a date, time or number field claims) unless the field's own value is of that
shape and nothing else (``only_shaped``: "12 January 2026, 18:00, Village Hall" is a name
run on into a date, not a date), with which the object stays valid under the schema;
each candidate
and the field's own value are scored in the context the model wrote the value in, by
the mean log-probability of their tokens and the closing quote
(``choices.candidate_scores``, as ``choose_options`` scores options); the candidates of
all the documents given go in one batch of prompt-log-prob requests (the jobs are
planned across documents and scored through ``revise_outputs``' ``score``). The field
whose own value the model prefers least over its best candidate (the smaller margin)
takes that candidate; the other keeps its value (a field with no candidate cannot move,
so its own value is not scored: the sibling with candidates moves, and its own value
is not scored either, since it moves whatever that scores; with one other candidate
nothing is scored). The fields after it
keep what greedy wrote. Arrays are left alone (items are trimmed by ``items.py``).

A number field names a different thing than a string field beside it, too: no candidate
restates a sibling number field's value as a whole numeral (``restates_number``: "51"
and "fifty-one" restate 51, "51 Main St" does not), and a copied string field that
restates one (``restated_numbers``: "occupation": "51" beside "age": 51, where the text
writes the numeral alone, ``stands_alone``: "17" of "Case #88-17" is a truncated code
the evidence pass extends) is paired with it; the number field has no job and never
moves, so the string field takes its best candidate (none: it keeps its value). Such a
field's candidates are spans of any kind (``text_spans(..., names_only=False)``), since
its value is wrong whatever it names; so are the candidates of a field of a string pair
left with no name span ("Tom Berg, 51, a baker in Oslo.": greedy's "occupation": "Berg"
beside "name": "Tom Berg" has only "baker" left; #23 o2, RESULTS.md).

Before that scoring, each field's candidates are shortlisted (``shortlist_spans``;
``choose_overlaps(..., shortlist=None)`` scores every candidate): one request per field,
batched, reads the model's top ``FIRST_TOKEN_TOP`` tokens where the candidates' token
ids part (the value's first word, after the opening quote; every document's requests
in one batch), and only the
``MAX_SCORED_SPANS`` whose token there is likeliest are scored in full. The pair's
decision is the unfiltered one when the field that moves keeps its best candidate in
its shortlist; when a field's best is cut, its margin grows and the sibling may move
instead. On the dev set (benchmarks/RESULTS.md, #23 o23) the shortlist of 8 kept all 10
fields the unfiltered rule gained, gained one more and lost none, with about 2.5x fewer
scoring requests. A variant ranking spans written as names first lost 3 right fields
and is not used.

Cost (RESULTS.md, #23 s23): the scoring requests of a document run in one step (the
scheduler does not hold a request back for a page its ``prompt_logprobs_start`` keeps
it from reusing) and each computes only its own tokens (the prefix cache serves the
partial last page of the shared prefix as a copy): ~110 tokens for contact_card-04's
20 requests, under half the CPU time of one 400-token prefill. So ``extract`` runs it
by default (``SCORE_OVERLAPS_DEFAULT``). A shortlist ranked by first token is mostly
runs of words from the same word ("Quantix", "Quantix Labs"), and ``candidate_scores``
reads a run that leads a longer one from the longer one's request (``shared_hosts``),
so such a group computes about the tokens of its longest run. The shortlist's request
of a field is also its candidates' lead (``shortlist_spans(..., leads=True)``,
``choices.Lead``): it reads the log-probabilities of the ids they share (the opening
quote), so each candidate's scoring request reads those rows and its first own token's
log-probability there instead of computing them again (the same scores up to the float
rounding of another batch layout; RESULTS.md, session 26 s8).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any

import jsonschema

from structgen.errors import ConfigError
from structgen.extraction.choices import (
    CandidateJob,
    Lead,
    candidate_scores,
    common_prefix,
    encode_in_context,
    revise_outputs,
    run_prompts,
    with_field,
)
from structgen.extraction.evidence.fields import is_nullable
from structgen.extraction.evidence.text import names_place
from structgen.extraction.prompt import prompt_text
from structgen.extraction.refs import resolve as _resolve
from structgen.fsm.dates import date_spans, dates, times
from structgen.fsm.numerals import numeral_spans
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "choose_overlaps",
    "number_values",
    "overlapping_pairs",
    "place_inside",
    "overlaps",
    "restated_numbers",
    "restates_number",
    "stands_alone",
    "restates",
    "shaped",
    "only_shaped",
    "string_values",
    "text_spans",
    "shortlist_spans",
    "MAX_SPAN_WORDS",
    "MAX_SPAN_CANDIDATES",
    "MAX_SCORED_SPANS",
    "FIRST_TOKEN_TOP",
]

MAX_SPAN_WORDS = 5  # words in one candidate span
MAX_SPAN_CANDIDATES = 96  # candidates per field before the shortlist (first written first)
MAX_SCORED_SPANS = 8  # candidates per field scored in full (RESULTS.md, #23 o23)
FIRST_TOKEN_TOP = 20  # first tokens read per field (SamplingParams' most); others rank last
# a candidate neither starts nor ends with one of these lowercase words
_EDGE_WORDS = frozenset(
    "a an the at by for from in on of to with and or is are was as via per".split()
)
_CLAUSE_END = ".,;:!?)]}"  # a word ending in one of these ends its clause
_OPEN = "([{\"'“‘«"
_CLOSE = ".,;:!?)]}\"'”’»"


def _norm(s: str) -> str:
    return " ".join(s.casefold().split())


def _is_word(ch: str) -> bool:
    r"""Whether the character ``ch`` is one ``re``'s ``\w`` matches in a str pattern."""
    return ch.isalnum() or ch == "_"


def _bounded_ends(short: str, long: str) -> Iterator[int]:
    r"""The end offsets in ``long`` of each occurrence of ``short`` with no word character
    (``_is_word``) just before or just after it, first first: where
    ``(?<!\w)<short>(?!\w)`` matches (an empty ``short`` occurs at every offset).
    """
    start, n, size = long.find(short), len(short), len(long)
    while start >= 0:
        end = start + n
        if (start == 0 or not _is_word(long[start - 1])) and (
            end == size or not _is_word(long[end])
        ):
            yield end
        start = long.find(short, start + 1)


def _overlaps_norm(a: str, b: str) -> bool:
    """``overlaps`` of two strings already folded and collapsed (``_norm``)."""
    if not a or not b:
        return False
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    return next(_bounded_ends(short, long), None) is not None


def overlaps(a: str, b: str) -> bool:
    """Whether two strings are equal, or one is inside the other at word boundaries,
    after case folding and whitespace collapsing (an empty string overlaps nothing).
    """
    return _overlaps_norm(_norm(a), _norm(b))


def restates(span: str, value: str) -> bool:
    """Whether ``span`` overlaps ``value`` (``overlaps``) or writes it as a date or a
    time in another notation (``fsm.dates``: "14 June 2026" restates "2026-06-14").
    """
    return overlaps(span, value) or value in dates(span) or value in times(span)


def restates_number(s: str, number: Any) -> bool:
    """Whether the string ``s`` is, whole, a numeral that reads as ``number``
    (``fsm.numerals``' readings after case folding and whitespace collapsing: "51",
    "51.0", "fifty-one" restate 51; "51 Main St" and "5" do not; a bool is no number).
    """
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        return False
    return _reads_as(_whole_numeral(_norm(s)), number)


def _whole_numeral(t: str) -> tuple[Decimal, ...] | None:
    """The readings of ``t`` (``fsm.numerals.numeral_spans``) where it is, whole, one
    numeral; None where it is not.
    """
    found = numeral_spans(t)
    if len(found) != 1 or found[0][:2] != (0, len(t)):
        return None
    return found[0][2]


def _reads_as(readings: tuple[Decimal, ...] | None, number: Any) -> bool:
    """Whether a whole numeral's ``readings`` (``_whole_numeral``) hold ``number`` (an int
    or float, not bool; ``restates_number``'s test).
    """
    if readings is None or isinstance(number, bool) or not isinstance(number, (int, float)):
        return False
    try:
        return any(v == Decimal(repr(number)) for v in readings)
    except InvalidOperation:  # nan, inf
        return False


def number_values(value: Any) -> dict[tuple[str, ...], int | float]:
    """The number values (int or float, not bool) of ``value`` reached through object
    properties only, as ``string_values``.

    Args:
        value: a parsed JSON value.

    Returns:
        Key path -> number, in the object's order.
    """
    out: dict[tuple[str, ...], int | float] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for key, sub in node.items():
                walk(sub, path + (key,))
        elif isinstance(node, (int, float)) and not isinstance(node, bool) and path:
            out[path] = node

    walk(value, ())
    return out


def restated_numbers(
    strings: dict[tuple[str, ...], str],
    numbers: dict[tuple[str, ...], int | float],
    eligible: set[tuple[str, ...]],
    text: str,
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The string fields in ``eligible`` whose string restates a sibling number field's
    value (``restates_number``; a sibling: the same parent object) and is written in
    ``text`` as a numeral of its own (``stands_alone``): a numeral the text writes only
    inside a longer code ("17" of "Case #88-17") is a truncated code, which the evidence
    pass extends, not a restated number.

    Args:
        strings: key path -> string (``string_values``).
        numbers: key path -> number (``number_values``).
        eligible: the string fields that may be moved (the copied ones).
        text: the source text.

    Returns:
        ``(string field, number field)`` key paths, in the order of ``strings`` then
        ``numbers``.
    """
    return [
        (a, b)
        for a in strings
        if a in eligible
        for b in numbers
        if b[:-1] == a[:-1]
        and restates_number(strings[a], numbers[b])
        and stands_alone(strings[a], text)
    ]


_CODE_JOINERS = "-#/_"  # characters that join a numeral into a longer code ("FR-1120", "#88-17")


def stands_alone(value: str, text: str) -> bool:
    """Whether ``text`` writes ``value`` at least once not inside a longer token: neither
    neighbour is a letter, a digit or a code joiner (``-#/_``), and the character before
    is no decimal point ("11.75 kg" writes "11.75" alone; "FR-1120" does not write
    "1120" alone).
    """
    start = text.find(value)
    while value and start >= 0:
        end = start + len(value)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (
            before.isalnum() or before in _CODE_JOINERS + "."
            or after.isalnum() or after in _CODE_JOINERS
        ):  # fmt: skip
            return True
        start = text.find(value, start + 1)
    return False


def shaped(s: str) -> bool:
    """Whether ``s`` writes a date or a time (``fsm.dates``: "7 March 2026", "2:15 pm",
    "on 7 March 2026 at") or is, whole, one numeral (``fsm.numerals``: "51",
    "fifty-one"): a span of the shape a date, time or number field claims, which no
    name, place or title is ("location": "2:15" beside "start_date"; #23 o11).
    """
    return _shaped_norm(_norm(s))


def _shaped_norm(t: str) -> bool:
    """``shaped`` of a string already folded and collapsed (``_norm``)."""
    return bool(dates(t) or times(t)) or _whole_numeral(t) is not None


# words a date or time is written with besides its numerals (``only_shaped``)
_DATE_TIME_WORDS = re.compile(
    r"(?<!\w)(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day|(?:mon|tue|wed|thu|fri|sat|sun)\.?"
    r"|[ap]\.?m\.?|noon|midnight|o'clock|at|on|of|the|st|nd|rd|th|h)(?!\w)"
)


def only_shaped(s: str) -> bool:
    """Whether ``s`` is ``shaped`` and writes nothing else: one numeral, or dates and
    times with no other word once its dates (``fsm.dates.date_spans``), weekday names,
    "am"/"pm", "noon", "at"/"on" and ordinal suffixes are taken out ("2026-03-07",
    "Saturday 13 June 2026", "at 2:15 pm", "51"). A name written on into a date ("12
    January 2026, 18:00, Village Hall") is shaped, not only shaped: the value of a field
    that holds names, cut short or run on, not of a date or time field.
    """
    t = _norm(s)
    if not shaped(t):
        return False
    found = numeral_spans(t)
    if len(found) == 1 and found[0][:2] == (0, len(t)):
        return True
    for start, end in sorted(date_spans(t), reverse=True):
        t = t[:start] + " " + t[end:]
    t = _DATE_TIME_WORDS.sub(" ", re.sub(r"(?<=\d)(?:st|nd|rd|th|h)(?![^\W\d_])", " ", t))
    return re.search(r"[^\W\d_]", t) is None


def string_values(value: Any) -> dict[tuple[str, ...], str]:
    """The string values of ``value`` reached through object properties only.

    Args:
        value: a parsed JSON value.

    Returns:
        Key path -> string, in the object's order (items of arrays are not included).
    """
    out: dict[tuple[str, ...], str] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            for key, sub in node.items():
                walk(sub, path + (key,))
        elif isinstance(node, str) and path:
            out[path] = node

    walk(value, ())
    return out


def overlapping_pairs(
    strings: dict[tuple[str, ...], str], eligible: set[tuple[str, ...]]
) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The pairs of fields whose strings overlap (``overlaps``), both in ``eligible``,
    but for a place named inside a longer value (``place_inside``) that no other field
    of ``eligible`` holds as well.

    Args:
        strings: key path -> string (``string_values``).
        eligible: the fields that may be moved (the copied ones).

    Returns:
        ``(first, second)`` key paths in the order of ``strings``, pairs in that order.
    """
    keys = [k for k in strings if k in eligible]
    held = [_norm(strings[k]) for k in keys]
    return [
        (a, b)
        for i, a in enumerate(keys)
        for j, b in enumerate(keys[i + 1 :], i + 1)
        if _overlaps_norm(held[i], held[j])
        and not (
            _place_inside_norm(a, strings[a], held[i], b, strings[b], held[j])
            and held.count(min(held[i], held[j], key=len)) == 1
        )
    ]


def place_inside(a: tuple[str, ...], a_value: str, b: tuple[str, ...], b_value: str) -> bool:
    """Whether one of two overlapping fields' values is inside the other as a modifier
    (not equal to it after ``overlaps``' folding, and a word of the longer value follows
    it), and the field holding the shorter one names a place (``evidence.text.names_place``
    of its key: "location", "city", "venue"): a place is named inside the names of what
    is there, an event, an organisation, a station ("location": "Lyon" beside "title":
    "Lyon jazz festival", "city": "Bergen" beside "clinic": "Bergen Animal Clinic"), so
    such a pair is no sign of a copied sibling. It stays a pair where the place ends the
    longer value: a value run on into the place ("Maple Street Vets in Toronto", "München
    Hbf to Nürnberg Hbf") or a place field holding the end of a name ("city": "Lindqvist"
    beside "tenant": "Sofia Lindqvist"); where another field inside a longer value names
    no place ("company": "Northwind" beside "title": "Northwind Logistics"; #23 o11, f12
    in RESULTS.md); and where the place field holds a date, a time or a lone numeral
    (``shaped``: "2026" inside "2026-03-07" names no place).

    Args:
        a: one field's key path (the last key is the field's name).
        a_value: its string.
        b: the other field's key path.
        b_value: its string.

    Returns:
        False where the values are equal after folding, the shorter one's field names
        no place, its value is ``shaped``, or it is not followed by a word of the longer.
    """
    return _place_inside_norm(a, a_value, _norm(a_value), b, b_value, _norm(b_value))


def _place_inside_norm(
    a: tuple[str, ...], a_value: str, a_norm: str, b: tuple[str, ...], b_value: str, b_norm: str
) -> bool:
    """``place_inside`` given each value folded and collapsed as well (``_norm``)."""
    if a_norm == b_norm:
        return False
    (shorter, value, short), long = (
        ((a, a_value, a_norm), b_norm)
        if len(a_norm) < len(b_norm)
        else ((b, b_value, b_norm), a_norm)
    )
    if not shorter or not names_place(shorter[-1]) or shaped(value):
        return False
    # where ``(?<!\w)<short>(?!\w)\W*\w`` matches: a word character after the end
    return any(any(map(_is_word, long[end:])) for end in _bounded_ends(short, long))


def _names_something(span: str) -> bool:
    """Whether ``span`` holds an uppercase letter or a digit (``text_spans``' names)."""
    return any(c.isupper() or c.isdigit() for c in span)


def text_spans(text: str, max_words: int = MAX_SPAN_WORDS, names_only: bool = True) -> list[str]:
    """The candidate spans of ``text``: runs of 1 to ``max_words`` whitespace-separated
    words inside one clause (a word ending in ``.,;:!?)]}`` or a line break ends one),
    without the first word's opening or the last word's closing punctuation, neither
    starting nor ending with a lowercase function word, holding at least one word with
    an uppercase letter or a digit (the names, products and codes string fields hold)
    unless ``names_only`` is False.

    Args:
        text: the source text.
        max_words: most words in a span.
        names_only: keep only spans with an uppercase letter or a digit.

    Returns:
        Distinct spans (each a substring of ``text``), first written first.
    """
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    out: dict[str, None] = {}
    for i, (start, _) in enumerate(words):
        while start < words[i][1] and text[start] in _OPEN:
            start += 1
        for j in range(i, min(len(words), i + max_words)):
            if j > i and (
                text[words[j - 1][1] - 1] in _CLAUSE_END
                or "\n" in text[words[j - 1][1] : words[j][0]]
            ):
                break
            end = words[j][1]
            while end > start and text[end - 1] in _CLOSE:
                end -= 1
            span = text[start:end]
            parts = span.split()
            if (
                not parts
                or parts[0] in _EDGE_WORDS
                or parts[-1] in _EDGE_WORDS
                or (names_only and not _names_something(span))
            ):
                continue
            out.setdefault(span, None)
    return list(out)


def choose_overlaps(
    engine: Any,
    schema: Any,
    prompts: list[Any],
    raw_texts: list[str],
    texts: list[str],
    copied: list[tuple[str, ...]],
    shortlist: int | None = MAX_SCORED_SPANS,
) -> list[str]:
    """The generated JSON texts with one field of each overlapping pair of copied string
    fields moved to another span of the text (module docstring).

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        schema: the JSON Schema the objects are valid under (a dict).
        prompts: each document's chat messages, or a plain prompt string.
        raw_texts: each document's generated JSON text (one that does not parse as an
            object, or an empty one, is left as it is).
        texts: each document's source text (the candidate spans come from it).
        copied: each document's copy-constrained field paths (``field_path``: ``a.b``).
        shortlist: candidates per field scored in full after the first-token shortlist
            (``shortlist_spans``); None scores every candidate (the unfiltered rule).

    Returns:
        The texts; where a field moved, the object written again compactly
        (``separators=(",", ":")``, keys in their order).

    Raises:
        ConfigError: ``shortlist`` is not None or an int >= 1.
    """
    if shortlist is not None and (
        isinstance(shortlist, bool) or not isinstance(shortlist, int) or shortlist < 1
    ):
        raise ConfigError(
            f"choose_overlaps: shortlist must be None or an int >= 1, got {shortlist!r}"
        )
    if not isinstance(schema, dict):
        return list(raw_texts)
    checker = jsonschema.validators.validator_for(schema)(
        schema, format_checker=jsonschema.validators.validator_for(schema).FORMAT_CHECKER
    )

    def plan(i: int, value: Any, raw: str, spans: dict) -> list[tuple]:
        strings = string_values(value)
        eligible = {
            k
            for k in strings
            if ".".join(k) in copied[i] and k in spans and not _nullable_at(schema, k)
        }
        numbers = number_values(value)
        # a restated number's string field moves first: the number field has no job
        pairs = restated_numbers(strings, numbers, eligible, texts[i])
        pairs += overlapping_pairs(strings, eligible)
        if not pairs:
            return []
        jobs = _candidate_jobs(engine, checker, i, prompts[i], raw, texts[i], value, strings,
                               numbers, pairs, spans)  # fmt: skip
        return [(pairs, jobs)]

    def score(docs: list[tuple], _: list[Any]) -> list[dict]:
        flat = [job for _, jobs in docs for job in jobs]
        if shortlist is not None:
            flat = shortlist_spans(engine, flat, shortlist, leads=True)  # one batch for all
        # a field with no other candidate never moves (``_moved``): its value is not scored;
        # nor is the value of a field whose every sibling in a pair cannot move (it moves
        # to its best candidate whatever its own value scores: only the others are scored)
        own = [_own_value_needed(pairs, jobs) for pairs, jobs in docs]
        needed = [j.keys in own[d] for d, (_, jobs) in enumerate(docs) for j in jobs]
        # (one other candidate: the move is forced, nothing is scored)
        rivals = [
            job if need else dataclasses.replace(job, candidates=job.candidates[1:])
            for job, need in zip(flat, needed)
            if len(job.candidates) > (1 if need else 2)
        ]
        found = iter(candidate_scores(engine, rivals, summed=False))  # one batch for all
        scores = [
            []
            if len(job.candidates) == 1
            else next(found)
            if need
            else [float("nan")] + (next(found) if len(job.candidates) > 2 else [0.0])
            for job, need in zip(flat, needed)
        ]
        out, pos = [], 0
        for _, jobs in docs:
            n = len(jobs)
            out.append({j.keys: (j, s) for j, s in zip(flat[pos : pos + n], scores[pos : pos + n])})
            pos += n
        return out

    def decide(doc: tuple, scored: dict, value: Any) -> Any:
        return _moved(value, doc[0], scored)

    return revise_outputs(raw_texts, plan, decide, score)


def _own_value_needed(
    pairs: list[tuple[tuple[str, ...], tuple[str, ...]]], jobs: list[CandidateJob]
) -> set[tuple[str, ...]]:
    """The fields whose own value's score ``_moved`` compares: those paired with a field
    that has another candidate (its margin is weighed against theirs). A field paired
    only with fields that cannot move (a number field, or one without other candidates)
    moves to its best candidate whatever its own value scores (its score is then NaN;
    with one other candidate nothing is scored: the move is forced).
    """
    movable = {job.keys for job in jobs if len(job.candidates) > 1}
    return {a for a, b in pairs if b in movable} | {b for a, b in pairs if a in movable}


def _nullable_at(schema: Any, keys: tuple[str, ...]) -> bool:
    """Whether the property at ``keys`` (through ``properties``) accepts null; True where
    the path is not found (such a field is not moved).
    """
    sub: Any = schema
    for key in keys:
        sub = _resolve(schema, sub)
        props = sub.get("properties") if isinstance(sub, dict) else None
        if not isinstance(props, dict) or key not in props:
            return True
        sub = props[key]
    return is_nullable(schema, sub)


def _candidate_jobs(
    engine: Any,
    checker: Any,
    doc: int,
    prompt: Any,
    raw: str,
    text: str,
    value: Any,
    strings: dict[tuple[str, ...], str],
    numbers: dict[tuple[str, ...], int | float],
    pairs: list[tuple[tuple[str, ...], tuple[str, ...]]],
    spans: dict[tuple[str, ...], tuple[int, int]],
) -> list[CandidateJob]:
    """One ``CandidateJob`` per string field of ``pairs`` (first named first; a number
    field gets none) of document ``doc``: its own value, then the spans of ``text``
    (``text_spans``: names; any where no name passes, or for a field restating a sibling
    number) that restate no other string field nor a sibling number field
    (``restates_number``), are not ``shaped`` unless the field's own value is
    ``only_shaped`` (a date, time or numeral, not a name run on into one), and keep
    the object valid (at most ``MAX_SPAN_CANDIDATES``; ``choose_overlaps``' rule).
    """
    context = prompt_text(engine, prompt)
    # names first; any span where no name is left, and for a field restating a sibling
    # number (it is wrong whatever it names: "occupation": "51" beside "age": 51)
    restating = {a for a, b in pairs if b in numbers}
    whole_valid = checker.is_valid(value)  # then a field's own schema decides (_field_check)
    all_spans = text_spans(text, names_only=False)
    name_spans = [c for c in all_spans if _names_something(c)]  # text_spans(text)
    facts = _SpanFacts()  # each span's folding, dates, numeral: once per document
    held = {k: _norm(s) for k, s in strings.items()}
    jobs: list[CandidateJob] = []
    for keys in dict.fromkeys(k for pair in pairs for k in pair if k in strings):
        others = [held[k] for k in strings if k != keys]
        # only a string of dates' and times' characters can be one of their values
        other_dates = {s for k, s in strings.items() if k != keys and _date_time_like(s)}
        siblings = [n for k, n in numbers.items() if k[:-1] == keys[:-1]]
        shaped_ok = only_shaped(strings[keys])
        check = _field_check(checker, checker.schema, keys) if whole_valid else None
        cands: list[str] = []
        failed: set[str] = set()
        for spans_k in [all_spans] if keys in restating else [name_spans, all_spans]:
            for c in spans_k:  # the first MAX_SPAN_CANDIDATES that pass, in text order
                if c in failed:  # a name span that failed this field's tests already
                    continue
                t = facts.norm(c)
                if (
                    any(_overlaps_norm(t, s) for s in others)  # restates, in parts
                    or (other_dates and not other_dates.isdisjoint(facts.dates_times(c)))
                    or (siblings and any(_reads_as(facts.numeral(c), n) for n in siblings))
                    or (not shaped_ok and facts.shaped(c))
                    or not (check(c) if check else checker.is_valid(with_field(value, keys, c)))
                ):
                    failed.add(c)
                    continue
                cands.append(c)
                if len(cands) == MAX_SPAN_CANDIDATES:
                    break
            if cands:
                break
        jobs.append(CandidateJob(doc, keys, [strings[keys], *cands], context, raw, spans[keys]))
    return jobs


# the keywords of an object schema on a field's way (``_field_check``) whose verdict holds
# while the field's value alone changes: they read its value only through ``properties``
_WAY_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "minProperties", "maxProperties"}
)


def _field_check(checker: Any, schema: Any, keys: tuple[str, ...]) -> Any:
    """A test of a new value for the field at ``keys`` of an object valid under
    ``schema``: ``check(new)`` is ``checker.is_valid(with_field(value, keys, new))`` for
    every ``value`` that ``checker`` (a jsonschema validator of ``schema``, draft 4 or
    later) finds valid, without validating the rest of the object again; None where the
    schema's way to the field may judge the value elsewhere than in its own subschema.

    The way is the object schemas from the root through ``properties`` to ``keys[-1]``;
    each may hold only keywords that judge a property's value through ``properties``
    alone (``_WAY_KEYWORDS``: ``additionalProperties`` never reads a key of
    ``properties`` when there is no ``patternProperties``), keywords jsonschema ignores
    (not in ``checker.VALIDATORS``; no ``$``-keyword but ``$comment``, ``$defs`` and the
    root's ``$schema``, no ``id``); the field's subschema holds no ``$``-keyword
    (``$comment`` aside) at any depth, so no reference or resource is read through it.
    Then every keyword of the way gives the same verdict with the new value, and the
    field's subschema gives the rest.

    Returns:
        ``new -> bool`` (the field subschema's ``is_valid``, formats checked as
        ``checker`` checks them), or None. Raises: never.
    """
    if isinstance(checker, jsonschema.Draft3Validator) or not keys:
        return None
    node = schema
    for depth, key in enumerate(keys):
        if not isinstance(node, dict):
            return None
        allowed = ("$comment", "$defs", "$schema") if depth == 0 else ("$comment", "$defs")
        for word in node:
            if (
                (word in checker.VALIDATORS and word not in _WAY_KEYWORDS)
                or (word.startswith("$") and word not in allowed)
                or word == "id"
            ):
                return None
        props = node.get("properties")
        if not isinstance(props, dict) or key not in props:
            return None
        node = props[key]
    if not isinstance(node, (dict, bool)) or _has_dollar_keyword(node):
        return None
    return checker.evolve(schema=node).is_valid


def _has_dollar_keyword(node: Any) -> bool:
    """Whether a dict in ``node`` (at any depth) has a key starting with ``$`` other
    than ``$comment``.
    """
    if isinstance(node, dict):
        return any(
            (k.startswith("$") and k != "$comment") or _has_dollar_keyword(v)
            for k, v in node.items()
        )
    if isinstance(node, list):
        return any(_has_dollar_keyword(v) for v in node)
    return False


_DATE_TIME_CHARS = frozenset("0123456789-:")  # every character of ``dates``' and ``times``' values


def _date_time_like(s: str) -> bool:
    """Whether ``s`` may be a value of ``fsm.dates.dates`` or ``times`` (``YYYY-MM-DD``,
    ``HH:MM``, ``HH:MM:SS``): it is not empty and holds only digits, ``-`` and ``:``.
    """
    return bool(s) and _DATE_TIME_CHARS.issuperset(s)


class _SpanFacts:
    """What ``_candidate_jobs``' tests read of a candidate span, worked out once per span
    of a document and kept (each a pure function of the span): its folded form
    (``_norm``), its dates and times (``restates``), its readings as one whole numeral
    (``restates_number``) and whether it is ``shaped``.
    """

    def __init__(self) -> None:
        self._norm: dict[str, str] = {}
        self._dates_times: dict[str, set[str]] = {}
        self._numeral: dict[str, tuple[Decimal, ...] | None] = {}
        self._shaped: dict[str, bool] = {}

    def norm(self, span: str) -> str:
        """``_norm(span)``."""
        t = self._norm.get(span)
        if t is None:
            t = self._norm[span] = _norm(span)
        return t

    def dates_times(self, span: str) -> set[str]:
        """``dates(span)`` and ``times(span)`` (of the span as written, as ``restates``)."""
        got = self._dates_times.get(span)
        if got is None:
            got = self._dates_times[span] = {*dates(span), *times(span)}
        return got

    def numeral(self, span: str) -> tuple[Decimal, ...] | None:
        """``_whole_numeral`` of the folded span."""
        if span not in self._numeral:
            self._numeral[span] = _whole_numeral(self.norm(span))
        return self._numeral[span]

    def shaped(self, span: str) -> bool:
        """``shaped(span)``."""
        got = self._shaped.get(span)
        if got is None:
            t = self.norm(span)
            got = self._shaped[span] = bool(dates(t) or times(t)) or self.numeral(span) is not None
        return got


def _moved(
    value: Any,
    pairs: list[tuple[tuple[str, ...], tuple[str, ...]]],
    scored: dict[tuple[str, ...], tuple[CandidateJob, list[float]]],
) -> Any:
    """``value`` with one field of each pair moved (``choose_overlaps``' rule), given each
    field's job and its candidates' scores (``scored``: key path -> ``(job, scores)``).
    """
    moved: set[tuple[str, ...]] = set()
    for a, b in pairs:
        if a in moved or b in moved:
            continue
        margins = {}
        for keys in (a, b):
            if keys not in scored:  # a number field: never moves
                continue
            job, scores = scored[keys]
            if len(scores) > 1:
                best = max(range(1, len(scores)), key=lambda k: (scores[k], -k))
                margins[keys] = (scores[0] - scores[best], job.candidates[best])
        if not margins:
            continue
        keys = min(margins, key=lambda k: margins[k][0])
        value = with_field(value, keys, margins[keys][1])
        moved.add(keys)
    return value


def shortlist_spans(
    engine: Any, jobs: list[CandidateJob], k: int, *, leads: bool = False
) -> list[CandidateJob]:
    """Each job's candidates cut to greedy's value and the ``k`` others whose first
    token the model rates likeliest (module docstring).

    Every candidate is written as ``candidate_scores`` writes it (the prompt and ``raw``
    up to the value, the candidate as JSON, the structural character after it); where
    the candidates' token ids part (their longest common prefix), one request per job
    reads the model's ``FIRST_TOKEN_TOP`` likeliest next tokens; a candidate ranks by
    its token's log-probability there (a token outside those ranks last; ties keep the
    text's order). All jobs' requests go to the engine as one batch (``choices.run_prompts``).

    With ``leads``, the requests also read the log-probabilities of the ids the
    candidates share from the first one ``candidate_scores`` scores, and each job they
    were made for is returned with that request as its ``lead`` (``choices.Lead``), so
    its candidates' scoring requests compute only their own rows; when the batch is sent
    at all (a job has more than ``k`` others), every job of three or more candidates
    gets a request (one that is not cut keeps all its candidates).

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        jobs: the fields; ``candidates[0]`` is greedy's value, always kept.
        k: most other candidates kept per job.
        leads: attach each request to its job as its ``lead``.

    Returns:
        The jobs in their order, each with at most ``k + 1`` candidates in their
        original order; a job with ``k`` or fewer others, or whose request failed or
        returned no log-probs, keeps all its candidates.
    """
    todo: list[tuple[int, list[list[int]], int, int]] = []  # job, candidates' ids, part, first
    for j, job in enumerate(jobs):
        if len(job.candidates) <= (2 if leads else k + 1):
            continue
        start, end = job.span
        head = job.raw[:start]
        tail = job.raw[end : end + 1]
        base, *fulls = encode_in_context(
            engine,
            job.context,
            [head, *(head + json.dumps(c, ensure_ascii=False) + tail for c in job.candidates)],
        )
        part = min(common_prefix(fulls[0], f) for f in fulls[1:])
        part = max(1, min(part, min(len(f) for f in fulls) - 1))
        # candidate_scores' first scored position of each candidate
        first = min(max(1, min(common_prefix(base, f), len(f) - 1)) for f in fulls)
        todo.append((j, fulls, part, first))
    if not any(len(jobs[j].candidates) > k + 1 for j, *_ in todo):
        return list(jobs)
    top = SamplingParams(max_tokens=1, temperature=0.0, logprobs=FIRST_TOKEN_TOP)
    params = [
        dataclasses.replace(top, prompt_logprobs=0, prompt_logprobs_start=first)
        if leads and first < part
        else top
        for _, _, part, first in todo
    ]
    outs = run_prompts(engine, [fulls[0][:part] for _, fulls, part, _ in todo], params)
    out_jobs = list(jobs)
    for (j, fulls, part, first), out in zip(todo, outs):
        job = jobs[j]
        if leads:
            job = dataclasses.replace(job, lead=Lead(fulls[0][:part], min(first, part), out))
            out_jobs[j] = job
        if out.finish_reason == "error" or not out.logprobs or len(job.candidates) <= k + 1:
            continue
        first_top = out.logprobs[0]
        rank = sorted(
            range(1, len(fulls)),
            key=lambda c: (-first_top.get(fulls[c][part], float("-inf")), c),
        )
        keep = [0, *sorted(rank[:k])]
        out_jobs[j] = dataclasses.replace(job, candidates=[job.candidates[c] for c in keep])
    return out_jobs
