"""Copy constraints in a JSON Schema: which values must come from the source text.

``CopyJsonSchema`` is ``JsonSchema`` with source texts: while converting it, the
converter (``convert.JsonSchemaConverter``) hands every subschema to ``CopyPlan.lower``
first, which decides per value:

* a ``string`` value becomes a span of a source (``structgen.fsm.copy``), intersected
  with the field's own grammar (``pattern``, ``format``, ``minLength``/``maxLength``) when
  it has one: by enumeration where the grammar accepts at most ``ENUMERATE_MAX_SPANS``
  of the sources' spans (read forward from each start until the grammar is dead; the
  accepted spans as a trie-shaped alternation, no ``AND`` term), else by an
  ``INTERSECT`` definition (``terms`` ``AND``); a field with a
  ``format`` or ``pattern`` may also be one of the dates and times the sources write,
  normalised to ISO 8601 (``structgen.fsm.dates``: ``7 March 2026`` as ``2026-03-07``,
  ``2:15 pm`` as ``14:15`` and ``14:15:00``), so that a date field copies the text's date
  in the notation its format demands;
* a ``number`` / ``integer`` value becomes one of the numerals the sources write
  (``structgen.fsm.numerals``) that the field's keywords (type, bounds, ``multipleOf``)
  accept, written as the grammar writes numbers: never more digits than the text's
  longest numeral;
* an ``array`` whose items are copied values gets at most as many items as there are
  candidates (numerals for numbers, non-space units of the text for strings);
* an ``array`` of flat objects led by a copied string gets its items in text order
  (``copy_items``: each item's first field starts after the previous item's ends), so
  that no mention is written twice and the items are at most the text's mentions;
* ``enum``, ``const``, ``boolean``, ``null``, objects and combinators are never
  copy-constrained (a span must not force ``"low"`` out of ``"below"``); their subschemas
  are decided on their own.

A value is copy-constrained only when that language is not empty for these sources;
otherwise it keeps its own grammar. Which values were constrained is the plan's
``copied`` (schema JSON pointers), reported by ``CopyJsonSchema.copied_fields``.

The keyword ``x-structgen-copy`` (a boolean) on a subschema sets the choice for it and
everything below it; ``CopyJsonSchema.copy_default`` is the choice where no keyword says.
Without sources (plain ``JsonSchema``) the keyword is accepted and has no effect.
"""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass
from decimal import Decimal
from operator import itemgetter
from typing import Any

from ...errors import InvalidSchemaError
from ...lru import LRUCache
from ..copy import SubstringAutomaton, intersect, json_string_content, matches_nothing, text_units
from ..dates import dates, times
from ..numerals import json_numeral, numerals
from ..regex.definitions import placeholder_indices
from ..regex.escape import escape_literal
from ..regex.parse import lower
from ..regex.terms import EMPTY, TermArena
from ..spec import JsonSchema, LoweredRegex, schema_for
from .copy_items import ordered_items
from .ids import check_schema_depth

__all__ = ["COPY_KEYWORD", "CopyJsonSchema", "CopyPlan", "DECLINED", "pop_copy_flag"]

COPY_KEYWORD = "x-structgen-copy"
DECLINED = object()  # CopyPlan.lower: convert the subschema as usual
_STRUCTURAL = frozenset({"enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "if"})
_COPY_TYPES = frozenset({"string", "number", "integer"})
# Per-process caches, each safe alone (its own lock): an entry never depends on another
# cache holding its key (``copied_fields`` converts on a miss of its own).
_PLANS_SIZE = 256
_PLANS: LRUCache[tuple, tuple[str, ...]] = LRUCache(_PLANS_SIZE)  # cache key -> copied pointers
_LOWERED_SIZE = 8  # copy_constraint's copied_fields, then compile: one document's two asks
_LOWERED: LRUCache[tuple, LoweredRegex] = LRUCache(_LOWERED_SIZE)  # cache key -> lowering


def pop_copy_flag(schema: dict, pointer: str) -> bool | None:
    """Remove ``x-structgen-copy`` from ``schema`` (a keyword dict the converter owns).

    Returns:
        Its value, or None when absent.

    Raises:
        InvalidSchemaError: the value is not a boolean (names the keyword and pointer).
    """
    if COPY_KEYWORD not in schema:
        return None
    flag = schema.pop(COPY_KEYWORD)
    if not isinstance(flag, bool):
        raise InvalidSchemaError(
            f"{COPY_KEYWORD} must be true or false, got {flag!r}", f"{pointer}/{COPY_KEYWORD}"
        )
    return flag


class CopyPlan:
    """The copy decisions of one conversion (see the module docstring).

    Args:
        sources: the source texts.
        default: copy-constrain eligible values where no ``x-structgen-copy`` says.

    Attributes:
        copied: JSON pointers (in the schema) of the values constrained, in order.
    """

    def __init__(self, sources: tuple[str, ...], default: bool) -> None:
        self.default = default
        self.sources = sources
        self.automata = [SubstringAutomaton(t) for t in sources]
        self.automata = [a for a in self.automata if not a.is_empty()]
        self.numbers: list[Decimal] = list(dict.fromkeys(v for t in sources for v in numerals(t)))
        self.num_units = sum(1 for t in sources for u in text_units(t) if not u.isspace())
        self.dates_and_times = list(dict.fromkeys(v for t in sources for v in dates(t) + times(t)))
        self.copied: list[str] = []
        self._scope: list[bool] = []
        self._spans: str | None = None
        self._ordering: set[str] = set()  # arrays being converted without the order
        self.ordered: list[str] = []  # arrays whose items follow the text's order
        self._decided: dict[tuple, Any] = {}  # _enumerated's languages by (acceptor, hi, dates)

    def lower(self, conv, rest: dict, pointer: str, refs: tuple[str, ...]) -> Any:
        """The regex of ``rest`` under the copy constraint, or ``DECLINED``.

        Args:
            conv: the running ``JsonSchemaConverter``.
            rest: the subschema's keywords (``keywords_of``; ``x-structgen-copy`` is
                removed from it here).
            pointer: its JSON pointer.
            refs: the ``$ref`` expansions on the path.

        Raises:
            InvalidSchemaError: ``x-structgen-copy`` is not a boolean.
        """
        flag = pop_copy_flag(rest, pointer)
        if flag is not None:
            self._scope.append(flag)
            try:
                return conv.convert(rest or True, pointer, refs)
            finally:
                self._scope.pop()
        if not (self._scope[-1] if self._scope else self.default) or _STRUCTURAL & set(rest):
            return DECLINED
        types = rest.get("type")
        types = [types] if isinstance(types, str) else list(types or ())
        if types == ["array"]:
            return self._array(conv, rest, pointer, refs)
        kinds = [t for t in types if t != "null"]
        if len(kinds) != 1 or kinds[0] not in _COPY_TYPES:
            return DECLINED
        value = {**rest, "type": kinds[0]}
        text = self._string(conv, value, pointer) if kinds[0] == "string" else None
        if kinds[0] != "string":
            text = self._number(conv, value)
        if text is None:
            return DECLINED
        self.copied.append(pointer)
        return text if len(types) == 1 else "(?:" + text + "|null)"

    def _spans_text(self, conv) -> str:
        """The placeholder of the sources' spans, their definitions appended once."""
        if self._spans is None:
            defs = conv.sharing.definitions
            roots = []
            for automaton in self.automata:
                texts, root = automaton.definitions(len(defs))
                defs.extend(texts)
                roots.append(root)
            self._spans = roots[0] if len(roots) == 1 else "(?:" + "|".join(roots) + ")"
        return self._spans

    def _string(self, conv, schema: dict, pointer: str) -> str | None:
        from .scalars import string_regex

        if not self.automata:
            return None
        if set(schema) <= {"type"}:  # every span is a JSON string: nothing to intersect
            return '"' + self._spans_text(conv) + '"'
        if set(schema) <= {"type", "minLength", "maxLength"} and self._every_span_fits(schema):
            return '"' + self._spans_text(conv) + '"'  # the length keywords hold for every span
        hi = None if schema.get("maxLength") is None else int(schema["maxLength"])
        if getattr(conv, "canon", None) is None and ENUMERATE_MAX_SPANS > 0:
            enumerated = self._enumerated(conv, schema, pointer, hi)
            if enumerated is not _TOO_MANY:
                return enumerated
        content = self._spans_text(conv)
        if "format" in schema or "pattern" in schema:  # also the dates and times, normalised
            written = [json_string_content(v) for v in self.dates_and_times]
            if written:
                content = "(?:" + content + "|" + "|".join(map(escape_literal, written)) + ")"
        spans = '"' + content + '"'
        base = string_regex(conv, schema, pointer)
        if base is None:
            return None
        both = intersect(conv.sharing.definitions, [base, spans])
        if set(schema) <= {"type", "minLength", "maxLength"}:  # decided without a search
            lo = int(schema.get("minLength", 0))
            return both if self._has_span_length(lo, hi) else None
        # undecided within budget counts as empty: keep the field's own grammar
        defs = conv.sharing.definitions
        return None if matches_nothing(both, defs, conv.sharing.reusable) else both

    def _enumerated(self, conv, schema: dict, pointer: str, hi: int | None) -> Any:
        """The field's copied language decided by enumeration: the spans of the sources (and,
        with a ``format``/``pattern``, the normalised dates and times) that the field's own
        grammar accepts, as a trie-shaped alternation of their JSON string contents; None
        when none is (the field keeps its own grammar); ``_TOO_MANY`` when more than
        ``ENUMERATE_MAX_SPANS`` distinct spans are accepted or finding them reads more than
        ``ENUMERATE_MAX_STEPS`` units (the caller takes the ``INTERSECT`` path).

        The same language as ``INTERSECT(own grammar, spans)``: a candidate is a span
        (``copy.SubstringAutomaton``: it starts and ends at a non-space unit; at most
        ``maxLength`` code points when bounded, longer ones the grammar rejects anyway),
        written as the span automaton writes it. The grammar is ``_Acceptor``'s, built once
        per process for the field's keywords, with the warnings its conversion records;
        it reads the text forward from each start until it is dead, so the work is the
        text's units times the longest live run, not the number of candidate spans.
        """
        acceptor, warnings = _base_acceptor(conv, schema, pointer)
        for note in warnings:
            if note not in conv.warnings:
                conv.warnings.append(note)
        if acceptor is None:
            return None
        with_dates = "format" in schema or "pattern" in schema
        key = (acceptor, hi, with_dates)  # fields of one grammar share the acceptor
        if key not in self._decided:
            self._decided[key] = self._enumerate(acceptor, hi, with_dates)
        return self._decided[key]

    def _enumerate(self, acceptor: _Acceptor, hi: int | None, with_dates: bool) -> Any:
        """``_enumerated``'s language for one acceptor (no memo)."""
        accepted = acceptor.spans(self.sources, hi, ENUMERATE_MAX_SPANS, ENUMERATE_MAX_STEPS)
        if accepted is None:
            return _TOO_MANY
        if with_dates:
            for value in self.dates_and_times:
                written = json_string_content(value)
                if acceptor.accepts(written):
                    accepted.append((written,))
        if not accepted:
            return None
        return '"' + _trie_regex(accepted) + '"'

    def _every_span_fits(self, schema: dict) -> bool:
        """True when every span of every source has ``minLength..maxLength`` code points:
        spans are not empty, and none is longer than its source.
        """
        hi = schema.get("maxLength")
        return int(schema.get("minLength", 0)) <= 1 and (
            hi is None or all(len(text) <= int(hi) for text in self.sources)
        )

    def _has_span_length(self, lo: int, hi: int | None) -> bool:
        """True when some span of a source has ``lo`` to ``hi`` code points (None: no bound)."""
        for text in self.sources:
            units = text_units(text)
            for i, first in enumerate(units):
                if first.isspace():
                    continue
                size = 0
                for u in units[i:]:
                    size += len(u)
                    if hi is not None and size > hi:
                        break
                    if size >= lo and not u.isspace():
                        return True
        return False

    def _number(self, conv, schema: dict) -> str | None:
        values = []
        for v in self.numbers:
            value: Any = int(v) if v == v.to_integral_value() else float(v)
            if conv.is_valid(value, schema):
                values.append(json_numeral(v))
        values = list(dict.fromkeys(values))
        if not values:
            return None
        return "(?:" + "|".join(escape_literal(v) for v in values) + ")"

    def _array(self, conv, rest: dict, pointer: str, refs: tuple[str, ...]) -> Any:
        items = rest.get("items")
        if not isinstance(items, dict) or _STRUCTURAL & set(items):
            return DECLINED
        item_types = items.get("type")
        item_types = [item_types] if isinstance(item_types, str) else list(item_types or ())
        if item_types == ["object"]:
            return self._object_items(conv, rest, pointer, refs)
        if not item_types or not set(item_types) <= _COPY_TYPES:
            return DECLINED
        bound = self.num_units if item_types == ["string"] else len(self.numbers)
        if "string" in item_types and len(item_types) > 1:
            bound += len(self.numbers)
        hi = rest.get("maxItems")
        if hi is not None and hi <= bound or int(rest.get("minItems", 0)) > bound:
            return DECLINED
        return conv.convert({**rest, "maxItems": bound}, pointer, refs)

    def _object_items(self, conv, rest: dict, pointer: str, refs: tuple[str, ...]) -> Any:
        """An array of objects with its items in text order (``copy_items``), or
        ``DECLINED`` where that does not apply.
        """
        if len(self.sources) != 1 or pointer in self._ordering:
            return DECLINED
        self._ordering.add(pointer)
        try:
            array_text = conv.convert(dict(rest), pointer, refs)
        finally:
            self._ordering.discard(pointer)
        if array_text is None:
            return None
        ordered = ordered_items(
            conv, array_text, self.sources[0], rest["items"], rest.get("minItems", 0)
        )
        if ordered is None:
            return array_text
        self.ordered.append(pointer)
        return ordered


# A copied field with its own grammar is decided by enumerating the spans it accepts unless
# more than ENUMERATE_MAX_SPANS distinct spans are accepted or more than ENUMERATE_MAX_STEPS
# units are read finding them; then by INTERSECT. 0: never enumerate.
ENUMERATE_MAX_SPANS = 20_000
ENUMERATE_MAX_STEPS = 400_000
_TOO_MANY = object()  # CopyPlan._enumerated: past a limit, take the INTERSECT path
_ACCEPTORS_SIZE = 256
_ACCEPTORS: LRUCache[tuple, tuple[Any, tuple[str, ...]]] = LRUCache(_ACCEPTORS_SIZE)
_ACCEPTORS_BY_GRAMMAR: LRUCache[tuple, Any] = LRUCache(_ACCEPTORS_SIZE)  # _grammar_key
_QUOTE = 0x22
_NO_LIMIT = 1 << 62  # _Acceptor.spans: a limit that is None
_UNIT_STEPS_SIZE = 4096  # an acceptor's kept unit steps (_Acceptor.spans; ~300 B each)


class _Acceptor:
    """Membership in one string field's own grammar (``base``, quotes included): its terms
    lowered once into a private ``TermArena``, whose memoised derivatives are the DFA.
    Text-independent: kept per process (``_ACCEPTORS``) by the field's keywords.
    """

    def __init__(self, base: str, definitions: list[str]) -> None:
        self.arena = TermArena()
        self.start = self.arena.derivative(lower(base, self.arena, definitions=definitions), _QUOTE)
        self.lock = threading.Lock()  # the arena grows as derivatives are taken
        # (term, unit's bytes) -> (term after the unit, a span may end there): the words
        # of documents recur, and the spans from different starts meet the same terms
        self.unit_steps: dict[tuple[int, bytes], tuple[int, bool]] = {}

    def accepts(self, content: str) -> bool:
        """True when ``"content"`` (JSON string content, unquoted) is in the language."""
        with self.lock:
            t = self._read(self.start, content.encode("utf-8", "surrogatepass"))
            return t != EMPTY and self.arena.nullable[self.arena.derivative(t, _QUOTE)]

    def _read(self, t: int, data: bytes) -> int:
        """The term after ``data`` from ``t`` (``EMPTY``: dead): ``TermArena.derivative``
        per byte, its cached derivatives read directly (the same terms).
        """
        arena = self.arena
        first, cached = arena.first, arena._deriv
        for b in data:
            if not (first[t] >> b) & 1:
                return EMPTY
            hit = cached.get((t << 8) | b)
            t = arena.derivative(t, b) if hit is None else hit
            if t == EMPTY:
                break
        return t

    def _unit_step(self, t: int, unit: bytes) -> tuple[int, bool]:
        """``(term after unit, a span may end there)`` from ``t`` (no memo)."""
        after = self._read(t, unit)
        if after == EMPTY:
            return after, False
        arena = self.arena
        return after, bool(arena.nullable[arena.derivative(after, _QUOTE)])

    def spans(
        self,
        sources: tuple[str, ...],
        max_chars: int | None,
        max_spans: int | None = None,
        max_steps: int | None = None,
    ) -> list[tuple[str, ...]] | None:
        """The distinct spans of ``sources`` (at most ``max_chars`` code points; None: any)
        whose JSON string content the grammar accepts, each as its units' contents (in the
        order first met); read from each first unit onwards, one unit at a time, until the
        grammar is dead or ``max_chars`` is passed.

        Returns:
            The spans; None when more than ``max_spans`` distinct spans are accepted or
            more than ``max_steps`` units are read (None: no limit).
        """
        seen: set[str] = set()
        out: list[tuple[str, ...]] = []
        steps_memo = self.unit_steps
        memo_get = steps_memo.get
        start = self.start
        limit = _NO_LIMIT if max_chars is None else max_chars
        budget = _NO_LIMIT if max_steps is None else max_steps  # units left to read
        most = _NO_LIMIT if max_spans is None else max_spans
        with self.lock:
            for text in sources:
                _, written, data, lengths, spaces, offsets = _unit_contents(text)
                n = len(data)
                for i in range(n):
                    if spaces[i]:
                        continue
                    t, size = start, 0
                    for j in range(i, n):
                        size += lengths[j]
                        if size > limit:
                            break
                        budget -= 1
                        if budget < 0:
                            return None
                        unit = data[j]
                        step = memo_get((t, unit))
                        if step is None:
                            step = self._unit_step(t, unit)
                            if len(steps_memo) >= _UNIT_STEPS_SIZE:
                                steps_memo.clear()
                            steps_memo[t, unit] = step
                        t, ends = step
                        if t == EMPTY:
                            break
                        if not ends or spaces[j]:
                            continue
                        key = text[offsets[i] : offsets[j + 1]]
                        if key not in seen:
                            if len(out) >= most:
                                return None
                            seen.add(key)
                            out.append(written[i : j + 1])
        return out


@functools.lru_cache(maxsize=8)
def _unit_contents(text: str) -> tuple[tuple, tuple, tuple, tuple, tuple, tuple]:
    """``text``'s units (``text_units``), each as JSON string content, that content's UTF-8
    bytes, each unit's length in code points, whether it is space, and the units' offsets
    in ``text`` (``len(units) + 1`` of them: unit ``i`` is ``text[offsets[i]:offsets[i +
    1]]``): read once per document, not once per enumerated field grammar (the last few
    texts kept). Raises: never.
    """
    units = tuple(text_units(text))
    written = tuple(json_string_content(u) for u in units)
    data = tuple(w.encode("utf-8", "surrogatepass") for w in written)
    lengths = tuple(map(len, units))
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    return units, written, data, lengths, tuple(u.isspace() for u in units), tuple(offsets)


def _base_acceptor(conv, schema: dict, pointer: str) -> tuple[_Acceptor | None, tuple[str, ...]]:
    """``(acceptor, warnings)`` of the grammar ``string_regex`` writes for the string
    keywords ``schema`` at ``pointer`` (None: it accepts nothing), and the warnings that
    conversion records; cached per process by what they depend on (keywords, pointer,
    ``strict``). Raises what ``string_regex`` raises (strict: unsupported keywords).
    """
    from .scalars import string_regex

    key = (pointer, json.dumps(schema, sort_keys=True, default=str), bool(conv.strict))
    hit = _ACCEPTORS.get(key)
    if hit is not None:
        return hit
    recorded, conv.warnings = conv.warnings, []
    try:
        base = string_regex(conv, schema, pointer)
        warnings = tuple(conv.warnings)
    finally:
        conv.warnings = recorded
    acceptor = None
    if base is not None:  # fields whose keywords write the same grammar share one acceptor
        definitions = conv.sharing.definitions
        grammar = _grammar_key(base, definitions)
        acceptor = _ACCEPTORS_BY_GRAMMAR.get(grammar)
        if acceptor is None:
            acceptor = _Acceptor(base, list(definitions))
            _ACCEPTORS_BY_GRAMMAR.put(grammar, acceptor)
    _ACCEPTORS.put(key, (acceptor, warnings))
    return acceptor, warnings


def _grammar_key(base: str, definitions: list[str]) -> tuple:
    """``(base, ((i, definitions[i]), ...))`` over every definition ``base`` refers to,
    directly or through other definitions, by index: what the language of ``base`` read
    with ``definitions`` depends on, so equal keys are one language (a nullable field
    converted after others have appended definitions shares the acceptor, and the
    document's enumeration, of its non-nullable sibling with the same keywords).
    Raises: never.
    """
    n = len(definitions)
    todo = list(placeholder_indices(base, n))
    seen = set(todo)
    while todo:
        for j in placeholder_indices(definitions[todo.pop()], n):
            if j not in seen:
                seen.add(j)
                todo.append(j)
    return base, tuple((i, definitions[i]) for i in sorted(seen))


class _Escaped(dict):
    """piece -> ``escape_literal(piece)``, computed on first use."""

    def __missing__(self, piece: str) -> str:
        text = self[piece] = escape_literal(piece)
        return text


def _trie_regex(words: list) -> str:
    """An alternation of ``words`` (each a non-empty sequence of literal pieces) shaped as
    their trie: one branch per distinct piece after a shared prefix, written once.

    A node with pieces after it writes ``(?:a|b)`` (sorted by piece; one branch bare), and
    ``(?:...)?`` where a word also ends there. Words that each extend the one before (the
    spans from one start, shortest first) are one chain: its longest word and where its
    words end. The chains are walked in sorted order (a node's branches by piece), each
    node written when the walk leaves it, without building the trie; the nodes past
    what the next chain shares have one branch each and are written at once.
    """
    chains: list[list] = []  # [longest word, lengths of its words]
    last: tuple = ()
    for word in map(tuple, words):
        if chains and len(word) > len(last) and word[: len(last)] == last:
            chain = chains[-1]
            chain[0] = last = word
            chain[1].append(len(word))
            continue
        last = word
        chains.append([word, [len(word)]])
    chains.sort(key=itemgetter(0))
    # shared[k]: pieces chain k shares with chain k - 1 (0 for the first, and past the end)
    shared = [0] * (len(chains) + 1)
    for k in range(1, len(chains)):
        prev, word = chains[k - 1][0], chains[k][0]
        if word[: len(prev)] == prev:
            shared[k] = len(prev)
        else:
            common = 0
            while prev[common] == word[common]:  # neither is a prefix of the other
                common += 1
            shared[k] = common
    esc = _Escaped().__getitem__
    # the open path from the root, per node: the escaped piece into it, whether a word
    # ends there, and its branches written so far (None: none yet; a str: one; a list)
    pieces: list[str] = [""]
    ends: list[bool] = [False]
    alts: list = [None]
    for k, (word, lengths) in enumerate(chains):
        common = shared[k]
        depth = len(pieces) - 1
        if depth > common:  # leave the nodes past the shared prefix
            _add(alts, _close(pieces, ends, alts, depth - common))
        keep = max(common, shared[k + 1])  # nodes the next chain shares stay open
        for piece in word[common:keep]:
            pieces.append(esc(piece))
            ends.append(False)
            alts.append(None)
        size = len(word)
        if size == keep:
            for n in lengths:
                ends[n] = True
            continue
        # the nodes past ``keep`` have one branch each: this word's rest, written now
        parts: list[str] = []
        at, opened = keep, 0
        for n in lengths:
            if n <= keep:
                ends[n] = True
            elif n < size:
                parts.extend(map(esc, word[at:n]))
                parts.append("(?:")
                at = n
                opened += 1
        parts.extend(map(esc, word[at:]))
        _add(alts, "".join(parts) + ")?" * opened)
    if len(pieces) > 1:
        _add(alts, _close(pieces, ends, alts, len(pieces) - 1))
    return _node(ends[0], alts[0])


def _add(alts: list, text: str) -> None:
    """Add ``text`` to the branches of the last node of the open path."""
    a = alts[-1]
    if a is None:
        alts[-1] = text
    elif type(a) is str:
        alts[-1] = [a, text]
    else:
        a.append(text)


def _close(pieces: list, ends: list, alts: list, n: int) -> str:
    """Pop the last ``n`` nodes of the open path; the text of the one nearest the root."""
    text = None
    for _ in range(n):
        piece, end, a = pieces.pop(), ends.pop(), alts.pop()
        if text is not None:  # the node below, closed: its last branch
            if a is None:
                a = text
            elif type(a) is str:
                a = [a, text]
            else:
                a.append(text)
        text = piece + _node(end, a)
    return text


def _node(end: bool, a) -> str:
    """A trie node's regex after its piece: its branches (None, one str or a list)."""
    if a is None:
        return ""  # a leaf: a word ends there
    if type(a) is str:
        return "(?:" + a + ")?" if end else a
    return "(?:" + "|".join(a) + (")?" if end else ")")


@dataclass(frozen=True)
class CopyJsonSchema(JsonSchema):
    """``JsonSchema`` whose eligible values are copied from ``copy_from`` (module docstring).

    Args:
        copy_from: the source texts (spans and numerals of any of them are allowed).
        copy_default: constrain eligible values where no ``x-structgen-copy`` says.
        (the others as ``JsonSchema``)

    Raises (at compile): as ``JsonSchema``; ``InvalidSchemaError`` for an
    ``x-structgen-copy`` that is not a boolean.
    """

    copy_from: tuple[str, ...] = ()
    copy_default: bool = True

    def lower(self, *, max_convert_seconds: float | None = None) -> LoweredRegex:
        """The schema converted with a ``CopyPlan`` over ``copy_from``; the last
        ``_LOWERED_SIZE`` lowerings are kept (``copied_fields`` then ``compile`` lower one
        document's spec once).
        """
        key = self.cache_key()
        hit = _LOWERED.get(key)
        if hit is not None:
            return hit
        return self._convert_and_keep(key, max_convert_seconds)[0]

    def _convert_and_keep(
        self, key: tuple, max_convert_seconds: float | None
    ) -> tuple[LoweredRegex, tuple[str, ...]]:
        """``_convert``, its lowering and copied pointers kept under ``key``."""
        lowered, copied = self._convert(max_convert_seconds)
        _PLANS.put(key, copied)
        _LOWERED.put(key, lowered)
        return lowered, copied

    def _convert(self, max_convert_seconds: float | None) -> tuple[LoweredRegex, tuple[str, ...]]:
        """``(lowering, copied pointers)`` of one conversion (no cache)."""
        from . import CONVERT_MAX_SECONDS
        from .check import check_schema
        from .convert import JsonSchemaConverter

        schema = schema_for(self.schema)
        check_schema_depth(schema)
        if isinstance(schema, dict):
            check_schema(schema)
        conv = JsonSchemaConverter(
            schema,
            whitespace=self.whitespace,
            strict=self.strict,
            allow_extra_properties=self.allow_extra_properties,
            max_recursion_depth=self._depth(),
            max_seconds=CONVERT_MAX_SECONDS if max_convert_seconds is None else max_convert_seconds,
        )
        conv.copy = CopyPlan(tuple(self.copy_from), self.copy_default)
        pattern = conv.convert_root()
        sharing = conv.sharing
        lowered = LoweredRegex(
            pattern,
            tuple(sharing.definitions),
            tuple(conv.warnings),
            frozenset(sharing.reusable),
        )
        return lowered, tuple(conv.copy.copied)

    def copied_fields(self) -> tuple[str, ...]:
        """JSON pointers (in the schema) of the values this spec copy-constrains, e.g.
        ``("/properties/name", "/properties/age")`` (lowers the spec when not known yet).
        """
        key = self.cache_key()
        hit = _PLANS.get(key)
        if hit is None:  # converted here: the lowering may be kept while the plan is not
            hit = self._convert_and_keep(key, None)[1]
        return hit

    def cache_key(self) -> tuple:
        """``JsonSchema``'s key with the sources and the default."""
        return ("copy", super().cache_key(), tuple(self.copy_from), self.copy_default)
