"""paged_decode_attention: Triton (interpreted) vs the torch reference.

Tolerances: see ``helpers.TOL`` (fp32 2e-5, fp16 2e-3, bf16 3e-2 absolute).
"""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.paged_decode_attention import (
    paged_decode_attention,
    paged_decode_attention_ref,
)
from tests.kernels.helpers import assert_close, page_tables, paged_cache

PAGE_SIZE = 4  # BLOCK_N is 16 on CPU: sequences cross pages and blocks


def _run(heads, kv_heads, d, lens, dtype, num_splits):
    k_cache, v_cache = paged_cache(24, PAGE_SIZE, kv_heads, d, dtype)
    table = page_tables(lens, PAGE_SIZE, 24)
    q = torch.randn(len(lens), heads, d).to(dtype)
    seq_lens = torch.tensor(lens)
    args = (q, k_cache, v_cache, table, seq_lens, d**-0.5, num_splits)
    got = paged_decode_attention(*args, backend="triton")
    assert got.dtype == dtype and got.shape == q.shape
    assert_close(got, paged_decode_attention_ref(*args), dtype)


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


def test_rejects_mismatched_dtype():
    k_cache, v_cache = paged_cache(4, PAGE_SIZE, 1, 16, torch.float32)
    q = torch.randn(1, 2, 16, dtype=torch.float16)
    with pytest.raises(ValueError, match="dtype"):
        paged_decode_attention(
            q, k_cache, v_cache, torch.ones(1, 1, dtype=torch.int32), torch.tensor([1]), 0.25,
            backend="triton",
        )  # fmt: skip
