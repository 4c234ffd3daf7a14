"""Load a GGUF model: config from metadata, dequantized weights in HF layout, tokenizer.

Weight names map to transformers' (``blk.3.attn_q.weight`` ->
``model.layers.3.self_attn.q_proj.weight``). llama.cpp's converter permutes the
rows of ``q_proj``/``k_proj`` (interleaved rotary pairs); :func:`unpermute_qk`
undoes it so the weights equal the original HF checkpoint's.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from structgen.errors import ModelLoadError
from structgen.runtime.loader.cache import cache_root, file_cache_key
from structgen.runtime.loader.dequant import dequantize
from structgen.runtime.loader.gguf_file import GGUFFile
from structgen.runtime.loader.tokenizer import load_cached_tokenizer, save_tokenizer_cache, tokenizer_from_gguf_metadata

__all__ = ["GGUF_ARCHITECTURES", "gguf_config", "gguf_state_dict", "unpermute_qk", "load_gguf"]

# GGUF general.architecture -> registry name of our model class
GGUF_ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3"}
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
}
_GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)$")
_IGNORED = {"rope_freqs.weight"}


def hf_name(gguf_name: str) -> str | None:
    """transformers parameter name of a GGUF tensor; None for tensors we do not load."""
    if gguf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[gguf_name]
    m = _BLK.match(gguf_name)
    if m and m.group(2) in _LAYER_NAMES:
        return f"model.layers.{m.group(1)}.{_LAYER_NAMES[m.group(2)]}.{m.group(3)}"
    return None


def unpermute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's rotary row permutation of a q/k projection (weight ``[n_heads*d, in]`` or bias).

    llama.cpp stores ``w.reshape(n, 2, d/2, ...).swapaxes(1, 2)``; this is its inverse.
    """
    shape = w.shape
    return w.reshape(n_heads, shape[0] // n_heads // 2, 2, *shape[1:]).transpose(1, 2).reshape(shape).contiguous()


def _arch(meta: dict, path: str) -> str:
    arch = meta.get("general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ModelLoadError(
            f"{path}: unsupported model architecture {arch!r} (supported GGUF architectures: "
            f"{', '.join(sorted(GGUF_ARCHITECTURES))})"
        )
    return arch


def gguf_config(g: GGUFFile):
    """A transformers config (``LlamaConfig``, ``Qwen2Config``, ``Qwen3Config``) from the file's metadata.

    Raises:
        ModelLoadError: unknown architecture or missing hyperparameters.
    """
    import transformers

    meta = g.metadata
    arch = _arch(meta, g.path)

    def get(key: str, default=None):
        v = meta.get(f"{arch}.{key}", default)
        if v is None:
            raise ModelLoadError(f"{g.path}: GGUF metadata lacks {arch}.{key}")
        return v

    n_heads = int(get("attention.head_count"))
    n_kv = get("attention.head_count_kv", n_heads)
    n_kv = int(n_kv[0] if isinstance(n_kv, list) else n_kv)
    hidden = int(get("embedding_length"))
    head_dim = int(meta.get(f"{arch}.attention.key_length") or meta.get(f"{arch}.rope.dimension_count") or hidden // n_heads)
    tokens = meta.get("tokenizer.ggml.tokens")
    vocab = int(meta.get(f"{arch}.vocab_size") or (len(tokens) if tokens else 0) or g.tensors["token_embd.weight"].shape[0])
    ff = get("feed_forward_length")
    layer_names = {t for t in g.tensors}
    rope_type = meta.get(f"{arch}.rope.scaling.type")
    if rope_type not in (None, "none"):
        raise ModelLoadError(f"{g.path}: unsupported RoPE scaling {rope_type!r} in GGUF metadata")
    if "rope_freqs.weight" in layer_names:
        raise ModelLoadError(f"{g.path}: GGUF rope_freqs (llama3-style RoPE scaling) is not supported yet")
    eos = meta.get("tokenizer.ggml.eos_token_id")
    extra = {}
    if arch == "llama":
        cls, name = transformers.LlamaConfig, "LlamaForCausalLM"
        extra["attention_bias"] = "blk.0.attn_q.bias" in layer_names
    elif arch == "qwen2":
        cls, name = transformers.Qwen2Config, "Qwen2ForCausalLM"
    else:
        cls, name = transformers.Qwen3Config, "Qwen3ForCausalLM"
        extra["attention_bias"] = "blk.0.attn_q.bias" in layer_names
    return cls(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=int(ff[0] if isinstance(ff, list) else ff),
        num_hidden_layers=int(get("block_count")),
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv,
        head_dim=head_dim,
        max_position_embeddings=int(get("context_length", 2048)),
        rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
        tie_word_embeddings="output.weight" not in layer_names,
        hidden_act="silu",
        bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
        eos_token_id=eos,
        pad_token_id=meta.get("tokenizer.ggml.padding_token_id"),
        architectures=[name],
        **extra,
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
    rows = heads * (getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads)
    return unpermute_qk(torch.arange(rows), heads)


def gguf_state_dict(
    g: GGUFFile, config, dtype: torch.dtype = torch.float32, native: bool = False
) -> tuple[dict[str, torch.Tensor], dict[str, torch.nn.Module]]:
    """The file's weights in HF names and layout.

    Args:
        g: the open file; config: its config (:func:`gguf_config`); dtype: float dtype.
        native: keep Q8_0 / Q4_0 / Q4_1 matrices quantized (repacked losslessly into
            :mod:`structgen.runtime.quantization` modules) instead of dequantizing them.

    Returns:
        ``(float tensors by HF name (dequantized in float32, cast to dtype),
        quantized modules by HF module path)``.
    """
    from structgen.runtime.quantization.gguf_native import native_module

    permuted = _arch(g.metadata, g.path) in _PERMUTED_QK
    out: dict[str, torch.Tensor] = {}
    modules: dict[str, torch.nn.Module] = {}
    for name, info in g.tensors.items():
        target = hf_name(name)
        if target is None:
            if name in _IGNORED:
                continue
            raise ModelLoadError(f"{g.path}: unexpected tensor {name!r}")
        rows = _qk_rows(target, config, permuted)
        if native and target.endswith(".weight") and "norm" not in target:
            is_emb = target == "model.embed_tokens.weight"
            mod = native_module(g.raw(name), info.type_name, info.shape, rows, is_emb, dtype)
            if mod is not None:
                modules[target.rsplit(".", 1)[0]] = mod
                continue
        w = dequantize(g.raw(name), info.type_name, info.type_id, info.shape)
        if rows is not None:
            w = w[rows]
        out[target] = w if w.dtype == dtype else w.to(dtype)
    return out, modules


def install_modules(model, modules: dict[str, torch.nn.Module], state: dict[str, torch.Tensor], device) -> set[str]:
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

    ``quantization="gguf"`` keeps Q8_0/Q4_0/Q4_1 matrices quantized; ``"int8"``/``"int4"``
    dequantize, then requantize every linear (:func:`structgen.runtime.quantization.quantize_model`).
    """
    from structgen.runtime.loader import LoadedModel
    from structgen.runtime.models import get_model_class

    tok_dir = cache_root() / "tokenizers" / file_cache_key(path)
    tokenizer = load_cached_tokenizer(tok_dir)
    # the vocabulary arrays are only parsed when the tokenizer must be built
    g = GGUFFile(path, skip_arrays_over=None if tokenizer is None else 4096)
    try:
        meta = g.metadata
        arch = _arch(meta, path)
        config = gguf_config(g)
        if tokenizer is None:
            tokenizer = tokenizer_from_gguf_metadata(meta)
            save_tokenizer_cache(tokenizer, tok_dir)
        state, modules = gguf_state_dict(g, config, dtype, native=quantization == "gguf")
    finally:
        g.close()
    model = get_model_class(GGUF_ARCHITECTURES[arch])(config, dtype=dtype, device=device)
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
        max_model_len=int(config.max_position_embeddings),
    )


def eos_token_ids(config, tokenizer) -> list[int]:
    """The config's EOS id(s), then the tokenizer's EOS and ``<|eot_id|>`` if they differ."""
    ids = config.eos_token_id
    eos = [int(i) for i in (ids if isinstance(ids, list) else [ids]) if i is not None]
    vocab = tokenizer.get_vocab()
    for name in (tokenizer.eos_token, "<|eot_id|>"):
        if name is not None and name in vocab and vocab[name] not in eos:
            eos.append(int(vocab[name]))
    return eos


def assign_weights(model, state: dict[str, torch.Tensor], device, where: str, owned: set[str] = frozenset()) -> None:
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
        raise ModelLoadError(f"{where}: missing weights {missing[:5]}, unexpected weights {unexpected[:5]}")
