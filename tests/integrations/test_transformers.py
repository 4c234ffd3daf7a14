"""StructgenLogitsProcessor with transformers' ``generate`` on tiny random Llamas."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch
from transformers import LlamaForCausalLM

from structgen.fsm import Vocabulary, compile_json_schema
from structgen.integrations.transformers import StructgenLogitsProcessor, logits_processor
from tests.tiny_llama import DRAFT, tiny_llama

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 150},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "日本"]}, "maxItems": 3},
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": False,
}


def _tiny_llama(vocab_size: int, eos: int, seed: int = 0) -> LlamaForCausalLM:
    return tiny_llama(
        seed=seed, base=DRAFT, vocab_size=vocab_size, eos_token_id=eos, bos_token_id=eos
    )


@pytest.fixture(scope="module")
def tiny_tok(tiny_tokenizer):
    return tiny_tokenizer  # the shared locally trained byte-level BPE (tests/conftest.py)


def _generate(model, tok, proc, max_new: int, batch: int = 3, sample: bool = True, seed: int = 0):
    ids = torch.tensor([tok.encode("Person as JSON:")] * batch)
    torch.manual_seed(seed)
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        logits_processor=[proc],
        max_new_tokens=max_new,
        do_sample=sample,
        top_k=0,
        eos_token_id=proc.eos_token_ids,
        pad_token_id=tok.pad_token_id,
    )
    texts = []
    for row in out[:, ids.shape[1] :].tolist():
        row = [t for t in row if t not in proc.eos_token_ids and t != tok.pad_token_id]
        texts.append(tok.decode(row))
    return texts


@pytest.mark.parametrize("seed", [0, 1])
def test_generate_json_schema_budgeted(tiny_tok, seed: int) -> None:
    model = _tiny_llama(len(tiny_tok), tiny_tok.eos_token_id, seed)
    proc = logits_processor(SCHEMA, tiny_tok, max_tokens=40)
    texts = _generate(model, tiny_tok, proc, max_new=40, seed=seed)
    assert proc.num_rejected == 0
    for text in texts:
        jsonschema.validate(json.loads(text), SCHEMA)  # complete even when cut at 40 tokens


def test_generate_regex_greedy_and_reuse(tiny_tok) -> None:
    model = _tiny_llama(len(tiny_tok), tiny_tok.eos_token_id, 3)
    pattern = r"(yes|no|maybe)-[0-9]{2,4}"
    vocab = Vocabulary.from_tokenizer(tiny_tok)
    from structgen.fsm import compile_regex

    proc = StructgenLogitsProcessor(compile_regex(pattern, vocab), max_tokens=12)
    first = _generate(model, tiny_tok, proc, max_new=12, batch=2, sample=False)
    proc.reset()
    again = _generate(model, tiny_tok, proc, max_new=12, batch=2, sample=False)
    assert first == again
    for text in first:
        assert re.fullmatch(pattern, text), text


def test_batch_change_raises(tiny_tok) -> None:
    grammar = compile_json_schema(SCHEMA, Vocabulary.from_tokenizer(tiny_tok))
    proc = StructgenLogitsProcessor(grammar)
    proc(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, len(tiny_tok)))
    with pytest.raises(ValueError, match="beam search"):
        proc(torch.zeros(4, 4, dtype=torch.long), torch.zeros(4, len(tiny_tok)))


@pytest.mark.slow
def test_generate_smollm2_tokenizer_random_llama(smollm2_tokenizer) -> None:
    tok = smollm2_tokenizer
    model = _tiny_llama(len(tok), tok.eos_token_id, 7)
    proc = logits_processor(SCHEMA, tok, max_tokens=48)
    texts = _generate(model, tok, proc, max_new=48, batch=2)
    assert proc.num_rejected == 0
    for text in texts:
        jsonschema.validate(json.loads(text), SCHEMA)
