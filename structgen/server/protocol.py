"""Request models of the OpenAI-compatible API (pydantic), and the API error.

Field names follow the OpenAI API; structgen's additions (``regex``, ``choice`` and
vLLM's extra sampling fields) are documented in :mod:`structgen.server`. Unknown fields
are accepted and ignored, as vLLM and SGLang do, so clients that send newer OpenAI
fields keep working; each request's ignored top-level fields are logged (a warning on the
``structgen.server`` logger, with the known field a misspelling most resembles).
Responses are plain dicts built in ``serving.py``.
"""

from __future__ import annotations

import difflib
import logging
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "APIError",
    "ChatCompletionRequest",
    "ChatMessage",
    "CompletionRequest",
    "ResponseFormat",
    "Tool",
    "ignored_fields_message",
    "parse_request",
]

log = logging.getLogger("structgen.server")


class APIError(Exception):
    """An error returned to the client as ``{"error": {message, type, param, code}}``.

    Attributes:
        status: HTTP status code.
        message: human-readable message.
        type: OpenAI error type (``invalid_request_error``, ``authentication_error``, ...).
        param: the request field at fault, or None.
        code: a short machine code, or None.
    """

    def __init__(
        self,
        message: str,
        status: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict:
        """The OpenAI-style JSON body."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class StreamOptions(_Model):
    include_usage: bool = False


class JsonSchemaSpec(_Model):
    name: str = "response"
    description: str | None = None
    schema_: dict | bool | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Model):
    """``response_format``: free text, any JSON object, JSON valid against a schema, or a
    sentence of a grammar (``{"type": "grammar", "grammar": TEXT}``, syntax auto), or a
    structural tag (its ``structures`` / ``triggers`` or ``format`` fields beside ``type``,
    read by ``StructuralTag.from_dict``).
    """

    type: Literal["text", "json_object", "json_schema", "structural_tag", "grammar"]
    json_schema: JsonSchemaSpec | None = None
    grammar: str | None = None


class StructuredOutputs(_Model):
    """vLLM's ``structured_outputs`` object: exactly one of ``json``, ``regex``,
    ``choice``, ``grammar``, ``json_object``, ``structural_tag`` (an object or its JSON
    text), with the JSON options ``whitespace_pattern``, ``disable_any_whitespace`` and
    ``disable_additional_properties``.
    """

    json_: dict | bool | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = Field(default=None, min_length=1)
    grammar: str | None = None
    json_object: bool | None = None
    structural_tag: dict | str | None = None
    whitespace_pattern: str | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False


class FunctionDef(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]{1,64}$")
    description: str | None = None
    parameters: dict | None = None
    strict: bool | None = None


class Tool(_Model):
    """One entry of ``tools``: a function the model may call (name, description, JSON
    Schema of its arguments).
    """

    type: Literal["function"] = "function"
    function: FunctionDef


class _FunctionName(_Model):
    name: str


class NamedToolChoice(_Model):
    type: Literal["function"] = "function"
    function: _FunctionName


class ToolCallFunction(_Model):
    name: str
    arguments: str = ""


class ToolCall(_Model):
    id: str = ""
    type: Literal["function"] = "function"
    function: ToolCallFunction


class ContentPart(_Model):
    type: str
    text: str | None = None


class ChatMessage(_Model):
    """One message of a chat request: text (or text parts), or an assistant's tool calls,
    or a tool's result (``tool_call_id``).
    """

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class _Sampling(_Model):
    """Fields shared by both endpoints."""

    model: str
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    seed: int | None = Field(default=None, ge=0)  # the sampler's generators take no negative
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    # OpenAI's range: -100 bans the token, 100 makes it the only choice
    logit_bias: dict[str, Annotated[float, Field(ge=-100.0, le=100.0)]] | None = None
    response_format: ResponseFormat | None = None
    user: str | None = None
    # structgen / vLLM extras
    regex: str | None = None
    choice: list[str] | None = Field(default=None, min_length=1)
    guided_json: dict | bool | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = Field(default=None, min_length=1)
    grammar: str | None = None
    guided_grammar: str | None = None
    guided_whitespace_pattern: str | None = None
    structured_outputs: StructuredOutputs | None = None
    ebnf: str | None = None  # SGLang: a grammar read as EBNF
    structural_tag: dict | str | None = None  # SGLang
    constraint_trigger: str | None = Field(default=None, min_length=1)
    copy_from: str | list[str] | None = None  # copy constraints (structgen.fsm.copy)
    top_k: int = -1
    min_p: float = 0.0
    min_tokens: int = 0
    repetition_penalty: float = 1.0
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = None


class ChatCompletionRequest(_Sampling):
    """The body of ``POST /v1/chat/completions`` (fields as the OpenAI API; extras in
    :mod:`structgen.server`).
    """

    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None


class CompletionRequest(_Sampling):
    """The body of ``POST /v1/completions``: one or several prompts, as text or token ids
    (fields as the OpenAI API; extras in :mod:`structgen.server`).
    """

    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(default=16, ge=1)
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=20)
    suffix: str | None = None
    logprob_start_len: int = Field(default=0, ge=0)


def _loc(loc: tuple) -> str:
    parts: list[str] = []
    for x in loc:
        if isinstance(x, int):
            parts.append(f"[{x}]")
        elif x in ("str", "list[str]", "list[int]", "list[list[int]]") or "[" in str(x):
            continue  # union branch labels
        else:
            parts.append(("." if parts else "") + str(x))
    return "".join(parts)


def parse_request(model: type[BaseModel], data: Any) -> Any:
    """Validate a decoded JSON body against ``model``.

    Raises:
        APIError: 400 naming the first offending field (``param``) and what was wrong.
    """
    if not isinstance(data, dict):
        raise APIError("the request body must be a JSON object")
    try:
        req = model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = _loc(err.get("loc", ()))
        raise APIError(
            f"invalid field {param!r}: {err.get('msg')}", param=param or None, code="invalid_value"
        ) from None
    if req.model_extra:
        log.warning("%s", ignored_fields_message(model, req.model_extra))
    return req


def ignored_fields_message(model: type[BaseModel], extra: dict) -> str:
    """The log line for a request's top-level fields ``model`` does not know (accepted
    and ignored, as vLLM does), each with the known field it most resembles, if any.
    """
    known = set()
    for name, info in model.model_fields.items():
        known.add(info.alias or name)
    parts = []
    for key in sorted(extra):
        near = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.75)
        parts.append(f"{key!r}" + (f" (did you mean {near[0]!r}?)" if near else ""))
    return "the request's fields " + ", ".join(parts) + " are not known and were ignored"
