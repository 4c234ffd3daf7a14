"""Where a copied string ends (``extraction.spans``): the candidates are the value's
extensions by lowercase head words (against a word-by-word reading written out as the
reference), and the one chosen is the candidate whose closing quote transformers'
log-probabilities on the same tiny Llama make likeliest, when likelier than the value's.
"""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
import torch

from structgen import SamplingParams
from structgen.extraction import extract, extraction_messages
from structgen.extraction.evidence.names import FUNCTION_WORDS
from structgen.extraction.spans import choose_span_ends, runs_into, span_candidates

TEXT = "Ticket 12: her Nimbus router drops the signal, says Ann Lee."
SCHEMA = {
    "type": "object",
    "properties": {
        "product": {"type": "string", "maxLength": 20},
        "customer": {"type": "string", "maxLength": 20},
        "urgent": {"type": "boolean"},
    },
    "required": ["product", "customer", "urgent"],
}


@pytest.mark.parametrize(
    ("value", "text", "expected"),
    [
        ("Nimbus", "Her Nimbus router drops the Wi-Fi.", ["Nimbus router", "Nimbus router drops"]),
        ("Aurora", "his Aurora desk lamp (order 9)", ["Aurora desk", "Aurora desk lamp"]),
        ("Trailblazer 40L", "the Trailblazer 40L backpack. Paid", ["Trailblazer 40L backpack"]),
        ("Head of Research", "Petrova, Head of Research at Quantix Labs", []),  # function word
        ("00-950", "ul. Prosta 1, 00-950 Warszawa", []),  # a capitalised word
        ("Flat", "Flat 4b is free", []),  # a word with a digit
        ("Nimbus", "Nimbus\nrouter", []),  # a line break
        ("Lee", "Ann Leeds sells lamps", []),  # inside a word: no occurrence
        (
            "Bo",
            "Bo's café opens. Bo café-bar noir grillé sec",  # three words at most
            ["Bo café-bar", "Bo café-bar noir", "Bo café-bar noir grillé"],
        ),
    ],
)
def test_candidates_are_head_word_extensions(value, text, expected):
    assert span_candidates(value, text) == [value] + expected


def _reference_candidates(value: str, text: str, max_words: int = 3) -> list[str]:
    """Word by word: after each occurrence not inside a word, take the next words while
    each is one space away, made of letters (``-`` or an apostrophe inside), lowercase
    first, not followed by a letter, digit, ``_``, ``-`` or apostrophe, and no function word.
    """
    out = [value]
    for s in range(len(text) - len(value) + 1):
        e = s + len(value)
        if text[s:e] != value or (s and text[s - 1].isalnum()):
            continue
        if e < len(text) and text[e].isalnum():
            continue
        for _ in range(max_words):
            if not text.startswith(" ", e):
                break
            j = e + 1
            while j < len(text) and (text[j].isalpha() or (text[j] in "-'’" and j > e + 1)):
                j += 1
            word = text[e + 1 : j]
            nxt = text[j : j + 1]
            if (
                not word
                or word[-1] in "-'’"
                or not word[0].islower()
                or word in FUNCTION_WORDS
                or (nxt and (nxt.isalnum() or nxt in "_-'’"))
            ):
                break
            e = j
            if text[s:e] not in out:
                out.append(text[s:e])
    return out


def test_candidates_match_a_word_by_word_reading():
    rng = random.Random(23)
    words = ["Nimbus", "router", "desk", "lamp", "the", "at", "40L", "Ann", "x-ray", "o'clock"]
    seps = [" ", " ", " ", ", ", ".", "\n", "  ", "-"]
    for _ in range(400):
        parts = [rng.choice(words) + rng.choice(seps) for _ in range(rng.randint(2, 9))]
        text = "".join(parts)
        value = rng.choice(["Nimbus", "desk", "Ann", "40L", "router"])
        assert span_candidates(value, text) == _reference_candidates(value, text), text


def _closing_logprobs(model, tokenizer, template, prefix, cands, tail):
    """Summed log-probability of each candidate's closing tokens (those after the
    candidate's own), by transformers on the full sequence."""
    scores = []
    for c in cands:
        full = tokenizer.encode(template + prefix + c + tail, add_special_tokens=False)
        mid = tokenizer.encode(template + prefix + c, add_special_tokens=False)
        start = next((k for k, (a, b) in enumerate(zip(mid, full)) if a != b), len(mid))
        start = max(1, min(start, len(full) - 1))
        with torch.no_grad():
            logits = model(torch.tensor([full])).logits[0].float()
        lp = torch.log_softmax(logits, -1)
        scores.append(sum(lp[j - 1, full[j]].item() for j in range(start, len(full))))
    return scores


def test_chosen_end_is_the_reference_best(tiny_engine, tiny_llama_dir):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_llama_dir, torch_dtype=torch.float32).eval()
    prompt = extraction_messages(SCHEMA, TEXT)
    raw = '{"product":"Nimbus","customer":"Ann Lee","urgent":false}'
    (out,) = choose_span_ends(
        tiny_engine, SCHEMA, [prompt], [raw], [TEXT], [("product", "customer")]
    )
    value = json.loads(out)
    jsonschema.validate(value, SCHEMA)
    cands = span_candidates("Nimbus", TEXT)
    assert cands == ["Nimbus", "Nimbus router", "Nimbus router drops"]
    assert value["customer"] == "Ann Lee" and value["urgent"] is False
    tok = tiny_engine.tokenizer
    template = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    ref = _closing_logprobs(model, tok, template, '{"product":"', cands, '","')
    best = max(range(len(cands)), key=lambda k: (ref[k], -k))
    if ref[best] <= ref[0] + 1e-4:
        best = 0  # an extension must end more surely than the value itself
    assert value["product"] == cands[best], (cands, ref, value)


def _counting(engine, sent):
    """``engine`` whose ``generate`` appends each batch's requests to ``sent``."""

    class Counting:
        tokenizer = engine.tokenizer

        def generate(self, requests, params):
            sent.extend(requests)
            return engine.generate(requests, params)

    return Counting()


@pytest.mark.parametrize("max_length", [6, 13])
def test_extensions_invalid_under_the_schema_are_not_scored(
    tiny_engine, tiny_llama_dir, max_length
):
    """An extension the schema rejects ("Nimbus router drops" over ``maxLength``) is never
    chosen, so it is not scored: the choice is the reference best of the valid ones, and
    only those are sent (none, and no job, where no extension is valid)."""
    from transformers import LlamaForCausalLM

    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["product"]["maxLength"] = max_length
    prompt = extraction_messages(schema, TEXT)
    raw = '{"product":"Nimbus","customer":"Ann Lee","urgent":false}'
    sent: list = []
    (out,) = choose_span_ends(
        _counting(tiny_engine, sent), schema, [prompt], [raw], [TEXT], [("product",)]
    )
    cands = span_candidates("Nimbus", TEXT)
    valid = [c for c in cands if len(c) <= max_length]
    assert len(sent) == (len(valid) if len(valid) > 1 else 0)
    model = LlamaForCausalLM.from_pretrained(tiny_llama_dir, torch_dtype=torch.float32).eval()
    tok = tiny_engine.tokenizer
    template = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    ref = _closing_logprobs(model, tok, template, '{"product":"', cands, '","')
    best = max(range(len(cands)), key=lambda k: (len(cands[k]) <= max_length, ref[k], -k))
    if ref[best] <= ref[0] + 1e-4:
        best = 0
    assert json.loads(out)["product"] == cands[best], (cands, ref, out)
    assert out == raw or jsonschema.validate(json.loads(out), schema) is None


def test_values_that_are_not_found_are_left_alone(tiny_engine):
    prompt = extraction_messages(SCHEMA, TEXT)
    raws = ['{"product":"Zed","customer":"Ann Lee","urgent":true}', "not json", ""]
    outs = choose_span_ends(tiny_engine, SCHEMA, [prompt] * 3, raws, [TEXT] * 3, [("product",)] * 3)
    assert outs == raws


def test_fields_not_copied_or_with_a_shape_are_left_alone(tiny_engine):
    schema = json.loads(json.dumps(SCHEMA))
    schema["properties"]["product"]["pattern"] = "^[A-Za-z ]+$"
    prompt = extraction_messages(schema, TEXT)
    raw = '{"product":"Nimbus","customer":"Ann Lee","urgent":false}'
    assert choose_span_ends(tiny_engine, schema, [prompt], [raw], [TEXT], [("product",)]) == [raw]
    prompt = extraction_messages(SCHEMA, TEXT)
    assert choose_span_ends(tiny_engine, SCHEMA, [prompt], [raw], [TEXT], [()]) == [raw]


def test_extract_scores_span_ends_by_default(tiny_engine):
    params = SamplingParams(max_tokens=40, temperature=0.0)
    greedy = extract(tiny_engine, SCHEMA, TEXT, params=params, score_span_ends=False)
    scored = extract(tiny_engine, SCHEMA, TEXT, params=params)
    jsonschema.validate(scored, SCHEMA)
    for key in ("product", "customer"):
        assert scored[key] in span_candidates(greedy[key], TEXT)
    assert scored["urgent"] == greedy["urgent"]


@pytest.mark.parametrize(
    "value,extension,other,want",
    [
        ("Lyon", "Lyon jazz", "Lyon jazz festival", True),  # inside the title
        ("Lyon", "Lyon jazz festival", "Lyon jazz festival", True),  # the title itself
        ("Lyon jazz festival", "Lyon jazz festival runs", "Lyon", False),  # holds it already
        ("Nimbus", "Nimbus router", "Ann Lee", False),
        ("Nimbus", "Nimbus router", "router", True),  # the other's word
        ("Nimbus", "Nimbus router", "Nimbus", False),  # equal values: held
    ],
)
def test_runs_into(value, extension, other, want):
    assert runs_into(value, extension, other) is want


def test_an_extension_into_another_fields_value_is_not_scored(tiny_engine):
    """#23 o11: "Lyon" beside the title "Lyon jazz festival" has no extension left (both
    run into the title), so no request is sent for it; the title's own extension ("Lyon
    jazz festival runs") holds the location already and is scored."""
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "location": {"type": "string"}},
        "required": ["title", "location"],
    }
    text = "The Lyon jazz festival runs on 7 March 2026 at 2:15 pm."
    prompt = extraction_messages(schema, text)
    raw = '{"title":"Lyon jazz festival","location":"Lyon"}'
    sent: list = []
    choose_span_ends(_counting(tiny_engine, sent), schema, [prompt], [raw], [text], [("title",)])
    assert len(sent) == 2  # the title's value and its one extension
    sent.clear()
    (out,) = choose_span_ends(
        _counting(tiny_engine, sent), schema, [prompt], [raw], [text], [("location",)]
    )
    assert out == raw and sent == []
