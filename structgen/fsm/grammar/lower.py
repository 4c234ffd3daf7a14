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

from dataclasses import dataclass, field

from ...errors import GrammarTooComplexError, InvalidGrammarError
from ..deadline import NEVER, Deadline
from ..regex.definitions import PLACEHOLDER_BASE, placeholder_indices
from ..regex.escape import escape_literal
from ..spec import LoweredRegex
from .ir import Alt, Embedded, Expr, GrammarDef, Literal, Pattern, Ref, Repeat, Seq

__all__ = ["CfgGrammar", "lower_grammar", "nodes_of", "MAX_RULES"]

MAX_RULES = 100_000  # productions of one grammar (bounded repetitions expand linearly)
_CHECK_EVERY = 1024  # productions added between two checks of the deadline


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
    """

    terminals: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    ignore: list[int] = field(default_factory=list)
    lhs: list[int] = field(default_factory=list)
    rhs: list[tuple[int, ...]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    start: int = 0
    definitions: tuple[str, ...] = ()
    sources: list[tuple[str, frozenset[int]]] = field(default_factory=list)


class _Definitions:
    """Shared regex definitions with their transitive needs, bundled per terminal."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.needs: list[frozenset[int]] = []

    def add(self, text: str, needs: frozenset[int]) -> tuple[str, frozenset[int]]:
        """A placeholder for ``text`` (which needs ``needs``) and its own needs."""
        i = len(self.texts)
        self.texts.append(text)
        self.needs.append(needs | {i})
        return chr(PLACEHOLDER_BASE + i), self.needs[i]

    def add_block(self, pattern: str, defs: tuple[str, ...]) -> tuple[str, frozenset[int]]:
        """Append ``defs`` (which refer to each other by their own numbers) and shift
        ``pattern``'s placeholders; the block is needed as a whole.
        """
        base = len(self.texts)
        shift = {PLACEHOLDER_BASE + i: PLACEHOLDER_BASE + base + i for i in range(len(defs))}
        block = frozenset(range(base, base + len(defs)))
        for d in defs:
            self.texts.append(d.translate(shift))
            self.needs.append(block)
        return pattern.translate(shift), block

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
            self.needs.append(self.needs_of(text) | {len(self.texts)})
            self.texts.append(text)
        self.seeded = len(self.texts)

    seeded = 0

    def needs_of(self, text: str) -> frozenset[int]:
        """The seeded definitions ``text`` refers to, with their own needs."""
        if not self.seeded:
            return frozenset()
        found = placeholder_indices(text, self.seeded)
        return frozenset().union(*(self.needs[i] for i in found))

    def bundle(self, pattern: str, needs: frozenset[int]) -> tuple[str, tuple[str, ...]]:
        """``pattern`` with only the definitions it needs, renumbered in order."""
        order = sorted(needs)
        shift = {PLACEHOLDER_BASE + old: PLACEHOLDER_BASE + new for new, old in enumerate(order)}
        return pattern.translate(shift), tuple(self.texts[i].translate(shift) for i in order)


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
        for expr in g.rules.values():
            for ref in nodes_of(expr):
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

    def terminal(self, name: str, stack: tuple[str, ...] = ()) -> tuple[str, frozenset[int]]:
        hit = self.term_regex.get(name)
        if hit is not None:
            return hit
        if name in stack:
            line, col = self.g.positions.get(name, (0, 0))
            raise InvalidGrammarError(
                f"terminal {name} at {line}:{col} is recursive ({' -> '.join(stack)} -> "
                f"{name}); make it a rule (lowercase name)"
            )
        text, needs = self.regex(self.g.terminals[name], False, (*stack, name))
        hit = self.term_regex[name] = self.defs.add(text, needs)
        return hit

    def ignore_run(self) -> tuple[str, frozenset[int]]:
        if self.ignore is None:
            parts = [self.terminal(n) for n in self.g.ignore]
            text = "(?:" + "|".join(p for p, _ in parts) + ")*"
            needs = frozenset().union(*(n for _, n in parts))
            self.ignore = self.defs.add(text, needs)
        return self.ignore

    def regex(
        self, expr: Expr, in_rule: bool, stack: tuple[str, ...] = (), lead: bool = True
    ) -> tuple[str, frozenset[int]]:
        """Regex text of a regular ``expr`` and the definitions it needs; in a rule,
        ignore runs precede each terminal occurrence, except (``lead=False``) those that
        can only stand at the very start of the text: a parser terminal starts after any
        number of ignore lexemes anyway (``automaton``), so a leading run there would
        only read the same whitespace two ways.
        """
        if isinstance(expr, (Literal, Pattern, Embedded)) or (
            isinstance(expr, Ref) and expr.name in self.g.terminals
        ):
            if isinstance(expr, Literal):
                text, needs = escape_literal(expr.text), frozenset()
            elif isinstance(expr, Pattern):
                text, needs = "(?:" + expr.regex + ")", self.defs.needs_of(expr.regex)
            elif isinstance(expr, Embedded):
                text, needs = self.defs.add_block(expr.pattern, expr.definitions)
                text = "(?:" + text + ")"
            else:
                text, needs = self.terminal(expr.name, stack)
            if in_rule and self.g.ignore and lead:
                run, run_needs = self.ignore_run()
                return run + text, needs | run_needs
            return text, needs
        if isinstance(expr, Ref):  # a regular rule
            return self.rule(expr.name, lead)
        if isinstance(expr, Seq):
            parts = [self.regex(x, in_rule, stack, lead or i > 0) for i, x in enumerate(expr.items)]
            needs = frozenset().union(*(n for _, n in parts))
            return "(?:" + "".join(p for p, _ in parts) + ")", needs
        if isinstance(expr, Alt):
            parts = [self.regex(x, in_rule, stack, lead) for x in expr.items]
            needs = frozenset().union(*(n for _, n in parts))
            return "(?:" + "|".join(p for p, _ in parts) + ")", needs
        if isinstance(expr, Repeat):
            text, needs = self.regex(expr.item, in_rule, stack)
            hi = "" if expr.hi is None else str(expr.hi)
            return f"(?:{text}){{{expr.lo},{hi}}}", needs
        raise AssertionError(f"unknown expression {expr!r}")

    def rule(self, name: str, lead: bool = True) -> tuple[str, frozenset[int]]:
        hit = self.rule_regex.get((name, lead))
        if hit is None:
            text, needs = self.regex(self.g.rules[name], True, (), lead)
            hit = self.rule_regex[(name, lead)] = self.defs.add(text, needs)
        return hit

    # ---- recursion ----------------------------------------------------------------

    def find_regular(self) -> None:
        """``regular[name]``: the rule reaches no cycle of rule references."""
        g = self.g
        deps = {
            name: sorted({r.name for r in nodes_of(e) if r.name in g.rules})
            for name, e in g.rules.items()
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
        hit = self._is_regular.get(id(expr))
        if hit is not None and hit[0] is expr:  # the node kept alive, so its id is its own
            return hit[1]
        found = all(r.name in self.g.terminals or self.regular[r.name] for r in nodes_of(expr))
        self._is_regular[id(expr)] = (expr, found)
        return found


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
        if len(self.cfg.lhs) >= MAX_RULES:
            raise GrammarTooComplexError(f"the grammar expands to more than {MAX_RULES} rules")
        if len(self.cfg.lhs) % _CHECK_EVERY == 0:
            self.deadline.check("lowering the grammar to productions")
        self.cfg.lhs.append(lhs)
        self.cfg.rhs.append(rhs)

    def terminal_of(self, expr: Expr) -> int:
        text, needs = self.low.regex(expr, True, (), False)
        key = self.low.defs.bundle(text, needs)
        t = self.terms.get(key)
        if t is None:
            t = self.terms[key] = len(self.cfg.terminals)
            self.cfg.terminals.append(key)
            self.cfg.sources.append((text, needs))
        return -1 - t

    def symbol(self, expr: Expr, owner: str) -> int:
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
            self.repeat(helper, expr, owner)
        else:
            for alt in self.alternatives(expr, owner):
                self.add(helper, alt)
        return helper

    def repeat(self, helper: int, expr: Repeat, owner: str) -> None:
        x = self.symbol(expr.item, owner)
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

    def alternatives(self, expr: Expr, owner: str) -> list[tuple[int, ...]]:
        if isinstance(expr, Alt):
            return [a for x in expr.items for a in self.alternatives(x, owner)]
        items = list(expr.items) if isinstance(expr, Seq) else [expr]
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
            out.append(self.symbol(x, owner))
        if run:
            out.append(self.terminal_of(run[0] if len(run) == 1 else Seq(tuple(run))))
        return [tuple(out)]

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
            lhs = self.nonterminal(name)
            for alt in self.alternatives(g.rules[name], name):
                self.add(lhs, alt)
            for ref in nodes_of(g.rules[name]):
                if ref.name in g.rules and not self.low.regular[ref.name]:
                    todo.append(ref.name)
        for name in g.ignore:
            text, needs = self.low.terminal(name)
            cfg.ignore.append(len(cfg.terminals))
            cfg.terminals.append(self.low.defs.bundle(text, needs))
            cfg.sources.append((text, needs))
        cfg.definitions = tuple(self.low.defs.texts)
        return cfg


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
