"""``ModelConfig`` from GGUF metadata equals the transformers config the file was written from,
on every field the model code reads (and on what the model derives from them per layer)."""

from __future__ import annotations

import numpy as np
import pytest

from structgen.errors import ModelLoadError
from structgen.runtime.loader.gguf_file import GGUFFile
from structgen.runtime.loader.gguf_loader import gguf_config
from structgen.runtime.models import get_model_class
from structgen.runtime.models.config import ModelConfig
from structgen.runtime.models.decoder import head_dim_of, layer_window
from structgen.runtime.models.layers import _rope_type, rope_theta
from structgen.runtime.models.moe import is_sparse_layer
from tests.runtime.test_gguf_families import FAMILIES, family_config, write_gguf
from tests.runtime.test_loader import tiny_hf, write_tiny_gguf
from tests.runtime.test_models_families import hf_model

# every config attribute structgen/runtime/models and the engine read (besides the per-layer
# derivations checked below)
USED = [
    "model_type",
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "rms_norm_eps",
    "tie_word_embeddings",
    "hidden_act",
    "attention_bias",
    "mlp_bias",
    "layer_types",
    "num_local_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "decoder_sparse_step",
    "mlp_only_layers",
    "norm_topk_prob",
    "qkv_bias",
    "eos_token_id",
]


def _config_of(path) -> ModelConfig:
    g = GGUFFile(str(path))
    try:
        return gguf_config(g)
    finally:
        g.close()


def _check_equal(ours: ModelConfig, ref, hf_class: str) -> None:
    assert ours.architectures == [hf_class]
    for name in USED:
        if hasattr(ref, name):
            want = getattr(ref, name)
            if isinstance(want, float):  # GGUF stores float32
                want = float(np.float32(want))
            assert getattr(ours, name) == want, name
    assert head_dim_of(ours) == head_dim_of(ref)
    assert rope_theta(ours) == rope_theta(ref)
    assert _rope_type(ours) == _rope_type(ref) == "default"
    cls = get_model_class(ours.architectures[0])
    for i in range(ref.num_hidden_layers):
        assert layer_window(ours, i) == layer_window(ref, i)
        assert vars(cls.attention_spec(ours, i)) == vars(cls.attention_spec(ref, i))
        if ours.num_experts:
            assert is_sparse_layer(ours, i) == is_sparse_layer(ref, i)


@pytest.mark.parametrize("family", FAMILIES)
def test_gguf_config_equals_transformers(tmp_path, family):
    ref = family_config(family)
    path = tmp_path / f"{family}.gguf"
    hf = hf_model(ref)
    write_gguf(path, hf, family)
    ours = _config_of(path)
    assert isinstance(ours, ModelConfig)
    _check_equal(ours, ref, type(hf).__name__)


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_gguf_llama_config_equals_transformers(tmp_path, tie):
    hf = tiny_hf(tie)
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, hf)
    ours = _config_of(path)
    ref = hf.config
    ref.rope_parameters = {"rope_type": "default", "rope_theta": 500.0}  # the file's freq_base
    _check_equal(ours, ref, "LlamaForCausalLM")
    assert ours.tie_word_embeddings is tie


def test_model_config_unknown_architecture():
    with pytest.raises(ModelLoadError, match="FooForCausalLM"):
        ModelConfig(
            architectures=["FooForCausalLM"],
            vocab_size=8,
            hidden_size=4,
            intermediate_size=8,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
            head_dim=4,
            max_position_embeddings=16,
            rms_norm_eps=1e-5,
        )
