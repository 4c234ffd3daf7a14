"""Speculative decoding (n-gram and draft-model proposers) on tiny random Llamas: greedy
output identical to plain decoding, with and without grammars, mixed batches, prefix
cache, chunked prefill and KV pressure; grammar-invalid proposals harmless; no page leak
in the target's or the draft's pool; no unverified token in the radix tree."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from structgen import Engine, JsonSchema, Regex, SamplingParams
from structgen.errors import ConfigError
from structgen.runtime.speculative import PROPOSERS, BaseProposer, Proposal, register_proposer
from tests.runtime.test_engine import assert_no_leak
from tests.tiny_llama import DRAFT, save_tiny_llama

PROMPTS = [
    "Maria Lopez, 34, works as a nurse in Lyon. Maria Lopez, 34,",
    "The quick brown fox jumps over the lazy dog. The quick",
    "Héllo",
    '{"name":"Ada","age":36,"tags":["x","y"]} {"name":"Ada",',
]
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}
REGEX = r"(fox|dog|Ada|[a-z ]{1,9})(, (fox|dog|Ada|[a-z ]{1,9})){0,4}\."
# long forced runs between free choices: plain decoding jump-forwards (and retokenizes)
# there, so speculation must stop at each one (drafts may spell the text otherwise)
FORCED = (
    r"(Maria|Lopez|nurse|a|b|c|x|y)+( works as a (nurse|dog) in (Lyon|Paris))+ jumps "
    r'over the lazy dog(s|\.)+ "name": "(Ada|Maria)", "age": [0-9]{2}\}'
)
SETTINGS = {"dtype": "float32", "page_size": 4, "max_batch_tokens": 24, "chunked_prefill_tokens": 9}


@pytest.fixture(scope="session")
def tiny_draft_dir(tmp_path_factory, tiny_tokenizer):
    """A second, smaller tiny random Llama (other seed) with the same tokenizer."""
    path = tmp_path_factory.mktemp("tiny_draft")
    return save_tiny_llama(path, tiny_tokenizer, seed=1, base=DRAFT)


@pytest.fixture(scope="module")
def plain(tiny_llama_dir):
    return Engine(str(tiny_llama_dir), **SETTINGS)


def _spec_engine(tiny_llama_dir, tiny_draft_dir, plain, kind, **kw):
    spec = {
        "ngram": "ngram",
        "draft": {"method": "draft", "draft_model": str(tiny_draft_dir), "num_tokens": 3},
        "self_draft": {"method": "draft", "draft_model": plain, "num_tokens": 4},
        # the realistic pairing: the target's own checkpoint, quantized, as the draft
        "int8_draft": {
            "method": "draft",
            "draft_model": str(tiny_llama_dir),
            "draft_quantization": "int8",
            "num_tokens": 4,
        },
        "adaptive": {"method": "ngram", "num_tokens": 6, "adaptive": True},
    }[kind]
    return Engine(str(tiny_llama_dir), speculative=spec, **{**SETTINGS, **kw})


def tree_paths(cache) -> list[list[int]]:
    """Token sequences of every root-to-leaf path of the radix tree."""
    out, stack = [], [(cache.root, [])]
    while stack:
        node, toks = stack.pop()
        toks = toks + list(node.key)
        if not node.children:
            out.append(toks)
        stack.extend((c, toks) for c in node.children.values())
    return out


def assert_tree_verified(engine, prompts_ids, outs) -> None:
    """Every cached path is a prefix of some request's prompt + output (verified tokens)."""
    full = [p + o.token_ids for p, o in zip(prompts_ids, outs)]
    for path in tree_paths(engine.cache):
        assert any(f[: len(path)] == path for f in full), path


def assert_no_draft_leak(engine) -> None:
    proposer = engine.spec.proposer
    if hasattr(proposer, "pool"):
        assert proposer.pool.num_free_pages == proposer.pool.num_usable_pages
        assert not proposer._seqs


def _mixed_params(max_tokens: int, **kw) -> list[SamplingParams]:
    return [
        SamplingParams(max_tokens=max_tokens, temperature=0.0, speculative=(i != 2), **kw)
        for i in range(len(PROMPTS))
    ]


@pytest.mark.parametrize("kind", ["ngram", "draft", "self_draft", "int8_draft", "adaptive"])
@pytest.mark.parametrize("constraint", [None, "json", "regex", "forced"])
def test_greedy_identical_to_plain(tiny_llama_dir, tiny_draft_dir, plain, kind, constraint):
    cons = {None: None, "json": JsonSchema(SCHEMA), "regex": Regex(REGEX), "forced": Regex(FORCED)}[
        constraint
    ]
    extra = {"ignore_eos": True} if constraint is None else {}
    params = _mixed_params(40 if constraint is None else 60, **extra)
    ref = plain.generate(PROMPTS, params, cons)
    engine = _spec_engine(tiny_llama_dir, tiny_draft_dir, plain, kind)
    for _ in range(2):  # the second round runs on a warm prefix cache
        outs = engine.generate(PROMPTS, params, cons)
        assert [o.token_ids for o in outs] == [r.token_ids for r in ref]
        assert [o.finish_reason for o in outs] == [r.finish_reason for r in ref]
    if constraint == "json":
        for o in outs:
            if o.finish_reason == "stop":
                jsonschema.validate(json.loads(o.text), SCHEMA)
    stats = engine.stats()
    assert stats["spec_proposed_tokens"] > 0
    assert outs[2].metrics.spec_proposed_tokens == 0  # speculative=False
    # drafts the target agreed with; those past forced grammar text are then discarded
    agreed = stats["spec_accepted_tokens"] + stats["spec_discarded_tokens"]
    if kind == "self_draft":  # the draft is the target itself: every draft is accepted
        assert agreed == stats["spec_proposed_tokens"]
        assert stats["spec_discarded_tokens"] > 0 if constraint == "forced" else True
    if kind == "int8_draft":  # a close copy of the target: most drafts are accepted
        assert agreed > 0.5 * stats["spec_proposed_tokens"]
    ids = [engine.encode_prompt(p) for p in PROMPTS]
    assert_tree_verified(engine, ids, outs)
    assert_no_leak(engine)
    assert_no_draft_leak(engine)


@pytest.mark.parametrize("kind", ["ngram", "draft"])
def test_kv_pressure_preemption_keeps_output(tiny_llama_dir, tiny_draft_dir, plain, kind):
    params = _mixed_params(30, ignore_eos=True)
    ref = [o.token_ids for o in plain.generate(PROMPTS, params)]
    engine = _spec_engine(tiny_llama_dir, tiny_draft_dir, plain, kind, max_kv_tokens=72)
    outs = engine.generate(PROMPTS, params)
    assert [o.token_ids for o in outs] == ref
    assert engine.stats()["preemptions"] > 0
    assert_no_leak(engine)
    assert_no_draft_leak(engine)


def test_draft_catch_up_respects_prefill_budget(tiny_llama_dir, tiny_draft_dir, plain):
    """A long prompt reaches the draft in chunks: no draft forward computes more than
    ``chunked_prefill_tokens`` of one request or ``max_batch_tokens`` in all."""
    engine = _spec_engine(tiny_llama_dir, tiny_draft_dir, plain, "draft")
    runner = engine.spec.proposer.runner
    sizes: list[list[int]] = []
    forward = runner.forward

    def spy(chunks, prefix_lens, page_tables, **kw):
        sizes.append([len(c) for c in chunks])
        return forward(chunks, prefix_lens, page_tables, **kw)

    runner.forward = spy
    prompts = [" ".join(PROMPTS) * 2] + PROMPTS  # the first is ~10x chunked_prefill_tokens
    assert len(engine.encode_prompt(prompts[0])) > 8 * SETTINGS["chunked_prefill_tokens"]
    params = _mixed_params(30, ignore_eos=True)
    params = [SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True)] + params
    ref = plain.generate(prompts, params)
    outs = engine.generate(prompts, params)
    assert [o.token_ids for o in outs] == [r.token_ids for r in ref]
    assert max(max(s) for s in sizes) <= SETTINGS["chunked_prefill_tokens"]
    assert max(sum(s) for s in sizes) <= SETTINGS["max_batch_tokens"]
    assert outs[0].metrics.spec_proposed_tokens > 0  # caught up, then speculated
    assert_no_leak(engine)
    assert_no_draft_leak(engine)


def test_metrics_consistent(tiny_llama_dir, tiny_draft_dir, plain):
    engine = _spec_engine(tiny_llama_dir, tiny_draft_dir, plain, "ngram")
    outs = engine.generate(PROMPTS, _mixed_params(40, ignore_eos=True))
    stats = engine.stats()
    proposed = sum(o.metrics.spec_proposed_tokens for o in outs)
    accepted = sum(o.metrics.spec_accepted_tokens for o in outs)
    assert stats["spec_proposed_tokens"] == proposed > 0
    assert stats["spec_accepted_tokens"] == accepted
    assert 0 <= accepted <= proposed
    assert stats["spec_acceptance_rate"] == pytest.approx(accepted / proposed)
    steps = stats["spec_verify_steps"]
    assert stats["spec_mean_accepted_length"] == pytest.approx((accepted + steps) / steps)
    # fewer target forwards than tokens for the speculating requests
    for o in outs:
        if o.metrics.spec_accepted_tokens:
            assert o.metrics.num_forward_passes < o.metrics.num_generated_tokens + 1


def test_logits_processing_requests_do_not_speculate(tiny_llama_dir, tiny_draft_dir, plain):
    engine = _spec_engine(tiny_llama_dir, tiny_draft_dir, plain, "ngram")
    params = [
        SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True, **kw)
        for kw in ({"logprobs": 2}, {"presence_penalty": 0.5}, {"logit_bias": {5: 1.0}}, {})
    ]
    outs = engine.generate(PROMPTS, params)
    ref = plain.generate(PROMPTS, params)
    assert [o.token_ids for o in outs] == [r.token_ids for r in ref]
    assert [o.metrics.spec_proposed_tokens for o in outs[:3]] == [0, 0, 0]
    assert outs[3].metrics.spec_proposed_tokens > 0


class _GarbageProposer(BaseProposer):
    """Proposes random token ids (mostly grammar-invalid), deterministically."""

    def propose(self, reqs, num_tokens):
        gen = torch.Generator().manual_seed(sum(r.num_tokens for r in reqs))
        vocab = self.engine.loaded.config.vocab_size
        return [Proposal(torch.randint(0, vocab, (k,), generator=gen).tolist()) for k in num_tokens]


def test_grammar_invalid_proposals_never_reach_output(tiny_llama_dir, plain):
    register_proposer("test_garbage", _GarbageProposer)
    try:
        engine = Engine(str(tiny_llama_dir), speculative={"method": "test_garbage"}, **SETTINGS)
        params = SamplingParams(max_tokens=50, temperature=0.0)
        ref = plain.generate(PROMPTS, params, JsonSchema(SCHEMA))
        outs = engine.generate(PROMPTS, params, JsonSchema(SCHEMA))
        assert [o.token_ids for o in outs] == [r.token_ids for r in ref]
        for seed in range(2):
            sp = SamplingParams(max_tokens=50, temperature=1.0, seed=seed)
            for o in engine.generate(PROMPTS, sp, JsonSchema(SCHEMA)):
                assert o.finish_reason in ("stop", "length"), o.error
                if o.finish_reason == "stop":
                    jsonschema.validate(json.loads(o.text), SCHEMA)
        assert_no_leak(engine)
    finally:
        PROPOSERS.pop("test_garbage")


def test_rejected_drafts_pages_freed(tiny_llama_dir, plain):
    """KV rollback: after every step a running request holds no page past its known
    tokens, though (almost) every draft of 8 tokens is rejected; the draft pool likewise."""
    register_proposer("test_garbage", _GarbageProposer)
    try:
        engine = Engine(
            str(tiny_llama_dir), speculative={"method": "test_garbage", "num_tokens": 8}, **SETTINGS
        )
        page = SETTINGS["page_size"]
        step = engine.step
        worst = []

        def checked_step():
            out = step()
            for req in engine.scheduler.running:
                worst.append(len(req.page_table) - -(-req.num_tokens // page))
            return out

        engine.step = checked_step
        params = SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True)
        outs = engine.generate(PROMPTS, params)
        assert [o.token_ids for o in outs] == [r.token_ids for r in plain.generate(PROMPTS, params)]
        stats = engine.stats()
        assert stats["spec_proposed_tokens"] - stats["spec_accepted_tokens"] > 100
        assert worst and max(worst) <= 0
        assert_no_leak(engine)
    finally:
        PROPOSERS.pop("test_garbage")


def test_draft_pool_holds_only_needed_pages(tiny_llama_dir, tiny_draft_dir, plain):
    """Draft KV rollback: after each proposal a request's draft pages cover exactly
    ``known + k - 1`` tokens, also when adaptive k shrinks (surplus pages freed)."""
    spec = {
        "method": "draft",
        "draft_model": str(tiny_draft_dir),
        "num_tokens": 8,
        "adaptive": True,
    }
    engine = Engine(str(tiny_llama_dir), speculative=spec, **SETTINGS)
    proposer, page = engine.spec.proposer, SETTINGS["page_size"]
    propose = proposer.propose
    seen: list[tuple[int, int]] = []  # (pages held, pages needed)

    def checked(reqs, num_tokens):
        out = propose(reqs, num_tokens)
        for req, k in zip(reqs, num_tokens):
            seq = proposer._seqs.get(req.request_id)
            if seq is not None:
                seen.append((len(seq.pages), -(-(req.num_tokens + k - 1) // page)))
        return out

    proposer.propose = checked
    params = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
    outs = engine.generate(PROMPTS, params)
    assert [o.token_ids for o in outs] == [r.token_ids for r in plain.generate(PROMPTS, params)]
    assert len({need for _, need in seen}) > 1 and all(held == need for held, need in seen)
    assert any(o.metrics.spec_proposed_tokens for o in outs)
    assert_no_draft_leak(engine)


def test_adaptive_k_follows_acceptance(tiny_llama_dir, plain):
    """Adaptive k: near 1 token per verification when drafts are always rejected, the
    full k when they are always accepted; fixed k proposes k regardless."""
    register_proposer("test_garbage", _GarbageProposer)
    try:
        params = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
        ref = [o.token_ids for o in plain.generate(PROMPTS, params)]
        per_step = {}
        for name, spec in {
            "garbage_fixed": {"method": "test_garbage", "num_tokens": 6},
            "garbage_adaptive": {"method": "test_garbage", "num_tokens": 6, "adaptive": True},
            "self_adaptive": {
                "method": "draft",
                "draft_model": plain,
                "num_tokens": 6,
                "adaptive": True,
            },
        }.items():
            engine = Engine(str(tiny_llama_dir), speculative=spec, **SETTINGS)
            assert [o.token_ids for o in engine.generate(PROMPTS, params)] == ref
            stats = engine.stats()
            per_step[name] = stats["spec_proposed_tokens"] / stats["spec_verify_steps"]
        # fixed k = 6, less only near max_tokens or where the step's token budget trims
        assert per_step["garbage_fixed"] > 4.0, per_step
        assert per_step["garbage_adaptive"] < 1.5, per_step
        assert per_step["self_adaptive"] > 0.8 * per_step["garbage_fixed"], per_step
    finally:
        PROPOSERS.pop("test_garbage")


def test_config_errors(tiny_llama_dir):
    with pytest.raises(ConfigError, match="unknown speculative method"):
        Engine(str(tiny_llama_dir), speculative="nope", **SETTINGS)
    with pytest.raises(ConfigError, match="draft_model"):
        Engine(str(tiny_llama_dir), speculative={"method": "draft"}, **SETTINGS)
    with pytest.raises(ConfigError, match="unknown speculative setting"):
        Engine(str(tiny_llama_dir), speculative={"method": "ngram", "k": 3}, **SETTINGS)
    with pytest.raises(ConfigError, match="int3"):
        Engine(
            str(tiny_llama_dir),
            speculative={
                "method": "draft",
                "draft_model": str(tiny_llama_dir),
                "draft_quantization": "int3",
            },
            **SETTINGS,
        )
    plain = Engine(str(tiny_llama_dir), **SETTINGS)
    with pytest.raises(ConfigError, match="draft_quantization applies to a draft_model path"):
        Engine(
            str(tiny_llama_dir),
            speculative={"method": "draft", "draft_model": plain, "draft_quantization": "int8"},
            **SETTINGS,
        )
