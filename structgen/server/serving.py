"""Turn validated API requests into engine requests, and engine outputs into responses.

One API request becomes one engine request per (prompt, choice): ``n`` choices run
concurrently (seed ``seed + i`` each) and share the prompt's KV pages through the radix
cache. Every engine request goes through ``AsyncEngine.generate``; when the consumer
stops (client gone, stream closed) the branch tasks are cancelled, which aborts their
engine requests and frees their pages.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import itertools
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from structgen.errors import (
    ConfigError,
    GrammarTooComplexError,
    RegexError,
    SchemaError,
    StructgenError,
)
from structgen.fsm.nesting import loads
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.sampling_params import SamplingParams
from structgen.server.metrics import ServerMetrics
from structgen.server.protocol import APIError, log

__all__ = [
    "Branch",
    "ServerState",
    "chat_logprobs",
    "check_prompt",
    "check_token_ids",
    "compile_constraint",
    "completion_logprobs",
    "request_constraint",
    "run_branches",
    "sampling_params",
    "usage",
]

_ids = itertools.count()


@dataclass
class ServerState:
    """Everything the route handlers share.

    Attributes:
        engine: the AsyncEngine every request goes through.
        model_name: the served model name (``/v1/models`` and the ``model`` field).
        metrics: the Prometheus registry wrapper.
        max_n: largest ``n`` accepted.
        compile_pool: one worker thread that compiles grammars off the event loop.
    """

    engine: Any
    model_name: str
    metrics: ServerMetrics
    max_n: int = 16
    compile_pool: concurrent.futures.ThreadPoolExecutor = dataclasses.field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(1, "structgen-compile")
    )

    @property
    def vocab(self) -> Any:
        """The engine's token vocabulary (for log-prob token texts)."""
        return self.engine.engine.vocab

    def new_id(self, prefix: str) -> str:
        """A fresh response id ``{prefix}-{16 hex digits}-{counter}``, unique in the process."""
        return f"{prefix}-{uuid.uuid4().hex[:16]}-{next(_ids)}"


@dataclass
class Branch:
    """One engine request of an API request: choice ``index`` of prompt ``prompt_index``."""

    index: int
    prompt_index: int
    ids: list[int]
    params: SamplingParams


# ------------------------------------------------------------------ request side
def request_constraint(req: Any, has_tools: bool = False) -> tuple[Any, str]:
    """The constraint asked for by ``response_format`` (``json_object``, ``json_schema``,
    ``grammar``), ``regex`` / ``guided_regex``, ``choice`` / ``guided_choice``,
    ``guided_json`` (whitespace from ``guided_whitespace_pattern``), ``grammar`` /
    ``guided_grammar``, SGLang's ``ebnf`` and ``structural_tag``, or vLLM's
    ``structured_outputs`` object, with ``constraint_trigger`` applied.

    Args:
        req: the parsed request.
        has_tools: the request has active tools (their grammar takes the trigger then).

    Returns:
        ``(term or None, the request field it came from)``.

    Raises:
        APIError: more than one of them, a malformed ``response_format``,
            ``guided_json`` or ``structured_outputs`` (not exactly one kind), an unusable
            whitespace pattern, or ``constraint_trigger`` without a constraint or tools.
    """
    from structgen.fsm.spec import Choice, Grammar, JsonSchema, Regex

    trigger = req.constraint_trigger
    found: list[tuple[str, Any]] = []
    rf = req.response_format
    if rf is not None and rf.type == "json_schema":
        spec = rf.json_schema
        if spec is None or spec.schema_ is None:
            raise APIError(
                "response_format json_schema needs json_schema.schema",
                param="response_format.json_schema",
            )
        found.append(
            (
                "response_format",
                JsonSchema(spec.schema_, allow_extra_properties=not spec.strict, trigger=trigger),
            )
        )
    elif rf is not None and rf.type == "structural_tag":
        found.append(("response_format", _structural_tag(rf, trigger)))
    elif rf is not None and rf.type == "json_object":
        found.append(
            (
                "response_format",
                JsonSchema({"type": "object"}, allow_extra_properties=True, trigger=trigger),
            )
        )
    elif rf is not None and rf.type == "grammar":
        if rf.grammar is None:
            raise APIError(
                "response_format grammar needs response_format.grammar (the grammar text)",
                param="response_format.grammar",
            )
        found.append(
            ("response_format", _auto_grammar(rf.grammar, "response_format.grammar", trigger))
        )
    if req.guided_json is not None:
        schema = _json_value(req.guided_json, "guided_json")
        whitespace = _whitespace(req.guided_whitespace_pattern, "guided_whitespace_pattern")
        found.append(
            (
                "guided_json",
                JsonSchema(
                    schema, whitespace=whitespace, allow_extra_properties=True, trigger=trigger
                ),
            )
        )
    for name in ("regex", "guided_regex"):
        if getattr(req, name) is not None:
            found.append((name, Regex(getattr(req, name), trigger=trigger)))
    for name in ("choice", "guided_choice"):
        if getattr(req, name) is not None:
            found.append((name, Choice(getattr(req, name), trigger=trigger)))
    for name in ("grammar", "guided_grammar"):
        if getattr(req, name) is not None:
            found.append((name, _auto_grammar(getattr(req, name), name, trigger)))
    if req.ebnf is not None:
        found.append(("ebnf", Grammar(req.ebnf, syntax="ebnf", trigger=trigger)))
    if req.structural_tag is not None:
        found.append(("structural_tag", _tag(req.structural_tag, "structural_tag", trigger)))
    if req.structured_outputs is not None:
        found.append(("structured_outputs", _structured_outputs(req.structured_outputs, trigger)))
    if len(found) > 1:
        names = ", ".join(n for n, _ in found)
        raise APIError(f"give at most one constraint; got {names}", param=found[1][0])
    if req.copy_from is not None:
        return _copied(req, found[0] if found else None), found[0][0] if found else "copy_from"
    if not found:
        if trigger is not None and not has_tools:
            raise APIError(
                "constraint_trigger needs a constraint (response_format, regex, choice, "
                "grammar, ebnf, structural_tag, structured_outputs, a guided_* field or "
                "tools)",
                param="constraint_trigger",
            )
        return None, "response_format"
    return found[0][1], found[0][0]


def _auto_grammar(text: str, param: str, trigger: str | None) -> Any:
    """``Grammar(text)`` of a request field whose grammar's syntax its rules tell
    (``grammar``, ``guided_grammar``, ``response_format.grammar``,
    ``structured_outputs.grammar``): GBNF for ``name ::=`` rules, Lark for ``name:`` rules
    (``fsm.grammar.detect_syntax``); only the ``ebnf`` field names a syntax (EBNF).

    Raises:
        APIError: 400 on ``param`` when the text has both kinds of rule or neither; the
            message names the syntaxes the field is read as and the ``ebnf`` field, as a
            request can send them (a request has no ``syntax`` field).
    """
    from structgen.fsm.grammar import undecided_syntax
    from structgen.fsm.spec import Grammar

    reason = undecided_syntax(text)
    if reason is not None:
        raise APIError(
            f"{param}: {reason}; the server reads {param} as GBNF ('name ::= ...' rules, "
            "start rule 'root') or Lark ('name: ...' rules, start rule 'start'), told by "
            "which kind of rule it has; send an EBNF grammar in the 'ebnf' field",
            param=param,
        )
    return Grammar(text, trigger=trigger)


def _structural_tag(rf: Any, trigger: str | None) -> Any:
    """The ``StructuralTag`` of a ``response_format`` of type ``structural_tag``.

    Raises:
        APIError: as ``_tag``.
    """
    return _tag(rf.model_dump(by_alias=True, exclude_none=True), "response_format", trigger)


def _json_value(value: Any, param: str) -> Any:
    """``value``, or the JSON it holds when it is a string.

    Raises:
        APIError: a string that is not JSON.
    """
    if not isinstance(value, str):
        return value
    try:
        return loads(value)
    except (json.JSONDecodeError, GrammarTooComplexError) as exc:
        raise APIError(f"{param} is not valid JSON: {exc}", param=param) from None


def _whitespace(pattern: str | None, param: str, disable_any: bool = False) -> str | int:
    """The ``JsonSchema.whitespace`` of a vLLM whitespace regex.

    structgen's JSON whitespace is a run of space, tab, CR and LF of at most n
    characters (``"compact"``: none) around structural characters; the result is the
    largest n (up to ``json_schema.FLEXIBLE_WS_MAX``) for which ``pattern`` accepts every
    such run, so every document generated spells its whitespace as ``pattern`` allows.
    None (no pattern) and ``disable_any`` give ``"compact"``.

    Raises:
        APIError: ``pattern`` is not a usable regex or does not accept the empty string.
    """
    from structgen.fsm.json_schema import FLEXIBLE_WS_MAX
    from structgen.fsm.regex.dfa import regex_to_dfa

    if pattern is None or disable_any:
        return "compact"
    try:
        dfa = regex_to_dfa(pattern)
    except (RegexError, GrammarTooComplexError) as exc:
        raise APIError(f"{param}: {exc}", param=param, code="invalid_regex") from None
    if not dfa.is_accepting(dfa.initial):
        raise APIError(
            f"{param} {pattern!r} must accept the empty string (JSON whitespace is optional)",
            param=param,
        )
    states, longest = {dfa.initial}, 0
    while longest < FLEXIBLE_WS_MAX:  # the states after every run one character longer
        nxt = {dfa.step(q, b) for q in states for b in b" \t\r\n"}
        if -1 in nxt or not all(dfa.is_accepting(q) for q in nxt):
            break
        states, longest = nxt, longest + 1
    return longest or "compact"


def _tag(value: Any, param: str, trigger: str | None) -> Any:
    """The ``StructuralTag`` of a structural tag object (or its JSON text).

    Raises:
        APIError: a malformed tag (the message names the JSON pointer), a
            ``constraint_trigger`` beside it (a tag has its own triggers), or a grammar in
            it whose syntax its rules do not tell (:func:`_check_tag_grammars`).
    """
    from structgen.errors import InvalidGrammarError
    from structgen.fsm.spec import StructuralTag

    if trigger is not None:
        raise APIError(
            "constraint_trigger does not apply to a structural tag (it has its own triggers)",
            param="constraint_trigger",
        )
    obj = _json_value(value, param)
    if not isinstance(obj, dict):
        raise APIError(f"{param} must be a JSON object", param=param)
    try:
        tag = StructuralTag.from_dict(obj)
    except InvalidGrammarError as exc:
        raise APIError(f"{param}: {exc}", param=param) from None
    _check_tag_grammars(tag.format, param)
    return tag


def _check_tag_grammars(node: Any, param: str) -> None:
    """Each grammar in a structural tag's tree has rules that tell its syntax (a tag has
    no field naming one).

    Raises:
        APIError: 400 on the grammar's own request field (``param`` and the node's JSON
            pointer, dotted: ``response_format.format.tags[0].content.grammar``) when its
            text has both kinds of rule or neither; the message names that field and the
            syntaxes it is read as, not the Python keyword ``syntax=``.
    """
    from structgen.fsm.grammar import undecided_syntax
    from structgen.fsm.tags.format import GrammarContent, Tag

    stack = [node]
    while stack:  # depth first, in document order: the first such grammar is named
        n = stack.pop()
        children = [n.content] if isinstance(n, Tag) else []
        children += [*getattr(n, "tags", ()), *getattr(n, "elements", ())]
        stack.extend(reversed(children))
        if not isinstance(n, GrammarContent) or n.syntax != "auto":
            continue
        reason = undecided_syntax(n.text)
        if reason is not None:
            field = param + "".join(
                f"[{part}]" if part.isdigit() else f".{part}" for part in n.where.split("/")[1:]
            )
            raise APIError(
                f"{field}: {reason}; the server reads a structural tag's grammar as GBNF "
                "('name ::= ...' rules, start rule 'root') or Lark ('name: ...' rules, start "
                f"rule 'start'), told by which kind of rule it has: write {field} with rules "
                "of one kind",
                param=field,
            )


_STRUCTURED_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")


def _structured_outputs(so: Any, trigger: str | None) -> Any:
    """The constraint of vLLM's ``structured_outputs`` object.

    Raises:
        APIError: not exactly one of ``_STRUCTURED_KINDS``, or what the chosen one raises.
    """
    from structgen.fsm.spec import Choice, JsonSchema, Regex

    values = {
        "json": so.json_,
        "regex": so.regex,
        "choice": so.choice,
        "grammar": so.grammar,
        "json_object": so.json_object or None,
        "structural_tag": so.structural_tag,
    }
    given = [k for k in _STRUCTURED_KINDS if values[k] is not None]
    if len(given) != 1:
        raise APIError(
            "structured_outputs needs exactly one of "
            f"{', '.join(_STRUCTURED_KINDS)}; got {', '.join(given) or 'none'}",
            param="structured_outputs",
        )
    kind = given[0]
    param = f"structured_outputs.{kind}"
    if kind in ("json", "json_object"):
        schema = {"type": "object"} if kind == "json_object" else _json_value(so.json_, param)
        whitespace = _whitespace(
            so.whitespace_pattern,
            "structured_outputs.whitespace_pattern",
            so.disable_any_whitespace,
        )
        return JsonSchema(
            schema,
            whitespace=whitespace,
            allow_extra_properties=not so.disable_additional_properties,
            trigger=trigger,
        )
    if kind == "regex":
        return Regex(so.regex, trigger=trigger)
    if kind == "choice":
        return Choice(so.choice, trigger=trigger)
    if kind == "grammar":
        return _auto_grammar(so.grammar, param, trigger)
    return _tag(so.structural_tag, param, trigger)


def _copied(req: Any, found: tuple[str, Any] | None) -> Any:
    """The request's constraint (or free text) copied from ``copy_from``
    (``structgen.fsm.copy.with_copy``).

    A JSON Schema's objects then carry only their listed properties (unless the schema
    says otherwise with ``additionalProperties``), as ``extract`` generates the same
    schema: the value of a key the schema does not list is not copied, so an open object
    would let the model write values the text does not hold.

    Raises:
        APIError: ``copy_from`` is malformed, has no span, or is given with ``choice``,
            a grammar or ``json_object`` (which lists no property to copy into).
    """
    from structgen.errors import RequestError
    from structgen.fsm.copy import as_sources, with_copy
    from structgen.fsm.spec import JsonSchema

    spec = found[1] if found else None
    if isinstance(spec, JsonSchema):
        if _asks_json_object(req):
            raise APIError(
                "copy_from needs a JSON Schema with properties to copy into "
                "(response_format json_schema, guided_json), not json_object",
                param="copy_from",
            )
        spec = dataclasses.replace(spec, allow_extra_properties=False)
    try:
        spec = with_copy(spec, as_sources(req.copy_from))
    except RequestError as exc:
        raise APIError(str(exc), param="copy_from") from None
    if found is None and req.constraint_trigger is not None:
        spec = dataclasses.replace(spec, trigger=req.constraint_trigger)
    return spec


def _asks_json_object(req: Any) -> bool:
    """True when the request's JSON constraint is ``json_object`` (``response_format`` or
    ``structured_outputs``): any object, no schema.
    """
    rf, so = req.response_format, req.structured_outputs
    return (rf is not None and rf.type == "json_object") or bool(so is not None and so.json_object)


async def compile_constraint(state: ServerState, term: Any, param: str) -> Any:
    """Compile ``term`` for the model's vocabulary on the compile thread. What the
    compiler ignored (an unknown keyword such as a misspelt ``maxLen``, with its JSON
    pointer and nearest known keyword) is logged on the ``structgen.server`` logger, one
    line per request, as ignored request fields are.

    Raises:
        APIError: 400 with the compiler's message (keyword and JSON pointer for schemas).
    """
    if term is None:
        return None
    loop = asyncio.get_running_loop()
    try:
        grammar = await loop.run_in_executor(state.compile_pool, term.compile, state.vocab)
        if grammar.reported_warnings:
            log.warning("%s: %s", param, "; ".join(grammar.reported_warnings))
        return grammar
    except SchemaError as exc:
        raise APIError(f"{param}: {exc}", param=param, code="invalid_schema") from None
    except RegexError as exc:
        raise APIError(f"{param}: {exc}", param=param, code="invalid_regex") from None
    except GrammarTooComplexError as exc:
        raise APIError(f"{param}: {exc}", param=param, code="grammar_too_complex") from None
    except (StructgenError, ValueError, TypeError) as exc:
        raise APIError(f"{param}: {exc}", param=param) from None


def check_prompt(state: ServerState, ids: list[int], param: str) -> int:
    """Check that ``ids`` fit the context; returns the room left for output tokens.

    Raises:
        APIError: 400 ``context_length_exceeded``, or token ids outside the vocabulary.
    """
    if not ids:
        raise APIError("the prompt is empty", param=param)
    vocab_size = state.engine.engine.vocab_size
    if any(t < 0 or t >= vocab_size for t in ids):
        raise APIError(f"prompt token ids must be in [0, {vocab_size})", param=param)
    limit = state.engine.engine.max_request_tokens()
    if len(ids) >= limit:
        raise APIError(
            f"the prompt has {len(ids)} tokens; this model's context allows at most {limit - 1}",
            param=param,
            code="context_length_exceeded",
        )
    return limit - len(ids)


def check_token_ids(state: ServerState, req: Any) -> None:
    """Check the token ids a request names outside its prompt (``logit_bias`` keys,
    ``stop_token_ids``) against the vocabulary, as vLLM does: an id the model has no row
    for would be ignored silently by the sampler.

    Raises:
        APIError: 400 naming the field and the first id outside ``[0, vocab_size)``.
    """
    vocab_size = state.engine.engine.vocab_size
    fields = (("logit_bias", req.logit_bias or {}), ("stop_token_ids", req.stop_token_ids or []))
    for param, ids in fields:
        for t in ids:
            try:
                ok = 0 <= int(t) < vocab_size
            except ValueError:
                continue  # a key that is not an integer: SamplingParams names it
            if not ok:
                raise APIError(
                    f"{param}: token id {t} is not in this model's vocabulary "
                    f"(ids are in [0, {vocab_size}))",
                    param=param,
                )


def sampling_params(
    req: Any,
    max_tokens: int | None,
    room: int,
    logprobs: int | None,
    prompt_logprobs: int | None = None,
) -> SamplingParams:
    """SamplingParams of one request (``max_tokens`` clamped to the room left in context).

    Raises:
        APIError: a value SamplingParams rejects (``param`` names the field), or
            ``min_tokens`` above the capped ``max_tokens``.
    """
    limit = min(max_tokens or room, room)
    if req.min_tokens > limit:
        raise APIError(
            f"min_tokens={req.min_tokens} is more than the {limit} tokens this "
            f"request may generate (max_tokens, capped to the {room} tokens left "
            "in the context)",
            param="min_tokens",
        )
    try:
        return SamplingParams(
            max_tokens=limit,
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            top_k=req.top_k,
            min_p=req.min_p,
            seed=req.seed,
            stop=req.stop or None,
            stop_token_ids=req.stop_token_ids,
            ignore_eos=req.ignore_eos,
            min_tokens=req.min_tokens,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
            presence_penalty=req.presence_penalty,
            frequency_penalty=req.frequency_penalty,
            repetition_penalty=req.repetition_penalty,
            logit_bias=req.logit_bias,
        )
    except ConfigError as exc:
        m = re.search(r"SamplingParams\.(\w+)", str(exc))
        raise APIError(str(exc), param=m.group(1) if m else None) from None


def branches_for(
    prompts: list[list[int]], params: SamplingParams, n: int, prompt_logprobs: int | None = None
) -> list[Branch]:
    """``n`` branches per prompt; seeded branches use ``seed + i``; prompt log-probs are
    computed by branch 0 only (the others reuse its cached prompt KV).
    """
    out = []
    for p, ids in enumerate(prompts):
        for i in range(n):
            bp = params
            if i > 0:
                bp = dataclasses.replace(
                    params,
                    seed=None if params.seed is None else params.seed + i,
                    prompt_logprobs=None,
                )
            elif prompt_logprobs is not None:
                bp = dataclasses.replace(params, prompt_logprobs=prompt_logprobs)
            out.append(Branch(p * n + i, p, ids, bp))
    return out


# ------------------------------------------------------------------- engine side
async def run_branches(
    state: ServerState, branches: list[Branch], grammar: Any, request_id: str
) -> AsyncIterator[tuple[Branch, RequestOutput]]:
    """Run every branch concurrently; yield ``(branch, snapshot)`` as they stream.

    Closing this iterator (or cancelling its consumer) cancels the branch tasks, which
    aborts their engine requests.

    Raises:
        APIError: 400 when the engine rejects a request before it starts.
    """
    queue: asyncio.Queue = asyncio.Queue()

    async def one(b: Branch) -> None:
        last = None
        try:
            async for out in state.engine.generate(
                b.ids, b.params, grammar, f"{request_id}-{b.index}"
            ):
                last = out
                queue.put_nowait((b, out))
            if last is not None:
                state.metrics.observe(last)
        except asyncio.CancelledError:
            state.metrics.finished.labels("abort").inc()
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the consumer
            queue.put_nowait((b, exc))

    tasks = [asyncio.create_task(one(b)) for b in branches]
    remaining = len(branches)
    try:
        while remaining:
            b, item = await queue.get()
            if isinstance(item, Exception):
                if isinstance(item, ValueError):
                    raise APIError(str(item)) from item
                raise item
            yield b, item
            if item.finish_reason is not None:
                remaining -= 1
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()


async def final_outputs(
    state: ServerState, branches: list[Branch], grammar: Any, request_id: str
) -> dict[int, RequestOutput]:
    """The last snapshot of every branch, by choice index."""
    finals: dict[int, RequestOutput] = {}
    async for b, out in run_branches(state, branches, grammar, request_id):
        if out.finish_reason is not None:
            finals[b.index] = out
    return finals


def raise_if_failed(finals: dict[int, RequestOutput]) -> None:
    """Raises: APIError (500) when an engine request finished with ``"error"``."""
    for out in finals.values():
        if out.finish_reason == "error":
            raise APIError(f"generation failed: {out.error}", status=500, type="server_error")


def usage(branches: list[Branch], finals: dict[int, RequestOutput]) -> dict:
    """OpenAI ``usage``: prompts counted once each; cached tokens per prompt are the
    fewest any of its branches got (the cross-request reuse).
    """
    prompts: dict[int, list[RequestOutput]] = {}
    lens: dict[int, int] = {}
    for b in branches:
        lens[b.prompt_index] = len(b.ids)
        if b.index in finals:
            prompts.setdefault(b.prompt_index, []).append(finals[b.index])
    prompt_tokens = sum(lens.values())
    completion = sum(o.metrics.num_generated_tokens for o in finals.values())
    cached = sum(min(o.metrics.cached_tokens for o in outs) for outs in prompts.values())
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def finish_reason(out: RequestOutput, is_tool_call: bool = False) -> str:
    """The OpenAI finish reason of an engine output (``is_tool_call``: a complete call,
    which may also end exactly at ``max_tokens``).
    """
    if out.finish_reason in ("stop", "length") and is_tool_call:
        return "tool_calls"
    return out.finish_reason or "stop"


# -------------------------------------------------------------------- logprobs
def _token(vocab: Any, tid: int) -> tuple[str, list[int]]:
    raw = vocab.token_bytes[tid] if 0 <= tid < len(vocab.token_bytes) else b""
    return raw.decode("utf-8", errors="replace"), list(raw)


def _finite(lp: float) -> float:
    return lp if lp != float("-inf") else -9999.0


def chat_logprobs(vocab: Any, entries: list[dict[int, float]], top: int) -> list[dict]:
    """Chat ``logprobs.content`` entries for generated tokens."""
    content = []
    for e in entries:
        items = list(e.items())
        tid, lp = items[0]
        text, raw = _token(vocab, tid)
        tops = []
        for t, v in sorted(items, key=lambda kv: -kv[1])[:top]:
            s, b = _token(vocab, t)
            tops.append({"token": s, "logprob": _finite(v), "bytes": b})
        content.append({"token": text, "logprob": _finite(lp), "bytes": raw, "top_logprobs": tops})
    return content


def completion_logprobs(
    vocab: Any, ids: list[int], entries: list[dict[int, float] | None], top: int, offset: int = 0
) -> dict:
    """Legacy completions ``logprobs``: tokens, token_logprobs, top_logprobs, text_offset.

    ``entries[i]`` belongs to ``ids[i]`` (None: no log-prob, e.g. the first prompt token).
    """
    tokens, token_lps, top_lps, offsets = [], [], [], []
    pos = offset
    for tid, e in zip(ids, entries):
        text, _ = _token(vocab, tid)
        tokens.append(text)
        offsets.append(pos)
        pos += len(text)
        if e is None:
            token_lps.append(None)
            top_lps.append(None)
            continue
        token_lps.append(_finite(e.get(tid, next(iter(e.values())))))
        ranked = sorted(e.items(), key=lambda kv: -kv[1])[:top]
        top_lps.append({_token(vocab, t)[0]: _finite(v) for t, v in ranked})
    return {
        "tokens": tokens,
        "token_logprobs": token_lps,
        "top_logprobs": top_lps,
        "text_offset": offsets,
    }


def now() -> int:
    return int(time.time())
