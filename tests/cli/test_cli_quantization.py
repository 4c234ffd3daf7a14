"""``--quantization`` of ``structgen extract`` / ``generate`` reaches ``Engine``; without it
the engine's default applies (no ``quantization`` argument passed)."""

from __future__ import annotations

import pytest

from structgen import cli
from structgen.runtime import engine as engine_module


@pytest.mark.parametrize("command", ["extract", "generate"])
@pytest.mark.parametrize("value", [None, "gguf", "int8"])
def test_quantization_flag_reaches_the_engine(monkeypatch, command, value):
    calls = []
    monkeypatch.setattr(engine_module, "Engine", lambda *a, **k: calls.append((a, k)))
    argv = [command, "--schema", "s.json"] if command == "extract" else [command, "--prompt", "p"]
    argv += [] if value is None else ["--quantization", value]
    cli._engine(cli.build_parser().parse_args(argv))
    assert calls == [((None,), {} if value is None else {"quantization": value})]


def test_unknown_quantization_is_one_error_line(tmp_path, capsys):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object"}')
    code = cli.main(["extract", "--schema", str(schema), "--text", "x", "--quantization", "q9"])
    err = capsys.readouterr().err
    assert code != 0 and "q9" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
