"""Every model family vs transformers' own forward, loaded from a ``save_pretrained`` folder.

Tiny random models (seed 0, norms randomised) run through our paged runtime with a
ragged batch of 3 sequences: chunked prefill, mixed prefill/decode steps, then
joint decode. fp32 logits must match transformers' within ATOL; MoE models must
also route every token to the same experts.
"""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.loader import load_model
from structgen.runtime.models import get_model_class
from structgen.runtime.models.testing import PagedSequences
from tests.runtime.test_loader import tiny_tokenizer

ATOL = 1e-4
VOCAB = 260
BASE = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    max_position_embeddings=128,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    bos_token_id=None,
    eos_token_id=259,
    pad_token_id=None,
)


def make_config(family: str, heads: int = 4, kv_heads: int = 2, **extra):
    import transformers

    kw = dict(BASE, num_attention_heads=heads, num_key_value_heads=kv_heads, **extra)
    if family == "mistral":
        return transformers.MistralConfig(sliding_window=5, head_dim=16, **kw)
    if family == "qwen2":  # layer 1 slides (use_sliding_window, max_window_layers=1)
        return transformers.Qwen2Config(
            use_sliding_window=True, sliding_window=6, max_window_layers=1, **kw
        )
    if family == "qwen3":
        return transformers.Qwen3Config(head_dim=16, **kw)
    if family == "mixtral":
        return transformers.MixtralConfig(
            sliding_window=7, num_local_experts=4, num_experts_per_tok=2, **kw
        )
    if family == "qwen2_moe":
        kw.setdefault("norm_topk_prob", False)
        return transformers.Qwen2MoeConfig(
            **{
                **dict(
                    num_experts=6,
                    num_experts_per_tok=2,
                    moe_intermediate_size=32,
                    shared_expert_intermediate_size=48,
                    decoder_sparse_step=1,
                    mlp_only_layers=[1],
                ),
                **kw,
            }
        )
    if family == "qwen3_moe":
        kw.setdefault("norm_topk_prob", True)
        return transformers.Qwen3MoeConfig(
            **{
                **dict(
                    head_dim=16,
                    num_experts=6,
                    num_experts_per_tok=2,
                    moe_intermediate_size=32,
                    decoder_sparse_step=1,
                    mlp_only_layers=[0],
                ),
                **kw,
            }
        )
    if (
        family == "deepseek_v3"
    ):  # MLA (q LoRA or plain q_proj), layer 0 dense, 8 experts in 4 groups
        kw.update(num_hidden_layers=3, num_key_value_heads=heads)
        kw.setdefault("q_lora_rank", 48)
        kw.setdefault("rope_interleave", True)
        return transformers.DeepseekV3Config(
            **{
                **dict(
                    kv_lora_rank=32,
                    qk_rope_head_dim=8,
                    qk_nope_head_dim=16,
                    v_head_dim=12,
                    n_routed_experts=8,
                    n_shared_experts=2,
                    moe_intermediate_size=32,
                    num_experts_per_tok=3,
                    n_group=4,
                    topk_group=2,
                    routed_scaling_factor=2.5,
                    first_k_dense_replace=1,
                ),
                **kw,
            }
        )
    raise AssertionError(family)


def hf_model(config):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config).eval()
    with (
        torch.no_grad()
    ):  # HF init leaves norms at 1 and biases at 0: randomise them so they are tested
        for name, p in hf.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
        for name, b in hf.named_buffers():  # DeepSeek's routing bias (a buffer, zero at init)
            if name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn_like(b) * 0.05)
    return hf


def saved_and_loaded(tmp_path, config):
    """(ours loaded by ``load_model`` from a save_pretrained folder, transformers' model)."""
    hf = hf_model(config)
    folder = tmp_path / "model"
    hf.save_pretrained(str(folder))
    tiny_tokenizer().save_pretrained(str(folder))
    return load_model(str(folder), torch.float32, "cpu").model, hf


@torch.no_grad()
def hf_logits(hf, ids: list[int]) -> torch.Tensor:
    return hf(torch.tensor([ids])).logits[0].float()


PROMPTS = {
    0: [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 60, 61],
    1: [5, 17, 99, 3, 42],
    2: list(range(30, 47)),
}


def run_ragged_scenario(ours, hf) -> None:
    """Chunked prefill + ragged mixed batch + joint decode, every step checked against
    transformers.
    """
    seqs = PagedSequences(ours, page_size=4)
    full = PROMPTS
    got = seqs.step({0: full[0][:6], 1: full[1]}, all_logits=True)  # seq 0: first chunk
    torch.testing.assert_close(got[0], hf_logits(hf, full[0][:6]), atol=ATOL, rtol=0)
    torch.testing.assert_close(got[1], hf_logits(hf, full[1]), atol=ATOL, rtol=0)
    dec1 = int(got[1][-1].argmax())
    got = seqs.step(
        {0: full[0][6:], 1: [dec1], 2: full[2]}, all_logits=True
    )  # rest, decode, fresh prefill
    torch.testing.assert_close(got[0], hf_logits(hf, full[0])[6:], atol=ATOL, rtol=0)
    torch.testing.assert_close(got[1], hf_logits(hf, full[1] + [dec1])[-1:], atol=ATOL, rtol=0)
    torch.testing.assert_close(got[2], hf_logits(hf, full[2]), atol=ATOL, rtol=0)
    hist = {0: full[0], 1: full[1] + [dec1], 2: full[2]}
    last = {s: got[s][-1] for s in got}
    for _ in range(4):  # decode past the sliding windows
        nxt = {s: [int(last[s].argmax())] for s in hist}
        got = seqs.step(nxt)
        for s in hist:
            hist[s] = hist[s] + nxt[s]
            torch.testing.assert_close(got[s], hf_logits(hf, hist[s])[-1], atol=ATOL, rtol=0)
        last = got


ARCH = {
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
    "deepseek_v3": "DeepseekV3ForCausalLM",
}


@pytest.mark.parametrize("family", ["mistral", "qwen2", "qwen3"])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (4, 1)], ids=["mha", "gqa", "mqa"])
def test_dense_family_matches_transformers(tmp_path, family, heads, kv_heads):
    ours, hf = saved_and_loaded(tmp_path, make_config(family, heads, kv_heads))
    assert type(ours) is get_model_class(ARCH[family])
    run_ragged_scenario(ours, hf)


def test_mistral_window_is_enforced(tmp_path):
    """Sanity: the window changes the logits (so the matching test above covers it)."""
    ours, hf = saved_and_loaded(tmp_path, make_config("mistral"))
    ids = PROMPTS[2]
    windowed = PagedSequences(ours).step({0: ids}, all_logits=True)[0]
    for layer in ours.model.layers:
        layer.self_attn.sliding_window = None
    full = PagedSequences(ours).step({0: ids}, all_logits=True)[0]
    assert (windowed[:5] - full[:5]).abs().max() < 1e-5  # inside the window: identical
    assert (windowed[-1] - full[-1]).abs().max() > 1e-3


def hf_routing(hf, ids: list[int]) -> list[torch.Tensor]:
    """Top-k expert ids transformers picks in each sparse layer for a prompt."""
    picked: list[torch.Tensor] = []
    hooks = [
        layer.mlp.gate.register_forward_hook(lambda m, a, out: picked.append(out[2]))
        for layer in hf.model.layers
        if hasattr(layer.mlp, "gate")
    ]
    try:
        hf_logits(hf, ids)
    finally:
        for h in hooks:
            h.remove()
    return picked


@pytest.mark.parametrize(
    "family,extra",
    [
        ("mixtral", {}),
        ("qwen2_moe", {"norm_topk_prob": False}),
        ("qwen2_moe", {"norm_topk_prob": True}),
        ("qwen3_moe", {}),
        ("qwen3_moe", {"norm_topk_prob": False, "kv_heads": 1}),
        ("deepseek_v3", {}),
        ("deepseek_v3", {"q_lora_rank": None, "rope_interleave": False}),
    ],
    ids=[
        "mixtral",
        "qwen2moe",
        "qwen2moe-renorm",
        "qwen3moe",
        "qwen3moe-norenorm-mqa",
        "deepseekv3-mla",
        "deepseekv3-mla-plainq",
    ],
)
def test_moe_family_matches_transformers(tmp_path, family, extra):
    ours, hf = saved_and_loaded(tmp_path, make_config(family, **extra))
    assert type(ours) is get_model_class(ARCH[family])
    run_ragged_scenario(ours, hf)
    # the same experts are chosen for every token of a prompt, in every sparse layer
    ids = PROMPTS[2]
    PagedSequences(ours).step({0: ids})
    ours_ids = [
        layer.mlp.last_topk_ids
        for layer in ours.model.layers
        if hasattr(layer.mlp, "last_topk_ids")
    ]
    ref_ids = hf_routing(hf, ids)
    assert len(ours_ids) == len(ref_ids) >= 1
    for a, b in zip(ours_ids, ref_ids):
        assert torch.equal(a.sort(-1).values, b.sort(-1).values)


def test_fused_moe_ref_matches_per_token_loop():
    from structgen.runtime.models.moe import fused_moe_torch, route_topk

    g = torch.Generator().manual_seed(0)
    t, h, i, e, k = 13, 8, 6, 5, 2
    x = torch.randn(t, h, generator=g)
    w13 = torch.randn(e, 2 * i, h, generator=g)
    w2 = torch.randn(e, h, i, generator=g)
    weights, ids = route_topk(torch.randn(t, e, generator=g), k, renormalize=True)
    ref = torch.zeros(t, h)
    for tok in range(t):
        for j in range(k):
            gate, up = (w13[ids[tok, j]] @ x[tok]).chunk(2)
            ref[tok] += weights[tok, j] * (w2[ids[tok, j]] @ (torch.nn.functional.silu(gate) * up))
    torch.testing.assert_close(fused_moe_torch(x, w13, w2, weights, ids), ref, atol=1e-5, rtol=1e-5)


def test_mla_cache_is_compressed(tmp_path):
    """DeepSeek MLA caches ``kv_lora_rank + qk_rope_head_dim`` values per token and layer, once.

    Against the per-head K/V that transformers' expanded form (and a GQA cache of the same
    heads) would hold: ``H * (qk_nope + qk_rope + v)`` per token and layer.
    """
    from structgen.runtime.models.mla import LatentKVPool

    cfg = make_config("deepseek_v3")
    ours, _ = saved_and_loaded(tmp_path, cfg)
    pool = ours.make_kv_pool(num_pages=9, page_size=4)
    assert isinstance(pool, LatentKVPool)
    tokens = 9 * 4
    per_token = pool.nbytes() / tokens
    assert (
        per_token == cfg.num_hidden_layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * 4
    )  # float32
    expanded = (
        cfg.num_hidden_layers
        * cfg.num_attention_heads
        * (cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim)
        * 4
    )
    assert per_token / expanded == 40 / 144
    # the values really are views of the latent rows: writing K changes V
    pool.k_slots(0)[5, 0, :3] = torch.tensor([1.0, 2.0, 3.0])
    assert pool.v_slots(0)[5, 0, :3].tolist() == [1.0, 2.0, 3.0]


def test_deepseek_engine_decodes_like_transformers(tmp_path):
    """``Engine(model=folder)`` on DeepSeek-V3 builds the latent KV pool and decodes transformers'
    greedy tokens.
    """
    from structgen import Engine, SamplingParams
    from structgen.runtime.models.mla import LatentKVPool

    cfg = make_config("deepseek_v3")
    hf = hf_model(cfg)
    folder = tmp_path / "model"
    hf.save_pretrained(str(folder))
    tiny_tokenizer().save_pretrained(str(folder))
    eng = Engine(str(folder), dtype="float32", max_kv_tokens=256, page_size=4)
    assert isinstance(eng.pool, LatentKVPool)
    prompts = [PROMPTS[0], PROMPTS[2]]
    outs = eng.generate(prompts, SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))
    for ids, out in zip(prompts, outs):
        with torch.no_grad():
            ref = hf.generate(
                torch.tensor([ids]),
                max_new_tokens=8,
                min_new_tokens=8,
                do_sample=False,
                pad_token_id=0,
                eos_token_id=None,
            )[0, len(ids) :].tolist()
        assert out.token_ids == ref
    assert eng.memory_report()["kv_bytes"] == eng.pool.nbytes()
