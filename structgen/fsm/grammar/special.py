"""Special tokens in grammars: the token syntax of the front ends, and its resolution.

Every dialect (Lark, GBNF, EBNF) reads, where an item may stand (llama.cpp's syntax, and
llguidance's ``<[^...]>``, ``<[*]>`` and ``<[...]>`` lists):

* ``<[123]>``: the token with id 123;
* ``<name>`` / ``<|name|>``: the special token whose text is exactly that
  (``<tool_call>``, ``<|python_tag|>``), looked up in the vocabulary at compile;
* ``!<[123]>``, ``!<name>``, ``!<|name|>``: exactly one token that is not that one (any
  id may be excluded, an ordinary or EOS one too). It allows the ordinary tokens and the
  special tokens the grammar names elsewhere (ordinary tokens holding the byte ``0xFF``
  included), never another special token nor EOS as one of its tokens (llguidance's
  ``<[^id]>`` allows every other id, special and EOS included; llama.cpp documents
  ``!<...>`` as any token but that one). So ``<think> !<</think>>* </think>`` is any
  run of tokens up to the first ``</think>``; ``!<X> "a"`` is one token then ``a``, never
  two tokens whose bytes happen to be one token's;
* ``<[^1,5-7]>`` (llguidance's spelling): exactly one token that is none of those ids
  (a list of ids and inclusive ranges), otherwise as ``!<...>``;
* ``<[*]>`` (llguidance's): exactly one token, any that ``!<...>`` may take (llguidance
  also allows every special token and EOS there);
* ``<[1,5-7]>`` (llguidance's; a list with a ``,`` or a range): exactly one token among
  those ids. A special id listed is named (allowable, so ``!<...>`` elsewhere may take it
  too); an EOS id is an error (the output ends where the grammar may end). A single
  ``<[id]>`` naming an ordinary token is the list of that one id (llguidance's reading);
  naming a special token, it is that special token. Without a vocabulary ``<[id]>`` is
  read as a special token (``matches()`` of a grammar compiled with no vocabulary).
  llguidance skips empty items (``<[1,]>``, ``<[1,,2]>``); here they are an error.

A malformed ``<[...]>`` (empty, a range whose end is below its start, ``*`` beside ids,
``<[^*]>``, ``!`` before a list, an empty item, more than ``MAX_EXCLUDED`` ids) is an
``InvalidGrammarError`` naming its line:column.

A quoted string is always characters. ``resolve_special_tokens`` replaces each
``SpecialToken`` node: ``<X>`` by X's marker bytes (``index.vocabulary.special_token_marker``,
a ``RAW_BYTES`` definition), ``!<X>`` by X's wildcard marker (``wildcard_marker``), and
the grammar is compiled against the vocabulary view in which the named tokens are
allowable and no token spells a marker (``Vocabulary.with_special_tokens``): the mask
allows a named id exactly where the grammar has it, and ``index.token_index.TokenIndex``
reads a wildcard marker as a token edge (every allowable token but X, one token). ``<[*]>``
is the wildcard marker excluding nothing, ``<[1,5-7]>`` the one that lists the ids it
allows (``wildcard_marker(ids, only=True)``): all three are token edges.

``matches(text)`` has no tokens: it reads ``<X>`` as X's marker bytes and ``!<X>`` as one
or more characters, or the marker of a special token the grammar names other than X (a
list ``<[...]>``: or the marker of a special token it lists; ``<[*]>``: of any named one)
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

# ``!?<[...]>`` (an id, or llguidance's ``^``-lists, ``*`` and lists; ``special_token_node``
# reads the inside, so a malformed one is an error at its place, not a lexer error),
# ``<|name|>`` or ``<name>`` (no whitespace, quotes or angle brackets inside). No ``#`` or
# space: Lark's lexer embeds it in a verbose pattern.
SPECIAL_TOKEN_TEXT = r"!?<(?:\[[^\]<>\s\"']*\]|\|[^|<>\s]+\||[^<>\s\"'|\[\]]+)>"
_ID_LIST = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
SPECIAL_TOKEN = re.compile(SPECIAL_TOKEN_TEXT)
MAX_EXCLUDED = 1 << 18  # ids one ``<[^...]>`` or ``<[...]>`` may list, ranges counted out


def special_token_node(written: str, line: int, column: int) -> SpecialToken:
    """The node of a match of ``SPECIAL_TOKEN`` written at ``line:column``.

    Raises:
        InvalidGrammarError: a malformed ``<[...]>`` (the module docstring), with the
            line:column.
    """
    negated = written.startswith("!")
    body = written[1:] if negated else written
    if not body.startswith("<["):
        return SpecialToken(body, None, negated, line, column)
    inside = body[2:-2]
    if inside.isdigit():
        return SpecialToken(None, int(inside), negated, line, column)

    def bad(why: str) -> InvalidGrammarError:
        return InvalidGrammarError(f"{written} at {line}:{column}: {why}")

    if negated:
        raise bad("'!' takes one token (!<[id]>); write <[^a,b-c]> for any token but several")
    if inside == "*":
        return SpecialToken(None, None, True, line, column, (), True)
    excluded = inside.startswith("^")
    listed = inside[1:] if excluded else inside
    if listed == "*":
        raise bad("excludes every token (<[*]> is any one token)")
    if "*" in listed:
        raise bad("'*' (any one token) stands alone: <[*]>")
    if not listed:
        raise bad("lists no token")
    if not _ID_LIST.fullmatch(listed):
        raise bad("expected token ids and ranges separated by ',' (<[1,5-7]>, <[^1,5-7]>)")
    ids: set[int] = set()
    for item in listed.split(","):
        lo, _, hi = item.partition("-")
        first, last = int(lo), int(hi or lo)
        if last < first or len(ids) + last - first >= MAX_EXCLUDED:
            raise bad(f"the range {item} is empty or too large")
        ids.update(range(first, last + 1))
    return SpecialToken(None, None, excluded, line, column, tuple(sorted(ids)), True)


def marker_embedded(token_id: int, what: str) -> Embedded:
    """The regular language of exactly one special token: its marker bytes."""
    return _raw_embedded(special_token_marker(token_id), what)


class ResolvedTokens(NamedTuple):
    """What ``resolve_special_tokens`` gives.

    Attributes:
        gdef: the grammar with every ``SpecialToken`` replaced.
        named: the ids written as ``<...>``, and the special ids a ``<[a,b-c]>`` lists
            (allowable: compile against
            ``vocab.with_special_tokens(named, reserve_markers=has_edges)``).
        negated: the ids written as ``!<...>`` or excluded by ``<[^...]>``.
        has_edges: the grammar has a token edge (``!<...>``, ``<[^...]>``, ``<[*]>`` or
            ``<[a,b-c]>``).
    """

    gdef: GrammarDef
    named: frozenset[int]
    negated: frozenset[int]
    has_edges: bool


def resolve_special_tokens(
    gdef: GrammarDef, vocab: Vocabulary | None, *, as_text: bool = False
) -> ResolvedTokens:
    """``gdef`` with every ``SpecialToken`` replaced by its marker, and the ids it names.

    ``<X>`` becomes X's marker (``special_token_marker``). ``!<X>`` becomes X's wildcard
    marker (``wildcard_marker``: the token index allows any one allowable token but X
    there), or with ``as_text`` the language ``matches()`` reads for it: one or more
    characters, or the marker of a special token the grammar names other than X. ``<[*]>``
    is the marker excluding nothing, ``<[a,b-c]>`` the one allowing only those ids (as
    text: one or more characters, or the marker of a special token it lists).

    Args:
        gdef: the parsed grammar (not mutated).
        vocab: the vocabulary names are looked up in (None: only ``<[id]>`` resolves).
        as_text: write ``!<X>`` as text (``matches()``'s contract) instead of its
            wildcard marker.

    Returns:
        ``ResolvedTokens``; its ``gdef`` is ``gdef`` itself when it names no token.

    Raises:
        InvalidGrammarError: an unknown name, a name without a vocabulary, an id outside
            the vocabulary, for ``<...>`` an EOS token (the output ends where the grammar
            may end), an EOS id in a ``<[a,b-c]>``, each with its line:column.
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
        if vocab is not None and tid in vocab.eos_token_ids:
            raise InvalidGrammarError(
                f"{written} at {where} names an end-of-sequence token; the output ends "
                "wherever the grammar may end, without naming it"
            )
        return tid

    def token_ids(node: SpecialToken) -> tuple[int, ...]:
        if not node.is_list:
            return (token_id(node),)
        ids = node.token_ids
        if vocab is not None and ids and ids[-1] >= vocab.vocab_size:
            written, where = _written(node)
            raise InvalidGrammarError(
                f"special token {written} at {where}: the vocabulary has {vocab.vocab_size} tokens"
            )
        if vocab is not None and not node.negated and vocab.eos_token_ids & set(ids):
            written, where = _written(node)
            raise InvalidGrammarError(
                f"{written} at {where} lists an end-of-sequence token; the output ends "
                "wherever the grammar may end, without naming it"
            )
        return ids

    def as_list(node: SpecialToken) -> SpecialToken:
        """A ``<[id]>`` naming an ordinary token as the list of that one id."""
        tid = node.token_id
        if vocab is None or node.negated or node.is_list or tid is None:
            return node
        if not 0 <= tid < vocab.vocab_size or tid in vocab.special_token_ids:
            return node
        if tid in vocab.eos_token_ids:
            return node
        return replace(node, token_id=None, token_ids=(tid,), is_list=True)

    has_edges = False

    def collect(node: SpecialToken) -> Expr:
        nonlocal has_edges
        node = as_list(node)
        ids = token_ids(node)
        has_edges |= node.negated or node.is_list
        if node.negated:
            negated.update(ids)
        elif not node.is_list:
            named.update(ids)
        elif vocab is not None:  # a list names the special tokens it holds
            named.update(vocab.special_token_ids.intersection(ids))
        return node

    def resolve(node: SpecialToken) -> Expr:
        node = as_list(node)
        ids = token_ids(node)
        what = "{} at {}".format(*_written(node))
        if not node.negated and not node.is_list:
            return marker_embedded(ids[0], what)
        if not as_text:
            return _raw_embedded(wildcard_marker(ids, only=not node.negated), what)
        markers = sorted(named - set(ids)) if node.negated else sorted(named & set(ids))
        others = [marker_embedded(i, f"<[{i}]>") for i in markers]
        return Alt((Pattern(_ANY_TEXT), *others)) if others else Pattern(_ANY_TEXT)

    _map_special(gdef, collect)
    if not named and not has_edges:
        return ResolvedTokens(gdef, frozenset(), frozenset(), False)
    resolved = _map_special(gdef, resolve)
    return ResolvedTokens(resolved, frozenset(named), frozenset(negated), has_edges)


def _written(node: SpecialToken) -> tuple[str, str]:
    """``(the token as written, its line:column)`` for messages."""
    where = f"{node.line}:{node.column}"
    if node.is_list:
        listed = ",".join(map(str, node.token_ids[:4])) + ("..." * (len(node.token_ids) > 4))
        return f"<[{'^' * node.negated}{listed or '*'}]>", where
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
