"""The C walks' own row builder (``walk_direct``, ``walk_bytes_direct``, ``csrc/dfa_rows.h``)
against the callback.

``walk_direct`` builds a ``ByteDFA``'s missing rows and derives its ``PENDING`` classes in C
over the automaton's own tables, where ``walk_fused`` calls ``ByteDFA.row_tables(state,
byte)`` (Python) for each (``walk_bytes_direct`` / ``walk_bytes`` likewise for one token).
The reference is the callback: twin automata of one pattern (built with no rows) step the
same tokens and walk the same states over SmolLM2's trie, one each way, and after every
step and walk their results, next states, arenas (every term, in interning order) and tables
(terms, row slots, rows with their ``PENDING`` entries, accepting flags, live-byte counts,
rows left pending) must be equal; then every row is completed (``ByteDFA.row`` against
``trie.build_row``'s C build, or the C walk's ``_pending`` entries rebuilt from the rows)
and compared again. Patterns: the cold
benchmark's regex schemas, MaskBench schemas, seeded random regexes, and one intersection
(whose rows the C builder hands back to ``row_tables``). End to end, a fresh compile forced
through each cold schema's instance gives the same masks both ways.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.corpus import CORPORA
from structgen.errors import StructgenError
from structgen.fsm import clear_cache, compile_json_schema
from structgen.fsm.index import trie
from structgen.fsm.regex.definitions import INTERSECT, PLACEHOLDER_BASE
from structgen.fsm.regex.dfa import regex_to_dfa
from structgen.fsm.regex.lazy_dfa import ByteDFA
from structgen.fsm.regex.terms import _SHALLOW

pytestmark = pytest.mark.skipif(
    not hasattr(trie._EXT, "walk_direct"), reason="C walk (walk_direct) not built"
)

COLD = json.loads(
    (Path(__file__).resolve().parents[3] / "benchmarks/data/cold_schemas.json").read_text()
)
PLAIN = CORPORA / "jsonschemabench" / "plain"
MASKBENCH = ["Glaiveai2K", "Github_easy", "JME", "Snowplow", "WashingtonPost", "BFCL_simple"]
MAX_STATES_WALKED = 60


def _tables(dfa: ByteDFA) -> tuple:
    """Everything the two walks may write, as plain values."""
    n, r, arena = dfa.num_states, dfa.num_rows_built, dfa.arena
    return (
        list(dfa._terms),
        dfa._slot[:n].tolist(),
        dfa._rows[:r].tobytes(),
        dfa._accepting[:n].tolist(),
        dfa._num_out[:n].tolist(),
        sorted(dfa._pending),
        arena.num_terms,
        list(arena.args),
    )


def _walk(dfa: ByteDFA, tt, state: int, direct: bool) -> tuple[np.ndarray, np.ndarray]:
    out = np.full(tt.vocab_size, -1, np.int32)
    mask = np.zeros((tt.vocab_size + 31) // 32, np.int32)
    trie.use_direct_rows(direct)
    try:
        assert (trie._walk_c(dfa) is trie._EXT.walk_direct) == direct
        tt.walk(dfa, state, out, mask)
    finally:
        trie.use_direct_rows(True)
    return out, mask


def _compare_walks(vocab, pattern: str, definitions, prefixes: list[bytes]) -> int:
    """Twin automata at the states after ``prefixes``: 30 random tokens stepped from each
    (``walk_bytes``), then masks walked there and breadth-first over the states found (up to
    MAX_STATES_WALKED walks) over ``vocab``'s trie; returns the walks compared."""
    tt = vocab.token_trie
    # the first compile of a pattern fills process-wide caches (byte-class recipes) that
    # change the interning order of later ones: twins are the two compiles after it
    _, ref, new = (
        regex_to_dfa(pattern, definitions=definitions or None, eager_rows=0) for _ in range(3)
    )
    assert _tables(ref) == _tables(new)
    builds = {id(ref): 0, id(new): 0}  # row_tables calls that build or derive

    def counted(dfa):
        tables = dfa.row_tables

        def row_tables(state=-1, byte=-1):
            builds[id(dfa)] += state >= 0
            return tables(state, byte)

        return row_tables

    ref.row_tables, new.row_tables = counted(ref), counted(new)
    starts = []
    for p in prefixes:
        s = ref.walk(ref.initial, p)
        assert new.walk(new.initial, p) == s
        if s >= 0 and s not in starts:
            starts.append(s)
    rng = random.Random(len(pattern))
    tokens = [t for t in vocab.token_bytes if t]
    for s in starts[:20]:  # single tokens first (walk_bytes builds their rows, cold)
        for data in rng.sample(tokens, 30):
            got = []
            for dfa, direct in ((ref, False), (new, True)):
                trie.use_direct_rows(direct)
                try:
                    got.append(trie.walk_bytes(dfa, s, data))
                finally:
                    trie.use_direct_rows(True)
            assert got[0] == got[1], (pattern[:80], s, data)
            assert _tables(ref) == _tables(new), (pattern[:80], s, data)
    walked, k = 0, 0
    while walked < MAX_STATES_WALKED:
        if k < len(starts):
            s = starts[k]
        elif k - len(starts) < ref.num_states:
            s = k - len(starts)
        else:
            break
        k += 1
        if k % 2:  # as TokenIndex._walk_whole: the row whole first (build_row)
            ref.row(s)
            trie.build_row(new, s)
            assert _tables(ref) == _tables(new), (pattern[:80], s)
        out_ref, mask_ref = _walk(ref, tt, s, direct=False)
        out_new, mask_new = _walk(new, tt, s, direct=True)
        assert np.array_equal(mask_ref, mask_new), (pattern[:80], s)
        assert np.array_equal(out_ref, out_new), (pattern[:80], s)
        assert _tables(ref) == _tables(new), (pattern[:80], s)
        walked += 1
    assert builds[id(ref)] > 0  # the callback built rows; walk_direct needed it only for
    assert builds[id(new)] == 0 or new.arena._num_boolean  # an arena with AND / NOT
    for s in range(ref.num_states):  # every row whole: in C for half, C's _pending rebuilt
        if s % 2:
            trie.build_row(new, s)
        assert np.array_equal(ref.row(s), new.row(s)), (pattern[:80], s)
        assert _tables(ref) == _tables(new), (pattern[:80], s)
    assert _tables(ref) == _tables(new)
    assert not new._pending
    return walked


def _schema_pattern(schema, vocab):
    clear_cache()
    grammar = compile_json_schema(schema, vocab)
    if not isinstance(grammar.dfa, ByteDFA):
        return None
    return grammar.pattern, grammar.definitions


@pytest.mark.slow
@pytest.mark.parametrize("name", ["flat", "nested", "formats", "anyOf"])
def test_direct_rows_equal_callback_rows_on_cold_schemas(smollm2_vocab, name) -> None:
    entry = COLD[name]
    pattern, definitions = _schema_pattern(entry["schema"], smollm2_vocab)
    text = json.dumps(entry["instance"], separators=(",", ":")).encode()
    prefixes = [text[:i] for i in range(len(text) + 1)]
    assert _compare_walks(smollm2_vocab, pattern, definitions, prefixes) > 10


@pytest.mark.slow
@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
@pytest.mark.parametrize("subset", MASKBENCH)
def test_direct_rows_equal_callback_rows_on_maskbench(smollm2_vocab, subset) -> None:
    files = sorted((PLAIN / subset).glob("*.json"))
    random.Random(22).shuffle(files)
    compared = 0
    for f in files[:30]:
        doc = json.loads(f.read_text(encoding="utf-8"))
        try:
            got = _schema_pattern(doc["schema"], smollm2_vocab)
        except StructgenError:  # unsupported or too complex: not this test's subject
            continue
        if got is None:
            continue
        valid = [t["data"] for t in doc.get("tests", []) if t["valid"]]
        prefixes = [b""]
        if valid:
            text = json.dumps(valid[0], separators=(",", ":")).encode()
            prefixes += [text[:i] for i in range(1, len(text) + 1, 3)]
        _compare_walks(smollm2_vocab, *got, prefixes)
        compared += 1
        if compared == 2:
            break
    assert compared >= 1


def test_direct_rows_equal_callback_rows_on_a_pattern_under_max_length(smollm2_vocab) -> None:
    """A ``pattern`` + ``maxLength`` string (MaskBench o21135's ``apiType``): a product of
    the pattern's NFA with a character counter, one definition per state, so its terms are
    deeper than ``_SHALLOW`` (``derive_deep`` / ``front_top``), walked from the string's
    start and from inside it, past a two- and a three-byte character."""
    string = {"type": "string", "pattern": "^$|(^(?:\\S+\\s+){0,19}\\S+$)", "maxLength": 100}
    schema = {"type": "object", "properties": {"a": string}, "required": ["a"]}
    clear_cache()
    grammar = compile_json_schema(schema, smollm2_vocab)
    pattern, definitions = grammar.source_pattern, grammar.definitions  # not written out
    assert len(definitions) > 100  # the product's states, one definition each
    assert max(grammar.dfa.arena.depth) > _SHALLOW  # derived as deep terms
    text = '{"a":"REST API é with ☃ words"}'.encode()
    prefixes = [text[:i] for i in range(5, len(text), 2)]
    assert _compare_walks(smollm2_vocab, pattern, definitions, prefixes) > 10


def _random_regex(rng: random.Random, depth: int = 0) -> str:
    atoms = ["a", "b", "ab", "é", "☃", '"', "\\\\", "[a-z]", "[^\"\\\\]", "\\d", "[0-9a-f]", ".",
             "[\u00e0-\u00ff]", " ", "\\w"]  # fmt: skip
    if depth >= 3 or rng.random() < 0.3:
        return rng.choice(atoms)
    kind = rng.randrange(5)
    parts = [_random_regex(rng, depth + 1) for _ in range(rng.randint(2, 3))]
    if kind == 0:
        return "(?:" + "|".join(parts) + ")"
    if kind == 1:
        return "".join(parts)
    body = "(?:" + "".join(parts) + ")"
    return (
        body
        + ["*", "+", "?", "{%d,%d}" % (lo := rng.randint(0, 3), lo + rng.randint(0, 20))][
            rng.randrange(4)
        ]
    )


def test_direct_rows_equal_callback_rows_on_random_regexes(smollm2_vocab) -> None:
    rng = random.Random(2022)
    for _ in range(30):
        pattern = "".join(_random_regex(rng) for _ in range(rng.randint(1, 4)))
        _compare_walks(smollm2_vocab, pattern, None, [b""])


def test_direct_rows_hand_back_an_intersection(smollm2_vocab) -> None:
    """An arena with ``AND`` terms: the C builder leaves rows to ``row_tables`` (emptiness
    is decided there), and the walks still agree."""
    p = [chr(PLACEHOLDER_BASE + i) for i in range(3)]
    definitions = ["[a-z]{2,9}", "(?:ab|cd|ef)+", INTERSECT + p[0] + p[1]]
    pattern = f'"{p[2]}"|[0-9]+{p[0]}'
    assert _compare_walks(smollm2_vocab, pattern, definitions, [b"", b'"', b'"ab']) > 3


def test_rows_in_an_arena_with_and_are_built_in_c(smollm2_vocab) -> None:
    """An arena holding ``AND`` terms (``INTERSECT`` definitions, one of them empty though
    not syntactically) and terms without any (the rest of the pattern): every row is built
    in C (``_build_row``'s ``fill_row``, ``walk_direct``'s builder; a term holding ``AND``
    its row whole, each derivative's emptiness asked of ``is_empty``), none class by class
    in Python; every table (live-byte counts included), walk and next state equals a
    twin's built with no C derivative or row (``terms.use_extension(False)``), and the
    masks equal brute force (token by token)."""
    from structgen.fsm.regex import terms

    p = [chr(PLACEHOLDER_BASE + i) for i in range(6)]
    definitions = ["[a-z]{2,9}", "(?:ab|cd|ef)+", INTERSECT + p[0] + p[1]]
    definitions += ["a(?:aa)*", "(?:aa)+", INTERSECT + p[3] + p[4]]  # odd and even: empty
    pattern = f'"{p[2]}",[0-9]{{1,5}},"[a-zA-Z ]{{0,40}}"|x[a-z]*y|z{p[5]}q|zcd'
    # new terms decided by parts in C from memos an earlier search left: after "1", by "2",
    # an alternation of a concatenation with the empty intersection (memoised) and a live
    # term; after "7", by "7", a concatenation holding an alternation with the live one
    pattern += f"|[0-9][0-9]{p[5]}s|[0-9]+t|7{p[2]}8|77(?:{p[2]}|q)6"

    def python_only(fn, *args):
        terms.use_extension(False)
        try:
            return fn(*args)
        finally:
            terms.use_extension(True)

    def lower():
        return regex_to_dfa(pattern, definitions=definitions, eager_rows=0)

    lower()  # fills the process-wide recipes: the twins are the compiles after it
    ref, new = python_only(lower), lower()
    assert _tables(ref) == _tables(new) and new.arena._num_boolean
    # the terms whose rows _build_row derives class by class in Python (its _live_classes)
    built_in_python: list[int] = []
    building: list[int] = []
    build_row, live_classes = new._build_row, new._live_classes

    def recorded_build(state, lazy=False):
        building.append(state)
        try:
            return build_row(state, lazy)
        finally:
            building.pop()

    def recorded_classes(term, first):
        if building:
            built_in_python.append(term)
        return live_classes(term, first)

    new._build_row, new._live_classes = recorded_build, recorded_classes
    # emptiness asked of the Python method: every derivative's in the twin, in C where no
    # search is needed here (csrc/regex_derive.h dead_term), with the same memos stored
    asked = {"ref": 0, "new": 0}

    def counted(arena, name):
        method = arena.is_empty

        def is_empty(t):
            asked[name] += 1
            return method(t)

        arena.is_empty = is_empty

    counted(ref.arena, "ref")
    counted(new.arena, "new")
    tt = smollm2_vocab.token_trie
    starts = []
    prefixes = (b"", b"z", b'"', b'"ab', b'"abcd",', b'"ef",12,"', b'"ef",12,"Ab c', b"xq")
    for prefix in prefixes + (b"1", b"7", b"77"):
        s = python_only(ref.walk, ref.initial, prefix)
        assert new.walk(new.initial, prefix) == s >= 0, prefix
        starts.append(s)
    seen, k = set(), 0
    while k < len(starts) and k < 40:
        s = starts[k]
        k += 1
        if s in seen:
            continue
        seen.add(s)
        if k % 2:  # the row whole first, in C (as TokenIndex._walk_whole) or in Python
            python_only(ref.row, s)
            if k % 4 == 1:
                trie.build_row(new, s)
            else:
                new.row(s)
        out_ref, mask_ref = python_only(_walk, ref, tt, s, False)
        out_new, mask_new = _walk(new, tt, s, True)
        assert np.array_equal(out_ref, out_new) and np.array_equal(mask_ref, mask_new), s
        assert _tables(ref) == _tables(new), s
        assert ref.arena._empty == new.arena._empty, s
        assert ref.arena._has_boolean == new.arena._has_boolean, s
        if k <= 8:  # brute force: each token's bytes stepped through the reference
            want = np.array(
                [ref.walk(s, data) if data else -1 for data in smollm2_vocab.token_bytes]
            )
            want[~np.isin(np.arange(want.shape[0]), tt.token[tt.token >= 0])] = -1
            for tid, holder in tt.dups.tolist():
                want[tid] = want[holder]
            assert np.array_equal(want >= 0, out_new >= 0), s
        starts.extend(np.unique(out_new[out_new >= 0]).tolist())
    assert len(seen) > 20 and not built_in_python
    assert asked["new"] < asked["ref"] / 2, asked
    assert sum(new.arena.has_boolean(new._terms[s]) for s in seen) >= 3
    z = new.walk(new.initial, b"z")  # "a" leads into the empty intersection only: dead
    assert new.row(z)[ord("a")] == -1 and new._num_out[z] == 1  # "z" then "cd" only


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COLD))
def test_direct_rows_masks_along_cold_instances(smollm2_tokenizer, smollm2_vocab, name) -> None:
    """A fresh compile of each cold schema (the recursive one a grammar automaton) forced
    through its instance: every mask equal with and without ``walk_direct``."""
    assert_masks_equal_with_and_without(
        smollm2_tokenizer, smollm2_vocab, COLD[name], trie.use_direct_rows, name
    )


def assert_masks_equal_with_and_without(tokenizer, vocab, entry, toggle, name) -> None:
    """A fresh compile of ``entry["schema"]`` (caches and the vocabulary's lexical masks
    cleared) forced through ``entry["instance"]`` with ``toggle(False)`` and ``toggle(True)``
    (a walk shortcut's switch, left on): every mask along the way equal."""
    ids = tokenizer.encode(json.dumps(entry["instance"], separators=(",", ":")))
    masks = []
    for on in (False, True):
        toggle(on)
        try:
            clear_cache()
            vocab.lexical_masks.clear()
            matcher = compile_json_schema(entry["schema"], vocab).matcher()
            got = []
            for tid in ids:
                buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
                matcher.fill_bitmask(buf, 0)
                got.append(buf[0].numpy().copy())
                assert matcher.advance(tid)
            masks.append(got)
        finally:
            toggle(True)
    assert len(masks[0]) == len(masks[1]) == len(ids)
    for k, (a, b) in enumerate(zip(*masks)):
        assert np.array_equal(a, b), (name, k)


@pytest.mark.slow
def test_direct_rows_from_threads_give_the_serial_masks(smollm2_vocab) -> None:
    """Four threads walk masks of one cold automaton at once (``walk_direct`` releases the
    GIL between builds and takes the automaton's lock for each): every mask equals the one a
    serial walk through the callback gives on a twin (the token sets, whatever the state
    numbering the interleaving gives)."""
    import threading

    entry = COLD["formats"]
    pattern, definitions = _schema_pattern(entry["schema"], smollm2_vocab)
    text = json.dumps(entry["instance"], separators=(",", ":")).encode()
    prefixes = [text[:i] for i in range(0, len(text) + 1, 2)]
    _, ref, new = (
        regex_to_dfa(pattern, definitions=definitions or None, eager_rows=0) for _ in range(3)
    )
    starts = [(ref.walk(ref.initial, p), new.walk(new.initial, p)) for p in prefixes]
    tt = smollm2_vocab.token_trie
    want = [_walk(ref, tt, s, direct=False)[1] for s, _ in starts]
    got: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(k0: int) -> None:
        try:
            for k in range(k0, len(starts), 4):
                mask = np.zeros((tt.vocab_size + 31) // 32, np.int32)
                tt.walk(new, starts[k][1], None, mask)
                got[k] = mask
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, mask in enumerate(want):
        assert np.array_equal(mask, got[k]), (k, prefixes[k])
    for s in range(new.num_states):  # the tables stay consistent: every row completes
        trie.build_row(new, s)
        assert new.has_whole_row(s)
