"""The default CPU engine's whole forward over host arrays: :class:`CpuDecoder`.

A step of the default CPU engine (the packaged GGUF model: int4 / int8 weights in the C
kernels' layouts, every matmul over int8 activations, a tied Q8_0 output projection, float32
compute) is, from the token ids to the logits: the embedding rows dequantized, every decoder
layer in the fused decode step (``csrc/decodestep.c``, one call per 64 rows), the final
add + RMSNorm (``csrc/cpuops.c``) of the rows whose logits are wanted, and the tied head's int8
tile matmul (``csrc/qkernel_i8tiles.h``). :class:`CpuDecoder` holds what those calls read (the
:class:`~structgen.runtime.cpu.decode_step.DecodeStepPlan` table, the embedding's int8 rows
and scales, the final norm, the head's int8 tiles) and runs them over numpy arrays and plain
addresses, with no torch op on the step's path; ``DecoderForCausalLM.forward`` calls it for
every step where it applies (:func:`cpu_decoder`). It is the seam-4 piece of
``docs/torch_free_cpu.md``. It imports no torch: built over a torch model (:meth:`CpuDecoder.build`)
its arrays are numpy views of the model's buffers and the rotary tables the model's
``RotaryEmbedding``'s; built by a :class:`~structgen.runtime.cpu.model.CpuModel` (seam 6) they
are the numpy weights and ``RopeTables``, the plan a ``layer_table.HostTable``.

Exactness: with every matmul over int8 activations each row's arithmetic is the same in every
kernel whatever the other rows of the call (``decode_step``, ``runtime.cpu.quant``), and the
attention computes each query row on its own (``runtime.cpu.attention``); the per-op path runs
the same kernels. So the logits equal the per-op path's bit for bit for any step, a prompt chunk
of over 64 tokens included (consecutive 64-row calls, each writing its K/V before the next
attends), and the KV cache too (``tests/runtime/cpu/test_decoder.py``).
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING

import numpy as np

from structgen.errors import KernelArgumentError
from structgen.runtime.cpu.layer_table import kv_addresses
from structgen.runtime.cpu.threads import kernel_threads

if TYPE_CHECKING:
    from structgen.runtime.cpu.decode_step import DecodeStepPlan, _Watch
    from structgen.runtime.forward_batch import ForwardBatch
    from structgen.runtime.kv_pool import KVPool

try:  # built by setup.py; optional
    from structgen.runtime.cpu import _cpuops, _qkernel
except ImportError:  # pragma: no cover - depends on the build
    _cpuops = _qkernel = None

__all__ = ["CpuDecoder", "cpu_decoder"]

_I64 = np.int64


def _qkernel_threads() -> int:
    """``quant._threads()`` without importing ``quant`` (its ``set_threads`` setting where the
    module is loaded; otherwise it was never set).
    """
    quant = sys.modules.get("structgen.runtime.cpu.quant")
    return kernel_threads(None if quant is None else quant._THREADS)


def _host(a) -> np.ndarray:
    """A CPU tensor's numpy view (no copy), or the array itself."""
    return a if isinstance(a, np.ndarray) else a.numpy()


def _meta(a, name: str) -> np.ndarray:
    """A step metadata array as contiguous int64 (a view where it already is one)."""
    a = _host(a)
    if a.dtype != _I64 or not a.flags.c_contiguous:
        if not np.issubdtype(a.dtype, np.integer):
            raise KernelArgumentError(f"CpuDecoder: {name} must be integers, got {a.dtype}")
        a = np.ascontiguousarray(a, dtype=_I64)
    return a


def _in_range(a: np.ndarray, end: int, name: str) -> None:
    if a.size and (int(a.min()) < 0 or int(a.max()) >= end):
        raise KernelArgumentError(
            f"CpuDecoder: {name} must lie in [0, {end}), got [{int(a.min())}, {int(a.max())}]"
        )


class CpuDecoder:
    """A decoder's forward on CPU over host arrays: embedding, every layer in the fused decode
    step, final norm, tied int8 head (module docstring). Build it with :func:`cpu_decoder`,
    which caches it on the model per KV pool and rebuilds it when what it points at changed.

    Attributes:
        plan: the layers' table over the KV pool (every matmul quantized over int8
            activations; float32 compute): a model's
            :class:`~structgen.runtime.cpu.decode_step.DecodeStepPlan`, or a
            :class:`~structgen.runtime.cpu.layer_table.HostTable` (a
            :class:`~structgen.runtime.cpu.model.CpuModel`'s); what the decoder calls is its
            ``run_rows``, ``dims`` and ``kv_ptrs``.
        vocab_size: rows of the embedding / logits columns ``V``.
        hidden: the hidden size ``H``.
    """

    def __init__(
        self,
        plan,
        embed_q: np.ndarray,
        embed_scales: np.ndarray,
        norm_weight: np.ndarray,
        norm_eps: float,
        head_q: np.ndarray,
        head_scales: np.ndarray,
        rotary,
    ) -> None:
        self.plan = plan
        self.vocab_size, self.hidden = embed_q.shape
        self._embed_q, self._embed_scales = embed_q, embed_scales  # [V, H] int8, [V, G] fp16/32
        self._group = self.hidden // embed_scales.shape[1]
        self._norm, self._eps = norm_weight, float(norm_eps)  # [H] float32
        self._head_q, self._head_scales = head_q, head_scales  # int8 tiles and their table
        self._rotary = rotary

    @staticmethod
    def build(model, plan: DecodeStepPlan, watch: _Watch) -> "CpuDecoder | None":
        """The decoder of ``model`` (a ``DecoderForCausalLM``) over ``plan``'s KV pool, or None
        where the model is not the default engine's kind: float32, every decoder matmul quantized
        over int8 activations, a row-major int8 ``QuantEmbedding`` grouped by a multiple of 32
        doubling as the tied output projection over int8 activations. ``watch`` gets what the
        decoder reads beyond the plan (the embedding's buffers and setting, the final norm, the
        head and rotary modules), so that :meth:`_Watch.valid` turns False when any is replaced.

        Raises: never.
        """
        import torch

        from structgen.runtime.cpu import quant as cpu_quant
        from structgen.runtime.quantization.linear import QuantEmbedding

        if plan.dtype is not torch.float32 or not plan.all_q8:
            return None
        inner = model.model
        emb = watch.keep(inner._modules, "embed_tokens", tensor=False)
        norm = watch.keep(inner._modules, "norm", tensor=False)
        rotary = watch.keep(model._modules, "rotary", tensor=False)
        head = model._modules if "lm_head" in model._modules else model.__dict__
        if watch.keep(head, "lm_head", tensor=False) is not None or type(emb) is not QuantEmbedding:
            return None
        q, sc = watch.keep(emb._buffers, "qweight"), watch.keep(emb._buffers, "scales")
        w = watch.keep(norm._parameters, "weight")
        watch.setting(emb, "activation_dtype")
        watch.setting(emb, "dtype")
        watch.version(q)
        watch.version(sc)
        if not (
            emb.dtype is torch.float32
            and (emb.activation_dtype or emb.dtype) != torch.float32  # the head's int8 activations
            and q.dtype is torch.int8
            and q.dim() == 2
            and sc.dim() == 2
            and sc.dtype in (torch.float16, torch.float32)
            and sc.shape[0] == q.shape[0]
            and q.shape[1] % sc.shape[1] == 0
            and (q.shape[1] // sc.shape[1]) % 32 == 0
            and q.shape[1] == plan.dims[0]
            and all(t.is_cpu and t.is_contiguous() for t in (q, sc, w))
            and w.dtype is torch.float32
            and tuple(w.shape) == (plan.dims[0],)
            and cpu_quant.available()
        ):
            return None
        head_q, head_scales = emb.int8_tiles()  # what QuantEmbedding.as_linear multiplies by
        return CpuDecoder(
            plan,
            q.numpy(),
            sc.numpy(),
            w.detach().numpy(),
            norm.eps,
            head_q.numpy(),
            head_scales.numpy(),
            rotary,
        )

    def _embed(self, ids: np.ndarray) -> np.ndarray:
        """``[T, H]`` float32 rows of ``ids`` ``[T]``: int8 times its group's scale, in float32
        (``formats.dequantize_int8``, what ``QuantEmbedding.forward`` computes).
        """
        t, g = ids.shape[0], self._group
        q = self._embed_q[ids].reshape(t, self.hidden // g, g).astype(np.float32)
        s = self._embed_scales[ids].astype(np.float32)
        return (q * s[..., None]).reshape(t, self.hidden)

    def _rotary_rows(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """cos, sin ``[T, head_dim]`` float32 at ``positions``: rows of the model's rotary
        tables (``RotaryEmbedding``, grown to cover them).
        """
        rotary = self._rotary
        rotary.ensure(int(positions.max()) + 1)
        cos, sin = _host(rotary._cos)[positions], _host(rotary._sin)[positions]
        if cos.dtype != np.float32:  # as RotaryEmbedding.forward's .to(dtype)
            cos, sin = cos.astype(np.float32), sin.astype(np.float32)
        return cos, sin

    def forward(self, batch: ForwardBatch, kv: KVPool) -> np.ndarray:
        """Run one ragged step (any mix of decode rows and extensions, any length).

        Writes the new tokens' K/V into ``kv`` at ``batch.out_slots``, as
        ``DecoderForCausalLM.forward`` does, and returns the same logits bit for bit.

        Args:
            batch: the step; its arrays are CPU tensors or numpy arrays of integers: ``T >= 1``
                tokens (``input_ids``, ``positions``, ``out_slots``, ``seq_ids`` ``[T]``),
                ``page_table`` ``[B, max_pages]``, ``logits_indices`` ``[R]``; ``page_size``
                must equal ``kv.page_size``.
            kv: the KV pool the decoder was built over.

        Returns:
            ``[R, V]`` float32 logits of the rows ``batch.logits_indices``.

        Raises:
            KernelArgumentError: ``kv`` is not the pool of the plan, or the step is malformed:
                no tokens, arrays of different lengths or non-integer dtypes, a token id outside
                the vocabulary, a KV slot or page outside the pool's reserved pages, a sequence
                row outside the page table, a logits row outside the step.
        """
        ids = _meta(batch.input_ids, "input_ids")
        positions = _meta(batch.positions, "positions")
        out_slots = _meta(batch.out_slots, "out_slots")
        seq_ids = _meta(batch.seq_ids, "seq_ids")
        page_table = _meta(batch.page_table, "page_table")
        rows = _meta(batch.logits_indices, "logits_indices")
        t = ids.shape[0]
        if not (
            t >= 1
            and ids.ndim == positions.ndim == out_slots.ndim == seq_ids.ndim == rows.ndim == 1
            and positions.shape[0] == out_slots.shape[0] == seq_ids.shape[0] == t
            and page_table.ndim == 2
            and batch.page_size == kv.page_size
            and kv_addresses(kv) == self.plan.kv_ptrs
        ):
            raise KernelArgumentError(
                f"CpuDecoder: expected T >= 1 tokens with [T] input_ids, positions, out_slots and "
                f"seq_ids, a [B, pages] page table, page_size {kv.page_size} and the pool the "
                f"decoder was built over; got input_ids {ids.shape}, positions "
                f"{positions.shape}, out_slots {out_slots.shape}, seq_ids {seq_ids.shape}, "
                f"page_table {page_table.shape}, page_size {batch.page_size}"
            )
        _in_range(ids, self.vocab_size, "input_ids")
        _in_range(positions, 1 << 62, "positions")  # (>= 0)
        _in_range(out_slots, kv.num_reserved_pages * kv.page_size, "out_slots")
        _in_range(page_table, kv.num_reserved_pages, "page_table")
        _in_range(seq_ids, page_table.shape[0], "seq_ids")
        _in_range(rows, t, "logits_indices")

        residual = self._embed(ids)  # [T, H] float32, a new array: updated in place
        mlp = np.empty_like(residual)
        cos, sin = self._rotary_rows(positions)  # [T, d] each, new arrays
        self.plan.run_rows(
            residual.ctypes.data,
            mlp.ctypes.data,
            t,
            cos.ctypes.data,
            sin.ctypes.data,
            out_slots.ctypes.data,
            page_table.ctypes.data,
            page_table.strides[0] // 8,
            seq_ids.ctypes.data,
            positions.ctypes.data,
            kv.page_size,
        )
        r, h = rows.shape[0], self.hidden
        logits = np.empty((r, self.vocab_size), np.float32)
        if r == 0:
            return logits
        res, delta = residual[rows], mlp[rows]  # copies: the norm adds into its residual
        x = np.empty((r, h), np.float32)
        _cpuops.add_rms_norm(
            res.ctypes.data,
            h,
            delta.ctypes.data,
            h,
            self._norm.ctypes.data,
            x.ctypes.data,
            h,
            r,
            h,
            self._eps,
            0,  # float32
            kernel_threads(),
        )
        _qkernel.int8t_mm(
            x.ctypes.data,
            self._head_q.ctypes.data,
            self._head_scales.ctypes.data,
            logits.ctypes.data,
            r,
            self.vocab_size,
            h,
            self._group,
            _qkernel_threads(),
        )
        return logits


def cpu_decoder(model, kv: KVPool) -> CpuDecoder | None:
    """``model``'s :class:`CpuDecoder` over ``kv``, or None where it does not apply.

    It applies on CPU with the attention backend ``"auto"``, the fused decode step and its
    kernels on (``decode_step.kernel_available``), the quantized kernel built and on, and a model
    of the default engine's kind (:meth:`CpuDecoder.build`). Cached on the model per KV pool
    (weakly keyed), with the plan it was built over; rebuilt when that plan is (a replaced
    parameter, layer, setting or KV tensor) or what the decoder reads beyond it changed.

    Args:
        model: a ``DecoderForCausalLM``.
        kv: the KV pool of the step.

    Raises: never.
    """
    from structgen.runtime.cpu import decode_step as _decode_step
    from structgen.runtime.cpu import quant as cpu_quant
    from structgen.runtime.cpu.decode_step import _Watch
    from structgen.runtime.models import attention as _attention

    if not (
        _attention._BACKEND.get() == "auto"
        and kv.on_host
        and _decode_step.kernel_available()
        and cpu_quant.available()
    ):
        return None
    plan = _decode_step.plan_for(model, kv)
    if plan is None:
        return None
    built = model.__dict__.get("_cpu_decoders")  # KV pool -> (plan, watch, decoder or None)
    if built is None:
        built = model.__dict__.setdefault("_cpu_decoders", weakref.WeakKeyDictionary())
    entry = built.get(kv)
    if entry is None or entry[0] is not plan or not entry[1].valid():
        watch = _Watch()
        entry = built[kv] = (plan, watch, CpuDecoder.build(model, plan, watch))
    return entry[2]
