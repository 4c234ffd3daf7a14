"""The reused run's groups handed to a spec's memo (``reused.restore``'s ``memo``): the
schemas' texts lowered with them give the structure (so the language) of the lowering
without them, whether the run was lowered by this compile or restored; the grammars match
the same instances and their masks equal brute force."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.regex import parse, reused
from structgen.fsm.regex.definitions import PLACEHOLDER_BASE
from structgen.fsm.regex.terms import TermArena
from structgen.fsm.spec import JsonSchema
from tests.fsm._reference import brute_force_mask
from tests.fsm.index.test_lexical_masks import _vocab
from tests.fsm.regex.test_reused import _shape

COLD = json.loads(open("benchmarks/data/cold_schemas.json").read())
SCHEMAS = {name: case["schema"] for name, case in COLD.items() if name != "recursive"}
SCHEMAS["numbers"] = {
    "type": "object",
    "properties": {
        "a": {"type": "number"},
        "b": {"type": "array", "items": {"type": "number"}},
        "c": {"type": "string"},
        "d": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    },
}


@pytest.fixture(autouse=True)
def _empty_store():
    reused.clear()
    clear_cache()
    yield
    reused.clear()
    clear_cache()


def _lower(low) -> tuple[TermArena, int]:
    arena = TermArena()
    root = parse.lower(low.pattern, arena, definitions=list(low.definitions), reusable=low.reusable)
    return arena, root


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_groups_keep_the_structure(name, monkeypatch) -> None:
    low = JsonSchema(SCHEMAS[name], allow_extra_properties=True).lower()
    assert low.reusable
    table: dict = {}
    lowered, root = _lower(low)  # the run lowered here, its groups handed over
    key = reused.run_key(list(low.definitions), sorted(low.reusable))
    groups = reused._runs.peek(key)[2]
    assert groups and not any(ord(c) >= PLACEHOLDER_BASE for k in groups for c in k)
    restored, again = _lower(low)  # restored, the same groups (ids may differ from the
    # first lowering's where it built an atom the recipes then held: ``reused``'s docstring)
    reused.clear()
    monkeypatch.setattr(reused, "_RESERVED", re.compile(""))  # every group left out
    plain, plain_root = _lower(low)
    assert reused._runs.peek(key)[2] == {}
    want = _shape(plain, plain_root, table)
    assert _shape(lowered, root, table) == want
    assert _shape(restored, again, table) == want


@pytest.mark.parametrize("name", ["nested", "anyOf", "numbers"])
def test_masks_equal_brute_force(name) -> None:
    vocab = _vocab()
    schema = SCHEMAS[name]
    instance = COLD[name]["instance"] if name in COLD else {"a": -1.5e3, "b": [2], "d": 7}
    text = json.dumps(instance, separators=(",", ":")).encode()
    for round_ in ("lowered", "restored"):
        clear_cache()
        vocab.lexical_masks.clear()
        grammar = compile_json_schema(schema, vocab, allow_extra_properties=True)
        assert grammar.matches(text.decode()), round_
        assert not grammar.matches(text.decode()[:-1]), round_
        for cut in range(0, len(text), max(1, len(text) // 12)):
            state = grammar.dfa.walk(grammar.dfa.initial, text[:cut])
            assert state >= 0, text[:cut]
            got = mask_bits(grammar.token_index.bitmask(state), vocab.vocab_size)
            want = brute_force_mask(grammar, vocab, text[:cut])
            assert np.array_equal(got, want), (round_, text[:cut])
