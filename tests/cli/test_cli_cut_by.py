"""`structgen extract` names the ``--max-tokens`` flag after an error that ``max_tokens``
cut, told by the error's ``cut_by`` (``errors.LengthLimit``), not by its text: a cut by the
context gets no flag, a schema-invalid output ``max_tokens`` cut gets it too, and an error
whose text says "raise max_tokens" without a limit gets none. On the stand-in engine of
``tests/test_errors.py`` (outputs cut as ``max_tokens`` or a 300-token context cut them)."""

from __future__ import annotations

import json

import pytest

from structgen import cli
from structgen.errors import ExtractionError
from tests.test_errors import EXPECTED, SCHEMA, CutEngine


@pytest.fixture
def schema(tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "_engine", lambda args: CutEngine())
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def _flag(text):
    return " (--max-tokens)" if text.endswith("-max") else ""


@pytest.mark.parametrize("text", list(EXPECTED))
def test_a_single_text_names_the_flag_when_max_tokens_cut_it(schema, capsys, text):
    code = cli.main(["extract", "--schema", str(schema), "--text", text])
    err = capsys.readouterr().err
    message = EXPECTED[text][0]
    raw = CutEngine.OUTPUTS[text][0]
    raw = f" (raw output: {raw!r})" if raw else ""
    assert code == 1
    assert err.strip() == f"structgen: error: {message}{_flag(text)}{raw}"


def test_jsonl_error_lines_name_the_flag_when_max_tokens_cut_them(schema, tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(t) + "\n" for t in EXPECTED))
    code = cli.main(["extract", "--schema", str(schema), "--input", str(inp)])
    rows = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert rows == [
        {
            "error": f"{inp}:{i}: {EXPECTED[text][0]}{_flag(text)}",
            "raw_text": CutEngine.OUTPUTS[text][0],
        }
        for i, text in enumerate(EXPECTED, 1)
    ]


def test_the_flag_is_told_by_the_limit_not_by_the_text(tmp_path):
    worded = ExtractionError("x hit max_tokens; raise max_tokens", "{", finish_reason="length")
    out = tmp_path / "out.jsonl"
    with open(out, "w") as f:
        cli._write_result(f, worded, "in.jsonl:1")
    assert json.loads(out.read_text()) == {
        "error": "in.jsonl:1: x hit max_tokens; raise max_tokens",
        "raw_text": "{",
    }
