"""The fused CPU decode step: every decoder layer of a small step in one C call
(``csrc/decodestep.c``).

With the matmuls and the ops around them in C, a bf16 batch-1 decode step of SmolLM2
(30 layers) still spent about a third of its time in the Python between the ~9 calls per
layer (checks, a ``torch.empty`` per output, argument conversion). :class:`DecodeStepPlan`
collects once what every layer's kernels need (weight, norm and KV-cache pointers, the
sliding window) into an int64 table; a step is then one call that runs the same kernels
in the same order as the per-op path (``DecoderLayer.forward_residual``), so the results
are equal bit for bit. Its ``threads.kernel_threads()`` threads are held for the whole step in
one OpenMP parallel region (a barrier between dependent ops, not a fork/join per op); every
output element is computed by one thread with the per-op arithmetic, so the result does not
depend on the thread count.

It applies to Llama-style decoders (:class:`~structgen.runtime.models.decoder.DecoderLayer`
with :class:`~structgen.runtime.models.decoder.DecoderAttention` and a SiLU
:class:`~structgen.runtime.models.layers.GatedMLP`, q/k/v and gate/up fused: Llama, Mistral,
Qwen2, Qwen3, SmolLM2) in fp32 or bf16 on CPU, for steps of at most 8 tokens or in which every
sequence extends by at most :data:`MAX_FUSED_EXTEND` (8) tokens, or
:data:`MAX_FUSED_EXTEND_QUANTIZED` (64) where every matmul is quantized over int8 activations
(decode rows, jump-forward runs, speculative verification, short prompt chunks, in any mix: up
to :data:`MAX_STEP_ROWS` rows in one call, so each weight is read from memory once per step for
all of them; more as consecutive calls), with the attention backend ``"auto"``.
Each matmul may be float (``Linear`` / ``FusedProjection`` in the model dtype) or quantized in
the C kernel's layouts (``QuantLinear`` / ``FusedQuantProjection`` with ``use_kernel``: int4
"tiles" (or "rows") from ``int4-gNN`` and GGUF Q4_0/Q4_1 (fp16 scales and mins) and Q4_K
(fp32), row-major int8 from ``int8``, GGUF Q8_0 and Q6_K); q/k/v or gate/up left unfused
because their quantized kinds differ (a Q6_K v next to Q4_K q/k in llama.cpp's Q4_K_M files)
run as parts of their slot, each member's own matmul into its band of the slot's columns; a
quantized matmul runs the kernel ``QuantLinear`` calls (``csrc/qkernel_core.h``) with the
module's ``activation_dtype`` (int8 activations per row and block of 32, or exact float32).
Anything else (sharded layers, torch-layout quantized ones, MoE, MLA, fp16, longer steps, a
forced backend) takes the per-op path.

For the default engine's kind of model (float32, every matmul over int8 activations, a tied
int8 embedding) ``DecoderForCausalLM.forward`` runs every step, of any length, through
:class:`~structgen.runtime.cpu.decoder.CpuDecoder` over the same plan
(:meth:`DecodeStepPlan.run_rows`); other models call :func:`decode_step` within the limits above.

The plan is cached on the model per KV pool (:func:`plan_for`) and checked every step (module and
parameter/buffer identity and data pointers, quantized modules' ``activation_dtype``): replacing
a parameter
(``load_state_dict(assign=True)``, ``.to()``), a layer (quantization) or the KV tensors
rebuilds it, so a stale pointer is never followed. :func:`set_enabled` turns it off (an
``Engine`` applies ``structgen.env``'s ``decode_step`` setting), as does turning off the kernels it
runs (``runtime.cpu.dense.set_enabled``, ``runtime.cpu.ops.set_enabled``).
"""

from __future__ import annotations

import operator
import weakref

import torch
import torch.nn.functional as F

from structgen.errors import KernelArgumentError
from structgen.runtime.cpu import dense, layer_table
from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.cpu.layer_table import FMT_INT4, FMT_INT4T, FMT_INT8, Q8_FLAG, run_layers
from structgen.runtime.cpu.layer_table import kv_addresses as _kv_ptrs
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.models.attention import cpu_attention

__all__ = [
    "MAX_STEP_ROWS",
    "DecodeStepPlan",
    "decode_step",
    "kernel_available",
    "plan_for",
    "set_enabled",
]

try:  # built by setup.py; optional
    from structgen.runtime.cpu import _decodestep as _ext
except ImportError:  # pragma: no cover - depends on the build
    _ext = None

_ENABLED = True  # set_enabled (tests patch it)
# Most tokens one sequence brings to a fused step of over dense.MAX_ROWS tokens: decode rows mixed
# with short jump-forward runs and scoring requests (extraction's batched steps) run fused; a
# longer extension (a prompt chunk) makes the step per-op, where its matmuls take all its rows at
# once. Float weights or float32 activations: 8 (over 8 rows the per-op path's matmuls round
# otherwise); every matmul quantized over int8 activations (the default engine; the same C kernels
# either way, each row on its own, bit for bit): 64, one call's rows.
MAX_STEP_ROWS = layer_table.MAX_STEP_ROWS  # rows of one C call (tests lower it)
MAX_FUSED_EXTEND = dense.MAX_ROWS
MAX_FUSED_EXTEND_QUANTIZED = MAX_STEP_ROWS
_DT = {torch.float32: 0, torch.bfloat16: 1}


def set_enabled(enabled: bool) -> None:
    """Turn the fused step on (the default) or off for the process (off: the per-op path)."""
    global _ENABLED
    _ENABLED = bool(enabled)


def kernel_available() -> bool:
    """True when the extension is built and neither it nor the kernels it runs are turned off
    (:func:`set_enabled` here, in ``runtime.cpu.dense`` and in ``runtime.cpu.ops``).
    """
    return _ext is not None and _ENABLED and dense.kernel_available() and cpu_ops.kernel_available()


def _ptr(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.data_ptr()


_VERSION = operator.attrgetter("_version")


class _Watch:
    """What a plan points at, and a cheap check that it still does (module/parameter identity, data
    pointers).

    Kept as flat parallel lists, checked by C-level ``map`` loops (no Python frame per entry).
    """

    def __init__(self) -> None:
        self.containers: list = []  # container[key] must still be objs[i]
        self.keys: list = []
        self.objs: list = []
        self.tensors: list[torch.Tensor] = []  # ... and these must still have these data pointers
        self.ptrs: list[int] = []
        self.setting_objs: list = []  # ... and these attributes these values
        self.setting_get: list = []
        self.setting_vals: list = []
        self.versioned: list[torch.Tensor] = []  # ... and these tensors these versions
        self.versions: list[int] = []

    def keep(self, container, key, tensor: bool = True):
        obj = container[key]
        self.containers.append(container)
        self.keys.append(key)
        self.objs.append(obj)
        if tensor:
            self.tensors.append(obj)
            self.ptrs.append(obj.data_ptr())
        return obj

    def setting(self, obj, attr: str) -> None:
        """``obj.attr`` must keep its current value (a quantized module's ``activation_dtype``)."""
        self.setting_objs.append(obj)
        self.setting_get.append(operator.attrgetter(attr))
        self.setting_vals.append(getattr(obj, attr))

    def version(self, tensor: torch.Tensor) -> None:
        """``tensor`` must not change in place (``_version``): what the plan holds is derived from
        its values (an int4 weight's tile table from its scales and mins), not read through its
        pointer.
        """
        self.versioned.append(tensor)
        self.versions.append(tensor._version)

    def fused(self, proj) -> None:
        """What ``FusedProjection.valid`` checks: each member's weight is still its view of the
        fused weight.
        """
        for registry, _view, _ptr in proj._params:
            self.keep(registry, "weight")

    def valid(self) -> bool:
        return (
            all(map(operator.is_, map(operator.getitem, self.containers, self.keys), self.objs))
            and list(map(torch.Tensor.data_ptr, self.tensors)) == self.ptrs
            and list(map(operator.call, self.setting_get, self.setting_objs)) == self.setting_vals
            and list(map(_VERSION, self.versioned)) == self.versions
        )


_FMT_INT4, _FMT_INT8, _FMT_INT4T = FMT_INT4, FMT_INT8, FMT_INT4T  # csrc/decodestep.c FMT_*
_Q8_FLAG = Q8_FLAG  # a format word's int8 activations flag (0 for float weights)


def _float_matmul(mod, fused: bool, dtype, watch: _Watch):
    """``(fields, (out, in), tensors)`` of a float ``Linear`` or ``FusedProjection``; None if it is
    neither (or a stale fusion). Fields: weight, bias, format, scales, mins pointers.
    """
    from structgen.runtime.models.layers import FusedProjection, Linear

    if fused:
        if type(mod) is not FusedProjection or not mod.valid():
            return None
        watch.fused(mod)
        weight, bias = mod.weight, mod.bias
        tensors = [weight] + ([bias] if bias is not None else [])
    else:
        if type(mod) is not Linear:
            return None
        tensors = [
            watch.keep(mod._parameters, n) for n, t in mod._parameters.items() if t is not None
        ]
        weight, bias = mod.weight, mod.bias
    if any(t.dtype != dtype or not t.is_contiguous() or t.device.type != "cpu" for t in tensors):
        return None
    return [_ptr(weight), _ptr(bias), 0, 0, 0], tuple(weight.shape), tensors


def _quant_matmul(mod, fused: bool, dtype, watch: _Watch):
    """The same for a quantized ``QuantLinear`` / ``FusedQuantProjection`` in the C kernel's
    layouts (int4 "tiles" or "rows", row-major int8), read as ``QuantLinear._kernel_forward``
    reads them.
    """
    from structgen.runtime.cpu import quant
    from structgen.runtime.quantization.linear import FusedQuantProjection, QuantLinear

    if fused:
        if type(mod) is not FusedQuantProjection or not mod.valid():
            return None
        for registry, name, _view in mod._views:
            watch.keep(registry, name)
        lin, act = mod.module, mod._members[0]  # the fused module runs with member 0's setting
    else:
        lin = act = mod
    if type(lin) is not QuantLinear or not lin.use_kernel or quant._lib is None:
        return None
    names = ("qweight", "scales", "mins") if lin.kind == "int4" else ("qweight", "scales")
    q, sc, *mn = (watch.keep(lin._buffers, n) for n in names)
    bias = watch.keep(lin._parameters, "bias") if lin.bias is not None else None
    watch.setting(act, "activation_dtype")
    n, k, g = lin.out_features, lin.in_features, lin.group_size
    q8 = (act.activation_dtype or dtype) != torch.float32
    if lin.kind == "int4":
        tiled = lin.int4_layout == "tiles"  # else "rows" (after a Triton call)
        ok = (
            lin.int4_layout in ("rows", "tiles")
            and q.dtype is torch.uint8
            and tuple(q.shape) == ((8 * ((n + 7) // 8) if tiled else n), k // 2)
            and g % 32 == 0
            and k % g == 0
            and sc.dtype in (torch.float16, torch.float32)
            and all(t.dtype is sc.dtype and tuple(t.shape) == (n, k // g) for t in (sc, *mn))
        )
        f16 = sc.dtype is torch.float16
        fmt = (_FMT_INT4T if tiled else _FMT_INT4) | int(f16) << 2 | int(q8) << 3 | g << 4
        if ok:  # the kernel reads the tile table (csrc/qkernel.c), not scales / mins: a copy,
            tiles = lin.scale_tiles()  # so an in-place change of either must rebuild the plan
            watch.keep(lin.__dict__, "_scale_tiles", tensor=False)
            watch.version(sc)
            watch.version(mn[0])
    else:
        groups = sc.shape[1] if sc.dim() == 2 else 0
        ok = (
            q.dtype is torch.int8
            and tuple(q.shape) == (n, k)
            and groups > 0
            and k % groups == 0
            and (k // groups) % 8 == 0
            and sc.dtype in (torch.float16, torch.float32)
            and tuple(sc.shape) == (n, groups)
        )
        g = k // groups if ok else 0
        f16 = sc.dtype is torch.float16
        fmt = _FMT_INT8 | int(f16) << 2 | int(q8 and g % 32 == 0) << 3 | g << 4
    tensors = [q, sc, *mn]
    if not ok or any(not t.is_contiguous() or t.device.type != "cpu" for t in tensors):
        return None
    if bias is not None and (
        bias.dtype != dtype or not bias.is_contiguous() or bias.device.type != "cpu"
    ):
        return None
    if lin.kind == "int4":  # fields: the tile table in place of scales, mins unused
        return [_ptr(q), _ptr(bias), fmt, _ptr(tiles), 0], (n, k), [*tensors, tiles]
    return [_ptr(q), _ptr(bias), fmt, _ptr(sc), 0], (n, k), tensors


def _matmul(mod, fused: bool, dtype, watch: _Watch):
    """A matmul's table fields, ``(out, in)`` and tensors, float or quantized; None otherwise."""
    return _float_matmul(mod, fused, dtype, watch) or _quant_matmul(mod, fused, dtype, watch)


_PARTS = 3  # csrc/decodestep.c MAX_PARTS: members of a split q/k/v or gate/up slot
_PART_FIELDS = 6  # LP_COUNT: weight, bias, format, scales, mins, rows


def _slot(parent, fused_name: str, members: tuple[str, ...], dtype, watch: _Watch):
    """A fused slot (q/k/v, gate/up): ``(fields, (out, in), tensors, parts, sizes)``, or None.

    One fused float or quantized matmul where ``parent.<fused_name>`` is set (``parts`` all 0);
    where it is None (members of different quantized kinds, e.g. Q4_K q/k with a Q6_K v: the
    per-op path then calls each member), each member's own quantized matmul as a part of the
    slot (the slot's fields 0, ``parts`` its ``_PARTS * _PART_FIELDS`` fields). ``sizes``: the
    members' output features.
    """
    fused = watch.keep(parent.__dict__, fused_name, tensor=False)
    if fused is not None:
        got = _matmul(fused, True, dtype, watch)
        if got is None:
            return None
        return (*got, [0] * (_PARTS * _PART_FIELDS), tuple(fused.sizes))
    if len(members) > _PARTS:
        return None
    parts, tensors, sizes, ins = [], [], [], set()
    for name in members:
        got = _quant_matmul(watch.keep(parent._modules, name, tensor=False), False, dtype, watch)
        if got is None:
            return None
        fields, (n, k), ts = got
        parts += fields + [n]
        tensors += ts
        sizes.append(n)
        ins.add(k)
    if len(ins) != 1:
        return None
    parts += [0] * (_PARTS * _PART_FIELDS - len(parts))
    return [0, 0, 0, 0, 0], (sum(sizes), ins.pop()), tensors, parts, tuple(sizes)


def _layer_row(
    layer, watch: _Watch, dtype
) -> tuple[list[int], tuple, list[torch.Tensor], bool] | None:
    """One layer's table row, the shape facts all layers must share, the tensors it points at, and
    whether every matmul runs over int8 activations; None when the layer is not a plain
    Llama-style block over fused float or quantized weights (or quantized q/k/v, gate/up left
    unfused: parts of their slot, see :func:`_slot`).
    """
    from structgen.runtime.models.decoder import DecoderAttention, DecoderLayer
    from structgen.runtime.models.layers import GatedMLP

    if type(layer) is not DecoderLayer:
        return None
    attn, mlp = layer._modules.get("self_attn"), layer._modules.get("mlp")
    if type(attn) is not DecoderAttention or type(mlp) is not GatedMLP or mlp.act is not F.silu:
        return None
    for parent, name in (
        (layer, "self_attn"),
        (layer, "mlp"),
        (layer, "input_layernorm"),
        (layer, "post_attention_layernorm"),
        (attn, "o_proj"),
        (mlp, "down_proj"),
    ):
        watch.keep(parent._modules, name, tensor=False)
    slots = [
        _slot(attn, "qkv", ("q_proj", "k_proj", "v_proj"), dtype, watch),
        _slot(mlp, "gate_up", ("gate_proj", "up_proj"), dtype, watch),
    ]
    mats = [_matmul(attn.o_proj, False, dtype, watch), _matmul(mlp.down_proj, False, dtype, watch)]
    if any(m is None for m in slots + mats):
        return None
    (qkv, qkv_shape, t0, qkv_parts, qkv_sizes), (gu, gu_shape, t2, gu_parts, gu_sizes) = slots
    (o, o_shape, t1), (down, down_shape, t3) = mats
    n1, n2 = layer.input_layernorm, layer.post_attention_layernorm
    qn, kn = (attn.q_norm, attn.k_norm) if attn.q_norm is not None else (None, None)
    if qn is not None:
        watch.keep(attn._modules, "q_norm", tensor=False)
        watch.keep(attn._modules, "k_norm", tensor=False)
    norms = []
    for mod in (n1, n2) + ((qn, kn) if qn is not None else ()):
        norms += [
            watch.keep(mod._parameters, name)
            for name, p in mod._parameters.items()
            if p is not None
        ]
    if any(t.dtype != dtype or not t.is_contiguous() or t.device.type != "cpu" for t in norms):
        return None
    row = [
        _ptr(n1.weight),
        qkv[0],
        qkv[1],
        o[0],
        o[1],
        _ptr(n2.weight),
        gu[0],
        gu[1],
        down[0],
        down[1],
        0,
        0,
        _ptr(None if qn is None else qn.weight),
        _ptr(None if kn is None else kn.weight),
        int(attn.sliding_window or 0),
    ]
    for m in (qkv, o, gu, down):
        row += m[2:]  # format, scales, mins
    row += qkv_parts + gu_parts  # LF_QKV_PARTS, LF_GU_PARTS: all 0 where the slot is fused
    shape = (
        attn.num_heads,
        attn.num_kv_heads,
        attn.head_dim,
        attn.scale,
        qkv_sizes,
        o_shape,
        gu_sizes,
        down_shape,
        n1.eps,
        n2.eps,
        None if qn is None else qn.eps,
        qkv_shape[1],
        gu_shape[1],
    )
    # a slot run as parts has weight 0 in its own fields; an unused part has weight 0 too
    parts = [
        p[i : i + _PART_FIELDS]
        for p in (qkv_parts, gu_parts)
        for i in range(0, len(p), _PART_FIELDS)
    ]
    q8 = all(m[2] & _Q8_FLAG for m in (qkv, o, gu, down, *parts) if m[0])
    return row, shape, t0 + t1 + t2 + t3 + norms, q8


class DecodeStepPlan:
    """The per-layer pointers of one model over one KV pool, and how to check they still hold.

    Attributes:
        table: ``[L, 63]`` int64, per layer (``csrc/decodestep.c`` ``LF_*``): input norm, qkv
            weight and bias, o weight and bias, post-attention norm, gate/up weight and bias,
            down weight and bias, K and V cache, q/k norm weights (0 where absent), window,
            then per matmul (qkv, o, gate/up, down) its format word (0 float; int4 / int8 with
            scale dtype, int8-activation flag and group), scales and mins pointers (int4: its
            ``QuantLinear.scale_tiles`` table, then 0), then for
            qkv and gate/up 3 parts of 6 fields (weight, bias, format word, scales, mins, rows;
            all 0 where the slot is one fused matmul, else its unfused members' quantized
            matmuls, the slot's own fields then 0).
        dims: ``(hidden, heads, kv_heads, head_dim, intermediate)``.
        eps, qk_eps, scale: the layer norms' epsilon, the q/k norms' epsilon, softmax scale.
        dtype: the model's (and KV pool's) dtype.
    """

    def __init__(
        self, table, dims, eps, qk_eps, scale, dtype, watch: _Watch, kv_ptrs: list[int]
    ) -> None:
        self.table, self.dims = table, dims
        self.eps, self.qk_eps, self.scale, self.dtype = eps, qk_eps, scale, dtype
        self._watch, self._kv_ptrs = watch, kv_ptrs
        self.kv_dtype = dtype  # the KV cache's dtype (build sets the pool's)
        self.all_q8 = False  # every matmul quantized over int8 activations (build sets it)

    @staticmethod
    def build(model, kv: KVPool) -> "DecodeStepPlan | None":
        """The plan for ``model`` (a ``DecoderForCausalLM``) over ``kv``, or None where it does not
        apply.
        """
        dtype, layers = model.dtype, model.model.layers
        if (
            dtype not in _DT
            or kv.dtype not in cpu_ops.KV_DT  # the cache's own dtype (kv_cache_dtype), widened
            or not kv.on_host
            or kv.num_layers != len(layers)
        ):
            return None
        watch, rows, shapes, all_q8 = _Watch(), [], set(), True
        kv_ptrs = kv.data_ptrs()
        for i in range(len(layers)):
            watch.keep(layers._modules, str(i), tensor=False)
            got = _layer_row(layers[i], watch, dtype)
            if got is None:
                return None
            row, shape, _tensors, q8 = got
            all_q8 = all_q8 and q8
            row[10], row[11] = kv_ptrs[i], kv_ptrs[kv.num_layers + i]
            rows.append(row)
            shapes.add(shape)
        if len(shapes) != 1:
            return None  # layers of different shapes: one table cannot describe them
        (
            heads,
            kv_heads,
            d,
            scale,
            qkv_sizes,
            o_shape,
            gu_sizes,
            down_shape,
            eps1,
            eps2,
            qk_eps,
            qkv_in,
            gu_in,
        ) = shapes.pop()
        hidden, inter = o_shape[0], gu_sizes[0]
        if (
            eps1 != eps2
            or d % 2
            or d > cpu_ops.MAX_HEAD_DIM
            or heads % kv_heads
            or qkv_sizes != (heads * d, kv_heads * d, kv_heads * d)
            or o_shape != (hidden, heads * d)
            or gu_sizes != (inter, inter)
            or down_shape != (hidden, inter)
            or qkv_in != hidden
            or gu_in != hidden
            or kv.num_kv_heads != kv_heads
            or kv.head_dim != d
        ):
            return None
        table = torch.tensor(rows, dtype=torch.int64)
        qk_eps = float(1e-6 if qk_eps is None else qk_eps)
        plan = DecodeStepPlan(
            table,
            (hidden, heads, kv_heads, d, inter),
            float(eps1),
            qk_eps,
            float(scale),
            dtype,
            watch,
            _kv_ptrs(kv),
        )
        plan.kv_dtype = kv.dtype
        plan.all_q8 = all_q8
        return plan

    @property
    def kv_ptrs(self) -> list[int]:
        """Every layer's K then V storage address the table points at (``kv_addresses``)."""
        return self._kv_ptrs

    def valid(self, kv: KVPool) -> bool:
        """True while every module, parameter and KV tensor planned for is still in place."""
        return self._watch.valid() and _kv_ptrs(kv) == self._kv_ptrs

    def __call__(
        self, residual: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, batch: ForwardBatch
    ) -> torch.Tensor:
        """Run every layer over ``residual`` ``[T, hidden]`` (updated in place, as the per-op path
        does).

        Args:
            residual: ``[T, hidden]`` contiguous, the embeddings on entry.
            cos: ``[T, 1, head_dim]`` (or ``[T, head_dim]``) contiguous rotary cosine table,
                model dtype.
            sin: the sine table, likewise.
            batch: the step (int64 contiguous metadata); ``T`` over :data:`MAX_STEP_ROWS` runs
                as consecutive calls of ``MAX_STEP_ROWS`` rows, exact since each writes its K/V
                first.

        Returns:
            ``[T, hidden]`` the last layer's MLP output (the per-op path's last ``delta``).

        Raises:
            KernelArgumentError: the step does not fit the plan (:func:`decode_step` checks it
                and takes the per-op path instead).
        """
        if not _step_ok(self, residual, cos, sin, batch):
            raise KernelArgumentError(
                f"DecodeStepPlan: expected residual [T, {self.dims[0]}] "
                f"{self.dtype} contiguous, "
                f"cos/sin [T, 1, {self.dims[3]}] contiguous and int64 contiguous step metadata; "
                f"got residual "
                f"{residual.dtype} {tuple(residual.shape)}, cos {cos.dtype} {tuple(cos.shape)}"
            )
        return self._launch(residual, cos, sin, batch)

    def _launch(
        self, residual: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, batch: ForwardBatch
    ) -> torch.Tensor:
        t = residual.shape[0]
        mlp = torch.empty(t, self.dims[0], dtype=self.dtype)
        self.run_rows(
            residual.data_ptr(),
            mlp.data_ptr(),
            t,
            cos.data_ptr(),
            sin.data_ptr(),
            batch.out_slots.data_ptr(),
            batch.page_table.data_ptr(),
            batch.page_table.stride(0),
            batch.seq_ids.data_ptr(),
            batch.positions.data_ptr(),
            batch.page_size,
        )
        return mlp

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
        """Every layer over ``t`` rows given by addresses (a torch tensor's ``data_ptr()``, an
        ``ndarray``'s ``ctypes.data``): the C calls of :meth:`__call__`, unchecked.

        Args:
            residual: ``[t, hidden]`` contiguous, model dtype: the embeddings on entry, the
                residual stream before the last MLP output on return (updated in place).
            mlp: ``[t, hidden]`` contiguous, model dtype: written with the last layer's MLP
                output.
            t: rows (tokens), >= 1; over :data:`MAX_STEP_ROWS` as consecutive calls of
                ``MAX_STEP_ROWS`` rows (exact: each writes its K/V into the pool before the
                next attends, and a sequence's rows are in position order, so every row
                attends to exactly what it would in one call).
            cos: ``[t, head_dim]`` contiguous rotary cosines at the rows' positions, model dtype.
            sin: the sines, likewise.
            out_slots: ``[t]`` int64 contiguous KV slots the rows write.
            page_table: ``[B, max_pages]`` int64, unit stride along pages.
            page_table_stride: its row stride in elements.
            seq_ids: ``[t]`` int64 contiguous batch row of each row.
            positions: ``[t]`` int64 contiguous position of each row.
            page_size: tokens per KV page.

        The caller guarantees shapes, dtypes and bounds (the C code trusts them). Raises: never.
        """
        run_layers(
            self.table.data_ptr(),
            self.table.shape[0],
            self.dims,
            self.eps,
            self.qk_eps,
            self.scale,
            _DT[self.dtype] | cpu_ops.KV_DT[self.kv_dtype] << 8,  # compute | KV cache dtype
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
            _ext,
            MAX_STEP_ROWS,
        )


def _step_ok(
    plan: DecodeStepPlan,
    residual: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    batch: ForwardBatch,
) -> bool:
    t, d = residual.shape[0], plan.dims[3]
    ok = cpu_ops._dense  # dtype and contiguous
    return (
        t >= 1
        and ok(residual, plan.dtype)
        and residual.shape[1] == plan.dims[0]
        and ok(cos, plan.dtype)
        and ok(sin, plan.dtype)
        and cos.numel() == t * d
        and sin.numel() == t * d
        and all(
            ok(m, torch.int64) and m.numel() == t
            for m in (batch.out_slots, batch.seq_ids, batch.positions)
        )
        and batch.page_table.dtype is torch.int64
        and batch.page_table.dim() == 2
        and batch.page_table.stride(1) == 1
    )


def _short_extensions(plan: DecodeStepPlan, t: int, batch: ForwardBatch) -> bool:
    """Whether no sequence of the step brings over :data:`MAX_FUSED_EXTEND` (every matmul of the
    plan quantized over int8 activations: :data:`MAX_FUSED_EXTEND_QUANTIZED`) of its ``t`` tokens.
    """
    n = batch.extend_lens.numel()
    most = MAX_FUSED_EXTEND_QUANTIZED if plan.all_q8 else MAX_FUSED_EXTEND
    return t == n or (t <= n * most and int(batch.extend_lens.max()) <= most)


def decode_step(
    model,
    residual: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    batch: ForwardBatch,
    kv: KVPool,
) -> torch.Tensor | None:
    """All of ``model``'s layers for this step in one C call, or None where the fused step does not
    apply.

    Args:
        model: a ``DecoderForCausalLM``; its plans are cached on it, one per KV pool (weakly
            keyed: two pipelines over one model keep theirs), rebuilt when stale.
        residual: ``[T, hidden]`` contiguous embeddings; updated in place into the residual stream
            before the last MLP output is added (as in ``DecoderLayer.forward_residual``).
        cos: the step's rotary cosine table ``[T, 1, head_dim]``, model dtype.
        sin: the step's rotary sine table, likewise.
        batch: the step's metadata; must satisfy ``batch.page_size == kv.page_size``.
        kv: the KV pool; the new tokens' K/V are written into it.

    Returns:
        ``[T, hidden]`` the last layer's MLP output, or None (nothing computed, nothing written)
        when the kernel is unavailable or turned off, the attention backend is not ``"auto"``,
        the model or the step is outside what the fused step covers (over ``dense.MAX_ROWS``
        tokens only when no sequence extends by more than :data:`MAX_FUSED_EXTEND` tokens, or
        :data:`MAX_FUSED_EXTEND_QUANTIZED` where every matmul is quantized over int8 activations:
        one call for up to
        :data:`MAX_STEP_ROWS` rows, consecutive calls above).
    """
    t = residual.shape[0]
    if not (kernel_available() and cpu_attention(residual)):
        return None
    plan = plan_for(model, kv)
    if plan is None or not (t <= dense.MAX_ROWS or _short_extensions(plan, t, batch)):
        return None
    if not _step_ok(plan, residual, cos, sin, batch):
        return None
    return plan._launch(residual, cos, sin, batch)  # checked just above


def plan_for(model, kv: KVPool) -> DecodeStepPlan | None:
    """``model``'s plan over ``kv``: the one cached on the model (one per KV pool, weakly keyed:
    two pipelines over one model keep theirs) while :meth:`DecodeStepPlan.valid`, else a new
    one (cached); None where the model is outside what the fused step covers.

    Args:
        model: a ``DecoderForCausalLM``.
        kv: the KV pool the plan's table points into.

    Raises: never.
    """
    plans = model.__dict__.get("_decode_step_plans")  # KV pool -> its plan
    if plans is None:
        plans = model.__dict__.setdefault("_decode_step_plans", weakref.WeakKeyDictionary())
    plan = plans.get(kv)
    if plan is None or not plan.valid(kv):
        plan = DecodeStepPlan.build(model, kv)
        if plan is None:  # not cached: its checks fail at layer 0
            plans.pop(kv, None)
        else:
            plans[kv] = plan
    return plan
