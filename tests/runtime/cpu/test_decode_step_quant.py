"""The fused CPU decode step (csrc/decodestep.c) over quantized layers against the per-op quantized
path it replaces (``QuantLinear`` / ``FusedQuantProjection`` calling ``_qkernel``).

The fused step runs the same quantized kernel (``csrc/qkernel_core.h``) on the same buffers with
the same activation setting, and rounds and adds biases as ``QuantLinear.forward`` does, so logits
and the KV cache must be equal bit for bit: for GGUF Q4_0 / Q4_1 / Q8_0 blocks and the K-quants
Q4_K / Q6_K (tiny random GGUF files) and structgen's int4-g32 / int4-g64 / int8 quantization of a
Hugging Face folder, with int8 (Q8_0-style) and float32 activations, on the AVX2 and the scalar
code; also where q/k/v or gate/up differ in kind (llama.cpp's Q4_K_M: a Q6_K v next to Q4_K q/k)
and the fused step runs the unfused members as parts of one slot. The per-op quantized path
itself is checked against dequantized weights in tests/runtime/test_gguf_families.py and
cpu/test_quant.py.
"""

from __future__ import annotations

import pytest
import torch

from structgen.runtime.cpu import decode_step, dense
from structgen.runtime.cpu import ops as cpu_ops
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.models.testing import PagedSequences
from structgen.runtime.quantization.linear import QuantLinear, apply_activation_dtype
from tests.runtime.cpu.test_decode_step import _scenario, record_fused_calls

pytestmark = pytest.mark.skipif(
    not (decode_step.kernel_available() and cpu_quant.available()),
    reason="fused decode step or quantized kernel not built",
)


@pytest.fixture(params=["auto", "scalar"])
def isa(request):
    """AVX2 (where the CPU has it) and scalar code, in the fused step and in every per-op kernel."""
    mods = (cpu_ops._ext, dense._ext, decode_step._ext)
    for m in mods:
        m.set_isa(request.param)
    cpu_quant._lib.set_isa(request.param == "auto")
    yield request.param
    for m in mods:
        m.set_isa("auto")
    cpu_quant._lib.set_isa(True)


def _config(family: str):
    from tests.runtime.test_models_families import make_config

    # K = 128 and 256: whole groups of 64 for every matmul
    return make_config(family, heads=4, kv_heads=2, hidden_size=128, intermediate_size=256)


_MODELS: dict = {}


def _model(tmp_path_factory, family: str, quant: str, dtype: torch.dtype):
    """A tiny random ``family`` model quantized as ``quant``: a GGUF type (a file written with the
    ``gguf`` package, loaded with ``quantization="gguf"``) or a structgen method (a Hugging Face
    folder quantized on load)."""
    key = (family, quant, dtype)
    if key not in _MODELS:
        from structgen.runtime.loader import load_model
        from tests.runtime.test_loader import tiny_tokenizer
        from tests.runtime.test_models_families import hf_model

        hf = hf_model(_config(family))
        folder = tmp_path_factory.mktemp(f"{family}_{quant}")
        if quant.startswith("Q"):
            from tests.runtime.test_gguf_families import write_gguf

            path = folder / "model.gguf"
            write_gguf(path, hf, family, quant)
            model = load_model(str(path), dtype, "cpu", quantization="gguf").model
        else:
            hf.save_pretrained(str(folder))
            tiny_tokenizer().save_pretrained(str(folder))
            model = load_model(str(folder), dtype, "cpu", quantization=quant).model
        _MODELS[key] = model
    return _MODELS[key]


def _kinds(model) -> set[tuple[str, int]]:
    return {
        (m.kind, m.group_size)
        for layer in model.model.layers
        for m in layer.modules()
        if isinstance(m, QuantLinear)
    }


def _fused_vs_per_op(model, monkeypatch, q8: bool) -> None:
    """``_scenario`` fused and per-op: logits and cache bit for bit. Every step of at most 8
    tokens runs fused; where every matmul takes int8 activations (``q8``; not Q6_K's groups of
    16) the prefill too (35 tokens, no sequence over ``MAX_FUSED_EXTEND_QUANTIZED``)."""
    calls = record_fused_calls(monkeypatch)
    fused, fused_kv = _scenario(model)
    assert calls == [35] * q8 + [3, 3, 3, 4, 8, 1]
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, per_op_kv = _scenario(model)
    assert len(calls) == 6 + q8
    monkeypatch.setattr(decode_step, "_ENABLED", True)
    for a, b in zip(fused, per_op):
        assert torch.equal(a, b)
    for a, b in zip(fused_kv, per_op_kv):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    "family, quant, kinds",
    [
        ("qwen2", "Q4_0", {("int4", 32)}),
        ("qwen3", "Q4_1", {("int4", 32)}),
        ("qwen2", "Q8_0", {("int8", 32)}),
        ("qwen3", "int4-g32", {("int4", 32)}),
        ("qwen2", "int4-g64", {("int4", 64)}),
        ("qwen2", "int8", {("int8", 128), ("int8", 256)}),
    ],
)
@pytest.mark.parametrize("activation", ["int8", "float32"])
def test_fused_quantized_step_equals_per_op_path(
    tmp_path_factory, monkeypatch, isa, family, quant, kinds, activation
):
    """Qwen2 (q/k/v biases, a sliding layer), Qwen3 (q/k norms): logits and cache bit for bit."""
    model = _model(tmp_path_factory, family, quant, torch.float32)
    assert _kinds(model) == kinds  # every decoder matmul is quantized as named
    apply_activation_dtype(model, activation)
    _fused_vs_per_op(model, monkeypatch, activation == "int8")


@pytest.mark.parametrize("activation", ["int8", "float32"])
def test_fused_quantized_step_q4_k(tmp_path_factory, monkeypatch, isa, activation):
    """GGUF K-quants (Q4_K q/k/v/o/gate/up: int4 rows with float32 scales and mins; Q6_K down
    and embedding: int8 group 16 with float32 scales): logits and cache bit for bit."""
    model = _q4_k_model(tmp_path_factory, torch.float32)
    assert _kinds(model) == {("int4", 32), ("int8", 16)}
    assert model.model.layers[0].self_attn.q_proj.scales.dtype == torch.float32
    apply_activation_dtype(model, activation)
    _fused_vs_per_op(model, monkeypatch, False)  # Q6_K's groups of 16 take float32 activations


def test_fused_quantized_step_q4_k_bf16(tmp_path_factory, monkeypatch):
    """The Q4_K + Q6_K model in bf16 with int8 activations."""
    model = _q4_k_model(tmp_path_factory, torch.bfloat16)
    apply_activation_dtype(model, "int8")
    _fused_vs_per_op(model, monkeypatch, False)


def _q4_k_model(tmp_path_factory, dtype: torch.dtype, mix: str = "fused"):
    """The tiny K-quant Llama of tests/runtime/loader/test_kquant_gguf.py (Q6_K down and
    embedding, Q4_K o and the rest) loaded with ``quantization="gguf"``; ``mix``: ``"fused"``
    Q4_K q/k/v, gate, up (one kind each: they fuse); ``"v"`` llama.cpp's Q4_K_M mix with a Q6_K
    v (q/k/v unfused); ``"up"`` Q4_K q/k/v and a Q6_K up (gate/up unfused)."""
    from structgen.runtime.loader import load_model
    from tests.runtime.loader.test_kquant_gguf import _MIX, write_kquant_gguf

    key = ("llama", "Q4_K", dtype, mix)
    if key not in _MODELS:
        path = tmp_path_factory.mktemp("q4_k") / "model.gguf"
        q4_v = {"attn_v": _MIX["attn_q"]}
        over = {"fused": q4_v, "v": {}, "up": {**q4_v, "ffn_up": _MIX["ffn_down"]}}[mix]
        write_kquant_gguf(path, {**_MIX, **over})
        _MODELS[key] = load_model(str(path), dtype, "cpu", quantization="gguf").model
    return _MODELS[key]


@pytest.mark.parametrize("mix", ["v", "up"])
@pytest.mark.parametrize(
    "dtype, activation",
    [
        (torch.float32, "int8"),
        (torch.float32, "float32"),
        (torch.bfloat16, "int8"),
        (torch.bfloat16, "float32"),
    ],
    ids=["fp32-int8", "fp32-float32", "bf16-int8", "bf16-float32"],
)
def test_fused_quantized_step_mixed_kinds(tmp_path_factory, monkeypatch, mix, dtype, activation):
    """A Q6_K v next to Q4_K q/k (llama.cpp's Q4_K_M), or a Q6_K up next to a Q4_K gate: the
    members stay unfused and the fused step runs each as a part of its slot (the plan is
    accepted), logits and cache bit for bit."""
    model = _q4_k_model(tmp_path_factory, dtype, mix)
    attn, mlp = model.model.layers[0].self_attn, model.model.layers[0].mlp
    assert (attn.v_proj.kind, attn.q_proj.kind) == (
        ("int8", "int4") if mix == "v" else ("int4",) * 2
    )
    assert (mlp.up_proj.kind, mlp.down_proj.kind) == ("int8" if mix == "up" else "int4", "int8")
    assert (attn.qkv is None) == (mix == "v") and (mlp.gate_up is None) == (mix == "up")
    apply_activation_dtype(model, activation)
    _fused_vs_per_op(model, monkeypatch, False)  # Q6_K down: float32 activations


@pytest.mark.parametrize("quant", ["Q4_1", "Q8_0"])
def test_fused_quantized_step_bf16(tmp_path_factory, monkeypatch, quant):
    """A bf16 model: each quantized output rounded to bf16, then its bias added and rounded."""
    model = _model(tmp_path_factory, "qwen2", quant, torch.bfloat16)
    apply_activation_dtype(model, "int8")
    _fused_vs_per_op(model, monkeypatch, True)


def test_changed_activation_setting_rebuilds_the_plan(tmp_path_factory, monkeypatch):
    """Switching int8 activations off after a step rebuilds the plan: the next steps are exact
    (equal to the per-op path under the new setting), never run with the old flag."""
    model = _model(tmp_path_factory, "qwen2", "Q4_1", torch.float32)
    apply_activation_dtype(model, "int8")
    q8, _ = _scenario(model)
    apply_activation_dtype(model, "float32")
    exact, _ = _scenario(model)
    assert not torch.equal(q8[-1], exact[-1])
    _fused_vs_per_op(model, monkeypatch, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_unfused_members_run_as_parts(tmp_path_factory, monkeypatch, dtype):
    """Qwen2 (q/k/v biases, a sliding layer) with its fused q/k/v and gate/up taken away: each
    member runs as a part of its slot (bias added per part, strided output), bit for bit."""
    model = _model(tmp_path_factory, "qwen2", "Q4_1", dtype)
    layers = model.model.layers
    saved = [(layer.self_attn.qkv, layer.mlp.gate_up) for layer in layers]
    assert layers[0].self_attn.q_proj.bias is not None
    try:
        for layer in layers:
            layer.self_attn.qkv = layer.mlp.gate_up = None
        apply_activation_dtype(model, "int8")
        _fused_vs_per_op(model, monkeypatch, True)
    finally:
        for layer, (qkv, gate_up) in zip(layers, saved):
            layer.self_attn.qkv, layer.mlp.gate_up = qkv, gate_up


@pytest.mark.parametrize("activation", ["int8", "float32"])
def test_in_place_change_of_int4_scales_reaches_the_fused_step(
    tmp_path_factory, monkeypatch, activation
):
    """The fused step reads an int4 weight's tile table, a copy of its scales and mins made with
    the plan: scales and mins changed in place between two decode steps on one KV pool (as
    ``load_state_dict`` copies) must rebuild the plan, so the step equals the per-op path, which
    rebuilds its table on the tensors' new version."""
    model = _model(tmp_path_factory, "qwen3", "Q4_1", torch.float32)
    apply_activation_dtype(model, activation)
    mods = [m for m in model.modules() if isinstance(m, QuantLinear)]

    def run() -> torch.Tensor:
        seqs = PagedSequences(model, num_pages=64, page_size=4)
        seqs.step({0: [5, 6, 7, 8, 9]})
        seqs.step({0: [10]})  # fused: the plan and its tile tables are made
        with torch.no_grad():
            for m in mods:  # exact in fp16: x2 then x0.5
                m.scales.mul_(2.0)
                m.mins.mul_(2.0)
        out = seqs.step({0: [11]})[0]
        with torch.no_grad():
            for m in mods:
                m.scales.mul_(0.5)
                m.mins.mul_(0.5)
        return out

    fused = run()
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op = run()
    assert torch.equal(fused, per_op)


def test_fused_int4_tiles_step_with_columns_starting_mid_tile(tmp_path_factory, monkeypatch):
    """Qwen3 with 8 heads of 12 dims on 4 threads: the step splits q/k/v by whole heads (12:
    3 per thread), so thread 1 starts at column 36 of q, an int4 tile weight (FMT_INT4T), inside
    its 8-column tile 4 (k and v, 24 rows, stay int8, so q/k/v run as parts of the slot). The tile
    kernel computes the whole tile and stores only the thread's columns: logits and cache equal
    the per-op path (whole weights) bit for bit."""
    import transformers

    from structgen.runtime.loader import load_model
    from structgen.runtime.quantization.linear import apply_activation_dtype
    from tests.runtime.test_loader import tiny_tokenizer
    from tests.runtime.test_models_families import BASE, hf_model

    kw = dict(BASE, hidden_size=128, intermediate_size=256, num_attention_heads=8)
    config = transformers.Qwen3Config(num_key_value_heads=2, head_dim=12, **kw)
    folder = tmp_path_factory.mktemp("qwen3_d12")
    hf_model(config).save_pretrained(str(folder))
    tiny_tokenizer().save_pretrained(str(folder))
    model = load_model(str(folder), torch.float32, "cpu", quantization="int4-g32").model
    attn = model.model.layers[0].self_attn
    assert (attn.q_proj.kind, attn.q_proj.int4_layout, attn.q_proj.out_features) == (
        "int4",
        "tiles",
        96,
    )
    apply_activation_dtype(model, "int8")
    before = torch.get_num_threads()
    torch.set_num_threads(4)  # team_range(12 heads, 4 threads): heads 0, 3, 6, 9 start a share
    try:
        _fused_vs_per_op(model, monkeypatch, True)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("rows", [16, 33, 64])
@pytest.mark.parametrize(
    "quant, activation",
    [
        ("int4-g32", "int8"),  # int4 tiles (the CPU default), Q8 activations (qwen3: q/k norms)
        ("int4-g64", "float32"),  # int4 tiles, exact float32 activations (qwen2)
        ("Q4_K_M", "int8"),  # int4 rows (fp32 scales, mins), a Q6_K v: q/k/v run as parts
        ("Q8_0", "float32"),  # int8 blocks of 32
    ],
)
def test_wide_quantized_step_in_one_call_equals_chunks_of_8(
    tmp_path_factory, monkeypatch, isa, quant, activation, rows
):
    """Decode steps of 16, 33 and 64 rows in one fused call: the weight tiles (int4 tiles) and
    blocks of weight rows (int4 / int8 rows) are shared by all rows, each row's arithmetic that of
    fused calls of 8 rows and of the per-op path (bit for bit, logits to rounding against the
    per-op path's other output-projection rows)."""
    from tests.runtime.cpu.test_decode_step import wide_fused_vs_chunks

    if quant == "Q4_K_M":
        model = _q4_k_model(tmp_path_factory, torch.float32, "v")
    else:
        family = "qwen3" if quant == "int4-g32" else "qwen2"
        model = _model(tmp_path_factory, family, quant, torch.float32)
    apply_activation_dtype(model, activation)
    wide_fused_vs_chunks(model, monkeypatch, rows)


@pytest.mark.parametrize(
    "family, quant", [("qwen3", "Q4_1"), ("qwen2", "Q8_0"), ("qwen3", "int4-g32")]
)
def test_mixed_quantized_steps_equal_per_op_path(tmp_path_factory, monkeypatch, isa, family, quant):
    """Decode rows mixed with short extensions (T = 24, 19, 81: fused, in calls of up to 64 rows)
    with int8 activations (the default engine's Q4_1 among them): logits of every token and the
    K/V cache bit for bit against the per-op path over the same steps; a sequence bringing 65
    tokens (over ``MAX_FUSED_EXTEND_QUANTIZED``) keeps its step per-op."""
    from tests.runtime.cpu.test_decode_step import mixed_steps

    model = _model(tmp_path_factory, family, quant, torch.float32)
    apply_activation_dtype(model, "int8")
    calls = record_fused_calls(monkeypatch)
    most = decode_step.MAX_FUSED_EXTEND_QUANTIZED
    fused, fused_kv = mixed_steps(model, most)
    assert calls == [24, 19, 64, 17]
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, per_op_kv = mixed_steps(model, most)
    monkeypatch.setattr(decode_step, "_ENABLED", True)
    assert len(calls) == 4
    for a, b in zip(fused, per_op):
        assert torch.equal(a, b)
    for a, b in zip(fused_kv, per_op_kv):
        assert torch.equal(a, b)
