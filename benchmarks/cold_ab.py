"""Cold masks of two structgen checkouts and llguidance in one process (thread CPU).

The baseline checkout (``--baseline DIR``: its ``structgen`` package, C extensions built
there, loaded under the name ``structgen_base``) and this one are compiled afresh on the
same workloads, their passes interleaved with llguidance's (the order rotated each pass, so
no engine always follows the same one) (a new ``LLMatcher`` per pass), each instance forced
token by token with every per-grammar cache emptied before each compile (structgen:
``reset``, untimed: ``clear_cache(memos=True)``, ``prepare``'s warm-up and the lexical
cache's unpinned entries, as bench_grammar's cold-empty). Timed: ``fill_bitmask`` before
each token with ``time.thread_time`` (what load on shared cores distorts least); the
collector is frozen after the setup. Workloads: the five schemas of
``data/cold_schemas.json`` (compact instances), llama.cpp's grammars of
``tests/fixtures/gbnf`` (``--gbnf-sweep``'s valid texts, the first 600 tokens; llguidance
reads ``gbnf_to_lark``'s translation) and the grammars of ``bench_grammar.py --grammars``
(``cfg:<file>``, its valid texts, 600 tokens).

Per workload and engine, from its pass with the least compile + masks + advances CPU time
(load only adds time): cold mask mean and p99 per token (us) and that total (ms); the least
compile CPU over the passes (ms); and the warm mask median (us, wall clock: the instance
forced again through a grammar it built).

    PYTHONPATH=. python benchmarks/cold_ab.py --baseline /work/main [--passes 9]
        [--only flat,c,...] [--tokenizer smollm2|bpe150k] [--sample N] [--sample-only a,b]
        [--untimed-clear]

``--untimed-clear``: structgen's ``reset`` ends with the compile's own clears
(``clear_cache()``, the lexical cache), so its timed compile no longer frees the two
grammars ``prepare``'s warm-up leaves in the compile cache (their deallocation, ~0.1 ms,
is otherwise part of every structgen compile here; no request of a server pays it).

``--sample N`` adds the first N MaskBench members per subset (bench_grammar --cold's sample,
after the workloads ``--only`` keeps) and ends with their pooled figures as bench_grammar
reports them; ``--sample-only`` keeps the members whose label holds one of the given
strings (``o12344,JME_15``).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.bench_grammar as bg  # noqa: E402
import benchmarks.grammar_cfg_mode as gm  # noqa: E402
from structgen.fsm import _MEMOS  # noqa: E402
from structgen.fsm.index.count_masks import STATE_TABLES  # noqa: E402

MAX_FORCED = 600


def _load_checkout(name: str, root: Path):
    """The ``structgen`` package of checkout ``root`` imported as ``name`` (the package's
    own imports are relative, so it stays whole)."""
    pkg = root / "structgen"
    spec = importlib.util.spec_from_file_location(
        name, pkg / "__init__.py", submodule_search_locations=[str(pkg)]
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class _StructgenOf(bg.Structgen):
    """bench_grammar's cold-empty structgen engine over one package (``structgen`` or a
    baseline loaded by ``_load_checkout``): its matcher, mask and accept, its own compile."""

    untimed_clear = False  # --untimed-clear: reset ends with compile's own clears

    def __init__(self, name: str, pkg: str, tok) -> None:
        import importlib

        self.name = name
        self.fsm = importlib.import_module(f"{pkg}.fsm")
        self.vocab = self.fsm.Vocabulary.from_tokenizer(tok)
        if hasattr(self.vocab, "prepare"):  # the per-tokenizer step, where the checkout has it
            with self._own_name():  # its warm-up compiles a recursive schema (the C charts)
                self.vocab.prepare()
        else:
            _ = self.vocab.token_trie, self.vocab.index_tables
            self.vocab.lexical_masks.prepare()
        self.words = (self.vocab.vocab_size + 31) // 32
        # setup's state tables, for a checkout without Vocabulary.clear_tables
        self._setup_exits = set(self.vocab.lexical_masks._exits)
        self._setup_tables = {n: set(self.vocab.__dict__.get(n, ())) for n in STATE_TABLES}

    def _fresh(self) -> None:
        self.fsm.clear_cache()
        self.vocab.lexical_masks.clear()

    def reset(self) -> None:
        """bench_grammar's ``Structgen.reset`` through this package (untimed, before each
        pass): its per-process memos dropped, then ``prepare``'s warm-up and
        ``Vocabulary.clear_tables``; a checkout without them gets the same through its
        modules' attributes (this checkout's ``fsm._MEMOS``, setup's state tables)."""
        try:
            self.fsm.clear_cache(memos=True)
        except TypeError:  # an older checkout: this checkout's list, through its modules
            self.fsm.clear_cache()
            for module, name in _MEMOS:
                loaded = sys.modules.get(self.fsm.__name__ + module)
                memo = getattr(loaded, name, None)
                if memo is not None:
                    (getattr(memo, "cache_clear", None) or memo.clear)()
        if hasattr(self.vocab, "clear_tables"):
            self.vocab.clear_tables()
        else:  # the same trim, through the older checkout's attributes
            exits = self.vocab.lexical_masks._exits
            for key in [k for k in exits if k not in self._setup_exits]:
                exits.pop(key)
            for name, kept in self._setup_tables.items():
                table = self.vocab.__dict__.get(name, {})
                for key in [k for k in table if k not in kept]:
                    table.pop(key)
        if hasattr(self.vocab, "prepare"):
            with self._own_name():
                self.vocab.prepare()
        self.vocab.lexical_masks.clear()
        if self.untimed_clear:  # prepare's two grammars freed here, not in the timed compile
            self._fresh()

    @contextlib.contextmanager
    def _own_name(self):
        """While compiling, ``structgen`` names this package: the C row builder finds the C
        charts' API by that absolute name (``PyCapsule_Import`` of
        ``structgen.fsm.grammar._earley._C_API``, ``csrc/sg_earley_api.h``), so a baseline
        loaded as ``structgen_base`` would otherwise get the other checkout's charts type.
        """
        name = self.fsm.__name__.split(".")[0]
        if name == "structgen":
            yield
            return
        own = sys.modules["structgen"]
        importlib.import_module(f"{name}.fsm.grammar._earley")
        sys.modules["structgen"] = sys.modules[name]
        try:
            yield
        finally:
            sys.modules["structgen"] = own

    def compile(self, schema):  # bench_grammar's compile, through this package
        self._fresh()
        with self._own_name():
            return self.fsm.compile_json_schema(
                schema, self.vocab, strict=False, allow_extra_properties=True
            )

    schema = compile

    def gbnf(self, text: str):
        self._fresh()
        with self._own_name():
            return self.fsm.compile_grammar(text, self.vocab, syntax="gbnf")

    def lark(self, text: str):
        self._fresh()
        with self._own_name():
            return self.fsm.compile_grammar(text, self.vocab, syntax="lark")


class _LLGuidance(bg.LLGuidance):
    def schema(self, schema):
        return self.compile(schema)

    def gbnf(self, text: str):
        from llguidance.gbnf_to_lark import gbnf_to_lark

        return self.llg.grammar_from("lark", gbnf_to_lark(text))

    def lark(self, text: str):
        return self.llg.grammar_from("lark", text)


def _workloads(tok, only: set[str] | None, sample: int = 0, sample_only: list[str] = ()):
    out = []
    for name, case in json.loads(bg.COLD_SCHEMAS.read_text()).items():
        text = json.dumps(case["instance"], separators=(",", ":"))
        out.append((name, "schema", case["schema"], tok.encode(text, add_special_tokens=False)))
    for name, valid in gm._gbnf_valid_texts().items():
        text = (gm.GBNF_FIXTURES / f"{name}.gbnf").read_text(encoding="utf-8")
        ids = tok.encode(valid, add_special_tokens=False)[:MAX_FORCED]
        out.append((f"gbnf:{name}", "gbnf", text, ids))
    for name, valid in gm._valid_texts().items():  # bench_grammar --grammars' files
        path = gm.DATA / name
        ids = tok.encode(valid, add_special_tokens=False)[:MAX_FORCED]
        kind = "lark" if path.suffix == ".lark" else "gbnf"
        out.append((f"cfg:{name}", kind, path.read_text(encoding="utf-8"), ids))
    out = [w for w in out if only is None or w[0] in only or w[0].split(":")[-1] in only]
    for label, schema, text in bg.cold_cases(sample)[5:] if sample else ():
        if sample_only and not any(k in label for k in sample_only):
            continue
        out.append((label, "schema", schema, tok.encode(text, add_special_tokens=False)))
    return out


def _pass(eng, kind, spec, ids, clock=time.thread_time):
    """(mask seconds per token, compile + masks + advances seconds, tokens accepted,
    compile seconds); ``([], inf, -1, nan)`` when the engine refuses the grammar."""
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    if hasattr(eng, "reset"):
        eng.reset()
    t0 = clock()
    try:
        g = getattr(eng, kind)(spec)
    except Exception:  # a peer that does not support the schema (llguidance's "not")
        return [], float("inf"), -1, float("nan")
    total = compile_s = clock() - t0
    m = eng.matcher(g)
    masks, n_ok = [], 0
    for t in ids:
        a = clock()
        eng.mask(m, buf)
        b = clock()
        ok = eng.accept(m, t)
        total += clock() - a
        masks.append(b - a)
        if not ok:
            break
        n_ok += 1
    return masks, total, n_ok, compile_s


def _warm(eng, kind, spec, ids) -> float:
    """Median seconds of a warm mask: the instance forced a second time through the same
    compiled grammar (every state's mask built by the first pass), wall clock; nan when
    the engine refuses the grammar."""
    try:
        g = getattr(eng, kind)(spec)
    except Exception:
        return float("nan")
    _pass_through(eng, g, ids)
    return statistics.median(_pass_through(eng, g, ids))


def _pass_through(eng, g, ids, clock=time.perf_counter) -> list[float]:
    buf = torch.zeros((1, eng.words), dtype=torch.int32)
    m = eng.matcher(g)
    out = []
    for t in ids:
        a = clock()
        eng.mask(m, buf)
        out.append(clock() - a)
        if not eng.accept(m, t):
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", type=Path, required=True, help="checkout to compare with")
    ap.add_argument("--passes", type=int, default=9)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument(
        "--tokenizer", choices=["smollm2", "bpe150k"], default="smollm2", help="vocabulary"
    )
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="also the first N MaskBench members per subset (bench_grammar --cold's sample), "
        "then their pooled figures",
    )
    ap.add_argument(
        "--sample-only", default="", help="keep the sample members whose label holds one of these"
    )
    ap.add_argument(
        "--untimed-clear",
        action="store_true",
        help="structgen's reset (untimed) ends with the compile caches emptied, so the timed "
        "compile's own clear_cache frees nothing: prepare's warm-up leaves two grammars in the "
        "compile cache, which the default frees inside the timed compile",
    )
    args = ap.parse_args()
    _StructgenOf.untimed_clear = args.untimed_clear
    _load_checkout("structgen_base", args.baseline)
    tok = bg.bpe_150k_tokenizer() if args.tokenizer == "bpe150k" else bg.smollm2_tokenizer()
    engines = [_StructgenOf("old", "structgen_base", tok), _StructgenOf("new", "structgen", tok)]
    try:
        engines.append(_LLGuidance(tok))
    except ImportError as exc:
        print(f"llguidance: {exc}")
    only = set(args.only.split(",")) if args.only else None
    keep = [k for k in args.sample_only.split(",") if k]
    work = _workloads(tok, only, args.sample, keep)
    gc.collect()
    gc.freeze()
    cols = [e.name for e in engines]
    print(
        "| workload (tokens) | "
        + " | ".join(f"{c} mean / p99 us" for c in cols)
        + " | "
        + " | ".join(f"{c} total ms" for c in cols)
        + " | "
        + " | ".join(f"{c} compile ms" for c in cols)
        + " | "
        + " | ".join(f"{c} warm median us" for c in cols)
        + " | old / new | new / llguidance | total new / llguidance |"
    )
    print("|---" * (4 * len(cols) + 4) + "|")
    best = {}  # workload -> engine -> its least-CPU pass
    for name, kind, spec, ids in work:
        res = {e.name: [] for e in engines}
        compiles = {e.name: [] for e in engines}
        for p in range(args.passes):
            for eng in engines[p % len(engines) :] + engines[: p % len(engines)]:
                masks, total, n_ok, compile_s = _pass(eng, kind, spec, ids)
                mean, p99 = (np.mean(masks), np.percentile(masks, 99)) if masks else (np.nan,) * 2
                res[eng.name].append((float(mean), float(p99), total, n_ok, masks))
                compiles[eng.name].append(compile_s)
        # each engine's pass with the least CPU time (what load adds is never negative)
        med = {k: list(min(v, key=lambda r: r[2])) for k, v in res.items()}
        best[name] = {k: (v[4], v[2], v[3] == len(ids)) for k, v in med.items()}
        warm = {e.name: _warm(e, kind, spec, ids) for e in engines}
        cells = [
            f"{med[c][0] * 1e6:.1f} / {med[c][1] * 1e6:.0f}"
            + (
                ""
                if med[c][3] == len(ids)
                else " (refused)"
                if med[c][3] < 0
                else f" (rejected at {med[c][3]})"
            )
            for c in cols
        ]
        totals = [f"{med[c][2] * 1e3:.2f}" for c in cols]
        ratio = med["old"][0] / med["new"][0]
        peer = f"{med['new'][0] / med['llguidance'][0]:.2f}x" if "llguidance" in med else "-"
        peer_total = f"{med['new'][2] / med['llguidance'][2]:.2f}x" if "llguidance" in med else "-"
        print(
            f"| {name} ({len(ids)}) | "
            + " | ".join(cells)
            + " | "
            + " | ".join(totals)
            + " | "
            + " | ".join(f"{min(compiles[c]) * 1e3:.2f}" for c in cols)
            + " | "
            + " | ".join(f"{warm[c] * 1e6:.2f}" for c in cols)
            + f" | {ratio:.2f}x | {peer} | {peer_total} |",
            flush=True,
        )
    if args.sample:
        _sample_summary(best, [w[0] for w in work if "/" in w[0]], cols)


def _sample_summary(best: dict, labels: list[str], cols: list[str]) -> None:
    """The MaskBench sample as bench_grammar --cold reports it (over the schemas every engine
    accepted: median of per-schema mask means, pooled p99, median total), from each engine's
    least-CPU pass per schema, and the schemas holding new's tokens above its pooled p99."""
    common = [lb for lb in labels if all(best[lb][c][2] for c in cols)]
    print(f"\nMaskBench sample: {len(common)} of {len(labels)} schemas accepted by every engine")
    print("| engine | median of per-schema mean us | pooled p99 us | median total ms |")
    print("|---|---|---|---|")
    p99 = {}
    for c in cols:
        pooled = np.concatenate([best[lb][c][0] for lb in common]) * 1e6
        p99[c] = float(np.percentile(pooled, 99))
        means = [np.mean(best[lb][c][0]) * 1e6 for lb in common]
        totals = [best[lb][c][1] * 1e3 for lb in common]
        print(f"| {c} | {np.median(means):.1f} | {p99[c]:.0f} | {np.median(totals):.2f} |")
    above = {lb: int((np.array(best[lb]["new"][0]) * 1e6 > p99["new"]).sum()) for lb in common}
    top = sorted(((k, lb) for lb, k in above.items() if k), reverse=True)[:8]
    print(
        "new's tokens above its pooled p99, by schema: " + ", ".join(f"{lb} {k}" for k, lb in top)
    )


if __name__ == "__main__":
    main()
