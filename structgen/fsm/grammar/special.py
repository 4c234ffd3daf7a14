"""Special tokens in grammars: the token syntax of the front ends, and its resolution.

Every dialect (Lark, GBNF, EBNF) reads, where an item may stand (llama.cpp's syntax, and
llguidance's ``<[^...]>``):

* ``<[123]>``: the token with id 123;
* ``<name>`` / ``<|name|>``: the special token whose text is exactly that
  (``<tool_call>``, ``<|python_tag|>``), looked up in the vocabulary at compile;
* ``!<[123]>``, ``!<name>``, ``!<|name|>``: exactly one token that is not that one (any
  id may be excluded, an ordinary or EOS one too). It allows the ordinary tokens and the
  special tokens the grammar names elsewhere, never another special token, EOS as one
  of its tokens, nor an ordinary token holding the byte ``0xFF`` (llguidance's
  ``<[^id]>`` allows every other id, special and EOS included; llama.cpp documents
  ``!<...>`` as any token but that one). So ``<think> !<</think>>* </think>`` is any
  run of tokens up to the first ``</think>``; ``!<X> "a"`` is one token then ``a``, never
  two tokens whose bytes happen to be one token's;
* ``<[^1,5-7]>`` (llguidance's spelling): exactly one token that is none of those ids
  (a list of ids and inclusive ranges), otherwise as ``!<...>``.

A quoted string is always characters. ``resolve_special_tokens`` replaces each
``SpecialToken`` node: ``<X>`` by X's marker bytes (``index.vocabulary.special_token_marker``,
a ``RAW_BYTES`` definition), ``!<X>`` by X's wildcard marker (``wildcard_marker``), and
the grammar is compiled against the vocabulary view in which the named tokens are
allowable and no token spells a marker (``Vocabulary.with_special_tokens``): the mask
allows a named id exactly where the grammar has it, and ``index.token_index.TokenIndex``
reads a wildcard marker as a token edge (every allowable token but X, one token).

``matches(text)`` has no tokens: it reads ``<X>`` as X's marker bytes and ``!<X>`` as one
or more characters, or the marker of a special token the grammar names other than X
(``resolve_special_tokens(as_text=True)``; ``compile_grammar`` builds that grammar on
the first ``matches`` call). An output the matcher accepts matches (named special tokens
written as their markers) when each ``!<X>`` token holds whole characters; one character
split between two ``!<X>`` tokens is one character to ``matches``. Structural tags'
contents read ``!<X>`` in ``matches`` as its wildcard marker.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields, is_dataclass, replace
from typing import NamedTuple

from ...errors import InvalidGrammarError
from ..index.vocabulary import Vocabulary, special_token_marker, wildcard_marker
from ..regex.definitions import PLACEHOLDER_BASE, RAW_BYTES
from .ir import Alt, Embedded, Expr, GrammarDef, Pattern, SpecialToken

__all__ = [
    "SPECIAL_TOKEN",
    "SPECIAL_TOKEN_TEXT",
    "special_token_node",
    "resolve_special_tokens",
    "marker_embedded",
    "ResolvedTokens",
]

_ANY_TEXT = r"[\s\S]+"  # what matches() reads for ``!<X>``: one or more characters

# ``!?<[id]>``, ``<|name|>`` or ``<name>`` (no whitespace, quotes or angle brackets inside),
# or llguidance's ``<[^a,b-c]>``
SPECIAL_TOKEN_TEXT = (
    r"<\[\^[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*\]>"
    r"|!?<(?:\[[0-9]+\]|\|[^|<>\s]+\||[^<>\s\"'|\[\]]+)>"
)
SPECIAL_TOKEN = re.compile(SPECIAL_TOKEN_TEXT)
MAX_EXCLUDED = 1 << 18  # ids one ``<[^...]>`` may exclude, ranges counted out


def special_token_node(written: str, line: int, column: int) -> SpecialToken:
    """The node of a match of ``SPECIAL_TOKEN`` written at ``line:column``.

    Raises:
        InvalidGrammarError: a ``<[^...]>`` range whose end is below its start, or one that
            lists more than ``MAX_EXCLUDED`` ids (with the line:column).
    """
    if written.startswith("<[^"):
        ids: set[int] = set()
        for item in written[3:-2].split(","):
            lo, _, hi = item.partition("-")
            first, last = int(lo), int(hi or lo)
            if last < first or len(ids) + last - first >= MAX_EXCLUDED:
                raise InvalidGrammarError(
                    f"{written} at {line}:{column}: the range {item} is empty or too large"
                )
            ids.update(range(first, last + 1))
        return SpecialToken(None, None, True, line, column, tuple(sorted(ids)))
    negated = written.startswith("!")
    body = written[1:] if negated else written
    if body.startswith("<["):
        return SpecialToken(None, int(body[2:-2]), negated, line, column)
    return SpecialToken(body, None, negated, line, column)


def marker_embedded(token_id: int, what: str) -> Embedded:
    """The regular language of exactly one special token: its marker bytes."""
    return _raw_embedded(special_token_marker(token_id), what)


class ResolvedTokens(NamedTuple):
    """What ``resolve_special_tokens`` gives.

    Attributes:
        gdef: the grammar with every ``SpecialToken`` replaced.
        named: the ids written as ``<...>`` (allowable: compile against
            ``vocab.with_special_tokens(named, reserve_markers=bool(negated))``).
        negated: the ids written as ``!<...>``.
    """

    gdef: GrammarDef
    named: frozenset[int]
    negated: frozenset[int]


def resolve_special_tokens(
    gdef: GrammarDef, vocab: Vocabulary | None, *, as_text: bool = False
) -> ResolvedTokens:
    """``gdef`` with every ``SpecialToken`` replaced by its marker, and the ids it names.

    ``<X>`` becomes X's marker (``special_token_marker``). ``!<X>`` becomes X's wildcard
    marker (``wildcard_marker``: the token index allows any one allowable token but X
    there), or with ``as_text`` the language ``matches()`` reads for it: one or more
    characters, or the marker of a special token the grammar names other than X.

    Args:
        gdef: the parsed grammar (not mutated).
        vocab: the vocabulary names are looked up in (None: only ``<[id]>`` resolves).
        as_text: write ``!<X>`` as text (``matches()``'s contract) instead of its
            wildcard marker.

    Returns:
        ``ResolvedTokens``; its ``gdef`` is ``gdef`` itself when it names no token.

    Raises:
        InvalidGrammarError: an unknown name, a name without a vocabulary, an id outside
            the vocabulary, for ``<...>`` an id that is not a special token or is an EOS
            token (the output ends where the grammar may end), each with its line:column.
    """
    named: set[int] = set()
    negated: set[int] = set()

    def token_id(node: SpecialToken) -> int:
        written, where = _written(node)
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
        if node.negated:  # any id may be excluded (an EOS id: any one token)
            return tid
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
        return tid

    def token_ids(node: SpecialToken) -> tuple[int, ...]:
        if not node.token_ids:
            return (token_id(node),)
        if vocab is not None and node.token_ids[-1] >= vocab.vocab_size:
            written, where = _written(node)
            raise InvalidGrammarError(
                f"special token {written} at {where}: the vocabulary has {vocab.vocab_size} tokens"
            )
        return node.token_ids

    def collect(node: SpecialToken) -> Expr:
        (negated if node.negated else named).update(token_ids(node))
        return node

    def resolve(node: SpecialToken) -> Expr:
        ids = token_ids(node)
        what = "{} at {}".format(*_written(node))
        if not node.negated:
            return marker_embedded(ids[0], what)
        if not as_text:
            return _raw_embedded(wildcard_marker(ids), what)
        others = [marker_embedded(i, f"<[{i}]>") for i in sorted(named - set(ids))]
        return Alt((Pattern(_ANY_TEXT), *others)) if others else Pattern(_ANY_TEXT)

    _map_special(gdef, collect)
    if not named and not negated:
        return ResolvedTokens(gdef, frozenset(), frozenset())
    return ResolvedTokens(_map_special(gdef, resolve), frozenset(named), frozenset(negated))


def _written(node: SpecialToken) -> tuple[str, str]:
    """``(the token as written, its line:column)`` for messages."""
    where = f"{node.line}:{node.column}"
    if node.token_ids:
        listed = ",".join(map(str, node.token_ids[:4])) + ("..." * (len(node.token_ids) > 4))
        return f"<[^{listed}]>", where
    body = f"<[{node.token_id}]>" if node.text is None else node.text
    return ("!" if node.negated else "") + body, where


def _raw_embedded(data: bytes, what: str) -> Embedded:
    """The regular language of exactly the bytes ``data`` (a ``RAW_BYTES`` definition)."""
    return Embedded(chr(PLACEHOLDER_BASE), (RAW_BYTES + data.decode("latin-1"),), what)


def _map_special(gdef: GrammarDef, fn: Callable[[SpecialToken], Expr]) -> GrammarDef:
    """``gdef`` with every ``SpecialToken`` node replaced by ``fn(node)`` (in the order
    they are written: rules, then terminals); ``gdef`` itself when nothing changed.
    """

    def walk(expr: Expr) -> Expr:
        if isinstance(expr, SpecialToken):
            return fn(expr)
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
    changed = any(rules[n] is not e for n, e in gdef.rules.items()) or any(
        terminals[n] is not e for n, e in gdef.terminals.items()
    )
    return replace(gdef, rules=rules, terminals=terminals) if changed else gdef
