"""Masks computed on the grammar pool while the forward runs (``grammar_threads >= 1``).

Reference: the same engine settings with ``grammar_threads=0`` (every row filled on the
engine thread when sampling), greedy, on the tiny random Llama: outputs must be identical
token for token, plain and speculative, and a request whose grammar raises must fail
alone. A counter on ``StepMasks._fill`` checks that the rows really came from the pool.
"""

from __future__ import annotations

import pytest

from structgen import Choice, Engine, JsonSchema, Regex, SamplingParams
from structgen.errors import ConfigError, GrammarTooComplexError
from structgen.fsm import compile_regex
from structgen.runtime.config import EngineConfig
from structgen.runtime.step_masks import StepMasks

SETTINGS = {"dtype": "float32", "page_size": 4, "max_batch_tokens": 40, "chunked_prefill_tokens": 9}
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"enum": ["x", "yz"]}, "maxItems": 3},
    },
    "required": ["name", "n"],
    "additionalProperties": False,
}
PROMPTS = ["Give JSON", "Code:", "Pick one", "free text", "More JSON about Ada, 36:"]
CONSTRAINTS = [
    JsonSchema(SCHEMA),
    Regex(r"[0-9]{3}-[a-z]{2,5}"),
    Choice(["yes", "no", "maybe"]),
    None,
    JsonSchema({"type": "array", "items": {"type": "number"}, "maxItems": 4}),
]
GREEDY = SamplingParams(max_tokens=24, temperature=0.0)


@pytest.fixture
def fills(monkeypatch) -> list[int]:
    """Rows filled on the pool, per job (appended by a wrapper of ``StepMasks._fill``)."""
    counts: list[int] = []
    real = StepMasks._fill

    def counted(self, pool):
        counts.append(int(self.bitmask.shape[0]))
        return real(self, pool)

    monkeypatch.setattr(StepMasks, "_fill", counted)
    return counts


def _run(tiny_llama_dir, **kw) -> list[list[int]]:
    engine = Engine(str(tiny_llama_dir), **{**SETTINGS, **kw})
    try:
        outs = engine.generate(PROMPTS, GREEDY, CONSTRAINTS)
    finally:
        engine.close()
    assert all(o.error is None for o in outs), [o.error for o in outs]
    return [o.token_ids for o in outs]


@pytest.fixture(scope="module")
def inline(tiny_llama_dir) -> list[list[int]]:
    """The reference: every row filled on the engine thread when sampling."""
    return _run(tiny_llama_dir, grammar_threads=0)


@pytest.mark.parametrize("threads", [1, 3])
def test_overlapped_masks_keep_greedy_outputs(tiny_llama_dir, inline, fills, threads):
    assert _run(tiny_llama_dir, grammar_threads=threads) == inline
    assert len(fills) > 10 and max(fills) >= 3  # several constrained rows per step


def test_overlapped_verification_masks_keep_speculative_outputs(tiny_llama_dir, inline, fills):
    spec = {"method": "ngram", "num_tokens": 4}
    # speculation is lossless: the plain inline output is the reference
    assert _run(tiny_llama_dir, grammar_threads=2, speculative=spec) == inline
    assert any(n > len(PROMPTS) for n in fills)  # draft rows were filled ahead


def test_a_grammar_error_fails_only_its_request(tiny_llama_dir, fills, monkeypatch):
    engine = Engine(str(tiny_llama_dir), grammar_threads=2, **SETTINGS)
    grammar = compile_regex(r"[a-z]{1,40}", engine.vocab)
    real = type(grammar.matcher())

    class Exploding(real):
        def fill_bitmask(self, bitmask, row):
            if self.num_accepted_tokens >= 2:
                raise GrammarTooComplexError("state budget exceeded")
            return super().fill_bitmask(bitmask, row)

    make = type(grammar).matcher
    monkeypatch.setattr(  # only this grammar's matchers explode
        type(grammar),
        "matcher",
        lambda self, max_tokens=None: (
            Exploding(self.token_index) if self is grammar else make(self, max_tokens)
        ),
    )
    try:
        outs = engine.generate(
            ["a", "b", "c"],
            SamplingParams(max_tokens=10, temperature=0.0),
            [grammar, Regex(r"[0-9]{1,12}"), None],
        )
        assert outs[0].finish_reason == "error" and "state budget" in outs[0].error
        assert outs[1].error is None and outs[1].text.isdigit()
        assert outs[2].error is None and outs[2].finish_reason in {"stop", "length"}
        assert fills
        stats = engine.stats()
        assert (
            stats["running"] == 0
            and stats["pages_free"] + stats["pages_cached"] == (stats["pages_total"])
        )
    finally:
        engine.close()


def test_grammar_threads_setting():
    assert EngineConfig(device="cpu").resolved().grammar_threads == 0
    assert EngineConfig(device="cpu", grammar_threads=3).resolved().grammar_threads == 3
    assert 1 <= EngineConfig(device="cuda").resolved().grammar_threads <= 4
    for bad in (-1, 1.5, True, "many"):
        with pytest.raises(ConfigError, match="grammar_threads"):
            EngineConfig(grammar_threads=bad)
