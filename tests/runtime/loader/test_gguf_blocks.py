"""GGUF weights built in numpy at load (``structgen/runtime/loader/gguf_blocks.py``, #21 seam 2):
the tile tables equal their definition, the engine's quantized modules hold the tables before
the first forward (which builds none), and the engine's greedy tokens and every step's logits
are bit for bit those of the same engine whose tables are rebuilt at the first forward by
``formats`` (the path before tables were made at load).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from structgen import Engine, SamplingParams
from structgen.runtime.cpu import quant as cpu_quant
from structgen.runtime.loader.gguf_blocks import (
    int4_scale_tiles_array,
    int8_scale_tiles_array,
    int8_tiles_array,
    repack_blocks,
)
from structgen.runtime.quantization import linear as quant_linear
from structgen.runtime.quantization.linear import FusedQuantProjection, QuantEmbedding, QuantLinear


def _table_by_definition(scales: np.ndarray, mins: np.ndarray) -> np.ndarray:
    """``[t, g, 0, r] = mins[8 t + r, g]``, ``[t, g, 1, r] = scales[8 t + r, g]``, zero padded."""
    n, g = scales.shape
    out = np.zeros(((n + 7) // 8, g, 2, 8), scales.dtype)
    for row in range(n):
        for grp in range(g):
            out[row // 8, grp, 0, row % 8] = mins[row, grp]
            out[row // 8, grp, 1, row % 8] = scales[row, grp]
    return out


@pytest.mark.parametrize("n", [1, 8, 13, 24])
def test_int4_scale_tiles_array_is_the_definition(n):
    rng = np.random.default_rng(n)
    for dtype in (np.float16, np.float32):
        s, m = (rng.standard_normal((n, 3)).astype(dtype) for _ in range(2))
        assert np.array_equal(int4_scale_tiles_array(s, m), _table_by_definition(s, m))
    with pytest.raises(ValueError, match="int4_scale_tiles"):
        int4_scale_tiles_array(s, m.astype(np.float16))
    with pytest.raises(ValueError, match="out must be"):
        int4_scale_tiles_array(s, m, out=np.empty((1, 3, 2, 8), np.float16))


@pytest.mark.parametrize("n", [5, 16, 37])
def test_int8_tile_arrays_equal_with_and_without_the_extension(monkeypatch, n):
    from structgen.runtime.loader import gguf_blocks

    rng = np.random.default_rng(n)
    q = rng.integers(-127, 128, (n, 64), dtype=np.int8)
    s = rng.standard_normal((n, 2)).astype(np.float16)
    built = int8_tiles_array(q), int8_scale_tiles_array(s)
    monkeypatch.setattr(gguf_blocks, "_qkernel", lambda: None)  # numpy's strided copies
    ref = int8_tiles_array(q), int8_scale_tiles_array(s)
    assert all(np.array_equal(a, b) for a, b in zip(built, ref))
    nt = (n + 15) // 16
    view = ref[0].reshape(nt, 2, 8, 16, 4)  # [t, b, j, c, i] = q[16 t + c, 32 b + 4 j + i]
    for row in range(nt * 16):  # rows past n: zeros
        got = view[row // 16, :, :, row % 16, :].reshape(64)
        assert np.array_equal(got, q[row] if row < n else np.zeros(64, np.int8))
        want = s[row].astype(np.float32) if row < n else np.zeros(2, np.float32)
        assert np.array_equal(ref[1][row // 16, :, row % 16], want)


def test_repack_blocks_members_and_errors():
    import gguf

    rng = np.random.default_rng(3)
    raws = [
        np.ascontiguousarray(
            gguf.quants.quantize(
                rng.standard_normal((n, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q4_1
            )
        ).view(np.uint8)
        for n in (16, 13)
    ]
    group = repack_blocks([(raws[0], (16, 64), None), (raws[1], (13, 64), None)], "Q4_1")
    assert group.q.shape == (32, 32) and group.scale_tiles.shape == (4, 2, 2, 8)
    for i in range(2):
        _q, s, m, t = group.member(i)
        assert np.array_equal(t, _table_by_definition(s, m))
    with pytest.raises(ValueError, match="not one of"):
        repack_blocks([(raws[0], (16, 64), None)], "Q5_0")
    with pytest.raises(ValueError, match="bytes"):
        repack_blocks([(raws[0][:-1], (16, 64), None)], "Q4_1")
    with pytest.raises(ValueError, match="K % 32"):
        repack_blocks([(raws[0], (16, 64), None), (raws[1], (13, 32), None)], "Q4_1")


def _gguf(tmp_path, qtype: str) -> str:
    from tests.runtime.test_gguf_families import write_gguf
    from tests.runtime.test_models_families import hf_model, make_config

    cfg = make_config(
        "qwen2",
        heads=4,
        kv_heads=2,
        hidden_size=128,
        intermediate_size=256,
        tie_word_embeddings=qtype == "Q8_0",
    )
    path = tmp_path / f"{qtype}.gguf"
    write_gguf(path, hf_model(cfg), "qwen2", qtype)
    return str(path)


def _engine(path: str) -> Engine:
    return Engine(
        path,
        quantization="gguf",
        activation_dtype="int8",
        dtype="float32",
        kv_cache_dtype="float16",
        prefix_cache=False,
        max_kv_tokens=512,
    )


def _greedy(engine: Engine) -> tuple[list[list[int]], np.ndarray]:
    rows = []
    model = engine.runner.model
    handle = model.register_forward_hook(lambda _m, _i, out: rows.append(out.detach().clone()))
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    # a decode and a longer prefill (~100 tokens: over one 64-row call, inside the 128 positions)
    prompts = ["alpha beta gamma", "delta " * 16 + "kappa"]
    try:
        tokens = [o.token_ids for o in engine.generate(prompts, params)]
    finally:
        handle.remove()
    return tokens, torch.cat([r.reshape(-1, r.shape[-1]) for r in rows]).numpy()


@pytest.mark.skipif(not cpu_quant.available(), reason="quantized C kernel not built")
@pytest.mark.parametrize("qtype", ["Q4_1", "Q4_0", "Q8_0"])
def test_tables_made_at_load_and_engine_output_bit_identical(tmp_path, monkeypatch, qtype):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    path = _gguf(tmp_path, qtype)
    loaded = _engine(path)
    model = loaded.runner.model
    quant = [m for m in model.modules() if isinstance(m, QuantLinear) and m.kind == "int4"]
    fused = [
        p
        for m in model.modules()
        for p in (m.__dict__.get("qkv"), m.__dict__.get("gate_up"))
        if isinstance(p, FusedQuantProjection)
    ]
    assert fused  # q/k/v and gate/up fused over the loader's buffers
    if qtype != "Q8_0":
        assert len(quant) > 0
        for lin in quant + [p.module for p in fused if p.module.kind == "int4"]:
            kept = quant_linear._kept(lin, "_scale_tiles", (lin.scales, lin.mins))
            assert kept is not None  # made at load, for the members and the fused modules
            want = _table_by_definition(lin.scales.numpy(), lin.mins.numpy())
            assert np.array_equal(kept[2].numpy(), want)
        for p in fused:  # the fused table is the members' (one memory)
            table = p.module.__dict__["_scale_tiles"][2]
            first = p._members[0].__dict__["_scale_tiles"][2]
            assert table.data_ptr() == first.data_ptr()
    else:
        emb = model.model.embed_tokens
        assert model.lm_head is None and isinstance(emb, QuantEmbedding)
        kept = quant_linear._kept(emb, "_int8_tiles", (emb.qweight, emb.scales))
        assert kept is not None  # the tied head's tiles, made at load

    def refuse(*_args):
        raise AssertionError("a tile table built after load")

    with monkeypatch.context() as patch:  # the first forward builds no table
        for name in ("int4_scale_tiles", "pack_int8_tiles", "int8_scale_tiles"):
            patch.setattr(quant_linear, name, refuse)
        got = _greedy(loaded)

    lazy = _engine(path)  # the same weights, tables dropped: formats rebuilds them on first use
    dropped = 0
    for m in lazy.runner.model.modules():
        dropped += m.__dict__.pop("_scale_tiles", None) is not None
        dropped += m.__dict__.pop("_int8_tiles", None) is not None
        for name in ("qkv", "gate_up"):
            p = m.__dict__.get(name)
            if isinstance(p, FusedQuantProjection):
                dropped += p.module.__dict__.pop("_scale_tiles", None) is not None
    assert dropped > 0
    want = _greedy(lazy)
    assert got[0] == want[0]
    assert got[1].shape == want[1].shape
    assert np.array_equal(got[1].view(np.int32), want[1].view(np.int32))  # bit for bit


def test_tables_follow_the_buffers_through_to_and_casts():
    """A table made at load is kept by ``.to()`` on the same device and dtype and dropped when the
    buffers it was made from are replaced (a cast here; a move to CUDA alike), then made again
    from the new buffers at first use."""
    rng = np.random.default_rng(0)
    n, k = 16, 64
    tiles = torch.from_numpy(rng.integers(0, 256, (n, k // 2), dtype=np.uint8))
    scales = torch.from_numpy(rng.standard_normal((n, 2)).astype(np.float16))
    mins = torch.from_numpy(rng.standard_normal((n, 2)).astype(np.float16))
    if not cpu_quant.available():
        pytest.skip("quantized C kernel not built")
    lin = QuantLinear.from_int4_tiles(tiles, scales, mins)
    table = lin.__dict__["_scale_tiles"][2]
    assert lin.to("cpu").scale_tiles() is table  # same buffers: kept
    lin.float()  # scales and mins become float32 tensors: the fp16 table is stale
    assert "_scale_tiles" not in lin.__dict__
    rebuilt = lin.scale_tiles()
    assert rebuilt.dtype == torch.float32
    assert np.array_equal(
        rebuilt.numpy(), _table_by_definition(lin.scales.numpy(), lin.mins.numpy())
    )
    q = torch.from_numpy(rng.integers(-127, 128, (40, k), dtype=np.int8))
    emb = QuantEmbedding(
        q, torch.from_numpy(rng.standard_normal((40, 2)).astype(np.float16)), torch.float32
    )
    emb.keep_int8_tiles(
        *(
            torch.from_numpy(a)
            for a in (int8_tiles_array(q.numpy()), int8_scale_tiles_array(emb.scales.numpy()))
        )
    )
    kept = emb.int8_tiles()
    assert emb.to("cpu").int8_tiles() is kept
    emb.float()
    assert "_int8_tiles" not in emb.__dict__
    with pytest.raises(ValueError, match="keep_int8_tiles"):
        emb.keep_int8_tiles(kept[0][:16], kept[1])
