"""Boolean and number fields decided by the text's mentions of their names
(``structgen.extraction.evidence``), and the positioned numerals they read."""

from __future__ import annotations

import random
import re
from decimal import Decimal

import jsonschema
import pytest

from structgen.errors import GrammarTooComplexError
from structgen.extraction import extract
from structgen.extraction.evidence import apply_evidence, name_stems
from structgen.fsm.numerals import numeral_spans, numerals

BOOL = {
    "type": "object",
    "properties": {"pets_allowed": {"type": "boolean"}, "wifi": {"type": "boolean"}},
    "required": ["pets_allowed", "wifi"],
}
NUM = {
    "type": "object",
    "properties": {
        "rooms": {"type": "integer", "minimum": 1, "maximum": 20},
        "floor": {"type": ["integer", "null"]},
        "price": {"type": "number"},
    },
    "required": ["rooms", "floor", "price"],
}


def test_name_stems_drop_generic_words():
    assert name_stems("breakfast_included") == ["breakfast"]
    assert name_stems("has_parking") == ["park"]
    assert name_stems("areaM2") == ["area", "m2"]
    assert name_stems("servings") == name_stems("serves")


@pytest.mark.parametrize(
    ("text", "pets", "wifi"),
    [
        ("Pets are allowed. Free wifi in every room.", True, True),
        ("No pets, sorry. Wifi: none.", False, False),
        ("A quiet flat; pet friendly; the wifi is not working.", True, False),
        ("A quiet flat with a view.", False, False),  # unmentioned: the model's value
        ("Pets: no (wifi included)", False, True),
    ],
)
def test_boolean_follows_its_mention(text, pets, wifi):
    value, _ = apply_evidence(BOOL, text, {"pets_allowed": False, "wifi": False})
    assert value == {"pets_allowed": pets, "wifi": wifi}


def test_number_takes_the_numeral_next_to_its_name():
    text = "Built in 1994, the flat has three rooms on floor 4. Price: 1,250,000 (negotiable)."
    value, changed = apply_evidence(NUM, text, {"rooms": 4, "floor": None, "price": 1994})
    assert value == {"rooms": 3, "floor": 4, "price": 1250000}
    assert changed == ["rooms", "floor", "price"]
    jsonschema.validate(value, NUM)


def test_number_outside_bounds_or_unmentioned_keeps_the_model_value():
    text = "It has 45 rooms. Asking 300 000."  # 45 > maximum; price never named
    before = {"rooms": 2, "floor": 1, "price": 7}
    assert apply_evidence(NUM, text, before) == (before, [])


def test_siblings_pointing_at_one_numeral_are_left_to_the_model():
    schema = {
        "type": "object",
        "properties": {"salary_min": {"type": "number"}, "salary_max": {"type": "number"}},
    }
    before = {"salary_min": 1, "salary_max": 2}
    assert apply_evidence(schema, "Salary 50,000 or 60,000.", before) == (before, [])


ENUM = {
    "type": "object",
    "properties": {
        "priority": {"enum": ["low", "medium", "high"]},
        "cabin": {"type": "string", "enum": ["economy", "premium_economy", "business"]},
        "carrier": {"anyOf": [{"enum": ["DHL", "La Poste", "UPS"]}, {"type": "null"}]},
    },
    "required": ["priority", "cabin"],
}
ENUM_BEFORE = {"priority": "medium", "cabin": "business", "carrier": None}


def _reference_enum(text: str, options: list[str], current, name: str = "") -> str | None:
    """A brute-force reading of the enum rule on the text's raw words (no stems): which
    options occur as consecutive lowercased words outside a longer option's occurrence,
    with no negation word among the three words before them in their clause nor right
    after them; the model's option stays when the text affirms it. Of two or more
    affirmed options, the one affirmed right beside the field's ``name`` (at most one
    word between, in its clause) counts alone, unless another affirmed option shares a
    clause with it."""
    clauses = re.split(r"[.;,!?()\n]", text.lower())
    mentioned, affirmed = set(), set()
    by_clause: dict[str, set[int]] = {}  # affirmed option -> clauses affirming it
    beside: set[str] = set()
    for c, clause in enumerate(clauses):
        words = re.findall(r"[^\W_]+", clause)
        hits = []
        for o in options:
            ow = re.findall(r"[^\W_]+", o.lower())
            hits += [(k, k + len(ow), o) for k in range(len(words)) if words[k : k + len(ow)] == ow]
        for a, b, o in hits:
            if any(x <= a and b <= y and y - x > b - a for x, y, _ in hits):
                continue
            mentioned.add(o)
            near = words[max(0, a - 3) : a] + words[b : b + 1]
            if not {"no", "not", "never", "without"} & set(near):
                affirmed.add(o)
                by_clause.setdefault(o, set()).add(c)
                if name and name in words[max(0, a - 2) : a] + words[b : b + 2]:
                    beside.add(o)
    if current in affirmed:  # a current mentioned only negated gives way
        return None
    if len(affirmed) > 1 and len(beside) == 1:
        (near_name,) = beside
        others = set().union(*(by_clause[o] for o in affirmed if o != near_name))
        if not by_clause[near_name] & others:
            affirmed = beside
    if len(affirmed) != 1:
        return None
    (only,) = affirmed
    return None if only == current else only


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # one option each, the model's options unmentioned: the text's options
        (
            "Low priority. Flying economy with DHL.",
            {"priority": "low", "cabin": "economy", "carrier": "DHL"},
        ),  # fmt: skip
        # case-insensitive, underscores as spaces, a longer option wins its words
        (
            "HIGH priority; Premium Economy seat; sent by la poste.",
            {"priority": "high", "cabin": "premium_economy", "carrier": "La Poste"},
        ),  # fmt: skip
        # two options mentioned: the model decides
        ("Low or high priority, economy or business.", ENUM_BEFORE),
        # the model's option is mentioned: it stays although another one is too
        ("Medium priority, was high. Business class.", ENUM_BEFORE),
        # inside a word only ("below", "ups" in "startups", "lower" is a stem of "low"
        # only as a whole word): not a mention
        ("Slightly below average; startups welcome; hallowed halls.", ENUM_BEFORE),
        # negated: not a mention that decides
        ("Not high priority. No economy seats left. Without UPS.", ENUM_BEFORE),
    ],
)
def test_enum_takes_the_one_option_the_text_mentions(text, want):
    value, changed = apply_evidence(ENUM, text, dict(ENUM_BEFORE))
    assert value == want
    assert set(changed) == {k for k in want if want[k] != ENUM_BEFORE[k]}
    jsonschema.validate(value, ENUM)


def test_enum_option_words_split_as_the_text_words():
    schema = {"type": "object", "properties": {"carrier": {"enum": ["DHL", "PostNord"]}}}
    for text in ("PostNord has picked it up.", "sent with postnord"):
        assert apply_evidence(schema, text, {"carrier": "DHL"})[0] == {"carrier": "PostNord"}
    assert apply_evidence(schema, "Post Nord", {"carrier": "DHL"})[0] == {"carrier": "DHL"}


def test_enum_left_out_or_null_takes_the_mentioned_option():
    before = {"priority": "low", "cabin": "economy"}  # carrier (optional) left out
    value, changed = apply_evidence(ENUM, "Low priority, economy, shipped by UPS.", before)
    assert value == {**before, "carrier": "UPS"} and changed == ["carrier"]
    before = {**before, "carrier": None}
    assert apply_evidence(ENUM, "Low priority, economy, shipped by UPS.", before)[0] == value
    assert apply_evidence(ENUM, "Low priority, economy.", before) == (before, [])


def test_enum_rule_matches_a_brute_force_reading():
    rng = random.Random(3)
    vocab = ["low", "medium", "high", "economy", "premium", "business", "dhl", "ups", "la",
             "poste", "not", "below", "startups", "and", "the", ",", ".", "priority"]  # fmt: skip
    options = {"priority": ["low", "medium", "high"],
               "cabin": ["economy", "premium_economy", "business"],
               "carrier": ["DHL", "La Poste", "UPS"]}  # fmt: skip
    fired = 0
    for _ in range(400):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 14)))
        value, _ = apply_evidence(ENUM, text, dict(ENUM_BEFORE))
        for name, opts in options.items():
            spaced = [o.replace("_", " ") for o in opts]
            current = ENUM_BEFORE[name]
            ref = _reference_enum(text, spaced, current and current.replace("_", " "), name)
            want = current if ref is None else opts[spaced.index(ref)]
            fired += ref is not None
            assert value[name] == want, (text, name)
    assert fired > 50


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # a negation later in the clause is about something else
        ("This is a feature request and not an emergency.", "feature_request"),
        # negated before the mention, or right after it as its predicate: no decision
        ("Not a feature request, really.", "billing"),
        ("Feature request: no.", "billing"),
        ("The feature request is not urgent.", "billing"),
        # a negation more than two words before the mention negates a verb, not it
        ("She cannot log in to her feature request page.", "feature_request"),
        ("Not really a feature request.", "billing"),
    ],
)
def test_enum_negation_is_scoped_to_the_mention(text, want):
    schema = {
        "type": "object",
        "properties": {"category": {"enum": ["billing", "feature_request"]}},
    }
    assert apply_evidence(schema, text, {"category": "billing"})[0] == {"category": want}


CURRENCY = {"type": "object", "properties": {"currency": {"enum": ["EUR", "USD", "GBP", "JPY"]}}}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Offered at £489,950.", "GBP"),
        ("Two drills at 189,00 € each.", "EUR"),
        ("Price: US$ 40.", "USD"),
        ("Price: $40.", "USD"),
        ("Price: A$40, HK$300.", "EUR"),  # other dollars: not USD
        ("£10 or €12.", "EUR"),  # two options mentioned: the model's stays
        ("Total ¥3,000.", "JPY"),
        ("No amount given.", "EUR"),
    ],
)
def test_currency_symbols_mention_their_iso_code_option(text, want):
    assert apply_evidence(CURRENCY, text, {"currency": "EUR"})[0] == {"currency": want}


def test_currency_symbol_two_options_share_mentions_neither():
    schema = {"type": "object", "properties": {"currency": {"enum": ["USD", "JPY", "CNY"]}}}
    assert apply_evidence(schema, "Total ¥3,000.", {"currency": "USD"})[0] == {"currency": "USD"}


DRESS = {
    "type": "object",
    "properties": {
        "dress_code": {"enum": ["casual", "smart casual", "formal", None]},
        "theme": {"enum": ["casual", "formal"]},
    },
}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # the name mentioned only negated, no option mentioned: null (not for the
        # non-nullable theme, whose name is not mentioned)
        ("No dress code, friends welcome.", {"dress_code": None, "theme": "casual"}),
        # an option mentioned: the option rule decides
        ("No dress code. Formal evening.", {"dress_code": "formal", "theme": "formal"}),
        # the name mentioned without a negation: the model's value stays
        ("Dress code: whatever you like.", {"dress_code": "casual", "theme": "casual"}),
        # the model's option is mentioned: it stays
        ("No dress code; casual is fine.", {"dress_code": "casual", "theme": "casual"}),
    ],
)
def test_nullable_enum_whose_name_the_text_denies_is_null(text, want):
    before = {"dress_code": "casual", "theme": "casual"}
    assert apply_evidence(DRESS, text, before)[0] == want


def test_enum_change_that_breaks_the_schema_is_dropped():
    schema = {
        "type": "object",
        "properties": {"kind": {"enum": ["house", "flat"]}, "rooms": {"type": "integer"}},
        "if": {"properties": {"kind": {"const": "house"}}},
        "then": {"properties": {"rooms": {"minimum": 3}}},
    }
    before = {"kind": "flat", "rooms": 2}
    assert apply_evidence(schema, "A lovely house.", before) == (before, [])


NULLABLE = {
    "type": "object",
    "properties": {
        "date": {"type": "string"},
        "rsvp_by": {"type": ["string", "null"]},
        "deadline": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "guests": {"type": ["integer", "null"]},
        "tables": {"type": "integer"},
        "vip": {"type": ["boolean", "null"]},
        "late": {"type": ["boolean", "null"]},
    },
}


def test_a_nullable_field_copying_a_sibling_the_text_never_names_is_null():
    text = "Dinner on 2026-06-13 at eight, four tables."
    before = {"date": "2026-06-13", "rsvp_by": "2026-06-13", "deadline": "2026-06-13",
              "guests": 4, "tables": 4}  # fmt: skip
    value, changed = apply_evidence(NULLABLE, text, before)
    # rsvp_by, deadline and guests are never named and copy a sibling; tables is named
    assert value == {**before, "rsvp_by": None, "deadline": None, "guests": None}
    assert changed == ["rsvp_by", "deadline", "guests"]


@pytest.mark.parametrize(
    ("text", "before"),
    [
        # the field's name is in the text: the model decides
        (
            "Dinner on 2026-06-13; RSVP by then, deadline too.",
            {"date": "2026-06-13", "rsvp_by": "2026-06-13", "deadline": "2026-06-13"},
        ),  # fmt: skip
        # no sibling holds the same value
        ("Dinner on 2026-06-13.", {"date": "2026-06-13", "rsvp_by": "2026-06-01"}),
        # not nullable, or a boolean (true == true is no copied span)
        ("Four of them.", {"tables": 4, "date": "4", "vip": True, "late": True}),
    ],
)
def test_null_rule_does_not_fire(text, before):
    assert apply_evidence(NULLABLE, text, before) == (before, [])


def _words(rng: random.Random) -> str:
    vocab = ["3", "1,250", "4.5", "two", "forty-one", "a dozen", "€12", "-7", "x", "rooms",
             "1 250 000", "3.500", "and", "hundred", "2'400"]  # fmt: skip
    return " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 12)))


def test_numeral_spans_agree_with_numerals():
    rng = random.Random(7)
    for _ in range(300):
        text = _words(rng)
        spans = numeral_spans(text)
        got = {v.normalize() for _, _, vs in spans for v in vs}
        assert got == {v.normalize() for v in numerals(text)}, text
        for start, end, values in spans:  # each span alone reads as the same values
            alone = {v.normalize() for v in numerals(text[start:end])}
            assert {v.normalize() for v in values if v >= 0} <= alone | {Decimal(0)}, text


def test_a_copy_grammar_too_complex_falls_back_to_the_schema(tiny_engine, monkeypatch):
    from structgen.fsm.json_schema.copy import CopyJsonSchema

    def refuse(self, vocab):
        raise GrammarTooComplexError("budget exceeded")

    monkeypatch.setattr(CopyJsonSchema, "compile", refuse)
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}
    res = extract(tiny_engine, schema, "Ann is 3.", return_details=True)
    assert res.copied_fields == ()
    jsonschema.validate(res.value, schema)


def test_extract_applies_the_evidence_by_default(tiny_engine):
    texts = ["Pets allowed, wifi included.", "No pets. No wifi."]
    got = extract(tiny_engine, BOOL, texts)  # the random model's booleans, then the text's
    assert got == [{"pets_allowed": True, "wifi": True}, {"pets_allowed": False, "wifi": False}]
    raw = extract(tiny_engine, BOOL, texts, evidence=False, return_details=True)
    for text, res, want in zip(texts, raw, got):
        value, _ = apply_evidence(BOOL, text, res.value)
        assert value == want  # the pass is exactly apply_evidence on the model's object


BP = {
    "type": "object",
    "properties": {
        "bp": {
            "type": "object",
            "properties": {
                "systolic": {"type": "integer", "minimum": 50, "maximum": 260},
                "diastolic": {"type": "integer", "minimum": 30, "maximum": 160},
                "pulse": {"type": ["integer", "null"]},
            },
            "required": ["systolic", "diastolic"],
        }
    },
    "required": ["bp"],
}


@pytest.mark.parametrize(
    ("text", "want"),
    [("Seen today. BP 142/91, stable.", 91), ("blood pressure 118 over 76. Fine.", 76)],
)
def test_a_number_repeating_its_siblings_numeral_takes_the_next_one(text, want):
    before = {"bp": {"systolic": 142 if "142" in text else 118, "diastolic": 0}}
    before["bp"]["diastolic"] = before["bp"]["systolic"]
    value, changed = apply_evidence(BP, text, before)
    assert value == {"bp": {**before["bp"], "diastolic": want}}
    assert changed == ["bp.diastolic"]


@pytest.mark.parametrize(
    "text",
    [
        "BP 142/142 today.",  # the text writes the value twice: both may be right
        "BP 142. Then 91.",  # the next numeral is in another clause
        "BP 142 was taken again later 91.",  # more than two words between
        "BP 142/12 today.",  # 12 is below diastolic's minimum
        "BP 142.",  # no numeral after it
    ],
)
def test_repeat_rule_does_not_fire(text):
    before = {"bp": {"systolic": 142, "diastolic": 142}}
    assert apply_evidence(BP, text, before) == (before, [])


def test_repeat_rule_leaves_nullable_fields_to_the_null_rule():
    before = {"bp": {"systolic": 142, "diastolic": 91, "pulse": 142}}
    value, changed = apply_evidence(BP, "Pressure 142/91 and 77.", before)
    assert value == {"bp": {"systolic": 142, "diastolic": 91, "pulse": None}}  # null rule
    assert changed == ["bp.pulse"]


def _repeat_reference(text: str, a: int, b: int) -> int:
    """Brute-force reading of the repeat rule for texts of integers and words with ``,``
    and ``.`` clause breaks: the diastolic value the rule gives ``{systolic: a,
    diastolic: b}``.
    """
    if a != b:
        return b
    words = []  # (word, clause number)
    clause = 0
    for t in re.findall(r"[0-9]+|[a-z]+|[.,]", text):
        if t in ".,":
            clause += 1
        else:
            words.append((t, clause))
    places = [k for k, (t, _) in enumerate(words) if t.isdigit() and int(t) == a]
    if len(places) != 1:
        return b
    nxt = next((k for k in range(places[0] + 1, len(words)) if words[k][0].isdigit()), None)
    if nxt is None or words[nxt][1] != words[places[0]][1] or nxt - places[0] - 1 > 2:
        return b
    n = int(words[nxt][0])
    return n if 30 <= n <= 160 and n != a else b


def test_repeat_rule_matches_a_brute_force_reading():
    rng = random.Random(11)
    vocab = ["120", "80", "95", "20", "120/80", "95/20", "over", "bp", "and", "then", ",", "."]
    for _ in range(400):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 9)))
        text = text.replace(" ,", ",").replace(" .", ".")
        if re.search(r"[0-9] [0-9]", text):
            continue  # "120 95" is one numeral with two readings (numeral_spans)
        a = int(rng.choice(["120", "80", "95"]))
        b = a if rng.random() < 0.8 else 100
        before = {"bp": {"systolic": a, "diastolic": b}}
        value, _ = apply_evidence(BP, text, before)
        assert value["bp"]["diastolic"] == _repeat_reference(text, a, b), (text, a, b)


CODES = {
    "type": "object",
    "properties": {
        "ticket_id": {"type": "string", "maxLength": 12},
        "email": {"type": ["string", "null"], "format": "email"},
        "level": {"type": "string", "enum": ["low", "high"]},
        "code": {"type": "string", "pattern": "^[0-9]+$"},
    },
    "required": ["ticket_id"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("Ticket SUP-0932 opened.", {"ticket_id": "0932"}, {"ticket_id": "SUP-0932"}),
        ("Ref (88-17) noted.", {"ticket_id": "17"}, {"ticket_id": "88-17"}),
        (
            "Write to fatima.alsayed@crescent.example today.",
            {"ticket_id": "x", "email": "alsayed@crescent.example"},
            {"ticket_id": "x", "email": "fatima.alsayed@crescent.example"},
        ),
    ],
)
def test_a_string_copied_from_inside_a_chunk_starts_where_the_chunk_starts(text, before, after):
    value, changed = apply_evidence(CODES, text, before)
    assert value == after
    assert changed == [k for k in after if after[k] != before.get(k)]


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("Ticket 0932, see SUP-0932.", {"ticket_id": "0932"}),  # one occurrence starts a chunk
        ("Codes A-17 and B-17.", {"ticket_id": "17"}),  # two different extensions
        ("Ticket VERYLONGPREFIX-0932.", {"ticket_id": "0932"}),  # over maxLength
        ("Case SUP/0932 or it's x.", {"ticket_id": "0932"}),  # "/" joins no chunk
        ("Alert: veryhigh.", {"ticket_id": "Q1", "level": "high"}),  # an enum
        ("Code SUP-0932.", {"ticket_id": "Q1", "code": "0932"}),  # against its pattern
    ],
)
def test_span_start_rule_does_not_fire(text, before):
    assert apply_evidence(CODES, text, before) == (before, [])


def _span_start_reference(text: str, value: str) -> str:
    """Brute force: every occurrence of ``value``; the chunk around it is the longest run
    of letters, digits and ``_-.@#+&`` ending where the occurrence starts, less its
    leading non-alphanumerics.
    """
    news = set()
    for at in [i for i in range(len(text)) if text.startswith(value, i)]:
        best = at
        for s in range(at, -1, -1):
            if all(c.isalnum() or c in "_-.@#+&" for c in text[s:at]):
                best = s
        while best < at and not text[best].isalnum():
            best += 1
        if best == at:
            return value
        news.add(text[best:at] + value)
    return news.pop() if len(news) == 1 and len(next(iter(news))) <= 12 else value


def _span_end_reference(text: str, value: str) -> str:
    """Brute force of the span-end rule: every occurrence of ``value`` neither starts nor
    ends inside a word and goes on with its chunk: the longest run after it that starts
    with one of ``-.@#+&``, ends with a letter, digit or ``_``, and holds only those,
    never two of ``-.@#+&`` in a row; the one extension, within ``maxLength`` (12), else
    ``value``.
    """
    joiners = "-.@#+&"

    def word(c: str) -> bool:
        return c.isalnum() or c == "_"

    news = set()
    for at in [i for i in range(len(text)) if text.startswith(value, i)]:
        end = at + len(value)
        if at > 0 and text[at - 1].isalnum() or end < len(text) and word(text[end]):
            return value
        runs = [
            text[end:stop]
            for stop in range(end + 2, len(text) + 1)
            if text[end] in joiners
            and word(text[stop - 1])
            and all(word(c) or c in joiners for c in text[end:stop])
            and not any(
                a in joiners and b in joiners for a, b in zip(text[end:stop], text[end + 1 : stop])
            )
        ]
        if not runs:
            return value
        news.add(value + max(runs, key=len))
    return news.pop() if len(news) == 1 and len(next(iter(news))) <= 12 else value


def test_span_start_rule_matches_a_brute_force_reading():
    rng = random.Random(5)
    vocab = ["SUP", "-", "0932", "17", ".", "x", " ", " ", "(", "/", "#", "a"]
    for _ in range(400):
        text = "".join(rng.choice(vocab) for _ in range(rng.randint(1, 10)))
        value = rng.choice(["0932", "17", "x", "a17"])
        if value not in text:
            continue
        got, _ = apply_evidence(CODES, text, {"ticket_id": value})
        started = _span_start_reference(text, value)  # then the span-end rule's mirror
        assert got["ticket_id"] == _span_end_reference(text, started), (text, value)


PAY = {
    "type": "object",
    "properties": {
        "salary_min": {"type": "number"},
        "salary_max": {"type": "number", "maximum": 50000},
    },
    "required": ["salary_min"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("Salary €42,000 to €48,000.", {"salary_min": 42, "salary_max": 48},
         {"salary_min": 42000, "salary_max": 48000}),
        ("Pay: 1.800 to 2.100 EUR.", {"salary_min": 1.8, "salary_max": 2.1},
         {"salary_min": 1800, "salary_max": 2100}),
    ],
)  # fmt: skip
def test_a_number_read_at_the_separator_takes_the_whole_reading(text, before, after):
    value, changed = apply_evidence(PAY, text, before)
    assert value == after
    assert changed == [k for k in after if after[k] != before[k]]


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("Pay 1.8 or 1.800 EUR.", {"salary_min": 1.8}),  # 1.8 is also written plainly
        ("Pay 1.85 EUR.", {"salary_min": 1.85}),  # no trailing zero: a real decimal
        ("Up to 60,000.", {"salary_min": 1, "salary_max": 60}),  # over salary_max's maximum
    ],
)
def test_separator_rule_does_not_fire(text, before):
    assert apply_evidence(PAY, text, before) == (before, [])


def test_separator_rule_matches_a_brute_force_reading():
    rng = random.Random(3)
    for _ in range(200):
        head = str(rng.randint(1, 999))
        tail = rng.choice(["000", "500", "050", "250", "125"])
        sep = rng.choice([",", "."])
        text = f"Pay {head}{sep}{tail} a year."
        decimal = Decimal(f"{head}.{tail}")
        value, _ = apply_evidence(PAY, text, {"salary_min": float(decimal)})
        # the decimal reading has trailing zeros exactly when the tail ends in 0
        want = int(head + tail) if tail.endswith("0") else float(decimal)
        assert value["salary_min"] == want, text


NOTE = {
    "type": "object",
    "properties": {
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "duration_minutes": {"type": ["integer", "null"]},
        "follow_up_weeks": {"type": ["integer", "null"], "maximum": 104},
        "guests": {"type": "integer", "minimum": 1},
        "servings": {"type": "integer", "minimum": 1},
        "rating": {"type": "integer", "minimum": 1, "maximum": 5},
    },
    "required": ["age"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("Robert Klein, 58 years old. Visit 2026-02-11.", {"age": 2}, {"age": 58}),
        ("Grace, a forty-six-year-old teacher, 20 minutes away.", {"age": 20}, {"age": 46}),
        ("Seen today: aged 71, no pain; 5 mg.", {"age": 5}, {"age": 71}),
        ("Session 17:45; 50 min; room 3.", {"age": 3, "duration_minutes": 17},
         {"age": 3, "duration_minutes": 50}),
        ("Room for four people from the 12th.", {"age": 9, "guests": 12},
         {"age": 9, "guests": 4}),
        ("Soup. Feeds six people; 1 pot.", {"age": 9, "servings": 1},
         {"age": 9, "servings": 6}),
        ("After 8 months I give it four stars out of 5.", {"age": 9, "rating": 5},
         {"age": 9, "rating": 4}),
    ],
)  # fmt: skip
def test_aliases_are_mentions(text, before, after):
    value, changed = apply_evidence(NOTE, text, before)
    assert value == after
    assert changed == [k for k in after if after[k] != before.get(k)]


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("Maria, 34; the flat is old, 80 m2.", {"age": 34}),  # "old" in another clause
        ("Room 3, 20 min walk; aged well.", {"age": 3}),  # "aged" next to no numeral
        ("Minimum 5, max 9.", {"age": 1, "duration_minutes": None}),  # "min" alone: no alias
    ],
)
def test_age_and_unit_aliases_do_not_fire(text, before):
    value, _ = apply_evidence(NOTE, text, before)
    assert value["age"] == before["age"]
    assert value.get("duration_minutes") == before.get("duration_minutes")


@pytest.mark.parametrize(
    ("sep", "want"),
    [
        (" ", 8),
        ("\n", 8),  # a soft wrap inside a sentence
        (" \n\t", 8),
        ("\n\n", 14),  # a paragraph break ends the clause
        (".\n", 14),
    ],
)
def test_a_line_wrapped_sentence_is_one_clause(sep, want):
    text = f"Seen on the 14th.\nShe comes back in eight{sep}weeks for a review."
    value, _ = apply_evidence(NOTE, text, {"age": 40, "follow_up_weeks": 14})
    assert value["follow_up_weeks"] == want


def test_a_line_break_before_a_capital_ends_the_clause():
    text = "Review in 6\nWeeks: to be planned."  # no negation: the denied rule stays out
    assert apply_evidence(NOTE, text, {"age": 40, "follow_up_weeks": 2})[0]["follow_up_weeks"] == 2


def _unwrapped_reference(text: str) -> str:
    """Brute force: each line break whose nearest non-blank (space, tab) characters are a
    letter or digit before it, on its line, and a lowercase letter after it, on the next
    line, becomes a space.
    """
    out = list(text)
    for i, c in enumerate(text):
        if c != "\n":
            continue
        before = text[:i].rstrip(" \t")
        after = text[i + 1 :].lstrip(" \t")
        if before and after and before[-1].isalnum() and after[0].islower():
            out[i] = " "
    return "".join(out)


def test_unwrapped_matches_a_brute_force_reading():
    from structgen.extraction.evidence import unwrapped

    rng = random.Random(11)
    alphabet = ["a", "B", "7", "\n", "\n", " ", "\t", ".", "é", "É", "_", "ß"]
    for _ in range(1500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        got = unwrapped(text)
        assert got == _unwrapped_reference(text), repr(text)
        assert len(got) == len(text)


LEGS = {
    "type": "object",
    "properties": {
        "home": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "away": {"type": "string"},
        "segments": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "from_airport": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "to_airport": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "note": {"type": "string"},
                },
            },
        },
    },
}


KEPT = [{"from_airport": "FRA", "to_airport": "FRA"}]


@pytest.mark.parametrize(
    ("text", "segments"),
    [
        # written once, the next word its pattern accepts within two words: taken
        (
            "Flight LH 401 Frankfurt FRA → New York JFK, 9 Oct.",
            [{"from_airport": "FRA", "to_airport": "JFK"}],
        ),  # fmt: skip
        ("From FRA to JFK.", [{"from_airport": "FRA", "to_airport": "JFK"}]),
        # not decided (three words between; the next fitting word in another clause):
        # the item keeps FRA twice, which the text writes once, so the item rule
        # (items.trim_items) drops it
        ("From FRA to lovely New York JFK.", []),
        ("From FRA, then JFK.", []),
        # the repeated value written twice: both may be right, the model decides
        ("FRA to FRA, a round trip.", KEPT),
    ],
)
def test_string_repeat_takes_the_next_fitting_word(text, segments):
    value, changed = apply_evidence(LEGS, text, {"segments": KEPT})
    assert value == {"segments": segments}
    assert ("segments[0].to_airport" in changed) == (segments[:1] != KEPT[:1] and segments != [])


def test_string_repeat_needs_a_pattern_and_skips_held_values():
    # no pattern on "away": a repeated free string stays
    before = {"home": "FRA", "away": "FRA"}
    assert apply_evidence(LEGS, "From FRA to JFK.", before) == (before, [])
    # the next word is a sibling's value: the word after it is taken
    before = {"segments": [{"from_airport": "CPH", "to_airport": "CPH", "note": "ARN"}]}
    value, changed = apply_evidence(LEGS, "CPH ARN OSL.", before)
    assert value == {"segments": [{"from_airport": "CPH", "to_airport": "OSL", "note": "ARN"}]}
    assert changed == ["segments[0].to_airport"]


CONTACT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": ["string", "null"], "format": "email"},
        "phone": {"type": "string"},
    },
    "required": ["name", "email", "phone"],
}


@pytest.mark.parametrize(
    "text,value,want",
    [  # denied and absent from the text: null
        ("Alice Wong. No email given.", "alice@x.org", None),
        ("Alice Wong, email not provided, phone 555-0101.", "aw@gmail.com", None),
        # the text writes the value, or mentions the name without a negation: kept
        ("Alice Wong. No email given, use alice@x.org.", "alice@x.org", "alice@x.org"),
        ("Alice Wong, email alice@x.org.", "alice@x.org", "alice@x.org"),
        # unmentioned, so the denied rule does not fire; the address is nowhere in the text,
        # so the invented e-mail rule (test_evidence_general.py) makes it null
        ("Alice Wong, phone 555-0101.", "aw@gmail.com", None),
        # unmentioned and its local part written (an address spelt out): kept
        (
            "Alice Wong (alice.wong at gmail), phone 555-0101.",
            "alice.wong@gmail.com",
            "alice.wong@gmail.com",
        ),
    ],
)
def test_a_nullable_string_the_text_denies_and_never_writes_is_null(text, value, want):
    got, changed = apply_evidence(
        CONTACT, text, {"name": "Alice Wong", "email": value, "phone": "1"}
    )
    assert got["email"] == want
    assert ("email" in changed) == (want is None)


def test_a_denied_string_that_is_not_nullable_is_kept():
    got, changed = apply_evidence(
        CONTACT,
        "Alice Wong. No phone given.",
        {"name": "Alice Wong", "email": None, "phone": "555"},
    )
    assert got["phone"] == "555" and changed == []
