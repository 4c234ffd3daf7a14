"""Rejection sampling keeps the target's distribution: speculative vs plain sampling on a
3-letter grammar (tiny vocabulary, short outputs), compared per position with a
chi-square two-sample test; fixed seeds, so the test is deterministic."""

from __future__ import annotations

import pytest
from scipy.stats import chi2_contingency

from structgen import Engine, Regex, SamplingParams
from tests.runtime.test_engine import assert_no_leak
from tests.tiny_llama import DRAFT, save_tiny_llama

N = 600  # samples per arm
LENGTH = 5
ALPHA = 1e-3  # per position; Bonferroni over LENGTH positions keeps the family < 0.5%
PROMPT = "abcabcabcabcabcab"


@pytest.fixture(scope="module")
def tiny_draft_dir(tmp_path_factory, tiny_tokenizer):
    path = tmp_path_factory.mktemp("tiny_draft_dist")
    return save_tiny_llama(path, tiny_tokenizer, seed=2, base=DRAFT, initializer_range=0.2)


def _sample(engine: Engine, first_seed: int, **kw) -> list[str]:
    params = [SamplingParams(max_tokens=LENGTH, seed=first_seed + i, **kw) for i in range(N)]
    outs = engine.generate([PROMPT] * N, params, Regex(f"[abc]{{{LENGTH}}}"))
    assert all(len(o.text) == LENGTH for o in outs), [o for o in outs if len(o.text) != LENGTH][:1]
    return [o.text for o in outs]


def _p_value(ref: list[str], got: list[str], pos: int) -> float | None:
    """Chi-square two-sample p-value of the letter at ``pos`` (None: one letter only)."""
    table = [[sum(t[pos] == c for t in arm) for c in "abc"] for arm in (ref, got)]
    cols = [i for i in range(3) if table[0][i] + table[1][i]]
    if len(cols) < 2:
        return None
    return float(chi2_contingency([[row[i] for i in cols] for row in table])[1])


@pytest.mark.parametrize("kind", ["ngram", "draft"])
@pytest.mark.parametrize("sampling", [{"temperature": 0.5}, {"temperature": 1.0, "top_k": 2}])
def test_speculative_sampling_keeps_distribution(tiny_llama_dir, tiny_draft_dir, kind, sampling):
    spec = (
        "ngram"
        if kind == "ngram"
        else {"method": "draft", "draft_model": str(tiny_draft_dir), "num_tokens": 3}
    )
    common = {"dtype": "float32", "page_size": 4}
    plain = Engine(str(tiny_llama_dir), **common)
    engine = Engine(str(tiny_llama_dir), speculative=spec, **common)
    ref = _sample(plain, 0, **sampling)
    got = _sample(engine, 100_000, **sampling)
    stats = engine.stats()
    # both branches of rejection sampling ran many times
    assert stats["spec_accepted_tokens"] > 200
    assert stats["spec_proposed_tokens"] - stats["spec_accepted_tokens"] > 200
    for pos in range(LENGTH):
        p = _p_value(ref, got, pos)
        assert p is None or p > ALPHA, f"position {pos}: p = {p:.2e}"
    assert_no_leak(engine)


def test_always_accepting_would_be_detected(tiny_llama_dir, monkeypatch):
    """Power check: a broken acceptance (every n-gram draft kept) fails the same test."""
    from structgen.runtime.sampler import draw
    from structgen.runtime.speculative import verify

    monkeypatch.setattr(
        verify,
        "accept_sampled",
        lambda probs, drafts, q, gen: (list(drafts) + [draw(probs[-1], gen)], len(drafts)),
    )
    common = {"dtype": "float32", "page_size": 4}
    ref = _sample(Engine(str(tiny_llama_dir), **common), 0, temperature=0.5)
    got = _sample(
        Engine(str(tiny_llama_dir), speculative="ngram", **common), 100_000, temperature=0.5
    )
    pvals = [_p_value(ref, got, pos) for pos in range(LENGTH)]
    assert min(p for p in pvals if p is not None) < ALPHA
