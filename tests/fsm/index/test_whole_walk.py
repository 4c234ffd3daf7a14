"""``TokenTrie.walk(..., whole=True)``: a regex state's row built whole and the trie walked in
one C call (``walk_direct_whole``, ``csrc/tokentrie.c``), as ``TokenIndex._walk_whole`` walks
a cold state.

References: twin automata of one pattern (built with no rows), one walked the old way
(``trie.build_row`` then ``walk``), the other with ``whole=True``: after every walk their
masks, next states and tables (terms, row slots, rows with their ``PENDING`` entries, the
rows left pending) are equal and the state's row is whole; and the masks equal brute force
(each token's bytes stepped one at a time through the automaton) over SmolLM2's and the
150k BPE's whole vocabularies. A walk whose whole-row build the C builder declines (the row
budget reached) raises what ``build_row`` raises.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from structgen.errors import GrammarTooComplexError
from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.index import trie
from structgen.fsm.regex.definitions import INTERSECT, PLACEHOLDER_BASE
from structgen.fsm.regex.dfa import regex_to_dfa
from structgen.fsm.regex.lazy_dfa import ByteDFA

from .test_count_masks import _bpe150k_tokenizer
from .test_direct_rows import _random_regex, _tables

pytestmark = pytest.mark.skipif(
    not hasattr(trie._EXT, "walk_direct_whole"), reason="C walk (walk_direct_whole) not built"
)

COLD = json.loads(
    (Path(__file__).resolve().parents[3] / "benchmarks/data/cold_schemas.json").read_text()
)


def _twins(pattern: str, definitions=None, **kw) -> tuple[ByteDFA, ByteDFA]:
    # the first compile fills process-wide caches that change later interning orders
    _, ref, new = (
        regex_to_dfa(pattern, definitions=definitions or None, eager_rows=0, **kw) for _ in range(3)
    )
    assert _tables(ref) == _tables(new)
    return ref, new


def _walk_both(ref: ByteDFA, new: ByteDFA, tt, s: int, out: bool):
    """``s`` walked on ``ref`` the old way and on ``new`` with ``whole=True``; returns the
    mask and next states (None without ``out``) after checking both walks and tables equal."""
    words = (tt.vocab_size + 31) // 32
    got = []
    for dfa, whole in ((ref, False), (new, True)):
        nxt = np.full(tt.vocab_size, -1, np.int32) if out else None
        mask = np.zeros(words, np.int32)
        if not whole:
            trie.build_row(dfa, s)
        tt.walk(dfa, s, nxt, mask, whole=whole)
        assert dfa.has_whole_row(s)
        got.append((mask, nxt))
    (mask_ref, out_ref), (mask_new, out_new) = got
    assert np.array_equal(mask_ref, mask_new), s
    if out:
        assert np.array_equal(out_ref, out_new), s
    assert _tables(ref) == _tables(new), s
    return mask_new, out_new


def _brute_force(dfa: ByteDFA, vocab, s: int) -> np.ndarray:
    """The mask of ``s`` by stepping every allowable token's bytes one at a time."""
    allowed = np.zeros(vocab.vocab_size, bool)
    never = vocab.index_tables[0]
    for i, data in enumerate(vocab.token_bytes):
        if never[i] or not data:
            continue
        cur = s
        for b in data:
            cur = dfa.step(cur, b)
            if cur < 0:
                break
        allowed[i] = cur >= 0
    return np.packbits(
        np.concatenate([allowed, np.zeros(-allowed.shape[0] % 32, bool)]), bitorder="little"
    ).view("<i4")


def _states(dfa: ByteDFA, prefixes: list[bytes]) -> list[int]:
    """The distinct live states after ``prefixes``."""
    out = []
    for p in prefixes:
        s = dfa.walk(dfa.initial, p)
        if s >= 0 and s not in out:
            out.append(s)
    return out


def _schema_case(name: str, vocab, tokenizer) -> tuple[str, list, list[int]]:
    entry = COLD[name]
    clear_cache()
    grammar = compile_json_schema(entry["schema"], vocab)
    assert isinstance(grammar.dfa, ByteDFA)
    text = json.dumps(entry["instance"], separators=(",", ":"))
    return grammar.pattern, grammar.definitions, tokenizer.encode(text, add_special_tokens=False)


def _along(ref: ByteDFA, new: ByteDFA, vocab, ids: list[int], every: int) -> int:
    """Twins forced through ``ids`` as a matcher is (each state cold: the state a token led
    to, walked before its row is built); every ``every``-th mask against brute force.
    Returns the states whose row the whole walk built."""
    tt, s, built = vocab.token_trie, ref.initial, 0
    for k, tid in enumerate(ids):
        built += not ref.has_whole_row(s)
        mask, nxt = _walk_both(ref, new, tt, s, out=True)
        if k % every == 0:
            assert np.array_equal(mask, _brute_force(ref, vocab, s)), (k, s)
        assert nxt[tid] >= 0, k
        s = int(nxt[tid])
    return built


@pytest.mark.parametrize("name", ["flat", "nested", "formats", "anyOf"])
def test_whole_walk_equals_build_row_then_walk(smollm2_tokenizer, smollm2_vocab, name) -> None:
    """Along each regex cold schema's instance (the states its tokens lead to, cold),
    masks, next states and tables equal the old two calls', and every 8th mask equals brute
    force over SmolLM2's vocabulary."""
    pattern, definitions, ids = _schema_case(name, smollm2_vocab, smollm2_tokenizer)
    ref, new = _twins(pattern, definitions)
    assert _along(ref, new, smollm2_vocab, ids, 8) >= len(ids) // 3


def test_whole_walk_on_random_regexes_and_an_intersection(smollm2_vocab) -> None:
    """Seeded random regexes and an arena with ``AND`` terms (rows built whole in C, each
    derivative's emptiness asked of ``is_empty``): every state met walked both ways."""
    rng = random.Random(2209)
    cases = [("".join(_random_regex(rng) for _ in range(rng.randint(1, 3))), None, [b""])]
    cases += [("".join(_random_regex(rng) for _ in range(rng.randint(1, 3))), None, [b""])]
    p = [chr(PLACEHOLDER_BASE + i) for i in range(3)]
    definitions = ["[a-z]{2,9}", "(?:ab|cd|ef)+", INTERSECT + p[0] + p[1]]
    cases.append((f'"{p[2]}"|[0-9]+{p[0]}', definitions, [b"", b'"', b'"ab', b"1"]))
    tt = smollm2_vocab.token_trie
    for pattern, definitions, prefixes in cases:
        ref, new = _twins(pattern, definitions)
        todo = _states(ref, prefixes)
        assert todo == _states(new, prefixes)  # the twins' rows on the way built alike
        seen = set(todo)
        while todo and len(seen) < 40:
            s = todo.pop(0)
            _walk_both(ref, new, tt, s, out=True)
            for nxt in ref.row(s).tolist():
                if nxt >= 0 and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)


@pytest.mark.slow
def test_whole_walk_masks_by_brute_force_on_the_150k_bpe() -> None:
    """The formats and nested schemas' instances on the 150k BPE: whole walks equal the old
    two calls, every 16th mask brute force over its vocabulary (150k tokens stepped in
    Python each)."""
    tok = _bpe150k_tokenizer()  # skips without the cached BPE
    vocab = Vocabulary.from_tokenizer(tok)
    for name in ("formats", "nested"):
        pattern, definitions, ids = _schema_case(name, vocab, tok)
        ref, new = _twins(pattern, definitions)
        assert _along(ref, new, vocab, ids, 16) >= 10  # (longer tokens: more rows built ahead)


def test_whole_walk_past_the_row_budget_raises_as_build_row(smollm2_vocab) -> None:
    """A state whose row the budget refuses: ``walk_direct_whole`` declines (returns None)
    and the walk raises ``build_row``'s ``GrammarTooComplexError``."""
    tt = smollm2_vocab.token_trie
    words = (tt.vocab_size + 31) // 32
    raised = []
    for whole in (False, True):
        dfa = regex_to_dfa("[a-z]{0,6}[0-9]{0,6}x", eager_rows=0, max_states=3)
        got = None
        for s in range(8):
            if s >= dfa.num_states:
                break
            try:
                if not whole:
                    trie.build_row(dfa, s)
                tt.walk(dfa, s, None, np.zeros(words, np.int32), whole=whole)
            except GrammarTooComplexError as exc:
                got = (s, type(exc))
                break
        raised.append(got)
    assert raised[0] is not None and raised[0] == raised[1]
