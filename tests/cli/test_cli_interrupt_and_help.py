"""Ctrl-C prints one line on stderr and exits 130 for every command (a JSON Lines job's
line says what finished); ``--help`` shows no reST markup from the docstrings."""

from __future__ import annotations

import json

import pytest

from structgen import cli

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class CtrlCEngine:
    """Ctrl-C arrives while the engine generates."""

    vocab = None

    def generate(self, prompts, params, constraint=None):
        raise KeyboardInterrupt

    def make_request(self, prompt, params, constraint):
        return prompt

    def run_requests(self, reqs, listener=None):
        raise KeyboardInterrupt


@pytest.fixture
def schema(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    return str(path)


@pytest.mark.parametrize("where", ["load", "generation"])
@pytest.mark.parametrize("command", ["generate", "extract"])
def test_ctrl_c_says_interrupted_and_exits_130(command, where, schema, monkeypatch, capsys):
    def engine(args):
        if where == "load":
            raise KeyboardInterrupt
        return CtrlCEngine()

    monkeypatch.setattr(cli, "_engine", engine)
    argv = (
        ["generate", "--prompt", "Hi"]
        if command == "generate"
        else ["extract", "--schema", schema, "--text", "n is 7"]
    )
    code = cli.main(argv)
    cap = capsys.readouterr()
    assert code == 130
    assert cap.err == "structgen: interrupted\n"
    assert cap.out == ""


def test_a_jsonl_job_prints_its_own_interrupt_line_only(schema, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "_engine", lambda args: CtrlCEngine())
    inp = tmp_path / "in.jsonl"
    inp.write_text('"n is 1"\n"n is 2"\n')
    code = cli.main(["extract", "--schema", schema, "--input", str(inp)])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "interrupted" in ln]
    assert code == 130
    assert lines == [
        f"structgen: interrupted: 0 of 2 documents finished, 0 written; the first not "
        f"written is {inp}:1"
    ]


@pytest.mark.parametrize(
    ("command", "description"),
    [
        ([], "The structgen command: extract (schema-driven extraction), generate, serve."),
        (["extract"], "structgen extract: print one JSON object per input text."),
        (["generate"], "structgen generate: print the generated text."),
        (["serve"], "structgen serve: the OpenAI-compatible HTTP server (needs the server extra)."),
    ],
)
def test_help_has_no_rest_markup(command, description, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([*command, "--help"])
    out = capsys.readouterr().out
    assert info.value.code == 0
    assert "`" not in out
    assert description in " ".join(out.split())  # argparse wraps long lines
