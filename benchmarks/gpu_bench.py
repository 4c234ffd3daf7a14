"""GPU benchmark of structgen's Triton kernels at SmolLM2-135M shapes (random weights).

Needs only torch, triton and structgen.kernels; no model file, no network. For each
kernel: time, achieved TB/s or TFLOP/s and its fraction of the H200's peak (4.8 TB/s
HBM, 990 dense bf16 TFLOP/s), beside the torch baseline (SDPA / eager ops / the kernel's
torch reference) measured in the same run; then a decode-step estimate for the whole
model (sum of per-layer kernel and GEMM times, batch 1 and 64).

    python benchmarks/gpu_bench.py            # one GPU, < 5 minutes
    python benchmarks/gpu_bench.py --smoke    # CPU, Triton interpreter, tiny shapes (tests)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

if "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import torch
import torch.nn.functional as F

from structgen.kernels.apply_token_bitmask import apply_token_bitmask
from structgen.kernels.extend_attention import extend_attention
from structgen.kernels.fused_moe import fused_moe
from structgen.kernels.paged_decode_attention import paged_decode_attention
from structgen.kernels.quant_matmul import quant_matmul, quantize_ref
from structgen.kernels.rms_norm import rms_norm
from structgen.kernels.rotary import rotary
from structgen.kernels.store_kv import store_kv

PEAK_TBS = 4.8  # H200 HBM3e, TB/s
PEAK_TFLOPS = 990.0  # H200 dense bf16 tensor core, TFLOP/s


@dataclass(frozen=True)
class Shapes:
    layers: int = 30
    hidden: int = 576
    heads: int = 9
    kv_heads: int = 3
    head_dim: int = 64
    vocab: int = 49152
    inter: int = 1536
    page_size: int = 16
    decode_batch: int = 64
    context: int = 1024
    extend_batch: int = 4
    extend_prefix: int = 512
    extend_len: int = 512
    tokens: int = 4096  # rows for norm / rotary / store_kv
    experts: int = 8
    top_k: int = 2
    group_size: int = 64


SMOKE = Shapes(
    layers=2, hidden=64, heads=3, kv_heads=1, head_dim=16, vocab=200, inter=64, page_size=4,
    decode_batch=2, context=21, extend_batch=2, extend_prefix=5, extend_len=7, tokens=5,
    experts=4, top_k=2, group_size=16,
)  # fmt: skip


def bench(fn, device: torch.device, iters: int) -> float:
    """Median milliseconds of ``fn()`` (CUDA events after warm-up; one wall-clock run on CPU)."""
    if device.type != "cuda":
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=max(iters, 20), return_mode="median"))


class Report:
    def __init__(self) -> None:
        print(f"{'kernel':<34}{'triton ms':>11}{'achieved':>16}{'% peak':>8}{'baseline':>20}{'base ms':>10}{'speedup':>9}")

    def row(self, name, ms, base_name, base_ms, nbytes=0.0, flops=0.0) -> None:
        if flops:
            val, peak, unit = flops / ms / 1e9, PEAK_TFLOPS, "TFLOP/s"
        else:
            val, peak, unit = nbytes / ms / 1e9, PEAK_TBS, "TB/s"
        speed = base_ms / ms if ms > 0 else float("nan")
        print(f"{name:<34}{ms:>11.4f}{val:>9.3f} {unit:<7}{100 * val / peak:>7.1f}%{base_name:>20}{base_ms:>10.4f}{speed:>8.2f}x")


def _paged(s: Shapes, batch: int, length: int, dtype, dev):
    pages_per = -(-length // s.page_size)
    num_pages = batch * pages_per + 1
    k = torch.randn(num_pages, s.page_size, s.kv_heads, s.head_dim, dtype=dtype, device=dev)
    v = torch.randn_like(k)
    table = (torch.randperm(num_pages - 1, device=dev)[: batch * pages_per] + 1).view(batch, pages_per)
    return k, v, table.to(torch.int32)


def attention_benches(s: Shapes, dtype, dev, it, rep: Report, results: dict) -> None:
    esz = torch.finfo(dtype).bits // 8
    b, ctx, d = s.decode_batch, s.context, s.head_dim
    k, v, table = _paged(s, b, ctx, dtype, dev)
    q = torch.randn(b, s.heads, d, dtype=dtype, device=dev)
    lens = torch.full((b,), ctx, dtype=torch.int32, device=dev)
    ms = bench(lambda: paged_decode_attention(q, k, v, table, lens, d**-0.5, backend="triton"), dev, it)
    kc = k[table.long()].flatten(1, 2)[:, :ctx].transpose(1, 2)  # [B, kv_heads, ctx, d] contiguous copy
    vc = v[table.long()].flatten(1, 2)[:, :ctx].transpose(1, 2)
    kr, vr = kc.repeat_interleave(s.heads // s.kv_heads, 1), vc.repeat_interleave(s.heads // s.kv_heads, 1)
    base = bench(lambda: F.scaled_dot_product_attention(q[:, :, None], kr, vr), dev, it)
    rep.row(f"decode attn B={b} ctx={ctx}", ms, "SDPA (contig KV)", base, nbytes=2 * b * ctx * s.kv_heads * d * esz)
    results["decode_attn_ms"] = ms

    b, pre, ext = s.extend_batch, s.extend_prefix, s.extend_len
    k, v, table = _paged(s, b, pre + ext, dtype, dev)
    q = torch.randn(b * ext, s.heads, d, dtype=dtype, device=dev)
    pl = torch.full((b,), pre, dtype=torch.int32, device=dev)
    el = torch.full((b,), ext, dtype=torch.int32, device=dev)
    ms = bench(lambda: extend_attention(q, k, v, table, pl, el, d**-0.5, ext, backend="triton"), dev, it)
    qs = q.view(b, ext, s.heads, d).transpose(1, 2)
    kc = k[table.long()].flatten(1, 2)[:, : pre + ext].transpose(1, 2).repeat_interleave(s.heads // s.kv_heads, 1)
    mask = torch.ones(ext, pre + ext, dtype=torch.bool, device=dev).tril(pre)
    base = bench(lambda: F.scaled_dot_product_attention(qs, kc, kc, attn_mask=mask), dev, it)
    flops = 4 * b * s.heads * ext * (pre + ext / 2) * d
    rep.row(f"extend attn B={b} {pre}+{ext}", ms, "SDPA (contig KV)", base, flops=flops)


def elementwise_benches(s: Shapes, dtype, dev, it, rep: Report, results: dict) -> None:
    esz = torch.finfo(dtype).bits // 8
    t, h = s.tokens, s.hidden
    x = torch.randn(t, h, dtype=dtype, device=dev)
    r = torch.randn(t, h, dtype=dtype, device=dev)
    w = torch.randn(h, dtype=dtype, device=dev)
    ms = bench(lambda: rms_norm(x, w, 1e-5, r, backend="triton"), dev, it)
    base = bench(lambda: rms_norm(x, w, 1e-5, r, backend="torch"), dev, it)
    rep.row(f"rms_norm+residual T={t}", ms, "eager torch", base, nbytes=4 * t * h * esz)
    results["rms_norm_ms_per_token"] = ms / t

    q = torch.randn(t, s.heads, s.head_dim, dtype=dtype, device=dev)
    k = torch.randn(t, s.kv_heads, s.head_dim, dtype=dtype, device=dev)
    cos = torch.randn(t, s.head_dim, device=dev).to(dtype)
    sin = torch.randn(t, s.head_dim, device=dev).to(dtype)
    ms = bench(lambda: rotary(q, k, cos, sin, backend="triton"), dev, it)
    base = bench(lambda: rotary(q, k, cos, sin, backend="torch"), dev, it)
    rep.row(f"rotary T={t}", ms, "eager torch", base, nbytes=2 * (q.numel() + k.numel()) * esz)
    results["rotary_ms_per_token"] = ms / t

    slots = torch.randperm(t * 2, device=dev)[:t]
    cache_k = torch.empty(t * 2, s.kv_heads, s.head_dim, dtype=dtype, device=dev)
    cache_v = torch.empty_like(cache_k)
    ms = bench(lambda: store_kv(k, k, cache_k, cache_v, slots, backend="triton"), dev, it)
    base = bench(lambda: store_kv(k, k, cache_k, cache_v, slots, backend="torch"), dev, it)
    rep.row(f"store_kv T={t}", ms, "index_copy_", base, nbytes=4 * k.numel() * esz)
    results["store_kv_ms_per_token"] = ms / t

    b = s.decode_batch
    logits = torch.randn(b, s.vocab, dtype=torch.float32, device=dev)
    mask = torch.randint(-(2**31), 2**31 - 1, (b, -(-s.vocab // 32)), device=dev, dtype=torch.int64).to(torch.int32)
    ms = bench(lambda: apply_token_bitmask(logits, mask, backend="triton"), dev, it)
    base = bench(lambda: apply_token_bitmask(logits, mask, backend="torch"), dev, it)
    rep.row(f"token bitmask B={b} V={s.vocab}", ms, "torch reference", base, nbytes=2 * logits.numel() * 4)
    results["bitmask_ms"] = ms


def gemm_benches(s: Shapes, dtype, dev, it, rep: Report, results: dict) -> None:
    m, n, k = s.decode_batch, 2 * s.inter, s.hidden
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, device=dev)
    dense = w.to(dtype)
    base = bench(lambda: F.linear(x, dense), dev, it)
    for bits, gs in ((8, None), (4, s.group_size)):
        qw, sc, zp = quantize_ref(w, bits, gs)
        ms = bench(lambda: quant_matmul(x, qw, sc, zp, bits, gs, backend="triton"), dev, it)
        wbytes = qw.numel() * qw.element_size() + sc.numel() * 4 * (1 if zp is None else 2)
        rep.row(f"quant_matmul w{bits}a16 {m}x{n}x{k}", ms, "F.linear (dense)", base, nbytes=wbytes)

    t, e = s.decode_batch, s.experts
    xg = torch.randn(t, s.hidden, dtype=dtype, device=dev)
    wgu = torch.randn(e, 2 * s.inter, s.hidden, device=dev).to(dtype) / s.hidden**0.5
    wd = torch.randn(e, s.hidden, s.inter, device=dev).to(dtype) / s.inter**0.5
    tw, ti = torch.randn(t, e, device=dev).softmax(-1).topk(s.top_k, -1)
    ms = bench(lambda: fused_moe(xg, wgu, wd, tw, ti, backend="triton"), dev, it)
    base = bench(lambda: fused_moe(xg, wgu, wd, tw, ti, backend="torch"), dev, it)
    rep.row(f"fused_moe T={t} E={e} top{s.top_k}", ms, "torch reference", base, flops=6 * t * s.top_k * s.hidden * s.inter)


def decode_step_estimate(s: Shapes, dtype, dev, it) -> None:
    """Per-step decode time of the whole model from its parts (kernels + torch GEMMs)."""
    print("\ndecode step estimate (sum of parts; no CUDA graphs, no launch overlap):")
    d = s.head_dim
    for b in (1, s.decode_batch):
        x = torch.randn(b, s.hidden, dtype=dtype, device=dev)
        r = torch.randn_like(x)
        w = torch.randn(s.hidden, dtype=dtype, device=dev)
        wqkv = torch.randn((s.heads + 2 * s.kv_heads) * d, s.hidden, dtype=dtype, device=dev)
        wo = torch.randn(s.hidden, s.heads * d, dtype=dtype, device=dev)
        wgu = torch.randn(2 * s.inter, s.hidden, dtype=dtype, device=dev)
        wdn = torch.randn(s.hidden, s.inter, dtype=dtype, device=dev)
        wlm = torch.randn(s.vocab, s.hidden, dtype=dtype, device=dev)
        act = torch.randn(b, s.inter, dtype=dtype, device=dev)
        q = torch.randn(b, s.heads, d, dtype=dtype, device=dev)
        kk = torch.randn(b, s.kv_heads, d, dtype=dtype, device=dev)
        cos = torch.randn(b, d, device=dev).to(dtype)
        kc, vc, table = _paged(s, b, s.context, dtype, dev)
        lens = torch.full((b,), s.context, dtype=torch.int32, device=dev)
        slots = torch.arange(b, device=dev)
        parts = {
            "2x rms_norm": 2 * bench(lambda: rms_norm(x, w, 1e-5, r, backend="triton"), dev, it),
            "qkv+o+mlp GEMMs": bench(lambda: F.linear(x, wqkv), dev, it) + bench(lambda: F.linear(q.view(b, -1), wo), dev, it)
            + bench(lambda: F.linear(x, wgu), dev, it) + bench(lambda: F.linear(act, wdn), dev, it),
            "rotary": bench(lambda: rotary(q, kk, cos, cos, backend="triton"), dev, it),
            "store_kv": bench(lambda: store_kv(kk, kk, kc.view(-1, s.kv_heads, d), vc.view(-1, s.kv_heads, d), slots, backend="triton"), dev, it),
            "decode attn": bench(lambda: paged_decode_attention(q, kc, vc, table, lens, d**-0.5, backend="triton"), dev, it),
        }  # fmt: skip
        per_layer = sum(parts.values())
        head = bench(lambda: F.linear(x, wlm), dev, it)
        step = s.layers * per_layer + head
        detail = ", ".join(f"{k} {v * 1e3:.1f}us" for k, v in parts.items())
        print(f"  batch {b:>3} ctx {s.context}: {step:.3f} ms/step -> {b / step * 1e3:,.0f} tok/s   (per layer: {detail}; lm_head {head * 1e3:.1f}us)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes on CPU under the Triton interpreter")
    ap.add_argument("--iters", type=int, default=100, help="timed repetitions (CUDA)")
    args = ap.parse_args(argv)
    if args.smoke:
        shapes, dev, dtype = SMOKE, torch.device("cpu"), torch.float32
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: run with --smoke for the CPU interpreter check", file=sys.stderr)
            return 2
        shapes, dev, dtype = Shapes(), torch.device("cuda"), torch.bfloat16
        print(f"device: {torch.cuda.get_device_name(dev)}; torch {torch.__version__}")
    torch.manual_seed(0)
    t0 = time.perf_counter()
    rep, results = Report(), {}
    with torch.no_grad():
        attention_benches(shapes, dtype, dev, args.iters, rep, results)
        elementwise_benches(shapes, dtype, dev, args.iters, rep, results)
        gemm_benches(shapes, dtype, dev, args.iters, rep, results)
        decode_step_estimate(shapes, dtype, dev, args.iters)
    print(f"\ntotal {time.perf_counter() - t0:.1f}s; peaks: {PEAK_TBS} TB/s, {PEAK_TFLOPS} TFLOP/s (H200)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
