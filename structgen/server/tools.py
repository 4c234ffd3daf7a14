r"""Tool calling for chat templates without a tools section (SmolLM2's has none).

Prompt format. The tool definitions go into the system prompt (appended to the
request's first system message, or sent as a new first system message)::

    You can call the following tools. Each line describes one tool as JSON: its name,
    its description and the JSON Schema of its arguments.
    {"name": "get_weather", "description": "...", "parameters": {...}}
    To call a tool, reply with only a JSON object of the form
    {"name": "<tool name>", "arguments": {<the arguments>}} and nothing else.
    <one line that depends on tool_choice>

Grammar. One call is the compact JSON ``{"name":NAME,"arguments":ARGS}`` with ``NAME``
a ``const`` and ``ARGS`` valid against that tool's ``parameters`` (extra properties not
generated). ``tool_choice``:

* a named function: one call of that tool;
* ``"required"``: one call of any tool (``anyOf`` over the call schemas) or, with
  parallel calls, ``CALL(\nCALL)*``: several calls, one per line;
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

import collections
import functools
import json
import re
import uuid
from typing import Any

from structgen.server.protocol import APIError, NamedToolChoice, Tool
from structgen.tools.parser import collect

__all__ = [
    "ToolCallStream",
    "ToolPlan",
    "collect",
    "openai_tools",
    "plan_tools",
    "render_tool_call",
]

_HEAD = re.compile(r'\{"name":("(?:[^"\\]|\\.)*"),"arguments":')

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
        parallel: whether several calls (one per line) may be written.
        format: the native ``ToolCallFormat``, or None for the fallback convention.
        template_tools: the tools handed to the chat template (OpenAI dicts), or None
            when the tools go into the system prompt.
    """

    def __init__(
        self,
        mode: str,
        system_text: str,
        constraint: Any,
        parallel: bool = False,
        format: Any = None,
        template_tools: list[dict] | None = None,
    ) -> None:
        self.mode = mode
        self.system_text = system_text
        self.constraint = constraint
        self.parallel = parallel
        self.format = format
        self.template_tools = template_tools

    def parser(self) -> Any:
        """A fresh incremental parser of one output (``feed``, ``finish``,
        ``is_complete_call``).
        """
        if self.format is None:
            return ToolCallStream(self.mode)
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


def call_schema(tool: Tool) -> dict:
    """The JSON Schema of one call of ``tool``: ``{"name": const, "arguments": params}``."""
    return {
        "type": "object",
        "properties": {"name": {"const": tool.function.name}, "arguments": _params_schema(tool)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def _convention_constraint(tools: list[Tool], choice: Any, parallel: bool) -> Any:
    """The ``auto`` / parallel ``required`` constraint of the fallback convention
    (``structgen.tools.tool_call_constraint`` in the ``structgen_json`` format).

    Raises:
        APIError: 400 naming the tool and the JSON pointer of a schema that cannot be
            enforced.
    """
    from structgen.errors import RequestError, SchemaError
    from structgen.tools import FORMATS, tool_call_constraint

    try:
        fmt = FORMATS["structgen_json"]
        return tool_call_constraint(fmt, openai_tools(tools), choice, parallel)
    except SchemaError as exc:
        raise APIError(f"tools: {exc}", param="tools", code="invalid_schema") from None
    except RequestError as exc:
        raise APIError(str(exc), param="tools") from None


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
        the request's tools, choice, parallel and template (the same tools again reuse
        the plan and its compiled constraint).

    Raises:
        APIError: a named tool that is not in ``tools``; an invalid parameters schema
            (naming the tool and the JSON pointer).
    """
    choice = tool_choice if tool_choice is not None else "auto"
    if choice == "none":
        return None
    wire = choice.model_dump_json() if isinstance(choice, NamedToolChoice) else choice
    # repr of the JSON data (C-fast; distinct JSON values have distinct reprs)
    fns = [(f.name, f.description, f.parameters, f.strict) for f in (t.function for t in tools)]
    key = (repr(fns), wire, parallel, template)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(tools, choice, parallel, template)
        _PLANS[key] = plan
        if len(_PLANS) > _MAX_PLANS:
            _PLANS.popitem(last=False)
    else:
        _PLANS.move_to_end(key)
    return plan


_PLANS: collections.OrderedDict[tuple, ToolPlan] = collections.OrderedDict()
_MAX_PLANS = 64  # plans kept (least recently used dropped): the same tools again are warm


def _plan(tools: list[Tool], choice: Any, parallel: bool | None, template: str | None) -> ToolPlan:
    """``plan_tools`` without its cache (``choice`` is not ``"none"``)."""
    from structgen.fsm.spec import JsonSchema
    from structgen.tools import detect_format

    _check_parameters(tools)
    fmt = detect_format(template)
    if fmt.native:
        return _plan_native(fmt, tools, choice, parallel, template)
    lines = _prompt_lines(tools)
    if isinstance(choice, NamedToolChoice):
        name = choice.function.name
        chosen = [t for t in tools if t.function.name == name]
        if not chosen:
            raise APIError(
                f"tool_choice names {name!r}, which is not in tools", param="tool_choice"
            )
        lines.append(f'You must call the tool "{name}".')
        return ToolPlan("call", "\n".join(lines), JsonSchema(call_schema(chosen[0])))
    parallel = parallel is not False
    if parallel:
        lines.append(_PARALLEL_LINE)
    lines.append(_CHOICE_LINE[choice])
    schemas = [call_schema(t) for t in tools]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if choice == "required" and not parallel:
        return ToolPlan("call", "\n".join(lines), JsonSchema(schema))
    constraint = _convention_constraint(tools, choice, parallel)
    mode = "call" if choice == "required" else "auto"
    return ToolPlan(mode, "\n".join(lines), constraint, parallel)


def _plan_native(
    fmt: Any, tools: list[Tool], choice: Any, parallel: bool | None, template: str | None
) -> ToolPlan:
    """The plan of a template in a native format (module docstring).

    Raises:
        APIError: as ``plan_tools``.
    """
    from structgen.errors import RequestError, SchemaError
    from structgen.tools import template_renders_tools, tool_call_constraint

    dicts = openai_tools(tools)
    wire = choice.model_dump() if isinstance(choice, NamedToolChoice) else choice
    try:
        constraint = tool_call_constraint(fmt, dicts, wire, parallel)
    except SchemaError as exc:
        raise APIError(str(exc), param="tools", code="invalid_schema") from None
    except RequestError as exc:
        param = "tool_choice" if "tool_choice" in str(exc) else "tools"
        raise APIError(str(exc), param=param) from None
    mode = "auto" if choice == "auto" else "call"
    named = isinstance(choice, NamedToolChoice)
    many = parallel is not False and fmt.call_sep is not None and not named
    if template_renders_tools(template):
        return ToolPlan(mode, "", constraint, many, fmt, dicts)
    lines = _prompt_lines(tools)[:-1]
    example = fmt.render_calls([("<tool name>", "{<the arguments>}")])
    lines.append(f"To call a tool, write {example}")
    if named:
        lines.append(f'You must call the tool "{choice.function.name}".')
    else:
        lines.append(_CHOICE_LINE[choice])
    return ToolPlan(mode, "\n".join(lines), constraint, many, fmt)


def render_tool_call(name: str, arguments: str) -> str:
    """An earlier call, as the assistant wrote it in the prompt format."""
    try:
        args = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        args = arguments
    return json.dumps({"name": name, "arguments": args}, ensure_ascii=False, separators=(",", ":"))


class ToolCallStream:
    """Turns the generated text of one choice into OpenAI chat deltas, incrementally.

    ``feed(delta_text)`` and ``finish()`` return lists of delta dicts: ``{"content": s}``
    or ``{"tool_calls": [{"index": i, ...}]}``: for call ``i`` the first delta carries
    id, type and name with empty arguments, later ones carry argument text. The end of
    a call's arguments is found by scanning the JSON (strings, escapes, nesting): the
    first ``}`` outside a string at nesting 0 closes the call's wrapper object. Text that
    does not form calls (a truncated call, or free text in ``auto`` mode) comes out as
    ``content``. Raises: never.

    Args:
        mode: ``"call"`` or ``"auto"`` (see :class:`ToolPlan`).
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.buf = ""
        self.state = "name" if mode == "call" else "undecided"
        self.calls: list[dict] = []  # {"id", "name"} per parsed call
        self._pos = 0  # next character of buf to look at
        self._call_start = 0
        self._depth = 0
        self._in_string = False
        self._escape = False

    @property
    def is_tool_call(self) -> bool:
        """True once the output is known to be a call (a call's name has been parsed)."""
        return bool(self.calls)

    @property
    def call_id(self) -> str | None:
        """The id of the first call (None before it is parsed)."""
        return self.calls[0]["id"] if self.calls else None

    @property
    def is_complete_call(self) -> bool:
        """True when the whole output is one or more well-formed calls."""
        return bool(self.calls) and self.state == "between" and not self.buf[self._pos :].strip()

    def feed(self, delta: str) -> list[dict]:
        """Deltas for ``delta``, the newly generated text."""
        self.buf += delta
        out: list[dict] = []
        while True:
            if self.state == "undecided":
                if not self.buf:
                    return out
                self.state = "name" if self.buf[0] == "{" else "text"
            if self.state == "text":
                if len(self.buf) > self._pos:
                    out.append({"content": self.buf[self._pos :]})
                    self._pos = len(self.buf)
                return out
            if self.state == "between":
                rest = self.buf[self._pos :]
                stripped = rest.lstrip()
                if not stripped.startswith("{"):
                    return out
                self._pos += len(rest) - len(stripped)
                self._call_start = self._pos
                self.state = "name"
            if self.state == "name":
                m = _HEAD.match(self.buf, self._call_start)
                if not m:
                    return out
                name = json.loads(m.group(1))
                call = {"id": "call_" + uuid.uuid4().hex[:24], "name": name}
                self.calls.append(call)
                out.append(
                    {
                        "tool_calls": [
                            {
                                "index": len(self.calls) - 1,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                )
                self._pos = m.end()
                self._depth, self._in_string, self._escape = 0, False, False
                self.state = "args"
            if self.state == "args":
                start = self._pos
                closed = self._scan_args()
                if self._pos > start:
                    out.append(self._args_delta(self.buf[start : self._pos]))
                if not closed:
                    return out
                self._pos += 1  # the wrapper's "}"
                self.state = "between"

    def _scan_args(self) -> bool:
        """Advance ``_pos`` over argument text; True when it stops at the wrapper's ``}``."""
        buf = self.buf
        while self._pos < len(buf):
            c = buf[self._pos]
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif c == "\\":
                    self._escape = True
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                if self._depth == 0:
                    return True
                self._depth -= 1
            self._pos += 1
        return False

    def finish(self) -> list[dict]:
        """Deltas for the rest of the text, once generation has ended."""
        rest = self.buf[self._pos :] if self.state != "name" else self.buf[self._call_start :]
        self._pos = len(self.buf)
        if self.state in ("args", "between") or not rest:
            return []  # a truncated call keeps the arguments it streamed
        return [{"content": rest}]

    def _args_delta(self, text: str) -> dict:
        return {"tool_calls": [{"index": len(self.calls) - 1, "function": {"arguments": text}}]}
