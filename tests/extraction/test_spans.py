"""Where a copied string ends (``extraction.spans``): the candidates are spans extending the
greedy value (the span rule written out as the reference), and the one chosen is the
best-scoring valid candidate by transformers' log-probabilities on the same tiny Llama
(mean over the candidate's tokens, as ``select`` scores options).
"""

from __future__ import annotations

import json

import jsonschema
import torch

from structgen import SamplingParams
from structgen.extraction import extract, extraction_messages
from structgen.extraction.spans import choose_span_ends, span_candidates
from tests.extraction._copy_reference import SCHEMA, TEXT, spans


def test_candidates_extend_the_value_within_its_line():
    text = "Aiko Tanaka lives in Osaka.\nAiko Sato, too."
    cands = span_candidates("Aiko", text, max_extra=4)
    assert cands[0] == "Aiko"
    assert set(cands) <= spans(text)
    assert {"Aiko Tanaka", "Aiko Tanaka lives", "Aiko Sato", "Aiko Sato,"} <= set(cands)
    assert not any("\n" in c or c.endswith(" ") for c in cands)
    assert (
        "Aiko Tanaka lives in" not in cands
    )  # four units past "Aiko": " ", "Tanaka", " ", "lives"
    assert span_candidates("Lee", "Ann Leeds") == ["Lee"]  # not at a unit boundary


def _reference_scores(model, tokenizer, template, prefix, cands, tail):
    base = tokenizer.encode(template + prefix, add_special_tokens=False)
    scores = []
    for c in cands:
        full = tokenizer.encode(template + prefix + c + tail, add_special_tokens=False)
        start = max(1, next((k for k, (a, b) in enumerate(zip(base, full)) if a != b), len(base)))
        with torch.no_grad():
            logits = model(torch.tensor([full])).logits[0].float()
        lp = torch.log_softmax(logits, -1)
        vals = [lp[j - 1, full[j]].item() for j in range(start, len(full))]
        scores.append(sum(vals) / len(vals))
    return scores


def test_chosen_end_is_the_reference_best(tiny_engine, tiny_llama_dir):
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(tiny_llama_dir, torch_dtype=torch.float32).eval()
    prompt = extraction_messages(SCHEMA, TEXT)
    raw = '{"name":"Ann","age":37,"ok":true}'
    (out,) = choose_span_ends(tiny_engine, SCHEMA, [prompt], [raw], [TEXT], [("name", "age")])
    value = json.loads(out)
    jsonschema.validate(value, SCHEMA)
    cands = span_candidates("Ann", TEXT)
    assert value["name"] in cands and value["age"] == 37 and value["ok"] is True
    tok = tiny_engine.tokenizer
    template = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    ref = _reference_scores(model, tok, template, '{"name":"', cands, '","')
    valid = [k for k, c in enumerate(cands) if len(c) <= 12]
    best = max(valid, key=lambda k: (ref[k], -k))
    chosen = cands.index(value["name"])
    assert ref[chosen] >= ref[best] - 1e-4, (cands, ref, value)


def test_values_that_are_not_found_are_left_alone(tiny_engine):
    prompt = extraction_messages(SCHEMA, TEXT)
    raws = ['{"name":"Zed","age":37,"ok":true}', "not json", ""]
    outs = choose_span_ends(tiny_engine, SCHEMA, [prompt] * 3, raws, [TEXT] * 3, [("name",)] * 3)
    assert outs == raws


def test_extract_scores_span_ends_when_asked(tiny_engine):
    params = SamplingParams(max_tokens=40, temperature=0.0)
    greedy = tiny_engine.extract(SCHEMA, TEXT, params=params)
    scored = extract(tiny_engine, SCHEMA, TEXT, params=params, score_span_ends=True)
    jsonschema.validate(scored, SCHEMA)
    assert scored["name"] in span_candidates(greedy["name"], TEXT)
    assert {k: v for k, v in scored.items() if k != "name"} == {
        k: v for k, v in greedy.items() if k != "name"
    }
