"""Our Llama over paged KV vs transformers' LlamaForCausalLM (the reference for logits)."""

from __future__ import annotations

import inspect

import pytest
import torch

from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.models import get_model_class, supported_architectures
from structgen.runtime.models.attention import paged_attention_sdpa
from structgen.runtime.models.llama import LlamaForCausalLM
from structgen.runtime.models.testing import PagedSequences

ATOL = 1e-4


def tiny_config(heads: int, kv_heads: int, tie: bool = False):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=128,
        rope_theta=1000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie,
    )


def tiny_pair(heads: int, kv_heads: int, tie: bool = False):
    """(ours, transformers reference) with the same random weights (seed 0)."""
    from transformers import LlamaForCausalLM as HFLlama

    torch.manual_seed(0)
    cfg = tiny_config(heads, kv_heads, tie)
    hf = HFLlama(cfg).eval()
    with torch.no_grad():  # HF init leaves norms at 1: randomise them so they are tested too
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    ours = LlamaForCausalLM(cfg, torch.float32, "cpu")
    ours.load_state_dict(hf.state_dict(), strict=True)
    return ours, hf


@torch.no_grad()
def hf_logits(hf, ids: list[int]) -> torch.Tensor:
    return hf(torch.tensor([ids])).logits[0].float()  # [len, vocab]


PROMPTS = {
    0: [5, 17, 99, 3, 42],
    1: [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1],
    2: list(range(30, 47)),
}
SHAPES = [
    pytest.param(4, 4, id="mha"),
    pytest.param(4, 2, id="gqa2"),
    pytest.param(8, 2, id="gqa4"),
    pytest.param(4, 1, id="mqa"),
]


def test_registry():
    assert get_model_class("LlamaForCausalLM") is LlamaForCausalLM
    assert get_model_class("llama") is LlamaForCausalLM
    assert "llama" in supported_architectures()
    from structgen.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="FooForCausalLM"):
        get_model_class("FooForCausalLM")


@pytest.mark.parametrize("heads,kv_heads", SHAPES)
@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_ragged_prefill_matches_transformers(heads, kv_heads, tie):
    ours, hf = tiny_pair(heads, kv_heads, tie)
    seqs = PagedSequences(ours, page_size=4)  # 5, 11 and 17 tokens: all cross pages
    got = seqs.step(PROMPTS, all_logits=True)
    for sid, ids in PROMPTS.items():
        ref = hf_logits(hf, ids)
        assert got[sid].shape == ref.shape
        torch.testing.assert_close(got[sid], ref, atol=ATOL, rtol=0)


@pytest.mark.parametrize("heads,kv_heads", SHAPES)
def test_chunked_prefill_and_mixed_batches(heads, kv_heads):
    ours, hf = tiny_pair(heads, kv_heads)
    seqs = PagedSequences(ours, page_size=4)
    full = {0: PROMPTS[1] + [60, 61], 1: PROMPTS[0], 2: PROMPTS[2]}
    # step 1: seq 0 prefills its first 6 tokens (chunk), seq 1 its whole prompt
    got = seqs.step({0: full[0][:6], 1: full[1]}, all_logits=True)
    torch.testing.assert_close(got[0], hf_logits(hf, full[0][:6]), atol=ATOL, rtol=0)
    torch.testing.assert_close(got[1], hf_logits(hf, full[1]), atol=ATOL, rtol=0)
    # step 2: seq 0 extends the rest of its prompt, seq 1 decodes one token, seq 2 prefills from
    # scratch
    dec1 = int(got[1][-1].argmax())
    got = seqs.step({0: full[0][6:], 1: [dec1], 2: full[2]}, all_logits=True)
    torch.testing.assert_close(got[0], hf_logits(hf, full[0])[6:], atol=ATOL, rtol=0)
    torch.testing.assert_close(got[1], hf_logits(hf, full[1] + [dec1])[-1:], atol=ATOL, rtol=0)
    torch.testing.assert_close(got[2], hf_logits(hf, full[2]), atol=ATOL, rtol=0)
    # steps 3-6: everyone decodes together
    hist = {0: full[0], 1: full[1] + [dec1], 2: full[2]}
    last = {s: got[s][-1] for s in got}
    for _ in range(4):
        nxt = {s: [int(last[s].argmax())] for s in hist}
        got = seqs.step(nxt)
        for s in hist:
            hist[s] = hist[s] + nxt[s]
            torch.testing.assert_close(got[s], hf_logits(hf, hist[s])[-1], atol=ATOL, rtol=0)
        last = got


def first_divergence_ok(a: list[int], b: list[int], ref_logits_at) -> None:
    """Greedy outputs must match, or first differ where the reference's top-2 margin is < 1e-4."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            top2 = ref_logits_at(i).topk(2).values
            margin = float(top2[0] - top2[1])
            assert margin < 1e-4, (
                f"greedy tokens diverge at step {i} although the top-2 margin is {margin}"
            )
            return
    assert len(a) == len(b)


@pytest.mark.parametrize("heads,kv_heads", SHAPES)
def test_greedy_identical_across_batch_shapes(heads, kv_heads):
    ours, hf = tiny_pair(heads, kv_heads)
    together = PagedSequences(ours, page_size=4).greedy(PROMPTS, 12)
    for sid, ids in PROMPTS.items():
        alone = PagedSequences(ours, page_size=4, seed=sid + 1).greedy({sid: ids}, 12)[sid]
        # tokens identical, or first divergence only at a near-tie of the reference (test says so)
        first_divergence_ok(
            together[sid], alone, lambda i, ids=ids, a=alone: hf_logits(hf, ids + a[:i])[-1]
        )
        first_divergence_ok(
            together[sid],
            hf_greedy(hf, ids, 12),
            lambda i, ids=ids, t=together[sid]: hf_logits(hf, ids + t[:i])[-1],
        )


@torch.no_grad()
def hf_greedy(hf, ids: list[int], n: int) -> list[int]:
    """transformers greedy with its own KV cache, EOS ignored."""
    from transformers import DynamicCache

    cache = DynamicCache(config=hf.config)
    kw = "cache" if "cache" in inspect.signature(hf.forward).parameters else "past_key_values"
    out = hf(torch.tensor([ids]), use_cache=True, **{kw: cache})
    toks = [int(out.logits[0, -1].argmax())]
    for _ in range(n - 1):
        out = hf(torch.tensor([[toks[-1]]]), use_cache=True, **{kw: cache})
        toks.append(int(out.logits[0, -1].argmax()))
    return toks


def naive_attention(q, k_slots, v_slots, batch: ForwardBatch, scale: float) -> torch.Tensor:
    """Per-sequence loop, explicit softmax: the oracle for the vectorised reference."""
    out = torch.empty_like(q)
    ps = batch.page_size
    heads, kv_heads = q.shape[1], k_slots.shape[1]
    for t in range(q.shape[0]):
        b, pos = int(batch.seq_ids[t]), int(batch.positions[t])
        slots = [int(batch.page_table[b, p // ps]) * ps + p % ps for p in range(pos + 1)]
        k = k_slots[slots].repeat_interleave(heads // kv_heads, dim=1)  # [pos+1, H, d]
        v = v_slots[slots].repeat_interleave(heads // kv_heads, dim=1)
        w = torch.softmax(torch.einsum("hd,lhd->hl", q[t], k) * scale, dim=-1)
        out[t] = torch.einsum("hl,lhd->hd", w, v)
    return out


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (6, 2), (4, 1)])
def test_paged_attention_ref_matches_naive(heads, kv_heads):
    g = torch.Generator().manual_seed(1)
    d, ps, num_pages = 8, 3, 20
    k_slots = torch.randn(num_pages * ps, kv_heads, d, generator=g)
    v_slots = torch.randn(num_pages * ps, kv_heads, d, generator=g)
    chunks, prefix = [[1] * 4, [1], [1] * 7], [5, 9, 0]
    tables = [[7, 3, 11], [2, 19, 5, 8], [4, 1, 6]]
    batch = ForwardBatch.build(chunks, prefix, tables, ps)
    q = torch.randn(batch.num_tokens, heads, d, generator=g)
    got = paged_attention_sdpa(q, k_slots, v_slots, batch, d**-0.5)
    torch.testing.assert_close(
        got, naive_attention(q, k_slots, v_slots, batch, d**-0.5), atol=1e-5, rtol=0
    )


def test_forward_writes_kv_at_out_slots():
    ours, _ = tiny_pair(4, 2)
    seqs = PagedSequences(ours, page_size=4)
    seqs.step({0: PROMPTS[0]})
    slots = [seqs.pages[0][p // 4] * 4 + p % 4 for p in range(len(PROMPTS[0]))]
    for layer in range(2):
        k = seqs.kv.k_slots(layer)
        assert k[slots].abs().sum(dim=(1, 2)).min() > 0  # every new token's row was written
        assert k[:4].abs().sum() == 0  # the scratch page stays untouched


# ---------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def smollm2_pair(smollm2, make_hf_reference):
    return smollm2, make_hf_reference(smollm2.config, smollm2.model.state_dict())


def smol_prompt(tok) -> list[int]:
    text = (
        "The history of the printing press begins in Mainz, where Johannes Gutenberg built a "
        "machine that used movable metal type, oil-based ink and a wooden screw press to print "
        "books quickly and cheaply."
    )
    ids = tok(text).input_ids
    assert len(ids) >= 32
    return ids[:32]


@pytest.mark.slow
def test_smollm2_logits_match_transformers(smollm2_pair):
    loaded, hf = smollm2_pair
    ids = smol_prompt(loaded.tokenizer)
    got = PagedSequences(loaded.model, num_pages=64, page_size=16).step({0: ids}, all_logits=True)[
        0
    ]
    ref = hf_logits(hf, ids)
    diff = float((got - ref).abs().max())
    assert diff <= 1e-3, f"max abs logit difference {diff}"


@pytest.mark.slow
def test_smollm2_greedy_32_tokens_match_transformers(smollm2_pair):
    loaded, hf = smollm2_pair
    ids = smol_prompt(loaded.tokenizer)
    ours = PagedSequences(loaded.model, num_pages=64, page_size=16).greedy({0: ids}, 32)[0]
    assert ours == hf_greedy(hf, ids, 32)


@pytest.mark.slow
def test_smollm2_config(smollm2):
    c = smollm2.config
    assert (c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads) == (
        30,
        576,
        9,
        3,
    )
    assert (c.head_dim, c.vocab_size, c.tie_word_embeddings) == (64, 49152, True)
    assert smollm2.max_model_len == 8192
    assert smollm2.eos_token_ids[0] == smollm2.tokenizer.convert_tokens_to_ids("<|im_end|>") == 2
    assert "<|im_start|>" in smollm2.chat_template


@pytest.mark.parametrize(
    "heads,kv_heads", [pytest.param(4, 2, id="gqa2"), pytest.param(4, 1, id="mqa")]
)
def test_fused_projections_match_and_never_go_stale(heads, kv_heads):
    """q/k/v and gate/up fused into one matmul each: same logits, same state_dict, and a
    replaced weight (``assign=True``) falls back to the separate layers instead of a stale copy."""
    ours, hf = tiny_pair(heads, kv_heads)
    names = set(ours.state_dict())
    assert ours.fuse_projections() == 2 * ours.config.num_hidden_layers
    assert set(ours.state_dict()) == names
    attn = ours.model.layers[0].self_attn
    assert attn.q_proj.weight.data_ptr() == attn.qkv.weight.data_ptr()  # views: memory not doubled
    seqs = PagedSequences(ours, page_size=4)
    got = seqs.step(PROMPTS, all_logits=True)
    for sid, ids in PROMPTS.items():
        torch.testing.assert_close(got[sid], hf_logits(hf, ids), atol=ATOL, rtol=0)
    # in-place update (load_state_dict copies into the views): the fused weight sees it
    torch.manual_seed(1)
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in hf.state_dict().items()}
    hf.load_state_dict(new)
    ours.load_state_dict(new)
    assert attn.qkv.valid() and ours.model.layers[0].mlp.gate_up.valid()
    got = PagedSequences(ours, page_size=4).step(PROMPTS, all_logits=True)
    torch.testing.assert_close(got[0], hf_logits(hf, PROMPTS[0]), atol=ATOL, rtol=0)
    # replaced parameters: the fused path switches itself off
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in hf.state_dict().items()}
    hf.load_state_dict(new)
    ours.load_state_dict(new, assign=True)
    assert not attn.qkv.valid() and not ours.model.layers[0].mlp.gate_up.valid()
    got = PagedSequences(ours, page_size=4).step(PROMPTS, all_logits=True)
    torch.testing.assert_close(got[2], hf_logits(hf, PROMPTS[2]), atol=ATOL, rtol=0)


def test_fused_projections_off_after_module_to():
    """``.to()`` swaps parameter data in place: the fused weight must not be used afterwards."""
    ours, hf = tiny_pair(4, 2)
    ours.fuse_projections()
    ours.to(torch.float64).to(torch.float32)  # new storage, same Parameter objects
    assert not ours.model.layers[0].self_attn.qkv.valid()
    got = PagedSequences(ours, page_size=4).step({0: PROMPTS[0]}, all_logits=True)
    torch.testing.assert_close(got[0], hf_logits(hf, PROMPTS[0]), atol=ATOL, rtol=0)
