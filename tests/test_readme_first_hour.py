"""What a new user's first hour with README.md tried and README now states.

``Engine(model)`` takes a path or None, and anything else is a ``ConfigError`` naming the
field (it was a ``TypeError`` from ``pathlib``); a program's ``run_batch`` takes a list of
dicts, and anything else is a ``RequestError`` before any run starts (it was a ``TypeError``
or ``KeyError`` from a worker thread); jump-forward feeds the model the tokenizer's own
split of forced text, so its greedy output can differ from ``jump_forward=False``'s
(README, "Constraints").
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import structgen
from structgen.errors import ConfigError, ModelNotFoundError, RequestError
from structgen.runtime.config import EngineConfig

NOT_A_PATH = [5, ["model.gguf"], b"model.gguf", {"path": "model.gguf"}]


@pytest.mark.parametrize("model", NOT_A_PATH, ids=lambda m: type(m).__name__)
def test_engine_model_that_is_not_a_path_is_a_config_error(model):
    """Refused when the settings are built, before any file is read."""
    expected = (
        "EngineConfig.model must be the path (str or os.PathLike) of a .gguf file or a Hugging "
        f"Face folder, or None for the packaged SmolLM2; got {type(model).__name__}"
    )
    with pytest.raises(ConfigError) as exc:
        EngineConfig(model=model)
    assert str(exc.value) == expected
    with pytest.raises(ConfigError) as exc:
        structgen.Engine(model)
    assert str(exc.value) == expected


def test_engine_model_path_objects_are_paths(tmp_path):
    """A ``pathlib.Path`` is a path like a ``str``: a missing one is ``ModelNotFoundError``."""
    missing = tmp_path / "missing.gguf"
    assert EngineConfig(model=missing).model == missing
    for model in (missing, str(missing)):
        with pytest.raises(ModelNotFoundError, match="does not exist"):
            structgen.Engine(model)


@structgen.function
def topic_program(s, topic):
    s += "Topic: " + topic + "\nText:" + structgen.gen("t", max_tokens=4)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (
            {"topic": "cats"},
            "run_batch takes a list of dicts of program arguments, one per run; got dict "
            "(for one run, call run(**kwargs))",
        ),
        ("cats", "run_batch takes a list of dicts of program arguments, one per run; got str"),
        (5, "run_batch takes a list of dicts of program arguments, one per run; got int"),
        (
            [{"topic": "cats"}, "dogs"],
            "run_batch: batch_kwargs[1] must be a dict of program arguments, got str",
        ),
    ],
    ids=["dict", "str", "int", "list-with-str"],
)
def test_run_batch_refuses_what_is_not_a_list_of_dicts(batch, message):
    """Refused before a backend is asked for (no default engine is made)."""
    with pytest.raises(RequestError) as exc:
        topic_program.run_batch(batch, progress_bar=False)
    assert str(exc.value) == message


def test_run_batch_takes_any_iterable_of_dicts(tiny_engine):
    """A tuple or a generator of dicts runs as the list does (each run as ``run``'s)."""
    topics = ["cats", "dogs"]
    want = [topic_program.run(t, backend=tiny_engine)["t"] for t in topics]
    for batch in (tuple({"topic": t} for t in topics), ({"topic": t} for t in topics)):
        states = topic_program.run_batch(batch, backend=tiny_engine, progress_bar=False)
        assert [st["t"] for st in states] == want


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.mark.slow
def test_jump_forward_reads_the_tokenizers_split(smollm2_engine):
    """README's example: under PERSON the forced ``{"name":`` is the tokenizer's split with
    jump-forward and SmolLM2's own token by token without it; both outputs are valid."""
    prompt = [{"role": "user", "content": "Return the person as JSON."}]
    params = structgen.SamplingParams(max_tokens=60, temperature=0.0)
    tok = smollm2_engine.tokenizer
    with structgen.Engine(jump_forward=False) as plain:
        outs = [
            engine.generate([prompt], params, structgen.JsonSchema(PERSON))[0]
            for engine in (smollm2_engine, plain)
        ]
    head = tok.encode('{"name":')
    assert [tok.decode([t]) for t in head] == ['{"', "name", '":']
    assert outs[0].token_ids[: len(head)] == head
    assert [tok.decode([t]) for t in outs[1].token_ids[:4]] == ["{", '"', "name", '":']
    for out in outs:
        assert out.finish_reason == "stop"
        jsonschema.validate(json.loads(out.text), PERSON)


def test_readme_states_the_two_splits():
    """The README sentence the slow test checks is still there."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    text = " ".join(readme.split())
    assert '`{"` `name` `":` with jump-forward, `{` `"` `name` `":` without' in text


def test_compile_spec_takes_every_spec_readme_names():
    """README ("Constraints"): ``compile_spec`` compiles every spec it lists, ``Grammar``
    included, and ``spec.compile(vocab)`` does the same."""
    from structgen.fsm import compile_spec
    from structgen.fsm.spec import Concatenation

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert "`StructuralTag`, `Grammar`; also\n  `spec.compile(vocab)`" in readme
    tag = structgen.StructuralTag([structgen.TagStructure("<a>", "</a>", regex="[0-9]")])
    for spec, text in [
        (structgen.Regex("a+"), "aa"),
        (structgen.JsonSchema({"type": "integer"}), "7"),
        (structgen.Choice(["x", "y"]), "y"),
        (Concatenation((structgen.Regex("a"), structgen.Choice(["b"]))), "ab"),
        (tag, "<a>5</a>"),
        (structgen.Grammar('root ::= "a" [0-9]'), "a5"),
    ]:
        assert compile_spec(spec).matches(text) and spec.compile(None).matches(text)
