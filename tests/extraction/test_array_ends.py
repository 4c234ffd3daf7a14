"""Where an array of copied values ends (``extraction.array_ends``): the arrays found in
an output (against ``json.loads``), the first repeat (against a brute-force reading), the
two texts scored at a boundary, the decision, the scores (against transformers'
log-probabilities on the same tiny Llama), and the continuation from a cut (against
greedy's own output, which a continuation from its own prefix must write again, within
the token budget).
"""

from __future__ import annotations

import dataclasses
import json
import random

import jsonschema
import pytest
import torch

from structgen import SamplingParams
from structgen.extraction import extract, extraction_messages
from structgen.extraction.array_ends import (
    CopiedArray,
    boundary_scores,
    boundary_texts,
    choose_array_ends,
    continuation,
    copied_arrays,
    cut_text,
    first_cut,
    repeat_index,
)
from structgen.extraction.copy import copy_constraint
from structgen.extraction.items import trim_items

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "skills": {"type": "array", "items": {"type": "string"}},
        "team": {
            "type": "object",
            "properties": {"sizes": {"type": "array", "items": {"type": "integer"}, "minItems": 2}},
        },
        "addresses": {
            "type": "array",
            "items": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
    "required": ["name", "skills"],
}
RAW = (
    '{"name":"Wei Zhang","skills":["Python","Rust","Lyon","Berlin","Lyon"],'
    '"team":{"sizes":[3, 4,5]},"addresses":[{"city":"Lyon"}]}'
)
COPIED = ("name", "skills[]", "team.sizes[]", "addresses[].city")


def test_copied_arrays_are_the_arrays_of_copied_scalars():
    arrays = copied_arrays(SCHEMA, RAW, COPIED)
    value = json.loads(RAW)
    assert [a.keys for a in arrays] == [("skills",), ("team", "sizes"), ("addresses",)]
    assert [a.scalars for a in arrays] == [True, True, False]
    for arr in arrays:
        node = value
        for k in arr.keys:
            node = node[k]
        assert list(arr.values) == node
        assert json.loads(RAW[arr.start : arr.end]) == node
        assert [json.loads(RAW[s:e]) for s, e in arr.items] == node
    assert [a.min_items for a in arrays] == [0, 2, 0]
    only = copied_arrays(SCHEMA, RAW, ("name", "addresses[].city"))
    assert [a.keys for a in only] == [("addresses",)]
    shared = copied_arrays(SCHEMA, RAW, ("name", "/$defs/Address/properties/city"))
    assert [a.keys for a in shared] == [("addresses",)]  # a shared definition's field
    assert copied_arrays(SCHEMA, RAW, ("name",)) == []  # none copied
    assert copied_arrays(SCHEMA, "not json", COPIED) == []
    assert copied_arrays(SCHEMA, '{"skills":[]}', COPIED)[0].values == ()


def _reference_repeat(values):
    for k in range(len(values)):
        if any(type(v) is type(values[k]) and v == values[k] for v in values[:k]):
            return k
    return None


def test_repeat_index_matches_a_brute_force_reading():
    rng = random.Random(30)
    pool = ["a", "b", "A", 1, 1.0, True, 2, None, "1"]
    for _ in range(500):
        values = [rng.choice(pool) for _ in range(rng.randint(0, 6))]
        assert repeat_index(values) == _reference_repeat(values), values


def test_boundary_texts_close_the_array_or_go_on_with_the_next_item():
    skills, sizes, _ = copied_arrays(SCHEMA, RAW, COPIED)
    head = '{"name":"Wei Zhang","skills":["Python","Rust'
    assert boundary_texts(RAW, skills, 2) == (head + '"],"', head + '","Lyon')
    head = RAW[: RAW.index("[3") + 2]
    assert boundary_texts(RAW, sizes, 1) == (head + ']},"', head + ", 4")
    with pytest.raises(ValueError):
        boundary_texts(RAW, skills, 5)
    assert cut_text(RAW, skills, 2) == '{"name":"Wei Zhang","skills":["Python","Rust"]'


def _array(values, min_items=0):
    return CopiedArray(("a",), 0, 0, tuple((0, 0) for _ in values), tuple(values), min_items)


@pytest.mark.parametrize(
    ("values", "min_items", "scores", "expected"),
    [
        (["P", "R", "L", "B", "L"], 0, {1: (-5.6, -1.7), 2: (-3.7, -4.1)}, 2),  # the user case
        (["P", "R", "L", "B", "L"], 0, {1: (-5.6, -1.7), 2: (-3.7, -3.6)}, 4),  # the repeat
        (["P", "R", "L", "B", "L"], 0, {1: (-1.0, -1.0)}, 4),  # a tie goes on
        (["P", "R", "L"], 0, {1: (-5.0, -1.0), 2: (-5.0, -1.0)}, None),  # greedy's end
        (["P", "R", "L"], 0, None, None),
        (["P", "R", "L"], 2, {1: (0.0, -9.0)}, None),  # minItems: boundary 1 is not scored
        (["P", "R", "L"], 2, {1: (0.0, -9.0), 2: (0.0, -9.0)}, 2),
        (["P", "P"], 2, None, None),  # a repeat that minItems keeps
        (["P", "P"], 0, None, 1),
        ([1, True, 1.0], 0, None, None),  # JSON equality
    ],
)
def test_first_cut(values, min_items, scores, expected):
    assert first_cut(_array(values, min_items), scores) == expected


ITEMS_TEXT = "Lisinopril 10 mg daily and metformin 500 mg twice. Review in 4 weeks."
DRUGS = [
    {"name": "Lisinopril", "dose_mg": 10},
    {"name": "metformin", "dose_mg": 500},
    {"name": "Review", "dose_mg": 10},  # one mention, one record
    {"name": "daily", "dose_mg": 500},
]


def _objects(values, min_items=0):
    return dataclasses.replace(_array(values, min_items), scalars=False)


@pytest.mark.parametrize(
    ("values", "min_items", "expected"),
    [
        (DRUGS, 0, 2),  # the evidence rules keep the first two, drop the rest
        (DRUGS, 3, 3),  # minItems brings the third back
        (DRUGS, 4, None),  # minItems keeps them all
        (DRUGS[:2], 0, None),  # all kept
        ([DRUGS[2], DRUGS[0]], 0, None),  # not a leading run
        ([DRUGS[0], DRUGS[1], DRUGS[0], DRUGS[1]], 0, 2),  # a loop
    ],
)
def test_first_cut_of_objects_is_the_leading_run_the_evidence_keeps(values, min_items, expected):
    from structgen.extraction.items import kept_prefix

    arr = _objects(values, min_items)
    assert first_cut(arr, {1: (0.0, -9.0)}, ITEMS_TEXT) == expected  # objects: never scored
    schema = {
        "type": "object",
        "properties": {"m": {"type": "array", "minItems": min_items, "items": {"type": "object"}}},
    }
    trimmed, _ = trim_items(schema, ITEMS_TEXT, {"m": list(values)})
    if expected is not None:  # the cut keeps what trim_items keeps
        assert trimmed["m"] == list(values)[:expected]
        assert kept_prefix(list(values), min_items, ITEMS_TEXT) == expected


def _reference_scores(model, tokenizer, template, close, go_on):
    """Summed log-probability of each text's token ids after the ids both share (at
    least one, never the last), by transformers on the full sequence."""
    a = tokenizer.encode(template + close, add_special_tokens=False)
    b = tokenizer.encode(template + go_on, add_special_tokens=False)
    start = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    start = max(1, min(start, len(a) - 1, len(b) - 1))
    out = []
    for ids in (a, b):
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].float()
        lp = torch.log_softmax(logits, -1)
        out.append(sum(lp[j - 1, ids[j]].item() for j in range(start, len(ids))))
    return tuple(out)


SMALL = {
    "type": "object",
    "properties": {
        "s": {"type": "array", "items": {"type": "string"}},
        "n": {"type": "array", "items": {"type": "integer"}, "minItems": 2},
    },
}
SMALL_RAW = '{"s":["Py","Ru","Ly","Ru"],"n":[3,4,5]}'


def test_boundary_scores_are_the_reference_log_probabilities(tiny_engine, tiny_llama_dir):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_llama_dir, torch_dtype=torch.float32).eval()
    prompt = extraction_messages(SMALL, "Py, Ru, Ly: 3 4 5")
    out = type("Out", (), {"text": SMALL_RAW})()
    arrays = copied_arrays(SMALL, SMALL_RAW, ("s[]", "n[]"))
    scores = boundary_scores(tiny_engine, [prompt], [out], [(0, a) for a in arrays])
    tok = tiny_engine.tokenizer
    template = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    assert set(scores) == {(0, arrays[0].start), (0, arrays[1].start)}
    assert sorted(scores[(0, arrays[0].start)]) == [1, 2]  # before the repeat at 3
    assert sorted(scores[(0, arrays[1].start)]) == [2]  # minItems 2: not at 1
    for arr in arrays:
        for k, got in scores[(0, arr.start)].items():
            ref = _reference_scores(model, tok, template, *boundary_texts(SMALL_RAW, arr, k))
            assert got == pytest.approx(ref, abs=2e-3), (arr.keys, k)


LIST_SCHEMA = {
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
        "city": {"type": "string"},
    },
    "required": ["tags", "city"],
}
LIST_TEXT = "Tags: red, blue, green. The shop is in Oslo."


def _greedy(engine, max_tokens=96):
    plan = copy_constraint(LIST_SCHEMA, LIST_TEXT, True)
    grammar = plan.spec.compile(engine.vocab)
    prompt = extraction_messages(LIST_SCHEMA, LIST_TEXT)
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0)
    (out,) = engine.run_requests([engine.make_request(prompt, params, grammar)])
    return plan, grammar, prompt, params, out


def test_a_continuation_from_greedys_own_prefix_writes_greedys_output(tiny_engine):
    plan, grammar, prompt, params, out = _greedy(tiny_engine)
    assert out.finish_reason in ("stop", "length") and "tags[]" in plan.copied_fields
    token_bytes = tiny_engine.vocab.token_bytes
    ends = [0]
    for t in out.token_ids:
        ends.append(ends[-1] + len(token_bytes[t]))
    raw = out.text.encode()
    for n in sorted({1, len(out.token_ids) // 3, len(out.token_ids) // 2}):
        head = raw[: ends[n]].decode()
        made = continuation(tiny_engine, prompt, grammar, params, out, head)
        assert made is not None
        req, ids = made
        assert ids[:n] == out.token_ids[:n]  # greedy's own tokens kept
        (res,) = tiny_engine.run_requests([req])
        prefix = b"".join(token_bytes[t] for t in ids).decode()
        assert prefix + res.text == out.text, n
        assert len(ids) + len(res.token_ids) <= params.max_tokens


def test_a_cut_array_is_closed_and_the_rest_generated_within_the_budget(tiny_engine):
    plan, grammar, prompt, params, out = _greedy(tiny_engine)
    raw = '{"tags":["red","blue","green"],"city":"Oslo"}'
    out = dataclasses.replace(out, text=raw, token_ids=[])
    value = json.loads(out.text)
    (arr,) = copied_arrays(LIST_SCHEMA, out.text, plan.copied_fields)
    made = continuation(tiny_engine, prompt, grammar, params, out, cut_text(out.text, arr, 1))
    req, ids = made
    (res,) = tiny_engine.run_requests([req])
    new = json.loads(b"".join(tiny_engine.vocab.token_bytes[t] for t in ids).decode() + res.text)
    jsonschema.validate(new, LIST_SCHEMA)
    assert new["tags"] == value["tags"][:1]
    assert len(ids) + len(res.token_ids) <= params.max_tokens
    # no token left after the kept ones: no continuation
    tight = dataclasses.replace(params, max_tokens=len(ids))
    head = cut_text(out.text, arr, 1)
    assert continuation(tiny_engine, prompt, grammar, tight, out, head) is None


def test_choose_array_ends_cuts_a_repeat_and_regenerates(tiny_engine):
    plan, grammar, prompt, params, out = _greedy(tiny_engine)
    forced = dataclasses.replace(
        out, text='{"tags":["red","blue","red","red"],"city":"Oslo"}', token_ids=[]
    )  # no token of greedy's is kept: the head is encoded
    (new,) = choose_array_ends(
        tiny_engine, LIST_SCHEMA, [prompt], [forced], [LIST_TEXT], [plan.copied_fields],
        [grammar], params,
    )  # fmt: skip
    value = json.loads(new.text)
    jsonschema.validate(value, LIST_SCHEMA)
    assert value["tags"] in (["red"], ["red", "blue"])  # by score, or before the repeat
    assert new.text.startswith('{"tags":["red"') and len(new.token_ids) <= params.max_tokens
    # without copied arrays, or on an engine that is not an Engine: nothing changes
    same = choose_array_ends(
        tiny_engine, LIST_SCHEMA, [prompt], [forced], [LIST_TEXT], [("city",)], [grammar], params
    )
    assert same == [forced]

    class Other:
        tokenizer = tiny_engine.tokenizer
        vocab = tiny_engine.vocab

        def generate(self, requests, params):
            return tiny_engine.generate(requests, params)

    (kept,) = choose_array_ends(
        Other(), LIST_SCHEMA, [prompt], [forced], [LIST_TEXT], [plan.copied_fields], [grammar],
        params,
    )  # fmt: skip
    assert kept == forced


def test_extract_off_leaves_greedys_arrays(tiny_engine):
    off = extract(
        tiny_engine,
        LIST_SCHEMA,
        LIST_TEXT,
        score_array_ends=False,
        evidence=False,
        score_span_ends=False,
        score_overlaps=False,
    )
    _, _, _, _, out = _greedy(tiny_engine, 512)
    assert off["tags"] == json.loads(out.text)["tags"]


AUTHORS_TEXT = "Hiroshi Nakamura, Chiamaka Okafor and Sigrid Berg. 2021. Sparse retrieval at scale."
AUTHORS = ["Hiroshi Nakamura", "Chiamaka Okafor", "Sigrid Berg", "Sparse retrieval at scale"]


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        # closing scores higher everywhere: the text's list goes on, the cut is after it
        ({1: (-2.0, -9.0), 2: (-2.0, -9.0), 3: (-2.0, -9.0)}, 3),
        ({1: (-2.0, -9.0), 2: (-2.0, -9.0), 3: (-9.0, -2.0)}, None),
    ],
)
def test_a_scored_close_inside_the_texts_list_goes_on(scores, expected):
    arr = _array(AUTHORS)
    assert first_cut(arr, scores, AUTHORS_TEXT) == expected
    assert first_cut(arr, scores) == 1  # without the text: the score alone


def test_the_user_case_still_closes_after_rust():
    text = "Wei Zhang knows Python and Rust. He lived in Lyon, France, then Berlin, Germany."
    scores = {1: (-5.6, -1.7), 2: (-3.7, -4.1)}
    assert first_cut(_array(["Python", "Rust", "Lyon", "Berlin", "Lyon"]), scores, text) == 2


@pytest.mark.parametrize(
    ("previous", "item", "want"),
    [
        ("Hiroshi Nakamura", "Chiamaka Okafor", True),
        ("Chiamaka Okafor", "Sigrid Berg", True),  # " and "
        ("Hiroshi Nakamura", "Sigrid Berg", False),  # not next
        ("Sigrid Berg", "2021", False),  # a sentence end between
        ("Nakamura", "Chiamaka", True),
        ("Hiroshi", "Nakamura", False),  # a space is no joiner
        ("Berg", "Sparse", False),
        (1, 2, False),  # only strings
    ],
)
def test_listed_together(previous, item, want):
    from structgen.extraction.items import listed_together

    assert listed_together(previous, item, AUTHORS_TEXT) is want
