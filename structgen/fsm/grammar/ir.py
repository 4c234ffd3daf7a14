"""The grammar IR every front end produces: expressions, rule definitions, a whole grammar.

A front end (``lark``, ``bnf``) parses its dialect into a ``GrammarDef``: named rules
(nonterminals, may recurse) and named terminal definitions (Lark's uppercase names,
regular by construction), each an immutable expression tree of the nodes below. The
expressions keep the ``line:column`` of each reference so later passes can name them in
their errors. ``lower.py`` turns a ``GrammarDef`` into either one regex (no recursion) or
a ``CfgGrammar`` of numbered rules over regex terminals for the Earley parser.

Semantics (the same for every dialect): a terminal is the regular language of its regex;
a rule is the context-free language of its expression over terminals; ``ignore``
terminals (Lark's ``%ignore``) may appear any number of times before and after every
terminal occurrence (at lexeme boundaries), never inside one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = [
    "Expr",
    "Literal",
    "Pattern",
    "Ref",
    "Seq",
    "Alt",
    "Repeat",
    "Embedded",
    "SpecialToken",
    "GrammarDef",
    "EMPTY_SEQ",
    "CLOSED_SELF",
    "rule_expr",
    "self_named",
]


class Expr:
    """Base of the immutable expression nodes.

    The frozen dataclasses below write their own ``__init__`` (the dataclass keeps it): the
    fields go straight into the instance's ``__dict__``, where the generated one sets each
    through ``object.__setattr__`` (twice as slow; a front end builds thousands of nodes).
    Same fields, defaults, comparison, hash, repr and pickling as the generated one.
    """


class _Composite(Expr):
    """An expression node with items (``Seq``, ``Alt``, ``Repeat``): hashed once per object.

    The lowering keys its helper rules by expression (``lower._Productions``), and a
    dataclass hash walks the whole subtree at every lookup: nested groups hashed again at
    each level. The hash (of the same fields the dataclass compares) is kept on the object
    after the first call, and left out of its pickled state (a string hash differs from
    process to process).
    """

    def __hash__(self) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(self._key())
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def _key(self) -> tuple:
        raise NotImplementedError


@dataclass(frozen=True)
class Literal(Expr):
    """An exact string (matched as its UTF-8 bytes)."""

    text: str

    def __init__(self, text: str) -> None:
        self.__dict__["text"] = text


@dataclass(frozen=True)
class Pattern(Expr):
    """A regex fragment in structgen's dialect (Python ``re``, fullmatch), one terminal.

    Attributes:
        regex: the regex text.
        line, column: where a regex written by the user (Lark ``/.../``) is, 1-based, for
            the error of one that does not parse (``compile.regex_error``); 0 for one a
            front end wrote. Not compared: equal regexes are one terminal.
    """

    regex: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    def __init__(self, regex: str, line: int = 0, column: int = 0) -> None:
        d = self.__dict__
        d["regex"] = regex
        d["line"] = line
        d["column"] = column


@dataclass(frozen=True)
class Ref(Expr):
    """A reference to a rule or terminal definition by name.

    Attributes:
        name: the referenced name.
        line, column: where the reference is written (1-based), for error messages.
    """

    name: str
    line: int = 0
    column: int = 0

    def __init__(self, name: str, line: int = 0, column: int = 0) -> None:
        d = self.__dict__
        d["name"] = name
        d["line"] = line
        d["column"] = column


@dataclass(frozen=True)
class Seq(_Composite):
    """The items one after the other (empty: the empty string)."""

    items: tuple[Expr, ...]

    def __init__(self, items: tuple[Expr, ...]) -> None:
        self.__dict__["items"] = items

    __hash__ = _Composite.__hash__

    def _key(self) -> tuple:
        return (self.items,)


@dataclass(frozen=True)
class Alt(_Composite):
    """Any one of the alternatives."""

    items: tuple[Expr, ...]

    def __init__(self, items: tuple[Expr, ...]) -> None:
        self.__dict__["items"] = items

    __hash__ = _Composite.__hash__

    def _key(self) -> tuple:
        return (self.items,)


@dataclass(frozen=True)
class Repeat(_Composite):
    """``item`` repeated ``lo`` to ``hi`` times (``hi`` None: unbounded)."""

    item: Expr
    lo: int
    hi: int | None

    def __init__(self, item: Expr, lo: int, hi: int | None) -> None:
        d = self.__dict__
        d["item"] = item
        d["lo"] = lo
        d["hi"] = hi

    __hash__ = _Composite.__hash__

    def _key(self) -> tuple:
        return (self.item, self.lo, self.hi)


@dataclass(frozen=True)
class Embedded(Expr):
    """A regular language given as regex text with shared definitions (Lark ``%json``).

    Attributes:
        pattern: the regex; may refer to ``definitions`` by placeholders
            (``structgen.fsm.regex.definitions``).
        definitions: the shared subpatterns.
        what: a short description for messages (``"%json at 3:7"``).
    """

    pattern: str
    definitions: tuple[str, ...] = ()
    what: str = ""


EMPTY_SEQ = Seq(())


@dataclass
class GrammarDef:
    """A parsed grammar, before lowering.

    Attributes:
        rules: rule name -> expression (nonterminals; may refer to rules and terminals).
        terminals: terminal name -> expression (refers to terminals only; regular).
        start: the start rule's name.
        ignore: names of terminals that may appear between lexemes (Lark ``%ignore``).
        positions: name -> ``(line, column)`` of its definition.
        syntax: the dialect it was read as (``"lark"``, ``"gbnf"``, ``"ebnf"``).
        warnings: messages about parts that were read loosely (priorities, aliases).
        definitions: shared regex definitions that ``Pattern`` texts may refer to by
            placeholders (``structgen.fsm.regex.definitions``; a JSON Schema's regular
            parts, ``schema_rules``); empty for grammar text.
        closed: rule name -> a text that determines the rule's expression exactly (the
            same text, the same expression), for a rule that refers to no rule but itself
            and to no definition: ``lower`` may take its productions and terminals from a
            per-process store under ``(text, name)`` instead of walking it
            (``schema_rules``: the "any JSON value" rule, the same in every schema of one
            whitespace option); empty for grammar text. A closed rule's expression in
            ``rules`` may name the rule itself ``CLOSED_SELF`` (one expression for every
            name): read rules through ``rule_expr``.
        reusable: indices of ``definitions`` whose language is the same in every grammar
            that writes their texts and that refer only to one another (``LoweredRegex
            .reusable``): the lexers keep their terms per process (``regex.reused``).
    """

    rules: dict[str, Expr] = field(default_factory=dict)
    terminals: dict[str, Expr] = field(default_factory=dict)
    start: str = "start"
    ignore: list[str] = field(default_factory=list)
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    syntax: str = ""
    warnings: list[str] = field(default_factory=list)
    definitions: tuple[str, ...] = ()
    closed: dict[str, str] = field(default_factory=dict)
    reusable: frozenset[int] = frozenset()


# the name a closed rule's expression may call the rule itself by (``GrammarDef.closed``);
# no grammar reader writes it
CLOSED_SELF = "\0self"


def rule_expr(gdef: GrammarDef, name: str) -> Expr:
    """Rule ``name``'s expression in ``gdef``, a closed rule's references to itself by
    ``CLOSED_SELF`` named ``name`` (``gdef.rules[name]`` for every other rule).

    Raises:
        KeyError: ``gdef`` has no rule ``name``.
    """
    expr = gdef.rules[name]
    return self_named(expr, name) if name in gdef.closed else expr


def self_named(expr: Expr, name: str) -> Expr:
    """A closed rule's expression ``expr`` with every ``Ref(CLOSED_SELF)`` named ``name``
    (the subtrees without one shared, not copied); a closed rule's expression is a few
    dozen nodes, nested a few groups deep (the converter's fixed text), so the recursion is
    shallow. Raises: never.
    """
    if isinstance(expr, Ref):
        return Ref(name, expr.line, expr.column) if expr.name == CLOSED_SELF else expr
    if isinstance(expr, (Seq, Alt)):
        items = [self_named(x, name) for x in expr.items]
        for new, old in zip(items, expr.items):
            if new is not old:
                return type(expr)(tuple(items))
        return expr
    if isinstance(expr, Repeat):
        item = self_named(expr.item, name)
        return expr if item is expr.item else Repeat(item, expr.lo, expr.hi)
    return expr


@dataclass(frozen=True)
class SpecialToken(Expr):
    """One special token of the vocabulary (``<[id]>``, ``<name>``, ``<|name|>``), read by
    the front ends and resolved against the vocabulary before lowering
    (``special.resolve_special_tokens``).

    Attributes:
        text: the token's text (``<|name|>``), or None when given by id.
        token_id: the id (``<[id]>``), or None when given by text or as a list.
        negated: ``!<...>``: any token but that one.
        line, column: where it is written (1-based), for error messages.
        token_ids: with ``is_list``, the ids listed, ranges written out: excluded
            (``negated``: llguidance's ``<[^a,b-c]>``; none: its ``<[*]>``, any one token)
            or the only ones allowed (llguidance's ``<[a,b-c]>``).
        is_list: one of llguidance's list forms (no ``text`` or ``token_id``).
    """

    text: str | None
    token_id: int | None
    negated: bool = False
    line: int = 0
    column: int = 0
    token_ids: tuple[int, ...] = ()
    is_list: bool = False
