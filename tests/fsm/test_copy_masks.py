"""Masks under a copy constraint are exact on SmolLM2's whole vocabulary: the documents a
copied field allows form a finite set (one per span or numeral, written out by
``json.dumps`` from the brute-force span rule), so at every state inside a copied value a
token is allowed exactly when the bytes read so far plus the token's bytes are a prefix of
one of those documents, and EOS exactly when they are one. Needs the SmolLM2 tokenizer
(slow to build from its GGUF), hence the slow mark.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from benchmarks.support import mask_bits
from structgen.fsm.compiler import compile_spec
from structgen.fsm.json_schema.copy import CopyJsonSchema
from structgen.fsm.numerals import json_numeral, numerals
from tests.extraction._copy_reference import spans

pytestmark = pytest.mark.slow

TEXT = 'Zoë "Z" O\'Neil, 41, paid $1,250.50 at C:\\shop\nline 2 (room 7).'


def _docs(key: str, values) -> set[bytes]:
    return {
        json.dumps({key: v}, ensure_ascii=False, separators=(",", ":")).encode() for v in values
    }


@pytest.mark.parametrize(
    "field,values",
    [
        ({"type": "string"}, sorted(spans(TEXT))),
        ({"type": "number"}, [json.loads(json_numeral(v)) for v in numerals(TEXT)]),
    ],
    ids=["string", "number"],
)
def test_masks_inside_copied_values_are_exact(smollm2_tokenizer, smollm2_vocab, field, values):
    vocab = smollm2_vocab
    schema = {"type": "object", "properties": {"v": field}, "required": ["v"]}
    grammar = compile_spec(CopyJsonSchema(schema, copy_from=(TEXT,)), vocab)
    docs = _docs("v", values)
    prefixes = {d[:k] for d in docs for k in range(len(d) + 1)}
    never = vocab.special_token_ids | vocab.eos_token_ids
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    checked = 0
    for doc in sorted(docs, key=len)[-2:] + sorted(docs)[:1]:
        m, read = grammar.matcher(), b""
        for tid in smollm2_tokenizer.encode(doc.decode(), add_special_tokens=False):
            if read.startswith(b'{"v":') and read != doc:  # inside the copied value
                m.fill_bitmask(buf, 0)
                mask = mask_bits(buf[0], vocab.vocab_size)
                ref = np.zeros(vocab.vocab_size, bool)
                for t, data in enumerate(vocab.token_bytes):
                    if t not in never and data and read + data in prefixes:
                        ref[t] = True
                for eos in vocab.eos_token_ids:
                    ref[eos] = read in docs
                diff = np.nonzero(mask != ref)[0][:10].tolist()
                assert not diff, (read, [(t, vocab.token_bytes[t], bool(mask[t])) for t in diff])
                checked += 1
            assert m.advance(tid), (doc, read)
            read += vocab.token_bytes[tid]
    assert checked >= 4
