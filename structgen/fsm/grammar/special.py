"""Special tokens in grammars: the token syntax of the front ends, and its resolution.

Every dialect (Lark, GBNF, EBNF) reads, where an item may stand (llguidance's and
llama.cpp's syntax):

* ``<[123]>``: the token with id 123;
* ``<name>`` / ``<|name|>``: the special token whose text is exactly that
  (``<tool_call>``, ``<|python_tag|>``), looked up in the vocabulary at compile;
* ``!<...>``: any token but that one (refused: ``UnsupportedGrammarError``, since a byte
  automaton cannot see where one token ends and the next begins).

A quoted string is always characters. ``resolve_special_tokens`` replaces each
``SpecialToken`` node by the token's marker bytes (``index.vocabulary.special_token_marker``,
a ``RAW_BYTES`` definition), and the grammar is compiled against the vocabulary view in
which those tokens are allowable (``Vocabulary.with_special_tokens``): the mask allows the
named id exactly where the grammar has it, and no other special token anywhere.
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass, replace

from ...errors import InvalidGrammarError, UnsupportedGrammarError
from ..index.vocabulary import Vocabulary, special_token_marker
from ..regex.definitions import PLACEHOLDER_BASE, RAW_BYTES
from .ir import Embedded, Expr, GrammarDef, SpecialToken

__all__ = ["SPECIAL_TOKEN", "special_token_node", "resolve_special_tokens", "marker_embedded"]

# ``!?<[id]>``, ``<|name|>`` or ``<name>`` (no whitespace, quotes or angle brackets inside)
SPECIAL_TOKEN = re.compile(r"!?<(?:\[[0-9]+\]|\|[^|<>\s]+\||[^<>\s\"'|\[\]]+)>")


def special_token_node(written: str, line: int, column: int) -> SpecialToken:
    """The node of a match of ``SPECIAL_TOKEN`` written at ``line:column``."""
    negated = written.startswith("!")
    body = written[1:] if negated else written
    if body.startswith("<["):
        return SpecialToken(None, int(body[2:-2]), negated, line, column)
    return SpecialToken(body, None, negated, line, column)


def marker_embedded(token_id: int, what: str) -> Embedded:
    """The regular language of exactly one special token: its marker bytes."""
    marker = special_token_marker(token_id).decode("latin-1")
    return Embedded(chr(PLACEHOLDER_BASE), (RAW_BYTES + marker,), what)


def resolve_special_tokens(
    gdef: GrammarDef, vocab: Vocabulary | None
) -> tuple[GrammarDef, frozenset[int]]:
    """``gdef`` with every ``SpecialToken`` replaced by its marker, and the ids named.

    Args:
        gdef: the parsed grammar (not mutated).
        vocab: the vocabulary names are looked up in (None: only ``<[id]>`` resolves).

    Returns:
        ``(grammar, ids)``; ``gdef`` itself when it names no special token.

    Raises:
        InvalidGrammarError: an unknown name, a name without a vocabulary, an id that is
            not a special token, or an EOS token (the output ends where the grammar may
            end), each with its line:column.
        UnsupportedGrammarError: ``!<...>`` (with its line:column).
    """
    named: set[int] = set()

    def resolve(node: SpecialToken) -> Expr:
        where = f"{node.line}:{node.column}"
        written = f"<[{node.token_id}]>" if node.text is None else node.text
        if node.negated:
            raise UnsupportedGrammarError(
                f"!{written} at {where} (any token but one) is not supported: the byte "
                "automaton cannot tell where a token ends"
            )
        if node.text is None:
            tid = node.token_id
            if vocab is not None and not 0 <= tid < vocab.vocab_size:
                raise InvalidGrammarError(
                    f"special token {written} at {where}: the vocabulary has "
                    f"{vocab.vocab_size} tokens"
                )
        elif vocab is None:
            raise InvalidGrammarError(
                f"special token {written} at {where} is named by its text, which needs a "
                "vocabulary (compile with vocab=, or write <[id]>)"
            )
        else:
            tid = vocab.special_token_texts.get(node.text)
            if tid is None:
                raise InvalidGrammarError(
                    f"unknown special token {written} at {where}: no special token of the "
                    'vocabulary has this text (write "..." for the characters)'
                )
        if vocab is not None and tid not in vocab.special_token_ids:
            raise InvalidGrammarError(
                f"{written} at {where} names token {tid}, which is not a special token; "
                'write its text as a string ("...")'
            )
        if vocab is not None and tid in vocab.eos_token_ids:
            raise InvalidGrammarError(
                f"{written} at {where} names an end-of-sequence token; the output ends "
                "wherever the grammar may end, without naming it"
            )
        named.add(tid)
        return marker_embedded(tid, f"{written} at {where}")

    def walk(expr: Expr) -> Expr:
        if isinstance(expr, SpecialToken):
            return resolve(expr)
        if not is_dataclass(expr):
            return expr
        changes = {}
        for f in fields(expr):
            value = getattr(expr, f.name)
            if isinstance(value, Expr):
                new = walk(value)
                if new is not value:
                    changes[f.name] = new
            elif isinstance(value, tuple) and value and isinstance(value[0], Expr):
                items = tuple(walk(v) for v in value)
                if any(a is not b for a, b in zip(items, value, strict=True)):
                    changes[f.name] = items
        return replace(expr, **changes) if changes else expr

    rules = {name: walk(e) for name, e in gdef.rules.items()}
    terminals = {name: walk(e) for name, e in gdef.terminals.items()}
    if not named:
        return gdef, frozenset()
    return replace(gdef, rules=rules, terminals=terminals), frozenset(named)
