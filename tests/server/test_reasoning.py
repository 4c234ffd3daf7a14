"""ReasoningSplit (no model): any chunking of the text gives ``str.partition``'s split."""

from __future__ import annotations

import random

import pytest

from structgen.server.reasoning import ReasoningSplit

TEXTS = [
    'I think <</thi</thinking> ok</think>{"a":1}</think>x',
    "</think>{}",
    "no trigger here </thin",
    "</thi",
    "abc</think>",
]


@pytest.mark.parametrize("text", TEXTS)
def test_split_matches_partition_for_any_chunking(text):
    head, sep, tail = text.partition("</think>")
    want = {"reasoning_content": head or None, "content": (tail or None) if sep else None}
    if not sep:
        want["reasoning_content"] = text or None
    rng = random.Random(0)
    for _ in range(30):
        split, deltas, i = ReasoningSplit("</think>"), [], 0
        while i < len(text):
            j = i + rng.randint(1, 5)
            deltas += split.feed(text[i:j])
            i = j
        deltas += split.finish()
        assert ReasoningSplit.merge(deltas) == want
        assert all(v for d in deltas for v in d.values())  # no empty deltas
        assert split.found == bool(sep)


def test_held_back_only_while_it_may_be_the_trigger():
    split = ReasoningSplit("</think>")
    assert split.feed("abc </th") == [{"reasoning_content": "abc "}]
    assert split.feed("ing") == [{"reasoning_content": "</thing"}]
    assert split.feed("</think>{") == [{"content": "{"}]
    assert split.feed("}") == [{"content": "}"}] and split.finish() == []
