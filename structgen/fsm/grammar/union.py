"""``GrammarAlternatives``: one constraint that is any one of several literals, regexes and
grammars (the DSL's ``select`` over sub-expressions), compiled as one automaton.

The options become the alternatives of one start rule of a ``GrammarDef``: a literal is a
``Literal``, a ``Regex`` spec a ``Pattern`` (``regex_group``: its end anchors dropped, as
a whole-output regex reads them, and its leading flags scoped to it), a ``Grammar`` spec
its own rules and terminals under the prefix ``o<i>_`` (so the options' names never
meet). When no option recurses the union is one
regex and a plain DFA (``compile.compile_grammar_def``); otherwise it is a
``CompiledCFG``. A spec subclasses ``Grammar``, so token healing (``prefix``), triggers
and pickling work as for a grammar.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...errors import RequestError, UnsupportedGrammarError
from ...lru import LRUCache
from ..deadline import Deadline
from ..regex.dfa import DEFAULT_MAX_SECONDS
from ..spec import Grammar, Regex
from .ir import Alt, Expr, GrammarDef, Literal, Pattern, Ref, Repeat, Seq

__all__ = ["GrammarAlternatives"]

CACHE_SIZE = 64
_cache: LRUCache[tuple, Any] = LRUCache(CACHE_SIZE)


def clear_cache() -> None:
    """Drop every cached compiled grammar of this module."""
    _cache.clear()


@dataclass(frozen=True)
class GrammarAlternatives(Grammar):
    """Output must be exactly one of ``options``.

    Args:
        text: unused (kept empty; the options are the grammar).
        options: literal strings, ``Regex`` specs (no trigger, no shared definitions)
            and ``Grammar`` specs (no trigger, no ``%ignore``).
        trigger, prefix: as ``Grammar``.

    Raises (at compile): RequestError (an option of another kind), UnsupportedGrammarError
        (a grammar option with ``%ignore``), and what each option's compile raises.
    """

    options: tuple = ()

    def compile(self, vocab: Any) -> Any:
        """Compile for ``vocab`` (cached by ``cache_key`` and the vocabulary)."""
        key = (self.cache_key(), None if vocab is None else vocab.fingerprint)
        hit = _cache.get(key)
        if hit is not None:
            return hit
        from .compile import compile_with_tokens

        grammar = compile_with_tokens(  # a grammar option may name special tokens
            _union(self.options),
            self,
            vocab,
            trigger=self.trigger,
            prefix=self.prefix,
            deadline=Deadline(DEFAULT_MAX_SECONDS),
        )
        _cache.put(key, grammar)
        return grammar

    def cache_key(self) -> tuple:
        """``("alternatives", option keys, trigger, prefix)``."""
        keys = tuple(o if isinstance(o, str) else o.cache_key() for o in self.options)
        return ("alternatives", keys, self.trigger, self.prefix)


def _renamed(expr: Expr, prefix: str) -> Expr:
    """``expr`` with every reference's name prefixed."""
    if isinstance(expr, Ref):
        return Ref(prefix + expr.name, expr.line, expr.column)
    if isinstance(expr, Seq):
        return Seq(tuple(_renamed(x, prefix) for x in expr.items))
    if isinstance(expr, Alt):
        return Alt(tuple(_renamed(x, prefix) for x in expr.items))
    if isinstance(expr, Repeat):
        return Repeat(_renamed(expr.item, prefix), expr.lo, expr.hi)
    return expr


def _union(options: tuple) -> GrammarDef:
    from ..regex.parse import regex_group
    from .compile import parse_grammar

    if not options:
        raise RequestError("a choice of alternatives needs at least one option")
    gdef = GrammarDef(start="select", syntax="select")
    alts: list[Expr] = []
    for i, opt in enumerate(options):
        if isinstance(opt, str):
            alts.append(Literal(opt))
        elif isinstance(opt, Grammar):
            if opt.trigger is not None or opt.prefix:
                raise RequestError(f"select option {i}: a grammar option takes no trigger")
            sub = parse_grammar(opt.text, opt.syntax, opt.start)
            if sub.ignore:
                raise UnsupportedGrammarError(
                    f"select option {i}: %ignore applies to a whole grammar, not one option"
                )
            prefix = f"o{i}_"
            for name, expr in sub.rules.items():
                gdef.rules[prefix + name] = _renamed(expr, prefix)
            for name, expr in sub.terminals.items():
                gdef.terminals[prefix + name] = _renamed(expr, prefix)
            for name, pos in sub.positions.items():
                gdef.positions[prefix + name] = pos
            gdef.warnings.extend(f"select option {i}: {w}" for w in sub.warnings)
            alts.append(Ref(prefix + sub.start, 0, 0))
        elif isinstance(opt, Regex):
            if opt.trigger is not None or opt.definitions:
                raise RequestError(
                    f"select option {i}: a regex option takes no trigger or shared definitions"
                )
            alts.append(Pattern(regex_group(opt.pattern)))
        else:
            raise RequestError(
                f"select option {i} is a {type(opt).__name__}: options are strings, Regex "
                "or Grammar specs"
            )
    gdef.rules["select"] = alts[0] if len(alts) == 1 else Alt(tuple(alts))
    return gdef
