"""`structgen extract` of a text whose output the model's context cut (not --max-tokens):
the error names the context and its remedy, without the ``(--max-tokens)`` hint that a
``max_tokens`` cut gets; on a stand-in engine whose context is 300 tokens."""

from __future__ import annotations

import json

import pytest

from structgen import cli
from structgen.runtime.outputs import RequestOutput

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class ShortContextEngine:
    """Cuts every output after 7 tokens, as a 300-token context would (max_tokens: 512)."""

    vocab = None

    def make_request(self, prompt, params, constraint):
        return prompt[-1]["content"]

    def run_requests(self, reqs, listener=None):
        outs = [RequestOutput(text='{"n":', token_ids=[0] * 7, finish_reason="length")]
        outs *= len(reqs)
        for i, out in enumerate(outs):
            if listener is not None:
                listener(i, out)
        return outs

    def max_request_tokens(self):
        return 300


CONTEXT_CUT = (
    "extraction did not complete: the end of the model's context (300 tokens, prompt "
    "included) was reached before the JSON was complete; shorten the text, or create the "
    "engine with a larger max_model_len"
)


@pytest.fixture
def schema(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_engine", lambda args: ShortContextEngine())
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def test_a_single_text_cut_by_the_context(schema, capsys):
    code = cli.main(["extract", "--schema", str(schema), "--text", "Ann is 3."])
    err = capsys.readouterr().err
    assert code == 1
    assert err.strip() == f"structgen: error: {CONTEXT_CUT} (raw output: '{{\"n\":')"


def test_a_jsonl_text_cut_by_the_context(schema, tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps("Ann is 3.") + "\n")
    code = cli.main(["extract", "--schema", str(schema), "--input", str(inp)])
    rows = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert rows == [{"error": f"{inp}:1: {CONTEXT_CUT}", "raw_text": '{"n":'}]
