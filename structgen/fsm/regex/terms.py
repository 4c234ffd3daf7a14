r"""Immutable, hash-consed byte-level regex terms and their Brzozowski derivatives.

A ``TermArena`` owns every term of one automaton. A term is an ``int`` id; equal
structures get equal ids (hash-consing), so shared subtrees (the JSON string
character class used by every property, say) exist once and comparing or hashing a
term is an integer operation. Node kinds:

* ``EMPTY`` (matches nothing, id 0) and ``EPS`` (the empty string, id 1);
* ``BYTES``: one byte out of a set (a 256-bit ``int`` mask, never empty);
* ``CONCAT(head, tail)``: right-nested; ``head`` is itself a ``CONCAT`` only when its spine
  is longer than ``_SPINE_MAX`` (re-associating it would copy the whole spine for each
  tail: quadratic for a definition nested in itself, as 1,000 nested objects are);
* ``ALT(items)``: flattened, sorted, deduplicated, at most one ``BYTES`` item;
* ``REPEAT(x, lo, hi)``: counted repetition ``x{lo,hi}`` (``hi == INF`` for no bound),
  kept as a count and never unrolled;
* ``UNTIL(trigger, k, cont)``: free bytes up to and including the first occurrence of
  the byte string ``trigger``, then ``cont``; ``k`` is how many bytes of ``trigger`` the
  text read so far already ends with (a Knuth-Morris-Pratt state, ``0 <= k < len``).
  The language ``(?:(?!T)[\x00-\xff])*T cont`` needs lookaround in the regex dialect;
  as a term its derivative is one KMP step: ``UNTIL(T, k', cont)``, or ``cont`` once
  ``k'`` reaches ``len(T)``, so it costs ``len(T)`` states however long the free text;
* ``AND(items)``: intersection, flattened, sorted, deduplicated (at least two items);
* ``NOT(x)``: complement over all byte strings.

Intersection and complement (what the JSON Schema converter builds ``oneOf``, ``not`` and
``if``/``then``/``else`` from, ``json_schema.boolean_ops``) keep Brzozowski's rules:
``d(A & B) = dA & dB`` and ``d(!A) = !dA``; ``A & B`` is nullable when both are, ``!A``
when ``A`` is not. Their emptiness is no longer syntactic (``a & b`` is empty, ``!(a*)``
is not): a term holding an ``AND`` or ``NOT`` may be non-``EMPTY`` with an empty
language. ``is_empty`` decides it exactly by searching the derivatives for a nullable
one (llguidance's derivre does the same "relevance" check), memoised per term and
bounded by ``max_empty_checks`` states per search; ``ByteDFA`` treats a derivative as
dead when ``is_empty`` says so, so a mask never offers a byte after which nothing can
be accepted. A term without ``AND``/``NOT`` is empty exactly when it is ``EMPTY``, and
that check costs nothing while the arena holds no ``AND``/``NOT`` at all.

Smart constructors keep every term without ``AND``/``NOT`` other than ``EMPTY``
non-empty as a language (``EMPTY`` is absorbed by concatenation, dropped from
alternations), so such a derivative is a dead state exactly when it is ``EMPTY``.
``derivative(t, b)`` follows Brzozowski with the usual simplifications (llguidance's
derivre does the same over bytes); the derivative of ``x{lo,hi}`` is ``d(x) x{lo-1,hi-1}``, so a
bounded repetition costs one term per count actually reached, e.g.
``[^"]{0,100000}`` yields ``[^"]{0,k}`` states only as far as the input goes.

Per term, computed once at construction: ``nullable`` (accepts the empty string),
``first`` (mask of the bytes with a non-``EMPTY`` derivative: exactly the bytes with a
non-empty one for terms without ``AND``/``NOT``, a superset otherwise; every byte for
``NOT``) and ``depth`` (nesting of heads, alternations and repetitions; at most
``MAX_DEPTH``, a budget). ``derivative`` and ``front`` recurse into subterms; for a term
deeper than ``_SHALLOW`` the results of its subterms are first computed bottom-up from an
explicit stack, so no Python recursion grows with the depth; a deep concatenation,
alternation, intersection or complement is derived one level at a time instead (the
derivatives of what can start it first, then its own: a few subterms, not its whole
nesting), at most ``_SHALLOW`` such levels nested before the bottom-up pass takes over.
"""

from __future__ import annotations

import heapq

from ...errors import GrammarTooComplexError
from ..deadline import Deadline

try:  # optional C extension built by setup.py (csrc/regexlower.c, csrc/regex_derive.h)
    from . import _regexlower as _EXT
except ImportError:  # pragma: no cover - exercised when the extension is missing
    _EXT = None
if not hasattr(_EXT, "context"):  # pragma: no cover - a build older than the derivatives
    _EXT = None

__all__ = [
    "TermArena",
    "EMPTY",
    "EPS",
    "BYTES",
    "CONCAT",
    "ALT",
    "REPEAT",
    "UNTIL",
    "AND",
    "NOT",
    "INF",
    "MAX_DEPTH",
    "byte_range_mask",
    "refine_classes",
    "use_extension",
]

EMPTY, EPS = 0, 1
BYTES, CONCAT, ALT, REPEAT, UNTIL, AND, NOT = 2, 3, 4, 5, 6, 7, 8
_ALL_BYTES = (1 << 256) - 1
_EMPTY_KIND, _EPS_KIND = 0, 1
INF = -1
MAX_DEPTH = 100_000  # nesting of concatenation heads, alternations and repetitions
_SPINE_MAX = 256  # concat re-associates a head spine up to this long; longer: kept as head
_SHALLOW = 64  # a term this deep is derived (front, derivative) recursively; deeper first
# the kinds whose derivative recurses only into what can start it (a concatenation's heads
# up to the first not nullable, an alternation's members, an intersection's or complement's
# operands): a deep one (a document's rest after a key) is derived by its branch directly,
# at most _SHALLOW such levels nested, not bottom-up over its whole spine
_SPINE_KINDS = frozenset((CONCAT, ALT, AND, NOT))
# gets its subterms' results bottom-up from an explicit stack (_bottom_up)
_ALT_INDEX_MIN = 8  # alternations with more items group their members by first-byte mask
MAX_EMPTY_CHECKS = 200_000  # derivative states one emptiness search may visit
EMPTY_SEARCH_SECONDS = 10.0  # CPU seconds of one emptiness search outside a compile's budget


_c = _EXT  # the C derivatives and fronts in use, None: Python's (use_extension)


def use_extension(enabled: bool) -> None:
    """Take derivatives and fronts in C (the default, where built: ``csrc/regex_derive.h``,
    the same terms interned in the same order) or in Python, for the process; ``compile_*``
    applies ``structgen.env``'s ``regexlower`` setting. Raises: never.
    """
    global _c
    _c = _EXT if enabled else None


def refine_classes(start: int, masks) -> list[int]:
    """The coarsest partition of the byte set ``start`` (a 256-bit mask) that every mask of
    ``masks`` splits into whole classes: each mask splits every class it cuts in two.
    """
    classes = [start]
    for mask in masks:
        refined = []
        for c in classes:
            inside = c & mask
            if inside and inside != c:
                refined.append(inside)
                refined.append(c ^ inside)
            else:
                refined.append(c)
        classes = refined
    return classes


def byte_range_mask(lo: int, hi: int) -> int:
    """256-bit mask of the bytes ``lo..hi`` (inclusive)."""
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)


class TermArena:
    """Hash-consing store of terms, with cached derivatives and byte classes.

    Not thread-safe by itself; ``ByteDFA`` serialises access.

    Args:
        max_terms: bound on the number of distinct terms (memory budget).
        max_empty_checks: bound on the derivative states one ``is_empty`` search visits.

    Attributes:
        max_byte_count: the largest finite upper bound ``hi`` of a repetition
            ``X{lo,hi}`` of a byte class interned by :meth:`repeat` (0: none; the C
            lowering interns its own); what ``fsm.index.count_masks`` checks before looking
            into a state's term.
        deadline: the compile's ``deadline.Deadline`` (CPU time), past which an
            ``is_empty`` search raises ``GrammarTooComplexError`` (the automaton sets it
            while it builds under a budget); None: each search gets ``search_seconds`` CPU
            seconds of its own (matching, masks), so that no search runs unbounded.
        search_seconds: CPU-time bound of one ``is_empty`` search while ``deadline`` is None.
        shared_prefix: ``(n, memo)`` for a :meth:`snapshot` and every arena restored from
            it: terms ``0 .. n-1`` are the snapshot's, under the same ids, and ``memo``
            (term id < n -> 16-byte digest, ``lexical_masks.head_key``'s) is one dict they
            all share; None for any other arena.
        head_aliases: term -> ``(alias, slack)`` (16-byte digest, characters), set by the
            lowering (``parse.lower``'s ``head_aliases``, from ``json_schema.string_length``):
            every term with the same ``alias`` and a slack of ``k`` has the same words and
            the same prefixes of at most ``k`` bytes (``fsm.index.lexical_masks``
            keys their head parts by it). Never copied by :meth:`snapshot`.
    """

    def __init__(
        self, max_terms: int = 5_000_000, max_empty_checks: int = MAX_EMPTY_CHECKS
    ) -> None:
        self.max_terms = max_terms
        self.max_empty_checks = max_empty_checks
        self.kind: list[int] = [_EMPTY_KIND, _EPS_KIND]
        self.args: list[tuple] = [(), ()]
        self.nullable: list[bool] = [False, True]
        self.first: list[int] = [0, 0]
        self.depth: list[int] = [0, 0]
        self._ids: dict[tuple, int] = {}
        self._deriv: dict[int, int] = {}
        self._front: dict[int, frozenset[int]] = {}
        self._alt_index: dict[int, list[tuple[int, tuple[int, ...]]]] = {}  # (mask, members)
        self._kmp: dict[bytes, list[dict[int, int]]] = {}
        self._single: list[int | None] = [None] * 256  # byteset of each single byte
        self._num_boolean = 0  # AND / NOT terms interned: emptiness is syntactic while 0
        self._has_boolean: dict[int, bool] = {}
        self._empty: dict[int, bool] = {}
        self._universe: int | None = None
        self._subsumed: dict[tuple[int, int], bool] = {}
        self._min_len: dict[int, int] = {}
        self._bottom_up_active = False  # _bottom_up is filling a cache
        self._deep_levels = 0  # deep spine derivatives nested now (derivative)
        self.max_byte_count = 0  # the largest finite hi of a repetition of a byte class
        self.deadline: Deadline | None = None  # CPU-time bound on is_empty's searches
        self.search_seconds = EMPTY_SEARCH_SECONDS
        self._cctx = None  # the C derivatives' view of the lists and caches above (_context)
        # (n, memo): terms 0..n-1 are those of a snapshot, in every arena restored from it,
        # and memo (term -> digest, shared by those arenas) is lexical_masks.head_key's
        self.shared_prefix: tuple[int, dict[int, bytes]] | None = None
        # term -> (alias, slack): a head alias its lowering gave (``parse.lower``), see below
        self.head_aliases: dict[int, tuple[bytes, int]] = {}

    # the fields ``snapshot`` copies (values immutable: a shallow copy is a copy), those it
    # requires empty (filled by derivatives and fronts, never by lowering), and the settings
    # that belong to one arena (never copied); tests check that they name every field
    _TERM_FIELDS = ("kind", "args", "nullable", "first", "depth", "_single")
    _MEMO_FIELDS = ("_ids", "_has_boolean", "_empty", "_subsumed", "_min_len")
    _SCALAR_FIELDS = ("_num_boolean", "_universe", "max_byte_count")
    _DERIVED_FIELDS = ("_deriv", "_front", "_alt_index", "_kmp", "_cctx")
    _SHARED_FIELDS = ("shared_prefix",)  # one object for a snapshot and its restored arenas
    _LOWERING_FIELDS = ("head_aliases",)  # given by each lowering, never copied
    _SETTING_FIELDS = (
        "max_terms",
        "max_empty_checks",
        "deadline",
        "search_seconds",
        "_bottom_up_active",
        "_deep_levels",
    )

    @property
    def is_fresh(self) -> bool:
        """True while the arena holds only ``EMPTY`` and ``EPS`` and nothing derived (what
        :meth:`restore` needs).
        """
        return (
            len(self.kind) == 2
            and not self._ids
            and not any(getattr(self, name) for name in self._DERIVED_FIELDS)
        )

    def snapshot(self) -> TermArena:
        """A copy of this arena's terms, for :meth:`restore` into empty arenas (the
        per-process store of schema-independent definitions, ``regex.reused``).

        Copied: every term with its ``nullable``, ``first`` and ``depth``, the hash-consing
        table and the memos lowering may fill; the copy has the default budgets. Only an
        arena that has been lowered into, not derived, can be copied: derivatives, fronts,
        alternation indexes and trigger tables are not. The copy gets a new
        ``shared_prefix``: its terms, with a memo of their ``lexical_masks.head_key``
        digests that every arena restored from it shares (a pure function of terms that are
        the same in all of them).

        Raises:
            ValueError: a derivative, front, alternation index, trigger table or C context
                is held already.
        """
        copy = TermArena()
        copy.restore(self)
        copy.shared_prefix = (copy.num_terms, {})
        return copy

    def restore(self, source: TermArena) -> None:
        """Make this empty arena hold exactly ``source``'s terms, under the same ids (the
        state ``source`` reached, from empty, by the lowering that built it).

        Args:
            source: an arena with no derivative, front, alternation index, trigger table or
                C context (a :meth:`snapshot`, or an arena only lowered into).

        Raises:
            ValueError: this arena holds terms or cached derivatives already, or ``source``
                holds cached derivatives.
            GrammarTooComplexError: ``source`` holds more terms than ``max_terms``.
        """
        if not self.is_fresh:
            raise ValueError("the arena restored into holds terms or derivatives already")
        if any(getattr(source, name) for name in self._DERIVED_FIELDS):
            raise ValueError("the source arena holds derivatives, fronts or a C context")
        if source.num_terms > self.max_terms:
            raise GrammarTooComplexError(
                f"regex automaton needs more than {self.max_terms} terms; simplify the pattern"
            )
        for name in self._TERM_FIELDS:
            setattr(self, name, list(getattr(source, name)))
        for name in self._MEMO_FIELDS:
            setattr(self, name, dict(getattr(source, name)))
        for name in self._SCALAR_FIELDS:
            setattr(self, name, getattr(source, name))
        self.shared_prefix = source.shared_prefix  # the same terms 0..n-1: the same memo
        untrack = getattr(_EXT, "untrack_atoms", None)
        if untrack is not None:
            # the copies hold only ints, bools, None and tuples of those (terms are
            # immutable): no reference cycle can pass through them, so the cyclic collector
            # need not walk them (a restored arena's ~7 referents a term, kept by every
            # compiled grammar, were most of a young collection's work)
            for name in self._TERM_FIELDS + self._MEMO_FIELDS:
                untrack(getattr(self, name))

    def _context(self):
        """The C derivatives' context of this arena (made once: its lists are only appended
        to); what ``derivative`` and ``front`` pass to ``csrc/regex_derive.h``.
        """
        self._cctx = _EXT.context(self)
        return self._cctx

    @property
    def num_terms(self) -> int:
        """Terms interned so far (ids are ``0 .. num_terms - 1``)."""
        return len(self.kind)

    def _intern(
        self, key: tuple, kind: int, args: tuple, nullable: bool, first: int, depth: int
    ) -> int:
        tid = self._ids.get(key)
        if tid is not None:
            return tid
        return self._add(key, kind, args, nullable, first, depth)

    def _add(
        self, key: tuple, kind: int, args: tuple, nullable: bool, first: int, depth: int
    ) -> int:
        """A new term (``key`` not interned yet)."""
        if depth > MAX_DEPTH:
            raise GrammarTooComplexError(
                f"regex nesting is deeper than MAX_DEPTH={MAX_DEPTH} levels (groups, "
                "alternations, repetitions); flatten the pattern"
            )
        tid = len(self.kind)
        if tid >= self.max_terms:
            raise GrammarTooComplexError(
                f"regex automaton needs more than {self.max_terms} terms; simplify the pattern"
            )
        self._ids[key] = tid
        self.kind.append(kind)
        self.args.append(args)
        self.nullable.append(nullable)
        self.first.append(first)
        self.depth.append(depth)
        return tid

    # ---- smart constructors --------------------------------------------------

    def byteset(self, mask: int) -> int:
        """One byte out of ``mask`` (``EMPTY`` for an empty mask)."""
        if not mask:
            return EMPTY
        return self._intern((BYTES, mask), BYTES, (mask,), False, mask, 0)

    def concat(self, head: int, tail: int) -> int:
        """``head`` followed by ``tail``, re-associated to the right."""
        if head == EMPTY or tail == EMPTY:
            return EMPTY
        if head == EPS:
            return tail
        if tail == EPS:
            return head
        kind, args = self.kind, self.args
        heads = []
        first = head
        while kind[head] == CONCAT:
            if len(heads) == _SPINE_MAX:  # a long spine stays whole, as the head (see module)
                return self._concat2(first, tail)
            h, head = args[head]
            heads.append(h)
        heads.append(head)
        result = tail
        for h in reversed(heads):
            result = self._concat2(h, result)
        return result

    def _concat2(self, h: int, t: int) -> int:
        key = (CONCAT, h, t)
        tid = self._ids.get(key)  # the hit path first: about half the calls
        if tid is not None:
            return tid
        n, f, d = self.nullable, self.first, self.depth
        first = f[h] | f[t] if n[h] else f[h]
        dh, dt = d[h] + 1, d[t]
        return self._add(key, CONCAT, (h, t), n[h] and n[t], first, dh if dh > dt else dt)

    def bytes_then(self, data: bytes, tail: int) -> int:
        """The literal bytes ``data`` followed by ``tail``, built straight onto it (what
        ``concat(seq(bytesets of data), tail)`` gives, without the standalone chain).
        """
        if tail == EMPTY:
            return EMPTY
        single = self._single
        result = tail
        for b in reversed(data):
            h = single[b]
            if h is None:
                h = single[b] = self.byteset(1 << b)
            result = h if result == EPS else self._concat2(h, result)
        return result

    def seq(self, items: list[int]) -> int:
        """Concatenation of ``items`` in order (built from the right: linear time)."""
        result = EPS
        for item in reversed(items):
            result = self.concat(item, result)
        return result

    def alt(self, items) -> int:
        """Alternation: flattened, deduplicated, byte sets merged, sorted."""
        if isinstance(items, list) and len(items) == 1:  # a term is its own alternation
            return items[0]
        kind, args, nullable = self.kind, self.args, self.nullable
        flat: set[int] = set()
        mask = 0
        for t in items:
            k = kind[t]
            if k == ALT:
                for u in args[t]:
                    if kind[u] == BYTES:
                        mask |= args[u][0]
                    else:
                        flat.add(u)
            elif k == BYTES:
                mask |= args[t][0]
            elif t != EMPTY:
                flat.add(t)
        if mask:
            flat.add(self.byteset(mask))
        if EPS in flat and len(flat) > 1 and any(nullable[t] for t in flat if t != EPS):
            flat.discard(EPS)
        if not flat:
            return EMPTY
        if len(flat) == 1:
            return next(iter(flat))
        return self.alt_members(tuple(sorted(flat)))

    def alt_members(self, members: tuple[int, ...]) -> int:
        """The ``ALT`` term of ``members`` as they are: at least two, sorted, distinct, flat
        (no ``ALT``), at most one ``BYTES`` and no ``EPS`` beside a nullable member (what
        :meth:`alt` leaves; ``recipes`` rebuilds alternations through here).
        """
        first = 0
        for t in members:
            first |= self.first[t]
        nullable = self.nullable
        return self._intern(
            (ALT, members),
            ALT,
            members,
            any(nullable[t] for t in members),
            first,
            1 + max(self.depth[t] for t in members),
        )

    def repeat(self, x: int, lo: int, hi: int) -> int:
        """``x{lo,hi}`` (``hi == INF``: unbounded), kept as a count."""
        if hi != INF and hi < lo:
            return EMPTY
        if x == EMPTY:
            return EPS if lo == 0 else EMPTY
        if x == EPS or hi == 0:
            return EPS
        if self.nullable[x]:
            lo = 0
        if lo == 1 and hi == 1:
            return x
        if self.kind[x] == REPEAT and self.args[x][1:] == (0, INF):
            return x  # (y*){lo,hi} == y* for hi >= 1
        if hi != INF and hi > self.max_byte_count and self.kind[x] == BYTES:
            self.max_byte_count = hi
        return self._intern(
            (REPEAT, x, lo, hi), REPEAT, (x, lo, hi), lo == 0, self.first[x], 1 + self.depth[x]
        )

    def until(self, trigger: bytes, cont: int, k: int = 0) -> int:
        """Any bytes up to and including the first occurrence of ``trigger``, then ``cont``.

        Args:
            trigger: the non-empty byte string that ends the free text.
            cont: the term that must match everything after the trigger.
            k: bytes of ``trigger`` already matched (``0 <= k < len(trigger)``).

        Raises:
            ValueError: empty ``trigger`` or ``k`` out of range.
        """
        trigger = bytes(trigger)
        if not trigger or not 0 <= k < len(trigger):
            raise ValueError(f"until needs a non-empty trigger and 0 <= k < {len(trigger)}")
        if cont == EMPTY:
            return EMPTY
        return self._intern(
            (UNTIL, trigger, k, cont),
            UNTIL,
            (trigger, k, cont),
            False,
            _ALL_BYTES,
            1 + self.depth[cont],
        )

    def universe(self) -> int:
        r"""Every byte string: ``[\x00-\xff]*`` (what ``complement(EMPTY)`` gives)."""
        if self._universe is None:
            self._universe = self.repeat(self.byteset(_ALL_BYTES), 0, INF)
        return self._universe

    def intersect(self, items) -> int:
        """Intersection of ``items``: flattened, deduplicated, sorted; ``EMPTY`` when one
        item is ``EMPTY``, an item meets its complement, or no byte can start them all
        and not all are nullable; the universe is dropped (it is the result of none).
        """
        kind, args = self.kind, self.args
        flat: set[int] = set()
        for t in items:
            if t == EMPTY:
                return EMPTY
            if kind[t] == AND:
                flat.update(args[t])
            else:
                flat.add(t)
        flat.discard(self.universe())
        if not flat:
            return self.universe()
        nullable = all(self.nullable[t] for t in flat)
        if EPS in flat:
            return EPS if nullable else EMPTY
        nots = [t for t in flat if kind[t] == NOT]
        if any(self.subsumed(p, args[n][0]) for n in nots for p in flat if p != n):
            return EMPTY  # some item lies inside an excluded one (x & !x among them)
        if len(flat) == 1:
            return next(iter(flat))
        first = _ALL_BYTES
        for t in flat:
            first &= self.first[t]
        if not first:
            return EPS if nullable else EMPTY
        members = tuple(sorted(flat))
        key = (AND, members)
        if key not in self._ids:
            self._num_boolean += 1
        depth = 1 + max(self.depth[t] for t in members)
        return self._intern(key, AND, members, nullable, first, depth)

    def complement(self, x: int) -> int:
        """Every byte string that ``x`` does not match (``!!x`` is ``x``)."""
        if x == EMPTY:
            return self.universe()
        if x == self.universe():
            return EMPTY
        if self.kind[x] == NOT:
            return self.args[x][0]
        key = (NOT, x)
        if key not in self._ids:
            self._num_boolean += 1
        return self._intern(key, NOT, (x,), not self.nullable[x], _ALL_BYTES, 1 + self.depth[x])

    def subsumed(self, a: int, b: int) -> bool:
        """A syntactic proof that ``L(a)`` is a subset of ``L(b)``: True only when it is
        (False may still be a subset). By structure: equal terms, byte sets, alternations
        member-wise, concatenations part-wise, repetitions by their counts, complements
        reversed; memoised. ``intersect`` uses it to drop an item inside an excluded one
        without a search (the product of two deep JSON grammars has too many states).
        """
        if a == b or a == EMPTY or b == self.universe():
            return True
        if b == EMPTY:
            return False
        key = (a, b)
        hit = self._subsumed.get(key)
        if hit is not None:
            return hit
        try:
            result = self._subsumed_by(a, b)
        except RecursionError:
            result = False
        self._subsumed[key] = result
        return result

    def _subsumed_by(self, a: int, b: int) -> bool:
        kind, args = self.kind, self.args
        ka, kb = kind[a], kind[b]
        if a == EPS:
            return self.nullable[b]
        if self.first[a] & ~self.first[b] or self.nullable[a] and not self.nullable[b]:
            return False
        if ka == ALT:
            return all(self.subsumed(u, b) for u in args[a])
        if ka == AND and any(self.subsumed(u, b) for u in args[a]):
            return True
        if kb == AND:
            return all(self.subsumed(a, v) for v in args[b])
        if ka == BYTES and kb == BYTES:
            return not args[a][0] & ~args[b][0]
        if ka == CONCAT and kb == CONCAT:
            if self.subsumed(args[a][0], args[b][0]) and self.subsumed(args[a][1], args[b][1]):
                return True
        if ka == REPEAT and kb == REPEAT:
            (x, lo, hi), (y, lo2, hi2) = args[a], args[b]
            counts = lo >= lo2 and (hi2 == INF or (hi != INF and hi <= hi2))
            if counts and self.subsumed(x, y):
                return True
        if kb == REPEAT:
            y, lo2, hi2 = args[b]
            if lo2 <= 1 and (hi2 == INF or hi2 >= 1) and self.subsumed(a, y):
                return True
            if ka == CONCAT and hi2 == INF and lo2 == 0:  # y y*-prefix: a = h t, h <= y, t <= b
                h, t = args[a]
                if self.subsumed(h, y) and self.subsumed(t, b):
                    return True
        if ka == NOT and kb == NOT:
            return self.subsumed(args[b][0], args[a][0])
        if kb == ALT:
            return any(self.subsumed(a, v) for v in args[b])
        return False

    def has_boolean(self, t: int) -> bool:
        """True when ``t`` holds an ``AND`` or ``NOT`` (its emptiness is not syntactic)."""
        if not self._num_boolean:
            return False
        memo = self._has_boolean
        hit = memo.get(t)
        if hit is not None:
            return hit
        stack = [(t, False)]
        while stack:  # iterative post-order: terms nest as deep as MAX_DEPTH
            u, expanded = stack.pop()
            if u in memo:
                continue
            children = _children(self.kind[u], self.args[u])
            if not expanded:
                stack.append((u, True))
                stack.extend((c, False) for c in children if c not in memo)
                continue
            memo[u] = self.kind[u] in (AND, NOT) or any(memo[c] for c in children)
        return memo[t]

    def is_empty(self, t: int) -> bool:
        """True when ``t`` matches no string at all.

        Exact: for a term with ``AND``/``NOT``, a best-first search over its
        derivatives for a nullable one (nearest first by ``_min_length``, so a completion
        a few bytes away is found without exploring deep nestings first); memoised:
        every term on the way to a witness is non-empty; when none is found, every term
        visited is empty.

        An alternation is empty when every member is, a concatenation when its head or
        tail is, a repetition when its body is and at least one is required: such a term
        is decided from its parts (memoised on their own; at any depth, from an explicit
        stack, the parts taken in order and the first that decides ends it), so a search
        runs on an intersection or complement alone, never on the whole document around it.

        Raises:
            GrammarTooComplexError: the search visits more than ``max_empty_checks``
                states, or runs past ``deadline`` (``search_seconds`` when it is None).
        """
        if t == EMPTY:
            return True
        if not self.has_boolean(t):
            return False
        hit = self._empty.get(t)
        if hit is not None:
            return hit
        return self._empty_by_parts(t)

    def _known_empty(self, t: int) -> bool | None:
        """``is_empty(t)`` when it needs no work (``EMPTY``, no ``AND`` / ``NOT``, memoised),
        else None. Raises: never.
        """
        if t == EMPTY:
            return True
        if not self.has_boolean(t):
            return False
        return self._empty.get(t)

    def _empty_by_parts(self, t: int) -> bool:
        """``is_empty`` of ``t`` (holding ``AND`` / ``NOT``, not memoised) from its parts
        (``_emptiness_parts``) down to the intersections and complements, each searched
        (``_search_empty``); iterative, so any depth. A frame ``[u, every, items, i]``
        waits on ``items[i]``; an alternation (``every``) is decided by a non-empty member
        (False), a concatenation by an empty part (True); a term whose items all pass
        without deciding is ``every``.
        """
        memo = self._empty
        parts = self._emptiness_parts(t)
        if parts is None:
            return self._search_empty(t)
        frames = [[t, parts[0], parts[1], 0]]
        answer: bool | None = None  # the last finished frame's result, for its parent
        while frames:
            frame = frames[-1]
            u, every, items, i = frame
            if answer is not None:  # items[i] was a frame of its own: its result
                if answer is not every:
                    memo[u] = answer
                    frames.pop()
                    continue
                i += 1
                answer = None
            pushed = False
            while i < len(items):
                v = items[i]
                value = self._known_empty(v)
                if value is None:
                    sub = self._emptiness_parts(v)
                    if sub is not None:
                        frame[3] = i
                        frames.append([v, sub[0], sub[1], 0])
                        pushed = True
                        break
                    value = self._search_empty(v)
                if value is not every:
                    break
                i += 1
            if pushed:
                continue
            result = (not every) if i < len(items) else every
            memo[u] = result
            frames.pop()
            answer = result
        return memo[t]

    def _emptiness_parts(self, t: int) -> tuple[bool, tuple[int, ...]] | None:
        """How ``t``'s emptiness follows from its parts' without a search of ``t`` itself:
        ``(True, items)``: empty when every item is (an alternation); ``(False, items)``:
        empty when some item is (a concatenation's head and tail, a repetition's required
        body, what follows a trigger); None: search ``t`` (an intersection, a complement).
        """
        k, args = self.kind[t], self.args[t]
        if k == ALT:
            return True, args
        if k == CONCAT:
            return False, args
        if k == REPEAT:
            return (False, args[:1]) if args[1] > 0 else (False, ())
        if k == UNTIL:
            return False, args[2:]
        return None

    def _search_empty(self, t: int) -> bool:
        """``is_empty`` of ``t`` by the best-first search over its derivatives."""
        memo = self._empty
        deadline = self.deadline
        if deadline is None:  # outside a compile's budget: this search's own bound
            deadline = Deadline(self.search_seconds, "EMPTY_SEARCH_SECONDS")
        parent: dict[int, int] = {t: -1}
        heap = [(self._min_length(t), 0, t)]
        order = 0
        witness = -1
        while heap and witness < 0:  # best first: the shortest-looking completion first
            u = heapq.heappop(heap)[2]
            if self.nullable[u] or memo.get(u) is False:
                witness = u
                break
            if memo.get(u):
                continue
            for b in self._class_bytes(u):
                v = self.derivative(u, b)
                if v == EMPTY or v in parent:
                    continue
                parent[v] = u
                if not self.has_boolean(v) or self.nullable[v]:
                    witness = v  # non-EMPTY without AND/NOT, or nullable: non-empty
                    break
                if len(parent) > self.max_empty_checks:
                    raise GrammarTooComplexError(
                        f"deciding whether an intersection or complement is empty visits "
                        f"more than {self.max_empty_checks} states; simplify the schema"
                    )
                if not len(parent) & 63 and deadline.expired():
                    raise GrammarTooComplexError(
                        "deciding whether an intersection or complement is empty exceeded "
                        f"{deadline.describe()} ({len(parent)} states visited); simplify the "
                        "schema"
                    )
                order += 1
                heapq.heappush(heap, (self._min_length(v), order, v))
        if witness < 0:
            for u in parent:
                memo[u] = True
            return True
        while witness >= 0:
            memo[witness] = False
            witness = parent[witness]
        return False

    def _min_length(self, t: int) -> int:
        """A lower bound on the length of the strings ``t`` matches (0 under ``NOT``)."""
        memo = self._min_len
        hit = memo.get(t)
        if hit is not None:
            return hit
        stack = [(t, False)]
        kind, args = self.kind, self.args
        while stack:  # iterative post-order
            u, expanded = stack.pop()
            if u in memo:
                continue
            k = kind[u]
            children = () if k == NOT else _children(k, args[u])
            if not expanded:
                stack.append((u, True))
                stack.extend((c, False) for c in children if c not in memo)
                continue
            if k == BYTES:
                n = 1
            elif k == CONCAT:
                n = memo[args[u][0]] + memo[args[u][1]]
            elif k == ALT:
                n = min(memo[c] for c in args[u])
            elif k == AND:
                n = max(memo[c] for c in args[u])
            elif k == REPEAT:
                n = args[u][1] * memo[args[u][0]]
            elif k == UNTIL:
                n = len(args[u][0]) - args[u][1] + memo[args[u][2]]
            else:  # EPS, EMPTY, NOT
                n = 0
            memo[u] = n
        return memo[t]

    def _class_bytes(self, t: int) -> list[int]:
        """One byte per class of ``front(t)``'s refinement that can start ``t``."""
        classes = refine_classes(self.first[t], self.front(t))
        return [(c & -c).bit_length() - 1 for c in classes if c]

    def _kmp_step(self, trigger: bytes, k: int, b: int) -> int:
        """Bytes of ``trigger`` matched after reading ``b`` with ``k`` matched (KMP)."""
        table = self._kmp.get(trigger)
        if table is None:
            fail = [0] * (len(trigger) + 1)  # fail[i]: longest proper border of trigger[:i]
            j = 0
            for i in range(1, len(trigger)):
                while j and trigger[i] != trigger[j]:
                    j = fail[j]
                if trigger[i] == trigger[j]:
                    j += 1
                fail[i + 1] = j
            table = [{} for _ in trigger]
            for state in range(len(trigger)):
                for byte in set(trigger):
                    j = state
                    while j and trigger[j] != byte:
                        j = fail[j]
                    table[state][byte] = j + 1 if trigger[j] == byte else 0
            self._kmp[trigger] = table
        return table[k].get(b, 0)

    # ---- derivatives -----------------------------------------------------------

    def derivative(self, t: int, b: int) -> int:
        """The term matching ``{w : b w in L(t)}`` (``EMPTY`` if ``b`` cannot start ``t``)."""
        if not (self.first[t] >> b) & 1:
            return EMPTY
        key = (t << 8) | b
        hit = self._deriv.get(key)
        if hit is not None:
            return hit
        k = self.kind[t]
        deep = self.depth[t] > _SHALLOW and not self._bottom_up_active
        if deep and (k not in _SPINE_KINDS or self._deep_levels >= _SHALLOW):
            self._bottom_up(t, b)
            return self._deriv[key]
        if deep:  # a deep spine: one level here (see _deep_levels), its subterms first
            self._deep_levels += 1
            try:
                # cached first (so C's recursion stops at them), in C or not: the same order
                for u in self._subterms(t, b):
                    self.derivative(u, b)
                if k > REPEAT or _c is None:
                    return self._derivative_here(t, b, key)
                self._bottom_up_active = True
                try:
                    return _c.derivative(self, self._cctx or self._context(), t, b)
                finally:
                    self._bottom_up_active = False
            finally:
                self._deep_levels -= 1
        if k <= REPEAT and _c is not None:  # BYTES, CONCAT, ALT, REPEAT: in C (same terms)
            return _c.derivative(self, self._cctx or self._context(), t, b)
        return self._derivative_here(t, b, key)

    def _derivative_here(self, t: int, b: int, key: int) -> int:
        """``derivative(t, b)`` by the Python branches (recursing into the subterms through
        ``derivative``), cached under ``key``. Raises: the arena's budget errors.
        """
        kind, args = self.kind, self.args
        k = kind[t]
        if k == BYTES:
            result = EPS
        elif k == REPEAT:
            x, lo, hi = args[t]
            rest = self.repeat(x, max(lo - 1, 0), INF if hi == INF else hi - 1)
            result = self.concat(self.derivative(x, b), rest)
        elif k == ALT:
            members = self._alt_members(t, b)
            result = self.alt([self.derivative(u, b) for u in members])
        elif k == UNTIL:
            trigger, matched, cont = args[t]
            nxt = self._kmp_step(trigger, matched, b)
            result = cont if nxt == len(trigger) else self.until(trigger, cont, nxt)
        elif k == AND:
            result = self.intersect([self.derivative(u, b) for u in args[t]])
        elif k == NOT:
            result = self.complement(self.derivative(args[t][0], b))
        else:  # CONCAT: walk the spine while heads are nullable (no recursion on the tail)
            first, nullable = self.first, self.nullable
            parts = []
            cur = t
            while True:
                if kind[cur] != CONCAT:
                    parts.append(self.derivative(cur, b))
                    break
                h, tail = args[cur]
                if (first[h] >> b) & 1:
                    parts.append(self.concat(self.derivative(h, b), tail))
                if not nullable[h]:
                    break
                cur = tail
            result = self.alt(parts)
        self._deriv[key] = result
        return result

    def _subterms(self, t: int, b: int) -> list[int]:
        """The terms ``derivative(t, b)`` (``b >= 0``) or ``front(t)`` (``b < 0``) recurses
        into: a repetition's body, an alternation's or intersection's members, a complement's
        operand, a concatenation's heads up to the first one that is not nullable (and the
        spine's end when every head is).
        """
        kind, args, first, nullable = self.kind, self.args, self.first, self.nullable
        k = kind[t]
        if k == REPEAT:
            out = [args[t][0]]
        elif k == ALT:
            out = list(args[t] if b < 0 else self._alt_members(t, b))
        elif k == CONCAT:
            out = []
            cur = t
            while kind[cur] == CONCAT:
                h, cur = args[cur]
                out.append(h)
                if not nullable[h]:
                    break
            else:
                out.append(cur)
        elif k in (AND, NOT):  # every operand (d(A & B) = dA & dB, d(!A) = !dA)
            out = list(args[t])
        else:
            return []
        return out if b < 0 else [u for u in out if (first[u] >> b) & 1]

    def _bottom_up(self, t: int, b: int) -> None:
        """Fill the derivative (``b >= 0``) or front (``b < 0``) cache for ``t`` and every
        term it depends on, children before parents, from an explicit stack: each call of
        the recursive method then finds its subterms' results cached (one level deep).
        """
        cache: dict = self._front if b < 0 else self._deriv
        compute = self.front if b < 0 else (lambda u: self.derivative(u, b))

        def done(u: int) -> bool:
            return (u if b < 0 else (u << 8) | b) in cache

        self._bottom_up_active = True
        try:
            stack = [t]
            while stack:
                u = stack[-1]
                if done(u):
                    stack.pop()
                    continue
                missing = [c for c in self._subterms(u, b) if not done(c)]
                if missing:
                    stack.extend(missing)
                else:
                    stack.pop()
                    compute(u)
        finally:
            self._bottom_up_active = False

    def _alt_members(self, t: int, b: int) -> tuple[int, ...]:
        """The members of alternation ``t`` that byte ``b`` can start (all of them for a
        short one): for a long one, its members grouped by first-byte mask once (in order
        of first appearance) and the groups whose mask holds ``b`` joined. Cost per call:
        the number of distinct masks, not a 256-bucket index (whose build walked every
        byte of every member's mask: hundreds of microseconds for a string's character
        alternation, paid by every new arena).
        """
        members = self.args[t]
        if len(members) < _ALT_INDEX_MIN:
            return members
        groups = self._alt_index.get(t)
        if groups is None:
            by_mask: dict[int, list[int]] = {}
            for u in members:
                by_mask.setdefault(self.first[u], []).append(u)
            groups = self._alt_index[t] = [(mask, tuple(us)) for mask, us in by_mask.items()]
        out: tuple[int, ...] = ()
        for mask, us in groups:
            if (mask >> b) & 1:
                out += us
        return out

    def front(self, t: int) -> frozenset[int]:
        """Byte masks that can decide the first byte of ``t``: their refinement is a
        partition of the bytes on which ``derivative(t, .)`` is constant.
        """
        hit = self._front.get(t)
        if hit is not None:
            return hit
        if self.depth[t] > _SHALLOW and not self._bottom_up_active:
            self._bottom_up(t, -1)
            return self._front[t]
        kind, args = self.kind, self.args
        k = kind[t]
        if k != UNTIL and _c is not None:  # in C (the same sets, built in the same order)
            return _c.front(self, self._cctx or self._context(), t)
        if k == BYTES:
            result = frozenset(args[t])
        elif k == REPEAT:
            result = self.front(args[t][0])
        elif k == ALT:
            acc: set[int] = set()
            for u in args[t]:
                acc |= self.front(u)
            result = frozenset(acc)
        elif k == CONCAT:
            acc = set()
            cur = t
            while True:
                if kind[cur] != CONCAT:
                    acc |= self.front(cur)
                    break
                h, cur = args[cur]
                acc |= self.front(h)
                if not self.nullable[h]:
                    break
            result = frozenset(acc)
        elif k == UNTIL:  # the KMP step depends only on whether the byte is in the trigger
            result = frozenset(1 << b for b in set(args[t][0]))
        elif k in (AND, NOT):  # d(A & B) = dA & dB, d(!A) = !dA: the operands' classes
            acc = set()
            for u in args[t]:
                acc |= self.front(u)
            result = frozenset(acc)
        else:
            result = frozenset()
        self._front[t] = result
        return result


def _children(kind: int, args: tuple) -> tuple[int, ...]:
    """The subterms of a node of ``kind`` with ``args``."""
    if kind == CONCAT:
        return args
    if kind in (ALT, AND, NOT):
        return args
    if kind == REPEAT:
        return args[:1]
    if kind == UNTIL:
        return args[2:]
    return ()
