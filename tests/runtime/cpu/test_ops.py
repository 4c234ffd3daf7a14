"""The fused CPU ops (csrc/cpuops.c) against their torch references, op by op and in a model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from structgen.kernels.paged_attention import paged_attention_ref as _paged_attention_ref
from structgen.kernels.rms_norm import add_rms_norm_ref
from structgen.runtime.cpu import ops as cpu_ops

pytestmark = pytest.mark.skipif(not cpu_ops.kernel_available(), reason="fused CPU ops not built")

DTYPES = [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)]


@pytest.fixture(params=["auto", "scalar"])
def isa(request):
    """Run each test with the AVX2 path (where the CPU has it) and with the portable scalar code."""
    cpu_ops._ext.set_isa(request.param)
    yield request.param
    cpu_ops._ext.set_isa("auto")


def paged_attention_ref(
    q, k_slots, v_slots, page_table, seq_ids, positions, page_size, scale, window=None
):
    """The one reference (structgen.kernels.paged_attention) over the C kernel's slot layout."""
    pages = (k_slots.unflatten(0, (-1, page_size)), v_slots.unflatten(0, (-1, page_size)))
    return _paged_attention_ref(q, *pages, page_table, seq_ids, positions, scale, window)


def _close(a, b, tol):
    assert a.shape == b.shape and a.dtype == b.dtype
    torch.testing.assert_close(a.float(), b.float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("rows,hidden", [(1, 576), (5, 37), (300, 64)])
@pytest.mark.parametrize("with_delta", [False, True])
def test_add_rms_norm(isa, dtype, tol, rows, hidden, with_delta):
    g = torch.Generator().manual_seed(rows * hidden)
    base = torch.randn(rows, hidden * 2, generator=g).to(dtype)[:, :hidden]  # a strided view
    delta = torch.randn(rows, hidden, generator=g).to(dtype) if with_delta else None
    weight = torch.randn(hidden, generator=g).to(dtype)
    r1, r2 = base.clone(), base.clone()
    out = cpu_ops.add_rms_norm(r1, delta, weight, 1e-5)
    ref = add_rms_norm_ref(r2, delta, weight, 1e-5)
    _close(out, ref, tol)
    _close(r1, r2, 0)  # the residual update is exact (one rounding of the same sum)


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("inter", [1536, 13, 300])
def test_silu_mul(isa, dtype, tol, inter):
    g = torch.Generator().manual_seed(inter)
    gate_up = (torch.randn(3, 2 * inter, generator=g) * 30).to(dtype)  # exp over a wide range
    gate_up[0, :4] = torch.tensor([-120.0, 120.0, 0.0, -87.5]).to(dtype)
    gate, up = gate_up[:, :inter], gate_up[:, inter:]
    _close(cpu_ops.silu_mul(gate, up), F.silu(gate) * up, tol)


def _qkv(t, heads, kv_heads, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(t, (heads + 2 * kv_heads) * d, generator=g).to(dtype)


def _split(x, heads, kv_heads, d):
    return (
        x[:, : heads * d],
        x[:, heads * d : (heads + kv_heads) * d],
        x[:, (heads + kv_heads) * d :],
    )


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("heads,kv_heads,d", [(9, 3, 64), (4, 1, 20), (2, 2, 128)])
@pytest.mark.parametrize("qk_norm", [False, True])
def test_rope_store_kv(isa, dtype, tol, heads, kv_heads, d, qk_norm):
    t = 4
    g = torch.Generator().manual_seed(d)
    pos = torch.arange(t) * 7
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    freqs = torch.outer(pos.float(), inv)
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    qn = torch.randn(d, generator=g).to(dtype) if qk_norm else None
    kn = torch.randn(d, generator=g).to(dtype) if qk_norm else None
    slots = torch.tensor([9, 2, 30, 17])
    caches = [torch.zeros(32, kv_heads, d, dtype=dtype) for _ in range(4)]
    a, b = _qkv(t, heads, kv_heads, d, dtype, 1), None
    b = a.clone()
    cpu_ops.rope_store_kv(
        *_split(a, heads, kv_heads, d), cos, sin, caches[0], caches[1], slots, qn, kn, 1e-6
    )
    cpu_ops.rope_store_kv_ref(
        *_split(b, heads, kv_heads, d), cos, sin, caches[2], caches[3], slots, qn, kn, 1e-6
    )
    _close(a, b, tol)
    _close(caches[0], caches[2], tol)
    _close(caches[1], caches[3], 0)
    assert caches[0][slots].abs().sum() > 0


@pytest.mark.parametrize("dtype,tol", DTYPES)
@pytest.mark.parametrize("heads,kv_heads,d", [(9, 3, 64), (4, 1, 20), (2, 2, 8)])
@pytest.mark.parametrize("window", [None, 5])
def test_paged_attention(isa, dtype, tol, heads, kv_heads, d, window):
    g = torch.Generator().manual_seed(heads * d)
    page_size, num_pages = 4, 24
    kc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(dtype)
    vc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(dtype)
    page_table = torch.stack(
        [torch.randperm(num_pages, generator=g)[:8] for _ in range(3)]
    )  # [3, 8]
    seq_ids = torch.tensor([0, 1, 1, 1, 2])  # a decode row, a 3-token extension, a first token
    positions = torch.tensor([29, 10, 11, 12, 0])
    q = torch.randn(5, heads, d, generator=g).to(dtype)
    out = cpu_ops.paged_attention(
        q, kc, vc, page_table, seq_ids, positions, page_size, d**-0.5, window
    )
    ref = paged_attention_ref(q, kc, vc, page_table, seq_ids, positions, page_size, d**-0.5, window)
    _close(out, ref, tol)


def test_paged_attention_matches_sdpa_over_gathered_keys():
    """The reference itself against SDPA on an explicitly gathered, causally masked sequence."""
    g = torch.Generator().manual_seed(0)
    heads, kv_heads, d, page_size = 6, 2, 16, 4
    kc = torch.randn(40, kv_heads, d, generator=g)
    vc = torch.randn(40, kv_heads, d, generator=g)
    pages = torch.tensor([[7, 2, 9, 4]])
    positions = torch.arange(10, 14)  # the last 4 tokens of a 14-token sequence
    q = torch.randn(4, heads, d, generator=g)
    out = cpu_ops.paged_attention(
        q, kc, vc, pages, torch.zeros(4, dtype=torch.int64), positions, page_size, 0.3
    )
    pos = torch.arange(14)
    slots = pages[0][pos // page_size] * page_size + pos % page_size
    k = kc[slots].transpose(0, 1).repeat_interleave(3, 0)  # [heads, 14, d]
    v = vc[slots].transpose(0, 1).repeat_interleave(3, 0)
    mask = pos[None, :] <= positions[:, None]  # [4, 14]
    ref = F.scaled_dot_product_attention(
        q.transpose(0, 1), k, v, attn_mask=mask, scale=0.3
    ).transpose(0, 1)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "mistral"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_model_step_same_with_and_without_fused_ops(tmp_path, monkeypatch, family, dtype):
    """A ragged mixed step (a 20-token prefill chunk, a decode row, a 3-token extension) gives the
    same logits through the fused ops as through the torch path (biases and a window: Qwen2; q/k
    norm: Qwen3; window: Mistral)."""
    from structgen.runtime.forward_batch import ForwardBatch
    from structgen.runtime.loader import load_model
    from tests.runtime.test_loader import tiny_tokenizer
    from tests.runtime.test_models_families import hf_model, make_config

    folder = tmp_path / "model"
    hf_model(make_config(family, heads=6, kv_heads=2)).save_pretrained(str(folder))
    tiny_tokenizer().save_pretrained(str(folder))
    model = load_model(str(folder), dtype, "cpu").model

    def run():
        kv = model.make_kv_pool(num_pages=40, page_size=4)
        prompts = [[(7 * n + i) % 250 for i in range(n)] for n in (9, 6, 20)]
        tables = [list(range(1, 12)), list(range(12, 23)), list(range(23, 34))]
        model(ForwardBatch.build(prompts, [0, 0, 0], tables, 4), kv)
        step = ForwardBatch.build(
            [[5], [7, 8, 9], list(range(30, 50))], [9, 6, 20], tables, 4, logits_rows=None
        )
        return model(step, kv)

    calls = []
    kernel = cpu_ops.paged_attention
    monkeypatch.setattr(
        cpu_ops,
        "paged_attention",
        lambda q, *a, **k: calls.append(q.shape[0]) or kernel(q, *a, **k),
    )
    with_ops = run()
    # every layer ran the kernel on every token of the step, the 20-token chunks included
    # (prefill: 9 + 6 + 20, then 1 + 3 + 20): no SDPA sub-batch on CPU
    assert calls == [35] * 2 + [24] * 2
    monkeypatch.setattr(cpu_ops, "_ENABLED", False)
    without = run()
    tol = 1e-4 if dtype == torch.float32 else 0.1
    torch.testing.assert_close(with_ops, without, rtol=tol, atol=tol)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("tokens", [1, 2, 7])
@pytest.mark.parametrize("window", [None, 300])
def test_paged_attention_key_chunks(isa, threads, tokens, window):
    """Sequences longer than one key chunk (256) are split over work items and merged
    (split-K), with and without a window that starts mid-chunk: same result as one softmax."""
    g = torch.Generator().manual_seed(tokens)
    heads, kv_heads, d, page_size = 9, 3, 64, 16
    kc = torch.randn(64 * page_size, kv_heads, d, generator=g)
    vc = torch.randn(64 * page_size, kv_heads, d, generator=g)
    page_table = torch.randperm(64, generator=g)[:40].view(2, 20)
    seq_ids = torch.arange(tokens) % 2
    positions = torch.randint(0, 20 * page_size, (tokens,), generator=g)
    positions[0] = 20 * page_size - 1  # 320 keys: two chunks
    q = torch.randn(tokens, heads, d, generator=g)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out = cpu_ops.paged_attention(
            q, kc, vc, page_table, seq_ids, positions, page_size, 0.125, window
        )
    finally:
        torch.set_num_threads(before)
    ref = paged_attention_ref(q, kc, vc, page_table, seq_ids, positions, page_size, 0.125, window)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    "heads,kv_heads,d",
    [(9, 3, 64), (8, 2, 64), (10, 2, 40), (4, 2, 64), (16, 1, 32), (34, 2, 16)],
)
def test_paged_attention_group_equals_each_head_alone(isa, kv_dtype, heads, kv_heads, d):
    """The kernel attends a KV head's query heads together (each K/V vector loaded once for the
    group, heads in tiles of 3): the result equals, bit for bit, each query head attending on
    its own over a copy of its KV head (multi-head layout), for groups of 1 .. 17 heads, head
    dims with and without a 32-wide tail, keys over one chunk (256) and not a multiple of 8."""
    g = torch.Generator().manual_seed(heads * d)
    page_size, num_pages = 16, 48
    kc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    vc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    page_table = torch.stack([torch.randperm(num_pages, generator=g)[:22] for _ in range(2)])
    seq_ids = torch.tensor([0, 1, 1])
    positions = torch.tensor([300, 5, 100])
    q = torch.randn(3, heads, d, generator=g)
    out = cpu_ops.paged_attention(q, kc, vc, page_table, seq_ids, positions, page_size, d**-0.5)
    group = heads // kv_heads
    kc1, vc1 = (c.repeat_interleave(group, dim=1).contiguous() for c in (kc, vc))
    alone = cpu_ops.paged_attention(q, kc1, vc1, page_table, seq_ids, positions, page_size, d**-0.5)
    assert torch.equal(out, alone)
    k32, v32 = kc1.float(), vc1.float()
    ref = paged_attention_ref(q, k32, v32, page_table, seq_ids, positions, page_size, d**-0.5)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float16])
def test_rope_store_kv_into_a_narrower_cache(isa, monkeypatch, kv_dtype):
    """fp32 activations into a 16-bit cache (kv_cache_dtype): each stored K/V value is the fp32
    reference's rounded to the cache dtype (round to nearest even, as torch's ``.to``; the C
    kernel, no fallback)."""
    ref = cpu_ops.rope_store_kv_ref
    monkeypatch.setattr(cpu_ops, "rope_store_kv_ref", None)  # the C kernel must run
    t, heads, kv_heads, d = 4, 9, 3, 64
    pos = torch.arange(t) * 7
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    emb = torch.cat((torch.outer(pos.float(), inv),) * 2, -1)
    slots = torch.tensor([9, 2, 30, 17])
    a = _qkv(t, heads, kv_heads, d, torch.float32, 3) * 3
    b = a.clone()
    kc, vc = (torch.zeros(32, kv_heads, d, dtype=kv_dtype) for _ in range(2))
    k32, v32 = (torch.zeros(32, kv_heads, d) for _ in range(2))
    cpu_ops.rope_store_kv(
        *_split(a, heads, kv_heads, d), emb.cos(), emb.sin(), kc, vc, slots, None, None, 1e-6
    )
    ref(*_split(b, heads, kv_heads, d), emb.cos(), emb.sin(), k32, v32, slots, None, None, 1e-6)
    _close(a, b, 1e-5)  # q stays fp32
    assert torch.equal(kc, k32.to(kv_dtype)) and torch.equal(vc, v32.to(kv_dtype))
    assert kc[slots].abs().sum() > 0


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("heads,kv_heads,d", [(9, 3, 64), (4, 1, 20)])
def test_paged_attention_over_a_narrower_cache(isa, monkeypatch, kv_dtype, heads, kv_heads, d):
    """fp32 queries over a 16-bit K/V cache: the output is fp32 and equals a float64 reference
    over the same rounded K/V up to fp32 accumulation (the C kernel, no fallback)."""
    monkeypatch.setattr(cpu_ops, "_paged_attention_ref", None)  # the C kernel must run
    g = torch.Generator().manual_seed(heads * d + 1)
    page_size, num_pages = 4, 24
    kc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    vc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    page_table = torch.stack([torch.randperm(num_pages, generator=g)[:8] for _ in range(3)])
    seq_ids = torch.tensor([0, 1, 1, 1, 2])
    positions = torch.tensor([29, 10, 11, 12, 0])
    q = torch.randn(5, heads, d, generator=g)
    out = cpu_ops.paged_attention(q, kc, vc, page_table, seq_ids, positions, page_size, d**-0.5)
    assert out.dtype == torch.float32
    ref = torch.empty(5, heads, d, dtype=torch.float64)
    group = heads // kv_heads
    for t in range(5):  # brute force in float64 over the rounded cache
        keys = torch.arange(int(positions[t]) + 1)
        rows = page_table[seq_ids[t], keys // page_size] * page_size + keys % page_size
        k, v = kc[rows].double(), vc[rows].double()  # [L, kvh, d]
        for h in range(heads):
            s = k[:, h // group] @ q[t, h].double() * d**-0.5
            ref[t, h] = torch.softmax(s, 0) @ v[:, h // group]
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("heads,kv_heads,d", [(9, 3, 64), (8, 2, 64), (4, 1, 20), (6, 3, 128)])
@pytest.mark.parametrize("threads", [1, 2])
def test_paged_attention_rows_independent_of_chunking_and_batch(
    isa, kv_dtype, heads, kv_heads, d, threads
):
    """A 300-token prompt's attention (past one key chunk of 256) is the same, bit for bit,
    prefilled in one call, in chunks of 1 .. 64 tokens, row by row alone, and with its rows
    shuffled among another sequence's rows; and it matches the reference (on some rows: the
    reference is slow)."""
    g = torch.Generator().manual_seed(heads * d + threads)
    page_size, num_pages, tokens = 16, 48, 300
    kc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    vc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    page_table = torch.stack([torch.randperm(num_pages, generator=g)[:22] for _ in range(2)])
    q = torch.randn(tokens, heads, d, generator=g)
    other = torch.randn(40, heads, d, generator=g)  # the other sequence's rows
    positions = torch.arange(tokens)
    zeros = torch.zeros(tokens, dtype=torch.int64)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)

    def attend(q_rows, seq_ids, pos):
        return cpu_ops.paged_attention(q_rows, kc, vc, page_table, seq_ids, pos, page_size, 0.125)

    try:
        whole = attend(q, zeros, positions)
        cuts = [0, 1, 8, 9, 73, 137, 200, 255, 256, 257, 290, tokens]  # chunks of 1 .. 64
        chunks = torch.cat(
            [attend(q[a:b], zeros[a:b], positions[a:b]) for a, b in zip(cuts, cuts[1:])]
        )
        rows = [0, 1, 7, 8, 100, 255, 256, 257, 299]
        alone = torch.cat([attend(q[t : t + 1], zeros[:1], positions[t : t + 1]) for t in rows])
        order = torch.randperm(tokens + 40, generator=g)  # both sequences' rows, shuffled
        mixed_q = torch.cat([q, other])[order]
        mixed_seq = torch.cat([zeros, torch.ones(40, dtype=torch.int64)])[order]
        mixed_pos = torch.cat([positions, torch.randint(0, 350, (40,), generator=g)])[order]
        mixed = attend(mixed_q, mixed_seq, mixed_pos)[order.argsort()][:tokens]
    finally:
        torch.set_num_threads(before)
    assert torch.equal(chunks, whole)
    assert torch.equal(alone, whole[rows])
    assert torch.equal(mixed, whole)
    k32, v32 = kc.float(), vc.float()
    ref = paged_attention_ref(
        q[rows], k32, v32, page_table, zeros[rows], positions[rows], page_size, 0.125
    )
    torch.testing.assert_close(whole[rows], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(
    torch.backends.cpu.get_cpu_capability() != "AVX512", reason="no AVX-512 on this CPU"
)
@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("heads,kv_heads,d", [(9, 3, 64), (8, 2, 128), (6, 2, 16), (4, 1, 40)])
def test_paged_attention_avx512_equals_avx2(kv_dtype, heads, kv_heads, d):
    """The AVX-512 loops (exp, weighted sums) give the AVX2 loops' floats bit for bit, on a step
    of a 70-token prefill chunk (keys past one chunk of 256), a decode row and a first token."""
    g = torch.Generator().manual_seed(heads * d)
    page_size, num_pages = 16, 48
    kc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    vc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    page_table = torch.stack([torch.randperm(num_pages, generator=g)[:22] for _ in range(3)])
    seq_ids = torch.tensor([0] * 70 + [1, 2])
    positions = torch.cat([torch.arange(230, 300), torch.tensor([41, 0])])
    q = torch.randn(72, heads, d, generator=g) * 4  # wide scores: exp over a wide range
    out = {}
    try:
        for isa in ("avx2", "auto"):
            cpu_ops._ext.set_isa(isa)
            out[isa] = cpu_ops.paged_attention(
                q, kc, vc, page_table, seq_ids, positions, page_size, d**-0.5
            )
    finally:
        cpu_ops._ext.set_isa("auto")
    assert torch.equal(out["avx2"], out["auto"])
    k32, v32 = kc.float(), vc.float()
    ref = paged_attention_ref(q, k32, v32, page_table, seq_ids, positions, page_size, d**-0.5)
    torch.testing.assert_close(out["auto"], ref, rtol=1e-5, atol=1e-5)


def test_float16_cache_rounding_equals_torch_at_the_edges(monkeypatch):
    """The C kernel's fp32 -> fp16 store (integer round to nearest even) equals torch's ``.to``
    bit for bit at the edges: ties at several exponents, the subnormal range and its ties,
    2^-25 (ties to 0), 65504 .. 65520 (overflow to inf), inf, -0; and attention reads each value
    back exactly (softmax over one key returns its V row)."""
    monkeypatch.setattr(cpu_ops, "rope_store_kv_ref", None)  # the C kernel must run
    monkeypatch.setattr(cpu_ops, "_paged_attention_ref", None)
    h = torch.arange(0, 0x7C01, dtype=torch.int32)  # every finite fp16 and inf, as bits
    exact = h.to(torch.int16).view(torch.float16).float()
    nxt = (h + 1).clamp(max=0x7C00).to(torch.int16).view(torch.float16).float()
    mid = (exact + nxt) / 2  # exact in fp32: the ties
    g = torch.Generator().manual_seed(5)
    between = exact + (nxt - exact) * torch.rand(exact.shape, generator=g)
    special = torch.tensor(
        [2.0**-25, 2.0**-25 * 1.0000001, 2.0**-26, 65504.0, 65519.99, 65520.0, 1e6, float("inf")]
    )
    vals = torch.cat([exact, mid, between, special])
    vals = torch.cat([vals, -vals, torch.tensor([-0.0])])
    d = 16
    vals = torch.cat([vals, torch.zeros(-len(vals) % d)]).reshape(-1, 1, d)
    t = vals.shape[0]
    q, k = torch.zeros(t, d), torch.zeros(t, d)
    cos, sin = torch.ones(t, d), torch.zeros(t, d)
    kc, vc = (torch.zeros(t, 1, d, dtype=torch.float16) for _ in range(2))
    cpu_ops.rope_store_kv(q, k, vals.reshape(t, d), cos, sin, kc, vc, torch.arange(t), None, None)
    want = vals.to(torch.float16)
    assert torch.equal(vc.view(torch.int16), want.view(torch.int16))
    finite = want.isfinite().all(-1).squeeze(1).nonzero().squeeze(1)
    finite = finite[:: max(1, len(finite) // 300)]  # rows across the whole range
    out = cpu_ops.paged_attention(  # one key per sequence: out = its V row, widened exactly
        torch.zeros(len(finite), 1, d),
        kc,
        vc,
        finite.reshape(-1, 1).contiguous(),
        torch.arange(len(finite)),
        torch.zeros(len(finite), dtype=torch.int64),
        1,
        1.0,
    )
    assert torch.equal(out.reshape(-1, d), want[finite].reshape(-1, d).float())


@pytest.mark.parametrize("kv_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("heads,kv_heads,d", [(9, 3, 64), (8, 2, 128), (4, 1, 20)])
@pytest.mark.parametrize("mode", ["avx2", "auto", "scalar"])
@pytest.mark.parametrize("page_size", [16, 12])
def test_paged_attention_rows_sharing_prefix_pages_equal_each_row_alone(
    mode, page_size, kv_dtype, heads, kv_heads, d
):
    """Decode rows of 12 sequences whose page tables share leading pages (3 prefixes of 0, 13 and
    21 pages: shared runs ending inside and past the first key chunk of 256, at and (pages of 12
    keys) off a tile of 8 keys), shuffled into one call, give each row's output alone bit for
    bit (the AVX2, AVX-512 where the CPU has it, and scalar paths), and match the reference."""
    g = torch.Generator().manual_seed(heads * d + kv_dtype.itemsize)
    num_pages, seqs = 400, 12
    kc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    vc = torch.randn(num_pages * page_size, kv_heads, d, generator=g).to(kv_dtype)
    perm = torch.randperm(num_pages, generator=g)
    prefixes = [perm[:0], perm[:13], perm[13:34]]
    own = perm[34 : 34 + seqs * 30].view(seqs, 30)
    table = [torch.cat([prefixes[s % 3], own[s]])[:30] for s in range(seqs)]
    page_table = torch.stack(table)
    prefix_keys = torch.tensor([len(prefixes[s % 3]) * page_size for s in range(seqs)])
    positions = prefix_keys + torch.randint(0, 100, (seqs,), generator=g)
    positions[0] = 5  # a row inside its first page
    order = torch.randperm(seqs, generator=g)  # shuffled, each prefix's rows mostly adjacent
    seq_ids = order[torch.sort(order % 3 + (torch.arange(seqs) == 5), stable=True).indices]
    positions = positions[seq_ids]
    q = torch.randn(seqs, heads, d, generator=g) * 2
    cpu_ops._ext.set_isa(mode)
    try:

        def attend(rows):
            return cpu_ops.paged_attention(
                q[rows], kc, vc, page_table, seq_ids[rows], positions[rows], page_size, d**-0.5
            )

        together = attend(torch.arange(seqs))
        alone = torch.cat([attend(torch.tensor([t])) for t in range(seqs)])
    finally:
        cpu_ops._ext.set_isa("auto")
    assert torch.equal(together, alone)
    k32, v32 = kc.float(), vc.float()
    ref = paged_attention_ref(q, k32, v32, page_table, seq_ids, positions, page_size, d**-0.5)
    torch.testing.assert_close(together, ref, rtol=1e-5, atol=1e-5)


def _bits(x: torch.Tensor) -> torch.Tensor:
    """The tensor's bits (NaNs compared by payload)."""
    return x.contiguous().view(torch.int16 if x.element_size() == 2 else torch.int32)


@pytest.mark.parametrize(
    "hidden,inter,heads,kv_heads,d",
    [(576, 1536, 9, 3, 64), (37, 300, 4, 1, 20), (64, 13, 2, 2, 128)],
)
def test_fp32_vector_loops_equal_the_scalar_code_bit_for_bit(
    monkeypatch, hidden, inter, heads, kv_heads, d
):
    """fp32 add_rms_norm and rope_store_kv (the rotation, and the K/V store into an fp16 cache
    through F16C) on the AVX2 path give the portable scalar code's bits, lengths off the 8-lane
    grid included; add_rms_norm's rows, whose sums of squares run 8 rows side by side, are each
    the row's bits alone (one row: no interleaving), with and without a delta; the fp16 store of
    a NaN is the scalar code's quiet NaN, its neighbours in the same 8 lanes stored as usual.
    silu_mul's exp differs by path (``sg_exp8`` / ``expf``), so there each path's product is
    checked to be its own ``silu(gate)`` (times ones: exact) times ``up``, rounded once."""
    monkeypatch.setattr(cpu_ops, "rope_store_kv_ref", None)  # the C kernel must run
    g = torch.Generator().manual_seed(hidden + d)
    t = 13  # a group of 8 norm rows, then 5 one by one
    res = torch.randn(t, hidden, generator=g) * 4
    delta = torch.randn(t, hidden, generator=g)
    weight = torch.randn(hidden, generator=g)
    gate_up = torch.randn(t, 2 * inter, generator=g) * 30
    qkv = _qkv(t, heads, kv_heads, d, torch.float32, 7) * 300
    qkv[0, -d:] = torch.tensor([float("nan"), float("inf"), -float("inf"), 7e4, 1e-6] * d)[:d]
    qkv[1, -d] = torch.tensor([0x7F800001], dtype=torch.int32).view(torch.float32)  # a payload NaN
    pos = torch.arange(t) * 11
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    emb = torch.cat((torch.outer(pos.float(), inv),) * 2, -1)
    slots = torch.tensor([3, 0, 9, 4, 1, 12, 5, 7, 2, 6, 10, 8, 11])
    out = {}
    for mode in ("scalar", "auto"):
        cpu_ops._ext.set_isa(mode)
        try:
            r, x = res.clone(), qkv.clone()
            h = cpu_ops.add_rms_norm(r, delta, weight, 1e-5)
            gate, up = gate_up[:, :inter], gate_up[:, inter:]
            s = cpu_ops.silu_mul(gate, up)
            assert torch.equal(_bits(s), _bits(cpu_ops.silu_mul(gate, torch.ones_like(up)) * up))
            no_delta = cpu_ops.add_rms_norm(res.clone(), None, weight, 1e-5)
            for dl, rows_h, rows_r in ((delta, h, r), (None, no_delta, res)):  # each row alone
                for i in range(t):
                    one = res[i : i + 1].clone()
                    hi = cpu_ops.add_rms_norm(
                        one, None if dl is None else dl[i : i + 1], weight, 1e-5
                    )
                    assert torch.equal(_bits(hi[0]), _bits(rows_h[i]))
                    assert torch.equal(_bits(one[0]), _bits(rows_r[i]))
            kc, vc = (torch.zeros(13, kv_heads, d, dtype=torch.float16) for _ in range(2))
            cpu_ops.rope_store_kv(
                *_split(x, heads, kv_heads, d),
                emb.cos(),
                emb.sin(),
                kc,
                vc,
                slots,
                None,
                None,
                1e-6,
            )
            out[mode] = [r, h, x, kc, vc]
        finally:
            cpu_ops._ext.set_isa("auto")
    for a, b in zip(out["scalar"], out["auto"]):
        assert torch.equal(_bits(a), _bits(b))
    vc = out["auto"][4]
    assert _bits(vc)[slots[0], -1, 0] == 0x7E00 and _bits(vc)[slots[1], -1, 0] == 0x7E00
    assert torch.equal(vc[slots[0], -1, 1:3].float(), torch.tensor([float("inf"), -float("inf")]))
