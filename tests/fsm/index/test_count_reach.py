"""``CountView.may_share`` (``csrc/count_reach.h``) answers exactly as ``canonical``'s walk.

References: ``CountView._canon`` itself. With every byte class counted as worth sharing
(``_AllWorth``: the vocabulary's ``MIN_RUN`` test is what the C walk leaves out), ``_canon``
finds bounds at a budget exactly when ``count_reach`` says True, on every term of the arenas
(every subterm, every budget 0-3) after the states of seeded random count regexes, the cold
benchmark's regex schemas and MaskBench schemas were built. With the vocabulary's own test,
a False from ``may_share`` means no bounds. End to end (twin test): fresh compiles of the
five cold schemas and of MaskBench samples forced through an instance with the C check on
and off: after every step the same canonical key (term id, bounds), the same arena (every
term, in interning order) and the same mask.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.corpus import CORPORA, canonical
from structgen.errors import StructgenError
from structgen.fsm import clear_cache, compile_json_schema, compile_regex
from structgen.fsm.index import count_masks
from structgen.fsm.index.count_masks import MIN_SHARED_HI, CountView
from structgen.fsm.regex.lazy_dfa import ByteDFA
from structgen.fsm.regex.terms import BYTES, INF

pytestmark = pytest.mark.skipif(
    count_masks._count_reach is None, reason="C extension (count_reach) not built"
)

COLD = json.loads(
    (Path(__file__).resolve().parents[3] / "benchmarks/data/cold_schemas.json").read_text()
)
PLAIN = CORPORA / "jsonschemabench" / "plain"
MASKBENCH = ["Glaiveai2K", "Github_easy", "JME", "Snowplow", "WashingtonPost", "BFCL_simple"]


class _AllWorth(CountView):
    """``canonical``'s walk with every byte class worth sharing (no vocabulary test)."""

    def _shared(self, args: tuple) -> bool:
        x, _, hi = args
        return hi != INF and hi >= MIN_SHARED_HI and self.arena.kind[x] == BYTES


def _random_count_regex(rng: random.Random, depth: int = 0) -> str:
    atoms = ["a", "-", "ab", ".", "[a-z]", "[a-z0-9-]{0,61}", "[0-9]{2,30}", "[A-Z]{16}",
             "[a-c]{3,8}", "[^@]{1,20}", "x{17,}", "(?:ab){0,20}", "é"]  # fmt: skip
    if depth >= 3 or rng.random() < 0.3:
        return rng.choice(atoms)
    parts = [_random_count_regex(rng, depth + 1) for _ in range(rng.randint(2, 4))]
    kind = rng.randrange(4)
    if kind == 0:
        return "(?:" + "|".join(parts) + ")"
    if kind == 1:
        return "".join(parts)
    suffix = ["*", "+", "?", "{%d,%d}" % (rng.randint(0, 2), rng.randint(16, 40))][rng.randrange(4)]
    return "(?:" + "".join(parts) + ")" + suffix


def _grow(dfa: ByteDFA, num_states: int) -> None:
    """Build states breadth-first from the start (rows whole), up to ``num_states``."""
    s = 0
    while s < min(dfa.num_states, num_states):
        dfa.row(s)
        s += 1


def _check_arena(grammar, vocab, budgets=range(4)) -> tuple[int, int]:
    """Every term of the grammar's arena at every budget: ``count_reach`` equals ``_canon``
    with every class worth sharing; and ``may_share`` False means ``canonical`` finds no
    bounds. Returns (terms with a repetition within reach, terms checked)."""
    arena = grammar.dfa.arena
    terms = range(arena.num_terms)  # fixed before _canon interns canonical terms
    view = CountView(arena, vocab)
    lists = view._lists
    found = 0
    for budget in budgets:
        ref = _AllWorth(arena, vocab, reach=budget)
        for t in terms:
            got = count_masks._count_reach(*lists, t, budget, view._limits)
            want = bool(ref._canon(t, budget)[1])
            assert got == want, (grammar.pattern[:80], t, budget)
            found += got
    for t in terms:  # the vocabulary's own test: a False leaves nothing to share
        if not view.may_share(t):
            assert view._canon(t, view.reach) == (t, frozenset()), t
    return found, len(terms) * len(budgets)


def _edge_patterns() -> list[str]:
    """Alternations of 32 and 33 members (``_MAX_MEMBERS``: the walk enters only the first)
    and 64 and 65 nullable heads before a count (past ``_MAX_SPINE`` heads the walk goes on
    in a new spine)."""
    out = []
    for n in (32, 33):
        members = [f"{chr(0x61 + k % 26)}{k}" for k in range(n - 1)] + ["[a-z]{0,20}x"]
        out.append("(?:" + "|".join(members) + ")!")
    for n in (64, 65):
        out.append("".join(f"(?:{chr(0x61 + k % 26)}|)" for k in range(n)) + "-{0,30}")
    return out


def test_count_reach_equals_canon_on_random_count_regexes(smollm2_vocab) -> None:
    rng = random.Random(2222)
    found = checked = 0
    patterns = _edge_patterns()
    for _ in range(40):
        patterns.append("".join(_random_count_regex(rng) for _ in range(rng.randint(1, 4))))
    for pattern in patterns:
        grammar = compile_regex(pattern, smollm2_vocab)
        _grow(grammar.dfa, 40)
        f, c = _check_arena(grammar, smollm2_vocab)
        found, checked = found + f, checked + c
    assert 0 < found < checked  # both answers are exercised


def test_count_reach_declines_past_its_visit_bound(smollm2_vocab) -> None:
    """A term whose walk passes REACH_MAX_VISITS terms answers True ("maybe") and the Python
    walk decides: here no bounds, the count lying past the reach (after ``bc``)."""
    members = "|".join(f"{c}x|{c}yz" for c in "abcdefghijklmnop")  # 32: _MAX_MEMBERS
    few = compile_regex("(?:" + ")?(?:".join([members] * 20) + ")?bc[a-z]{0,40}", smollm2_vocab)
    view = CountView(few.dfa.arena, smollm2_vocab)
    assert not view.may_share(few.dfa.term(few.dfa.initial))  # ~2,300 terms visited
    pattern = "(?:" + ")?(?:".join([members] * 200) + ")?bc[a-z]{0,40}"
    grammar = compile_regex(pattern, smollm2_vocab)
    view = CountView(grammar.dfa.arena, smollm2_vocab)
    start = grammar.dfa.term(grammar.dfa.initial)
    assert view.may_share(start)  # ~23,000 terms: "maybe"
    assert view.canonical(start) == (start, frozenset())
    late = grammar.dfa.term(grammar.dfa.walk(grammar.dfa.initial, b"bc"))
    assert view.may_share(late) and view.canonical(late)[1]


def _schema_grammar(schema, vocab):
    clear_cache()
    grammar = compile_json_schema(schema, vocab)
    return grammar if isinstance(grammar.dfa, ByteDFA) else None


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flat", "nested", "formats", "anyOf"])
def test_count_reach_equals_canon_on_cold_schemas(smollm2_vocab, name) -> None:
    grammar = _schema_grammar(COLD[name]["schema"], smollm2_vocab)
    _grow(grammar.dfa, 400)
    found, _ = _check_arena(grammar, smollm2_vocab)
    assert (found > 0) == (name == "formats")  # the email's and the uri's domain labels


def _maskbench_docs(subset: str, count: int):
    """``count`` seeded (schema, valid instance in corpus canonical form) of a subset."""
    files = sorted((PLAIN / subset).glob("*.json"))
    random.Random(22).shuffle(files)
    out = []
    for f in files[:30]:
        doc = json.loads(f.read_text(encoding="utf-8"))
        valid = [t["data"] for t in doc.get("tests", []) if t["valid"]]
        if valid:
            schema = doc["schema"]
            out.append((schema, canonical(valid[0], schema, schema)))
        if len(out) == count:
            break
    return out


@pytest.mark.slow
@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
@pytest.mark.parametrize("subset", MASKBENCH)
def test_count_reach_equals_canon_on_maskbench(smollm2_vocab, subset) -> None:
    checked = 0
    for schema, _ in _maskbench_docs(subset, 3):
        try:
            grammar = _schema_grammar(schema, smollm2_vocab)
        except StructgenError:  # unsupported or too complex: not this test's subject
            continue
        if grammar is None:
            continue
        _grow(grammar.dfa, 150)
        _check_arena(grammar, smollm2_vocab, budgets=(count_masks.REACH,))
        checked += 1
    assert checked >= 1


def _forced(schema, ids, vocab, monkeypatch, screen: bool):
    """A fresh compile forced through ``ids``: per step (mask, canonical key, arena args);
    the C check switched on or off. Stops at the first refused token."""
    monkeypatch.setattr(count_masks, "_count_reach", REACH_C if screen else None)
    try:
        clear_cache()
        vocab.lexical_masks.clear()
        grammar = compile_json_schema(schema, vocab)
        matcher = grammar.matcher()
        index, dfa = grammar.token_index, grammar.dfa
        out = []
        for tid in ids:
            buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
            matcher.fill_bitmask(buf, 0)
            key = None
            if isinstance(dfa, ByteDFA) and index._counts is not None:
                with dfa.lock:
                    key = index._counts.canonical(dfa.term(matcher.state))
                key = (key, list(dfa.arena.args))
            out.append((buf[0].numpy().copy(), key))
            if not matcher.advance(tid):
                break
        return out
    finally:
        monkeypatch.setattr(count_masks, "_count_reach", REACH_C)


REACH_C = count_masks._count_reach


def _twin(schema, instance, tokenizer, vocab, monkeypatch) -> int:
    ids = tokenizer.encode(json.dumps(instance, separators=(",", ":")))
    _forced(schema, ids, vocab, monkeypatch, True)  # fills the per-pattern recipe caches
    old = _forced(schema, ids, vocab, monkeypatch, False)
    new = _forced(schema, ids, vocab, monkeypatch, True)
    assert len(old) == len(new)
    for k, ((mask_a, key_a), (mask_b, key_b)) in enumerate(zip(old, new)):
        assert np.array_equal(mask_a, mask_b), k
        assert key_a == key_b, k
    return len(old)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COLD))
def test_twin_masks_along_cold_instances(
    smollm2_tokenizer, smollm2_vocab, monkeypatch, name
) -> None:
    entry = COLD[name]
    steps = _twin(entry["schema"], entry["instance"], smollm2_tokenizer, smollm2_vocab, monkeypatch)
    assert steps > 10


@pytest.mark.slow
@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
@pytest.mark.parametrize("subset", MASKBENCH)
def test_twin_masks_along_maskbench_instances(
    smollm2_tokenizer, smollm2_vocab, monkeypatch, subset
) -> None:
    compared = 0
    for schema, instance in _maskbench_docs(subset, 2):
        try:
            compile_json_schema(schema, smollm2_vocab)
        except StructgenError:
            continue
        _twin(schema, instance, smollm2_tokenizer, smollm2_vocab, monkeypatch)
        compared += 1
    assert compared >= 1
