"""Seeded tiny random Llamas for the tests: one builder, each test naming only how its model
differs (size, seed, context, weights edited before saving, a chat template).

Weights depend on the config and the seed only (``torch.manual_seed`` right before the
model is built), so two tests asking for the same fields get the same model.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

#: The shared tiny target: GQA 4 query heads over 2 KV heads, 2 layers, 512 positions.
TARGET = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=False,
)
#: A smaller draft model (1 layer, 2 heads over 1 KV head) for speculative decoding tests.
DRAFT = dict(
    TARGET,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
)


def tiny_llama(tokenizer=None, *, seed: int = 0, base: dict = TARGET, **config):
    """A random ``transformers.LlamaForCausalLM`` in eval mode.

    ``tokenizer`` (optional) gives ``vocab_size``, ``bos_token_id`` and ``eos_token_id``;
    ``config`` overrides any field of ``base`` (and those). Raises ``TypeError`` when no
    ``vocab_size`` is known.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    fields = dict(base)
    if tokenizer is not None:
        fields.update(
            vocab_size=len(tokenizer),
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    fields.update(config)
    if "vocab_size" not in fields:
        raise TypeError("tiny_llama needs a tokenizer or vocab_size")
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**fields)).eval()


def save_tiny_llama(
    path: Path,
    tokenizer,
    *,
    seed: int = 0,
    edit: Callable | None = None,
    chat_template: str | None = None,
    **config,
) -> Path:
    """Save ``tiny_llama(tokenizer, seed=seed, **config)`` as a Hugging Face folder at ``path``
    (safetensors, the tokenizer, ``chat_template.jinja`` when given). ``edit(model)`` runs
    under ``torch.no_grad()`` before saving. Returns ``path``.
    """
    import torch

    model = tiny_llama(tokenizer, seed=seed, **config)
    if edit is not None:
        with torch.no_grad():
            edit(model)
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    if chat_template is not None:
        (Path(path) / "chat_template.jinja").write_text(chat_template)
    return Path(path)
