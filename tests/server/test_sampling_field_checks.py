"""Sampling fields the OpenAI API bounds are refused with a 400 naming the field, where
the sampler would otherwise ignore them silently.

References: OpenAI's API reference (``logit_bias`` values "from -100 to 100";
``top_logprobs`` needs ``logprobs: true``) and vLLM's request checks (``logit_bias`` and
``stop_token_ids`` ids outside the vocabulary; ``top_logprobs`` 0 alone is allowed).
"""

from __future__ import annotations

import pytest

from tests.server.test_app import CHAT, COMP, _error, chat

OUT_OF_VOCAB = 10**7  # no model here has that many rows


@pytest.mark.parametrize("bias", [100.5, -101, 500])
def test_logit_bias_outside_openai_range_is_400(client, bias):
    err = _error(chat(client, logit_bias={"5": bias}))
    assert err["param"] == "logit_bias.5"
    assert "100" in err["message"]


@pytest.mark.parametrize("endpoint", [CHAT, COMP])
@pytest.mark.parametrize("field", ["logit_bias", "stop_token_ids"])
def test_token_ids_outside_the_vocabulary_are_400(client, endpoint, field):
    value = {str(OUT_OF_VOCAB): 5} if field == "logit_bias" else [3, OUT_OF_VOCAB]
    body = {"model": "tiny", "max_tokens": 4, "temperature": 0, field: value}
    if endpoint == CHAT:
        body["messages"] = [{"role": "user", "content": "Hi there"}]
    else:
        body["prompt"] = "Hi there"
    err = _error(client.post(endpoint, json=body))
    assert err["param"] == field
    assert f"token id {OUT_OF_VOCAB} is not in this model's vocabulary" in err["message"]


def test_logit_bias_at_the_bounds_still_applies(client):
    """+100 on one id makes greedy decoding write only that id (the bias reaches the
    sampler); -100 on it then keeps it out of the same request's output."""
    forced = chat(client, logit_bias={"7": 100}, max_tokens=4, ignore_eos=True, logprobs=True)
    assert forced.status_code == 200, forced.text
    toks = forced.json()["choices"][0]["logprobs"]["content"]
    assert len(toks) == 4 and len({t["token"] for t in toks}) == 1
    banned = chat(client, logit_bias={"7": -100}, max_tokens=4, ignore_eos=True, logprobs=True)
    assert banned.status_code == 200, banned.text
    assert toks[0]["token"] not in {
        t["token"] for t in banned.json()["choices"][0]["logprobs"]["content"]
    }


def test_top_logprobs_needs_logprobs(client):
    err = _error(chat(client, top_logprobs=3))
    assert err["param"] == "top_logprobs" and "logprobs: true" in err["message"]
    assert chat(client, top_logprobs=0).status_code == 200  # vLLM allows 0 alone
    r = chat(client, top_logprobs=2, logprobs=True)
    assert r.status_code == 200
    assert len(r.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"]) == 2


def test_constraint_trigger_message_lists_every_constraint_field(client):
    err = _error(chat(client, constraint_trigger="</think>"))
    assert err["param"] == "constraint_trigger"
    for field in ("grammar", "ebnf", "structural_tag", "structured_outputs", "tools"):
        assert field in err["message"]


def test_a_negative_seed_is_400_naming_the_field(client):
    """It was a 400 with no ``param`` and numpy's text ("expected non-negative integer")."""
    err = _error(chat(client, seed=-1, temperature=1.0))
    assert err["param"] == "seed" and "greater than or equal to 0" in err["message"]
    assert chat(client, seed=0, temperature=1.0).status_code == 200
