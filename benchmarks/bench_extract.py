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

Run:  python benchmarks/bench_extract.py [--peers structgen,llama.cpp,xgrammar]
      [--baseline-checkout DIR] [--limit N] [--ids ID,ID] [--batch1-docs 8] [--prompt-style NAME]
      [--extract-kwargs '{"score_options": true}'] [--rescore-evidence RUN.json]
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


def _structgen_worker(job: dict, nocopy: bool) -> dict:
    from structgen import Engine, SamplingParams
    from structgen.errors import ExtractionError
    from structgen.extraction import extractor
    from structgen.fsm.spec import JsonSchema

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


def _llama_cpp_worker(job: dict) -> dict:
    from llama_cpp import Llama, LlamaGrammar

    from structgen.runtime.loader import default_model_path

    t0 = time.perf_counter()
    llm = Llama(model_path=str(default_model_path()), n_ctx=4096, n_threads=2,
                n_threads_batch=2, verbose=False)  # fmt: skip
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
        return _parsed(doc, text, choice["finish_reason"])

    return _sequential(job, one, load_s)


def _parsed(doc: dict, text: str, finish: str | None) -> dict:
    try:
        return _record(doc, json.loads(text), text, finish, None)
    except json.JSONDecodeError as exc:
        return _record(doc, None, text, finish, f"not JSON: {exc}")


def _sequential(job: dict, one: Any, load_s: float) -> dict:
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
        "notes": ["no batching: one document at a time"],
    }


def _xgrammar_worker(job: dict) -> dict:
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

    return _sequential(job, one, load_s)


def worker(peer: str, job_path: str, out_path: str) -> None:
    """Run one peer on a job file; write its results as JSON (the parent scores them)."""
    job = json.loads(Path(job_path).read_text())
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


def rescore_numbers(path: Path, docs: list[scoring.Document], messages: list[Any]) -> dict:
    """The structgen peers of an earlier ``--json`` file (run with ``evidence: false,
    score_numbers: false``) with each copied number chosen again among the text's
    numerals by score (``structgen.extraction.numbers``), then the evidence pass: what
    ``extract(score_numbers=True)`` returns for the same greedy generations (both passes
    run on each output as it finishes, with ``score_numbers=True``). Returns rows named
    ``PEER+numbers``.
    """
    from structgen import Engine
    from structgen.extraction.copy import copy_constraint
    from structgen.extraction.evidence import apply_evidence
    from structgen.extraction.numbers import choose_numbers

    engine = Engine()

    def fix(i: int, doc: scoring.Document, rec: dict) -> dict:
        if rec["finish_reason"] in ("stop", "length") and rec["raw_text"]:
            copied = copy_constraint(doc.schema, doc.text).copied_fields
            (raw,) = choose_numbers(
                engine, doc.schema, [messages[i]], [rec["raw_text"]], [doc.text], [copied]
            )
            if raw != rec["raw_text"]:
                rec["raw_text"], rec["value"] = raw, json.loads(raw)
        if rec["value"] is not None:
            rec["value"], _ = apply_evidence(doc.schema, doc.text, rec["value"])
        return rec

    return _rescored(path, docs, "numbers", fix)


def rescore_overlaps(path: Path, docs: list[scoring.Document], messages: list[Any]) -> dict:
    """The structgen peers of an earlier ``--json`` file (run with ``evidence: false``)
    with one field of each pair of copied string fields holding the same span moved by
    score (``structgen.extraction.overlaps``), then the evidence pass: what
    ``extract(score_overlaps=True)`` returns for the same greedy generations. Returns rows
    named ``PEER+overlaps``.
    """
    from structgen import Engine
    from structgen.extraction.copy import copy_constraint
    from structgen.extraction.evidence import apply_evidence
    from structgen.extraction.overlaps import choose_overlaps

    engine = Engine()

    def fix(i: int, doc: scoring.Document, rec: dict) -> dict:
        if rec["finish_reason"] in ("stop", "length") and rec["raw_text"]:
            copied = copy_constraint(doc.schema, doc.text).copied_fields
            (raw,) = choose_overlaps(
                engine, doc.schema, [messages[i]], [rec["raw_text"]], [doc.text], [copied]
            )
            if raw != rec["raw_text"]:
                rec["raw_text"], rec["value"] = raw, json.loads(raw)
        if rec["value"] is not None:
            rec["value"], _ = apply_evidence(doc.schema, doc.text, rec["value"])
        return rec

    return _rescored(path, docs, "overlaps", fix)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peers", default="structgen,structgen-nocopy,llama.cpp,xgrammar")
    ap.add_argument("--baseline-checkout", type=Path, default=None,
                    help="a structgen checkout to measure as the 'baseline' peer")  # fmt: skip
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
    from structgen.extraction import extraction_messages

    docs = scoring.load_documents()
    if args.limit:  # every domain first, then the rest: a prefix covers all domains
        by_rank = sorted(range(len(docs)), key=lambda i: (int(docs[i].id[-2:]), i))
        docs = [docs[i] for i in sorted(by_rank[: args.limit])]
    if args.ids:
        wanted = set(args.ids.split(","))
        unknown = wanted - {d.id for d in docs}
        if unknown:
            raise SystemExit(f"--ids: no such document(s) {sorted(unknown)}")
        docs = [d for d in docs if d.id in wanted]
    style = {} if args.prompt_style is None else {"style": args.prompt_style}
    job = {
        "max_tokens": args.max_tokens,
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
                "messages": extraction_messages(d.schema, d.text, **style),
            }  # fmt: skip
            for d in docs
        ],
    }
    rescores = [
        (args.rescore_evidence, lambda path, ds, msgs: rescore_evidence(path, ds)),
        (args.rescore_numbers, rescore_numbers),
        (args.rescore_options, rescore_options),
        (args.rescore_overlaps, rescore_overlaps),
    ]
    for path, rescore in rescores:
        if path is None:
            continue
        ids = {r["id"] for row in json.loads(path.read_text()).values() for r in row["per_doc"]}
        docs = [d for d in docs if d.id in ids]
        msgs = [extraction_messages(d.schema, d.text, **style) for d in docs]
        rows = rescore(path, docs, msgs)
        print(table(rows))
        if args.json:
            args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=1))
        return
    peers = [p for p in args.peers.split(",") if p]
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
