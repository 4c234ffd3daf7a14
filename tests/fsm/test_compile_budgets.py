"""The automaton and conversion budgets are ``compile_*`` keywords, part of the cache key."""

from __future__ import annotations

import pytest

from structgen.errors import GrammarTooComplexError
from structgen.fsm import compile_choice, compile_json_schema, compile_regex
from structgen.fsm.regex.dfa import DEFAULT_MAX_SECONDS, DEFAULT_MAX_STATES

BLOWUP = r"(?:a|b)*a(?:a|b){20}"  # 2^21 states if explored; its eager rows alone exceed 50


def test_regex_budgets_reach_the_automaton() -> None:
    grammar = compile_regex(BLOWUP)
    assert (grammar.dfa.max_states, grammar.dfa.max_seconds) == (
        DEFAULT_MAX_STATES,
        DEFAULT_MAX_SECONDS,
    )
    small = compile_regex(BLOWUP, max_states=5000, max_seconds=3.0)
    assert small is not grammar and (small.dfa.max_states, small.dfa.max_seconds) == (5000, 3.0)
    with pytest.raises(GrammarTooComplexError):
        compile_regex(BLOWUP, max_states=50)  # not the cached grammar of a larger budget
    assert compile_regex(BLOWUP) is grammar


def test_choice_budget() -> None:
    choices = [f"{i:03d}" for i in range(300)]
    assert compile_choice(choices).matches("123")
    with pytest.raises(GrammarTooComplexError):
        compile_choice(choices, max_states=3)


def test_json_schema_budgets() -> None:
    small = {"type": "object", "properties": {"a": {"type": "integer"}}}
    grammar = compile_json_schema(small, max_states=1234, max_seconds=5.0)
    assert (grammar.dfa.max_states, grammar.dfa.max_seconds) == (1234, 5.0)
    assert compile_json_schema(small).dfa.max_states == DEFAULT_MAX_STATES
    wide = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(600)}}
    with pytest.raises(GrammarTooComplexError, match="time budget"):
        compile_json_schema(wide, max_convert_seconds=0.0)
