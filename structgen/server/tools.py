"""Tool calling for chat templates without a tools section (SmolLM2's has none).

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

* a named function: the call schema of that tool;
* ``"required"``: ``anyOf`` over the call schemas of every tool;
* ``"auto"`` (the default when tools are given): the regex ``CALL|[^{][\\s\\S]*``, i.e.
  the model chooses with its first character: ``{`` starts a tool call (then generated
  under the call grammar), anything else starts a free-text answer;
* ``"none"``: no tool prompt, no grammar.

At most one call per choice (``parallel_tool_calls`` is accepted and ignored).
Assistant messages with ``tool_calls`` in the history are rendered in the same JSON
form, and ``tool`` messages keep their role (the ChatML template renders any role).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from structgen.server.protocol import APIError, NamedToolChoice, Tool

__all__ = ["ToolCallStream", "ToolPlan", "plan_tools", "render_tool_call"]

_HEAD = re.compile(r'\{"name":("(?:[^"\\]|\\.)*"),"arguments":')

_CHOICE_LINE = {
    "auto": "If no tool is needed, answer in plain text instead.",
    "required": "You must call one of these tools.",
}


class ToolPlan:
    """What tools change in one chat request: the system prompt and the constraint.

    Attributes:
        mode: ``"call"`` (the output is a call) or ``"auto"`` (text or a call).
        system_text: the tools section to add to the system prompt.
        constraint: the structgen constraint the output is generated under.
    """

    def __init__(self, mode: str, system_text: str, constraint: Any) -> None:
        self.mode = mode
        self.system_text = system_text
        self.constraint = constraint


def _params_schema(tool: Tool) -> dict:
    params = tool.function.parameters
    return params if params is not None else {"type": "object", "properties": {}}


def call_schema(tool: Tool) -> dict:
    """The JSON Schema of one call of ``tool``: ``{"name": const, "arguments": params}``."""
    return {
        "type": "object",
        "properties": {"name": {"const": tool.function.name}, "arguments": _params_schema(tool)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }


def plan_tools(tools: list[Tool], tool_choice: Any) -> ToolPlan | None:
    """The prompt section and constraint for ``tools`` under ``tool_choice``.

    Returns:
        None when ``tool_choice == "none"`` (tools are then ignored).

    Raises:
        APIError: a named tool that is not in ``tools``.
    """
    from structgen.fsm import json_schema_to_regex
    from structgen.lang.constraints import JsonSchema, Regex

    choice = tool_choice if tool_choice is not None else "auto"
    if choice == "none":
        return None
    lines = [(
        "You can call the following tools. Each line describes one tool as JSON: its name, "
        "its description and the JSON Schema of its arguments."
    )]
    for t in tools:
        desc = {"name": t.function.name, "description": t.function.description or "",
                "parameters": _params_schema(t)}
        lines.append(json.dumps(desc, ensure_ascii=False))
    lines.append('To call a tool, reply with only a JSON object of the form '
                 '{"name": "<tool name>", "arguments": {<the arguments>}} and nothing else.')
    if isinstance(choice, NamedToolChoice):
        name = choice.function.name
        chosen = [t for t in tools if t.function.name == name]
        if not chosen:
            raise APIError(f"tool_choice names {name!r}, which is not in tools",
                           param="tool_choice")
        lines.append(f'You must call the tool "{name}".')
        return ToolPlan("call", "\n".join(lines), JsonSchema(call_schema(chosen[0])))
    lines.append(_CHOICE_LINE[choice])
    schemas = [call_schema(t) for t in tools]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if choice == "required":
        return ToolPlan("call", "\n".join(lines), JsonSchema(schema))
    try:
        call_regex = json_schema_to_regex(schema, allow_extra_properties=False)
    except ValueError as exc:
        raise APIError(f"tools: {exc}", param="tools", code="invalid_schema") from None
    return ToolPlan("auto", "\n".join(lines), Regex(f"(?:{call_regex})|[^{{][\\s\\S]*"))


def render_tool_call(name: str, arguments: str) -> str:
    """An earlier call, as the assistant wrote it in the prompt format."""
    try:
        args = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        args = arguments
    return json.dumps({"name": name, "arguments": args}, ensure_ascii=False,
                      separators=(",", ":"))


class ToolCallStream:
    """Turns the generated text of one choice into OpenAI chat deltas, incrementally.

    ``feed(delta_text)`` and ``finish()`` return lists of delta dicts: ``{"content": s}``
    or ``{"tool_calls": [{"index": 0, ...}]}`` (the first carries id, type and name with
    empty arguments; later ones carry argument text). The wrapper's closing ``}`` is
    held back until ``finish``. Raises: never.

    Args:
        mode: ``"call"`` or ``"auto"`` (see :class:`ToolPlan`).
    """

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.buf = ""
        self.state = "name" if mode == "call" else "undecided"
        self.call_id = "call_" + uuid.uuid4().hex[:24]
        self.name: str | None = None
        self._args_start = 0
        self._sent = 0  # characters of the buffer already emitted (text or arguments)

    @property
    def is_tool_call(self) -> bool:
        """True once the output is known to be a call (its name has been parsed)."""
        return self.name is not None

    @property
    def is_complete_call(self) -> bool:
        """True when the whole output is one well-formed call."""
        if self.name is None:
            return False
        try:
            json.loads(self.buf)
        except json.JSONDecodeError:
            return False
        return True

    def feed(self, delta: str) -> list[dict]:
        """Deltas for ``delta``, the newly generated text."""
        self.buf += delta
        out: list[dict] = []
        if self.state == "undecided" and self.buf:
            self.state = "name" if self.buf[0] == "{" else "text"
        if self.state == "name":
            m = _HEAD.match(self.buf)
            if m:
                self.name = json.loads(m.group(1))
                self.state = "args"
                self._args_start = self._sent = m.end()
                out.append({"tool_calls": [{
                    "index": 0, "id": self.call_id, "type": "function",
                    "function": {"name": self.name, "arguments": ""}}]})
        if self.state == "text" and len(self.buf) > self._sent:
            out.append({"content": self.buf[self._sent:]})
            self._sent = len(self.buf)
        elif self.state == "args":
            end = len(self.buf) - 1  # hold back what may be the wrapper's "}"
            if end > self._sent:
                out.append(self._args_delta(self.buf[self._sent:end]))
                self._sent = end
        return out

    def finish(self) -> list[dict]:
        """Deltas for the rest of the text, once generation has ended."""
        if self.state == "args":
            end = len(self.buf) - 1 if self.buf.endswith("}") else len(self.buf)
            rest = self.buf[self._sent:end]
            self._sent = len(self.buf)
            return [self._args_delta(rest)] if rest else []
        rest = self.buf[self._sent:]  # text, or a call that never got its name
        self._sent = len(self.buf)
        return [{"content": rest}] if rest else []

    @staticmethod
    def _args_delta(text: str) -> dict:
        return {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}


def collect(deltas: list[dict]) -> tuple[str | None, list[dict] | None]:
    """Merge streamed deltas into a message's ``content`` and ``tool_calls``."""
    content: list[str] = []
    call: dict | None = None
    for d in deltas:
        if "content" in d:
            content.append(d["content"])
        for tc in d.get("tool_calls", ()):
            if call is None:
                call = {"id": tc["id"], "type": "function",
                        "function": {"name": tc["function"]["name"], "arguments": ""}}
            else:
                call["function"]["arguments"] += tc["function"]["arguments"]
    return ("".join(content) if content else None), ([call] if call else None)
