"""Structural tags end to end: ``Engine.generate`` on the tiny random Llama.

Reference: the plain-Python reading of structural tags (``_reference.tag_reference``)
with ``re`` and ``jsonschema`` on each region's content.
"""

from __future__ import annotations

import json
import re

import jsonschema

from structgen import SamplingParams, StructuralTag, TagStructure
from tests.fsm.tags._reference import tag_reference

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["n"],
}


def _json_ok(text: str) -> bool:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    return text == text.strip() and jsonschema.Draft202012Validator(SCHEMA).is_valid(value)


def test_generate_regions_valid(tiny_engine) -> None:
    spec = StructuralTag(
        [
            TagStructure("<f=a>", "</f>", schema=SCHEMA),
            TagStructure("<f=b>", "</f>", regex="[xy]{1,3}"),
        ],
        triggers=["<f="],
        at_least_one=True,
    )
    ref = [("<f=a>", _json_ok, "</f>"), ("<f=b>", lambda s: re.fullmatch("[xy]{1,3}", s), "</f>")]
    params = [SamplingParams(max_tokens=24, temperature=1.0, seed=s) for s in range(4)]
    outs = tiny_engine.generate(["Call a tool."] * 4, params, constraint=spec)
    for out in outs:
        text = out.text
        assert out.finish_reason in ("stop", "length"), out
        assert tag_reference(text, ["<f="], ref, at_least_one=True), text
        assert "<f=" in text
    json_only = StructuralTag(
        [TagStructure("<f=a>", "</f>", schema=SCHEMA)], at_least_one=True, stop_after_first=True
    )
    outs = tiny_engine.generate(["Call a tool."] * 2, params[:2], constraint=json_only)
    for out in outs:
        assert out.finish_reason in ("stop", "length"), out
        assert tag_reference(out.text, ["<f=a>"], ref[:1], stop_after_first=True), out.text
        assert out.text.endswith("</f>")
