"""The evidence pass's range, name-run and sibling-cut rules (``structgen.extraction.evidence``):
hand-checked cases, and the name-run rule against a brute-force reading of the words.
"""

from __future__ import annotations

import random

import pytest

from structgen.extraction.evidence import apply_evidence


def _assert_changes(schema: dict, text: str, before: dict, after: dict) -> None:
    """The pass turns ``before`` into ``after`` and names exactly the fields it changed."""
    value, changed = apply_evidence(schema, text, before)
    assert value == after
    assert sorted(changed) == sorted(k for k in after if after[k] != before.get(k))


JOB = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "company": {"type": "string"},
        "salary_min": {"type": ["integer", "null"]},
        "salary_max": {"type": ["integer", "null"]},
        "years": {"type": ["integer", "null"]},
    },
    "required": ["title"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        (  # the model read the first end as the experience, left the top out
            "Salary €42,000 to €48,000 a year. At least 3 years.",
            {"title": "Clerk", "salary_min": 3, "salary_max": 48000},
            {"title": "Clerk", "salary_min": 42000, "salary_max": 48000},
        ),
        (  # "between ... and", a line break before the second end
            "A gross salary between €65,000 and\n€80,000 depending on experience.",
            {"title": "Clerk", "salary_min": 65000, "salary_max": None},
            {"title": "Clerk", "salary_min": 65000, "salary_max": 80000},
        ),
        (
            "Pay: 15 - 18 per hour.",
            {"title": "Clerk", "salary_min": 18, "salary_max": 18},
            {"title": "Clerk", "salary_min": 15, "salary_max": 18},
        ),
        (  # of two ranges, the one in the clause naming the salary
            "Forecasts one to two days ahead; salary 50 to 60 per hour.",
            {"title": "Clerk", "salary_min": 1, "salary_max": 2},
            {"title": "Clerk", "salary_min": 50, "salary_max": 60},
        ),
    ],
)
def test_a_min_max_pair_takes_the_range_the_text_writes(text, before, after):
    _assert_changes(JOB, text, before, after)


PAY = {
    "type": "object",
    "properties": {"pay_min": {"type": "integer"}, "pay_max": {"type": "integer"}},
    "required": ["pay_min", "pay_max"],
}


@pytest.mark.parametrize(
    "text",
    [
        "Offered 42,000 and 48,000.",  # "and" without "between"
        "Offered 48,000 to 42,000.",  # not rising
        "Offered 10 to 20 or 30 to 40.",  # two ranges, the name mentioned nowhere
        "Offered 42,000, then 48,000.",  # not a joiner
    ],
)
def test_range_rule_does_not_fire(text):
    before = {"pay_min": 1, "pay_max": 2}
    assert apply_evidence(PAY, text, before) == (before, [])


def test_a_range_end_is_not_a_plain_fields_value():
    # "between 128 and 136 systolic": neither end is the reading, the model's value stays
    schema = {
        "type": "object",
        "properties": {"systolic": {"type": "integer"}},
        "required": ["systolic"],
    }
    text = "Readings between 128 and 136 systolic. Today it was 134/84."
    assert apply_evidence(schema, text, {"systolic": 134}) == ({"systolic": 134}, [])
    # a plain mention still decides
    assert apply_evidence(schema, "It was 131 systolic.", {"systolic": 134}) == (
        {"systolic": 131},
        ["systolic"],
    )


EVENT = {
    "type": "object",
    "properties": {
        "event_name": {"type": "string"},
        "venue": {"type": "string"},
        "date": {"type": "string", "format": "date"},
        "kind": {"enum": ["party", "contract", "other"]},
        "city": {"type": ["string", "null"]},
        "email": {"type": ["string", "null"]},
        "code": {"type": "string", "pattern": "^[A-Z]+$"},
    },
    "required": ["event_name"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        (  # the venue starts late, the name runs on into it and the date
            "The family invites you to the wedding reception at Hotel Sakura on 2026-05-09.",
            {
                "event_name": "the wedding reception at Hotel Sakura on 2026-05-09",
                "venue": "Sakura",
                "date": "2026-05-09",
            },
            {"event_name": "the wedding reception", "venue": "Hotel Sakura", "date": "2026-05-09"},
        ),
        (  # a name cut short at its second word
            "Northwind Logistics is hiring.",
            {"event_name": "Northwind"},
            {"event_name": "Northwind Logistics"},
        ),
        (  # across a sentence end into a sibling's value
            "Quantix Labs, Sofia. elena@quantix.example, +359 2 555",
            {
                "event_name": "Quantix Labs",
                "city": "Sofia. elena@quantix.example",
                "email": "elena@quantix.example",
            },
            {"event_name": "Quantix Labs", "city": "Sofia", "email": "elena@quantix.example"},
        ),
        (  # the sibling's clause goes with it
            "Ticket for Dmitri Volkov, booking code LMRT. Flight LH 401.",
            {"event_name": "Dmitri Volkov, booking code LMRT", "code": "LMRT"},
            {"event_name": "Dmitri Volkov", "code": "LMRT"},
        ),
    ],
)
def test_name_runs_and_sibling_cuts(text, before, after):
    _assert_changes(EVENT, text, before, after)


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("Call Hannah Wright today.", {"event_name": "Hannah Wright"}),  # sentence start
        ("Ask for Hannah Wright Monday.", {"event_name": "Hannah Wright"}),  # a day's name
        ("Vendor: Highland Print Co. Three boxes.", {"event_name": "Highland Print Co."}),
        ("Agent: Lukas Frei, 061.", {"event_name": "Lukas Frei"}),  # a label, not a name
        ("Trip to Paris Orly and Paris.", {"event_name": "Paris"}),  # two neighbourhoods
        ("Dinner at The Ivy tonight.", {"event_name": "Ivy"}),  # "The": a function word
        (  # the added word is a sibling's value
            "Meet at Gala Grand Hall tonight.",
            {"event_name": "Grand Hall", "venue": "Gala"},
        ),
        (  # an option is not a span: "contract" is the enum's
            "Remote contract role.",
            {"event_name": "Remote contract role", "kind": "contract"},
        ),
        (  # a sibling at the value's start: the container may be right
            "Grand Hall, City Museum.",
            {"event_name": "x", "venue": "Grand Hall, City Museum", "city": "Grand Hall"},
        ),
    ],
)
def test_name_run_and_sibling_cut_do_not_fire(text, before):
    assert apply_evidence(EVENT, text, before) == (before, [])


_FUNCTION = {"the", "at", "on", "her"}


def _run_reference(words: list[str], value_at: int, value_len: int) -> str:
    """Brute force over a space-joined word list: extend left over capitalised words with
    a lowercase letter that are not function words, not the first word; then right the
    same way while the value's last word is such a word too (at most 3 each side).
    """

    def name_word(w: str) -> bool:
        return w[:1].isupper() and any(c.islower() for c in w) and w.lower() not in _FUNCTION

    lo, hi = value_at, value_at + value_len
    for _ in range(3):
        if lo - 1 >= 1 and name_word(words[lo - 1]):
            lo -= 1
    for _ in range(3):
        if hi < len(words) and name_word(words[hi - 1]) and name_word(words[hi]):
            hi += 1
    return " ".join(words[lo:hi])


def test_name_run_matches_a_brute_force_reading():
    rng = random.Random(23)
    vocab = ["Hotel", "Grand", "Sakura", "at", "on", "the", "The", "Her", "lamp", "Nimbus"]
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    checked = 0
    for _ in range(600):
        words = [rng.choice(vocab) for _ in range(rng.randint(2, 9))]
        value_at = rng.randrange(len(words))
        value_len = rng.randint(1, min(2, len(words) - value_at))
        value = " ".join(words[value_at : value_at + value_len])
        text = " ".join(words)
        if text.count(value) != 1 or not value[0].isupper() or value.split()[0] in ("The", "Her"):
            continue  # the reference reads one place; the rule starts only at a name word
        # a word repeated inside the found run would count as a second occurrence
        got, _ = apply_evidence(schema, text, {"name": value})
        assert got["name"] == _run_reference(words, value_at, value_len), (text, value)
        checked += 1
    assert checked > 100


BAGS = {
    "type": "object",
    "properties": {
        "checked_bags": {"type": "integer", "minimum": 0, "maximum": 6},
        "pets": {"type": ["integer", "null"]},
        "seats": {"type": "integer", "minimum": 1},
    },
    "required": ["checked_bags"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        ("Premium economy, no checked baggage.", {"checked_bags": 5}, {"checked_bags": 0}),
        # nullable: the denied-number rule makes it null, not 0
        (
            "No pets. No checked bags.",
            {"checked_bags": 2, "pets": 1},
            {"checked_bags": 0, "pets": None},
        ),
    ],
)
def test_a_count_the_text_denies_is_zero(text, before, after):
    _assert_changes(BAGS, text, before, after)


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("Two checked bags, no fees.", {"checked_bags": 2}),  # the numeral decides
        ("Checked bags: see below. No fees.", {"checked_bags": 1}),  # one mention not negated
        ("No seats left.", {"checked_bags": 1, "seats": 2}),  # minimum 1: 0 is not a count
    ],
)
def test_denied_count_does_not_fire(text, before):
    assert apply_evidence(BAGS, text, before) == (before, [])


PERSON = {
    "type": "object",
    "properties": {
        "full_name": {"type": "string"},
        "provider": {"type": "string"},
        "company": {"type": "string"},
        "job_title": {"type": ["string", "null"]},
        "city": {"type": ["string", "null"]},
    },
    "required": ["full_name"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        (
            "E-ticket for Mr. Dmitri Volkov, booking code LM55RT.",
            {"full_name": "E-ticket for Mr. Dmitri Volkov"},
            {"full_name": "Dmitri Volkov"},
        ),
        ("Mrs Ana Souza, 71.", {"full_name": "Mrs Ana Souza"}, {"full_name": "Ana Souza"}),
        (
            "Name: Siobhán O'Connor | Company: Tidewater | Title: Data Engineer | City: Cork",
            {"full_name": "Siobhán O'Connor", "company": "Tidewater", "city": "Cork"},
            {
                "full_name": "Siobhán O'Connor",
                "company": "Tidewater",
                "city": "Cork",
                "job_title": "Data Engineer",
            },
        ),
        (
            "Job title: Office Manager. Call us.",
            {"full_name": "Fatima", "job_title": None},
            {"full_name": "Fatima", "job_title": "Office Manager"},
        ),
    ],
)
def test_honorifics_and_labels(text, before, after):
    _assert_changes(PERSON, text, before, after)


@pytest.mark.parametrize(
    ("text", "before"),
    [
        ("With Dr. Sato today.", {"full_name": "x", "provider": "Dr. Sato"}),  # "Dr." stays
        ("Mr. Bean's cafe.", {"full_name": "Mr. Bean's cafe"}),  # no name ends the value
        # the model's value stays; a label naming two fields (``title``) decides nothing
        (
            "Title: Data Engineer | City: Cork",
            {"full_name": "x", "job_title": "Engineer", "city": "Cork"},
        ),
        ("Job title: Boss: Chief", {"full_name": "x"}),  # no separator after the value
        ("Company: Tidewater", {"full_name": "x", "city": None, "company": "Tidewater"}),
        ("City: Tidewater", {"full_name": "x", "company": "Tidewater"}),  # a sibling's value
    ],
)
def test_honorific_and_label_do_not_fire(text, before):
    assert apply_evidence(PERSON, text, before) == (before, [])


def test_a_label_naming_two_fields_decides_neither():
    schema = {
        "type": "object",
        "properties": {
            "job_title": {"type": ["string", "null"]},
            "page_title": {"type": ["string", "null"]},
        },
    }
    assert apply_evidence(schema, "Title: Boss", {}) == ({}, [])
    assert apply_evidence(schema, "Job title: Boss", {}) == ({"job_title": "Boss"}, ["job_title"])


PLACE = {
    "type": "object",
    "properties": {
        "location": {"type": ["string", "null"]},
        "company": {"type": "string"},
        "city": {"type": "string"},
    },
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        (
            "It lasts 30 minutes at Bright Smile Dental, Elm Street.",
            {"location": "Elm Street"},
            {"location": "Bright Smile Dental, Elm Street"},
        ),
        (
            "Clinic: Paws & Claws, Brno.",
            {"location": "Brno"},
            {"location": "Paws & Claws, Brno"},
        ),
        (
            "Doors open at 19:00, Grand Hall, City Museum",
            {"location": "Grand Hall"},
            {"location": "Grand Hall, City Museum"},
        ),
    ],
)
def test_a_place_takes_the_whole_place_list(text, before, after):
    _assert_changes(PLACE, text, before, after)


@pytest.mark.parametrize(
    ("text", "before"),
    [
        # a part is a sibling's value
        (
            "Wanted at Greenleaf Pharmacy, Dublin.",
            {"location": "Dublin", "company": "Greenleaf Pharmacy"},
        ),
        ("We met in Lyon, France and Spain.", {"location": "Lyon"}),  # the sentence goes on
        ("Lyon, France. Paris.", {"city": "Lyon"}),  # ``city`` is not a place field's name
        ("Grand Hall, City Museum.", {"location": "City Museum"}),  # a sentence's first word
        ("In Lyon, France. Later Lyon.", {"location": "Lyon"}),  # written alone elsewhere
    ],
)
def test_place_list_does_not_fire(text, before):
    assert apply_evidence(PLACE, text, before) == (before, [])


RECIPE = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "code": {"type": "string"},
        "servings": {"type": "integer"},
    },
}


def test_a_string_running_into_a_sibling_numbers_numeral_is_cut():
    text = "Quick garlic prawns for two: twenty minutes, easy."
    before = {"title": "Quick garlic prawns for two", "servings": 2}
    assert apply_evidence(RECIPE, text, before) == (
        {"title": "Quick garlic prawns", "servings": 2},
        ["title"],
    )
    # a numeral inside a chunk is an identifier's part; another number is no sibling's
    for title in ("Case 88-17 review", "Trailblazer 40L backpack", "Meetup 12 at noon"):
        before = {"title": title, "servings": 17}
        assert apply_evidence(RECIPE, title + ".", before) == (before, [])


CONTACT = {
    "type": "object",
    "properties": {
        "full_name": {"type": "string"},
        "company": {"type": "string"},
        "job_title": {"type": ["string", "null"]},
        "city": {"type": ["string", "null"]},
    },
    "required": ["full_name", "company"],
}


@pytest.mark.parametrize(
    ("text", "before", "after"),
    [
        (  # "Name, Role at Company"; the model left the role null
            "Dr. Elena Petrova, Head of Research at Quantix Labs, Sofia. e@q.example",
            {"full_name": "Elena Petrova", "company": "Quantix Labs", "job_title": None},
            {
                "full_name": "Elena Petrova",
                "company": "Quantix Labs",
                "job_title": "Head of Research",
            },
        ),
        (  # "Name, Role, Company"; the model left the role out
            "Signature: — Fatima Al-Sayed, Office Manager, Crescent Dental Clinic · phone 4567",
            {"full_name": "Fatima Al-Sayed", "company": "Crescent Dental Clinic"},
            {
                "full_name": "Fatima Al-Sayed",
                "company": "Crescent Dental Clinic",
                "job_title": "Office Manager",
            },
        ),
        (  # the company wrong: the role is still the phrase after the name
            "Ravi Iyer, Chief Financial Officer at Ganga Steel, Pune.",
            {"full_name": "Ravi Iyer", "company": "Pune", "job_title": None},
            {"full_name": "Ravi Iyer", "company": "Pune", "job_title": "Chief Financial Officer"},
        ),
    ],
)
def test_a_role_left_null_takes_the_appositive_after_the_name(text, before, after):
    _assert_changes(CONTACT, text, before, after)


@pytest.mark.parametrize(
    ("text", "before"),
    [
        # no comma after the name
        (
            "Met Carlos Mendoza at the trade fair. He runs sales for Verde Foods.",
            {"full_name": "Carlos Mendoza", "company": "Verde Foods", "job_title": None},
        ),
        # a lowercase phrase after the name is no role
        (
            "Please add my new details: Wei Zhang, now at Lantern Robotics in Shenzhen.",
            {"full_name": "Wei Zhang", "company": "Lantern Robotics", "job_title": None},
        ),
        # the phrase after the name is the company's value ("Name, Company, City")
        (
            "Ana Ruiz, Verde Foods, Madrid.",
            {"full_name": "Ana Ruiz", "company": "Verde Foods", "job_title": None},
        ),
        # the role is already written
        (
            "Ana Ruiz, Head of Sales at Verde Foods, Madrid.",
            {"full_name": "Ana Ruiz", "company": "Verde Foods", "job_title": "Sales Lead"},
        ),
        # the phrase ends the sentence: no " at " or ", " after it
        (
            "Ana Ruiz, Head of Sales.",
            {"full_name": "Ana Ruiz", "company": "Verde Foods", "job_title": None},
        ),
        # two different phrases after the name's two mentions
        (
            "Ana Ruiz, Head of Sales at Verde Foods. Later: Ana Ruiz, Chief Executive, Agro SA.",
            {"full_name": "Ana Ruiz", "company": "Verde Foods", "job_title": None},
        ),
    ],
)
def test_appositive_role_does_not_fire(text, before):
    value, changed = apply_evidence(CONTACT, text, before)
    assert "job_title" not in changed and value.get("job_title") == before.get("job_title")


def test_appositive_role_needs_a_field_named_for_a_role():
    schema = {
        "type": "object",
        "properties": {"full_name": {"type": "string"}, "city": {"type": ["string", "null"]}},
        "required": ["full_name"],
    }
    value, changed = apply_evidence(schema, "Ana Ruiz, Head of Sales at Verde Foods.", {
        "full_name": "Ana Ruiz", "city": None})  # fmt: skip
    assert value["city"] is None and "city" not in changed
