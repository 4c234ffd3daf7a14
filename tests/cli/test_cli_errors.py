"""The CLI's error cases: one line on stderr, non-zero exit, no traceback, no model load."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from structgen.cli import main


def _run(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "structgen", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    assert lines[0].startswith("structgen: error: ")
    return lines[0]


def test_missing_schema_file(tmp_path):
    proc = _run(["extract", "--schema", "nope.json", "--text", "x"], tmp_path)
    assert proc.returncode == 2
    assert "schema file not found: nope.json" in _one_error_line(proc.stderr)
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "content, expected, code",
    [
        ("{not json", "is not valid JSON", 2),
        (
            '{"type": "object", "properties": {"a": {"type": "strnig"}}}',
            "not a valid JSON Schema at /properties/a/type",
            2,
        ),
        (
            '{"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": true}}}',
            "'uniqueItems' at /properties/tags",
            2,
        ),
        ("[1, 2]", "must hold a JSON object", 2),
    ],
)
def test_bad_schema_files(tmp_path, capsys, content, expected, code):
    path = tmp_path / "s.json"
    path.write_text(content)
    assert main(["extract", "--schema", str(path), "--text", "x"]) == code
    err = capsys.readouterr().err
    assert expected in _one_error_line(err), err


def test_model_not_found_says_how(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}))
    proc = _run(
        ["extract", "--schema", str(schema), "--text", "x", "--model", str(tmp_path / "m.gguf")],
        tmp_path,
    )
    assert proc.returncode == 1
    line = _one_error_line(proc.stderr)
    assert "m.gguf" in line


def test_missing_input(tmp_path, capsys):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "string"}')
    assert main(["extract", "--schema", str(schema), "--input", str(tmp_path / "in.txt")]) == 2
    assert "input file not found" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("value, expected", [("0", "must be an int >= 1, got 0"),
                                             ("-3", "must be an int >= 1, got -3"),
                                             ("abc", "invalid int value: 'abc'")])  # fmt: skip
@pytest.mark.parametrize("command", ["extract", "generate"])
def test_bad_max_tokens_is_a_usage_error(tmp_path, capsys, monkeypatch, command, value, expected):
    """``--max-tokens`` below 1 is refused by the parser, naming the flag (not the API's
    ``SamplingParams.max_tokens``), before the schema is read or a model loads."""
    import structgen.cli as cli

    monkeypatch.setattr(cli, "_engine", lambda args: pytest.fail("model loaded"))
    args = ["--schema", "nope.json", "--text", "x"] if command == "extract" else ["--prompt", "x"]
    with pytest.raises(SystemExit) as exc:
        main([command, *args, "--max-tokens", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"structgen {command}: error: argument --max-tokens: {expected}" in err
    assert "SamplingParams" not in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_bad_temperature_is_a_usage_error(monkeypatch, capsys, value):
    """``--temperature`` below 0 or not finite is refused by the parser, naming the flag
    (not ``SamplingParams.temperature``), before a model loads."""
    import structgen.cli as cli

    monkeypatch.setattr(cli, "_engine", lambda args: pytest.fail("model loaded"))
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--prompt", "x", "--temperature", value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    expected = f"must be a finite number >= 0, got {float(value)!r}"  # SamplingParams' own rule
    assert f"error: argument --temperature: {expected}" in err
    assert "SamplingParams" not in err and "Traceback" not in err


def test_unreadable_input_and_schema_files(tmp_path, capsys):
    """A directory given as a file, or a non-UTF-8 --input file, is one error line naming
    the file (a non-UTF-8 input was a UnicodeDecodeError traceback)."""
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "string"}')
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"Jos\xe9, 34.\n")
    cases = [
        (["--schema", str(tmp_path), "--text", "x"], f"schema file is a directory: {tmp_path}"),
        (["--schema", str(schema), "--input", str(tmp_path)], "input file is a directory: "),
        (["--schema", str(schema), "--input", str(latin)], f"input file {latin} is not UTF-8"),
    ]
    for args, expected in cases:
        assert main(["extract", *args]) == 2
        assert expected in _one_error_line(capsys.readouterr().err)


def test_empty_prompt(capsys):
    assert main(["generate", "--prompt", " ", "--regex", "a"]) == 2
    assert "--prompt is empty" in _one_error_line(capsys.readouterr().err)


def test_bad_regex(tmp_path, capsys):
    assert main(["generate", "--prompt", "x", "--regex", "(a"]) == 2
    assert "--regex" in _one_error_line(capsys.readouterr().err)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("depth, expected", [(100_000, "depth limit"), (6_000, "depth limit")])
def test_deep_schema_file_is_one_line(tmp_path, capsys, depth, expected):
    """A schema file nested past the depth limits (the JSON text's, the schema's) prints one
    error line naming the limit, no traceback (#20)."""
    path = tmp_path / "deep.json"
    path.write_text('{"type": "array", "items": ' * depth + "{}" + "}" * depth)
    assert main(["extract", "--schema", str(path), "--text", "x"]) == 2
    err = capsys.readouterr().err
    assert expected in _one_error_line(err), err


@pytest.mark.timeout(60)
def test_ref_chain_schema_file_is_one_line(tmp_path, capsys):
    """A schema file whose 100,000-long ``$ref`` chain passes the depth limit prints one
    error line naming the limit and the pointer (#20)."""
    defs = ",".join(f'"d{i}":{{"$ref":"#/$defs/d{i + 1}"}}' for i in range(100_000))
    path = tmp_path / "chain.json"
    path.write_text('{"$defs":{' + defs + ',"d100000":{"type":"integer"}},"$ref":"#/$defs/d0"}')
    assert main(["extract", "--schema", str(path), "--text", "x"]) == 2
    err = capsys.readouterr().err
    line = _one_error_line(err)
    assert "depth limit" in line and line.endswith("at /$defs/d4999"), err


@pytest.mark.timeout(60)
def test_deep_invalid_schema_file_names_the_pointer(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text('{"items": ' * 400 + '{"type": "strnig"}' + "}" * 400)
    assert main(["extract", "--schema", str(path), "--text", "x"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "not a valid JSON Schema at " + "/items" * 400 + "/type" in line, line


def test_generate_says_when_max_tokens_cut_the_output(tiny_llama_dir, capsys):
    """A ``generate`` output stopped by ``--max-tokens`` is printed and reported: without a
    constraint, or closed validly by the budget-aware matcher, as a stderr warning (exit
    0); cut before it matches the constraint, as an error (exit 1), as ``extract`` does;
    an output that ended by itself is not reported."""
    argv = ["generate", "--model", str(tiny_llama_dir), "--prompt", "x", "--raw"]
    assert main([*argv, "--max-tokens", "3"]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() and "cut by max_tokens=3; raise" in captured.err
    assert main([*argv, "--max-tokens", "3", "--regex", "a{1,200}"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "aaa\n"
    assert "cut by max_tokens=3: the constraint closed the output early" in captured.err
    assert main([*argv, "--max-tokens", "3", "--regex", "a{200}"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("a") and len(captured.err.strip().splitlines()) == 1
    assert "before the output matched the constraint" in captured.err
    assert main([*argv, "--max-tokens", "3", "--regex", "a"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "a\n" and "cut by" not in captured.err
