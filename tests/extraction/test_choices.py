"""Enum and boolean values chosen by score (structgen.extraction.choices): the fields
found in a schema, where each value is written (against json.loads of the slice), and
the option chosen: against a stand-in model whose preferred option is known, and on the
tiny random Llama against the mean log-probabilities of every option computed from full
prompt log-probs (no shared-prefix start)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.extraction.choices import choose_options, option_fields, value_spans
from structgen.runtime.outputs import RequestOutput

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "priority": {"enum": ["low", "medium", "high", "urgent"]},
        "paid": {"type": "boolean"},
        "room": {
            "type": "object",
            "properties": {
                "kind": {"$ref": "#/$defs/kind"},
                "smoking": {"type": ["boolean", "null"]},
            },
            "required": ["kind", "smoking"],
        },
        "dress": {"anyOf": [{"enum": ["casual", "formal"]}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
        "always": {"const": "x"},
    },
    "required": ["name", "priority", "paid", "room", "dress"],
    "additionalProperties": False,
    "$defs": {"kind": {"enum": ["single", "double", "suite"]}},
}


def test_option_fields():
    assert option_fields(SCHEMA) == {
        ("priority",): ["low", "medium", "high", "urgent"],
        ("paid",): [True, False],
        ("room", "kind"): ["single", "double", "suite"],
        ("room", "smoking"): [True, False, None],
        ("dress",): ["casual", "formal", None],
    }


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


def _scalars(value, path=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _scalars(v, path + (k,))
    elif not isinstance(value, list) and path:
        yield path, value


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(), json_values, max_size=4), st.sampled_from([None, 1]))
def test_value_spans_locate_every_scalar(obj, indent):
    for raw in (json.dumps(obj, indent=indent), json.dumps(obj, separators=(",", ":"))):
        spans = value_spans(raw)
        expected = dict(_scalars(obj))
        assert set(spans) == set(expected)
        for path, (start, end) in spans.items():
            assert json.loads(raw[start:end]) == expected[path]


def test_value_spans_refuses_a_non_object():
    with pytest.raises(ValueError):
        value_spans("[1, 2]")


class PreferringEngine:
    """Stand-in model over characters: every scored token of a text that ends with one of
    ``liked`` (``{key: value}``, written ``"key":value``, then one structural character)
    has log-prob -0.1, others -3."""

    def __init__(self, liked):
        self.liked = [json.dumps(k) + ":" + json.dumps(v) for k, v in liked.items()]
        self.requests = 0
        self.tokenizer = SimpleNamespace(
            encode=lambda text, add_special_tokens=False: [ord(c) for c in text],
            apply_chat_template=lambda msgs, tokenize, add_generation_prompt: "".join(
                m["content"] + "\n" for m in msgs
            ),
        )

    def generate(self, requests, params):
        outs = []
        for ids, p in zip(requests, params):
            self.requests += 1
            text = "".join(chr(i) for i in ids)
            good = any(text[:-1].endswith(v) for v in self.liked)
            lps = [None] + [{t: (-0.1 if good else -3.0)} for t in ids[1:]]
            for j in range(1, p.prompt_logprobs_start):
                lps[j] = None
            outs.append(RequestOutput(text="", finish_reason="length", prompt_logprobs=lps))
        return outs


def _greedy():
    return {
        "name": "Ann",
        "priority": "low",
        "paid": True,
        "room": {"kind": "single", "smoking": None},
        "dress": None,
        "tags": ["a"],
    }


def test_the_preferred_option_replaces_greedy_choice():
    raw = json.dumps(_greedy(), separators=(",", ":"))
    prompt = [{"role": "user", "content": "Ann paid nothing, wants a suite, urgent."}]
    engine = PreferringEngine({"priority": "urgent", "paid": False, "kind": "suite"})
    (out,) = choose_options(engine, SCHEMA, [prompt], [raw])
    assert json.loads(out) == {
        **_greedy(),
        "priority": "urgent",
        "paid": False,
        "room": {"kind": "suite", "smoking": None},
    }
    assert engine.requests == 4 + 2 + 3 + 3 + 3  # every option of every choice field


def test_unparsable_or_empty_outputs_are_left_alone():
    engine = PreferringEngine({"priority": "urgent"})
    assert choose_options(engine, SCHEMA, ["p", "p"], ['{"name":', ""]) == ['{"name":', ""]
    assert engine.requests == 0


def test_an_option_that_breaks_the_schema_is_not_taken():
    schema = {
        "type": "object",
        "properties": {"a": {"enum": ["x", "y"]}, "b": {"type": "string"}},
        "if": {"properties": {"a": {"const": "y"}}},
        "then": {"properties": {"b": {"const": "only-with-y"}}},
    }
    raw = '{"a":"x","b":"other"}'
    (out,) = choose_options(PreferringEngine({"a": "y"}), schema, ["plain prompt "], [raw])
    assert out == raw


def _mean_from_full_logprobs(engine, prefix, option, tail):
    """Reference: mean log-prob of the tokens after ``prefix``'s, from a request that
    asks for every prompt log-prob (no start)."""
    from structgen.runtime.sampling_params import SamplingParams

    tok = engine.tokenizer
    base = tok.encode(prefix, add_special_tokens=False)
    full = tok.encode(prefix + json.dumps(option) + tail, add_special_tokens=False)
    first = 0
    while first < min(len(base), len(full)) and base[first] == full[first]:
        first += 1
    first = max(1, min(first, len(full) - 1))
    (out,) = engine.generate([full], [SamplingParams(max_tokens=1, prompt_logprobs=0)])
    lps = [out.prompt_logprobs[j][full[j]] for j in range(first, len(full))]
    return sum(lps) / len(lps)


def test_on_the_tiny_model_the_choice_is_the_best_mean_logprob(tiny_engine):
    schema = {
        "type": "object",
        "properties": {"p": {"enum": ["low", "medium", "high"]}, "ok": {"type": "boolean"}},
        "required": ["p", "ok"],
    }
    raw = '{"p":"low","ok":true}'
    prompt = "Text: nothing. JSON:"
    (out,) = choose_options(tiny_engine, schema, [prompt], [raw])
    value = json.loads(out)
    p_scores = {
        o: _mean_from_full_logprobs(tiny_engine, prompt + '{"p":', o, ",")
        for o in ["low", "medium", "high"]
    }
    assert value["p"] == max(p_scores, key=p_scores.get)
    prefix = prompt + '{"p":"low","ok":'  # the context greedy wrote "ok" in
    ok_scores = {o: _mean_from_full_logprobs(tiny_engine, prefix, o, "}") for o in [True, False]}
    assert value["ok"] == max(ok_scores, key=ok_scores.get)


def test_engine_extract_passes_the_scoring_options_through(tiny_engine, monkeypatch):
    """``Engine.extract(..., score_options=, score_span_ends=)`` reaches
    ``structgen.extraction.extract`` with the same values (it dropped them before)."""
    import structgen.extraction as extraction

    seen = {}

    def fake(engine, schema, text, **kwargs):
        seen.update(kwargs)
        return "sentinel"

    monkeypatch.setattr(extraction, "extract", fake)
    got = tiny_engine.extract({"type": "object"}, "t", score_options=True, score_span_ends=True)
    assert got == "sentinel"
    assert seen["score_options"] is True and seen["score_span_ends"] is True


class LengthEngine(PreferringEngine):
    """Stand-in model over characters: every scored token has log-prob -1, so a
    candidate's mean is -1 whatever its length and its sum is minus its scored length."""

    def __init__(self):
        super().__init__({})

    def generate(self, requests, params):
        outs = []
        for ids, p in zip(requests, params):
            lps = [None] * p.prompt_logprobs_start + [
                {t: -1.0} for t in ids[p.prompt_logprobs_start :]
            ]
            outs.append(RequestOutput(text="", finish_reason="length", prompt_logprobs=lps))
        return outs


def _job(value, keys, candidates):
    from structgen.extraction.choices import CandidateJob

    raw = json.dumps(value, separators=(",", ":"))
    return CandidateJob(0, keys, candidates, "ctx ", raw, value_spans(raw)[keys])


def test_best_candidates_sum_prefers_the_shortest_and_a_mean_tie_keeps_greedys():
    """Hand-computed: under -1 per character ``1`` (sum -2 with the ``}``) beats ``10``
    and ``123`` (-3, -4); every mean is -1, a tie, so greedy's ``123`` stays."""
    from structgen.extraction.choices import best_candidates

    value = {"n": 123}
    jobs = [_job(value, ("n",), [10, 1, 123])]
    assert best_candidates(LengthEngine(), jobs, [value], summed=True) == [1]
    assert best_candidates(LengthEngine(), jobs, [value], summed=False) == [None]
    assert best_candidates(LengthEngine(), [], [], summed=True) == []


def test_best_candidates_follows_the_preferred_value_and_refuses_a_missing_greedy_value():
    from structgen.extraction.choices import best_candidates

    value = {"a": {"n": 5}, "b": "x"}
    engine = PreferringEngine({"n": 58})
    assert best_candidates(engine, [_job(value, ("a", "n"), [2, 58, 5])], [value], summed=True) == [
        58
    ]
    with pytest.raises(ValueError, match="'a.n'"):
        best_candidates(engine, [_job(value, ("a", "n"), [2, 58])], [value], summed=True)


class CountingEngine:
    """The tiny engine, counting the scoring requests and the prompt tokens they compute."""

    def __init__(self, engine):
        self.engine, self.tokenizer = engine, engine.tokenizer
        self.requests, self.batches = 0, []

    def generate(self, requests, params):
        self.requests += len(requests)
        self.batches.append(len(requests))
        return self.engine.generate(requests, params)


def _word_prefix_jobs():
    """A job whose candidates run from one word on ("Lantern", "Lantern Robotics", ...),
    as ``text_spans`` writes them, one whose candidates share no word, and numbers that
    lead one another (1, 12, 123 in 1234: shared on a tokenizer that splits digits)."""
    value = {"name": "Wei Zhang", "company": "Wei Zhang", "n": 1234}
    raw = json.dumps(value, separators=(",", ":"))
    spans = value_spans(raw)
    from structgen.extraction.choices import CandidateJob

    ctx = "Text: Wei Zhang, now at Lantern Robotics Shenzhen Ltd in Shenzhen. JSON:"
    runs = ["Wei Zhang", "Lantern", "Lantern Robotics", "Lantern Robotics Shenzhen",
            "Lantern Robotics Shenzhen Ltd", "Shenzhen", "Shenzhen Ltd"]  # fmt: skip
    return (
        [
            CandidateJob(0, ("company",), runs, ctx, raw, spans[("company",)]),
            CandidateJob(0, ("name",), ["Wei Zhang", "Wei", "Zhang"], ctx, raw, spans[("name",)]),
            CandidateJob(0, ("n",), [1234, 1, 12, 123, 5], ctx, raw, spans[("n",)]),
        ],
        ctx,
        raw,
    )


def _check_shared_scores(engine, jobs, ctx, raw):
    """Every candidate's ``candidate_scores`` score against the reference's own
    full-prompt-log-prob request; the counting engine's requests and batches."""
    from structgen.extraction.choices import candidate_scores

    counting = CountingEngine(engine)
    got = candidate_scores(counting, jobs, summed=False)
    for job, scores in zip(jobs, got):
        start, end = job.span
        want = [
            _mean_from_full_logprobs(engine, ctx + raw[:start], c, raw[end : end + 1])
            for c in job.candidates
        ]
        assert scores == pytest.approx(want, abs=1e-4)
    return counting


@pytest.mark.parametrize("top", [20, 0])
def test_shared_candidate_scores_equal_one_request_per_candidate(tiny_engine, monkeypatch, top):
    """On the tiny random Llama the scores equal the reference's whether a shorter
    candidate's last token is among a longer one's row's top 20 or not (top 0: never,
    so each is scored in a second batch)."""
    import structgen.extraction.choices as choices

    monkeypatch.setattr(choices, "SHARED_TOP", top)
    jobs, ctx, raw = _word_prefix_jobs()
    counting = _check_shared_scores(tiny_engine, jobs, ctx, raw)
    n = sum(len(j.candidates) for j in jobs)
    assert counting.requests <= n and counting.batches[0] < n  # 1, 12, 123 read from 1234
    if top == 0:  # hosts, then the candidates whose last token was not read
        assert len(counting.batches) == 2 and counting.requests == n


def test_shared_candidate_scores_on_the_default_model(smollm2_engine):
    """On SmolLM2, where a run's closing quote is among a longer run's likeliest next
    tokens: the scores equal the reference's with fewer requests than candidates."""
    jobs, ctx, raw = _word_prefix_jobs()
    counting = _check_shared_scores(smollm2_engine, jobs, ctx, raw)
    assert counting.requests < sum(len(j.candidates) for j in jobs)
    assert len(counting.batches) <= 2


def test_shared_hosts_against_brute_force():
    """A candidate shares the longest (then first) candidate of its job that is no guest,
    holds a row for its last token and starts with its ids but the last; against a
    brute-force check of that rule on random id lists."""
    import random

    from structgen.extraction.choices import shared_hosts

    rng = random.Random(0)
    for _ in range(300):
        sizes = [rng.randint(1, 6) for _ in range(rng.randint(1, 3))]
        fulls = [[rng.randint(0, 2) for _ in range(rng.randint(2, 5))] for _ in range(sum(sizes))]
        hosts = shared_hosts(fulls, [1] * len(fulls), sizes)
        pos = 0
        for n in sizes:
            group = range(pos, pos + n)
            for i in group:
                h = hosts[i]
                assert h in group and hosts[h] == h
                if h != i:
                    assert len(fulls[h]) >= len(fulls[i])
                    assert fulls[h][: len(fulls[i]) - 1] == fulls[i][:-1]
                else:  # no root could host it: the roots longer than it were checked first
                    for r in group:
                        if hosts[r] == r and r != i and (-len(fulls[r]), r) < (-len(fulls[i]), i):
                            assert not (
                                len(fulls[r]) >= len(fulls[i])
                                and fulls[r][: len(fulls[i]) - 1] == fulls[i][:-1]
                            )
            pos += n


class RecordingEngine(CountingEngine):
    """The counting engine, also recording each request's ids and params."""

    def __init__(self, engine):
        super().__init__(engine)
        self.sent = []

    def generate(self, requests, params):
        self.sent.extend(zip(requests, params))
        return super().generate(requests, params)


def _reference_scores(engine, jobs):
    return [
        [
            _mean_from_full_logprobs(
                engine, job.context + job.raw[: job.span[0]], c, job.raw[job.span[1]]
            )
            for c in job.candidates
        ]
        for job in jobs
    ]


def _check_led_scores(engine, led):
    """``candidate_scores`` of jobs with leads against the reference; returns the
    requests sent with the leads and without them (ids and first scored position)."""
    import dataclasses

    from structgen.extraction.choices import candidate_scores

    sent = []
    for jobs in (led, [dataclasses.replace(j, lead=None) for j in led]):
        recording = RecordingEngine(engine)
        got = candidate_scores(recording, jobs, summed=False)
        for scores, want in zip(got, _reference_scores(engine, jobs)):
            assert scores == pytest.approx(want, abs=1e-4)
        sent.append([(ids, p.prompt_logprobs_start) for ids, p in recording.sent])
    return sent


def _skipped_rows(sent):
    """Rows the requests with leads start after those without (same requests)."""
    with_leads, without = sent
    start = dict((tuple(ids), s) for ids, s in without)
    assert len(with_leads) <= len(without)
    return sum(s - start[tuple(ids)] for ids, s in with_leads if tuple(ids) in start)


@pytest.mark.parametrize("top", [20, 0])
def test_candidate_scores_read_the_leads_rows(tiny_engine, monkeypatch, top):
    """With the shortlist's requests as leads (``shortlist_spans(..., leads=True)``) the
    scores equal the reference's one request per candidate, whether a candidate's first
    own token is among the lead's likeliest tokens or not (top 0: never, so that row is
    computed again), and the requests after a lead's ids start there."""
    import structgen.extraction.choices as choices
    import structgen.extraction.overlaps as overlaps

    monkeypatch.setattr(overlaps, "FIRST_TOKEN_TOP", top)
    monkeypatch.setattr(choices, "SHARED_TOP", top)
    jobs, _, _ = _word_prefix_jobs()
    led = overlaps.shortlist_spans(tiny_engine, jobs, 4, leads=True)
    # one job has more than 4 others, so the batch is sent: every job gets a lead
    assert [len(j.candidates) for j in led] == [5, 3, 5]
    assert all(j.lead is not None for j in led)
    assert _skipped_rows(_check_led_scores(tiny_engine, led)) >= 3
    # without a job to cut, no batch is sent and no lead made
    assert overlaps.shortlist_spans(tiny_engine, led, 4, leads=True) == led
    assert all(j.lead is None for j in overlaps.shortlist_spans(tiny_engine, jobs, 8, leads=True))


def test_a_lead_that_cannot_serve_is_not_read(tiny_engine):
    """A failed lead, one over other ids, and one whose rows start after the candidates'
    first scored token are ignored: the scores are the reference's."""
    import dataclasses

    import structgen.extraction.overlaps as overlaps
    from structgen.extraction.choices import Lead

    jobs, _, _ = _word_prefix_jobs()
    led = overlaps.shortlist_spans(tiny_engine, jobs, 4, leads=True)
    bad, failed = [], RequestOutput(finish_reason="error")
    for job in led:
        lead = job.lead
        bad += [
            dataclasses.replace(job, lead=Lead(lead.ids, lead.start, failed)),
            dataclasses.replace(job, lead=Lead([7, *lead.ids[1:]], lead.start, lead.out)),
            dataclasses.replace(job, lead=Lead(lead.ids, len(lead.ids) + 5, lead.out)),
        ]
    with_leads, without = _check_led_scores(tiny_engine, bad)
    assert with_leads == without


def test_leads_on_the_default_model(smollm2_engine):
    """On SmolLM2 the scores read through leads equal the reference's."""
    import structgen.extraction.overlaps as overlaps

    jobs, _, _ = _word_prefix_jobs()
    led = overlaps.shortlist_spans(smollm2_engine, jobs, 4, leads=True)
    assert _skipped_rows(_check_led_scores(smollm2_engine, led)) >= 3
