"""KV cache dtype (``EngineConfig.kv_cache_dtype``) of the default CPU engine: decode step time
at 1, 8 and 64 rows, and perplexity, for a float32 / bfloat16 / float16 cache, in one process.

Decode: the packaged SmolLM2-135M Q4_1 GGUF with the default's int8 activations, through
``PagedSequences``: 64 sequences prefilled once to ``--context`` tokens in a float32 cache,
copied into a cache of each dtype (rounded as a store would), then steps of the first R
sequences (one token each) timed round-robin over the dtypes (rounds interleaved, medians).

Perplexity: ``Engine(kv_cache_dtype=...)`` prompt log-probabilities of a prefix of
``benchmarks/data/quality/public_domain_en.txt`` (``bench_quality.engine_logprobs``).

Greedy agreement: ``--greedy-prompts`` consecutive 200-token passages of that text
continued by ``--greedy-tokens`` greedy tokens with each cache dtype; per
dtype, the tokens equal to the float32 cache's up to each request's first difference, and the
requests whose whole continuation is equal.

``--dtypes`` picks the caches compared (float32 always; default all three).

Workload (``--workload-requests N[,M...]``, alone with ``--rows 0``; one interleaved run set per
count): ``bench_runtime.py --workloads 1``'s
N requests (same seed: prompts U[100, 800] tokens, outputs U[50, 300]) through
``Engine(dtype="float32", kv_cache_dtype=...)``, ``--workload-repeats`` runs of each dtype
interleaved (``bench_runtime.alternate_runs``, prefix cache flushed before each): output tokens
per second (medians) and the calling thread's CPU seconds per run.

    PYTHONPATH=.:benchmarks OMP_NUM_THREADS=2 nice -n 10 python benchmarks/bench_kv_cache_dtype.py \
        [--context 450] [--rounds 5] [--ppl-tokens 1024] [--greedy-prompts 8 --greedy-tokens 64]
        [--workload-requests 1,8,64 --workload-repeats 3] [--dtypes float32,float16]
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time

import torch

from structgen import Engine, SamplingParams

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _with_kv_dtype(seqs, dtype: torch.dtype):
    """A copy of ``seqs`` (a ``PagedSequences``) whose cache holds the same K/V in ``dtype``."""
    from structgen.runtime.kv_pool import KVPool

    new, old = copy.copy(seqs), seqs.kv
    assert not old.is_growable  # PagedSequences' pool: every page reserved
    kv = new.kv = KVPool(
        old.num_layers, old.num_pages, old.page_size, old.num_kv_heads, old.head_dim, dtype
    )
    for dst, src in zip(kv.k + kv.v, old.k + old.v):
        dst.copy_(src)  # rounded to dtype, as a store would
    new.tokens, new.pages = copy.deepcopy(seqs.tokens), copy.deepcopy(seqs.pages)
    kv._free = list(old._free)
    return new


def main() -> None:
    from bench_quality import TEXT, chunk_ids, engine_logprobs, nll

    from structgen.runtime.models.testing import PagedSequences

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--context", type=int, default=450)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=3)
    ap.add_argument("--ppl-tokens", type=int, default=1024)
    ap.add_argument("--rows", default="1,8,64")
    ap.add_argument("--skip-ppl", action="store_true")
    ap.add_argument("--greedy-prompts", type=int, default=0, help="0: no greedy agreement")
    ap.add_argument("--greedy-tokens", type=int, default=64)
    ap.add_argument(
        "--cpu-time",
        action="store_true",
        help="decode steps in the calling thread's CPU time, not wall time (a loaded machine; "
        "with OMP_NUM_THREADS=1 it is all of the step's work)",
    )
    ap.add_argument(
        "--workload-requests",
        default="0",
        help="request counts, comma-separated, each its own interleaved run; 0: no workload run",
    )
    ap.add_argument(
        "--dtypes",
        default=",".join(DTYPES),
        help="cache dtypes to compare (comma-separated; float32 is always included)",
    )
    ap.add_argument("--workload-repeats", type=int, default=3)
    args = ap.parse_args()
    rows_list = [int(r) for r in args.rows.split(",") if int(r) > 0]
    names = ["float32"] + [k for k in args.dtypes.split(",") if k != "float32"]
    unknown = sorted(set(names) - set(DTYPES))
    if unknown:
        ap.error(f"unknown --dtypes {unknown}; known: {sorted(DTYPES)}")
    dtypes = {k: DTYPES[k] for k in names}
    for n_req in (int(r) for r in args.workload_requests.split(",")):
        if n_req > 0:
            _workload(n_req, args.workload_repeats, dtypes)
    if not rows_list:
        return
    n = max(rows_list)
    clock = time.thread_time if args.cpu_time else time.perf_counter

    kw = dict(max_kv_tokens=1024, max_running_requests=1, prefix_cache=False)
    engines = {name: Engine(kv_cache_dtype=name, **kw) for name in dtypes}
    assert all(e.pool.dtype is dtypes[k] for k, e in engines.items())
    model = engines["float32"].loaded.model
    pages = n * (-(-(args.context + 64) // 16)) + 8
    base = PagedSequences(model, num_pages=pages, page_size=16)
    t0 = time.perf_counter()
    base.step({i: [100 + (7 * i + 13 * j) % 20000 for j in range(args.context)] for i in range(n)})
    print(f"prefill {n} x {args.context}: {time.perf_counter() - t0:.1f} s", flush=True)
    seqs = {k: _with_kv_dtype(base, d) for k, d in dtypes.items()}
    times = {(k, r): [] for k in dtypes for r in rows_list}
    for _ in range(args.rounds):
        for r in rows_list:
            for k, s in seqs.items():
                tok = {i: [7 + i] for i in range(r)}
                for _ in range(args.per_round):
                    t = clock()
                    s.step(tok)
                    times[k, r].append((clock() - t) * 1e3)
    print(
        f"\ncontext {args.context}, torch threads {torch.get_num_threads()}, "
        f"{'thread CPU' if args.cpu_time else 'wall'} ms, medians of "
        f"{args.rounds * args.per_round} steps (rounds interleaved)\n"
    )
    others = [k for k in dtypes if k != "float32"]
    print(
        "| rows | "
        + " | ".join(f"{k} ms" for k in dtypes)
        + "".join(f" | f32/{k} " for k in others)
        + " |"
    )
    print("|---|" + "---|" * (len(dtypes) + len(others)))
    for r in rows_list:
        med = {k: statistics.median(times[k, r]) for k in dtypes}
        print(
            f"| {r} | "
            + " | ".join(f"{med[k]:.2f}" for k in dtypes)
            + "".join(f" | {med['float32'] / med[k]:.3f}" for k in others)
            + " |"
        )

    a = engines["float32"]
    all_ids = a.tokenizer(TEXT.read_text(), add_special_tokens=False).input_ids
    if args.greedy_prompts:
        _greedy_agreement(engines, all_ids, args)
    if args.skip_ppl:
        return
    ids = all_ids[: args.ppl_tokens]
    chunks = chunk_ids(ids, 512)
    lps = {k: engine_logprobs(e, chunks) for k, e in engines.items()}
    ref = nll(lps["float32"])
    print(f"\nperplexity, {len(ids)} tokens in chunks of 512\n")
    print("| KV cache | NLL | perplexity | ppl / float32 | mean |Δ lp| vs float32 |")
    print("|---|---|---|---|---|")
    for k, lp in lps.items():
        v = nll(lp)
        d = float((lp - lps["float32"]).abs().mean())
        print(f"| {k} | {v:.5f} | {math.exp(v):.4f} | {math.exp(v - ref):.5f} | {d:.5f} |")


def _workload(n: int, repeats: int, dtypes: dict[str, torch.dtype]) -> None:
    """bench_runtime's workload 1 (n requests) with each cache dtype, runs interleaved."""
    import random

    from bench_runtime import _random_prompt_ids, alternate_runs

    engines = {k: Engine(dtype="float32", kv_cache_dtype=k) for k in dtypes}
    rng = random.Random(0)
    any_engine = engines["float32"]
    prompts = [_random_prompt_ids(any_engine, rng, rng.randint(100, 800)) for _ in range(n)]
    outs = [rng.randint(50, 300) for _ in range(n)]
    params = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in outs]
    cpu: dict[str, list[float]] = {k: [] for k in dtypes}
    tokens: dict[str, list[list[int]]] = {}

    def run(k: str):
        def one() -> float:
            e = engines[k]
            e.flush_cache()
            t0, c0 = time.perf_counter(), time.thread_time()
            res = e.generate(prompts, params)
            dt, cpu_s = time.perf_counter() - t0, time.thread_time() - c0
            cpu[k].append(cpu_s)
            tokens.setdefault(k, [r.token_ids for r in res])
            return sum(len(r.token_ids) for r in res) / dt

        return one

    for e in engines.values():  # first-use costs (page zeroing, pool growth) out of the runs
        e.generate(prompts[:1], SamplingParams(max_tokens=2, temperature=0.0))
    rates = alternate_runs({k: run(k) for k in dtypes}, repeats)
    base = statistics.median(rates["float32"])
    cpu32 = statistics.median(cpu["float32"])
    print(
        f"\nworkload 1, {n} requests, {sum(outs)} output tokens, {repeats} runs each interleaved\n"
    )
    print(
        "| KV cache | tok/s (median) | / float32 | thread CPU s (median) | float32 / this | "
        "greedy tokens equal to float32's |"
    )
    print("|---|---|---|---|---|---|")
    for k in dtypes:
        r, c = statistics.median(rates[k]), statistics.median(cpu[k])
        same = sum(
            next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
            for a, b in zip(tokens[k], tokens["float32"])
        )
        print(
            f"| {k} | {r:.1f} | {r / base:.3f} | {c:.2f} | {cpu32 / c:.3f} | {same}/{sum(outs)} |"
        )


def _greedy_agreement(engines: dict, ids: list[int], args) -> None:
    """Greedy continuations of real passages with each cache dtype against the float32 cache's."""
    prompts = [ids[i * 200 : (i + 1) * 200] for i in range(args.greedy_prompts)]
    assert all(len(p) == 200 for p in prompts), "text too short for --greedy-prompts"
    params = SamplingParams(max_tokens=args.greedy_tokens, temperature=0.0, ignore_eos=True)
    outs = {k: [o.token_ids for o in e.generate(prompts, params)] for k, e in engines.items()}
    total = args.greedy_prompts * args.greedy_tokens
    print(
        f"\ngreedy agreement with the float32 cache, {args.greedy_prompts} passages x "
        f"{args.greedy_tokens} tokens\n"
    )
    print(
        "| KV cache | tokens equal up to the first difference | equal continuations | "
        "first differences at |"
    )
    print("|---|---|---|---|")
    for k, got in outs.items():
        prefix = []
        for a, b in zip(got, outs["float32"]):
            n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            prefix.append(n)
        full = sum(a == b for a, b in zip(got, outs["float32"]))
        diffs = sorted(n for n in prefix if n < args.greedy_tokens)
        print(
            f"| {k} | {sum(prefix)}/{total} ({sum(prefix) / total:.3f}) | "
            f"{full}/{args.greedy_prompts} | {diffs or '-'} |"
        )


if __name__ == "__main__":
    main()
