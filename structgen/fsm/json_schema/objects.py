"""Lowering of ``type: object``.

Layout (the canonical one): the keys of ``properties`` in schema order (each optional
one may be absent), then required keys that ``properties`` does not list, in
``required`` order, then any extra keys. Extra keys are:

* with ``patternProperties``: keys matching a pattern, valued by that pattern's schema
  (exact when no key can match two patterns with different schemas: checked on the
  patterns' automata; else strict error), never one of the listed names (a pattern that
  matches a listed name is intersected with the canonical keys outside the list); with
  ``additionalProperties`` other than ``false`` (or absent under
  ``allow_extra_properties=True``), also the canonical keys that match no pattern and no
  listed name (the patterns' complement), valued by that schema;
* else with ``additionalProperties`` true or a schema, or absent when the caller
  passes ``allow_extra_properties=True``: keys spelled canonically (``json.dumps``
  escapes) that differ from every listed name, valued by that schema.

So a listed name is written at most once, as its own member: an extra key equal to it
would make the parsed object (last value wins) differ from the one the grammar checked.
``""`` is an extra key like any other (JSON and JSON Schema allow it) unless listed or
refused by ``propertyNames``. Extra keys may repeat one another (no automaton keeps an
unbounded set of keys distinct); a repeated extra key is valued by the same subschema each
time, so the parsed object stays valid, but for property counts (below).

``propertyNames`` filters the listed keys (checked with ``jsonschema``) and narrows every
extra key above: each key regex intersected with the strings it allows.
``minProperties``/``maxProperties`` are exact when the listed keys are all required (the
count moves to the extras) or when there are no extras (the allowed subsets of optional
keys are listed). They count written members: where a minimum needs two extra keys or
more, two equal ones would count twice although the parsed object holds one (extra keys may
repeat, above), so such a minimum compiles with a warning naming it.
``dependentRequired``/``dependentSchemas``/``dependencies`` split the object into
branches (``dependencies``), each lowered here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from itertools import combinations

from ..regex.escape import escape_literal
from ..regex.lower import ascii_class, key_trie_text
from .context import ConvertContext
from .dependencies import dependent_object_regex, has_dependencies
from .pattern import pattern_to_string_body
from .string_length import patterns_disjoint
from .values import json_text

__all__ = ["object_regex", "key_not_in", "CANON_CHAR"]

_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPES = list(_SHORT.values()) + [f"\\u{cp:04x}" for cp in range(0x20) if chr(cp) not in _SHORT]


def _escape_classes(escapes: list[str]) -> list[str]:
    r"""Regex alternatives for a set of ``json.dumps`` escapes: the short ones as one class
    after a backslash, the ``\u00XX`` ones as one class per high digit (a few byte-class
    nodes, not one alternative per escape: the text stays short however often it is used).
    """
    short = [e[1] for e in escapes if len(e) == 2]
    out = []
    if short:
        out.append("\\\\[" + "".join("\\" + c if c in "\\]^-[" else c for c in short) + "]")
    by_high: dict[str, str] = {}
    for e in escapes:
        if len(e) == 6:
            by_high[e[4]] = by_high.get(e[4], "") + e[5]
    for high, lows in sorted(by_high.items()):
        out.append("\\\\u00" + high + ("[" + lows + "]" if len(lows) > 1 else lows))
    return out


CANON_CHAR = "(?:" + "|".join(['[^"\\\\\\x00-\\x1f]'] + _escape_classes(_ESCAPES)) + ")"
_ALL_ESCAPES = _escape_classes(_ESCAPES)
_NON_ASCII = "[\\x80-\\U0010ffff]"  # every non-ASCII character (UTF-8: no surrogate)
_NON_ASCII_UNIT = "(?:" + "|".join([_NON_ASCII, *_ALL_ESCAPES]) + ")"
# the characters 0x20-0x7F a JSON string writes as themselves (all but '"' and '\\'), as bits
_PLAIN_UNITS = ((1 << 0x80) - (1 << 0x20)) & ~(1 << 0x22) & ~(1 << 0x5C)
_ASCII_LITERALS = {chr(c): escape_literal(chr(c)) for c in range(0x80)}  # a unit's text
_END = frozenset(("",))  # a key trie's end marker
MAX_SUBSETS = 256
SHARE_MIN_CHARS = 64  # member tails at least this long become shared definitions
# (WashingtonPost's recursive content objects copy every expansion's tails; the figures for
# 64 against 512 are in benchmarks/RESULTS.md, "Moved from docstrings: fsm")


def _units(name: str) -> list[str]:
    """The characters of ``name`` as ``json.dumps`` (``ensure_ascii=False``) spells them:
    the quote, the backslash and the control characters escaped, every other one itself.
    """
    return [ch if ch >= " " and ch != '"' and ch != "\\" else json.dumps(ch)[1:-1] for ch in name]


@lru_cache(maxsize=4096)
def _unit_not_in(excluded: frozenset[str], other: str = _NON_ASCII_UNIT, then: str = "") -> str:
    """One canonically spelled character of a JSON string body other than the ``excluded``
    units (characters, or ``json.dumps`` escapes), followed by ``then``.

    Where every excluded character is ASCII (key names usually are) it is written as the
    ASCII characters left, as a small class of ranges, then, when no escape is excluded,
    ``other``: the text of ``_NON_ASCII_UNIT`` (the other characters and every escape), or
    the placeholder of a shared definition of it. A key trie writes one of these per node;
    a negated class per node was a distinct class of ~30 UTF-8 terms each and ~80
    characters more text per node (``benchmarks/RESULTS.md``, #22 g2). Same language
    either way (the same term: alternations flatten).

    Where ``then`` is one code point (a key trie's tail: a shared definition's placeholder)
    on that ASCII path, the result is the alternation ``[class]then|other then`` (no group
    around it: the caller writes it inside one), the unit's two parts each followed by
    ``then``: the language of ``(?:[class]|other)then``, whose lowering merges the class
    into a new copy of ``other``'s alternatives at every node (shorter text, fewer terms;
    the same derivatives past the node's first byte). Otherwise ``then`` follows the
    unit's group.
    """
    joined = "".join(excluded)
    if len(joined) == len(excluded) and "" not in excluded and joined.isascii():
        # ASCII characters only (most key names): no escape excluded, no lists to build
        return _ascii_left(joined, other, then, True)
    plain = [u for u in excluded if len(u) == 1]  # the others are escapes
    escapes = (
        _escape_classes([e for e in _ESCAPES if e not in excluded])
        if len(plain) < len(excluded)
        else _ALL_ESCAPES
    )
    if all(u < "\x80" for u in plain):
        if escapes == _ALL_ESCAPES:
            return _ascii_left(plain, other, then, True)
        return _ascii_left(plain, _alt_text([_NON_ASCII, *escapes]), then, False)
    plain.sort()
    cls = '[^"\\\\\\x00-\\x1f' + "".join("\\" + c if c in "\\]^-[" else c for c in plain) + "]"
    return "(?:" + "|".join([cls] + escapes) + ")" + then


def _ascii_left(chars: Iterable[str], rest: str, then: str, split: bool) -> str:
    """One unit of ``_unit_not_in`` where every excluded character is ASCII: the printable
    ASCII units other than ``chars`` (single ASCII characters) as a class of ranges, or the
    text ``rest`` (the other units), followed by ``then``.

    The class's byte set is handed to the lowering with the text (``ascii_class``: not read
    back from it); no class where every printable ASCII unit is excluded. With ``split``
    and a one-code-point ``then`` (a shared definition's placeholder) the result is the
    ungrouped alternation ``[class]then|rest then``; otherwise ``(?:[class]|rest)then``.
    """
    mask = _PLAIN_UNITS
    for u in chars:
        mask &= ~(1 << ord(u))
    if split and len(then) == 1:  # a placeholder: short twice
        return ascii_class(mask) + then + "|" + rest + then if mask else rest + then
    return _alt_text([ascii_class(mask), rest] if mask else [rest]) + then


def _alt_text(options: list[str]) -> str:
    return "(?:" + "|".join(options) + ")"


def key_not_in(names: list[str], tail: str = CANON_CHAR + "*", other: str = _NON_ASCII_UNIT) -> str:
    """Regex for canonically spelled JSON string bodies that equal none of ``names``.

    ``tail`` is the text written for "any further characters" after a character that
    leaves the name trie, ``other`` the text for a non-ASCII character or an escape
    (``_NON_ASCII_UNIT``), both once per trie node: a shared definition's placeholder keeps
    the text short. Memoised: a definition expanded at many recursion depths lists the
    same names.
    """
    return _key_not_in(tuple(names), tail, other)


@lru_cache(maxsize=1024)
def _key_not_in(names: tuple[str, ...], tail: str, other: str) -> str:
    text = key_trie_text(names, tail, other)  # plain ASCII names: the same text, in C
    return _key_trie(names, tail, other) if text is None else text


def _key_trie(names: tuple[str, ...], tail: str, other: str) -> str:
    """``_key_not_in``'s text in Python (the reference of ``regex.lower.key_trie_text``)."""
    trie: dict = {}
    for name in names:
        node = trie
        for u in _units(name):
            node = node.setdefault(u, {})
        node[""] = {}  # end marker

    return _key_trie_node(trie, tail, other)


def _key_trie_node(node: dict, tail: str, other: str) -> str:
    """``_key_trie``'s text of one trie node (module level: a recursive closure would be a
    reference cycle that only the cyclic collector frees).
    """
    alts = [""]  # the unit leaving the trie here, then one per child
    for u, child in node.items():
        if u:
            literal = _ASCII_LITERALS.get(u) or escape_literal(u)
            alts.append(literal + _key_trie_node(child, tail, other))
    ends = "" in node
    alts[0] = _unit_not_in(frozenset(node) - _END if ends else frozenset(node), other, tail)
    body = "(?:" + "|".join(alts) + ")"
    return body if ends else body + "?"


def _matches(pattern: str, name: str, unknown: bool = False) -> bool:
    """Whether ``pattern`` finds a match in ``name`` (``unknown`` when Python's ``re``
    cannot read the pattern).
    """
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return unknown


def object_regex(conv: ConvertContext, schema: dict, pointer: str, refs: tuple) -> str | None:
    """Regex for the objects valid under the object keywords of ``schema``."""
    if has_dependencies(conv, schema):  # one branch per combination of trigger keys
        return dependent_object_regex(conv, schema, pointer, refs)
    ws = conv.ws
    # each member carries the whitespace run before it and the separator only the one
    # before its comma, so an empty object has one run between its braces, not two
    sep = ws + ","
    props: dict = dict(schema.get("properties", {}) or {})
    required = list(dict.fromkeys(schema.get("required", [])))
    patterns: dict = schema.get("patternProperties", {}) or {}
    extra = schema.get("additionalProperties")
    names_schema = schema.get("propertyNames")
    for name in required:  # required keys without a property schema
        if name not in props:
            hits = [p for p in patterns if _matches(p, name)]
            if hits:
                props[name] = {"allOf": [patterns[p] for p in hits]}
            elif extra is False:
                return None
            else:
                props[name] = True if extra is None else extra
    members: list[tuple[str, bool]] = []
    for name, sub in props.items():
        hits = [p for p in patterns if _matches(p, name)]
        if hits:
            sub = {"allOf": [sub] + [patterns[p] for p in hits]}
        ok_name = names_schema is None or conv.is_valid(name, names_schema)
        value = (
            conv.convert_member(sub, f"{pointer}/properties/{_escape_ptr(name)}", refs)
            if ok_name
            else None
        )
        if value is None:
            if name in required:
                return None
            continue
        members.append(
            (
                ws + escape_literal(json_text(name)) + ws + ":" + ws + value,
                name in required,
            )
        )
    pair = _extra_pair(conv, schema, pointer, refs, list(props))
    if pair is not None:
        pair = ws + pair
    body = _counted(conv, schema, pointer, members, pair, sep)
    return None if body is None else "\\{" + body + ws + "\\}"


def _escape_ptr(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _extra_pair(
    conv: ConvertContext, schema: dict, pointer: str, refs: tuple, listed: list[str]
) -> str | None:
    """Regex of one extra ``"key":value`` member, or None when no extra key is allowed."""
    ws = conv.ws
    patterns: dict = schema.get("patternProperties", {}) or {}
    extra = schema.get("additionalProperties")
    if patterns:
        every, named = _names_key(conv, schema, pointer, refs)
        if not every and named is None:
            return None
        open_extra = extra is not False and (extra is not None or conv.allow_extra)
        distinct = len({json.dumps(v, sort_keys=True) for v in patterns.values()}) > 1
        if distinct and not patterns_disjoint(list(patterns), pointer):
            conv.unsupported(
                "patternProperties",
                pointer,
                "several patterns with different schemas (a key may match two)",
            )
        from . import boolean_ops  # it lowers objects too (canonical mode)

        # a listed name a pattern may match is left out of the pattern's keys
        hits_listed = any(_matches(p, name, True) for p in patterns for name in listed)
        unlisted = _unlisted_key(conv, listed) if hits_listed or open_extra else None
        bodies = {
            q: pattern_to_string_body(q, f"{pointer}/patternProperties/{_escape_ptr(q)}")
            for q in patterns
        }
        pairs = []  # one "key":value alternative per pattern (exact when no key matches two)
        for p, sub in patterns.items() if distinct else [next(iter(patterns.items()))]:
            ptr = f"{pointer}/patternProperties/{_escape_ptr(p)}"
            value = conv.convert_member(sub, ptr, refs)
            keys = [bodies[q] for q in (patterns if not distinct else [p])]
            if value is not None:
                key = keys[0] if len(keys) == 1 else "(?:" + "|".join(keys) + ")"
                if hits_listed:  # a listed name is valued by its property (and the pattern)
                    key = boolean_ops.intersection(conv, [key, unlisted])
                pairs.append(_named(conv, '"' + key + '"', named) + ws + ":" + ws + value)
        if open_extra:  # keys matching no pattern and no listed name: additionalProperties
            value = conv.convert_member(
                True if extra is None else extra, pointer + "/additionalProperties", refs
            )
            if value is not None:
                matched = "(?:" + "|".join(bodies.values()) + ")"
                key = boolean_ops.intersection(
                    conv, [unlisted, boolean_ops.complement(conv, matched)]
                )
                pairs.append(_named(conv, '"' + key + '"', named) + ws + ":" + ws + value)
        if not pairs:
            return None
        return pairs[0] if len(pairs) == 1 else "(?:" + "|".join(pairs) + ")"
    if extra is False or (extra is None and not conv.allow_extra):
        if extra is None:
            conv.note_no_extra()
        return None
    value = conv.convert_member(
        True if extra is None else extra, pointer + "/additionalProperties", refs
    )
    if value is None:
        return None
    every, named = _names_key(conv, schema, pointer, refs)
    if every:  # one shared definition per name list
        return '"' + _unlisted_key(conv, listed) + '"' + ws + ":" + ws + value
    if named is None:
        return None
    if listed:  # a listed name is its member's key only: never an extra one too
        named = _named(conv, '"' + _unlisted_key(conv, listed) + '"', named)
    return named + ws + ":" + ws + value


def _names_key(
    conv: ConvertContext, schema: dict, pointer: str, refs: tuple
) -> tuple[bool, str | None]:
    """``(every, key)``: whether ``propertyNames`` allows every key, else the regex of the
    quoted keys it allows (None: no key).
    """
    names = schema.get("propertyNames")
    if names in (None, True, {}):
        return True, None
    if not isinstance(names, dict):  # false
        return False, None
    return False, conv.convert({"type": "string", **names}, pointer + "/propertyNames", refs)


def _named(conv: ConvertContext, key: str, named: str | None) -> str:
    """``key`` (a quoted-key regex) narrowed to the keys ``propertyNames`` allows."""
    if named is None:
        return key
    from . import boolean_ops  # it lowers objects too (canonical mode)

    return boolean_ops.intersection(conv, [key, named])


def _unlisted_key(conv: ConvertContext, listed: list[str]) -> str:
    """The canonically spelled JSON string bodies that equal none of ``listed`` (one shared
    definition per name list).
    """
    found, body = conv.sharing.lookup(("key_not_in", tuple(listed)))
    if not found:
        # the same in every schema: kept across compiles (regex.reused)
        tail = conv.sharing.lookup(("canon_tail",))[1] or conv.sharing.store(
            ("canon_tail",), "(?:" + CANON_CHAR + "*)", reusable=True
        )
        other = conv.sharing.lookup(("non_ascii_unit",))[1] or conv.sharing.store(
            ("non_ascii_unit",), _NON_ASCII_UNIT, reusable=True
        )
        body = conv.sharing.store(("key_not_in", tuple(listed)), key_not_in(listed, tail, other))
    return body


def _counted(
    conv: ConvertContext,
    schema: dict,
    pointer: str,
    members: list[tuple[str, bool]],
    pair: str | None,
    sep: str,
) -> str | None:
    """Members in order then extras, honouring ``minProperties``/``maxProperties``."""
    lo = int(schema.get("minProperties", 0))
    hi = schema.get("maxProperties")
    hi = None if hi is None else int(hi)
    num_req = sum(1 for _, req in members if req)
    num_opt = len(members) - num_req
    if hi is not None and (lo > hi or hi < num_req):  # no count fits
        return None
    vacuous = lo <= num_req and (hi is None or (pair is None and hi >= len(members)))
    if vacuous:
        return _members(members, pair, 0, None, sep, _sharer(conv))
    if pair is not None and lo - len(members) >= 2:
        note = (
            f"minProperties at {pointer or '#'} counts written members: its {lo - len(members)} "
            "undeclared keys are assumed distinct (the grammar cannot keep arbitrary keys "
            "apart, and two equal ones would count twice where the parsed object holds one)"
        )
        if note not in conv.warnings:
            conv.warnings.append(note)
    if num_opt == 0:
        return _members(
            members,
            pair,
            max(lo - num_req, 0),
            None if hi is None else hi - num_req,
            sep,
            _sharer(conv),
        )
    if pair is None and 2**num_opt <= MAX_SUBSETS:
        options = []
        optional = [i for i, (_, req) in enumerate(members) if not req]
        for k in range(num_opt + 1):
            if not (lo <= num_req + k and (hi is None or num_req + k <= hi)):
                continue
            for chosen in combinations(optional, k):
                picked = [m for i, (m, req) in enumerate(members) if req or i in chosen]
                options.append(sep.join(picked))
        if not options:
            return None
        return "(?:" + "|".join(options) + ")"
    conv.unsupported(
        "minProperties" if lo > num_req else "maxProperties",
        pointer,
        "property counts next to optional and extra properties",
    )
    return _members(members, pair, 0, None, sep, _sharer(conv))


def _sharer(conv: ConvertContext):
    """``share(text) -> text or placeholder``: one shared definition per distinct text (the
    text alone decides its language), so a long subpattern used many times is written once.
    """

    def share(text: str) -> str:
        if len(text) < SHARE_MIN_CHARS:  # short: copying costs less than a definition
            return text
        found, placeholder = conv.sharing.lookup(("objtext", text))
        return placeholder if found else conv.sharing.store(("objtext", text), text)

    return share


def _members(
    members: list[tuple[str, bool]],
    pair: str | None,
    lo: int,
    hi: int | None,
    sep: str,
    share=lambda text: text,
) -> str:
    """Properties in order (optional ones may be absent), then ``lo..hi`` extra pairs.

    ``started`` is the regex of what follows once something was written (each item
    preceded by ``sep``); ``fresh`` the regex when nothing was written yet (``""`` = empty).
    ``fresh`` of member i holds ``started`` of every later member, so ``share`` makes each
    ``started`` (and the extra pair) one shared definition: linear text in the number of
    members, not quadratic (Snowplow sp_384: 7 optional properties and extras).
    """
    pair = None if pair is None else share(pair)

    def count(lo: int, hi: int | None) -> str:
        return "*" if lo == 0 and hi is None else "{%d,%s}" % (lo, "" if hi is None else hi)

    if pair is None or (hi is not None and hi <= 0):
        started, fresh = "", ""
    else:
        started = "(?:%s%s)%s" % (sep, pair, count(lo, hi))
        rest = "(?:%s%s)%s" % (sep, pair, count(max(lo - 1, 0), None if hi is None else hi - 1))
        fresh = pair + rest if lo > 0 else "(?:%s%s)?" % (pair, rest)
    for m, req in reversed(members):
        if req:
            fresh = m + started
        else:
            fresh = "(?:%s%s%s)%s" % (
                m,
                started,
                "|" + fresh if fresh else "",
                "" if fresh else "?",
            )
        started = share((sep + m if req else "(?:" + sep + m + ")?") + started)
    return fresh
