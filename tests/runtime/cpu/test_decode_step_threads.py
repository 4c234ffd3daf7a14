"""The fused CPU decode step's one OpenMP parallel region against its own 1-thread run.

All layers of a step run in one region: each thread owns a share of every op (whole heads of
q/k/v, rows of o and down, columns of gate/up, attention work items) and the threads meet at a
barrier wherever an op reads what others wrote. A missing barrier would let a thread read a
buffer before its owner has written it. The test hook ``set_stagger`` makes one thread sleep at
the start of every phase of the step, so such a read sees stale data every time instead of in a
rare race: with it, steps on 2 and 3 threads must equal the 1-thread step (itself equal to the
per-op path: test_decode_step.py) bit for bit, logits, residual and KV cache.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from structgen.runtime.cpu import decode_step
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.forward_batch import ForwardBatch
from tests.runtime.cpu.test_decode_step import _model, _scenario

pytestmark = pytest.mark.skipif(
    not (decode_step.kernel_available() and cpu_quant.available()),
    reason="fused decode step or quantized kernel not built",
)

STAGGER_US = 3000  # per phase: far longer than any phase of these tiny models takes


@contextlib.contextmanager
def _threads(n: int, stagger_thread: int = -1):
    """torch (hence the fused step) on ``n`` threads, thread ``stagger_thread`` late each phase."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    decode_step._ext.set_stagger(stagger_thread, STAGGER_US if stagger_thread >= 0 else 0)
    try:
        yield
    finally:
        decode_step._ext.set_stagger(-1, 0)
        torch.set_num_threads(before)


def _quant_model(tmp_path_factory, mix: str):
    from structgen.runtime.quantization.linear import apply_activation_dtype
    from tests.runtime.cpu.test_decode_step_quant import _q4_k_model

    return apply_activation_dtype(_q4_k_model(tmp_path_factory, torch.float32, mix), "int8")


def _long_steps(model) -> list[torch.Tensor]:
    """Steps of 6 tokens over three sequences of 300, 40 and 700 cached positions (random K/V):
    attention over several key chunks, merged across threads. The outputs, residuals and KV."""
    g = torch.Generator().manual_seed(0)
    page, hidden, d = 16, model.config.hidden_size, model.head_dim
    kv = model.make_kv_pool(128, page)
    for t in kv.k + kv.v:
        t.copy_(torch.randn(t.shape, generator=g).to(t.dtype))
    prefix, new = [300, 40, 700], [2, 1, 3]
    tables, start = [], 1
    for p, n in zip(prefix, new):
        count = (p + n + page - 1) // page
        tables.append(list(range(start, start + count)))
        start += count
    batch = ForwardBatch.build([list(range(1, n + 1)) for n in new], prefix, tables, page)
    t = sum(new)
    out = []
    for _ in range(2):
        x = torch.randn(t, hidden, generator=g).to(model.dtype)
        cos, sin = (torch.randn(t, 1, d, generator=g).to(model.dtype) for _ in range(2))
        mlp = decode_step.decode_step(model, x, cos, sin, batch, kv)
        assert mlp is not None
        out += [mlp, x]
    return out + [t.clone() for t in kv.k + kv.v]


def _equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize(
    "kind", ["qwen2-fp32", "mistral-bf16", "q4_k_m-v", "q4_k-up"], ids=lambda k: k
)
@pytest.mark.parametrize("threads, stagger", [(2, 0), (2, 1), (3, 2)])
def test_step_equals_the_one_thread_step(tmp_path_factory, kind, threads, stagger):
    """Float (a sliding layer; bf16 with a window of 5) and quantized models (Q4_K with a Q6_K v
    or up: parts of a slot split among threads), short decode and extension steps and long
    contexts: equal to the 1-thread run bit for bit, whichever thread comes late."""
    if kind.startswith("q4"):
        model = _quant_model(tmp_path_factory, kind.split("-")[1])
    else:
        family, dtype = kind.split("-")
        dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        model = _model(tmp_path_factory, family, dtype)
    with _threads(1):
        ref_logits, ref_kv = _scenario(model)
        ref_long = _long_steps(model)
    with _threads(threads, stagger):
        logits, kv = _scenario(model)
        long = _long_steps(model)
    assert _equal(logits, ref_logits) and _equal(kv, ref_kv)
    assert _equal(long, ref_long)
