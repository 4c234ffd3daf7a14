"""Quantized modules that replace ``Linear`` and ``nn.Embedding``: weight-only int8 / int4.

The quantized tensors are registered buffers (counted by ``memory_report``); the
activations stay in the model's float dtype. CPU matmuls (chosen by measurement,
see ``benchmarks/bench_models.py`` and its section of ``benchmarks/RESULTS.md``):

* with our C kernel built (:mod:`~structgen.runtime.cpu.quant`, the default):
  int4 weights are stored in its tile layout (:func:`~.formats.pack_int4_tiles`: the "rows"
  layout of :func:`~.formats.pack_int4_rows` regrouped 8 output rows at a time, fp16
  ``scales``/``mins`` ``[N, G]``; ``int4_layout == "tiles"``) and grouped int8 (GGUF Q8_0)
  row-major ``[N, K]``; at ``M <= 8`` activation rows (decode) the AVX2 kernel runs, above that
  tiles of the weight are dequantized in C for a float32 ``F.linear``. With
  ``activation_dtype`` float32 (or None and float32 inputs) the kernel is exact in float32;
  otherwise (the bfloat16 default) it quantizes activations to int8 per block of 32, as
  llama.cpp does (Q8_0 activations), and uses integer dot products (faster; relative error
  ~1e-2 of a random-input output, the bf16-activation error of torch's kernels being of the
  same order).
* without it (no compiler at install; one warning): int8 per output channel through
  ``torch.ops.aten._weight_int8pack_mm``; grouped int8 stored group-major (``[G, N, K/G]``),
  one ``_weight_int8pack_mm`` per group, summed in float32; int4 grouped through
  ``torch.ops.aten._weight_int4pack_mm_for_cpu`` with its (scale, zero) table cached per
  activation dtype. Both packed torch kernels are much faster with bfloat16 activations than
  with float32 ones, so the activations of a float32 model are cast to ``activation_dtype``
  (bfloat16 by default) for them and the result cast back; float32 activations make them
  exact (tests compare against dequantized weights so).

:func:`apply_activation_dtype` sets every quantized module's ``activation_dtype`` from
``EngineConfig.activation_dtype``: ``"int8"`` is the bfloat16 default (int8 activations in the
C kernel), ``"float32"`` makes every path exact, ``"auto"`` leaves the modules as they are.

On CUDA (or under ``attention_backend("triton")``) row-major int8 and int4 "rows" weights run
the Triton ``quant_matmul`` kernel (``structgen.kernels.quant_matmul``) on the buffers as they
are (an int4 "tiles" weight is turned back into "rows" at its first such call); on other
devices, and for torch's packed int4 or group-major int8 (layouts chosen only
without the C kernel), the weight is dequantized for ``F.linear``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.models.attention import use_triton
from structgen.runtime.models.layers import join_rows
from structgen.runtime.quantization.formats import (
    can_pack_int4,
    dequantize_int4,
    dequantize_int8,
    int4_scale_and_zeros,
    int4_scale_tiles,
    int8_from_group_major,
    int8_scale_tiles,
    int8_to_group_major,
    pack_int4,
    pack_int4_rows,
    pack_int4_tiles,
    pack_int8_tiles,
    unpack_int4_rows,
    unpack_int4_tiles,
)

__all__ = [
    "FusedQuantProjection",
    "QuantLinear",
    "QuantEmbedding",
    "apply_activation_dtype",
    "int8_matmul",
    "int4_matmul",
]

_TILE_ROWS = 4096  # rows dequantized at a time by the grouped-int8 path
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)


def _use_kernel(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype in _FLOATS and cpu_quant.available()


def _q8(x: torch.Tensor, act_dtype: torch.dtype | None) -> bool:
    """Whether the C kernel may quantize activations to int8 (any activation dtype but float32)."""
    return (act_dtype or x.dtype) != torch.float32


def int8_matmul(
    x: torch.Tensor, q: torch.Tensor, scales: torch.Tensor, act_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x @ (scales * q).T`` for ``x`` ``[M, K]``, ``q`` int8 ``[N, K]``, ``scales`` ``[N, G]``
    (or group-major ``q`` ``[G, N, K/G]``, ``scales`` ``[G, N]``: see :func:`int8_to_group_major`).

    ``act_dtype``: dtype the packed CPU kernel computes in (None: ``x``'s).
    Returns ``[M, N]`` in ``x``'s dtype. Raises: never.
    """
    if q.dim() == 3:
        return _int8_group_major_matmul(x, q, scales, act_dtype)
    if _use_kernel(x) and (q.shape[1] // scales.shape[1]) % 8 == 0:
        return cpu_quant.int8_linear(x, q, scales.contiguous(), _q8(x, act_dtype)).to(x.dtype)
    n, k = q.shape
    g = scales.shape[1]
    if (
        g == 1
        and x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.bfloat16, torch.float16)
    ):
        xa = x.to(act_dtype or x.dtype).contiguous()
        return torch.ops.aten._weight_int8pack_mm(xa, q, scales.view(n).to(xa.dtype)).to(x.dtype)
    if g == 1:
        return F.linear(x, q.to(x.dtype)) * scales.view(n).to(x.dtype)
    out = x.new_empty(x.shape[0], n)
    for r in range(0, n, _TILE_ROWS):  # dequantize a tile of rows at a time (bounded scratch)
        w = dequantize_int8(q[r : r + _TILE_ROWS], scales[r : r + _TILE_ROWS]).to(x.dtype)
        out[:, r : r + _TILE_ROWS] = F.linear(x, w)
    return out


def _int8_group_major_matmul(x, q, scales, act_dtype) -> torch.Tensor:
    groups, n, gs = q.shape
    if x.device.type != "cpu" or x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        q2, s2 = int8_from_group_major(q, scales)
        return F.linear(x, dequantize_int8(q2, s2).to(x.dtype))
    xa = x.to(act_dtype or x.dtype)
    out = torch.zeros(x.shape[0], n, dtype=torch.float32, device=x.device)
    for j in range(groups):  # one packed int8 matmul per group, accumulated in float32
        xj = xa[:, j * gs : (j + 1) * gs].contiguous()
        out += torch.ops.aten._weight_int8pack_mm(xj, q[j], scales[j].to(xa.dtype)).float()
    return out.to(x.dtype)


def int4_matmul(
    x: torch.Tensor,
    packed: torch.Tensor,
    scales: torch.Tensor,
    mins: torch.Tensor,
    group_size: int,
    act_dtype: torch.dtype | None = None,
    scale_zeros: torch.Tensor | None = None,
) -> torch.Tensor:
    """``x @ W.T`` for an int4 weight packed by :func:`pack_int4` (``scales``/``mins`` fp16
    ``[G, N]``).

    ``act_dtype``: dtype the kernel computes in (None: ``x``'s). ``scale_zeros``: the
    :func:`int4_scale_and_zeros` table in that dtype if the caller caches it (else rebuilt).
    Returns ``[M, N]`` in ``x``'s dtype. Raises: never.
    """
    xa = x.to(act_dtype or x.dtype).contiguous()
    sz = (
        scale_zeros if scale_zeros is not None else int4_scale_and_zeros(scales, mins, xa.dtype)
    )  # [G, N, 2]
    return torch.ops.aten._weight_int4pack_mm_for_cpu(xa, packed, group_size, sz).to(x.dtype)


def _set_activation_dtype(model: nn.Module, dtype: torch.dtype | None) -> nn.Module:
    """Set the packed kernels' activation dtype of every quantized module (None: the input's)."""
    for m in model.modules():
        if isinstance(m, (QuantLinear, QuantEmbedding)):
            m.activation_dtype = dtype
    return model


_ACTIVATION_DTYPES = {"int8": torch.bfloat16, "float32": torch.float32}  # "auto": the modules' own


def apply_activation_dtype(model: nn.Module, setting: str) -> nn.Module:
    """Apply an ``EngineConfig.activation_dtype`` to every quantized module of ``model``.

    Args:
        model: any module; its :class:`QuantLinear` / :class:`QuantEmbedding` s are set
            (mutated in place; float layers are untouched).
        setting: ``"int8"`` (bfloat16 activations: int8 per block of 32 in the C kernel,
            bfloat16 in torch's packed kernels), ``"float32"`` (exact) or ``"auto"`` (the
            modules keep their own, bfloat16 unless set otherwise: as ``"int8"``).

    Returns:
        ``model``.

    Raises:
        KeyError: an unknown setting (``EngineConfig`` validates it first).
    """
    if setting == "auto":
        return model
    return _set_activation_dtype(model, _ACTIVATION_DTYPES[setting])


def _dequantize_int8_any(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """``[N, K]`` float32 of an int8 weight in either layout (row-major or group-major)."""
    if q.dim() == 3:
        q, scales = int8_from_group_major(q, scales)
    return dequantize_int8(q, scales)


def _kept_derived(owner: object, name: str, sources: tuple[torch.Tensor, ...], build: Any) -> Any:
    """``build()``'s result, kept in ``owner.__dict__[name]`` while every tensor of ``sources`` is
    the same object at the same ``_version`` (an in-place write or a replaced buffer rebuilds it;
    a buffer allocated where a freed one was is not mistaken for it: identity is checked too).

    Raises:
        whatever ``build`` raises (nothing is kept then).
    """
    kept = _kept(owner, name, sources)
    if kept is None:
        kept = owner.__dict__[name] = (sources, tuple(t._version for t in sources), build())
    return kept[2]


def _kept(owner: object, name: str, sources: tuple[torch.Tensor, ...]) -> tuple | None:
    """``owner.__dict__[name]`` (``(sources, versions, result)``) while it is
    :func:`_kept_derived`'s current result for ``sources``, else None. Raises: never.
    """
    kept = owner.__dict__.get(name)
    if (
        kept is None
        or any(a is not b for a, b in zip(kept[0], sources, strict=True))
        or kept[1] != tuple(t._version for t in sources)
    ):
        return None
    return kept


def _drop_stale(owner: object, name: str, sources: tuple[torch.Tensor, ...]) -> None:
    """Forget ``owner.__dict__[name]`` unless it is current for ``sources`` (after a move or a
    cast replaced them: a table made on CPU at load is not kept beside a CUDA copy of the
    weights). Raises: never.
    """
    if name in owner.__dict__ and _kept(owner, name, sources) is None:
        del owner.__dict__[name]


def _keep_derived(owner: object, name: str, sources: tuple[torch.Tensor, ...], value: Any) -> None:
    """Keep ``value`` as :func:`_kept_derived`'s result for ``sources`` at their current versions:
    a table made elsewhere (at load, in numpy) that its ``build`` would make. Raises: never.
    """
    owner.__dict__[name] = (sources, tuple(t._version for t in sources), value)


class QuantLinear(nn.Module):
    """A weight-only quantized linear: ``y = x @ dequant(W).T + b``.

    Build with :meth:`from_int8` or :meth:`from_int4` (from already-quantized tensors) or
    :meth:`quantize` (from a float weight).

    Attributes:
        kind: ``"int8"`` or ``"int4"``.
        in_features, out_features: K, N.
        group_size: inputs per scale (K for int8 per channel).
        int4_layout: ``"tiles"`` (our C kernel's, :func:`~.formats.pack_int4_tiles`, qweight
            ``[8 ceil(N/8), K/2]``, scales/mins ``[N, G]``), ``"rows"`` (the Triton kernel's,
            :func:`~.formats.pack_int4_rows`, ``[N, K/2]``) or ``"torch"``
            (``_weight_int4pack_mm_for_cpu``'s, scales/mins ``[G, N]``); chosen at build time
            (``"tiles"`` becomes ``"rows"`` at the first Triton call).
    """

    activation_dtype: torch.dtype | None = torch.bfloat16
    int4_layout: str = "torch"
    use_kernel: bool = False  # our C kernel takes this module's layout on CPU (decided at build)

    def __init__(
        self,
        kind: str,
        in_features: int,
        out_features: int,
        group_size: int,
        bias: torch.Tensor | None,
    ) -> None:
        super().__init__()
        self.kind = kind
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_int8(
        cls, q: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None = None
    ) -> "QuantLinear":
        """From ``q`` int8 ``[N, K]`` and ``scales`` ``[N, G]`` (kept in their dtype: fp16 for
        Q8_0).

        Grouped weights (``G > 1``) are stored row-major for the C kernel (group size a multiple
        of 8) or, without it, group-major (:func:`int8_to_group_major`).
        """
        n, k = q.shape
        group = k // scales.shape[1]
        m = cls("int8", k, n, group, bias)
        m.use_kernel = cpu_quant.available() and group % 8 == 0
        if scales.shape[1] > 1 and not m.use_kernel:
            q, scales = int8_to_group_major(q, scales)
        m.register_buffer("qweight", q.contiguous())
        m.register_buffer("scales", scales.contiguous())
        return m

    @classmethod
    def from_int4(
        cls,
        q: torch.Tensor,
        scales: torch.Tensor,
        mins: torch.Tensor,
        bias: torch.Tensor | None = None,
    ) -> "QuantLinear":
        """From unpacked ``q`` uint8 ``[N, K]`` (0..15) and fp16 ``scales``/``mins`` ``[G, N]``.

        Raises:
            ValueError: the shape cannot be packed (see :func:`can_pack_int4`).
        """
        n, k = q.shape
        group = k // scales.shape[0]
        if not can_pack_int4(n, k, group):
            raise ValueError(
                f"int4 packing needs N % 16 == 0 and K % group == 0 (got N={n}, K={k}, "
                f"group={group})"
            )
        m = cls("int4", k, n, group, bias)
        if cpu_quant.available() and group % 32 == 0:
            m.int4_layout, m.use_kernel = "tiles", True
            m.register_buffer("qweight", pack_int4_tiles(pack_int4_rows(q)))
            m.register_buffer("scales", scales.half().t().contiguous())  # [N, G]
            m.register_buffer("mins", mins.half().t().contiguous())
            m._keep_scale_tiles(None)
            return m
        m.register_buffer("qweight", pack_int4(q))
        m._register_int4_scales(scales, mins)
        return m

    @classmethod
    def from_int4_rows(
        cls,
        packed: torch.Tensor,
        scales: torch.Tensor,
        mins: torch.Tensor,
        bias: torch.Tensor | None = None,
    ) -> "QuantLinear":
        """From weights in the int4 "rows" layout, regrouped into the C kernel's tiles
        (:func:`~.formats.pack_int4_tiles`; ``packed`` itself is not kept).

        Args:
            packed: uint8 ``[N, K/2]`` (:func:`~.formats.pack_int4_rows`).
            scales: ``[N, K/32]``, contiguous: fp16 (GGUF Q4_0/Q4_1), or fp32, kept as
                fp32 (GGUF Q4_K's ``d * sc``, which fp16 cannot hold exactly).
            mins: ``[N, K/32]``, contiguous, stored in the dtype ``scales`` is stored in
                (``w = scales * q + mins`` per group of 32).
            bias: optional ``[N]``.

        Raises:
            ValueError: the C kernel is not available, or the shapes do not match.
        """
        if packed.dim() != 2 or packed.dtype != torch.uint8 or packed.shape[1] % 16:
            raise ValueError(
                f"packed must be uint8 [N, K/2] with K % 32 == 0, got {packed.dtype} "
                f"{list(packed.shape)}"
            )
        return cls.from_int4_tiles(pack_int4_tiles(packed), scales, mins, bias)

    @classmethod
    def from_int4_tiles(
        cls,
        tiles: torch.Tensor,
        scales: torch.Tensor,
        mins: torch.Tensor,
        bias: torch.Tensor | None = None,
        scale_tiles: torch.Tensor | None = None,
    ) -> "QuantLinear":
        """From weights already in the C kernel's int4 tile layout, kept as given (no copy).

        The kernel's tile table of the scales and mins (:meth:`scale_tiles`) is made here on
        CPU (or taken as given), not at the first forward.

        Args:
            tiles: uint8 ``[8 * ceil(N/8), K/2]`` (:func:`~.formats.pack_int4_tiles`),
                contiguous.
            scales: ``[N, K/32]`` as :meth:`from_int4_rows` takes them (``N`` is read here).
            mins: ``[N, K/32]``, the same.
            bias: optional ``[N]``.
            scale_tiles: optional ``int4_scale_tiles(scales, mins)`` made by the caller
                (``[ceil(N/8), K/32, 2, 8]`` in the stored scales' dtype, contiguous; the GGUF
                loader's, built in numpy with the weights), kept as given (no copy).

        Raises:
            ValueError: the C kernel is not available, or the shapes do not match.
        """
        if not cpu_quant.available():
            raise ValueError("the int4 tile layout needs the C kernel (structgen.runtime.cpu)")
        n = scales.shape[0] if scales.dim() == 2 else 0
        half = tiles.shape[1] if tiles.dim() == 2 else 0
        if (
            tiles.dtype != torch.uint8
            or tiles.dim() != 2
            or tiles.shape[0] != 8 * ((n + 7) // 8)
            or half % 16
            or n == 0
        ):
            raise ValueError(
                f"tiles must be uint8 [8 * ceil(N/8), K/2] for the scales' N = {n}, got "
                f"{tiles.dtype} {list(tiles.shape)}"
            )
        if scales.shape != (n, half * 2 // 32) or mins.shape != scales.shape:
            raise ValueError(
                f"scales and mins must be [N, K/32] = {[n, half * 2 // 32]}, got "
                f"{list(scales.shape)} and {list(mins.shape)}"
            )
        m = cls("int4", half * 2, n, 32, bias)
        m.int4_layout, m.use_kernel = "tiles", True
        m.register_buffer("qweight", tiles.contiguous())
        m._register_int4_scales(scales, mins)
        m._keep_scale_tiles(scale_tiles)
        return m

    @classmethod
    def quantize(
        cls,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        kind: str,
        group_size: int | None = None,
    ) -> "QuantLinear":
        """Quantize a float ``[N, K]`` weight (int8: per channel unless ``group_size``; int4:
        grouped).
        """
        from structgen.runtime.quantization.formats import quantize_int4, quantize_int8

        if kind == "int8":
            q, s = quantize_int8(weight, group_size)
            return cls.from_int8(q, s, bias)
        q, s, mn = quantize_int4(weight, group_size or 64)
        return cls.from_int4(q, s, mn, bias)

    def dequantized_weight(self) -> torch.Tensor:
        """``[N, K]`` float32 weight (the reference the matmul must match)."""
        if self.kind == "int8":
            return _dequantize_int8_any(self.qweight, self.scales)
        if self.int4_layout in ("rows", "tiles"):
            rows = self.qweight
            if self.int4_layout == "tiles":
                rows = unpack_int4_tiles(rows, self.out_features)
            return dequantize_int4(unpack_int4_rows(rows), self.scales.t(), self.mins.t())
        eye = torch.eye(self.in_features, dtype=torch.float32, device=self.qweight.device)
        sz = int4_scale_and_zeros(self.scales, self.mins, torch.float32)
        return (
            torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.qweight, self.group_size, sz)
            .t()
            .contiguous()
        )

    def _register_int4_scales(self, scales: torch.Tensor, mins: torch.Tensor) -> None:
        """Register an int4 layout's ``scales`` and ``mins`` as given (contiguous): float32 kept
        as float32 (GGUF Q4_K's exact products), any other dtype as float16.
        """
        dtype = torch.float32 if scales.dtype == torch.float32 else torch.float16
        self.register_buffer("scales", scales.to(dtype).contiguous())
        self.register_buffer("mins", mins.to(dtype).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [..., in] -> [..., out]``: ``x @ dequant(W).T + bias`` in ``x``'s dtype, by the
        fastest path the device, dtype and layout allow (Triton, C kernel, torch).
        """
        shape = x.shape
        x2 = x if x.dim() == 2 else x.reshape(-1, shape[-1])  # [M, K]
        if use_triton(x2) and self._triton_layout():
            if self.int4_layout == "tiles":
                self._untile()
            y = self._triton_forward(x2)
        elif (
            self.use_kernel
            and x2.device.type == "cpu"
            and x2.dtype in _FLOATS
            and cpu_quant._lib is not None
        ):
            y = self._kernel_forward(x2)  # the decode hot path: as few Python steps as possible
        elif self.kind == "int8":
            y = int8_matmul(x2, self.qweight, self.scales, self.activation_dtype)
        elif self.int4_layout == "tiles" and _use_kernel(x2):
            y = cpu_quant.int4t_linear(
                x2,
                self.qweight,
                self.scales,
                self.mins,
                self.group_size,
                _q8(x2, self.activation_dtype),
                self.scale_tiles(),
            ).to(x2.dtype)
        elif self.int4_layout == "torch" and x2.device.type == "cpu":
            y = int4_matmul(
                x2,
                self.qweight,
                self.scales,
                self.mins,
                self.group_size,
                self.activation_dtype,
                self._cached_scale_zeros((self.activation_dtype or x2.dtype)),
            )
        else:  # other devices without the Triton kernel's layouts: dequantize
            y = F.linear(x2, self.dequantized_weight().to(x2.dtype))
        if self.bias is not None:
            y = y + self.bias
        return y if x.dim() == 2 else y.reshape(*shape[:-1], self.out_features)

    def _untile(self) -> None:
        """Turn an int4 "tiles" weight back into the "rows" layout the Triton kernel reads (once:
        the buffer is replaced, so a fused projection over it falls back to its members).
        """
        self._buffers["qweight"] = unpack_int4_tiles(self._buffers["qweight"], self.out_features)
        self.int4_layout = "rows"

    def _triton_layout(self) -> bool:
        """Whether the Triton ``quant_matmul`` kernel reads this module's buffers (row-major
        int8, int4 ``"rows"``, or ``"tiles"`` once turned into ``"rows"`` by :meth:`_untile`; not
        torch's packed int4 nor group-major int8).
        """
        if self.kind == "int8":
            return self.qweight.dim() == 2
        return self.int4_layout in ("rows", "tiles")

    def _triton_forward(self, x2: torch.Tensor) -> torch.Tensor:
        """``[M, K]`` -> ``[M, N]`` in ``x2``'s dtype through the Triton ``quant_matmul`` kernel."""
        from structgen.kernels.quant_matmul import quant_matmul

        b = self._buffers
        if self.kind == "int8" and b["scales"].shape[1] == 1:  # per output channel
            return quant_matmul(
                x2, b["qweight"], b["scales"].view(-1), None, 8, None, backend="triton"
            )
        if self.kind == "int8":
            return quant_matmul(
                x2, b["qweight"], b["scales"], None, 8, self.group_size, backend="triton"
            )
        return quant_matmul(
            x2,
            b["qweight"],
            b["scales"],
            None,
            4,
            self.group_size,
            mins=b["mins"],
            block32=True,
            backend="triton",
        )

    def _kernel_forward(self, x2: torch.Tensor) -> torch.Tensor:
        """``[M, K]`` -> ``[M, N]`` in ``x2``'s dtype through :mod:`cpu_quant` (buffers read from
        ``_buffers`` directly, bypassing ``nn.Module.__getattr__`` on the decode path).
        """
        b = self._buffers
        q8 = (self.activation_dtype or x2.dtype) != torch.float32
        if self.kind == "int4":
            linear = (
                cpu_quant.int4t_linear if self.int4_layout == "tiles" else cpu_quant.int4_linear
            )
            y = linear(
                x2, b["qweight"], b["scales"], b["mins"], self.group_size, q8, self.scale_tiles()
            )
        else:
            y = cpu_quant.int8_linear(x2, b["qweight"], b["scales"], q8)
        return y if y.dtype == x2.dtype else y.to(x2.dtype)

    def scale_tiles(self) -> torch.Tensor:
        """An int4 "tiles" or "rows" weight's ``scales`` and ``mins`` as the C kernel reads them:
        :func:`~structgen.runtime.quantization.formats.int4_scale_tiles` ``[ceil(N/8), G, 2, 8]``
        in their dtype, made at the first call and kept while ``scales`` and ``mins`` are the same
        tensor objects at the same version (an in-place change, e.g. ``load_state_dict``, or a
        replaced buffer makes a new one; the tensors are held, not their addresses, so a new
        buffer allocated where a freed one was is not mistaken for it).

        Raises:
            ValueError: the module is not int4 (``int4_scale_tiles``'s error for other tables).
        """
        b = self._buffers
        if self.kind != "int4":
            raise ValueError(f"scale_tiles: {self.kind} weights have no mins (int4 only)")
        sc, mn = b["scales"], b["mins"]
        return _kept_derived(self, "_scale_tiles", (sc, mn), lambda: int4_scale_tiles(sc, mn))

    def _apply(self, fn, recurse: bool = True):
        """``nn.Module._apply`` (``.to()``, casts), then the int4 tile table is dropped if the
        scales or mins it was made from were replaced (it is made again at first use).
        """
        out = super()._apply(fn, recurse)
        if "mins" in self._buffers:
            _drop_stale(self, "_scale_tiles", (self._buffers["scales"], self._buffers["mins"]))
        return out

    def _keep_scale_tiles(self, table: torch.Tensor | None) -> None:
        """Keep ``table`` (None: ``int4_scale_tiles`` of the buffers, made now where they are on
        CPU; elsewhere left to the first :meth:`scale_tiles` call) as :meth:`scale_tiles`'
        result for the current ``scales`` and ``mins``.

        Raises:
            ValueError: ``table`` is not ``[ceil(N/8), G, 2, 8]`` contiguous in the scales'
                dtype and device.
        """
        sc, mn = self._buffers["scales"], self._buffers["mins"]
        if table is None:
            if sc.device.type != "cpu":
                return
            table = int4_scale_tiles(sc, mn)
        n, g = sc.shape
        if (
            tuple(table.shape) != ((n + 7) // 8, g, 2, 8)
            or table.dtype != sc.dtype
            or table.device != sc.device
            or not table.is_contiguous()
        ):
            raise ValueError(
                f"scale_tiles must be {sc.dtype} {[(n + 7) // 8, g, 2, 8]} contiguous on "
                f"{sc.device}, got {table.dtype} {list(table.shape)} on {table.device}"
            )
        _keep_derived(self, "_scale_tiles", (sc, mn), table)

    def _cached_scale_zeros(self, dtype: torch.dtype) -> torch.Tensor:
        """The torch layout's ``[G, N, 2]`` (scale, zero) table in ``dtype``, built once per dtype
        and buffer storage (it is a pure function of the fp16 ``scales``/``mins``, so results are
        unchanged).
        """
        cache = self.__dict__.setdefault("_scale_zeros", {})
        key = (dtype, self.scales.data_ptr(), self.mins.data_ptr())
        sz = cache.get(key)
        if sz is None:
            cache.clear()
            sz = cache[key] = int4_scale_and_zeros(self.scales, self.mins, dtype)
        return sz

    def extra_repr(self) -> str:
        """Kind, sizes and group, shown in the module's ``repr``."""
        return (
            f"{self.kind}, in={self.in_features}, out={self.out_features}, group={self.group_size}"
        )


class QuantEmbedding(nn.Module):
    """An int8 embedding (per row, or per group of 32 for GGUF Q8_0) that doubles as a tied output
    layer.

    ``forward(ids)`` dequantizes only the looked-up rows; :meth:`as_linear` is the
    tied ``lm_head`` (rows are output channels).
    """

    activation_dtype: torch.dtype | None = torch.bfloat16

    def __init__(self, q: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype
        self.num_embeddings, self.embedding_dim = q.shape
        group = self.embedding_dim // scales.shape[1]
        if scales.shape[1] > 1 and not (cpu_quant.available() and group % 8 == 0):
            # grouped, no C kernel (GGUF Q8_0): group-major, for the tied output matmul
            q, scales = int8_to_group_major(q, scales)
        self.register_buffer("qweight", q.contiguous())
        self.register_buffer("scales", scales.contiguous())

    @classmethod
    def quantize(cls, weight: torch.Tensor, group_size: int | None = None) -> "QuantEmbedding":
        """Int8 per row (``group_size=None``) of a float ``[vocab, hidden]`` table."""
        from structgen.runtime.quantization.formats import quantize_int8

        q, s = quantize_int8(weight, group_size)
        return cls(q, s, weight.dtype)

    def to_dtype(self, dtype: torch.dtype) -> "QuantEmbedding":
        """Set the dtype looked-up rows come out in (the model's compute dtype); returns self."""
        self.dtype = dtype
        return self

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids [T]`` int -> ``[T, hidden]`` dequantized rows in :attr:`dtype`."""
        if self.qweight.dim() == 3:  # group-major [G, V, g]
            q, sc = self.qweight[:, ids], self.scales[:, ids]  # [G, T, g], [G, T]
            rows = (q.float() * sc.float()[..., None]).transpose(0, 1)  # [T, G, g]
            return rows.reshape(ids.shape[0], self.embedding_dim).to(self.dtype)
        return dequantize_int8(self.qweight[ids], self.scales[ids]).to(self.dtype)  # [T, hidden]

    def dequantized_weight(self) -> torch.Tensor:
        """``[vocab, hidden]`` float32 table (the reference lookups and the tied matmul must
        match).
        """
        return _dequantize_int8_any(self.qweight, self.scales)

    def as_linear(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ table.T`` ``[R, vocab]`` (tied output projection), in ``x``'s dtype.

        With int8 activations on CPU and a row-major table grouped by multiples of 32 (GGUF
        Q8_0), the C kernel over the table's int8 tiles (:meth:`int8_tiles`,
        :func:`~structgen.runtime.cpu.quant.int8t_mm`: exact int32 block dots, one float
        epilogue, AMX from 5 rows; a row's logits never depend on the other rows); otherwise
        :func:`int8_matmul`.
        """
        s = self._buffers["scales"]
        q = self._buffers["qweight"]
        if (
            q.dim() == 2
            and _use_kernel(x)
            and x.dim() == 2
            and (q.shape[1] // s.shape[1]) % 32 == 0
            and _q8(x, self.activation_dtype)
        ):
            tiles, table = self.int8_tiles()
            y = cpu_quant.int8t_mm(x, tiles, table, q.shape[1] // s.shape[1], q.shape[0])
            return y if y.dtype == x.dtype else y.to(x.dtype)
        return int8_matmul(x, q, s, self.activation_dtype)

    def int8_tiles(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The table in the C kernel's int8 tile layout and its float32 scale table
        (:func:`~.formats.pack_int8_tiles`, :func:`~.formats.int8_scale_tiles`: the same
        values regrouped, ``[16 ceil(V/16), hidden]`` int8 and ``[ceil(V/16), G, 16]``),
        made at the first call (~30 ms for a 49152 x 576 table) and kept while ``qweight`` and
        ``scales`` are the same tensor objects at the same version (as
        :meth:`QuantLinear.scale_tiles`). The kept copy is the table's size again in memory.

        Raises:
            ValueError: the table is group-major or its rows are not a multiple of 32 inputs.
        """
        b = self._buffers
        q, sc = b["qweight"], b["scales"]

        def build() -> tuple[torch.Tensor, torch.Tensor]:
            if q.dim() != 2:
                raise ValueError("int8_tiles: the table is group-major (no C kernel layout)")
            return pack_int8_tiles(q), int8_scale_tiles(sc)

        return _kept_derived(self, "_int8_tiles", (q, sc), build)

    def _apply(self, fn, recurse: bool = True):
        """``nn.Module._apply`` (``.to()``, casts), then the int8 tiles are dropped if the table
        or scales they were made from were replaced (made again at first use).
        """
        out = super()._apply(fn, recurse)
        _drop_stale(self, "_int8_tiles", (self._buffers["qweight"], self._buffers["scales"]))
        return out

    def keep_int8_tiles(self, tiles: torch.Tensor, table: torch.Tensor) -> None:
        """Keep ``(tiles, table)`` as :meth:`int8_tiles`' result for the current ``qweight`` and
        ``scales``: ``pack_int8_tiles(qweight)`` and ``int8_scale_tiles(scales)`` made by the
        caller (the GGUF loader's, in numpy at load for a tied output layer), kept as given.

        Raises:
            ValueError: the table is group-major, or ``tiles`` / ``table`` are not int8
                ``[16 ceil(V/16), hidden]`` / float32 ``[ceil(V/16), G, 16]``.
        """
        q, sc = self._buffers["qweight"], self._buffers["scales"]
        if q.dim() != 2:
            raise ValueError("keep_int8_tiles: the table is group-major (no C kernel layout)")
        v, k = q.shape
        nt = (v + 15) // 16
        if (
            tiles.dtype != torch.int8
            or tuple(tiles.shape) != (16 * nt, k)
            or table.dtype != torch.float32
            or tuple(table.shape) != (nt, sc.shape[1], 16)
        ):
            raise ValueError(
                f"keep_int8_tiles: expected int8 {[16 * nt, k]} and float32 "
                f"{[nt, sc.shape[1], 16]}, got {tiles.dtype} {list(tiles.shape)} and "
                f"{table.dtype} {list(table.shape)}"
            )
        _keep_derived(self, "_int8_tiles", (q, sc), (tiles, table))


def _scale_sources(lin: QuantLinear) -> tuple[torch.Tensor, ...]:
    """What an int4 module's tile table is derived from (``scales``, ``mins``); () for int8."""
    b = lin._buffers
    return (b["scales"], b["mins"]) if "mins" in b else ()


class FusedQuantProjection:
    """One quantized matmul for several :class:`QuantLinear` s that read the same input (q/k/v,
    gate/up): the quantized counterpart of ``models.layers.FusedProjection``.

    At batch 1 each kernel call costs its Python wrapper and an OpenMP fork/join on top of
    streaming its weight; one call over the concatenated rows saves two of them for q/k/v and
    one for gate/up, per layer. Only for members in the C kernel's row-major layouts (int8
    with ``[N, G]`` scales, int4 ``"rows"``, int4 ``"tiles"`` whose members' output sizes are
    multiples of 8), where stacking output rows is a concatenation.
    The members' buffers (and biases) become views into the fused ones, so memory is not
    doubled and ``state_dict`` is unchanged; should a member's buffer be replaced (``.to()``,
    ``load_state_dict``), :meth:`valid` turns False and callers use the members again.

    Attributes:
        sizes: output features of each member, in order.
        module: the fused :class:`QuantLinear` (not registered in the model).
    """

    _NAMES = ("qweight", "scales", "mins")

    def __init__(self, linears: list[QuantLinear]) -> None:
        first = linears[0]
        self.sizes = [lin.out_features for lin in linears]
        has_bias = first.bias is not None
        bias = join_rows([lin.bias.detach() for lin in linears]) if has_bias else None
        fused = QuantLinear(first.kind, first.in_features, sum(self.sizes), first.group_size, bias)
        fused.int4_layout, fused.use_kernel = first.int4_layout, True
        # the members' int4 tile tables (made at load), read before their buffers become views
        tables = [
            kept[2] if (kept := _kept(lin, "_scale_tiles", _scale_sources(lin))) else None
            for lin in linears
        ]
        self._members = linears
        self._views = []  # (a member's buffer registry, name, the view)
        for name in self._NAMES:
            if name not in first._buffers:
                continue
            whole = join_rows([lin._buffers[name] for lin in linears])  # a view if laid out
            fused.register_buffer(name, whole)
            start = 0
            for lin, n in zip(linears, self.sizes):
                lin._buffers[name] = whole[start : start + n]
                self._views.append((lin._buffers, name, lin._buffers[name]))
                start += n
        if has_bias:
            start = 0
            for lin, n in zip(linears, self.sizes):
                lin.bias = nn.Parameter(fused.bias.data[start : start + n], requires_grad=False)
                start += n
        if all(t is not None for t in tables) and all(n % 8 == 0 for n in self.sizes):
            # whole tiles: the fused table is the members' end to end (a view where they are,
            # as the GGUF loader writes them), and each member keeps its slice of it
            whole = join_rows(tables)
            _keep_derived(fused, "_scale_tiles", _scale_sources(fused), whole)
            start = 0
            for lin, n in zip(linears, self.sizes):
                part = whole[start // 8 : (start + n) // 8]
                _keep_derived(lin, "_scale_tiles", _scale_sources(lin), part)
                start += n
        self.module = fused

    @staticmethod
    def build(linears: list[nn.Module]) -> "FusedQuantProjection | None":
        """Fuse ``linears`` if all are kernel-layout :class:`QuantLinear` s of one kind, group size,
        input size, bias presence and device, else None.
        """
        if not linears or any(
            type(lin) is not QuantLinear or not lin.use_kernel for lin in linears
        ):
            return None
        first = linears[0]
        same = all(
            lin.kind == first.kind
            and lin.group_size == first.group_size
            and lin.in_features == first.in_features
            and lin.int4_layout == first.int4_layout
            and (lin.bias is None) == (first.bias is None)
            and lin.qweight.device == first.qweight.device
            and lin.scales.dtype == first.scales.dtype
            for lin in linears
        )
        if not same:
            return None
        if first.kind == "int4" and not (
            first.int4_layout == "rows"
            or (first.int4_layout == "tiles" and all(lin.out_features % 8 == 0 for lin in linears))
        ):  # tiles of 8 rows stack as rows only when no member pads its last tile
            return None
        return FusedQuantProjection(linears)

    def valid(self) -> bool:
        """True while every member's buffers are still the views into the fused ones."""
        for registry, name, view in self._views:
            if registry.get(name) is not view:
                return False
        return True

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``[..., sum(out_features)]`` outputs of all members for ``x`` ``[..., in_features]``
        (with the first member's ``activation_dtype``, as :func:`apply_activation_dtype` left it).
        """
        self.module.activation_dtype = self._members[0].activation_dtype
        return self.module(x)
