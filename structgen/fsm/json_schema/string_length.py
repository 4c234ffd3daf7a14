"""A string ``pattern`` (or ``format``) together with ``minLength``/``maxLength``, exactly.

A regex text cannot intersect two languages, so the intersection is built here, at
conversion time: the pattern (Python ``re`` syntax over the *decoded* string, search
semantics as in ``pattern``) becomes a Thompson NFA over code-point ranges, and
the product of that NFA with a character counter ``0..maxLength`` is written out as a
right-linear grammar: one shared definition (``refs``) per live product state
``(q, c)``, ``D(q, c) = enc(R1) D(q1, c+1) | enc(R2) D(q2, c+1) | ... [| ""]`` where
``enc(R)`` is one JSON-encoded character whose decoded value lies in ``R`` (escapes
count as one character, as ``minLength`` counts). The counter makes the product
acyclic, so every definition only refers to later counts (written first). Dead product
states (acceptance out of reach within ``maxLength``) are pruned, so no definition is
empty; an empty intersection is ``None`` (no string is valid).

Without ``maxLength`` the counter saturates at ``minLength``: a state ``(q, minLength)``
is the pattern's own continuation from ``q`` (the regex of the remaining items and
enclosing repetitions, recorded while the NFA is built), so the text stays finite.
Sizes are capped (``MAX_NFA_STATES``, ``MAX_PRODUCT_STATES``): past them,
``Unrepresentable``; the caller turns that into the strict error.
"""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

from ...errors import UnsupportedSchemaError
from ...lru import LRUCache
from ..regex.definitions import PLACEHOLDER_BASE, renumber_many, renumber_placeholders
from ..regex.parse import MAXREPEAT, RE_MAX_NESTING, _nesting
from ..regex.parse import sre_constants as C
from .context import ConvertContext
from .pattern import (
    _class_ranges,
    _class_text,
    _complement,
    _encoded_alternatives,
    _translate,
    split_anchors,
    top_level_branches,
)
from .refs import INLINE_MAX, RefSharing

__all__ = [
    "bounded_string_body",
    "patterns_disjoint",
    "Unrepresentable",
    "MAX_NFA_STATES",
    "MAX_PRODUCT_STATES",
    "MAX_BODIES",
    "clear_bodies",
]

MAX_NFA_STATES = 4000
MAX_PRODUCT_STATES = 40_000
MAX_BODIES = 32  # bounded bodies kept per process (an email body of maxLength 80: ~15k texts)
_ALL = [(0, 0x10FFFF)]


class Unrepresentable(Exception):
    """The intersection cannot be written exactly within the limits (message says why)."""


def _body(items, pointer: str) -> str:
    """``pattern``'s JSON-body translation of parse items (Unrepresentable when it
    has none, e.g. a character class too large to write out).
    """
    try:
        return _translate(items, pointer)
    except UnsupportedSchemaError as exc:
        raise Unrepresentable(str(exc)) from exc


class _NFA:
    """Thompson NFA over code-point ranges: ``eps[s]`` targets, ``edges[s]`` (ranges, target).

    ``rest[t]`` is, for every target ``t`` of a character edge, the JSON-body regex of
    the language accepted from ``t`` (the continuation after that character, built
    alongside: the pattern's remaining items and enclosing repetitions).
    """

    def __init__(self, pointer: str, with_rest: bool = True) -> None:
        self.with_rest = with_rest  # False: no continuation texts (maxLength bounds all)
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[tuple, int]]] = []
        self.rest: dict[int, str] = {}
        self.pointer = pointer
        self._text: dict[int, str] = {}

    def new(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise Unrepresentable(f"pattern automaton over {MAX_NFA_STATES} states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def text(self, item) -> str:
        """The JSON-body regex of one parse item (``pattern``'s translation)."""
        key = id(item)
        if not self.with_rest:
            return ""
        if key not in self._text:
            self._text[key] = _body([item], self.pointer)
        return self._text[key]

    def char(self, s: int, ranges, k: str) -> int:
        t = self.new()
        self.edges[s].append((tuple(ranges), t))
        self.rest[t] = k
        return t

    def seq(self, items, s: int, k: str) -> int:
        items = list(items)
        conts = [k]
        for item in reversed(items[1:]):
            conts.append(self.text(item) + conts[-1])
        for (op, av), cont in zip(items, reversed(conts)):
            s = self.node(op, av, s, cont)
        return s

    def node(self, op, av, s: int, k: str) -> int:
        if op == C.LITERAL:
            return self.char(s, [(av, av)], k)
        if op == C.NOT_LITERAL:
            return self.char(s, _complement([(av, av)]), k)
        if op == C.ANY:
            return self.char(s, _complement([(0x0A, 0x0A)]), k)
        if op == C.IN:
            return self.char(s, _class_ranges(av, self.pointer), k)
        if op == C.SUBPATTERN:
            return self.seq(av[-1], s, k)
        if op == C.BRANCH:
            end = self.new()
            for branch in av[1]:
                start = self.new()
                self.eps[s].append(start)
                self.eps[self.seq(branch, start, k)].append(end)
            return end
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) or op == getattr(C, "POSSESSIVE_REPEAT", None):
            return self._repeat(av, s, k)
        raise Unrepresentable(f"regex feature {op} is not supported")

    def _repeat(self, av, s: int, k: str) -> int:
        lo, hi, sub = av
        body = "(?:" + _body(sub, self.pointer) + ")" if self.with_rest else ""

        def more(a: int, b: int | None) -> str:  # body{a,b} then k
            if b == 0:
                return k
            return body + ("{%d,}" % a if b is None else "{%d,%d}" % (a, b)) + k

        top = None if hi == MAXREPEAT else hi
        for i in range(lo):
            s = self.seq(sub, s, more(lo - i - 1, None if top is None else top - i - 1))
        if top is None:
            loop = self.new()
            self.eps[s].append(loop)
            self.eps[self.seq(sub, loop, more(0, None))].append(loop)
            return loop
        end = self.new()
        self.eps[s].append(end)
        for j in range(top - lo):
            s = self.seq(sub, s, more(0, top - lo - j - 1))
            self.eps[s].append(end)
        return end

    def closure(self, s: int) -> frozenset[int]:
        seen = {s}
        todo = [s]
        while todo:
            for t in self.eps[todo.pop()]:
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
        return frozenset(seen)


_ANY_ITEM = (C.MAX_REPEAT, (0, MAXREPEAT, [(C.IN, [(C.RANGE, (0, 0x10FFFF))])]))


def _build_nfa(
    regex: str, anchored: bool, pointer: str, with_rest: bool
) -> tuple[_NFA, int, int, str]:
    """(nfa, start, final, whole) for ``regex``: fullmatch when ``anchored``, else search;
    ``whole`` is the JSON-body regex of the language (the start state's continuation;
    with ``with_rest`` False, no continuation texts and ``whole`` is empty).
    """
    if "(" in regex and _nesting(regex) > RE_MAX_NESTING:  # ``_NFA.seq`` recurses per group
        raise Unrepresentable(
            f"the pattern nests groups deeper than {RE_MAX_NESTING} (RE_MAX_NESTING)"
        )
    branches = top_level_branches(regex, pointer)
    nfa = _NFA(pointer, with_rest)
    start, final = nfa.new(), nfa.new()
    wholes = []
    for branch in branches:
        first, core, last = split_anchors(branch)
        if any(op == C.AT for op, _ in core):
            raise Unrepresentable("an anchor inside the pattern")
        items = (
            ([] if first or anchored else [_ANY_ITEM])
            + core
            + ([] if last or anchored else [_ANY_ITEM])
        )
        s = nfa.new()
        nfa.eps[start].append(s)
        nfa.eps[nfa.seq(items, s, "")].append(final)
        if with_rest:
            wholes.append(regex if anchored else _body(items, pointer))
    whole = "" if not wholes else wholes[0] if len(wholes) == 1 else "(?:" + "|".join(wholes) + ")"
    return nfa, start, final, whole


def _shortest(nfa: _NFA, start: int, final: int) -> int | None:
    """Fewest characters of a match (0-1 BFS over the NFA), None when nothing matches."""
    dist = {start: 0}
    frontier = [start]
    n = 0
    while frontier:
        level = set()
        for s in frontier:
            level |= nfa.closure(s)
        if final in level:
            return n
        n += 1
        frontier = [t for s in level for _, t in nfa.edges[s] if t not in dist]
        for t in frontier:
            dist[t] = n
    return None


def bounded_string_body(
    conv: ConvertContext, regex: str, anchored: bool, lo: int, hi: int | None, pointer: str
) -> str | None:
    """Regex for the JSON string bodies matching ``regex`` with ``lo..hi`` characters.

    Args:
        conv: the converter (its ``sharing`` stores the product states as definitions,
            marked reusable: ``regex.reused`` lowers them once per process).
        regex: the ``pattern`` (search semantics, ``^``/``$`` at branch ends) or a
            ``format`` regex (``anchored=True``: fullmatch), over decoded characters.
        anchored: True for a ``format`` regex (fullmatch), False for a ``pattern``.
        lo: ``minLength``.
        hi: ``maxLength`` (None: no upper bound).
        pointer: JSON pointer of the string schema (for errors).

    The body does not depend on the schema around it: it is built once per process into a
    sharing of its own and kept (``MAX_BODIES``, least recently used dropped first); each
    call replays the kept definitions into ``conv.sharing`` in the order the build stored
    them, skipping keys ``conv.sharing`` holds already and renumbering placeholders, which
    gives exactly the definitions a build into ``conv.sharing`` would append.

    Returns:
        The body regex (between the quotes), or None when no string qualifies.

    Raises:
        Unrepresentable: no exact finite form within the limits (caller reports it).
        UnsupportedSchemaError: the pattern does not parse.
    """
    key = (regex, anchored, lo, hi)
    hit = _BODIES.get(key)
    if hit is None:
        local = SimpleNamespace(sharing=_RecordingSharing())
        body = _build_body(local, regex, anchored, lo, hi, pointer)
        hit = (body, tuple(local.sharing.stored))
        _BODIES.put(key, hit)
    replayed = _replay(conv, *hit)
    if replayed is _NOT_REPLAYED:  # a key held inline by conv.sharing: build in place
        return _build_body(conv, regex, anchored, lo, hi, pointer)
    return replayed


# locked: conversions run on several threads (server, grammar pool)
_BODIES: LRUCache[tuple, tuple[str | None, tuple]] = LRUCache(MAX_BODIES)
_NOT_REPLAYED = object()


def clear_bodies() -> None:
    """Drop every kept bounded body (tests; a cold start). Raises: never."""
    _BODIES.clear()


class _RecordingSharing(RefSharing):
    """A ``RefSharing`` of its own for one bounded body, recording every ``store`` in order
    as ``(key, text, head_alias)`` (text as given: a placeholder or inline text comes back).
    """

    def __init__(self) -> None:
        super().__init__(None)
        self.stored: list[tuple[tuple, str, tuple | None]] = []

    def store(
        self,
        key: tuple,
        text: str | None,
        reusable: bool = False,
        head_alias: tuple[bytes, int] | None = None,
    ) -> str | None:
        self.stored.append((key, text, head_alias))
        return super().store(key, text, reusable, head_alias)


def _is_definition(text: str, head_alias: tuple | None) -> bool:
    """Whether ``RefSharing.store`` makes ``text`` a definition (else it is inlined)."""
    return len(text) > INLINE_MAX or head_alias is not None


def _replay(conv: ConvertContext, body: str | None, stored: tuple) -> object:
    """The kept ``(body, stored)`` written into ``conv.sharing`` (see
    ``bounded_string_body``); ``_NOT_REPLAYED`` when ``conv.sharing`` holds a key with
    another form than the build gave it (inline vs definition), where a build in place
    would write other texts.
    """
    if body is None:
        return None
    sharing = conv.sharing
    for key, text, alias in stored:  # checked before anything is stored
        found, shared = sharing.lookup(key)
        is_placeholder = len(shared or "") == 1 and ord(shared) >= PLACEHOLDER_BASE
        if found and (not is_placeholder if _is_definition(text, alias) else shared != text):
            return _NOT_REPLAYED
    table: dict[int, int] = {}  # the build's placeholder -> conv's (predicted, checked)
    targets: list[str | None] = []  # per stored entry: conv's placeholder, None: inline
    local = PLACEHOLDER_BASE
    num_new = 0
    for key, text, alias in stored:
        found, shared = sharing.lookup(key)
        if not _is_definition(text, alias):
            targets.append(None)
            continue
        if not found:
            shared = chr(PLACEHOLDER_BASE + len(sharing.definitions) + num_new)
            num_new += 1
        table[local] = ord(shared)
        targets.append(None if found else shared)
        local += 1
    texts = renumber_many([text for _, text, _ in stored], table)
    for (key, _, alias), text, target in zip(stored, texts, targets):
        if not sharing.lookup(key)[0]:
            placed = sharing.store(key, text, reusable=True, head_alias=alias)
            assert target is None or placed == target, "replayed placeholder mismatch"
    return renumber_placeholders(body, table)


def _build_body(
    conv, regex: str, anchored: bool, lo: int, hi: int | None, pointer: str
) -> str | None:
    """``bounded_string_body`` built into ``conv.sharing`` (no cache)."""
    nfa, start, final, whole = _build_nfa(regex, anchored, pointer, hi is None)
    shortest = _shortest(nfa, start, final)
    if shortest is None:
        return None
    if shortest >= lo and hi is None:
        return whole  # the pattern implies minLength
    top = lo if hi is None else hi  # without maxLength the counter saturates at minLength
    closures = [nfa.closure(s) for s in range(len(nfa.eps))]
    moves = [[e for u in cl for e in nfa.edges[u]] for cl in closures]
    accepting = [final in cl for cl in closures]
    states = [start] + sorted(nfa.rest)
    if len(states) * (top + 1) > MAX_PRODUCT_STATES:
        raise Unrepresentable(
            f"{len(states)} pattern states x {top + 1} lengths is over {MAX_PRODUCT_STATES}"
        )
    live: dict[tuple[int, int], bool] = {}
    if hi is None:  # saturated: live when the pattern can still end from there
        reach = _coreach(states, moves, accepting)
        live.update({(q, top): q in reach for q in states})
    for c in range(top - (hi is None), -1, -1):
        for q in states:
            live[(q, c)] = (accepting[q] and c >= lo) or (
                c < top and any(live[(t, c + 1)] for _, t in moves[q])
            )
    if not live[(start, 0)]:
        return None
    rest = {**nfa.rest, start: whole}
    aliases = (
        {} if hi is None else _head_aliases(regex, anchored, lo, hi, states, moves, accepting, live)
    )
    key = (regex, anchored, lo, hi)
    return _emit(conv, key, top, states, moves, accepting, live, rest, aliases, pointer)


def _coreach(states, moves, accepting) -> set[int]:
    """The NFA states of ``states`` from which the pattern alone can still end (an accepting
    state reachable by ``moves``, the counter ignored).
    """
    reach = {q for q in states if accepting[q]}
    grew = True
    while grew:
        grew = False
        for q in states:
            if q not in reach and any(t in reach for _, t in moves[q]):
                reach.add(q)
                grew = True
    return reach


MIN_ALIAS_SLACK = 16  # product states with a shorter slack get no head alias


def _head_aliases(
    regex: str, anchored: bool, lo: int, hi: int, states, moves, accepting, live
) -> dict[tuple[int, int], tuple[bytes, int]]:
    """``(q, c) -> (alias, slack)`` for the live product states whose first ``slack >=
    MIN_ALIAS_SLACK`` characters the counter does not restrict.

    ``slack(q, c)`` is the largest ``k`` such that every path of at most ``k`` characters
    from ``q`` (the NFA's moves) ends, at count ``c + j``, in a state that is live there
    when the pattern alone can still end from it (``coreach``), and accepting only where
    ``lo <= c + j <= hi``. Then the strings of ``D(q, c)`` of at most ``k`` characters, and
    its prefixes of at most ``k`` characters, are those of the pattern's own continuation
    from ``q`` (each a property of ``q`` alone), so every ``D(q, c')`` of the same pattern
    with a slack of ``k`` or more has the same ones, and, the encoding of each character
    being fixed (``_char``), the same words and prefixes of at most ``k`` bytes (a
    character is one byte or more): the alias, a digest of ``(regex, anchored, q)``, says
    so (``regex.terms.TermArena.head_aliases``, read by ``fsm.index.lexical_masks``).
    """
    coreach = _coreach(states, moves, accepting)
    cap = hi + 1  # no path is longer than the counter allows
    slack: dict[tuple[int, int], int] = {}
    out: dict[tuple[int, int], tuple[bytes, int]] = {}
    digests: dict[int, bytes] = {}
    for c in range(hi, -1, -1):
        for q in states:
            ok = (q not in coreach or live[(q, c)]) and (not accepting[q] or lo <= c <= hi)
            if not ok:
                slack[(q, c)] = -1
                continue
            k = cap
            for _, t in moves[q]:
                if t in coreach:
                    k = min(k, 1 + (slack[(t, c + 1)] if c < hi else -1))
            slack[(q, c)] = k
            if k >= MIN_ALIAS_SLACK and live[(q, c)]:
                digest = digests.get(q)
                if digest is None:
                    data = repr(("strlen", regex, anchored, q)).encode()
                    digest = digests[q] = hashlib.blake2b(data, digest_size=16).digest()
                out[(q, c)] = (digest, k)
    return out


def _emit(
    conv: ConvertContext, key, top, states, moves, accepting, live, rest, aliases, pointer
) -> str:
    """Write the live product states as shared definitions, highest count first; with no
    ``maxLength`` (``key[3]`` None) a state at count ``top`` is the pattern's rest. A state
    with a head alias (``aliases``) is a definition of its own, whatever its length.
    """
    lo, hi = key[2], key[3]
    texts: dict[tuple[int, int], str] = {}
    for c in range(top, -1, -1):
        for q in (q for q in states if live[(q, c)]):
            if hi is None and c == top:
                text = "(?:" + rest[q] + ")"
            else:
                by_target: dict[int, list] = {}
                for ranges, t in moves[q]:
                    if c < top and live[(t, c + 1)]:
                        by_target.setdefault(t, []).extend(ranges)
                parts = [
                    _char(conv, tuple(_merge(r)), pointer) + texts[(t, c + 1)]
                    for t, r in sorted(by_target.items())
                ]
                if accepting[q] and c >= lo:
                    parts.append("")
                text = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
            skey = ("strlen",) + key + (q, c)
            found, shared = conv.sharing.lookup(skey)
            if not found:
                shared = conv.sharing.store(skey, text, head_alias=aliases.get((q, c)))
            texts[(q, c)] = shared
    return texts[(states[0], 0)]


def _merge(ranges) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _char(conv: ConvertContext, ranges: tuple, pointer: str) -> str:
    """One JSON-encoded character in ``ranges`` (a shared definition when long)."""
    key = ("strchar", ranges)
    found, text = conv.sharing.lookup(key)
    if found:
        return text
    special = [(0, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]  # written as JSON escapes
    small = [
        (max(a, c), min(b, d)) for a, b in ranges for c, d in special if max(a, c) <= min(b, d)
    ]
    big = [(a, b) for a, b in _complement(special + _complement(list(ranges)))]
    parts = (["[" + _class_text(big) + "]"] if big else []) + (
        [_encoded_alternatives(small, pointer)] if small else []
    )
    return conv.sharing.store(key, "(?:" + "|".join(parts) + ")", reusable=True)


MAX_PAIR_STATES = 100_000


def patterns_disjoint(patterns: list[str], pointer: str) -> bool:
    """True only if no string matches two of ``patterns`` (search semantics): for each pair,
    the product of their NFAs never reaches both final states. False when unsure (a
    pattern has no NFA here, or a product passes ``MAX_PAIR_STATES``).
    """
    try:
        nfas = [_build_nfa(p, False, pointer, False)[:3] for p in patterns]
    except (Unrepresentable, UnsupportedSchemaError):
        return False
    return all(
        _empty_product(nfas[i], nfas[j]) for i in range(len(nfas)) for j in range(i + 1, len(nfas))
    )


def _empty_product(a: tuple, b: tuple) -> bool:
    (na, sa, fa), (nb, sb, fb) = a, b
    seen = {(sa, sb)}
    todo = [(sa, sb)]
    while todo:
        p, q = todo.pop()
        cp, cq = na.closure(p), nb.closure(q)
        if fa in cp and fb in cq:
            return False
        for u in cp:
            for ra, t in na.edges[u]:
                for v in cq:
                    for rb, w in nb.edges[v]:
                        if (t, w) not in seen and _overlap(ra, rb):
                            if len(seen) >= MAX_PAIR_STATES:
                                return False
                            seen.add((t, w))
                            todo.append((t, w))
    return True


def _overlap(ra, rb) -> bool:
    return any(a <= d and c <= b for a, b in ra for c, d in rb)
