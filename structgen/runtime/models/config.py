"""``ModelConfig``: structgen's own model config, filled from GGUF metadata.

A Hugging Face folder is described by its transformers config (``config.json``); a GGUF
file is described by this dataclass, so loading one does not import transformers. The
model code reads both the same way: the fields are the transformers attribute names the
model classes read (``hidden_size``, ``num_key_value_heads``, ``rope_parameters``, ...),
with the values transformers' config class of the family would hold for the same
arguments (its derived defaults included: ``layer_types`` for the Qwen families,
``rope_parameters`` in transformers v5's form).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from structgen.errors import ModelLoadError

__all__ = ["ModelConfig", "MODEL_TYPES"]

# architectures name -> transformers model_type of that family
MODEL_TYPES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MixtralForCausalLM": "mixtral",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe",
}
# families whose transformers config lists every layer's attention kind (all full here:
# GGUF metadata has no sliding-window keys for them)
_LAYER_TYPES = {"qwen2", "qwen3", "qwen2_moe"}


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of a decoder-only model, under transformers' attribute names.

    Attributes:
        architectures: ``[class name]``, e.g. ``["LlamaForCausalLM"]`` (the model registry's
            key, :data:`MODEL_TYPES`).
        model_type: transformers' family name (``"llama"``, ``"qwen2_moe"``, ...), derived
            from ``architectures``.
        vocab_size: rows of the embedding (and of the LM head).
        hidden_size: model width.
        intermediate_size: width of the (dense) MLP.
        num_hidden_layers: decoder layers.
        num_attention_heads: query heads.
        num_key_value_heads: key/value heads (GQA when fewer than the query heads).
        head_dim: width of one head.
        max_position_embeddings: longest context the model was trained for.
        rms_norm_eps: RMSNorm epsilon.
        rope_parameters: ``{"rope_type": "default", "rope_theta": base}`` (transformers v5).
        tie_word_embeddings: the LM head reuses the embedding.
        hidden_act: MLP activation (``"silu"``).
        attention_bias: q/k/v/o biases (Llama, Qwen3); Qwen2 always has q/k/v biases.
        mlp_bias: MLP biases (Llama).
        sliding_window: attention window, or None.
        layer_types: ``"full_attention"`` per layer for the families whose transformers
            config has the field (Qwen2, Qwen3, Qwen2-MoE), else None.
        num_local_experts: routed experts per layer (0 for dense models); Mixtral's name.
        num_experts: the same count under Qwen-MoE's name (either may be given).
        num_experts_per_tok: experts each token is routed to.
        moe_intermediate_size: width of one routed expert.
        shared_expert_intermediate_size: Qwen2-MoE's shared expert width (0: none).
        decoder_sparse_step: Qwen-MoE: every n-th layer is sparse.
        mlp_only_layers: Qwen-MoE layers with a dense MLP.
        norm_topk_prob: renormalise the top-k routing weights.
        qkv_bias: Qwen2-MoE's q/k/v biases.
        bos_token_id: beginning-of-sequence id, or None.
        eos_token_id: end-of-sequence id (or ids), or None.
        pad_token_id: padding id, or None.

    Raises:
        ModelLoadError: at construction, an architecture this config does not describe.
    """

    architectures: list[str]
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float
    rope_parameters: dict[str, Any] = field(
        default_factory=lambda: {"rope_type": "default", "rope_theta": 10000.0}
    )
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    attention_bias: bool = False
    mlp_bias: bool = False
    sliding_window: int | None = None
    layer_types: list[str] | None = None
    num_local_experts: int = 0
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    decoder_sparse_step: int = 1
    mlp_only_layers: list[int] = field(default_factory=list)
    norm_topk_prob: bool = False
    qkv_bias: bool = True
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    model_type: str = field(init=False)

    def __post_init__(self) -> None:
        arch = self.architectures[0] if self.architectures else None
        if arch not in MODEL_TYPES:
            raise ModelLoadError(
                f"ModelConfig: unsupported architectures {self.architectures!r} "
                f"(supported: {', '.join(sorted(MODEL_TYPES))})"
            )
        model_type = MODEL_TYPES[arch]
        object.__setattr__(self, "model_type", model_type)
        # one count under both names, as transformers' attribute maps alias them
        experts = self.num_local_experts or self.num_experts
        object.__setattr__(self, "num_local_experts", experts)
        object.__setattr__(self, "num_experts", experts)
        if self.layer_types is None and model_type in _LAYER_TYPES:
            object.__setattr__(self, "layer_types", ["full_attention"] * self.num_hidden_layers)

    @property
    def rope_theta(self) -> float:
        """The RoPE base (``rope_parameters["rope_theta"]``)."""
        return float(self.rope_parameters.get("rope_theta", 10000.0))

    def to_dict(self) -> dict[str, Any]:
        """Every field by name (``model_type`` included), as transformers' ``to_dict`` gives."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
