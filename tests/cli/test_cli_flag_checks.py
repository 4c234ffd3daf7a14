"""Flags whose value cannot work, or that do nothing with the others given, are refused or
named before any model loads (no traceback, no silent no-op).

References: argparse's own usage errors (exit 2, ``structgen <cmd>: error: argument
--flag: ...``), uvicorn's log levels, and ``socket.bind``'s port range (0 to 65535).
"""

from __future__ import annotations

import argparse
import json

import pytest

import structgen.cli as cli
from structgen.cli import main
from structgen.cli.inputs import CliError


@pytest.fixture
def no_model(monkeypatch):
    """Any engine start fails the test (serve's AsyncEngine and the one-shot commands')."""
    import structgen.runtime.async_engine as async_engine

    def fail(*a, **kw):
        pytest.fail("the model must not load")

    monkeypatch.setattr(async_engine, "AsyncEngine", fail)
    monkeypatch.setattr(cli, "_engine", fail)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "99999"], "argument --port: must be a TCP port from 0 to 65535, got 99999"),
        (["--port", "-1"], "argument --port: must be a TCP port from 0 to 65535, got -1"),
        (["--port", "x"], "argument --port: invalid int value: 'x'"),
        (["--max-n", "0"], "argument --max-n: must be an int >= 1, got 0"),
        (["--log-level", "loud"], "argument --log-level: invalid choice: 'loud'"),
    ],
    ids=["port_high", "port_negative", "port_text", "max_n_zero", "log_level"],
)
def test_serve_flag_values_are_usage_errors(no_model, capsys, flags, message):
    with pytest.raises(SystemExit) as exc:
        main(["serve", "--model", "m.gguf", *flags])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"structgen serve: error: {message}" in err and "Traceback" not in err


def test_serve_log_levels_are_uvicorns():
    pytest.importorskip("uvicorn")
    from uvicorn.config import LOG_LEVELS

    assert cli._LOG_LEVELS == list(LOG_LEVELS)


def test_syntax_without_grammar_is_an_error(no_model, capsys):
    assert main(["generate", "--prompt", "hi", "--regex", "a", "--syntax", "lark"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "structgen: error: --syntax lark goes with --grammar FILE (it is that file's syntax)"
    ]


def test_syntax_auto_is_still_the_grammar_default(no_model, tmp_path, capsys):
    """Without --syntax a grammar is read as ``auto`` (its GBNF rules tell it), and the
    same file with ``--syntax auto`` is accepted alike: both reach the engine start."""
    path = tmp_path / "g.gbnf"
    path.write_text('root ::= "yes" | "no"\n')
    for extra in ([], ["--syntax", "auto"]):
        with pytest.raises(pytest.fail.Exception, match="the model must not load"):
            main(["generate", "--prompt", "hi", "--grammar", str(path), *extra])


@pytest.mark.parametrize(
    ("flags", "warned"),
    [(["--seed", "3"], True), (["--seed", "3", "--temperature", "0.7"], False), ([], False)],
    ids=["seed_greedy", "seed_sampled", "no_seed"],
)
def test_seed_without_temperature_is_named(monkeypatch, capsys, flags, warned):
    """``generate`` is greedy unless --temperature is given, so a lone --seed changes
    nothing: a warning says so before the model loads."""

    def stop(args):
        raise CliError("stopped before the model", code=3)

    monkeypatch.setattr(cli, "_engine", stop)
    assert main(["generate", "--prompt", "hi", *flags]) == 3
    err = capsys.readouterr().err
    line = "structgen: warning: --seed has no effect without --temperature"
    assert (line in err) is warned


def test_version_flag_prints_the_package_version(capsys):
    import structgen

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"structgen {structgen.__version__}"


@pytest.mark.parametrize("command", ["extract", "generate", "serve"])
def test_every_flag_has_help(command):
    """``structgen <command> --help`` explains every flag (none is a bare metavar)."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bare = [a.option_strings[0] for a in sub.choices[command]._actions if not a.help]
    assert bare == []


def test_a_negative_seed_is_a_usage_error(no_model, capsys):
    """The sampler seeds numpy's PCG64 (torch's generator on CUDA) with it, which takes no
    negative seed: refused by argparse before any model work, not a ValueError traceback."""
    import numpy as np

    with pytest.raises(ValueError):  # the reference: what the sampler's generator says
        np.random.default_rng(-5)
    with pytest.raises(SystemExit) as exc:
        main(["generate", "--prompt", "hi", "--temperature", "1", "--seed", "-5"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "structgen generate: error: argument --seed: must be an int >= 0, got -5" in err


LINES = ['"Ann is 3."', '{"text": "Bo is 4."}', "", '"Cy is 5."']


@pytest.mark.parametrize(
    ("name", "json_lines"),
    [
        ("in.jsonl", True),
        ("IN.JSONL", True),
        ("in.ndjson", True),
        ("in.NDJson", True),
        ("in.txt", False),
        ("in.json", False),
        ("jsonl", False),
    ],
)
def test_json_lines_inputs_are_told_by_their_ending_in_any_case(tmp_path, name, json_lines):
    """A ``.JSONL`` or ``.ndjson`` file is one text a line (it was one document, its whole
    JSON text extracted as one result); other endings stay one document."""
    from argparse import Namespace

    from structgen.cli.inputs import read_texts

    path = tmp_path / name
    content = "\n".join(LINES) + "\n"
    path.write_text(content)
    texts, lines = read_texts(Namespace(text=None, input=str(path)))
    if json_lines:  # the reference: json.loads of each non-blank line
        values = [json.loads(ln) for ln in LINES if ln]
        assert texts == [v if isinstance(v, str) else v["text"] for v in values]
        assert lines == [1, 2, 4]
    else:
        assert (texts, lines) == ([content], None)
