"""Model precisions on CPU: weight memory and batch-1 decode tokens/s vs transformers, one run.

Measured in one run (greedy, ``ignore_eos``, one request at a time):
  1. kernels at batch 1 for SmolLM2's MLP shapes (1536x576, 576x1536) and its tied Q8_0 output
     layer (49152x576): plain fp32 / bf16 ``F.linear`` vs torch's packed int8 / int4 weight
     matmuls (fp32 and bf16 activations) vs dequantizing the weight per call;
  2. SmolLM2-135M-Instruct through ``Engine``: fp32, bf16, int8, int4 (group 64) and the
     GGUF file's own Q4_1/Q8_0 blocks kept quantized ("gguf"), the last two also with a
     bfloat16 model (no fp32 <-> bf16 activation casts around the packed kernels), against
     transformers fp32 ``generate`` on the same (dequantized) weights, and llama-cpp-python on the
     same file where it is installed;
  3. a small random Mixtral-style MoE (8 experts, top-2) through ``Engine`` (fp32, int8, int4)
     vs transformers fp32;
  4. a profile of one int4 and one GGUF-native decode (top operators by self CPU time).

Quantized rows use our C kernel (csrc/qkernel.c) unless marked "torch kernels" (the same model
with ``STRUCTGEN_QKERNEL=0``). Besides wall-clock decode tokens/s, every row reports tokens per
CPU second (``time.process_time`` of the timed generate: prefill of the short prompt + decode),
which a loaded shared machine distorts less.

Run:  OMP_NUM_THREADS=1 python benchmarks/bench_models.py [--tokens 64] [--threads 1] [--quick]
(--quick: the SmolLM2 rows of QUICK only: fp32, gguf-native with and without the fused decode
step, gguf-native with float32 activations, transformers and llama.cpp)
Prints markdown tables (ratios against transformers fp32 of the same run) and writes
benchmarks/bench_models.png.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_e2e import PROMPT  # noqa: E402 - importable only once benchmarks/ is on sys.path

PRECISIONS = [
    ("fp32", "float32", None),
    ("bf16", "bfloat16", None),
    ("int8", "float32", "int8"),
    ("int4-g64", "float32", "int4"),
    ("gguf-native (Q4_1/Q8_0)", "float32", "gguf"),
    ("int4-g64, torch kernels", "float32", "int4"),
    ("gguf-native, torch kernels", "float32", "gguf"),
    ("gguf-native, bf16 model", "bfloat16", "gguf"),
    ("gguf-native, per-op (no fused step)", "float32", "gguf"),
    ("gguf-native, float32 activations", "float32", "gguf"),
]
# --quick: these rows only (with transformers fp32 and llama.cpp), no kernels table, no MoE
QUICK = (
    "fp32",
    "gguf-native (Q4_1/Q8_0)",
    "gguf-native, per-op (no fused step)",
    "gguf-native, float32 activations",
)


def _us(fn, min_time: float = 0.3) -> float:
    from torch.utils.benchmark import Timer

    return Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_time).median * 1e6


def _mlp_cases(n: int, k: int) -> dict:
    """Batch-1 callables for one ``[n, k]`` weight: plain, packed int8/int4, dequantize per call."""
    from structgen.runtime.quantization.formats import (
        dequantize_int4,
        dequantize_int8,
        int4_scale_and_zeros,
        pack_int4,
        quantize_int4,
        quantize_int8,
    )

    w, x = torch.randn(n, k), torch.randn(1, k)
    xb, wb = x.bfloat16(), w.bfloat16()
    q8, s8 = quantize_int8(w)
    s8f, s8b = s8.view(n), s8.view(n).bfloat16()
    q4, s4, m4 = quantize_int4(w, 64)
    p4 = pack_int4(q4)
    sz, szb = (
        int4_scale_and_zeros(s4, m4, torch.float32),
        int4_scale_and_zeros(s4, m4, torch.bfloat16),
    )
    int8mm, int4mm = torch.ops.aten._weight_int8pack_mm, torch.ops.aten._weight_int4pack_mm_for_cpu
    return {
        "fp32 F.linear": lambda: F.linear(x, w),
        "bf16 F.linear": lambda: F.linear(xb, wb),
        "_weight_int8pack_mm, fp32 act": lambda: int8mm(x, q8, s8f),
        "_weight_int8pack_mm, bf16 act": lambda: int8mm(xb, q8, s8b),
        "int8 dequantize per call + fp32 F.linear": lambda: F.linear(x, dequantize_int8(q8, s8)),
        "_weight_int4pack_mm_for_cpu g64, fp32 act": lambda: int4mm(x, p4, 64, sz),
        "_weight_int4pack_mm_for_cpu g64, bf16 act": lambda: int4mm(xb, p4, 64, szb),
        "int4 dequantize per call + fp32 F.linear": lambda: F.linear(
            x, dequantize_int4(q4, s4, m4)
        ),
        **_ours_cases(x, q8, s8, q4, s4, m4, 64),
    }


def _ours_cases(x, q8, s8, q4, s4, m4, group: int) -> dict:
    """Our C kernel (csrc/qkernel.c) on the same weights: float32-exact and Q8-activation paths."""
    from structgen.runtime.cpu import quant as cpu_quant
    from structgen.runtime.quantization.formats import pack_int4_rows

    if not cpu_quant.available():
        return {}
    p, st, mt = pack_int4_rows(q4), s4.t().contiguous(), m4.t().contiguous()
    return {
        "ours: int8 C kernel, fp32 act (exact)": lambda: cpu_quant.int8_mm(x, q8, s8),
        "ours: int8 C kernel, Q8 act": lambda: cpu_quant.int8_mm(x, q8, s8, q8=True),
        f"ours: int4 C kernel g{group}, fp32 act (exact)": lambda: cpu_quant.int4_mm(
            x, p, st, mt, group
        ),
        f"ours: int4 C kernel g{group}, Q8 act": lambda: cpu_quant.int4_mm(
            x, p, st, mt, group, q8=True
        ),
    }


def bench_kernels() -> list[tuple[str, str, float]]:
    """(shape, method, microseconds) at batch 1."""
    from structgen.runtime.quantization.formats import (
        dequantize_int8,
        int8_to_group_major,
        quantize_int8,
    )
    from structgen.runtime.quantization.linear import int8_matmul

    torch.manual_seed(0)
    rows = []
    for n, k in ((1536, 576), (576, 1536)):
        rows += [(f"{n}x{k}", name, _us(fn)) for name, fn in _mlp_cases(n, k).items()]
    n, k = 49152, 576  # SmolLM2's tied output layer, Q8_0 (group 32)
    w, x = torch.randn(n, k), torch.randn(1, k)
    q, s = quantize_int8(w, 32)
    qg, sg = int8_to_group_major(q, s.half())
    shape = f"{n}x{k} Q8_0"
    rows.append((shape, "fp32 F.linear", _us(lambda: F.linear(x, w))))
    rows.append(
        (
            shape,
            "Q8_0 dequantize per call + fp32 F.linear",
            _us(lambda: F.linear(x, dequantize_int8(q, s))),
        )
    )
    rows.append(
        (
            shape,
            "Q8_0 group-major, 18 x _weight_int8pack_mm (torch fallback)",
            _us(lambda: int8_matmul(x, qg, sg, torch.bfloat16)),
        )
    )
    from structgen.runtime.cpu import quant as cpu_quant

    if cpu_quant.available():
        sh = s.half()
        rows.append(
            (
                shape,
                "ours: Q8_0 C kernel, fp32 act (exact)",
                _us(lambda: cpu_quant.int8_mm(x, q, sh)),
            )
        )
        rows.append(
            (
                shape,
                "ours: Q8_0 C kernel, Q8 act",
                _us(lambda: cpu_quant.int8_mm(x, q, sh, q8=True)),
            )
        )
    return rows


def _timed_generate(engine, tokens: int) -> dict:
    """``bench_structgen`` plus tokens per CPU second of the timed generate (process_time)."""
    from structgen import SamplingParams

    engine.generate([PROMPT], SamplingParams(max_tokens=4, temperature=0.0))  # warm-up
    params = SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True)
    t0, c0 = time.perf_counter(), time.process_time()
    out = engine.generate([PROMPT], params)[0]
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    n, ttft = len(out.token_ids), out.metrics.ttft_s
    return {
        "ttft_s": ttft,
        "decode_tok_s": (n - 1) / (total - ttft),
        "cpu_tok_s": n / cpu,
        "tokens": n,
    }


def bench_smollm2(tokens: int, labels=None) -> list[dict]:
    from structgen import Engine
    from structgen.runtime.loader import load_model

    rows = []
    for label, dtype, quant in PRECISIONS:
        if labels is not None and label not in labels:
            continue
        env = {
            "STRUCTGEN_QKERNEL": "0" if "torch kernels" in label else None,
            "STRUCTGEN_DECODE_STEP": "0" if "per-op" in label else None,
        }
        for k, v in env.items():
            if v is not None:
                os.environ[k] = v
        act = "float32" if "float32 activations" in label else "auto"
        try:
            eng = Engine(dtype=dtype, quantization=quant, max_kv_tokens=4096, activation_dtype=act)
            mem = eng.memory_report()
            r = _timed_generate(eng, tokens)
        finally:
            for k in env:
                os.environ.pop(k, None)
        rows.append({"system": f"structgen {label}", "weight_mb": mem["weight_bytes"] / 2**20, **r})
        print(rows[-1], flush=True)
        del eng
        gc.collect()
    loaded = load_model(None, torch.float32, "cpu")
    ids = _chat_ids(loaded.tokenizer)
    wb = sum(p.numel() * p.element_size() for p in loaded.model.state_dict().values())
    r = _hf_generate(_hf_llama(loaded), torch.tensor([ids]), tokens)
    rows.append({"system": "transformers fp32", "weight_mb": wb / 2**20, **r})
    print(rows[-1], flush=True)
    if importlib.util.find_spec("llama_cpp") is None:
        rows.append(
            {
                "system": "llama.cpp (llama-cpp-python not installed)",
                "weight_mb": float("nan"),
                "decode_tok_s": float("nan"),
                "ttft_s": float("nan"),
                "tokens": 0,
            }
        )
    else:
        rows.append(
            {
                "system": "llama.cpp (llama-cpp-python, same GGUF file)",
                **_llama_cpp_generate(ids, tokens),
            }
        )
        print(rows[-1], flush=True)
    return rows


def _llama_cpp_generate(ids: list[int], tokens: int) -> dict:
    """llama.cpp on the same Q4_1 file, the same chat prompt ids, greedy, EOS banned (as
    ``ignore_eos``), ``torch.get_num_threads()`` threads: TTFT from the first streamed token,
    decode tokens/s over the rest (as ``_timed_generate`` measures ours)."""
    from llama_cpp import Llama

    from structgen.runtime.loader import default_model_path

    path = default_model_path()
    threads = torch.get_num_threads()
    llm = Llama(
        model_path=str(path), n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    ban = {llm.token_eos(): -1e9}
    list(llm.create_completion(ids, max_tokens=4, temperature=0.0, stream=True))  # warm-up
    llm.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    n, ttft = 0, 0.0
    for _ in llm.create_completion(
        ids, max_tokens=tokens, temperature=0.0, stream=True, logit_bias=ban
    ):
        n += 1
        if n == 1:
            ttft = time.perf_counter() - t0
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = min(n, tokens)  # the stream's last chunk only carries finish_reason
    return {
        "weight_mb": Path(path).stat().st_size / 2**20,
        "ttft_s": ttft,
        "decode_tok_s": (n - 1) / (total - ttft),
        "cpu_tok_s": n / cpu,
        "tokens": n,
    }


def _tiny_moe_folder(folder: Path) -> None:
    """A random Mixtral (8 experts, top-2) with SmolLM2's tokenizer, saved as a HF folder."""
    import transformers
    from transformers import AutoModelForCausalLM

    from structgen.runtime.loader import load_model

    tok = load_model(None).tokenizer
    cfg = transformers.MixtralConfig(
        vocab_size=len(tok),
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=2,
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        sliding_window=None,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(str(folder))
    tok.save_pretrained(str(folder))


def bench_moe(tokens: int) -> list[dict]:
    from structgen import Engine
    from structgen.runtime.loader import load_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "moe"
        _tiny_moe_folder(folder)
        for label, quant in (("fp32", None), ("int8", "int8"), ("int4-g64", "int4")):
            eng = Engine(model=str(folder), dtype="float32", quantization=quant, max_kv_tokens=4096)
            mem = eng.memory_report()
            r = _timed_generate(eng, tokens)
            rows.append(
                {"system": f"structgen MoE {label}", "weight_mb": mem["weight_bytes"] / 2**20, **r}
            )
            print(rows[-1], flush=True)
            del eng
        rows.append(
            {"system": "transformers MoE fp32", **_hf_generate_folder(folder, tokens, load_model)}
        )
        print(rows[-1], flush=True)
    return rows


def _chat_ids(tok) -> list[int]:
    enc = tok.apply_chat_template(
        PROMPT, add_generation_prompt=True, tokenize=True, return_dict=True
    )
    return list(enc["input_ids"])


def _hf_generate_folder(folder: Path, tokens: int, load_model) -> dict:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    tok = load_model(str(folder)).tokenizer
    r = _hf_generate(model, torch.tensor([_chat_ids(tok)]), tokens)
    wb = sum(p.numel() * p.element_size() for p in model.state_dict().values())
    return {"weight_mb": wb / 2**20, **r}


def _hf_llama(loaded=None):
    """transformers' LlamaForCausalLM (fp32) holding structgen's loaded (dequantized) SmolLM2
    weights (None: the packaged model loaded with float weights; an engine's own ``loaded``
    may hold quantized linears under the default ``quantization="auto"``). A GGUF file's
    config is structgen's ``ModelConfig``, which transformers 5 no longer takes: it becomes
    the ``LlamaConfig`` of the same fields.
    """
    if loaded is None:
        from structgen.runtime.loader import load_model

        loaded = load_model(None, torch.float32, "cpu")
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedConfig

    config = loaded.config
    if not isinstance(config, PreTrainedConfig):
        config = LlamaConfig(**{k: v for k, v in config.to_dict().items() if k != "model_type"})
    model = LlamaForCausalLM(config).float().eval()
    missing, _ = model.load_state_dict(loaded.model.state_dict(), strict=False)
    assert not [m for m in missing if "rotary" not in m and "lm_head" not in m], missing
    if config.tie_word_embeddings:
        model.tie_weights()
    return model


def _hf_generate(model, ids: torch.Tensor, tokens: int) -> dict:
    """transformers ``generate`` timed as :func:`_timed_generate` (wall rate, tokens per CPU s)."""
    kw = {"do_sample": False, "pad_token_id": 0, "eos_token_id": None}
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, **kw)
        t0 = time.perf_counter()
        model.generate(ids, max_new_tokens=1, min_new_tokens=1, **kw)
        ttft = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        out = model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, **kw)
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = out.shape[1] - ids.shape[1]
    return {
        "ttft_s": ttft,
        "decode_tok_s": (n - 1) / max(total - ttft, 1e-9),
        "cpu_tok_s": n / cpu,
        "tokens": n,
    }


def _labelled(label: str, fn):
    from torch.profiler import record_function

    def call(*args, **kwargs):
        with record_function(label):
            return fn(*args, **kwargs)

    return call


def profile_decode(quant: str, tokens: int = 16, top: int = 10) -> list[tuple[str, float, int]]:
    """Top operators by self CPU time over ``tokens`` decode steps: (name, ms, calls per token)."""
    from torch.profiler import ProfilerActivity, profile

    from structgen import Engine, SamplingParams
    from structgen.runtime.cpu import quant as cpu_quant

    eng = Engine(dtype="float32", quantization=quant, max_kv_tokens=4096)
    eng.generate([PROMPT], SamplingParams(max_tokens=4, temperature=0.0))
    prompt = [{"role": "user", "content": "Hi"}]
    saved = {name: getattr(cpu_quant, name) for name in ("int4_linear", "int8_linear")}
    for name, fn in saved.items():  # our C kernel is no aten op: label its calls for the profiler
        setattr(cpu_quant, name, _labelled(f"qkernel.{name} (ours, C)", fn))
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            eng.generate(
                [prompt], SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True)
            )
    finally:
        for name, fn in saved.items():
            setattr(cpu_quant, name, fn)
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    rows = [(e.key, e.self_cpu_time_total / 1e3 / tokens, e.count // tokens) for e in events[:top]]
    rows.append(("(all operators)", total / 1e3 / tokens, 0))
    return rows


def _plot(smol: list[dict], moe: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    rows = [r for r in smol if r["tokens"]]
    names = [r["system"].replace("structgen ", "") for r in rows]
    axes[0].barh(names, [r["decode_tok_s"] for r in rows], color="tab:blue")
    axes[0].set_xlabel("batch-1 decode tokens/s (SmolLM2-135M)")
    axes[1].barh(names, [r["weight_mb"] for r in rows], color="tab:orange")
    axes[1].set_xlabel("weight memory, MiB")
    axes[2].barh(
        [r["system"].replace("structgen ", "") for r in moe],
        [r["decode_tok_s"] for r in moe],
        color="tab:green",
    )
    axes[2].set_xlabel("batch-1 decode tokens/s (random MoE)")
    for ax in axes:
        ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _print_smollm2(smol: list[dict], tokens: int) -> None:
    """The SmolLM2 table, ratios against transformers fp32 of the same run."""
    base = next(r for r in smol if r["system"] == "transformers fp32")["decode_tok_s"]
    print(f"\n### SmolLM2-135M, batch-1 decode ({tokens} tokens)\n")
    cbase = next(r for r in smol if r["system"] == "transformers fp32")["cpu_tok_s"]
    print(
        "| system | weight MiB | decode tok/s (wall) | x transformers fp32 | tok per CPU s | x "
        "transformers fp32 "
        "(CPU) | TTFT s |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for r in smol:
        print(
            f"| {r['system']} | {r['weight_mb']:.1f} | {r['decode_tok_s']:.1f} | "
            f"{r['decode_tok_s'] / base:.2f} | "
            f"{r.get('cpu_tok_s', float('nan')):.1f} | "
            f"{r.get('cpu_tok_s', float('nan')) / cbase:.2f} | "
            f"{r['ttft_s']:.3f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--quick", action="store_true", help="SmolLM2 rows of QUICK only, no kernels, no MoE"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    if args.quick:
        _print_smollm2(bench_smollm2(args.tokens, QUICK), args.tokens)
        return

    print(
        "\n### Kernels at batch 1 (microseconds, median)\n\n| weight | method | us "
        "|\n|---|---|---:|"
    )
    for shape, name, us in bench_kernels():
        print(f"| {shape} | {name} | {us:.0f} |")

    smol = bench_smollm2(args.tokens)
    _print_smollm2(smol, args.tokens)
    moe = bench_moe(args.tokens)
    mbase, mcbase = moe[-1]["decode_tok_s"], moe[-1]["cpu_tok_s"]
    print(
        "\n### Random Mixtral-style MoE (6 layers, hidden 256, 8 experts top-2), batch-1 decode\n"
    )
    print(
        "| system | weight MiB | decode tok/s | x transformers fp32 | tok per CPU s | x (CPU) |\n"
        "|---|---:|---:|---:|---:|---:|"
    )
    for r in moe:
        print(
            f"| {r['system']} | {r['weight_mb']:.1f} | {r['decode_tok_s']:.1f} | "
            f"{r['decode_tok_s'] / mbase:.2f} | "
            f"{r['cpu_tok_s']:.1f} | {r['cpu_tok_s'] / mcbase:.2f} |"
        )

    for quant in ("int4", "gguf"):
        print(f"\n### Profile: structgen {quant} decode, top operators by self CPU time\n")
        print("| operator | ms / token | calls / token |\n|---|---:|---:|")
        for name, ms, calls in profile_decode(quant):
            print(f"| {name} | {ms:.2f} | {calls} |")

    _plot(smol, moe, ROOT / "benchmarks" / "bench_models.png")
    print("\nplot: benchmarks/bench_models.png")


if __name__ == "__main__":
    main()
