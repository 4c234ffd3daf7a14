"""A copied string field with its own grammar (``format``, ``pattern``, lengths) decided by
enumerating the text's spans (``json_schema.copy.CopyPlan._enumerated``) has exactly the
language of the ``INTERSECT`` of its grammar and the span automaton (the path kept for
texts with too many spans): checked over every substring of the text, the normalised
dates and times and strings absent from the text, against that path and, for patterns
and lengths, against a brute force (``re.fullmatch`` and ``len`` on the span rule);
masks equal to that path's at every step of a few documents on a hand-built vocabulary.
"""

from __future__ import annotations

import json
import random
import re

import jsonschema
import pytest
import torch

import structgen.fsm.json_schema.copy as copy_module
from benchmarks.support import mask_bits
from structgen.fsm import Vocabulary
from structgen.fsm.compiler import compile_spec
from structgen.fsm.dates import dates, times
from structgen.fsm.json_schema.copy import CopyJsonSchema
from structgen.fsm.regex.definitions import INTERSECT
from structgen.fsm.spec import Regex
from tests.extraction._copy_reference import spans

TEXTS = [
    'Mail Zoë "Z" O\'Neil at zoe.oneil@example.com or z_o@mail.example.org; '
    "web https://example.org/a?b=1&c=%20 (C:\\shop\\x\nline). Due 7 March 2026, 2:15 pm.",
    "Ref AB12, ab34 and CD-56; call 555-0100. Ünïcode ÄB99 tab\there.",
    "short",
]
FIELDS = [
    {"format": "email", "maxLength": 80},
    {"format": "email"},
    {"format": "uri"},
    {"format": "date"},
    {"format": "date", "maxLength": 10},
    {"format": "date-time"},
    {"pattern": "^[A-Z]{2}[0-9]+$"},
    {"pattern": "^[A-Za-z]+$", "minLength": 3, "maxLength": 6},
    {"pattern": '^[^"]+$', "maxLength": 12},
    {"maxLength": 10},
    {"minLength": 4, "maxLength": 20},
    {"minLength": 3},
]


def _schema(field: dict) -> dict:
    return {
        "type": "object",
        "properties": {"v": {"type": "string", **field}},
        "required": ["v"],
    }


def _lowered(text: str, field: dict, enumerate_max: int, monkeypatch):
    """The lowering without caches, with ``ENUMERATE_MAX_SPANS`` set (0: the INTERSECT path)."""
    monkeypatch.setattr(copy_module, "ENUMERATE_MAX_SPANS", enumerate_max)
    spec = CopyJsonSchema(_schema(field), copy_from=(text,))
    lowered, copied = spec._convert(None)
    return lowered, copied


def _grammar(lowered, vocab=None):
    return compile_spec(Regex(lowered.pattern, None, lowered.definitions), vocab)


def _doc(value: str) -> str:
    return json.dumps({"v": value}, ensure_ascii=False, separators=(",", ":"))


def _candidates(text: str) -> set[str]:
    every = {text[i:j] for i in range(len(text)) for j in range(i + 1, len(text) + 1)}
    return every | set(dates(text)) | set(times(text)) | {"", "Bakery", "bob@example.com", "ZZ1"}


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: json.dumps(f, sort_keys=True))
@pytest.mark.parametrize("text", TEXTS, ids=["contact", "refs", "short"])
def test_enumerated_language_equals_the_intersection(text, field, monkeypatch) -> None:
    enumerated, copied = _lowered(text, field, 20_000, monkeypatch)
    intersected, copied_before = _lowered(text, field, 0, monkeypatch)
    assert copied == copied_before
    assert INTERSECT not in "".join(enumerated.definitions)
    new, old = _grammar(enumerated), _grammar(intersected)
    text_spans = spans(text)
    norm = set(dates(text)) | set(times(text)) if {"format", "pattern"} & set(field) else set()
    for value in sorted(_candidates(text)):
        doc = _doc(value)
        got = new.matches(doc)
        assert got == old.matches(doc), (value, got)
        if "format" in field or not copied:
            continue  # formats: the INTERSECT path is the reference
        lo, hi = field.get("minLength", 0), field.get("maxLength", len(value))
        fits = lo <= len(value) <= hi
        if "pattern" in field:
            fits = fits and re.fullmatch(field["pattern"], value) is not None
        assert got == (fits and value in text_spans | norm), value


def test_many_candidate_spans_few_accepted_are_enumerated(monkeypatch) -> None:
    text = " ".join(f"w{i}" for i in range(300))  # 300 words: ~180k spans, 300 accepted
    lowered, copied = _lowered(text, {"pattern": "^w[0-9]+$"}, 20_000, monkeypatch)
    assert copied == ("/properties/v",) and INTERSECT not in "".join(lowered.definitions)
    grammar = _grammar(lowered)
    assert grammar.matches(_doc("w17")) and grammar.matches(_doc("w299"))
    assert not grammar.matches(_doc("w300")) and not grammar.matches(_doc("w17 w18"))


def test_too_many_accepted_spans_keep_the_intersection(monkeypatch) -> None:
    text = " ".join(f"w{i}" for i in range(300))  # every run of words: ~45k accepted spans
    field = {"pattern": "^w[0-9]+( w[0-9]+)*$"}
    lowered, copied = _lowered(text, field, 20_000, monkeypatch)
    assert copied == ("/properties/v",) and INTERSECT in "".join(lowered.definitions)
    grammar = _grammar(lowered)
    assert grammar.matches(_doc("w17 w18 w19")) and not grammar.matches(_doc("w300"))
    assert not grammar.matches(_doc("w17 w19"))


def test_too_many_units_read_keep_the_intersection(monkeypatch) -> None:
    text = " ".join(f"w{i}" for i in range(300))
    monkeypatch.setattr(copy_module, "ENUMERATE_MAX_STEPS", 1_000)  # few spans, long runs
    lowered, copied = _lowered(text, {"pattern": "^w[0-9]+( w[0-9]+)* w7$"}, 20_000, monkeypatch)
    assert copied == ("/properties/v",) and INTERSECT in "".join(lowered.definitions)
    assert _grammar(lowered).matches(_doc("w5 w6 w7"))


_PHRASES = (
    "Dr. Aiko Tanaka",
    "Zoë O'Neil",
    "Maria Müller",
    "ÄB99",
    "AB12",
    "CD-56",
    "x7",
    "call",
    "555-0100",
    "+1 (555) 0134",
    "on 2026-03-07",
    "2024-02-29",
    "2026-02-30",
    "2026-13-01",
    "7 March 2026",
    "12/03/2025",
    "at 2:15 pm",
    "zoe.oneil@example.com",
    "https://example.org/a?b=1",
    "C:\\shop",
    '"quoted"',
    "tab\there",
    "line\n",
    "the",
    "a",
    "of",
    "and",
    "metformin 500 mg",
    "lisinopril 10mg",
    "BP 142/91",
    "follow-up in 6 weeks",
    ";",
    ",",
    ".",
)


def _long_text(seed: int, size: int = 1_800) -> str:
    rng = random.Random(seed)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(_PHRASES))
    return "".join(w + rng.choice("  \n,") for w in words)


def _brute_force(text: str, field: dict) -> tuple[set[str], set[str]]:
    """``(spans, normalised)``: the field's values among every substring of ``text`` on the
    span rule (written out here), by ``re.search`` of the anchored pattern / jsonschema's
    format checker and ``len``; and the normalised dates and times a format or pattern
    field also takes."""
    checker = jsonschema.FormatChecker()
    lo, hi = field.get("minLength", 0), field.get("maxLength", len(text))
    starts = [k for k in range(len(text) + 1) if k in (0, len(text)) or not (
        text[k - 1].isalnum() and text[k].isalnum())]  # fmt: skip

    def fits(value: str) -> bool:
        if not lo <= len(value) <= hi:
            return False
        if "pattern" in field and re.search(field["pattern"], value) is None:
            return False
        return "format" not in field or checker.conforms(value, field["format"])

    out = set()
    for a, i in enumerate(starts):
        if i == len(text) or text[i].isspace():
            continue
        for j in starts[a + 1 :]:
            if not text[j - 1].isspace() and fits(text[i:j]):
                out.add(text[i:j])
    extra = set(dates(text)) | set(times(text)) if {"format", "pattern"} & set(field) else set()
    return out, {v for v in extra if fits(v)}


LONG_FIELDS = [
    {"format": "date"},
    {"pattern": "^[A-Z][a-z]+ [A-Z][a-z]+$"},
    {"pattern": "^[0-9]{3}-[0-9]{4}$"},
    {"pattern": "^[A-Za-z0-9 ]+$", "maxLength": 30},
    {"pattern": "^[^,;]*[0-9]$", "minLength": 8, "maxLength": 60},
    {"pattern": "^[A-Za-z]+( [A-Za-z]+)*$"},
    {"pattern": "^[^;]+$", "maxLength": 90},
    {"maxLength": 25},
]


@pytest.mark.parametrize("field", LONG_FIELDS, ids=lambda f: json.dumps(f, sort_keys=True))
@pytest.mark.parametrize("seed", [0, 1])
def test_long_text_language_equals_brute_force(seed, field, monkeypatch) -> None:
    text = _long_text(seed)
    got: list[set[str]] = []
    spans_of = copy_module._Acceptor.spans

    def recorded(self, *args):
        out = spans_of(self, *args)
        got.append(None if out is None else {json.loads('"' + "".join(s) + '"') for s in out})
        return out

    monkeypatch.setattr(copy_module._Acceptor, "spans", recorded)
    copy_module._ACCEPTORS.clear()
    lowered, copied = _lowered(text, field, 20_000, monkeypatch)
    spans_expected, normalised = _brute_force(text, field)
    assert INTERSECT not in "".join(lowered.definitions) and len(got) == 1
    assert got[0] == spans_expected
    expected = spans_expected | normalised
    if not expected:
        assert copied == ()
        return
    assert copied == ("/properties/v",)
    grammar = _grammar(lowered)
    rng = random.Random(seed)
    sample = rng.sample(sorted(expected), min(len(expected), 150))
    assert all(grammar.matches(_doc(v)) for v in sample)
    others = {text[i : i + n] for i in rng.sample(range(len(text)), 150) for n in (1, 3, 10, 24)}
    for value in sorted(others - expected):
        assert not grammar.matches(_doc(value)), value


def test_nothing_accepted_keeps_the_field_grammar(monkeypatch) -> None:
    lowered, copied = _lowered("no digits here", {"pattern": "^[0-9]{3}$"}, 20_000, monkeypatch)
    assert copied == ()
    assert _grammar(lowered).matches(_doc("123"))


def _bitmask(matcher, n: int) -> list[bool]:
    buf = torch.zeros((1, (n + 31) // 32), dtype=torch.int32)
    matcher.fill_bitmask(buf, 0)
    return mask_bits(buf[0], n).tolist()


@pytest.mark.parametrize(
    "field,values",
    [
        ({"format": "email", "maxLength": 80}, ["zoe.oneil@example.com", "o@mail.example.org"]),
        ({"pattern": "^[A-Z]{2}[0-9]+$"}, ["AB12"]),
        ({"maxLength": 10}, ['"Z" O\'Neil', "2:15 pm"]),
        ({"format": "date"}, ["2026-03-07"]),
    ],
)
def test_masks_equal_the_intersection_path(field, values, monkeypatch) -> None:
    text = TEXTS[0] + " " + TEXTS[1]
    pieces = sorted({u for t in (text, *values) for u in re.findall(r"\w+|\W", t)})
    tokens = [b"<eos>"] + [bytes([b]) for b in range(32, 127)] + [b"\\n", b'":"', b'{"v":"']
    tokens += [p.encode() for p in pieces if len(p.encode()) > 1]
    vocab = Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0])
    new = _grammar(_lowered(text, field, 20_000, monkeypatch)[0], vocab)
    old = _grammar(_lowered(text, field, 0, monkeypatch)[0], vocab)
    by_bytes = {t: i for i, t in enumerate(tokens)}
    checked = 0
    for value in values:
        m_new, m_old = new.matcher(), old.matcher()
        data = _doc(value).encode()
        while data:  # greedy longest-token tokenisation
            tok = max((t for t in by_bytes if t and data.startswith(t)), key=len)
            assert _bitmask(m_new, len(tokens)) == _bitmask(m_old, len(tokens)), data
            checked += 1
            assert m_new.advance(by_bytes[tok]) and m_old.advance(by_bytes[tok])
            data = data[len(tok) :]
        assert _bitmask(m_new, len(tokens)) == _bitmask(m_old, len(tokens))
    assert checked >= 3


@pytest.mark.parametrize(
    "field",
    [{"format": "no-such-format", "maxLength": 12}, {"pattern": "^(?=A)[A-Z0-9]+$"}],
    ids=["unknown-format", "lookahead-pattern"],
)
def test_warnings_equal_the_intersection_path_when_cached(field, monkeypatch) -> None:
    text = TEXTS[1]
    spec = CopyJsonSchema(_schema(field), copy_from=(text,), strict=False)
    monkeypatch.setattr(copy_module, "ENUMERATE_MAX_SPANS", 0)
    expected = spec._convert(None)[0].warnings
    assert expected
    monkeypatch.setattr(copy_module, "ENUMERATE_MAX_SPANS", 20_000)
    for _ in range(2):  # the second conversion replays the cached acceptor's warnings
        assert spec._convert(None)[0].warnings == expected


@pytest.mark.parametrize("field", [{"maxLength": 10}, {"format": "email", "maxLength": 80}])
def test_fields_of_one_grammar_share_the_enumeration(field, monkeypatch) -> None:
    """Two fields with the same keywords (different pointers, as a contact card's name and
    company) are enumerated once per document; each keeps the INTERSECT path's language.
    """
    text = TEXTS[0]
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", **field}, "b": {"type": "string", **field}},
        "required": ["a", "b"],
    }
    calls = []
    real = copy_module._Acceptor.spans
    monkeypatch.setattr(
        copy_module._Acceptor, "spans", lambda self, *a: calls.append(1) or real(self, *a)
    )
    monkeypatch.setattr(copy_module, "ENUMERATE_MAX_SPANS", 20_000)
    enumerated, copied = CopyJsonSchema(schema, copy_from=(text,))._convert(None)
    assert len(calls) == 1 and copied == ("/properties/a", "/properties/b")
    monkeypatch.setattr(copy_module, "ENUMERATE_MAX_SPANS", 0)
    intersected, copied_before = CopyJsonSchema(schema, copy_from=(text,))._convert(None)
    assert copied == copied_before
    new, old = _grammar(enumerated), _grammar(intersected)
    values = sorted(_candidates(text))

    def doc(a: str, b: str) -> str:
        return json.dumps({"a": a, "b": b}, ensure_ascii=False, separators=(",", ":"))

    accepted = [v for v in values if old.matches(doc(v, v))]
    assert accepted  # the reference accepts some span: the check below can fail
    for value in values:
        for a, b in ((value, value), (value, accepted[0]), (accepted[0], value)):
            assert new.matches(doc(a, b)) == old.matches(doc(a, b)), (a, b)


def test_a_nullable_field_after_other_definitions_shares_the_enumeration(monkeypatch) -> None:
    """A nullable field with a sibling's keywords, converted after an e-mail field appended
    its bounded body's definitions (a contact card's ``job_title`` after ``full_name`` and
    ``email``), shares the sibling's acceptor and enumeration (``_grammar_key``: the
    definitions its grammar refers to, not all so far); the lowering is the one with an
    acceptor per field (the key of every definition so far)."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 10},
            "m": {"type": "string", "format": "email", "maxLength": 80},
            "b": {"type": ["string", "null"], "maxLength": 10},
        },
        "required": ["a", "m", "b"],
    }
    calls = []
    real = copy_module._Acceptor.spans
    monkeypatch.setattr(
        copy_module._Acceptor, "spans", lambda self, *a: calls.append(1) or real(self, *a)
    )
    monkeypatch.setattr(copy_module, "ENUMERATE_MAX_SPANS", 20_000)
    copy_module._ACCEPTORS.clear()  # no acceptor of an earlier test
    copy_module._ACCEPTORS_BY_GRAMMAR.clear()
    shared = CopyJsonSchema(schema, copy_from=(TEXTS[0],))._convert(None)
    assert len(calls) == 2  # a and b once, m once
    calls.clear()
    copy_module._ACCEPTORS.clear()
    copy_module._ACCEPTORS_BY_GRAMMAR.clear()
    monkeypatch.setattr(copy_module, "_grammar_key", lambda base, defs: (base, tuple(defs)))
    apart = CopyJsonSchema(schema, copy_from=(TEXTS[0],))._convert(None)
    assert len(calls) == 3
    assert shared[1] == apart[1] == ("/properties/a", "/properties/m", "/properties/b")
    assert (shared[0].pattern, shared[0].definitions) == (apart[0].pattern, apart[0].definitions)


def _trie_text_reference(words: list) -> str:
    """The words' trie as nested dicts, each node written after its children: ``(?:a|b)``
    by sorted piece (one branch bare), ``(?:...)?`` where a word ends."""
    from structgen.fsm.regex.escape import escape_literal

    root: dict = {}
    for word in words:
        node = root
        for piece in word:
            node = node.setdefault(piece, {})
        node[""] = None

    def write(node: dict) -> str:
        alts = [escape_literal(p) + write(c) for p, c in sorted(node.items()) if c is not None]
        if "" in node:
            return "(?:" + "|".join(alts) + ")?" if alts else ""
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return write(root)


def test_trie_regex_is_the_words_trie() -> None:
    """``_trie_regex`` writes the text of the words' trie (reference: nested dicts) and
    matches exactly the words (``re.fullmatch``), for words in any order, duplicated, and
    as chains of spans (each word extending the one before, as spans are enumerated)."""
    rng = random.Random(11)
    pieces = ["a", "b", "ab", " ", ".", "(", "é", "日本", "\\", "|", "?", "x" * 3]
    for case in range(1500):
        words = []
        for _ in range(rng.randint(1, 10)):
            chain = [rng.choice(pieces) for _ in range(rng.randint(1, 7))]
            ends = sorted(rng.sample(range(1, len(chain) + 1), rng.randint(1, len(chain))))
            words += [tuple(chain[:n]) for n in ends]  # a chain, shortest first
        if case % 3 == 1:
            rng.shuffle(words)
        if case % 3 == 2:
            words += rng.sample(words, min(3, len(words)))
        text = copy_module._trie_regex(words)
        assert text == _trie_text_reference(words), words
        written = {"".join(w) for w in words}
        probe = list(written) + ["".join(rng.choice(pieces) for _ in range(3)) for _ in range(5)]
        probe += [w[:-1] for w in written] + [w + "a" for w in written]
        for s in probe:
            assert (re.fullmatch(text, s) is not None) == (s in written), (words, s)


@pytest.mark.parametrize("field", LONG_FIELDS, ids=lambda f: json.dumps(f, sort_keys=True))
def test_spans_with_unit_steps_kept_across_texts_equal_brute_force(field, monkeypatch) -> None:
    """One acceptor reads several texts in turn, keeping its unit steps (term, unit) ->
    (term, may end) from the texts before: each text's accepted spans are still the brute
    force's (``_brute_force``), and the last text read fewer units afresh than a new
    acceptor does."""
    got, reads = [], [0]
    spans_of, read = copy_module._Acceptor.spans, copy_module._Acceptor._read

    def recorded(self, *args):
        out = spans_of(self, *args)
        got.append((id(self), {json.loads('"' + "".join(s) + '"') for s in out}))
        return out

    def counted(self, t, data):
        reads[0] += 1
        return read(self, t, data)

    monkeypatch.setattr(copy_module._Acceptor, "spans", recorded)
    monkeypatch.setattr(copy_module._Acceptor, "_read", counted)
    copy_module._ACCEPTORS.clear()
    copy_module._ACCEPTORS_BY_GRAMMAR.clear()
    texts = [_long_text(seed, 600) for seed in (5, 6, 7)] + TEXTS[:2]
    for text in texts:
        reads[0] = 0
        _lowered(text, field, 20_000, monkeypatch)
    warm = reads[0]
    assert len({a for a, _ in got}) == 1 and len(got) == len(texts)  # one acceptor
    for text, (_, accepted) in zip(texts, got):
        assert accepted == _brute_force(text, field)[0], text[:40]
    copy_module._ACCEPTORS.clear()
    copy_module._ACCEPTORS_BY_GRAMMAR.clear()
    reads[0] = 0
    _lowered(texts[-1], field, 20_000, monkeypatch)
    assert got[-1][1] == got[-2][1] and warm < reads[0]
