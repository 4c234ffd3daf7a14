"""Native tool calls whose tags are special tokens: the tiny random Llama with the
Qwen-style template, its tokenizer given ``<tool_call>`` and ``</tool_call>`` as special
added tokens (as Qwen2.5's has them).

References: the masks at the call's fixed texts are compared with a brute force over
the whole vocabulary (a non-special token is allowed iff its bytes continue the fixed
text; of the special tokens only the tag's own id); the end-to-end request is checked
with jsonschema and by the tokens it returned.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.server.conftest import in_process_server
from tests.server.test_tool_calls_openai import SCHEMAS, TOOLS, tiny_qwen_dir

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

BEGIN, END = "<tool_call>", "</tool_call>"


@pytest.fixture(scope="module")
def tag_tokenizer():
    from benchmarks.support import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": [BEGIN, END]})
    return tok


@pytest.fixture(scope="module")
def tag_vocab(tag_tokenizer):
    from structgen.fsm import Vocabulary

    return Vocabulary.from_tokenizer(tag_tokenizer)


def _allowed(matcher, n: int) -> set[int]:
    mask = torch.zeros((1, (n + 31) // 32), dtype=torch.int32)
    matcher.fill_bitmask(mask, 0)
    bits = mask.view(torch.uint8).numpy()[0]
    return {i for i in range(n) if (bits[i // 8] >> (i % 8)) & 1}


def _continuing(vocab, texts: list[bytes]) -> set[int]:
    """Non-special ids whose bytes are a non-empty prefix of one of ``texts``."""
    return {
        i
        for i, b in enumerate(vocab.token_bytes)
        if b and i not in vocab.special_token_ids and any(t.startswith(b) for t in texts)
    }


def _heads(rest: str = "") -> list[bytes]:
    return [
        (rest + '\n{"name": ' + json.dumps(n) + ', "arguments": ').encode()
        for n in ("get_weather", "add")
    ]


def test_mask_allows_the_tag_token(tag_tokenizer, tag_vocab):
    from structgen.tools import FORMATS, tool_call_constraint

    vocab, fmt = tag_vocab, FORMATS["hermes"]
    begin_id, end_id = (tag_tokenizer.convert_tokens_to_ids(t) for t in (BEGIN, END))
    assert {begin_id, end_id} <= vocab.special_token_ids
    assert BEGIN.encode() not in [
        vocab.token_bytes[i] for i in range(vocab.vocab_size) if i not in vocab.special_token_ids
    ]
    n = vocab.vocab_size
    for choice, parallel in (("required", False), ("required", True), ("auto", False)):
        grammar = tool_call_constraint(fmt, TOOLS, choice, parallel).compile(vocab)
        m = grammar.matcher()
        got = _allowed(m, n)
        specials = got & vocab.special_token_ids
        if choice == "required":  # the call's begin: its token, or its characters
            assert got - {begin_id} == _continuing(vocab, [BEGIN.encode() + h for h in _heads()])
            assert specials == {begin_id}
        else:  # free text: no special token but the trigger (and EOS where it may end)
            assert begin_id in got and end_id not in got
            assert specials <= {begin_id} | vocab.eos_token_ids
        assert m.advance(begin_id)
        assert _allowed(m, n) == _continuing(vocab, _heads())  # the rest of the head
        for t in tag_tokenizer.encode(
            '\n{"name": "add", "arguments": {"a":3}}\n', add_special_tokens=False
        ):
            assert m.advance(t)
        got = _allowed(m, n)  # the call's end: its token, or its characters
        assert got - {end_id} == _continuing(vocab, [END.encode()])
        assert end_id in got
        assert m.advance(end_id)
        after = _allowed(m, n)
        if choice == "required" and not parallel:
            assert after == vocab.eos_token_ids & set(range(n))
        elif choice == "required":  # another call after a newline, or the end
            assert after == _continuing(vocab, [b"\n<"]) | (vocab.eos_token_ids & set(range(n)))
        else:  # free text after the one call: the trigger no more
            assert begin_id not in after and after & vocab.eos_token_ids


@pytest.fixture(scope="module")
def tag_server(tag_tokenizer, tmp_path_factory):
    """Base URL of an in-process server over the tiny Llama with the tag tokens."""
    from structgen import AsyncEngine

    path = tiny_qwen_dir(tag_tokenizer, tmp_path_factory.mktemp("tiny_qwen_tags"))
    engine = AsyncEngine(str(path), dtype="float32", max_kv_tokens=4096, page_size=4)
    with in_process_server(engine, "qwen-tags-server", served_model_name="tiny-qwen") as base:
        yield base


def test_call_starting_with_the_tag_token(tag_tokenizer, tag_server):
    """The tag tokens biased up: the call is written with them, and parsed back."""
    oa = openai.OpenAI(base_url=tag_server + "/v1", api_key="x", max_retries=0, timeout=60)
    begin_id, end_id = (tag_tokenizer.convert_tokens_to_ids(t) for t in (BEGIN, END))
    kw = {
        "model": "tiny-qwen",
        "messages": [{"role": "user", "content": "Weather in Lyon?"}],
        "max_tokens": 80,
        "temperature": 0,
        "tools": TOOLS,
        "logit_bias": {str(begin_id): 100, str(end_id): 100},
        "logprobs": True,
    }
    for choice, parallel in (("required", False), ("auto", False)):
        r = oa.chat.completions.create(**kw, tool_choice=choice, parallel_tool_calls=parallel)
        msg, lp = r.choices[0].message, r.choices[0].logprobs
        assert r.choices[0].finish_reason == "tool_calls", msg
        assert len(msg.tool_calls) == 1
        if choice == "required":
            assert msg.content is None
        else:  # a call then free text (content), which never holds the tag
            assert BEGIN not in (msg.content or "")
        call = msg.tool_calls[0]
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
        tokens = [t.token for t in lp.content]
        assert tokens[0] == BEGIN and END in tokens  # each tag one token


# the tool-call texts each family's vocabulary has as special tokens
FAMILY_TOKENS = {
    "hermes": ["<tool_call>", "</tool_call>"],
    "mistral": ["[TOOL_CALLS]"],
    "deepseek_v3": [
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁sep｜>",
    ],
}


@pytest.mark.parametrize("name", ["hermes", "mistral", "deepseek_v3"])
def test_every_tag_token_allowed_where_its_tag_is(name):
    """A vocabulary of the 256 bytes plus every special text of the family
    (``FAMILY_TOKENS``, DeepSeek's tool-sep included): along the one call, at every step
    the mask is exactly the bytes that continue some valid turn, plus the special tokens
    whose text comes next in some valid turn (brute force over the ten valid turns)."""
    from structgen.fsm import Vocabulary
    from structgen.tools import FORMATS, tool_call_constraint

    fmt = FORMATS[name]
    tags = set(FAMILY_TOKENS[name])
    texts = sorted(tags)
    tokens = [b"<eos>"] + [t.encode() for t in texts] + [bytes([b]) for b in range(256)]
    special = {i + 1: t for i, t in enumerate(texts)}
    vocab = Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0, *special])
    tool = [t for t in TOOLS if t["function"]["name"] == "add"]
    turns = [fmt.render_calls([("add", '{"a":%d}' % d)]).encode() for d in range(10)]
    for choice in ("required", "auto"):
        m = tool_call_constraint(fmt, tool, choice, parallel=False).compile(vocab).matcher()
        done = b""
        turn = turns[3]
        while done != turn:
            got = _allowed(m, len(tokens))
            want = {
                len(texts) + 1 + b
                for b in range(256)
                if any(t.startswith(done + bytes([b])) for t in turns)
            }
            want |= {
                i
                for i, t in special.items()
                if t in tags and any(u.startswith(done + t.encode()) for u in turns)
            }
            if choice == "auto" and not done:  # free text: any character, no other token
                got &= want | set(special)
            assert got - {0} == want, (name, choice, done)
            nxt = next(
                (i for i, t in special.items() if t in tags and turn.startswith(done + t.encode())),
                None,
            )
            nxt = len(texts) + 1 + turn[len(done)] if nxt is None else nxt
            assert m.advance(nxt)
            done += tokens[nxt]
        assert m.is_accepting()


def test_call_then_content(tag_tokenizer, tag_server):
    """``auto``, the tag tokens biased up and EOS down: the model writes one call, then
    text until max_tokens; the text after the call's end token comes back as content
    (the reference: the returned tokens after ``</tool_call>``), streamed and not."""
    oa = openai.OpenAI(base_url=tag_server + "/v1", api_key="x", max_retries=0, timeout=60)
    begin_id, end_id = (tag_tokenizer.convert_tokens_to_ids(t) for t in (BEGIN, END))
    bias = {str(begin_id): 100, str(end_id): 100, str(tag_tokenizer.eos_token_id): -100}
    kw = {
        "model": "tiny-qwen",
        "messages": [{"role": "user", "content": "Weather in Lyon?"}],
        "max_tokens": 90,
        "temperature": 0,
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "logit_bias": bias,
    }
    r = oa.chat.completions.create(**kw, logprobs=True)
    msg, tokens = r.choices[0].message, [t.token for t in r.choices[0].logprobs.content]
    assert tokens[0] == BEGIN and END in tokens and len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    lp = r.choices[0].logprobs.content[tokens.index(END) + 1 :]  # the tokens' bytes, joined
    after = b"".join(bytes(t.bytes) for t in lp).decode("utf-8", errors="replace")
    assert after.strip() and msg.content == after.strip()  # whitespace next to a call dropped
    assert BEGIN not in msg.content
    content, streamed_calls = "", {}
    # the same request streamed (logprobs too: a request reporting them is not jump-forwarded)
    for chunk in oa.chat.completions.create(**kw, logprobs=True, stream=True):
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            entry = streamed_calls.setdefault(tc.index, ["", ""])
            entry[0] += (tc.function.name or "") if tc.function else ""
            entry[1] += (tc.function.arguments or "") if tc.function else ""
    assert content == msg.content
    assert streamed_calls == {0: [call.function.name, call.function.arguments]}


def test_grammar_with_token_edges_through_the_client(tag_tokenizer, tag_server):
    """A chat completion whose ``structured_outputs`` / ``ebnf`` grammar holds a special
    token by name, ``!<...>`` (one token but that one), ``<[id]>`` of an ordinary token and
    ``<[*]>``: the returned tokens (logprobs) are exactly that shape, the special tokens
    written as themselves, each edge one token."""
    oa = openai.OpenAI(base_url=tag_server + "/v1", api_key="x", max_retries=0, timeout=60)
    z = tag_tokenizer.encode("Z", add_special_tokens=False)
    assert len(z) == 1
    begin_id = tag_tokenizer.convert_tokens_to_ids(BEGIN)
    grammar = f'root ::= "A" <tool_call> !<tool_call> !<[{begin_id}]> <[{z[0]}]> <[*]> </tool_call>'
    kw = {
        "model": "tiny-qwen",
        "messages": [{"role": "user", "content": "Go."}],
        "max_tokens": 20,
        "temperature": 0,
        "logprobs": True,
        # pull the sampler towards the excluded token: the mask must still refuse it
        "logit_bias": {str(begin_id): 50},
    }
    for extra in ({"structured_outputs": {"grammar": grammar}}, {"ebnf": grammar}):
        r = oa.chat.completions.create(**kw, extra_body=extra)
        tokens = [t.token for t in r.choices[0].logprobs.content]
        assert r.choices[0].finish_reason == "stop", tokens
        assert len(tokens) == 7, tokens  # every edge took exactly one token
        assert tokens[:2] == ["A", BEGIN] and tokens[4] == "Z" and tokens[6] == END, tokens
        assert BEGIN not in tokens[2:4], tokens
