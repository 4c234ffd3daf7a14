"""``errors.LengthLimit``: the limit that cut an output, as a structured value, worded as
every message about such a cut words it (``length_cut``'s words, written out by hand), and
set on the ``ExtractionError`` of each cut extract reports (on a stand-in engine whose
outputs are cut as a 300-token context or ``max_tokens`` would cut them); messages as
before, word for word."""

from __future__ import annotations

import pytest

from structgen.errors import ExtractionError, LengthLimit, length_cut, length_limit
from structgen.extraction import extract
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.sampling_params import SamplingParams

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
    "required": ["n", "ok"],
    "additionalProperties": False,
}


def test_length_limit_is_max_tokens_when_the_output_has_max_tokens_tokens():
    assert length_limit(20, 20, 512) == LengthLimit("max_tokens", 20)
    assert length_limit(21, 20, 512) == LengthLimit("max_tokens", 20)
    assert length_limit(19, 20, 512) == LengthLimit("context", 512)


def test_a_limit_is_worded_as_length_cut_words_it():
    assert str(LengthLimit("max_tokens", 20)) == "max_tokens=20"
    assert str(LengthLimit("context", 512)) == (
        "the end of the model's context (512 tokens, prompt included)"
    )
    assert LengthLimit("max_tokens", 20).remedy() == "raise max_tokens"
    assert LengthLimit("context", 512).remedy() == "shorten the prompt"
    assert LengthLimit("max_tokens", 20).remedy("raise --max-tokens", "x") == "raise --max-tokens"
    assert LengthLimit("context", 512).remedy("x", "shorten the text") == "shorten the text"
    for n, max_tokens in ((20, 20), (7, 20)):
        limit = length_limit(n, max_tokens, 512)
        assert length_cut(n, max_tokens, 512, "A", "B") == (
            str(limit),
            "A" if limit.name == "max_tokens" else "B",
        )


def test_a_limit_has_one_of_two_names():
    with pytest.raises(ValueError, match="'max_tokens' or 'context', got 'kv_cache'"):
        LengthLimit("kv_cache", 10)


def test_extraction_error_has_no_limit_unless_given():
    err = ExtractionError("boom", raw_text="x", finish_reason="error")
    assert err.cut_by is None and str(err) == "boom"


class CutEngine:
    """Answers every text with ``OUTPUTS[text]``: ``(text, number of tokens, finish_reason)``;
    its context holds 300 tokens."""

    vocab = None
    OUTPUTS = {
        "open-max": ('{"n":0,', 512, "length"),  # max_tokens (512) cut it, JSON open
        "open-context": ('{"n":0,', 7, "length"),  # the context cut it, JSON open
        "closed-max": ('{"n":0}', 512, "length"),  # closed, but not schema-valid
        "closed-context": ('{"n":0}', 7, "length"),
        "ok": ('{"n":1,"ok":true}', 5, "stop"),
        "failed": ("", 0, "error"),
    }

    #: the answer to a text OUTPUTS does not list (None: such a text is a KeyError)
    DEFAULT: tuple[str, int, str] | None = None

    def make_request(self, prompt, params, constraint):
        return prompt[-1]["content"]

    def run_requests(self, reqs, listener=None):
        outs = []
        for text in reqs:
            listed = text in self.OUTPUTS or self.DEFAULT is None
            out, n, why = self.OUTPUTS[text] if listed else self.DEFAULT
            error = "prompt too long" if why == "error" else None
            outs.append(RequestOutput(text=out, token_ids=[0] * n, finish_reason=why, error=error))
        for i, out in enumerate(outs):
            if listener is not None:
                listener(i, out)
        return outs

    def max_request_tokens(self):
        return 300


CONTEXT = "the end of the model's context (300 tokens, prompt included)"
EXPECTED = {  # text: (message, cut_by)
    "open-max": (
        "extraction did not complete: max_tokens=512 was reached before the JSON was "
        "complete; raise max_tokens",
        LengthLimit("max_tokens", 512),
    ),
    "open-context": (
        f"extraction did not complete: {CONTEXT} was reached before the JSON was complete; "
        "shorten the text, or create the engine with a larger max_model_len",
        LengthLimit("context", 300),
    ),
    "closed-max": (
        "extraction was cut by max_tokens=512 and its JSON is not schema-valid at /: 'ok' is "
        "a required property",
        LengthLimit("max_tokens", 512),
    ),
    "closed-context": (
        f"extraction was cut by {CONTEXT} and its JSON is not schema-valid at /: 'ok' is a "
        "required property",
        LengthLimit("context", 300),
    ),
    "failed": ("extraction did not complete: prompt too long", None),
}


def test_each_cut_extraction_error_names_its_limit():
    texts = list(EXPECTED) + ["ok"]
    params = SamplingParams(max_tokens=512, temperature=0.0)
    *errors, ok = extract(CutEngine(), SCHEMA, texts, params=params, errors="return", copy=False)
    assert ok == {"n": 1, "ok": True}
    for text, err in zip(EXPECTED, errors):
        message, cut_by = EXPECTED[text]
        assert isinstance(err, ExtractionError), text
        assert (str(err), err.cut_by) == (message, cut_by), text
