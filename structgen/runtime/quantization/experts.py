"""Quantized MoE experts: each expert's ``gate_up`` and ``down`` matrices as a :class:`QuantLinear`.

The expert weights of a :class:`~structgen.runtime.models.moe.FusedExperts` (``gate_up_proj``
``[E, 2I, H]``, ``down_proj`` ``[E, H, I]``) are quantized per expert with the same
layouts and CPU kernels as the dense linears (int8 per output channel, int4 group-wise);
the grouped compute stays :func:`~structgen.runtime.models.moe.fused_moe` (tokens sorted
by expert, one quantized matmul per active expert), which takes lists of callables.
"""

from __future__ import annotations

import torch
from torch import nn

from structgen.runtime.models.moe import FusedExperts, fused_moe
from structgen.runtime.quantization.formats import can_pack_int4
from structgen.runtime.quantization.linear import QuantLinear

__all__ = ["QuantFusedExperts"]


def _quantize(w: torch.Tensor, kind: str, group: int | None) -> QuantLinear:
    n, k = w.shape
    if kind == "int4" and can_pack_int4(n, k, group or 64):
        return QuantLinear.quantize(w.float(), None, "int4", group or 64)
    return QuantLinear.quantize(w.float(), None, "int8")  # int8 per channel (also int4's fallback)


class QuantFusedExperts(nn.Module):
    """``E`` SwiGLU experts with quantized weights; same ``forward`` contract as ``FusedExperts``.

    Attributes:
        gate_up: ``E`` :class:`QuantLinear` ``[2I, H]`` (gate rows, then up rows).
        down: ``E`` :class:`QuantLinear` ``[H, I]``.
    """

    def __init__(self, gate_up: list[QuantLinear], down: list[QuantLinear]) -> None:
        super().__init__()
        if len(gate_up) != len(down) or not gate_up:
            raise ValueError(
                f"need one gate_up and one down matrix per expert (got {len(gate_up)} and "
                f"{len(down)})"
            )
        self.num_experts = len(gate_up)
        self.gate_up = nn.ModuleList(gate_up)
        self.down = nn.ModuleList(down)

    @classmethod
    @torch.no_grad()
    def quantize(
        cls, experts: FusedExperts, kind: str, group_size: int | None = None
    ) -> QuantFusedExperts:
        """Quantize float experts: ``kind`` ``"int8"`` (per channel) or ``"int4"`` (group
        ``group_size``, 64 by default; a matrix torch's int4 packing cannot take falls back to
        int8).
        """
        gu = [_quantize(w, kind, group_size) for w in experts.gate_up_proj]
        dn = [_quantize(w, kind, group_size) for w in experts.down_proj]
        return cls(gu, dn)

    def dequantized(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(gate_up_proj [E, 2I, H], down_proj [E, H, I])`` float32: the reference weights."""
        return (
            torch.stack([m.dequantized_weight() for m in self.gate_up]),
            torch.stack([m.dequantized_weight() for m in self.down]),
        )

    def forward(
        self, hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor
    ) -> torch.Tensor:
        """``hidden`` ``[T, H]``, ``topk_weights``/``topk_ids`` ``[T, k]`` -> ``[T, H]``."""
        return fused_moe(hidden, self.gate_up, self.down, topk_weights, topk_ids)
