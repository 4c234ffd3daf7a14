"""Sampler and bitmask application against exact references."""

from __future__ import annotations

import math

import pytest
import torch

from structgen.errors import ConfigError
from structgen.kernels.apply_token_bitmask import (
    apply_token_bitmask,
    apply_token_bitmask_ref,
    unpack_bitmask,
)
from structgen.runtime.sampler import sample, take_rows
from structgen.runtime.sampling_params import SamplingParams


def _pack(allowed: torch.Tensor) -> torch.Tensor:
    """Reference packer: [R, V] bool -> [R, ceil(V/32)] int32, LSB first."""
    rows, vocab = allowed.shape
    words = -(-vocab // 32)
    out = torch.zeros(rows, words, dtype=torch.int64)
    for r in range(rows):
        for i in allowed[r].nonzero().flatten().tolist():
            out[r, i // 32] |= 1 << (i % 32)
    out = torch.where(out >= 2**31, out - 2**32, out)
    return out.to(torch.int32)


@pytest.mark.parametrize("vocab", [1, 31, 32, 33, 100])
def test_bitmask_roundtrip_and_apply(vocab):
    g = torch.Generator().manual_seed(vocab)
    allowed = torch.rand(3, vocab, generator=g) < 0.4
    allowed[:, -1] = True  # exercise the sign bit when vocab % 32 == 0
    bm = _pack(allowed)
    assert torch.equal(unpack_bitmask(bm, vocab), allowed)
    logits = torch.randn(3, vocab, generator=g)
    ref = torch.where(allowed, logits, torch.full_like(logits, -math.inf))
    apply_token_bitmask_ref(logits, bm)
    assert torch.equal(logits, ref)


def test_bitmask_rows_by_index_and_padded_logits():
    # logits padded past the tokenizer vocabulary: missing bits mean disallowed
    logits = torch.zeros(4, 40)
    bm = torch.tensor([[0b101]], dtype=torch.int32)
    apply_token_bitmask_ref(logits, bm, torch.tensor([2]))
    assert torch.isinf(logits[2]).sum() == 38
    assert logits[2, 0] == 0 and logits[2, 2] == 0
    assert torch.equal(logits[[0, 1, 3]], torch.zeros(3, 40))  # other rows untouched
    with pytest.raises(ValueError):
        apply_token_bitmask_ref(logits, bm.to(torch.int64), torch.tensor([0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize(("vocab", "words"), [(1, 1), (33, 2), (100, 4), (100, 2), (49152, 1536)])
def test_cpu_bitmask_path_equals_reference(dtype, vocab, words):
    # the numpy path "auto" takes on CPU vs the torch reference: all rows, rows by index (in
    # any order, others untouched), bitmasks narrower (missing bits disallowed) and wider than
    # the logits, the sign bit set
    g = torch.Generator().manual_seed(vocab + words)
    bm = torch.randint(-(2**31), 2**31 - 1, (3, words), dtype=torch.int32, generator=g)
    bm[:, -1] |= torch.tensor(-(2**31), dtype=torch.int32)
    for indices in (None, torch.tensor([4, 0, 2])):
        rows = 3 if indices is None else 6
        logits = torch.randn(rows, vocab, generator=g).to(dtype)
        ref = logits.clone()
        apply_token_bitmask_ref(ref, bm, indices)
        apply_token_bitmask(logits, bm, indices)
        assert torch.equal(logits, ref)


def test_take_rows_and_greedy_match_torch_on_inference_tensors():
    # the numpy paths on CPU against torch's indexing and argmax: ties (first maximum), NaN
    # (counts as the maximum), rows of -inf, repeated and unordered rows, a copy not a view
    with torch.inference_mode():
        logits = torch.randn(6, 40, generator=torch.Generator().manual_seed(3))
        logits[1, [5, 9]] = 7.0
        logits[2, 11] = math.nan
        logits[3] = -math.inf
        rows = [4, 1, 1, 0, 2, 3]
        got = take_rows(logits, rows)
        assert torch.equal(got.nan_to_num(), logits[rows].nan_to_num())
        got[0, 0] = 123.0
        assert logits[4, 0] != 123.0
        greedy = sample(got, [SamplingParams(temperature=0.0)] * 6, [None] * 6)
        assert greedy.dtype == torch.int64
        assert torch.equal(greedy, got.argmax(-1))
        with pytest.raises(IndexError):
            take_rows(logits, [6])


def test_greedy_and_top_k1_pick_argmax():
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(0))
    greedy = sample(logits, [SamplingParams(temperature=0.0)] * 5, [None] * 5)
    top1 = sample(logits, [SamplingParams(temperature=0.7, top_k=1)] * 5, [None] * 5)
    assert torch.equal(greedy, logits.argmax(-1))
    assert torch.equal(top1, logits.argmax(-1))


def test_sampling_matches_softmax_distribution():
    # 20k draws from a 4-token distribution: frequencies within 4 sigma of softmax(l / T)
    logits = torch.tensor([[1.0, 0.0, -1.0, 2.0]]).repeat(20000, 1)
    p = SamplingParams(temperature=0.8)
    toks = sample(logits, [p] * 20000, [None] * 20000)
    freq = torch.bincount(toks, minlength=4).double() / 20000
    ref = torch.softmax(logits[0].double() / 0.8, -1)
    sigma = (ref * (1 - ref) / 20000).sqrt()
    assert ((freq - ref).abs() <= 4 * sigma + 1e-9).all(), (freq, ref)


def test_top_p_and_min_p_drop_the_tail():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(5000, 1)
    toks = sample(logits, [SamplingParams(top_p=0.7)] * 5000, [None] * 5000)
    assert set(toks.tolist()) == {0, 1}  # 0.5 + 0.3 reaches 0.7
    toks = sample(logits, [SamplingParams(min_p=0.5)] * 5000, [None] * 5000)
    assert set(toks.tolist()) == {0, 1}  # 0.15 < 0.5 * 0.5


def test_masked_tokens_are_never_sampled():
    logits = torch.zeros(2000, 10)
    logits[:, 3:] = -math.inf
    toks = sample(logits, [SamplingParams(temperature=1.5)] * 2000, [None] * 2000)
    assert toks.max() < 3


def test_seeded_rows_are_reproducible():
    logits = torch.randn(1, 1000, generator=torch.Generator().manual_seed(1)).repeat(3, 1)
    params = [SamplingParams(seed=7)] * 3

    def gens():
        return [torch.Generator().manual_seed(7) for _ in range(3)]

    a = sample(logits, params, gens())
    b = sample(logits, params, gens())
    assert torch.equal(a, b)
    assert a[0] == a[1] == a[2]  # same seed, same logits, same draw


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_k": -2}, "top_k"),
        ({"min_p": 2.0}, "min_p"),
        ({"stop": [""]}, "stop"),
    ],
)
def test_sampling_params_validation_names_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        SamplingParams(**kwargs)


def test_sampling_params_defaults_follow_vllm():
    p = SamplingParams(stop="END")
    assert (p.max_tokens, p.temperature, p.top_p, p.top_k, p.min_p) == (256, 1.0, 1.0, -1, 0.0)
    assert p.stop == ("END",) and p.seed is None and p.ignore_eos is False


def test_few_rows_serial_restores_threads_and_keeps_greedy():
    from structgen.runtime.sampler import SERIAL_MAX_ROWS, few_rows_serial

    n = torch.get_num_threads()
    logits = torch.randn(SERIAL_MAX_ROWS, 64, generator=torch.Generator().manual_seed(1))
    with few_rows_serial(logits):
        assert torch.get_num_threads() == 1 or n == 1
        inside = sample(
            logits, [SamplingParams(temperature=0.0)] * SERIAL_MAX_ROWS, [None] * SERIAL_MAX_ROWS
        )
    assert torch.get_num_threads() == n
    with pytest.raises(RuntimeError):
        with few_rows_serial(logits):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == n
    wide = torch.randn(SERIAL_MAX_ROWS + 1, 64)
    with few_rows_serial(wide):
        assert torch.get_num_threads() == n
    assert torch.equal(inside, logits.argmax(-1))


@pytest.mark.parametrize("seed", range(4))
def test_filter_probs_candidates_equal_whole_row_sort(seed, monkeypatch):
    # top-k / top-p over the TOP_CANDIDATES largest probabilities vs the whole-row sort (the
    # candidates made as wide as the row): peaked rows (top-p reached inside the candidates),
    # a flat row (not reached: the whole row sorted), top-k wider than the candidates, min-p
    from structgen.runtime import sampler
    from structgen.runtime.sampler import filter_probs

    g = torch.Generator().manual_seed(seed)
    vocab = 3000
    logits = torch.randn(4, vocab, generator=g) * torch.tensor([[4.0], [6.0], [0.01], [3.0]])
    probs = torch.softmax(logits, dim=-1)
    cases = [
        [SamplingParams(temperature=1.0, top_p=0.9)] * 4,
        [SamplingParams(temperature=1.0, top_k=50, top_p=0.95)] * 4,
        [SamplingParams(temperature=1.0, top_k=2000)] * 4,
        [SamplingParams(temperature=1.0, top_p=0.5, min_p=0.01)] * 4,
        [SamplingParams(temperature=1.0, top_p=0.8)] * 2 + [SamplingParams(temperature=1.0)] * 2,
    ]
    for params in cases:
        monkeypatch.setattr(sampler, "TOP_CANDIDATES", 64)
        fast = filter_probs(probs.clone(), params)
        monkeypatch.setattr(sampler, "TOP_CANDIDATES", vocab)
        whole = filter_probs(probs.clone(), params)
        assert torch.equal(fast, whole)
        assert ((fast > 0).sum(-1) >= 1).all()


def test_prompt_logprobs_on_the_calling_thread_equal_the_pool(monkeypatch):
    """``record_prompt_logprobs`` runs a request's rows (up to ``PROMPT_LOGPROBS_SERIAL_ROWS``)
    on one thread: every log-probability and top-20 entry is bit-identical to the intra-op
    pool's (2 threads), for row counts around the threshold and rows with ties."""
    from types import SimpleNamespace

    from structgen.runtime import step as step_module
    from structgen.runtime.logits_processing import top_logprobs

    limit = step_module.PROMPT_LOGPROBS_SERIAL_ROWS
    n = torch.get_num_threads()
    seen = []

    def spy(logits, chosen, k):
        seen.append((logits.shape[0], torch.get_num_threads()))
        return top_logprobs(logits, chosen, k)

    monkeypatch.setattr(step_module, "top_logprobs", spy)
    gen = torch.Generator().manual_seed(3)
    for rows in (1, 3, 17, limit, limit + 1):
        logits = torch.randn(rows, 49_152, generator=gen) * 4
        logits[:, 100:130] = logits.max() + 1  # 30 tied maxima: top-20 picks among ties
        prompt = torch.randint(0, 49_152, (rows + 1,), generator=gen).tolist()
        req = SimpleNamespace(
            params=SamplingParams(prompt_logprobs=20), prompt_token_ids=prompt, prompt_logprobs=None
        )
        step_module.record_prompt_logprobs(req, logits, 0)
        torch.set_num_threads(2)
        try:
            pool = top_logprobs(logits, torch.tensor(prompt[1:]), [20] * rows)
        finally:
            torch.set_num_threads(n)
        assert req.prompt_logprobs[1:] == pool
        assert [list(d) for d in req.prompt_logprobs[1:]] == [list(d) for d in pool]
    assert torch.get_num_threads() == n
    assert [r for r, t in seen if t == 1] == [1, 3, 17, limit] or n == 1


def test_host_inverse_cdf_matches_the_distribution_across_blocks(monkeypatch):
    # one row, 5,000 draws by inversion over 4 blocks of 256 and a partial block: frequencies
    # within 4 sigma of w / sum(w), and a zero weight (also a whole zero block) never drawn
    import numpy as np

    from structgen.runtime import sampler

    monkeypatch.setattr(sampler, "BLOCK", 256)
    vocab, n = 1100, 5000
    w = np.zeros(vocab, np.float32)
    picks = {0: 1.0, 255: 2.0, 256: 0.5, 700: 3.0, 1099: 1.5}  # block 1 (256..511): 256 only
    for t, v in picks.items():
        w[t] = v
    rows = np.broadcast_to(w, (n, vocab))
    toks = sampler._inverse_cdf(rows, np.random.default_rng(0).random(n))
    assert set(toks.tolist()) <= set(picks)
    total = sum(picks.values())
    for t, v in picks.items():
        p = v / total
        assert abs((toks == t).mean() - p) <= 4 * math.sqrt(p * (1 - p) / n), t
    # u at the top of [0, 1): rounding never walks past the last token with weight
    edge = sampler._inverse_cdf(w[None].astype(np.float64), np.array([np.nextafter(1.0, 0)]))
    assert edge.tolist() == [1099]
    dead = np.full((2, vocab), -np.inf, np.float32)
    assert sampler.sample(dead, [SamplingParams(temperature=1.0)] * 2, [None] * 2).tolist() == [
        0,
        0,
    ]  # every logit -inf: token 0 (the caller's grammar check rejects it)


def test_seeded_host_generators_are_numpy_and_reproducible():
    import numpy as np

    from structgen.runtime.sampler import make_generator

    logits = np.random.default_rng(1).standard_normal((1, 5000)).astype(np.float32).repeat(4, 0)
    params = [SamplingParams(seed=7, temperature=1.0)] * 4
    gen = make_generator(7, "cpu")
    assert isinstance(gen, np.random.Generator)
    a = [sample(logits, params, [make_generator(7) for _ in range(4)]) for _ in range(2)]
    assert isinstance(a[0], np.ndarray) and a[0].dtype == np.int64
    assert np.array_equal(a[0], a[1]) and len(set(a[0].tolist())) == 1
    draws = [sample(logits[:1], params[:1], [make_generator(s)])[0] for s in range(40)]
    assert len(set(draws)) > 5  # other seeds, other tokens
    # a torch.Generator still drives a host row (tests and callers that pass one)
    t = [sample(torch.from_numpy(logits[:1]), params[:1], [torch.Generator().manual_seed(3)])]
    t.append(sample(torch.from_numpy(logits[:1]), params[:1], [torch.Generator().manual_seed(3)]))
    assert torch.equal(t[0], t[1])


def _penalty_requests(vocab: int):
    from types import SimpleNamespace

    g = torch.Generator().manual_seed(5)
    kws = [
        {},
        {"presence_penalty": 0.7, "frequency_penalty": 0.3},
        {"repetition_penalty": 1.3, "logit_bias": {3: 2.5, 7: -100.0, vocab + 5: 1.0}},
        {"presence_penalty": -0.5, "repetition_penalty": 0.8, "frequency_penalty": 1.1},
    ]
    reqs = []
    for kw in kws:
        prompt = torch.randint(0, vocab, (9,), generator=g).tolist()
        out = torch.randint(0, vocab, (12,), generator=g).tolist() + [4, 4, 4]
        reqs.append(
            SimpleNamespace(
                params=SamplingParams(**kw), prompt_token_ids=prompt, output_token_ids=out
            )
        )
    return reqs


def test_host_penalties_and_bias_equal_the_torch_path_and_a_loop():
    # the numpy path against the torch implementation (run on CPU) bit for bit, and against a
    # per-token Python loop of the definitions (float64, to 1e-5)
    from structgen.runtime.logits_processing import _apply_torch, apply_penalties_and_bias

    vocab = 300
    reqs = _penalty_requests(vocab)
    logits = torch.randn(len(reqs), vocab, generator=torch.Generator().manual_seed(2)) * 3
    host, ref = logits.clone(), logits.clone()
    apply_penalties_and_bias(host, reqs)
    rows = [r for r, q in enumerate(reqs) if q.params.needs_logits_processing]
    _apply_torch(ref, reqs, rows)
    assert torch.equal(host, ref)
    want = logits.double().tolist()
    for r, q in enumerate(reqs):
        p = q.params
        for t in range(vocab):
            c = q.output_token_ids.count(t)
            v = want[r][t] - p.frequency_penalty * c - p.presence_penalty * (c > 0)
            if p.repetition_penalty != 1.0 and (c or t in q.prompt_token_ids):
                v = v / p.repetition_penalty if v > 0 else v * p.repetition_penalty
            want[r][t] = v + (p.logit_bias or {}).get(t, 0.0)
    torch.testing.assert_close(
        host.double(), torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-5
    )


def test_host_top_logprobs_equal_torch_log_softmax():
    from structgen.runtime.logits_processing import top_logprobs

    logits = torch.randn(5, 4000, generator=torch.Generator().manual_seed(4)) * 5
    logits[2, 100:] = -math.inf  # a masked row
    chosen = torch.tensor([0, 17, 3, 3999, 5])
    got = top_logprobs(logits, chosen, [0, 3, 5, 20, 1])
    ref = torch.log_softmax(logits.double(), dim=-1)
    for r, d in enumerate(got):
        ids = list(d)
        assert ids[0] == int(chosen[r])
        k = [0, 3, 5, 20, 1][r]
        top = ref[r].topk(k).indices.tolist() if k else []
        assert set(ids[1:]) <= set(top) and set(top) - {int(chosen[r])} <= set(ids)
        assert [d[t] for t in top] == sorted((d[t] for t in top), reverse=True)
        for t, v in d.items():
            assert math.isclose(v, float(ref[r, t]), abs_tol=2e-5) or v == float(ref[r, t])
