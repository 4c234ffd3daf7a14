"""DeepSeek-V3 tool calls whose five tool-call texts, tool-sep included, are special tokens.

References: transformers' ``apply_chat_template`` on the deepseek_v3 fixture template (its
turn, written with each special text as its token, is accepted and parses back), a brute
force over every valid calls block of one to three calls for the masks (a byte is
allowed iff it continues a valid block, a special token iff its text does), and
``re`` with ``str.find`` for the free text around the block.
"""

from __future__ import annotations

import copy
import itertools
import json
import random
import re

import pytest

from structgen.fsm import Vocabulary
from structgen.tools import FORMATS, ToolCallParser, collect, tool_call_constraint
from tests.server.test_tool_formats import CALLS, TOOLS, conversation, template
from tests.server.test_tool_llama3 import _allowed as allowed

FMT = FORMATS["deepseek_v3"]
CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
SPECIALS = [CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP]  # ids 1..5; 0 is EOS
TOKENS = [b"<eos>"] + [t.encode() for t in SPECIALS] + [bytes([b]) for b in range(256)]
BYTE0 = 1 + len(SPECIALS)
DIGIT = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["a"],
}
DIGIT_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": DIGIT}} for name in ("f", "g")
]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return Vocabulary(TOKENS, eos_token_ids=[0], special_token_ids=range(len(SPECIALS) + 1))


def _ids(text: str) -> list[int]:
    """``text`` as tokens: each special text as its token, everything else as bytes."""
    out, i = [], 0
    while i < len(text):
        hit = next((k for k, t in enumerate(SPECIALS) if text.startswith(t, i)), None)
        if hit is None:
            out += [BYTE0 + b for b in text[i].encode()]
            i += 1
        else:
            out.append(1 + hit)
            i += len(SPECIALS[hit])
    return out


def _allowed(matcher) -> set[int]:
    return allowed(matcher, len(TOKENS))


def _accepts(grammar, ids: list[int]) -> bool:
    m = grammar.matcher()
    return all(m.advance(t) for t in ids) and m.is_accepting()


def test_transformers_turn_as_tokens_accepted_and_parsed(tiny_tokenizer, vocab):
    msgs = conversation(CALLS)
    kw = {"tools": TOOLS, "chat_template": template("deepseek_v3"), "tokenize": False}
    full = tiny_tokenizer.apply_chat_template(copy.deepcopy(msgs), **kw)
    # the last block is the assistant turn's (the system prompt shows the format too)
    turn = full[full.rindex(CALLS_BEGIN) : full.rindex(CALLS_END) + len(CALLS_END)]
    assert SEP in turn and turn.count(CALL_BEGIN) == 2
    # the template writes arguments with spaces, the constraint compact: the same calls
    compact = FMT.render_calls([(n, json.dumps(a, separators=(",", ":"))) for n, a in CALLS])
    assert compact.replace(" ", "") == turn.replace(" ", "")
    for choice in ("required", "auto"):
        grammar = tool_call_constraint(FMT, TOOLS, choice).compile(vocab)
        assert _accepts(grammar, _ids(compact)), choice  # every special text as its token
        as_chars = [BYTE0 + b for b in compact.encode()]
        assert _accepts(grammar, as_chars), choice  # and as its characters
    for text in (turn, compact):
        parser = ToolCallParser(FMT, "call")
        content, calls = collect(parser.feed(text) + parser.finish())
        assert content is None
        assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
            (n, a) for n, a in CALLS
        ]


def _blocks(max_calls: int) -> list[str]:
    calls = [FMT.render_call(n, '{"a":%d}' % d) for n in ("f", "g") for d in range(10)]
    out = []
    for k in range(1, max_calls + 1):
        for seq in itertools.product(calls, repeat=k):
            out.append(FMT.render_calls([]).replace(CALLS_END, "") + "\n".join(seq) + CALLS_END)
    return out


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_masks_against_brute_force(choice, vocab):
    """Along a two-call turn (after some text for ``auto``) written with every special
    text as its token, each mask inside the calls block is exactly the bytes and special
    tokens whose text continues some valid block of up to three calls (the turn's prefixes
    are continued by blocks of at most three calls, so the brute force is complete)."""
    grammar = tool_call_constraint(FMT, DIGIT_TOOLS, choice).compile(vocab)
    valid = _blocks(3)
    text = "Hi. " if choice == "auto" else ""
    block = FMT.render_calls([("f", '{"a":4}'), ("g", '{"a":0}')])
    m = grammar.matcher()
    for b in text.encode():  # free text: the calls-begin token may come, no other special
        got = _allowed(m)
        assert 1 in got and not got & {2, 3, 4, 5} and BYTE0 + ord("H") in got
        assert m.advance(BYTE0 + b)
    done = ""
    for tid in _ids(block):
        got = _allowed(m) - {0}
        if choice == "auto" and not done:  # still free text, as above
            assert 1 in got and not got & {2, 3, 4, 5} and BYTE0 + ord("H") in got
            assert m.advance(tid)
            done += TOKENS[tid].decode()
            continue
        live = [v[len(done) :] for v in valid if v.startswith(done)]
        want = {BYTE0 + v.encode()[0] for v in live if v}
        want |= {1 + k for k, t in enumerate(SPECIALS) if any(v.startswith(t) for v in live)}
        assert got == want, (choice, done)
        assert m.advance(tid)
        done += TOKENS[tid].decode()
    assert done == block and m.is_accepting()


def _reference(s: str) -> tuple[bool, tuple[int, int]]:
    """``auto``'s language: text without the calls-begin text, optionally one calls
    block and text without it again; with the block's span (empty when none)."""
    call = (
        re.escape(CALL_BEGIN + "function" + SEP)
        + "[fg]"
        + re.escape("\n```json\n")
        + r'\{"a":[0-9]\}'
        + re.escape("\n```" + CALL_END)
    )
    block = re.escape(CALLS_BEGIN) + f"{call}(?:\n{call})*" + re.escape(CALLS_END)
    i = s.find(CALLS_BEGIN)
    if i < 0:
        return True, (len(s), len(s))
    for j in range(i, len(s) + 1):
        if re.fullmatch(block, s[i:j]) and CALLS_BEGIN not in s[j:]:
            return True, (i, j)
    return False, (0, 0)


def _chars(text: str) -> list[int]:
    return [BYTE0 + b for b in text.encode()]


def test_random_turns_against_reference(vocab):
    """Random texts from pieces of the format: accepted exactly when the reference says
    so, written as characters (no vocabulary) and with the block's special texts as
    their tokens (free text never holds a special token); each accepted text with a
    block parses into its calls."""
    grammar = tool_call_constraint(FMT, DIGIT_TOOLS, "auto").compile(vocab)
    plain = tool_call_constraint(FMT, DIGIT_TOOLS, "auto").compile(None)
    one = FMT.render_call("f", '{"a":3}')
    pieces = [CALLS_BEGIN, CALLS_END, CALL_BEGIN, CALL_END, SEP, one, "\n", "a ", "function"]
    pieces += [FMT.render_calls([("g", '{"a":1}')]), CALLS_BEGIN + one]
    rng = random.Random(0)
    seen = set()
    for _ in range(300):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 4)))
        want, (i, j) = _reference(s)
        seen.add((want, i < j))
        assert plain.matches(s) == want, s
        assert _accepts(grammar, _chars(s)) == want, s
        ids = _chars(s[:i]) + _ids(s[i:j]) + _chars(s[j:])
        assert _accepts(grammar, ids) == want, s
        if want and any(t in s[:i] + " " + s[j:] for t in SPECIALS):
            assert not _accepts(grammar, _ids(s)), s  # a special token in free text
        if i < j:
            parser = ToolCallParser(FMT, "auto")
            _, calls = collect(parser.feed(s) + parser.finish())
            assert calls and all(json.loads(c["function"]["arguments"]) for c in calls), s
    assert seen == {(True, True), (True, False), (False, False)}
