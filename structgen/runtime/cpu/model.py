"""The default CPU engine's model built from a GGUF file without torch: :class:`CpuModel`.

For a dense Llama-style GGUF file (``llama``, ``qwen2``, ``qwen3``: the packaged SmolLM2 among
them) whose matrices are Q8_0 / Q4_0 / Q4_1 blocks and whose Q8_0 token embedding doubles as
the output layer (tied), the engine's default settings (``quantization="gguf"``, int8
activations, CPU) run every step in :class:`~structgen.runtime.cpu.decoder.CpuDecoder`. This
module builds what that decoder reads straight from the file's memory map, in numpy:

- the config from the metadata (``loader.gguf_config``);
- every matrix repacked by ``loader.gguf_blocks.repack_blocks`` into the C kernels' layouts (q/k
  rows unpermuted for ``llama``; q/k/v and gate/up written end to end, as the GGUF loader's
  fused groups), the int4 scale-tile tables with them;
- the F32 norms and biases (one small writable float32 copy each: a torch model built over
  them may hold them as parameters);
- the layer table of the fused decode step (``ndarray.ctypes.data`` addresses; the format
  words ``DecodeStepPlan`` writes for the same modules), its K/V columns filled per KV pool;
- the embedding's int8 rows and fp16 scales and the tied head's int8 tiles
  (``gguf_blocks.int8_tiles_array``), and the rotary tables (``models.rope``).

Nothing here imports torch. The torch ``DecoderForCausalLM`` over the same arrays (no copy:
``torch.from_numpy``) is built on first need (:meth:`CpuModel.torch_model`: a forward hook, a
step the decoder does not take, any attribute of the torch model read through the
``CpuModel``), so there is one set of weights.

Exactness: the table, embedding, head and rotary tables equal what ``load_model(...,
quantization="gguf")`` and ``DecodeStepPlan`` make for the same file (the same repack
functions, format words and rotary code), so the logits are the torch engine's bit for bit
(``tests/runtime/cpu/test_model.py``).
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass

import numpy as np

from structgen.runtime.cpu import layer_table as lt
from structgen.runtime.cpu.decoder import CpuDecoder
from structgen.runtime.loader.gguf_blocks import (
    BlockGroup,
    int8_scale_tiles_array,
    int8_tiles_array,
    repack_blocks,
)
from structgen.runtime.models.rope import RopeTables, default_inv_freq

__all__ = ["CpuModel", "HOST_ARCHITECTURES"]

# GGUF architecture -> the torch model class name gguf_config gives it (dense only)
HOST_ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}
_BLOCK_TYPES = ("Q8_0", "Q4_0", "Q4_1")
_QKV = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")
_SLOTS = (  # (slot, GGUF members, HF module paths under the layer)
    ("qkv", ("attn_q", "attn_k", "attn_v"), _QKV),
    ("o", ("attn_output",), ("self_attn.o_proj",)),
    ("gate_up", ("ffn_gate", "ffn_up"), ("mlp.gate_proj", "mlp.up_proj")),
    ("down", ("ffn_down",), ("mlp.down_proj",)),
)  # fmt: skip
# csrc/decodestep.c LF_* columns per slot: weight, bias, then format word (+ scales, mins)
_SLOT_COLUMNS = {"qkv": (1, 2, 15), "o": (3, 4, 18), "gate_up": (6, 7, 21), "down": (8, 9, 24)}


@dataclass
class _Matmul:
    """One table slot's weights: the members' blocks end to end, and their biases' float32
    array (``[sum N]``, None without biases).
    """

    type_name: str
    group: BlockGroup
    bias: np.ndarray | None


@dataclass
class _Layer:
    slots: dict[str, _Matmul]
    norms: dict[str, np.ndarray]  # input_layernorm, post_attention_layernorm, q_norm, k_norm


def _unpermute(rows: int, heads: int) -> np.ndarray:
    """The row order that undoes llama.cpp's q/k permutation (``gguf_loader.unpermute_qk``)."""
    return np.arange(rows).reshape(heads, rows // heads // 2, 2).transpose(0, 2, 1).reshape(rows)


def _float_vector(g, name: str, size: int) -> np.ndarray | None:
    """An F32 tensor ``[size]`` as a writable float32 copy; None if absent or otherwise."""
    info = g.tensors.get(name)
    if info is None or info.type_name != "F32" or tuple(info.shape) != (size,):
        return None
    return g.raw(name).view(np.float32).copy()


class CpuModel:
    """A dense Llama-style model's weights in numpy and the fused decode step's table over them,
    run by :class:`~structgen.runtime.cpu.decoder.CpuDecoder` (module docstring). Build it with
    :meth:`from_gguf`.

    It stands where the engine holds a ``DecoderForCausalLM``: :meth:`host_decoder`,
    :meth:`forward` / ``__call__`` and :meth:`make_kv_pool` as the torch model's;
    ``_forward_hooks`` / ``_forward_pre_hooks`` those of the torch model once built (else
    empty); any other attribute is the torch model's (:meth:`torch_model`, built then).

    Attributes:
        config: the :class:`~structgen.runtime.models.config.ModelConfig` from the metadata.
        path: the GGUF file.
        dims: ``(hidden, heads, kv_heads, head_dim, intermediate)``.
        vocab_size: rows of the embedding (logits columns).
        rotary: the :class:`~structgen.runtime.models.rope.RopeTables`.
        table: ``[L, 63]`` int64 layer table with its K/V columns 0 (each pool's copy fills
            them).
    """

    def __init__(self, path: str, config, layers: list[_Layer], embed: BlockGroup, norm):
        c = config
        self.path, self.config = path, config
        d = int(c.head_dim)
        self.dims = (
            int(c.hidden_size),
            int(c.num_attention_heads),
            int(c.num_key_value_heads),
            d,
            int(c.intermediate_size),
        )
        self.eps = float(c.rms_norm_eps)
        self.qk_eps = float(c.rms_norm_eps) if "q_norm" in layers[0].norms else 1e-6
        self.scale = float(d**-0.5)
        self._layers, self._embed, self._norm = layers, embed, norm
        self.vocab_size = int(embed.q.shape[0])
        self._head_q = int8_tiles_array(embed.q)  # the tied output layer's int8 tiles
        self._head_scales = int8_scale_tiles_array(embed.scales)
        self.rotary = RopeTables(
            default_inv_freq(c.rope_theta, d), int(c.max_position_embeddings or 2048)
        )
        self.table = self._build_table()
        self._decoders: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # pool -> dec
        self._torch = None

    # ------------------------------------------------------------------ building
    @staticmethod
    def from_gguf(g, config) -> CpuModel | None:
        """The model of an open GGUF file, or None where it is not of this kind (then the torch
        loader builds it): architecture outside :data:`HOST_ARCHITECTURES` or MoE, a matrix not
        Q8_0 / Q4_0 / Q4_1 (or members of a q/k/v or gate/up group of different types, an int4
        matrix whose rows are not a multiple of 16 or inputs of 32), an untied output layer or
        a non-Q8_0 embedding, norms or biases not F32, biases or q/k norms other than the
        architecture's, any other tensor, shapes the fused step does not take, or the C
        kernels not built. Every matrix's file pages are released once repacked.

        Args:
            g: the :class:`~structgen.runtime.loader.gguf_file.GGUFFile` (may be closed after).
            config: its ``gguf_config``.

        Raises: never (a malformed file gets None here; the torch loader reports it).
        """
        try:
            from structgen.runtime.cpu import _cpuops, _qkernel  # noqa: F401  (built?)
        except ImportError:  # pragma: no cover - depends on the build
            return None
        arch = g.metadata.get("general.architecture")
        if HOST_ARCHITECTURES.get(arch) != (getattr(config, "architectures", None) or [None])[0]:
            return None
        if lt._ext is None:
            return None
        try:
            return CpuModel._from_gguf(g, config, arch)
        except _NotThisKind:
            return None

    @staticmethod
    def _from_gguf(g, config, arch: str) -> CpuModel:
        c, t = config, g.tensors
        hidden, heads, kv_heads = c.hidden_size, c.num_attention_heads, c.num_key_value_heads
        d, inter, n_layers = c.head_dim, c.intermediate_size, c.num_hidden_layers
        _require(
            d % 2 == 0
            and d <= 512  # csrc/cpuops.c MAX_HEAD_DIM
            and heads % kv_heads == 0
            and hidden % 32 == 0
            and inter % 32 == 0
            and getattr(c, "sliding_window", None) is None
            and "output.weight" not in t
        )
        qkv_bias = arch == "qwen2" or bool(getattr(c, "attention_bias", False))
        o_bias = arch != "qwen2" and bool(getattr(c, "attention_bias", False))
        qk_norm = arch == "qwen3"
        outs = {
            "attn_q": heads * d,
            "attn_k": kv_heads * d,
            "attn_v": kv_heads * d,
            "attn_output": hidden,
            "ffn_gate": inter,
            "ffn_up": inter,
            "ffn_down": hidden,
        }
        ins = {name: hidden for name in outs} | {"attn_output": heads * d, "ffn_down": inter}
        expected = {"token_embd.weight", "output_norm.weight"}
        layers = []
        for i in range(n_layers):
            b = f"blk.{i}."
            slots = {}
            for slot, members, _paths in _SLOTS:
                biased = qkv_bias if slot == "qkv" else o_bias if slot == "o" else False
                slots[slot] = _matmul(g, b, members, outs, ins, arch, heads, kv_heads, biased)
                expected.update(b + m + ".weight" for m in members)
                expected.update(b + m + ".bias" for m in members if biased)
            norms = {
                "input_layernorm": _float_vector(g, b + "attn_norm.weight", hidden),
                "post_attention_layernorm": _float_vector(g, b + "ffn_norm.weight", hidden),
            }
            expected.update((b + "attn_norm.weight", b + "ffn_norm.weight"))
            if qk_norm:
                norms["q_norm"] = _float_vector(g, b + "attn_q_norm.weight", d)
                norms["k_norm"] = _float_vector(g, b + "attn_k_norm.weight", d)
                expected.update((b + "attn_q_norm.weight", b + "attn_k_norm.weight"))
            _require(all(v is not None for v in norms.values()))
            layers.append(_Layer(slots, norms))
        _require(set(t) == expected)
        info = t["token_embd.weight"]
        _require(info.type_name == "Q8_0" and tuple(info.shape) == (c.vocab_size, hidden))
        embed = repack_blocks([(g.raw("token_embd.weight"), tuple(info.shape), None)], "Q8_0")
        g.release("token_embd.weight")
        norm = _float_vector(g, "output_norm.weight", hidden)
        _require(norm is not None)
        return CpuModel(g.path, config, layers, embed, norm)

    def _build_table(self) -> np.ndarray:
        """The ``[L, 63]`` table (``DecodeStepPlan``'s for the same modules), K/V columns 0."""
        table = np.zeros((len(self._layers), lt.TABLE_COLUMNS), dtype=np.int64)
        for row, layer in zip(table, self._layers):
            n = layer.norms
            row[0] = n["input_layernorm"].ctypes.data
            row[5] = n["post_attention_layernorm"].ctypes.data
            row[12] = n["q_norm"].ctypes.data if "q_norm" in n else 0
            row[13] = n["k_norm"].ctypes.data if "k_norm" in n else 0
            row[14] = 0  # no sliding window
            for slot, (w, b, f) in _SLOT_COLUMNS.items():
                m = layer.slots[slot]
                row[w], row[b] = m.group.q.ctypes.data, lt.address(m.bias)
                if m.type_name == "Q8_0":  # int8 rows, fp16 scales, int8 activations, group 32
                    row[f] = lt.FMT_INT8 | 1 << 2 | lt.Q8_FLAG | 32 << 4
                    row[f + 1] = m.group.scales.ctypes.data
                else:  # int4 tiles, fp16 scale-tile table, int8 activations, group 32
                    row[f] = lt.FMT_INT4T | 1 << 2 | lt.Q8_FLAG | 32 << 4
                    row[f + 1] = m.group.scale_tiles.ctypes.data
        return table

    # ------------------------------------------------------------------ running
    def host_decoder(self, kv) -> CpuDecoder | None:
        """The :class:`~structgen.runtime.cpu.decoder.CpuDecoder` over ``kv`` (cached per pool,
        rebuilt when the pool's storage moved), or None where the torch model must run the
        step: the kernels turned off (``layer_table.kernels_on``), an attention backend other
        than ``"auto"`` in force, or a pool not shaped for this model on the CPU (float32 /
        bfloat16 / float16 cache).

        Args:
            kv: a KV pool (``KVPool`` or one with its ``k`` / ``v`` / ``k_slots`` /
                ``v_slots`` / ``num_layers`` / ``num_kv_heads`` / ``head_dim`` / ``dtype`` /
                ``page_size`` / ``num_reserved_pages`` over tensors or ``ndarray`` s).

        Raises: never.
        """
        attention = sys.modules.get("structgen.runtime.models.attention")
        if attention is not None and attention._BACKEND.get() != "auto":
            return None
        if not lt.kernels_on():
            return None
        ptrs = lt.kv_addresses(kv)
        decoder = self._decoders.get(kv)
        if decoder is not None and decoder.plan.kv_ptrs == ptrs:
            return decoder
        hidden, heads, kv_heads, d, inter = self.dims
        kv_dt = lt.KV_DT.get(getattr(kv, "dtype_name", None) or lt.dtype_name(kv.dtype))
        if (
            kv_dt is None
            or (getattr(kv, "device_type", None) or str(getattr(kv, "device", "cpu"))) != "cpu"
            or kv.num_layers != len(self._layers)
            or kv.num_kv_heads != kv_heads
            or kv.head_dim != d
        ):
            return None
        table = self.table.copy()
        n = len(self._layers)
        table[:, lt.COL_KV[0]], table[:, lt.COL_KV[1]] = ptrs[:n], ptrs[n : 2 * n]  # K, V
        plan = lt.HostTable(table, self.dims, self.eps, self.qk_eps, self.scale, kv_dt << 8, ptrs)
        decoder = CpuDecoder(
            plan,
            self._embed.q,
            self._embed.scales,
            self._norm,
            self.eps,
            self._head_q,
            self._head_scales,
            self.rotary,
        )
        self._decoders[kv] = decoder
        return decoder

    def forward(self, batch, kv, *, host_checked: bool = False):
        """One ragged step, as ``DecoderForCausalLM.forward``: ``[R, V]`` float32 logits of
        ``batch.logits_indices`` (an ``ndarray`` from the decoder; a tensor where the torch
        model ran it: it was built, with a forward hook, or :meth:`host_decoder` gave None or
        ``host_checked`` says the caller asked it and got None). Writes the new tokens' K/V.

        Raises:
            KernelArgumentError: a malformed step (``CpuDecoder.forward``).
        """
        torch_model = self._torch
        hooked = torch_model is not None and (
            torch_model._forward_hooks or torch_model._forward_pre_hooks
        )
        if not hooked and not host_checked:
            decoder = self.host_decoder(kv)
            if decoder is not None:
                return decoder.forward(batch, kv)
        return self.torch_model()(batch, kv, host_checked=host_checked)

    __call__ = forward

    @property
    def _forward_hooks(self) -> dict:
        return {} if self._torch is None else self._torch._forward_hooks

    @property
    def _forward_pre_hooks(self) -> dict:
        return {} if self._torch is None else self._torch._forward_pre_hooks

    def make_kv_pool(self, num_pages: int, page_size: int, growth_pages=None, kv_dtype=None):
        """A ``KVPool`` shaped for this model on the CPU (``DecoderForCausalLM.make_kv_pool``'s
        arguments; ``kv_dtype`` None: float32).
        """
        from structgen.runtime.kv_pool import KVPool

        if kv_dtype is None:
            import torch

            kv_dtype = torch.float32
        _, _, kv_heads, d, _ = self.dims
        return KVPool(
            len(self._layers), num_pages, page_size, kv_heads, d, kv_dtype, "cpu", growth_pages
        )

    # ------------------------------------------------------------------ the torch model
    def torch_model(self):
        """The torch ``DecoderForCausalLM`` over this model's arrays (``torch.from_numpy``, no
        copy; int8 activations), built on the first call and kept. Raises: never.
        """
        if self._torch is None:
            import torch

            from structgen.runtime.loader.gguf_loader import torch_model_from_host

            with torch.inference_mode(False):  # asked for inside a step's inference_mode too
                self._torch = torch_model_from_host(self)
        return self._torch

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_torch", "_layers", "_decoders"):
            raise AttributeError(name)
        return getattr(self.torch_model(), name)

    def host_arrays(self):
        """What :meth:`torch_model` wraps: ``(layers, embedding group, (head q, head scales),
        final norm)``; per layer ``{slot: (type name, BlockGroup, bias or None)}`` over
        :data:`_SLOTS`' HF paths and its norms by HF name.
        """
        layers = [
            (
                {s: (m.type_name, m.group, m.bias) for s, m in layer.slots.items()},
                dict(layer.norms),
            )
            for layer in self._layers
        ]
        return layers, self._embed, (self._head_q, self._head_scales), self._norm


SLOT_PATHS = {slot: paths for slot, _members, paths in _SLOTS}


class _NotThisKind(Exception):
    """The file is not a model :class:`CpuModel` builds (internal: ``from_gguf`` says None)."""


def _require(ok: bool) -> None:
    if not ok:
        raise _NotThisKind


def _matmul(g, b, members, outs, ins, arch, heads, kv_heads, biased) -> _Matmul:
    """One slot's members repacked end to end (``gguf_native.native_group``'s arrays)."""
    names = [b + m + ".weight" for m in members]
    infos = [g.tensors.get(n) for n in names]
    _require(all(i is not None for i in infos))
    type_name = infos[0].type_name
    _require(type_name in _BLOCK_TYPES and all(i.type_name == type_name for i in infos))
    parts, biases = [], []
    for m, name, info in zip(members, names, infos):
        n, k = outs[m], ins[m]
        _require(tuple(info.shape) == (n, k) and k % 32 == 0)
        if type_name != "Q8_0":  # formats.can_pack_int4's condition (else torch dequantizes)
            _require(n % 16 == 0)
        rows = None
        if arch == "llama" and m in ("attn_q", "attn_k"):
            rows = _unpermute(n, heads if m == "attn_q" else kv_heads)
        parts.append((g.raw(name), (n, k), rows))
        if biased:
            bias = _float_vector(g, b + m + ".bias", n)
            _require(bias is not None)
            biases.append(bias if rows is None else bias[rows])
    group = repack_blocks(parts, type_name)
    for name in names:
        g.release(name)
    return _Matmul(type_name, group, np.concatenate(biases) if biased else None)
