"""``GrammarDef`` -> one regex (no recursion) or a ``CfgGrammar`` for the Earley parser.

Rules that reach no cycle of rule references are *regular*: their language is written as
regex text (shared definitions, ``structgen.fsm.regex.definitions``, so a rule used many
times is converted once). When the start rule is regular the whole grammar is one regex
and compiles to a plain ``ByteDFA`` (``lower_grammar`` returns ``LoweredRegex``). Otherwise
every regular part becomes one terminal of a ``CfgGrammar`` (a run of regular items in a
sequence is one terminal, so the parser sees few lexemes) and the recursive rules become
numbered productions; ``Repeat`` becomes left-recursive helper rules (which Earley
parses with a bounded number of distinct charts).

``%ignore`` terminals: in a regular part each terminal occurrence is preceded by
``(?:ignore)*``; the parser also allows ignore lexemes before every lexeme and at the end.
Both give the semantics of ``ir``'s module docstring.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ...errors import GrammarTooComplexError, InvalidGrammarError
from ...lru import LRUCache
from ..deadline import NEVER, Deadline
from ..regex.definitions import PLACEHOLDER_BASE, placeholder_indices, renumber_placeholders
from ..regex.escape import escape_literal
from ..spec import LoweredRegex
from .ir import (
    Alt,
    Embedded,
    Expr,
    GrammarDef,
    Literal,
    Pattern,
    Ref,
    Repeat,
    Seq,
    rule_expr,
    self_named,
)

__all__ = ["CfgGrammar", "lower_grammar", "nodes_of", "clear_closed", "MAX_RULES"]

MAX_RULES = 100_000  # productions of one grammar (bounded repetitions expand linearly)
_CHECK_EVERY = 1024  # productions added between two checks of the deadline
_T = TypeVar("_T")


@dataclass
class CfgGrammar:
    """Numbered productions over regex terminals (the Earley parser's input).

    Symbols: a nonterminal is an int ``>= 0``; terminal ``t`` is written ``-1 - t``.

    Attributes:
        terminals: ``(pattern, definitions)`` per terminal (structgen regex dialect).
        ignore: terminal ids that are ``%ignore`` lexemes (never in a production).
        lhs: left-hand nonterminal of each production; production 0 is ``S' -> start``.
        rhs: right-hand symbols of each production.
        names: a name per nonterminal (rule names; helpers are ``name#k``).
        start: the augmented start nonterminal (``lhs[0]``).
        definitions: every shared definition of the grammar in one numbering (the
            lowering's; ``terminals`` hold renumbered copies of the ones each needs).
        sources: per terminal, ``(pattern, needs)`` in that numbering: the pattern with
            placeholders of ``definitions`` and the definitions it needs (transitively),
            so the lexers can lower each definition once (empty when not recorded).
        reusable: indices of ``definitions`` whose language is the same in every grammar
            that writes their texts (``GrammarDef.reusable``).
        seeds: the patterns of the closed rules' terminals (``GrammarDef.closed``), the
            same in every grammar that has those rules: with ``reusable``, the lexers
            lower them first, as a run kept per process (``parse.SharedDefinitions``).
    """

    terminals: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    ignore: list[int] = field(default_factory=list)
    lhs: list[int] = field(default_factory=list)
    rhs: list[tuple[int, ...]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    start: int = 0
    definitions: tuple[str, ...] = ()
    sources: list[tuple[str, frozenset[int]]] = field(default_factory=list)
    reusable: frozenset[int] = frozenset()
    seeds: tuple[str, ...] = ()


class _Definitions:
    """Shared regex definitions, bundled per terminal with what they need.

    Each definition records the definitions its text refers to directly (``refs``); what a
    pattern needs transitively is found when it is bundled (``closure``), so a chain of
    10,000 rules, each referring to the next, costs linear time and memory instead of a
    set of every definition below it per definition. A ``needs`` set passed around while
    the regex text is built holds the definitions that text refers to (directly, or through
    a definition it holds, which ``closure`` follows alike).
    """

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.refs: list[frozenset[int]] = []  # per definition: the definitions it needs

    def add(self, text: str, needs: frozenset[int]) -> tuple[str, frozenset[int]]:
        """A placeholder for ``text`` (which needs ``needs``) and the needs of the
        placeholder (the new definition itself).
        """
        i = len(self.texts)
        self.texts.append(text)
        self.refs.append(needs)
        return chr(PLACEHOLDER_BASE + i), frozenset((i,))

    def add_block(self, pattern: str, defs: tuple[str, ...]) -> tuple[str, frozenset[int]]:
        """Append ``defs`` (which refer to each other by their own numbers) and shift
        ``pattern``'s placeholders; the block is needed as a whole.
        """
        base = len(self.texts)
        shift = {PLACEHOLDER_BASE + i: PLACEHOLDER_BASE + base + i for i in range(len(defs))}
        block = frozenset(range(base, base + len(defs)))
        for d in defs:
            self.texts.append(renumber_placeholders(d, shift))
            self.refs.append(block)
        return renumber_placeholders(pattern, shift), block

    def seed(self, texts: tuple[str, ...], deadline: Deadline = NEVER) -> None:
        """Start with ``texts`` as definitions ``0..n-1`` (each refers to earlier ones only,
        as ``GrammarDef.definitions``); an empty text is a slot no pattern refers to.

        Raises:
            GrammarTooComplexError: ``deadline`` expired (checked every ``_CHECK_EVERY`` texts).
        """
        for k, text in enumerate(texts):
            if k and k % _CHECK_EVERY == 0:
                deadline.check("lowering the grammar")
            self.seeded = len(self.texts)  # the earlier ones
            self.refs.append(self.needs_of(text))
            self.texts.append(text)
        self.seeded = len(self.texts)

    seeded = 0

    def needs_of(self, text: str) -> frozenset[int]:
        """The seeded definitions ``text`` refers to."""
        if not self.seeded:
            return frozenset()
        return frozenset(placeholder_indices(text, self.seeded))

    def closure(self, needs: frozenset[int] | set[int]) -> frozenset[int]:
        """``needs`` with every definition they need in turn (iterative). Raises: never."""
        if not needs:
            return frozenset()
        seen = set(needs)
        todo = list(seen)
        refs = self.refs
        while todo:
            new = refs[todo.pop()] - seen
            if new:
                seen |= new
                todo.extend(new)
        return frozenset(seen)

    def bundle(
        self, pattern: str, needs: frozenset[int], closed: bool = False
    ) -> tuple[str, tuple[str, ...]]:
        """``pattern`` with only the definitions it needs (``needs`` and theirs; ``closed``:
        ``needs`` holds them all already), renumbered in order.
        """
        if not needs:  # no placeholder of this numbering to move
            return pattern, ()
        order = sorted(needs if closed else self.closure(needs))
        shift = {PLACEHOLDER_BASE + old: PLACEHOLDER_BASE + new for new, old in enumerate(order)}
        texts = self.texts
        return renumber_placeholders(pattern, shift), tuple(
            [renumber_placeholders(texts[i], shift) for i in order]
        )


class _Lowering:
    def __init__(self, gdef: GrammarDef, deadline: Deadline = NEVER) -> None:
        self.g = gdef
        self.defs = _Definitions()
        self.defs.seed(gdef.definitions, deadline)
        self.term_regex: dict[str, tuple[str, frozenset[int]]] = {}
        self.rule_regex: dict[tuple[str, bool], tuple[str, frozenset[int]]] = {}
        self.ignore: tuple[str, frozenset[int]] | None = None
        self.regular: dict[str, bool] = {}
        self._is_regular: dict[int, tuple[Expr, bool]] = {}  # id(expr) -> (expr, regular?)
        # the terminals being lowered, outermost first -> their place (``_terminal_steps``)
        self._open_terms: dict[str, int] = {}
        self._refs: dict[str, tuple[Ref, ...]] = {}  # rule name -> its references

    def refs_of(self, name: str) -> tuple[Ref, ...]:
        """The references in rule ``name``'s expression (``nodes_of``'s order), walked once
        per lowering; a closed rule's from the process's store (``_closed_entry``).
        Raises: never.
        """
        hit = self._refs.get(name)
        if hit is None:
            g = self.g
            if name in g.closed:
                hit = _closed_entry(g.closed[name], name, g.rules[name])[0]
            else:
                hit = tuple(nodes_of(g.rules[name]))
            self._refs[name] = hit
        return hit

    # ---- checks ---------------------------------------------------------------

    def checknodes_of(self) -> None:
        g = self.g
        if g.start not in g.rules:
            raise InvalidGrammarError(f"the grammar has no start rule {g.start!r}")
        for name, expr in g.terminals.items():
            for ref in nodes_of(expr):
                if ref.name in g.rules:
                    raise InvalidGrammarError(
                        f"terminal {name} refers to rule {ref.name!r} at "
                        f"{ref.line}:{ref.column}; a terminal may use terminals only"
                    )
                if ref.name not in g.terminals:
                    raise InvalidGrammarError(
                        f"undefined terminal {ref.name!r} at {ref.line}:{ref.column}"
                    )
        for rule in g.rules:
            for ref in self.refs_of(rule):
                if ref.name not in g.rules and ref.name not in g.terminals:
                    # in Lark an uppercase name is a terminal
                    kind = "terminal" if g.syntax == "lark" and ref.name[:1].isupper() else "rule"
                    raise InvalidGrammarError(
                        f"undefined {kind} {ref.name!r} at {ref.line}:{ref.column}"
                    )
        for name in g.ignore:
            if name not in g.terminals:
                raise InvalidGrammarError(f"%ignore names undefined terminal {name!r}")

    # ---- regex text -------------------------------------------------------------
    # The regex text of a rule or terminal needs the texts of the regular rules and
    # terminals it refers to: a chain of references can be as long as the grammar, so
    # these walks are generators driven by ``_drive`` (an explicit stack), never Python
    # recursion; ``_open_terms`` holds the terminals being lowered, outermost first.

    def terminal(self, name: str) -> tuple[str, frozenset[int]]:
        """The placeholder of terminal ``name``'s regex and the definitions it needs.

        Raises:
            InvalidGrammarError: the terminal is recursive.
        """
        hit = self.term_regex.get(name)
        return hit if hit is not None else _drive(self._terminal_steps(name))

    def ignore_run(self) -> tuple[str, frozenset[int]]:
        if self.ignore is None:
            parts = [self.terminal(n) for n in self.g.ignore]
            text = "(?:" + "|".join(p for p, _ in parts) + ")*"
            needs = frozenset().union(*(n for _, n in parts))
            self.ignore = self.defs.add(text, needs)
        return self.ignore

    def regex(self, expr: Expr, in_rule: bool, lead: bool = True) -> tuple[str, frozenset[int]]:
        """Regex text of a regular ``expr`` and the definitions it needs; in a rule,
        ignore runs precede each terminal occurrence, except (``lead=False``) those that
        can only stand at the very start of the text: a parser terminal starts after any
        number of ignore lexemes anyway (``automaton``), so a leading run there would
        only read the same whitespace two ways. Iterative (``_drive``): any depth of
        references and nesting.

        Raises:
            InvalidGrammarError: a recursive terminal.
        """
        hit = self._leaf(expr, in_rule, lead)
        return hit if hit is not None else _drive(self._regex_steps(expr, in_rule, lead))

    def rule(self, name: str, lead: bool = True) -> tuple[str, frozenset[int]]:
        """The placeholder of regular rule ``name``'s regex and the definitions it needs."""
        hit = self.rule_regex.get((name, lead))
        return hit if hit is not None else _drive(self._rule_steps(name, lead))

    def _terminal_steps(self, name: str):
        hit = self.term_regex.get(name)
        if hit is not None:
            return hit
        if name in self._open_terms:
            line, col = self.g.positions.get(name, (0, 0))
            path = [*self._open_terms][self._open_terms[name] :] + [name]
            if len(path) > 12:  # a long cycle: its ends
                path[5:-5] = [f"... {len(path) - 10} more"]
            raise InvalidGrammarError(
                f"terminal {name} at {line}:{col} is recursive ({' -> '.join(path)}); "
                "make it a rule (lowercase name)"
            )
        self._open_terms[name] = len(self._open_terms)
        text, needs = yield self._regex_steps(self.g.terminals[name], False, True)
        del self._open_terms[name]
        hit = self.term_regex[name] = self.defs.add(text, needs)
        return hit

    def _rule_steps(self, name: str, lead: bool):
        hit = self.rule_regex.get((name, lead))
        if hit is None:
            text, needs = yield self._regex_steps(rule_expr(self.g, name), True, lead)
            hit = self.rule_regex[(name, lead)] = self.defs.add(text, needs)
        return hit

    def _leaf(self, expr: Expr, in_rule: bool, lead: bool) -> tuple[str, frozenset[int]] | None:
        """``regex`` of a leaf or of a reference already lowered, without a walk; None for
        the others (a group, a repetition, a reference not lowered yet).
        """
        if isinstance(expr, Ref):
            if expr.name in self.g.terminals:
                hit = self.term_regex.get(expr.name)
                return None if hit is None else self._leading_ignore(*hit, in_rule, lead)
            return self.rule_regex.get((expr.name, lead))  # a regular rule
        if isinstance(expr, Literal):
            return self._leading_ignore(escape_literal(expr.text), frozenset(), in_rule, lead)
        if isinstance(expr, Pattern):
            text, needs = "(?:" + expr.regex + ")", self.defs.needs_of(expr.regex)
            return self._leading_ignore(text, needs, in_rule, lead)
        if isinstance(expr, Embedded):
            text, needs = self.defs.add_block(expr.pattern, expr.definitions)
            return self._leading_ignore("(?:" + text + ")", needs, in_rule, lead)
        return None

    def _regex_steps(self, expr: Expr, in_rule: bool, lead: bool):
        """``regex``'s work as ``_drive`` steps: yields the walk of each part it needs."""
        hit = self._leaf(expr, in_rule, lead)
        if hit is not None:
            return hit
        if isinstance(expr, Ref):
            if expr.name in self.g.terminals:
                text, needs = yield self._terminal_steps(expr.name)
                return self._leading_ignore(text, needs, in_rule, lead)
            return (yield self._rule_steps(expr.name, lead))  # a regular rule
        if isinstance(expr, (Seq, Alt)):
            is_seq = isinstance(expr, Seq)
            texts, needs = [], frozenset()
            for i, x in enumerate(expr.items):
                x_lead = lead or (is_seq and i > 0)
                part = self._leaf(x, in_rule, x_lead)
                if part is None:
                    part = yield self._regex_steps(x, in_rule, x_lead)
                texts.append(part[0])
                needs |= part[1]
            return "(?:" + ("" if is_seq else "|").join(texts) + ")", needs
        if isinstance(expr, Repeat):
            part = self._leaf(expr.item, in_rule, True)
            text, needs = (
                part if part is not None else (yield self._regex_steps(expr.item, in_rule, True))
            )
            hi = "" if expr.hi is None else str(expr.hi)
            return f"(?:{text}){{{expr.lo},{hi}}}", needs
        raise AssertionError(f"unknown expression {expr!r}")

    def _leading_ignore(
        self, text: str, needs: frozenset[int], in_rule: bool, lead: bool
    ) -> tuple[str, frozenset[int]]:
        """A terminal occurrence's text with the ignore run before it, in a rule."""
        if in_rule and self.g.ignore and lead:
            run, run_needs = self.ignore_run()
            return run + text, needs | run_needs
        return text, needs

    # ---- recursion ----------------------------------------------------------------

    def find_regular(self) -> None:
        """``regular[name]``: the rule reaches no cycle of rule references."""
        g = self.g
        deps = {
            name: sorted({r.name for r in self.refs_of(name) if r.name in g.rules})
            for name in g.rules
        }
        state: dict[str, int] = {}  # 1 = on the stack, 2 = done
        for root in g.rules:
            if root in state:
                continue
            stack = [(root, iter(deps[root]))]
            state[root] = 1
            while stack:
                name, it = stack[-1]
                nxt = next(it, None)
                if nxt is None:
                    stack.pop()
                    state[name] = 2
                    self.regular.setdefault(name, all(self.regular[d] for d in deps[name]))
                    continue
                if state.get(nxt) == 1:  # a cycle: every rule on it is recursive
                    on_cycle = False
                    for frame, _ in stack:
                        on_cycle = on_cycle or frame == nxt
                        if on_cycle:
                            self.regular[frame] = False
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, iter(deps[nxt])))

    def is_regular(self, expr: Expr) -> bool:
        """True when every reference in ``expr`` is a terminal or a regular rule (after
        ``find_regular``). Each node is decided once, from its items' answers (post-order,
        iterative), and remembered, so the nested groups that the productions ask about one
        after the other cost one walk in all, not one each. Raises: never.
        """
        kind = type(expr)
        if kind is Pattern or kind is Literal or kind is Embedded:  # a leaf: no reference
            return True
        terminals, regular = self.g.terminals, self.regular
        if kind is Ref:
            return expr.name in terminals or regular[expr.name]
        memo = self._is_regular  # id(node) -> (node, answer): the node kept alive owns its id
        hit = memo.get(id(expr))
        if hit is not None:
            return hit[1]
        stack: list[tuple[Expr, bool]] = [(expr, False)]
        while stack:
            node, items_done = stack.pop()
            if id(node) in memo:
                continue
            if isinstance(node, Ref):
                found = node.name in terminals or regular[node.name]
            elif isinstance(node, (Seq, Alt, Repeat)):
                items = (node.item,) if isinstance(node, Repeat) else node.items
                if not items_done:
                    stack.append((node, True))
                    stack.extend((x, False) for x in items)
                    continue
                found = all(memo[id(x)][1] for x in items)
            else:  # a literal, a pattern, an embedded regex: no reference
                found = True
            memo[id(node)] = (node, found)
        return memo[id(expr)][1]


class _Productions:
    """Builds a ``CfgGrammar`` from the non-regular rules."""

    def __init__(self, low: _Lowering, deadline: Deadline = NEVER) -> None:
        self.low = low
        self.deadline = deadline
        self.cfg = CfgGrammar()
        self.nt: dict[str, int] = {}
        self.terms: dict[tuple[str, tuple[str, ...]], int] = {}
        self.helpers: dict[tuple, int] = {}

    def nonterminal(self, name: str) -> int:
        i = self.nt.get(name)
        if i is None:
            i = self.nt[name] = len(self.cfg.names)
            self.cfg.names.append(name)
        return i

    def fresh(self, owner: str, suffix: str) -> int:
        """A new helper nonterminal (its name ``owner#k`` + ``suffix`` is never reused)."""
        self.num_fresh += 1
        return self.nonterminal(f"{owner}#{self.num_fresh}{suffix}")

    num_fresh = 0

    def add(self, lhs: int, rhs: tuple[int, ...]) -> None:
        num = len(self.cfg.lhs)
        if num >= MAX_RULES:
            raise GrammarTooComplexError(f"the grammar expands to more than {MAX_RULES} rules")
        if num % _CHECK_EVERY == 0 and num:  # (the first: ``build`` checks at each rule)
            self.deadline.check("lowering the grammar to productions")
        self.cfg.lhs.append(lhs)
        self.cfg.rhs.append(rhs)

    def terminal_of(self, expr: Expr) -> int:
        text, needs = self.low.regex(expr, True, False)
        needs = self.low.defs.closure(needs)
        key = self.low.defs.bundle(text, needs, closed=True)
        t = self.terms.get(key)
        if t is None:
            t = self.terms[key] = len(self.cfg.terminals)
            self.cfg.terminals.append(key)
            self.cfg.sources.append((text, needs))
        return -1 - t

    # ``symbol``, ``repeat`` and ``alternatives`` recurse into nested groups: generators
    # driven by ``_drive``, so the nesting a grammar may have is not the Python stack's

    def _symbol_steps(self, expr: Expr, owner: str):
        """The symbol standing for ``expr`` in a production of ``owner`` (a nonterminal, a
        terminal, or a helper nonterminal whose productions are added here).
        """
        if isinstance(expr, Ref) and expr.name in self.low.g.rules:
            if not self.low.regular[expr.name]:
                return self.nonterminal(expr.name)
        if self.low.is_regular(expr):
            return self.terminal_of(expr)
        key = (owner, expr)
        hit = self.helpers.get(key)
        if hit is not None:
            return hit
        helper = self.helpers[key] = self.fresh(owner, "")
        if isinstance(expr, Repeat):
            yield self._repeat_steps(helper, expr, owner)
        else:
            for alt in (yield self._alternatives_steps(expr, owner)):
                self.add(helper, alt)
        return helper

    def _repeat_steps(self, helper: int, expr: Repeat, owner: str):
        x = yield self._symbol_steps(expr.item, owner)
        head = (x,) * expr.lo
        if expr.hi is None:  # helper -> x^lo star; star -> ε | star x (left recursion)
            star = self.fresh(owner, "*")
            self.helpers[(owner, expr, "*")] = star
            self.add(star, ())
            self.add(star, (star, x))
            self.add(helper, (*head, star))
            return
        tail = None  # opt_k -> ε | x opt_{k-1}: up to hi - lo more
        for k in range(expr.hi - expr.lo):
            opt = self.fresh(owner, f"?{k}")
            self.add(opt, ())
            self.add(opt, (x,) if tail is None else (x, tail))
            tail = opt
        self.add(helper, head if tail is None else (*head, tail))

    def _alternatives_steps(self, expr: Expr, owner: str):
        """The right-hand sides of ``expr`` read as a rule body of ``owner``: one per
        alternative (nested alternations flattened first, in order), each a sequence whose
        runs of regular items are one terminal each.
        """
        bodies, todo = [], [expr]
        while todo:
            x = todo.pop()
            if isinstance(x, Alt):
                todo.extend(reversed(x.items))
            else:
                bodies.append(x)
        rhs: list[tuple[int, ...]] = []
        for body in bodies:
            items = list(body.items) if isinstance(body, Seq) else [body]
            flat: list[Expr] = []
            while items:  # inline nested sequences
                x = items.pop(0)
                if isinstance(x, Seq):
                    items[:0] = list(x.items)
                else:
                    flat.append(x)
            out: list[int] = []
            run: list[Expr] = []
            for x in flat:  # a run of regular items is one terminal
                if self.low.is_regular(x):
                    run.append(x)
                    continue
                if run:
                    out.append(self.terminal_of(run[0] if len(run) == 1 else Seq(tuple(run))))
                    run = []
                if isinstance(x, Ref) and x.name in self.low.g.rules:  # a recursive rule
                    out.append(self.nonterminal(x.name))
                else:
                    out.append((yield self._symbol_steps(x, owner)))
            if run:
                out.append(self.terminal_of(run[0] if len(run) == 1 else Seq(tuple(run))))
            rhs.append(tuple(out))
        return rhs

    def build(self) -> CfgGrammar:
        g = self.low.g
        cfg = self.cfg
        augmented = self.nonterminal(g.start + "'")
        cfg.start = augmented
        self.add(augmented, (self.nonterminal(g.start),))
        done: set[str] = set()
        todo = [g.start]
        while todo:
            name = todo.pop()
            if name in done:
                continue
            done.add(name)
            self.deadline.check("lowering the grammar to productions")
            if name in g.closed and self._add_closed(name, g.closed[name]):
                continue  # it refers to no other rule
            lhs = self.nonterminal(name)
            for alt in _drive(self._alternatives_steps(rule_expr(g, name), name)):
                self.add(lhs, alt)
            for ref in self.low.refs_of(name):
                if ref.name in g.rules and not self.low.regular[ref.name]:
                    todo.append(ref.name)
        for name in g.ignore:
            text, needs = self.low.terminal(name)
            needs = self.low.defs.closure(needs)
            cfg.ignore.append(len(cfg.terminals))
            cfg.terminals.append(self.low.defs.bundle(text, needs))
            cfg.sources.append((text, needs))
        cfg.definitions = tuple(self.low.defs.texts)
        cfg.reusable = frozenset(g.reusable)  # seeded first: the same indices
        return cfg

    def _add_closed(self, name: str, key: str) -> bool:
        """Add closed rule ``name``'s productions and terminals from the process's store
        (``_closed_entry``): the very productions ``build``'s walk of it would add, in the
        same order, over the same terminals (a terminal already known keeps its id), its
        helpers numbered as the walk numbers them: the grammar the walk builds. False
        (nothing added) when the rule is not one the store can hold (the caller walks it).

        Raises:
            GrammarTooComplexError: as ``add``.
        """
        if self.low.g.ignore:  # ignore runs would be part of its terminals
            return False
        frag = _closed_entry(key, name, self.low.g.rules[name], refs=False)[1]
        if frag is None:
            return False
        suffixes, lhs, _, terminals, symbols, spans = frag
        # the helpers numbered as the walk would number them (``fresh``, in creation order)
        rule, base, nt = self.nonterminal(name), self.num_fresh, self.nt
        names = [f"{name}#{base + k}{x}" for k, x in enumerate(suffixes, 1)]
        if not nt.keys().isdisjoint(names):  # a rule so named (no reader makes one): as fresh
            helpers: Any = [self.fresh(name, x) for x in suffixes]
        else:  # fresh's names and ids, added at once
            first = len(self.cfg.names)
            helpers = range(first, first + len(names))
            nt.update(zip(names, helpers))
            self.cfg.names.extend(names)
            self.num_fresh = base + len(names)
        nts = [-1, rule, *helpers]
        ts = []
        for key_t in terminals:
            t = self.terms.get(key_t)
            if t is None:
                t = self.terms[key_t] = len(self.cfg.terminals)
                self.cfg.terminals.append(key_t)
                self.cfg.sources.append((key_t[0], frozenset()))
            ts.append(t)
        cfg = self.cfg
        cfg.seeds += tuple(text for text, _ in terminals)
        if len(cfg.lhs) + len(lhs) > MAX_RULES:
            raise GrammarTooComplexError(f"the grammar expands to more than {MAX_RULES} rules")
        self.deadline.check("lowering the grammar to productions")
        cfg.lhs.extend(map(nts.__getitem__, lhs))
        # local symbol -> grammar symbol, read by Python's indexing: nonterminal k >= 1 at
        # k, terminal -1 - k at -1 - k (from the end); 0, the augmented start, is never used;
        # every right-hand side's symbols mapped at once, then cut into its tuples
        syms = [None, *nts[1:], *(-1 - t for t in reversed(ts))]
        cfg.rhs.extend(map(tuple(map(syms.__getitem__, symbols)).__getitem__, spans))
        return True


_CLOSED_MAX = 16  # closed rules kept per process (one per whitespace option in use)
_closed: LRUCache[str, tuple] = LRUCache(_CLOSED_MAX)


def _closed_entry(
    key: str, name: str, expr: Expr, refs: bool = True
) -> tuple[tuple[Ref, ...], tuple | None]:
    """Closed rule ``name`` (``GrammarDef.closed``: its expression ``expr``, which may name
    the rule ``CLOSED_SELF`` (``ir.self_named``: renamed only when the store cannot
    answer), is determined by ``key`` up to the rule's own name) lowered on its own, kept
    per process under ``key``: its references (``nodes_of`` of the named expression; with
    ``refs`` False, ``()`` when the store holds ``key``: the caller wants the productions
    only) and its productions ``(suffixes, lhs, rhs, terminals, symbols, spans)`` in the
    rule's own numbering (nonterminal 1 is the rule, 0 the augmented start, whose production
    is left out; nonterminal ``k + 1`` its ``k``-th helper, named ``name#k`` +
    ``suffixes[k - 1]``; ``symbols``: the right-hand sides' symbols one after the other,
    ``spans``: the slice of ``symbols`` each is), those None when ``expr`` is regular,
    refers to another rule or a terminal needs a definition.

    The rule's walk depends only on ``expr`` (it refers to nothing else), and its
    productions not on its name (the helpers' names are given as suffixes), so these are
    the productions a grammar's own walk of it adds, whatever the rule is called there; it
    survives ``clear_cache`` as the atom recipes and ``regex.reused`` do (no vocabulary, no
    per-schema part). Bounded: ``_CLOSED_MAX`` entries, least recently used dropped.
    Raises: never for a closed rule (a rule that is not one gives None).
    """
    hit = _closed.get(key)
    if hit is not None:
        frag, spots = hit
        if not refs:
            return (), frag
        if spots is not None:  # every reference is to the rule itself: at these places
            return _self_refs(name, spots), frag
        return tuple(nodes_of(self_named(expr, name))), None
    expr = self_named(expr, name)
    refs = tuple(nodes_of(expr))
    if not all(r.name == name for r in refs):
        _closed.put(key, (None, None))
        return refs, None
    sub = GrammarDef(start=name, syntax="closed")
    sub.rules[name] = expr
    frag = None
    low = _Lowering(sub)
    low.find_regular()
    if not low.regular[name]:
        cfg = _Productions(low).build()
        if not cfg.definitions and not any(needs for _, needs in cfg.sources):
            # a helper is ``name#k`` + suffix, k counting from 1 in creation order
            suffixes = tuple(
                n[len(name) + 1 + len(str(k)) :] for k, n in enumerate(cfg.names[2:], 1)
            )
            rhs = tuple(cfg.rhs[1:])
            ends = list(itertools.accumulate(map(len, rhs), initial=0))
            frag = (
                suffixes,
                tuple(cfg.lhs[1:]),
                rhs,
                tuple(cfg.terminals),
                tuple(itertools.chain.from_iterable(rhs)),  # every right-hand side's symbols
                tuple(map(slice, ends[:-1], ends[1:])),  # where each is in them
            )
    _closed.put(key, (frag, tuple([(r.line, r.column) for r in refs])))
    return refs, frag


def _self_refs(name: str, spots: tuple[tuple[int, int], ...]) -> tuple[Ref, ...]:
    """``Ref(name, line, column)`` per spot, one (immutable) object per distinct spot: a
    converter's rule has its references all at ``0:0``. Raises: never.
    """
    made: dict[tuple[int, int], Ref] = {}
    out = []
    for spot in spots:
        ref = made.get(spot)
        if ref is None:
            ref = made[spot] = Ref(name, *spot)
        out.append(ref)
    return tuple(out)


def clear_closed() -> None:
    """Drop every kept closed rule (tests; a cold start of the process). Raises: never."""
    _closed.clear()


def _drive(steps: Generator[Generator, Any, _T]) -> _T:
    """Run a recursion written as a generator without the Python stack: ``steps`` yields
    the generator of each sub-result it needs and is sent that result back (a sub-generator
    may yield in turn); returns ``steps``' own return value.

    Raises:
        Whatever a step raises.
    """
    try:  # most walks finish at once (no part needs a walk of its own)
        sub = steps.send(None)
    except StopIteration as done:
        return done.value
    stack = [steps, sub]
    value = None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as done:
            stack.pop()
            if not stack:
                return done.value
            value = done.value
            continue
        stack.append(sub)
        value = None


def nodes_of(expr: Expr, kind: type = Ref):
    """Every node of type ``kind`` (a leaf type: ``Ref``, ``Pattern``, ...) in ``expr``, last
    item first (iterative, so deep expressions do not recurse). Raises: never.
    """
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, kind):
            yield e
        elif isinstance(e, (Seq, Alt)):
            stack.extend(e.items)
        elif isinstance(e, Repeat):
            stack.append(e.item)


def lower_grammar(gdef: GrammarDef, deadline: Deadline = NEVER) -> LoweredRegex | CfgGrammar:
    """Lower a parsed grammar (module docstring); ``deadline``, the compile's CPU-time
    budget, is checked per rule and every ``_CHECK_EVERY`` productions.

    Returns:
        ``LoweredRegex`` when the start rule is regular, else a ``CfgGrammar``.

    Raises:
        InvalidGrammarError: an undefined name (with its line:column), a recursive
            terminal, a missing start rule.
        GrammarTooComplexError: more than ``MAX_RULES`` productions; ``deadline`` expires.
    """
    low = _Lowering(gdef, deadline)
    low.checknodes_of()
    for name in gdef.terminals:
        low.terminal(name)  # recursive terminals are refused even when unused
    low.find_regular()
    if low.regular[gdef.start]:
        text, needs = low.rule(gdef.start)
        if gdef.ignore:
            run, run_needs = low.ignore_run()
            text, needs = text + run, needs | run_needs
        pattern, definitions = low.defs.bundle(text, needs)
        return LoweredRegex(pattern, definitions, tuple(gdef.warnings))
    deadline.check("lowering the grammar")
    return _Productions(low, deadline).build()
