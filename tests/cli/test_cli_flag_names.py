"""The CLI names its flags, not the Python API's keywords, in its error lines.

References: the API's own messages for the same mistakes (``detect_syntax``'s for a grammar
whose syntax ``auto`` cannot tell; ``Engine``'s ``ConfigError`` for an engine setting),
with the keyword replaced by the flag.
"""

from __future__ import annotations

import pytest

from benchmarks.support import free_port
from structgen import Engine
from structgen.cli import main
from structgen.errors import ConfigError, InvalidGrammarError
from structgen.fsm.grammar import detect_syntax
from tests.cli.test_cli_errors import _one_error_line

NO_RULES = '{"type": "object"}\n'  # a JSON Schema given as --grammar (the trial's mistake)
BOTH = 'root ::= "a"\nx: "b"\n'


@pytest.mark.parametrize("text", [NO_RULES, BOTH], ids=["no_rules", "both_kinds"])
def test_grammar_syntax_auto_asks_for_the_syntax_flag(tmp_path, capsys, monkeypatch, text):
    import structgen.cli as cli

    monkeypatch.setattr(cli, "_engine", lambda args: pytest.fail("model loaded"))
    path = tmp_path / "g.txt"
    path.write_text(text)
    with pytest.raises(InvalidGrammarError) as api:
        detect_syntax(text)
    api_message = str(api.value)
    assert api_message.endswith("; pass syntax='lark', 'gbnf' or 'ebnf'")  # the API's keyword
    assert main(["generate", "--prompt", "hi", "--grammar", str(path)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    reason = api_message.removesuffix("; pass syntax='lark', 'gbnf' or 'ebnf'")
    assert line == (
        f"structgen: error: --grammar {path}: {reason}; pass --syntax lark, gbnf or ebnf"
    )


def test_grammar_with_the_syntax_flag_is_read_as_that_syntax(tmp_path, capsys, monkeypatch):
    """``--syntax gbnf`` is honoured: the both-kinds file is read as GBNF, whose reader
    refuses the Lark rule (a syntax error, not a request for the flag)."""
    import structgen.cli as cli

    monkeypatch.setattr(cli, "_engine", lambda args: pytest.fail("model loaded"))
    path = tmp_path / "g.gbnf"
    path.write_text(BOTH)
    assert main(["generate", "--prompt", "hi", "--grammar", str(path), "--syntax", "gbnf"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"structgen: error: --grammar {path}: ") and "--syntax" not in line


def test_serve_engine_setting_errors_name_the_flag(tiny_llama_dir, capsys):
    """``serve --max-model-len`` past the model's 512 positions and ``--page-size 0``: the
    engine's ConfigError with ``EngineConfig.<field>`` spelt as the flag, exit 2."""
    with pytest.raises(ConfigError) as api:
        Engine(str(tiny_llama_dir), dtype="float32", max_model_len=513)
    assert str(api.value).startswith("EngineConfig.max_model_len=513 is more than")
    model = ["--model", str(tiny_llama_dir), "--dtype", "float32", "--port", str(free_port())]
    assert main(["serve", *model, "--max-model-len", "513"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    expected = str(api.value).replace("EngineConfig.max_model_len=", "--max-model-len ")
    assert line == f"structgen: error: {expected}"
    assert main(["serve", *model, "--page-size", "0"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line == "structgen: error: --page-size must be an int >= 1, got 0"
