"""The C derivatives and fronts (csrc/regex_derive.h) against terms.py's Python methods.

Both must intern the same terms in the same order (the arena's lists and caches equal
entry by entry), so the lazily built automata are the same: state count, row slots and
every transition, after exploring random regexes, deep nestings, intersections and
complements, free text up to a trigger, the converter's output for MaskBench schemas and
the cold-mask benchmark's five schemas. The Python methods are the reference (each checked
against ``re`` and brute force in the neighbouring tests).
"""

from __future__ import annotations

import gc
import json
import random
from pathlib import Path

import numpy as np
import pytest

from benchmarks.support import mask_bits
from structgen.errors import StructgenError
from structgen.fsm import clear_cache, compile_json_schema, compiler
from structgen.fsm.json_schema import json_schema_to_shared
from structgen.fsm.regex import lower, terms
from structgen.fsm.regex.dfa import regex_to_dfa
from tests.fsm._reference import brute_force_mask

from .test_lower import CORNERS, _random_regex, converter_texts

pytestmark = pytest.mark.skipif(terms._EXT is None, reason="csrc/regexlower.c is not built")

COLD_SCHEMAS = Path(__file__).resolve().parents[3] / "benchmarks" / "data" / "cold_schemas.json"
BOOLEAN_SCHEMAS = [  # intersections and complements (boolean definitions)
    {"not": {"type": "string", "maxLength": 3}},
    {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 2}]},
    {
        "type": "object",
        "properties": {"a": {"type": "string", "pattern": "^[a-z]+$", "not": {"const": "no"}}},
        "required": ["a"],
    },
]


def _automaton(pattern, definitions, use_c, max_rows, monkeypatch, trigger=None):
    """Everything the row builder leaves behind, from an automaton explored ``max_rows``
    rows deep with the C derivatives on or off."""
    monkeypatch.setattr(terms, "_c", terms._EXT if use_c else None)
    lower._ATOM_RECIPES.clear()  # both lowerings start from the same recipe cache
    try:
        dfa = regex_to_dfa(pattern, definitions=definitions, eager_rows=0, trigger=trigger)
        dfa.explore(max_rows=max_rows)
    except StructgenError as exc:  # the corner cases hold re's errors: the same error
        return {"states": 0, "error": (type(exc).__name__, str(exc))}
    rows, slot = dfa.row_tables()
    a = dfa.arena
    n = dfa.num_states
    return {
        "states": n,
        "rows": rows[: dfa.num_rows_built].copy(),
        "slot": slot[:n].copy(),
        "accepting": dfa.accepting.copy(),
        "terms": (a.kind, a.args, a.nullable, a.first, a.depth),
        "deriv": dict(a._deriv),
        "front": dict(a._front),
        "max_byte_count": a.max_byte_count,
    }


def _assert_same(monkeypatch, pattern, definitions=None, max_rows=400, trigger=None) -> int:
    got = _automaton(pattern, definitions, True, max_rows, monkeypatch, trigger)
    want = _automaton(pattern, definitions, False, max_rows, monkeypatch, trigger)
    for name in want:
        a, b = got[name], want[name]
        same = np.array_equal(a, b) if isinstance(b, np.ndarray) else a == b
        assert same, (name, pattern[:200])
    return want["states"]


@pytest.mark.parametrize("text", CORNERS)
def test_corner_cases(monkeypatch, text: str) -> None:
    _assert_same(monkeypatch, text)


def test_random_regexes(monkeypatch) -> None:
    rng = random.Random(22)
    for _ in range(150):
        text = "".join(_random_regex(rng) for _ in range(rng.randint(1, 3)))
        _assert_same(monkeypatch, text, max_rows=150)


def test_counts_and_long_alternations(monkeypatch) -> None:
    """Counted repetitions (one term per count reached, the largest byte-class count
    recorded) and alternations long enough to be grouped by first byte."""
    words = "|".join(f"k{i}x{i * 7 % 13}" for i in range(40))
    for pattern in (
        r"[a-z]{2,40}(?:-[0-9]{1,3}){0,5}",
        rf"(?:{words})(?:,(?:{words}))*",
        r"(?:ab|a|b|abc|ba|c|cb|bc|ca){3,9}z",
        r"(?:[^\"\\]|\\.){0,100}",
    ):
        _assert_same(monkeypatch, pattern)


def test_deep_nesting_is_derived_bottom_up(monkeypatch) -> None:
    """Terms deeper than terms._SHALLOW get their subterms' derivatives and fronts from the
    bottom-up pass first; the C code then takes one level."""
    deep = "(?:a" * 150 + "b" + ")?" * 150
    alts = "(?:x|" * 120 + "y" + ")+" * 120
    assert _assert_same(monkeypatch, deep, max_rows=600) > 100
    for pattern in (alts, deep + alts):
        _assert_same(monkeypatch, pattern, max_rows=600)
    # spines of nullable heads that one byte can start: several subterms derived first, in
    # the Python method's order (csrc/regex_derive.h derive_deep)
    nullable_heads = "(?:(?:ab)?a?(?:ca)?" * 100 + "d" + ")*" * 100
    assert _assert_same(monkeypatch, nullable_heads, max_rows=400) > 10


def test_fronts_made_in_c_are_untracked_by_the_cyclic_gc(monkeypatch) -> None:
    """Fronts (frozensets of int masks, one per term read) hold no container, so the C code
    untracks them (the GC's older generations would otherwise walk thousands per compile);
    their values are the Python method's (``_assert_same`` above compares ``_front``)."""
    pattern = r'"(?:[a-z]{1,8} ){0,5}[0-9]+(?:\.[0-9]*)?"|\[(?:x|yz|[\u00e0-\u00ff])*\]'
    got = _automaton(pattern, None, True, 200, monkeypatch)
    want = _automaton(pattern, None, False, 200, monkeypatch)
    assert got["front"] == want["front"]
    fronts = list(got["front"].values())
    assert len(fronts) > 20 and all(type(m) is int for f in fronts for m in f)
    assert not any(gc.is_tracked(f) for f in fronts)
    assert all(gc.is_tracked(f) for f in want["front"].values() if f)  # Python's are


def test_until_and_boolean_terms(monkeypatch) -> None:
    """UNTIL, AND and NOT stay in Python, reached from C terms and back."""
    _assert_same(monkeypatch, r'\{"a":[0-9]+\}', trigger="<tool>")
    for schema in BOOLEAN_SCHEMAS:
        pattern, defs = json_schema_to_shared(schema)
        _assert_same(monkeypatch, pattern, defs or None, max_rows=300)


def test_cold_benchmark_schemas(monkeypatch) -> None:
    if not COLD_SCHEMAS.exists():
        pytest.skip(f"{COLD_SCHEMAS} not found")
    for case in json.loads(COLD_SCHEMAS.read_text()).values():
        pattern, defs = json_schema_to_shared(case["schema"])
        assert _assert_same(monkeypatch, pattern, defs or None, max_rows=1500) > 50


def test_converter_output(monkeypatch) -> None:
    """MaskBench schemas (the first two of each subset) as the converter writes them."""
    for texts in converter_texts(2):
        *defs, pattern = texts
        _assert_same(monkeypatch, pattern, defs or None, max_rows=300)


def _cold_masks(schema, text: str, vocab, use_c: bool, monkeypatch) -> list[np.ndarray]:
    """The mask before every byte of ``text`` of a grammar compiled afresh (rows built by
    the masks themselves: the token-trie walk's lazy rows and ``fill_row``)."""
    monkeypatch.setattr(terms, "_c", terms._EXT if use_c else None)
    lower._ATOM_RECIPES.clear()
    clear_cache()
    grammar = compile_json_schema(schema, vocab)
    index, dfa = grammar.token_index, grammar.dfa
    data = text.encode()
    state, masks = dfa.initial, []
    for k in range(len(data) + 1):
        masks.append(mask_bits(index.bitmask(state), vocab.vocab_size))
        if k < len(data):
            state = dfa.step(state, data[k])
            assert state >= 0, (text, k)
    return masks


@pytest.mark.slow
def test_cold_masks_equal_python_rows_and_brute_force(smollm2_vocab, monkeypatch) -> None:
    """SmolLM2's real vocabulary, the cold benchmark's schemas: the mask at every byte of the
    instance equals the one built with Python rows (the recursive schema's grammar automaton
    included: its lexers are ``ByteDFA`` s); at a few cuts the regex schemas' equal brute
    force (every token's bytes walked through an automaton that builds no row)."""
    if not COLD_SCHEMAS.exists():
        pytest.skip(f"{COLD_SCHEMAS} not found")
    monkeypatch.setattr(compiler, "_apply_env", lambda: None)  # keep the switch set here
    for name, case in json.loads(COLD_SCHEMAS.read_text()).items():
        text = json.dumps(case["instance"], separators=(",", ":"))
        got = _cold_masks(case["schema"], text, smollm2_vocab, True, monkeypatch)
        want = _cold_masks(case["schema"], text, smollm2_vocab, False, monkeypatch)
        for k, (a, b) in enumerate(zip(got, want)):
            assert np.array_equal(a, b), (name, k, np.flatnonzero(a != b)[:10])
        clear_cache()
        grammar = compile_json_schema(case["schema"], smollm2_vocab)
        if not hasattr(grammar, "pattern"):  # a grammar automaton (recursive): no regex twin
            continue
        data = text.encode()
        for cut in sorted({0, 2, len(data) // 3, len(data) // 2, len(data) - 1}):
            ref = brute_force_mask(grammar, smollm2_vocab, data[:cut])
            assert np.array_equal(got[cut], ref), (name, cut, np.flatnonzero(got[cut] != ref))
