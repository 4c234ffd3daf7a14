r"""The constraint of a tool-calling turn: calls in a format, arguments by each tool's schema.

:func:`tool_call_constraint` builds one spec from a
:class:`~structgen.tools.formats.ToolCallFormat`, the request's tools and
``tool_choice``. A format with a trigger that starts its calls (Qwen/Hermes
``<tool_call>``, Mistral ``[TOOL_CALLS]``, DeepSeek-V3's calls-begin token) gets a
``StructuralTag``: each call (Hermes, DeepSeek) or the calls block (Mistral, DeepSeek)
is a tag whose begin and end are the texts the family's vocabulary has as single special
tokens (``<tool_call>`` / ``</tool_call>``, ``[TOOL_CALLS]``, DeepSeek's calls and call
begin/end), so where the model's vocabulary has them special the model may write each as
that one token, or as its characters (``structgen.fsm.tags.compile``); the parser reads
the token's text in the detokenized output either way. Llama 3 JSON, whose one call may
follow ``<|python_tag|>`` (the format's ``lead``), gets a ``StructuralTag`` too, that
token its tag's begin (:func:`_build_lead_tag`). The fallback gets one ``Regex`` spec
with shared definitions:

* ``"required"``: the turn is the calls block (one call, or with ``parallel`` one or more
  joined by the format's separator), nothing before or after;
* a named tool (``{"function": {"name": ...}}``): one call of that tool;
* ``"auto"``: with a trigger, free text that never contains the trigger in which the
  trigger starts a call (block) checked by the grammar, any number of them with
  ``parallel``, else at most one followed by free text (the text around the calls is
  the answer's content); with a format without one (the fallback), the turn is the
  calls or text whose first character is not ``{``; Llama 3 JSON also takes free text
  (without a leading ``{``) then ``<|python_tag|>`` and the call;
* ``"none"``: no constraint (None).

Each call's arguments are the compact JSON of its tool's ``parameters`` schema with only
the listed properties (``allow_extra_properties=False``); ``function.strict: true``
also makes every listed property required, as OpenAI's strict mode does. Every schema is
checked when the constraint is built, so a bad one fails the request before anything is
compiled. In the Regex specs the free text is :func:`free_text_regex` of the trigger
(every built-in trigger qualifies), else the complement of ``[\s\S]*TRIGGER[\s\S]*``
among texts (a boolean definition, ``structgen.fsm.regex.definitions``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from structgen.errors import RequestError, SchemaError
from structgen.fsm.regex.definitions import COMPLEMENT, INTERSECT, PLACEHOLDER_BASE
from structgen.fsm.regex.escape import escape_class_char, escape_literal
from structgen.fsm.spec import JsonSchema, LoweredRegex, Regex, RegexSpec, StructuralTag
from structgen.fsm.tags.format import (
    ConstString,
    JsonContent,
    Or,
    RegexContent,
    Sequence,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
)
from structgen.tools.formats import ToolCallFormat

__all__ = [
    "after_trigger",
    "free_text_regex",
    "strict_schema",
    "tool_call_constraint",
    "tool_name",
    "tool_parameters",
]

_EMPTY_PARAMS = {"type": "object", "properties": {}}
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains")


def _function(tool: Any, i: int) -> dict:
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise RequestError(
            f"tools[{i}] must be {{'type': 'function', 'function': {{'name': ...}}}}"
        )
    return fn


def tool_name(tool: dict) -> str:
    """The function name of an OpenAI tool dict."""
    return tool["function"]["name"]


def tool_parameters(tool: dict) -> Any:
    """The ``parameters`` schema of an OpenAI tool dict (an empty object schema if absent)."""
    params = tool["function"].get("parameters")
    return _EMPTY_PARAMS if params is None else params


def strict_schema(schema: Any) -> Any:
    """``schema`` with every object's listed properties required and no other property
    allowed (OpenAI strict mode's rules), applied to every subschema.

    Returns:
        A new schema; ``schema`` is not modified.
    """
    out = copy.deepcopy(schema)

    def walk(s: Any) -> None:
        if not isinstance(s, dict):
            return
        props = s.get("properties")
        if isinstance(props, dict):
            s["required"] = list(props)
            s.setdefault("additionalProperties", False)
        for key in _SUBSCHEMA_MAPS:
            if isinstance(s.get(key), dict):
                for sub in s[key].values():
                    walk(sub)
        for key in _SUBSCHEMA_LISTS:
            if isinstance(s.get(key), list):
                for sub in s[key]:
                    walk(sub)
        for key in _SUBSCHEMA_ONE:
            walk(s.get(key))

    walk(out)
    return out


@lru_cache(maxsize=1024)
def _lower_arguments(params_json: str, strict: bool, where: str) -> LoweredRegex:
    """The lowered regex of one tool's arguments (cached by the schema's JSON text).

    Raises:
        InvalidSchemaError: the schema fails its metaschema (``where`` and the pointer).
        SchemaError: a keyword structgen cannot enforce (``where`` prefixed).
    """
    from structgen.fsm.json_schema.check import check_schema

    params = json.loads(params_json)
    if strict:
        params = strict_schema(params)
    try:
        if isinstance(params, dict):
            check_schema(params)
        params = _object_arguments(params)
        return JsonSchema(params, allow_extra_properties=False).lower()
    except SchemaError as exc:  # the same error, its message naming the tool
        exc.args = (f"{where}: function.parameters: {exc}",)
        raise exc from None


def _object_arguments(params: Any) -> Any:
    """``params`` narrowed to JSON objects: a call's arguments are one JSON object (OpenAI
    requires ``"type": "object"`` parameters, and clients parse the arguments as one). A
    schema without ``type`` (``{}``, ``true``, only ``properties``...) gets
    ``"type": "object"`` beside its other keywords, a type list keeps only ``"object"``.

    Raises:
        InvalidSchemaError: ``params`` has a ``type`` that excludes ``"object"`` (at ``/type``).
    """
    from structgen.errors import InvalidSchemaError

    if params is True:
        return {"type": "object"}
    if not isinstance(params, dict):
        return params  # False: no value, which the compile reports
    types = params.get("type", "object")
    if types != "object" and "object" not in (types if isinstance(types, list) else [types]):
        raise InvalidSchemaError(
            f"a tool's parameters describe its arguments, one JSON object, so their schema "
            f"must allow type 'object'; got type {types!r}",
            "/type",
        )
    return {**params, "type": "object"}


def free_text_regex(trigger: str, not_first: str = "") -> str | None:
    """A regex of the texts that do not contain ``trigger`` (and do not start with a
    character of ``not_first``), or None when the trigger's first character occurs again
    in it (the complement definition is used then).

    With ``trigger = c1 c2 ... cn`` and ``c1`` only at its start, a text avoids it when
    every ``c1`` is followed by a proper prefix ``c2..ck`` of the rest and then either
    the text's end, another ``c1``, or a character that is neither ``c1`` nor
    ``c(k+1)``: the automaton of "longest prefix of the trigger just read", written
    out. No boolean term, so the automaton is built without emptiness checks.

    Raises:
        ValueError: ``not_first`` holds the trigger's first character.
    """
    if len(trigger) < 2 or trigger[0] in trigger[1:]:
        return None
    if trigger[0] in not_first:
        raise ValueError("not_first must not hold the trigger's first character")
    first = trigger[0]
    lit = escape_literal
    mids = [trigger[1:k] for k in range(1, len(trigger))]  # c2..ck for k = 1..n-1
    loop = "|".join(lit(m + first) for m in mids)
    exits = "|".join(
        lit(m) + "[^" + escape_class_char(ord(first)) + escape_class_char(ord(trigger[k])) + "]"
        for k, m in enumerate(mids, start=1)
    )
    partial = "|".join(lit(m) for m in mids)
    head = lit(first) + f"(?:{loop})*"
    other = "[^" + escape_class_char(ord(first)) + "]"
    units = f"(?:{other}|{head}(?:{exits}))*(?:{head}(?:{partial}))?"
    if not not_first:
        return units
    opening = "[^" + "".join(escape_class_char(ord(c)) for c in first + not_first) + "]"
    return f"(?:(?:{opening}|{head}(?:{exits})){units}|{head}(?:{partial}))?"


def _base_definitions(trigger: str) -> tuple[str, ...]:
    """Definitions 0-3: anything containing ``trigger``, its complement, any text, and
    the free text (3: texts without ``trigger``).
    """
    p = [chr(PLACEHOLDER_BASE + i) for i in range(3)]
    return (
        r"[\s\S]*" + escape_literal(trigger) + r"[\s\S]*",
        COMPLEMENT + p[0],
        r"[\s\S]*",
        INTERSECT + p[1] + p[2],
    )


def _choice_names(tools: list[dict], tool_choice: Any) -> tuple[str, list[int]]:
    """``(mode, indices of the callable tools)``; mode is ``"auto"`` or ``"required"``."""
    if tool_choice is None:
        return "auto", list(range(len(tools)))
    if tool_choice in ("auto", "required"):
        return tool_choice, list(range(len(tools)))
    fn = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise RequestError(
            "tool_choice must be 'none', 'auto', 'required' or "
            f"{{'type': 'function', 'function': {{'name': ...}}}}, got {tool_choice!r}"
        )
    found = [i for i, t in enumerate(tools) if tool_name(t) == name]
    if not found:
        raise RequestError(f"tool_choice names {name!r}, which is not in tools")
    return "required", found[:1]


def tool_call_constraint(
    fmt: ToolCallFormat, tools: list[dict], tool_choice: Any = None, parallel: bool | None = None
) -> RegexSpec | None:
    """The constraint of a turn that may (or must) call ``tools`` in ``fmt``.

    Args:
        fmt: the model's tool-call format (``structgen.tools.detect_format``).
        tools: OpenAI tool dicts ``{"type": "function", "function": {"name",
            "description", "parameters", "strict"}}``.
        tool_choice: None (= ``"auto"``), ``"none"``, ``"auto"``, ``"required"`` or
            ``{"type": "function", "function": {"name": NAME}}``.
        parallel: ``parallel_tool_calls`` (None = true, OpenAI's default); a named tool,
            and a format without a call separator, get one call.

    Returns:
        A ``StructuralTag`` for a format with a trigger or a lead, else a ``Regex`` spec
        (module docstring), or None for ``"none"``.

    Raises:
        RequestError: no tools, a malformed tool or ``tool_choice``, a named tool not in
            ``tools``, two tools with one name.
        InvalidSchemaError: a tool's ``parameters`` fails its metaschema (the message
            names ``tools[i]``, the tool and the JSON pointer).
        SchemaError: a tool's ``parameters`` uses a keyword that cannot be enforced.
    """
    if tool_choice == "none":
        return None
    if not tools:
        raise RequestError("tool calls need at least one tool")
    fns = [_function(t, i) for i, t in enumerate(tools)]
    names = [f["name"] for f in fns]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise RequestError(f"tools: two tools are named {dup!r}")
    mode, chosen = _choice_names(tools, tool_choice)
    single = len(chosen) == 1 and tool_choice not in (None, "auto", "required")
    many = parallel is not False and fmt.call_sep is not None and not single
    keys = tuple(  # the JSON keeps the schema's key order: properties are written in it
        (
            names[i],
            json.dumps(tool_parameters(tools[i]), ensure_ascii=False),
            bool(fns[i].get("strict")),
            i,
        )
        for i in chosen
    )
    for name, params_json, strict, i in keys:  # every schema checked now, the tool named
        _lower_arguments(params_json, strict, f"tools[{i}] ({name!r})")
    if fmt.trigger is not None and (fmt.block_begin or fmt.call_begin).startswith(fmt.trigger):
        return _build_tag(fmt, keys, mode, many)
    if fmt.lead is not None and fmt.trigger is None and not fmt.block_begin:
        return _build_lead_tag(fmt, keys, mode)
    return _build(fmt, keys, mode, many)


@lru_cache(maxsize=256)
def _build(fmt: ToolCallFormat, keys: tuple, mode: str, many: bool) -> Regex:
    """The spec of :func:`tool_call_constraint` for hashable ``keys`` (name, parameters
    JSON, strict, index) of the callable tools.
    """
    definitions: list[str] = []
    free = ""
    if mode == "auto" and fmt.trigger is not None:
        free = free_text_regex(fmt.trigger)
        if free is None:
            definitions.extend(_base_definitions(fmt.trigger))
            free = chr(PLACEHOLDER_BASE + 3)
        else:
            free = f"(?:{free})"
    calls = []
    for name, params_json, strict, i in keys:
        low = _lower_arguments(params_json, strict, f"tools[{i}] ({name!r})")
        offset, own = len(definitions), len(low.definitions)
        texts = (low.pattern, *low.definitions)
        if offset and own:
            shift = {PLACEHOLDER_BASE + k: PLACEHOLDER_BASE + offset + k for k in range(own)}
            texts = tuple(t.translate(shift) for t in texts)
        definitions.extend(texts[1:])
        shown = json.dumps(name, ensure_ascii=False) if fmt.json_name else name
        calls.append(
            escape_literal(fmt.call_begin + shown + fmt.args_intro)
            + "(?:"
            + texts[0]
            + ")"
            + escape_literal(fmt.call_end)
        )
    call = calls[0] if len(calls) == 1 else "(?:" + "|".join(calls) + ")"
    body = call
    if many:
        body = f"{call}(?:{escape_literal(fmt.call_sep)}{call})*"
    block = escape_literal(fmt.block_begin) + body + escape_literal(fmt.block_end)
    if mode == "required":
        pattern = block
    elif fmt.trigger is not None:
        pattern = f"{free}(?:{block}{free})?"
    else:
        pattern = f"(?:{block})|[^{{][\\s\\S]*"
    return Regex(pattern, definitions=tuple(definitions))


@dataclass(frozen=True)
class _ToolArguments(RegexSpec):
    """One tool's arguments as a structural tag's JSON content (internal): lowers to the
    cached :func:`_lower_arguments` of its schema's JSON text.
    """

    params_json: str
    strict: bool
    where: str
    trigger = None

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        return _lower_arguments(self.params_json, self.strict, self.where)

    def cache_key(self) -> tuple:
        return ("tool_arguments", self.params_json, self.strict)

    def portable(self) -> RegexSpec:
        return self  # plain strings: pickles as it is


# The texts of a format that are one special token in the family's vocabulary, as
# (begin, end) of a call and of the calls block: Qwen2.5/Qwen3 and Hermes add
# <tool_call> and </tool_call> as tokens, Mistral [TOOL_CALLS], DeepSeek-V3 its
# calls-begin/end and call-begin/end tokens. ``compile_structural_tag`` accepts each as
# that single token where the vocabulary has it special, and as its characters always.
_TOKEN_TAGS: dict[str, tuple[tuple[str, str] | None, tuple[str, str] | None]] = {
    "hermes": (("<tool_call>", "</tool_call>"), None),
    "mistral": (None, ("[TOOL_CALLS]", "")),
    "deepseek_v3": (
        ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"),
        ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    ),
}
# Special-token texts inside a call's begin, after its outer tag (DeepSeek-V3's tool-sep
# between the call type and the name): each becomes the begin of a nested tag (end "",
# as Llama 3's lead), so it too is accepted as its token or as its characters.
_INNER_TOKENS: dict[str, tuple[str, ...]] = {"deepseek_v3": ("<｜tool▁sep｜>",)}


def _tagged(
    begin: str,
    end: str,
    outer: tuple[str, str] | None,
    inner: Any,
    where: str,
    inner_tokens: tuple[str, ...] = (),
) -> Tag:
    """``begin inner end`` as a tag whose begin and end are ``outer`` (a prefix of
    ``begin`` and a suffix of ``end``), or ``begin`` and ``end`` themselves. The first of
    ``inner_tokens`` that occurs in the rest of the begin splits it: the text after it is
    the content of a nested tag whose begin is that token text (``_INNER_TOKENS``).
    """
    if outer is None or not (begin.startswith(outer[0]) and end.endswith(outer[1])):
        return Tag(begin, inner, (end,), where)
    b, e = outer
    head, tail = begin[len(b) :], ConstString(end[: len(end) - len(e)])
    for token in inner_tokens:
        if token in head:
            pre, post = head.split(token, 1)
            rest = Tag(token, Sequence((ConstString(post), inner, tail), where), ("",), where)
            return Tag(b, Sequence((ConstString(pre), rest), where), (e,), where)
    return Tag(b, Sequence((ConstString(head), inner, tail), where), (e,), where)


@lru_cache(maxsize=256)
def _build_tag(fmt: ToolCallFormat, keys: tuple, mode: str, many: bool) -> StructuralTag:
    """The structural tag of :func:`tool_call_constraint` for a format with a trigger:
    ``required`` is the calls (block) alone; ``auto`` is free text without the trigger,
    optionally the calls (block) and free text again.
    """
    call_tag, block_tag = _TOKEN_TAGS.get(fmt.name, (None, None))
    inner_tokens = _INNER_TOKENS.get(fmt.name, ())
    calls = []
    for name, params_json, strict, i in keys:
        shown = json.dumps(name, ensure_ascii=False) if fmt.json_name else name
        where = f"/tools/{i}"
        args = JsonContent(_ToolArguments(params_json, strict, f"tools[{i}] ({name!r})"), where)
        begin = fmt.call_begin + shown + fmt.args_intro
        calls.append(_tagged(begin, fmt.call_end, call_tag, args, where, inner_tokens))
    body = TagsWithSeparator(tuple(calls), fmt.call_sep or "", True, not many)
    if fmt.block_begin or fmt.block_end:
        regions: tuple[Tag, ...] = (_tagged(fmt.block_begin, fmt.block_end, block_tag, body, ""),)
        whole: Any = regions[0]
    else:
        regions, whole = tuple(calls), body
    if mode == "required":
        return StructuralTag(format=whole)
    after = free_text_regex(fmt.trigger)  # every built-in trigger has one
    if after is None:  # free text as the tags' complement definitions
        return StructuralTag(format=TriggeredTags((fmt.trigger,), regions, False, not many))
    # free (calls free)?, the free text written out (no boolean definition to build, as
    # TriggeredTags' free text has); free text then the trigger holds no earlier trigger,
    # since the trigger's first character occurs in it only at its start
    free = RegexContent(after)
    return StructuralTag(format=Or((Sequence((free, whole, free)), free)))


@lru_cache(maxsize=256)
def _build_lead_tag(fmt: ToolCallFormat, keys: tuple, mode: str) -> StructuralTag:
    """The structural tag of :func:`tool_call_constraint` for a format whose one call
    may follow a lead (Llama 3: ``<|python_tag|>``, accepted as its special token where
    the vocabulary has it): ``required`` is the call, bare or after the lead; ``auto``
    is that, or free text that neither starts with ``{`` nor holds the lead, optionally
    followed by the lead and the call (the turn ends with the call).
    """
    calls = []
    for name, params_json, strict, i in keys:
        shown = json.dumps(name, ensure_ascii=False) if fmt.json_name else name
        where = f"/tools/{i}"
        args = JsonContent(_ToolArguments(params_json, strict, f"tools[{i}] ({name!r})"), where)
        head = ConstString(fmt.call_begin + shown + fmt.args_intro)
        calls.append(Sequence((head, args, ConstString(fmt.call_end)), where))
    call: Any = calls[0] if len(calls) == 1 else Or(tuple(calls))
    led = Tag(fmt.lead, call, ("",))
    if mode == "required":
        return StructuralTag(format=Or((call, led)))
    free = free_text_regex(fmt.lead, not_first="{")
    if free is None:  # a lead whose first character recurs (no built-in one)
        raise RequestError(f"the lead {fmt.lead!r} cannot open calls in free text")
    text = RegexContent(free)
    return StructuralTag(format=Or((call, Sequence((text, led)), text)))


def after_trigger(spec: RegexSpec, trigger: str) -> RegexSpec:
    """``spec`` preceded by free text up to and including the first ``trigger`` (the
    server's ``constraint_trigger``: reasoning, then the calls).

    Args:
        spec: a constraint of :func:`tool_call_constraint`.
        trigger: the text that ends the free text (``</think>``).

    Returns:
        ``spec`` with its ``trigger`` field set, or for a ``StructuralTag`` a tag whose
        one region begins at ``trigger`` and holds the original tag's format.
    """
    if isinstance(spec, StructuralTag):
        lead = Tag(trigger, spec.format, ("",))
        return StructuralTag(format=TriggeredTags((trigger,), (lead,), True, True))
    return dataclasses.replace(spec, trigger=trigger)
