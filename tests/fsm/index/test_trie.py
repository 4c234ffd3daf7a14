"""The token-trie walk (``index/trie.py``, ``csrc/tokentrie.c``) against brute force.

Reference: each token's bytes walked one byte at a time through the automaton
(``ByteDFA.walk``), a scalar path that shares nothing with the trie. Checked on a
synthetic vocabulary of ~12k tokens built to hit the walk's corners: every single byte,
multi-byte UTF-8 characters whole and cut at every byte, tokens of up to 20,000 bytes
(live through unbounded strings, dead part-way through bounded ones), prefixes of one
another, duplicate byte strings under two ids, empty, special and EOS ids. Every walk
(the C extension, the numpy level walk, its scalar tail) must give the same table.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import structgen.fsm.index.trie as token_trie
from benchmarks.support import mask_bits
from structgen.errors import GrammarTooComplexError
from structgen.fsm import TokenIndex, Vocabulary, compile_json_schema, compile_regex
from structgen.fsm.regex.dfa import regex_to_dfa

UNICODE = ["é", "€", "😀", "中", "文", "ß", "a", "b", "1", '"', "\\", " "]


LONG = (40, 99, 100, 101, 299, 300, 301, 1000, 5000, 20000)


def _synthetic_vocab(seed: int = 0, long_sizes: tuple[int, ...] = LONG) -> Vocabulary:
    rng = random.Random(seed)
    toks = [b"<eos>", b"<|special|>", b""]  # 0: EOS, 1: special, 2: empty
    toks += [bytes([b]) for b in range(256)]
    toks += [
        b'{"',
        b'":',
        b'",',
        b'"}',
        b'"]',
        b"true",
        b"false",
        b"null",
        b'\\"',
        b"\\n",
        b"\\u00e9",
        b"\\u",
        b"-0",
        b"0.",
        b"1e",
        b"e+",
        b'":"',
        b'"]}',
    ]
    letters = "abcdefghijklmnopqrstuvwxyz0123456789_"
    for _ in range(7000):
        word = "".join(rng.choice(letters) for _ in range(rng.randint(1, 12)))
        toks.append(
            (rng.choice(["", " ", '"', '":"']) + word + rng.choice(["", '"', '",', '":'])).encode()
        )
    for _ in range(3000):
        text = "".join(rng.choice(UNICODE) for _ in range(rng.randint(1, 6))).encode()
        cut_lo = rng.choice([0, 0, 1, 2])  # may start in the middle of a character
        cut_hi = len(text) - rng.choice([0, 0, 1, 2, 3])  # ... or end there
        toks.append(text[cut_lo : max(cut_hi, cut_lo + 1)])
    alpha = b"abcdefghijklmnopqrstuvwxyz"
    for n in long_sizes:
        toks += [
            b"a" * n,
            (alpha * (n // 26 + 1))[:n],
            (b"1234567890" * (n // 10 + 1))[:n],
            b'"' + b"x" * n,
            "é".encode() * (n // 2),
            b"x" * (n // 2) + b'"' + b"y" * (n // 2),
            b"ab" * (n // 2) + b"\xff",
            "😀".encode() * (n // 4) + b"\xf0\x9f",
        ]
    toks += [b'"name', b'"name', b"\xc3\xa9", b"\xc3\xa9"]  # same bytes under two ids
    return Vocabulary(toks, eos_token_ids=[0], special_token_ids=[0, 1])


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return _synthetic_vocab()


def _reference(vocab: Vocabulary, dfa, state: int) -> np.ndarray:
    """int32 ``[vocab_size]``: ``TokenIndex.next_states`` by brute force, token by token."""
    out = np.full(vocab.vocab_size, -1, np.int32)
    for tid, data in enumerate(vocab.token_bytes):
        if tid in vocab.special_token_ids or not data:
            continue
        out[tid] = dfa.walk(state, data)
    for tid in vocab.eos_token_ids:
        out[tid] = state if dfa.is_accepting(state) else -1
    return out


def _states(grammar, vocab: Vocabulary, prefixes: list[bytes], rng: random.Random) -> list[int]:
    """States after hand-picked prefixes, and along a random walk over allowed tokens."""
    dfa = grammar.dfa
    states = [s for s in (dfa.walk(dfa.initial, p) for p in prefixes) if s >= 0]
    state = dfa.initial
    for _ in range(12):
        row = TokenIndex(dfa, vocab).next_states(state)
        allowed = [t for t in np.flatnonzero(row >= 0).tolist() if t not in vocab.eos_token_ids]
        if not allowed:
            break
        state = int(row[rng.choice(allowed)])
        states.append(state)
    return list(dict.fromkeys(states))


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 300},
        "note": {"type": "string"},
        "tag": {"enum": ["é€", "中文", "😀x"]},
        "code": {"type": "string", "pattern": "^[a-z]{3,40}$"},
        "n": {"type": "integer"},
        "xs": {"type": "array", "items": {"type": "string", "minLength": 2}},
    },
    "required": ["name"],
}

CASES = [
    (
        "schema",
        SCHEMA,
        [
            b"",
            b'{"name":"',
            b'{"name":"\xc3',
            b'{"name":"' + b"a" * 250,
            b'{"name":"' + b"a" * 299,
            b'{"name":"a","note":"',
            b'{"name":"a","note":"\xf0\x9f',
            b'{"name":"a","tag":"',
            b'{"name":"a","tag":"\xe4\xb8',
            b'{"name":"a","code":"ab',
            b'{"name":"a","xs":["',
        ],
    ),
    (
        "regex",
        r'"[^"]{0,300}"|(?:abc){1,2000}|[0-9]{5,}',
        [b"", b'"', b'"' + "é".encode() * 100, b"abc" * 1990, b"123"],
    ),
]


def _walk_variants(monkeypatch, dfa, vocab: Vocabulary, state: int) -> dict[str, np.ndarray]:
    """(next_states, bitmask) of ``state`` by every walk: C (if built; with and without the
    subtree shortcut), numpy levels, numpy scalar, numpy levels with a scalar tail; the mask
    alone (no next-state row) and ``token_next_state`` from it must agree."""
    out = {}
    variants = [
        ("numpy-levels", None, 0, 2500),
        ("numpy-scalar", None, 10**9, 10**9),
        ("numpy-mixed", None, 200, 16),
    ]
    if token_trie.HAVE_C_WALK:
        variants.insert(0, ("c", token_trie._c, token_trie._SCALAR_NODES, token_trie._SCALAR_DEPTH))
        variants.insert(1, ("c-no-shortcut", token_trie._c, 0, 0))  # subtree_tables unused
    for name, ext, nodes, depth in variants:
        with monkeypatch.context() as mp:
            mp.setattr(token_trie, "_c", ext)
            mp.setattr(token_trie, "_below", name != "c-no-shortcut")
            mp.setattr(token_trie, "_SCALAR_NODES", nodes)
            mp.setattr(token_trie, "_SCALAR_DEPTH", depth)
            index = TokenIndex(dfa, vocab)
            nxt = np.array(index.next_states(state))
            alone = TokenIndex(dfa, vocab)  # the decoding path: the mask by itself
            mask = np.array(alone.bitmask(state))
            assert (mask == index.bitmask(state)).all(), name
            steps = [alone.token_next_state(state, t) for t in range(0, vocab.vocab_size, 7)]
            assert steps == [
                -1 if t in vocab.eos_token_ids else int(nxt[t])
                for t in range(0, vocab.vocab_size, 7)
            ], name
            out[name] = (nxt, mask)
    return out


@pytest.mark.parametrize("kind,spec,prefixes", CASES, ids=[c[0] for c in CASES])
def test_trie_walk_matches_brute_force(
    monkeypatch, vocab: Vocabulary, kind, spec, prefixes
) -> None:
    grammar = compile_json_schema(spec, vocab) if kind == "schema" else compile_regex(spec, vocab)
    dfa = grammar.dfa
    states = _states(grammar, vocab, prefixes, random.Random(1))
    assert len(states) >= 8
    long_ids = [t for t, b in enumerate(vocab.token_bytes) if len(b) >= 1000]
    dead_midway = live_long = multibyte = 0
    for state in states:
        ref = _reference(vocab, dfa, state)
        for name, (got, mask) in _walk_variants(monkeypatch, dfa, vocab, state).items():
            diff = np.flatnonzero(got != ref)[:5].tolist()
            assert not diff, (
                kind,
                state,
                name,
                [(t, vocab.token_bytes[t][:20], got[t], ref[t]) for t in diff],
            )
            assert mask.dtype == np.int32 and mask.shape == ((vocab.vocab_size + 31) // 32,)
            bits = mask_bits(mask)  # every bit: the padding past the vocabulary too
            assert (bits[: vocab.vocab_size] == (ref >= 0)).all() and not bits[
                vocab.vocab_size :
            ].any()
        live_long += int((ref[long_ids] >= 0).sum())
        # tokens whose first byte is live but that die later on: pruned inside the trie
        dead_midway += sum(
            1 for t in long_ids if ref[t] < 0 and dfa.step(state, vocab.token_bytes[t][0]) >= 0
        )
        multibyte += int(
            sum(ref[t] >= 0 for t, b in enumerate(vocab.token_bytes) if max(b, default=0) >= 0x80)
        )
    assert live_long and dead_midway and multibyte  # the corners were exercised


def test_trie_structure() -> None:
    vocab = _synthetic_vocab(long_sizes=(40, 99, 100, 101, 300))
    trie = vocab.token_trie
    never = vocab.index_tables[0]
    # rebuild every node's prefix from the preorder layout
    path: list[int] = []
    prefixes = []
    for b, d in zip(trie.byte.tolist(), trie.depth.tolist()):
        assert 1 <= d <= len(path) + 1  # preorder: a node follows its parent
        del path[d - 1 :]
        path.append(b)
        prefixes.append(bytes(path))
    assert len(set(prefixes)) == trie.num_nodes  # one node per distinct prefix
    assert prefixes == sorted(prefixes)  # children by ascending byte
    wanted = {
        b[:k] for t, b in enumerate(vocab.token_bytes) if not never[t] for k in range(1, len(b) + 1)
    }
    assert set(prefixes) == wanted
    # subtree ends: the first later node that does not extend the node's prefix
    for i in range(trie.num_nodes):
        j = int(trie.skip[i])
        assert all(p.startswith(prefixes[i]) for p in prefixes[i + 1 : j])
        assert j == trie.num_nodes or not prefixes[j].startswith(prefixes[i])
    holders = {}
    for i, tid in enumerate(trie.token.tolist()):
        if tid >= 0:
            assert vocab.token_bytes[tid] == prefixes[i] and not never[tid]
            holders[prefixes[i]] = tid
    dups = {int(a): int(b) for a, b in trie.dups}
    for tid, data in enumerate(vocab.token_bytes):
        if never[tid]:
            assert tid not in holders.values() and tid not in dups
        elif holders[data] != tid:
            assert dups[tid] == holders[data]
        else:
            assert tid not in dups
    n = vocab.vocab_size
    assert dups[n - 3] == n - 4 and n - 1 in dups  # '"name' twice, 'é' twice (or more)
    assert trie.max_depth == max(len(b) for b in wanted) == 302
    # breadth-first layout (by depth, then preorder; parents as breadth-first positions),
    # deeper than 255 (16-bit sort keys) and, on the short tokens' trie, 8-bit ones
    short = trie.subtrie(np.array([len(b) < 200 for b in vocab.token_bytes]))
    for t in (trie, short):
        depth = t.depth.tolist()
        bfs = sorted(range(t.num_nodes), key=lambda i: (depth[i], i))
        assert t._bfs.tolist() == bfs
        at = {node: k for k, node in enumerate(bfs)}
        parent, last = {}, {}  # preorder parent: the last node one level up before it
        for i, d in enumerate(depth):
            parent[i], last[d] = last.get(d - 1, -1) if d > 1 else -1, i
        assert t._parent_bfs.tolist() == [at.get(parent[i], -1) for i in bfs]
    assert short.max_depth < 256 < trie.max_depth


@pytest.mark.parametrize("walk", ["c", "numpy"])
def test_walk_propagates_budget_errors(monkeypatch, vocab: Vocabulary, walk: str) -> None:
    if walk == "c" and not token_trie.HAVE_C_WALK:
        pytest.skip("C extension not built")
    if walk == "numpy":
        monkeypatch.setattr(token_trie, "_c", None)
    # every position of the counted repetition is a state; the long tokens need 20,000 rows
    dfa = regex_to_dfa(r"[a-z]{0,30000}", max_states=500, eager_rows=1)
    index = TokenIndex(dfa, vocab)
    with pytest.raises(GrammarTooComplexError):
        index.next_states(dfa.initial)
    assert index.num_cached_states == 0


def test_empty_trie_allows_only_eos() -> None:
    vocab = Vocabulary([b"<eos>", b""], eos_token_ids=[0])
    assert vocab.token_trie.num_nodes == 0
    grammar = compile_regex("a?", vocab)
    assert grammar.token_index.next_states(grammar.dfa.initial).tolist() == [0, -1]


@pytest.mark.parametrize(
    "keep_bytes",
    [
        lambda b: any(48 <= c <= 57 for c in b),  # holds a digit
        lambda b: b[:1] == b'"',
        lambda b: not set(b) <= set(b"abcdefghijklmnopqrstuvwxyz-"),  # a byte outside a class
        lambda b: sum(b) % 3 == 0,  # scattered (the same bytes: the same answer)
        lambda b: b in (b'"name', b"\xc3\xa9"),  # only the duplicated ones
        lambda b: False,
    ],
)
def test_subtrie_equals_build(keep_bytes) -> None:
    """``TokenTrie.subtrie`` gives the arrays ``TokenTrie.build`` gives for the same
    tokens (``build``'s layout is checked against brute force by ``test_trie_structure``)."""
    vocab = _synthetic_vocab(long_sizes=(40, 300))
    never = vocab.index_tables[0]
    keep = np.array([bool(b) and keep_bytes(b) for b in vocab.token_bytes])
    sub = vocab.token_trie.subtrie(keep)
    ref = token_trie.TokenTrie.build(vocab.token_bytes, never | ~keep)
    # build ordering the tokens by the whole trie's byte_rank (a numpy sort): the same
    ranked = token_trie.TokenTrie.build(
        vocab.token_bytes, never | ~keep, vocab.token_trie.byte_rank
    )
    # ... and with the bytes gathered from one flat array (the exit tries' path), by rank
    # and by bytes
    _, lengths, flat, starts = vocab.lexical_masks._token_sets()
    data = (flat, starts, lengths)
    gathered = [
        token_trie.TokenTrie.build(vocab.token_bytes, never | ~keep, rank, data)
        for rank in (vocab.token_trie.byte_rank, None)
    ]
    for trie in (sub, ranked, *gathered):
        for name in ("byte", "depth", "skip", "token", "dups", "_bfs", "_parent_bfs"):
            got, want = getattr(trie, name), getattr(ref, name)
            assert got.dtype == want.dtype and np.array_equal(got, want), name
        assert trie.max_depth == ref.max_depth and trie.num_nodes == ref.num_nodes


def test_build_by_rank_falls_back_for_ids_outside() -> None:
    """``build`` with a rank that leaves a kept id out (-1) sorts by the bytes instead."""
    vocab = _synthetic_vocab(long_sizes=(40,))
    never = vocab.index_tables[0]
    small = token_trie.TokenTrie.build(
        vocab.token_bytes, never.copy() | (np.arange(never.size) % 2 == 0)
    )
    ref = token_trie.TokenTrie.build(vocab.token_bytes, never)
    got = token_trie.TokenTrie.build(vocab.token_bytes, never, small.byte_rank)
    for name in ("byte", "depth", "skip", "token", "dups", "_bfs", "_parent_bfs"):
        assert np.array_equal(getattr(got, name), getattr(ref, name)), name


def test_subtrie_rejects_bad_keep() -> None:
    vocab = _synthetic_vocab(long_sizes=(40,))
    trie = vocab.token_trie
    with pytest.raises(ValueError, match="shape"):
        trie.subtrie(np.ones(vocab.vocab_size - 1, bool))
    keep = np.ones(vocab.vocab_size, bool)
    keep[int(trie.dups[0, 0])] = False  # one of two ids with the same bytes
    with pytest.raises(ValueError, match="same bytes"):
        trie.subtrie(keep)


def _holding_masks(rng: random.Random) -> list[int]:
    """Byte sets for ``holding``: single bytes in each 64-byte word, a quote, a digit run,
    scattered sets of 1-40 bytes, the UTF-8 lead bytes and all 256 bytes."""
    out = [1 << b for b in (0, 34, 63, 64, 127, 128, 0xC3, 255)]
    out += [sum(1 << b for b in range(48, 58)), sum(1 << b for b in range(0xC0, 0xF8))]
    out += [sum(1 << b for b in rng.sample(range(256), rng.randint(1, 40))) for _ in range(24)]
    return out + [(1 << 256) - 1]


@pytest.mark.skipif(not token_trie.holding_in_c(), reason="the C extension is not built")
@pytest.mark.parametrize("which", ["synthetic", "smollm2"])
def test_holding_equals_build(which, request) -> None:
    """``TokenTrie.holding`` (one C pass in byte order) gives the arrays of
    ``TokenTrie.build`` of the tokens holding a byte of the set (``build``'s layout is
    checked against brute force by ``test_trie_structure``), the packed bits of exactly
    those tokens, and None past ``max_bytes``: on the synthetic
    vocabulary (duplicate byte strings, tokens of up to 300 bytes, cut UTF-8) and on
    SmolLM2's."""
    if which == "synthetic":
        vocab = _synthetic_vocab(long_sizes=(40, 300))
    else:
        vocab = request.getfixturevalue("smollm2_vocab")
    never = vocab.index_tables[0]
    trie = vocab.token_trie
    _, lengths, flat, starts = vocab.lexical_masks._token_sets()
    data = (flat, starts, lengths)
    words = (vocab.vocab_size + 31) // 32
    token_sets = [sum(1 << b for b in set(t)) for t in vocab.token_bytes]  # brute force
    for i, byte_mask in enumerate(_holding_masks(random.Random(7))):
        holds = np.array([bool(t & byte_mask) for t in token_sets])
        keep = holds & ~never
        size = int(lengths[keep].sum())
        packed = np.zeros(words, np.int32)
        got = trie.holding(byte_mask, data, size, packed)
        assert np.array_equal(mask_bits(packed, vocab.vocab_size), keep), hex(byte_mask)
        # the reference by bytes (a Python sort) on a few sets, by rank on the rest
        rank = None if i % 8 == 0 else trie.byte_rank
        ref = token_trie.TokenTrie.build(vocab.token_bytes, ~keep, rank)
        for name in ("byte", "depth", "skip", "token", "dups", "_bfs", "_parent_bfs"):
            a, b = getattr(got, name), getattr(ref, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), (hex(byte_mask), name)
        assert got.max_depth == ref.max_depth and got.num_nodes == ref.num_nodes
        if size:
            assert trie.holding(byte_mask, data, size - 1, np.zeros(words, np.int32)) is None


@pytest.mark.skipif(not token_trie.holding_in_c(), reason="the C extension is not built")
def test_holding_rejects_bad_input(monkeypatch) -> None:
    """``holding`` refuses arrays of the wrong sizes and an order not in byte order (a
    wrong order would build a wrong trie), and needs the C walk in use."""
    vocab = _synthetic_vocab(long_sizes=(40,))
    trie = vocab.token_trie
    _, lengths, flat, starts = vocab.lexical_masks._token_sets()
    packed = np.zeros((vocab.vocab_size + 31) // 32, np.int32)
    assert trie.holding(1 << 97, (flat, starts, lengths), 10**9, packed) is not None
    with pytest.raises(ValueError, match="starts"):  # postings built by the call above
        trie.holding(1 << 97, (flat, starts[:-1], lengths), 10**9, packed)
    trie.__dict__["byte_order"] = trie.byte_order[::-1].copy()
    with pytest.raises(ValueError, match="byte order"):
        trie.holding((1 << 256) - 1, (flat, starts, lengths), 10**9, packed)
    monkeypatch.setattr(token_trie, "_c", None)
    with pytest.raises(RuntimeError, match="C extension"):
        trie.holding(1 << 97, (flat, starts, lengths), 10**9, packed)


@pytest.mark.skipif(not token_trie.holding_in_c(), reason="the C extension is not built")
@pytest.mark.parametrize(
    "keep_bytes",
    [
        lambda b: len(b) >= 40,  # the long tokens alone (count_masks' long runs)
        lambda b: b[:1] == b'"',
        lambda b: sum(b) % 3 == 0,  # scattered
        lambda b: b in (b'"name', b"\xc3\xa9"),  # only the duplicated ones
        lambda b: True,
        lambda b: False,
    ],
)
def test_subset_equals_build(keep_bytes) -> None:
    """``TokenTrie.subset`` (the C build over the ids in ``byte_rank`` order) gives the
    arrays ``TokenTrie.build`` gives for the same tokens, and refuses ids it cannot order."""
    vocab = _synthetic_vocab(long_sizes=(40, 300))
    never = vocab.index_tables[0]
    keep = np.array([bool(b) and keep_bytes(b) for b in vocab.token_bytes]) & ~never
    _, lengths, flat, starts = vocab.lexical_masks._token_sets()
    got = vocab.token_trie.subset(np.flatnonzero(keep), (flat, starts, lengths))
    ref = token_trie.TokenTrie.build(vocab.token_bytes, ~keep)
    for name in ("byte", "depth", "skip", "token", "dups", "_bfs", "_parent_bfs"):
        a, b = getattr(got, name), getattr(ref, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    assert got.max_depth == ref.max_depth and got.num_nodes == ref.num_nodes
    with pytest.raises(ValueError, match="ascending"):
        vocab.token_trie.subset(np.array([5, 4]), (flat, starts, lengths))
    with pytest.raises(ValueError, match="does not hold"):
        vocab.token_trie.subset(np.flatnonzero(never)[:1], (flat, starts, lengths))


@pytest.mark.skipif(not token_trie.holding_in_c(), reason="the C extension is not built")
def test_byte_postings_against_brute_force() -> None:
    """``TokenTrie.byte_postings`` (C): for every byte, the positions in ``byte_order`` of
    the tokens holding it (once each, ascending) and their bytes in all, against a Python
    scan of the tokens; ``byte_order`` is the trie's tokens sorted by bytes, then id."""
    vocab = _synthetic_vocab(long_sizes=(40, 300))
    trie = vocab.token_trie
    order = trie.byte_order.tolist()
    toks = vocab.token_bytes
    kept = [i for i in range(vocab.vocab_size) if not vocab.index_tables[0][i]]
    assert order == sorted(kept, key=lambda i: (toks[i], i))
    _, lengths, flat, starts = vocab.lexical_masks._token_sets()
    offsets, positions, totals = trie.byte_postings((flat, starts, lengths))
    for b in range(256):
        want = [k for k, i in enumerate(order) if b in toks[i]]
        assert positions[offsets[b] : offsets[b + 1]].tolist() == want, b
        assert totals[b] == sum(len(toks[order[k]]) for k in want), b
