"""The per-token mask write (``index.masks``: C ``fill_row`` and its numpy fallback) and the
matcher's warm paths (cached destination, step memo) against plain torch indexing and the
slow reference paths (``TokenIndex.bitmask``, ``ByteDFA.walk`` over a token's bytes)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from benchmarks.support import allowed_ids
from structgen.fsm import Vocabulary, compile_json_schema, compile_regex
from structgen.fsm.index import masks, token_index, trie
from structgen.fsm.index.trie import HAVE_C_WALK

WRITERS = ["c", "numpy"]


@pytest.fixture(params=WRITERS)
def writer(request, monkeypatch):
    """Run the test with the C writer (skipped when the extension lacks it) and without it."""
    if request.param == "c" and masks.fill_row is None:
        pytest.skip("the _tokentrie extension with fill_row is not built")
    if request.param == "numpy":
        monkeypatch.setattr(masks, "fill_row", None)
    masks.forget()
    yield request.param
    masks.forget()


def _expected(before: torch.Tensor, row: int, words: np.ndarray | None) -> torch.Tensor:
    """What writing ``words`` into ``before[row]`` must give, by torch indexing."""
    out = before.clone()
    target = out[row]
    target.zero_()
    if words is not None:
        n = min(words.shape[0], target.shape[0])
        target[:n] = torch.from_numpy(words[:n].copy())
    return out


def _words(rng: np.random.Generator, n: int) -> np.ndarray:
    w = rng.integers(-(1 << 31), 1 << 31, n, dtype=np.int64).astype(np.int32)
    w.setflags(write=False)  # as the index's cached masks
    return w


VIEWS = {
    "whole": lambda t: t,
    "strided rows": lambda t: t[1::2, 2:7],  # rows 1, 3, 5; words 2..6
    "one column": lambda t: t[:, 4:5],
    "columns step 2": lambda t: t[:, ::2],  # words not contiguous: torch path
    "transposed": lambda t: t.t(),  # likewise
}


@pytest.mark.parametrize("words_len", [1, 5, 9, 40])
@pytest.mark.parametrize("view_name", list(VIEWS))
def test_write_matches_torch_indexing(writer, words_len, view_name) -> None:
    rng = np.random.default_rng(words_len)
    base = torch.full((6, 9), -7, dtype=torch.int32)
    view = VIEWS[view_name](base)
    for row in range(-view.shape[0], view.shape[0]):
        for words in (_words(rng, words_len), None):
            before = base.clone()
            want = _expected(view, row, words)
            masks.write(view, row, words)
            assert torch.equal(view, want), row
            inside = torch.zeros_like(base, dtype=torch.bool)
            VIEWS[view_name](inside)[row] = True
            assert torch.equal(base[~inside], before[~inside]), row  # nothing else written


def test_write_other_dtypes_and_rows(writer) -> None:
    rng = np.random.default_rng(0)
    words = _words(rng, 3)
    wide = torch.full((2, 3), 5, dtype=torch.int64)  # not int32: torch ops, values kept
    masks.write(wide, 1, words)
    assert wide[1].tolist() == words.astype(np.int64).tolist() and wide[0].tolist() == [5] * 3
    bm = torch.zeros((2, 3), dtype=torch.int32)
    for bad in (2, -3):
        with pytest.raises(IndexError):
            masks.write(bm, bad, words)
        masks.write(bm, 0, words)  # a bad row leaves the cached destination usable
        assert bm[0].tolist() == words.tolist()
    empty = torch.zeros((2, 0), dtype=torch.int32)
    masks.write(empty, 1, words)  # nothing to write
    assert empty.shape == (2, 0)


@pytest.mark.parametrize(
    "change", ["resize_", "t_", "as_strided_", "set_", "storage grows", "zero_", "other tensor"]
)
def test_cached_destination_follows_in_place_changes(writer, change) -> None:
    rng = np.random.default_rng(1)
    bm = torch.full((4, 6), -1, dtype=torch.int32)
    masks.write(bm, 1, _words(rng, 6))  # caches bm's layout
    if change == "resize_":
        bm.resize_((6, 4))  # same memory, new row length
    elif change == "t_":
        bm.t_()  # [6, 4], rows no longer contiguous words
    elif change == "as_strided_":
        bm.as_strided_((3, 5), (7, 1), 1)
    elif change == "set_":
        bm.set_(torch.full((3, 8), -1, dtype=torch.int32))
    elif change == "storage grows":
        if writer == "numpy":  # a numpy view pins the storage's size (as before this cache)
            with pytest.raises(RuntimeError, match="not resizable"):
                bm.resize_((40, 60))
            return
        bm.resize_((40, 60))  # a new allocation: the data pointer moves
        bm.fill_(-1)
    elif change == "zero_":
        bm.zero_()
    else:
        bm = torch.full((4, 6), -1, dtype=torch.int32)
    for row in range(bm.shape[0]):
        words = _words(rng, 5)
        want = _expected(bm, row, words)
        masks.write(bm, row, words)
        assert torch.equal(bm, want), (change, row)


class _Subclass(torch.Tensor):
    """A tensor subclass: fill_row's checks take the generic attribute lookup for it."""


@pytest.mark.parametrize("kind", ["plain", "subclass", "parameter"])
@pytest.mark.parametrize(
    "change", ["none", "zero_", "storage reallocated", "type patched", "data_ptr shadowed"]
)
def test_checks_by_tensor_type_follow_changes(writer, kind, change) -> None:
    """The C checks read a plain tensor's ``_version`` / ``data_ptr`` through the type's
    descriptors (``bind_tensor_type``), any other tensor by attribute lookup: each write
    equals torch indexing, whatever changed between writes, the storage reallocated under
    the tensor (no version bump) and a patched ``torch.Tensor`` included."""
    rng = np.random.default_rng(7)
    bm = torch.full((3, 6), -1, dtype=torch.int32)
    if kind == "subclass":
        bm = bm.as_subclass(_Subclass)
    elif kind == "parameter":
        bm = torch.nn.Parameter(bm, requires_grad=False)
    masks.write(bm, 1, _words(rng, 6))  # caches bm's layout
    try:
        if change == "zero_":
            with torch.no_grad():
                bm.zero_()  # the version bumps
        elif change == "storage reallocated":
            storage = bm.untyped_storage()
            before = bm.data_ptr()
            if writer == "numpy":  # its cached numpy view pins the storage's size
                with pytest.raises(RuntimeError, match="not resizable"):
                    storage.resize_(storage.nbytes() * 64)
                return
            storage.resize_(storage.nbytes() * 64)  # a new allocation, the same version
            assert bm.data_ptr() != before
        elif change == "type patched":
            torch.Tensor._structgen_test_attr = 1  # a new type version tag
        elif change == "data_ptr shadowed":
            if kind != "plain":  # C's attribute lookup would trust the shadow, as describe
                pytest.skip("only a plain tensor's checks bypass the instance attribute")
            bm.data_ptr = lambda: 4096  # describe() reads this; C the real pointer
            bm.zero_()  # the version bumps: the next write describes bm again
        for row in (0, 2, 1, 0):
            words = _words(rng, 5)
            want = _expected(bm.detach().as_subclass(torch.Tensor), row, words)
            masks.write(bm, row, words)
            assert torch.equal(bm.detach().as_subclass(torch.Tensor), want), (kind, change, row)
    finally:
        if change == "type patched":
            del torch.Tensor._structgen_test_attr


def test_forget_after_data_swap(writer) -> None:
    """``tensor.data = ...`` bumps no version: documented, and ``forget`` handles it."""
    rng = np.random.default_rng(2)
    bm = torch.zeros((2, 4), dtype=torch.int32)
    masks.write(bm, 0, _words(rng, 4))
    bm.data = torch.zeros((3, 5), dtype=torch.int32)  # new storage: the data pointer differs
    words = _words(rng, 5)
    want = _expected(bm, 2, words)
    masks.write(bm, 2, words)
    assert torch.equal(bm, want)
    masks.forget()
    masks.write(bm, 1, words)
    assert torch.equal(bm[1], torch.from_numpy(words.copy()))


# ---- the matcher's warm paths ----------------------------------------------------------


def _vocab() -> Vocabulary:
    tokens = [
        b"<eos>",
        b"<s>",
        b"{",
        b"}",
        b'"',
        b"a",
        b"1",
        b",",
        b":",
        b'{"',
        b'a"',
        b"\xc3",
        b"\xa9",
        b"\xc3\xa9",
        b"\\",
        b"n",
        b"-",
        b"0",
        b"12",
        b".5",
        b"e",
        b"true",
        b"t",
        b"[",
        b"]",
        b'":',
        b'"k"',
        b"",
    ]
    tokens += [bytes([c]) for c in range(32, 127) if bytes([c]) not in tokens]
    return Vocabulary(tokens, eos_token_ids=[0], special_token_ids=[0, 1])


SCHEMA = {
    "type": "object",
    "properties": {
        "k": {"type": "string", "maxLength": 6},
        "a": {"type": "integer"},
        "b": {"type": "array", "items": {"type": "boolean"}},
    },
    "required": ["k"],
}


def _reference_mask(matcher, vocab: Vocabulary, words: int) -> torch.Tensor:
    """The slow path: the index's mask (or the budget's), zeroed after EOS, padded."""
    out = torch.zeros(words, dtype=torch.int32)
    state, eos_taken = matcher._history[-1]
    if eos_taken:
        return out
    mask = None
    if matcher.is_budgeted:
        mask = matcher._budget.mask(state, matcher.remaining_tokens())
    if mask is None:
        mask = matcher._index.bitmask(state)
    n = min(words, mask.shape[0])
    out[:n] = torch.from_numpy(np.array(mask[:n]))
    return out


@pytest.mark.parametrize("max_tokens", [None, 9, 40])
def test_fill_bitmask_and_advance_match_reference(writer, max_tokens) -> None:
    vocab = _vocab()
    grammar = compile_json_schema(SCHEMA, vocab)
    dfa = grammar.dfa
    rng = random.Random(5)
    batch = torch.full((3, (vocab.vocab_size + 31) // 32 + 2), -1, dtype=torch.int32)
    narrow = torch.full((2, 1), -1, dtype=torch.int32)  # fewer words than the vocabulary
    for _ in range(30):
        m = grammar.matcher(max_tokens=max_tokens)
        for _step in range(40):
            row = rng.randrange(3)
            others = batch.clone()
            m.fill_bitmask(batch, row)
            want = _reference_mask(m, vocab, batch.shape[1])
            assert torch.equal(batch[row], want)
            keep = torch.ones(3, dtype=torch.bool)
            keep[row] = False
            assert torch.equal(batch[keep], others[keep])  # other rows untouched
            m.fill_bitmask(narrow, 1)
            assert torch.equal(narrow[1], want[:1])
            allowed = allowed_ids(batch[row], vocab.vocab_size)
            if not allowed:
                assert m.is_terminated()
                break
            # the memo and the slow path agree on every token, allowed or not
            state = m.state
            for tok in range(vocab.vocab_size):
                fresh = m.fork()
                fresh._steps = {}  # no memo: the uncached path
                assert m.fork().advance(tok) == fresh.advance(tok) == (tok in allowed), tok
                if tok in allowed and tok not in vocab.eos_token_ids:
                    walked = dfa.walk(state, vocab.token_bytes[tok])
                    assert grammar.token_index.steps[(state, tok)] == walked
            tok = rng.choice(allowed)
            assert m.advance(tok)
            if m.is_terminated() and tok in vocab.eos_token_ids:
                m.fill_bitmask(batch, row)  # EOS taken: all zero
                assert int(batch[row].abs().sum()) == 0
                assert not m.advance(tok) and not m.advance(rng.choice(range(vocab.vocab_size)))
                break


def test_step_memo_holds_no_eos_and_is_bounded(monkeypatch) -> None:
    vocab = _vocab()
    grammar = compile_regex(r"a|a1", vocab)  # after "a": accepting, EOS and "1" allowed
    index = grammar.token_index
    a, one = vocab.token_bytes.index(b"a"), vocab.token_bytes.index(b"1")
    m = grammar.matcher()
    assert not m.advance(one) and m.advance(a)
    state = m.state
    assert not m.fork().advance(a) and m.fork().advance(one)
    assert m.advance(0) and m.is_terminated()  # EOS from an accepting state
    assert all(tok not in vocab.eos_token_ids | vocab.special_token_ids for _, tok in index.steps)
    assert index.steps[(state, a)] == -1 and index.steps[(state, one)] >= 0
    monkeypatch.setattr(token_index, "MAX_STEP_MEMO", 2)
    for tok in range(2, vocab.vocab_size):
        index.token_next_state(state, tok)
        assert len(index.steps) <= 2
    m2 = grammar.matcher()
    assert m2.advance(a) and m2.advance(one) and m2.is_terminated() and m2.advance(0)


@pytest.mark.skipif(not HAVE_C_WALK, reason="the _tokentrie extension is not built")
def test_fill_row_arguments() -> None:
    fill = masks.fill_row
    if fill is None:
        pytest.skip("the extension has no fill_row")
    bm = torch.zeros((2, 3), dtype=torch.int32)
    dst = masks.describe(bm)
    assert dst is not None and dst[3:] == (2, 3, 3)
    assert fill(dst, bm, 1, np.array([1, 2, 3, 4], np.int32)) is True
    assert bm.tolist() == [[0, 0, 0], [1, 2, 3]]
    assert fill(dst, bm.clone(), 1, None) is False  # another tensor: not written
    assert fill(dst, bm, -1, None) is True and bm.tolist() == [[0, 0, 0], [0, 0, 0]]
    bm.add_(1)  # version bumped: stale
    assert fill(dst, bm, 0, None) is False and bm.tolist() == [[1, 1, 1], [1, 1, 1]]
    with pytest.raises(TypeError):
        fill(dst, bm, 0)
    with pytest.raises(IndexError):
        fill(masks.describe(bm), bm, 2, None)


def _c_fill():
    fill = masks.fill_row
    if fill is None:
        pytest.skip("the _tokentrie extension with fill_row is not built")
    return fill


@pytest.mark.parametrize("density", ["zero", "one word", "sparse", "dense", "all ones"])
@pytest.mark.parametrize("cols", [1, 40, 47, 60])
def test_row_forms_write_what_the_mask_says(density, cols) -> None:
    fill = _c_fill()
    rng = np.random.default_rng(cols)
    mask = np.zeros(47, np.int32)
    if density == "one word":
        mask[46] = -(1 << 31)
    elif density == "sparse":
        mask[[0, 7, 31]] = [1, -1, 1 << 30]
    elif density == "dense":
        mask[:] = _words(rng, 47)
        mask[5] = 0
    elif density == "all ones":
        mask[:] = -1
    mask.setflags(write=False)
    form = masks.row_form(mask)
    assert isinstance(form, bytes) == (8 * np.count_nonzero(mask) <= 47)
    bm = torch.full((3, cols), 9, dtype=torch.int32)
    want = _expected(bm, 1, mask)
    dst = masks.describe(bm)
    assert fill(dst, bm, 1, form) is True
    assert torch.equal(bm, want)
    bm.fill_(9)  # bumps the version: describe again
    dst = masks.describe(bm)
    assert fill(dst, bm, 1, mask) is True  # the plain array (buffer) gives the same row
    assert torch.equal(bm, want)


def _assert_c_form_is_numpys(c_form, mask: np.ndarray, case) -> None:
    """The C ``row_form`` of ``mask`` is the numpy reference's form: the same sparse bytes,
    or the dense form on ``mask`` itself with the same fields."""
    got, want = c_form(mask), masks._row_form_numpy(mask)
    if isinstance(want, bytes):
        assert got == want, case
    else:
        assert isinstance(got, tuple) and got[0] is mask and got[1:] == want[1:], case


@pytest.mark.parametrize("n", [1, 8, 47, 1536])
def test_row_form_c_pass_equals_numpy(n) -> None:
    """The C ``row_form`` gives the numpy reference's form byte for byte, at every count of
    nonzero words (both sides of the n / 8 threshold), with the dense form's address."""
    c_form = getattr(trie._EXT, "row_form", None)
    if c_form is None:
        pytest.skip("the _tokentrie extension with row_form is not built")
    rng = np.random.default_rng(n)
    for nonzero in sorted({0, 1, n // 8, n // 8 + 1, n // 2, n}):
        mask = np.zeros(n, np.int32)
        where = rng.choice(n, nonzero, replace=False)
        mask[where] = rng.integers(-(1 << 31), 1 << 31, nonzero, dtype=np.int64).astype(np.int32)
        mask[where[mask[where] == 0]] = 1
        mask.setflags(write=False)
        _assert_c_form_is_numpys(c_form, mask, nonzero)
    assert c_form(np.zeros(4, np.int64)) is None  # another dtype: the numpy path
    assert c_form(np.zeros(8, np.int32)[::2]) is None  # not contiguous


@pytest.mark.parametrize("n", [7, 13, 64, 2050])
def test_row_form_c_pass_at_every_word_position(n) -> None:
    """The C pass skips zero words four at a time and stops at the first nonzero word past
    n / 8: a nonzero word at each position (block starts, ends, the tail past the last whole
    block), and the threshold reached exactly at the last words, give numpy's form."""
    c_form = getattr(trie._EXT, "row_form", None)
    if c_form is None:
        pytest.skip("the _tokentrie extension with row_form is not built")
    cases = [[p] for p in range(n)] + [[p, p + 1] for p in range(n - 1)]
    cases += [list(range(n - k, n)) for k in (n // 8, n // 8 + 1) if 0 < k <= n]
    cases += [list(range(n // 8 + 1)), list(range(0, n, 8))]
    for where in cases:
        mask = np.zeros(n, np.int32)
        mask[where] = -7 - np.arange(len(where), dtype=np.int32)
        mask.setflags(write=False)
        _assert_c_form_is_numpys(c_form, mask, where)


def test_fill_row_from_forms_dict() -> None:
    fill = _c_fill()
    mask = np.array([0, 3, 0, 0, 0, 0, 0, 0, 0, 0], np.int32)
    forms = {7: [masks.row_form(mask), False], 8: ("not", "a list")}
    bm = torch.full((2, 10), -1, dtype=torch.int32)
    dst = masks.describe(bm)
    assert fill(dst, bm, 0, forms, 6) is None and (bm == -1).all()  # no form: nothing written
    assert fill(dst, bm, 0, forms, 7) is True and forms[7][1] is True
    assert bm[0].tolist() == mask.tolist() and (bm[1] == -1).all()
    with pytest.raises(TypeError):
        fill(dst, bm, 0, forms, 8)
    assert fill(dst, bm.clone(), 0, forms, 7) is False  # another tensor: stale, not written
    with pytest.raises(TypeError):
        fill(dst, bm, 0, [forms], 7)


def test_mask_cache_eviction_spares_used_forms() -> None:
    vocab = _vocab()
    grammar = compile_regex(r"abcdefgh", vocab)
    grammar.dfa.explore()
    index = token_index.TokenIndex(grammar.dfa, vocab)
    index.max_cached_masks = 3
    for s in range(3):
        index.fill_form(s)  # masks 0, 1, 2 with forms, all used
    for entry in index.fill_forms.values():
        entry[1] = False
    index.fill_forms[0][1] = True  # state 0 used since: spared once
    index.bitmask(3)  # evicts 1, the least recently used unused one; 0 goes to the back
    assert list(index._masks) == [2, 3, 0] and set(index.fill_forms) == {0, 2}
    assert index.fill_forms[0][1] is False  # its second chance is spent
    index.bitmask(4)
    assert list(index._masks) == [3, 0, 4] and set(index.fill_forms) == {0}
    index.bitmask(5)
    assert list(index._masks) == [0, 4, 5] and set(index.fill_forms) == {0}
    index.bitmask(6)
    assert list(index._masks) == [4, 5, 6] and not index.fill_forms
    for s in range(8):  # forms stay a subset of the masks; forms equal the masks' content
        form = index.fill_form(s)[0]
        assert set(index.fill_forms) <= set(index._masks) and len(index._masks) <= 3
        bm = torch.zeros((1, index.num_words), dtype=torch.int32)
        if masks.fill_row is not None:
            assert masks.fill_row(masks.describe(bm), bm, 0, form)
            assert torch.equal(bm[0], torch.from_numpy(np.array(index.bitmask(s))))


def test_inference_mode_tensors(writer) -> None:
    """The runtime's bitmask is made under ``torch.inference_mode`` (no version counter):
    written correctly, its layout read per call and never cached."""
    rng = np.random.default_rng(3)
    vocab = _vocab()
    m = compile_json_schema(SCHEMA, vocab).matcher()
    words = (vocab.vocab_size + 31) // 32
    with torch.inference_mode():
        bm = torch.full((3, words + 1), -1, dtype=torch.int32)
        for row in (0, 2, -2):
            w = _words(rng, words - 1)
            want = _expected(bm, row, w)
            masks.write(bm, row, w)
            assert torch.equal(bm, want)
            m.fill_bitmask(bm, row)
            assert torch.equal(bm[row], _reference_mask(m, vocab, words + 1))
        assert masks.last[0] is not bm and masks._last_np[0] is not bm
    bm2 = torch.full((2, words), -1, dtype=torch.int32)  # a normal tensor after it: cached
    m.fill_bitmask(bm2, 1)
    assert torch.equal(bm2[1], _reference_mask(m, vocab, words)) and (bm2[0] == -1).all()


@pytest.mark.parametrize("max_tokens", [None, 9])
def test_fill_bitmask_into_ndarray_matches_tensor(writer, max_tokens) -> None:
    """A numpy bitmask (the torch-free engine's) gets the words a tensor gets, row by row,
    other rows untouched; a wrong dtype or rank is refused, not cast."""
    vocab = _vocab()
    grammar = compile_json_schema(SCHEMA, vocab)
    rng = random.Random(7)
    words = (vocab.vocab_size + 31) // 32 + 2
    tensor = torch.full((3, words), -1, dtype=torch.int32)
    array = np.full((3, words), -1, dtype=np.int32)
    for _ in range(5):
        m = grammar.matcher(max_tokens=max_tokens)
        for _step in range(30):
            row = rng.randrange(3)
            m.fill_bitmask(tensor, row)
            m.fill_bitmask(array, row)
            assert np.array_equal(array, tensor.numpy())
            assert torch.equal(tensor[row], _reference_mask(m, vocab, words))
            allowed = allowed_ids(tensor[row], vocab.vocab_size)
            if not allowed:
                break
            assert m.advance(rng.choice(allowed))
    m = grammar.matcher()
    for bad in (np.zeros((3, words), np.int64), np.zeros(words, np.int32)):
        with pytest.raises(ValueError, match="int32"):
            m.fill_bitmask(bad, 0)


def test_cold_step_equals_byte_walk_along_nested_smollm2(
    smollm2_vocab: Vocabulary, smollm2_tokenizer
) -> None:
    """The matcher's cold ``advance`` (``TokenIndex.token_step`` after a memo miss) against
    brute force: each token's bytes walked one byte at a time (``ByteDFA.walk``), along
    cold_ab's nested instance on a fresh compile, from states with a cached mask (filled
    first, as a decoding loop does), with none, and with a cached row; EOS, special, empty
    and out-of-range ids refused and never memoised."""
    import json

    from benchmarks.bench_grammar import COLD_SCHEMAS

    vocab = smollm2_vocab
    case = json.loads(COLD_SCHEMAS.read_text())["nested"]
    text = json.dumps(case["instance"], separators=(",", ":"))
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    grammar = compile_json_schema(case["schema"], vocab, strict=False, allow_extra_properties=True)
    index, dfa = grammar.token_index, grammar.token_index.dfa
    rng = random.Random(0)
    never = sorted(vocab.special_token_ids | vocab.eos_token_ids)
    never += [i for i, t in enumerate(vocab.token_bytes) if not t][:3]
    batch = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    m = grammar.matcher()
    for pos, tok in enumerate(ids):
        state = m.state
        if pos % 3 == 0:
            m.fill_bitmask(batch, 0)  # cached mask: the bit test before the walk
        elif pos % 3 == 1:
            index.next_states(state)  # cached row
        tokens = [tok, *rng.sample(range(vocab.vocab_size), 20)]
        for t in tokens:
            if t in never:
                continue
            expected = dfa.walk(state, vocab.token_bytes[t])
            assert index.token_step(state, t) == expected == index.steps[(state, t)], (pos, t)
        for t in [*never, -1, vocab.vocab_size]:
            assert index.token_step(state, t) == -1 and (state, t) not in index.steps
            assert not m.fork().advance(t) or t in vocab.eos_token_ids
        index.steps.pop((state, tok))  # the matcher's advance misses the memo again
        expected = dfa.walk(state, vocab.token_bytes[tok])
        assert expected >= 0 and m.advance(tok) and m.state == expected, pos
    assert m.is_accepting()


@pytest.mark.skipif(not HAVE_C_WALK, reason="the _tokentrie extension is not built")
@pytest.mark.parametrize("setting", ["extension", "direct_rows", "c_terms"])
def test_cold_step_follows_walk_settings_switched_mid_life(setting: str) -> None:
    """``token_step`` chooses ``walk_bytes``'s C walk once per setting: switched off after
    a first step (the choice made), then on again, every step still equals ``ByteDFA.walk``
    and the choice is made again: the walk ``walk_bytes`` takes under each setting (the
    direct C walk, the callback C walk, or None: Python)."""
    from structgen.fsm.regex import terms

    vocab = _vocab()
    grammar = compile_regex(r'\{"[a-z]{1,6}":(true|false|[0-9]{1,3})\}', vocab)
    index, dfa = grammar.token_index, grammar.token_index.dfa
    switch = {
        "extension": trie.use_extension,
        "direct_rows": trie.use_direct_rows,
        "c_terms": terms.use_extension,
    }[setting]
    state = dfa.initial
    index.bitmask(state)  # a cached mask: the walk_bytes way
    toks = [t for t, b in enumerate(vocab.token_bytes) if b][:400]

    def check(walk) -> None:
        for t in toks:
            index.steps.clear()
            expected = -1 if t in vocab.special_token_ids else dfa.walk(state, vocab.token_bytes[t])
            assert index.token_step(state, t) == expected, t
        assert index._bytes_walk[3] is walk

    check(trie._WALK_BYTES_DIRECT)
    try:
        switch(False)
        check(None if setting == "extension" else trie._EXT.walk_bytes)
    finally:
        switch(True)
    check(trie._WALK_BYTES_DIRECT)
