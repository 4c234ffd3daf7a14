"""fused_moe: Triton (interpreted) vs the torch reference (tolerances: helpers.TOL)."""

from __future__ import annotations

import pytest
import torch

from structgen.kernels.fused_moe import fused_moe, fused_moe_ref, moe_align
from tests.kernels.helpers import assert_close


def _weights(num_experts, hidden, inter, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    w_gate_up = torch.randn(num_experts, 2 * inter, hidden, generator=g) / hidden**0.5
    w_down = torch.randn(num_experts, hidden, inter, generator=g) / inter**0.5
    return w_gate_up.to(dtype), w_down.to(dtype)


@pytest.mark.parametrize(
    ("tokens", "experts", "top_k", "dtype"),
    [
        (1, 4, 2, torch.float32),
        (13, 5, 2, torch.float32),
        (9, 8, 3, torch.bfloat16),
        (4, 3, 1, torch.float16),
    ],
)
def test_fused_moe(tokens, experts, top_k, dtype):
    hidden, inter = 40, 24  # not multiples of the 32-wide blocks
    w_gate_up, w_down = _weights(experts, hidden, inter, dtype)
    x = torch.randn(tokens, hidden).to(dtype)
    topk_w, topk_ids = torch.randn(tokens, experts).softmax(-1).topk(top_k, -1)
    got = fused_moe(x, w_gate_up, w_down, topk_w, topk_ids, backend="triton")
    assert_close(got, fused_moe_ref(x, w_gate_up, w_down, topk_w, topk_ids), dtype)


def test_moe_align_blocks_belong_to_one_expert():
    ids = torch.tensor([[2, 0], [2, 1], [2, 0]])
    pairs, block_expert = moe_align(ids, num_experts=4, block_m=2)
    flat = ids.reshape(-1)
    rows = pairs.view(-1, 2)
    for blk, e in enumerate(block_expert.tolist()):
        real = [p for p in rows[blk].tolist() if p < flat.numel()]
        assert (e == -1 and not real) or all(flat[p] == e for p in real)
    assert sorted(p for p in pairs.tolist() if p < 6) == list(range(6))


@pytest.mark.parametrize("seed", range(4))
def test_moe_align_padding_matches_a_python_reference(seed):
    g = torch.Generator().manual_seed(seed)
    tokens, top_k, experts, block_m = 11, 3, 6, 4
    ids = torch.stack([torch.randperm(experts, generator=g)[:top_k] for _ in range(tokens)])
    pairs, block_expert = moe_align(ids, num_experts=experts, block_m=block_m)
    flat = ids.reshape(-1).tolist()
    # reference: per expert, its pairs in ascending order, padded with P to a multiple of block_m
    want_rows, want_experts = [], []
    for e in range(experts):
        mine = [p for p, x in enumerate(flat) if x == e]
        nblocks = -(-len(mine) // block_m)
        want_rows += mine + [len(flat)] * (nblocks * block_m - len(mine))
        want_experts += [e] * nblocks
    used = len(want_experts)
    assert pairs[: used * block_m].tolist() == want_rows
    assert block_expert[:used].tolist() == want_experts
    assert (block_expert[used:] == -1).all() and (pairs[used * block_m :] == len(flat)).all()
