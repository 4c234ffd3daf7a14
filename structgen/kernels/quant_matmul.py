"""quant_matmul: ``y = x @ dequant(W).T`` with weights dequantized in registers.

Three weight formats, ``W`` of logical shape ``[N, K]`` (``nn.Linear`` layout):

- **w8a16 per channel** (``bits=8``, ``group_size=None``): ``qweight`` int8 ``[N, K]``,
  ``scales`` ``[N]`` (per output channel), ``zeros`` None: ``W = qweight * scales[:, None]``.
- **w8a16 group-wise** (``bits=8``, ``group_size`` set): ``qweight`` uint8 ``[N, K]``
  codes 0..255, ``scales`` and ``zeros`` ``[N, K // group_size]``:
  ``W[n, k] = (q[n, k] - zeros[n, g]) * scales[n, g]`` (GPTQ 8-bit).
- **w8a16 group-wise symmetric** (``bits=8``, ``group_size`` set, ``zeros`` None):
  ``qweight`` int8 ``[N, K]``, ``scales`` ``[N, K // group_size]``: ``W = q * scales[n, g]``
  (the row-major int8 layout of ``structgen.runtime.quantization``, GGUF Q8_0).
- **w4a16** (``bits=4``): ``qweight`` uint8 ``[N, K // 2]`` holding two 4-bit codes per
  byte (even ``k`` in the low nibble), ``scales`` and ``zeros`` ``[N, K // group_size]``
  (float zero points; GPTQ/AWQ integer zeros and GGUF Q4_1's ``d * q + m`` as
  ``zeros = -m / d`` both fit): ``W[n, k] = (q[n, k] - zeros[n, g]) * scales[n, g]``,
  ``g = k // group_size``. Or, with ``mins`` instead of ``zeros``:
  ``W[n, k] = q[n, k] * scales[n, g] + mins[n, g]``; ``block32=True`` reads the codes in
  ggml's block order instead (byte ``j`` of each 16-byte block holds ``k = j`` in its low and
  ``k = j + 16`` in its high nibble: ``structgen.runtime.quantization.formats.pack_int4_rows``).

Kernel: tiled GEMM, grid ``(cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))``, fp32 accumulation;
each K tile of codes is loaded, unpacked and dequantized to the activation dtype in
registers, so HBM traffic is the packed weights (the point at decode batch sizes).
"""

from __future__ import annotations

import torch

from structgen.kernels._triton import (
    cdiv,
    check,
    check_float,
    check_same_device,
    dot_in_f32,
    jit,
    launch,
    resolve_backend,
    tl,
)

__all__ = ["dequantize_ref", "quant_matmul", "quant_matmul_ref", "quantize_ref"]


def dequantize_ref(
    qweight: torch.Tensor,
    scales: torch.Tensor,
    zeros: torch.Tensor | None,
    bits: int,
    group_size: int | None = None,
    *,
    mins: torch.Tensor | None = None,
    block32: bool = False,
) -> torch.Tensor:
    """Dequantize to a float32 ``[N, K]`` weight (formats in the module docstring)."""
    if bits == 8 and group_size is None:
        return qweight.float() * scales.float()[:, None]
    if bits == 8:
        q = qweight.float()  # [N, K] codes 0..255 (or -127..127 without zeros)
    else:
        lo = (qweight & 0xF).to(torch.int16)
        hi = (qweight >> 4).to(torch.int16)
        n = qweight.shape[0]
        if block32:  # [N, K/32, 16] bytes -> codes j and j + 16 of each block
            q = torch.cat([lo.view(n, -1, 16), hi.view(n, -1, 16)], dim=-1).reshape(n, -1).float()
        else:
            q = torch.stack([lo, hi], dim=-1).reshape(n, -1).float()  # [N, K]
    g = torch.arange(q.shape[1], device=q.device) // group_size  # [K]
    if mins is not None:
        return q * scales.float()[:, g] + mins.float()[:, g]
    if zeros is None:
        return q * scales.float()[:, g]
    return (q - zeros.float()[:, g]) * scales.float()[:, g]


def quantize_ref(w: torch.Tensor, bits: int, group_size: int | None = None):
    """Quantize a float ``[N, K]`` weight (tests and benchmarks): ``(qweight, scales, zeros)``.

    Asymmetric min/max group quantization for the group-wise formats (zero points
    ``-min / scale``), symmetric absmax for 8-bit per channel.
    """
    w = w.float()
    if bits == 8 and group_size is None:
        scales = w.abs().amax(1).clamp_min(1e-8) / 127.0
        q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
        return q, scales, None
    levels = 2**bits - 1
    n, k = w.shape
    wg = w.view(n, k // group_size, group_size)
    lo, hi = wg.amin(-1), wg.amax(-1)
    scales = ((hi - lo) / levels).clamp_min(1e-8)  # [N, G]
    zeros = -lo / scales
    q = torch.round(wg / scales[..., None] + zeros[..., None]).clamp(0, levels).to(torch.uint8)
    if bits == 8:
        return q.view(n, k).contiguous(), scales, zeros
    q = q.view(n, k // 2, 2)
    packed = q[..., 0] | (q[..., 1] << 4)
    return packed.contiguous(), scales, zeros


def quant_matmul_ref(
    x: torch.Tensor,
    qweight: torch.Tensor,
    scales: torch.Tensor,
    zeros: torch.Tensor | None = None,
    bits: int = 8,
    group_size: int | None = None,
    *,
    mins: torch.Tensor | None = None,
    block32: bool = False,
) -> torch.Tensor:
    """``x @ dequant(W).T`` (torch reference, float32 math).

    Args:
        x: ``[M, K]`` activations (fp16, bf16 or fp32).
        qweight: the quantized weight's codes (formats in the module docstring).
        scales: the weight's scales (same docstring).
        zeros: the weight's zero points, or None (same docstring).
        bits: 8 or 4.
        group_size: K-group of the scales/zeros (divides K; even); None for 8-bit per channel.
        mins: (4-bit) additive ``[N, K // group_size]`` offsets instead of ``zeros``.
        block32: (4-bit) the codes are in ggml's block order.

    Returns:
        ``[M, N]`` in ``x.dtype``.
    """
    w = dequantize_ref(qweight, scales, zeros, bits, group_size, mins=mins, block32=block32)
    return (x.float() @ w.T).to(x.dtype)


@jit
def _quant_matmul_kernel(
    x_ptr,  # [M, K]
    q_ptr,  # [N, K] int8/uint8 or [N, K // 2] uint8
    s_ptr,  # [N] (PER_CHANNEL) or [N, G]
    z_ptr,  # [N, G] (group-wise)
    y_ptr,  # [M, N]
    M,
    N,
    K,
    stride_xm,
    stride_qn,
    stride_sn,
    stride_zn,
    stride_ym,
    BITS: tl.constexpr,
    PER_CHANNEL: tl.constexpr,  # 8-bit, one scale per output channel, no zero points
    ZERO_MODE: tl.constexpr,  # group-wise: 0 none, 1 (q - z) * s, 2 q * s + z (z holds mins)
    BLOCK32: tl.constexpr,  # 4-bit codes in ggml's block order
    GROUP_SIZE: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    DOT_F32: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = offs_m < M
    n_mask = offs_n < N
    offs_m64 = offs_m.to(tl.int64)
    offs_n64 = offs_n.to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k0 in range(0, K, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < K
        x = tl.load(
            x_ptr + offs_m64[:, None] * stride_xm + offs_k[None, :],
            mask=m_mask[:, None] & k_mask[None, :],
            other=0.0,
        )  # [BLOCK_M, BLOCK_K]
        wk_mask = k_mask[:, None] & n_mask[None, :]
        if BITS == 8:  # [BLOCK_K, BLOCK_N] codes
            code = tl.load(
                q_ptr + offs_n64[None, :] * stride_qn + offs_k[:, None], mask=wk_mask, other=0
            )
        elif BLOCK32:  # byte (k // 32) * 16 + k % 16, high nibble for k % 32 >= 16
            byte_k = (offs_k[:, None] // 32) * 16 + offs_k[:, None] % 16
            byte = tl.load(q_ptr + offs_n64[None, :] * stride_qn + byte_k, mask=wk_mask, other=0)
            code = (byte.to(tl.int32) >> (((offs_k[:, None] % 32) // 16) * 4)) & 0xF
        else:
            byte = tl.load(
                q_ptr + offs_n64[None, :] * stride_qn + offs_k[:, None] // 2, mask=wk_mask, other=0
            )
            code = (byte.to(tl.int32) >> ((offs_k[:, None] % 2) * 4)) & 0xF
        if PER_CHANNEL:
            w = code.to(tl.float32)  # the per-channel scale is applied after the loop
        else:
            g = offs_k[:, None] // GROUP_SIZE
            s = tl.load(s_ptr + offs_n64[None, :] * stride_sn + g, mask=wk_mask, other=0.0)
            if ZERO_MODE == 0:
                w = code.to(tl.float32) * s.to(tl.float32)
            else:
                z = tl.load(z_ptr + offs_n64[None, :] * stride_zn + g, mask=wk_mask, other=0.0)
                if ZERO_MODE == 1:
                    w = (code.to(tl.float32) - z.to(tl.float32)) * s.to(tl.float32)
                else:
                    w = code.to(tl.float32) * s.to(tl.float32) + z.to(tl.float32)
        if DOT_F32:
            acc += tl.dot(x.to(tl.float32), w)
        else:
            acc += tl.dot(x, w.to(x_ptr.dtype.element_ty))
    if PER_CHANNEL:
        s = tl.load(s_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
        acc = acc * s[None, :]
    y_ptrs = y_ptr + offs_m64[:, None] * stride_ym + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_mask[:, None] & n_mask[None, :])


def _check_quant_args(
    x, qweight, scales, zeros, bits, group_size, mins=None, block32=False
) -> None:
    check(bits in (4, 8), f"bits must be 4 or 8, got {bits}")
    check(x.dim() == 2 and qweight.dim() == 2, "x must be [M, K] and qweight 2-D")
    check_float("x", x)
    n, k = qweight.shape[0], x.shape[1]
    check(
        qweight.stride(1) == 1 and x.stride(1) == 1 and scales.stride(-1) == 1,
        "inner dims must be contiguous",
    )
    check_same_device(x=x, qweight=qweight, scales=scales, zeros=zeros, mins=mins)
    if bits == 8 and group_size is None:
        check(
            qweight.dtype == torch.int8 and qweight.shape[1] == k,
            "w8 per channel: qweight must be int8 [N, K]",
        )
        check(
            scales.shape == (n,),
            f"w8 per channel: scales must be [N={n}], got {tuple(scales.shape)}",
        )
        return
    check(
        group_size is not None and group_size % 2 == 0 and k % group_size == 0,
        f"w{bits}: group_size must be even and divide K={k}, got {group_size}",
    )
    check(zeros is None or mins is None, "give zeros or mins, not both")
    check(mins is None or bits == 4, "mins are for w4 only")
    check(not block32 or (bits == 4 and k % 32 == 0), "block32 is for w4 with K a multiple of 32")
    offsets = zeros if zeros is not None else mins
    packed = k if bits == 8 else k // 2
    code = torch.int8 if bits == 8 and offsets is None else torch.uint8
    check(
        qweight.dtype == code and qweight.shape[1] == packed,
        f"w{bits}: qweight must be {code} [N, {packed}], got {qweight.dtype} "
        f"{tuple(qweight.shape)}",
    )
    check(
        (offsets is not None or bits == 8)
        and scales.shape == (n, k // group_size)
        and (offsets is None or offsets.shape == scales.shape),
        f"w{bits}: scales and zeros (or mins) must be [N, K // group_size] = [{n}, "
        f"{k // group_size}]",
    )
    check(
        offsets is None or offsets.stride(-1) == 1, "zeros / mins must be contiguous along groups"
    )


def _quant_matmul_triton(
    x, qweight, scales, zeros, bits, group_size, mins=None, block32=False
) -> torch.Tensor:
    _check_quant_args(x, qweight, scales, zeros, bits, group_size, mins, block32)
    m, k = x.shape
    n = qweight.shape[0]
    y = torch.empty(m, n, dtype=x.dtype, device=x.device)
    if m == 0 or n == 0:
        return y
    block_m = 16 if m <= 16 else (32 if m <= 32 else 64)
    block_n, block_k = (64, 64) if x.is_cuda else (32, 32)
    offsets = zeros if zeros is not None else mins
    z = offsets if offsets is not None else scales
    launch(
        _quant_matmul_kernel,
        (cdiv(m, block_m), cdiv(n, block_n)),
        x.device,
        x, qweight, scales, z, y, m, n, k,
        x.stride(0), qweight.stride(0), scales.stride(0), z.stride(0), y.stride(0),
        BITS=bits, PER_CHANNEL=bits == 8 and group_size is None,
        ZERO_MODE=0 if offsets is None else (1 if zeros is not None else 2), BLOCK32=bool(block32),
        GROUP_SIZE=group_size or 1, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        DOT_F32=dot_in_f32(x.dtype, x.device) or x.dtype == torch.float32,
    )  # fmt: skip
    return y


def quant_matmul(
    x: torch.Tensor,
    qweight: torch.Tensor,
    scales: torch.Tensor,
    zeros: torch.Tensor | None = None,
    bits: int = 8,
    group_size: int | None = None,
    *,
    mins: torch.Tensor | None = None,
    block32: bool = False,
    backend: str = "auto",
) -> torch.Tensor:
    """Quantized matmul; same contract as :func:`quant_matmul_ref`.

    Raises:
        ValueError: (Triton backend) format, shape, dtype or device mismatch.
    """
    if resolve_backend(backend, x.device) == "triton":
        return _quant_matmul_triton(x, qweight, scales, zeros, bits, group_size, mins, block32)
    return quant_matmul_ref(x, qweight, scales, zeros, bits, group_size, mins=mins, block32=block32)
