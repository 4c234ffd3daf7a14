"""Engine end to end on a tiny random Llama (HF folder): batching, chunking, preemption,
constraints, stops and failure isolation, compared against transformers' greedy output."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

from structgen import Choice, Engine, JsonSchema, Regex, SamplingParams
from structgen.errors import PromptTooLongError, RequestError

PROMPTS = [
    "Maria Lopez, 34, works",
    "The quick brown fox jumps over the lazy dog. 0123",
    "Héllo",
]
GREEDY = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def hf_reference(tiny_llama_dir):
    from transformers import LlamaForCausalLM

    return LlamaForCausalLM.from_pretrained(tiny_llama_dir, torch_dtype=torch.float32).eval()


def _reference_greedy(model, ids: list[int], n: int) -> list[int]:
    out = []
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([seq])).logits[0, -1]
            tok = int(logits.argmax())
            out.append(tok)
            seq.append(tok)
    return out


def assert_no_leak(engine) -> None:
    """free + cached == total; with the cache flushed, free == total."""
    stats = engine.stats()
    assert stats["running"] == 0 and stats["waiting"] == 0
    assert stats["pages_free"] + stats["pages_cached"] == stats["pages_total"]
    engine.flush_cache()
    assert engine.pool.num_free_pages == engine.pool.num_usable_pages


def _assert_same_or_tie(model, prompt_ids, got, ref):
    """Identical, or the first divergence sits where the reference's top-2 margin < 1e-4."""
    if got == ref:
        return
    i = next(k for k, (a, b) in enumerate(zip(got, ref)) if a != b)
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids + ref[:i]])).logits[0, -1]
    top2 = logits.topk(2).values
    margin = float(top2[0] - top2[1])
    assert margin < 1e-4, f"diverged at token {i} with reference top-2 margin {margin}"
    print(f"divergence at token {i} explained by a top-2 tie (margin {margin:.2e})")


def test_batched_greedy_matches_transformers(tiny_engine, hf_reference):
    outs = tiny_engine.generate(PROMPTS, GREEDY)
    for prompt, out in zip(PROMPTS, outs):
        ids = tiny_engine.encode_prompt(prompt)
        ref = _reference_greedy(hf_reference, ids, 12)
        assert out.finish_reason == "length"
        _assert_same_or_tie(hf_reference, ids, out.token_ids, ref)
        assert out.metrics.num_prompt_tokens == len(ids)
        assert out.metrics.num_generated_tokens == 12


@pytest.mark.parametrize(
    "settings",
    [
        {"max_batch_tokens": 5},  # chunked prefill, mixed prefill/decode steps
        {"max_kv_tokens": 48, "page_size": 4},  # pool too small for all: preemption
        {"max_running_requests": 1},  # one at a time
    ],
)
def test_chunking_preemption_and_caps_keep_greedy_output(tiny_llama_dir, tiny_engine, settings):
    base = [o.token_ids for o in tiny_engine.generate(PROMPTS, GREEDY)]
    engine = Engine(str(tiny_llama_dir), dtype="float32", **settings)
    got = [o.token_ids for o in engine.generate(PROMPTS, GREEDY)]
    assert got == base
    assert_no_leak(engine)


def test_constraints_hold_per_request_in_one_batch(tiny_engine):
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 6},
            "ok": {"type": "boolean"},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["name", "ok", "kind"],
        "additionalProperties": False,
    }
    regex = r"[0-9]{3}-[a-z]{2}"
    params = SamplingParams(max_tokens=60, temperature=0.0)
    outs = tiny_engine.generate(
        ["Give JSON", "Code:", "Pick", "free text"],
        params,
        [JsonSchema(schema), Regex(regex), Choice(["yes", "no", "maybe"]), None],
    )
    assert outs[0].finish_reason == "stop", outs[0]
    jsonschema.validate(json.loads(outs[0].text), schema)
    assert outs[1].finish_reason == "stop" and re.fullmatch(regex, outs[1].text)
    assert outs[2].finish_reason == "stop" and outs[2].text in {"yes", "no", "maybe"}
    assert outs[3].finish_reason in {"stop", "length"}


def test_sampled_constraints_hold(tiny_engine):
    regex = r"(ab|cd)[0-9]{1,3}(x|yz)"
    params = [SamplingParams(max_tokens=20, temperature=1.0, seed=s) for s in range(8)]
    outs = tiny_engine.generate(["go"] * 8, params, Regex(regex))
    for out in outs:
        assert out.finish_reason == "stop" and re.fullmatch(regex, out.text), out


def test_jump_forward_saves_passes_and_keeps_validity(tiny_llama_dir):
    schema = {
        "type": "object",
        "properties": {"first_name": {"enum": ["Al", "Bo"]}, "is_member": {"type": "boolean"}},
        "required": ["first_name", "is_member"],
        "additionalProperties": False,
    }
    params = SamplingParams(max_tokens=60, temperature=0.0)
    results = {}
    for jf in (True, False):
        engine = Engine(str(tiny_llama_dir), dtype="float32", jump_forward=jf)
        out = engine.generate(["x"], params, JsonSchema(schema))[0]
        assert out.finish_reason == "stop"
        jsonschema.validate(json.loads(out.text), schema)
        results[jf] = out
    assert results[True].metrics.num_forward_passes < results[False].metrics.num_forward_passes


def test_stop_strings_and_stop_tokens(tiny_engine):
    free = tiny_engine.generate(["Maria"], GREEDY)[0]
    assert len(free.text) > 4
    stop = free.text[2:4]
    out = tiny_engine.generate(
        ["Maria"], SamplingParams(max_tokens=12, temperature=0.0, stop=[stop])
    )[0]
    assert out.finish_reason == "stop"
    assert out.text == free.text[: free.text.find(stop)]
    first = free.token_ids[1]
    out = tiny_engine.generate(
        ["Maria"], SamplingParams(max_tokens=12, temperature=0.0, stop_token_ids=[first])
    )[0]
    assert out.token_ids == free.token_ids[:1] and out.finish_reason == "stop"


def test_seeded_sampling_is_reproducible_across_batches(tiny_engine):
    p = SamplingParams(max_tokens=10, temperature=1.0, seed=1234, ignore_eos=True)
    alone = tiny_engine.generate(["Maria"], p)[0].token_ids
    batched = tiny_engine.generate(["The quick", "Maria"], [SamplingParams(seed=1), p])[1].token_ids
    assert alone == batched


def test_failed_request_does_not_hurt_the_batch(tiny_engine):
    too_long = [5] * 600  # past the tiny model's 512-token context
    # prepared requests (extraction's path) fail alone, the others run
    reqs = [tiny_engine.make_request(p, GREEDY) for p in (too_long, PROMPTS[0])]
    outs = tiny_engine.run_requests(reqs)
    assert outs[0].finish_reason == "error"
    assert outs[0].error == (  # the scheduler's refusal in generate's words
        f"prompt has 600 tokens; this engine's context allows at most "
        f"{tiny_engine.max_request_tokens() - 1} (max_model_len, or the KV cache's size where "
        "smaller)"
    )
    assert outs[1].finish_reason == "length" and len(outs[1].token_ids) == 12
    # generate refuses the whole call before anything runs (as vLLM's LLM.generate)
    with pytest.raises(PromptTooLongError, match=r"^prompts\[0\] \(of 2\): prompt has 600"):
        tiny_engine.generate([too_long, PROMPTS[0]], GREEDY)
    assert_no_leak(tiny_engine)


def test_chat_messages_and_token_id_prompts(tiny_engine):
    msgs = [{"role": "user", "content": "hi"}]
    ids = tiny_engine.encode_prompt(msgs)
    a = tiny_engine.generate([msgs], GREEDY)[0]
    b = tiny_engine.generate([ids], GREEDY)[0]
    assert a.token_ids == b.token_ids
    assert tiny_engine.tokenizer.decode(ids).startswith("<|im_start|>user\nhi<|im_end|>")


@pytest.mark.parametrize(
    "prompts, params",
    [
        ([3.5], None),
        ([""], None),
        (["a", "b"], [SamplingParams()]),
        ([[10**9]], None),
    ],
)
def test_bad_requests_raise_clear_errors(tiny_engine, prompts, params):
    with pytest.raises(RequestError):
        tiny_engine.generate(prompts, params)


def test_a_bad_prompt_or_constraint_among_several_is_named(tiny_engine):
    """With several prompts, a refused one is named by its index (no request runs);
    alone, the message is the bare one."""
    from structgen.errors import InvalidSchemaError
    from structgen.fsm.spec import JsonSchema, Regex

    with pytest.raises(RequestError, match=r"^prompts\[1\] \(of 2\): prompt is empty"):
        tiny_engine.generate(["hi", ""], GREEDY)
    with pytest.raises(InvalidSchemaError, match=r"^prompts\[1\] \(of 2\): .*/type"):
        tiny_engine.generate(["a", "b"], GREEDY, [Regex("[0-9]+"), JsonSchema({"type": "strng"})])
    with pytest.raises(RequestError, match="^prompt is empty"):
        tiny_engine.generate([""], GREEDY)
    assert_no_leak(tiny_engine)


def test_unknown_engine_setting_is_named(tiny_llama_dir):
    from structgen.errors import ConfigError

    with pytest.raises(ConfigError, match="max_kv_tokenz"):
        Engine(str(tiny_llama_dir), max_kv_tokenz=10)


def test_grammar_failure_mid_generation_fails_only_that_request(tiny_engine, monkeypatch):
    from structgen.errors import GrammarTooComplexError
    from structgen.fsm import compile_regex

    grammar = compile_regex(r"[a-z]{1,40}", tiny_engine.vocab)
    real = type(grammar.matcher())

    class Exploding(real):
        def fill_bitmask(self, bitmask, row):
            if self.num_accepted_tokens >= 2:
                raise GrammarTooComplexError("state budget exceeded")
            return super().fill_bitmask(bitmask, row)

    monkeypatch.setattr(
        type(grammar),
        "matcher",
        lambda self, max_tokens=None: Exploding(self.token_index, max_tokens),
    )
    outs = tiny_engine.generate(
        ["a", "b"], SamplingParams(max_tokens=10, temperature=0.0), [grammar, None]
    )
    assert outs[0].finish_reason == "error" and "state budget" in outs[0].error
    assert outs[1].finish_reason in {"stop", "length"} and outs[1].error is None
    assert_no_leak(tiny_engine)
