"""An input too long for the model's context: ``structgen extract`` and ``structgen
generate`` refuse it with the same exit code (2, bad input) and one error line of the same
shape, naming the prompt's length and the limit; in a JSON Lines batch the text's error
line says the same and the other texts run.

Reference: the tiny model's context (``tiny_engine.max_request_tokens()``) and, for the
length an extraction prompt has, what ``structgen.extraction.extract`` itself sends: the
scheduler's own refusal of that request names its token count; ``extract`` raises it as
``ExtractionPromptTooLongError``, both an ExtractionError and generate's
``PromptTooLongError``.
"""

from __future__ import annotations

import json
import re

import pytest

from structgen.cli import main
from structgen.extraction import extract

_TOO_LONG = re.compile(
    r"prompt has (\d+) tokens; this engine's context allows at most (\d+) "
    r"\(max_model_len, or the KV cache's size where smaller\)"
)
_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(_SCHEMA))
    return path


def _sent_tokens(tiny_engine, text: str) -> int | None:
    """The token count of the prompt ``extract`` sends for ``text``, read from the
    scheduler's refusal of it (None when the prompt fit)."""
    res = extract(tiny_engine, _SCHEMA, [text], errors="return")[0]
    found = _TOO_LONG.fullmatch(str(res))
    return None if found is None else int(found.group(1))


def test_extract_and_generate_refuse_an_input_too_long_alike(
    tiny_llama_dir, tiny_engine, schema_file, capsys
):
    limit = tiny_engine.max_request_tokens()
    text = " ".join(["x"] * (2 * limit))
    model = ["--model", str(tiny_llama_dir)]

    assert main(["generate", *model, "--raw", "--prompt", text]) == 2
    err_g = capsys.readouterr().err.strip()
    assert main(["extract", *model, "--schema", str(schema_file), "--text", text]) == 2
    captured = capsys.readouterr()
    err_e = captured.err.strip()
    assert captured.out == ""

    for err in (err_g, err_e):
        assert err.count("\n") == 0
        assert _TOO_LONG.fullmatch(err.removeprefix("structgen: error: ")), err
    num_g = int(_TOO_LONG.search(err_g).group(1))
    num_e, most = map(int, _TOO_LONG.search(err_e).groups())
    assert num_g == len(tiny_engine.tokenizer.encode(text, add_special_tokens=False))
    assert num_e == _sent_tokens(tiny_engine, text)  # the prompt extract sends, not the text's
    assert most == limit - 1


def test_extract_refuses_exactly_the_prompts_with_no_room(
    tiny_llama_dir, tiny_engine, schema_file, capsys
):
    """The boundary: a text whose extraction prompt leaves one token of room runs (its
    output is cut by the context), one more word is refused before anything runs."""
    limit = tiny_engine.max_request_tokens()
    lo, hi = 1, 2 * limit  # words: lo fits, hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _sent_tokens(tiny_engine, " ".join(["x"] * mid)) else (mid, hi)
    argv = ["extract", "--model", str(tiny_llama_dir), "--schema", str(schema_file), "--text"]

    assert main([*argv, " ".join(["x"] * hi)]) == 2
    err = capsys.readouterr().err.strip()
    assert _TOO_LONG.fullmatch(err.removeprefix("structgen: error: ")), err
    assert int(_TOO_LONG.search(err).group(1)) == _sent_tokens(tiny_engine, " ".join(["x"] * hi))

    main([*argv, " ".join(["x"] * lo)])
    err = capsys.readouterr().err
    assert "prompt has" not in err and "context" in err  # ran; the context cut its output


def test_a_jsonl_text_too_long_is_its_error_line(
    tiny_llama_dir, tiny_engine, schema_file, tmp_path, capsys
):
    limit = tiny_engine.max_request_tokens()
    long_text = " ".join(["x"] * (2 * limit))
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps("a = 3") + "\n" + json.dumps(long_text) + "\n")
    argv = ["extract", "--model", str(tiny_llama_dir), "--schema", str(schema_file)]

    assert main([*argv, "--input", str(inp), "--max-tokens", "16"]) == 1
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert len(rows) == 2
    assert "prompt has" not in json.dumps(rows[0])
    assert rows[1]["raw_text"] == ""
    where, _, message = rows[1]["error"].partition(": ")
    assert where == f"{inp}:2"
    assert _TOO_LONG.fullmatch(message), message
    assert int(_TOO_LONG.search(message).group(1)) == _sent_tokens(tiny_engine, long_text)
    assert captured.err.strip().endswith("structgen: error: 1 of 2 extractions failed")


def test_extract_raises_prompt_too_long_like_generate_and_returns_it_in_a_batch(tiny_engine):
    from structgen.errors import ExtractionError, ExtractionPromptTooLongError, PromptTooLongError

    limit = tiny_engine.max_request_tokens()
    long_text = " ".join(["x"] * (2 * limit))
    with pytest.raises(PromptTooLongError) as info:
        tiny_engine.generate([long_text], None)
    generate_msg = str(info.value)
    with pytest.raises(ExtractionPromptTooLongError) as info:
        extract(tiny_engine, _SCHEMA, long_text)
    err = info.value
    assert isinstance(err, PromptTooLongError) and isinstance(err, ExtractionError)
    assert err.finish_reason == "error" and err.raw_text == ""
    got, most = map(int, _TOO_LONG.fullmatch(str(err)).groups())
    assert most == limit - 1 == int(_TOO_LONG.fullmatch(generate_msg).group(2))
    assert got > int(_TOO_LONG.fullmatch(generate_msg).group(1))  # schema and template too

    short = "a = 3"
    res = extract(tiny_engine, _SCHEMA, [short, long_text, short], errors="return",
                  params=None)  # fmt: skip
    assert isinstance(res[1], ExtractionPromptTooLongError) and str(res[1]) == str(err)
    assert res[0] == res[2] == extract(tiny_engine, _SCHEMA, short)
