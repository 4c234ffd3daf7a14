"""Masks are exact, by brute force over SmolLM2's whole vocabulary, on real corpus schemas.

For sampled states (along canonical valid instances, and along seeded random walks that
follow the mask), with no token budget:

* the packed mask of ``Matcher.fill_bitmask`` equals, token by token, "the token's bytes
  walked one at a time through the byte automaton stay alive" (a scalar path, independent
  of the vectorised token index), and EOS is allowed exactly where the state accepts;
* every state an allowed token leads to is live: a breadth-first search over bytes (this
  file's own) finds a completion, and the completed document parses as JSON and
  validates with ``jsonschema`` (FormatChecker on) against the schema; a token whose
  bytes stay alive is therefore allowed (the two sets are equal by the first check).

Needs the SmolLM2 tokenizer (slow to build from its GGUF), hence the slow mark.
"""

from __future__ import annotations

import json
import random
from collections import deque

import jsonschema
import numpy as np
import pytest
import torch

from benchmarks.corpus import CORPORA
from benchmarks.support import mask_bits
from structgen.errors import GrammarTooComplexError, UnsupportedSchemaError
from structgen.fsm import compile_json_schema

pytestmark = pytest.mark.slow

PLAIN = CORPORA / "jsonschemabench" / "plain"
SUBSETS = ["Glaiveai2K", "BFCL_simple", "JME", "Github_easy", "WashingtonPost", "Snowplow"]
STATES_PER_SCHEMA = 5
VALIDATED_PER_STATE = 40


def _pick() -> list[tuple[str, dict, list]]:
    rng = random.Random(1)
    out = []
    for subset in SUBSETS:
        files = sorted((PLAIN / subset).glob("*.json"))
        rng.shuffle(files)
        for f in files:
            doc = json.loads(f.read_text(encoding="utf-8"))
            valid = [t["data"] for t in doc.get("tests", []) if t["valid"]]
            try:
                compile_json_schema(doc["schema"])
            except (UnsupportedSchemaError, GrammarTooComplexError):
                continue
            if valid:
                out.append((f"{subset}/{f.name}", doc["schema"], valid))
                break
    return out


def _completion(dfa, state: int, limit: int = 20000) -> bytes | None:
    """Shortest bytes from ``state`` to an accepting state (BFS over single-byte steps)."""
    seen = {state: b""}
    todo = deque([state])
    while todo and len(seen) < limit:
        s = todo.popleft()
        if dfa.is_accepting(s):
            return seen[s]
        for b in range(256):
            t = dfa.step(s, b)
            if t >= 0 and t not in seen:
                seen[t] = seen[s] + bytes([b])
                todo.append(t)
    return None


def _sample_states(grammar, vocab, tokenizer, instances, rng) -> list[tuple[object, bytes]]:
    """(matcher, bytes read to reach its state) along instances and random masked walks."""
    picked = []
    for inst in instances[:2]:
        text = json.dumps(inst, separators=(",", ":"), ensure_ascii=False)
        m, prefix = grammar.matcher(), b""
        ids = tokenizer.encode(text, add_special_tokens=False)
        for k, tid in enumerate(ids):
            if k in (0, len(ids) // 2):
                picked.append((m.fork(), prefix))
            assert m.advance(tid), (text, k)
            prefix += vocab.token_bytes[tid]
    buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
    m, prefix = grammar.matcher(), b""
    for step in range(40):
        m.fill_bitmask(buf, 0)
        allowed = [
            t
            for t in mask_bits(buf[0], vocab.vocab_size).nonzero()[0].tolist()
            if t not in vocab.eos_token_ids
        ]
        if not allowed:
            break
        if step % 8 == 7:
            picked.append((m.fork(), prefix))
        tid = rng.choice(allowed)
        assert m.advance(tid)
        prefix += vocab.token_bytes[tid]
    return picked[:STATES_PER_SCHEMA]


@pytest.mark.skipif(not PLAIN.is_dir(), reason="../shared/corpora not beside the checkout")
def test_masks_exact_by_brute_force(smollm2_tokenizer, smollm2_vocab) -> None:
    vocab, rng = smollm2_vocab, random.Random(0)
    picked = _pick()
    assert len(picked) >= 5, picked
    never = vocab.special_token_ids | vocab.eos_token_ids
    checked = 0
    for name, schema, instances in picked:
        grammar = compile_json_schema(schema, vocab)
        dfa = grammar.dfa
        checker = jsonschema.validators.validator_for(schema)(
            schema, format_checker=jsonschema.FormatChecker()
        )
        for m, prefix in _sample_states(grammar, vocab, smollm2_tokenizer, instances, rng):
            state = m.state
            assert dfa.walk(dfa.initial, prefix) == state
            buf = torch.zeros((1, (vocab.vocab_size + 31) // 32), dtype=torch.int32)
            m.fill_bitmask(buf, 0)
            mask = mask_bits(buf[0], vocab.vocab_size)
            # scalar reference: walk each token's bytes through the byte automaton
            ref = np.zeros(vocab.vocab_size, bool)
            targets: dict[int, list[int]] = {}
            for tid, data in enumerate(vocab.token_bytes):
                if tid in never or not data:
                    continue
                nxt = dfa.walk(state, data)
                if nxt >= 0:
                    ref[tid] = True
                    targets.setdefault(nxt, []).append(tid)
            for eos in vocab.eos_token_ids:
                ref[eos] = dfa.is_accepting(state)
            diff = np.nonzero(mask != ref)[0][:10].tolist()
            assert not diff, (
                name,
                prefix,
                [(t, vocab.token_bytes[t], bool(mask[t])) for t in diff],
            )
            # liveness, checked outside the automaton: complete and validate with jsonschema
            for nxt, tids in targets.items():
                tail = _completion(dfa, nxt)
                assert tail is not None, (name, prefix, nxt)
                for tid in rng.sample(
                    tids, min(len(tids), max(1, VALIDATED_PER_STATE // len(targets)))
                ):
                    doc = prefix + vocab.token_bytes[tid] + tail
                    instance = json.loads(doc.decode("utf-8"))
                    errors = [e.message for e in checker.iter_errors(instance)]
                    assert not errors, (name, doc, errors)
            checked += 1
    assert checked >= 20
