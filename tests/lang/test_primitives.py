"""Each primitive against a hand-written sequence of Engine.generate calls (greedy, tiny model)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

import structgen
from structgen import Choice, JsonSchema, Regex, SamplingParams, assistant, gen, system, user

GREEDY = dict(temperature=0.0)


def ref(engine, prompt, max_tokens, constraint=None, **kw):
    """The Engine's own greedy output for ``prompt``."""
    params = SamplingParams(max_tokens=max_tokens, temperature=0.0, **kw)
    return engine.generate([prompt], params, constraint)[0].text


def test_gen_sequence_matches_engine(tiny_engine):
    @structgen.function
    def prog(s, name):
        s += "Name: " + name + "\nJob:" + gen("job", max_tokens=6)
        s += "\nCity:" + gen("city", max_tokens=5, stop="\n")

    s = prog.run("Maria", backend=tiny_engine)
    p1 = "Name: Maria\nJob:"
    assert s["job"] == ref(tiny_engine, p1, 6)
    p2 = p1 + s["job"] + "\nCity:"
    assert s["city"] == ref(tiny_engine, p2, 5, stop=["\n"])
    assert s.text() == p2 + s["city"]


@pytest.mark.parametrize("kind", ["regex", "choices", "json", "pydantic"])
def test_constrained_gen_matches_engine(tiny_engine, kind):
    class Pet(BaseModel):
        name: str = Field(max_length=8)
        age: int = Field(ge=0, le=99)

    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 99}},
        "required": ["n"],
    }
    kwargs, constraint = {
        "regex": ({"regex": r"[0-9]{2,4}"}, Regex(r"[0-9]{2,4}")),
        "choices": ({"choices": ["red", "green", "blue"]}, Choice(["red", "green", "blue"])),
        "json": ({"json_schema": schema}, JsonSchema(schema)),
        "pydantic": ({"json_schema": Pet}, JsonSchema(Pet)),
    }[kind]

    @structgen.function
    def prog(s):
        s += "Answer:\n" + gen("v", max_tokens=60, **kwargs)

    s = prog.run(backend=tiny_engine)
    expected = ref(tiny_engine, "Answer:\n", 60, constraint)
    assert s.text() == "Answer:\n" + expected
    if kind == "json":
        assert isinstance(s["v"], dict) and isinstance(s["v"]["n"], int)
    elif kind == "pydantic":
        assert isinstance(s["v"], Pet)
    else:
        assert s["v"] == expected


def test_chat_roles_match_engine(tiny_engine):
    @structgen.function
    def prog(s):
        s += system("Be brief.") + user("Name a colour.")
        s += assistant(gen("a", max_tokens=5))
        s += user("Why?")
        s += assistant("Because:" + gen("b", max_tokens=5))

    s = prog.run(backend=tiny_engine)
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Name a colour."},
    ]
    assert s["a"] == ref(tiny_engine, msgs, 5)
    msgs += [{"role": "assistant", "content": s["a"]}, {"role": "user", "content": "Why?"}]
    ids = tiny_engine.apply_chat_template(msgs) + tiny_engine.tokenizer.encode(
        "Because:", add_special_tokens=False
    )
    assert s["b"] == ref(tiny_engine, ids, 5)
    assert s.messages()[-1] == {"role": "assistant", "content": "Because:" + s["b"]}
    assert s.text() == tiny_engine.tokenizer.apply_chat_template(
        s.messages(), tokenize=False, add_generation_prompt=False
    )


def test_expressions_compose_with_plus(tiny_engine):
    expr = "Q: 1+1?\n" + gen("x", regex="[0-9]") + "\nok"
    assert isinstance(expr, structgen.lang.expr.Concat)
    s = structgen.ProgramState(structgen.lang.backend.as_backend(tiny_engine))
    s += expr
    assert s.text() == "Q: 1+1?\n" + s["x"] + "\nok"


def test_streaming_yields_the_text(tiny_engine):
    @structgen.function
    def prog(s):
        s += "Story:\n" + gen("a", max_tokens=12) + "\nEnd:" + gen("b", max_tokens=4)

    run = prog.run(backend=tiny_engine, stream=True)
    chunks = list(run)
    assert len(chunks) > 4  # token granularity, not one chunk per gen
    assert "".join(chunks) == run.state.text()
    assert run.state.text() == prog.run(backend=tiny_engine).text()


def test_run_batch_matches_single_runs(tiny_engine):
    @structgen.function
    def prog(s, topic):
        s += "Topic: " + topic + "\nText:" + gen("t", max_tokens=6)

    topics = ["cats", "dogs", "the fox"]
    states = prog.run_batch([{"topic": t} for t in topics], backend=tiny_engine, progress_bar=False)
    for t, st in zip(topics, states):
        assert st["t"] == prog.run(t, backend=tiny_engine)["t"]


def test_default_backend(tiny_engine):
    from structgen.lang import backend as B

    old = list(B._default)
    try:
        structgen.set_default_backend(tiny_engine)
        assert B.get_default_backend().engine is tiny_engine

        @structgen.function
        def prog(s):
            s += "Hi:" + gen("a", max_tokens=2)

        assert prog.run()["a"] == ref(tiny_engine, "Hi:", 2)
    finally:
        B._default[:] = old


def test_run_batch_shows_a_progress_bar(tiny_engine, capsys):
    @structgen.function
    def prog(s, topic):
        s += "Topic: " + topic + "\nText:" + gen("t", max_tokens=2)

    prog.run_batch([{"topic": t} for t in ("a", "b", "c")], backend=tiny_engine)
    err = capsys.readouterr().err
    assert "prog" in err and "3/3" in err and "100%" in err  # tqdm, named after the program
    prog.run_batch([{"topic": "a"}], backend=tiny_engine, progress_bar=False)
    assert "1/1" not in capsys.readouterr().err


def test_default_engine_is_created_once(monkeypatch, tiny_engine):
    """With nothing set, the first use creates one Engine(); concurrent first uses share it."""
    import threading

    from structgen.lang import backend as B
    from structgen.runtime import engine as engine_mod

    made = []

    def fake_engine(*args, **kwargs):
        made.append((args, kwargs))
        return tiny_engine

    monkeypatch.setattr(engine_mod, "Engine", fake_engine)
    monkeypatch.setattr(B, "_default", [])
    got = []
    threads = [
        threading.Thread(target=lambda: got.append(B.get_default_backend())) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [((), {})] and len({id(g) for g in got}) == 1
    assert got[0].engine is tiny_engine
