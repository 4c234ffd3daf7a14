"""Batched extraction throughput: ``Engine.extract`` over N documents of one schema at once
against the same engine one document at a time (#23: ``--input`` of 200 documents >= 3x
batch 1).

The documents are contact cards written from seeded templates (names, companies, roles,
cities, phone and e-mail shapes vary; the dev set's ``contact_card`` schema), so every text
is different and only the prompt's shared head is in the prefix cache, as for a real
``structgen extract --input`` job. Batch 1: ``--batch1-docs`` documents spread evenly over
the ``--docs`` (``batch1_sample``: the same population as the batched call's, so lengths and
templates are alike; all of them when equal), each its own ``extract`` call, after one untimed
call of a card outside the set; batched: all ``--docs`` in one call
(``extract``'s continuous batching), after the engine's prefix cache was flushed and that card
extracted again (untimed: only the schema head is cached, not the batch-1 sample's cards, which
the host pipelines would import). Both at ``extract``'s defaults, in one process. Per mode
also the process's CPU per document (every thread: kernels, host pipelines) and the tokens
computed per document (every token the forward passes took: prompts past the prefix cache,
sampled and forced output tokens, the scoring passes' requests; the engine's
``runner.execute`` wrapped to count its chunks); ``--json`` also holds the batched call's
values, so two trees' outputs can be compared.

``--ab-fused-extend 1,8,64``: instead, an A/B in one process of the longest extension a fused
decode step over 8 tokens takes (``structgen.runtime.cpu.decode_step.MAX_FUSED_EXTEND`` and
``MAX_FUSED_EXTEND_QUANTIZED`` both set to the value; 1: the rule before session 24, fused only
when every sequence brings one token; the default engine is all int8-activation quantized, so 64
is its rule now), the values alternated round by round (``--rounds``), batch 1 and batched per
value, medians; the batched outputs must be equal.

``--ab-data-parallel``: instead, an A/B in one process of the batched call (all ``--docs`` at
once) on the default engine (one process, the kernels on torch's default threads) and on
``Engine(data_parallel_size=2, num_threads=1)`` (two one-thread replica processes behind the
router; the extraction glue runs in this process) and, as the control that separates one
kernel thread from two pipelines, the default engine with ``torch.set_num_threads(1)`` for its
call (restored after; the kernels read the setting per call), alternated round by round
(``--rounds``), medians; the outputs must be equal (greedy, batch invariant). Also each
engine's start-up (the constructor; the data-parallel one built first, while this process
holds no weights) and the peak resident set (``VmHWM``) of this process and of each process
below it.

``--ab-pipelines``: instead, an A/B in one process, one ``Engine()``, of the batched call (all
``--docs`` at once) on one pipeline (``extractor.HOST_PIPELINES = 1``: the engine itself, the
kernels on torch's threads), on two single-threaded host pipelines in threads over the same
model (``HOST_PIPELINES = 2``, ``structgen.runtime.host_pipelines``) and, as the control that
separates one kernel thread from two pipelines, on one pipeline with the calling thread's
``kernel_thread_limit(1)``, alternated round by round
(``--rounds``, the order reversed every other round), with ``--batch1-docs`` documents one at a
time per round (one pipeline either way) for #23's ratio, after one untimed call of all the
texts on one and on two pipelines (prefix caches and KV pools warm); per arm wall, process CPU
and calling thread CPU per document, medians; the outputs must be equal. Memory: the process's
resident set after each arm and its peak (``VmHWM``) at the start and the end, and the KV bytes
each pipeline's pool reserved.

``--ab-max-running 64,128,256``: instead, an A/B in one process of the scheduler's
``max_running_requests`` (``engine.scheduler.max_running_requests`` set to each value: how many
requests, cards and scoring requests alike, run in one step), the values alternated round by
round (``--rounds``), on one pipeline (``extractor.HOST_PIPELINES = 1`` for the A/B: the
engine's own scheduler runs every card); before each timed call the prefix cache is flushed and
the schema prompt cached again (one untimed card not in the set), so every call starts alike.
Per value: batch 1 (``--batch1-docs`` cards one at a time) and batched (all ``--docs`` in one
call) wall and calling thread CPU s/doc, the batched call's thread CPU in the forward
(``runner.execute``), its forward passes, rows (tokens) per pass and the scheduler's thread
CPU (``schedule``); medians; the batched outputs must be equal.

Run:  python benchmarks/bench_extract_batch.py [--docs 200] [--batch1-docs 10] [--seed 0]
      [--ab-fused-extend 1,8,64 --rounds 2] [--ab-data-parallel --docs 64 --rounds 3]
      [--ab-pipelines --docs 64 --rounds 4]
      [--ab-max-running 64,256 --rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIRST = ["Elena", "Carlos", "Aiko", "Tomas", "Priya", "Jonas", "Fatima", "Liam", "Sofia", "Omar"]
LAST = ["Petrova", "Mendoza", "Tanaka", "Berg", "Shah", "Keller", "Haddad", "Walsh", "Rossi"]
COMPANY = ["Quantix Labs", "Verde Foods", "Lantern Robotics", "Bluefin Logistics", "Orbit Media"]
ROLE = ["Head of Research", "sales manager", "CTO", "office manager", "lead designer", None]
CITY = ["Sofia", "Lyon", "Osaka", "Porto", "Dublin", None]
TEMPLATES = [
    "{name}, {role} at {company}, {city}. {email}, {phone}",
    "Met {name} at the trade fair. Works for {company}. Phone {phone}, mail {email}.",
    "Contact: {name} ({company}). Tel. {phone}. E-mail: {email}. Based in {city}.",
    "Please call {name} from {company} on {phone} or write to {email}.",
]


def documents(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct contact-card texts from the templates (seeded)."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        company = rng.choice(COMPANY)
        role, city = rng.choice(ROLE) or "consultant", rng.choice(CITY) or "Berlin"
        domain = company.lower().replace(" ", "") + ".example"
        digits = (rng.randint(30, 49), rng.randint(10, 99), rng.randint(100, 999))
        phone = "+{} {} {} ".format(*digits) + str(rng.randint(1000, 9999))
        email = f"{first.lower()}.{last.lower()}@{domain}"
        text = rng.choice(TEMPLATES).format(
            name=f"{first} {last}", role=role, company=company, city=city, phone=phone, email=email
        )
        if text not in out:
            out.append(text)
    return out


def batch1_sample(texts: list[str], k: int) -> list[str]:
    """``k`` of ``texts`` spread evenly over the list (first and last included; all when
    ``k >= len(texts)``), so the batch-1 figure is measured on the batched call's population.
    """
    if k >= len(texts):
        return list(texts)
    if k <= 1:
        return texts[:k]
    step = (len(texts) - 1) / (k - 1)
    return [texts[round(i * step)] for i in range(k)]


def ab_fused_extend(engine, schema: dict, texts: list[str], args: argparse.Namespace) -> None:
    """Print batch 1 and batched s/doc per fused-extension value (medians over
    ``args.rounds`` rounds, the values' order reversed every other round).

    Raises:
        AssertionError: the batched outputs differ between values or rounds.
    """
    import statistics

    from structgen.runtime.cpu import decode_step

    values = [int(v) for v in args.ab_fused_extend.split(",")]
    b1: dict[int, list[float]] = {v: [] for v in values}
    batched: dict[int, list[float]] = {v: [] for v in values}
    first = None
    saved = decode_step.MAX_FUSED_EXTEND, decode_step.MAX_FUSED_EXTEND_QUANTIZED
    try:
        for r in range(args.rounds):
            for v in values if r % 2 == 0 else values[::-1]:
                decode_step.MAX_FUSED_EXTEND = decode_step.MAX_FUSED_EXTEND_QUANTIZED = v
                t = time.perf_counter()
                for text in batch1_sample(texts, args.batch1_docs):
                    engine.extract(schema, text)
                b1[v].append((time.perf_counter() - t) / args.batch1_docs)
                t = time.perf_counter()
                out = engine.extract(schema, texts)
                batched[v].append((time.perf_counter() - t) / len(texts))
                first = out if first is None else first
                assert out == first, f"fused extension <= {v}: other outputs"
                print(f"round {r + 1}, fused extension <= {v}: batch 1 {b1[v][-1]:.3f}, "
                      f"batched {batched[v][-1]:.3f} s/doc", flush=True)  # fmt: skip
    finally:
        decode_step.MAX_FUSED_EXTEND, decode_step.MAX_FUSED_EXTEND_QUANTIZED = saved
    base = statistics.median(batched[values[0]])
    print(
        f"\n| longest fused extension | s/doc batch 1 ({args.batch1_docs} docs) | s/doc batched "
        f"({len(texts)} at once) | batched speed-up | batched vs {values[0]} |"
        "\n|---|---|---|---|---|"
    )
    for v in values:
        a, b = statistics.median(b1[v]), statistics.median(batched[v])
        print(f"| {v} | {a:.3f} | {b:.3f} | {a / b:.2f}x | {base / b:.2f}x |")
    print("\nbatched outputs equal across values and rounds; load average at the end: "
          + " / ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip


def ab_max_running(engine, schema: dict, texts: list[str], args: argparse.Namespace) -> None:
    """Print batch 1 and batched s/doc (wall and calling thread CPU) per
    ``max_running_requests`` value, the batched call's forward passes, rows per pass and
    scheduler CPU (medians over ``args.rounds`` rounds, the values' order reversed every
    other round; the prefix cache flushed and the schema prompt cached again before each
    timed call).

    Raises:
        AssertionError: the batched outputs differ between values or rounds.
    """
    import statistics

    from structgen.extraction import extractor

    values = [int(v) for v in args.ab_max_running.split(",")]
    spare = documents(len(texts) + 1, args.seed)[-1]  # not in the set: warms the schema prompt
    sched = engine.scheduler
    saved = sched.max_running_requests, extractor.HOST_PIPELINES
    extractor.HOST_PIPELINES = 1  # one pipeline: the engine's own scheduler runs every card
    execute, schedule = engine.runner.execute, sched.schedule
    counts = [0, 0, 0.0, 0.0]  # passes, rows (tokens) through them, schedule() / forward CPU

    def counted(scheduled):
        counts[0] += 1
        counts[1] += sum(num for _, num in scheduled.scheduled)
        t0 = time.thread_time()
        try:
            return execute(scheduled)
        finally:
            counts[3] += time.thread_time() - t0

    def timed_schedule():
        t0 = time.thread_time()
        try:
            return schedule()
        finally:
            counts[2] += time.thread_time() - t0

    def fresh() -> None:
        engine.flush_cache()
        engine.extract(schema, spare)  # untimed
        counts[:] = [0, 0, 0.0, 0.0]

    keys = ("b1 wall", "b1 cpu", "wall", "cpu", "forward", "passes", "rows/pass", "sched")
    res: dict[int, dict[str, list[float]]] = {v: {k: [] for k in keys} for v in values}
    first = None
    engine.runner.execute, sched.schedule = counted, timed_schedule
    try:
        for r in range(args.rounds):
            for v in values if r % 2 == 0 else values[::-1]:
                sched.max_running_requests = v
                m = res[v]
                if args.batch1_docs:
                    fresh()
                    t, c = time.perf_counter(), time.thread_time()
                    for text in batch1_sample(texts, args.batch1_docs):
                        engine.extract(schema, text)
                    m["b1 wall"].append((time.perf_counter() - t) / args.batch1_docs)
                    m["b1 cpu"].append((time.thread_time() - c) / args.batch1_docs)
                fresh()
                t, c = time.perf_counter(), time.thread_time()
                out = engine.extract(schema, texts)
                m["wall"].append((time.perf_counter() - t) / len(texts))
                m["cpu"].append((time.thread_time() - c) / len(texts))
                m["passes"].append(counts[0])
                m["rows/pass"].append(counts[1] / max(counts[0], 1))
                m["sched"].append(counts[2] / len(texts))
                m["forward"].append(counts[3] / len(texts))
                first = out if first is None else first
                assert out == first, f"max_running_requests={v}: other outputs"
                print(f"round {r + 1}, max_running_requests={v}: "
                      + ", ".join(f"{k} {m[k][-1]:.4g}" for k in keys if m[k])
                      + f"; load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    finally:
        sched.max_running_requests, extractor.HOST_PIPELINES = saved
        del engine.runner.execute, sched.schedule
    base = res[values[0]]
    med = {v: {k: statistics.median(x) if x else float("nan") for k, x in m.items()}
           for v, m in res.items()}  # fmt: skip
    print(
        f"\n| max_running_requests | batched wall s/doc ({len(texts)} at once; rounds) "
        "| median | thread CPU s/doc (rounds) | median | vs first value (CPU) "
        "| of it in the forward | passes | rows / pass | schedule() ms/doc "
        "| batch 1 wall / CPU s/doc "
        f"({args.batch1_docs} docs) | speed-up wall / CPU |\n" + "|---" * 12 + "|"
    )
    for v in values:
        m, d = res[v], med[v]
        print(
            f"| {v} | {', '.join(f'{w:.3f}' for w in m['wall'])} | {d['wall']:.3f} "
            f"| {', '.join(f'{w:.3f}' for w in m['cpu'])} | {d['cpu']:.3f} "
            f"| {statistics.median(base['cpu']) / d['cpu']:.3f}x | {d['forward']:.3f} "
            f"| {d['passes']:.0f} "
            f"| {d['rows/pass']:.0f} | {d['sched'] * 1e3:.2f} "
            f"| {d['b1 wall']:.3f} / {d['b1 cpu']:.3f} "
            f"| {d['b1 wall'] / d['wall']:.2f}x / {d['b1 cpu'] / d['cpu']:.2f}x |"
        )
    print("\nbatched outputs equal across values and rounds; load average at the end: "
          + " / ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip


def tree_peak_rss_mb() -> dict[int, tuple[str, float]]:
    """``{pid: (name, VmHWM MB)}`` for this process and every process below it (``/proc``;
    a process that exits while read is left out)."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {os.getpid()}, True
    while grew:
        more = {p for p, pp in parent.items() if pp in tree} - tree
        tree |= more
        grew = bool(more)
    out: dict[int, tuple[str, float]] = {}
    for pid in sorted(tree):
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status if ":" in line)
        if "VmHWM" in fields:
            out[pid] = (fields["Name"].strip(), int(fields["VmHWM"].split()[0]) / 1024)
    return out


def ab_data_parallel(schema: dict, texts: list[str], args: argparse.Namespace) -> None:
    """Print the batched call's s/doc on the default engine, on two one-thread
    replicas and on the default engine with one kernel thread (medians over ``args.rounds``
    rounds, the order reversed every other round), the engines' start-up and the process
    tree's peak resident sets.

    Raises:
        AssertionError: the outputs differ between engines or rounds.
    """
    import statistics

    import torch

    from structgen import Engine

    def peaks(label: str) -> None:
        rows = tree_peak_rss_mb()
        print(f"{label}: peak RSS (VmHWM) MB per process: "
              + ", ".join(f"{pid} {name} {mb:.0f}" for pid, (name, mb) in rows.items())
              + f"; sum {sum(mb for _, mb in rows.values()):.0f}", flush=True)  # fmt: skip

    start: dict[str, float] = {}
    t = time.perf_counter()
    dp = Engine(data_parallel_size=2, num_threads=1)
    start["dp2x1"] = time.perf_counter() - t
    peaks("after Engine(data_parallel_size=2, num_threads=1)")
    t = time.perf_counter()
    default = Engine()
    start["default"] = time.perf_counter() - t
    threads = torch.get_num_threads()

    def one_thread(docs: list[str]):
        torch.set_num_threads(1)
        try:
            return default.extract(schema, docs)
        finally:
            torch.set_num_threads(threads)

    engines = {
        "default": lambda docs: default.extract(schema, docs),
        "dp2x1": lambda docs: dp.extract(schema, docs),
        "default, 1 thread": one_thread,
    }
    start["default, 1 thread"] = start["default"]
    try:
        for name in ("default", "dp2x1"):  # untimed: compile, the schema prompt cached
            t = time.perf_counter()
            engines[name](texts[:2])
            print(f"{name}: start-up {start[name]:.1f} s, first extract (2 docs, untimed) "
                  f"{time.perf_counter() - t:.1f} s", flush=True)  # fmt: skip
        wall: dict[str, list[float]] = {k: [] for k in engines}
        first = None
        for r in range(args.rounds):
            for name in list(engines) if r % 2 == 0 else list(engines)[::-1]:
                routed = list(dp.router.num_routed)
                t = time.perf_counter()
                out = engines[name](texts)
                wall[name].append((time.perf_counter() - t) / len(texts))
                first = out if first is None else first
                assert out == first, f"{name}, round {r + 1}: other outputs"
                spread = [b - a for a, b in zip(routed, dp.router.num_routed)]
                print(f"round {r + 1}, {name}: batched {wall[name][-1]:.3f} s/doc, load "
                      f"{os.getloadavg()[0]:.1f}"
                      + (f", requests per replica {spread}" if name == "dp2x1" else ""),
                      flush=True)  # fmt: skip
        peaks("after the A/B (this process holds the default engine and the router)")
    finally:
        dp.close()
    base = statistics.median(wall["default"])
    print(f"\n| engine | start-up s | batched s/doc ({len(texts)} at once; rounds) | median "
          "| vs default |\n|---|---|---|---|---|")  # fmt: skip
    for name in engines:
        m = statistics.median(wall[name])
        print(f"| {name} | {start[name]:.1f} | {', '.join(f'{w:.3f}' for w in wall[name])} "
              f"| {m:.3f} | {base / m:.2f}x |")  # fmt: skip
    print("\noutputs equal across engines and rounds; load average at the end: "
          + " / ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip


def _rss_mb() -> tuple[float, float]:
    """This process's ``(VmRSS, VmHWM)`` in MB (``/proc/self/status``)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))


def ab_pipelines(engine, schema: dict, texts: list[str], args: argparse.Namespace) -> None:
    """Print the batched call's wall / process CPU / calling thread CPU per document on one
    pipeline and on two host pipelines (medians over ``args.rounds`` rounds, order reversed
    every other round), batch 1 per round, and the memory figures (module docstring).

    Raises:
        AssertionError: the outputs differ between arms or rounds, or the pipelines did not
            run (the policy refused them).
    """
    import statistics

    from structgen.extraction import extractor
    from structgen.runtime.cpu.threads import kernel_thread_limit
    from structgen.runtime.host_pipelines import host_pipelines

    saved = extractor.HOST_PIPELINES, extractor.HOST_PIPELINES_MIN_TEXTS
    # (pipelines, this thread's kernel thread limit or None); the last arm is the control
    # that tells "one kernel thread" from "two pipelines" (a loaded host favours one thread)
    arms = {
        "one pipeline (2 kernel threads)": (1, None),
        "two host pipelines (1 thread each)": (2, None),
        "one pipeline, 1 kernel thread (control)": (1, 1),
    }
    rss0, hwm0 = _rss_mb()
    nb = args.batch1_docs
    fig: dict[str, dict[str, list[float]]] = {
        a: {"wall": [], "cpu": [], "thread": [], "rss": []} for a in [*arms, "batch 1"]
    }
    first = None
    try:
        extractor.HOST_PIPELINES_MIN_TEXTS = 1  # any --docs: the arms say which path runs
        for n in (1, 2):  # untimed, all the texts: each pipeline's prefix cache holds the
            extractor.HOST_PIPELINES = n  # schema head and its KV pool has grown to the job
            engine.extract(schema, texts)
        pipes = host_pipelines(engine, 2)
        forwards = [e.runner.num_forward_passes for e in pipes.engines]
        for r in range(args.rounds):
            extractor.HOST_PIPELINES = 1
            w, c, th = time.perf_counter(), time.process_time(), time.thread_time()
            for text in batch1_sample(texts, nb):
                engine.extract(schema, text)
            f = fig["batch 1"]
            f["wall"].append((time.perf_counter() - w) / nb)
            f["cpu"].append((time.process_time() - c) / nb)
            f["thread"].append((time.thread_time() - th) / nb)
            for name in list(arms) if r % 2 == 0 else list(arms)[::-1]:
                extractor.HOST_PIPELINES, limit = arms[name]
                w, c, th = time.perf_counter(), time.process_time(), time.thread_time()
                if limit is None:
                    out = engine.extract(schema, texts)
                else:
                    with kernel_thread_limit(limit):
                        out = engine.extract(schema, texts)
                f = fig[name]
                f["wall"].append((time.perf_counter() - w) / len(texts))
                f["cpu"].append((time.process_time() - c) / len(texts))
                f["thread"].append((time.thread_time() - th) / len(texts))
                f["rss"].append(_rss_mb()[0])
                first = out if first is None else first
                assert out == first, f"{name}, round {r + 1}: other outputs"
                print(f"round {r + 1}, {name}: batched wall {f['wall'][-1]:.3f}, process CPU "
                      f"{f['cpu'][-1]:.3f}, thread CPU {f['thread'][-1]:.3f} s/doc; load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        ran = [e.runner.num_forward_passes - k for e, k in zip(pipes.engines, forwards)]
        assert all(ran), f"the host pipelines did not run (forwards {ran})"
    finally:
        extractor.HOST_PIPELINES, extractor.HOST_PIPELINES_MIN_TEXTS = saved
    rss1, hwm1 = _rss_mb()
    med = {a: {k: statistics.median(v) for k, v in f.items() if v} for a, f in fig.items()}
    base = med[next(iter(arms))]
    print(
        "\n| arm | wall s/doc (rounds) | median | process CPU s/doc | calling thread CPU s/doc "
        f"| wall vs one pipeline | batch 1 ({nb} docs) / this |\n" + "|---" * 7 + "|"
    )
    for name in [*arms, "batch 1"]:
        m = med[name]
        print(f"| {name} | {', '.join(f'{w:.3f}' for w in fig[name]['wall'])} | {m['wall']:.3f} "
              f"| {m['cpu']:.3f} | {m['thread']:.3f} | {base['wall'] / m['wall']:.2f}x "
              f"| {med['batch 1']['wall'] / m['wall']:.2f}x |")  # fmt: skip
    kv = [e.memory_report()["kv_bytes"] / 2**20 for e in [engine, *pipes.engines]]
    print(f"\nmemory MB: RSS at the start {rss0:.0f} (peak {hwm0:.0f}), after each arm (median) "
          + ", ".join(f"{a} {med[a]['rss']:.0f}" for a in arms)
          + f"; at the end {rss1:.0f} (peak {hwm1:.0f}); KV reserved: engine {kv[0]:.0f}, "
          + " / ".join(f"{k:.0f}" for k in kv[1:]) + " (pipelines)")  # fmt: skip
    print("outputs equal across arms and rounds; load average at the end: "
          + " / ".join(f"{x:.1f}" for x in os.getloadavg()))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--batch1-docs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--ab-fused-extend", default=None, help="MAX_FUSED_EXTEND values, A/B")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of the A/B")
    ap.add_argument(
        "--ab-max-running", default=None, help="scheduler max_running_requests values, A/B"
    )
    ap.add_argument(
        "--ab-data-parallel",
        action="store_true",
        help="batched: default engine vs data_parallel_size=2 x num_threads=1, A/B",
    )
    ap.add_argument(
        "--ab-pipelines",
        action="store_true",
        help="batched: one pipeline vs two single-threaded host pipelines, A/B",
    )
    args = ap.parse_args()
    if args.docs < 1 or (args.batch1_docs < 1 and not args.ab_max_running):
        ap.error("--docs and --batch1-docs must be at least 1 (the table is their ratio)")
    if args.batch1_docs > args.docs:
        ap.error("--batch1-docs must be at most --docs (batch 1 runs a sample of the set)")
    from structgen import Engine

    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs, args.seed)
    if args.ab_data_parallel:
        ab_data_parallel(schema, texts, args)
        return
    engine = Engine()
    engine.extract(schema, documents(len(texts) + 1, args.seed)[-1])  # untimed, not in the set
    if args.ab_fused_extend:
        ab_fused_extend(engine, schema, texts, args)
        return
    if args.ab_max_running:
        ab_max_running(engine, schema, texts, args)
        return
    if args.ab_pipelines:
        ab_pipelines(engine, schema, texts, args)
        return
    from structgen.extraction import extractor
    from structgen.runtime.host_pipelines import host_pipelines

    computed = [0]  # tokens through the forward, the host pipelines' included
    pipes = host_pipelines(engine).engines if extractor.HOST_PIPELINES > 1 else []
    for runner in [e.runner for e in (engine, *pipes)]:

        def counted(scheduled, execute=runner.execute):
            computed[0] += sum(num for _, num in scheduled.scheduled)
            return execute(scheduled)

        runner.execute = counted
    t, c = time.perf_counter(), time.process_time()
    sample = batch1_sample(texts, args.batch1_docs)
    for text in sample:
        engine.extract(schema, text)
    batch1 = (time.perf_counter() - t) / len(sample)
    cpu1 = (time.process_time() - c) / len(sample)
    tokens1 = computed[0] / len(sample)
    # the batch-1 sample's cards are in the engine's prefix cache, which host pipelines
    # import from (Engine.host_pipeline): flushed, and the schema head cached again as at the
    # start, so the batched call meets only the head in any cache
    engine.flush_cache()
    engine.extract(schema, documents(len(texts) + 1, args.seed)[-1])  # untimed, not in the set
    computed[0] = 0
    t, c = time.perf_counter(), time.process_time()
    values = engine.extract(schema, texts)
    batched = (time.perf_counter() - t) / len(texts)
    cpu = (time.process_time() - c) / len(texts)
    tokens = computed[0] / len(texts)
    right = sum(1 for v, s in zip(values, texts) if v.get("email", "") in s)
    n, b = len(texts), args.batch1_docs
    print(
        f"| documents | s/doc batch 1 ({b} docs) | s/doc batched ({n} at once) "
        "| batched speed-up | tokens computed / doc, batch 1 / batched "
        "| e-mails copied right |\n|---|---|---|---|---|---|\n"
        f"| {n} contact cards | {batch1:.3f} | {batched:.3f} | **{batch1 / batched:.2f}x** "
        f"| {tokens1:.1f} / {tokens:.1f} | {right}/{n} |\n\n"
        f"process CPU s/doc (all threads): batch 1 {cpu1:.3f}, batched {cpu:.3f} "
        f"({cpu1 / cpu:.2f}x); load average at the end: "
        + " / ".join(f"{x:.1f}" for x in os.getloadavg())
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "batch1_s": batch1,
                    "batched_s": batched,
                    "batch1_cpu_s": cpu1,
                    "batched_cpu_s": cpu,
                    "docs": len(texts),
                    "batch1_tokens_per_doc": tokens1,
                    "batched_tokens_per_doc": tokens,
                    "values": values,
                }
            )
        )


if __name__ == "__main__":
    main()
