"""Enum and boolean values chosen by score, not by greedy's first token.

Greedy decoding under the schema's grammar commits to an enum option at its first
token: the option whose first token is likeliest wins, however unlikely the rest of it
is. ``choose_options`` revisits each choice field of the greedy objects
(``option_fields``: a property reached through objects whose subschema is an ``enum``
or a ``boolean``, either one made nullable by ``type: [..., "null"]`` or by an ``anyOf``
/ ``oneOf`` with a ``null`` branch): every option is scored in the context the model
wrote the value in (the prompt and the output up to the value, then the option as JSON
and the structural character the output wrote after it) by the mean log-probability of
its tokens, as ``select`` scores options (``structgen.lang``); all options of a batch go
in one batch of prompt-log-prob requests whose shared prefixes the radix cache computes
once. The best option replaces the value when the object stays valid under the schema
(``jsonschema``); the fields after it keep what greedy wrote (they were generated after
greedy's choice).

The module also holds what the other scoring passes (``numbers.py``, ``spans.py``,
``overlaps.py``) share: ``revise_outputs`` (the walk over the generated outputs),
``CandidateJob`` and ``candidate_scores`` / ``best_candidates`` (a field's candidates
scored in context), ``encode_in_context``, ``common_prefix`` and ``mean_logprob``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jsonschema

from structgen.extraction.prompt import prompt_text
from structgen.extraction.refs import MAX_REF_DEPTH
from structgen.extraction.refs import resolve as _resolve
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "choose_options",
    "option_fields",
    "value_spans",
    "revise_outputs",
    "common_prefix",
    "encode_in_context",
    "mean_logprob",
    "field_value",
    "with_field",
    "same_json",
    "score_prompts",
    "run_prompts",
]

_SCORE = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
_DECODER = json.JSONDecoder()


def _options(root: Any, sub: Any) -> list[Any] | None:
    """The values a choice field may take (``enum`` options, ``true``/``false``, and
    ``null`` where the field is nullable), or None for a field that is not a choice.
    """
    sub = _resolve(root, sub)
    if not isinstance(sub, dict) or "const" in sub:
        return None
    nullable = False
    for key in ("anyOf", "oneOf"):
        branches = sub.get(key)
        if isinstance(branches, list) and len(branches) == 2:
            rest = [b for b in (_resolve(root, b) for b in branches) if b != {"type": "null"}]
            if len(rest) == 1 and isinstance(rest[0], dict):
                sub, nullable = rest[0], True
                break
    if "enum" in sub and isinstance(sub["enum"], list) and sub["enum"]:
        opts = list(sub["enum"])
        return opts + [None] if nullable and None not in opts else opts
    types = sub.get("type")
    types = [types] if isinstance(types, str) else list(types or ())
    if types and set(types) <= {"boolean", "null"} and "boolean" in types:
        return [True, False] + ([None] if nullable or "null" in types else [])
    return None


def option_fields(schema: Any) -> dict[tuple[str, ...], list[Any]]:
    """The choice fields of ``schema`` reached through object properties only.

    Args:
        schema: a JSON Schema dict (local ``$ref`` s followed).

    Returns:
        Key path -> options (module docstring), in schema order.
    """
    out: dict[tuple[str, ...], list[Any]] = {}

    def walk(sub: Any, path: tuple[str, ...], depth: int) -> None:
        sub = _resolve(schema, sub)
        if not isinstance(sub, dict) or depth > MAX_REF_DEPTH:
            return
        for name, prop in (sub.get("properties") or {}).items():
            opts = _options(schema, prop)
            if opts is not None and len(opts) > 1:
                out[path + (name,)] = opts
            else:
                walk(prop, path + (name,), depth + 1)

    walk(schema, (), 0)
    return out


def value_spans(raw: str) -> dict[tuple[str, ...], tuple[int, int]]:
    """Where each scalar reached through objects is written in the JSON text ``raw``.

    Args:
        raw: one JSON object's text.

    Returns:
        Key path -> ``(start, end)`` offsets of the value's text.

    Raises:
        ValueError: ``raw`` is not a JSON object's text.
    """
    out: dict[tuple[str, ...], tuple[int, int]] = {}

    def ws(i: int) -> int:
        while i < len(raw) and raw[i] in " \t\n\r":
            i += 1
        return i

    def walk(i: int, path: tuple[str, ...] | None) -> int:
        i = ws(i)
        if raw.startswith("{", i):
            i = ws(i + 1)
            if raw.startswith("}", i):
                return i + 1
            while True:
                key, i = json.decoder.scanstring(raw, ws(i) + 1)
                i = ws(i)
                if not raw.startswith(":", i):
                    raise ValueError(f"expected ':' at {i}")
                i = ws(walk(i + 1, None if path is None else path + (key,)))
                if raw.startswith("}", i):
                    return i + 1
                if not raw.startswith(",", i):
                    raise ValueError(f"expected ',' or '}}' at {i}")
                i += 1
        if raw.startswith("[", i):  # items are not choice fields: skip them
            _, end = _DECODER.raw_decode(raw, i)
            return end
        _, end = _DECODER.raw_decode(raw, i)
        if path is not None:
            out[path] = (i, end)
        return end

    if not raw.lstrip().startswith("{"):
        raise ValueError("not a JSON object")
    walk(0, ())
    return out


def field_value(value: Any, keys: tuple[str, ...]) -> tuple[bool, Any]:
    """``(True, the value at keys)`` where ``value`` holds that path of object keys, else
    ``(False, None)``. Raises nothing.
    """
    node = value
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return False, None
        node = node[k]
    return True, node


def revise_outputs(
    raw_texts: list[str],
    plan: Callable[[int, Any, str, dict[tuple[str, ...], tuple[int, int]]], Iterable[Any]],
    decide: Callable[[Any, Any, Any], Any],
    score: Callable[[list[Any], list[Any]], Sequence[Any]] | None = None,
) -> list[str]:
    """The generated JSON texts with fields decided again: the walk over the outputs that
    ``choose_options``, ``choose_numbers`` (``numbers.py``), ``choose_span_ends``
    (``spans.py``) and ``choose_overlaps`` (``overlaps.py``) share.

    Every text that parses as a JSON object (``json.loads`` and ``value_spans``) is
    planned, in order; an empty text or one that does not parse is left as it is. When
    any job was planned, ``score`` is called once with all of them (so their scoring
    requests go in one batch); then each job, in order, is decided on its document's
    object as the earlier jobs left it. A document whose object was decided again is
    written compactly.

    Args:
        raw_texts: each document's generated JSON text.
        plan: ``plan(doc, value, raw, spans)``: the jobs of one document (the fields to
            decide), given its index, parsed object, text and ``value_spans``.
        decide: ``decide(job, result, value)``: the document's object with the job's
            field decided (a new object; ``value`` is not changed), or None to keep
            ``value``; ``result`` is the job's entry of ``score``'s list (None without
            ``score``).
        score: ``score(jobs, values)``: one result per job, in order; ``values`` holds each
            document's parsed object before any decision (None where it was skipped).
            Without it a job scores itself in ``decide``.

    Returns:
        The texts; where a job decided the object again, the object written compactly
        (``separators=(",", ":")``, keys in their order).

    Raises:
        Nothing of its own: what ``plan``, ``score`` or ``decide`` raise propagates.
    """
    values: list[Any] = [None] * len(raw_texts)
    jobs: list[tuple[int, Any]] = []
    for doc, raw in enumerate(raw_texts):
        if not raw:
            continue
        try:
            value = json.loads(raw)
            spans = value_spans(raw)
        except ValueError:
            continue
        values[doc] = value
        jobs.extend((doc, job) for job in plan(doc, value, raw, spans))
    if not jobs:
        return list(raw_texts)
    results = score([job for _, job in jobs], values) if score is not None else [None] * len(jobs)
    out_texts = list(raw_texts)
    for (doc, job), result in zip(jobs, results):
        new = decide(job, result, values[doc])
        if new is not None:
            values[doc] = new
            out_texts[doc] = json.dumps(new, ensure_ascii=False, separators=(",", ":"))
    return out_texts


def choose_options(engine: Any, schema: Any, prompts: list[Any], raw_texts: list[str]) -> list[str]:
    """The generated JSON texts with each choice field's value decided by score (module
    docstring).

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        schema: the JSON Schema the objects are valid under (a dict).
        prompts: each document's chat messages, or a plain prompt string.
        raw_texts: each document's generated JSON text (one that does not parse as an
            object, or an empty one, is left as it is).

    Returns:
        The texts; where another option scored higher, the object written again
        compactly (``separators=(",", ":")``, keys in their order) with that option.
    """
    fields = option_fields(schema) if isinstance(schema, dict) else {}
    if not fields:
        return list(raw_texts)
    checker = None

    def plan(i: int, value: Any, raw: str, spans: dict) -> Iterable[CandidateJob]:
        context = None
        for keys, options in fields.items():
            present, current = field_value(value, keys)
            if not present or keys not in spans or not any(same_json(o, current) for o in options):
                continue
            if context is None:
                context = prompt_text(engine, prompts[i])
            yield CandidateJob(i, keys, list(options), context, raw, spans[keys])

    def score(jobs: list[CandidateJob], values: list[Any]) -> list[Any]:
        nonlocal checker
        checker = jsonschema.validators.validator_for(schema)(schema)
        return best_candidates(engine, jobs, values, summed=False)

    def decide(job: CandidateJob, best: Any, value: Any) -> Any:
        if best is None:
            return None
        trial = with_field(value, job.keys, best)
        return trial if checker.is_valid(trial) else None

    return revise_outputs(raw_texts, plan, decide, score)


@dataclasses.dataclass(frozen=True)
class CandidateJob:
    """One field of one generated object whose value is decided among candidates.

    Attributes:
        doc: the document's index in the batch.
        keys: the field's key path (object properties).
        candidates: the JSON values scored (greedy's value among them).
        context: the prompt's text as the model read it (``prompt.prompt_text``).
        raw: the generated JSON text.
        span: ``(start, end)`` character offsets of the field's value in ``raw``
            (``value_spans``).
    """

    doc: int
    keys: tuple[str, ...]
    candidates: list[Any]
    context: str
    raw: str
    span: tuple[int, int]
    lead: Lead | None = dataclasses.field(default=None, compare=False, repr=False)


@dataclasses.dataclass(frozen=True)
class Lead:
    """The rows a job's candidates share, computed once by an earlier request
    (``overlaps.shortlist_spans``), which ``candidate_scores`` reads instead of computing
    them again in every candidate's request.

    Attributes:
        ids: the token ids every candidate's ids start with (the context, ``raw`` up to the
            value and the candidates' common leading ids).
        start: the first position whose log-probability ``out`` holds.
        out: the request's output (a ``RequestOutput`` of ``ids``): ``prompt_logprobs[j]``
            holds the token at ``j`` for ``start <= j < len(ids)`` and ``logprobs[0]`` the
            likeliest tokens after ``ids`` (``SHARED_TOP``).
    """

    ids: list[int]
    start: int
    out: Any


def best_candidates(
    engine: Any, jobs: list[CandidateJob], values: list[Any], *, summed: bool
) -> list[Any]:
    """Each job's best-scoring candidate, or ``None`` where greedy's value wins.

    The candidates are scored by ``candidate_scores``.

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        jobs: the fields to decide; each job's candidates hold greedy's value.
        values: each document's parsed object (``values[job.doc]``).
        summed: sum rather than average the candidate's token log-probabilities.

    Returns:
        One entry per job: the winning candidate, or ``None`` where greedy's value scores
        highest (a tie keeps greedy's; between others the first listed wins).

    Raises:
        ValueError: a job's candidates do not hold the value at its keys.
    """
    best_out: list[Any] = []
    for job, scores in zip(jobs, candidate_scores(engine, jobs, summed=summed)):
        now = current_index(job, values)
        best = max(range(len(scores)), key=lambda k: (scores[k], k == now, -k))
        best_out.append(None if best == now else job.candidates[best])
    return best_out


def current_index(job: CandidateJob, values: list[Any]) -> int:
    """The index in ``job.candidates`` of the value the document's object holds at
    ``job.keys``.

    Raises:
        ValueError: the candidates do not hold that value.
    """
    _, current = field_value(values[job.doc], job.keys)
    now = next((k for k, c in enumerate(job.candidates) if same_json(c, current)), None)
    if now is None:
        raise ValueError(
            f"best_candidates: the candidates of field {'.'.join(job.keys)!r} "
            f"(document {job.doc}) do not hold its value {current!r}"
        )
    return now


def encode_in_context(engine: Any, context: str, texts: Sequence[str]) -> list[list[int]]:
    """The token ids of ``context + t`` for each of ``texts``: what
    ``engine.tokenizer.encode(context + t, add_special_tokens=False)`` returns, with the
    context's head encoded once instead of once per text.

    The head is the context up to the end of its last special token (the chat template's
    ``<|im_start|>`` before ``assistant``): a tokenizer splits its special tokens out of a
    text before anything else, so the text before one never tokenizes together with the
    text after it, and ``ids(head) + ids(rest + t)`` is ``ids(context + t)``. Checked on
    ``texts[0]`` with one whole encode; where that differs (a tokenizer whose special
    tokens take the whitespace after them, or without a ``backend_tokenizer``), and where
    the context has no special token, every text is encoded whole.

    Args:
        engine: the engine (``tokenizer``).
        context: the text every one of ``texts`` continues (``prompt.prompt_text``).
        texts: the continuations.

    Returns:
        One list of token ids per text, in order. Raises: what the tokenizer raises.
    """
    encode = engine.tokenizer.encode
    whole = [encode(context + t, add_special_tokens=False) for t in texts[:1]]
    backend = getattr(engine.tokenizer, "backend_tokenizer", None)
    if len(texts) < 2 or backend is None:
        return whole + [encode(context + t, add_special_tokens=False) for t in texts[1:]]
    cut = max(
        (
            context.rfind(tok.content) + len(tok.content)
            for tok in backend.get_added_tokens_decoder().values()
            if tok.special and not tok.rstrip and tok.content and tok.content in context
        ),
        default=0,
    )
    head = encode(context[:cut], add_special_tokens=False) if cut else []
    rest = context[cut:]
    if not cut or head + encode(rest + texts[0], add_special_tokens=False) != whole[0]:
        return whole + [encode(context + t, add_special_tokens=False) for t in texts[1:]]
    return whole + [head + encode(rest + t, add_special_tokens=False) for t in texts[1:]]


def common_prefix(a: list[int], b: list[int]) -> int:
    """The length of the longest common prefix of two token-id sequences (ints).

    Found by comparing list slices: the whole, then all but the last 8 (the ids of a
    context and of its continuation part near the end), then halving the range that holds
    the first difference down to 8 ids, compared one by one. Raises: never.
    """
    if not (isinstance(a, list) and isinstance(b, list)):
        a, b = list(a), list(b)
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    # from here a[:lo] == b[:lo] and a[lo:hi] != b[lo:hi]
    if hi > 8:
        if a[: hi - 8] == b[: hi - 8]:
            lo = hi - 8
        else:
            hi -= 8
    while hi - lo > 8:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while a[lo] == b[lo]:
        lo += 1
    return lo


def mean_logprob(out: Any, full: list[int], start: int) -> float:
    """Mean log-probability of ``full[start:]`` (``-inf`` when the request failed)."""
    if out.finish_reason == "error" or out.prompt_logprobs is None:
        return float("-inf")
    lps = [out.prompt_logprobs[j][full[j]] for j in range(start, len(full))]
    return sum(lps) / max(1, len(lps))


def run_prompts(
    engine: Any,
    prompts: list[list[int]],
    params: list[SamplingParams],
    *,
    prompt_only: bool = False,
) -> list[Any]:
    """The outputs of the extraction's own requests (scoring passes, shortlists), in one
    batch through ``engine.make_request`` / ``engine.run_requests``, so that a request that
    cannot run (a prompt past the context) fails alone with ``finish_reason="error"``
    instead of refusing the whole batch as ``engine.generate`` does
    (``PromptTooLongError``).

    With ``prompt_only`` on an :class:`~structgen.runtime.engine.Engine` each request is
    ``prompt_only`` (``Request.prompt_only``): the row of its last prompt token, which only
    predicts the token it would sample, is never computed, and its output holds no token
    (``finish_reason="length"``); the prompt log-probabilities are the same rows' as
    ``generate``'s. Other engines run the requests whole; an engine without
    ``make_request`` / ``run_requests`` runs them through its ``generate``.

    Args:
        engine: the engine (``make_request`` and ``run_requests``, or ``generate``).
        prompts: token ids per request.
        params: one ``SamplingParams`` per request.
        prompt_only: compute prompt rows only (the caller reads ``prompt_logprobs`` alone).

    Returns:
        One ``RequestOutput`` per request, in order (``finish_reason="error"`` where a
        request failed). Raises: what ``engine.make_request`` raises for bad requests.
    """
    from structgen.runtime.engine import Engine

    if not prompts:
        return []
    if not (hasattr(engine, "make_request") and hasattr(engine, "run_requests")):
        return engine.generate(prompts, params)  # a duck-typed engine (tests, wrappers)
    reqs = [engine.make_request(ids, sp) for ids, sp in zip(prompts, params)]
    if prompt_only and isinstance(engine, Engine):
        for req in reqs:
            req.prompt_only = True
    return engine.run_requests(reqs)


def score_prompts(engine: Any, prompts: list[list[int]], params: list[SamplingParams]) -> list[Any]:
    """The outputs of prompt-log-prob requests whose sampled token nobody reads:
    :func:`run_prompts` with ``prompt_only``.
    """
    return run_prompts(engine, prompts, params, prompt_only=True)


SHARED_TOP = 20  # log-probs read per row of a request that scores other candidates too


def candidate_scores(engine: Any, jobs: list[CandidateJob], *, summed: bool) -> list[list[float]]:
    """The model's score of every candidate of every job.

    Every candidate is scored in the context greedy wrote the value in: the prompt and
    ``raw`` up to the value, then the candidate as JSON and the one structural character
    ``raw`` wrote after the value; its tokens' log-probabilities from the first token where
    the candidate's ids leave the context's are averaged (``summed=False``, as ``select``
    scores options) or summed (``summed=True``, which does not favour longer candidates).
    All candidates of all jobs go to the engine as one batch of prompt-log-prob
    requests (``score_prompts``) (the radix cache computes their shared prefixes once).

    A candidate whose ids but the last lead another candidate's of the same job ("Lantern"
    + '",' inside "Lantern Robotics" + '",', ``shared_hosts``) sends no request of its own:
    a causal model's rows over the shared ids are the same in the longer request, which
    reads the ``SHARED_TOP`` likeliest tokens per row, so the shorter candidate's last
    token is read there. Where that token is not among them, a second batch reads it
    alone: a request of the candidate's ids scoring only the last (the prefix cache
    serves the rest, which the longer request left there).

    A job with a ``lead`` (``Lead``: a request over the ids all its candidates start
    with, run before) gives its requests those rows: a request whose ids start with the
    lead's reads the log-probabilities of its tokens up to the lead's end there, and of
    its next token among the lead's likeliest next tokens, and computes only the rows
    after them (the prefix cache serves the lead's ids); where its next token is not
    among them it computes that row too. The scores are the same as one request per
    candidate (up to the float rounding of another batch layout); fewer tokens are
    computed.

    Args:
        engine: the engine (``tokenizer``, ``generate``).
        jobs: the fields to score.
        summed: sum rather than average the candidate's token log-probabilities.

    Returns:
        One list per job, one float per candidate in its order (``-inf`` where the
        scoring request failed).
    """
    if not jobs:
        return []
    fulls, firsts, sizes, job_of = [], [], [], []
    for k, job in enumerate(jobs):
        start, end = job.span
        head = job.raw[:start]
        tail = job.raw[end : end + 1]
        base, *ids = encode_in_context(
            engine,
            job.context,
            [head, *(head + json.dumps(c, ensure_ascii=False) + tail for c in job.candidates)],
        )
        fulls.extend(ids)
        firsts.extend(max(1, min(common_prefix(base, f), len(f) - 1)) for f in ids)
        sizes.append(len(ids))
        job_of.extend([k] * len(ids))
    hosts = shared_hosts(fulls, firsts, sizes)
    roots = [i for i, h in enumerate(hosts) if h == i]
    starts = {i: firsts[i] for i in roots}
    guests = {i for i, h in enumerate(hosts) if h != i}
    for i in guests:
        starts[hosts[i]] = min(starts[hosts[i]], firsts[i])
    # rows below cut[root] are read from its job's lead
    cut = {i: _lead_cut(jobs[job_of[i]].lead, fulls[i], starts[i]) for i in roots}
    # hosts whose guests' last tokens differ from theirs read the top tokens of each row
    reads = {h for i, h in enumerate(hosts) if fulls[h][len(fulls[i]) - 1] != fulls[i][-1]}
    asked = [i for i in roots if max(starts[i], cut[i]) < len(fulls[i])]
    params = [
        dataclasses.replace(
            _SCORE,
            prompt_logprobs=SHARED_TOP if i in reads else 0,
            prompt_logprobs_start=max(starts[i], cut[i]),
        )
        for i in asked
    ]
    outs = dict(zip(asked, score_prompts(engine, [fulls[i] for i in asked], params)))

    def row(i: int, j: int) -> dict[int, float] | None:
        """The log-probabilities read for position ``j`` of candidate ``i``; None where
        the request failed.
        """
        h = hosts[i]
        lead = jobs[job_of[h]].lead
        if j < cut[h]:
            return lead.out.logprobs[0] if j == len(lead.ids) else lead.out.prompt_logprobs[j]
        out = outs[h]
        if out.finish_reason == "error" or out.prompt_logprobs is None:
            return None
        return out.prompt_logprobs[j] or {}

    scores = [0.0] * len(fulls)
    missed: dict[int, list[float]] = {}  # candidate -> its tokens' log-probs before the unread
    for i, full in enumerate(fulls):
        lps: list[float] = []
        for j in range(firsts[i], len(full)):
            found = row(i, j)
            if found is None:
                lps = [float("-inf")]
                break
            lp = found.get(full[j])
            if lp is None:  # a guest's last token outside its host's top (or the lead's)
                missed[i] = lps
                break
            lps.append(lp)
        if i not in missed:
            scores[i] = sum(lps) / max(1, len(lps))
    if missed:  # the rest alone: the host's (or the lead's) KV of the ids before is cached
        todo = list(missed)
        params = [
            dataclasses.replace(_SCORE, prompt_logprobs_start=firsts[i] + len(missed[i]))
            for i in todo
        ]
        for i, out in zip(todo, score_prompts(engine, [fulls[i] for i in todo], params)):
            if out.finish_reason == "error" or out.prompt_logprobs is None:
                scores[i] = float("-inf")
                continue
            lps = missed[i] + [
                out.prompt_logprobs[j][fulls[i][j]]
                for j in range(firsts[i] + len(missed[i]), len(fulls[i]))
            ]
            scores[i] = sum(lps) / len(lps)
    scores_out: list[list[float]] = []
    pos = 0
    for n in sizes:
        scores_out.append(
            [
                scores[i] * (max(1, len(fulls[i]) - firsts[i]) if summed else 1)
                for i in range(pos, pos + n)
            ]
        )
        pos += n
    return scores_out


def _lead_cut(lead: Lead | None, full: list[int], start: int) -> int:
    """The positions of ``full`` (a root request scoring from ``start``) whose
    log-probabilities ``lead`` holds: ``len(lead.ids) + 1`` where ``full`` starts with the
    lead's ids and its next token is among the lead's likeliest, ``len(lead.ids)`` where
    it is not, 0 where the lead cannot serve it (none, failed, scored from after
    ``start``, other ids, or nothing of ``full`` left after it).
    """
    if lead is None:
        return 0
    out, n = lead.out, len(lead.ids)
    if (
        out.finish_reason == "error"
        or not out.logprobs
        or (lead.start < n and out.prompt_logprobs is None)
        or lead.start > start
        or len(full) <= n
        or full[:n] != lead.ids
    ):
        return 0
    return n + 1 if full[n] in out.logprobs[0] else n


def shared_hosts(fulls: list[list[int]], firsts: list[int], sizes: list[int]) -> list[int]:
    """For each candidate, the candidate whose request scores it (itself or a host).

    Candidates are grouped by job (``sizes``: candidates per job, in order). A candidate
    ``i`` is the guest of a longer candidate ``h`` of its job when ``fulls[i][:-1]`` is a
    prefix of ``fulls[h]`` and ``h`` holds a row for ``i``'s last token
    (``len(fulls[h]) >= len(fulls[i])``); a host is itself no guest, and it is the
    longest such candidate (longest first, then the first listed). ``firsts[i] >= 1``
    is where ``i``'s scored tokens begin: a candidate whose scored tokens would start
    at its last token or later still shares (its rows are the host's).

    Args:
        fulls: every candidate's token ids, jobs one after another.
        firsts: each candidate's first scored position.
        sizes: candidates per job.

    Returns:
        One index per candidate into ``fulls``: ``i`` itself for a request of its own.
    """
    hosts = list(range(len(fulls)))
    pos = 0
    for n in sizes:
        order = sorted(range(pos, pos + n), key=lambda i: (-len(fulls[i]), i))
        roots: list[int] = []
        for i in order:
            head = fulls[i][:-1]
            for r in roots:
                if len(fulls[r]) >= len(fulls[i]) and fulls[r][: len(head)] == head:
                    hosts[i] = r
                    break
            else:
                roots.append(i)
        pos += n
    return hosts


def with_field(value: Any, keys: tuple[str, ...], new: Any) -> Any:
    """A deep copy of ``value`` with the field at ``keys`` set to ``new``.

    Args:
        value: a JSON object (dicts and lists, JSON values).
        keys: the path of object keys to the field; every key but the last must exist.
        new: the field's new value.

    Raises:
        KeyError, TypeError: ``keys[:-1]`` is not a path of objects in ``value``.
    """
    trial = json.loads(json.dumps(value))
    node = trial
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = new
    return trial


def same_json(a: Any, b: Any) -> bool:
    """JSON equality of two values (``True`` is not ``1``, ``1`` is not ``1.0``)."""
    return type(a) is type(b) and a == b
