"""A grammar's literal lexer rows (``automaton._literal_row``) equal the lexers' own rows.

``GrammarAutomaton._c_lexer_row`` answers a lexer state whose term is one byte followed by
a rest (a JSON key, a keyword, punctuation) from the term alone. Checked two ways:

* row by row: every lexer state reachable in each grammar's lexers (the recursive JSON
  schemas, Lark grammars, llama.cpp's GBNF fixtures), where the shortcut applies, gives the
  bytes of the lexer's own row (``ByteDFA.row``, built after it: the same state ids);
* mask by mask: the recursive cold schema's instance and seeded random walks give the
  same token masks as the same grammar compiled with the shortcut off, and each token is
  allowed exactly when its bytes, walked one at a time through the reference automaton,
  stay alive (a scalar path, independent of the C trie walk and the mask caches).
"""

from __future__ import annotations

import contextlib
import json
import random
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch

from structgen.fsm import Vocabulary, clear_cache, compile_json_schema
from structgen.fsm.grammar import automaton, compile_grammar
from structgen.kernels.apply_token_bitmask import unpack_bitmask
from tests.fsm._reference import instance_step
from tests.fsm.grammar._grammars import ARITHMETIC, JSON_GBNF, NESTED_LISTS, STATEMENTS
from tests.fsm.json_schema.test_recursion import LINKED, MUTUAL, TREE

ROOT = Path(__file__).resolve().parents[3]
COLD = json.loads((ROOT / "benchmarks" / "data" / "cold_schemas.json").read_text())
FIXTURES = ROOT / "tests" / "fixtures" / "gbnf"


def _schemas():
    return [
        (COLD["recursive"]["schema"], True),
        (COLD["recursive"]["schema"], False),
        (TREE, True),
        (LINKED, False),
        (MUTUAL, True),
    ]


def _grammars():
    out = [
        compile_json_schema(s, None, strict=False, allow_extra_properties=x) for s, x in _schemas()
    ]
    out += [compile_grammar(t, None, syntax="lark") for t in (ARITHMETIC, NESTED_LISTS, STATEMENTS)]
    out.append(compile_grammar(JSON_GBNF, None, syntax="gbnf"))
    for path in sorted(FIXTURES.glob("*.gbnf"))[:6]:
        out.append(compile_grammar(path.read_text(encoding="utf-8"), None, syntax="gbnf"))
    return [g for g in out if hasattr(g.dfa, "lexers")]


def test_literal_rows_equal_the_lexers_own_rows():
    clear_cache()
    applied = 0
    grammars = _grammars()
    assert len(grammars) >= 6
    for grammar in grammars:
        for lexer in grammar.dfa.lexers:
            seen, todo = {lexer.initial}, deque([lexer.initial])
            while todo and len(seen) < 3000:
                s = todo.popleft()
                fast = automaton._literal_row(lexer, s)  # first: it interns the next state
                own = np.ascontiguousarray(lexer.row(s), np.int32)
                if fast is not None:
                    applied += 1
                    assert fast == own.tobytes(), (grammar.spec, s)
                for nxt in set(own.tolist()) - {-1}:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
    assert applied > 100  # the keys, keywords and punctuation of these grammars


_TOKENS = [
    b"<eos>", b"{", b"}", b"[", b"]", b'"', b",", b":", b'{"', b'":"', b'","', b'":', b'":[',
    b"[]", b"]}", b"},", b"}]", b"]},", b'"}', b'{"name', b"name", b"children", b'children":[',
    b"na", b"me", b"ch", b"ild", b"ren", b"a", b"b", b"x", b"py", b".", b"main", b"1", b"12",
    b"-", b"true", b"null", b'"a"', b'"x":', b'e":"', b'"],', b"[{", b'[{"', b"}}", b"]]",
]  # fmt: skip
_TOKENS += [bytes([c]) for c in b"cdefghijklmnopqrstuvwyzABCDEFGHIJKLMNOPQRSTUVWXYZ0_ "]


def _bits(matcher, vocab) -> np.ndarray:
    buf = torch.zeros(1, (vocab.vocab_size + 31) // 32, dtype=torch.int32)
    matcher.fill_bitmask(buf, 0)
    return unpack_bitmask(buf, vocab.vocab_size)[0].numpy()


@contextlib.contextmanager
def _off(monkeypatch):
    """Lexer rows are the lexers' own inside (the shortcut off)."""
    with monkeypatch.context() as m:
        m.setattr(automaton, "_literal_row", lambda lexer, s: None)
        yield


def _check(fast, ref, ref_dfa, vocab, ref_vocab, prefix: bytes, monkeypatch) -> None:
    got = _bits(fast, vocab)
    with _off(monkeypatch):
        want = _bits(ref, ref_vocab)
        dfa, state = ref_dfa, ref.state
        for tid, data in enumerate(ref_vocab.token_bytes):
            if tid in ref_vocab.eos_token_ids:
                assert want[tid] == dfa.is_accepting(state)
                continue
            s = state
            for b in data:  # scalar, one byte at a time, through the reference automaton
                s = dfa.step(s, b)
                if s < 0:
                    break
            assert want[tid] == (s >= 0), (prefix, data)
    assert (got == want).all(), (prefix, np.flatnonzero(got != want))


@pytest.mark.parametrize("extra", [True, False])
@pytest.mark.parametrize(
    "schema", [COLD["recursive"]["schema"], TREE, LINKED], ids=["recursive", "tree", "linked"]
)
def test_masks_with_literal_rows_equal_masks_without(schema, extra, monkeypatch):
    # two vocabularies: each grammar has its own shared lexical cache
    vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    ref_vocab = Vocabulary(_TOKENS, eos_token_ids=[0])
    instance = json.dumps(COLD["recursive"]["instance"], separators=(",", ":")).encode()
    rng = random.Random(11)
    for walk in range(4):
        clear_cache()
        fast_g = compile_json_schema(schema, vocab, strict=False, allow_extra_properties=extra)
        with _off(monkeypatch):
            clear_cache()
            ref_g = compile_json_schema(
                schema, ref_vocab, strict=False, allow_extra_properties=extra
            )
        fast, ref = fast_g.matcher(), ref_g.matcher()
        prefix = b""
        for _ in range(60):
            _check(fast, ref, ref_g.dfa, vocab, ref_vocab, prefix, monkeypatch)
            allowed = [t for t in np.flatnonzero(_bits(fast, vocab)).tolist() if t != 0]
            if walk == 0 and schema is COLD["recursive"]["schema"]:  # the instance itself
                tid = instance_step(allowed, vocab, instance[len(prefix) :])
            else:
                tid = rng.choice(allowed) if allowed else None
            if tid is None:
                break
            assert fast.advance(tid)
            with _off(monkeypatch):
                assert ref.advance(tid)
            prefix += vocab.token_bytes[tid]
        if walk == 0 and schema is COLD["recursive"]["schema"]:
            assert prefix == instance
