"""Load a Hugging Face model folder: ``config.json``, safetensors (single or sharded), tokenizer."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from structgen.errors import ModelLoadError, ModelNotFoundError
from structgen.runtime.config import model_context_length
from structgen.runtime.loader.gguf_loader import assign_weights, eos_token_ids
from structgen.runtime.loader.tokenizer import load_hf_tokenizer

__all__ = ["load_hf_folder", "safetensors_files"]


def safetensors_files(folder: Path) -> list[Path]:
    """The folder's weight files: the shards named by ``model.safetensors.index.json``, else
    ``*.safetensors``.

    Raises:
        ModelNotFoundError: no safetensors file.
    """
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [folder / s for s in shards]
        for f in files:
            if not f.is_file():
                raise ModelNotFoundError(f"{folder}: shard {f.name} listed in the index is missing")
        return files
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelNotFoundError(f"{folder} has no *.safetensors weights")
    return files


def load_hf_folder(folder: Path, dtype: torch.dtype, device, quantization: str | None = None):
    """Load a Hugging Face folder into a LoadedModel (see
    :func:`structgen.runtime.loader.load_model`).

    The tokenizer: ``tokenizer.json``, else slow-tokenizer files converted once and cached
    (``loader.tokenizer.load_hf_tokenizer``); a folder with no tokenizer files loads with
    ``tokenizer=None`` (token-id prompts only; the engine raises ``ConfigError`` where text
    is needed).

    ``quantization`` (``"int8"``, ``"int4"``, ``"int4-g32"``, ...) quantizes the linears on load.
    """
    from safetensors.torch import load_file
    from transformers import AutoConfig

    from structgen.runtime.loader import LoadedModel
    from structgen.runtime.models import get_model_class

    if not (folder / "config.json").is_file():
        raise ModelNotFoundError(f"{folder} has no config.json")
    try:
        config = AutoConfig.from_pretrained(str(folder))
    except Exception as e:  # noqa: BLE001
        raise ModelLoadError(f"{folder}: cannot read config.json: {e}") from e
    archs = list(getattr(config, "architectures", None) or [config.model_type])
    cls = get_model_class(archs[0])
    tokenizer = load_hf_tokenizer(folder, required=False)  # None: token-id prompts only
    state: dict[str, torch.Tensor] = {}
    for f in safetensors_files(folder):
        for k, v in load_file(str(f)).items():
            state[k] = v if v.dtype == dtype else v.to(dtype)
    normalize = getattr(cls, "normalize_state_dict", None)
    if normalize is not None:  # e.g. per-expert MoE tensors -> fused expert tensors
        state = normalize(state, config)
    model = cls(config, dtype=dtype, device=device)
    if getattr(model, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    assign_weights(model, state, device, str(folder))
    del state
    if quantization is not None:
        from structgen.runtime.quantization import quantize_model

        quantize_model(model, quantization)
    if tokenizer is not None:
        eos = eos_token_ids(config, tokenizer)
    else:
        ids = config.eos_token_id
        eos = [int(i) for i in (ids if isinstance(ids, list) else [ids]) if i is not None]
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        chat_template=getattr(tokenizer, "chat_template", None),
        eos_token_ids=eos,
        config=config,
        max_model_len=model_context_length(config, tokenizer),
    )
