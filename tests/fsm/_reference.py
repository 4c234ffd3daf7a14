"""References for the fsm's tests: jsonschema for JSON Schema, a brute-force token walk for
masks."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import numpy as np


def jsonschema_valid(schema: Any, instance: Any) -> bool:
    """``instance`` valid under ``schema`` for the draft its ``$schema`` names (default 2020-12)."""
    return jsonschema.validators.validator_for(schema)(schema).is_valid(instance)


def assert_agrees_with_jsonschema(grammar, schema: Any, good: list[str], bad: list[str]) -> None:
    """Every text of ``good`` is valid (jsonschema) and matched by ``grammar``; every text of
    ``bad`` is invalid and not matched (the cases themselves are checked first)."""
    for text in good:
        assert jsonschema_valid(schema, json.loads(text)), text
        assert grammar.matches(text), text
    for text in bad:
        assert not jsonschema_valid(schema, json.loads(text)), text
        assert not grammar.matches(text), text


def brute_force_mask(grammar, vocab, prefix: bytes) -> np.ndarray:
    """bool ``[vocab_size]``: the tokens allowed after ``prefix`` by brute force: every token's
    bytes walked through an independent automaton of ``grammar``'s pattern that builds no row
    (``ByteDFA.step``), allowed iff the walk stays alive; EOS iff the state accepts."""
    from structgen.fsm.regex.dfa import regex_to_dfa

    # the pattern as compiled, its definitions shared (written out, the "any JSON value"
    # chain of a schema with extra properties would be tens of MB): lowered afresh here,
    # none of them taken from the process's store of reusable definitions (regex.reused)
    pattern = getattr(grammar, "source_pattern", None) or grammar.pattern
    ref = regex_to_dfa(pattern, definitions=grammar.definitions or None, eager_rows=0)
    start = ref.walk(ref.initial, prefix)
    assert start >= 0, prefix
    never, eos = vocab.index_tables
    allowed = np.zeros(vocab.vocab_size, bool)
    for t, data in enumerate(vocab.token_bytes):
        if not never[t] and data:
            allowed[t] = ref.walk(start, data) >= 0
    allowed[eos] = ref.is_accepting(start)
    assert ref.num_rows_built == 0  # the reference never used the row builder
    return allowed


def instance_step(allowed: list[int], vocab, rest: bytes) -> int | None:
    """The longest of the ``allowed`` token ids whose bytes start ``rest`` (the instance's
    next bytes), or None: a walk that follows a valid instance token by token."""
    fits = [t for t in allowed if rest.startswith(vocab.token_bytes[t])]
    return max(fits, key=lambda t: len(vocab.token_bytes[t]), default=None)
