"""The DSL's runner: interprets expression nodes on a program state against its backend.

:func:`interpret` turns one expression into a generator that yields lists of
:class:`Call` objects (one generation call per prompt) and receives their outputs; it writes
the results into the state (text, chat turns, captures, select scores). :func:`drive`
merges the pending calls of several interpreters into one ``backend.generate`` batch per
round, so a fork's branches run in lock-step; :func:`run_one` drives a single state.

The runner reads the IR (``expr``, ``template``) and writes a state through the
``ProgramState`` methods named in its docstring; it imports neither ``state`` nor a
backend module (``ProgramState.__iadd__`` calls down into :func:`run_one`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Generator

from structgen.errors import ExtractionError, LengthLimit, RequestError
from structgen.lang.expr import (
    Concat,
    Expr,
    Gen,
    Role,
    Select,
    TemplateFill,
    Text,
    as_expr,
)
from structgen.lang.healing import Healing, heal
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "Call",
    "ForkedStates",
    "common_prefix",
    "cut_by",
    "drive",
    "interpret",
    "option_score",
    "run_one",
]

_SELECT_PARAMS = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)


@dataclass
class Call:
    """One generation call: what a backend runs for one prompt."""

    prompt_ids: list[int]
    params: SamplingParams
    constraint: Any = None
    on_delta: Callable[[str], None] | None = None


Steps = Generator[list[Call], list[RequestOutput], None]


def drive(backend: Any, steps: list[Any]) -> None:
    """Run interpreters in lock-step: each round merges their calls into one backend call."""
    pending: list[tuple[Any, list[Any]]] = []
    for s in steps:
        try:
            pending.append((s, next(s)))
        except StopIteration:
            pass
    while pending:
        calls = [c for _, cs in pending for c in cs]
        outs = backend.generate(
            [c.prompt_ids for c in calls],
            [c.params for c in calls],
            [c.constraint for c in calls],
            _merged_deltas([c.on_delta for c in calls]),
        )
        nxt, i = [], 0
        for s, cs in pending:
            mine, i = outs[i : i + len(cs)], i + len(cs)
            try:
                nxt.append((s, s.send(mine)))
            except StopIteration:
                pass
        pending = nxt


def _merged_deltas(
    deltas: list[Callable[[str], None] | None],
) -> Callable[[int, str], None] | None:
    """One ``on_delta(call index, text)`` dispatching to each call's own; None if none."""
    if not any(deltas):
        return None

    def on_delta(i: int, text: str) -> None:
        if deltas[i] is not None:
            deltas[i](text)

    return on_delta


def run_one(state: Any, expr: Expr) -> None:
    """Interpret ``expr`` on one state."""
    drive(state.backend, [interpret(state, expr)])


class ForkedStates(list):
    """The branches of :meth:`ProgramState.fork`; ``forks += expr`` runs them together.

    ``forks += expr`` appends the same expression to every branch; a seeded gen in it
    runs with seed ``seed + i`` in branch ``i`` (as ``SamplingParams.n`` does), so the
    branches differ yet are reproducible. ``forks += [e0, e1, ...]`` appends one
    expression per branch, seeds as written. Either way the branches' generation calls
    run as one batch per round (prefix pages shared by the radix cache).
    """

    def __iadd__(self, value: Any) -> ForkedStates:  # type: ignore[override]
        broadcast = not isinstance(value, (list, tuple))
        if not broadcast:
            if len(value) != len(self):
                raise RequestError(f"{len(value)} expressions for {len(self)} branches")
            exprs = [as_expr(v) for v in value]
        else:
            exprs = [as_expr(value)] * len(self)
        if not self:
            return self
        saved = [s._seed_offset for s in self]
        if broadcast:
            for i, s in enumerate(self):
                s._seed_offset = saved[i] + i
        try:
            drive(self[0].backend, [interpret(s, e) for s, e in zip(self, exprs)])
        finally:
            for s, off in zip(self, saved):
                s._seed_offset = off
        return self

    def __getitem__(self, i):
        return list.__getitem__(self, i)


# ------------------------------------------------------------------ interpreter
def interpret(state: Any, expr: Expr) -> Steps:
    """Interpret ``expr`` on ``state``: yields lists of calls, receives their outputs.

    Args:
        state: the ``ProgramState`` written to.
        expr: the node to run (``as_expr`` admits only the nodes handled here).

    Returns:
        A generator: each ``yield`` is a list of :class:`Call`; ``send`` it one
        ``RequestOutput`` per call, in order (what :func:`drive` does).

    Raises:
        RequestError: a gen/select cannot be made here or its request failed.
        ExtractionError: a ``json_schema`` gen's text is not the JSON asked for.
    """
    if isinstance(expr, Text):
        state._append(expr.text)
    elif isinstance(expr, Concat):
        for part in expr.parts:
            yield from interpret(state, part)
    elif isinstance(expr, Role):
        yield from _role(state, expr)
    elif isinstance(expr, Gen):
        yield from _gen(state, expr)
    elif isinstance(expr, Select):
        yield from _select(state, expr)
    elif isinstance(expr, TemplateFill):
        yield from _template(state, expr)
    else:  # pragma: no cover - as_expr admits only the nodes above
        raise RequestError(f"cannot run {type(expr).__name__}")


def _role(state: Any, expr: Role) -> Steps:
    state._open_turn(expr.role)
    yield from interpret(state, expr.body)
    state._close_turn()


def _template(state: Any, t: TemplateFill) -> Steps:
    tpl = t.template
    if tpl.prefix:
        state._append(tpl.prefix)
    params = SamplingParams(max_tokens=t.max_tokens, temperature=t.temperature)
    copied = ", ".join(repr(name) for name in tpl.copied)
    what = f"template (copied holes {copied})" if copied else "template"
    text, out, limit = yield from _generate(state, tpl.constraint, params, t.token_healing, what)
    try:
        res = tpl.parse(text)
    except RequestError as exc:
        if limit is None:
            raise
        raise RequestError(
            f"the template's output was cut by {limit} before it matched the template; "
            f"{_remedy(limit, 'max_tokens')} (output: {text!r})"
        ) from exc
    res.output = out
    if t.result_name is not None:
        state._capture(t.result_name, res, out, limit)
    else:
        for name, value in res.items():
            state._capture(name, value, out, limit)


def _generate(
    state: Any, constraint: Any, params: SamplingParams, token_healing: bool, what: str
) -> Steps:
    """One gen call on the prompt so far (healed); appends and returns ``(text, output,
    cut_by)``, ``cut_by`` the limit that cut the output (:func:`cut_by`) or None.
    """
    ids = state._prompt_ids()
    healing = heal(state.backend, ids) if token_healing else Healing(ids)
    sent = params
    if healing.removed:
        constraint = healing.constraint(constraint)
        sent = dataclasses.replace(params, max_tokens=params.max_tokens + 1)
    try:
        state.backend.check_constraint(constraint)
    except RequestError as exc:
        raise RequestError(f"{what}: {exc}") from exc
    on_delta = _stream_delta(state, len(healing.removed)) if state._sink else None
    (out,) = yield [Call(healing.prompt_ids, sent, constraint, on_delta)]
    if out.finish_reason == "error":
        raise RequestError(f"{what} failed: {out.error}")
    text = out.text[len(healing.removed) :] if out.text.startswith(healing.removed) else out.text
    state._append(text, streamed=on_delta is not None)
    limit = cut_by(out, sent.max_tokens, params.max_tokens, state.backend.max_request_tokens())
    return text, out, limit


def cut_by(
    out: RequestOutput, sent_max_tokens: int, max_tokens: int, context_tokens: int | None
) -> LengthLimit | None:
    """The limit that cut a gen's output (``errors.length_limit``'s rule), or None when
    it did not finish with ``finish_reason="length"``.

    Args:
        out: the output; its length is ``len(out.token_ids)``, or, where the backend sends
            no token ids (``OpenAIBackend``), ``out.metrics.num_generated_tokens``.
        sent_max_tokens: the ``max_tokens`` the call was sent with (the gen's own, plus
            one when token healing removed a prompt token the output generates again).
        max_tokens: the gen's ``max_tokens``, the value a ``max_tokens`` cut names.
        context_tokens: most tokens (prompt + output) one request can hold on the
            backend (``backend.max_request_tokens()``); None where the backend does not
            say: the prompt's and output's tokens together, where the context ended.

    Returns:
        ``LengthLimit("max_tokens", max_tokens)`` when the output has ``sent_max_tokens``
        tokens (or its length is unknown), else ``LengthLimit("context", ...)``; None for
        an output that was not cut.

    Raises:
        never.
    """
    if out.finish_reason != "length":
        return None
    n = len(out.token_ids) or out.metrics.num_generated_tokens
    if n == 0 or n >= sent_max_tokens:
        return LengthLimit("max_tokens", max_tokens)
    if context_tokens is None:
        context_tokens = out.metrics.num_prompt_tokens + n
    return LengthLimit("context", context_tokens)


def _remedy(limit: LengthLimit, budget: str = "the gen's max_tokens") -> str:
    """What to change for an output ``limit`` cut, in the DSL's terms (``budget``: the
    ``max_tokens`` to raise).
    """
    return limit.remedy(f"raise {budget}", "shorten the prompt, or raise the model's max_model_len")


def _gen(state: Any, g: Gen) -> Steps:
    params = g.params
    if params.seed is not None and state._seed_offset:
        params = dataclasses.replace(params, seed=params.seed + state._seed_offset)
    constraint, fmt = g.constraint, None
    if g.tools is not None:
        from structgen.tools import detect_format, tool_call_constraint

        tokenizer = getattr(state.backend, "tokenizer", None)
        fmt = detect_format(getattr(tokenizer, "chat_template", None))
        tools, choice, parallel = g.tools
        constraint = tool_call_constraint(fmt, list(tools), choice, parallel)
    text, out, limit = yield from _generate(
        state, constraint, params, g.token_healing, f"gen {g.name!r}"
    )
    value: Any = text
    if g.schema is not None:
        value = _parse_json(text, g.schema, out.finish_reason, limit)
    elif fmt is not None:
        value = _parse_calls(text, fmt, g.tools[1], out.finish_reason, limit)
    state._capture(g.name, value, out, limit)


def _parse_calls(
    text: str, fmt: Any, choice: Any, finish_reason: str | None, limit: LengthLimit | None
) -> list[dict]:
    """The calls of a ``gen(tools=...)``: ``[{"name", "arguments"}]``.

    Raises:
        ExtractionError: a call's arguments are not JSON: ``limit`` (``max_tokens`` or the
            end of the context, set as its ``cut_by``) cut the call.
    """
    from structgen.tools import ToolCallParser, collect

    parser = ToolCallParser(fmt, "auto" if choice == "auto" else "call")
    _, calls = collect(parser.feed(text) + parser.finish())
    out = []
    for c in calls or []:
        try:
            args = json.loads(c["function"]["arguments"])
        except json.JSONDecodeError:
            why = (
                f"was cut by {limit} inside a call; {_remedy(limit)}"
                if limit is not None
                else "ended inside a call (its arguments are not JSON)"
            )
            raise ExtractionError(
                f"gen(tools=...) {why}",
                raw_text=text,
                finish_reason=finish_reason,
                cut_by=limit,
            ) from None
        out.append({"name": c["function"]["name"], "arguments": args})
    return out


def _stream_delta(state: Any, skip: int) -> Callable[[str], None]:
    left = [skip]  # healed text the output repeats first, not streamed again

    def on_delta(text: str) -> None:
        cut = min(left[0], len(text))
        left[0] -= cut
        if text[cut:] and state._sink is not None:
            state._sink(text[cut:])

    return on_delta


def _select(state: Any, sel: Select) -> Steps:
    base = state._prompt_ids()
    fulls = [state._prompt_ids(opt) for opt in sel.options]
    # log-probs only from each option's first token on: the shared prompt's KV is
    # served by the prefix cache (the first request computes it, the rest reuse it)
    params = [
        dataclasses.replace(_SELECT_PARAMS, prompt_logprobs_start=max(1, common_prefix(base, f)))
        for f in fulls
    ]
    outs = yield [Call(f, p) for f, p in zip(fulls, params)]
    scores = [option_score(base, f, o) for f, o in zip(fulls, outs)]
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    choice = sel.options[best]
    state._append(choice)
    state._capture(sel.name, choice)
    if sel.name is not None:
        state._scores[sel.name] = dict(zip(sel.options, scores))


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common leading run of two token id lists."""
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def option_score(base: list[int], full: list[int], out: RequestOutput) -> float:
    """Mean log-probability of ``full``'s tokens after its common prefix with ``base``.

    The option's tokens are those of ``prompt + option`` past the longest common token
    prefix with the prompt alone (so a token merged across the boundary counts).

    Raises:
        RequestError: the request failed (no prompt log-probabilities).
    """
    if out.finish_reason == "error" or out.prompt_logprobs is None:
        raise RequestError(f"select could not score an option: {out.error}")
    positions = range(max(common_prefix(base, full), 1), len(full))
    lps = [out.prompt_logprobs[j][full[j]] for j in positions]
    return sum(lps) / max(1, len(lps))


def _parse_json(
    text: str, schema: Any, finish_reason: str | None, limit: LengthLimit | None
) -> Any:
    """The JSON value of a ``gen(json_schema=...)``; cut by ``limit`` (``max_tokens`` or the
    end of the context), it is returned when the grammar's token budget had closed the JSON
    (``state.truncated(name)`` and ``state.cut_by(name)`` tell), and raises ExtractionError
    (``cut_by`` = ``limit``) when the JSON is not complete and schema-valid.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if limit is not None:
            raise ExtractionError(
                f"gen(json_schema=...) hit {limit} before the JSON was complete; {_remedy(limit)}",
                raw_text=text,
                finish_reason=finish_reason,
                cut_by=limit,
            ) from None
        raise ExtractionError(f"generated text is not JSON: {exc}", text, finish_reason) from exc
    if limit is not None and not (isinstance(schema, type) and hasattr(schema, "model_validate")):
        _check_schema_valid(value, schema, text, finish_reason, limit)
    if isinstance(schema, type) and hasattr(schema, "model_validate"):
        return schema.model_validate(value)
    return value


def _check_schema_valid(
    value: Any, schema: Any, text: str, finish_reason: str | None, limit: LengthLimit
) -> None:
    """Raise ExtractionError (``cut_by`` = ``limit``, the limit that cut the output) unless
    ``value`` is valid against the JSON Schema ``schema``.
    """
    import jsonschema

    from structgen.fsm.spec import schema_for

    sd = schema_for(schema)
    error = next(jsonschema.validators.validator_for(sd)(sd).iter_errors(value), None)
    if error is not None:
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        raise ExtractionError(
            f"gen(json_schema=...) was cut by {limit} and its JSON is not schema-valid "
            f"at {where}: {error.message}",
            raw_text=text,
            finish_reason=finish_reason,
            cut_by=limit,
        )
