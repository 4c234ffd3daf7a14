"""extract's messages for what a user gets wrong, each checked word for word: an output cut
by the model's context (not ``max_tokens``), ``params.n`` > 1, and a stop string that ends
the JSON early. The limit that cut an output is told from its token count, as the CLI's
``generate`` tells it (``errors.length_cut``)."""

from __future__ import annotations

import pytest

from structgen import Engine, SamplingParams
from structgen.errors import ExtractionError, RequestError, length_cut
from structgen.extraction import extraction_messages

# a string of 40 characters at least: its JSON cannot close within a few tokens
LONG = {
    "type": "object",
    "properties": {"note": {"type": "string", "minLength": 40}},
    "required": ["note"],
}
TEXT = "Ann is 3 and fine."


def test_length_cut_names_the_limit_that_cut_the_output():
    assert length_cut(20, 20, 512) == ("max_tokens=20", "raise max_tokens")
    assert length_cut(7, 20, 512, "raise --max-tokens") == (
        "the end of the model's context (512 tokens, prompt included)",
        "shorten the prompt",
    )
    assert length_cut(7, 20, 512, shorten_prompt="shorten the text") == (
        "the end of the model's context (512 tokens, prompt included)",
        "shorten the text",
    )


@pytest.fixture(scope="module")
def short_context_engine(tiny_llama_dir, tiny_engine):
    """The tiny Llama with a context that leaves 6 tokens after extract's prompt of TEXT."""
    prompt = tiny_engine.make_request(extraction_messages(LONG, TEXT), SamplingParams())
    limit = len(prompt.prompt_token_ids) + 6
    engine = Engine(
        str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=4, max_model_len=limit
    )
    assert engine.max_request_tokens() == limit
    return engine


def test_an_output_cut_by_the_context_says_so(short_context_engine):
    params = SamplingParams(max_tokens=200, temperature=0.0)
    with pytest.raises(ExtractionError) as info:
        short_context_engine.extract(LONG, TEXT, params=params, copy=False)
    limit = short_context_engine.max_request_tokens()
    assert str(info.value) == (
        f"extraction did not complete: the end of the model's context ({limit} tokens, "
        "prompt included) was reached before the JSON was complete; shorten the text, or "
        "create the engine with a larger max_model_len"
    )
    assert info.value.finish_reason == "length"


def test_an_output_cut_by_max_tokens_names_max_tokens(tiny_engine):
    params = SamplingParams(max_tokens=4, temperature=0.0)
    (err,) = tiny_engine.extract(LONG, [TEXT], params=params, copy=False, errors="return")
    assert isinstance(err, ExtractionError) and err.finish_reason == "length"
    assert str(err) == (
        "extraction did not complete: max_tokens=4 was reached before the JSON was complete; "
        "raise max_tokens"
    )


@pytest.mark.parametrize("n", [2, 5])
def test_n_above_one_names_extract_and_n(tiny_engine, n):
    with pytest.raises(RequestError) as info:
        tiny_engine.extract(LONG, TEXT, params=SamplingParams(n=n))
    assert str(info.value) == (
        f"extract: params.n={n}, but extract returns one object per text; leave n at 1 (for "
        "several samples of one text, call Engine.generate with a JsonSchema constraint and n)"
    )


def test_a_stop_string_that_ends_the_json_names_stop(tiny_engine):
    params = SamplingParams(max_tokens=60, temperature=0.0, stop=['"'])
    with pytest.raises(ExtractionError) as info:
        tiny_engine.extract(LONG, TEXT, params=params, copy=False)
    assert str(info.value) == (
        "extraction did not complete: the output ended at params.stop=['\"'] before its "
        "JSON was complete; extract's grammar ends the JSON itself: leave stop unset"
    )
    assert info.value.finish_reason == "error"
