"""Quality of the default engine's int8 activations: perplexity of a fixed English text.

One process, the packaged SmolLM2-135M-Instruct Q4_1 GGUF file, the same token ids for every
system (the text of ``benchmarks/data/quality/public_domain_en.txt``, 2,302 tokens, cut into
chunks of ``--chunk`` tokens with no overlap; each chunk is scored from an empty context, so
its first token is not scored):

- (a) ``Engine()``: the default, ``quantization="gguf"`` with ``activation_dtype="int8"``
  (activations quantized per block of 32, as llama.cpp's Q8 activations);
- (b) ``Engine(activation_dtype="float32")``: the same Q4_1 blocks, float32 activations;
- (c) ``Engine(quantization=None)``: the file's weights dequantized to float32 (the
  configuration exact against transformers): the reference of the ratio column;
- (d) llama.cpp (llama-cpp-python, ``logits_all=True``) on the same file, if installed.

Each engine's per-token log-probabilities come from ``SamplingParams(prompt_logprobs=0)``.
The table gives the mean negative log-likelihood per scored token (nats), the perplexity
``exp(NLL)`` and the perplexity's ratio to (c).

Beside it, on the engines' own models through one ragged forward per chunk
(``PagedSequences``, every row's logits): the mean per-token KL divergence over the whole
vocabulary of each quantized system from (c), the mean and max |delta logprob| of the text's
tokens, a check that these rows give the engines' prompt logprobs, and the noise scale of the
int8 path: (a)'s NLL when the output of ONE op (layer 0's o_proj) is multiplied by
``1 + 1e-7 * N(0, 1)`` (a float32 summation-order change; ``benchmarks/q8_sensitivity.py``),
for ``--noise-seeds`` seeds, and the same on (b). A kernel change whose (a) NLL moves by less
than that spread cannot be told from a summation-order change.

    PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/bench_quality.py \
        [--chunk 512] [--noise-seeds 4] [--engines-only | --noise-only]

Results: benchmarks/RESULTS.md, "#21: a quality figure for the default's int8 activations".
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from pathlib import Path

import torch

from structgen import Engine, SamplingParams
from structgen.runtime.models.testing import PagedSequences

TEXT = Path(__file__).parent / "data" / "quality" / "public_domain_en.txt"


def chunk_ids(ids: list[int], chunk: int) -> list[list[int]]:
    """The token ids cut into consecutive chunks of at most ``chunk`` tokens (no overlap);
    a last chunk of one token (nothing to score) is dropped."""
    chunks = [ids[i : i + chunk] for i in range(0, len(ids), chunk)]
    return [c for c in chunks if len(c) >= 2]


def engine_logprobs(engine: Engine, chunks: list[list[int]]) -> torch.Tensor:
    """``[T]`` float64: log p(token | chunk so far) of every chunk token but the first, from
    the engine's ``prompt_logprobs`` (one request per chunk, run alone)."""
    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    out = []
    for c in chunks:
        plp = engine.generate([c], params)[0].prompt_logprobs
        assert plp[0] is None and len(plp) == len(c)
        for tok, d in zip(c[1:], plp[1:]):
            assert next(iter(d)) == tok  # the chosen (prompt) token comes first
            out.append(d[tok])
    return torch.tensor(out, dtype=torch.float64)


def llama_cpp_logprobs(path: str, chunks: list[list[int]], chunk: int) -> torch.Tensor:
    """The same as :func:`engine_logprobs` from llama.cpp on the GGUF file ``path``."""
    from llama_cpp import Llama

    threads = torch.get_num_threads()
    llm = Llama(
        model_path=path,
        n_ctx=chunk,
        n_batch=chunk,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        verbose=False,
    )
    out = []
    for c in chunks:
        llm.reset()
        llm.eval(c)
        logits = torch.from_numpy(llm.scores[: len(c) - 1].copy()).double()  # [n-1, V]
        lp = torch.log_softmax(logits, -1)
        out.append(lp.gather(1, torch.tensor(c[1:])[:, None])[:, 0])
    return torch.cat(out)


def llama_cpp_row(lps: dict, model_path: str | None, chunks: list[list[int]], chunk: int):
    """Add llama.cpp's row (d) to ``lps`` if llama-cpp-python is installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        print("llama.cpp: llama-cpp-python not installed, row skipped")
        return
    if model_path is None:
        from structgen.runtime.loader import default_model_path

        model_path = default_model_path()
    lps["(d) llama.cpp, same GGUF file"] = llama_cpp_logprobs(str(model_path), chunks, chunk)


def model_rows(model, chunks: list[list[int]], vocab: int, perturb: int | None = None):
    """Yield, per chunk, ``[n-1, vocab]`` float64 log-softmax rows predicting tokens 1..n-1 of
    the chunk (one ragged forward each, from an empty KV pool). ``perturb``: a seed; layer 0's
    o_proj output is then multiplied by ``1 + 1e-7 * N(0, 1)``."""
    target = model.model.layers[0].self_attn.o_proj
    orig = target.forward
    if perturb is not None:
        g = torch.Generator().manual_seed(perturb)

        def noisy(x):
            y = orig(x)
            return y * (1 + 1e-7 * torch.randn(y.shape, generator=g))

        target.forward = noisy
    try:
        for c in chunks:
            seq = PagedSequences(model, num_pages=-(-len(c) // 16) + 2, page_size=16)
            logits = seq.step({0: c}, all_logits=True)[0][:-1, :vocab]
            yield torch.log_softmax(logits.double(), -1)
    finally:
        target.forward = orig


def chosen(rows: torch.Tensor, c: list[int]) -> torch.Tensor:
    """``[n-1]``: each row's log-probability of the chunk's next token."""
    return rows.gather(1, torch.tensor(c[1:])[:, None])[:, 0]


def nll(lp: torch.Tensor) -> float:
    """Mean negative log-likelihood (nats per token) of the log-probabilities ``lp``."""
    return float(-lp.mean())


def print_noise(models: dict, chunks: list[list[int]], vocab: int, num_seeds: int) -> None:
    """Print each model's NLL unperturbed and with one op perturbed by 1e-7 relative (layer 0's
    o_proj output, per seed): the noise scale of a numerically neutral change."""
    print("\n| path | unperturbed NLL | perturbed NLL per seed | spread (max - min) |")
    print("|---|---|---|---|")
    for k, model in models.items():
        base, *seeds = (
            nll(torch.cat([chosen(r, x) for r, x in zip(rows, chunks, strict=True)]))
            for rows in (
                model_rows(model, chunks, vocab, seed) for seed in (None, *range(num_seeds))
            )
        )
        allv = [base, *seeds]
        print(
            f"| {k} | {base:.5f} | {', '.join(f'{s:.5f}' for s in seeds)} | "
            f"{max(allv) - min(allv):.5f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunk", type=int, default=512, help="tokens per chunk (<= 512)")
    ap.add_argument("--noise-seeds", type=int, default=4)
    ap.add_argument(
        "--engines-only",
        action="store_true",
        help="(a)-(c) perplexities only: no llama.cpp, no full-vocabulary section (a build A/B)",
    )
    ap.add_argument(
        "--noise-only",
        action="store_true",
        help="only the noise table's (a) row (a build A/B of the int8 path's distribution)",
    )
    ap.add_argument("--max-text-tokens", type=int, default=None, help="score a prefix only")
    args = ap.parse_args()
    t_start = time.perf_counter()

    kw = dict(max_kv_tokens=2 * args.chunk, max_running_requests=1, prefix_cache=False)
    engines = {
        "(a) default: Q4_1 weights, int8 activations": Engine(**kw),
        "(b) Q4_1 weights, float32 activations": Engine(activation_dtype="float32", **kw),
        "(c) dequantized fp32 weights (reference)": Engine(quantization=None, **kw),
    }
    (ka, a), (kb, b), (kc, c) = engines.items()
    assert a.config.quantization == "gguf" and a.config.activation_dtype == "auto"
    assert b.config.quantization == "gguf" and c.config.quantization is None
    text = TEXT.read_text()
    ids = a.tokenizer(text, add_special_tokens=False).input_ids[: args.max_text_tokens]
    chunks = chunk_ids(ids, args.chunk)
    num_scored = sum(len(x) - 1 for x in chunks)
    print(
        f"text: {TEXT.name}, {len(text)} chars, {len(ids)} tokens, {len(chunks)} chunks of <= "
        f"{args.chunk}, {num_scored} tokens scored; torch threads {torch.get_num_threads()}"
    )

    if args.noise_only:
        print_noise({ka: a.loaded.model}, chunks, a.vocab_size, args.noise_seeds)
        return
    lps = {k: engine_logprobs(e, chunks) for k, e in engines.items()}
    if not args.engines_only:
        llama_cpp_row(lps, a.config.model, chunks, args.chunk)

    ref = nll(lps[kc])
    print("\n| system | NLL (nats/token) | perplexity | perplexity / (c) | mean |Δ lp| vs (c) |")
    print("|---|---|---|---|---|")
    for k, lp in lps.items():
        n = nll(lp)
        d = float((lp - lps[kc]).abs().mean())
        print(f"| {k} | {n:.5f} | {math.exp(n):.4f} | {math.exp(n - ref):.5f} | {d:.4f} |")

    if args.engines_only:
        print(f"\ntotal {time.perf_counter() - t_start:.0f} s wall")
        return
    # Full-vocabulary comparison on the engines' own models (every row's logits).
    vocab = a.vocab_size
    models = {k: e.loaded.model for k, e in engines.items()}
    check, kl = {}, {ka: [], kb: []}
    dab = []
    for i, rows in enumerate(
        zip(*(model_rows(m, chunks, vocab) for m in models.values()), strict=True)
    ):
        ra, rb, rc = rows
        for k, r in zip(models, rows, strict=True):
            check.setdefault(k, []).append(chosen(r, chunks[i]))
        for k, r in ((ka, ra), (kb, rb)):
            kl[k].append((rc.exp() * (rc - r)).sum(-1))  # KL(c || quantized) per token
        dab.append((ra.exp() * (ra - rb)).sum(-1))  # KL(a || b)
    print("\n| system | KL(c ‖ system) mean, nats | KL max | model rows vs engine: max |Δ lp| |")
    print("|---|---|---|---|")
    for k in models:
        m = torch.cat(check[k])
        err = float((m - lps[k]).abs().max())
        if k in kl:
            v = torch.cat(kl[k])
            print(f"| {k} | {float(v.mean()):.5f} | {float(v.max()):.4f} | {err:.2e} |")
        else:
            print(f"| {k} | 0 | 0 | {err:.2e} |")
    v = torch.cat(dab)
    d = (lps[ka] - lps[kb]).abs()
    print(
        f"\n(a) vs (b) on the same tokens: KL(a ‖ b) mean {float(v.mean()):.5f} nats, max "
        f"{float(v.max()):.4f}; |Δ logprob| of the text's tokens mean {float(d.mean()):.4f}, "
        f"median {float(d.median()):.4f}, max {float(d.max()):.4f}; "
        f"NLL(a) - NLL(b) = {nll(lps[ka]) - nll(lps[kb]):+.5f}"
    )

    if args.noise_seeds:
        print_noise({k: models[k] for k in (ka, kb)}, chunks, vocab, args.noise_seeds)
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s wall")


if __name__ == "__main__":
    main()
