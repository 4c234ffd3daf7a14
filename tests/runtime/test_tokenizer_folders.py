"""Hugging Face folders without a ``tokenizer.json``: a SentencePiece ``tokenizer.model`` only,
or ``tokenizer_config.json`` with GPT-2 style ``vocab.json`` + ``merges.txt`` (converted to a
fast tokenizer by transformers once, then loaded from the cache; transformers' own
``AutoTokenizer`` on the folder is the reference), and a folder with no tokenizer at all
(token-id prompts only, ``ConfigError`` where text is needed)."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarks.support import CHATML, TINY_CORPUS
from structgen import Engine, Regex, SamplingParams
from structgen.errors import ConfigError, ModelLoadError
from structgen.runtime.loader.tokenizer import load_hf_tokenizer, load_tokenizer
from tests.tiny_llama import DRAFT, tiny_llama

TEXTS = [
    "Maria Lopez, 34, works as a nurse in Lyon.",
    "The quick brown fox jumps over the lazy dog. 0123",
    "Héllo wörld, ça va? 日本語 😀",
    "<|im_start|>user\nhi<|im_end|>",
]


def _tiny_llama(path, vocab_size: int, bos: int | None, eos: int | None) -> None:
    model = tiny_llama(
        base=DRAFT,
        vocab_size=vocab_size,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        bos_token_id=bos,
        eos_token_id=eos,
    )
    model.save_pretrained(path, safe_serialization=True)


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory):
    """config.json + safetensors + a SentencePiece tokenizer.model, nothing else."""
    import sentencepiece as spm

    path = tmp_path_factory.mktemp("spm_only")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TINY_CORPUS),
        model_prefix=str(path / "tokenizer"),
        vocab_size=400,
        model_type="bpe",
        byte_fallback=True,
        character_coverage=1.0,
        bos_id=1,
        eos_id=2,
        unk_id=0,
        minloglevel=2,
    )
    (path / "tokenizer.vocab").unlink()
    _tiny_llama(path, 400, bos=1, eos=2)
    return path


@pytest.fixture(scope="module")
def gpt2_files_dir(tmp_path_factory, tiny_tokenizer):
    """config.json + safetensors + tokenizer_config.json (GPT2Tokenizer) + vocab.json +
    merges.txt: the tiny tokenizer's BPE model written as a slow tokenizer's files.
    """
    path = tmp_path_factory.mktemp("gpt2_files")
    tiny_tokenizer.backend_tokenizer.model.save(str(path))  # vocab.json, merges.txt
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "GPT2Tokenizer",
                "bos_token": "<|im_start|>",
                "eos_token": "<|im_end|>",
                "unk_token": "<|endoftext|>",
                "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
                "chat_template": CHATML,
                "add_prefix_space": False,
            }
        )
    )
    vocab = json.loads((path / "vocab.json").read_text())
    _tiny_llama(path, len(vocab), bos=vocab["<|im_start|>"], eos=vocab["<|im_end|>"])
    return path


def _count_conversions(monkeypatch) -> list[str]:
    import transformers

    calls: list[str] = []
    real = transformers.AutoTokenizer.from_pretrained

    def spy(name, *args, **kwargs):
        calls.append(str(name))
        return real(name, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", spy)
    return calls


@pytest.mark.parametrize("fixture", ["spm_dir", "gpt2_files_dir"])
def test_slow_tokenizer_files_convert_once_and_match_transformers(
    fixture, request, tmp_path, monkeypatch
):
    from transformers import AutoTokenizer

    folder = request.getfixturevalue(fixture)
    reference = AutoTokenizer.from_pretrained(str(folder))  # transformers' own conversion
    assert reference.is_fast
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    calls = _count_conversions(monkeypatch)
    first = load_hf_tokenizer(folder)
    assert calls == [str(folder)]
    assert list((tmp_path / "cache" / "tokenizers").glob("*/tokenizer.json"))
    second = load_tokenizer(folder)
    assert calls == [str(folder)]  # the second load comes from the cache
    for tok in (first, second):
        assert tok.is_fast and len(tok) == len(reference)
        assert tok.eos_token_id == reference.eos_token_id
        assert tok.chat_template == reference.chat_template
        for text in TEXTS:
            for special in (True, False):
                want = reference.encode(text, add_special_tokens=special)
                assert tok.encode(text, add_special_tokens=special) == want, text
            ids = reference.encode(text, add_special_tokens=False)
            assert tok.decode(ids) == reference.decode(ids)


@pytest.mark.parametrize("fixture", ["spm_dir", "gpt2_files_dir"])
def test_engine_on_a_converted_tokenizer_folder(fixture, request, tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    folder = request.getfixturevalue(fixture)
    eng = Engine(str(folder), dtype="float32", max_kv_tokens=512, page_size=4)
    params = SamplingParams(max_tokens=8, temperature=0.0)
    (out,) = eng.generate(["The quick brown fox"], params, Regex(r"[a-z]{2,6}"))
    assert out.finish_reason in ("stop", "length") and 2 <= len(out.text) <= 6
    assert out.text.isalpha() and out.text.islower()


def test_a_folder_with_a_broken_tokenizer_config_is_an_error(tmp_path, tiny_llama_dir):
    folder = tmp_path / "broken"
    folder.mkdir()
    shutil.copy(tiny_llama_dir / "config.json", folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NoSuchTok"}))
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path / "cache"))
    try:
        with pytest.raises(ModelLoadError, match="do not convert"):
            load_hf_tokenizer(folder)
    finally:
        monkeypatch.undo()


@pytest.fixture(scope="module")
def no_tokenizer_dir(tmp_path_factory, tiny_llama_dir):
    """The tiny Llama's config.json and weights, no tokenizer files."""
    path = tmp_path_factory.mktemp("no_tokenizer")
    for f in tiny_llama_dir.iterdir():
        if f.name in ("config.json", "generation_config.json") or f.suffix == ".safetensors":
            shutil.copy(f, path)
    return path


@pytest.fixture(scope="module")
def no_tokenizer_engine(no_tokenizer_dir):
    return Engine(str(no_tokenizer_dir), dtype="float32", max_kv_tokens=2048, page_size=4)


def test_no_tokenizer_folder_serves_token_id_prompts(no_tokenizer_engine, tiny_engine):
    eng = no_tokenizer_engine
    assert eng.tokenizer is None and eng.vocab is None
    prompts = [[5, 6, 7, 8], [40, 41]]
    params = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
    outs = eng.generate(prompts, params)
    want = tiny_engine.generate(prompts, params)  # the same weights with their tokenizer
    assert [o.token_ids for o in outs] == [o.token_ids for o in want]
    assert all(o.text == "" and o.finish_reason == "length" for o in outs)
    seeded = SamplingParams(max_tokens=6, temperature=1.0, seed=3, n=2)
    (out,) = eng.generate([prompts[0]], seeded)
    assert [len(c.token_ids) for c in out.choices] == [6, 6] or out.finish_reason == "stop"


@pytest.mark.parametrize(
    "prompt, params, constraint",
    [
        ("a text prompt", SamplingParams(max_tokens=4), None),
        ([{"role": "user", "content": "hi"}], SamplingParams(max_tokens=4), None),
        ([5, 6, 7], SamplingParams(max_tokens=4), Regex(r"[0-9]+")),
        ([5, 6, 7], SamplingParams(max_tokens=4, stop=["x"]), None),
    ],
    ids=["text", "chat", "constraint", "stop-string"],
)
def test_no_tokenizer_folder_refuses_what_needs_text(
    no_tokenizer_engine, no_tokenizer_dir, prompt, params, constraint
):
    eng = no_tokenizer_engine
    with pytest.raises(ConfigError, match="needs a tokenizer"):
        eng.generate([prompt], params, constraint)
    with pytest.raises(ConfigError, match="needs a tokenizer"):
        eng.make_request(prompt, params, constraint)
    with pytest.raises(ModelLoadError, match="has no tokenizer"):
        load_tokenizer(no_tokenizer_dir)
