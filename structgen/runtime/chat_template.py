"""Render a model's Jinja chat template exactly as transformers' ``apply_chat_template`` does.

Follows ``transformers.utils.chat_template_utils`` (``render_jinja_template`` and
``_cached_compile_jinja_template``): an ``ImmutableSandboxedEnvironment`` with
``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension and a
``{% generation %}`` tag that renders its body; the ``tojson`` filter (``json.dumps``,
no HTML escaping, ``ensure_ascii=False``) and the globals ``raise_exception``,
``strftime_now``, ``dict`` and ``namespace``; message objects turned into plain data
(keys whose value is None dropped, reasoning fields aliased); ``continue_final_message``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

from structgen.errors import RequestError

__all__ = ["compile_chat_template", "render_chat_template"]

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


@lru_cache(maxsize=32)
def compile_chat_template(template: str):
    """The compiled ``jinja2.Template`` of ``template`` (cached by its text).

    Raises:
        jinja2.TemplateSyntaxError: the template does not parse.
    """
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}``: renders its body (transformers tracks
        assistant spans with it; rendering is unchanged).
        """

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(
                lineno
            )

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(format):
        return datetime.now().strftime(format)

    class TemplateDict:
        """``dict(...)`` and ``dict.fromkeys(...)`` without the type's other attributes."""

        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        """Jinja's ``namespace`` refusing underscore-prefixed attribute names."""

        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(
                    "chat templates cannot store underscore-prefixed attributes on a "
                    f"namespace, got {name!r}"
                )

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env.from_string(template)


def _to_dicts(value: Any) -> Any:
    """Message objects (dataclasses, pydantic models) and their contents as dicts and lists."""
    if isinstance(value, Mapping):
        return {k: _to_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_dicts(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_to_dicts(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_dicts(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _to_dicts(value.model_dump())
    return value


def _plain(value: Any) -> Any:
    """What the template may see: plain JSON-like data; any other object becomes ``"<Type>"``."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if callable(getattr(value, "item", None)) and type(value).__module__ == "numpy":
        return _plain(value.item())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _normalize(conversation: Any) -> list[dict]:
    """Messages as dicts without the keys whose value is None (reasoning fields aliased)."""
    messages = _to_dicts(getattr(conversation, "messages", conversation))
    out = []
    for m in messages:
        if not isinstance(m, dict):
            raise RequestError(
                f"chat messages must be dicts, dataclasses or pydantic models: {m!r}"
            )
        m = {k: v for k, v in m.items() if v is not None}
        reasoning = next((m[k] for k in _REASONING_FIELDS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


def _tool_schemas(tools: list[dict | Callable] | None) -> list[dict] | None:
    """JSON schemas of ``tools``: dicts as given; functions through transformers'
    ``get_json_schema`` (imported only then).
    """
    if tools is None:
        return None
    schemas = []
    for tool in tools:
        if isinstance(tool, dict):
            schemas.append(tool)
        elif inspect.isfunction(tool) or inspect.ismethod(tool):
            from transformers.utils import get_json_schema

            schemas.append(get_json_schema(tool))
        else:
            raise RequestError(
                "tools must be JSON schemas (dicts) or functions with type hints and a "
                f"docstring, got {type(tool).__name__}"
            )
    return schemas


def render_chat_template(
    template: str,
    conversation: Any,
    *,
    tools: list[dict | Callable] | None = None,
    documents: list[dict] | None = None,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    **kwargs: Any,
) -> str:
    """The text of one conversation rendered by ``template``.

    Args:
        template: the Jinja chat template.
        conversation: a list of messages (dicts with ``role`` and ``content``; dataclasses
            and pydantic models are converted), or an object with ``.messages``.
        tools: tool JSON schemas (or functions with type hints and a docstring), passed to
            the template as ``tools``.
        documents: RAG documents (dicts), passed as ``documents``.
        add_generation_prompt: append the template's assistant header.
        continue_final_message: leave the last message open (True: its ``content``; a
            string: that field), so the model continues it.
        **kwargs: further template variables (``bos_token``, ``enable_thinking``, ...).

    Returns:
        The rendered text.

    Raises:
        RequestError: a message or tool of the wrong type, an empty conversation, or
            ``continue_final_message`` that cannot apply (with ``add_generation_prompt``,
            or a final message without that field).
        jinja2.TemplateError: the template raised (``raise_exception``) or failed.
    """
    chat = _normalize(conversation)
    if not chat:
        raise RequestError("cannot apply the chat template to an empty conversation")
    if continue_final_message and add_generation_prompt:
        raise RequestError("continue_final_message and add_generation_prompt are exclusive")
    compiled = compile_chat_template(template)
    if documents is not None and not all(isinstance(d, dict) for d in documents):
        raise RequestError("documents must be dicts (with 'title' and 'text')")
    schemas = _plain(_tool_schemas(tools))
    documents, kwargs, chat = _plain(documents), _plain(kwargs), _plain(chat)
    final = None
    if continue_final_message:
        key = continue_final_message if isinstance(continue_final_message, str) else "content"
        final = chat[-1].get(key)
        if final is None:
            raise RequestError(f"continue_final_message: the final message has no {key!r}")
        fields = [key]
        if key in _REASONING_FIELDS:
            fields = [f for f in _REASONING_FIELDS if chat[-1].get(f) == final]
        if not any(f in template for f in fields):
            raise RequestError(f"continue_final_message: the template never reads {key!r}")
        if isinstance(final, (list, tuple)):
            for block in reversed(final):
                if "text" in block:
                    final = block["text"]
                    block["text"] = block["text"] + _CONTINUE_TAG
                    break
            else:
                raise RequestError("continue_final_message: the final message has no text")
        else:
            for f in fields:
                chat[-1][f] = chat[-1][f] + _CONTINUE_TAG
    text = compiled.render(
        messages=chat,
        tools=schemas,
        documents=documents,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    if final is not None:
        if final.strip() not in text or _CONTINUE_TAG.strip() not in text:
            raise RequestError(
                "continue_final_message: the template dropped part of the final message"
            )
        at = text.rindex(_CONTINUE_TAG.strip())
        if text[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
            text = text[:at]
        else:
            text = text[:at].rstrip()
    return text
