r"""Adapter over CPython's regex parser (``re._parser``; ``sre_parse`` before 3.11).

The only module that touches the private parser. It parses Python ``re`` syntax,
rejects what no finite automaton can do (lookaround, backreferences, anchors other than
at the ends, atomic groups, possessive repeats), and lowers the parse tree to byte-level terms
of a ``TermArena`` (character classes become UTF-8 byte-sequence alternatives).
``\d``, ``\w``, ``\s`` and their negations are ASCII (as with ``re.ASCII``); ``.``
is any code point but ``\n`` (any at all under ``(?s)``). ``(?i)`` follows Python's
Unicode case-insensitive matching (``_case_fold``), for classes within the BMP.
"""

from __future__ import annotations

import re

try:  # Python >= 3.11
    import re._compiler as sre_compile
    import re._constants as sre_constants
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_compile  # type: ignore[no-redef]
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from ...errors import GrammarTooComplexError, RegexError, UnsupportedRegexError
from ..deadline import NEVER, Deadline
from . import reused
from .anchors import strip_end_anchors
from .definitions import (
    INTERSECT,
    PLACEHOLDER_BASE,
    boolean_operands,
    placeholder_indices,
    raw_bytes,
)
from .lower import fast_lower
from .terms import EPS, INF, TermArena, byte_range_mask
from .utf8 import MAX_CODE_POINT, utf8_sequences, valid_ranges

__all__ = [
    "parse",
    "lower",
    "SharedDefinitions",
    "sre_constants",
    "MAXREPEAT",
    "MAX_NESTING",
    "RE_MAX_NESTING",
    "regex_group",
]

MAXREPEAT = sre_constants.MAXREPEAT
MAX_NESTING = 5_000  # parenthesis depth of any pattern (the one-pass lowering is iterative)
RE_MAX_NESTING = 200  # parenthesis depth of a pattern CPython's parser reads (it recurses)
_C = sre_constants
_SPACE = [(9, 13), (32, 32)]
_DIGIT = [(48, 57)]
_WORD = [(48, 57), (65, 90), (95, 95), (97, 122)]
_CATEGORIES = {
    _C.CATEGORY_DIGIT: (_DIGIT, False),
    _C.CATEGORY_NOT_DIGIT: (_DIGIT, True),
    _C.CATEGORY_SPACE: (_SPACE, False),
    _C.CATEGORY_NOT_SPACE: (_SPACE, True),
    _C.CATEGORY_WORD: (_WORD, False),
    _C.CATEGORY_NOT_WORD: (_WORD, True),
}
_REJECT = {
    _C.ASSERT: "lookaround is not regular",
    _C.ASSERT_NOT: "lookaround is not regular",
    _C.GROUPREF: "backreferences are not regular",
    _C.GROUPREF_EXISTS: "backreferences are not regular",
}
for _name, _why in (
    ("ATOMIC_GROUP", "atomic groups are not supported"),
    ("POSSESSIVE_REPEAT", "possessive repeats are not supported"),
):
    if hasattr(_C, _name):
        _REJECT[getattr(_C, _name)] = _why


def _nesting(pattern: str) -> int:
    """Deepest parenthesis nesting of ``pattern`` (escapes and classes skipped)."""
    depth = best = 0
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                i += 1 + (pattern[i + 1] == "^")
        elif c == "(":
            depth += 1
            best = max(best, depth)
        elif c == ")":
            depth -= 1
        i += 1
    return best


def parse(pattern: str):
    """Parse with Python ``re`` syntax.

    Raises:
        RegexError: the pattern is not a valid Python regular expression.
        GrammarTooComplexError: parentheses nested deeper than ``MAX_NESTING``, or deeper
            than ``RE_MAX_NESTING`` (CPython's parser recurses once per level).
    """
    check_nesting(pattern, RE_MAX_NESTING)
    try:  # the parser reports every syntax error; re.compile would only cost time
        return sre_parse.parse(pattern)
    except re.error as exc:
        raise RegexError(f"cannot parse regex {pattern!r}: {exc}") from exc
    except OverflowError as exc:
        raise RegexError(f"cannot parse regex {pattern!r}: {exc}") from exc


def check_nesting(pattern: str, limit: int = MAX_NESTING, depth: int | None = None) -> None:
    """Raise unless ``pattern``'s parentheses nest at most ``limit`` deep (and at most
    ``MAX_NESTING``); ``depth``: its nesting where the caller has counted it already.

    Raises:
        GrammarTooComplexError: naming the depth and the limit that applies.
    """
    if depth is None:
        depth = _nesting(pattern)
    if depth > MAX_NESTING:
        raise GrammarTooComplexError(
            f"regex nests parentheses {depth} levels deep (the limit is MAX_NESTING="
            f"{MAX_NESTING}); flatten the pattern"
        )
    if depth > limit:
        raise GrammarTooComplexError(
            f"regex nests parentheses {depth} levels deep and uses syntax that only CPython's "
            f"parser reads (flags, anchors, lookaround, ...), which takes at most {limit} "
            "levels (RE_MAX_NESTING); flatten the pattern"
        )


_FOLD_MAX = 0xFFFF  # class members case-folded one by one (the BMP, as CPython does)
CASED_MAX = 0x1FFFF  # no code point above this has an ``_sre`` lowercase other than itself
_folded: dict[int, list[int]] | None = None


def _fold_table() -> dict[int, list[int]]:
    """Lowercase code point -> the code points up to ``CASED_MAX`` whose ``_sre`` lowercase
    it is, for the lowercases some other code point maps to (built once). A code point
    absent from the table is only its own case variant (``_case_variants``).
    """
    global _folded
    if _folded is None:
        import _sre

        lower = _sre.unicode_tolower
        table: dict[int, list[int]] = {}
        for cp, low in zip(range(CASED_MAX + 1), map(lower, range(CASED_MAX + 1))):
            if low != cp:
                table.setdefault(low, []).append(cp)
        for low, cps in table.items():
            if lower(low) == low:
                cps.append(low)
        _folded = table
    return _folded


def _case_variants(low: int) -> list[int]:
    """Every code point whose ``_sre`` lowercase is ``low``."""
    import _sre

    hit = _fold_table().get(low)
    if hit is not None:
        return hit
    return [low] if _sre.unicode_tolower(low) == low else []


def _case_fold(ranges: list[tuple[int, int]], pattern: str) -> list[tuple[int, int]]:
    """Code points that Python's ``re`` (Unicode, ``IGNORECASE``) matches for a class or
    literal of ``ranges``: every ``x`` whose lowercase is the lowercase of a member or one
    of its extra case variants (``re._compiler._EXTRA_CASES``, e.g. ``s``/``ſ``).
    """
    import _sre

    extra = getattr(sre_compile, "_EXTRA_CASES", {})
    if any(hi > _FOLD_MAX for _, hi in ranges):
        raise UnsupportedRegexError(
            f"case-insensitive classes beyond the BMP are not supported, in {pattern!r}"
        )
    lowered: set[int] = set()
    for lo, hi in ranges:
        for cp in range(lo, hi + 1):
            low = _sre.unicode_tolower(cp)
            lowered.add(low)
            lowered.update(extra.get(low, ()))
    members = sorted(
        {x for low in lowered for x in _case_variants(low)}
        | {cp for lo, hi in ranges for cp in range(lo, hi + 1)}
    )
    out: list[tuple[int, int]] = []
    for cp in members:
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


class _Lowering:
    """sre parse tree -> arena term; one instance per pattern."""

    def __init__(
        self, arena: TermArena, pattern: str, deadline: Deadline, shared: list[int] | None = None
    ) -> None:
        self.arena = arena
        self.pattern = pattern
        self.deadline = deadline
        self.shared = shared or []
        self._classes: dict[tuple, int] = {}
        self._steps = 0

    def _tick(self) -> None:
        self._steps += 1
        if self._steps & 1023 == 0:
            self.check_deadline()

    def check_deadline(self) -> None:
        """Raises GrammarTooComplexError once the (CPU-time) budget is spent."""
        if self.deadline.expired():
            raise self.deadline.error(f"compiling the regex {self.pattern[:80]!r}")

    def chars(self, ranges: list[tuple[int, int]], negate: bool = False) -> int:
        """Term for one code point out of ``ranges`` (or outside them)."""
        ranges = valid_ranges(ranges)
        if negate:
            comp, prev = [], 0
            for lo, hi in ranges:
                if lo > prev:
                    comp.append((prev, lo - 1))
                prev = hi + 1
            if prev <= MAX_CODE_POINT:
                comp.append((prev, MAX_CODE_POINT))
            ranges = valid_ranges(comp)
        key = tuple(ranges)
        hit = self._classes.get(key)
        if hit is not None:
            return hit
        a = self.arena
        alts = []
        for lo, hi in ranges:
            self._tick()
            for seq in utf8_sequences(lo, hi):
                alts.append(a.seq([a.byteset(byte_range_mask(x, y)) for x, y in seq]))
        term = a.alt(alts)
        self._classes[key] = term
        return term

    def _shared_term(self, cp: int) -> int | None:
        i = cp - PLACEHOLDER_BASE
        return self.shared[i] if 0 <= i < len(self.shared) else None

    def literal(self, cp: int) -> int:
        term = self._shared_term(cp)
        if term is not None:
            return term
        if 0xD800 <= cp <= 0xDFFF:
            return self.chars([])  # a lone surrogate has no UTF-8 encoding
        return self.arena.seq([self.arena.byteset(1 << b) for b in chr(cp).encode("utf-8")])

    def charset(self, items, ignore_case: bool = False) -> int:
        ranges, negate, shared = [], False, []
        for op, av in items:
            if op == _C.NEGATE:
                negate = True
            elif op == _C.LITERAL and self._shared_term(av) is not None:
                shared.append(self._shared_term(av))  # the parser made (?:A|B) a class
            elif op == _C.LITERAL:
                ranges.append((av, av))
            elif op == _C.RANGE:
                ranges.append(av)
            elif op == _C.CATEGORY and av in _CATEGORIES:
                cat, neg = _CATEGORIES[av]
                if neg:
                    prev = 0
                    for lo, hi in cat:
                        ranges.append((prev, lo - 1))
                        prev = hi + 1
                    ranges.append((prev, MAX_CODE_POINT))
                else:
                    ranges.extend(cat)
            else:
                raise UnsupportedRegexError(f"unsupported class item {op} in {self.pattern!r}")
        if ignore_case and any(op in (_C.LITERAL, _C.RANGE) for op, _ in items):
            ranges = _case_fold(ranges, self.pattern)  # (re folds no class of categories only)
        if shared:
            if negate:
                raise UnsupportedRegexError(f"negated shared subpattern in {self.pattern[:80]!r}")
            return self.arena.alt(shared + ([self.chars(ranges)] if ranges else []))
        return self.chars(ranges, negate)

    def seq(self, items, flags: int) -> int:
        return self.arena.seq([self.node(op, av, flags) for op, av in items])

    def node(self, op, av, flags: int) -> int:
        self._tick()
        a = self.arena
        if op in _REJECT:
            raise UnsupportedRegexError(f"{_REJECT[op]}, in {self.pattern!r}")
        if op == _C.AT:
            raise UnsupportedRegexError(  # (a verbose pattern's: ``anchors`` names the rest)
                f"anchors (^, $, \\b, \\A, \\Z) are not supported here, in {self.pattern!r}: "
                "the whole output must match (fullmatch semantics), so only ^ and \\A at the "
                "start and $ and \\Z at the end of a non-verbose pattern are taken"
            )
        if op == _C.LITERAL:
            if flags & re.IGNORECASE and self._shared_term(av) is None:
                return self.chars(_case_fold([(av, av)], self.pattern))
            return self.literal(av)
        if op == _C.NOT_LITERAL:
            ranges = [(av, av)]
            if flags & re.IGNORECASE:
                ranges = _case_fold(ranges, self.pattern)
            return self.chars(ranges, negate=True)
        if op == _C.ANY:
            return self.chars([] if flags & re.DOTALL else [(10, 10)], negate=True)
        if op == _C.IN:
            return self.charset(av, bool(flags & re.IGNORECASE))
        if op == _C.BRANCH:
            return a.alt([self.seq(branch, flags) for branch in av[1]])
        if op == _C.SUBPATTERN:
            _group, add, remove, sub = av
            return self.seq(sub, (flags | add) & ~remove)
        if op in (_C.MAX_REPEAT, _C.MIN_REPEAT):
            lo, hi, sub = av
            return a.repeat(self.seq(sub, flags), lo, INF if hi == MAXREPEAT else hi)
        raise UnsupportedRegexError(f"unsupported regex construct {op} in {self.pattern!r}")


def _without_end_anchors(pattern: str) -> str:
    """``pattern`` without its end anchors (``anchors.strip_end_anchors``).

    Raises:
        UnsupportedRegexError: an anchor or word boundary elsewhere, with its position.
    """
    text, stray = strip_end_anchors(pattern)
    if stray is not None:
        what = pattern[stray : stray + 2 if pattern[stray] == "\\" else stray + 1]
        raise UnsupportedRegexError(
            f"{what!r} at position {stray} of {pattern!r}: the whole output must match, so "
            "anchors are taken only at the start (^, \\A) and the end ($, \\Z) of the pattern "
            "or of a top-level alternative, and word boundaries (\\b, \\B) not at all"
        )
    return text


_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
"""A global-flags group, ``(?i)``: Python allows one only at the start of a whole pattern."""


def regex_group(pattern: str) -> str:
    """``pattern`` as a group that matches the same texts (under fullmatch) inside a longer
    regex: its end anchors removed (no-ops under fullmatch, refused anywhere else) and its
    leading global flags scoped to it (``(?i)^ok$`` -> ``(?i:ok)``; Python allows global
    flags only at the start of a whole pattern).

    Raises:
        UnsupportedRegexError: an anchor or word boundary that is not at an end.
    """
    body = _without_end_anchors(pattern)
    flags, pos = "", 0
    while (m := _GLOBAL_FLAGS.match(body, pos)) is not None:
        flags, pos = flags + m.group(1), m.end()
    return f"(?{flags}:{body[pos:]})" if flags else f"(?:{body})"


def lower(
    pattern: str,
    arena: TermArena,
    deadline: Deadline = NEVER,
    definitions: list[str] | None = None,
    reusable: frozenset[int] | set[int] = frozenset(),
    head_aliases: tuple[tuple[int, bytes, int], ...] = (),
) -> int:
    """Parse ``pattern`` and lower it to a term of ``arena`` (fullmatch semantics).

    Plain texts (the converter's) are lowered in one pass by ``lower.fast_lower``, each
    distinct group once; the rest go through ``re``'s parser (same language either way).
    ``pattern``'s anchors at its ends and at those of its top-level alternatives are
    removed first (``anchors``: no-ops under fullmatch); a definition keeps its anchors.

    Args:
        pattern: the regex (Python ``re`` syntax).
        arena: the arena the terms are interned in (mutated).
        deadline: the compile's CPU-time ``deadline.Deadline``, past which lowering raises.
        definitions: shared subpatterns (``definitions``): in ``pattern`` and in later
            definitions, the raw code point ``PLACEHOLDER_BASE + i`` stands for
            ``definitions[i]``; a boolean definition is the intersection or complement
            of earlier ones. Without it every code point is itself.
        reusable: indices of ``definitions`` whose language is the same in every spec that
            writes their texts (the JSON Schema converter's "any JSON value" chain). When
            ``arena`` is empty they are lowered first, as a run kept per process
            (``reused``): a later spec with the same run restores its terms instead.
        head_aliases: ``(index, alias, slack)``: the term of ``definitions[index]`` gets
            the head alias ``(alias, slack)`` in ``arena.head_aliases`` (a term two
            definitions share keeps the first's: each claim holds for it).

    Returns:
        The root term id of ``pattern`` in ``arena``.

    Raises:
        RegexError: unparsable.
        UnsupportedRegexError: lookaround, backreferences, anchors other than at the ends
            (the message names the position), word boundaries, atomic groups, possessive
            repeats, case-insensitive classes past the BMP.
        GrammarTooComplexError: nesting or time budget exceeded.
    """
    shared: list[int] = []
    memo: dict[str, int] = {}  # group text -> term (``lower.fast_lower``), same placeholders
    texts = list(definitions or ())
    ready = _reused_terms(texts, reusable, arena, deadline, memo) if reusable else {}
    for i, text in enumerate(texts):
        term = ready.get(i)
        shared.append(
            _lower_definition(text, i, arena, deadline, shared, memo) if term is None else term
        )
    for i, alias, slack in head_aliases:
        if 0 <= i < len(shared):
            arena.head_aliases.setdefault(shared[i], (alias, slack))
    return _lower_text(pattern, arena, deadline, shared, memo, True)


def _reused_terms(
    texts: list[str],
    reusable: frozenset[int] | set[int],
    arena: TermArena,
    deadline: Deadline,
    memo: dict[str, int],
) -> dict[int, int]:
    """Definition index -> term of the ``reusable`` definitions, restored from the process's
    run (``reused``) or lowered first into the empty ``arena`` and kept; empty when the
    arena holds terms already or the run refers outside itself (lowered as usual then).
    ``memo`` (the spec's group memo) receives the run's groups without a placeholder either
    way (``reused.restore``).
    """
    order = sorted(i for i in reusable if 0 <= i < len(texts))
    key = reused.run_key(texts, order) if order and arena.is_fresh else None
    if key is None:
        return {}
    terms = reused.restore(key, arena, memo)
    if terms is None:
        run = reused.lowering_texts(key)
        if run is None:
            return {}
        terms, own = [], {}  # a memo of the run's own: lowering it depends on its texts only
        for k, text in enumerate(run):
            terms.append(_lower_definition(text, k, arena, deadline, terms, own))
        reused.keep(key, arena, terms, own)
        reused.restore_groups(key, memo)
    return dict(zip(order, terms))


def _lower_definition(
    text: str, i: int, arena: TermArena, deadline: Deadline, shared: list, memo: dict
) -> int:
    """The term of definition ``i`` (``shared`` holds the earlier ones it refers to)."""
    boolean = boolean_operands(text, i)
    if boolean is not None:
        marker, ops = boolean
        operands = [shared[j] for j in ops]
        if marker == INTERSECT:
            return arena.intersect(operands)
        return arena.complement(operands[0])
    data = raw_bytes(text)
    if data is not None:  # bytes a regex cannot write (a special token's marker)
        return arena.bytes_then(data, EPS)
    return _lower_text(text, arena, deadline, shared, memo, False)


def _lower_text(
    text: str, arena: TermArena, deadline: Deadline, shared: list, memo: dict, is_pattern: bool
) -> int:
    """The term of one regex text over the placeholders bound in ``shared``; the pattern
    (``is_pattern``, a whole-output match) may carry end anchors, a definition keeps its.
    """
    lowering = _Lowering(arena, text, deadline, shared)
    term = fast_lower(text, lowering, memo, MAX_NESTING)
    if term is None:  # syntax the fast path leaves to re (or an error re reports)
        tree = parse(text)  # at most RE_MAX_NESTING deep: the tree walk's recursion
        if is_pattern:
            stripped = _without_end_anchors(text)
            if stripped != text:
                term = fast_lower(stripped, lowering, memo, MAX_NESTING)
                tree = parse(stripped) if term is None else tree
    if term is None:
        term = lowering.seq(list(tree), tree.state.flags)
    return term


# any raw code point a definition reference or marker uses (a seed must have none)
_PLACEHOLDER_OR_MARKER = re.compile(f"[{chr(PLACEHOLDER_BASE)}-\U0010ffff]")


class SharedDefinitions:
    """Definitions lowered at most once into one arena for many patterns that use them.

    The patterns of a grammar's terminals refer to one numbering of definitions (the raw
    code point ``PLACEHOLDER_BASE + i`` stands for ``texts[i]``, as in ``lower``); each
    definition a pattern needs is lowered on first need, and the group memo is shared, so
    a definition used by many terminals costs one lowering instead of one per terminal.
    Every term lives in ``arena``: the automata built on them share it (and so must be
    used under one lock).

    With ``reusable`` and ``seeds`` and ``arena`` empty, the reusable definitions (as
    ``lower``'s) and the seed patterns (texts without placeholders, the same in every
    grammar that has them: a closed rule's terminals, ``lower.CfgGrammar.seeds``) are
    lowered first, as one run kept per process (``reused``, keyed by their texts), so a
    later grammar with the same run restores their terms instead of lowering them; a
    definition whose text, grouped, is a seed (a recursive schema's string values and the
    closed rule's string terminal) takes the seed's term instead of being lowered again.

    Args:
        arena: the arena every term is interned in (mutated).
        texts: the definitions; each refers to earlier ones only.
        deadline: the compile's CPU-time ``deadline.Deadline``, past which lowering raises.
        reusable: indices of ``texts`` whose language is the same in every spec that writes
            their texts (``lower``'s ``reusable``).
        seeds: patterns without placeholders to lower with them.
    """

    def __init__(
        self,
        arena: TermArena,
        texts: tuple[str, ...] | list[str],
        deadline: Deadline,
        reusable: frozenset[int] | set[int] = frozenset(),
        seeds: tuple[str, ...] = (),
    ):
        self.arena = arena
        self.texts = list(texts)
        self.deadline = deadline
        self._terms: list[int | None] = [None] * len(self.texts)
        self._memo: dict[str, int] = {}
        self._seeded: dict[str, int] = {}  # seed pattern -> its term
        if (reusable or seeds) and arena.is_fresh:
            self._seed(reusable, seeds)

    def _seed(self, reusable: frozenset[int] | set[int], seeds: tuple[str, ...]) -> None:
        """Restore (or lower first and keep) the run of ``reusable`` and ``seeds``."""
        order = sorted(i for i in reusable if 0 <= i < len(self.texts))
        run = reused.run_key(self.texts, order) if order else ()
        if run is None:
            order, run = [], ()  # too long: lowered as usual, on need
        seeds = tuple(  # (an ASCII text holds neither: no scan)
            dict.fromkeys(p for p in seeds if p.isascii() or not _PLACEHOLDER_OR_MARKER.search(p))
        )
        if not order and not seeds:
            return
        # a run kept under its key refers to nothing outside itself (below: one that does
        # is never kept with its run), so a restored one needs no ``lowering_texts`` check
        key = reused.lexer_key(run, seeds)
        terms = reused.restore(key, self.arena, self._memo)
        if terms is None and run and reused.lowering_texts(run) is None:
            order, run = [], ()  # refers outside itself: lowered as usual, on need
            if not seeds:
                return
            key = reused.lexer_key(run, seeds)
            terms = reused.restore(key, self.arena, self._memo)
        if terms is None:
            terms, memo = [], {}  # a memo of the run's own: lowering it depends on its texts
            for k, text in enumerate(reused.lowering_texts(run) or ()):
                terms.append(_lower_definition(text, k, self.arena, self.deadline, terms, memo))
            for text in seeds:
                terms.append(_lower_text(text, self.arena, self.deadline, [], memo, True))
            reused.keep(key, self.arena, terms, memo)
            reused.restore_groups(key, self._memo)
        for i, term in zip(order, terms):
            self._terms[i] = term
        self._seeded = dict(zip(seeds, terms[len(order) :]))
        # a definition whose grouped text is a seed is that seed's term (a recursive
        # schema's string values: the closed rule's string terminal), not lowered again;
        # a seed has no placeholder or marker, so neither has such a text, and one with an
        # end anchor is left to its own lowering (a pattern's anchors are read differently)
        for i, text in enumerate(self.texts):
            if self._terms[i] is None and "$" not in text and "\\Z" not in text:
                self._terms[i] = self._seeded.get("(?:" + text + ")")

    def _refs(self, text: str) -> set[int]:
        boolean = boolean_operands(text, len(self.texts))
        if boolean is not None:
            return set(boolean[1])
        if raw_bytes(text) is not None:
            return set()
        return placeholder_indices(text, len(self.texts))

    def lower(self, pattern: str, needs: frozenset[int] | set[int]) -> int | None:
        """The term of ``pattern`` (fullmatch), lowering the definitions ``needs`` first.

        Args:
            pattern: the regex text (placeholders of this numbering).
            needs: every definition ``pattern`` refers to, directly or through others.

        Returns:
            The term, or None when ``needs`` misses a definition the texts refer to or a
            definition refers to a later one (the caller lowers the pattern on its own).

        Raises:
            RegexError, UnsupportedRegexError, GrammarTooComplexError: as ``lower``.
        """
        if not needs:
            seeded = self._seeded.get(pattern)
            if seeded is not None:
                return seeded
        terms = self._terms
        for i in sorted(needs):
            if terms[i] is None:
                if not all(j < i and j in needs for j in self._refs(self.texts[i])):
                    return None
                terms[i] = _lower_definition(
                    self.texts[i], i, self.arena, self.deadline, terms, self._memo
                )
        if not self._refs(pattern) <= set(needs):
            return None
        return _lower_text(pattern, self.arena, self.deadline, terms, self._memo, True)
