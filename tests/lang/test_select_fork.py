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
        forks += gen("a", max_tokens=4, temperature=1.0, seed=0) + "\nnext:" + gen("b", max_tokens=3)
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
