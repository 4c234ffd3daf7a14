"""The number rules of ``structgen.extraction.evidence``.

The numeral nearest a mention of the field's name (``number_value``), the whole reading
of a numeral the model stopped at the separator of (``grouped_reading``), the next
numeral for a field repeating a sibling's (``repeated_numbers``), the one currency-marked
numeral for a money field (``amount_value``, marks read by ``labels.amount_spans``), the
two ends of a range for a ``X_min`` / ``X_max`` pair (``range_values``, ranges read by
``_ranges``), and null for a nullable field the text mentions only negated
(``denied_number``), 0 for such an integer count that is not nullable (``denied_count``),
and no numeral of a phone number, e-mail address, identifier or date for an unrelated field
(``foreign_value``, spans read by ``labels.foreign_spans``).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from structgen.extraction.evidence.fields import (
    accepts_number,
    field_kind,
    is_nullable,
    is_scalar,
    node_numbers,
)
from structgen.extraction.evidence.text import (
    GAP_REPEAT,
    NUMBER_ALIASES,
    TextWords,
    name_mentions,
    name_stems,
    stems_match,
)
from structgen.extraction.labels import CURRENCY_MARK, identifier_field, is_amount_field

_WINDOW_NUMBER = 3
_WINDOW_COVER = 4  # words around a mention that count for its cover (as the boolean window)

# what joins the two ends of a range ("65,000 to 80,000", "15 - 18", "between 1 and 3")
_RANGE_JOINERS = frozenset({"to", "-", "–", "—", "and"})

_BETWEEN = re.compile(r"\bbetween\s*\S*\s*$", re.IGNORECASE)

# the stems (``text.stem``) that name a range's ends in a field name
_RANGE_ENDS = {
    "min": "min", "minimum": "min", "low": "min", "max": "max", "maximum": "max", "high": "max"
}  # fmt: skip


def number_candidates(
    doc: TextWords,
    spans: list,
    stems: list[str],
    sub: dict,
    window: int = _WINDOW_NUMBER,
    name_first: bool = False,
    skip: frozenset[int] = frozenset(),
    marked: frozenset[int] | None = None,
) -> list[tuple[tuple[int, int, int, int], int, Decimal]]:
    """The numerals a number field's mentions point at, best first (the number rule of
    the package docstring).

    A mention's *cover* is how many of the name's stems the words around it (its clause,
    at most ``_WINDOW_COVER`` words either side) match: "Monthly fee SEK 349; joining fee
    SEK 199" covers ``monthly_fee`` twice at "Monthly fee" and once at the other "fee",
    so a fuller mention of the name outranks a nearer partial one.

    Args:
        doc: the text's words.
        spans: the text's numerals (``fsm.numerals.numeral_spans``).
        stems: the field name's stems (``text.name_stems``).
        sub: the field's number subschema (type and bounds checked).
        window: the most words from a mention to the numeral (1: next to it).
        name_first: count only mentions before the numeral ("wind 20 km/h", not "for 7
            days"): the left-out number rule, which reads a field the model left out.
        skip: indices into ``spans`` that are no candidates (``dated_numerals``: the
            numerals of a whole date, for a field that counts).
        marked: for a field named for money in a text that marks amounts, the indices
            into ``spans`` of the currency-marked numerals; a numeral not among them
            covers one stem less ("46 pupils" for ``cost_per_student`` ranks after
            "£172 per pupil"). None: every numeral alike.

    Returns:
        ``(rank, index, value)`` per numeral some mention points at: ``rank`` is
        ``(-cover, distance in words, 0 when the numeral comes first, 0 when the
        mention is a whole name word's stem, not a longer word it starts)`` of its best
        mention, ``index`` the numeral's index in ``spans``, ``value`` its first reading
        the field accepts; sorted by rank. Raises: never.
    """
    mentions = name_mentions(doc, stems)
    cover = {k: _cover(doc, k, stems) for k in mentions}
    # a mention by the name's money words alone ("Gross amount" for ``vat_amount``) ranks
    # after every mention of its other words ("VAT 19 %: EUR 348,84")
    specific = [s for s in stems if not is_amount_field([s])]
    if specific and len(specific) < len(stems):
        cover = {k: c if _cover(doc, k, specific) else 0 for k, c in cover.items()}
    in_range = {k for pair in _ranges(doc, spans) for k in pair}
    best: dict[int, tuple[tuple[int, int, int, int], int, Decimal]] = {}
    for index, (start, end, values) in enumerate(spans):
        if index in in_range or index in skip:
            continue  # one end of "65 to 80": neither is the value of a plain field
        first, last = doc.word_at(start), doc.word_at(max(start, end - 1))
        if first >= len(doc.words):
            continue
        fitting = [v for v in values if accepts_number(sub, v)]
        if not fitting:
            continue
        for k in mentions:
            if doc.words[k][3] != doc.words[first][3] or first <= k <= last:
                continue
            if name_first and k > last:
                continue
            dist = first - k if k < first else k - last
            if 1 < dist <= _LABEL_WORDS and _labelled(doc, k, start):
                dist = 1  # "Delivery and set-up: £45.00": the label's value
            if dist > window:
                continue
            # a mention by a whole name word outranks, all else equal, one by a prefix
            # ("14" after "matchday" is ``matchday``'s, not ``postponed_matches``')
            exact = 0 if doc.words[k][0] in stems else 1
            unmarked = 0 if marked is None or index in marked else 1
            rank = (unmarked - cover[k], dist, 0 if last < k else 1, exact)
            if index not in best or rank < best[index][0]:
                best[index] = (rank, index, fitting[0])
    return sorted(best.values(), key=lambda c: (c[0], c[1]))


_LABEL_WORDS = 6  # most words of a label, its mention to its colon
_LABEL_TAIL = re.compile(r"\s*(?:[£$€¥₹]|[A-Z]{3}|kr|Rs\.?)?\s*")


def _labelled(doc: TextWords, k: int, start: int) -> bool:
    """Whether the text between word ``k`` and a numeral starting at ``start`` is the rest
    of a label ending in ``:`` right before the numeral (a currency mark between allowed),
    with no digit in it: "Delivery and set-up: £45.00" labels 45.00 with every word.
    """
    gap = doc.text[doc.words[k][2] : start]
    colon = gap.rfind(":")
    return (
        colon >= 0
        and not any(ch.isdigit() for ch in gap[:colon])
        and _LABEL_TAIL.fullmatch(gap[colon + 1 :]) is not None
    )


# words of a field name that name one part of a date or time ("day", "birth_year"): such a
# field may take a numeral of a written date; a plural ("days", "months") counts and may not
_DATE_PART_WORDS = frozenset("day month year date hour minute second time weekday dob".split())


def dated_numerals(name: str, spans: list, dates: list[tuple[int, int]]) -> frozenset[int]:
    """The indices of ``spans`` (``fsm.numerals.numeral_spans``) inside a whole date of
    the text (``dates``: ``fsm.dates.date_spans``) when the field ``name`` counts
    something (no word of it names a date part, ``_DATE_PART_WORDS``): "hired for a single
    day on 14 August 2027" gives ``days`` no 14. Empty for a date-part field (``day``,
    ``birth_year``). Raises: never.
    """
    words = {w.lower() for w in re.split(r"[\W_]+|(?<=[a-z])(?=[A-Z])", name) if w}
    if words & _DATE_PART_WORDS or not dates:
        return frozenset()
    return frozenset(
        i for i, (a, b, _) in enumerate(spans) if any(x <= a and b <= y for x, y in dates)
    )


# a money field's name words beyond ``labels.is_amount_field``'s: a balance is money too
_MONEY_STEMS = frozenset({"balanc"})
_YEAR = re.compile(r"19[0-9]{2}|20[0-9]{2}|2100")
# words that make a total one of money beside ``labels.is_amount_field``'s
_TOTAL_MONEY_STEMS = frozenset({"balanc", "incom", "spend", "payabl", "due", "valu"})
_PERCENT = re.compile(r"\s?(?:%|per ?cent\b|percent\b)")


def money_name(stems: list[str]) -> bool:
    """Whether a field's name (its stems) names money: ``labels.is_amount_field``, a
    ``balance``, or a word ending in a money word ("surcharge", "subtotal").
    """
    return (
        is_amount_field(stems)
        or bool(_MONEY_STEMS & set(stems))
        or any(is_amount_field([s[i:]]) for s in stems for i in range(2, len(s) - 2))
    )


def marked_numerals(stems: list[str], spans: list, amounts: list) -> frozenset[int] | None:
    """For a field named for money (``money_name``; a total only with a money word,
    ``total_cost``, not ``total_litres``) in a text that writes currency-marked numerals
    (``amounts``: ``labels.amount_spans``), the indices of ``spans`` that are marked
    (``number_candidates``' ``marked``); None for any other field or text.
    """
    rest = [w for w in stems if w != "total"]
    if not amounts or not (money_name(rest) if rest else stems):
        return None
    at = {(a, b) for a, b, _ in amounts}
    return frozenset(i for i, (a, b, _) in enumerate(spans) if (a, b) in at)


def unmarked_numerals(stems: list[str], spans: list, amounts: list, text: str) -> frozenset[int]:
    """The indices of ``spans`` (``fsm.numerals.numeral_spans``) that write a year (four
    digits, 1900 to 2100) or a percentage (a numeral followed by ``%``, "per cent" or
    "percent") without a currency mark, for a field named for money (``money_name``)
    in a text that writes currency-marked
    numerals (``amounts``: ``labels.amount_spans``): such a field takes no year ("Balance
    brought forward from 2025: £1,284.60" is 1284.60, not 2025) and no rate ("VAT @ 20%:
    £55.30" is 55.30, not 20). Empty for any other field or a text without marked
    numerals. Raises: never.
    """
    if not amounts or not money_name(stems):
        return frozenset()
    marked = {(a, b) for a, b, _ in amounts}
    return frozenset(
        i
        for i, (a, b, _) in enumerate(spans)
        if (a, b) not in marked
        and (_YEAR.fullmatch(text[a:b]) or _PERCENT.match(text, b) is not None)
    )


def _cover(doc: TextWords, k: int, stems: list[str]) -> int:
    """How many of ``stems`` the words of word ``k``'s clause within ``_WINDOW_COVER``
    words of it match, or write an alias of (``text.NUMBER_ALIASES``: "six people" covers
    ``passengers``; ``number_candidates``).
    """
    clause = doc.words[k][3]
    near = [
        doc.words[j][0]
        for j in range(max(0, k - _WINDOW_COVER), min(len(doc.words), k + _WINDOW_COVER + 1))
        if doc.words[j][3] == clause
    ]
    return sum(
        1
        for s in dict.fromkeys(stems)
        if any(stems_match(w, s) or w in NUMBER_ALIASES.get(s, ()) for w in near)
    )


def number_value(
    doc: TextWords,
    spans: list,
    stems: list[str],
    sub: dict,
    window: int = _WINDOW_NUMBER,
    name_first: bool = False,
    skip: frozenset[int] = frozenset(),
) -> Decimal | None:
    """The number rule of the package docstring for one field alone: the value of its
    best candidate (``number_candidates``, same arguments; of two ranked equally, the
    one the text writes first); None when no mention decides it.
    """
    found = number_candidates(doc, spans, stems, sub, window, name_first, skip)
    return found[0][2] if found else None


def assign_numbers(
    candidates: dict[str, list[tuple[tuple[int, int, int, int], int, Decimal]]],
) -> dict[str, Decimal]:
    """Sibling number fields' values from their candidates (``number_candidates``), one
    numeral to one field: the field with the best-ranked candidate (of two ranked
    equally, the numeral the text writes first) takes that numeral, which leaves every
    other field's list; a numeral that two fields rank equally best decides neither
    ("Salary 50,000 or 60,000" for ``salary_min`` and ``salary_max``: the model's values
    stay) and is no other field's.

    Args:
        candidates: field name -> its candidates, best first.

    Returns:
        field name -> value, for the fields decided. Raises: never.
    """
    left = {name: list(c) for name, c in candidates.items() if c}
    taken: set[int] = set()
    out: dict[str, Decimal] = {}
    while left:
        for name in list(left):
            left[name] = [c for c in left[name] if c[1] not in taken]
            if not left[name]:
                del left[name]
        if not left:
            break
        top = min(c[0][0] for c in left.values())
        heads = {name: c[0] for name, c in left.items() if c[0][0] == top}
        undecided = set()
        for name, head in heads.items():
            if any(n != name and h[1] == head[1] for n, h in heads.items()):
                undecided.add(name)
        for name, head in heads.items():
            if name not in undecided:
                out[name] = head[2]
                taken.add(head[1])
        for name in heads:
            del left[name]
        taken.update(h[1] for n, h in heads.items() if n in undecided)
    return out


def _ranges(doc: TextWords, spans: list) -> list[tuple[int, int]]:
    """Index pairs ``(i, i + 1)`` of ``spans`` that the text writes as a range, only a
    joiner between them: "42,000 to 48,000", "€15 - €18", "between 65,000 and 80,000"
    (currency marks, spaces and line breaks around the joiner allowed), the first
    reading below the second.
    """
    found: list[tuple[int, int]] = []
    for i in range(len(spans) - 1):
        (a_start, a_end, a_values), (b_start, _, b_values) = spans[i], spans[i + 1]
        between = CURRENCY_MARK.sub(" ", doc.text[a_end:b_start]).strip().lower()
        if between not in _RANGE_JOINERS:
            continue
        if between == "and" and not _BETWEEN.search(doc.text[:a_start]):
            continue
        if a_values and b_values and min(a_values) < max(b_values):
            found.append((i, i + 1))
    return found


def range_values(
    root: Any, sub: dict, node: dict, doc: TextWords, spans: list, owner: str = ""
) -> dict[str, Decimal]:
    """The range rule of the package docstring: ``{field: new value}`` for a pair of
    sibling number fields named ``X_min`` / ``X_max`` (``min``/``max``, ``minimum``/
    ``maximum``, ``low``/``high``, either end of the name) that take the two ends of the
    one range the text writes (in a clause mentioning ``X`` when the text mentions it).
    ``owner`` is the name of the property holding ``node`` ("" at the root): a pair named
    by its ends alone (``low`` / ``high``) takes it as ``X`` (``estimate.low``:
    "Estimate €8,000 - 12,000", not "1921-1998").
    """
    props = sub.get("properties") or {}
    ends: dict[tuple[str, ...], dict[str, str]] = {}
    for name, prop in props.items():
        kind, _ = field_kind(root, prop)
        stems = name_stems(name)
        marks = [s for s in stems if s in _RANGE_ENDS]
        if kind != "number" or len(marks) != 1:
            continue
        base = tuple(s for s in stems if s not in _RANGE_ENDS) or tuple(name_stems(owner))
        ends.setdefault(base, {})[_RANGE_ENDS[marks[0]]] = name
    found: dict[str, Decimal] = {}
    for base, pair in ends.items():
        if set(pair) != {"min", "max"}:
            continue
        (_, lo_sub), (_, hi_sub) = (
            field_kind(root, props[pair["min"]]),
            field_kind(root, props[pair["max"]]),
        )
        clauses = {doc.words[k][3] for k in name_mentions(doc, list(base))} if base else set()
        readings: set[tuple[Decimal, Decimal]] = set()
        for i, j in _ranges(doc, spans):
            at = doc.word_at(spans[i][0])
            if clauses and (at >= len(doc.words) or doc.words[at][3] not in clauses):
                continue
            lo = [v for v in spans[i][2] if accepts_number(lo_sub, v)]
            hi = [v for v in spans[j][2] if accepts_number(hi_sub, v)]
            if lo and hi and lo[0] < hi[0]:
                readings.add((lo[0], hi[0]))
        if len(readings) != 1:
            continue  # no range, or two: the model decides
        ((lo_v, hi_v),) = readings
        for end, value in (("min", lo_v), ("max", hi_v)):
            current = node.get(pair[end])
            if isinstance(current, bool) or not (
                isinstance(current, (int, float)) and Decimal(str(current)) == value
            ):
                found[pair[end]] = value
    return found


def repeated_numbers(
    root: Any, sub: dict, node: dict, doc: TextWords, spans: list
) -> dict[str, Decimal]:
    """The repeat rule of the package docstring: ``{field: new value}`` for the
    non-nullable number fields of one object that repeat an earlier sibling's value the
    text writes once, each taking the numeral the text writes next after it.
    """
    found: dict[str, Decimal] = {}
    held: list[tuple[str, Decimal]] = []  # number siblings so far, schema order
    for name, prop in (sub.get("properties") or {}).items():
        kind, branch = field_kind(root, prop)
        current = node.get(name)
        if kind != "number" or not is_scalar(current) or isinstance(current, str):
            continue
        value = Decimal(str(current))
        earlier = any(v == value for _, v in held)
        held.append((name, value))
        if not earlier or is_nullable(root, prop):
            continue
        places = [k for k, (_, _, values) in enumerate(spans) if value in values]
        if len(places) != 1 or places[0] + 1 >= len(spans):
            continue  # written twice (both may be right) or never: the model decides
        start, end, _ = spans[places[0]]
        n_start, n_end, n_values = spans[places[0] + 1]
        last, first = doc.word_at(max(start, end - 1)), doc.word_at(n_start)
        if first >= len(doc.words) or doc.words[first][3] != doc.words[last][3]:
            continue  # the next numeral is in another clause
        if first - last - 1 > GAP_REPEAT:
            continue
        taken = {v for _, v in held} | set(node_numbers(node))
        fitting = [v for v in n_values if accepts_number(branch, v) and v not in taken]
        if fitting:
            found[name] = fitting[0]
            held[-1] = (name, fitting[0])
    return found


def grouped_reading(root: Any, prop: Any, value: Any, spans: list) -> Decimal | None:
    """The separator rule of the package docstring: the thousands reading of the numeral
    whose decimal reading with trailing zeros ``value`` equals, or None (no change).
    """
    kind, branch = field_kind(root, prop)
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
    return grouped if accepts_number(branch, grouped) else None


def amount_value(root: Any, prop: Any, name: str, value: Any, amounts: list) -> Decimal | None:
    """The amount rule of the package docstring: the one currency-marked numeral a money
    field may hold, when the model's value is none of them; else None (no change).
    """
    kind, branch = field_kind(root, prop)
    if kind != "number" or isinstance(value, (str, bool)) or not is_amount_field(name_stems(name)):
        return None
    if value is None and not is_nullable(root, prop):
        return None
    number = None if value is None else Decimal(str(value))
    if number is not None and any(number in values for _, _, values in amounts):
        return None
    fitting = [[v for v in values if accepts_number(branch, v)] for _, _, values in amounts]
    distinct = {f[0] for f in fitting if f}
    return distinct.pop() if len(distinct) == 1 else None


def total_value(
    root: Any, prop: Any, name: str, value: Any, amounts: list, text: str
) -> Decimal | None:
    """The total rule of the package docstring: a number field named for a total of money
    (``total``, or ``total`` and words naming money, ``labels.is_amount_field`` or
    ``income``, ``spending``, ``payable``, ``due``, ``value``: ``total_cost``,
    ``total_income``; not ``total_litres``) takes the largest reading of the
    currency-marked numerals the text writes (``amounts``: ``labels.amount_spans``) that
    its type and bounds accept, when its value differs: a total sums the other amounts
    ("Subtotal £276.50, VAT @ 20%: £55.30, Total: £331.80"), when the text writes that
    amount twice or more, it is the sum of two or more of the other amounts, or no list
    joiner alone (",", ";", "and", ...) joins it to the amount before or after it (a
    largest amount listed with others that sums nothing is an item: "Items $4,500.00 and
    $1,250.00"); None (no change) otherwise, where the text marks no amount or the value
    is already that reading. Raises: never.
    """
    kind, branch = field_kind(root, prop)
    stems = name_stems(name)
    if kind != "number" or isinstance(value, (str, bool)) or "total" not in stems:
        return None
    rest = [w for w in stems if w != "total"]
    if rest and not (is_amount_field(rest) or _TOTAL_MONEY_STEMS & set(rest)):
        return None  # a total of something else: ``total_litres``
    fitting = [v for _, _, values in amounts for v in values if accepts_number(branch, v)]
    if not fitting:
        return None
    largest = max(fitting)
    if isinstance(value, (int, float)) and Decimal(str(value)) == largest:
        return None
    others = [values[0] for _, _, values in amounts if largest not in values]
    if len(others) == len(amounts) - 1 and not _sums(largest, others):
        # written once and no sum of the others: not where a list of amounts writes it
        # ("Items $4,500.00 and $1,250.00": an item, not a total)
        (at,) = [k for k, (_, _, values) in enumerate(amounts) if largest in values]
        if _listed(text, amounts, at):
            return None
    return largest


_LIST_JOIN = re.compile(
    r"\s*(?:,|;|&|and|or|plus|,\s*and)\s*(?:[£$€¥₹]|[A-Z]{3}|kr)?\s*$", re.IGNORECASE
)


def _listed(text: str, amounts: list, at: int) -> bool:
    """Whether amount ``at`` of ``amounts`` is joined to the amount before or after it by
    a list joiner alone ("$4,500.00 and $1,250.00", "€90; €150"), a currency mark and
    its unit ("kr", "EUR") around allowed.
    """
    start, end, _ = amounts[at]
    if at > 0:
        between = text[amounts[at - 1][1] : start]
        between = re.sub(r"^\s*(?:[A-Z]{3}|kr)\b", "", between)
        if _LIST_JOIN.fullmatch(between):
            return True
    if at + 1 < len(amounts):
        between = text[end : amounts[at + 1][0]]
        between = re.sub(r"^\s*(?:[A-Z]{3}|kr)\b", "", between)
        if _LIST_JOIN.fullmatch(between):
            return True
    return False


_MAX_SUMMED = 12  # most other amounts searched for a sum (2**12 subsets at most)


def _sums(total: Decimal, parts: list[Decimal]) -> bool:
    """Whether ``total`` is the sum of two or more of ``parts`` (each used once);
    False where there are more than ``_MAX_SUMMED`` parts. Raises: never.
    """
    if len(parts) > _MAX_SUMMED:
        return False
    reach: dict[Decimal, int] = {Decimal(0): 0}  # sum -> most parts reaching it
    for part in parts:
        for got, n in list(reach.items()):
            new = got + part
            if new <= total and reach.get(new, -1) < n + 1:
                reach[new] = n + 1
    return reach.get(total, 0) >= 2


def denied_count(doc: TextWords, stems: list[str], root: Any, prop: Any) -> bool:
    """The denied-count rule of the package docstring: a non-nullable integer field, or
    number field named for money (``labels.is_amount_field``: "You didn't leave a
    deposit" for ``deposit_paid``), whose bounds take 0 and whose name's words the text
    mentions only negated.
    """
    kind, branch = field_kind(root, prop)
    types = branch.get("type")
    types = {types} if isinstance(types, str) else set(types or ())
    if kind != "number" or is_nullable(root, prop):
        return False
    if "integer" not in types and not is_amount_field(stems):
        return False
    return accepts_number(branch, Decimal(0)) and all_negated(doc, stems)


# words that state an amount or count of nothing right after its name ("Joining fee:
# waived", "Deposit: none required", "You owe nothing", "Delivery: free")
_ZERO_WORDS = frozenset("waived nothing nil none free zero".split())
_GAP_ZERO = 2  # words between a mention and its zero word


def stated_zero(doc: TextWords, stems: list[str], root: Any, prop: Any, full: bool = False) -> bool:
    """The stated-zero rule of the package docstring: a non-nullable number field whose
    bounds take 0, some mention of whose name (``name_mentions``) is followed in its
    clause, at most ``_GAP_ZERO`` words on, by a word of ``_ZERO_WORDS``: "Joining fee:
    waived (normally £30)" is ``joining_fee`` 0. ``full``: count only mentions that cover
    every word of the name (``_cover``), which outrank the number rule's numerals ("Monthly
    fee £24.99. Joining fee: waived"); the caller applies the others only where the number
    rule points at no numeral. Raises: never.
    """
    kind, branch = field_kind(root, prop)
    if kind != "number" or is_nullable(root, prop) or not accepts_number(branch, Decimal(0)):
        return False
    whole = len(dict.fromkeys(stems))
    for k in name_mentions(doc, stems):
        if full and _cover(doc, k, stems) < whole:
            continue
        clause = doc.words[k][3]
        for j in range(k + 1, min(len(doc.words), k + _GAP_ZERO + 2)):
            if doc.words[j][3] != clause:
                break
            if doc.raw[j] in _ZERO_WORDS:
                return True
    return False


def denied_number(doc: TextWords, stems: list[str], root: Any, prop: Any) -> bool:
    """The denied-number rule of the package docstring: a nullable field whose name's
    words the text mentions, every mention in a clause with a negation.
    """
    return is_nullable(root, prop) and all_negated(doc, stems)


def all_negated(doc: TextWords, stems: list[str]) -> bool:
    """Whether the text mentions some of the name's words, every mention in a clause with
    a negation.
    """
    mentions = [k for k, (w, *_) in enumerate(doc.words) if any(stems_match(w, s) for s in stems)]
    return bool(mentions) and all(doc.negated(k) for k in mentions)


# name stems of number fields that a date's or time's parts may fill ("day", "hour")
_DATE_PART_STEMS = frozenset("day month year hour minut second date time".split())


def foreign_value(
    root: Any, prop: Any, name: str, node: dict, spans: list, foreign: tuple[list, list]
) -> tuple[bool, Decimal | None]:
    """The foreign numeral rule of the package docstring: ``(True, new value)`` for a
    number field whose value the text writes only inside a phone number, e-mail address,
    identifier or date (``foreign``: ``labels.foreign_spans`` with and without
    identifiers; no rule for a field named for a date part, identifiers not for a field
    named for an identifier) or, when the text writes no numeral at all, nowhere; the new
    value is None for a nullable field, else the one numeral written outside such spans
    that fits the field and no sibling holds. ``(False, None)``: no change.
    """
    value = node.get(name)
    kind, branch = field_kind(root, prop)
    if kind != "number" or not is_scalar(value) or isinstance(value, str):
        return False, None
    if any(s in _DATE_PART_STEMS for s in name_stems(name)):
        return False, None
    number = Decimal(str(value))
    foreign_here = foreign[1] if identifier_field(name) else foreign[0]

    def inside(start: int, end: int) -> bool:
        return any(a <= start and end <= b for a, b in foreign_here)

    places = [(a, b) for a, b, values in spans if number in values]
    if places and not all(inside(a, b) for a, b in places):
        return False, None  # written as a numeral of its own somewhere
    if not places and spans:
        return False, None  # not written, but the text has numerals: it may be derived
    if is_nullable(root, prop):
        return True, None
    taken = set(node_numbers({k: v for k, v in node.items() if k != name}))
    free = set()
    for a, b, values in spans:
        fitting = [v for v in values if accepts_number(branch, v) and v not in taken]
        if fitting and not inside(a, b):
            free.add(fitting[0])
    return (True, free.pop()) if len(free) == 1 else (False, None)


# a time unit written right after a numeral ("two years", "eighteen months old", "90-minute")
_UNIT_AFTER = re.compile(
    r"[ \t]*-?[ \t]*(years?|yrs?|months?|weeks?|days?|hours?|hrs?|minutes?|mins?)(?![\w])",
    re.IGNORECASE,
)

# each time unit's length in the smallest unit of its family: months and years are not
# whole numbers of days, so the two families never convert into each other
_UNIT_LENGTH = {
    "minute": ("clock", 1), "min": ("clock", 1), "hour": ("clock", 60), "hr": ("clock", 60),
    "day": ("clock", 1440), "week": ("clock", 10080),
    "month": ("calendar", 1), "year": ("calendar", 12), "yr": ("calendar", 12),
}  # fmt: skip


def _time_unit(word: str) -> tuple[str, int] | None:
    """A time unit's ``(family, length)`` (``_UNIT_LENGTH``), its plural read as the
    singular; None for any other word.
    """
    w = word.lower()
    return _UNIT_LENGTH.get(w) or (_UNIT_LENGTH.get(w[:-1]) if w.endswith("s") else None)


def unit_value(
    root: Any, prop: Any, name: str, value: Any, text: str, spans: list
) -> Decimal | None:
    """The time-unit rule of the package docstring: a number field named for a time unit
    (the last word of its name: ``warranty_months``, ``age_years``, ``prep_minutes``)
    whose value the text writes only as numerals followed by one other unit of the same
    family ("two years" for ``warranty_months`` 2, "eighteen months old" for ``age_years``
    18) takes the value in the field's unit (24, 1.5), when it has at most two decimals
    and the field's type and bounds accept it; else None (no change). Minutes, hours,
    days and weeks convert among themselves, months and years between themselves.
    Raises: never.
    """
    kind, branch = field_kind(root, prop)
    if kind != "number" or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    words = [w for w in re.split(r"[\W_]+", name) if w]
    own = _time_unit(words[-1]) if words else None
    if own is None:
        return None
    number = Decimal(str(value))
    written = set()
    for _, end, values in spans:
        if number not in values:
            continue
        m = _UNIT_AFTER.match(text, end)
        unit = _time_unit(m.group(1)) if m else None
        if unit is None or unit[0] != own[0] or unit == own:
            return None  # written bare, in the field's unit, or in another family
        written.add(unit[1])
    if len(written) != 1:
        return None
    converted = number * written.pop() / own[1]
    if converted != converted.quantize(Decimal("0.01")):
        return None  # a month in years (0.0833...): no value the text gives
    return converted if accepts_number(branch, converted) else None


_AND_A_HALF = re.compile(r"[ \t]+and[ \t]+a[ \t]+half(?![\w])", re.IGNORECASE)


def with_halves(spans: list, text: str) -> list:
    """``spans`` (``fsm.numerals.numeral_spans`` of ``text``) with each whole numeral
    followed by "and a half" read as the numeral plus one half, its span running to the
    end of "half" ("thirty-seven and a half" is 37.5, "ten and a half hours" 10.5). Raises:
    never.
    """
    out = []
    for start, end, values in spans:
        half = _AND_A_HALF.match(text, end)
        if half is not None and values and all(v == v.to_integral_value() for v in values):
            out.append((start, half.end(), tuple(v + Decimal("0.5") for v in values)))
        else:
            out.append((start, end, values))
    return out


_FOR_BEFORE = re.compile(r"\bfor[ \t]+(?:another[ \t]+|a[ \t]+further[ \t]+)?\Z", re.IGNORECASE)


def duration_value(
    root: Any, prop: Any, name: str, value: Any, text: str, spans: list
) -> Decimal | None:
    """The duration rule of the package docstring: a nullable number field named for a
    time unit (``duration_days``; ``_time_unit`` of its name's last word) that the model
    left null takes the one duration the text writes as "for" and a numeral and a unit of
    the same family ("for 7 days", "for fourteen days", "for two weeks" -> 14), converted
    to the field's unit, when every such phrase gives the same value, it has at most two
    decimals and the field's type and bounds accept it; else None (no change). Raises:
    never.
    """
    kind, branch = field_kind(root, prop)
    if kind != "number" or value is not None or not is_nullable(root, prop):
        return None
    words = [w for w in re.split(r"[\W_]+", name) if w]
    own = _time_unit(words[-1]) if words else None
    if own is None:
        return None
    found = set()
    for start, end, values in spans:
        m = _UNIT_AFTER.match(text, end)
        unit = _time_unit(m.group(1)) if m else None
        if unit is None or unit[0] != own[0] or len(values) != 1:
            continue
        if _FOR_BEFORE.search(text, max(0, start - 24), start) is None:
            continue
        found.add(values[0] * unit[1] / own[1])
    if len(found) != 1:
        return None
    converted = found.pop()
    if converted != converted.quantize(Decimal("0.01")):
        return None
    return converted if accepts_number(branch, converted) else None
