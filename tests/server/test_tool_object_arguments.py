"""A tool call's arguments are one JSON object, whatever the tool's ``parameters`` leave
open: a schema without ``type`` is read with ``"type": "object"`` beside its keywords, and
one whose ``type`` excludes objects is refused (OpenAI's API refuses it too: "schema must
be a JSON Schema of 'type: "object"'").

Reference: ``jsonschema`` validation of the arguments against the tool's own schema and
against ``{"type": "object"}``, on texts the call grammar accepts or refuses.
"""

from __future__ import annotations

import json

import jsonschema
import pytest

from structgen.errors import InvalidSchemaError
from structgen.server.protocol import Tool
from structgen.server.tools import plan_tools
from structgen.tools import FORMATS
from structgen.tools.constraint import tool_call_constraint
from tests.server.test_app import _error, chat


def _tool(params) -> dict:
    fn = {"name": "f"} if params is None else {"name": "f", "parameters": params}
    return {"type": "function", "function": fn}


def _grammar(params):
    plan = plan_tools([Tool.model_validate(_tool(params))], "required")
    return plan.constraint.compile(None)


ARGUMENTS = ["{}", '{"a":1}', '{"a":"x","b":[1]}', "5", '"x"', "[1,2]", "null", "true"]


@pytest.mark.parametrize(
    "params",
    [None, {}, {"properties": {"a": {"type": "integer"}}}, {"type": ["object", "null"]}],
    ids=["absent", "empty", "no_type", "object_or_null"],
)
def test_arguments_are_an_object_the_schema_accepts(params):
    g = _grammar(params)
    schema = {} if params is None else params
    for args in ARGUMENTS:
        value = json.loads(args)
        listed = set(schema.get("properties", {}))  # arguments hold listed properties only
        valid = (
            isinstance(value, dict)
            and set(value) <= listed
            and jsonschema.Draft202012Validator(schema).is_valid(value)
        )
        assert g.matches(f'{{"name":"f","arguments":{args}}}') is valid, args


@pytest.mark.parametrize(
    "params", [{"type": "array"}, {"type": ["string", "null"]}], ids=["array", "string_null"]
)
def test_parameters_that_exclude_objects_are_refused(params, client):
    with pytest.raises(InvalidSchemaError) as info:
        tool_call_constraint(FORMATS["structgen_json"], [_tool(params)], "required")
    assert str(info.value) == (
        "tools[0] ('f'): function.parameters: a tool's parameters describe its arguments, one "
        f"JSON object, so their schema must allow type 'object'; got type {params['type']!r} "
        "(at /type)"
    )
    err = _error(chat(client, tools=[_tool(params)], tool_choice="required"))
    assert "must allow type 'object'" in err["message"] and err["code"] == "invalid_schema"
