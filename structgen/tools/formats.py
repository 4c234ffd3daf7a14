r"""Tool-call formats of chat model families, and their detection from a chat template.

A format says how an assistant turn writes its tool calls, as the family's chat template
renders them in the conversation history (and as the model was trained to write them):

* ``hermes`` (Qwen2.5, Qwen3, Hermes 2/3): every call is
  ``<tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>``, calls one per line.
* ``llama3_json`` (Llama 3.1, 3.2 with custom tools): one ``{"name": NAME, "parameters":
  ARGS}`` object as the whole turn (the templates render one call per turn and raise on
  several, so parallel calls are not written), either as the whole turn (what the
  template documents: the turn starts with ``{``) or after ``<|python_tag|>`` (one
  special token in Llama 3 vocabularies; what Llama 3.1/3.2 models write before a call,
  also after some text). The built-in tools' ``NAME.call(...)`` syntax is not a
  function-call format and is not generated.
* ``mistral`` (Mistral v3 / v7 templates): ``[TOOL_CALLS][{"name": NAME, "arguments":
  ARGS}, ...]``.
* ``deepseek_v3`` (DeepSeek-V3, R1): ``<｜tool▁calls▁begin｜>`` then per call
  ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>``
  (calls joined by a newline), then ``<｜tool▁calls▁end｜>``.
* ``structgen_json``: the documented fallback for templates in none of these families
  (the tools described in the system prompt by ``structgen.server.tools``, each call the
  compact ``{"name":NAME,"arguments":ARGS}`` on its own line, the turn a call when its
  first character is ``{``).

Detection (:func:`detect_format`) reads the template source; the first rule that holds
wins: ``<tool_call>`` -> ``hermes``; ``[TOOL_CALLS]`` -> ``mistral``;
``tool▁calls▁begin`` -> ``deepseek_v3``; ``<|python_tag|>``, or ``"parameters"`` together
with ``<|eot_id|>`` -> ``llama3_json``; anything else (or no template) ->
``structgen_json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["FORMATS", "ToolCallFormat", "detect_format", "template_renders_tools"]


@dataclass(frozen=True)
class ToolCallFormat:
    """How one family writes tool calls (module docstring).

    A call is ``call_begin`` + the name (a JSON string when ``json_name``, else raw text)
    + ``args_intro`` + the arguments (one JSON value) + ``call_end``; several calls are
    joined by ``call_sep`` (None: one call per turn) and wrapped in ``block_begin`` /
    ``block_end``. ``trigger`` is the text that starts the calls inside free text
    (``tool_choice="auto"``); None: the calls must be the whole turn, told apart from a
    text answer by its first character. ``lead`` is a marker that may precede the calls
    and is not part of them: at the turn's start it is optional, in free text
    (``tool_choice="auto"``) it starts the calls, as a trigger does.

    Attributes:
        name: the format's name (``FORMATS`` key).
        call_begin: text before a call's name.
        json_name: the name is written as a JSON string (else as raw text).
        args_intro: text between the name and the arguments.
        call_end: text after the arguments.
        call_sep: text between two calls, or None.
        block_begin: text before the first call.
        block_end: text after the last call.
        trigger: the text that opens the calls in free text, or None.
        call_extra: a regex of text the parser skips between the arguments and
            ``call_end`` (Mistral templates write each call's ``"id"`` there; the
            constraint does not generate it), or None.
        lead: the marker that may precede the calls (Llama 3's ``<|python_tag|>``), or
            None.
    """

    name: str
    call_begin: str
    json_name: bool
    args_intro: str
    call_end: str
    call_sep: str | None
    block_begin: str = ""
    block_end: str = ""
    trigger: str | None = None
    call_extra: str | None = None
    lead: str | None = None

    @property
    def native(self) -> bool:
        """True for a family's own format (rendered by the template), False for the
        fallback convention.
        """
        return self.name != "structgen_json"

    def render_call(self, name: str, arguments_json: str) -> str:
        """One call written in this format (``arguments_json``: the arguments as JSON)."""
        import json

        shown = json.dumps(name, ensure_ascii=False) if self.json_name else name
        return self.call_begin + shown + self.args_intro + arguments_json + self.call_end

    def render_calls(self, calls: list[tuple[str, str]]) -> str:
        """Calls ``(name, arguments JSON)`` written as one block of this format."""
        sep = self.call_sep if self.call_sep is not None else ""
        body = sep.join(self.render_call(n, a) for n, a in calls)
        return self.block_begin + body + self.block_end


_DS = "<｜tool▁calls▁begin｜>"

FORMATS: dict[str, ToolCallFormat] = {
    "hermes": ToolCallFormat(
        "hermes",
        call_begin='<tool_call>\n{"name": ',
        json_name=True,
        args_intro=', "arguments": ',
        call_end="}\n</tool_call>",
        call_sep="\n",
        trigger="<tool_call>",
    ),
    "llama3_json": ToolCallFormat(
        "llama3_json",
        call_begin='{"name": ',
        json_name=True,
        args_intro=', "parameters": ',
        call_end="}",
        call_sep=None,
        lead="<|python_tag|>",
    ),
    "mistral": ToolCallFormat(
        "mistral",
        call_begin='{"name": ',
        json_name=True,
        args_intro=', "arguments": ',
        call_end="}",
        call_sep=", ",
        block_begin="[TOOL_CALLS][",
        block_end="]",
        trigger="[TOOL_CALLS]",
        call_extra=r', "id": "[^"]*"',
    ),
    "deepseek_v3": ToolCallFormat(
        "deepseek_v3",
        call_begin="<｜tool▁call▁begin｜>function<｜tool▁sep｜>",
        json_name=False,
        args_intro="\n```json\n",
        call_end="\n```<｜tool▁call▁end｜>",
        call_sep="\n",
        block_begin=_DS,
        block_end="<｜tool▁calls▁end｜>",
        trigger=_DS,
    ),
    "structgen_json": ToolCallFormat(
        "structgen_json",
        call_begin='{"name":',
        json_name=True,
        args_intro=',"arguments":',
        call_end="}",
        call_sep="\n",
    ),
}


def detect_format(template: str | None) -> ToolCallFormat:
    """The tool-call format of a chat template, by the rules of the module docstring.

    Args:
        template: the Jinja chat template source, or None (no template).

    Returns:
        One of ``FORMATS``; ``FORMATS["structgen_json"]`` when no rule holds.
    """
    if not template:
        return FORMATS["structgen_json"]
    if "<tool_call>" in template:
        return FORMATS["hermes"]
    if "[TOOL_CALLS]" in template:
        return FORMATS["mistral"]
    if "tool▁calls▁begin" in template:
        return FORMATS["deepseek_v3"]
    if "<|python_tag|>" in template or ('"parameters"' in template and "<|eot_id|>" in template):
        return FORMATS["llama3_json"]
    return FORMATS["structgen_json"]


_TOOLS_VAR = re.compile(r"\btools\b")


def template_renders_tools(template: str | None) -> bool:
    """True when the template reads the ``tools`` variable (renders the tool list itself)."""
    return bool(template) and _TOOLS_VAR.search(template) is not None
