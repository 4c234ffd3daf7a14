r"""Exact ``oneOf``, ``not`` and ``if``/``then``/``else`` by intersection and complement.

Regular languages are closed under both, and the automaton builds them lazily
(``regex.terms`` ``AND``/``NOT``, written as boolean definitions: ``regex.definitions``
``INTERSECT``/``COMPLEMENT``, which no regex text, and so no user ``pattern``, can
produce). Over the canonical universe ``U`` (below):

* ``oneOf: [B1..Bn]`` = ``U & ((B1 & !(B2|..|Bn)) | .. | (Bn & !(B1|..|Bn-1)))``;
* ``not: S`` next to the keywords ``R`` = ``U & R & !S``;
* ``if: I, then: T, else: E`` next to ``R`` = ``U & R & ((I & T) | (!I & E))``.

The cheap exact shortcuts stay where they apply (``combine``: disjoint ``oneOf``
branches, ``not`` of types or next to ``const``/``enum``, a condition decided without an
instance); this module is used where they do not.

Soundness needs every operand and ``U`` to write each value one way (a complement of a
grammar that spells a value differently would let that spelling through), so the
operands are converted in *canonical mode* (``Canon``):

* whitespace is the schema's own (``conv.ws``: none when compact, else one run of it
  between any two tokens inside a container, as every other keyword writes it), in
  ``U`` and in every operand: whitespace never depends on the value, so each grammar
  accepts every spelling of a value's canonical text or none of them, and a complement
  keeps the spellings of the values it keeps (checked by brute force against
  ``json.loads`` + ``jsonschema``: ``tests/fsm/json_schema/test_boolean_ops_whitespace.py``);
* ``U``'s numbers are canonical: integer-valued numbers as integers (``7``, never
  ``7.0`` or ``7e0``; ``0``, never ``-0``), the others as a decimal fraction without
  trailing zeros and without an exponent; under drafts 3 and 4, where ``7.0`` is a
  number but not an integer, also ``7.0`` (one fraction zero, as ``json.dumps`` writes
  the float; not ``-0.0``); ``U``'s strings use ``json.dumps`` escapes only
  (``objects.CANON_CHAR``). The operands' own grammars accept the canonical spelling of
  each value they accept (and maybe others, which ``U`` removes);
* objects: the keys ``K`` declared by the construct's operands (``properties``,
  ``required``, ``dependentRequired``, transitively through ``$ref``), in one order per
  nesting level (objects ``d`` containers below the construct's value): every object
  schema's own key order where the operands' objects of that level agree (a topological
  sort, ties and conflicts to the first appearance; ``canonical_key_levels``), then the names
  declared only at other levels. ``U``'s objects have keys of ``K`` in their level's
  order, then keys outside ``K`` (canonically spelled, any order); every
  object schema is rewritten to list the keys of ``K`` it accepts (its ``properties``;
  for the others the matching ``patternProperties`` or ``additionalProperties``;
  ``propertyNames`` drops keys) in that order, its other keys following as it allows
  them (``additionalProperties`` absent is ``true`` here, whatever
  ``allow_extra_properties`` says). Exact, but for repeated keys outside ``K``, which
  text can hold and the parsed value cannot: harmless where the keys outside ``K`` are
  unconstrained, so where a complemented operand (``not``'s, every ``oneOf`` branch,
  ``if``) constrains them (``additionalProperties`` a schema, ``patternProperties``,
  ``propertyNames``, property counts next to them) ``strict=True`` refuses (no automaton
  can deduplicate arbitrary keys) and otherwise ``U`` loses the keys outside ``K``, with
  a warning (sound: fewer values, never more);
* any-values and recursion unroll to the converter's depth (``max_recursion_depth``);
  a recursion cut inside an operand cannot be complemented exactly.

Anything inside an operand that the converter cannot enforce exactly (a cut recursion,
an unsupported keyword or format) makes the construct inexact: ``strict=True`` raises
``UnsupportedSchemaError`` naming it; otherwise the caller falls back to its
approximation (``oneOf`` as ``anyOf``, ``not``/``if`` ignored) with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..regex.definitions import COMPLEMENT, INTERSECT, PLACEHOLDER_BASE
from .objects import CANON_CHAR, key_not_in

__all__ = [
    "Canon",
    "Inexact",
    "one_of",
    "negation",
    "conditional",
    "close_object",
    "universe",
    "intersection",
    "complement",
]

CANON_NUMBER = r"(?:0|-?[1-9][0-9]*|-?(?:0|[1-9][0-9]*)\.[0-9]*[1-9])"
# drafts 3 and 4 type 7.0 as a number, not an integer: there it is its own instance, written
# as json.dumps writes the float (one fraction zero; -0.0 is 0 to every keyword but type)
CANON_NUMBER_DRAFT4 = r"(?:" + CANON_NUMBER[3:-1] + r"|(?:0|-?[1-9][0-9]*)\.0)"
_FLOAT_INTEGERS_DISTINCT = ("Draft3Validator", "Draft4Validator")
_OBJECT_KEYS = ("properties", "patternProperties", "additionalProperties", "propertyNames")


class Inexact(Exception):  # noqa: N818 - a control-flow signal, caught in this module
    """An operand cannot be converted exactly (raised only with ``strict=False``)."""


@dataclass
class Canon:
    """Canonical mode of one outermost boolean construct.

    Attributes:
        levels: ``K`` per nesting level (``levels[d]``: the order of the keys of objects
            ``d`` containers below the construct's value; ``canonical_key_levels``), each holding
            every declared key.
        tags: per level, part of every memo key converted there (equal where the orders
            of that level and every deeper one are equal).
        level: the nesting level being converted (``convert_member`` counts it).
        complemented: nesting count of complemented operands being converted.
    """

    levels: tuple[tuple[str, ...], ...]
    tags: tuple[tuple, ...]
    level: int = 0
    complemented: int = 0
    open_complement: bool = False

    @property
    def keys(self) -> tuple[str, ...]:
        """``K`` at the current level (the deepest level's order below it)."""
        return self.levels[min(self.level, len(self.levels) - 1)]

    def tag_here(self) -> tuple:
        """The memo tag of the current level."""
        return self.tags[min(self.level, len(self.tags) - 1)]


def _canon(levels: tuple[tuple[str, ...], ...]) -> Canon:
    """A ``Canon`` over ``levels``, its tags shared by levels whose suffixes are equal."""
    interned: dict[tuple, int] = {}
    tags: list[tuple] = []
    below = -1
    for keys in reversed(levels):
        below = interned.setdefault((keys, below), len(interned))
        tags.append(("canon", levels, below))
    return Canon(levels, tuple(reversed(tags)))


_COMBINATORS = ("allOf", "anyOf", "oneOf", "if", "then", "else", "not")


def _own_keys(cur: Any) -> list[str]:
    """The property names ``cur`` itself declares: ``properties``, then ``required``,
    then ``dependentRequired`` (trigger, then its keys).
    """
    if not isinstance(cur, dict):
        return []
    out: dict[str, None] = {}
    props = cur.get("properties")
    if isinstance(props, dict):
        out.update(dict.fromkeys(props))
    if isinstance(cur.get("required"), list):
        out.update(dict.fromkeys(k for k in cur["required"] if isinstance(k, str)))
    dep = cur.get("dependentRequired")
    if isinstance(dep, dict):
        for k, v in dep.items():
            out[k] = None
            if isinstance(v, list):
                out.update(dict.fromkeys(x for x in v if isinstance(x, str)))
    return list(out)


def _merged_keys(cur: dict, resolve) -> list[str]:
    """The keys of ``cur`` as its object is written when merged one level down: its
    ``$ref`` target's, its own, then each ``allOf`` subschema's (``combine.merge_all_of``'s
    order).
    """

    def target(node: Any) -> Any:
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str):
            return None
        try:
            return resolve(ref, "")
        except Exception:  # noqa: BLE001 - reported where the reference is converted
            return None

    subs = cur.get("allOf") if isinstance(cur.get("allOf"), list) else []
    keys = _own_keys(target(cur)) + _own_keys(cur)
    for sub in subs:
        keys += _own_keys(target(sub)) + _own_keys(sub)
    return list(dict.fromkeys(keys))


_MEMBERS = ("properties", "patternProperties")  # maps of member value schemas
_VALUE_KEYS = ("additionalProperties", "unevaluatedProperties", "propertyNames")
_ITEM_KEYS = ("items", "prefixItems", "additionalItems", "unevaluatedItems", "contains")


def canonical_key_levels(node: Any, resolve, depth: int) -> tuple[tuple[str, ...], ...]:
    """``K`` per nesting level ``0..depth``: the property names declared under ``node``
    (following ``$ref``), each level in one order that keeps, where the schemas of that
    level agree, every object's own key order.

    A subschema's level is the number of containers between the construct's value and
    the values it constrains: member values (``properties``, ``patternProperties``,
    ``additionalProperties``, ...) and items (``items``, ``prefixItems``, ``contains``,
    ...) one deeper, every other subschema (``$ref`` targets, ``allOf``/``anyOf``/
    ``oneOf``/``not``/``if``/``then``/``else``, dependencies) at its schema's level, as
    ``convert_member`` counts them. Each object schema's keys (``_merged_keys``: as the
    converter merges it) give the order of consecutive keys at its level; per level the
    names are sorted topologically along those edges, ties (and cycles, where two
    objects of one level order the same names differently) going to the name that
    appears first at that level in a walk that visits a ``$ref``'s target, then the
    schema's own keys, then its combinator operands, then its other subschemas. Every
    level lists every name (those not declared at a level after its own, by first
    appearance anywhere), so no declared key is ever outside ``K``.

    Args: ``node`` a schema (dict), a list of schemas, or any JSON value (non-schema
    values contribute nothing); ``resolve(ref, base)`` returns the schema a ``$ref``
    string points to (a reference it cannot resolve is skipped here: the converter
    reports it where the reference is compiled); ``depth`` the deepest level kept.
    Returns a tuple of ``depth + 1`` tuples of names. Raises nothing of its own. Used by
    the canonical mode of ``not``/``oneOf``/``if`` and by the benchmarks' canonical
    instance writer (``benchmarks/corpus.py``), which must order keys the same way.
    """
    first: list[dict[str, int]] = [{} for _ in range(depth + 1)]
    after: list[dict[str, set[str]]] = [{} for _ in range(depth + 1)]
    every: dict[str, int] = {}
    seen: set[tuple[str, int]] = set()
    stack: list[tuple[Any, int]] = [(node, 0)]
    while stack:
        cur, level = stack.pop()
        if level > depth:
            continue
        if isinstance(cur, list):
            stack.extend((c, level) for c in reversed(cur))
            continue
        if not isinstance(cur, dict):
            continue
        todo: list[tuple[Any, int]] = []
        ref = cur.get("$ref")
        if isinstance(ref, str) and (ref, level) not in seen:
            seen.add((ref, level))
            try:
                todo.append((resolve(ref, ""), level))
            except Exception:  # noqa: BLE001 - reported where the reference is converted
                pass
        keys = _merged_keys(cur, resolve)
        for k in keys:
            first[level].setdefault(k, len(first[level]))
            every.setdefault(k, len(every))
        for a, b in zip(keys, keys[1:]):
            after[level].setdefault(a, set()).add(b)
        todo += [(cur[k], level) for k in _COMBINATORS if k in cur]
        for k, v in cur.items():
            if k in _COMBINATORS or k in ("enum", "const", "$ref", "examples", "default"):
                continue
            if k in _MEMBERS and isinstance(v, dict):
                todo.extend((sub, level + 1) for sub in v.values())
            elif k in _VALUE_KEYS or k in _ITEM_KEYS:
                todo.append((v, level + 1))
            elif k in ("$defs", "definitions"):
                continue  # reached through $ref, at the level of the reference
            elif k in ("dependentSchemas",) and isinstance(v, dict):
                todo.extend((sub, level) for sub in v.values())
            elif k != "required":
                todo.append((v, level))
        stack.extend(reversed(todo))
    return tuple(_topological(first[d], after[d], every) for d in range(depth + 1))


def _topological(
    first: dict[str, int], after: dict[str, set[str]], every: dict[str, int]
) -> tuple[str, ...]:
    """The names of ``first`` sorted along ``after``'s edges (ties and cycles by
    ``first``), then the other names of ``every`` in its order.
    """
    import heapq

    indegree = dict.fromkeys(first, 0)
    for bs in after.values():
        for b in bs:
            indegree[b] += 1
    ready = [(first[k], k) for k, n in indegree.items() if n == 0]
    heapq.heapify(ready)
    left = sorted(first, key=first.get)
    out: list[str] = []
    done: set[str] = set()
    while len(out) < len(first):
        if not ready:  # a cycle: the earliest name left goes first
            k = next(k for k in left if k not in done)
            heapq.heappush(ready, (first[k], k))
        _, k = heapq.heappop(ready)
        if k in done:
            continue
        done.add(k)
        out.append(k)
        for b in after.get(k, ()):
            indegree[b] -= 1
            if indegree[b] == 0 and b not in done:
                heapq.heappush(ready, (first[b], b))
    return tuple(out) + tuple(k for k in every if k not in done)


def _place(conv, text: str) -> str:
    """The placeholder of a new definition holding ``text`` (always a definition)."""
    if len(text) == 1 and ord(text) - PLACEHOLDER_BASE in range(len(conv.sharing.definitions)):
        return text
    found, hit = conv.sharing.lookup(("boolean", text))
    if found:
        return hit
    conv.sharing.definitions.append(text)
    placeholder = chr(PLACEHOLDER_BASE + len(conv.sharing.definitions) - 1)
    conv.sharing._memo[("boolean", text)] = placeholder
    return placeholder


def _and(conv, items: list[str]) -> str:
    items = list(dict.fromkeys(_place(conv, t) for t in items))
    return items[0] if len(items) == 1 else _place(conv, INTERSECT + "".join(items))


def _not(conv, text: str | None) -> str | None:
    return None if text is None else _place(conv, COMPLEMENT + _place(conv, text))


def intersection(conv, texts: list[str]) -> str:
    """A definition matching what every regex of ``texts`` matches (``INTERSECT``)."""
    return _and(conv, texts)


def complement(conv, text: str) -> str:
    """A definition matching every byte string that the regex ``text`` does not."""
    return _not(conv, text)


def _or(texts: list[str | None]) -> str | None:
    texts = list(dict.fromkeys(t for t in texts if t is not None))
    if not texts:
        return None
    return texts[0] if len(texts) == 1 else "(?:" + "|".join(texts) + ")"


def canon_depth(conv) -> int:
    """Nesting of ``U`` (and of every any-value in canonical mode): the converter's
    ``max_recursion_depth``, 10 when it has none.
    """
    return conv.max_depth if isinstance(conv.max_depth, int) and conv.max_depth > 0 else 10


def universe(conv, depth: int, extras: bool = True, level: int | None = None) -> str:
    """``U``: any canonical JSON value nested at most ``depth`` containers deep, at
    nesting ``level`` (the current one when None); objects list keys of ``K`` in their
    level's order, then (``extras``) keys outside ``K`` (canonical mode only).
    """
    canon = conv.canon
    level = canon.level if level is None else level
    saved = canon.level
    canon.level = level
    try:
        key = ("canon-any", canon.tag_here(), depth, extras)
        found, text = conv.sharing.lookup(key)
        if found:
            return text
        keys = canon.keys
    finally:
        canon.level = saved
    distinct = getattr(conv, "_draft", "") in _FLOAT_INTEGERS_DISTINCT
    number = CANON_NUMBER_DRAFT4 if distinct else CANON_NUMBER
    scalars = ['"' + CANON_CHAR + '*"', number, "true", "false", "null"]
    if depth <= 0:
        return conv.sharing.store(key, _or(scalars))
    inner = universe(conv, depth - 1, extras, level + 1)
    # one whitespace run between two tokens (an empty container's brackets too), as the
    # other keywords write them: a member carries the run before it, a comma the one
    # before the comma
    ws = conv.ws
    array = "\\[" + ws + "(?:" + inner + "(?:" + ws + "," + ws + inner + ")*" + ws + ")?\\]"
    member = ws + ":" + ws + inner
    listed = _ordered(conv, [ws + _key_text(k) + member for k in keys], ws + ",")
    if extras:
        pair = _place(conv, ws + '"' + key_not_in(list(keys)) + '"' + member)
        more = "(?:" + ws + "," + pair + ")*"
        body = "(?:" + (listed + more + "|" if listed else "") + pair + more + ")?"
    else:
        body = "(?:" + listed + ")?" if listed else ""
    obj = "\\{" + body + ws + "\\}"
    return conv.sharing.store(key, _or(scalars + [array, obj]))


def universe_here(conv) -> str:
    """``U`` at the current level: as deep as the construct's ``U`` still reaches there."""
    return universe(conv, max(canon_depth(conv) - conv.canon.level, 0))


def _key_text(name: str) -> str:
    from ..regex.escape import escape_literal
    from .values import json_text

    return escape_literal(json_text(name))


def _ordered(conv, parts: list[str], sep: str = ",") -> str:
    """A non-empty subsequence of ``parts`` in order, separated by ``sep`` (``""`` for
    none): ``(?:p_0 G(1) | .. | p_n-1 G(n))`` with ``G(i) = (?:sep p_i)? G(i+1)`` (each
    ``G`` a shared definition: the text is linear and the nesting flat).
    """
    if not parts:
        return ""
    tails = [""]
    for part in reversed(parts[1:]):
        tails.append(_place(conv, "(?:" + sep + part + ")?" + tails[-1]))
    tails.reverse()  # tails[i]: what may follow parts[i]
    return "(?:" + "|".join(p + t for p, t in zip(parts, tails)) + ")"


class _Mode:
    """Enter canonical mode on ``conv`` (memo keys tagged; the schema's whitespace kept)."""

    def __init__(self, conv, operands: list[Any]) -> None:
        self.conv = conv
        self.operands = operands

    def __enter__(self):
        conv = self.conv
        self.saved = conv.canon
        if conv.canon is None:
            levels = canonical_key_levels(self.operands, conv.resolve, canon_depth(conv))
            conv.canon = _canon(levels)
        return conv.canon

    def __exit__(self, *exc) -> None:
        self.conv.canon = self.saved


def _operand(conv, schema: Any, pointer: str, refs, complemented: bool) -> str | None:
    canon = conv.canon
    canon.complemented += complemented
    try:
        return conv.convert(schema, pointer, refs)
    finally:
        canon.complemented -= complemented


def _run(conv, keyword: str, pointer: str, operands: list[Any], build):
    """``build()`` in canonical mode; None from ``Inexact`` (non-strict: the caller
    approximates) after a warning naming why.
    """
    outer = conv.canon is not None
    try:
        with _Mode(conv, operands):
            text = build()
            depth = max(canon_depth(conv) - conv.canon.level, 0)
            u = universe(conv, depth, not conv.canon.open_complement)
            return ("ok", None if text is None else _and(conv, [u, text]))
    except Inexact as exc:
        if outer:
            raise
        conv.warnings.append(f"{keyword} at {pointer or '#'} is not enforced exactly: {exc}")
        return ("inexact", None)


def one_of(conv, branches: list[tuple[str, Any]], pointer: str, refs):
    """``oneOf`` over ``branches`` (``(pointer, schema)``, siblings merged in).

    Returns:
        ``("ok", regex or None)`` (None: no value), or ``("inexact", None)`` when the
        caller must approximate (``strict=False`` only).

    Raises:
        UnsupportedSchemaError: ``strict=True`` and an operand is not exact.
    """

    def build():
        texts = [_operand(conv, s, p, refs, True) for p, s in branches]
        live = [t for t in texts if t is not None]
        if len(live) <= 1:
            return live[0] if live else None
        terms = []
        for i, t in enumerate(live):
            others = _or([u for j, u in enumerate(live) if j != i])
            terms.append(_and(conv, [t, _not(conv, others)]))
        return _or(terms)

    return _run(conv, "oneOf", pointer, [s for _, s in branches], build)


def negation(conv, rest: dict, negated: Any, pointer: str, refs):
    """``not: negated`` next to the keywords ``rest`` (returns as ``one_of``)."""

    def build():
        positive = _operand(conv, rest or True, pointer, refs, False)
        excluded = _operand(conv, negated, pointer + "/not", refs, True)
        if positive is None:
            return None
        return positive if excluded is None else _and(conv, [positive, _not(conv, excluded)])

    return _run(conv, "not", pointer, [rest, negated], build)


def conditional(conv, schema: dict, pointer: str, refs):
    """``if``/``then``/``else`` next to the other keywords of ``schema`` (as ``one_of``)."""
    rest = {k: v for k, v in schema.items() if k not in ("if", "then", "else")}
    cond, then, other = schema["if"], schema.get("then", True), schema.get("else", True)

    def build():
        positive = _operand(conv, rest or True, pointer, refs, False)
        if positive is None:
            return None
        # the condition is read both ways: complemented in the else branch
        yes = _operand(conv, cond, pointer + "/if", refs, True)
        t = _operand(conv, then, pointer + "/then", refs, False)
        e = _operand(conv, other, pointer + "/else", refs, False)
        when = None if yes is None or t is None else _and(conv, [yes, t])
        unless = e if yes is None or e is None else _and(conv, [_not(conv, yes), e])
        either = _or([when, unless])
        return None if either is None else _and(conv, [positive, either])

    return _run(conv, "if", pointer, [rest, cond, then, other], build)


def close_object(conv, schema: dict, pointer: str) -> dict:
    """``schema`` with its object keywords rewritten for canonical mode: ``properties``
    lists the keys of ``K`` the schema accepts, in their order; keys outside ``K``
    follow as the schema allows them (``additionalProperties`` absent is ``true`` here,
    whatever ``allow_extra_properties`` says).

    Raises:
        UnsupportedSchemaError: ``strict=True`` and a complemented operand constrains
            keys outside ``K``; a dependency keyword (not rewritten here).
    """
    import re

    canon = conv.canon
    for kw in conv.dependency_keywords:
        if kw in schema:
            conv.unsupported(kw, pointer, "dependencies inside not/oneOf/if")
    props = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extra = schema.get("additionalProperties", True)
    names = schema.get("propertyNames", True)
    listed: dict[str, Any] = {}
    for key in canon.keys:
        matching = [s for p, s in patterns.items() if _search(re, p, key)]
        subs = ([props[key]] if key in props else []) + matching
        if key not in props and not matching:
            subs = [extra]
        if names is not True and not conv.is_valid(key, names):
            subs = [False]
        if any(s is False for s in subs):
            continue
        listed[key] = subs[0] if len(subs) == 1 else {"allOf": subs}
    for key in props:  # declared but outside K: cannot happen (K holds every declared key)
        listed.setdefault(key, props[key])
    out = {**schema, "properties": listed}
    if not patterns and "additionalProperties" not in schema:
        out["additionalProperties"] = True
    constrained_extras = (
        bool(patterns)
        or names is not True
        or extra not in (True, False, {})
        or extra is not False
        and ("minProperties" in schema or "maxProperties" in schema)
    )
    if canon.complemented and constrained_extras:
        if conv.strict:
            conv.unsupported(
                "additionalProperties",
                pointer,
                "a complemented operand (not, oneOf, if) constrains undeclared keys, which"
                " no automaton can deduplicate",
            )
        canon.open_complement = True
        msg = (
            f"{pointer or '#'}: a complemented operand constrains undeclared keys: objects"
            " under this not/oneOf/if are generated with declared keys only"
        )
        if msg not in conv.warnings:
            conv.warnings.append(msg)
    return out


def _search(re, pattern: str, key: str) -> bool:
    try:
        return re.search(pattern, key) is not None
    except re.error:
        return False
