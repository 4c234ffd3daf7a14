"""Native tool-call formats: fixture templates rendered as transformers renders them,
format detection, the constraint of each format and tool_choice, and the parser's
round trip over what each template writes (no model)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from structgen.errors import InvalidSchemaError, RequestError
from structgen.tools import (
    FORMATS,
    ToolCallParser,
    collect,
    detect_format,
    strict_schema,
    template_renders_tools,
    tool_call_constraint,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "chat_templates"
FAMILIES = {
    "qwen": "hermes",
    "llama3": "llama3_json",
    "mistral": "mistral",
    "deepseek_v3": "deepseek_v3",
}
# where each template's assistant turn ends (stripped before parsing the turn; None: EOS)
TURN_END = {
    "qwen": "<|im_end|>\n",
    "llama3": "<|eot_id|>",
    "mistral": None,
    "deepseek_v3": "<｜end▁of▁sentence｜>",
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["C", "F"]},
                "days": {"type": "integer", "minimum": 1},
            },
            "required": ["city"],
        },
    },
}
NOW = {"type": "function", "function": {"name": "now", "description": "The time"}}
TOOLS = [WEATHER, NOW]
CALLS = [
    ("get_weather", {"city": 'Pa"ris}', "unit": "C"}),
    ("now", {}),
]


def template(family: str) -> str:
    return (FIXTURES / f"{family}.jinja").read_text()


def conversation(calls: list[tuple[str, dict]]) -> list[dict]:
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris, and the time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call{i}",
                    "type": "function",
                    "function": {"name": n, "arguments": a},
                }
                for i, (n, a) in enumerate(calls)
            ],
        },
    ]


@pytest.fixture(scope="module")
def tokenizers(tiny_tokenizer, tmp_path_factory):
    """(transformers tokenizer, structgen Tokenizer) of the same tiny tokenizer."""
    from structgen.runtime.tokenizer import Tokenizer

    path = tmp_path_factory.mktemp("tok")
    tiny_tokenizer.save_pretrained(path)
    return tiny_tokenizer, Tokenizer.from_pretrained(path)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fixture_renders_as_transformers(family, tokenizers):
    hf, ours = tokenizers
    calls = CALLS[:1] if family == "llama3" else CALLS
    history = conversation(calls) + [
        {"role": "tool", "tool_call_id": "call0", "name": "get_weather", "content": "12 C"},
        {"role": "user", "content": "Thanks"},
    ]
    for msgs, gen in ((history[:2], True), (history, True), (history[:3], False)):
        kw = {"tools": TOOLS, "chat_template": template(family), "tokenize": False}
        want = hf.apply_chat_template(copy.deepcopy(msgs), add_generation_prompt=gen, **kw)
        got = ours.apply_chat_template(copy.deepcopy(msgs), add_generation_prompt=gen, **kw)
        assert got == want
        assert "get_weather" in got and "Weather of a city" in got  # the tools are shown


def test_detection():
    for family, name in FAMILIES.items():
        assert detect_format(template(family)) is FORMATS[name]
        assert template_renders_tools(template(family))
    from benchmarks.support import CHATML

    assert detect_format(CHATML) is FORMATS["structgen_json"]
    assert detect_format(None) is FORMATS["structgen_json"]
    assert not template_renders_tools(CHATML)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_template_turn_parses_back(family, tokenizers):
    """The assistant turn the template writes parses into the same calls, in any chunking."""
    _, ours = tokenizers
    fmt = FORMATS[FAMILIES[family]]
    calls = CALLS[:1] if fmt.call_sep is None else CALLS
    msgs = conversation(calls)
    kw = {"tools": TOOLS, "chat_template": template(family), "tokenize": False}
    prompt = ours.apply_chat_template(msgs[:2], add_generation_prompt=True, **kw)
    full = ours.apply_chat_template(msgs, **kw)
    assert full.startswith(prompt)
    turn = full[len(prompt) :]
    end = TURN_END[family] or ours.eos_token
    assert turn.endswith(end)
    turn = turn[: len(turn) - len(end)]
    for step in (1, 2, 7, len(turn)):
        parser = ToolCallParser(fmt, "call")
        deltas = []
        for i in range(0, len(turn), step):
            deltas += parser.feed(turn[i : i + step])
        deltas += parser.finish()
        content, got = collect(deltas)
        assert content is None and parser.is_complete_call
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in got] == [
            (n, a) for n, a in calls
        ]
        assert [d["tool_calls"][0]["index"] for d in deltas if "id" in d["tool_calls"][0]] == list(
            range(len(calls))
        )


def _compact(calls):
    return [(n, json.dumps(a, separators=(",", ":"))) for n, a in calls]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_constraint_modes(name):
    fmt = FORMATS[name]
    one = fmt.render_calls(_compact(CALLS[:1]))
    two = fmt.render_calls(_compact(CALLS))
    bad_args = fmt.render_calls(_compact([("get_weather", {"unit": "C"})]))
    extra = fmt.render_calls(_compact([("get_weather", {"city": "X", "zip": "1"})]))
    unknown = fmt.render_calls(_compact([("nope", {})]))
    required = tool_call_constraint(fmt, TOOLS, "required").compile(None)
    assert required.matches(one)
    assert required.matches(two) == (fmt.call_sep is not None)
    for text in (bad_args, extra, unknown, "Hello", ""):
        assert not required.matches(text), text
    single = tool_call_constraint(fmt, TOOLS, "required", parallel=False).compile(None)
    assert single.matches(one) and not single.matches(two)
    named = tool_call_constraint(fmt, TOOLS, {"type": "function", "function": {"name": "now"}})
    named = named.compile(None)
    assert named.matches(fmt.render_calls(_compact(CALLS[1:]))) and not named.matches(one)
    auto = tool_call_constraint(fmt, TOOLS, "auto").compile(None)
    assert auto.matches(one) and auto.matches("Hello") and not auto.matches(bad_args)
    if fmt.trigger is not None:  # text around the calls; the trigger only opens a call
        assert auto.matches("Let me check. " + two + " Done.") and auto.matches("")
        assert not auto.matches(f"text {fmt.trigger} more text")
        assert not auto.matches("a " + bad_args + " b")
        once = tool_call_constraint(fmt, TOOLS, "auto", parallel=False).compile(None)
        assert once.matches("a " + one + " b") and not once.matches("a " + two)
        assert not once.matches(one + " " + one)
    assert tool_call_constraint(fmt, TOOLS, "none") is None


def test_strict_tools():
    params = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "object", "properties": {"c": {"type": "integer"}}},
        },
    }
    want = copy.deepcopy(params)
    assert strict_schema(params)["required"] == ["a", "b"]
    assert strict_schema(params)["properties"]["b"]["required"] == ["c"]
    assert params == want  # not modified
    fmt = FORMATS["hermes"]
    loose = {"type": "function", "function": {"name": "f", "parameters": params}}
    strict = {"type": "function", "function": {"name": "f", "parameters": params, "strict": True}}
    partial = fmt.render_calls([("f", '{"a":"x"}')])
    full = fmt.render_calls([("f", '{"a":"x","b":{"c":1}}')])
    assert tool_call_constraint(fmt, [loose], "required").compile(None).matches(partial)
    g = tool_call_constraint(fmt, [strict], "required").compile(None)
    assert g.matches(full) and not g.matches(partial)


def test_bad_tools_name_the_tool_and_pointer():
    bad = {
        "type": "function",
        "function": {
            "name": "broken",
            "parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}},
        },
    }
    with pytest.raises(InvalidSchemaError, match=r"tools\[1\] \('broken'\).*/properties/x/type"):
        tool_call_constraint(FORMATS["hermes"], [NOW, bad], "auto")
    with pytest.raises(RequestError, match="not in tools"):
        tool_call_constraint(FORMATS["hermes"], TOOLS, {"function": {"name": "x"}})
    with pytest.raises(RequestError, match="two tools are named"):
        tool_call_constraint(FORMATS["hermes"], [NOW, NOW], "auto")


def test_parser_text_around_calls():
    for name in ("hermes", "mistral", "deepseek_v3"):
        fmt = FORMATS[name]
        two = fmt.render_calls(_compact(CALLS))
        text = "Let me check.\n" + two + "\nDone."
        for step in (1, 5, len(text)):
            parser = ToolCallParser(fmt, "auto")
            deltas = []
            for i in range(0, len(text), step):
                deltas += parser.feed(text[i : i + step])
            content, calls = collect(deltas + parser.finish())
            assert content == "Let me check.\nDone." and len(calls) == 2, (name, step)
        parser = ToolCallParser(fmt, "auto")
        plain = "No call here: " + fmt.trigger[:-1]
        content, calls = collect(parser.feed(plain) + parser.finish())
        assert content == plain and calls is None and not parser.is_complete_call
    fmt = FORMATS["llama3_json"]
    parser = ToolCallParser(fmt, "auto")
    deltas = parser.feed('<|python_tag|>{"name": "now", "parameters": {}}') + parser.finish()
    assert collect(deltas)[1][0]["function"]["name"] == "now" and parser.is_complete_call


def test_free_text_regex_against_reference():
    """The texts without the trigger, exhaustively on short triggers and on random
    texts built from pieces of each built-in trigger (reference: ``trigger not in s``)."""
    import itertools
    import random

    from structgen.fsm import compile_regex
    from structgen.tools.constraint import free_text_regex

    assert free_text_regex("aba") is None  # first character again: not this construction
    for trig in ("ab", "abc", "a-]"):
        g = compile_regex(free_text_regex(trig))
        alphabet = sorted(set(trig)) + ["x"]
        for n in range(7):
            for t in itertools.product(alphabet, repeat=n):
                s = "".join(t)
                assert g.matches(s) == (trig not in s), (trig, s)
    rng = random.Random(0)
    for fmt in FORMATS.values():
        if fmt.trigger is None:
            continue
        g = compile_regex(free_text_regex(fmt.trigger))
        trig = fmt.trigger
        pieces = [trig[:k] for k in range(1, len(trig) + 1)] + [trig[k:] for k in range(len(trig))]
        pieces += ["x", " ", "\n", trig[0]]
        for _ in range(1500):
            s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 5)))
            assert g.matches(s) == (trig not in s), (trig, s)
    # a trigger whose first character recurs: the complement definition instead
    import dataclasses

    fmt = dataclasses.replace(FORMATS["hermes"], trigger="<t<")
    one = fmt.render_calls(_compact(CALLS[:1]))
    auto = tool_call_constraint(fmt, TOOLS, "auto").compile(None)
    assert auto.matches("a " + one + " b") and auto.matches("a <t b")
    assert not auto.matches("a <t< b") and not auto.matches("<t<" + one)
