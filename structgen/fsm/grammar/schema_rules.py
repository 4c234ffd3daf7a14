"""Recursive JSON Schemas as grammar rules: each ``$ref`` cycle becomes a rule, not an unrolling.

``JsonSchema(..., max_recursion_depth=None)`` (the default) is lowered here first
(``lower_recursive_schema``, torch-free; ``compile_schema_rules`` compiles its rules). The
converter runs in *rules* mode (``JsonSchemaConverter.rules``): a ``$ref`` that reaches
itself is converted once into a definition slot whose placeholder the recursion refers
back to (``RefSharing.reserve``), so the definitions form cycles. The definitions that
reach such a slot (and the root pattern) are read back from regex text into grammar
expressions (``regex_expr``: groups, alternation and quantifiers become ``Seq`` /
``Alt`` / ``Repeat``, a placeholder of a rule a ``Ref``, and every stretch without one
stays regex text, a ``Pattern``); the other definitions stay shared regex definitions
(``GrammarDef.definitions``). The ``GrammarDef`` then compiles as any recursive grammar
(``compile.compile_grammar_def``): a lexer DFA per regular part, an Earley parser over them.

In a document with a ``$ref`` cycle, untyped values (``{}``, ``true``, extra properties,
absent ``items``) are one rule of any depth too (``JsonSchemaConverter.any_rule``): the
schema is a grammar anyway, so they need not stop at ``ANY_VALUE_DEPTH`` (if no cycle is
reached after all, the schema is converted again without it). A schema without a recursive
``$ref`` gives its ``LoweredRegex`` back (the same text the regular conversion writes), and
compiles to a plain DFA as before, its untyped values unrolled to ``ANY_VALUE_DEPTH`` (a
rule there would make every schema with an untyped value a grammar, at a grammar's compile
and mask cost). That rule is the same text in every schema of one whitespace option and
refers to nothing but itself: it is read back once per process (``_closed_expr``) and marked
closed (``GrammarDef.closed``), so ``lower`` takes its productions from its per-process store
instead of walking it. Operands of ``not``, non-disjoint ``oneOf`` and ``if`` stay depth-bounded
(complement is not defined for context-free languages): the converter's canonical mode
unrolls their references to ``DEFAULT_MAX_RECURSION_DEPTH`` as before, with its warning,
refused under ``strict``.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from types import ModuleType
from typing import Any, NamedTuple

from ...errors import InvalidGrammarError, StructgenError, UnsupportedSchemaError
from ..deadline import Deadline
from ..json_schema import DEFAULT_MAX_RECURSION_DEPTH
from ..json_schema.check import check_schema
from ..json_schema.convert import JsonSchemaConverter
from ..json_schema.ids import schema_depth_and_ref
from ..regex.definitions import PLACEHOLDER_BASE
from ..spec import JsonSchema, LoweredRegex, schema_for
from .ir import CLOSED_SELF, Alt, Expr, GrammarDef, Pattern, Ref, Repeat, Seq

__all__ = [
    "SchemaRules",
    "compile_schema_rules",
    "lower_recursive_schema",
    "regex_expr",
    "rules_grammar",
    "warm_up_closed_rules",
]

_BRACES = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_ESCAPE_LEN = {"x": 4, "u": 6, "U": 10}
# One step of ``regex_expr``'s scan. Groups: 1 a stretch of regular atoms, each with its
# quantifiers (escapes as long as ``_atom_end`` says, classes, a brace that opens no
# quantifier, other characters; no group, alternation or placeholder): regex text read in
# one step; 2 a group's opening (a bare one, non-capturing, named, or inline flags up to
# the first colon); 3 ``|``; 4 ``)``; 5 a quantifier with its lazy / possessive suffix
# (6-8: a brace's bounds); 9 a placeholder. A position where none matches (text that is
# no regex) takes ``regex_expr``'s one-atom step.
_ATOM = (
    r"\\(?:x..|u.{4}|U.{8}|N\{[^}]*\}|.)"
    r"|\[\^?\]?(?:\\.|[^\]\\])*\]"
    r"|\{(?!\d*(?:,\d*)?\})"
    "|[^" + re.escape("\\[()|*+?{") + chr(PLACEHOLDER_BASE) + "-\U0010ffff]"
)
_STEP = re.compile(
    r"((?:(?:" + _ATOM + r")(?:[*+?]|\{\d*(?:,\d*)?\})*)+)"
    r"|(\((?:\?:|\?P<[^>]*>|\?(?!P<)[^:]*:|(?!\?)))"
    r"|(\|)|(\))"
    r"|((?:[*+?]|\{(\d*)(?:(,)(\d*))?\})[?+]?)"
    "|([" + chr(PLACEHOLDER_BASE) + "-\U0010ffff])",
    re.DOTALL,
)
_FIRST_PLACEHOLDER = chr(PLACEHOLDER_BASE)  # a code point at or past it: a placeholder
_PLACEHOLDERS = re.compile("[" + chr(PLACEHOLDER_BASE) + "-\U0010ffff]")
_CHECK_EVERY = 4096  # loop steps between two looks at the compile's deadline
_FEW_DEFINITIONS = 16  # up to this many definitions, _placeholders_in tests each one


def _placeholders_in(text: str, num: int) -> set[int]:
    """The offsets ``i`` of every placeholder ``PLACEHOLDER_BASE + i`` in ``text``, for a
    grammar of ``num`` definitions.

    A text names few distinct definitions, each often many times (a key trie names its two
    tails at every node): with at most ``_FEW_DEFINITIONS`` definitions each one is tested
    by ``in`` (a C search that stops at the first occurrence) and one search looks for any
    placeholder past them; otherwise (or when there is one) every occurrence is listed.
    Raises: never.
    """
    if num <= _FEW_DEFINITIONS and _PAST[num].search(text) is None:
        return {j for j in range(num) if chr(PLACEHOLDER_BASE + j) in text}
    return {ord(c) - PLACEHOLDER_BASE for c in set(_PLACEHOLDERS.findall(text))}


# _PAST[n]: a placeholder of offset n or more
_PAST = [
    re.compile("[" + chr(PLACEHOLDER_BASE + n) + "-\U0010ffff]")
    for n in range(_FEW_DEFINITIONS + 1)
]


def _has_cycle(conv: Any) -> bool:
    """True when some ``$ref`` of the converter's document reaches itself (the schema
    will likely compile as rules: its untyped values may then be one rule too).
    """
    stack, seen = [conv.root], set()
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            ref = cur.get("$ref")
            if isinstance(ref, str) and ref not in seen:
                seen.add(ref)
                try:
                    if conv.sharing.is_recursive(ref):
                        return True
                except StructgenError:  # an unresolvable $ref: the conversion names it
                    pass
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)
    return False


def _atom_end(text: str, i: int) -> int:
    """The end of the atom starting at ``text[i]`` (an escape, a class or one character)."""
    c = text[i]
    if c == "\\":
        nxt = text[i + 1 : i + 2]
        if nxt == "N" and text[i + 2 : i + 3] == "{":
            return text.index("}", i) + 1
        return i + _ESCAPE_LEN.get(nxt, 2)
    if c == "[":
        j = i + 1
        if text[j : j + 1] == "^":
            j += 1
        if text[j : j + 1] == "]":
            j += 1
        while text[j] != "]":
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i + 1


class _Frame:
    """An open group: its alternatives so far, the items of the current one, and whether
    any item of any alternative is a grammar expression (refers to a rule).
    """

    __slots__ = ("start", "alts", "items", "rule")

    def __init__(self, start: int) -> None:
        self.start = start
        self.alts: list[list[tuple[Expr | None, int, int]]] = []
        self.items: list[tuple[Expr | None, int, int]] = []
        self.rule = False


def _seq(text: str, items: list[tuple[Expr | None, int, int]]) -> Expr:
    """One alternative: adjacent regular items (``None``: the source slice is the regex)
    are one ``Pattern``.
    """
    out: list[Expr] = []
    run: tuple[int, int] | None = None
    for expr, start, end in items:
        if expr is None:
            if run is not None and run[1] == start:
                run = (run[0], end)
                continue
            if run is not None:
                out.append(Pattern(text[run[0] : run[1]]))
            run = (start, end)
            continue
        if run is not None:
            out.append(Pattern(text[run[0] : run[1]]))
            run = None
        out.append(expr)
    if run is not None:
        out.append(Pattern(text[run[0] : run[1]]))
    return out[0] if len(out) == 1 else Seq(tuple(out))


def _close(text: str, frame: _Frame) -> Expr:
    """The expression of a finished group (or of the whole text) that refers to a rule."""
    frame.alts.append(frame.items)
    options = [_seq(text, alt) for alt in frame.alts]
    return options[0] if len(options) == 1 else Alt(tuple(options))


def regex_expr(text: str, rule_of: dict[int, str], deadline: Deadline | None = None) -> Expr:
    """The grammar expression of regex ``text`` (structgen's dialect, as the JSON Schema
    converter writes it) in which placeholder ``PLACEHOLDER_BASE + i`` for ``i`` in
    ``rule_of`` is a reference to rule ``rule_of[i]``; every part without one is kept as
    regex text (``Pattern``): adjacent such parts of one alternative are one ``Pattern``.
    Iterative: nesting depth costs no recursion; a stretch of regular atoms is read in one
    step (``_STEP``).

    Raises:
        UnsupportedSchemaError: a rule placeholder inside a group with inline flags.
        GrammarTooComplexError: ``deadline`` (the compile's CPU-time budget) expired.
    """
    base = PLACEHOLDER_BASE
    if len(text) == 1 and ord(text) - base in rule_of:
        return Ref(rule_of[ord(text) - base], 0, 0)  # a root that is one $ref
    # a placeholder's reading: its rule's Ref (one object per rule: nodes are immutable),
    # or None for a definition that is no rule (regex text)
    refs: dict[str, Ref | None] = {}
    top = _Frame(0)
    stack = [top]
    items = top.items  # the current alternative's items: (expr or None, start, end)
    i, n = 0, len(text)
    countdown = _CHECK_EVERY if deadline is not None else n + 1  # steps to the next look
    step = _STEP.match
    first = _FIRST_PLACEHOLDER
    while i < n:
        countdown -= 1
        if not countdown:
            deadline.check("reading the recursive schema's rules")
            countdown = _CHECK_EVERY
        c = text[i]  # a step of one character is known from it: no match needed
        if c == ")":
            kind = 4
        elif c >= first:
            kind = 9
        elif c == "|":
            kind = 3
        else:
            m = step(text, i)
            kind = 0 if m is None else m.lastindex
        if kind == 1:  # a stretch of regular atoms (the most common step)
            end = m.end()
        elif kind == 9:  # a placeholder: a rule's Ref, or a definition's regex text
            ref = refs.get(c, False)
            if ref is False:
                name = rule_of.get(ord(c) - base)
                ref = refs[c] = None if name is None else Ref(name, 0, 0)
            if ref is not None:
                items.append((ref, i, i + 1))
                top.rule = True
                i += 1
                continue
            end = i + 1
        elif kind == 2:  # a group opens
            top = _Frame(i)
            stack.append(top)
            items = top.items
            i = m.end()
            continue
        elif kind == 3:
            top.alts.append(items)
            items = top.items = []
            i += 1
            continue
        elif kind == 4:  # a group closes: regex text unless it refers to a rule
            frame = stack.pop()
            end = i + 1
            expr = None
            if frame.rule:
                if text.startswith("?", frame.start + 1) and not text.startswith(
                    "?:", frame.start + 1
                ):
                    raise UnsupportedSchemaError(
                        "$ref", "", "a recursive $ref inside a regex group with inline flags"
                    )
                expr = _close(text, frame)
            top = stack[-1]
            top.rule = top.rule or expr is not None
            items = top.items
            items.append((expr, frame.start, end))
            i = end
            continue
        elif kind == 5 and items:  # a quantifier: binds to the item before it
            expr, start, _ = items.pop()
            end = m.end()
            if expr is not None:
                if c == "*":
                    lo, hi = 0, None
                elif c == "+":
                    lo, hi = 1, None
                elif c == "?":
                    lo, hi = 0, 1
                else:
                    lo = int(m.group(6) or 0)
                    hi = lo if m.group(7) is None else (int(m.group(8)) if m.group(8) else None)
                expr = Repeat(expr, lo, hi)
            items.append((expr, start, end))
            i = end
            continue
        elif kind == 5:  # nothing to bind to: regex text
            end = m.end()
        elif text[i] == "(":  # no group opening the dialect has: as Python's parser would
            text.index(":" if text.startswith("?", i + 1) else ">", i)
            end = i + 1  # (not reached: only an opening without its ':' / '>' fails)
        else:  # an escape or class cut short by the text's end
            end = _atom_end(text, i)
        items.append((None, i, end))
        i = end
    return _close(text, stack.pop())  # (an unclosed group: that group's expression)


def rules_grammar(
    pattern: str,
    definitions: list[str],
    rules: set[int],
    deadline: Deadline | None = None,
    any_rule: int | None = None,
    reusable: frozenset[int] | set[int] = frozenset(),
) -> GrammarDef:
    """The ``GrammarDef`` of a rules-mode conversion: start rule ``root``.

    Args:
        pattern: the root's regex text.
        definitions: the converter's definitions (rule slots included).
        rules: the indices of the rule slots (``RefSharing.rules``).
        deadline: the compile's CPU-time budget, checked as the definitions are read.
        any_rule: the slot of the "any JSON value" rule (``SchemaRules.any_rule``), or
            None. When its text refers to no definition but itself, its expression is read
            once per process (``_closed_expr``, keyed by the text with its own slot's
            placeholder replaced by ``_SELF``: the slot does not matter) and the rule is
            marked closed (``GrammarDef.closed``, under that text: ``lower`` takes its
            productions from its store).
        reusable: the definitions the converter stored as reusable
            (``SchemaRules.reusable``): ``GrammarDef.reusable``, less any a rule reaches.

    Raises:
        GrammarTooComplexError: ``deadline`` expired.
        UnsupportedSchemaError: as ``regex_expr``.
    """
    num = len(definitions)
    users: list[list[int]] = [[] for _ in range(num)]  # users[j]: the definitions naming j
    named: list[set[int]] = []  # per definition: every placeholder offset its text holds
    for i, text in enumerate(definitions):
        if deadline is not None and i and i % _CHECK_EVERY == 0:
            deadline.check("reading the recursive schema's rules")
        found = set() if text.isascii() else _placeholders_in(text, num)
        named.append(found)
        for j in found:
            if j < num:
                users[j].append(i)
    # the rules and every definition that reaches one: reverse reachability from the rules
    grammar_level = set(rules)
    todo = list(rules)
    while todo:
        for i in users[todo.pop()]:
            if i not in grammar_level:
                grammar_level.add(i)
                todo.append(i)
    rule_of = {i: f"d{i}" for i in sorted(grammar_level)}
    gdef = GrammarDef(start="root", syntax="json-schema")
    gdef.rules["root"] = regex_expr(pattern, rule_of, deadline)
    for i in sorted(grammar_level):
        text = definitions[i]
        if i == any_rule and named[i] <= {i}:  # a closed rule: kept per process, slot apart
            canon = text.replace(chr(PLACEHOLDER_BASE + i), _SELF)
            gdef.rules[rule_of[i]] = _closed_expr(canon)  # names itself CLOSED_SELF
            gdef.closed[rule_of[i]] = canon
            continue
        gdef.rules[rule_of[i]] = regex_expr(text, rule_of, deadline)
    gdef.definitions = tuple("" if i in grammar_level else d for i, d in enumerate(definitions))
    gdef.reusable = frozenset(i for i in reusable if i not in grammar_level and 0 <= i < num)
    return gdef


# the placeholder a closed rule's text names itself by in ``_closed_expr``'s key (its own
# slot's placeholder replaced: the rule's slot differs from schema to schema)
_SELF = chr(PLACEHOLDER_BASE)


@lru_cache(maxsize=16)
def _closed_expr(canon: str) -> Expr:
    """``regex_expr`` of a closed rule's text ``canon`` (it refers to no definition but
    itself, by placeholder ``_SELF``), with rule name ``ir.CLOSED_SELF``, kept per
    process: the "any JSON value" rule's text is the same in every schema of one
    whitespace option once its slot is taken out, so every such schema reads it once and
    its grammar holds it as it is (``ir.rule_expr`` names the rule for a reader that walks
    it). Expressions are immutable, so grammars may share one.
    Raises: as ``regex_expr``.
    """
    return regex_expr(canon, {0: CLOSED_SELF})


class SchemaRules(NamedTuple):
    """A rules-mode conversion that reached a ``$ref`` cycle: the grammar rules to compile.

    Attributes:
        pattern: the root's regex text.
        definitions: the converter's definitions, rule slots included (``LoweredRegex``).
        rules: the indices of the rule slots (``RefSharing.rules``), never empty.
        warnings: messages about schema parts that were ignored or approximated.
        any_rule: the slot of the "any JSON value" rule among ``rules``
            (``JsonSchemaConverter.any_rule_slot``), or None.
        reusable: the definitions stored as reusable (``RefSharing.reusable``: the same
            language in every schema that writes their texts).
    """

    pattern: str
    definitions: tuple[str, ...]
    rules: frozenset[int]
    warnings: tuple[str, ...] = ()
    any_rule: int | None = None
    reusable: frozenset[int] = frozenset()


def lower_recursive_schema(
    spec: Any, *, max_convert_seconds: float
) -> SchemaRules | LoweredRegex | None:
    """Convert a ``JsonSchema`` spec in rules mode (the first half of its compile; no torch).

    Args:
        spec: the ``JsonSchema`` (``max_recursion_depth`` None).
        max_convert_seconds: CPU-time budget of the conversion (CPU seconds).

    Returns:
        ``SchemaRules`` when a ``$ref`` cycle is reached (``compile_schema_rules`` compiles
        them); the schema's ``LoweredRegex`` when no ``$ref`` recurses (the regular
        conversion's text); None when the schema holds no ``$ref`` at all (convert it as
        usual, ``JsonSchema.lower``).

    Raises:
        InvalidSchemaError, UnsupportedSchemaError: as the regular conversion.
        GrammarTooComplexError: the schema nests too deep, or the budget is exceeded.
    """
    schema = schema_for(spec.schema)
    depth, has_ref = schema_depth_and_ref(schema)  # check_schema_depth's checks first
    if not has_ref:
        return None
    if isinstance(schema, dict):
        check_schema(schema, depth=depth)
    convert_deadline = Deadline(max_convert_seconds, "max_convert_seconds")

    def converted(any_rule: bool | None) -> tuple[JsonSchemaConverter, str]:
        conv = JsonSchemaConverter(
            schema,
            whitespace=spec.whitespace,
            strict=spec.strict,
            allow_extra_properties=spec.allow_extra_properties,
            max_recursion_depth=DEFAULT_MAX_RECURSION_DEPTH,  # not/oneOf/if operands unroll
            deadline=convert_deadline,
        )
        conv.rules = True
        conv.any_rule = _has_cycle(conv) if any_rule is None else any_rule
        return conv, conv.convert_root()

    conv, pattern = converted(None)
    if conv.sharing.rules == {conv.any_rule_slot}:  # no $ref cycle reached: a regex after all
        conv, pattern = converted(False)
    definitions = tuple(conv.sharing.definitions)
    if not conv.sharing.rules:
        return LoweredRegex(pattern, definitions, tuple(conv.warnings))
    any_rule = conv.any_rule_slot if conv.any_rule_slot in conv.sharing.rules else None
    return SchemaRules(
        pattern,
        definitions,
        frozenset(conv.sharing.rules),
        tuple(conv.warnings),
        any_rule,
        frozenset(conv.sharing.reusable),
    )


@cache
def _compile() -> ModuleType:
    """``grammar.compile``, imported at the first compile (the token layer it imports is no
    part of ``lower_recursive_schema``'s torch-free path) and kept: no import statement per
    compile. Raises: never.
    """
    from . import compile

    return compile


def compile_schema_rules(
    rules: SchemaRules, spec: Any, vocab: Any, *, max_states: int, max_seconds: float
) -> Any:
    """Compile a recursive ``JsonSchema``'s rules as a context-free grammar.

    Args:
        rules: ``lower_recursive_schema(spec, ...)``.
        spec: the ``JsonSchema`` (``max_recursion_depth`` None), the grammar's ``spec``.
        vocab: the vocabulary, or None.
        max_states: state budget of each lexer DFA.
        max_seconds: CPU-time budget of the compile (CPU seconds of the compiling thread).

    Returns:
        A ``compile.CompiledCFG`` whose ``spec`` is ``spec``.

    Raises:
        UnsupportedSchemaError: the recursive schema accepts no finite value.
        GrammarTooComplexError: a budget is exceeded.
    """
    deadline = Deadline(max_seconds)
    gdef = rules_grammar(
        rules.pattern,
        list(rules.definitions),
        set(rules.rules),
        deadline,
        rules.any_rule,
        rules.reusable,
    )
    gdef.warnings = list(rules.warnings)
    try:
        return _compile().compile_grammar_def(
            gdef, spec, vocab, trigger=spec.trigger, max_states=max_states, deadline=deadline
        )
    except InvalidGrammarError as exc:
        if "derives no string" in str(exc):
            raise UnsupportedSchemaError(
                "$ref", "", "the recursive schema accepts no finite value"
            ) from None
        raise


# warm_up_closed_rules' schema: a $ref cycle with extra keys allowed
_WARM_UP_SCHEMA = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        }
    },
    "$ref": "#/$defs/node",
}


def warm_up_closed_rules(vocab: Any = None) -> None:
    """Fill the per-process stores every recursive schema with untyped values (or extra
    keys allowed) reads, under the default whitespace: the "any JSON value" rule's
    expression (``_closed_expr``), its productions (``lower._closed_entry``) and its
    terminals' lexer run (``regex.reused``), by compiling a small such schema without
    caching the grammar (``Vocabulary.prepare``'s warm-up: work a process's first recursive
    schema would do). With ``vocab``, also the run's digest of the JSON string interior
    (``lexical_masks.head_key``, kept with the run: a string value's first mask keys its
    head part by it). Raises: never in practice (a fixed schema).
    """
    spec = JsonSchema(_WARM_UP_SCHEMA, allow_extra_properties=True)
    rules = lower_recursive_schema(spec, max_convert_seconds=10.0)
    # the first compile lowers the run (when not kept yet), the second restores it: the
    # digests are kept for a restored run's terms (``TermArena.shared_prefix``)
    for v in (None, vocab) if vocab is not None else (None,):
        grammar = compile_schema_rules(rules, spec, v, max_states=10_000, max_seconds=10.0)
    if vocab is not None:  # inside an extra key's string value
        dfa = grammar.dfa
        grammar.token_index.lexical_key(dfa.walk(dfa.initial, b'{"x":"'))
