"""Tiny models saved as Hugging Face folders for the tensor-/data-parallel tests."""

from __future__ import annotations

import pytest

from benchmarks.support import save_tiny

_SPECS = {
    "llama_gqa": ("llama", 4, 2, False, 0),
    "llama_kv1_tied": ("llama", 4, 1, True, 1),
    "mixtral": ("mixtral", 4, 2, False, 0),
    "qwen2_moe": ("qwen2_moe", 4, 2, False, 0),
}


class _LazyModels(dict):
    """Creates each model folder on first use."""

    def __init__(self, root) -> None:
        super().__init__()
        self.root = root

    def __missing__(self, name: str) -> str:
        family, heads, kv, tie, extra = _SPECS[name]
        self[name] = save_tiny(self.root / name, family, heads, kv, tie=tie, extra_vocab=extra)
        return self[name]


@pytest.fixture(scope="session")
def tiny_model_dirs(tmp_path_factory):
    """name -> folder (made on first use): GQA Llama (kv 2), MQA Llama (kv 1 < tp, tied
    embeddings, odd vocabulary), Mixtral (4 experts, top-2), Qwen2-MoE (shared expert,
    one dense layer)."""
    return _LazyModels(tmp_path_factory.mktemp("tp_models"))
