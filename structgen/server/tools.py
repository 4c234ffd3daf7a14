r"""Tool calling for chat templates without a tools section (SmolLM2's has none).

Prompt format. The tool definitions go into the system prompt (appended to the
request's first system message, or sent as a new first system message)::

    You can call the following tools. Each line describes one tool as JSON: its name,
    its description and the JSON Schema of its arguments.
    {"name": "get_weather", "description": "...", "parameters": {...}}
    To call a tool, reply with only a JSON object of the form
    {"name": "<tool name>", "arguments": {<the arguments>}} and nothing else.
    <one line that depends on tool_choice>

Grammar. The convention is one more tool-call format, ``structgen_json``
(``structgen.tools.formats``): the constraint is ``structgen.tools.tool_call_constraint``
in that format and the output is parsed by ``structgen.tools.ToolCallParser``, as for the
native formats; this module adds the prompt. One call is the compact JSON
``{"name":NAME,"arguments":ARGS}`` with ``NAME`` the tool's name and ``ARGS`` valid
against that tool's ``parameters`` (extra properties not generated). ``tool_choice``:

* a named function: one call of that tool;
* ``"required"``: one call of any tool or, with parallel calls, ``CALL(\nCALL)*``:
  several calls, one per line;
* ``"auto"`` (the default when tools are given): ``CALLS|[^{][\s\S]*``, i.e. the model
  chooses with its first character: ``{`` starts the tool call(s) (generated under the
  call grammar), anything else starts a free-text answer;
* ``"none"``: no tool prompt, no grammar.

Parallel calls: ``parallel_tool_calls`` true or absent (OpenAI's default) lets
``required`` and ``auto`` write several calls, one JSON object per line (the prompt says
so); false allows one. The response lists them as ``tool_calls[0..k-1]``, streamed as
deltas with those ``index`` values. Assistant messages with ``tool_calls`` in the history
are rendered one call per line in the same form, and ``tool`` messages keep their role
(the ChatML template renders any role). With ``constraint_trigger`` the grammar above
starts after the trigger (free reasoning first; see :mod:`structgen.server.reasoning`).

Native formats. When the model's chat template is one of the families
``structgen.tools.formats`` detects (Qwen/Hermes ``<tool_call>``, Llama 3 JSON, Mistral
``[TOOL_CALLS]``, DeepSeek-V3), the tools are rendered by the template itself (its
``tools`` variable; a template that does not read it gets the tools section above, with
the call written in the family's format), the constraint is
``structgen.tools.tool_call_constraint`` for that format, the history's calls are handed
to the template as structured ``tool_calls`` (arguments as objects) and the output is
parsed by ``structgen.tools.ToolCallParser``. Any other template uses the convention
above (the documented fallback).

``tool_choice="none"``: the tools are left out of the prompt and nothing is constrained
(the model cannot call a tool it is not shown). vLLM keeps them in the prompt unless its
``--exclude-tools-when-tool-choice-none`` flag is set; structgen behaves as with that flag.

``function.strict: true`` (either path) makes every listed property of every object of
the tool's ``parameters`` required and no other property allowed
(``structgen.tools.strict_schema``), as ``response_format``'s strict ``json_schema``.
Every tool's ``parameters`` is checked against its metaschema before anything is
generated; an invalid one is a 400 naming ``tools[i]``, the tool and the JSON pointer.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
from typing import Any

from pydantic import TypeAdapter

from structgen.lru import LRUCache
from structgen.server.protocol import APIError, NamedToolChoice, Tool
from structgen.tools.parser import collect

__all__ = [
    "ToolPlan",
    "cached_plan",
    "collect",
    "openai_tools",
    "plan_key",
    "plan_tools",
    "render_tool_call",
]

_CHOICE_LINE = {
    "auto": "If no tool is needed, answer in plain text instead.",
    "required": "You must call one of these tools.",
}
_PARALLEL_LINE = "To call several tools at once, write one such JSON object per line."


class ToolPlan:
    """What tools change in one chat request: the system prompt and the constraint.

    Attributes:
        mode: ``"call"`` (the output is a call) or ``"auto"`` (text or a call).
        system_text: the tools section to add to the system prompt ("" for none).
        constraint: the structgen constraint the output is generated under.
        parallel: whether several calls may be written.
        format: the ``ToolCallFormat`` the calls are written in (``structgen_json`` for
            the fallback convention).
        template_tools: the tools handed to the chat template (OpenAI dicts), or None
            when the tools go into the system prompt.
    """

    def __init__(
        self,
        mode: str,
        system_text: str,
        constraint: Any,
        parallel: bool,
        format: Any,
        template_tools: list[dict] | None = None,
    ) -> None:
        self.mode = mode
        self.system_text = system_text
        self.constraint = constraint
        self.parallel = parallel
        self.format = format
        self.template_tools = template_tools
        self._grammars: dict[tuple, tuple[Any, Any]] = {}  # (id(vocab), trigger) -> grammar

    def grammar(self, vocab: Any, trigger: str | None) -> Any:
        """The constraint compiled for ``vocab`` (after ``trigger``, the request's
        ``constraint_trigger``) by an earlier request with this plan, or None.
        """
        hit = self._grammars.get((id(vocab), trigger))
        return hit[1] if hit is not None and hit[0] is vocab else None

    def keep_grammar(self, vocab: Any, trigger: str | None, grammar: Any) -> None:
        """Keep ``grammar``, the constraint compiled for ``vocab`` after ``trigger``, so
        that the same tools again skip the compiler (its cache key walks every tool).
        """
        if len(self._grammars) < 8:
            self._grammars[(id(vocab), trigger)] = (vocab, grammar)

    def parser(self) -> Any:
        """A fresh ``structgen.tools.ToolCallParser`` of one output in the plan's format."""
        from structgen.tools import ToolCallParser

        return ToolCallParser(self.format, self.mode)


def _params_schema(tool: Tool) -> dict:
    params = tool.function.parameters
    params = params if params is not None else {"type": "object", "properties": {}}
    if tool.function.strict:
        from structgen.tools import strict_schema

        return strict_schema(params)
    return params


def openai_tools(tools: list[Tool]) -> list[dict]:
    """The tools as OpenAI dicts (what chat templates and ``structgen.tools`` read)."""
    return [t.model_dump(exclude_none=True) for t in tools]


def _check_parameters(tools: list[Tool]) -> None:
    """Check every tool's ``parameters`` against its metaschema (cached by its JSON text).

    Raises:
        APIError: 400 naming ``tools[i]``, the tool and the JSON pointer of the first
            ``parameters`` that fails.
    """
    from structgen.errors import InvalidSchemaError

    for i, t in enumerate(tools):
        params = _params_schema(t)
        try:
            _check_one(json.dumps(params, sort_keys=True, ensure_ascii=False))
        except InvalidSchemaError as exc:
            raise APIError(
                f"tools[{i}] ({t.function.name!r}): function.parameters is not a valid "
                f"JSON Schema: {exc}",
                param=f"tools[{i}].function.parameters",
                code="invalid_schema",
            ) from None


@functools.lru_cache(maxsize=4096)
def _check_one(params_json: str) -> None:
    """Raises: InvalidSchemaError (with the JSON pointer) for an invalid schema."""
    from structgen.errors import InvalidSchemaError
    from structgen.fsm.json_schema.check import check_schema

    params = json.loads(params_json)
    if not isinstance(params, (dict, bool)):
        raise InvalidSchemaError("a JSON Schema must be an object or a boolean")
    if isinstance(params, dict):
        check_schema(params)


def _prompt_lines(tools: list[Tool]) -> list[str]:
    lines = [
        (
            "You can call the following tools. Each line describes one tool as JSON: its name, "
            "its description and the JSON Schema of its arguments."
        )
    ]
    for t in tools:
        desc = {
            "name": t.function.name,
            "description": t.function.description or "",
            "parameters": _params_schema(t),
        }
        lines.append(json.dumps(desc, ensure_ascii=False))
    lines.append(
        "To call a tool, reply with only a JSON object of the form "
        '{"name": "<tool name>", "arguments": {<the arguments>}} and nothing else.'
    )
    return lines


def plan_key(
    tools: list[Tool], tool_choice: Any, parallel: bool | None, template: str | None
) -> tuple:
    """The cache key of a plan: a digest of the tools, ``tool_choice`` and ``parallel``,
    and the template (which fixes the format and whether it renders the tools).
    """
    named = isinstance(tool_choice, NamedToolChoice)
    wire = tool_choice.model_dump_json() if named else json.dumps(tool_choice)
    h = hashlib.blake2b(_TOOLS_JSON.dump_json(tools), digest_size=16)  # pydantic's Rust dump
    h.update(f"\0{wire}\0{parallel}".encode())
    return (h.digest(), template)


def cached_plan(key: tuple) -> ToolPlan | None:
    """The plan stored under ``key`` (``plan_key``), or None."""
    return _PLANS.get(key)


def plan_tools(
    tools: list[Tool], tool_choice: Any, parallel: bool | None = None, template: str | None = None
) -> ToolPlan | None:
    """The prompt section and constraint for ``tools`` under ``tool_choice``.

    Args:
        tools: the request's tools.
        tool_choice: ``None`` (= ``"auto"``), ``"none"``, ``"auto"``, ``"required"`` or a
            ``NamedToolChoice``.
        parallel: ``parallel_tool_calls`` (None = true, OpenAI's default); a named
            tool_choice always gets one call.
        template: the model's chat template source (its tool-call format is detected,
            module docstring); None: the fallback convention.

    Returns:
        None when ``tool_choice == "none"`` (tools are then ignored). Plans are cached by
        ``plan_key`` (the same tools again reuse the plan and its constraint, whose
        compiled grammar the compiler's cache holds).

    Raises:
        APIError: a named tool that is not in ``tools``; an invalid parameters schema
            (naming the tool and the JSON pointer).
    """
    choice = tool_choice if tool_choice is not None else "auto"
    if choice == "none":
        return None
    key = plan_key(tools, choice, parallel, template)
    plan = cached_plan(key)
    if plan is None:
        plan = _plan(tools, choice, parallel, template)
        _PLANS.put(key, plan)
    return plan


async def plan_tools_async(
    pool: Any,
    tools: list[Tool],
    tool_choice: Any,
    parallel: bool | None = None,
    template: str | None = None,
) -> ToolPlan | None:
    """``plan_tools`` with a cache miss planned on ``pool`` (the server's compile thread),
    so that checking and lowering many tool schemas does not hold the event loop.

    Raises:
        APIError: as ``plan_tools``.
    """
    choice = tool_choice if tool_choice is not None else "auto"
    if choice == "none":
        return None
    plan = cached_plan(plan_key(tools, choice, parallel, template))
    if plan is not None:
        return plan
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool, plan_tools, tools, choice, parallel, template)


_TOOLS_JSON = TypeAdapter(list[Tool])
_MAX_PLANS = 64  # plans kept (least recently used dropped): the same tools again are warm
# locked: plans are made on the compile thread and read on the loop
_PLANS: LRUCache[tuple, ToolPlan] = LRUCache(_MAX_PLANS)


def _plan(tools: list[Tool], choice: Any, parallel: bool | None, template: str | None) -> ToolPlan:
    """``plan_tools`` without its cache (``choice`` is not ``"none"``): the constraint of
    ``structgen.tools.tool_call_constraint`` in the template's format, the tools section
    of the system prompt where the template does not render the tools.

    Raises:
        APIError: as ``plan_tools``.
    """
    from structgen.errors import RequestError, SchemaError
    from structgen.tools import detect_format, template_renders_tools, tool_call_constraint

    _check_parameters(tools)
    fmt = detect_format(template)
    dicts = openai_tools(tools)
    named = isinstance(choice, NamedToolChoice)
    wire = choice.model_dump() if named else choice
    try:
        constraint = tool_call_constraint(fmt, dicts, wire, parallel)
    except SchemaError as exc:
        raise APIError(str(exc), param="tools", code="invalid_schema") from None
    except RequestError as exc:
        param = "tool_choice" if "tool_choice" in str(exc) else "tools"
        raise APIError(str(exc), param=param) from None
    mode = "auto" if choice == "auto" else "call"
    many = parallel is not False and fmt.call_sep is not None and not named
    if fmt.native and template_renders_tools(template):
        return ToolPlan(mode, "", constraint, many, fmt, dicts)
    lines = _prompt_lines(tools)
    if fmt.native:  # the tools section, the call written in the family's format
        example = fmt.render_calls([("<tool name>", "{<the arguments>}")])
        lines[-1] = f"To call a tool, write {example}"
    elif many:
        lines.append(_PARALLEL_LINE)
    if named:
        lines.append(f'You must call the tool "{choice.function.name}".')
    else:
        lines.append(_CHOICE_LINE[choice])
    return ToolPlan(mode, "\n".join(lines), constraint, many, fmt)


def render_tool_call(name: str, arguments: str) -> str:
    """An earlier call, as the fallback convention writes it in the prompt."""
    from structgen.tools import FORMATS

    try:
        args = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        args = arguments
    compact = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return FORMATS["structgen_json"].render_call(name, compact)
