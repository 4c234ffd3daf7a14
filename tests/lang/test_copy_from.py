"""gen(copy_from=...) on the tiny random Llama: the output is a span of the text (a
brute-force reference), alone and inside a JSON Schema; choices and texts without a span
are refused where the gen is built.
"""

from __future__ import annotations

import pytest

import structgen
from structgen import gen
from structgen.errors import RequestError
from tests.extraction._copy_reference import SCHEMA, TEXT
from tests.extraction._copy_reference import spans as _spans


def test_dsl_gen_copy_from(tiny_engine):
    @structgen.function
    def prog(s):
        s += "Who? " + gen("who", max_tokens=8, copy_from=TEXT)
        s += " Data: " + gen("data", max_tokens=30, json_schema=SCHEMA, copy_from=[TEXT])

    s = prog.run(backend=tiny_engine)
    assert s["who"] in _spans(TEXT)
    assert s["data"]["name"] in _spans(TEXT)
    with pytest.raises(RequestError):
        gen("x", choices=["a", "b"], copy_from=TEXT)
    with pytest.raises(RequestError):
        gen("x", copy_from="   ")


def test_openai_backend_sends_copy_from():
    from structgen.lang.openai_backend import request_body
    from structgen.runtime.sampling_params import SamplingParams

    term = gen("d", json_schema=SCHEMA, copy_from=[TEXT]).constraint
    body = request_body([1, 2], SamplingParams(max_tokens=4), term)
    assert body["extra_body"]["copy_from"] == [TEXT]
    assert body["extra_body"]["response_format"]["json_schema"]["schema"] == SCHEMA


@pytest.mark.parametrize(
    "kw",
    [{"regex": r"[A-Z][a-z]+( [A-Z][a-z]+)?"}, {}, {"json_schema": SCHEMA}],
    ids=["regex", "free-text", "json-schema"],
)
def test_openai_backend_copy_from_builds_the_same_constraint_on_the_server(kw):
    from structgen.lang.openai_backend import request_body
    from structgen.runtime.sampling_params import SamplingParams
    from structgen.server.protocol import CompletionRequest
    from structgen.server.serving import request_constraint

    term = gen("x", copy_from=TEXT, **kw).constraint
    body = request_body([1, 2], SamplingParams(max_tokens=4), term)
    assert body["extra_body"]["copy_from"] == [TEXT]
    assert "regex" not in body["extra_body"] or body["extra_body"]["regex"] == kw.get("regex")
    req = CompletionRequest(model="m", **body["standard"], **body["extra_body"])
    served, _ = request_constraint(req)
    assert served.cache_key() == term.cache_key()
