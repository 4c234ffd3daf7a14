"""``select`` over sub-expressions: literals, ``gen(regex=...)`` and ``gen(grammar=...)``
terms compile into one automaton (their alternation). Reference: each option's own
compiled grammar; the union accepts a text exactly when one of them does.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest

import structgen
from structgen import gen, select
from structgen.errors import RequestError, UnsupportedGrammarError
from structgen.fsm.grammar.union import GrammarAlternatives
from structgen.fsm.spec import Grammar, Regex

NESTED = 'root ::= "(" ( root | [a-z]+ ) ("," root)* ")"'
OPTIONS = [
    "yes",
    gen(regex=r"[0-9]{1,3}", max_tokens=8),
    gen(grammar=NESTED, max_tokens=40),
    Regex("^no+$"),
]


def _own(option):
    if isinstance(option, str):
        return lambda t: t == option
    spec = option.constraint if hasattr(option, "constraint") else option
    return spec.compile(None).matches


def test_union_accepts_what_one_option_accepts():
    term = select("x", OPTIONS)
    assert term.params.max_tokens == 40 and term.params.temperature == 0.0
    union = term.constraint.compile(None)
    own = [_own(o) for o in OPTIONS]
    texts = {"yes", "ye", "yess", "no", "nooo", "n", "(a)", "(a,(b))", "((a)", "()"}
    texts |= {"".join(p) for n in range(4) for p in itertools.product("(a),1y", repeat=n)}
    for text in sorted(texts):
        assert union.matches(text) == any(f(text) for f in own), text


def test_regular_options_make_a_plain_dfa():
    from structgen.fsm.compiler import CompiledGrammar

    spec = select("x", ["a", gen(regex="b+")]).constraint
    assert isinstance(spec.compile(None), CompiledGrammar)
    assert isinstance(select("x", ["a", Grammar(NESTED)]).constraint, GrammarAlternatives)


@pytest.mark.parametrize(
    "bad",
    [
        gen(json_schema={"type": "integer"}),
        gen("y") + "z",
        select("s", ["a", "b"]),
        structgen.user("hi"),
        gen(),
        3,
    ],
)
def test_options_holding_programs_are_refused(bad):
    with pytest.raises(RequestError, match="select option 1"):
        select("x", ["a", bad])


def test_grammar_option_with_ignore_is_refused():
    lark_text = 'start: "a" "b"\n%import common.WS\n%ignore WS'
    with pytest.raises(UnsupportedGrammarError, match="%ignore"):
        select("x", ["c", Grammar(lark_text, syntax="lark")])


def test_generated_choice_is_one_option(tiny_engine):
    @structgen.function
    def prog(s):
        s += "Pick one: " + select("x", OPTIONS)

    s = prog.run(backend=tiny_engine)
    own = [_own(o) for o in OPTIONS]
    assert any(f(s["x"]) for f in own), s["x"]
    assert s.text() == "Pick one: " + s["x"]


def test_openai_backend_refuses_alternatives_it_cannot_send() -> None:
    """A select with a grammar option has no wire form (the server reads one grammar
    text): a RequestError naming it, not a request with an empty grammar the server
    rejects."""
    from structgen.lang.openai_backend import _constraint_fields

    term = GrammarAlternatives("", options=("yes", Regex(r"[0-9]+"), Grammar(NESTED)))
    with pytest.raises(RequestError, match="select over sub-expressions with a grammar"):
        _constraint_fields(term)
    assert _constraint_fields(Grammar('start: "a" start | "b"'))["grammar"]  # text still goes


REGEX_OPTIONS = [
    ("yes", gen(regex=r"[0-9]{1,3}")),
    ("a.b", "x|y", "(c)", Regex("^no+$"), Regex("(?i)ok")),
    ("naïve", "a b", Regex(r"\\d\\.?"), Regex("[ab]*c|^d$"), Regex(r"(?s)\\Aa.$")),
]
ALT_EXAMPLES = ["yes", "12", "1234", "a.b", "aXb", "x|y", "x", "(c)", "no", "nooo", "OK", "oK"]
ALT_EXAMPLES += ["naïve", "a b", "7", "7.", "abc", "c", "d", "bd", "a\nb", "a\n", ""]


def _option_matches(option, text: str) -> bool:
    """The reference: ``re.fullmatch`` of the option's own pattern (equality for a string)."""
    if isinstance(option, str):
        return text == option
    pattern = option.constraint.pattern if hasattr(option, "constraint") else option.pattern
    return re.fullmatch(pattern, text) is not None


@pytest.mark.parametrize("options", REGEX_OPTIONS, ids=range(len(REGEX_OPTIONS)))
@pytest.mark.parametrize("prefix", ["", " ", '"', "a."])
def test_literal_and_regex_options_locally_and_over_openai_backend(options, prefix):
    """A select over literals and regex options (anchored, flagged ``(?i)``/``(?s)``)
    accepts, after token healing's ``prefix``, exactly the texts one option's pattern
    fullmatches, on a local engine (a ``(?i)`` option failed to compile: global flags in
    the middle of the alternation) and as the one ``regex`` OpenAIBackend sends (it
    refused such a select). Reference: ``re.fullmatch`` of each option, over every text
    of up to 3 characters from the examples' alphabet and each example."""
    from structgen.fsm import compile_regex
    from structgen.lang.openai_backend import _constraint_fields

    term = dataclasses.replace(select("x", list(options)).constraint, prefix=prefix)
    fields = _constraint_fields(term)
    assert set(fields) == {"regex"}
    sent = compile_regex(fields["regex"])
    local = term.compile(None)
    alphabet = sorted(set("".join(ALT_EXAMPLES)) | set(prefix))
    texts = {prefix + e for e in ALT_EXAMPLES} | set(ALT_EXAMPLES)
    texts |= {"".join(p) for n in range(4) for p in itertools.product(alphabet, repeat=n)}
    accepted = 0
    for text in texts:
        rest = text[len(prefix) :] if text.startswith(prefix) else None
        want = rest is not None and any(_option_matches(o, rest) for o in options)
        assert local.matches(text) == want, text
        assert sent.matches(text) == want, (fields["regex"], text)
        accepted += want
    assert accepted >= len(options)


@pytest.mark.parametrize("pattern", ["(?i)ok", "(?i)^ok$", "^no$"])
def test_grammar_alternatives_scope_a_regex_options_flags(pattern):
    # the spec itself, without the DSL: a regex option means what it means alone
    grammar = GrammarAlternatives("", options=("a", Regex(pattern))).compile(None)
    for text in ["a", "ok", "OK", "oK", "no", "NO", "b", ""]:
        want = text == "a" or re.fullmatch(pattern, text) is not None
        assert grammar.matches(text) == want, text
