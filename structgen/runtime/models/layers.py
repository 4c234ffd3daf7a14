"""Layers shared by our decoder models (Llama, Mistral, Qwen2, ...).

Parameter names follow Hugging Face transformers so that ``load_state_dict`` takes
a transformers checkpoint as is. Parameters are allocated with ``torch.empty``
(no random init): every model is filled by a loader or by ``load_state_dict``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from structgen.kernels.rms_norm import rms_norm, rms_norm_ref
from structgen.kernels.rotary import rotary
from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.cpu.dense import linear
from structgen.runtime.models.attention import use_triton
from structgen.runtime.models.rope import default_inv_freq, rope_tables

__all__ = [
    "Linear",
    "FusedProjection",
    "FUSED_PROJECTIONS",
    "fused_group",
    "rows_view",
    "join_rows",
    "RMSNorm",
    "RotaryEmbedding",
    "GatedMLP",
    "rope_theta",
    "apply_rotary",
    "rotate_qk",
]


class Linear(nn.Module):
    """``y = x @ W.T + b`` with HF's parameter names, allocated uninitialised."""

    def __init__(
        self, in_features: int, out_features: int, bias: bool, dtype: torch.dtype, device
    ) -> None:
        super().__init__()
        self.weight = nn.Parameter(
            torch.empty(out_features, in_features, dtype=dtype, device=device), requires_grad=False
        )
        self.bias = (
            nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
            if bias
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., in] -> [..., out]`` (``x @ weight.T + bias``) in the weight's dtype."""
        return linear(x, self.weight, self.bias)


# the projections ``fuse_projections`` joins, by module name (attention q/k/v, the MLP's
# gate/up): a loader that writes the members' weights into consecutive row blocks of one
# tensor, in this order, spares the fusion its copy (see :func:`rows_view`)
FUSED_PROJECTIONS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def fused_group(name: str) -> tuple[str, int, int] | None:
    """Where a parameter sits in a fused projection, by its Hugging Face name.

    Args:
        name: a parameter path, e.g. ``model.layers.3.self_attn.k_proj.weight``.

    Returns:
        ``(group key, index of the member, number of members)``, e.g.
        ``("model.layers.3.self_attn.*.weight", 1, 3)``, for a member of
        :data:`FUSED_PROJECTIONS`; None for anything else. The members of one group share
        the key. (A group whose module is not fused, or misses a member, costs nothing when
        laid out together: its members are plain views.)
    """
    parts = name.split(".")
    for i in range(len(parts) - 1, -1, -1):
        for members in FUSED_PROJECTIONS:
            if parts[i] in members:
                key = ".".join(parts[:i] + ["*"] + parts[i + 1 :])
                return key, members.index(parts[i]), len(members)
    return None


def rows_view(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """The tensor whose consecutive row blocks are ``tensors``, as a view, or None.

    ``tensors`` qualify when each is contiguous, all share dtype, device, storage and the
    trailing shape, and each starts in the storage where the previous one ends (a loader
    wrote them into slices of one tensor). Then the result is
    ``torch.cat(tensors)`` without the copy: ``[sum(t.shape[0]), *trailing]`` over the same
    memory.
    """
    if not tensors:
        return None
    first = tensors[0]
    offset = first.storage_offset()
    for t in tensors:
        if (
            not t.is_contiguous()
            or t.dtype != first.dtype
            or t.device != first.device
            or t.shape[1:] != first.shape[1:]
            or t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr()
            or t.storage_offset() != offset
        ):
            return None
        offset += t.numel()
    shape = (sum(t.shape[0] for t in tensors), *first.shape[1:])
    whole = first.new_empty(0)
    whole.set_(first.untyped_storage(), first.storage_offset(), shape, first.stride())
    return whole


def join_rows(tensors: list[torch.Tensor]) -> torch.Tensor:
    """``torch.cat(tensors)``: a view when :func:`rows_view` finds them laid end to end, else a
    copy.
    """
    whole = rows_view(tensors)
    return whole if whole is not None else torch.cat(tensors)


class FusedProjection:
    """One matmul for several :class:`Linear` layers that read the same input (q/k/v, gate/up).

    At batch 1 a decode step is a chain of small GEMVs and every op costs a thread
    fork/join; one ``[sum(out), in]`` matmul instead of three saves two of them per
    layer. The member layers keep their parameters (HF names: ``state_dict`` and
    ``load_state_dict`` are unchanged) as views into the fused weight, so memory is not
    doubled and an in-place weight update reaches both; members a loader already wrote end
    to end (:data:`FUSED_PROJECTIONS`) are joined without a copy (:func:`join_rows`). Should
    a member's parameter be replaced (``load_state_dict(assign=True)``, ``.to()``,
    sharding), :meth:`valid` turns False and callers fall back to the separate layers:
    never stale weights.

    Not an ``nn.Module``: it owns no parameter of its own and stays out of ``state_dict``.

    Attributes:
        weight: ``[sum(out_features), in_features]`` the concatenated weights.
        bias: ``[sum(out_features)]`` or None.
        sizes: output features of each member, in order.
    """

    def __init__(self, linears: list[Linear]) -> None:
        self.weight = join_rows([lin.weight.detach() for lin in linears])
        has_bias = linears[0].bias is not None
        self.bias = join_rows([lin.bias.detach() for lin in linears]) if has_bias else None
        self.sizes = [lin.weight.shape[0] for lin in linears]
        start = 0
        for lin, n in zip(linears, self.sizes):
            lin.weight = nn.Parameter(self.weight[start : start + n], requires_grad=False)
            if has_bias:
                lin.bias = nn.Parameter(self.bias[start : start + n], requires_grad=False)
            start += n
        # (the member's parameter registry, its weight view, the view's data pointer)
        self._params = [(lin._parameters, lin.weight, lin.weight.data_ptr()) for lin in linears]

    @staticmethod
    def build(linears: list[nn.Module]):
        """Fuse ``linears`` if all are plain float :class:`Linear` on one device/dtype, else None.

        Quantized layers in the C kernel's layouts fuse into a
        :class:`~structgen.runtime.quantization.linear.FusedQuantProjection` (same interface);
        other classes (sharded layers, torch-layout quantized ones) are left alone.
        """
        if linears and all(type(lin) is not Linear for lin in linears):
            from structgen.runtime.quantization.linear import FusedQuantProjection

            return FusedQuantProjection.build(linears)
        if not linears or any(type(lin) is not Linear for lin in linears):
            return None
        w0 = linears[0].weight
        same = all(
            lin.weight.dtype == w0.dtype and lin.weight.device == w0.device for lin in linears
        )
        same_in = all(lin.weight.shape[1] == w0.shape[1] for lin in linears)
        bias = {lin.bias is None for lin in linears}
        if not (same and same_in and len(bias) == 1 and w0.is_floating_point()):
            return None
        return FusedProjection(linears)

    def valid(self) -> bool:
        """True while every member's weight is still the view into :attr:`weight`.

        (A replaced parameter is a new object in the module's registry, ``.to()`` swaps its
        data; an in-place update keeps both and writes through the view. Checked once per
        layer and step, without ``nn.Module.__getattr__``.)
        """
        for registry, view, ptr in self._params:
            if registry["weight"] is not view or view.data_ptr() != ptr:
                return False
        return True

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., sum(out_features)]`` outputs of all members for ``x`` ``[..., in_features]``."""
        return linear(x, self.weight, self.bias)


class RMSNorm(nn.Module):
    """Root-mean-square norm, computed in float32 and cast back (as transformers' LlamaRMSNorm).

    ``forward(x [..., dim]) -> [..., dim]``: the Triton ``rms_norm`` kernel where
    :func:`~structgen.runtime.models.attention.use_triton` says so, else its torch reference
    (``structgen.kernels.rms_norm``).
    """

    def __init__(self, dim: int, eps: float, dtype: torch.dtype, device) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype, device=device), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., dim] -> [..., dim]`` normalised over the last dimension, in ``x``'s dtype."""
        if use_triton(x):
            return rms_norm(x, self.weight, self.eps, backend="triton")
        return rms_norm_ref(x, self.weight, self.eps)


def rope_theta(config) -> float:
    """RoPE base of a transformers config (v4 ``rope_theta`` or v5 ``rope_parameters``)."""
    params = getattr(config, "rope_parameters", None) or {}
    theta = params.get("rope_theta", getattr(config, "rope_theta", None))
    return float(theta if theta is not None else 10000.0)


def _rope_type(config) -> str:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    return params.get("rope_type", params.get("type", "default")) or "default"


class RotaryEmbedding(nn.Module):
    """Precomputed cos/sin tables for rotary embeddings (HF ``rotate_half`` convention).

    The tables come from :func:`structgen.runtime.models.rope.rope_tables` (numpy: float32
    angles, float64 cos/sin rounded to float32 once; the one implementation the torch-free CPU
    path shares) and are copied to ``device``. They cover ``max_position_embeddings``
    positions and grow on demand (one host check per forward, not per layer). The default
    RoPE's inverse frequencies come from :func:`~structgen.runtime.models.rope.default_inv_freq`;
    other RoPE types (llama3, yarn, linear, ...) take their inverse frequencies and attention
    scaling from transformers' ``ROPE_INIT_FUNCTIONS`` so that they match the reference.

    Attributes:
        inv_freq: ``[head_dim // 2]`` float32 on ``device`` (a non-persistent buffer).
        attention_scaling: factor already applied to both tables (YaRN's mscale, else 1.0).

    Raises:
        ModelLoadError: an unsupported RoPE type (``dynamic``, or one transformers lacks).
    """

    def __init__(self, config, head_dim: int, device) -> None:
        super().__init__()
        kind = _rope_type(config)
        self.attention_scaling = 1.0
        if kind == "default":
            inv_freq = torch.from_numpy(default_inv_freq(rope_theta(config), head_dim)).to(device)
        else:
            from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

            if kind not in ROPE_INIT_FUNCTIONS or kind == "dynamic":
                from structgen.errors import ModelLoadError

                raise ModelLoadError(f"unsupported rope type {kind!r}")
            inv_freq, self.attention_scaling = ROPE_INIT_FUNCTIONS[kind](config, device)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self._len = 0
        self._cos = torch.empty(0, head_dim, device=device)
        self._sin = torch.empty(0, head_dim, device=device)
        self.ensure(int(getattr(config, "max_position_embeddings", 2048) or 2048))

    def ensure(self, n: int) -> None:
        """Grow the tables to cover positions ``0 .. n-1`` (rows already there keep their
        values: each row depends on its position only).
        """
        if n <= self._len:
            return
        inv_freq = self.inv_freq.detach().cpu().numpy()
        cos, sin = rope_tables(inv_freq, n, self.attention_scaling)
        device = self.inv_freq.device
        self._cos = torch.from_numpy(cos).to(device)
        self._sin = torch.from_numpy(sin).to(device)
        self._len = n

    def forward(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin of shape ``[T, 1, head_dim]`` in ``dtype`` for the given positions ``[T]``."""
        return self._cos[positions].to(dtype).unsqueeze(1), self._sin[positions].to(
            dtype
        ).unsqueeze(1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` ``[T, heads, head_dim]`` by cos/sin ``[T, 1, head_dim]``, rotate-half layout."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def rotate_qk(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary embedding of q ``[T, heads, d]`` and k ``[T, kv_heads, d]`` (rotate-half layout).

    Where :func:`~structgen.runtime.models.attention.use_triton` says so, the Triton ``rotary``
    kernel rotates ``q`` and ``k`` in place (fp32 math, one rounding; they need unit stride
    along ``d``) and they are returned; else :func:`apply_rotary` returns new tensors.

    Args:
        q: ``[T, heads, d]`` queries.
        k: ``[T, kv_heads, d]`` keys.
        cos: ``[T, 1, d]`` cosine table at the tokens' positions (:class:`RotaryEmbedding`),
            contiguous.
        sin: ``[T, 1, d]`` sine table, likewise.

    Returns:
        The rotated ``(q, k)``.
    """
    if use_triton(q):
        t = q.shape[0]
        rotary(q, k, cos.view(t, -1), sin.view(t, -1), backend="triton")
        return q, k
    return apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)


class GatedMLP(nn.Module):
    """SwiGLU MLP: ``down(act(gate(x)) * up(x))``."""

    def __init__(self, hidden: int, intermediate: int, bias: bool, act: str, dtype, device) -> None:
        super().__init__()
        self.gate_proj = Linear(hidden, intermediate, bias, dtype, device)
        self.up_proj = Linear(hidden, intermediate, bias, dtype, device)
        self.down_proj = Linear(intermediate, hidden, bias, dtype, device)
        if act not in ("silu", "swish", "gelu", "gelu_pytorch_tanh"):
            from structgen.errors import ModelLoadError

            raise ModelLoadError(f"unsupported MLP activation {act!r}")
        self.act = (
            F.silu
            if act in ("silu", "swish")
            else (F.gelu if act == "gelu" else (lambda x: F.gelu(x, approximate="tanh")))
        )
        self.gate_up = None

    def fuse(self) -> None:
        """Compute gate and up in one matmul from now on (see :class:`FusedProjection`)."""
        self.gate_up = FusedProjection.build([self.gate_proj, self.up_proj])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., hidden] -> [..., hidden]`` in the weights' dtype."""
        fused = self.gate_up
        if fused is not None and fused.valid():
            gate_up = fused(x)
            n = fused.sizes[0]
            gate, up = gate_up[..., :n], gate_up[..., n:]
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        if self.act is F.silu and gate.dim() == 2:
            return self.down_proj(cpu_ops.silu_mul(gate, up))  # one C pass on CPU, else torch
        return self.down_proj(self.act(gate) * up)
