"""Llama 3.1/3.2 tool calls: the custom JSON call as the whole turn (what the template
documents) or after ``<|python_tag|>`` (one special token), on one structural tag.

References: transformers' ``apply_chat_template`` on the llama3 fixture template (the
turn it writes must be accepted and parse back), ``lead not in s`` for the free text,
a brute force over the valid turns for the masks of a vocabulary where the lead is a
special token.
"""

from __future__ import annotations

import copy
import itertools
import json
import random

import pytest
import torch

from structgen.fsm import compile_regex
from structgen.tools import FORMATS, ToolCallParser, collect, tool_call_constraint
from structgen.tools.constraint import free_text_regex
from tests.server.test_tool_formats import CALLS, TOOLS, conversation, template

LEAD = "<|python_tag|>"
FMT = FORMATS["llama3_json"]


def _parse(text: str, mode: str, step: int) -> tuple:
    parser = ToolCallParser(FMT, mode)
    deltas = []
    for i in range(0, len(text), step):
        deltas += parser.feed(text[i : i + step])
    content, calls = collect(deltas + parser.finish())
    return content, calls, parser.is_complete_call


def test_free_text_not_first_against_reference():
    for trig, not_first in (("ab", "x"), ("abc", "{x"), ("a-]", "]")):
        g = compile_regex(free_text_regex(trig, not_first=not_first))
        alphabet = sorted(set(trig + not_first)) + ["y"]
        for n in range(7):
            for t in itertools.product(alphabet, repeat=n):
                s = "".join(t)
                want = trig not in s and not (s and s[0] in not_first)
                assert g.matches(s) == want, (trig, not_first, s)
    with pytest.raises(ValueError, match="first character"):
        free_text_regex("ab", not_first="a")


def _transformers_turn(hf) -> str:
    """The assistant turn transformers writes for the first call, without <|eot_id|>."""
    msgs = conversation(CALLS[:1])
    kw = {"tools": TOOLS, "chat_template": template("llama3"), "tokenize": False}
    prompt = hf.apply_chat_template(copy.deepcopy(msgs[:2]), add_generation_prompt=True, **kw)
    full = hf.apply_chat_template(copy.deepcopy(msgs), **kw)
    assert full.startswith(prompt) and full.endswith("<|eot_id|>")
    return full[len(prompt) : -len("<|eot_id|>")]


def test_transformers_turn_accepted_and_parsed(tiny_tokenizer):
    turn = _transformers_turn(tiny_tokenizer)
    assert turn.startswith('{"name": "get_weather", "parameters": ')
    # the template renders arguments with spaces: the constraint writes them compact,
    # so the turn is checked as the same call with compact arguments
    name, args = CALLS[0]
    compact = FMT.render_call(name, json.dumps(args, separators=(",", ":")))
    assert json.loads(compact) == json.loads(turn)
    required = tool_call_constraint(FMT, TOOLS, "required").compile(None)
    auto = tool_call_constraint(FMT, TOOLS, "auto").compile(None)
    for text in (compact, LEAD + compact):
        assert required.matches(text) and auto.matches(text), text
    for text in (turn, LEAD + turn, compact):  # the parser takes both spacings
        for mode in ("call", "auto"):
            for step in (1, 3, len(text)):
                content, calls, complete = _parse(text, mode, step)
                assert content is None and complete, (text, mode, step)
                assert [
                    (c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls
                ] == [CALLS[0]]


def test_constraint_languages():
    one = FMT.render_call("get_weather", '{"city":"Lyon"}')
    now = FMT.render_call("now", "{}")
    required = tool_call_constraint(FMT, TOOLS, "required").compile(None)
    auto = tool_call_constraint(FMT, TOOLS, "auto").compile(None)
    named = tool_call_constraint(FMT, TOOLS, {"function": {"name": "now"}}).compile(None)
    assert named.matches(now) and named.matches(LEAD + now) and not named.matches(one)
    for text in ("Hello", "", "Let me check. " + one, one + " done", LEAD, LEAD + LEAD + one):
        assert not required.matches(text), text
    for text in ("Hello", "", "a { b", "Let me check. " + LEAD + one, "x" + LEAD + now, "a " + one):
        assert auto.matches(text), text
    for text in (
        "{not a call",  # a turn starting with { is a call
        "text " + LEAD + " more",  # the lead only opens a call
        "a " + LEAD + one + " b",  # the call ends the turn
        LEAD + FMT.render_call("get_weather", '{"unit":"C"}'),  # city is required
    ):
        assert not auto.matches(text), text
    parsed = _parse("Let me check. " + LEAD + one, "auto", 2)
    assert parsed[0] == "Let me check." and parsed[1][0]["function"]["name"] == "get_weather"
    assert parsed[2]


def _allowed(matcher, n: int) -> set[int]:
    mask = torch.zeros((1, (n + 31) // 32), dtype=torch.int32)
    matcher.fill_bitmask(mask, 0)
    bits = mask.view(torch.uint8).numpy()[0]
    return {i for i in range(n) if (bits[i // 8] >> (i % 8)) & 1}


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_mask_allows_the_lead_token(choice):
    """A vocabulary of the 256 bytes plus <|python_tag|> as a special token: along a
    call after the lead (and, for auto, after some text), every mask is exactly the
    bytes continuing a valid turn plus the lead's id where the lead may come."""
    from structgen.fsm import Vocabulary

    tokens = [b"<eos>", LEAD.encode()] + [bytes([b]) for b in range(256)]
    vocab = Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0, 1])
    tool = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
                    "required": ["a"],
                },
            },
        }
    ]
    calls = [FMT.render_call("f", '{"a":%d}' % d).encode() for d in range(10)]
    text = b"Hi. " if choice == "auto" else b""
    valid = [text + LEAD.encode() + c for c in calls] + ([] if text else calls)
    m = tool_call_constraint(FMT, tool, choice).compile(vocab).matcher()
    seq = [(b + 2, bytes([b])) for b in text] + [(1, LEAD.encode())]
    seq += [(b + 2, bytes([b])) for b in calls[4]]
    done = b""
    for tid, piece in seq:
        got = _allowed(m, len(tokens)) - {0}
        if choice == "auto" and len(done) <= len(text):  # free text: the lead may come
            assert 1 in got
            assert ord("{") + 2 in got  # a bare call at the start, text later
        else:
            want = {
                b + 2 for b in range(256) if any(v.startswith(done + bytes([b])) for v in valid)
            }
            if not done:
                want.add(1)  # required: the call bare, or the lead's token first
            assert got == want, (choice, done)
        assert m.advance(tid)
        done += piece
    assert m.is_accepting() and _allowed(m, len(tokens)) == {0}


def test_random_turns_parse_and_validate():
    """Random texts around a call: accepted exactly when the reference says so, and each
    accepted turn parses into content and the call."""
    auto = tool_call_constraint(FMT, TOOLS, "auto").compile(None)
    rng = random.Random(0)
    one = FMT.render_call("get_weather", '{"city":"Lyon"}')
    pieces = ["a", " ", "{", "<", "<|", LEAD[:-1], LEAD, one, "\n"]
    for _ in range(400):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
        if s == one or s == LEAD + one:
            want = True
        elif s.endswith(LEAD + one):
            head = s[: -len(LEAD + one)]
            want = LEAD not in head and not head.startswith("{")
        else:
            want = LEAD not in s and not s.startswith("{")
        assert auto.matches(s) == want, s
        if want:
            content, calls, _ = _parse(s, "auto", 3)
            called = s == one or s.endswith(LEAD + one)  # else the JSON is text
            assert (calls is not None) == called, s
