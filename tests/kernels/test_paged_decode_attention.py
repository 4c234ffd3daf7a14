"""paged_decode_attention: Triton (interpreted) vs the torch reference.

Tolerances: see ``helpers.TOL`` (fp32 2e-5, fp16 2e-3, bf16 3e-2 absolute).
"""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.paged_attention import paged_attention_ref
from structgen.kernels.paged_decode_attention import paged_decode_attention
from tests.kernels.helpers import assert_close, page_tables, paged_cache


def paged_decode_attention_ref(
    q, k_cache, v_cache, table, seq_lens, scale, num_splits=None, window=None
):
    """The one reference, one token per sequence at position ``seq_len - 1``."""
    return paged_attention_ref(
        q, k_cache, v_cache, table, torch.arange(q.shape[0]), seq_lens - 1, scale, window
    )


PAGE_SIZE = 4  # BLOCK_N is 16 on CPU: sequences cross pages and blocks


def _run(heads, kv_heads, d, lens, dtype, num_splits, window=None):
    k_cache, v_cache = paged_cache(24, PAGE_SIZE, kv_heads, d, dtype)
    table = page_tables(lens, PAGE_SIZE, 24)
    q = torch.randn(len(lens), heads, d).to(dtype)
    seq_lens = torch.tensor(lens)
    args = (q, k_cache, v_cache, table, seq_lens, d**-0.5, num_splits, window)
    got = paged_decode_attention(*args, backend="triton")
    assert got.dtype == dtype and got.shape == q.shape
    want = paged_decode_attention_ref(*args)
    assert_close(got, want, dtype)
    return got, want


@pytest.mark.parametrize(
    ("heads", "kv_heads"), [(2, 2), (6, 2), (8, 1), (16, 2)], ids=["mha", "gqa3", "mqa8", "gqa8"]
)
@pytest.mark.parametrize("num_splits", [1, 3])
def test_gqa_ratios_and_splits_fp32(heads, kv_heads, num_splits):
    _run(heads, kv_heads, 16, [1, 4, 37], torch.float32, num_splits)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_odd_head_dim(dtype):
    _run(6, 2, 24, [5, 33], dtype, 2)  # head_dim 24 padded to 32 in registers


def test_more_splits_than_blocks_and_default_split():
    _run(3, 1, 16, [2, 17], torch.float32, 8)  # empty splits weigh 0
    _run(3, 1, 16, [1], torch.float32, None)


@pytest.mark.parametrize("num_splits", [1, 3, None])
def test_sliding_window_crossing_pages(num_splits):
    # W = 6 over page size 4: the window starts mid-page and spans 2-3 pages; length 1,
    # a sequence shorter than W and ones far longer than W (several 16-key blocks)
    got, want = _run(6, 2, 16, [1, 5, 23, 37], torch.float32, num_splits, window=6)
    full = paged_decode_attention_ref(*_inputs_for_window_check(), None)
    windowed = paged_decode_attention_ref(*_inputs_for_window_check(), 6)
    assert not torch.allclose(full[2:], windowed[2:]), "the window must change long sequences"
    torch.testing.assert_close(full[:2], windowed[:2])  # shorter than W: unchanged


def _inputs_for_window_check():
    k_cache, v_cache = paged_cache(24, PAGE_SIZE, 2, 16, torch.float32)
    table = page_tables([1, 5, 23, 37], PAGE_SIZE, 24)
    q = torch.randn(4, 6, 16, generator=torch.Generator().manual_seed(1))
    return q, k_cache, v_cache, table, torch.tensor([1, 5, 23, 37]), 0.25, None


def test_sliding_window_ref_equals_truncated_history():
    # independent oracle: a window of W equals full attention over the last W tokens only
    q, k_cache, v_cache, table, lens, scale, _ = _inputs_for_window_check()
    got = paged_decode_attention(q, k_cache, v_cache, table, lens, scale, 1, 6, backend="triton")
    for b, n in enumerate(lens.tolist()):
        pos = torch.arange(max(n - 6, 0), n)
        k = k_cache[table[b, pos // PAGE_SIZE].long(), pos % PAGE_SIZE]  # [W, kv_heads, d]
        v = v_cache[table[b, pos // PAGE_SIZE].long(), pos % PAGE_SIZE]
        k, v = k.repeat_interleave(3, 1).transpose(0, 1), v.repeat_interleave(3, 1).transpose(0, 1)
        ref = torch.nn.functional.scaled_dot_product_attention(q[b][:, None], k, v, scale=scale)[
            :, 0
        ]
        torch.testing.assert_close(got[b], ref, atol=2e-5, rtol=1e-5)


def test_rejects_bad_window():
    q, k_cache, v_cache, table, lens, scale, _ = _inputs_for_window_check()
    with pytest.raises(ValueError, match="sliding_window"):
        paged_decode_attention(q, k_cache, v_cache, table, lens, scale, 1, 0, backend="triton")


def test_rejects_mismatched_dtype():
    k_cache, v_cache = paged_cache(4, PAGE_SIZE, 1, 16, torch.float32)
    q = torch.randn(1, 2, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="dtype"):
        paged_decode_attention(
            q, k_cache, v_cache, torch.ones(1, 1, dtype=torch.int32), torch.tensor([1]), 0.25,
            backend="triton",
        )  # fmt: skip
