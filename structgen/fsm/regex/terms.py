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
  ``k'`` reaches ``len(T)``, so it costs ``len(T)`` states however long the free text.

Smart constructors keep every term other than ``EMPTY`` non-empty as a language
(``EMPTY`` is absorbed by concatenation, dropped from alternations), so a
derivative is a dead state exactly when it is ``EMPTY``. ``derivative(t, b)``
follows Brzozowski with the usual simplifications (llguidance's derivre does the
same over bytes); the derivative of ``x{lo,hi}`` is ``d(x) x{lo-1,hi-1}``, so a
bounded repetition costs one term per count actually reached, e.g.
``[^"]{0,100000}`` yields ``[^"]{0,k}`` states only as far as the input goes.

Per term, computed once at construction: ``nullable`` (accepts the empty string),
``first`` (mask of the bytes with a non-empty derivative) and ``depth`` (nesting of
heads, alternations and repetitions; at most ``MAX_DEPTH``, a budget). ``derivative``
and ``front`` recurse into subterms; for a term deeper than ``_SHALLOW`` the results
of its subterms are first computed bottom-up from an explicit stack, so no Python
recursion grows with the depth.
"""

from __future__ import annotations

from ...errors import GrammarTooComplexError

__all__ = [
    "TermArena",
    "EMPTY",
    "EPS",
    "BYTES",
    "CONCAT",
    "ALT",
    "REPEAT",
    "UNTIL",
    "INF",
    "MAX_DEPTH",
    "byte_range_mask",
]

EMPTY, EPS = 0, 1
BYTES, CONCAT, ALT, REPEAT, UNTIL = 2, 3, 4, 5, 6
_ALL_BYTES = (1 << 256) - 1
_EMPTY_KIND, _EPS_KIND = 0, 1
INF = -1
MAX_DEPTH = 100_000  # nesting of concatenation heads, alternations and repetitions
_SPINE_MAX = 256  # concat re-associates a head spine up to this long; longer: kept as head
_SHALLOW = 64  # a term this deep is derived (front, derivative) recursively; deeper first
# gets its subterms' results bottom-up from an explicit stack (_bottom_up)
_ALT_INDEX_MIN = 8  # alternations with more items get a first-byte index


def byte_range_mask(lo: int, hi: int) -> int:
    """256-bit mask of the bytes ``lo..hi`` (inclusive)."""
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)


class TermArena:
    """Hash-consing store of terms, with cached derivatives and byte classes.

    Not thread-safe by itself; ``ByteDFA`` serialises access.

    Args:
        max_terms: bound on the number of distinct terms (memory budget).
    """

    def __init__(self, max_terms: int = 5_000_000) -> None:
        self.max_terms = max_terms
        self.kind: list[int] = [_EMPTY_KIND, _EPS_KIND]
        self.args: list[tuple] = [(), ()]
        self.nullable: list[bool] = [False, True]
        self.first: list[int] = [0, 0]
        self.depth: list[int] = [0, 0]
        self._ids: dict[tuple, int] = {}
        self._deriv: dict[int, int] = {}
        self._front: dict[int, frozenset[int]] = {}
        self._alt_index: dict[int, list[tuple[int, ...]]] = {}
        self._kmp: dict[bytes, list[dict[int, int]]] = {}
        self._single: list[int | None] = [None] * 256  # byteset of each single byte
        self._bottom_up_active = False  # _bottom_up is filling a cache

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
        if self.depth[t] > _SHALLOW and not self._bottom_up_active:
            self._bottom_up(t, b)
            return self._deriv[key]
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
        into: a repetition's body, an alternation's members, a concatenation's heads up to
        the first one that is not nullable (and the spine's end when every head is).
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
        members = self.args[t]
        if len(members) < _ALT_INDEX_MIN:
            return members
        index = self._alt_index.get(t)
        if index is None:
            by_mask: dict[int, list[int]] = {}
            for u in members:
                by_mask.setdefault(self.first[u], []).append(u)
            buckets: list[list[int]] = [[] for _ in range(256)]
            for mask, us in by_mask.items():
                while mask:
                    low = mask & -mask
                    buckets[low.bit_length() - 1].extend(us)
                    mask ^= low
            index = [tuple(bk) for bk in buckets]
            self._alt_index[t] = index
        return index[b]

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
        else:
            result = frozenset()
        self._front[t] = result
        return result
