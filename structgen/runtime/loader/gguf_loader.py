"""Load a GGUF model: config from metadata, dequantized weights in HF layout, tokenizer.

Weight names map to transformers' (``blk.3.attn_q.weight`` ->
``model.layers.3.self_attn.q_proj.weight``). llama.cpp's converter permutes the
rows of ``q_proj``/``k_proj`` (interleaved rotary pairs); :func:`unpermute_qk`
undoes it so the weights equal the original HF checkpoint's. DeepSeek-V2/V3 files
(``deepseek2``: multi-head latent attention, shared experts) are described in
:mod:`structgen.runtime.loader.gguf_deepseek`.
"""

from __future__ import annotations

import re

import torch

from structgen.errors import ModelLoadError
from structgen.runtime.config import model_context_length
from structgen.runtime.loader.dequant import dequantize
from structgen.runtime.loader.gguf_config import (
    GGUF_ARCHITECTURES,
    _arch,
    eos_token_ids,
    gguf_config,
    open_gguf,
)
from structgen.runtime.loader.gguf_deepseek import (
    DEEPSEEK2_FLOAT_ONLY,
    DEEPSEEK2_LAYER_NAMES,
    check_deepseek2_tensors,
    deepseek2_state,
)
from structgen.runtime.loader.gguf_file import GGUFFile

__all__ = ["GGUF_ARCHITECTURES", "gguf_config", "gguf_state_dict", "unpermute_qk", "load_gguf"]

# architectures whose q/k rows llama.cpp's converter permutes (Qwen's are stored as in HF)
_PERMUTED_QK = {"llama"}

_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    # MoE (llama.cpp names): router, shared expert and its gate; the stacked 3-D expert
    # tensors ffn_{gate,up,down}_exps are fused by _fuse_experts
    "ffn_gate_inp": "mlp.gate",
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
    "ffn_gate_inp_shexp": "mlp.shared_expert_gate",
    "ffn_gate_exps": "mlp.experts.gate_proj",
    "ffn_up_exps": "mlp.experts.up_proj",
    "ffn_down_exps": "mlp.experts.down_proj",
}
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
# per-architecture tensor names where they differ from the common ones (DeepSeek: MLA,
# "shared_experts")
_ARCH_LAYER_NAMES = {"deepseek2": {**_LAYER_NAMES, **DEEPSEEK2_LAYER_NAMES}}
# weights kept in float under quantization="gguf" (modules that are not linear layers)
_FLOAT_ONLY = {"deepseek2": DEEPSEEK2_FLOAT_ONLY}
_BLK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)$")
_IGNORED = {"rope_freqs.weight"}


def hf_name(gguf_name: str, arch: str | None = None) -> str | None:
    """Transformers parameter name of a GGUF tensor of architecture ``arch``; None for tensors we do
    not load.
    """
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    names = _ARCH_LAYER_NAMES.get(arch, _LAYER_NAMES)
    m = _BLK.match(gguf_name)
    if m and m.group(2) in names:
        return f"model.layers.{m.group(1)}.{names[m.group(2)]}.{m.group(3)}"
    return None


def unpermute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's rotary row permutation of a q/k projection (weight ``[n_heads*d, in]`` or
    bias).

    llama.cpp stores ``w.reshape(n, 2, d/2, ...).swapaxes(1, 2)``; this is its inverse.
    """
    shape = w.shape
    return (
        w.reshape(n_heads, shape[0] // n_heads // 2, 2, *shape[1:])
        .transpose(1, 2)
        .reshape(shape)
        .contiguous()
    )


def _qk_rows(target: str, config, permuted: bool) -> torch.Tensor | None:
    """Row order that undoes llama.cpp's q/k permutation for ``target`` (None: not permuted)."""
    if not permuted:
        return None
    if ".self_attn.q_proj." in target:
        heads = config.num_attention_heads
    elif ".self_attn.k_proj." in target:
        heads = config.num_key_value_heads
    else:
        return None
    rows = heads * (
        getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    )
    return unpermute_qk(torch.arange(rows), heads)


def gguf_state_dict(
    g: GGUFFile,
    config,
    dtype: torch.dtype = torch.float32,
    native: bool = False,
    head_tiles: bool = True,
) -> tuple[dict[str, torch.Tensor], dict[str, torch.nn.Module]]:
    """The file's weights in HF names and layout.

    Args:
        g: the open file.
        config: its config (:func:`gguf_config`).
        dtype: float dtype.
        native: keep Q8_0 / Q4_0 / Q4_1 and Q4_K / Q6_K matrices quantized (repacked
            losslessly into :mod:`structgen.runtime.quantization` modules:
            :mod:`~structgen.runtime.quantization.gguf_kquants` for the K-quants) instead of
            dequantizing them; the other types (and a Q4_K embedding) are dequantized.
        head_tiles: with ``native``, a tied Q8_0 embedding's int8 tiles for the CPU output
            kernel are made now (``gguf_native.native_module``'s ``head``; False for a model
            bound for another device, which does not use them).

    Returns:
        ``(float tensors by HF name (dequantized in float32, cast to dtype),
        quantized modules by HF module path)``.

    Raises:
        ModelLoadError: a tensor we do not know; a ``deepseek2`` file lacking a required
            tensor (the message names it: :func:`~.gguf_deepseek.check_deepseek2_tensors`).
    """
    from structgen.runtime.quantization.gguf_kquants import kquant_module
    from structgen.runtime.quantization.gguf_native import native_module

    arch = _arch(g.metadata, g.path)
    if arch == "deepseek2":
        check_deepseek2_tensors(g, config)
    permuted, float_only = arch in _PERMUTED_QK, _FLOAT_ONLY.get(arch, ())
    out: dict[str, torch.Tensor] = {}
    modules: dict[str, torch.nn.Module] = {}
    experts: dict[
        str, dict[str, str]
    ] = {}  # "model.layers.N.mlp.experts" -> {"gate_proj": gguf name, ...}
    groups, fused_done = _fusion_groups(g, arch), set()
    for name, info in g.tensors.items():
        target = hf_name(name, arch)
        if target is None:
            if name in _IGNORED:
                continue
            raise ModelLoadError(f"{g.path}: unexpected tensor {name!r}")
        group = groups.get(target)
        if group is not None:
            if target not in fused_done:  # the first member met writes the whole group
                _load_fused(g, group, config, permuted, dtype, native, out, modules)
                fused_done.update(t for t, _ in group)
            continue
        if native and ".mlp.experts." in target:
            # stacked experts: kept quantized below if possible
            experts.setdefault(target.rsplit(".", 2)[0], {})[target.split(".")[-2]] = name
            continue
        rows = _qk_rows(target, config, permuted)
        if (
            native
            and target.endswith(".weight")
            and "norm" not in target
            and not target.endswith(float_only)
        ):
            is_emb = target == "model.embed_tokens.weight"
            head = head_tiles and is_emb and "output.weight" not in g.tensors  # tied: output too
            mod = native_module(
                g.raw(name), info.type_name, info.shape, rows, is_emb, dtype, head=head
            )
            if mod is None:  # Q4_K / Q6_K kept exactly; others dequantized below
                mod = kquant_module(g.raw(name), info.type_name, info.shape, rows, is_emb, dtype)
            if mod is not None:
                modules[target.rsplit(".", 1)[0]] = mod
                g.release(name)  # a view of the map stays valid: its pages fault back in
                continue
        # written once, in its final dtype and row order (no float32 copy to permute or cast)
        out[target] = dequantize(g.raw(name), info.type_name, info.type_id, info.shape, rows, dtype)
        g.release(name)  # its file pages leave the resident set (peak: weights + torch)
    for path, names in experts.items():
        _native_experts(g, path, names, dtype, out, modules)
    out = _fuse_experts(out)
    return (deepseek2_state(out, config) if arch == "deepseek2" else out), modules


def _fusion_groups(g: GGUFFile, arch: str) -> dict[str, list[tuple[str, str]]]:
    """The tensors ``fuse_projections`` will join (q/k/v, gate/up:
    ``models.layers.FUSED_PROJECTIONS``), so that :func:`_load_fused` writes each group into
    one tensor and the fusion copies nothing.

    Returns:
        HF name -> its group's ``[(HF name, GGUF name), ...]`` in fusion order, for groups whose
        members are all present, 2-D (or all 1-D biases), of one ggml type and input size.
    """
    from structgen.runtime.models.layers import fused_group

    found: dict[str, dict[int, tuple[str, str]]] = {}
    sizes: dict[str, int] = {}
    for name in g.tensors:
        target = hf_name(name, arch)
        place = None if target is None or ".mlp.experts." in target else fused_group(target)
        if place is not None:
            key, index, size = place
            found.setdefault(key, {})[index] = (target, name)
            sizes[key] = size
    groups: dict[str, list[tuple[str, str]]] = {}
    for key, members in found.items():
        if len(members) != sizes[key]:
            continue
        group = [members[i] for i in range(sizes[key])]
        infos = [g.tensors[name] for _, name in group]
        first = infos[0]
        if any(
            i.type_name != first.type_name
            or len(i.shape) != len(first.shape)
            or len(i.shape) > 2
            or i.shape[1:] != first.shape[1:]
            for i in infos
        ):
            continue
        for target, _ in group:
            groups[target] = group
    return groups


def _load_fused(
    g: GGUFFile,
    group: list[tuple[str, str]],
    config,
    permuted: bool,
    dtype: torch.dtype,
    native: bool,
    out: dict,
    modules: dict,
) -> None:
    """Write one fused group's members into consecutive row blocks of one tensor (float) or one
    set of quantized buffers (``native``: Q8_0 / Q4_0 / Q4_1 kept quantized), in ``out`` /
    ``modules`` under their own names; their file pages are released.
    """
    from structgen.runtime.quantization.gguf_native import native_group

    infos = [g.tensors[name] for _, name in group]
    rows = [_qk_rows(target, config, permuted) for target, _ in group]
    weight = group[0][0].endswith(".weight") and len(infos[0].shape) == 2
    if native and weight:
        parts = [
            (g.raw(name), info.shape, r, None) for (_, name), info, r in zip(group, infos, rows)
        ]
        mods = native_group(parts, infos[0].type_name)
        if mods is not None:
            for (target, name), mod in zip(group, mods):
                modules[target.rsplit(".", 1)[0]] = mod
                g.release(name)
            return
    total = sum(info.shape[0] for info in infos)
    whole = torch.empty((total, *infos[0].shape[1:]), dtype=dtype)
    start = 0
    for (target, name), info, r in zip(group, infos, rows):
        n = info.shape[0]
        if native and weight:  # not kept as blocks: Q4_K / Q6_K kept exactly, or float
            from structgen.runtime.quantization.gguf_kquants import kquant_module

            mod = kquant_module(g.raw(name), info.type_name, info.shape, r, False, dtype)
            if mod is not None:
                modules[target.rsplit(".", 1)[0]] = mod
                g.release(name)
                start += n
                continue
        out[target] = dequantize(
            g.raw(name),
            info.type_name,
            info.type_id,
            info.shape,
            r,
            dtype,
            out=whole[start : start + n],
        )
        g.release(name)
        start += n


def _native_experts(
    g: GGUFFile, path: str, names: dict[str, str], dtype, out: dict, modules: dict
) -> None:
    """One layer's stacked experts as a quantized module in ``modules[path]``, or dequantized into
    ``out``.
    """
    from structgen.runtime.quantization.gguf_native import native_experts

    infos = {k: g.tensors[v] for k, v in names.items()}
    if set(infos) == {"gate_proj", "up_proj", "down_proj"}:
        mod = native_experts(
            *(
                (g.raw(names[k]), infos[k].type_name, infos[k].shape)
                for k in ("gate_proj", "up_proj", "down_proj")
            )
        )
        if mod is not None:
            modules[path] = mod
            for name in names.values():
                g.release(name)
            return
    for k, name in names.items():
        info = infos[k]
        out[f"{path}.{k}.weight"] = dequantize(
            g.raw(name), info.type_name, info.type_id, info.shape, dtype=dtype
        )
        g.release(name)


def _fuse_experts(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """llama.cpp's stacked expert tensors -> our fused layout (other entries pass through).

    ``mlp.experts.{gate,up}_proj.weight`` ``[E, I, H]`` become ``mlp.experts.gate_up_proj``
    ``[E, 2I, H]`` (gate rows first); ``down_proj.weight`` ``[E, H, I]`` becomes
    ``mlp.experts.down_proj``; the shared-expert gate ``[H]`` becomes ``[1, H]``.
    """
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key.endswith(".mlp.experts.gate_proj.weight"):
            base = key[: -len("gate_proj.weight")]
            out[base + "gate_up_proj"] = torch.cat((value, state[base + "up_proj.weight"]), dim=1)
        elif key.endswith(".mlp.experts.down_proj.weight"):
            out[key[: -len(".weight")]] = value
        elif key.endswith(".mlp.experts.up_proj.weight"):
            continue
        elif key.endswith(".mlp.shared_expert_gate.weight") and value.dim() == 1:
            out[key] = value.unsqueeze(0)
        else:
            out[key] = value
    return out


def install_modules(
    model, modules: dict[str, torch.nn.Module], state: dict[str, torch.Tensor], device
) -> set[str]:
    """Put quantized modules in place (moving a linear's bias from ``state`` into it).

    Returns:
        The state-dict keys those modules now own (so a strict check can skip them).
    """
    owned: set[str] = set()
    for path, mod in modules.items():
        bias = state.pop(path + ".bias", None)
        if bias is not None:
            mod.bias = torch.nn.Parameter(bias, requires_grad=False)
        model.set_submodule(path, mod.to(device))
        owned.update(f"{path}.{k}" for k in mod.state_dict())
    return owned


def load_gguf(path: str, dtype: torch.dtype, device, quantization: str | None = None):
    """Load a ``.gguf`` file into a LoadedModel (see :func:`structgen.runtime.loader.load_model`).

    ``quantization="gguf"`` keeps Q8_0/Q4_0/Q4_1/Q4_K/Q6_K matrices quantized (other types
    are dequantized at load); ``"int8"``/``"int4"``
    dequantize, then requantize every linear
    (:func:`structgen.runtime.quantization.quantize_model`).
    """
    from structgen.runtime.loader import LoadedModel
    from structgen.runtime.models import get_model_class

    g, config, tokenizer, tok_dir = open_gguf(path)
    try:
        meta = g.metadata
        native, on_cpu = quantization == "gguf", torch.device(device).type == "cpu"
        state, modules = gguf_state_dict(g, config, dtype, native=native, head_tiles=on_cpu)
    finally:
        g.close()
    model = get_model_class(config.architectures[0])(
        config, dtype=dtype, device=device
    )  # Mixtral: "llama" + experts
    owned = install_modules(model, modules, state, device)
    assign_weights(model, state, device, path, owned)
    if quantization not in (None, "gguf"):
        from structgen.runtime.quantization import quantize_model

        quantize_model(model, quantization)
    eos = eos_token_ids(config, tokenizer)
    chat_template = meta.get("tokenizer.chat_template") or getattr(tokenizer, "chat_template", None)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        chat_template=chat_template,
        eos_token_ids=eos,
        config=config,
        max_model_len=model_context_length(config, tokenizer),
        cache_dir=tok_dir,
    )


def torch_model_from_host(host):
    """The torch ``DecoderForCausalLM`` over a :class:`~structgen.runtime.cpu.model.CpuModel`'s
    numpy arrays (``torch.from_numpy``: the same memory, no copy), as :func:`load_gguf` builds
    it with ``quantization="gguf"`` on the CPU (quantized modules by
    ``gguf_native.group_modules``, the tied Q8_0 embedding with its int8 tiles, norms and
    biases as parameters, q/k/v and gate/up fused), its quantized modules set to int8
    activations (what the host model's table runs).

    Raises:
        ModelLoadError: the arrays do not fit the model class (a bug: ``CpuModel.from_gguf``
            checked the shapes).
    """
    from structgen.runtime.cpu.model import SLOT_PATHS
    from structgen.runtime.models import get_model_class
    from structgen.runtime.quantization.gguf_native import group_modules
    from structgen.runtime.quantization.linear import QuantEmbedding, apply_activation_dtype

    config = host.config
    layers, embed, (head_q, head_scales), norm = host.host_arrays()
    modules: dict[str, torch.nn.Module] = {}
    state: dict[str, torch.Tensor] = {"model.norm.weight": torch.from_numpy(norm)}
    for i, (slots, norms) in enumerate(layers):
        base = f"model.layers.{i}."
        for slot, (type_name, group, bias) in slots.items():
            paths = SLOT_PATHS[slot]
            for path, mod in zip(paths, group_modules(group, type_name)):
                modules[base + path] = mod
            if bias is not None:
                whole = torch.from_numpy(bias)
                for path, (r, n, *_rest) in zip(paths, group.spans):
                    state[base + path + ".bias"] = whole[r : r + n]
        for name, w in norms.items():
            where = name if name.endswith("layernorm") else "self_attn." + name
            state[base + where + ".weight"] = torch.from_numpy(w)
    emb = QuantEmbedding(torch.from_numpy(embed.q), torch.from_numpy(embed.scales), torch.float32)
    emb.keep_int8_tiles(torch.from_numpy(head_q), torch.from_numpy(head_scales))
    modules["model.embed_tokens"] = emb
    model = get_model_class(config.architectures[0])(config, dtype=torch.float32, device="cpu")
    owned = install_modules(model, modules, state, "cpu")
    assign_weights(model, state, "cpu", host.path, owned)
    model.fuse_projections()  # as load_model's _fused
    apply_activation_dtype(model, "int8")
    return model


def assign_weights(
    model, state: dict[str, torch.Tensor], device, where: str, owned: set[str] = frozenset()
) -> None:
    """Move ``state`` onto ``device`` and into ``model`` without copying, checking names and shapes.

    Raises:
        ModelLoadError: a weight is missing, unexpected or of the wrong shape.

    ``owned`` names keys already held by installed (quantized) modules: not missing.
    """
    dev = torch.device(device)
    state = {k: v.to(dev) for k, v in state.items()}
    try:
        missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    except RuntimeError as e:
        raise ModelLoadError(f"{where}: weights do not fit the model: {e}") from e
    missing = [k for k in missing if k not in owned]
    if missing or unexpected:
        raise ModelLoadError(
            f"{where}: missing weights {missing[:5]}, unexpected weights {unexpected[:5]}"
        )
