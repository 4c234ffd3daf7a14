"""extend_attention: Triton (interpreted) vs the torch reference (tolerances: helpers.TOL)."""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.extend_attention import extend_attention
from structgen.kernels.paged_attention import paged_attention_ref
from tests.kernels.helpers import assert_close, page_tables, paged_cache


def extend_attention_ref(
    q, k_cache, v_cache, table, prefix_lens, extend_lens, scale, max_extend_len=None, window=None
):
    """The one reference over the ragged batch's token rows and positions."""
    seq_ids = torch.repeat_interleave(torch.arange(len(extend_lens)), extend_lens)  # [T]
    starts = torch.cumsum(extend_lens, 0) - extend_lens  # [B] first flat row of each sequence
    positions = prefix_lens[seq_ids] + torch.arange(q.shape[0]) - starts[seq_ids]
    return paged_attention_ref(q, k_cache, v_cache, table, seq_ids, positions, scale, window)


PAGE_SIZE = 4  # BLOCK_M = BLOCK_N = 16 on CPU


def _run(heads, kv_heads, d, prefix, ext, dtype, window=None):
    lens = [p + e for p, e in zip(prefix, ext)]
    k_cache, v_cache = paged_cache(32, PAGE_SIZE, kv_heads, d, dtype)
    table = page_tables(lens, PAGE_SIZE, 32)
    q = torch.randn(sum(ext), heads, d).to(dtype)
    args = (
        q,
        k_cache,
        v_cache,
        table,
        torch.tensor(prefix),
        torch.tensor(ext),
        d**-0.5,
        None,
        window,
    )
    got = extend_attention(*args, backend="triton")
    want = extend_attention_ref(*args)
    assert_close(got, want, dtype)
    return want, extend_attention_ref(*args[:-1])


@pytest.mark.parametrize(
    ("heads", "kv_heads"),
    [(2, 2), (6, 2), (16, 2), (3, 1), (8, 1)],
    ids=["mha", "gqa3", "gqa8", "mqa3", "mqa8"],
)
def test_ragged_prefill_and_extend_fp32(heads, kv_heads):
    # a fresh 19-token prefill (two query blocks), a 1-token extend after 5 cached tokens
    # (decode), a 3-token draft after 17 cached tokens
    _run(heads, kv_heads, 16, [0, 5, 17], [19, 1, 3], torch.float32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    _run(2, 1, 24, [6, 0], [2, 1], dtype)


@pytest.mark.parametrize("window", [1, 5, 20])
def test_sliding_window_crossing_pages_and_blocks(window):
    # W = 5 over pages of 4 and query/key blocks of 16: prefill of 19 (two query blocks,
    # second block skips whole key blocks), a decode after 21 cached, a draft of 3 after 17;
    # W = 1 attends only to itself; W = 20 clips only the longest rows
    want, full = _run(3, 1, 16, [0, 21, 17], [19, 1, 3], torch.float32, window)
    assert not torch.allclose(want, full), "the window must change long rows"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_sliding_window_half_precision(dtype):
    _run(2, 1, 16, [9, 0], [2, 6], dtype, 4)


def test_single_token_without_prefix_is_its_own_value():
    k_cache, v_cache = paged_cache(4, PAGE_SIZE, 1, 16, torch.float32)
    table = torch.tensor([[2]], dtype=torch.int32)
    q = torch.randn(1, 2, 16)
    out = extend_attention(
        q, k_cache, v_cache, table, torch.tensor([0]), torch.tensor([1]), 0.25, 1, backend="triton"
    )
    torch.testing.assert_close(out[0], v_cache[2, 0].expand(2, 16))
