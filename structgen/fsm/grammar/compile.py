"""``compile_grammar``: grammar text -> ``BaseCompiledGrammar``, cached.

Pipeline: the front end of the dialect (``lark``, ``bnf``) gives a ``GrammarDef``;
``lower_grammar`` gives one regex when no rule recurses (compiled like ``compile_regex``:
a plain ``ByteDFA``, today's path and speed, as a ``compiler.CompiledGrammar``) or a
``CfgGrammar``, whose terminals become one ``ByteDFA`` each and whose productions become
``EarleyCharts``; the two meet in a ``GrammarAutomaton`` (``automaton.py``), which the
token layer drives like any ``ByteDFA`` (``TokenIndex`` masks, the regex ``Matcher``).

Reading the text (``parse_grammar``, ``syntax="auto"``) is ``front.py``'s.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any

from ...errors import GrammarTooComplexError, InvalidGrammarError, RegexError, StructgenError
from ...lru import LRUCache
from ..base import BaseCompiledGrammar
from ..compiler import AutomatonGrammar, CompiledGrammar
from ..deadline import Deadline
from ..index import budget as budget_module
from ..index.budget import CompletionBudget
from ..index.token_index import TokenIndex
from ..index.vocabulary import Vocabulary
from ..matcher import Matcher
from ..regex.dfa import DEFAULT_MAX_SECONDS, DEFAULT_MAX_STATES, ByteDFA, regex_to_dfa
from ..regex.escape import escape_literal
from ..regex.parse import SharedDefinitions
from ..regex.terms import EMPTY, EPS, TermArena
from ..spec import LoweredRegex
from .automaton import DEFAULT_MAX_CONFIGS, GrammarAutomaton
from .earley import DEFAULT_MAX_ITEMS, EarleyCharts
from .front import SYNTAXES, detect_syntax, parse_grammar
from .ir import GrammarDef, Pattern
from .lexers import SharedLexers, TerminalLexer
from .lower import CfgGrammar, lower_grammar, nodes_of
from .special import SPECIAL_TOKEN, resolve_special_tokens

__all__ = ["compile_grammar", "parse_grammar", "detect_syntax", "CompiledCFG", "SYNTAXES"]

CACHE_SIZE = 64


class CompiledCFG(AutomatonGrammar):
    """A recursive grammar compiled to a ``GrammarAutomaton``, optionally for a vocabulary.

    Matchers are the regex layer's ``Matcher`` over a ``TokenIndex`` of the automaton, so
    ``fill_bitmask``, ``advance``, ``validate``, ``rollback``, ``fork``,
    ``forced_bytes``, budget-aware closing (``max_tokens``) and ``fill_bitmask_batch``
    (the base class's serial loop) behave exactly as for a regex, over configurations
    instead of DFA states.

    Attributes:
        spec: the ``structgen.fsm.spec.Grammar`` compiled.
        cfg: the productions and terminals (``lower.CfgGrammar``).
        dfa: the automaton (a ``ByteDFA`` look-alike).
        vocab: the vocabulary, or None (then only ``matches`` works).
        token_index: the ``TokenIndex`` (None without a vocabulary).
        warnings: messages about parts read loosely.
        trigger: free text up to this string comes first (or None).
    """

    def __init__(
        self,
        spec: Any,
        cfg: CfgGrammar,
        dfa: GrammarAutomaton,
        vocab: Vocabulary | None,
        warnings: list[str],
    ) -> None:
        self.spec = spec
        self.cfg = cfg
        self.dfa = dfa
        self.vocab = vocab
        self.trigger = getattr(spec, "trigger", None)
        self.token_index = TokenIndex(dfa, vocab) if vocab is not None else None  # type: ignore[arg-type]
        self.warnings = list(warnings)
        self._budget_registered = False

    def __repr__(self) -> str:
        return (
            f"CompiledCFG(num_rules={len(self.cfg.lhs)}, num_terminals={len(self.cfg.terminals)}, "
            f"vocab={'none' if self.vocab is None else self.vocab.fingerprint[:12]})"
        )

    def matcher(self, max_tokens: int | None = None) -> Matcher:
        """A fresh per-request ``Matcher`` (the grammar's own token budget registered first
        when ``max_tokens`` is set).

        Raises:
            NoVocabularyError: the grammar was compiled with ``vocab=None``.
        """
        if max_tokens is not None and self.token_index is not None:
            if not self._budget_registered:
                _register_budget(self.token_index)  # O(vocabulary): only when a budget is used
                self._budget_registered = True
        return super().matcher(max_tokens)


class _GrammarBudget(CompletionBudget):
    """The token budget of a grammar automaton: byte completions come from the parser's
    shortest derivations (``GrammarAutomaton.shortest_completion``) instead of a
    breadth-first search over an automaton that grows with nesting.
    """

    def _byte_completion(self, state: int) -> bytes | None:
        return self._dfa.shortest_completion(state)

    def _quick_of(self, state: int) -> int:
        # the shortest completions are already cheap here: their tokenized witness serves
        # as the quick one (no walk over parser configurations)
        return self._upper_greedy(state)


def _register_budget(index: TokenIndex) -> None:
    """Make ``budget_for(index)`` (what ``Matcher`` calls) return a ``_GrammarBudget``.

    ``index.budget`` keeps one budget per token index in a weak table; it has no public
    hook for another kind, so the entry is set here before any matcher exists.
    """
    with budget_module._tables_lock:
        if not isinstance(budget_module._tables.get(index), _GrammarBudget):
            budget_module._tables[index] = _GrammarBudget(index)


def _lexer(
    pattern: str,
    definitions: tuple[str, ...],
    max_states: int,
    deadline: Deadline,
    shared: SharedDefinitions | None = None,
    source: tuple[str, frozenset[int]] | None = None,
    lexers: SharedLexers | None = None,
) -> ByteDFA | TerminalLexer | None:
    """The lexer DFA of one terminal, or None when its language is empty (the productions
    that use it can never finish: ``EarleyCharts`` drops them, as a JSON Schema's
    unsatisfiable property value drops that property).

    Args:
        pattern: the terminal's regex, with ``definitions`` (its own numbering).
        definitions: the shared subpatterns ``pattern`` refers to.
        max_states: the lexer's state budget.
        deadline: the compile's CPU-time budget.
        shared: the grammar's definitions lowered once into one arena (``_lexers``); with
            ``source`` (the same terminal in that numbering) the lexer is built on them,
            else ``pattern`` is compiled on its own. The same language either way.
        source: ``(pattern, needs)`` of the terminal in ``shared``'s numbering.
        lexers: with ``shared``, the terminals' one automaton (a ``TerminalLexer`` of it is
            returned); else a ``ByteDFA`` of the terminal's own.

    Raises:
        InvalidGrammarError: the terminal's regex does not parse.
        GrammarTooComplexError: a budget is exceeded.
    """
    root = _lexer_root(pattern, definitions, max_states, deadline, shared, source)
    if not isinstance(root, int):  # the terminal's own automaton, or None
        return root
    # no row built here: the automaton builds a lexer's rows when a configuration holding
    # one of its states needs them (a grammar's keywords and operators are mostly not
    # expected at the start)
    arena = shared.arena  # type: ignore[union-attr]
    if lexers is not None:
        return lexers(arena, root)
    return ByteDFA(arena, root, max_states=max_states, max_seconds=deadline.remaining())


def _lexer_root(
    pattern: str,
    definitions: tuple[str, ...],
    max_states: int,
    deadline: Deadline,
    shared: SharedDefinitions | None,
    source: tuple[str, frozenset[int]] | None,
) -> int | ByteDFA | None:
    """``_lexer``'s language of one terminal (same arguments): its term in ``shared.arena``
    (not ``EMPTY``); or its own ``ByteDFA`` (compiled from ``pattern`` alone, when
    ``shared`` cannot lower it); or None when it matches no string.

    Raises:
        InvalidGrammarError, GrammarTooComplexError: as ``_lexer``.
    """
    try:
        root = None if shared is None or source is None else shared.lower(*source)
        if root is None:
            return regex_to_dfa(
                pattern,
                definitions=list(definitions) or None,
                eager_rows=1,
                max_states=max_states,
                max_seconds=deadline.remaining(),
                deadline=deadline,
            )
        if root == EMPTY:
            return None
        arena = shared.arena  # type: ignore[union-attr]
        # a term without AND / NOT is empty only as EMPTY (``TermArena.is_empty``'s own
        # first answer): the search and its budget are for the others
        if arena.has_boolean(root):
            arena.deadline = deadline  # emptiness searches share the compile's budget
            try:
                if arena.is_empty(root):
                    return None
            finally:
                arena.deadline = None
    except RegexError as exc:
        if str(exc).endswith("matches no string"):
            return None
        raise InvalidGrammarError(
            f"a terminal of the grammar is not a usable regex: {exc}"
        ) from exc
    return root


def _lexers(
    cfg: CfgGrammar, max_states: int, deadline: Deadline
) -> list[ByteDFA | TerminalLexer | None]:
    """The lexer DFA of every terminal (None: an empty language, as ``_lexer``).

    The terminals share one ``TermArena`` and each shared definition is lowered once for
    all of them (``parse.SharedDefinitions``), instead of once per terminal that bundles
    it: the same terms, so the same languages; and one ``ByteDFA`` over that arena, each
    terminal's lexer a ``TerminalLexer`` started at its term (``lexers.py``: a term two
    terminals reach has one row). The terminals are lowered in order, then their states
    added in that order (``SharedLexers.lexers``): the states ``_lexer`` would give them
    one by one. The automaton uses its lexers under its own lock only, which makes the
    shared arena safe. Without recorded sources (a ``CfgGrammar`` built elsewhere) each
    terminal is compiled on its own.

    Raises:
        InvalidGrammarError: a terminal's regex does not parse.
        GrammarTooComplexError: a budget is exceeded.
    """
    if len(cfg.sources) != len(cfg.terminals):
        return [_lexer(p, d, max_states, deadline) for p, d in cfg.terminals]
    shared = SharedDefinitions(TermArena(), cfg.definitions, deadline, cfg.reusable, cfg.seeds)
    one = SharedLexers(max_states, deadline.remaining())
    out: list[ByteDFA | TerminalLexer | None] = [
        _lexer_root(p, d, max_states, deadline, shared, src)
        for (p, d), src in zip(cfg.terminals, cfg.sources)
    ]
    at = [t for t, root in enumerate(out) if isinstance(root, int)]
    if at:
        lexers = one.lexers(shared.arena, [out[t] for t in at])  # type: ignore[misc]
        for t, lexer in zip(at, lexers):
            out[t] = lexer
    return out


def _lead_in(trigger: str | None, prefix: str) -> ByteDFA | None:
    """The text read before the grammar starts: free text up to and including the first
    ``trigger``, or the literal ``prefix`` (token healing's removed text); None if none.
    """
    if trigger is None and not prefix:
        return None
    arena = TermArena()
    if trigger is None:
        return ByteDFA(arena, arena.bytes_then(prefix.encode("utf-8"), EPS))
    data = trigger.encode("utf-8")
    if not data:
        raise InvalidGrammarError("the constraint trigger must be a non-empty string")
    return ByteDFA(arena, arena.until(data, EPS))


_cache: LRUCache[tuple, BaseCompiledGrammar] = LRUCache(CACHE_SIZE)


def compile_grammar(
    text: str,
    vocab: Vocabulary | None = None,
    *,
    syntax: str = "auto",
    start: str | None = None,
    trigger: str | None = None,
    prefix: str = "",
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    max_configs: int = DEFAULT_MAX_CONFIGS,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> BaseCompiledGrammar:
    """Compile a context-free grammar (Lark, GBNF or EBNF) for ``vocab`` (cached).

    Args:
        text: the grammar text.
        vocab: the vocabulary (None: only ``matches`` works).
        syntax: ``"auto"`` (module docstring), ``"lark"``, ``"gbnf"`` or ``"ebnf"``.
        start: the start rule (default ``start`` for Lark, ``root`` for GBNF/EBNF).
        trigger: free text up to and including the first ``trigger``, then the grammar
            (as for ``compile_regex``).
        prefix: literal text the output starts with before the grammar (token healing's
            removed prompt text); not with a ``trigger``.
        max_states: state budget of each terminal's DFA and of a regular grammar's DFA.
        max_seconds: CPU-time budget of the compile, in CPU seconds of the compiling thread
            (``deadline.Deadline``: time spent waiting for a core or the GIL does not count).
        max_configs: budget of parser configurations built (at compile and as masks
            and decoding reach new ones).
        max_items: budget of Earley items over all chart nodes built.

    Returns:
        A ``compiler.CompiledGrammar`` (no rule recurses: one regex) or a ``CompiledCFG``;
        its ``spec`` is the ``structgen.fsm.spec.Grammar`` of these arguments.

    Raises:
        InvalidGrammarError: a syntax error, an undefined name or a recursive terminal
            (with line:column), groups nested deeper than ``MAX_NESTING`` (200) in one
            rule's text (at the group past it), an ambiguous ``syntax="auto"``, no string in
            the language. Chains of rule references have no depth limit (a chain of 10,000
            rules compiles in ~0.5-0.7 CPU s).
        UnsupportedGrammarError: a construct not implemented (with line:column).
        GrammarTooComplexError: a budget is exceeded.
    """
    from ..spec import Grammar

    spec = Grammar(text, syntax=syntax, start=start, trigger=trigger, prefix=prefix)
    if trigger is not None and prefix:
        raise InvalidGrammarError("a grammar takes a trigger or a prefix, not both")
    fingerprint = None if vocab is None else vocab.fingerprint
    key = (spec.cache_key(), max_states, max_seconds, max_configs, max_items, fingerprint)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    deadline = Deadline(max_seconds)
    grammar = compile_with_tokens(
        parse_grammar(text, syntax, start),
        spec,
        vocab,
        trigger=trigger,
        prefix=prefix,
        deadline=deadline,
        max_seconds=max_seconds,
        max_states=max_states,
        max_configs=max_configs,
        max_items=max_items,
        # the readers make a SpecialToken only from a SPECIAL_TOKEN match in the text, so
        # without one (a "<" operator in a literal is not) the walk finds nothing
        names_tokens=SPECIAL_TOKEN.search(text) is not None,
    )
    _cache.put(key, grammar)
    return grammar


def compile_with_tokens(
    parsed: GrammarDef,
    spec: Any,
    vocab: Vocabulary | None,
    *,
    trigger: str | None = None,
    prefix: str = "",
    deadline: Deadline,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    names_tokens: bool = True,
    **budgets: int,
) -> BaseCompiledGrammar:
    """``compile_grammar_def`` after resolving the grammar's special tokens
    (``special.resolve_special_tokens``): compiled against the vocabulary view in which the
    ``<X>`` it names are allowable and its ``!<X>`` are token edges; with a ``!<X>``, the
    grammar's ``matches`` reads a text form of it (built on first use, within
    ``max_seconds`` of its own).

    Args:
        parsed: the grammar as its front end read it.
        spec: the spec the result carries.
        vocab: the vocabulary (None: only ``matches`` works).
        trigger: free text up to and including it first (as ``compile_grammar``).
        prefix: literal text before the grammar (as ``compile_grammar``).
        deadline: the compile's CPU-time budget.
        max_seconds: the CPU-time budget of the text form's compile.
        names_tokens: False when the text cannot name a token (skips the walk).
        **budgets: ``max_states``, ``max_configs``, ``max_items`` (as ``compile_grammar_def``).

    Raises:
        InvalidGrammarError, GrammarTooComplexError: as ``compile_grammar``.
    """
    gdef, has_edges, base_vocab = parsed, False, vocab
    if names_tokens:
        gdef, named, _, has_edges = resolve_special_tokens(parsed, vocab)
        if vocab is not None and (named or has_edges):  # named ones allowable, as markers
            vocab = vocab.with_special_tokens(named, reserve_markers=has_edges)
    grammar = compile_grammar_def(
        gdef, spec, vocab, trigger=trigger, prefix=prefix, deadline=deadline, **budgets
    )
    if has_edges:  # matches() reads each token edge as text (special.resolve_special_tokens)
        text_form = resolve_special_tokens(parsed, base_vocab, as_text=True).gdef

        def membership() -> BaseCompiledGrammar:
            return compile_grammar_def(
                text_form,
                spec,
                None,
                trigger=trigger,
                prefix=prefix,
                deadline=Deadline(max_seconds),
                **budgets,
            )

        grammar.membership = functools.cache(membership)
    return grammar


def compile_grammar_def(
    gdef: GrammarDef,
    spec: Any,
    vocab: Vocabulary | None,
    *,
    trigger: str | None = None,
    prefix: str = "",
    max_states: int = DEFAULT_MAX_STATES,
    deadline: Deadline,
    max_configs: int = DEFAULT_MAX_CONFIGS,
    max_items: int = DEFAULT_MAX_ITEMS,
) -> BaseCompiledGrammar:
    """Compile a parsed grammar (uncached; ``compile_grammar`` and ``schema_rules`` call it).

    Args:
        gdef: the grammar.
        spec: the spec the result carries (``spec`` attribute).
        vocab: the vocabulary (None: only ``matches`` works).
        trigger: free text up to and including it first (as ``compile_grammar``).
        prefix: literal text before the grammar (as ``compile_grammar``).
        max_states: state budget of each terminal's DFA (and of a regular grammar's).
        deadline: the compile's CPU-time budget (``deadline.Deadline``).
        max_configs: budget of parser configurations built.
        max_items: budget of Earley items.

    Raises:
        InvalidGrammarError, GrammarTooComplexError: as ``compile_grammar`` (groups nested
            deeper than the interpreter's recursion allows, possible only in a ``GrammarDef``
            built in code: ``GrammarTooComplexError``).
    """
    try:
        return _compile_def(
            gdef, spec, vocab, trigger, prefix, max_states, deadline, max_configs, max_items
        )
    except InvalidGrammarError as exc:
        if isinstance(exc.__cause__, RegexError):  # name the user's regex that fails, if one
            located = regex_error(gdef)
            if located is not None:
                raise located from exc.__cause__
        raise
    except RecursionError:
        # the lowering and the analyses are iterative (any chain of rule references); an
        # expression node's hash still recurses per nested group, which the text readers
        # bound (``lark.MAX_NESTING``, ``bnf.MAX_NESTING``): only a GrammarDef built in code
        # with deeper nesting gets here
        raise GrammarTooComplexError(
            "the grammar nests too deeply to compile (groups or repetitions inside one "
            f"another, about {sys.getrecursionlimit() // 4} levels); flatten it"
        ) from None


def regex_error(gdef: GrammarDef) -> InvalidGrammarError | None:
    """The error naming the first regex written in the grammar text (a ``Pattern`` with a
    ``line``) that does not compile on its own, with its line:column; None when each does
    (the failure is elsewhere). Called only after a compile failed. Raises: never.
    """
    written = [
        p
        for expr in (*gdef.terminals.values(), *gdef.rules.values())
        for p in nodes_of(expr, Pattern)
        if p.line
    ]
    for pattern in sorted(written, key=lambda p: (p.line, p.column)):
        try:
            regex_to_dfa(pattern.regex)
        except RegexError as exc:
            return InvalidGrammarError(
                f"the regex at {pattern.line}:{pattern.column} is not usable: {exc}"
            )
        except StructgenError:  # a budget: not this regex's syntax
            continue
    return None


def _compile_def(
    gdef: GrammarDef,
    spec: Any,
    vocab: Vocabulary | None,
    trigger: str | None,
    prefix: str,
    max_states: int,
    deadline: Deadline,
    max_configs: int,
    max_items: int,
) -> BaseCompiledGrammar:
    """``compile_grammar_def``'s work (its errors uninterpreted)."""
    lowered = lower_grammar(gdef, deadline)
    if isinstance(lowered, LoweredRegex):
        if prefix:
            lowered = lowered._replace(
                pattern=escape_literal(prefix) + "(?:" + lowered.pattern + ")"
            )
        try:
            dfa = regex_to_dfa(
                lowered.pattern,
                trigger=trigger,
                definitions=list(lowered.definitions) or None,
                max_states=max_states,
                max_seconds=deadline.remaining(),
                deadline=deadline,
            )
        except RegexError as exc:
            raise InvalidGrammarError(f"the grammar matches no usable language: {exc}") from exc
        grammar: BaseCompiledGrammar = CompiledGrammar(spec, lowered, dfa, vocab)
    else:
        built = _lexers(lowered, max_states, deadline)
        empty = {t for t, d in enumerate(built) if d is None}
        if empty:  # a terminal with no string: never expected, never movable, never ignored
            never = regex_to_dfa("")
            lowered = dataclasses.replace(
                lowered, ignore=[t for t in lowered.ignore if t not in empty]
            )
        lexers = [never if d is None else d for d in built]
        nullable = {t for t, d in enumerate(lexers) if t not in empty and d.is_accepting(d.initial)}
        charts = EarleyCharts(lowered, nullable, max_items=max_items, empty_terminals=empty)
        dfa = GrammarAutomaton(
            charts,
            lexers,
            lowered.ignore,
            max_states=max_configs,
            lead_in=_lead_in(trigger, prefix),
        )
        dfa.row(dfa.initial)
        deadline.check("compiling the grammar")
        grammar = CompiledCFG(spec, lowered, dfa, vocab, gdef.warnings)
    return grammar


def clear_cache() -> None:
    """Drop every cached compiled grammar."""
    _cache.clear()
