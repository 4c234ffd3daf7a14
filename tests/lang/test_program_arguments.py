"""A program run with arguments that do not fit it, and a select listing an option twice,
are refused before anything is generated, with a message that names the mistake.

References: Python's own binding of a call (``inspect.Signature.bind`` raises the same
TypeError the call would), and ``state.select_scores`` keyed by option.
"""

from __future__ import annotations

import pytest

import structgen
from structgen import gen, select
from structgen.errors import ProgramError, RequestError

ran: list[str] = []


@structgen.function
def ask(s, question, *, suffix="?"):
    ran.append(question)
    s += question + suffix + gen("answer", max_tokens=2)


CASES = [
    ((), {}, "missing a required argument: 'question'"),
    (("a", "b"), {}, "too many positional arguments"),
    ((), {"question": "a", "topic": "b"}, "got an unexpected keyword argument 'topic'"),
]


@pytest.mark.parametrize(("args", "kwargs", "reason"), CASES, ids=["missing", "extra", "unknown"])
def test_run_with_arguments_that_do_not_fit(tiny_engine, args, kwargs, reason):
    with pytest.raises(TypeError):  # the reference: the plain call refuses them too
        ask.fn(None, *args, **kwargs)
    ran.clear()
    with pytest.raises(ProgramError) as info:
        ask.run(*args, backend=tiny_engine, **kwargs)
    err = info.value
    assert str(err) == (
        f"program 'ask' cannot run with these arguments: {reason} "
        "(after the state it takes: question, *, suffix='?')"
    )
    assert isinstance(err.original, TypeError) and err.filename == __file__
    assert err.lineno == ask.fn.__code__.co_firstlineno
    assert ran == []  # nothing ran


def test_run_batch_and_stream_check_arguments_too(tiny_engine):
    ran.clear()
    out = ask.run_batch(
        [{"question": "Hi"}, {"question": "Ho", "topic": "x"}],
        backend=tiny_engine,
        errors="return",
        progress_bar=False,
    )
    assert out[0]["answer"] is not None and isinstance(out[1], ProgramError)
    assert "unexpected keyword argument 'topic'" in str(out[1])
    with pytest.raises(ProgramError, match="missing a required argument: 'question'"):
        list(ask.run(backend=tiny_engine, stream=True))
    assert ran == ["Hi"]


def test_fitting_arguments_still_run(tiny_engine):
    state = ask.run("Hi", backend=tiny_engine, suffix="!")
    assert isinstance(state["answer"], str)


def test_select_refuses_an_option_listed_twice():
    with pytest.raises(RequestError) as info:
        select("team", ["billing", "sales", "billing"])
    assert str(info.value).startswith("select option 'billing' is listed twice (options 0 and 2)")
    assert select("team", ["billing", "sales"]).options == ("billing", "sales")
