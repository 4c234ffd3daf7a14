"""What a GGUF file's metadata says about its model, without torch (and without transformers
for the dense and MoE families): the config (:func:`gguf_config`), the tokenizer (cached, or
built from the metadata once: :func:`open_gguf`) and the EOS ids (:func:`eos_token_ids`).
``gguf_loader`` builds the torch model over them, ``runtime.cpu.model.CpuModel`` the torch-free
default CPU model.
"""

from __future__ import annotations

from pathlib import Path

from structgen.errors import ModelLoadError
from structgen.runtime.loader.cache import cache_root, file_cache_key
from structgen.runtime.loader.gguf_file import GGUFFile
from structgen.runtime.loader.tokenizer import (
    load_cached_tokenizer,
    save_tokenizer_cache,
    tokenizer_from_gguf_metadata,
)
from structgen.runtime.models.config import ModelConfig

__all__ = ["GGUF_ARCHITECTURES", "eos_token_ids", "gguf_config", "open_gguf"]

# GGUF general.architecture -> registry name of our model class
# (llama.cpp converts Mixtral as "llama" with {arch}.expert_count > 0: see gguf_config)
GGUF_ARCHITECTURES = {
    "llama": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen2moe": "qwen2moe",
    "qwen3moe": "qwen3moe",
    "deepseek2": "deepseek_v3",
}


def _arch(meta: dict, path: str) -> str:
    arch = meta.get("general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ModelLoadError(
            f"{path}: unsupported model architecture {arch!r} (supported GGUF architectures: "
            f"{', '.join(sorted(GGUF_ARCHITECTURES))})"
        )
    return arch


def gguf_config(g: GGUFFile):
    """The model config from the file's metadata: a :class:`ModelConfig` (Llama, Qwen2, Qwen3,
    Mixtral, Qwen2-MoE, Qwen3-MoE; no transformers import), or transformers'
    ``DeepseekV3Config`` for ``deepseek2`` (its YaRN RoPE is transformers').

    Raises:
        ModelLoadError: unknown architecture or missing hyperparameters.
    """
    meta = g.metadata
    arch = _arch(meta, g.path)

    def get(key: str, default=None):
        v = meta.get(f"{arch}.{key}", default)
        if v is None:
            raise ModelLoadError(f"{g.path}: GGUF metadata lacks {arch}.{key}")
        return v

    common = _common_config(g, get)
    if arch == "deepseek2":
        from structgen.runtime.loader.gguf_deepseek import deepseek2_config

        return deepseek2_config(g, get, common)
    n_heads, hidden = common["num_attention_heads"], common["hidden_size"]
    n_kv = get("attention.head_count_kv", n_heads)
    n_kv = int(n_kv[0] if isinstance(n_kv, list) else n_kv)
    head_dim = int(
        meta.get(f"{arch}.attention.key_length")
        or meta.get(f"{arch}.rope.dimension_count")
        or hidden // n_heads
    )
    ff = meta.get(f"{arch}.feed_forward_length") or meta.get(f"{arch}.expert_feed_forward_length")
    if ff is None:
        raise ModelLoadError(f"{g.path}: GGUF metadata lacks {arch}.feed_forward_length")
    rope_type = meta.get(f"{arch}.rope.scaling.type")
    if rope_type not in (None, "none"):
        raise ModelLoadError(f"{g.path}: unsupported RoPE scaling {rope_type!r} in GGUF metadata")
    if "rope_freqs.weight" in g.tensors:
        raise ModelLoadError(
            f"{g.path}: GGUF rope_freqs (llama3-style RoPE scaling) is not supported yet"
        )
    name, extra = _family(arch, meta, set(g.tensors), common["num_hidden_layers"])
    theta = float(meta.get(f"{arch}.rope.freq_base", 10000.0))
    return ModelConfig(
        **common,
        intermediate_size=int(ff[0] if isinstance(ff, list) else ff),
        num_key_value_heads=n_kv,
        head_dim=head_dim,
        rope_parameters={"rope_type": "default", "rope_theta": theta},
        architectures=[name],
        **extra,
    )


def _common_config(g: GGUFFile, get) -> dict:
    """Config fields every architecture's metadata gives the same way (``get`` reads
    ``{arch}.{key}``).
    """
    meta = g.metadata
    tokens = meta.get("tokenizer.ggml.tokens")
    return dict(
        vocab_size=int(
            get("vocab_size", 0)
            or (len(tokens) if tokens else 0)
            or g.tensors["token_embd.weight"].shape[0]
        ),
        hidden_size=int(get("embedding_length")),
        num_hidden_layers=int(get("block_count")),
        num_attention_heads=int(get("attention.head_count")),
        max_position_embeddings=int(get("context_length", 2048)),
        rms_norm_eps=float(get("attention.layer_norm_rms_epsilon", 1e-5)),
        tie_word_embeddings="output.weight" not in g.tensors,
        hidden_act="silu",
        bos_token_id=meta.get("tokenizer.ggml.bos_token_id"),
        eos_token_id=meta.get("tokenizer.ggml.eos_token_id"),
        pad_token_id=meta.get("tokenizer.ggml.padding_token_id"),
    )


def _family(arch: str, meta: dict, names: set[str], num_layers: int):
    """``(architectures name, extra ModelConfig kwargs)`` of a GGUF architecture.

    MoE metadata (llama.cpp keys): ``{arch}.expert_count``, ``expert_used_count``,
    ``expert_feed_forward_length``, ``expert_shared_feed_forward_length``, and optionally
    ``expert_weights_norm`` (renormalise the top-k weights; llama.cpp's per-arch default
    otherwise: Mixtral and Qwen3-MoE yes, Qwen2-MoE no). Layers without stacked expert
    tensors are dense (``mlp_only_layers``).
    """
    experts = int(meta.get(f"{arch}.expert_count") or 0)
    has_bias = "blk.0.attn_q.bias" in names
    if arch in ("llama", "qwen3") and not experts:
        name = "LlamaForCausalLM" if arch == "llama" else "Qwen3ForCausalLM"
        return name, {"attention_bias": has_bias}
    if arch == "qwen2":
        return "Qwen2ForCausalLM", {}
    extra = {"num_experts_per_tok": int(meta.get(f"{arch}.expert_used_count") or 0)}
    norm = meta.get(f"{arch}.expert_weights_norm")
    if arch == "llama":  # Mixtral
        extra.update(num_local_experts=experts)
        return "MixtralForCausalLM", extra
    dense = [i for i in range(num_layers) if f"blk.{i}.ffn_gate_exps.weight" not in names]
    extra.update(
        num_experts=experts,
        moe_intermediate_size=int(meta[f"{arch}.expert_feed_forward_length"]),
        decoder_sparse_step=1,
        mlp_only_layers=dense,
    )
    if arch == "qwen2moe":
        extra.update(
            norm_topk_prob=bool(norm) if norm is not None else False,
            shared_expert_intermediate_size=int(
                meta.get(f"{arch}.expert_shared_feed_forward_length") or 0
            ),
        )
        return "Qwen2MoeForCausalLM", extra
    extra.update(norm_topk_prob=bool(norm) if norm is not None else True, attention_bias=has_bias)
    return "Qwen3MoeForCausalLM", extra


def open_gguf(path: str) -> tuple[GGUFFile, object, object, Path]:
    """Open a GGUF file with its config and tokenizer: ``(file, config, tokenizer, tokenizer
    cache directory)``. The tokenizer comes from the cache when it is there (then the
    metadata's vocabulary arrays are not parsed), else it is built from the metadata and
    cached. The caller closes the file.

    Raises:
        ModelLoadError: unsupported architecture, missing hyperparameters, a bad file.
    """
    tok_dir = cache_root() / "tokenizers" / file_cache_key(path)
    tokenizer = load_cached_tokenizer(tok_dir)
    # the vocabulary arrays are only parsed when the tokenizer must be built
    g = GGUFFile(path, skip_arrays_over=None if tokenizer is None else 4096)
    try:
        _arch(g.metadata, path)  # raises on an unsupported architecture
        config = gguf_config(g)
        if tokenizer is None:
            tokenizer = tokenizer_from_gguf_metadata(g.metadata)
            save_tokenizer_cache(tokenizer, tok_dir)
    except BaseException:
        g.close()
        raise
    return g, config, tokenizer, tok_dir


def eos_token_ids(config, tokenizer) -> list[int]:
    """The config's EOS id(s), then the tokenizer's EOS and ``<|eot_id|>`` if they differ."""
    ids = config.eos_token_id
    eos = [int(i) for i in (ids if isinstance(ids, list) else [ids]) if i is not None]
    for name in (tokenizer.eos_token, "<|eot_id|>"):
        if name is None:
            continue
        tid = tokenizer.convert_tokens_to_ids(name)  # one lookup, not the whole vocabulary
        if tid is not None and tokenizer.convert_ids_to_tokens(tid) == name and tid not in eos:
            eos.append(int(tid))
    return eos
