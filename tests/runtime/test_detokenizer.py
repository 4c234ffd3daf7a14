"""Streaming detokenization: no half characters, no partial stop strings."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from structgen.runtime.detokenizer import IncrementalDetokenizer


def _split_into_tokens(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:]) if b > a]


@given(st.text(min_size=1, max_size=40), st.lists(st.integers(0, 200), max_size=20))
def test_stream_is_valid_utf8_and_reassembles(text, cuts):
    tokens = _split_into_tokens(text.encode("utf-8"), cuts)
    detok = IncrementalDetokenizer(tokens, None)
    pieces = []
    for i in range(len(tokens)):
        detok.add_token(i)
        delta = detok.pop_delta()
        delta.encode("utf-8")  # never a lone surrogate or half character
        pieces.append(delta)
    detok.finish()
    pieces.append(detok.pop_delta())
    assert "".join(pieces) == text == detok.text


@given(
    st.text(alphabet="abSTOP é", min_size=0, max_size=30),
    st.lists(st.integers(0, 100), max_size=15),
)
def test_stop_string_never_streamed_partially(text, cuts):
    stop = "STOP"
    data = (text + stop + "tail").encode("utf-8")
    tokens = _split_into_tokens(data, cuts)
    detok = IncrementalDetokenizer(tokens, (stop,))
    streamed = ""
    for i in range(len(tokens)):
        detok.add_token(i)
        streamed += detok.pop_delta()
        assert stop not in streamed
        if detok.stopped:
            break
    streamed += detok.pop_delta()
    expected = text[: text.find(stop)] if stop in text else text
    assert detok.stopped
    assert streamed == detok.text == expected


def test_incomplete_tail_is_replaced_only_at_finish():
    detok = IncrementalDetokenizer([b"ok", b"\xe6\x97"], None)
    detok.add_token(0)
    detok.add_token(1)
    assert detok.text == "ok"
    assert detok.finish() == "ok\ufffd"
