"""Where a batched extraction's two host pipelines spend the call (#23): a timeline per
pipeline of ``Engine().extract(contact_card, N cards)``, the cores' idle time read from it.

Each pipeline's thread is at any moment in one of: a forward (``runner.execute``, the host
lock let go), host work (holding the pipelines' ``HostLock``), waiting for that lock, or done
(its job returned while the call still runs); "other" is the rest (its thread between the
lock's hand-overs). A forward keeps its kernel threads busy (``kernel_threads()`` at its
start: 1 while both pipelines run, more where a pipeline runs alone), host work one core,
so on a host of ``C`` cores the idle core-time is the integral of
``C - min(C, busy threads)``: the figure this script reports per cause (a pipeline waiting
for the lock, a pipeline done), with its share of ``C x wall``. The shares are ratios of one
call's own intervals: a loaded host stretches the call but much less these ratios.

Per pipeline also: forward passes, rows through them, passes of at most ``--small-rows``
rows (the tail's) and their forward seconds, when its first step started and its last card
finished (``extractor._run``: the texts dealt up front), when it ended; where the extractor
has them (branch wt-h13-queue: ``_Prepared.add``, ``_finish``), the texts it took and its
scoring passes' seconds. The arms (``--arms``) are settings of ``extractor`` (``NAME=VALUE``)
or ``structgen.runtime.host_pipelines`` (``host_pipelines.NAME=VALUE``), several joined with
``+``, ``base`` the settings as they are; alternated round by round, order reversed every
other round, the prefix caches flushed before every call; the values must be equal in every
call (``AssertionError``).

Run:  PYTHONPATH=. OMP_NUM_THREADS=2 nice -n 10 python benchmarks/pipeline_timeline.py \
          --docs 200 --rounds 2 [--arms base,NAME=VALUE+...] [--on-result]
          [--trace trace.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_extract_batch import documents  # noqa: E402

STATES = ("forward", "host", "lock wait", "done", "other")


class _Recorder:
    """Intervals ``(pipeline, state, start, end, threads)`` of one call, from the wrapped
    lock and runners (thread-safe: a list's append)."""

    def __init__(self) -> None:
        self.events: list[tuple[int, str, float, float, int]] = []
        self.passes: list[tuple[int, float, float, int]] = []  # pipeline, start, end, rows
        self.phase: dict[int, dict[str, float]] = {}
        self.scoring: list[tuple[int, float, float, int]] = []  # pipeline, start, end, texts
        self.taken: list[tuple[int, float]] = []  # pipeline, when
        self.t0 = 0.0

    def reset(self) -> None:
        self.events.clear()
        self.passes.clear()
        self.scoring.clear()
        self.taken.clear()
        self.phase = {}
        self.t0 = time.perf_counter()


def _pipeline() -> int:
    """The calling thread's pipeline index (``structgen-pipeline-K``), -1 elsewhere."""
    name = threading.current_thread().name
    return int(name.rsplit("-", 1)[1]) if name.startswith("structgen-pipeline-") else -1


class _TimedLock:
    """A ``threading.Lock`` stand-in that records each pipeline's waits and holds."""

    def __init__(self, rec: _Recorder) -> None:
        self._lock = threading.Lock()
        self._rec = rec
        self._since = 0.0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        t = time.perf_counter()
        got = self._lock.acquire(blocking, timeout)
        if got:
            now = time.perf_counter()
            if now - t > 1e-5:
                self._rec.events.append((_pipeline(), "lock wait", t, now, 0))
            self._since = now
        return got

    def release(self) -> None:
        self._rec.events.append((_pipeline(), "host", self._since, time.perf_counter(), 0))
        self._lock.release()


def _instrument(pipes, rec: _Recorder) -> None:
    from structgen.extraction import extractor
    from structgen.runtime.cpu.threads import kernel_threads

    pipes.lock._lock = _TimedLock(rec)
    for e in pipes.engines:

        def timed(scheduled, execute=e.runner.execute):
            rows = sum(num for _, num in scheduled.scheduled)
            n = kernel_threads()
            t = time.perf_counter()
            try:
                return execute(scheduled)
            finally:
                now = time.perf_counter()
                k = _pipeline()
                rec.events.append((k, "forward", t, now, n))
                rec.passes.append((k, t, now, rows))

        e.runner.execute = timed
    run = extractor._run

    def timed_run(*args, **kwargs):
        phase = rec.phase.setdefault(_pipeline(), {})
        phase.setdefault("first step", time.perf_counter())
        try:
            return run(*args, **kwargs)
        finally:
            phase["last card"] = time.perf_counter()

    extractor._run = timed_run
    if not hasattr(extractor, "_finish"):  # the scoring and taking below: branch wt-h13-queue
        return
    finish = extractor._finish

    def timed_finish(engine, job, prep, done, on_result):  # the scoring passes of a chunk
        t = time.perf_counter()
        try:
            return finish(engine, job, prep, done, on_result)
        finally:
            rec.scoring.append((_pipeline(), t, time.perf_counter(), len(done)))

    extractor._finish = timed_finish
    add = extractor._Prepared.add

    def timed_add(self, engine, job, i):  # a text taken (compiled, its prompt built)
        rec.taken.append((_pipeline(), time.perf_counter()))
        return add(self, engine, job, i)

    extractor._Prepared.add = timed_add


def _analyse(rec: _Recorder, end: float, cores: int, small_rows: int) -> dict:
    """Idle core-seconds per cause and per-pipeline counts of one call (module docstring)."""
    pipes = sorted({k for k, *_ in rec.events if k >= 0})
    last = {k: max(e for kk, _, _, e, _ in rec.events if kk == k) for k in pipes}
    ev = [x for x in rec.events if x[0] >= 0]
    ev += [(k, "done", last[k], end, 0) for k in pipes]
    # sweep: per moment, each pipeline's state and a forward's kernel threads
    cuts = sorted({rec.t0, end, *(s for _, _, s, _, _ in ev), *(e for *_, e, _ in ev)})
    by_pipe = {k: sorted((s, e, st, n) for kk, st, s, e, n in ev if kk == k) for k in pipes}
    idle = {st: 0.0 for st in STATES}
    state_time = {k: {st: 0.0 for st in STATES} for k in pipes}
    pos = {k: 0 for k in pipes}
    for a, b in zip(cuts, cuts[1:]):
        mid, dt = (a + b) / 2, b - a
        states = {}
        for k in pipes:
            lst = by_pipe[k]
            while pos[k] < len(lst) and lst[pos[k]][1] <= mid:
                pos[k] += 1
            j, found = pos[k], ("other", 0)
            while j < len(lst) and lst[j][0] <= mid:
                if lst[j][0] <= mid < lst[j][1]:
                    found = (lst[j][2], lst[j][3])
                    break
                j += 1
            states[k] = found
            state_time[k][found[0]] += dt
        busy = sum(n if st == "forward" else 1 if st == "host" else 0 for st, n in states.values())
        spare = max(0, cores - busy) * dt
        if spare:  # the idle core-time, charged to the pipelines not at work, evenly
            lazy = [st for st, _ in states.values() if st not in ("forward", "host")]
            for st in lazy or ["other"]:
                idle[st] += spare / len(lazy or ["other"])
    wall = end - rec.t0
    out = {"wall": wall, "idle": idle, "idle share": sum(idle.values()) / (cores * wall)}
    for k in pipes:
        ps = [p for p in rec.passes if p[0] == k]
        ph = rec.phase.get(k, {})
        out[f"pipeline {k}"] = {
            "passes": len(ps),
            "rows": sum(p[3] for p in ps),
            f"passes <= {small_rows} rows": sum(1 for p in ps if p[3] <= small_rows),
            "their forward s": sum(p[2] - p[1] for p in ps if p[3] <= small_rows),
            "first step s": ph.get("first step", rec.t0) - rec.t0,
            "last card s": ph.get("last card", end) - rec.t0,
            "ended s": last[k] - rec.t0,
            **{f"{st} s": v for st, v in state_time[k].items()},
        }
        if rec.taken:  # recorded where the extractor has them (module docstring)
            scoring = [e - s for kk, s, e, _ in rec.scoring if kk == k]
            out[f"pipeline {k}"]["texts taken"] = sum(1 for kk, _ in rec.taken if kk == k)
            out[f"pipeline {k}"]["scoring s"] = sum(scoring)
            out[f"pipeline {k}"]["longest scoring s"] = max(scoring or [0.0])
    return out


def _module(name: str):
    """The module a setting ``NAME`` or ``host_pipelines.NAME`` lives in, and ``NAME``."""
    from structgen.extraction import extractor
    from structgen.runtime import host_pipelines

    if name.startswith("host_pipelines."):
        return host_pipelines, name.split(".", 1)[1]
    return extractor, name


def _apply(arm: str, saved: dict) -> None:
    """Restore ``saved`` (setting -> value), then set ``arm``'s settings."""
    for name, value in saved.items():
        mod, attr = _module(name)
        setattr(mod, attr, value)
    if arm == "base":
        return
    for item in arm.split("+"):
        name, value = item.split("=", 1)
        mod, attr = _module(name)
        if not hasattr(mod, attr):
            raise SystemExit(f"no setting {name}")
        setattr(
            mod,
            attr,
            json.loads({"True": "true", "False": "false", "None": "null"}.get(value, value)),
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--arms", default="base", help="extractor settings per arm, comma-separated")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--small-rows", type=int, default=8)
    ap.add_argument("--on-result", action="store_true", help="extract with on_result (the CLI)")
    ap.add_argument("--trace", type=Path, default=None, help="the last call's events as JSON")
    args = ap.parse_args()
    from structgen import Engine
    from structgen.runtime.host_pipelines import host_pipelines

    arms = args.arms.split(",")
    names = {n for a in arms if a != "base" for n in (i.split("=")[0] for i in a.split("+"))}
    saved = {n: getattr(*_module(n)) for n in names}
    schema = json.loads((ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text())
    texts = documents(args.docs, args.seed)
    engine = Engine()
    engine.extract(schema, documents(args.docs + 1, args.seed)[-1])  # untimed: compile
    pipes = host_pipelines(engine)
    rec = _Recorder()
    _instrument(pipes, rec)
    res: dict[str, list[dict]] = {a: [] for a in arms}
    first = None
    try:
        for r in range(args.rounds):
            for arm in arms if r % 2 == 0 else arms[::-1]:
                _apply(arm, saved)
                pipes.flush_cache()
                engine.flush_cache()
                rec.reset()
                c = time.process_time()
                report = (lambda i, v: None) if args.on_result else None
                out = engine.extract(schema, texts, on_result=report)
                end = time.perf_counter()
                cpu = time.process_time() - c
                first = out if first is None else first
                assert out == first, f"{arm}, round {r + 1}: other values"
                a = _analyse(rec, end, args.cores, args.small_rows)
                a["cpu"] = cpu
                res[arm].append(a)
                idle = ", ".join(f"{k} {v:.2f}" for k, v in a["idle"].items() if v)
                print(
                    f"round {r + 1}, {arm}: wall {a['wall']:.2f} s, process CPU {cpu:.2f} s, "
                    f"idle core-s {idle} ({100 * a['idle share']:.1f}% of {args.cores} x wall);"
                    f" load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                for k in (0, 1):
                    p = a.get(f"pipeline {k}")
                    if p:
                        print("   ", k, ", ".join(f"{n} {v:.2f}" if isinstance(v, float)
                              else f"{n} {v}" for n, v in p.items()), flush=True)  # fmt: skip
    finally:
        _apply("base", saved)
    if args.trace:
        args.trace.write_text(json.dumps({"t0": rec.t0, "events": rec.events,
                                          "passes": rec.passes, "scoring": rec.scoring,
                                          "taken": rec.taken}))  # fmt: skip
    print(
        "\n| arm | wall s (rounds) | process CPU s | idle core-s: lock wait / done / other "
        "| idle share | vs first arm (wall, median) |\n|---|---|---|---|---|---|"
    )
    base = statistics.median(x["wall"] for x in res[arms[0]])
    for arm in arms:
        xs = res[arm]
        walls = [x["wall"] for x in xs]
        med = statistics.median(walls)
        idle = [statistics.median(x["idle"][s] for x in xs) for s in ("lock wait", "done", "other")]
        print(
            f"| {arm} | {', '.join(f'{w:.2f}' for w in walls)} "
            f"| {statistics.median(x['cpu'] for x in xs):.2f} "
            f"| {' / '.join(f'{v:.2f}' for v in idle)} "
            f"| {100 * statistics.median(x['idle share'] for x in xs):.1f}% | {base / med:.3f}x |"
        )
    print("values equal across arms and rounds")


if __name__ == "__main__":
    main()
