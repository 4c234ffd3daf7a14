"""Structural tags with grammar contents: the tag composed with the contents' rules.

A tag holding a ``GrammarContent`` is not regular, so it becomes one context-free grammar
(``fsm.grammar``'s IR): every regular part (free text, a region's head, an end, a regex or
JSON content) is an ``Embedded`` regular language written by ``lower.Builder``, each
grammar content is its own rules renamed under a prefix (``_st<i>_``), and the tag's
structure is the start rule (``region* free`` as in ``lower``). The result is lowered and
compiled by ``fsm.grammar``'s machinery (an Earley parser over lazily built lexers), so
matchers, jump-forward and the token budget are those of any grammar. A content grammar
with ``%ignore`` is refused (its ignored text would also be allowed between the tag's own
parts).
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any

from ...errors import InvalidGrammarError, UnsupportedGrammarError
from ...lru import LRUCache
from ..base import BaseCompiledGrammar
from ..deadline import Deadline
from ..grammar.ir import Alt, Embedded, Expr, GrammarDef, Ref, Repeat, Seq
from .format import (
    FormatNode,
    GrammarContent,
    Or,
    Sequence,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
)
from .lower import Builder

__all__ = ["has_grammar", "compile_with_grammars"]

CACHE_SIZE = 32
_cache: LRUCache[tuple, BaseCompiledGrammar] = LRUCache(CACHE_SIZE)


def clear_cache() -> None:
    """Drop every cached compiled grammar of this module."""
    _cache.clear()


_START = "_st_start"


def has_grammar(node: FormatNode) -> bool:
    """True when a ``GrammarContent`` occurs in the tree."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, GrammarContent):
            return True
        if isinstance(n, Tag):
            stack.append(n.content)
        stack.extend(getattr(n, "tags", ()))
        stack.extend(getattr(n, "elements", ()))
    return False


class _Composer:
    def __init__(self, builder: Builder) -> None:
        self.b = builder
        self.gdef = GrammarDef(start=_START, syntax="structural_tag")
        self.num_grammars = 0

    def piece(self, pattern: str) -> Embedded:
        # the definitions list is shared and still growing; ``_frozen`` makes it a tuple
        return Embedded(pattern, self.b.definitions, "a structural tag's text")  # type: ignore[arg-type]

    def expr(self, node: FormatNode) -> Expr:
        if not has_grammar(node):
            return self.piece(self.b.lower(node))
        if isinstance(node, GrammarContent):
            return self.grammar(node)
        if isinstance(node, Sequence):
            return Seq(tuple(self.expr(e) for e in node.elements))
        if isinstance(node, Or):
            return Alt(tuple(self.expr(e) for e in node.elements))
        if isinstance(node, Tag):
            begin = self.piece(self.b.text_or_token(node.begin))
            return Seq((begin, self.expr(node.content), self.piece(self.b.tag_end(node))))
        if isinstance(node, TriggeredTags):
            free, heads = self.b.triggered_heads(node)
            regions = []
            for i, head in heads:
                tag = node.tags[i]
                end = self.piece(self.b.tag_end(tag))
                regions.append(Seq((self.piece(head), self.expr(tag.content), end)))
            region = Alt(tuple(regions)) if len(regions) > 1 else regions[0]
            free_text = self.piece(free)
            if node.stop_after_first:
                return region if node.at_least_one else Alt((region, free_text))
            return Seq((Repeat(region, 1 if node.at_least_one else 0, None), free_text))
        if isinstance(node, TagsWithSeparator):
            one = Alt(tuple(self.expr(t) for t in node.tags))
            if node.stop_after_first:
                return one if node.at_least_one else Repeat(one, 0, 1)
            sep = self.piece(self.b.lower_literal(node.separator))
            several = Seq((one, Repeat(Seq((sep, one)), 0, None)))
            return several if node.at_least_one else Repeat(several, 0, 1)
        raise UnsupportedGrammarError(f"unknown structural tag node {type(node).__name__}")

    def grammar(self, node: GrammarContent) -> Expr:
        from ..grammar.compile import parse_grammar

        where = node.where or "#"
        try:
            content = parse_grammar(node.text, node.syntax)
        except InvalidGrammarError as exc:
            raise type(exc)(f"structural tag at {where}: {exc}") from exc
        if content.ignore:
            raise UnsupportedGrammarError(
                f"structural tag at {where}: a content grammar with %ignore is not supported "
                "(its ignored text would be allowed between the tag's parts too)"
            )
        prefix = f"_st{self.num_grammars}_"
        self.num_grammars += 1
        names = set(content.rules) | set(content.terminals)
        for kind in ("rules", "terminals"):
            target = getattr(self.gdef, kind)
            for name, e in getattr(content, kind).items():
                target[prefix + name] = _renamed(e, prefix, names)
        for name, pos in content.positions.items():
            self.gdef.positions[prefix + name] = pos
        self.gdef.warnings.extend(f"{where}: {w}" for w in content.warnings)
        if content.start not in content.rules:
            raise InvalidGrammarError(
                f"structural tag at {where}: the grammar has no start rule {content.start!r}"
            )
        return Ref(prefix + content.start)


def _renamed(expr: Expr, prefix: str, names: set[str]) -> Expr:
    """``expr`` with every reference to one of ``names`` prefixed."""
    if isinstance(expr, Ref):
        return replace(expr, name=prefix + expr.name) if expr.name in names else expr
    return _map(expr, lambda e: _renamed(e, prefix, names))


def _frozen(expr: Expr) -> Expr:
    """``expr`` with every ``Embedded``'s definitions as a tuple (the final list)."""
    if isinstance(expr, Embedded):
        return replace(expr, definitions=tuple(expr.definitions))
    return _map(expr, _frozen)


def _map(expr: Expr, fn) -> Expr:
    if not is_dataclass(expr):
        return expr
    changes = {}
    for f in fields(expr):
        value = getattr(expr, f.name)
        if isinstance(value, Expr):
            changes[f.name] = fn(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], Expr):
            changes[f.name] = tuple(fn(v) for v in value)
    return replace(expr, **changes) if changes else expr


def compile_with_grammars(
    tag: Any, vocab: Any, special_tokens: dict[str, int], *, max_seconds: float = 10.0
) -> BaseCompiledGrammar:
    """Compile a ``StructuralTag`` whose tree holds grammar contents (module docstring).

    Args:
        tag: the ``StructuralTag``.
        vocab: the vocabulary, or None.
        special_tokens: text -> id of the tag's texts that are special tokens.
        max_seconds: the compile's CPU-time budget (CPU seconds of the compiling thread).

    Returns:
        A ``CompiledGrammar`` (every content grammar regular) or a ``CompiledCFG``; its
        ``spec`` is the tag's portable form. Cached by the tag and the vocabulary.

    Raises:
        InvalidGrammarError, UnsupportedGrammarError: a content grammar (named by its
            JSON pointer), as ``compile_grammar``; the tag's own errors as ``lower``'s.
        GrammarTooComplexError: a budget is exceeded.
    """
    from ..compiler import CompiledGrammar
    from ..grammar.automaton import DEFAULT_MAX_CONFIGS, GrammarAutomaton
    from ..grammar.compile import CompiledCFG, _lexer
    from ..grammar.earley import DEFAULT_MAX_ITEMS, EarleyCharts
    from ..grammar.lower import lower_grammar
    from ..grammar.special import resolve_special_tokens
    from ..regex.dfa import DEFAULT_MAX_STATES, regex_to_dfa
    from ..spec import LoweredRegex

    fingerprint = None if vocab is None else vocab.fingerprint
    key = (tag.cache_key(), tuple(sorted(special_tokens.items())), fingerprint, max_seconds)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    deadline = Deadline(max_seconds)
    composer = _Composer(Builder(None, special_tokens))
    start = composer.expr(tag.format)
    gdef = composer.gdef
    gdef.rules = {name: _frozen(e) for name, e in gdef.rules.items()}
    gdef.terminals = {name: _frozen(e) for name, e in gdef.terminals.items()}
    gdef.rules[_START] = _frozen(start)
    gdef, named, _, has_edges = resolve_special_tokens(gdef, vocab)  # tokens in the contents
    ids = set(special_tokens.values()) | set(named)
    if (ids or has_edges) and vocab is not None:  # matches() reads !<X> as its wildcard marker
        vocab = vocab.with_special_tokens(ids, reserve_markers=has_edges)
    spec = tag.portable()
    lowered = lower_grammar(gdef)
    if isinstance(lowered, LoweredRegex):
        dfa = regex_to_dfa(
            lowered.pattern,
            definitions=list(lowered.definitions) or None,
            max_seconds=max_seconds,
            deadline=deadline,
        )
        grammar: BaseCompiledGrammar = CompiledGrammar(spec, lowered, dfa, vocab)
    else:
        lexers = [_lexer(p, d, DEFAULT_MAX_STATES, deadline) for p, d in lowered.terminals]
        nullable = {t for t, d in enumerate(lexers) if d.is_accepting(d.initial)}
        charts = EarleyCharts(lowered, nullable, max_items=DEFAULT_MAX_ITEMS)
        dfa = GrammarAutomaton(charts, lexers, lowered.ignore, max_states=DEFAULT_MAX_CONFIGS)
        dfa.row(dfa.initial)
        deadline.check("compiling the structural tag")
        grammar = CompiledCFG(spec, lowered, dfa, vocab, gdef.warnings)
    _cache.put(key, grammar)
    return grammar
