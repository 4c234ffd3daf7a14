"""The Earley part of a cold pass alone: its scans replayed on fresh charts (thread CPU).

One cold pass of ``cold_ab``'s workload (compile, then a mask and an advance per token)
records every ``EarleyCharts.scan(node, terminal)`` the grammar automaton made, in order,
and the arguments its charts were built with. The scans are then replayed on new charts
of this checkout's ``earley.py`` and of a baseline's (``--baseline DIR``: its
``structgen/fsm/grammar/earley.py`` loaded inside this package, so both read the same
lowered grammar), alternated with the order rotated, ``--repeat`` times each; the table
gives each one's least thread CPU time. Both must return the same node for every scan
and build the same nodes (items, ``final``, expected terminals): the run stops otherwise.
This checkout's charts run twice: its Python reference (``native=False``) and, when the C
extension is built, its C charts (``csrc/earley.c``); both must match the baseline's nodes.
This is the Earley cost alone, measured without the token-trie walk and the lexers around it.

    PYTHONPATH=. python benchmarks/earley_replay.py --baseline /work/main
        [--only cfg:json.gbnf,gbnf:c] [--tokenizer smollm2|bpe150k] [--repeat 15]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.cold_ab as ca  # noqa: E402
from structgen.fsm.grammar import earley  # noqa: E402

ONLY = "cfg:json.gbnf,cfg:c_statements.lark,gbnf:json,gbnf:c"


def _baseline_earley(root: Path):
    """``earley.py`` of checkout ``root`` as a module inside this ``structgen.fsm.grammar``
    (its relative imports read this checkout's ``lower`` and ``errors``)."""
    name = "structgen.fsm.grammar._earley_baseline"
    spec = importlib.util.spec_from_file_location(
        name, root / "structgen" / "fsm" / "grammar" / "earley.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _record(eng, kind, spec, ids) -> tuple[tuple, dict, list[tuple[int, int]]]:
    """The last charts' constructor arguments and every scan of one cold pass."""
    made, calls = [], []
    cls = earley.EarleyCharts
    init, scan = cls.__init__, cls.scan

    def recording_init(self, *args, **kwargs):
        made.append((args, kwargs))
        init(self, *args, **kwargs)
        if "scan" in vars(self):  # the C charts' method, set on the instance
            native_scan = self.scan

            def recording_native_scan(node, terminal):
                calls.append((node, terminal))
                return native_scan(node, terminal)

            self.scan = recording_native_scan

    def recording_scan(self, node, terminal):
        calls.append((node, terminal))
        return scan(self, node, terminal)

    cls.__init__, cls.scan = recording_init, recording_scan
    try:
        ca._pass(eng, kind, spec, ids)
    finally:
        cls.__init__, cls.scan = init, scan
    args, kwargs = made[-1]
    return args, kwargs, calls


def _nodes(charts) -> list[tuple]:
    return [
        (tuple(sorted(charts.items[i])), charts.final[i], tuple(charts.expected[i]))
        for i in range(charts.num_nodes)
    ]


def _replay(make, args, kwargs, calls) -> tuple[float, list[int], object]:
    charts = make(*args, **kwargs)
    gc.collect()
    t0 = time.thread_time()
    out = [charts.scan(node, t) for node, t in calls]
    return time.thread_time() - t0, out, charts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--only", default=ONLY, help="comma-separated cold_ab workload names")
    ap.add_argument("--tokenizer", choices=["smollm2", "bpe150k"], default="smollm2")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    base = _baseline_earley(args.baseline)
    tok = bg.bpe_150k_tokenizer() if args.tokenizer == "bpe150k" else bg.smollm2_tokenizer()
    eng = ca._StructgenOf("new", "structgen", tok)
    work = ca._workloads(tok, set(args.only.split(",")))
    makers = {
        "base": base.EarleyCharts,
        "python": lambda *a, **k: earley.EarleyCharts(*a, **k, native=False),
    }
    if earley.HAVE_C_EARLEY:
        makers["C"] = lambda *a, **k: earley.EarleyCharts(*a, **k, native=True)
    keys = list(makers)
    print(
        "| workload | scans | nodes | "
        + " | ".join(f"{k} ms" for k in keys)
        + " | python / base | C / python | C us / scan |"
    )
    print("|---" * (len(keys) + 6) + "|")
    for name, kind, spec, ids in work:
        cargs, ckwargs, calls = _record(eng, kind, spec, ids)
        gc.collect()
        gc.freeze()
        best = dict.fromkeys(keys, float("inf"))
        runs = {}
        for r in range(args.repeat):
            for key in keys[r % len(keys) :] + keys[: r % len(keys)]:  # order rotated
                dt, out, charts = _replay(makers[key], cargs, ckwargs, calls)
                best[key] = min(best[key], dt)
                runs[key] = (out, charts)
        out_b, charts_b = runs["base"]
        for key in keys[1:]:
            if runs[key][0] != out_b or _nodes(runs[key][1]) != _nodes(charts_b):
                raise SystemExit(f"{name}: {key} built other nodes than the baseline")
        gc.unfreeze()
        ms = {k: v * 1e3 for k, v in best.items()}
        c = ms.get("C", float("nan"))
        print(
            f"| {name} | {len(calls)} | {charts_b.num_nodes} | "
            + " | ".join(f"{ms[k]:.2f}" for k in keys)
            + f" | {ms['python'] / ms['base']:.2f}x | {c / ms['python']:.3f}x"
            + f" | {c * 1e3 / len(calls):.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
