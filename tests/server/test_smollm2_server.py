"""SmolLM2 behind ``structgen serve``: schema-valid JSON and schema-valid tool calls."""

from __future__ import annotations

import json

import pytest

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

pytestmark = pytest.mark.slow

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "city": {"type": "string", "maxLength": 40},
    },
    "required": ["name", "age", "city"],
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 30},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


@pytest.fixture(scope="module")
def oa(smol_server):
    return openai.OpenAI(base_url=smol_server + "/v1", api_key="none", max_retries=0, timeout=300)


def test_json_schema_validates(oa):
    r = oa.chat.completions.create(
        model="smol",
        temperature=0,
        max_tokens=80,
        messages=[
            {
                "role": "user",
                "content": "Extract the person: Maria Lopez, 34, works as a nurse in Lyon.",
            }
        ],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON, "strict": True},
        },
    )
    data = json.loads(r.choices[0].message.content)
    jsonschema.validate(data, PERSON)
    assert r.choices[0].finish_reason == "stop"


def test_tool_call_arguments_validate(oa):
    r = oa.chat.completions.create(
        model="smol",
        temperature=0,
        max_tokens=60,
        tools=[WEATHER, ADD],
        tool_choice="required",
        messages=[{"role": "user", "content": "What is the weather in Paris, in celsius?"}],
    )
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls"
    schema = {"get_weather": WEATHER, "add": ADD}[call.function.name]["function"]["parameters"]
    jsonschema.validate(json.loads(call.function.arguments), schema)


def test_reasoning_then_schema_after_trigger(oa):
    """The model thinks in free text, and after ``</think>`` answers under the schema."""
    r = oa.chat.completions.create(
        model="smol",
        temperature=0,
        max_tokens=120,
        messages=[
            {
                "role": "system",
                "content": "First think step by step inside <think> ... </think>, then give the "
                "answer as JSON.",
            },
            {
                "role": "user",
                "content": "Extract the person: Maria Lopez, 34, works as a nurse in Lyon.",
            },
        ],
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON, "strict": True},
        },
        extra_body={"constraint_trigger": "</think>"},
    )
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"].strip()  # the text before "</think>"
    jsonschema.validate(json.loads(msg.content), PERSON)


def test_parallel_tool_calls_validate(oa):
    r = oa.chat.completions.create(
        model="smol",
        temperature=0,
        max_tokens=120,
        tools=[WEATHER, ADD],
        tool_choice="required",
        parallel_tool_calls=True,
        messages=[
            {"role": "user", "content": "What is the weather in Paris and in Rome, in celsius?"}
        ],
    )
    calls = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and calls
    for call in calls:
        schema = {"get_weather": WEATHER, "add": ADD}[call.function.name]["function"]["parameters"]
        jsonschema.validate(json.loads(call.function.arguments), schema)
