"""GPU benchmark of structgen's Triton kernels at SmolLM2-135M shapes (random weights).

Needs only torch, triton and structgen.kernels; no model file, no network. For each
kernel: time, achieved TB/s or TFLOP/s and its fraction of the H200's peak (4.8 TB/s
HBM, 990 dense bf16 TFLOP/s), beside the torch baseline (SDPA / eager ops / the kernel's
torch reference) measured in the same run; then end-to-end greedy decode tokens/s of
SmolLM2-135M's architecture in bf16 (random weights, transformers' init shared by both)
at batch 1 and 64: structgen's ModelRunner eager and with CUDA-graph decode, against
transformers (KV cache, SDPA) on the same GPU. transformers is a structgen dependency.

    python benchmarks/gpu_bench.py            # one GPU, < 5 minutes
    python benchmarks/gpu_bench.py --smoke    # CPU, Triton interpreter, tiny shapes (tests)

``--smoke`` also checks every Triton output against its baseline and that structgen
(eager, and the padded CUDA-graph batch run eagerly) decodes the same tokens as
transformers; it is run by tests/kernels/test_gpu_bench_smoke.py.
"""

from __future__ import annotations

import argparse
import functools
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
    layers=2, hidden=48, heads=3, kv_heads=1, head_dim=16, vocab=200, inter=64, page_size=4,
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


def agree(name: str, got, want, dev: torch.device) -> None:
    """In ``--smoke`` (CPU, fp32): assert that the Triton output equals the baseline's."""
    if dev.type == "cuda":
        return
    for g, w in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        torch.testing.assert_close(
            g.float(), w.float(), atol=1e-4, rtol=1e-4, msg=lambda m: f"{name}: {m}"
        )


class Report:
    """Prints one table row per kernel and keeps them for the plot."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float]] = []  # (name, % of peak, speedup vs baseline)
        print(
            f"{'kernel':<34}{'triton ms':>11}{'achieved':>16}{'% peak':>8}"
            f"{'baseline':>20}{'base ms':>10}{'speedup':>9}"
        )

    def row(self, name, ms, base_name, base_ms, nbytes=0.0, flops=0.0) -> None:
        if flops:
            val, peak, unit = flops / ms / 1e9, PEAK_TFLOPS, "TFLOP/s"
        else:
            val, peak, unit = nbytes / ms / 1e9, PEAK_TBS, "TB/s"
        speed = base_ms / ms if ms > 0 else float("nan")
        self.rows.append((name, 100 * val / peak, speed))
        print(
            f"{name:<34}{ms:>11.4f}{val:>9.3f} "
            f"{unit:<7}{100 * val / peak:>7.1f}%{base_name:>20}{base_ms:>10.4f}{speed:>8.2f}x"
        )


def _paged(s: Shapes, batch: int, length: int, dtype, dev):
    pages_per = -(-length // s.page_size)
    num_pages = batch * pages_per + 1
    k = torch.randn(num_pages, s.page_size, s.kv_heads, s.head_dim, dtype=dtype, device=dev)
    v = torch.randn_like(k)
    table = (torch.randperm(num_pages - 1, device=dev)[: batch * pages_per] + 1).view(
        batch, pages_per
    )
    return k, v, table.to(torch.int32)


def attention_benches(s: Shapes, dtype, dev, it, rep: Report, results: dict) -> None:
    esz = torch.finfo(dtype).bits // 8
    b, ctx, d = s.decode_batch, s.context, s.head_dim
    k, v, table = _paged(s, b, ctx, dtype, dev)
    q = torch.randn(b, s.heads, d, dtype=dtype, device=dev)
    lens = torch.full((b,), ctx, dtype=torch.int32, device=dev)
    ms = bench(
        lambda: paged_decode_attention(q, k, v, table, lens, d**-0.5, backend="triton"), dev, it
    )
    kc = (
        k[table.long()].flatten(1, 2)[:, :ctx].transpose(1, 2)
    )  # [B, kv_heads, ctx, d] contiguous copy
    vc = v[table.long()].flatten(1, 2)[:, :ctx].transpose(1, 2)
    kr, vr = (
        kc.repeat_interleave(s.heads // s.kv_heads, 1),
        vc.repeat_interleave(s.heads // s.kv_heads, 1),
    )
    base = bench(lambda: F.scaled_dot_product_attention(q[:, :, None], kr, vr), dev, it)
    agree("decode attn", paged_decode_attention(q, k, v, table, lens, d**-0.5, backend="triton"),
          F.scaled_dot_product_attention(q[:, :, None], kr, vr)[:, :, 0], dev)  # fmt: skip
    rep.row(
        f"decode attn B={b} ctx={ctx}",
        ms,
        "SDPA (contig KV)",
        base,
        nbytes=2 * b * ctx * s.kv_heads * d * esz,
    )
    results["decode_attn_ms"] = ms

    b, pre, ext = s.extend_batch, s.extend_prefix, s.extend_len
    k, v, table = _paged(s, b, pre + ext, dtype, dev)
    q = torch.randn(b * ext, s.heads, d, dtype=dtype, device=dev)
    pl = torch.full((b,), pre, dtype=torch.int32, device=dev)
    el = torch.full((b,), ext, dtype=torch.int32, device=dev)
    ms = bench(
        lambda: extend_attention(q, k, v, table, pl, el, d**-0.5, ext, backend="triton"), dev, it
    )
    qs = q.view(b, ext, s.heads, d).transpose(1, 2)
    kc = (
        k[table.long()]
        .flatten(1, 2)[:, : pre + ext]
        .transpose(1, 2)
        .repeat_interleave(s.heads // s.kv_heads, 1)
    )
    vc = (
        v[table.long()]
        .flatten(1, 2)[:, : pre + ext]
        .transpose(1, 2)
        .repeat_interleave(s.heads // s.kv_heads, 1)
    )
    mask = torch.ones(ext, pre + ext, dtype=torch.bool, device=dev).tril(pre)
    base = bench(lambda: F.scaled_dot_product_attention(qs, kc, vc, attn_mask=mask), dev, it)
    agree("extend attn", extend_attention(q, k, v, table, pl, el, d**-0.5, ext, backend="triton"),
          F.scaled_dot_product_attention(qs, kc, vc, attn_mask=mask).transpose(1, 2).flatten(0, 1),
          dev)  # fmt: skip
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
    agree(
        "rms_norm",
        rms_norm(x, w, 1e-5, r.clone(), backend="triton"),
        rms_norm(x, w, 1e-5, r, backend="torch"),
        dev,
    )
    rep.row(f"rms_norm+residual T={t}", ms, "eager torch", base, nbytes=4 * t * h * esz)
    results["rms_norm_ms_per_token"] = ms / t

    q = torch.randn(t, s.heads, s.head_dim, dtype=dtype, device=dev)
    k = torch.randn(t, s.kv_heads, s.head_dim, dtype=dtype, device=dev)
    cos = torch.randn(t, s.head_dim, device=dev).to(dtype)
    sin = torch.randn(t, s.head_dim, device=dev).to(dtype)
    ms = bench(lambda: rotary(q, k, cos, sin, backend="triton"), dev, it)
    base = bench(lambda: rotary(q, k, cos, sin, backend="torch"), dev, it)
    qa, ka, qb, kb = q.clone(), k.clone(), q.clone(), k.clone()
    rotary(qa, ka, cos, sin, backend="triton")
    rotary(qb, kb, cos, sin, backend="torch")
    agree("rotary", (qa, ka), (qb, kb), dev)
    rep.row(f"rotary T={t}", ms, "eager torch", base, nbytes=2 * (q.numel() + k.numel()) * esz)
    results["rotary_ms_per_token"] = ms / t

    slots = torch.randperm(t * 2, device=dev)[:t]
    cache_k = torch.empty(t * 2, s.kv_heads, s.head_dim, dtype=dtype, device=dev)
    cache_v = torch.empty_like(cache_k)
    ms = bench(lambda: store_kv(k, k, cache_k, cache_v, slots, backend="triton"), dev, it)
    base = bench(lambda: store_kv(k, k, cache_k, cache_v, slots, backend="torch"), dev, it)
    cache_t = torch.zeros_like(cache_k)
    store_kv(k, k, cache_t, cache_v, slots, backend="triton")
    agree("store_kv", cache_t[slots], k, dev)
    rep.row(f"store_kv T={t}", ms, "index_copy_", base, nbytes=4 * k.numel() * esz)
    results["store_kv_ms_per_token"] = ms / t

    b = s.decode_batch
    logits = torch.randn(b, s.vocab, dtype=torch.float32, device=dev)
    mask = torch.randint(
        -(2**31), 2**31 - 1, (b, -(-s.vocab // 32)), device=dev, dtype=torch.int64
    ).to(torch.int32)
    ms = bench(lambda: apply_token_bitmask(logits, mask, backend="triton"), dev, it)
    base = bench(lambda: apply_token_bitmask(logits, mask, backend="torch"), dev, it)
    la, lb = torch.randn_like(logits), None
    lb = la.clone()
    apply_token_bitmask(la, mask, backend="triton")
    apply_token_bitmask(lb, mask, backend="torch")
    agree("token bitmask", la, lb, dev)
    rep.row(
        f"token bitmask B={b} V={s.vocab}",
        ms,
        "torch reference",
        base,
        nbytes=2 * logits.numel() * 4,
    )
    results["bitmask_ms"] = ms


def gemm_benches(s: Shapes, dtype, dev, it, rep: Report, results: dict) -> None:
    m, n, k = s.decode_batch, 2 * s.inter, s.hidden
    x = torch.randn(m, k, dtype=dtype, device=dev)
    w = torch.randn(n, k, device=dev)
    dense = w.to(dtype)
    base = bench(lambda: F.linear(x, dense), dev, it)
    for bits, gs in ((8, None), (8, s.group_size), (4, s.group_size)):
        qw, sc, zp = quantize_ref(w, bits, gs)
        run = functools.partial(quant_matmul, x, qw, sc, zp, bits, gs)
        ms = bench(lambda: run(backend="triton"), dev, it)  # noqa: B023 - run is called at once
        agree(f"w{bits}a16", run(backend="triton"), run(backend="torch"), dev)
        wbytes = qw.numel() * qw.element_size() + sc.numel() * 4 * (1 if zp is None else 2)
        label = f"quant_matmul w{bits}a16{'' if gs is None else f' g{gs}'} {m}x{n}x{k}"
        rep.row(label, ms, "F.linear (dense)", base, nbytes=wbytes)

    t, e = s.decode_batch, s.experts
    xg = torch.randn(t, s.hidden, dtype=dtype, device=dev)
    wgu = torch.randn(e, 2 * s.inter, s.hidden, device=dev).to(dtype) / s.hidden**0.5
    wd = torch.randn(e, s.hidden, s.inter, device=dev).to(dtype) / s.inter**0.5
    tw, ti = torch.randn(t, e, device=dev).softmax(-1).topk(s.top_k, -1)
    ms = bench(lambda: fused_moe(xg, wgu, wd, tw, ti, backend="triton"), dev, it)
    base = bench(lambda: fused_moe(xg, wgu, wd, tw, ti, backend="torch"), dev, it)
    agree(
        "fused_moe",
        fused_moe(xg, wgu, wd, tw, ti, backend="triton"),
        fused_moe(xg, wgu, wd, tw, ti, backend="torch"),
        dev,
    )
    rep.row(
        f"fused_moe T={t} E={e} top{s.top_k}",
        ms,
        "torch reference",
        base,
        flops=6 * t * s.top_k * s.hidden * s.inter,
    )


def _smollm2_config(s: Shapes):
    """SmolLM2-135M's architecture at ``s``'s sizes (random weights: speed depends on shapes)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=s.hidden, intermediate_size=s.inter, num_hidden_layers=s.layers,
        num_attention_heads=s.heads, num_key_value_heads=s.kv_heads, vocab_size=s.vocab,
        max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5,
        tie_word_embeddings=True,
    )  # fmt: skip


def _ours_decode(
    model, s: Shapes, dev, prompts: list[list[int]], steps: int, graphs: bool, smoke: bool
):
    """Greedy decode through structgen's ModelRunner; returns (seconds, tokens per sequence)."""
    from structgen.runtime.cuda_graph import CudaGraphRunner
    from structgen.runtime.model_runner import ModelRunner

    bsz, max_len = len(prompts), len(prompts[0]) + steps + 1
    per_seq = -(-max_len // s.page_size)
    pool = model.make_kv_pool(bsz * per_seq + 1, s.page_size)
    backend = "triton" if smoke else "auto"  # smoke: the kernels, interpreted
    runner = ModelRunner(model, pool, dev, attention_backend=backend, cuda_graph=graphs,
                         cuda_graph_max_batch=s.decode_batch, max_model_len=max_len)  # fmt: skip
    if graphs and runner.graphs is None:  # CPU: the padded static batch, run eagerly
        runner.graphs = CudaGraphRunner(model, pool, s.decode_batch, per_seq)
    pages = [pool.alloc(per_seq) for _ in range(bsz)]
    logits = runner.forward(prompts, [0] * bsz, pages)
    out = [[t] for t in logits.argmax(-1).tolist()]
    lens = [len(p) for p in prompts]
    _sync(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        logits = runner.forward([o[-1:] for o in out], lens, pages)
        for o, t in zip(out, logits.argmax(-1).tolist()):  # the engine samples on the host too
            o.append(t)
        lens = [n + 1 for n in lens]
    _sync(dev)
    return time.perf_counter() - t0, out


def _hf_decode(hf, dev, prompts: list[list[int]], steps: int):
    """Greedy decode with transformers (KV cache, SDPA); returns (seconds, tokens per sequence)."""
    import inspect

    # transformers >= 5.x names the KV cache argument ``cache``; 4.x ``past_key_values``
    key = "cache" if "cache" in inspect.signature(hf.forward).parameters else "past_key_values"
    ids = torch.tensor(prompts, device=dev)
    out = hf(ids, use_cache=True)
    past, nxt = out[key], out.logits[:, -1].argmax(-1)
    toks = [nxt]
    _sync(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        out = hf(nxt[:, None], use_cache=True, **{key: past})
        past, nxt = out[key], out.logits[:, -1].argmax(-1)
        toks.append(nxt)
    _sync(dev)
    return time.perf_counter() - t0, torch.stack(toks, 1).tolist()


def _sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def e2e_decode(
    s: Shapes, dtype, dev, prompt_len: int, steps: int, smoke: bool, results: dict
) -> None:
    """End-to-end greedy decode tokens/s: structgen eager and with CUDA graphs vs transformers.

    One set of random weights (transformers' init) serves both. Timed: ``steps`` decode
    steps after the prompt's prefill. In ``--smoke`` the three must emit the same tokens.
    """
    import transformers

    from structgen.runtime.models.llama import LlamaForCausalLM

    cfg = _smollm2_config(s)
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(cfg).to(device=dev, dtype=dtype).eval()
    ours = LlamaForCausalLM(cfg, dtype, dev)
    ours.load_state_dict(hf.state_dict())
    graph_label = "CUDA graphs" if dev.type == "cuda" else "graph batch (eager: no GPU)"
    print(
        f"\nend-to-end greedy decode, SmolLM2 shapes, random weights, {dtype}, prompt "
        f"{prompt_len}, {steps} steps:"
    )
    print(
        f"{'batch':>6}{'transformers tok/s':>20}{'structgen eager':>17}{'x HF':>7}"
        f"{'structgen + ' + graph_label:>40}{'x HF':>7}"
    )
    for bsz in (1, s.decode_batch):
        g = torch.Generator().manual_seed(bsz)
        prompts = torch.randint(1, s.vocab, (bsz, prompt_len), generator=g).tolist()
        t_hf, tok_hf = _hf_decode(hf, dev, prompts, steps)
        t_eager, tok_eager = _ours_decode(ours, s, dev, prompts, steps, False, smoke)
        t_graph, tok_graph = _ours_decode(ours, s, dev, prompts, steps, True, smoke)
        rate = [bsz * steps / t for t in (t_hf, t_eager, t_graph)]
        same = sum(a == b for a, b in zip(tok_hf, tok_graph))
        print(f"{bsz:>6}{rate[0]:>20,.0f}{rate[1]:>17,.0f}{rate[1] / rate[0]:>6.2f}x"
              f"{rate[2]:>40,.0f}{rate[2] / rate[0]:>6.2f}x"
              f"   (sequences identical to HF: {same}/{bsz})")  # fmt: skip
        results[f"e2e_b{bsz}"] = rate
        if smoke:  # fp32, tiny: the three paths must agree token for token
            assert tok_eager == tok_graph == tok_hf, (tok_hf, tok_eager, tok_graph)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--smoke", action="store_true", help="tiny shapes on CPU under the Triton interpreter"
    )
    ap.add_argument("--iters", type=int, default=100, help="timed repetitions (CUDA)")
    ap.add_argument("--plot", default=None, help="save a PNG of % of peak and e2e tok/s here")
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
        e2e_decode(
            shapes,
            dtype,
            dev,
            5 if args.smoke else 128,
            3 if args.smoke else 128,
            args.smoke,
            results,
        )
    print(
        f"\ntotal {time.perf_counter() - t0:.1f}s; peaks: {PEAK_TBS} TB/s, {PEAK_TFLOPS} TFLOP/s "
        f"(H200)"
    )
    if args.plot:
        plot(rep, results, args.plot)
    return 0


def plot(rep: Report, results: dict, path: str) -> None:
    """Two panels: each kernel's % of H200 peak; e2e decode tok/s (HF, eager, graphs) per batch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 4.5))
    a.barh([r[0] for r in rep.rows], [r[1] for r in rep.rows])
    a.set_xlabel("% of H200 peak (HBM TB/s or bf16 TFLOP/s)")
    a.invert_yaxis()
    keys = sorted(k for k in results if k.startswith("e2e_b"))
    for i, label in enumerate(("transformers", "structgen eager", "structgen + CUDA graphs")):
        b.bar(
            [j + 0.27 * i for j in range(len(keys))],
            [results[k][i] for k in keys],
            0.27,
            label=label,
        )
    b.set_xticks([j + 0.27 for j in range(len(keys))], [k.replace("e2e_b", "batch ") for k in keys])
    b.set_ylabel("decode tok/s")
    b.set_yscale("log")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    raise SystemExit(main())
