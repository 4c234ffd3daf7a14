"""apply_token_bitmask: Triton (interpreted) vs the torch reference, exact."""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.apply_token_bitmask import apply_token_bitmask, apply_token_bitmask_ref
from tests.kernels.helpers import DTYPES


def _random_mask(rows: int, words: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-(2**31), 2**31 - 1, (rows, words), generator=g, dtype=torch.int64).to(
        torch.int32
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("vocab", "mask_vocab"),
    [(1, 1), (33, 33), (1100, 1100), (70, 64), (70, 100)],  # padded logits; extra bits
)
def test_rows_all(dtype, vocab, mask_vocab):
    logits = torch.randn(3, vocab).to(dtype)
    mask = _random_mask(3, -(-mask_vocab // 32), seed=vocab)
    got, want = logits.clone(), logits.clone()
    apply_token_bitmask(got, mask, backend="triton")
    apply_token_bitmask_ref(want, mask)
    assert torch.equal(got, want)
    assert torch.isinf(got).any()


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_rows_selected_by_index_others_untouched(index_dtype):
    logits = torch.randn(5, 45)
    mask = _random_mask(2, 2, seed=1)
    idx = torch.tensor([3, 1], dtype=index_dtype)
    got, want = logits.clone(), logits.clone()
    apply_token_bitmask(got, mask, idx, backend="triton")
    apply_token_bitmask_ref(want, mask, idx.long())
    assert torch.equal(got, want)
    assert torch.equal(got[[0, 2, 4]], logits[[0, 2, 4]])


def test_single_allowed_token_and_strided_rows():
    base = torch.randn(4, 80)
    logits = base[::2]  # row stride 160: a non-contiguous batch view, masked in place
    mask = torch.zeros(2, 3, dtype=torch.int32)
    mask[0, 1] = 1 << 5  # token 37 only
    mask[1, 2] = -(2**31)  # token 95: past the vocabulary, so nothing allowed
    apply_token_bitmask(logits, mask, backend="triton")
    assert torch.isfinite(base[0]).sum() == 1 and torch.isfinite(base[0, 37])
    assert torch.isinf(base[2]).all()
    assert torch.equal(base[1::2], base[1::2])  # untouched rows still finite
    assert torch.isfinite(base[1]).all() and torch.isfinite(base[3]).all()


def test_auto_on_cpu_is_the_reference_and_bad_input_raises():
    logits = torch.randn(2, 40)
    mask = _random_mask(2, 2, seed=2)
    got, want = logits.clone(), logits.clone()
    apply_token_bitmask(got, mask)
    apply_token_bitmask_ref(want, mask)
    assert torch.equal(got, want)
    with pytest.raises(ValueError):
        apply_token_bitmask(logits, mask.long(), backend="triton")
    with pytest.raises(ValueError):
        apply_token_bitmask(logits, mask, backend="cuda")


@pytest.mark.parametrize(("vocab", "padded"), [(37, 40), (50, 64), (65, 96), (37, 70)])
def test_padded_logits_against_bit_oracle(vocab, padded):
    # tokenizer vocabulary ``vocab`` (not a multiple of 32), logits padded to ``padded``
    # columns (as model heads are). A grammar's bitmask has no bits set past ``vocab``
    # (xgrammar's convention), and columns past the mask's 32-bit words count as
    # disallowed: padding columns are never allowed; the others follow the bits.
    mask = _random_mask(2, -(-vocab // 32), seed=vocab)
    if vocab % 32:
        mask[:, -1] &= (1 << (vocab % 32)) - 1  # clear the bits past the vocabulary
    logits = torch.randn(2, padded)
    got = logits.clone()
    apply_token_bitmask(got, mask, backend="triton")
    for r in range(2):
        for t in range(padded):
            allowed = t < vocab and (int(mask[r, t // 32]) >> (t % 32)) & 1
            assert (got[r, t] == logits[r, t]) if allowed else got[r, t] == float("-inf"), (r, t)


@pytest.mark.parametrize(
    ("vocab", "mask_vocab"), [(1, 1), (33, 33), (1100, 1100), (70, 64), (70, 100)]
)
@pytest.mark.parametrize("indexed", [False, True])
def test_host_arrays_equal_the_reference(vocab, mask_vocab, indexed):
    # apply_token_bitmask_host (numpy in, numpy out: the default CPU engine's step) against
    # the torch reference, padded logits and extra bits included
    import numpy as np

    from structgen.kernels.apply_token_bitmask import apply_token_bitmask_host

    logits = torch.randn(5, vocab, generator=torch.Generator().manual_seed(vocab))
    idx = [3, 0, 4] if indexed else None
    mask = _random_mask(3 if indexed else 5, -(-mask_vocab // 32), seed=mask_vocab)
    got, want = logits.numpy().copy(), logits.clone()
    apply_token_bitmask_host(got, mask.numpy(), idx)
    apply_token_bitmask_ref(want, mask, None if idx is None else torch.tensor(idx))
    assert np.array_equal(got, want.numpy())
    assert np.isinf(got).any()


def test_host_arrays_bad_input_raises():
    import numpy as np

    from structgen.kernels.apply_token_bitmask import apply_token_bitmask_host

    logits = np.zeros((2, 40), dtype=np.float32)
    with pytest.raises(ValueError, match="int32"):
        apply_token_bitmask_host(logits, np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="rows"):
        apply_token_bitmask_host(logits, np.zeros((3, 2), dtype=np.int32))
    with pytest.raises(ValueError, match="rows"):
        apply_token_bitmask_host(logits, np.zeros((2, 2), dtype=np.int32), [1])
    with pytest.raises(ValueError, match="floating"):
        apply_token_bitmask_host(logits.astype(np.int32), np.zeros((2, 2), dtype=np.int32))
