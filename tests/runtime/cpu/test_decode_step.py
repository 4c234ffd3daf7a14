"""The fused CPU decode step (csrc/decodestep.c) against the per-op path it replaces.

It runs the same kernels in the same order, so logits and the KV cache must be equal bit for
bit; the per-op path itself is checked against transformers in tests/runtime/test_models_families.py
and cpu/test_ops.py.
"""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.cpu import decode_step, dense
from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.models.attention import attention_backend
from structgen.runtime.models.testing import PagedSequences

pytestmark = pytest.mark.skipif(
    not decode_step.kernel_available(), reason="fused decode step not built"
)


def record_fused_calls(monkeypatch, module=decode_step) -> list[int]:
    """Wrap the fused step's C entry point as ``module`` calls it (``decode_step``'s, or
    ``layer_table``'s: a CpuModel's): the returned list gets each call's row count."""
    calls: list[int] = []
    kernel = module._ext.decode_layers
    monkeypatch.setattr(
        module,
        "_ext",
        type(
            "Ext", (), {"decode_layers": staticmethod(lambda *a: calls.append(a[4]) or kernel(*a))}
        ),
    )
    return calls


@pytest.fixture(params=["auto", "scalar"])
def isa(request):
    """Both paths with the AVX2 loops (where the CPU has them) and with the portable scalar code."""
    mods = (cpu_ops._ext, dense._ext, decode_step._ext)
    for m in mods:
        m.set_isa(request.param)
    yield request.param
    for m in mods:
        m.set_isa("auto")


def _config(family: str):
    import transformers

    from tests.runtime.test_models_families import BASE, make_config

    if family == "llama":  # biases on all four attention projections and the MLP
        return transformers.LlamaConfig(
            **BASE, num_attention_heads=4, num_key_value_heads=2, attention_bias=True, mlp_bias=True
        )
    return make_config(family, heads=6, kv_heads=2)


_MODELS: dict = {}


def _model(tmp_path_factory, family: str, dtype: torch.dtype):
    """A tiny random model of ``family`` loaded by structgen's loader (q/k/v and gate/up fused)."""
    key = (family, dtype)
    if key not in _MODELS:
        from structgen.runtime.loader import load_model
        from tests.runtime.test_loader import tiny_tokenizer
        from tests.runtime.test_models_families import hf_model

        folder = tmp_path_factory.mktemp(f"{family}_{str(dtype)[6:]}")
        hf_model(_config(family)).save_pretrained(str(folder))
        tiny_tokenizer().save_pretrained(str(folder))
        _MODELS[key] = load_model(str(folder), dtype, "cpu").model
    return _MODELS[key]


def _scenario(model, kv_dtype=None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Prefill three sequences (35 tokens: per-op path), then steps of 3, 4, 8 and 1 tokens (fused
    where enabled): decode rows, ragged extensions, a full 8-row step. Logits of every step, and
    the K/V cache at the end."""
    seqs = PagedSequences(model, num_pages=64, page_size=4, kv_dtype=kv_dtype)
    prompts = {
        0: [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 60, 61],
        1: [5, 17, 99, 3, 42],
        2: list(range(30, 47)),
    }
    logits = [torch.cat(list(seqs.step(prompts, all_logits=True).values()))]
    last = {s: int(logits[0][-1].argmax()) for s in prompts}
    for _ in range(
        3
    ):  # decode rows (T = 3); the windows of Mistral (5) and Qwen2 (6) start to slide
        out = seqs.step({s: [(last[s] + s) % 250] for s in prompts})
        logits.append(torch.stack([out[s] for s in prompts]))
        last = {s: int(out[s].argmax()) for s in prompts}
    for chunks in ({0: [3, 4, 5], 2: [6]}, {1: list(range(100, 108))}, {2: [9]}):
        out = seqs.step(chunks, all_logits=True)
        logits.append(torch.cat([out[s] for s in chunks]))
    return logits, [t.clone() for t in seqs.kv.k + seqs.kv.v]


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3", "mistral"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_step_equals_per_op_path(tmp_path_factory, monkeypatch, isa, family, dtype):
    """Llama with q/k/v/o and MLP biases, Qwen2 (q/k/v biases, a sliding layer), Qwen3 (per-head
    q/k norm), Mistral (a window of 5): the same logits and cache, bit for bit, in fp32 and bf16."""
    model = _model(tmp_path_factory, family, dtype)
    calls = record_fused_calls(monkeypatch)
    fused, fused_kv = _scenario(model)
    assert calls == [
        3,
        3,
        3,
        4,
        8,
        1,
    ]  # every step of at most 8 tokens ran fused; the prefill did not
    fused_again, _ = _scenario(model)  # a new KV pool: the plan is rebuilt for it
    assert len(calls) == 12
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, per_op_kv = _scenario(model)
    assert len(calls) == 12
    for a, b, c in zip(fused, per_op, fused_again):
        assert torch.equal(a, b) and torch.equal(a, c)
    for a, b in zip(fused_kv, per_op_kv):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kv_dtype", [torch.bfloat16, torch.float16])
def test_fused_step_over_a_narrower_cache_equals_per_op_path(
    tmp_path_factory, monkeypatch, isa, kv_dtype
):
    """An fp32 model over a 16-bit cache (kv_cache_dtype): the fused step and the per-op path
    (its C ops, no torch fallback) store and read the same rounded K/V, bit for bit."""
    model = _model(tmp_path_factory, "qwen2", torch.float32)
    monkeypatch.setattr(cpu_ops, "rope_store_kv_ref", None)  # the C kernels must run
    monkeypatch.setattr(cpu_ops, "_paged_attention_ref", None)
    calls = record_fused_calls(monkeypatch)
    fused, fused_kv = _scenario(model, kv_dtype)
    assert calls == [3, 3, 3, 4, 8, 1]
    assert all(t.dtype == kv_dtype for t in fused_kv)
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, per_op_kv = _scenario(model, kv_dtype)
    assert len(calls) == 6
    for a, b in zip(fused, per_op):
        assert torch.equal(a, b)
    for a, b in zip(fused_kv, per_op_kv):
        assert torch.equal(a, b)


def test_replaced_weights_rebuild_or_drop_the_plan(tmp_path_factory, monkeypatch):
    """Weights loaded in place are seen through the plan's pointers; replaced parameters
    (``load_state_dict(assign=True)``) unfuse the projections, and the step falls back to the
    per-op path: never a stale pointer."""
    model = _model(tmp_path_factory, "qwen3", torch.float32)
    before, _ = _scenario(model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    new = {k: v + 0.05 * torch.randn(v.shape, generator=g) for k, v in state.items()}
    try:
        model.load_state_dict(new)  # copy_ into the same storage: the plan stays valid
        in_place, _ = _scenario(model)
        monkeypatch.setattr(decode_step, "_ENABLED", False)
        in_place_ref, _ = _scenario(model)
        assert not torch.equal(in_place[-1], before[-1])
        assert all(torch.equal(a, b) for a, b in zip(in_place, in_place_ref))
        monkeypatch.setattr(decode_step, "_ENABLED", True)
        model.load_state_dict(
            {k: v.clone() for k, v in state.items()}, assign=True
        )  # new Parameters
        layer = model.model.layers[0]
        assert not layer.self_attn.qkv.valid()
        t = torch.zeros(1, model.config.hidden_size)
        cos = sin = torch.zeros(1, 1, model.head_dim)
        kv = model.make_kv_pool(8, 4)
        from structgen.runtime.forward_batch import ForwardBatch

        batch = ForwardBatch.build([[1]], [0], [[1]], 4)
        assert decode_step.decode_step(model, t, cos, sin, batch, kv) is None
        after, _ = _scenario(model)
        assert all(torch.equal(a, b) for a, b in zip(after, before))
    finally:
        _MODELS.pop(("qwen3", torch.float32), None)  # unfused now: not for other tests


def test_steps_outside_the_fused_step_return_none(tmp_path_factory):
    """More than 8 tokens of one sequence, another attention backend, or a model without fused
    projections: None, and nothing is written."""
    from structgen.runtime.forward_batch import ForwardBatch

    model = _model(tmp_path_factory, "mistral", torch.float32)
    kv = model.make_kv_pool(8, 4)
    hidden, d = model.config.hidden_size, model.head_dim

    def call(t):
        batch = ForwardBatch.build([list(range(1, t + 1))], [0], [[1, 2, 3]], 4)
        x = torch.randn(t, hidden)
        return decode_step.decode_step(
            model, x, torch.zeros(t, 1, d), torch.zeros(t, 1, d), batch, kv
        )

    assert call(1) is not None
    kv_before = [x.clone() for x in kv.k + kv.v]
    assert call(9) is None
    with attention_backend("torch"):
        assert call(1) is None
    saved = [layer.mlp.gate_up for layer in model.model.layers]
    model.model.layers[-1].mlp.gate_up = None  # the last layer computes gate and up separately
    try:
        assert call(1) is None
    finally:
        for layer, gate_up in zip(model.model.layers, saved):
            layer.mlp.gate_up = gate_up
    assert all(torch.equal(a, b) for a, b in zip(kv.k + kv.v, kv_before))
    assert call(1) is not None


def _wide_decode(
    model, rows: int = 12, group: int | None = None
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Prefill ``rows`` sequences of different lengths (sequence 0 past one attention key chunk,
    300 tokens, where ``rows`` is over 12), then 3 decode steps of one token a sequence, each as
    engine steps of at most ``group`` rows (None: one step of all rows; 8: the float kernel's row
    blocks, whose rounding depends on the rows a call holds). Logits of every decode step, and the
    K/V cache at the end."""
    seqs = PagedSequences(model, num_pages=8 * rows + 32, page_size=16)
    prompts = {s: [(7 * s + j) % 250 + 1 for j in range(1 + s)] for s in range(rows)}
    if rows > 12:
        prompts[0] = [(5 * j) % 250 + 1 for j in range(300)]
    out = seqs.step(prompts)
    last = {s: int(out[s].argmax()) for s in prompts}
    logits = []
    group = group or rows
    for _ in range(3):
        out = {}
        for g in range(0, rows, group):
            rows_g = range(g, min(g + group, rows))
            out.update(seqs.step({s: [(last[s] + s) % 250] for s in rows_g}))
        logits.append(torch.stack([out[s] for s in prompts]))
        last = {s: int(out[s].argmax()) for s in prompts}
    return logits, [t.clone() for t in seqs.kv.k + seqs.kv.v]


def test_decode_rows_over_max_rows_run_fused_in_one_call(tmp_path_factory, monkeypatch):
    """12 decode rows run as one fused call: the K/V cache equal bit for bit to the per-op path's
    over the same rows in steps of 8 and 4 (over 8 rows, the per-op path's float matmuls are
    torch's, another rounding), the logits to rounding (the output projection of 12 rows is
    torch's too); the prefill (many tokens a sequence) stays on the per-op path."""
    model = _model(tmp_path_factory, "qwen2", torch.float32)  # a sliding layer too
    calls = record_fused_calls(monkeypatch)
    fused, fused_kv = _wide_decode(model, 12)
    assert calls == [12] * 3
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, per_op_kv = _wide_decode(model, 12, dense.MAX_ROWS)
    assert len(calls) == 3
    for a, b in zip(fused, per_op):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for a, b in zip(fused_kv, per_op_kv):
        assert torch.equal(a, b)


def wide_fused_vs_chunks(model, monkeypatch, rows: int) -> None:
    """``rows`` decode rows a step in one fused call against the same step in fused calls of 8
    rows (``MAX_STEP_ROWS`` patched to 8: the previous rule, each row's arithmetic that of the
    per-op kernels in steps of at most 8 tokens): logits and K/V cache bit for bit; and against
    the per-op path in engine steps of 8 rows: the cache bit for bit, the logits to rounding (the
    output projection runs over other rows)."""
    calls = record_fused_calls(monkeypatch)
    fused, fused_kv = _wide_decode(model, rows)
    assert calls == [rows] * 3  # one call a step
    monkeypatch.setattr(decode_step, "MAX_STEP_ROWS", dense.MAX_ROWS)
    chunked, chunked_kv = _wide_decode(model, rows)
    assert calls[3:] == [min(dense.MAX_ROWS, rows - i) for i in range(0, rows, 8)] * 3
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, per_op_kv = _wide_decode(model, rows, dense.MAX_ROWS)
    monkeypatch.setattr(decode_step, "_ENABLED", True)
    for a, b, c in zip(fused, chunked, per_op):
        assert torch.equal(a, b)
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)
    for a, b, c in zip(fused_kv, chunked_kv, per_op_kv):
        assert torch.equal(a, b) and torch.equal(a, c)


@pytest.mark.parametrize("rows", [16, 33, 64])
@pytest.mark.parametrize("family, dtype", [("qwen2", torch.float32), ("llama", torch.bfloat16)])
def test_wide_decode_step_in_one_call_equals_chunks_of_8(
    tmp_path_factory, monkeypatch, isa, family, dtype, rows
):
    """Float weights: Qwen2 (a sliding layer) in fp32, Llama with biases in bf16."""
    wide_fused_vs_chunks(_model(tmp_path_factory, family, dtype), monkeypatch, rows)


# Steps mixing decode rows with short extensions (extraction's jump-forward runs and scoring
# requests): sequence -> tokens it brings. T = 24, T = 19, and T = 81 (two calls: sequence 31's
# two tokens on rows 63 and 64, either side of the call boundary).
MIXED_STEPS = (
    {**{s: 4 for s in range(4)}, **{s: 1 for s in range(4, 12)}},
    {0: 8, **{s: 1 for s in range(1, 12)}},
    {0: 3, **{s: 2 for s in range(1, 40)}},
)


def mixed_steps(model, most: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Prefill 40 sequences, one of 70 tokens and the others of 9-24 (the per-op path), then the
    :data:`MIXED_STEPS`, and one step where a sequence brings ``most + 1`` tokens beside 11 decode
    rows (``most``: the fused rule's longest extension, so per-op). Logits of every token of the
    last four steps, and the K/V cache at the end."""
    seqs = PagedSequences(model, num_pages=192, page_size=16)
    prompts = {s: [(11 * s + j) % 250 + 1 for j in range(9 + s % 16)] for s in range(40)}
    prompts[0] = [(5 * j) % 250 + 1 for j in range(70)]
    seqs.step(prompts)
    logits = []
    for i, step in enumerate((*MIXED_STEPS, {0: most + 1, **{s: 1 for s in range(1, 12)}})):
        chunks = {s: [(7 * s + 3 * j + i) % 250 + 1 for j in range(n)] for s, n in step.items()}
        out = seqs.step(chunks, all_logits=True)
        logits.append(torch.cat([out[s] for s in chunks]))
    return logits, [t.clone() for t in seqs.kv.k + seqs.kv.v]


def test_decode_rows_with_short_extensions_run_fused(tmp_path_factory, monkeypatch):
    """Over 8 tokens, a step of float weights runs fused while no sequence brings more than
    ``MAX_FUSED_EXTEND`` (8) tokens, in calls of up to 64 rows; a 9-token extension keeps the step
    per-op. Logits and K/V cache to rounding against the per-op path (its matmuls over 8 rows are
    torch's); quantized weights (up to 64 tokens, bit for bit) in test_decode_step_quant.py."""
    model = _model(tmp_path_factory, "qwen2", torch.float32)  # a sliding layer too
    calls = record_fused_calls(monkeypatch)
    fused, fused_kv = mixed_steps(model, decode_step.MAX_FUSED_EXTEND)
    assert calls == [24, 19, 64, 17]
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, per_op_kv = mixed_steps(model, decode_step.MAX_FUSED_EXTEND)
    assert len(calls) == 4
    for a, b in zip(fused, per_op):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    for a, b in zip(fused_kv, per_op_kv):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def _rows_behind_a_prefix(model, shared: bool) -> list[torch.Tensor]:
    """10 sequences behind one 32-token prefix (pages of 4): with ``shared``, its pages cached once
    and forked into every page table (the radix cache's sharing), else each sequence's own copy.
    Then each sequence's own suffix of 3 .. 39 tokens in one ragged step, and 3 decode steps of all
    10 rows. Logits of every step."""
    seqs = PagedSequences(model, num_pages=160, page_size=4)
    prefix = [(3 * j) % 250 + 1 for j in range(32)]
    logits = []
    if shared:
        logits.append(seqs.step({0: prefix}, all_logits=True)[0])
        for s in range(1, 10):
            seqs.tokens[s], seqs.pages[s] = list(prefix), list(seqs.pages[0])
    else:
        logits += [seqs.step({s: prefix}, all_logits=True)[s] for s in range(10)][:1]
    out = seqs.step({s: [(7 * s + j) % 250 + 1 for j in range(3 + 4 * s)] for s in range(10)})
    logits.append(torch.stack([out[s] for s in range(10)]))
    for _ in range(3):
        out = seqs.step({s: [int(out[s].argmax())] for s in range(10)})
        logits.append(torch.stack([out[s] for s in range(10)]))
    return logits


@pytest.mark.parametrize("family, dtype", [("qwen2", torch.float32), ("llama", torch.bfloat16)])
def test_decode_rows_sharing_prefix_pages_equal_rows_over_copies(
    tmp_path_factory, monkeypatch, isa, family, dtype
):
    """Rows of sequences whose page tables share a cached prefix's pages (attended in tiles of
    rows, each shared K/V block loaded once for them: the prefill's per-op kernel and the fused
    decode step) give, bit for bit, the logits of the same rows over their own copies of it."""
    model = _model(tmp_path_factory, family, dtype)
    calls = record_fused_calls(monkeypatch)
    shared = _rows_behind_a_prefix(model, shared=True)
    assert calls == [10, 10, 10]
    copies = _rows_behind_a_prefix(model, shared=False)
    for a, b in zip(shared, copies, strict=True):
        assert torch.equal(a, b)
