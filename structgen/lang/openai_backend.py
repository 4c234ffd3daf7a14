"""Run programs on a remote OpenAI-compatible server (structgen's own, or any such server).

::

    backend = structgen.OpenAIBackend("http://127.0.0.1:8000/v1", model="smol")
    state = my_program.run(question="...", backend=backend)

Prompts are built exactly as for a local engine (text, chat template, token healing)
with the served model's tokenizer, and sent to ``POST /v1/completions`` as token ids,
so a greedy program gives the same text on both backends. Constraints travel in the
request body as their spec, under the names structgen's server accepts (vLLM's as well):
``response_format`` ``{"type": "json_schema", ...}`` for ``JsonSchema``, ``regex`` for
``Regex`` (and for a token-healed ``Concatenation``, as its regex text), ``choice`` for
``Choice``, ``regex`` for a ``select`` over literals and regex options (their
alternation; a grammar option is refused) (a term's ``trigger`` as
``constraint_trigger``); a spec with no wire form is refused with a ``RequestError``.
``select`` over strings needs prompt log-probabilities: each option is sent with
``echo=true, logprobs=0, max_tokens=1`` and scored from the echoed prompt's
``token_logprobs`` (the server must support ``echo`` with ``logprobs``, as structgen's
and vLLM's do). The calls of one batch (a fork's branches, a select's
options) are sent concurrently, so the server batches them.

Returned ``RequestOutput``s carry ``text``, ``finish_reason``, ``prompt_logprobs`` (for
echo requests) and ``metrics`` from the response's ``usage`` (``num_prompt_tokens``,
``num_generated_tokens``, ``cached_tokens``); ``token_ids`` are not sent back by the
API and stay empty. A failed request (HTTP error, connection error) comes back with
``finish_reason="error"`` and the server's message, which the program reports as a
``RequestError``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from structgen.env import openai_api_key
from structgen.errors import ConfigError, RequestError
from structgen.lang.backend import TokenizerBackend
from structgen.runtime.outputs import RequestMetrics, RequestOutput
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["OpenAIBackend", "request_body"]


def _constraint_fields(term: Any) -> dict:
    """The request-body fields that carry ``term``, a spec (or a compiled grammar, sent as
    its spec): ``regex`` for a ``Regex``, ``choice`` for a ``Choice``, ``response_format``
    for a ``JsonSchema``, ``regex`` (its text) for another ``RegexSpec`` (a token-healed
    ``Concatenation``), ``grammar`` (its text, syntax detected by the server) for a
    ``Grammar``; the trigger as ``constraint_trigger``; a copy constraint
    (``CopyJsonSchema``, ``fsm.copy.CopiedRegex``) also as ``copy_from``, with its regex
    before the copy (none for free text).

    Raises:
        RequestError: a spec with no wire form (no regex lowering; a copy constraint the
            server cannot build: :func:`_regex_text`), or a JsonSchema with non-default
            options the server has no field for.
        UnsupportedRegexError: another spec whose lowering has no regex text.
    """
    from structgen.fsm.base import BaseCompiledGrammar
    from structgen.fsm.copy import CopiedRegex
    from structgen.fsm.json_schema import DEFAULT_MAX_RECURSION_DEPTH
    from structgen.fsm.spec import Choice, Grammar, JsonSchema, Regex, RegexSpec, schema_for

    if isinstance(term, BaseCompiledGrammar):
        term = term.spec
    if term is None:
        return {}
    trigger = getattr(term, "trigger", None)
    extra = {"constraint_trigger": trigger} if trigger is not None else {}
    if isinstance(term, CopiedRegex):  # the server builds the same copy constraint
        base = _constraint_fields(term.copy_base) if term.copy_base is not None else {}
        return {**base, "copy_from": list(term.copy_from), **extra}
    if isinstance(term, Regex):
        return {"regex": _regex_text(term) if term.definitions else term.pattern, **extra}
    if isinstance(term, Choice):
        return {"choice": list(term.options), **extra}
    if isinstance(term, JsonSchema):
        if (
            term.whitespace != "compact"
            or not term.strict
            or term.max_recursion_depth not in (None, DEFAULT_MAX_RECURSION_DEPTH)
        ):
            raise RequestError(
                "OpenAIBackend sends JsonSchema with the server's defaults "
                "only (whitespace='compact', strict=True, max_recursion_depth)"
            )
        spec = {
            "name": "output",
            "schema": schema_for(term.schema),
            "strict": not term.allow_extra_properties,
        }
        if getattr(term, "copy_from", ()):  # a CopyJsonSchema: the server's copy_from
            extra = {**extra, "copy_from": list(term.copy_from)}
        return {"response_format": {"type": "json_schema", "json_schema": spec}, **extra}
    if isinstance(term, RegexSpec):
        return {"regex": _regex_text(term), **extra}
    if isinstance(term, Grammar):
        from structgen.fsm.grammar.union import GrammarAlternatives

        if isinstance(term, GrammarAlternatives):  # its options are specs, not text
            return {"regex": _alternatives_regex(term), **extra}
        if term.start is not None or term.prefix:
            raise RequestError(
                "OpenAIBackend sends a Grammar as its text only (no start= or prefix)"
            )
        return {"grammar": term.text, **extra}
    raise RequestError(
        f"OpenAIBackend cannot send a {type(term).__name__} constraint: it has no "
        "wire form (the server reads Regex, JsonSchema, Choice and specs that "
        "lower to a regex)"
    )


def _alternatives_regex(term: Any) -> str:
    """The regex text of a ``select`` over literals and ``Regex`` options (a
    ``GrammarAlternatives``): its prefix (token healing's removed text), then the
    alternation of the options, each literal escaped and each regex as a group that keeps
    its language there (``fsm.regex.parse.regex_group``: end anchors dropped, flags scoped).

    Raises:
        RequestError: an option is a ``Grammar`` (the server reads one grammar text, and
            a regex cannot carry a context-free option).
    """
    import re

    from structgen.fsm.regex.parse import regex_group
    from structgen.fsm.spec import Grammar

    if any(isinstance(o, Grammar) for o in term.options):
        raise RequestError(
            "OpenAIBackend cannot send a select over sub-expressions with a grammar "
            "option: the server reads one grammar text; select over strings and "
            "gen(regex=...) terms (sent as one regex), or write the alternation as one "
            "Grammar"
        )
    alts = [re.escape(o) if isinstance(o, str) else regex_group(o.pattern) for o in term.options]
    return re.escape(term.prefix) + "(?:" + "|".join(alts) + ")"


def _regex_text(term: Any) -> str:
    """The regex text of ``term`` (a ``Regex`` with definitions, or another ``RegexSpec``).

    Raises:
        RequestError: ``term`` copies from a text (a template's copied holes, or a gen's
            copied regex after token healing) and its lowering has no regex text (an
            intersection): the server builds copy constraints only from ``copy_from`` beside
            a whole output's regex, JSON Schema or free text. The message says copy_from
            needs a local engine.
        UnsupportedRegexError: another lowering without regex text.
    """
    from structgen.errors import UnsupportedRegexError

    try:
        return term.lower().text()
    except UnsupportedRegexError as exc:
        copied = _copy_kind(term)
        if copied is None:
            raise
        if copied == "gen":
            why = (
                "after token healing its copied regex has no form a request can carry "
                "(with token_healing=False the gen's regex is sent as regex and copy_from)"
            )
        else:
            why = (
                "the server copies a whole output (copy_from beside a regex, a JSON Schema "
                "or free text), not a template's holes"
            )
        raise RequestError(
            f"copy_from needs a local engine (backend=structgen.Engine(...)), not "
            f"OpenAIBackend: {why}"
        ) from exc


def _copy_kind(term: Any) -> str | None:
    """``"gen"`` when ``term`` holds a gen's copy constraint (a ``CopiedRegex`` or
    ``CopyJsonSchema``, e.g. behind token healing's prefix), ``"template"`` when it holds a
    ``Regex`` with definitions (the DSL builds one only in ``Template.copy_from``), else None.
    Raises: never.
    """
    from structgen.fsm.copy import CopiedRegex
    from structgen.fsm.json_schema.copy import CopyJsonSchema
    from structgen.fsm.spec import Concatenation, Regex

    parts = term.parts if isinstance(term, Concatenation) else (term,)
    if any(isinstance(p, (CopiedRegex, CopyJsonSchema)) for p in parts):
        return "gen"
    if any(isinstance(p, Regex) and p.definitions for p in parts):
        return "template"
    return None


def request_body(prompt_ids: list[int], params: SamplingParams, constraint: Any) -> dict:
    """The ``/v1/completions`` fields of one call: standard ones and ``extra_body``.

    Returns:
        ``{"standard": {...}, "extra_body": {...}}``; ``standard`` holds the OpenAI
        arguments (prompt, max_tokens, temperature, top_p, seed, stop, penalties,
        logit_bias, and ``echo``/``logprobs`` when ``params.prompt_logprobs`` is set),
        ``extra_body`` the structgen/vLLM fields (top_k, min_p, min_tokens, ignore_eos,
        stop_token_ids, repetition_penalty, and the constraint's field).

    Raises:
        RequestError: ``n != 1``, or a constraint the API cannot carry.
    """
    if params.n != 1:
        raise RequestError("OpenAIBackend sends one completion per call (n must be 1)")
    std: dict[str, Any] = {
        "prompt": list(prompt_ids),
        "max_tokens": params.max_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "presence_penalty": params.presence_penalty,
        "frequency_penalty": params.frequency_penalty,
    }
    if params.seed is not None:
        std["seed"] = params.seed
    if params.stop:
        std["stop"] = list(params.stop)
    if params.logit_bias:
        std["logit_bias"] = {str(k): v for k, v in params.logit_bias.items()}
    if params.prompt_logprobs is not None:
        std["echo"] = True
        std["logprobs"] = params.prompt_logprobs
    extra: dict[str, Any] = (
        {"logprob_start_len": params.prompt_logprobs_start}
        if (params.prompt_logprobs is not None and params.prompt_logprobs_start)
        else {}
    )
    extra |= {
        "top_k": params.top_k,
        "min_p": params.min_p,
        "min_tokens": params.min_tokens,
        "ignore_eos": params.ignore_eos,
        "repetition_penalty": params.repetition_penalty,
    }
    if params.stop_token_ids:
        extra["stop_token_ids"] = list(params.stop_token_ids)
    extra.update(_constraint_fields(constraint))
    return {"standard": std, "extra_body": extra}


class OpenAIBackend(TokenizerBackend):
    """A program backend over an OpenAI-compatible ``/v1/completions`` endpoint.

    Args:
        base_url: the API root, e.g. ``"http://127.0.0.1:8000/v1"`` (as the ``openai``
            client takes it; a URL without a path gets ``/v1`` appended).
        model: the served model name; None asks ``/v1/models`` once and takes the first.
        api_key: sent as ``Authorization: Bearer``; None reads ``OPENAI_API_KEY`` (or
            sends a placeholder, for servers without keys).
        tokenizer: the served model's tokenizer: a transformers tokenizer, a model path
            (``.gguf`` file or Hugging Face folder; only the tokenizer is loaded), or
            None for the packaged SmolLM2 (structgen's default model).
        timeout: seconds per HTTP request.
        max_concurrency: requests in flight at once (the calls of one batch).
        max_retries: the ``openai`` client's retries on connection errors / 5xx.

    Raises:
        ConfigError: the ``openai`` package is not installed (``pip install openai``; it
            is not one of structgen's dependencies).
        ModelNotFoundError, ModelLoadError: the tokenizer cannot be loaded.
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        tokenizer: Any = None,
        timeout: float = 300.0,
        max_concurrency: int = 16,
        max_retries: int = 2,
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise ConfigError(
                f"OpenAIBackend needs the openai package, which structgen does not install: "
                f"pip install openai ({exc})"
            ) from exc

        from structgen.fsm import Vocabulary

        super().__init__()
        url = base_url.rstrip("/")
        if url.count("/") <= 2:  # scheme://host[:port] without a path
            url += "/v1"
        self.base_url = url
        self.client = openai.OpenAI(
            base_url=url,
            api_key=api_key or openai_api_key() or "none",
            timeout=timeout,
            max_retries=max_retries,
        )
        if tokenizer is None or isinstance(tokenizer, (str, os.PathLike)):
            from structgen.runtime.loader.tokenizer import load_tokenizer

            tokenizer = load_tokenizer(tokenizer)
        self.tokenizer = tokenizer
        self.vocab = Vocabulary.from_tokenizer(tokenizer)
        self._model = model
        self._pool = ThreadPoolExecutor(max(1, max_concurrency), "structgen-openai")

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.base_url!r}, model={self._model!r})"

    @property
    def model(self) -> str:
        """The served model name (asked from ``/v1/models`` on first use when not given).

        Raises:
            RequestError: the server lists no model or cannot be reached.
        """
        if self._model is None:
            import openai

            try:
                data = self.client.models.list().data
            except openai.OpenAIError as exc:
                raise RequestError(f"cannot list models at {self.base_url}: {exc}") from exc
            if not data:
                raise RequestError(f"{self.base_url}/models lists no model")
            self._model = data[0].id
        return self._model

    def close(self) -> None:
        """Close the HTTP client and the request threads."""
        self._pool.shutdown(wait=False)
        self.client.close()

    def check_constraint(self, constraint: Any) -> None:
        """Raise where a copy constraint cannot be sent (:func:`_regex_text`), before the
        call is made, so the program names the gen; other constraints are checked when their
        request body is built (:meth:`generate`).

        Raises:
            RequestError: a copy constraint the server cannot build (copy_from needs a
                local engine).
        """
        from structgen.fsm.base import BaseCompiledGrammar

        term = constraint.spec if isinstance(constraint, BaseCompiledGrammar) else constraint
        if term is not None and _copy_kind(term) is not None:
            _constraint_fields(term)

    # ----------------------------------------------------------- generation
    def generate(
        self,
        prompts: Sequence[list[int]],
        params: Sequence[SamplingParams],
        constraints: Sequence[Any],
        on_delta: Callable[[int, str], None] | None = None,
    ) -> list[RequestOutput]:
        """Send the calls concurrently; one RequestOutput per call, in order.

        Args:
            prompts: token ids per call.
            params: one SamplingParams per call (``n`` must be 1).
            constraints: one Regex / JsonSchema / Choice (or None) per call.
            on_delta: called with ``(call index, text)`` as text streams in (the call is
                then made with ``stream=true``); None to not stream.

        Raises:
            RequestError: unequal list lengths, or a call the API cannot carry (raised
                before anything is sent).
        """
        if not (len(prompts) == len(params) == len(constraints)):
            raise RequestError("prompts, params and constraints must have equal lengths")
        bodies = [request_body(p, sp, c) for p, sp, c in zip(prompts, params, constraints)]
        model = self.model
        futures = [
            self._pool.submit(self._one, model, body, len(ids), i, on_delta)
            for i, (ids, body) in enumerate(zip(prompts, bodies))
        ]
        return [f.result() for f in futures]

    def _one(
        self,
        model: str,
        body: dict,
        n_prompt: int,
        index: int,
        on_delta: Callable[[int, str], None] | None,
    ) -> RequestOutput:
        import openai

        t0 = time.perf_counter()
        try:
            if on_delta is not None and "echo" not in body["standard"]:
                return self._stream(model, body, index, on_delta, t0)
            resp = self.client.completions.create(
                model=model, extra_body=body["extra_body"], **body["standard"]
            )
        except openai.APIStatusError as exc:
            return RequestOutput(
                finish_reason="error", error=f"HTTP {exc.status_code}: {_message(exc)}"
            )
        except openai.OpenAIError as exc:
            return RequestOutput(finish_reason="error", error=f"{type(exc).__name__}: {exc}")
        choice = resp.choices[0]
        text = choice.text
        prompt_lps = None
        if "echo" in body["standard"]:
            prompt_lps = _prompt_logprobs(body["standard"]["prompt"], choice.logprobs)
            echoed = self.tokenizer.decode(body["standard"]["prompt"])
            text = text.removeprefix(echoed)
        metrics = _metrics(resp.usage, n_prompt)
        return RequestOutput(
            text=text,
            finish_reason=choice.finish_reason,
            metrics=metrics,
            prompt_logprobs=prompt_lps,
        )

    def _stream(
        self, model: str, body: dict, index: int, on_delta: Callable[[int, str], None], t0: float
    ) -> RequestOutput:
        stream = self.client.completions.create(
            model=model,
            extra_body=body["extra_body"],
            stream=True,
            stream_options={"include_usage": True},
            **body["standard"],
        )
        parts: list[str] = []
        reason, usage, ttft = None, None, 0.0
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                if c.text:
                    if not parts:
                        ttft = time.perf_counter() - t0
                    parts.append(c.text)
                    on_delta(index, c.text)
                if c.finish_reason is not None:
                    reason = c.finish_reason
        metrics = _metrics(usage, len(body["standard"]["prompt"]))
        metrics.ttft_s = ttft  # client-side: request sent to first text received
        return RequestOutput(text="".join(parts), finish_reason=reason, metrics=metrics)


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(exc)


def _prompt_logprobs(ids: list[int], lp: Any) -> list[dict[int, float] | None] | None:
    """Per prompt token ``{token_id: logprob}`` (None for the first) from echoed logprobs."""
    if lp is None or lp.token_logprobs is None or len(lp.token_logprobs) < len(ids):
        return None
    out: list[dict[int, float] | None] = [None]
    for j in range(1, len(ids)):
        v = lp.token_logprobs[j]
        out.append(None if v is None else {ids[j]: float(v)})
    return out


def _metrics(usage: Any, n_prompt: int) -> RequestMetrics:
    """Token counts from the response's ``usage`` (timings are not in the API)."""
    m = RequestMetrics(num_prompt_tokens=n_prompt)
    if usage is not None:
        m.num_prompt_tokens = usage.prompt_tokens
        m.num_generated_tokens = usage.completion_tokens
        details = getattr(usage, "prompt_tokens_details", None)
        if details is not None and getattr(details, "cached_tokens", None) is not None:
            m.cached_tokens = details.cached_tokens
    return m
