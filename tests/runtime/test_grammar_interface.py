"""The engine drives any grammar through the interfaces of structgen/fsm/base.py only: a
grammar with no regex text (``DigitRun``) is enforced as a regex grammar is."""

from __future__ import annotations

from structgen import SamplingParams
from tests.fsm._digit_run import DigitRun


def test_a_grammar_without_regex_text_is_enforced(tiny_engine):
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=11, n=2)
    prompts = ["The year was", "Count:"]
    outs = tiny_engine.generate(prompts, params, DigitRun(4))
    outs += tiny_engine.generate(prompts, params, DigitRun(4).compile(tiny_engine.vocab))
    for out in outs:
        assert len(out.choices) == 2
        for branch in out.choices:
            assert branch.finish_reason == "stop", branch.error
            assert len(branch.token_ids) == 4 and branch.text.isdigit() and len(branch.text) == 4
