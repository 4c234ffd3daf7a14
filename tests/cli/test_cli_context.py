"""``structgen generate`` at the model's context: a prompt with no room is one error line
(exit 2), an output the context's end cut is reported as that, not as ``--max-tokens``.

Reference: the engine's own ``max_request_tokens()`` and tokenizer (the tiny model's
512-token context) for the prompt lengths and the limit the messages name.
"""

from __future__ import annotations

from structgen.cli import main


def _prompt_of(tiny_engine, num_tokens: int) -> str:
    """A raw prompt the model's tokenizer encodes as exactly ``num_tokens`` tokens."""
    words = ["x"]
    while len(tiny_engine.tokenizer.encode(" ".join(words), add_special_tokens=False)) < num_tokens:
        words.append("x")
    text = " ".join(words)
    assert len(tiny_engine.tokenizer.encode(text, add_special_tokens=False)) == num_tokens
    return text


def test_generate_names_the_context_as_what_cut_the_output(tiny_llama_dir, tiny_engine, capsys):
    limit = tiny_engine.max_request_tokens()
    argv = ["generate", "--model", str(tiny_llama_dir), "--raw", "--max-tokens", "20"]

    assert main([*argv, "--prompt", _prompt_of(tiny_engine, limit - 4)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip()
    assert captured.err.strip() == (
        f"structgen: warning: cut by the end of the model's context ({limit} tokens, prompt "
        "included); shorten the prompt for a longer output"
    )

    assert main([*argv, "--prompt", _prompt_of(tiny_engine, limit - 4), "--regex", "a{50}"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"structgen: error: cut by the end of the model's context ({limit}")

    assert main([*argv, "--prompt", _prompt_of(tiny_engine, limit)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"structgen: error: prompt has {limit} tokens; this engine's context allows at most "
        f"{limit - 1} (max_model_len, or the KV cache's size where smaller)"
    )
