"""DeepSeek-V2/V3 GGUF files (llama.cpp's ``deepseek2`` architecture) for our DeepseekV3 model.

The generic GGUF path (:mod:`structgen.runtime.loader.gguf_loader`) reads and (de)quantizes
the tensors; this module holds what is particular to ``deepseek2``: its tensor names, its
metadata, the required-tensor check and the re-assembly of the latent up-projection.
Conventions, from llama.cpp's ``convert_hf_to_gguf.py`` (``DeepseekV2Model``) and its
``deepseek2`` loader (``llama-model.cpp``):

- Attention: ``blk.N.attn_q_a`` / ``attn_q_a_norm`` / ``attn_q_b`` (a plain ``attn_q`` when
  the file has no ``attention.q_lora_rank``), ``attn_kv_a_mqa``, ``attn_kv_a_norm``,
  ``attn_output``. The latent up-projection ``kv_b_proj`` ``[H*(nope+v), r]`` is stored whole
  as ``attn_kv_b`` (older files) or split for llama.cpp's absorbed attention (newer files):
  ``attn_k_b`` ``[H, r, nope]`` (the k rows of each head, transposed) and ``attn_v_b``
  ``[H, v, r]``; :func:`deepseek2_state` puts them back together.
- No q/k row permutation: llama.cpp runs deepseek2 with its "normal" RoPE (adjacent pairs),
  which is DeepSeek's interleaved rotary, transformers' ``rope_interleave=True``.
- MoE: router ``ffn_gate_inp`` and its selection bias ``exp_probs_b.bias``
  (``e_score_correction_bias``; optional, zero when absent), stacked experts
  ``ffn_{gate,up,down}_exps``, shared experts ``ffn_{gate,up,down}_shexp``; the first
  ``leading_dense_block_count`` layers have a dense ``ffn_{gate,up,down}``.
- Metadata: in newer files ``attention.key_length_mla`` / ``value_length_mla`` are the
  per-head q/k and v widths (``key_length`` / ``value_length`` then describe the latent
  cache and ``head_count_kv`` is 1); older files have them in ``key_length`` /
  ``value_length``. Routing: ``expert_gating_func`` (1 softmax, 2 sigmoid; absent means
  softmax, as in llama.cpp), ``expert_weights_norm`` (default false),
  ``expert_weights_scale`` (default 1), ``expert_group_count`` / ``expert_group_used_count``
  (default 1: no group limit, which is what llama.cpp computes for files without them).
  YaRN: ``rope.scaling.type`` / ``factor`` / ``original_context_length`` and
  ``rope.scaling.yarn_log_multiplier`` = ``0.1 * mscale_all_dim``.
"""

from __future__ import annotations

import torch

from structgen.errors import ModelLoadError

__all__ = [
    "DEEPSEEK2_LAYER_NAMES",
    "DEEPSEEK2_FLOAT_ONLY",
    "deepseek2_config",
    "check_deepseek2_tensors",
    "deepseek2_state",
]

# GGUF tensor (within blk.N) -> transformers module path; extends gguf_loader's common names
DEEPSEEK2_LAYER_NAMES = {
    "attn_q_a": "self_attn.q_a_proj",
    "attn_q_a_norm": "self_attn.q_a_layernorm",
    "attn_q_b": "self_attn.q_b_proj",
    "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa",
    "attn_kv_a_norm": "self_attn.kv_a_layernorm",
    "attn_kv_b": "self_attn.kv_b_proj",
    # split kv_b (llama.cpp's converter names): merged by deepseek2_state
    "attn_k_b": "self_attn.k_b_proj",
    "attn_v_b": "self_attn.v_b_proj",
    # ".bias" -> e_score_correction_bias in deepseek2_state
    "exp_probs_b": "mlp.gate.e_score_correction",
    "ffn_gate_shexp": "mlp.shared_experts.gate_proj",
    "ffn_up_shexp": "mlp.shared_experts.up_proj",
    "ffn_down_shexp": "mlp.shared_experts.down_proj",
}
# weights our model keeps in float: the latent up-projection is folded into q and o (never a
# linear), and the router runs in float32 (see mla.LatentUpProjection, moe.GroupedTopkRouter)
DEEPSEEK2_FLOAT_ONLY = (
    ".self_attn.kv_b_proj.weight",
    ".self_attn.k_b_proj.weight",
    ".self_attn.v_b_proj.weight",
    ".mlp.gate.weight",
)
_SIGMOID = 2  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID (1 is softmax)


def deepseek2_config(g, get, common: dict):
    """A transformers ``DeepseekV3Config`` from a ``deepseek2`` file's metadata.

    Args:
        g: the open :class:`~structgen.runtime.loader.gguf_file.GGUFFile`.
        get: ``get(key, default=None)`` reading ``deepseek2.{key}``; raises ModelLoadError
            when the key is absent and no default is given.
        common: the config fields every architecture shares (vocabulary, widths, layers,
            heads, context, norm epsilon, tied head, special ids).

    Raises:
        ModelLoadError: missing hyperparameters; softmax expert gating (DeepSeek-V2's
            routing, which our model does not implement); RoPE scaling other than YaRN.
    """
    import transformers

    gating = int(get("expert_gating_func", 1))
    if gating != _SIGMOID:
        raise ModelLoadError(
            f"{g.path}: deepseek2 expert_gating_func={gating} (softmax routing, DeepSeek-V2/V2.5) "
            f"is not supported; "
            f"only sigmoid routing (DeepSeek-V3/R1, expert_gating_func={_SIGMOID}) is"
        )
    rope = int(get("rope.dimension_count"))
    if get("attention.key_length_mla", 0):
        qk, v = int(get("attention.key_length_mla")), int(get("attention.value_length_mla"))
    else:  # files converted before llama.cpp's MLA cache: per-head widths in key/value_length
        qk, v = int(get("attention.key_length")), int(get("attention.value_length"))
    q_lora = get("attention.q_lora_rank", 0)
    if not q_lora and "blk.0.attn_q_a.weight" in g.tensors:
        q_lora = g.tensors["blk.0.attn_q_a.weight"].shape[0]
    heads = common["num_attention_heads"]
    return transformers.DeepseekV3Config(
        **common,
        # MLA: the file's head_count_kv (1) describes llama.cpp's latent cache
        num_key_value_heads=heads,
        intermediate_size=int(get("feed_forward_length")),
        q_lora_rank=int(q_lora) if q_lora else None,
        kv_lora_rank=int(get("attention.kv_lora_rank")),
        qk_rope_head_dim=rope,
        qk_nope_head_dim=qk - rope,
        v_head_dim=v,
        n_routed_experts=int(get("expert_count")),
        num_experts_per_tok=int(get("expert_used_count")),
        moe_intermediate_size=int(get("expert_feed_forward_length")),
        n_shared_experts=int(get("expert_shared_count")),
        first_k_dense_replace=int(get("leading_dense_block_count")),
        n_group=int(get("expert_group_count", 1)),
        topk_group=int(get("expert_group_used_count", 1)),
        norm_topk_prob=bool(get("expert_weights_norm", False)),
        routed_scaling_factor=float(get("expert_weights_scale", 1.0)),
        rope_interleave=True,
        rope_parameters=_rope_parameters(g.path, get),
        attention_bias=False,
        num_nextn_predict_layers=0,
        architectures=["DeepseekV3ForCausalLM"],
    )


def _rope_parameters(path: str, get) -> dict:
    """Transformers ``rope_parameters`` (default or YaRN) from ``deepseek2.rope.*``.

    llama.cpp keeps only ``mscale_all_dim`` (as ``yarn_log_multiplier / 0.1``) and scales the
    rotary cos/sin by 1; transformers' YaRN scales them by ``mscale(factor, mscale) /
    mscale(factor, mscale_all_dim)``, which is 1 with ``mscale = mscale_all_dim`` (as in
    DeepSeek's own configs: V2 0.707/0.707, V3 1.0/1.0).
    """
    params = {"rope_type": "default", "rope_theta": float(get("rope.freq_base", 10000.0))}
    kind = get("rope.scaling.type", "none")
    if kind == "none":
        return params
    if kind != "yarn":
        raise ModelLoadError(f"{path}: unsupported RoPE scaling {kind!r} for deepseek2 (only yarn)")
    m = float(get("rope.scaling.yarn_log_multiplier", 0.0)) / 0.1
    params.update(
        rope_type="yarn",
        factor=float(get("rope.scaling.factor")),
        mscale=m,
        mscale_all_dim=m,
        original_max_position_embeddings=int(get("rope.scaling.original_context_length")),
        beta_fast=float(get("rope.scaling.yarn_beta_fast", 32.0)),
        beta_slow=float(get("rope.scaling.yarn_beta_slow", 1.0)),
    )
    return params


def check_deepseek2_tensors(g, config) -> None:
    """Raise a ModelLoadError naming the required tensors the file lacks (none: return).

    Required per layer: norms, the MLA projections (q LoRA or plain q per ``config``), the
    latent up-projection (``attn_kv_b``, or ``attn_k_b`` with ``attn_v_b``), and the dense
    FFN (layers ``< first_k_dense_replace``) or router, stacked experts and shared experts.
    ``output.weight`` (tied head when absent) and ``exp_probs_b.bias`` are optional.
    """
    have = g.tensors
    missing = [n for n in ("token_embd.weight", "output_norm.weight") if n not in have]
    for i in range(config.num_hidden_layers):
        b = f"blk.{i}."
        parts = ["attn_norm", "ffn_norm", "attn_kv_a_mqa", "attn_kv_a_norm", "attn_output"]
        parts += ["attn_q_a", "attn_q_a_norm", "attn_q_b"] if config.q_lora_rank else ["attn_q"]
        if i < config.first_k_dense_replace:
            parts += ["ffn_gate", "ffn_up", "ffn_down"]
        else:
            parts += ["ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"]
            parts += (
                ["ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"]
                if config.n_shared_experts
                else []
            )
        missing += [f"{b}{p}.weight" for p in parts if f"{b}{p}.weight" not in have]
        if f"{b}attn_kv_b.weight" not in have and not {
            f"{b}attn_k_b.weight",
            f"{b}attn_v_b.weight",
        } <= set(have):
            missing.append(f"{b}attn_kv_b.weight (or {b}attn_k_b.weight and {b}attn_v_b.weight)")
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ModelLoadError(
            f"{g.path}: deepseek2 GGUF lacks required tensor(s) {', '.join(missing[:5])}{more}"
        )


def deepseek2_state(state: dict[str, torch.Tensor], config) -> dict[str, torch.Tensor]:
    """Our DeepseekV3 names from the loaded ``deepseek2`` tensors (``state`` is not mutated).

    ``self_attn.k_b_proj`` ``[H, r, nope]`` and ``v_b_proj`` ``[H, v, r]`` become
    ``self_attn.kv_b_proj.weight`` ``[H*(nope+v), r]`` (per head: the nope rows, then the v
    rows; ignored when the file also has ``attn_kv_b``); ``mlp.gate.e_score_correction.bias``
    becomes ``mlp.gate.e_score_correction_bias`` (zeros ``[E]`` float32 when absent).

    Raises:
        ModelLoadError: a split ``attn_k_b``/``attn_v_b`` of the wrong shape.
    """
    out = {
        k: v
        for k, v in state.items()
        if not k.endswith(
            (".self_attn.k_b_proj.weight", ".self_attn.v_b_proj.weight", ".e_score_correction.bias")
        )
    }
    h, r = config.num_attention_heads, config.kv_lora_rank
    for i in range(config.num_hidden_layers):
        attn, gate = f"model.layers.{i}.self_attn.", f"model.layers.{i}.mlp.gate."
        if attn + "kv_b_proj.weight" not in out:
            k_b, v_b = state[attn + "k_b_proj.weight"], state[attn + "v_b_proj.weight"]
            shapes = (
                ("k_b", k_b, (h, r, config.qk_nope_head_dim)),
                ("v_b", v_b, (h, config.v_head_dim, r)),
            )
            for name, t, want in shapes:
                if tuple(t.shape) != want:
                    raise ModelLoadError(
                        f"blk.{i}.attn_{name}.weight has shape {tuple(t.shape)}, expected {want}"
                    )
            out[attn + "kv_b_proj.weight"] = (
                torch.cat((k_b.transpose(1, 2), v_b), dim=1).reshape(-1, r).contiguous()
            )
        if i >= config.first_k_dense_replace:
            bias = state.get(gate + "e_score_correction.bias")
            out[gate + "e_score_correction_bias"] = (
                bias if bias is not None else torch.zeros(config.n_routed_experts)
            )
    return out
