"""Where a batched run's prefill goes: the step layout and each kernel's CPU per prompt token.

Three parts, all on the default engine (``Engine(dtype="float32")``: GGUF Q4_1 weights, int8
activations) and in thread CPU time of the calling thread (which does its share of every
OpenMP region), because wall time on a shared machine measures the load, not the work:

1. ``layout``: ``bench_runtime.py --workloads 1``'s requests (same seed, prompts U[100, 800],
   outputs U[50, 300]); per engine step that computes prompt tokens, the scheduled chunks,
   how many are prefill tokens and how many decode rows;
2. ``prefill``: N random 512-token prompts prefilled together (``max_tokens=1``) against one
   alone, interleaved; per prompt token, the calling thread's CPU in each wrapped kernel
   (``int4_mm``/``int8_mm``: every matmul, lm_head included; the fused C ops) and in all;
3. ``extract`` (#23): ``bench_extract_batch.py``'s contact cards through ``Engine.extract``,
   ``--batch1-docs`` one at a time, then ``--docs`` in one call (after one untimed card);
   per mode, per document: forward passes, tokens computed (prompt chunks, sampled rows,
   forced jump-forward tokens, the scoring passes' requests), prefix-cache hits, and the
   calling thread's CPU in the forward, in sampling and masks (of which the token budget's
   masks), in the scoring passes, in ``copy_constraint`` + compile and in the KV pool's
   growth; with ``--steps``, the batched call's steps; with ``--classify``, every computed
   token by its request (the documents' own: prompt, or output rows and forced tokens; the
   scoring passes') and whether its prefix was computed before in the same call (again: a
   recompute; for a scoring request, also whether that row's log-probs were wanted, i.e.
   the cache could not have served it); with ``--util``, how busy the cores are: the call's
   wall, process CPU / wall (cores busy), each thread's CPU (``/proc/self/task``: the calling
   thread and the kernels' worker threads), and the wall and process CPU inside and outside
   the forward (outside it only the calling thread works: scheduling, sampling and masks,
   applying tokens and jump-forward, copy-constraint compiles, the scoring passes' glue);
4. ``split`` (#21): workload 1's requests generated twice (the second run reported, the pool
   already grown); the calling thread's CPU in the fused decode step, in each wrapped kernel
   and in the rest (scheduler, batch metadata, plan checks, sampling, torch glue), per step.
   With ``OMP_NUM_THREADS=1`` the calling thread does all of the work, so the split holds on a
   loaded machine.

    PYTHONPATH=. OMP_NUM_THREADS=2 python benchmarks/profile_batched.py [--requests 8]
        [--together 4] [--rounds 2] [--parts layout,prefill,split] [--docs 16 --batch1-docs 3]
        [--util]
"""

from __future__ import annotations

import argparse
import collections
import random
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_runtime import _random_prompt_ids  # noqa: E402

import structgen.runtime.cpu.decode_step as decode_step  # noqa: E402
import structgen.runtime.cpu.ops as cpu_ops  # noqa: E402
import structgen.runtime.cpu.quant as quant  # noqa: E402
from structgen import Engine, SamplingParams  # noqa: E402

CPU = collections.defaultdict(float)  # kernel name -> calling thread's CPU seconds


def _wrap(module, name: str) -> None:
    """Replace ``module.name`` by a wrapper adding its thread CPU time to ``CPU[name]``."""
    fn = getattr(module, name)

    def timed(*args, **kwargs):
        t0 = time.thread_time()
        out = fn(*args, **kwargs)
        CPU[name] += time.thread_time() - t0
        return out

    setattr(module, name, timed)


def split(engine: Engine, n: int) -> None:
    """Print where a workload-1 run's calling-thread CPU goes: each wrapped kernel and the rest."""
    rng = random.Random(0)  # bench_runtime.workload_throughput's draw
    prompts = [_random_prompt_ids(engine, rng, rng.randint(100, 800)) for _ in range(n)]
    outs = [rng.randint(50, 300) for _ in range(n)]
    params = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in outs]
    steps = [0]
    step = engine.step

    def counted():
        steps[0] += 1
        return step()

    engine.step = counted
    try:
        for _ in range(2):  # the first run grows and zeroes the pool
            engine.flush_cache()
            CPU.clear()
            steps[0] = 0
            t0 = time.thread_time()
            engine.generate(prompts, params)
            total = time.thread_time() - t0
    finally:
        del engine.step
    print(f"split: {n} requests, {sum(outs)} output tokens, {steps[0]} steps, calling thread CPU")
    print("| part | s | share |\n|---|---|---|")
    for name, s in sorted(CPU.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {s:.2f} | {s / total:.1%} |")
    rest = total - sum(CPU.values())
    print(f"| rest ({rest / steps[0] * 1e3:.1f} ms / step) | {rest:.2f} | {rest / total:.1%} |")
    print(f"| total | {total:.2f} | |")


def layout(engine: Engine, n: int) -> None:
    """Print the chunks of every step that computes prompt tokens, for workload 1's requests."""
    rng = random.Random(0)  # bench_runtime.workload_throughput's draw
    prompts = [_random_prompt_ids(engine, rng, rng.randint(100, 800)) for _ in range(n)]
    outs = [rng.randint(50, 300) for _ in range(n)]
    params = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in outs]
    print(f"prompt tokens {[len(p) for p in prompts]} = {sum(map(len, prompts))}; outputs {outs}")
    steps: list[list[tuple[int, bool]]] = []
    schedule = engine.scheduler.schedule

    def logged():
        out = schedule()
        steps.append(
            [(num, r.num_computed_tokens < len(r.prompt_token_ids)) for r, num in out.scheduled]
        )
        return out

    engine.flush_cache()
    engine.scheduler.schedule = logged
    try:
        engine.generate(prompts, params)
    finally:
        del engine.scheduler.schedule
    for i, chunks in enumerate(steps):
        pre = sum(num for num, is_prompt in chunks if is_prompt)
        if pre:
            rows = sum(1 for _, is_prompt in chunks if not is_prompt)
            print(
                f"step {i}: {len(chunks)} requests, {pre} prefill tokens, {rows} decode rows, "
                f"chunks {[num for num, _ in chunks]}"
            )
    print(f"{len(steps)} steps in all")


def prefill(engine: Engine, together: int, rounds: int) -> None:
    """Print the calling thread's CPU per prompt token: ``together`` prompts in one step vs one."""
    rng = random.Random(1)
    prompts = [_random_prompt_ids(engine, rng, 512) for _ in range(together)]
    one = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True)
    engine.generate(prompts[:1], one)  # warm up
    for r in range(rounds):
        for k in [1, together] if r % 2 == 0 else [together, 1]:
            engine.flush_cache()
            CPU.clear()
            t0 = time.thread_time()
            engine.generate(prompts[:k], one)
            ms = 1e3 / (512 * k)
            total = (time.thread_time() - t0) * ms
            parts = ", ".join(
                f"{n} {v * ms:.3f}" for n, v in sorted(CPU.items(), key=lambda x: -x[1])
            )
            print(f"round {r + 1} {k}x512: {total:.3f} ms/token in all; {parts}", flush=True)


def _threads_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by native thread id
    (``/proc/self/task/<tid>/stat``, clock-tick resolution); {} where /proc is absent."""
    import os

    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # fields from the 3rd (state) on
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return out


def extract(
    engine: Engine,
    docs: int,
    batch1_docs: int,
    show_steps: bool,
    ab_shared: int = 0,
    ab_leads: int = 0,
    classify: bool = False,
    util: bool = False,
) -> None:
    """Print where one batched ``extract`` of ``docs`` contact cards spends its work, per
    document, against ``batch1_docs`` cards extracted one at a time (thread CPU seconds).

    With ``ab_shared`` rounds, the batched call is run again per round, alternating
    ``unshared`` (``choices.shared_hosts`` patched to give every candidate a request of its
    own, the scoring before session 23 e4) and ``shared`` (the default), the prefix cache
    flushed and the schema prompt cached again before each call. With ``ab_leads``
    rounds, the same alternating ``unled`` (``overlaps.shortlist_spans`` patched to make no
    ``choices.Lead``: every candidate's request computes the rows its field's candidates
    share, the scoring before session 26 s8) and ``led`` (the default).
    """
    import json

    from bench_extract_batch import ROOT, documents

    import structgen.extraction.choices as choices
    import structgen.extraction.extractor as extractor
    import structgen.extraction.overlaps as overlaps
    import structgen.runtime.engine as engine_mod
    from structgen.fsm.index.budget import CompletionBudget
    from structgen.runtime.kv_pool import KVPool

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(docs + batch1_docs + 1)
    part: dict[str, float] = collections.defaultdict(float)
    steps: list[tuple[int, int, int, float]] = []  # rows, tokens, prompt tokens, forward s
    inside = [0.0, 0.0, 0.0]  # the forwards' wall, process CPU and calling thread CPU seconds
    scoring = [False, 0]  # inside a scoring pass; tokens computed there

    def wrap(module, name: str, key: str):
        fn = getattr(module, name)

        def timed(*args, **kwargs):
            t0 = time.thread_time()
            outer = scoring[0]  # sampling runs inside a scoring pass too
            scoring[0] = outer or key.startswith("scoring")
            try:
                return fn(*args, **kwargs)
            finally:
                scoring[0] = outer
                part[key] += time.thread_time() - t0

        setattr(module, name, timed)
        return fn

    execute = engine.runner.execute
    trie: dict = {}  # every computed token of the call, by its prefix (token -> subtree)
    kinds: dict[str, str] = {}  # request id -> "document" / "scoring" (when first seen)
    classes: collections.Counter = collections.Counter()

    def classify_chunk(req, num: int) -> None:
        kind = kinds.setdefault(req.request_id, "scoring" if scoring[0] else "document")
        start = req.num_computed_tokens
        tokens = req.token_slice(0, start + num)
        node = trie
        for t in tokens[:start]:
            node = node.setdefault(t, {})
        for pos in range(start, start + num):
            again = tokens[pos] in node
            node = node.setdefault(tokens[pos], {})
            if kind == "document":
                part = "prompt" if pos < len(req.prompt_token_ids) else "output and forced"
            else:
                cut = req.max_cached_prefix
                part = "row wanted" if again and cut is not None and pos >= cut else "rest"
            classes[(kind, part, "again" if again else "first")] += 1

    def forward(scheduled):
        if classify:
            for req, num in scheduled.scheduled:
                classify_chunk(req, num)
        t0, w0, p0 = time.thread_time(), time.perf_counter(), time.process_time()
        out = execute(scheduled)
        inside[0] += time.perf_counter() - w0
        inside[1] += time.process_time() - p0
        inside[2] += time.thread_time() - t0
        prompt = sum(
            min(num, max(0, len(r.prompt_token_ids) - r.num_computed_tokens))
            for r, num in scheduled.scheduled
        )
        tokens = sum(num for _, num in scheduled.scheduled)
        scoring[1] += tokens if scoring[0] else 0
        steps.append((len(scheduled.scheduled), tokens, prompt, time.thread_time() - t0))
        return out

    engine.runner.execute = forward
    wrap(engine_mod, "sample_tokens", "sampling + masks")
    for name in ("choose_span_ends", "choose_overlaps", "choose_numbers", "choose_options"):
        wrap(extractor, name, "scoring passes (forward included)")
    wrap(extractor, "_compiled", "copy_constraint + compile")
    wrap(extractor, "copy_constraint", "copy_constraint + compile")
    # inside the parts above: the token budget's masks (every extract request has max_tokens,
    # so every mask goes through CompletionBudget.mask) and the KV pool's reallocations
    wrap(CompletionBudget, "mask", "of sampling: token budget masks")
    wrap(KVPool, "_reserve", "KV pool growth (scheduling)")
    engine.extract(schema, texts[0])  # untimed: compile, the shared prefix cached
    shared_hosts = choices.shared_hosts
    runs = [
        ("batch 1", [[t] for t in texts[1 : 1 + batch1_docs]]),
        ("batched", [texts[1 + batch1_docs :]]),
    ]
    runs += [
        (f"batched {mode}, round {r}", [texts[1 + batch1_docs :]])
        for r in range(ab_shared)
        for mode in (("unshared", "shared") if r % 2 == 0 else ("shared", "unshared"))
    ]
    runs += [
        (f"batched {mode}, round {r}", [texts[1 + batch1_docs :]])
        for r in range(ab_leads)
        for mode in (("unled", "led") if r % 2 == 0 else ("led", "unled"))
    ]
    shortlist_spans = overlaps.shortlist_spans
    for label, batches in runs:
        if "led" in label:
            overlaps.shortlist_spans = (
                shortlist_spans
                if " led" in label
                else lambda engine, jobs, k, **_: shortlist_spans(engine, jobs, k)
            )
            engine.flush_cache()
            engine.extract(schema, texts[0])  # untimed: the schema prompt cached again
        if "shared" in label:
            choices.shared_hosts = (
                shared_hosts if " shared" in label else (lambda fulls, *_: list(range(len(fulls))))
            )
            engine.flush_cache()
            engine.extract(schema, texts[0])  # untimed: the schema prompt cached again
        n = sum(map(len, batches))
        part.clear()
        steps.clear()
        scoring[1] = 0
        trie.clear()
        classes.clear()
        inside[:] = [0.0, 0.0, 0.0]
        s0 = engine.stats()
        threads0 = _threads_cpu()
        t0, w0, p0 = time.thread_time(), time.perf_counter(), time.process_time()
        for batch in batches:
            engine.extract(schema, batch)
        total = time.thread_time() - t0
        wall, proc = time.perf_counter() - w0, time.process_time() - p0
        threads1 = _threads_cpu()
        s1 = engine.stats()
        rows = sum(r for r, _, _, _ in steps)
        tokens = sum(t for _, t, _, _ in steps)
        prompt = sum(p for _, _, p, _ in steps)
        fwd = sum(f for _, _, _, f in steps)
        hit = s1["prefix_hit_tokens"] - s0["prefix_hit_tokens"]
        print(
            f"{label}, {n} documents, per document: thread CPU {total / n:.3f} s, forward "
            f"{fwd / n:.3f} s in {len(steps) / n:.2f} passes, {tokens / n:.1f} tokens "
            f"computed ({prompt / n:.1f} prompt, {(tokens - prompt) / n:.1f} output rows and "
            f"forced tokens; {scoring[1] / n:.1f} by the scoring passes) over {rows / n:.1f} "
            f"rows, prefix hits {hit / n:.0f} tokens; "
            + ", ".join(f"{k} {v / n:.3f} s" for k, v in sorted(part.items())),
            flush=True,
        )
        if util:
            caller = threading.get_native_id()
            busy = {
                tid: c - threads0.get(tid, 0.0)
                for tid, c in threads1.items()
                if c - threads0.get(tid, 0.0) > 0
            }
            others = ", ".join(
                f"{c / wall:.2f}" for tid, c in sorted(busy.items(), key=lambda kv: -kv[1])
                if tid != caller
            )  # fmt: skip
            out_proc, out_thread = proc - inside[1], total - inside[2]
            print(
                f"  {label}, cores busy (CPU s / wall s): process {proc / wall:.2f}, calling "
                f"thread {busy.get(caller, 0.0) / wall:.2f}, other threads [{others}]; per "
                f"document: wall {wall / n:.3f} s, {inside[0] / wall:.1%} of it in the forward; "
                f"CPU s in the forward: process {inside[1] / n:.3f}, calling thread "
                f"{inside[2] / n:.3f}; outside it: process {out_proc / n:.3f}, calling thread "
                f"{out_thread / n:.3f} (the other threads' share outside: "
                f"{(out_proc - out_thread) / max(out_proc, 1e-9):.1%})",
                flush=True,
            )
        if classify:
            print(f"  {label}, tokens computed per document by request, part, prefix:")
            for (kind, what, seen), k in sorted(classes.items()):
                print(f"    {kind}, {what}, {seen}: {k / n:.2f}")
        if show_steps and label == "batched":
            for i, (r, t, p, f) in enumerate(steps):
                print(f"  step {i}: {r} rows, {t} tokens ({p} prompt), forward {f * 1e3:.0f} ms")
    del engine.runner.execute
    choices.shared_hosts = shared_hosts
    overlaps.shortlist_spans = shortlist_spans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=8, help="workload 1's requests (layout)")
    ap.add_argument("--together", type=int, default=4, help="512-token prompts in one step")
    ap.add_argument("--rounds", type=int, default=2, help="prefill rounds, order alternating")
    ap.add_argument("--parts", default="layout,prefill", help="of layout,prefill,extract,split")
    ap.add_argument("--docs", type=int, default=16, help="cards in one extract (extract)")
    ap.add_argument("--batch1-docs", type=int, default=3, help="cards one at a time (extract)")
    ap.add_argument("--steps", action="store_true", help="the batched call's steps (extract)")
    ap.add_argument(
        "--classify", action="store_true", help="computed tokens by kind, recomputes (extract)"
    )
    ap.add_argument(
        "--util", action="store_true", help="cores busy, inside and outside the forward (extract)"
    )
    ap.add_argument(
        "--ab-shared",
        type=int,
        default=0,
        help="rounds of the batched call unshared / shared scoring (extract)",
    )
    ap.add_argument(
        "--ab-leads",
        type=int,
        default=0,
        help="rounds of the batched call without / with the shortlist's leads (extract)",
    )
    args = ap.parse_args()
    for name in ("int4_mm", "int4t_mm", "int8_mm"):
        _wrap(quant, name)
    _wrap(decode_step.DecodeStepPlan, "_launch")  # the fused decode step's C calls
    for name in ("add_rms_norm", "rope_store_kv", "paged_attention", "silu_mul"):
        _wrap(cpu_ops, name)
    engine = Engine(dtype="float32")
    print(f"torch threads {torch.get_num_threads()}")
    parts = set(args.parts.split(","))
    if "layout" in parts:
        layout(engine, args.requests)
    if "prefill" in parts:
        prefill(engine, args.together, args.rounds)
    if "extract" in parts:
        extract(
            engine,
            args.docs,
            args.batch1_docs,
            args.steps,
            args.ab_shared,
            args.ab_leads,
            args.classify,
            args.util,
        )
    if "split" in parts:
        split(engine, args.requests)


if __name__ == "__main__":
    main()
