"""``compile_structural_tag``: a ``StructuralTag`` for a vocabulary, special tokens included.

A trigger, begin or end whose text is one special token of the vocabulary (Qwen's
``<tool_call>`` where it is special, Llama's ``<|python_tag|>``, Mistral's
``[TOOL_CALLS]``) is accepted both as that single token and as its characters: the tag is
lowered with those tokens' markers (``lower.lower_format``'s ``special_tokens``) and
compiled through ``compile_spec`` against ``Vocabulary.with_special_tokens`` of their
ids. Without such a text this is ``compile_spec`` itself. EOS tokens are never named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base import BaseCompiledGrammar
from ..spec import LoweredRegex, RegexSpec
from .format import FormatNode, Tag, TagsWithSeparator, TriggeredTags

__all__ = ["compile_structural_tag", "tag_texts", "TagFacts", "tag_facts"]


def tag_texts(node: FormatNode) -> set[str]:
    """Every trigger, begin and end text of a format tree."""
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Tag):
            out.add(n.begin)
            out.update(n.end)
            stack.append(n.content)
        elif isinstance(n, (TriggeredTags, TagsWithSeparator)):
            out.update(getattr(n, "triggers", ()))
            stack.extend(n.tags)
        else:
            stack.extend(getattr(n, "elements", ()))
    return out


@dataclass(frozen=True)
class TagFacts:
    """What ``compile_structural_tag`` reads of a tag's tree before its cache lookup.

    Attributes:
        texts: every trigger, begin and end text (``tag_texts``), sorted.
        has_grammar: a ``GrammarContent`` occurs in the tree (``grammar.has_grammar``).
    """

    texts: tuple[str, ...]
    has_grammar: bool


def tag_facts(tag: Any) -> TagFacts:
    """The ``TagFacts`` of a ``StructuralTag``, walked once per tag object and kept on
    it (a tag is immutable, as its ``cache_key``), so compiling the same tag again walks
    none of its tools. Raises: never.
    """
    facts = tag.__dict__.get("_tag_facts")
    if facts is None:
        from .grammar import has_grammar

        facts = TagFacts(tuple(sorted(tag_texts(tag.format))), has_grammar(tag.format))
        object.__setattr__(tag, "_tag_facts", facts)
    return facts


@dataclass(frozen=True, eq=False)
class _WithSpecialTokens(RegexSpec):
    """A structural tag lowered with some of its texts as special tokens (internal)."""

    tag: Any
    special_tokens: tuple[tuple[str, int], ...]
    trigger = None

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        from .lower import lower_format

        pattern, definitions, warnings = lower_format(
            self.tag.format,
            max_convert_seconds=max_convert_seconds,
            special_tokens=dict(self.special_tokens),
        )
        return LoweredRegex(pattern, definitions, warnings)

    def cache_key(self) -> tuple:
        return ("special_tokens", self.tag.cache_key(), self.special_tokens)

    def portable(self) -> RegexSpec:
        return self.tag.portable()  # what crosses a process: the tag (compiled again there)


def compile_structural_tag(tag: Any, vocab: Any, **budgets: Any) -> BaseCompiledGrammar:
    """Compile a ``StructuralTag`` for ``vocab`` (module docstring).

    Args:
        tag: the ``StructuralTag``.
        vocab: the vocabulary, or None (texts are then characters only).
        **budgets: ``compile_spec``'s budget keywords.

    Returns:
        The grammar (``compile_spec``'s ``CompiledGrammar``); its ``spec`` is the tag's
        ``portable`` form.

    Raises:
        as ``compile_spec`` and ``StructuralTag``.
    """
    from ..compiler import compile_spec

    facts = tag_facts(tag)  # walked once per tag object; the cache key is its digest
    specials: dict[str, int] = {}
    if vocab is not None:
        texts = vocab.special_token_texts
        for text in facts.texts:
            tid = texts.get(text)
            if tid is not None and tid not in vocab.eos_token_ids:
                specials[text] = tid
    from .grammar import compile_with_grammars

    if facts.has_grammar:  # not regular: composed with the contents' rules
        return compile_with_grammars(tag, vocab, specials)
    if not specials:
        return compile_spec(tag, vocab, **budgets)
    spec = _WithSpecialTokens(tag, tuple(sorted(specials.items())))
    return compile_spec(spec, vocab.with_special_tokens(specials.values()), **budgets)
