"""Rows through the forward per document, by kind, in a batched extraction (#23): counts, so
the figures do not depend on the host's load.

Every chunk ``ModelRunner.execute`` runs is split by the request it belongs to and the kind
of each row: a document's own request (``main``: its prompt past the prefix cache, tokens it
sampled, tokens jump-forward appended, rows computed again after jump-forward dropped a
computed token) or a scoring pass's requests, named by the pass that made them (overlaps'
shortlist and candidates, span ends, array-end boundaries and continuations, numbers,
options). Also per kind: the rows whose logits are computed (the lm_head's rows: prompt
log-probabilities and sampling rows), how many tokens each sampling row's grammar mask
allows (a one-token mask would make its logits unneeded), the rows whose token prefix an
earlier row of the same pipeline computed already (in the same pass, or an earlier one:
KV the cache holds but whose logits a scoring request wants again), and how each document's
own request finished (jump-forward's finish, or after a sampled token: no row is computed
after either).

Default: the contact cards of ``bench_extract_batch.py`` (``--docs``, seeded) in one
``Engine.extract`` call on the default two host pipelines, after one untimed card. With
``--data-dir``: a data set (``documents.jsonl`` + ``schemas/``), one call per schema on the
engine itself. ``--json``: the values and the counts, so two trees can be compared.

Run:  python benchmarks/extract_rows.py [--docs 64] [--seed 0]
      [--data-dir benchmarks/data/extraction] [--json OUT]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the scoring passes, by the module-level names extractor and overlaps call them through
PASSES = (
    ("extractor", "choose_array_ends", "array_ends:continuation"),
    ("array_ends", "boundary_scores", "array_ends:boundaries"),
    ("extractor", "choose_span_ends", "span_ends"),
    ("extractor", "choose_numbers", "numbers"),
    ("extractor", "choose_options", "options"),
    ("overlaps", "shortlist_spans", "overlaps:shortlist"),
    ("overlaps", "candidate_scores", "overlaps:candidates"),
)


class RowCounter:
    """Counts rows by kind at every wrapped runner (see the module docstring)."""

    def __init__(self, vocab_size: int) -> None:
        self.num_words = -(-vocab_size // 32)  # a grammar mask row's int32 words
        self.tls = threading.local()
        self.rows: collections.Counter = collections.Counter()
        self.logits: collections.Counter = collections.Counter()
        self.requests: collections.Counter = collections.Counter()
        self.allowed: collections.Counter = collections.Counter()
        self.repeated: collections.Counter = collections.Counter()
        self.finishes: collections.Counter = collections.Counter()
        self._seen: dict[int, set] = {}
        self._lock = threading.Lock()

    def install(self) -> None:
        """Tag the scoring passes and record sampled and forced output tokens."""
        from structgen.extraction import array_ends, extractor, overlaps
        from structgen.runtime import step
        from structgen.runtime.request import Request

        modules = {"extractor": extractor, "array_ends": array_ends, "overlaps": overlaps}
        for module, name, kind in PASSES:
            setattr(modules[module], name, self._tagged(kind, getattr(modules[module], name)))
        append, jump_forward, finish = step._append, step.jump_forward, Request.finish
        tls = self.tls

        def counted_append(req, token, logprob=None):
            append(req, token, logprob)
            flags = req.__dict__.setdefault("_flags", ["?"] * (len(req.output_token_ids) - 1))
            flags.append("sampled")

        def counted_jump_forward(context, req, result=None):
            before = list(req.output_token_ids)
            tls.in_jump = True
            try:
                n = jump_forward(context, req, result)
            finally:
                tls.in_jump = False
            after = req.output_token_ids
            keep = 0
            while keep < min(len(before), len(after)) and before[keep] == after[keep]:
                keep += 1
            flags = req.__dict__.get("_flags", ["?"] * len(before))
            req._flags = flags[:keep] + ["forced"] * (len(after) - keep)
            return n

        def counted_finish(req, reason, error=None):
            if req.__dict__.get("_kind") == "main":
                how = "in jump-forward" if getattr(tls, "in_jump", False) else "after a sample"
                self.finishes[(reason, how)] += 1
            return finish(req, reason, error)

        step._append, step.jump_forward, Request.finish = (
            counted_append,
            counted_jump_forward,
            counted_finish,
        )

    def _tagged(self, kind, fn):
        tls = self.tls

        def tagged(*args, **kwargs):
            old = getattr(tls, "kind", None)
            tls.kind = kind
            try:
                return fn(*args, **kwargs)
            finally:
                tls.kind = old

        return tagged

    def wrap(self, runner) -> None:
        """Count every chunk ``runner.execute`` runs."""
        execute = runner.execute
        seen = self._seen.setdefault(id(runner), set())

        def counted(scheduled):
            with self._lock:
                this_pass = self._count(scheduled, seen)
            out = execute(scheduled)
            with self._lock:
                seen.update(this_pass)
                for req, _lo, row_lo, row_hi in out.prompt_logprobs:
                    self.logits[(req._kind, "prompt log-probs")] += row_hi - row_lo
                for req, _first, drafts in out.sampling:
                    self.logits[(req._kind, "sampling")] += 1 + drafts
            return out

        runner.execute = counted

    def _count(self, scheduled, seen: set) -> set:
        this_pass: set = set()
        for req, num in scheduled.scheduled:
            d = req.__dict__
            if "_kind" not in d:
                req._kind = getattr(self.tls, "kind", None) or "main"
                self.requests[req._kind] += 1
            done = d.setdefault("_computed", 0)
            flags = d.setdefault("_flags", ["?"] * len(req.output_token_ids))
            start, n_prompt = req.num_computed_tokens, len(req.prompt_token_ids)
            for p in range(start, start + num):
                if p < done:
                    sub = "recomputed"
                elif p < n_prompt:
                    sub = "prompt"
                else:
                    sub = flags[p - n_prompt] if p - n_prompt < len(flags) else "draft"
                self.rows[(req._kind, sub)] += 1
            req._computed = max(done, start + num)
            ids = req.token_slice(0, start + num)
            h = 0
            for p, t in enumerate(ids):
                h = hash((h, t))
                if p >= start:
                    if h in this_pass:
                        self.repeated[(req._kind, "same pass")] += 1
                    elif h in seen:
                        self.repeated[(req._kind, "earlier pass")] += 1
                    this_pass.add(h)
            if start + num >= req.num_tokens and req.matcher is not None:
                bitmask = np.zeros((1, self.num_words), np.int32)
                req.matcher.fill_bitmask(bitmask, 0)
                allowed = int(np.unpackbits(bitmask.view(np.uint8)).sum())
                band = "1" if allowed == 1 else "2-9" if allowed < 10 else "10+"
                self.allowed[(req._kind, band)] += 1
        return this_pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    from bench_extract_batch import documents

    from structgen import Engine
    from structgen.extraction import extractor

    engine = Engine()
    counter = RowCounter(len(engine.vocab.token_bytes))
    counter.install()
    if args.data_dir is not None:
        docs = [json.loads(line) for line in open(args.data_dir / "documents.jsonl")]
        groups: dict[str, list[dict]] = {}
        for doc in docs:
            groups.setdefault(doc["schema"], []).append(doc)
        engine.extract({"type": "object", "properties": {"a": {"type": "string"}}}, "warm up")
        counter.wrap(engine.runner)
        values: dict = {}
        cpu = time.process_time()
        for path, part in groups.items():
            schema = json.loads((args.data_dir / path).read_text())
            outs = engine.extract(schema, [d["text"] for d in part], errors="return")
            for doc, out in zip(part, outs):
                values[doc["id"]] = repr(out) if isinstance(out, Exception) else out
        num = len(docs)
    else:
        from structgen.runtime.host_pipelines import host_pipelines

        schema = json.loads(
            (ROOT / "benchmarks/data/extraction/schemas/contact_card.json").read_text()
        )
        texts = documents(args.docs + 1, args.seed)
        engine.extract(schema, texts[-1])  # untimed: compile, the schema's prompt cached
        pipes = host_pipelines(engine).engines if extractor.HOST_PIPELINES > 1 else []
        for e in (engine, *pipes):
            counter.wrap(e.runner)
        cpu = time.process_time()
        values = engine.extract(schema, texts[:-1])
        num = args.docs
    cpu = (time.process_time() - cpu) / num
    rows, logits = sum(counter.rows.values()), sum(counter.logits.values())
    print(
        f"{num} documents: rows through the forward {rows / num:.2f}/doc, logits rows "
        f"{logits / num:.2f}/doc (process CPU {cpu * 1000:.0f} ms/doc, load-dependent)"
    )
    tables = (
        ("rows", counter.rows),
        ("logits rows", counter.logits),
        ("requests", counter.requests),
        ("tokens a sampling row's mask allows", counter.allowed),
        ("rows whose prefix was computed before", counter.repeated),
        ("documents' own requests finished", counter.finishes),
    )
    print("| what | kind | per document |\n|---|---|---|")
    for title, table in tables:
        for key, n in sorted(table.items(), key=str):
            kind = " / ".join(key) if isinstance(key, tuple) else key
            print(f"| {title} | {kind} | {n / num:.2f} |")
    if args.json:
        counts = {title: {" / ".join(k) if isinstance(k, tuple) else k: v for k, v in t.items()}
                  for title, t in tables}  # fmt: skip
        args.json.write_text(json.dumps({"docs": num, "values": values, "counts": counts}))


if __name__ == "__main__":
    main()
