"""Grammars through every entry point: Engine.generate, the DSL (with token healing),
the server's request fields, OpenAIBackend's wire form, the CLI, transformers, pickling."""

from __future__ import annotations

import pickle

import pytest

import structgen
from structgen import gen
from structgen.cli import main
from structgen.fsm.grammar import compile_grammar
from structgen.runtime.sampling_params import SamplingParams
from tests.fsm.grammar._grammars import ARITHMETIC, JSON_GBNF

NESTED = 'root ::= "(" ( root | [a-z]+ ) ("," root)* ")"'


@pytest.mark.parametrize(("text", "temperature"), [(NESTED, 0.0), (ARITHMETIC, 1.0)])
def test_engine_generate_under_a_grammar(tiny_engine, text, temperature):
    grammar = compile_grammar(text)
    params = SamplingParams(max_tokens=24, temperature=temperature, seed=3)
    out = tiny_engine.generate(["Write:"], params, structgen.Grammar(text))[0]
    assert out.finish_reason in ("stop", "length"), out.error
    assert grammar.matches(out.text), out.text  # the budget closes it in time


def test_dsl_gen_grammar_with_token_healing(tiny_engine):
    @structgen.function
    def prog(s):
        s += "Value: " + gen("v", max_tokens=24, grammar=JSON_GBNF)

    state = prog.run(backend=tiny_engine)
    assert compile_grammar(JSON_GBNF).matches(state["v"]), state["v"]
    with pytest.raises(structgen.StructgenError, match="1:10"):
        gen("v", grammar="root ::= x")


def test_healing_prefix_is_part_of_the_grammar():
    from structgen.lang.healing import Healing

    spec = Healing([1], removed=" ").constraint(structgen.Grammar(NESTED))
    assert spec.prefix == " "
    g = spec.compile(None)
    assert g.matches(" (a,(b))") and not g.matches("(a)")
    regular = Healing([1], removed="x").constraint(structgen.Grammar('root ::= "a"+'))
    assert regular.compile(None).matches("xaa") and not regular.compile(None).matches("aa")


def test_server_fields_and_wire_form():
    from structgen.lang.openai_backend import _constraint_fields
    from structgen.server.protocol import CompletionRequest
    from structgen.server.serving import request_constraint

    for field in ("grammar", "guided_grammar"):
        req = CompletionRequest(model="m", prompt="x", **{field: NESTED})
        term, name = request_constraint(req)
        assert name == field and term == structgen.Grammar(NESTED)
    assert _constraint_fields(structgen.Grammar(NESTED, trigger="#")) == {
        "grammar": NESTED,
        "constraint_trigger": "#",
    }
    spec = structgen.Grammar(NESTED)
    assert pickle.loads(pickle.dumps(spec)) == spec  # what a DP replica receives
    assert compile_grammar(NESTED).spec == spec


def test_cli_grammar_file_errors(tmp_path, capsys):
    path = tmp_path / "g.gbnf"
    path.write_text('root ::= "a" (\n', encoding="utf-8")
    assert main(["generate", "--prompt", "x", "--grammar", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--grammar" in err and "2:1" in err
    assert main(["generate", "--prompt", "x", "--grammar", str(tmp_path / "none")]) == 2


def test_transformers_logits_processor_takes_a_grammar(tiny_tokenizer):
    from structgen.integrations.transformers import logits_processor

    processor = logits_processor(structgen.Grammar(NESTED), tiny_tokenizer, max_tokens=8)
    assert processor.grammar.matches("(a,(b))")
