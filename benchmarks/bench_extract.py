"""Extraction on the dev set (``benchmarks/data/extraction/``): structgen against its peers
on the same model file and the same messages.

Peers, each in its own subprocess (one at a time, so they never share the CPUs):

- ``structgen``: ``structgen.extraction.extract`` at its defaults (greedy, the schema's
  grammar, ``max_tokens=512``);
- ``structgen-nocopy``: the same with ``copy=False`` where ``extract`` takes that
  parameter (copy constraints off; without the parameter it is the default again and the
  table says so);
- ``baseline``: structgen at another checkout (``--baseline-checkout DIR``, run with
  ``PYTHONPATH=DIR``): its own ``extract`` and its own prompt, i.e. what a user got then;
- ``llama.cpp``: llama-cpp-python on the same GGUF file (``create_chat_completion`` with
  ``response_format={"type": "json_object", "schema": ...}``, or ``create_completion`` with
  the schema's grammar for a plain-completion prompt), 2 threads; install it with
  ``benchmarks/install_llama_cpp.sh``;
- ``xgrammar``: transformers' ``LlamaForCausalLM`` in fp32 holding the GGUF's weights
  dequantized by structgen's loader, greedy, each step masked by an XGrammar
  ``GrammarMatcher`` compiled from the schema (compact JSON).

Every peer but ``baseline`` gets exactly the messages of structgen's default prompt
(``structgen.extraction.extraction_messages``, or ``--prompt-style``). Per peer: field
accuracy and documents fully right (``extraction_scoring.py``, rules in
``data/extraction/SCORING.md``), schema-valid outputs (``jsonschema`` with formats),
documents that hit ``max_tokens``, load time, seconds per document warm at batch 1 (the
first ``--batch1-docs`` documents, after one untimed extraction) and batched (every
document submitted at once; structgen only, the others run one at a time). Accuracy is
scored on the batched pass (the batch-1 pass for the peers without batching).

A streamed run (``--jsonl-dir DIR``) is for long batch-1 runs that may be cut: the peers
named run in one process, one document at a time (every domain's first document first),
interleaved (document ``i`` rotates the peers' order by ``i``, so their seconds are
same-load), each record appended to ``DIR/PEER.jsonl`` as it finishes (value, raw text,
finish reason, seconds, load average; llama.cpp's also its completion tokens and, beside
structgen, whether its prompt ids were structgen's); ``--resume`` skips the documents a
file holds, ``--score-only`` scores the files as they are (the documents every peer's holds), with
``score_peer`` as every other run, plus a per-document seconds table.

Run:  python benchmarks/bench_extract.py [--peers structgen,llama.cpp,xgrammar]
      [--baseline-checkout DIR] [--limit N] [--ids ID,ID] [--batch1-docs 8] [--prompt-style NAME]
      [--extract-kwargs '{"score_options": true}'] [--rescore-evidence RUN.json]
      [--rescore-span-ends RUN.json]
      [--llama-threads 2] [--jsonl-dir DIR [--resume] [--score-only]]
      [--data-dir benchmarks/data/extraction_holdout]
      [--json FILE] [--plot benchmarks/bench_extract.png]
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jsonschema

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import extraction_scoring as scoring  # noqa: E402 - a module beside this script

PEERS = ("structgen", "structgen-nocopy", "baseline", "llama.cpp", "xgrammar")
MAX_TOKENS = 512


# ------------------------------------------------------------------ workers
def _record(doc: dict, value: Any, raw: str, finish: str | None, error: str | None) -> dict:
    return {"id": doc["id"], "value": value, "raw_text": raw, "finish_reason": finish,
            "error": error}  # fmt: skip


def _structgen_setup(job: dict, nocopy: bool) -> dict:
    """structgen's engine and ``one(doc) -> record`` (one extraction, batch 1) for ``job``.

    Returns:
        ``{"engine", "one", "load_s", "notes", "kw", "params", "details"}``: ``load_s`` the
        seconds of ``Engine(...)``, ``notes`` what differs from ``extract``'s defaults,
        ``kw`` and ``params`` what ``one`` passes to ``extract``, ``details`` whether it
        asks for ``return_details``.
    """
    from structgen import Engine, SamplingParams
    from structgen.errors import ExtractionError
    from structgen.extraction import extractor

    style = job.get("prompt_style")
    if style is not None:  # a prompt experiment: every extraction gets that style
        from functools import partial

        from structgen.extraction import prompt

        extractor.extraction_messages = partial(prompt.extraction_messages, style=style)
    sig = inspect.signature(extractor.extract).parameters
    kw: dict[str, Any] = {"errors": "return", **job.get("extract_kwargs", {})}
    notes = [f"extract kwargs {job['extract_kwargs']}"] if job.get("extract_kwargs") else []
    if nocopy:
        if "copy" in sig:
            kw["copy"] = False
        else:
            notes.append("extract has no copy parameter: same as the default")
    details = "return_details" in sig
    if details:
        kw["return_details"] = True
    sampling = job.get("sampling_kwargs") or {}
    if job["max_tokens"] == getattr(extractor, "DEFAULT_EXTRACT_MAX_TOKENS", None) and not sampling:
        params = None  # extract's own default settings: what the measurement is of
    else:
        params = SamplingParams(**{"max_tokens": job["max_tokens"], "temperature": 0.0, **sampling})
        notes.extend([f"SamplingParams kwargs {sampling}"] if sampling else [])
    t0 = time.perf_counter()
    engine = Engine(**job.get("engine_kwargs", {}))
    load_s = time.perf_counter() - t0
    if job.get("engine_kwargs"):
        notes.append(f"Engine kwargs {job['engine_kwargs']}")

    def one(doc: dict) -> dict:
        (res,) = extractor.extract(engine, doc["schema"], [doc["text"]], params=params, **kw)
        if isinstance(res, ExtractionError):
            return _record(doc, None, res.raw_text, res.finish_reason, str(res))
        if details:
            return _record(doc, _plain(res.value), res.raw_text, res.finish_reason, None)
        return _record(doc, _plain(res), json.dumps(_plain(res)), "stop", None)

    return {"engine": engine, "one": one, "load_s": load_s, "notes": notes, "kw": kw,
            "params": params, "details": details}  # fmt: skip


def _structgen_worker(job: dict, nocopy: bool) -> dict:
    from structgen.errors import ExtractionError
    from structgen.extraction import extractor
    from structgen.fsm.spec import JsonSchema

    sg = _structgen_setup(job, nocopy)
    engine, one, load_s, notes = sg["engine"], sg["one"], sg["load_s"], sg["notes"]
    kw, params, details = sg["kw"], sg["params"], sg["details"]
    sig = inspect.signature(extractor.extract).parameters
    docs = job["docs"]
    if job["batch1_docs"]:
        one(docs[0])  # warm: grammar compiled, kernels and caches touched
    batch1 = []
    for doc in docs[: job["batch1_docs"]]:
        t = time.perf_counter()
        rec = one(doc)
        rec["s"] = time.perf_counter() - t
        batch1.append(rec)
    for schema in {json.dumps(d["schema"], sort_keys=True): d["schema"] for d in docs}.values():
        JsonSchema(schema, allow_extra_properties=False).compile(engine.vocab)  # warm, cached
    t = time.perf_counter()
    if "on_result" in sig:  # extract runs through run_requests: threads batch together
        with ThreadPoolExecutor(max_workers=len(docs)) as pool:
            batched = list(pool.map(one, docs))
        mode = "all documents at once"
    else:  # an older extract (engine.generate is not thread-safe): one call per schema
        batched = [None] * len(docs)
        by_schema: dict[str, list[int]] = {}
        for i, d in enumerate(docs):
            by_schema.setdefault(json.dumps(d["schema"], sort_keys=True), []).append(i)
        for idx in by_schema.values():
            schema = docs[idx[0]]["schema"]
            outs = extractor.extract(engine, schema, [docs[i]["text"] for i in idx], params=params,
                                     **kw)  # fmt: skip
            for i, res in zip(idx, outs):
                if isinstance(res, ExtractionError):
                    batched[i] = _record(docs[i], None, res.raw_text, res.finish_reason, str(res))
                elif details:
                    batched[i] = _record(docs[i], _plain(res.value), res.raw_text,
                                         res.finish_reason, None)  # fmt: skip
                else:
                    batched[i] = _record(docs[i], _plain(res), "", "stop", None)
        mode = "one batch per schema (extract is not thread-safe there)"
    batched_s = time.perf_counter() - t
    notes.append(f"batched: {mode}")
    return {"load_s": load_s, "batch1": batch1, "results": batched,
            "batched_s_per_doc": batched_s / len(docs), "notes": notes}  # fmt: skip


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _llama_cpp_setup(job: dict, reference_ids: Any = None) -> dict:
    """llama-cpp-python on the packaged GGUF file and ``one(doc) -> record`` for ``job``.

    ``job["llama_threads"]`` (default 2) sets ``n_threads`` and ``n_threads_batch``. With
    ``reference_ids`` (``messages -> token ids``, e.g. structgen's
    ``engine.apply_chat_template``), each chat record gets ``same_prompt_ids``: whether
    the prompt llama.cpp evaluated (its chat template from the GGUF) is those ids.

    Returns:
        ``{"one", "load_s", "notes"}``.
    """
    from llama_cpp import Llama, LlamaGrammar

    from structgen.runtime.loader import default_model_path

    threads = job.get("llama_threads", 2)
    t0 = time.perf_counter()
    llm = Llama(model_path=str(default_model_path()), n_ctx=4096, n_threads=threads,
                n_threads_batch=threads, verbose=False)  # fmt: skip
    load_s = time.perf_counter() - t0

    def one(doc: dict) -> dict:
        msgs, schema = doc["messages"], doc["schema"]
        if isinstance(msgs, str):
            grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
            out = llm.create_completion(msgs, grammar=grammar, max_tokens=job["max_tokens"],
                                        temperature=0.0)  # fmt: skip
            choice = out["choices"][0]
            text = choice["text"]
        else:
            out = llm.create_chat_completion(
                messages=msgs,
                response_format={"type": "json_object", "schema": schema},
                max_tokens=job["max_tokens"],
                temperature=0.0,
            )
            choice = out["choices"][0]
            text = choice["message"]["content"] or ""
        rec = _parsed(doc, text, choice["finish_reason"])
        rec["completion_tokens"] = out["usage"]["completion_tokens"]
        if reference_ids is not None and not isinstance(msgs, str):
            n = out["usage"]["prompt_tokens"]
            rec["same_prompt_ids"] = [int(t) for t in llm.input_ids[:n]] == list(
                reference_ids(msgs)
            )
        return rec

    return {"one": one, "load_s": load_s, "notes": [f"llama.cpp n_threads={threads}"]}


def _llama_cpp_worker(job: dict) -> dict:
    ll = _llama_cpp_setup(job)
    return _sequential(job, ll["one"], ll["load_s"], ll["notes"])


def _parsed(doc: dict, text: str, finish: str | None) -> dict:
    try:
        return _record(doc, json.loads(text), text, finish, None)
    except json.JSONDecodeError as exc:
        return _record(doc, None, text, finish, f"not JSON: {exc}")


def _sequential(job: dict, one: Any, load_s: float, notes: list[str] | None = None) -> dict:
    docs = job["docs"]
    one(docs[0])  # warm
    results = []
    for doc in docs:
        t = time.perf_counter()
        rec = one(doc)
        rec["s"] = time.perf_counter() - t
        results.append(rec)
    return {
        "load_s": load_s,
        "batch1": results[: job["batch1_docs"]],
        "results": results,
        "batched_s_per_doc": None,
        "notes": [*(notes or []), "no batching: one document at a time"],
    }


def _xgrammar_setup(job: dict) -> dict:
    """transformers + XGrammar on the GGUF's weights and ``one(doc) -> record`` for ``job``.

    Returns:
        ``{"one", "load_s", "notes"}``.
    """
    import torch
    import xgrammar as xgr
    from bench_maskbench import smollm2_tokenizer
    from bench_models import _hf_llama

    from structgen.runtime.loader import load_model

    t0 = time.perf_counter()
    model = _hf_llama(load_model(None, torch.float32, "cpu"))
    tok = smollm2_tokenizer()
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=model.config.vocab_size)
    compiler = xgr.GrammarCompiler(info, max_threads=1)
    load_s = time.perf_counter() - t0
    eos = {tok.eos_token_id}

    @torch.no_grad()
    def one(doc: dict) -> dict:
        msgs = doc["messages"]
        if isinstance(msgs, str):
            ids = tok(msgs)["input_ids"]
        else:
            ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True,
                                          return_dict=True)["input_ids"]  # fmt: skip
        grammar = compiler.compile_json_schema(json.dumps(doc["schema"]), any_whitespace=False)
        matcher = xgr.GrammarMatcher(grammar)
        mask = xgr.allocate_token_bitmask(1, info.vocab_size)
        inp, past, out = torch.tensor([list(ids)]), None, []
        finish = "length"
        for _ in range(job["max_tokens"]):
            res = model(input_ids=inp, past_key_values=past, use_cache=True)
            past = res.past_key_values
            logits = res.logits[:, -1, :].float()
            matcher.fill_next_token_bitmask(mask)
            xgr.apply_token_bitmask_inplace(logits, mask)
            t = int(logits.argmax(-1))
            matcher.accept_token(t)
            if t in eos or matcher.is_terminated():
                if t not in eos:
                    out.append(t)
                finish = "stop"
                break
            out.append(t)
            inp = torch.tensor([[t]])
        return _parsed(doc, tok.decode(out), finish)

    return {"one": one, "load_s": load_s, "notes": []}


def _xgrammar_worker(job: dict) -> dict:
    xg = _xgrammar_setup(job)
    return _sequential(job, xg["one"], xg["load_s"], xg["notes"])


# ------------------------------------------------------------------ streamed runs
STREAMED_PEERS = ("structgen", "structgen-nocopy", "llama.cpp", "xgrammar")


def read_streamed(path: Path) -> tuple[dict[str, dict], list[dict]]:
    """The records of a streamed peer's jsonl file.

    Returns:
        ``(by_id, starts)``: the last record of each document id, and the ``"start"``
        events (one per run or resumed run: ``load_s``, ``notes``, ``time``).

    Raises:
        SystemExit: a line that is not JSON (named by file and line number).
    """
    by_id: dict[str, dict] = {}
    starts: list[dict] = []
    if not path.exists():
        return by_id, starts
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{n}: not a JSON record ({exc})") from exc
        if rec.get("event") == "start":
            starts.append(rec)
        elif "id" in rec:
            by_id[rec["id"]] = rec
    return by_id, starts


def stream_documents(
    docs: list[dict], peers: dict[str, dict], out_dir: Path, resume: bool, log: Any = print
) -> None:
    """Run every peer on every document, one document at a time, interleaved: document
    ``i`` runs the peers in an order rotated by ``i``, so each peer goes first as often
    (same-load seconds per document). Each record (``_record``'s fields plus ``s``, the
    document's wall seconds, ``load_avg``, the 1-minute load average after it, and
    ``time``, UTC) is appended to ``out_dir/PEER.jsonl`` and flushed as it finishes.

    Args:
        docs: the job's documents (``id``, ``schema``, ``text``, ``messages``).
        peers: peer name -> ``{"one", "load_s", "notes"}`` (a ``_*_setup`` result).
        out_dir: the folder of the jsonl files (made if missing).
        resume: skip the documents a peer's file already holds; without it a peer's
            file must not exist yet.
        log: called with one line per document and peer.

    Raises:
        SystemExit: a file exists and ``resume`` is false.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {peer: out_dir / f"{peer.replace('/', '_')}.jsonl" for peer in peers}
    done: dict[str, set[str]] = {}
    for peer, path in paths.items():
        if path.exists() and not resume:
            raise SystemExit(f"{path} exists: pass --resume to continue that run, or remove it")
        done[peer] = set(read_streamed(path)[0])
    stamp = lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # noqa: E731
    names = list(peers)
    files = {peer: open(path, "a", encoding="utf-8") for peer, path in paths.items()}  # noqa: SIM115
    try:
        for peer, f in files.items():
            start = {"event": "start", "load_s": peers[peer]["load_s"],
                     "notes": peers[peer]["notes"], "time": stamp(),
                     "interleaved_with": [p for p in names if p != peer]}  # fmt: skip
            f.write(json.dumps(start) + "\n")
            f.flush()
            if len(done[peer]) < len(docs) and docs:
                peers[peer]["one"](docs[0])  # warm, untimed, not recorded
        for i, doc in enumerate(docs):
            for peer in names[i % len(names) :] + names[: i % len(names)]:
                if doc["id"] in done[peer]:
                    continue
                t = time.perf_counter()
                rec = peers[peer]["one"](doc)
                rec["s"] = time.perf_counter() - t
                rec["load_avg"] = os.getloadavg()[0]
                rec["time"] = stamp()
                files[peer].write(json.dumps(rec, ensure_ascii=False) + "\n")
                files[peer].flush()
                os.fsync(files[peer].fileno())
                log(f"{doc['id']:<24} {peer:<16} {rec['s']:7.2f} s  {rec['finish_reason']}  "
                    f"load {rec['load_avg']:.1f}")  # fmt: skip
    finally:
        for f in files.values():
            f.close()


def _streamed_worker(job: dict) -> None:
    """Set up every peer of ``job["peers"]`` in this process and stream them (above);
    structgen first, so llama.cpp's prompt ids are checked against its chat template."""
    peers: dict[str, dict] = {}
    reference_ids = None
    for peer in sorted(job["peers"], key=lambda p: not p.startswith("structgen")):
        if peer in ("structgen", "structgen-nocopy"):
            peers[peer] = _structgen_setup(job, nocopy=peer == "structgen-nocopy")
            reference_ids = peers[peer]["engine"].apply_chat_template
        elif peer == "llama.cpp":
            peers[peer] = _llama_cpp_setup(job, reference_ids)
        elif peer == "xgrammar":
            peers[peer] = _xgrammar_setup(job)
        else:
            raise SystemExit(f"a streamed run takes the peers {STREAMED_PEERS}, not {peer!r}")
    peers = {p: peers[p] for p in job["peers"]}  # the order asked for
    stream_documents(job["docs"], peers, Path(job["jsonl_dir"]), job["resume"],
                     lambda line: print(line, flush=True))  # fmt: skip


def streamed_result(path: Path, docs: list[scoring.Document]) -> tuple[list, dict]:
    """A streamed peer's file as ``score_peer`` input: the documents it holds (in
    ``docs`` order) and ``{"load_s", "batch1", "results", ...}`` with every record as a
    batch-1 one (its ``s``); ``load_s`` of the last start."""
    by_id, starts = read_streamed(path)
    have = [d for d in docs if d.id in by_id]
    records = [by_id[d.id] for d in have]
    mates = starts[-1].get("interleaved_with") if starts else None
    how = "not recorded with what" if mates is None else "alone in its process"
    if mates:
        how = f"interleaved with {', '.join(mates)}"
    notes = [*(starts[-1]["notes"] if starts else []),
             f"streamed: {len(have)}/{len(docs)} documents, batch 1, {how}"]  # fmt: skip
    res = {"load_s": starts[-1]["load_s"] if starts else 0.0, "batch1": records,
           "results": records, "batched_s_per_doc": None, "notes": notes}  # fmt: skip
    return have, res


def seconds_table(rows: dict[str, dict]) -> str:
    """Per-document seconds of streamed peers (rows with ``per_doc`` records carrying
    ``s`` and ``load_avg``): mean, median, the median of each document's ratio to
    structgen's seconds on the same document, and the load averages seen."""
    import statistics

    ref = {r["id"]: r["s"] for r in rows.get("structgen", {}).get("per_doc", [])}
    lines = ["| peer | documents | mean s/doc | median s/doc | median per-document ratio "
             "to structgen | load average (min-max) |", "|" + "---|" * 6]  # fmt: skip
    for name, row in rows.items():
        recs = row["per_doc"]
        secs = [r["s"] for r in recs]
        ratios = [r["s"] / ref[r["id"]] for r in recs if ref.get(r["id"])]
        loads = [r["load_avg"] for r in recs if "load_avg" in r]
        ratio = f"{statistics.median(ratios):.2f}x" if ratios and name != "structgen" else "-"
        load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
        lines.append(f"| {name} | {len(recs)} | {statistics.mean(secs):.2f} | "
                     f"{statistics.median(secs):.2f} | {ratio} | {load} |")  # fmt: skip
    return "\n".join(lines)


def worker(peer: str, job_path: str, out_path: str) -> None:
    """Run one peer on a job file; write its results as JSON (the parent scores them)."""
    job = json.loads(Path(job_path).read_text())
    if peer == "streamed":  # the records are in the jsonl files
        _streamed_worker(job)
        Path(out_path).write_text("{}")
        return
    if peer in ("structgen", "structgen-nocopy", "baseline"):
        res = _structgen_worker(job, nocopy=peer == "structgen-nocopy")
    elif peer == "llama.cpp":
        res = _llama_cpp_worker(job)
    elif peer == "xgrammar":
        res = _xgrammar_worker(job)
    else:
        raise SystemExit(f"unknown peer {peer!r}")
    Path(out_path).write_text(json.dumps(res, ensure_ascii=False))


# ------------------------------------------------------------------ parent
def score_peer(docs: list[scoring.Document], res: dict) -> dict:
    """Accuracy figures of one peer's results (in ``docs`` order)."""
    fmt = jsonschema.FormatChecker()
    right = total = full = valid = hits = 0
    for doc, rec in zip(docs, res["results"]):
        fields = scoring.score_document(doc.schema, doc.expected, rec["value"])
        r = sum(f.right for f in fields)
        right, total, full = right + r, total + len(fields), full + (r == len(fields))
        if rec["value"] is not None:
            try:
                jsonschema.validate(rec["value"], doc.schema, format_checker=fmt)
                valid += 1
            except jsonschema.ValidationError:
                pass
        hits += rec["finish_reason"] == "length"
    b1 = [r["s"] for r in res["batch1"]]
    return {
        "fields_right": right,
        "fields": total,
        "field_accuracy": right / max(total, 1),
        "docs_fully_right": full,
        "schema_valid": valid,
        "max_tokens_hits": hits,
        "docs": len(docs),
        "load_s": res["load_s"],
        "batch1_s_per_doc": sum(b1) / max(len(b1), 1),
        "batched_s_per_doc": res["batched_s_per_doc"],
        "notes": res.get("notes", []),
    }


def run_peer(peer: str, job: dict, pythonpath: Path) -> dict:
    """One peer in a fresh subprocess with ``PYTHONPATH=pythonpath``."""
    with tempfile.TemporaryDirectory() as tmp:
        jp, op = Path(tmp) / "job.json", Path(tmp) / "out.json"
        jp.write_text(json.dumps(job, ensure_ascii=False))
        env = dict(os.environ, PYTHONPATH=f"{pythonpath}{os.pathsep}{HERE}")
        cmd = [sys.executable, str(Path(__file__)), "--worker", peer, "--job", str(jp),
               "--result", str(op)]  # fmt: skip
        subprocess.run(cmd, env=env, check=True, cwd=str(pythonpath))
        return json.loads(op.read_text())


def table(rows: dict[str, dict]) -> str:
    """A markdown table of every peer, with ratios to structgen's default."""
    ref = rows.get("structgen")
    head = (
        "| peer | field accuracy | fully right | schema-valid | max_tokens hits | load s | "
        "s/doc batch 1 | s/doc batched | batch-1 vs structgen | batched speed-up |"
    )
    lines = [head, "|" + "---|" * 10]
    for name, r in rows.items():
        b1, bb = r["batch1_s_per_doc"], r["batched_s_per_doc"]
        ratio = (
            f"{b1 / ref['batch1_s_per_doc']:.2f}x"
            if ref and b1 and ref["batch1_s_per_doc"]
            else "-"
        )
        bb_s, speed = (f"{bb:.2f}", f"{b1 / bb:.1f}x" if b1 else "-") if bb else ("-", "-")
        lines.append(
            f"| {name} | {r['field_accuracy']:.3f} ({r['fields_right']}/{r['fields']}) | "
            f"{r['docs_fully_right']}/{r['docs']} | {r['schema_valid']}/{r['docs']} | "
            f"{r['max_tokens_hits']} | {r['load_s']:.1f} | {b1:.2f} | {bb_s} | {ratio} | {speed} |"
        )
    return "\n".join(lines)


def plot(rows: dict[str, dict], path: Path) -> None:
    """Three bar charts: field accuracy, seconds per document at batch 1 and batched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = [("field_accuracy", "field accuracy"), ("batch1_s_per_doc", "s/doc, batch 1"),
              ("batched_s_per_doc", "s/doc, batched")]  # fmt: skip
    for ax, (key, title) in zip(axes, panels):
        vals = [rows[n][key] or 0.0 for n in names]
        ax.bar(range(len(names)), vals, color="tab:blue")
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
    fig.suptitle("Extraction dev set, SmolLM2-135M (same GGUF file, same messages)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _rescored(path: Path, docs: list[scoring.Document], suffix: str, fix) -> dict:
    """The structgen peers of an earlier ``--json`` file, each document's record passed
    through ``fix(i, doc, rec) -> rec`` and scored again; rows named ``PEER+SUFFIX``
    beside the originals, with the pass's seconds per document in the notes.
    """
    before = json.loads(path.read_text())
    rows = {}
    for peer, row in before.items():
        if not peer.startswith("structgen"):
            continue
        by_id = {r["id"]: r for r in row["per_doc"]}
        t0 = time.perf_counter()
        results = [fix(i, doc, dict(by_id[doc.id])) for i, doc in enumerate(docs)]
        took = (time.perf_counter() - t0) / len(docs)
        res = {"load_s": row["load_s"], "batch1": [], "results": results,
               "batched_s_per_doc": None, "notes": [f"{suffix} pass {took:.3f} s/doc"]}  # fmt: skip
        new = score_peer(docs, res)
        new["per_doc"] = results
        rows[peer], rows[f"{peer}+{suffix}"] = row, new
        print(f"{peer}+{suffix}", {k: v for k, v in new.items() if k != "per_doc"})
    return rows


def rescore_options(path: Path, docs: list[scoring.Document], messages: list[Any]) -> dict:
    """The structgen peers of an earlier ``--json`` file with every enum and boolean value
    chosen again by score (``structgen.extraction.choices``) from their raw outputs: what
    ``extract(score_options=True)`` returns for the same greedy generations (it runs the
    same pass on each output as it finishes). Returns rows named ``PEER+score_options``.
    """
    from structgen import Engine
    from structgen.extraction.choices import choose_options

    engine = Engine()

    def fix(i: int, doc: scoring.Document, rec: dict) -> dict:
        if rec["finish_reason"] in ("stop", "length") and rec["raw_text"]:
            (raw,) = choose_options(engine, doc.schema, [messages[i]], [rec["raw_text"]])
            if raw != rec["raw_text"]:
                rec["raw_text"], rec["value"] = raw, json.loads(raw)
        return rec

    return _rescored(path, docs, "score_options", fix)


def rescore_evidence(path: Path, docs: list[scoring.Document]) -> dict:
    """The structgen peers of an earlier ``--json`` file (run with ``evidence: false``)
    with ``structgen.extraction.evidence.apply_evidence`` applied to each output: what
    ``extract(evidence=True)`` returns for the same greedy generations (the rule reads
    the text only). Returns rows named ``PEER+evidence`` beside the originals.
    """
    from structgen.extraction.evidence import apply_evidence

    def fix(i: int, doc: scoring.Document, rec: dict) -> dict:
        if rec["value"] is not None:
            rec["value"], _ = apply_evidence(doc.schema, doc.text, rec["value"])
        return rec

    return _rescored(path, docs, "evidence", fix)


def _rescore_scored(
    path: Path, docs: list[scoring.Document], messages: list[Any], name: str, choose: Any
) -> dict:
    """The structgen peers of an earlier ``--json`` file with ``choose`` (a scored pass
    of ``structgen.extraction`` taking ``engine, schema, prompts, raw_texts, texts,
    copied_fields``) run on each output, then the evidence pass. Rows ``PEER+name``."""
    from structgen import Engine
    from structgen.extraction.copy import copy_constraint
    from structgen.extraction.evidence import apply_evidence

    engine = Engine()

    def fix(i: int, doc: scoring.Document, rec: dict) -> dict:
        if rec["finish_reason"] in ("stop", "length") and rec["raw_text"]:
            copied = copy_constraint(doc.schema, doc.text).copied_fields
            (raw,) = choose(
                engine, doc.schema, [messages[i]], [rec["raw_text"]], [doc.text], [copied]
            )
            if raw != rec["raw_text"]:
                rec["raw_text"], rec["value"] = raw, json.loads(raw)
        if rec["value"] is not None:
            rec["value"], _ = apply_evidence(doc.schema, doc.text, rec["value"])
        return rec

    return _rescored(path, docs, name, fix)


def rescore_numbers(path: Path, docs: list[scoring.Document], messages: list[Any]) -> dict:
    """The structgen peers of an earlier ``--json`` file (run with ``evidence: false,
    score_numbers: false``) with each copied number chosen again among the text's
    numerals by score (``structgen.extraction.numbers``), then the evidence pass: what
    ``extract(score_numbers=True)`` returns for the same greedy generations (both passes
    run on each output as it finishes, with ``score_numbers=True``). Returns rows named
    ``PEER+numbers``.
    """
    from structgen.extraction.numbers import choose_numbers

    return _rescore_scored(path, docs, messages, "numbers", choose_numbers)


def rescore_overlaps(path: Path, docs: list[scoring.Document], messages: list[Any]) -> dict:
    """The structgen peers of an earlier ``--json`` file (run with ``evidence: false``)
    with one field of each pair of copied string fields holding the same span moved by
    score (``structgen.extraction.overlaps``), then the evidence pass: what
    ``extract(score_overlaps=True)`` returns for the same greedy generations. Returns rows
    named ``PEER+overlaps``.
    """
    from structgen.extraction.overlaps import choose_overlaps

    return _rescore_scored(path, docs, messages, "overlaps", choose_overlaps)


def rescore_span_ends(path: Path, docs: list[scoring.Document], messages: list[Any]) -> dict:
    """The structgen peers of an earlier ``--json`` file (run with ``evidence: false,
    score_span_ends: false``) with each copied string's end decided by the model's
    probability that it ends there (``structgen.extraction.spans``), then the evidence
    pass: what the default ``extract`` returns for the same greedy generations. Returns
    rows named ``PEER+span_ends``.
    """
    from structgen.extraction.spans import choose_span_ends

    return _rescore_scored(path, docs, messages, "span_ends", choose_span_ends)


def peer_messages(doc: scoring.Document, style: str | None = None) -> list[dict] | str:
    """The messages every peer gets for ``doc``: exactly what ``extract`` builds (its
    prompt of the schema as ``schema_for`` reads it, no instructions), or the prompt
    experiment ``style``."""
    from structgen.extraction import extraction_messages
    from structgen.fsm.spec import schema_for

    kw = {} if style is None else {"style": style}
    return extraction_messages(schema_for(doc.schema), doc.text, **kw)


def streamed(args: argparse.Namespace, peers: list[str], job: dict, docs: list) -> None:
    """``--jsonl-dir``: run (unless ``--score-only``) and score a streamed run."""
    if "llama.cpp" in peers and importlib.util.find_spec("llama_cpp") is None:
        raise SystemExit("llama.cpp: not installed; run benchmarks/install_llama_cpp.sh")
    if not args.score_only:  # every domain's first document first: a cut run is balanced
        rank = {d.id: (int(d.id[-2:]), i) for i, d in enumerate(docs)}
        job["docs"] = sorted(job["docs"], key=lambda d: rank[d["id"]])
        job.update(peers=peers, jsonl_dir=str(args.jsonl_dir.resolve()), resume=args.resume)
        run_peer("streamed", job, ROOT)
    paths = {peer: args.jsonl_dir / f"{peer.replace('/', '_')}.jsonl" for peer in peers}
    held = {peer: set(read_streamed(path)[0]) for peer, path in paths.items()}
    common = set.intersection(*held.values()) if held else set()
    docs = [d for d in docs if d.id in common]  # every peer on the same documents
    print(f"scored on the {len(docs)} documents every peer holds "
          f"({', '.join(f'{p}: {len(h)}' for p, h in held.items())})")  # fmt: skip
    rows: dict[str, dict] = {}
    for peer in peers:
        have, res = streamed_result(paths[peer], docs)
        if not have:
            print(f"{peer}: no document in {args.jsonl_dir}", file=sys.stderr)
            continue
        rows[peer] = score_peer(have, res)
        rows[peer]["per_doc"] = res["results"]
        print(peer, {k: v for k, v in rows[peer].items() if k != "per_doc"}, flush=True)
    print(table(rows))
    print()
    print(seconds_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", default="structgen,structgen-nocopy,llama.cpp,xgrammar")
    ap.add_argument("--baseline-checkout", type=Path, default=None,
                    help="a structgen checkout to measure as the 'baseline' peer")  # fmt: skip
    ap.add_argument("--data-dir", type=Path, default=scoring.DATA_DIR,
                    help="the documents.jsonl + schemas/ folder to run (default: the dev set, "
                    "benchmarks/data/extraction; the held-out set is "
                    "benchmarks/data/extraction_holdout)")  # fmt: skip
    ap.add_argument("--limit", type=int, default=None, help="only the first N documents")
    ap.add_argument("--ids", default=None,
                    help="only these documents (ids, comma-separated)")  # fmt: skip
    ap.add_argument("--batch1-docs", type=int, default=8, help="0: accuracy only (batched)")
    ap.add_argument("--max-tokens", type=int, default=MAX_TOKENS)
    ap.add_argument("--prompt-style", default=None, help="a style of extraction_messages")
    ap.add_argument("--extract-kwargs", type=json.loads, default=None,
                    help='more keyword arguments of the structgen peers\' extract (JSON, e.g. '
                    '\'{"score_options": true}\')')  # fmt: skip
    ap.add_argument("--sampling-kwargs", type=json.loads, default=None,
                    help="SamplingParams of the structgen peers instead of extract's default "
                    "(JSON, e.g. '{\"presence_penalty\": 1.0}'); greedy")  # fmt: skip
    ap.add_argument("--engine-kwargs", type=json.loads, default=None,
                    help="keyword arguments of the structgen peers' Engine (JSON, e.g. "
                    '\'{"quantization": null}\' for float32 weights)')  # fmt: skip
    ap.add_argument("--llama-threads", type=int, default=2,
                    help="llama.cpp's n_threads and n_threads_batch")  # fmt: skip
    ap.add_argument("--jsonl-dir", type=Path, default=None,
                    help="streamed run: the peers in one process, one document at a time, "
                    "interleaved, each record appended to DIR/PEER.jsonl as it finishes "
                    "(batch 1 only); scored from those files")  # fmt: skip
    ap.add_argument(
        "--resume",
        action="store_true",
        help="with --jsonl-dir: skip the documents a peer's file already holds",
    )
    ap.add_argument(
        "--score-only",
        action="store_true",
        help="with --jsonl-dir: score the files as they are, run nothing",
    )
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--rescore-options", type=Path, default=None,
                    help="an earlier --json: choose its structgen peers' enum and boolean "
                    "values again by score (no generation)")  # fmt: skip
    ap.add_argument("--rescore-evidence", type=Path, default=None,
                    help="an earlier --json run with evidence off: apply the evidence rules "
                    "to its structgen peers' outputs (no generation)")  # fmt: skip
    ap.add_argument("--rescore-overlaps", type=Path, default=None,
                    help="an earlier --json run with evidence off: move one of each pair of "
                    "string fields holding the same span by score, then apply the evidence "
                    "rules")  # fmt: skip
    ap.add_argument("--rescore-span-ends", type=Path, default=None,
                    help="an earlier --json run with evidence and span-end scoring off: "
                    "decide where each copied string ends by score, then apply the evidence "
                    "rules")  # fmt: skip
    ap.add_argument("--rescore-numbers", type=Path, default=None,
                    help="an earlier --json run with evidence and score_numbers off: choose "
                    "its copied numbers by score, then apply the evidence rules")  # fmt: skip
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.job, args.result)
        return
    docs = scoring.load_documents(args.data_dir)
    if args.limit:  # every domain first, then the rest: a prefix covers all domains
        by_rank = sorted(range(len(docs)), key=lambda i: (int(docs[i].id[-2:]), i))
        docs = [docs[i] for i in sorted(by_rank[: args.limit])]
    if args.ids:
        wanted = set(args.ids.split(","))
        unknown = wanted - {d.id for d in docs}
        if unknown:
            raise SystemExit(f"--ids: no such document(s) {sorted(unknown)}")
        docs = [d for d in docs if d.id in wanted]
    job = {
        "max_tokens": args.max_tokens,
        "llama_threads": args.llama_threads,
        "batch1_docs": min(args.batch1_docs, len(docs)),
        "prompt_style": args.prompt_style,
        "extract_kwargs": args.extract_kwargs or {},
        "engine_kwargs": args.engine_kwargs or {},
        "sampling_kwargs": args.sampling_kwargs or {},
        "docs": [
            {
                "id": d.id,
                "schema": d.schema,
                "text": d.text,
                "messages": peer_messages(d, args.prompt_style),
            }  # fmt: skip
            for d in docs
        ],
    }
    rescores = [
        (args.rescore_evidence, lambda path, ds, msgs: rescore_evidence(path, ds)),
        (args.rescore_numbers, rescore_numbers),
        (args.rescore_options, rescore_options),
        (args.rescore_overlaps, rescore_overlaps),
        (args.rescore_span_ends, rescore_span_ends),
    ]
    for path, rescore in rescores:
        if path is None:
            continue
        ids = {r["id"] for row in json.loads(path.read_text()).values() for r in row["per_doc"]}
        docs = [d for d in docs if d.id in ids]
        msgs = [peer_messages(d, args.prompt_style) for d in docs]
        rows = rescore(path, docs, msgs)
        print(table(rows))
        if args.json:
            args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    peers = [p for p in args.peers.split(",") if p]
    if args.jsonl_dir is not None:
        streamed(args, peers, job, docs)
        return
    if args.baseline_checkout is not None and "baseline" not in peers:
        peers.append("baseline")
    rows: dict[str, dict] = {}
    for peer in peers:
        if peer == "llama.cpp" and importlib.util.find_spec("llama_cpp") is None:
            print("llama.cpp skipped: run benchmarks/install_llama_cpp.sh", file=sys.stderr)
            continue
        if peer == "baseline" and args.baseline_checkout is None:
            print("baseline skipped: give --baseline-checkout DIR", file=sys.stderr)
            continue
        path = args.baseline_checkout.resolve() if peer == "baseline" else ROOT
        res = run_peer(peer, job, path)
        rows[peer] = score_peer(docs, res)
        rows[peer]["per_doc"] = res["results"]
        print(peer, {k: v for k, v in rows[peer].items() if k != "per_doc"}, flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
