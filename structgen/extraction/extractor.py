"""``extract``: one schema-valid object per text, generated greedily under the schema's grammar."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from structgen.errors import (
    ExtractionError,
    ExtractionPromptTooLongError,
    ExtractionTruncatedWarning,
    GrammarTooComplexError,
    LengthLimit,
    PromptTooLongError,
    RequestError,
    StructgenError,
    length_limit,
    warn_at_user_frame,
)
from structgen.extraction.array_ends import SCORE_ARRAY_ENDS_DEFAULT, choose_array_ends
from structgen.extraction.choices import choose_options, common_prefix
from structgen.extraction.copy import CopyConstraint, copy_constraint
from structgen.extraction.evidence import EVIDENCE_DEFAULT, apply_evidence
from structgen.extraction.nulls import nullable_required
from structgen.extraction.numbers import choose_numbers
from structgen.extraction.overlaps import choose_overlaps
from structgen.extraction.prompt import extraction_messages
from structgen.extraction.result import ExtractionResult
from structgen.extraction.spans import SCORE_SPAN_ENDS_DEFAULT, choose_span_ends
from structgen.fsm.spec import schema_for
from structgen.runtime.sampling_params import SamplingParams

if TYPE_CHECKING:
    from structgen.runtime.engine import Engine

__all__ = [
    "extract",
    "DEFAULT_EXTRACT_MAX_TOKENS",
    "SCORE_OPTIONS_DEFAULT",
    "SCORE_NUMBERS_DEFAULT",
    "SCORE_OVERLAPS_DEFAULT",
    "SCORE_SPAN_ENDS_DEFAULT",
    "SCORE_ARRAY_ENDS_DEFAULT",
    "WRITE_NULLS_DEFAULT",
    "FINISH_CHUNK",
]

DEFAULT_EXTRACT_MAX_TOKENS = 512
SCORE_OPTIONS_DEFAULT = False  # enum/boolean values by score (benchmarks/RESULTS.md)
SCORE_NUMBERS_DEFAULT = False  # whole-numeral scoring: not yet measured (RESULTS.md)
SCORE_OVERLAPS_DEFAULT = True  # overlapping string fields moved by score (RESULTS.md, s23)
WRITE_NULLS_DEFAULT = False  # every nullable property written (nulls.py; RESULTS.md)
FINISH_CHUNK = 16  # with on_result: finished documents scored together (RESULTS.md, v23)
# a call over many texts on a CPU engine runs as this many single-threaded host pipelines
# (structgen.runtime.host_pipelines; 1: off) from this many texts on (RESULTS.md, x10)
HOST_PIPELINES = 2
HOST_PIPELINES_MIN_TEXTS = 64
# on a host pipeline a text's grammar is compiled as its request is first admitted, not all
# before the first step (False: all first); RESULTS.md, session 34 d16
COMPILE_AT_ADMISSION = True


def extract(
    engine: "Engine",
    schema: Any,
    text: str | list[str],
    instructions: str | None = None,
    params: SamplingParams | None = None,
    errors: str = "raise",
    copy: bool | None = None,
    score_span_ends: bool | None = None,
    score_options: bool | None = None,
    score_numbers: bool | None = None,
    evidence: bool | None = None,
    write_nulls: bool | None = None,
    return_details: bool = False,
    on_result: Callable[[int, Any], None] | None = None,
    score_overlaps: bool | None = None,
    score_array_ends: bool | None = None,
) -> Any:
    """Extract one schema-valid object per text, greedily, under the schema's grammar.

    All texts run as one continuously batched job; calls from several threads batch
    together (``engine.run_requests`` is thread-safe). The scoring passes (span ends,
    numbers, overlaps, options) then run once per pass over all finished texts, so each
    pass's scoring requests go in one batch (with ``on_result``: per chunk of up to
    ``FINISH_CHUNK`` finished texts); a text's result is the one it gets alone. An output
    cut by ``max_tokens`` is still a complete object when the grammar's token budget
    closed the JSON in time: it is returned (its later fields may be shortened) and an
    :class:`~structgen.errors.ExtractionTruncatedWarning` naming the text's index is
    emitted.

    Args:
        engine: the engine to generate with.
        schema: a JSON Schema dict (or JSON string) or a pydantic model class.
        text: one text or a list of texts.
        instructions: extra guidance put before each text in the user message.
        params: sampling settings; default greedy with ``max_tokens=512``.
        errors: ``"raise"`` raises the first ExtractionError; ``"return"`` puts the
            ExtractionError in that text's place and goes on (batch jobs).
        copy: copy constraints (``structgen.extraction.copy``): True copies string and
            number values from the text (where it has one that fits), False never, None
            the default (``COPY_DEFAULT``); ``x-structgen-copy`` per field overrides it.
        score_span_ends: decide where each copied string ends by the model's
            probability that it ends there, against the spans extending it by lowercase
            head words ("Nimbus" -> "Nimbus router"; ``structgen.extraction.spans``; scoring
            requests where a copied value has such a continuation in the text) instead
            of greedy's stop; None: ``SCORE_SPAN_ENDS_DEFAULT``.
        score_options: choose each enum and boolean value by the model's score of every
            option in the context it was written in (``structgen.extraction.choices``;
            a few scoring requests per document) instead of greedy's
            first-token choice; None: ``SCORE_OPTIONS_DEFAULT``.
        score_numbers: choose each copied number among the text's numerals by the
            model's score of each whole numeral (``structgen.extraction.numbers``; one
            scoring request per numeral) instead of greedy's
            first digit; None: ``SCORE_NUMBERS_DEFAULT``.
        evidence: decide boolean, number and enum fields by where the text mentions
            them (``structgen.extraction.evidence``: a mention of the field's name
            without a negation makes a boolean true, with one false; a number takes the
            numeral next to its name's mention (or an alias's: "58 years old" for
            ``age``); an enum takes the one option the text
            mentions when the model's is unmentioned; a number read at a separator
            takes the numeral's whole reading (48000, not 48, from "48,000"); a string
            copied from inside a chunk starts where the chunk does ("SUP-0932"); a
            number repeating a sibling's numeral takes the next one ("142/91"); a
            nullable field copying a sibling's value, its name nowhere in the text, is
            null; a money, identifier or phone field takes the one amount, labelled
            identifier or phone number the text writes (``labels.py``); two date
            fields on one date take the text's dates in order; an array loses the
            items the text does not support, ``structgen.extraction.items``), where the
            text settles them; no model call. None: ``EVIDENCE_DEFAULT``.
        write_nulls: generate under the schema with every property that accepts null
            made required (``structgen.extraction.nulls``), so that the model decides
            each such field's value or null instead of leaving it out; the result is
            valid under ``schema`` either way. None: ``WRITE_NULLS_DEFAULT``.
        return_details: return an :class:`~structgen.extraction.result.ExtractionResult`
            (value, truncated, finish_reason, raw_text, copied_fields) per text instead
            of the bare value.
        on_result: called on this thread as ``on_result(index, result)`` as soon as each
            text's result is ready (completion order, not input order), with what the
            returned list holds at that index (an ExtractionError too, whatever
            ``errors`` says); results come in chunks of up to ``FINISH_CHUNK`` finished
            texts (the last chunk when the job ends), which the scoring passes revise
            together.
        score_overlaps: where two copied string fields hold the same span of the text
            (or one inside the other), move the one the model prefers least to its
            best-scored other span (``structgen.extraction.overlaps``; one batch of
            first-token requests that shortlists 8 spans per field, then one batch
            scoring them, for all such documents together: about 20 short requests
            over the prompt the prefix cache already holds, ~110 tokens computed for
            contact_card-04, under half of one 400-token prefill; documents without
            such a pair cost nothing). None: ``SCORE_OVERLAPS_DEFAULT`` (on: +11 right
            fields on the dev set, none lost, benchmarks/RESULTS.md #23 c23/o23/s23);
            False turns it off.
        score_array_ends: end each array of copied values where the model scores
            closing it above going on with greedy's next item, or before its first
            repeated item, and generate the rest of the object again from that cut
            under the same grammar and token budget (``structgen.extraction.array_ends``:
            one batch of two prompt-log-prob requests per item boundary, then one
            batched continuation per round for the documents cut, at most
            ``MAX_ROUNDS`` rounds; documents without such an array cost nothing; only on
            an ``Engine``). None: ``SCORE_ARRAY_ENDS_DEFAULT``; False turns it off.

    Returns:
        A dict (or a pydantic instance when ``schema`` is a model class) per text, or an
        ExtractionResult with ``return_details``: one for a single text, a list for a list
        (an empty list for an empty list, the schema still checked).

    Raises:
        InvalidSchemaError, UnsupportedSchemaError: the schema cannot be compiled
            (unlisted properties are never generated: ``additionalProperties`` is
            treated as false where the schema is silent).
        ExtractionError: an output failed, or was cut by ``max_tokens`` or the end of the
            model's context (the message names which) before its JSON was complete, or a
            ``params.stop`` string or ``stop_token_ids`` token ended it before then;
            carries the raw text and finish reason. Never returns a half object.
            An empty or whitespace-only text fails this way too, without model work;
            a text whose prompt does not fit the engine's context fails with
            ``ExtractionPromptTooLongError`` (an ExtractionError and a
            ``PromptTooLongError``), without model work.
        RequestError: a text is not a string, ``errors`` is neither ``"raise"`` nor
            ``"return"``, ``params`` is not a SamplingParams or asks for ``n`` > 1
            outputs (extract returns one object per text), or a switch (``copy``,
            ``score_*``, ``evidence``, ``return_details``) is not a bool (or None),
            ``instructions`` is not a string (or None) or ``on_result`` is not callable.
    """
    if errors not in ("raise", "return"):
        raise RequestError(f"extract: errors must be 'raise' or 'return', got {errors!r}")
    if params is not None and not isinstance(params, SamplingParams):
        raise RequestError(f"extract: params must be SamplingParams, got {type(params).__name__}")
    if params is not None and params.n != 1:
        raise RequestError(
            f"extract: params.n={params.n}, but extract returns one object per text; leave n "
            "at 1 (for several samples of one text, call Engine.generate with a JsonSchema "
            "constraint and n)"
        )
    switches = {
        "copy": copy, "score_span_ends": score_span_ends, "score_options": score_options,
        "score_numbers": score_numbers, "evidence": evidence, "write_nulls": write_nulls,
        "score_overlaps": score_overlaps, "score_array_ends": score_array_ends,
    }  # fmt: skip
    for name, value in switches.items():
        if value is not None and not isinstance(value, bool):
            raise RequestError(f"extract: {name} must be True, False or None, got {value!r}")
    if not isinstance(return_details, bool):
        raise RequestError(f"extract: return_details must be True or False, got {return_details!r}")
    if instructions is not None and not isinstance(instructions, str):
        raise RequestError(
            f"extract: instructions must be a string (or None), got {type(instructions).__name__}"
        )
    if on_result is not None and not callable(on_result):
        raise RequestError(f"extract: on_result must be callable, got {type(on_result).__name__}")
    single = isinstance(text, str)
    not_a_list = isinstance(text, (bytes, bytearray, dict)) or not isinstance(text, Iterable)
    if not single and not_a_list:
        raise RequestError(
            f"extract: text must be a string or a list of strings, not a {type(text).__name__}"
        )
    texts = [text] if single else list(text)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise RequestError(f"extract: text {i} is a {type(t).__name__}, not a string")
    if any(not t.strip() for t in texts):
        return _without_empty(
            texts, single, errors, on_result,
            lambda kept, report: extract(
                engine, schema, kept, instructions, params, "return", copy, score_span_ends,
                score_options, score_numbers, evidence, write_nulls, return_details, report,
                score_overlaps=score_overlaps, score_array_ends=score_array_ends,
            ),
        )  # fmt: skip
    model_cls = schema if isinstance(schema, type) and hasattr(schema, "model_validate") else None
    sd = schema_for(schema)
    if not texts:
        _compiled(copy_constraint(sd, "", False), sd, engine.vocab)  # a bad schema fails
        return []
    params = params or SamplingParams(max_tokens=DEFAULT_EXTRACT_MAX_TOKENS, temperature=0.0)
    nulls = WRITE_NULLS_DEFAULT if write_nulls is None else write_nulls
    job = _Job(
        sd=sd,
        gsd=nullable_required(sd) if nulls else sd,  # the schema generated under
        texts=texts,
        instructions=instructions,
        params=params,
        copy=copy,
        span_ends=SCORE_SPAN_ENDS_DEFAULT if score_span_ends is None else score_span_ends,
        options=SCORE_OPTIONS_DEFAULT if score_options is None else score_options,
        numbers=SCORE_NUMBERS_DEFAULT if score_numbers is None else score_numbers,
        overlaps=SCORE_OVERLAPS_DEFAULT if score_overlaps is None else score_overlaps,
        array_ends=SCORE_ARRAY_ENDS_DEFAULT if score_array_ends is None else score_array_ends,
        by_text=EVIDENCE_DEFAULT if evidence is None else evidence,
        model_cls=model_cls,
        details=return_details,
        results=[None] * len(texts),
    )
    pipes = _host_pipelines(engine, len(texts))
    ran = None
    if pipes is not None:
        _cache_shared_head(engine, job)
        ran = _run_pipelined(pipes, job, len(pipes.engines), on_result)
    if ran is None:  # one pipeline: this engine, on this thread
        _extract_part(engine, job, list(range(len(texts))), on_result)
    results = job.results
    if errors != "return":
        failed = next((r for r in results if isinstance(r, ExtractionError)), None)
        if failed is not None:
            raise failed
    return results[0] if single else results


@dataclasses.dataclass
class _Job:
    """One ``extract`` call's settings and its result list (filled in place by each part)."""

    sd: Any
    gsd: Any
    texts: list[str]
    instructions: str | None
    params: SamplingParams
    copy: bool | None
    span_ends: bool
    options: bool
    numbers: bool
    overlaps: bool
    array_ends: bool
    by_text: bool
    model_cls: Any
    details: bool
    results: list[Any]


def _host_pipelines(engine: Any, num_texts: int) -> Any:
    """The engine's ``HostPipelines`` when a call over ``num_texts`` texts runs on them
    (``HOST_PIPELINES`` >= 2, at least ``HOST_PIPELINES_MIN_TEXTS`` texts, an ``Engine``
    whose ``can_share_model()``, and at least 2 kernel threads on this thread), else None.
    """
    from structgen.runtime.engine import Engine

    if (
        HOST_PIPELINES < 2
        or num_texts < HOST_PIPELINES_MIN_TEXTS
        or type(engine) is not Engine
        or not engine.can_share_model()
        or engine.host_lock is not None  # a pipeline's own engine
    ):
        return None
    from structgen.runtime.cpu.threads import kernel_threads
    from structgen.runtime.host_pipelines import host_pipelines

    if kernel_threads() < 2:
        return None
    return host_pipelines(engine, HOST_PIPELINES)


def _cache_shared_head(engine: Any, job: _Job) -> None:
    """Compute the prompts' shared head (the messages up to where the first two texts'
    prompts part) once on ``engine``, on all its kernel threads, so that each host pipeline
    copies it from ``engine``'s prefix cache (``Engine.host_pipeline``) instead of computing
    it on one thread, the second pipeline while the first holds the host lock. Nothing when
    ``engine`` has no prefix cache, the head is shorter than a page, or it is cached
    already (then only its last token is computed). Raises: never for a text's fault (a
    text that cannot be encoded fails in its own part, as without this).
    """
    if engine.cache is None or len(job.texts) < 2:
        return
    try:
        a, b = (
            engine.encode_prompt(extraction_messages(job.sd, t, job.instructions))
            for t in job.texts[:2]
        )
    except StructgenError:
        return
    n = common_prefix(a, b)
    if n < engine.pool.page_size or n >= engine.max_request_tokens():
        return
    engine.generate([a[:n]], SamplingParams(max_tokens=1, temperature=0.0))


def _run_pipelined(
    pipes: Any,
    job: _Job,
    n: int,
    on_result: Callable[[int, Any], None] | None,
) -> bool | None:
    """``job``'s texts dealt round-robin to ``n`` pipelines and extracted there; each
    result reported to ``on_result`` on this thread. None when the pipelines are busy
    with another call (nothing ran). A pipeline whose part raised leaves its unfinished
    texts an ExtractionError each (the other parts' results stand); when every part
    raised, the first part's exception is raised (as one pipeline would have).
    """
    parts = [list(range(k, len(job.texts), n)) for k in range(n)]
    parts = [p for p in parts if p]

    def part_job(idx: list[int]):
        def run(engine: Any, post: Callable[..., None]) -> None:
            report = None if on_result is None else (lambda i, r: post(on_result, i, r))
            _extract_part(engine, job, idx, report)

        return run

    outcomes = pipes.try_run([part_job(p) for p in parts])
    if outcomes is None:
        return None
    failures = [exc for _, exc in outcomes if exc is not None]
    if failures and len(failures) == len(outcomes):
        raise failures[0]
    for idx, (_, exc) in zip(parts, outcomes):
        if exc is None:
            continue
        for i in idx:
            if job.results[i] is None:
                err = ExtractionError(
                    f"extraction of text {i} failed: its pipeline raised "
                    f"{type(exc).__name__}: {exc}",
                    finish_reason="error",
                )
                err.__cause__ = exc
                job.results[i] = err
                if on_result is not None:
                    on_result(i, err)
    return True


def _extract_part(
    engine: Any,
    job: _Job,
    idx: list[int],
    on_result: Callable[[int, Any], None] | None,
) -> None:
    """Extract ``job``'s texts ``idx`` on ``engine`` into ``job.results`` (ExtractionErrors
    in place), reporting each to ``on_result`` as it is ready (see ``extract``).
    """
    sd, gsd, texts, params = job.sd, job.gsd, job.texts, job.params
    plans: dict[int, CopyConstraint] = {}
    grammars: dict[int, Any] = {}

    def grammar_of(i: int) -> Any:
        """Text ``i``'s grammar, compiled once (its plan recorded in ``plans``)."""
        if i not in grammars:
            plan, grammar = _compiled(copy_constraint(gsd, texts[i], job.copy), gsd, engine.vocab)
            plans[i], grammars[i] = _fit_budget(plan, grammar, gsd, engine.vocab, params.max_tokens)
        return grammars[i]

    # on a host pipeline a text's grammar is compiled when its pipeline's scheduler first
    # admits its request, beside the other pipeline's forwards (_run)
    lazy = COMPILE_AT_ADMISSION and getattr(engine, "host_lock", None) is not None
    if not lazy:
        for i in idx:
            grammar_of(i)
    prompts = {i: extraction_messages(sd, texts[i], job.instructions) for i in idx}
    results = job.results
    span_ends, options, numbers = job.span_ends, job.options, job.numbers
    overlaps, by_text = job.overlaps, job.by_text
    model_cls, return_details = job.model_cls, job.details
    cut = _Cut(engine, params)

    def finish(done: list[tuple[int, Any]]) -> None:
        """Each finished output of ``done`` (index, output) through the scoring passes,
        each pass once over all of them (one batch of scoring requests per stage), then
        its result recorded and reported.
        """
        idx = [i for i, _ in done]
        outs = [out for _, out in done]
        for i in idx:  # a text whose request failed before its admission: compiled here
            grammar_of(i)
        todo = [k for k, i in enumerate(idx) if job.array_ends and plans[i].copied_fields]
        if todo:  # first: it generates the rest of an output again
            new_outs = choose_array_ends(
                engine, gsd, [prompts[idx[k]] for k in todo], [outs[k] for k in todo],
                [texts[idx[k]] for k in todo], [plans[idx[k]].copied_fields for k in todo],
                [grammars[idx[k]] for k in todo],
                params,
            )  # fmt: skip
            for k, out in zip(todo, new_outs):
                outs[k] = out
        scored = (
            (span_ends, choose_span_ends),
            (numbers, choose_numbers),
            (overlaps, choose_overlaps),
        )
        for on, choose in scored:
            todo = [k for k, i in enumerate(idx) if on and plans[i].copied_fields and _ok(outs[k])]
            if todo:
                new = choose(
                    engine, sd, [prompts[idx[k]] for k in todo], [outs[k].text for k in todo],
                    [texts[idx[k]] for k in todo], [plans[idx[k]].copied_fields for k in todo],
                )  # fmt: skip
                for k, text_k in zip(todo, new):
                    outs[k] = dataclasses.replace(outs[k], text=text_k)
        todo = [k for k in range(len(idx)) if options and _ok(outs[k])]
        if todo:
            new = choose_options(
                engine, sd, [prompts[idx[k]] for k in todo], [outs[k].text for k in todo]
            )
            for k, text_k in zip(todo, new):
                outs[k] = dataclasses.replace(outs[k], text=text_k)
        for i, out in zip(idx, outs):
            if i in too_long:  # failed at the scheduler, before any model work
                results[i] = too_long[i]
            else:
                if by_text and _ok(out):
                    out = dataclasses.replace(out, text=_with_evidence(sd, texts[i], out.text))
                results[i] = _result(
                    out, i, model_cls, sd, return_details, plans[i].copied_fields, cut
                )
            if on_result is not None:
                on_result(i, results[i])

    pending: list[tuple[int, Any]] = []  # finished outputs waiting for their chunk
    too_long: dict[int, ExtractionPromptTooLongError] = {}  # text -> its error

    def finished(i: int, out: Any) -> None:
        pending.append((i, out))
        if len(pending) >= FINISH_CHUNK:
            chunk = pending[:]
            pending.clear()
            finish(chunk)

    outputs = _run(
        engine,
        [prompts[i] for i in idx],
        params,
        (lambda j: grammar_of(idx[j])) if lazy else [grammars[i] for i in idx],
        (lambda j, out: finished(idx[j], out)) if on_result is not None else None,
        lambda j, exc: too_long.__setitem__(idx[j], exc),
    )
    finish([(i, out) for i, out in zip(idx, outputs) if results[i] is None])


def _ok(out: Any) -> bool:
    """Whether an output is one the scoring passes revise (stopped or cut, with text)."""
    return out.finish_reason in ("stop", "length") and bool(out.text)


def _without_empty(
    texts: list[str],
    single: bool,
    errors: str,
    on_result: Callable[[int, Any], None] | None,
    run: Callable[[list[str], Callable[[int, Any], None] | None], list[Any]],
) -> Any:
    """The results of ``extract`` where some texts are empty or whitespace: each such text gets an
    ExtractionError in its place without any model work (there is nothing to copy or read
    a value from, and a model asked anyway makes a record up); ``run(kept, report)``
    extracts the others (``errors="return"``), ``report(j, result)`` forwarding kept text
    ``j``'s result to ``on_result`` under its index in ``texts``.

    Raises:
        ExtractionError: the first failed text in input order, unless ``errors="return"``.
    """
    results: list[Any] = [None] * len(texts)
    kept = [i for i, t in enumerate(texts) if t.strip()]
    for i, t in enumerate(texts):
        if not t.strip():
            results[i] = ExtractionError(
                f"text {i} is empty: there is nothing to extract from", finish_reason="error"
            )
            if on_result is not None:
                on_result(i, results[i])
    if kept:
        report = None if on_result is None else (lambda j, r: on_result(kept[j], r))
        for i, r in zip(kept, run([texts[i] for i in kept], report)):
            results[i] = r
    if errors != "return":
        failed = next((r for r in results if isinstance(r, ExtractionError)), None)
        if failed is not None:
            raise failed
    return results[0] if single else results


def _compiled(plan: CopyConstraint, schema: Any, vocab: Any) -> tuple[CopyConstraint, Any]:
    """``(plan, grammar)`` of one document; a copy grammar too complex to compile (its
    emptiness checks over the compile's budget) falls back to the schema's own grammar
    for that document (no copied fields), as a field without a fitting span does.

    Raises:
        GrammarTooComplexError: the schema's own grammar is too complex.
    """
    try:
        grammar = plan.spec.compile(vocab)
    except GrammarTooComplexError:
        if not plan.copied_fields:
            raise
        plan = copy_constraint(schema, "", False)
        grammar = plan.spec.compile(vocab)
    grammar.emit_warnings(stacklevel=4)  # at extract's caller
    return plan, grammar


def _fit_budget(
    plan: CopyConstraint, grammar: Any, schema: Any, vocab: Any, max_tokens: int | None
) -> tuple[CopyConstraint, Any]:
    """``(plan, grammar)`` unchanged, or the schema's own grammar (no copied fields) when
    the copy grammar cannot complete its JSON within ``max_tokens`` but the schema's own
    grammar can: copied spans and numerals can be longer than the shortest values the
    schema allows, and a matcher whose budget cannot be met ignores it (``Matcher``), so
    the output would be cut before its JSON closes. Decided per document, as a field
    without a fitting span is.
    """
    if max_tokens is None or vocab is None or not plan.copied_fields:
        return plan, grammar  # without a vocabulary there is no token budget to meet
    if grammar.matcher(max_tokens=max_tokens).is_budgeted:
        return plan, grammar
    plain, own = _compiled(copy_constraint(schema, "", False), schema, vocab)
    if own.matcher(max_tokens=max_tokens).is_budgeted:
        return plain, own
    return plan, grammar


def _with_evidence(schema: Any, text: str, raw: str) -> str:
    """``raw`` (one output's JSON text) with ``apply_evidence``'s changes, written
    compactly; unchanged when it does not parse or nothing changes.
    """
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    new, changed = apply_evidence(schema, text, value)
    return json.dumps(new, ensure_ascii=False, separators=(",", ":")) if changed else raw


@dataclasses.dataclass(frozen=True)
class _Cut:
    """The limit that cut an output (``errors.length_limit``), and its remedy in extract's
    terms, for extract's messages and ``ExtractionError.cut_by``.
    """

    engine: Any
    params: SamplingParams

    def __call__(self, out: Any) -> LengthLimit:
        """The limit that cut ``out``, which finished with ``finish_reason="length"``."""
        max_tokens = self.params.max_tokens
        if len(out.token_ids) >= max_tokens:  # no need to ask the engine its context
            return length_limit(len(out.token_ids), max_tokens, 0)
        return length_limit(len(out.token_ids), max_tokens, self.engine.max_request_tokens())

    @staticmethod
    def remedy(limit: LengthLimit) -> str:
        """What to change for an output ``limit`` cut."""
        return limit.remedy(
            shorten_prompt="shorten the text, or create the engine with a larger max_model_len"
        )


def _result(
    out: Any,
    index: int,
    model_cls: Any,
    schema: Any,
    details: bool,
    copied: tuple[str, ...],
    cut: _Cut,
) -> Any:
    """One text's entry in extract's result list: the value, an ExtractionResult, or the
    ExtractionError (returned, not raised); warns when the output was truncated.
    """
    try:
        value, truncated = _parse(out, model_cls, schema, cut)
    except ExtractionError as exc:
        return exc
    limit = cut(out) if truncated else None
    if limit is not None:
        warn_at_user_frame(
            ExtractionTruncatedWarning(
                f"extraction of text {index} was cut by {limit}; the grammar closed "
                "the JSON early, so its later fields may be shortened",
                index=index,
                raw_text=out.text,
            )
        )
    if not details:
        return value
    return ExtractionResult(value, truncated, out.finish_reason, out.text, tuple(copied), limit)


def _parse(out: Any, model_cls: Any, schema: Any, cut: _Cut) -> tuple[Any, bool]:
    """``(value, truncated)`` of one output; raises ExtractionError for a failed output,
    one cut by ``max_tokens`` or the context whose JSON is not complete and schema-valid,
    or one a stop string (or stop token) ended before its JSON was complete.
    """
    truncated = out.finish_reason == "length"
    if out.finish_reason != "stop" and not truncated:
        why = out.error or f"generation ended with finish_reason={out.finish_reason!r}"
        raise ExtractionError(
            f"extraction did not complete: {why}",
            raw_text=out.text,
            finish_reason=out.finish_reason,
        )
    try:
        obj = json.loads(out.text)
    except json.JSONDecodeError as exc:
        if truncated:
            limit = cut(out)
            raise ExtractionError(
                f"extraction did not complete: {limit} was reached before the JSON was "
                f"complete; {cut.remedy(limit)}",
                raw_text=out.text,
                finish_reason=out.finish_reason,
                cut_by=limit,
            ) from None
        stops = {
            name: list(value)
            for name, value in (
                ("stop", cut.params.stop),
                ("stop_token_ids", cut.params.stop_token_ids),
            )
            if value
        }
        if stops:  # under extract's grammar only a stop ends an output before its JSON closes
            where = " or ".join(f"params.{name}={value}" for name, value in stops.items())
            raise ExtractionError(
                f"extraction did not complete: the output ended at {where} before its JSON "
                f"was complete; extract's grammar ends the JSON itself: leave "
                f"{' and '.join(stops)} unset",
                raw_text=out.text,
                finish_reason="error",
            ) from None
        raise ExtractionError(
            f"model output is not JSON: {exc}", raw_text=out.text, finish_reason="error"
        ) from exc
    if truncated:
        _check_closed(obj, schema, out, cut)
    if model_cls is None:
        return obj, truncated
    try:
        return model_cls.model_validate(obj), truncated
    except Exception as exc:  # pydantic validators beyond the JSON Schema
        raise ExtractionError(
            f"output does not validate as {model_cls.__name__}: {exc}",
            raw_text=out.text,
            finish_reason="error",
        ) from exc


def _check_closed(obj: Any, schema: Any, out: Any, cut: _Cut) -> None:
    """Raise ExtractionError unless a truncated output's JSON is valid against the schema."""
    import jsonschema

    error = jsonschema.validators.validator_for(schema)(schema).iter_errors(obj)
    first = next(error, None)
    if first is not None:
        where = "/" + "/".join(str(p) for p in first.absolute_path)
        limit = cut(out)
        raise ExtractionError(
            f"extraction was cut by {limit} and its JSON is not schema-valid at {where}: "
            f"{first.message}",
            raw_text=out.text,
            finish_reason=out.finish_reason,
            cut_by=limit,
        )


def _run(
    engine: Any,
    prompts: list[Any],
    params: SamplingParams,
    grammar: Any,
    on_output: Callable[[int, Any], None] | None,
    on_too_long: Callable[[int, ExtractionPromptTooLongError], None],
) -> list[Any]:
    """Run every prompt as one continuously batched job through ``engine.run_requests``
    (thread-safe: extractions from several threads batch together), calling
    ``on_output(i, output)`` on this thread as each request finishes; returns the outputs
    in input order. ``grammar`` is one compiled grammar, a list with one per prompt, or
    (on a host pipeline's ``Engine``, whose scheduler runs only this job's requests) a
    callable ``grammar(i)`` compiling prompt ``i``'s: every request is made unconstrained
    and queued at once (the scheduler's order is the same), and gets its grammar
    (``Engine.attach_grammar``) as the scheduler first admits it (``Scheduler.on_admit``).
    A prompt with no room in the engine's context is still queued (the scheduler fails it
    alone, before any model work) and reported first, ``on_too_long(i, error)``, with
    the engine's message (``check_prompt_fits``).
    """
    done: set[int] = set()

    def listener(i: int, out: Any) -> None:
        if out.finish_reason is not None and i not in done:
            done.add(i)
            on_output(i, out)

    report = listener if on_output is not None else None

    def refuse_too_long(reqs: list[Any]) -> None:
        check = getattr(engine, "check_prompt_fits", None)
        for i, req in enumerate(reqs if check is not None else ()):
            try:
                check(req.prompt_token_ids)
            except PromptTooLongError as exc:
                on_too_long(i, ExtractionPromptTooLongError(str(exc), finish_reason="error"))

    if not isinstance(grammar, list) and not hasattr(grammar, "matcher"):  # grammar(i)
        reqs = [engine.make_request(p, params, None) for p in prompts]
        refuse_too_long(reqs)
        unconstrained = {r.request_id: (r, i) for i, r in enumerate(reqs)}

        def on_admit(req: Any) -> None:
            got = unconstrained.pop(req.request_id, None)
            if got is not None and got[0] is req:
                engine.attach_grammar(req, grammar(got[1]))

        scheduler = engine.scheduler
        scheduler.on_admit = on_admit
        try:
            return engine.run_requests(reqs, report)
        finally:
            scheduler.on_admit = None
    grammars = grammar if isinstance(grammar, list) else [grammar] * len(prompts)
    reqs = [engine.make_request(p, params, g) for p, g in zip(prompts, grammars)]
    refuse_too_long(reqs)
    return engine.run_requests(reqs, report)
