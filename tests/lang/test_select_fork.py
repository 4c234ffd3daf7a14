"""select against transformers' log-probabilities; fork shares the prefix through the cache."""

from __future__ import annotations

import pytest
import torch

import structgen
from structgen import gen, select
from structgen.lang.backend import as_backend
from structgen.lang.state import ProgramState

PREFIX = "Maria Lopez, 34, works as a nurse in Lyon. The quick brown fox jumps.\nAnswer:"
OPTIONS = ["nurse", " nurse", "the lazy dog", "0123", "Lyon"]


@pytest.fixture(scope="module")
def hf_model(tiny_llama_dir):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(tiny_llama_dir, torch_dtype=torch.float32).eval()


def hf_score(model, tokenizer, prefix: str, option: str) -> float:
    """Mean log-probability of the option's tokens (past the common prefix), by transformers."""
    base = tokenizer.encode(prefix, add_special_tokens=False)
    full = tokenizer.encode(prefix + option, add_special_tokens=False)
    k = 0
    while k < min(len(base), len(full)) and base[k] == full[k]:
        k += 1
    with torch.no_grad():
        logits = model(torch.tensor([full])).logits[0].float()
    lp = torch.log_softmax(logits, dim=-1)
    vals = [lp[j - 1, full[j]].item() for j in range(max(k, 1), len(full))]
    return sum(vals) / len(vals)


def test_select_picks_highest_normalised_logprob(tiny_engine, hf_model):
    s = ProgramState(as_backend(tiny_engine))
    s += PREFIX + select("x", OPTIONS)
    expected = {o: hf_score(hf_model, tiny_engine.tokenizer, PREFIX, o) for o in OPTIONS}
    got = s.select_scores("x")
    for o in OPTIONS:
        assert got[o] == pytest.approx(expected[o], abs=2e-3)
    assert s["x"] == max(OPTIONS, key=lambda o: expected[o])
    assert s.text() == PREFIX + s["x"]


def test_select_inside_assistant(tiny_engine):
    @structgen.function
    def prog(s):
        s += structgen.user("Spam or ham?")
        s += structgen.assistant("Category: " + select("c", ["spam", "ham"]))

    s = prog.run(backend=tiny_engine)
    assert s["c"] in ("spam", "ham")
    assert s.messages()[-1]["content"] == "Category: " + s["c"]


def test_fork_branches_share_the_prefix(tiny_engine):
    tiny_engine.flush_cache()
    long_prefix = "The quick brown fox jumps over the lazy dog. " * 4 + "Answer:"

    @structgen.function
    def prog(s):
        s += long_prefix
        forks = s.fork(3)
        forks += (
            gen("a", max_tokens=4, temperature=1.0, seed=0) + "\nnext:" + gen("b", max_tokens=3)
        )
        s.join(forks)
        s += "\nDone."

    s = prog.run(backend=tiny_engine)
    assert len(s["a"]) == 3 and len(s["b"]) == 3
    assert s.text() == long_prefix + "\nDone."
    n_prompt = len(tiny_engine.tokenizer.encode(long_prefix))

    st = ProgramState(as_backend(tiny_engine))
    st += long_prefix
    forks = st.fork(3)
    forks += gen("a", max_tokens=4)
    cached = [f.outputs["a"].metrics.cached_tokens for f in forks]
    page = tiny_engine.config.page_size
    assert all(c >= (n_prompt // page - 1) * page for c in cached[1:]), cached
    # greedy branches agree with one Engine.generate call
    ref = tiny_engine.generate([long_prefix], structgen.SamplingParams(max_tokens=4, temperature=0))
    assert [f["a"] for f in forks] == [ref[0].text] * 3


def test_fork_branches_can_be_extended_one_by_one(tiny_engine):
    st = ProgramState(as_backend(tiny_engine))
    st += "Pick:"
    forks = st.fork(2)
    for i, f in enumerate(forks):
        f += f" {i}" + gen("v", max_tokens=3)
    assert forks[0].text().startswith("Pick: 0") and forks[1].text().startswith("Pick: 1")
    forks += ["A" + gen("w", max_tokens=2), "B" + gen("w", max_tokens=2)]
    assert "w" in forks[0] and "w" in forks[1]
    assert "v" not in st


def test_select_reuses_the_cached_prompt(tiny_engine, hf_model):
    """select's prompt-logprob requests take the shared prompt from the radix cache."""
    tiny_engine.flush_cache()
    prefix = "The quick brown fox jumps over the lazy dog. " * 3 + "Answer:"
    before = tiny_engine.stats()["prefix_hit_tokens"]
    s = ProgramState(as_backend(tiny_engine))
    s += prefix + select("x", OPTIONS)
    hits = tiny_engine.stats()["prefix_hit_tokens"] - before
    n_prompt = len(tiny_engine.tokenizer.encode(prefix, add_special_tokens=False))
    page = tiny_engine.config.page_size
    # every option after the first reuses the prompt's whole pages (less the last row)
    per_option = ((n_prompt - 1) // page) * page
    assert per_option > 0 and hits >= (len(OPTIONS) - 1) * per_option, (hits, per_option)
    # and the scores are still transformers' (cache-served rows change nothing)
    for o in OPTIONS:
        assert s.select_scores("x")[o] == pytest.approx(
            hf_score(hf_model, tiny_engine.tokenizer, prefix, o), abs=2e-3
        )


def test_prompt_logprobs_start_serves_the_prefix_from_cache(tiny_engine):
    """Engine level: the same log-probs from the start position on, with cache hits."""
    from structgen import SamplingParams

    tiny_engine.flush_cache()
    ids = tiny_engine.tokenizer.encode(
        "one two three four five six seven eight nine ten", add_special_tokens=False
    )
    full = tiny_engine.generate(
        [ids], SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0)
    )[0]
    assert full.metrics.cached_tokens == 0  # start 0: the whole prompt is computed
    start = len(ids) - 3
    part = tiny_engine.generate(
        [ids],
        SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0, prompt_logprobs_start=start),
    )[0]
    assert part.metrics.cached_tokens > 0 and part.metrics.cached_tokens <= start - 1
    for j in range(start, len(ids)):
        assert part.prompt_logprobs[j][ids[j]] == pytest.approx(
            full.prompt_logprobs[j][ids[j]], abs=1e-4
        )
    # cold cache: the whole prompt is computed, but log-probs only from the start on
    tiny_engine.flush_cache()
    cold = tiny_engine.generate(
        [ids],
        SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0, prompt_logprobs_start=start),
    )[0]
    assert cold.metrics.cached_tokens == 0 and len(cold.prompt_logprobs) == len(ids)
    assert all(e is None for e in cold.prompt_logprobs[:start])
    assert [cold.prompt_logprobs[j][ids[j]] for j in range(start, len(ids))] == pytest.approx(
        [full.prompt_logprobs[j][ids[j]] for j in range(start, len(ids))], abs=1e-4
    )


def test_broadcast_fork_seeds_branch_i_with_seed_plus_i(tiny_engine):
    prefix = "Once upon a time"
    st = ProgramState(as_backend(tiny_engine))
    st += prefix
    forks = st.fork(3)
    forks += gen("a", max_tokens=6, temperature=1.0, seed=7, token_healing=False)
    got = [f["a"] for f in forks]
    refs = [
        tiny_engine.generate(
            [prefix], structgen.SamplingParams(max_tokens=6, temperature=1.0, seed=7 + i)
        )[0].text
        for i in range(3)
    ]
    assert got == refs
    assert len(set(got)) > 1  # distinct seeds give distinct samples
    again = st.fork(3)
    again += gen("a", max_tokens=6, temperature=1.0, seed=7, token_healing=False)
    assert [f["a"] for f in again] == got  # deterministic
    # per-branch expressions keep their seeds as written
    mine = st.fork(2)
    mine += [gen("a", max_tokens=6, temperature=1.0, seed=7, token_healing=False)] * 2
    assert [f["a"] for f in mine] == [refs[0], refs[0]]
