"""The fused decode step's layer table and its C call, without torch.

``csrc/decodestep.c``'s ``decode_layers`` reads one int64 row per decoder layer of plain
addresses and format words (the ``LF_*`` columns below). Two builders fill it:
:class:`~structgen.runtime.cpu.decode_step.DecodeStepPlan` from a torch model's modules
(``Tensor.data_ptr()``), and :class:`~structgen.runtime.cpu.model.CpuModel` from numpy weights
(``ndarray.ctypes.data``). Both run it through :func:`run_layers`; this module imports no
torch, so the torch-free default CPU engine can call it.
"""

from __future__ import annotations

import sys

from structgen.runtime.cpu.threads import kernel_threads

__all__ = [
    "MAX_STEP_ROWS",
    "TABLE_COLUMNS",
    "COL_KV",
    "COL_FORMATS",
    "HostTable",
    "FMT_INT4",
    "FMT_INT8",
    "FMT_INT4T",
    "Q8_FLAG",
    "KV_DT",
    "address",
    "dtype_name",
    "kv_addresses",
    "kernels_on",
    "run_layers",
]

try:  # built by setup.py; optional
    from structgen.runtime.cpu import _decodestep as _ext
except ImportError:  # pragma: no cover - depends on the build
    _ext = None

MAX_STEP_ROWS = 64  # rows (tokens) of one C call (csrc/decodestep.c MAX_STEP_ROWS)
TABLE_COLUMNS = 63  # LF_COUNT
# LF_*: 0 input norm, 1/2 qkv weight/bias, 3/4 o, 5 post-attention norm, 6/7 gate/up, 8/9 down,
# 10/11 K/V cache, 12/13 q/k norm, 14 window, then per matmul (qkv, o, gate/up, down) its format
# word, scales and mins (15.., 18.., 21.., 24..), then 3 parts of 6 fields for qkv (27..) and
# gate/up (45..)
COL_KV = (10, 11)
COL_FORMATS = (15, 18, 21, 24)
FMT_INT4, FMT_INT8, FMT_INT4T = 1, 2, 3  # csrc/decodestep.c FMT_*: the format word's low bits
Q8_FLAG = 1 << 3  # a format word's int8 activations flag (0 for float weights)
DT = {"float32": 0, "bfloat16": 1}  # compute dtype codes (dt's low byte)
KV_DT = {**DT, "float16": 2}  # KV cache dtype codes (dt's second byte)


def dtype_name(dtype) -> str:
    """``"float16"`` of ``torch.float16``, ``np.dtype("float16")`` or ``np.float16``."""
    name = getattr(dtype, "name", None)  # an np.dtype
    if isinstance(name, str):
        return name
    if isinstance(dtype, type):  # a numpy scalar type
        return dtype.__name__
    return str(dtype).rsplit(".", 1)[-1]


def address(a) -> int:
    """The first element's address of a CPU tensor (``data_ptr()``) or an ``ndarray``
    (``ctypes.data``); 0 for None.
    """
    if a is None:
        return 0
    ptr = getattr(a, "data_ptr", None)
    return ptr() if ptr is not None else a.ctypes.data


def kv_addresses(kv) -> list[int]:
    """Every layer's K then V storage address of a KV pool (tensors or ``ndarray`` s): a
    ``KVPool``'s ``data_ptrs()`` (its host storage's own addresses: no torch view made).
    """
    ptrs = getattr(kv, "data_ptrs", None)
    if ptrs is not None:
        return ptrs()
    return [address(t) for t in kv.k] + [address(t) for t in kv.v]


def kernels_on() -> bool:
    """True when the fused step's extension is built and no switch of the kernels it runs is
    off (``set_enabled`` of ``decode_step``, ``dense``, ``ops``, ``quant``; a wrapper module not
    imported yet has its switch at the default, on). Never imports torch. Raises: never.
    """
    if _ext is None:
        return False
    for name in ("decode_step", "dense", "ops", "quant"):
        mod = sys.modules.get(f"structgen.runtime.cpu.{name}")
        if mod is not None and not getattr(mod, "_ENABLED", True):
            return False
    return True


def run_layers(
    table: int,
    layers: int,
    dims: tuple[int, int, int, int, int],
    eps: float,
    qk_eps: float,
    scale: float,
    dt: int,
    residual: int,
    mlp: int,
    t: int,
    cos: int,
    sin: int,
    out_slots: int,
    page_table: int,
    page_table_stride: int,
    seq_ids: int,
    positions: int,
    page_size: int,
    ext=None,
    rows_per_call: int = MAX_STEP_ROWS,
) -> None:
    """Every layer of ``table`` over ``t`` rows given by addresses, as consecutive
    ``decode_layers`` calls of at most :data:`MAX_STEP_ROWS` rows (exact: each writes its K/V
    into the pool before the next attends, and a sequence's rows are in position order).

    Args:
        table: address of the ``[layers, 63]`` int64 table.
        layers: its rows.
        dims: ``(hidden, heads, kv_heads, head_dim, intermediate)``.
        eps: the layer norms' epsilon.
        qk_eps: the q/k norms' epsilon.
        scale: the softmax scale.
        dt: compute dtype code (:data:`DT`) ``|`` KV cache dtype code (:data:`KV_DT`) ``<< 8``.
        residual: ``[t, hidden]`` contiguous, compute dtype: the embeddings on entry, the
            residual stream before the last MLP output on return (updated in place).
        mlp: ``[t, hidden]`` written with the last layer's MLP output.
        t: rows (tokens), >= 1.
        cos: ``[t, head_dim]`` contiguous rotary cosines at the rows' positions, compute dtype.
        sin: the sines, likewise.
        out_slots: ``[t]`` int64 KV slots the rows write.
        page_table: ``[B, max_pages]`` int64, unit stride along pages.
        page_table_stride: its row stride in elements.
        seq_ids: ``[t]`` int64 batch row of each row.
        positions: ``[t]`` int64 position of each row.
        page_size: tokens per KV page.
        ext: the extension module to call (None: ``_decodestep``; ``decode_step`` passes its
            own reference, which tests wrap).
        rows_per_call: rows of one C call, at most :data:`MAX_STEP_ROWS` (``decode_step``
            passes its own ``MAX_STEP_ROWS``, which tests lower).

    The caller guarantees shapes, dtypes and bounds (the C code trusts them). Raises: never.
    """
    hidden, heads, kv_heads, d, inter = dims
    size = 2 if dt & 0xFF == DT["bfloat16"] else 4
    threads, step = kernel_threads(), min(rows_per_call, MAX_STEP_ROWS)
    call = (_ext if ext is None else ext).decode_layers
    for i in range(0, t, step):
        call(
            table,
            layers,
            residual + i * hidden * size,
            mlp + i * hidden * size,
            min(step, t - i),
            hidden,
            heads,
            kv_heads,
            d,
            inter,
            eps,
            qk_eps,
            scale,
            cos + i * d * size,
            sin + i * d * size,
            out_slots + i * 8,
            page_table,
            page_table_stride,
            seq_ids + i * 8,
            positions + i * 8,
            page_size,
            dt,
            threads,
        )


class HostTable:
    """A layer table in numpy with what :func:`run_layers` needs beside it: the
    :class:`~structgen.runtime.cpu.decoder.CpuDecoder` plan of a
    :class:`~structgen.runtime.cpu.model.CpuModel` over one KV pool (torch-free).

    Attributes:
        table: ``[L, 63]`` int64 (``LF_*`` columns), its K/V columns this pool's.
        dims: ``(hidden, heads, kv_heads, head_dim, intermediate)``.
        eps, qk_eps, scale: the layer norms' epsilon, the q/k norms', the softmax scale.
        dt: compute dtype code ``|`` KV cache dtype code ``<< 8`` (float32 compute).
        kv_ptrs: the pool's K then V storage addresses the table points at.
    """

    def __init__(self, table, dims, eps: float, qk_eps: float, scale: float, dt: int, kv_ptrs):
        self.table, self.dims, self.dt, self.kv_ptrs = table, tuple(dims), int(dt), list(kv_ptrs)
        self.eps, self.qk_eps, self.scale = float(eps), float(qk_eps), float(scale)

    def run_rows(
        self,
        residual: int,
        mlp: int,
        t: int,
        cos: int,
        sin: int,
        out_slots: int,
        page_table: int,
        page_table_stride: int,
        seq_ids: int,
        positions: int,
        page_size: int,
    ) -> None:
        """:func:`run_layers` over this table (arguments as there). Raises: never."""
        run_layers(
            self.table.ctypes.data,
            self.table.shape[0],
            self.dims,
            self.eps,
            self.qk_eps,
            self.scale,
            self.dt,
            residual,
            mlp,
            t,
            cos,
            sin,
            out_slots,
            page_table,
            page_table_stride,
            seq_ids,
            positions,
            page_size,
        )
