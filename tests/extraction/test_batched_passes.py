"""The scoring passes over many documents at once give each document what it gets alone.

``choose_overlaps`` plans the overlap jobs of every document and scores them in one batch
per stage (shortlist, then candidates); ``extract`` runs each pass once over all finished
documents (with ``on_result``: over chunks of ``FINISH_CHUNK`` as they finish). The
reference is the same document run alone (one document per call, as before #23 v23).
"""

from __future__ import annotations

import json
import warnings

import pytest

from structgen import SamplingParams
from structgen.extraction import extractor
from structgen.extraction.overlaps import choose_overlaps
from tests.extraction.test_choices import PreferringEngine

SCHEMA = {
    "type": "object",
    "properties": {
        "full_name": {"type": "string", "maxLength": 40},
        "company": {"type": "string", "maxLength": 40},
        "city": {"type": "string", "maxLength": 40},
    },
    "required": ["full_name", "company", "city"],
    "additionalProperties": False,
}
COPIED = ("full_name", "company", "city")
TEXTS = [
    "Please add my details: Wei Zhang, now at Lantern Robotics in Shenzhen.",
    "Ana Lee met Bo Chen of Verde Foods in Porto last week.",
    "Contact: Omar Haddad (Orbit Media). Based in Dublin.",
    "Liam Walsh, CTO at Quantix Labs, Sofia.",
    "Nothing overlaps here: Priya Shah, Bluefin Logistics, Osaka.",
]
RAWS = [
    '{"full_name":"Wei Zhang","company":"Wei Zhang","city":"Shenzhen"}',
    '{"full_name":"Ana Lee","company":"Ana Lee","city":"Ana Lee"}',
    '{"full_name":"Omar Haddad","company":"Orbit Media","city":"Orbit"}',
    '{"full_name":"Liam Walsh","company":"Liam","city":"Sofia"}',
    '{"full_name":"Priya Shah","company":"Bluefin Logistics","city":"Osaka"}',
]


class CountingEngine(PreferringEngine):
    """``PreferringEngine`` that records how many requests each ``generate`` call held."""

    def __init__(self, liked):
        super().__init__(liked)
        self.batches = []

    def generate(self, requests, params):
        self.batches.append(len(requests))
        return super().generate(requests, params)


@pytest.mark.parametrize("shortlist", [None, 2])
def test_choose_overlaps_scores_every_document_in_one_batch_per_stage(shortlist):
    liked = {"company": "Lantern Robotics", "city": "Porto", "full_name": "Liam Walsh"}
    alone = []
    for raw, text in zip(RAWS, TEXTS):
        engine = CountingEngine(liked)
        alone.append(choose_overlaps(engine, SCHEMA, ["p "], [raw], [text], [COPIED], shortlist))
    engine = CountingEngine(liked)
    many = choose_overlaps(engine, SCHEMA, ["p "] * 5, RAWS, TEXTS, [COPIED] * 5, shortlist)
    assert many == [a for (a,) in alone]
    assert json.loads(many[0])["company"] == "Lantern Robotics"  # something did move
    assert many[4] == RAWS[4]
    # shortlist off: one scoring batch; on: the shortlist batch, then one scoring batch
    # (the stand-in answers the shortlist's first-token requests without log-probs)
    assert len(engine.batches) == (1 if shortlist is None else 2)


def test_choose_overlaps_many_documents_on_the_tiny_model(tiny_engine):
    prompts = ["Text: " + t + " JSON:" for t in TEXTS]
    alone = [
        choose_overlaps(tiny_engine, SCHEMA, [p], [r], [t], [COPIED])[0]
        for p, r, t in zip(prompts, RAWS, TEXTS)
    ]
    many = choose_overlaps(tiny_engine, SCHEMA, prompts, RAWS, TEXTS, [COPIED] * 5)
    assert many == alone
    assert many[:4] != RAWS[:4]  # the overlapping documents were written again


def _details(results):
    return [(r.value, r.raw_text, r.finish_reason, r.copied_fields) for r in results]


@pytest.mark.parametrize("chunk", [2, 16])
def test_extract_many_documents_equals_each_alone(tiny_engine, monkeypatch, chunk):
    """Every pass on (span ends, numbers, overlaps, options, evidence): batch results,
    and ``on_result``'s chunked results, equal each document extracted alone."""
    monkeypatch.setattr(extractor, "FINISH_CHUNK", chunk)
    params = SamplingParams(max_tokens=40, temperature=0.0)
    kw = dict(params=params, errors="return", return_details=True, score_options=True,
              score_numbers=True, score_span_ends=True, score_overlaps=True)  # fmt: skip
    schema = {**SCHEMA, "properties": {**SCHEMA["properties"], "n": {"type": "integer"},
              "vip": {"type": "boolean"}}}  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alone = [tiny_engine.extract(schema, t, **kw) for t in TEXTS]
        many = tiny_engine.extract(schema, TEXTS, **kw)
        seen = {}
        streamed = extractor.extract(
            tiny_engine, schema, TEXTS, on_result=lambda i, r: seen.setdefault(i, r), **kw
        )
    assert _details(many) == _details(alone)
    assert _details(streamed) == _details(alone)
    assert sorted(seen) == list(range(len(TEXTS)))
    assert _details([seen[i] for i in range(len(TEXTS))]) == _details(alone)
