"""Shared subpatterns for ``$ref``: recursion unrolled in linear size, not exponential.

A recursive ``$ref`` is unrolled to ``max_recursion_depth`` expansions along a path.
Written out as one regex text, a node with k recursive references copies its whole
subtree k times per level (k^depth; sizes in ``benchmarks/RESULTS.md``). Here each distinct
expansion of a reference is converted once and becomes a *definition*; the pattern
text refers to it by a placeholder, one raw code point ``PLACEHOLDER_BASE + i``
(supplementary private use area; ``regex.definitions``). ``regex.parse.lower`` turns the
definitions into arena terms in order and every placeholder into its term, so the
automaton shares them (the arena hash-conses anyway; what was exponential was only the
text).

Recursion is cut per recursive group (references that reach each other): along a
path, the group is expanded at most ``max_recursion_depth`` times per member (groups of
one or two references) or in all (larger groups; ``RefSharing.is_cut``). An
expansion is then determined by the reference and its group's depth on the path (what
decides every cut below it), so that is the memo key: a self-recursive schema at depth
d has d + 1 distinct expansions, whatever its branching; each reference of a group at
most 2d + 1.

Raw code points at or above ``regex.escape.RESERVED_FROM`` never appear in converter
output otherwise: ``pattern`` writes user text in that range as escaped ranges.
"""

from __future__ import annotations

from typing import Any

from ...errors import GrammarTooComplexError, StructgenError
from ..regex.definitions import MAX_DEFINITIONS, PLACEHOLDER_BASE

__all__ = ["RefSharing"]

INLINE_MAX = 48  # definitions this short are written inline (no placeholder)


def _refs_in(node: Any, out: set[str]) -> None:
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            ref = cur.get("$ref")
            if isinstance(ref, str):
                out.add(ref)
            stack.extend(cur.values())
        elif isinstance(cur, list):
            stack.extend(cur)


class RefSharing:
    """Memo of ``$ref`` expansions and the definitions list of one conversion.

    Args:
        resolve: ``resolve(ref, pointer)`` -> the target subschema (the converter's).
    """

    def __init__(self, resolve) -> None:
        self._resolve = resolve
        self._reach: dict[str, frozenset[str]] = {}
        self._group: dict[str, frozenset[str]] = {}
        self._edge_memo: dict[str, list[str]] = {}  # _edges: each target walked once
        self._memo: dict[tuple, str | None] = {}
        self.definitions: list[str] = []
        self.rules: set[int] = set()  # definitions that are grammar rules (reserve)
        self.reusable: set[int] = set()  # definitions the same in every schema (store)
        # definition -> (head alias, slack): ``regex.terms.TermArena.head_aliases`` (store)
        self.head_aliases: dict[int, tuple[bytes, int]] = {}

    def reachable(self, ref: str) -> frozenset[str]:
        """Every reference reachable from the target of ``ref`` (itself if recursive)."""
        hit = self._reach.get(ref)
        if hit is not None:
            return hit
        seen: set[str] = set()
        todo = [ref]
        while todo:
            try:
                target = self._resolve(todo.pop(), "")
            except StructgenError:
                continue  # reported where the reference is converted
            found: set[str] = set()
            _refs_in(target, found)
            todo.extend(found - seen)
            seen |= found
        result = self._reach[ref] = frozenset(seen)
        return result

    def _edges(self, ref: str) -> list[str]:
        """The references in the target of ``ref`` (none when it does not resolve), sorted;
        memoised (the document does not change during a conversion): ``group`` and every
        ``is_recursive`` of ``ref`` share one walk of its target. The list is shared: not
        to be modified.
        """
        hit = self._edge_memo.get(ref)
        if hit is not None:
            return hit
        found: set[str] = set()
        try:
            target = self._resolve(ref, "")
        except StructgenError:
            pass  # no edges: reported where the reference is converted
        else:
            _refs_in(target, found)
        edges = self._edge_memo[ref] = sorted(found)
        return edges

    def group(self, ref: str) -> frozenset[str]:
        """The recursive group of ``ref``: the references that reach it and that it reaches
        (a strongly connected component; just ``ref`` when it is not mutually recursive).

        Tarjan's algorithm with an explicit stack, from ``ref`` over the references not yet
        grouped (a finished component never joins a later one), so every reference's target
        is walked once per conversion, however long a chain of references is.
        """
        hit = self._group.get(ref)
        if hit is not None:
            return hit
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        work = [(ref, iter(self._edges(ref)))]
        index[ref] = low[ref] = 0
        stack.append(ref)
        on_stack.add(ref)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt in self._group:
                    continue  # a finished component
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(self._edges(nxt))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        members.append(m)
                        if m == node:
                            break
                    component = frozenset(members)
                    for m in members:
                        self._group[m] = component
        return self._group[ref]

    def depth(self, ref: str, refs: tuple[str, ...]) -> int:
        """Expansions of ``ref``'s recursive group on the path ``refs``."""
        group = self.group(ref)
        return sum(1 for r in refs if r in group)

    def is_cut(self, ref: str, refs: tuple[str, ...], max_depth: int) -> bool:
        """True when expanding ``ref`` below ``refs`` would pass the recursion limit.

        Along a path, a group is expanded at most ``max_depth`` times per member for
        groups of one or two references (a self-recursive one nests ``max_depth`` deep;
        with A <-> B an A still nests ``max_depth`` deep through its Bs), and at most
        ``max_depth`` times in all for larger groups: every expansion copies each member,
        and a budget growing with the group made real schemas explode (WashingtonPost
        wp_8: 7 mutually recursive definitions, > 300 nesting levels, 12 MB of text).
        """
        group = len(self.group(ref))
        return self.depth(ref, refs) >= max_depth * (group if group <= 2 else 1)

    def key(self, ref: str, refs: tuple[str, ...]) -> tuple:
        """Memo key of expanding ``ref`` below the path ``refs``: the reference and its
        group's depth on the path. That depth decides every cut inside the expansion (a
        reference met inside either belongs to the same group, or its group has no entry
        on the path above, or it would reach back to ``ref``), so each reference has at
        most ``2 * max_depth`` expansions (WashingtonPost wp_8: a group of 7 mutually
        recursive definitions; with per-reference counts as the key, the conversion
        redid the same definitions ~200k times and ran out of its time budget).
        """
        return (ref, self.depth(ref, refs))

    def lookup(self, key: tuple) -> tuple[bool, str | None]:
        """(found, pattern) of a memoised expansion."""
        if key in self._memo:
            return True, self._memo[key]
        return False, None

    def store(
        self,
        key: tuple,
        text: str | None,
        reusable: bool = False,
        head_alias: tuple[bytes, int] | None = None,
    ) -> str | None:
        """Record an expansion; returns what the caller writes (placeholder or text).

        ``reusable``: the text's language does not depend on the schema (it refers only to
        definitions stored as reusable too): ``regex.reused`` keeps its terms per process.
        ``head_alias``: ``(alias, slack)`` (``string_length``'s product states): the text
        becomes a definition whatever its length and ``head_aliases`` records the pair for
        it (``TermArena.head_aliases``: the first ``slack`` characters of its language are
        those of every definition with the same alias).
        """
        if text is not None and (len(text) > INLINE_MAX or head_alias is not None):
            if len(self.definitions) >= MAX_DEFINITIONS:
                raise GrammarTooComplexError(
                    f"schema needs more than {MAX_DEFINITIONS} distinct $ref expansions; "
                    "lower max_recursion_depth"
                )
            self.definitions.append(text)
            if reusable:
                self.reusable.add(len(self.definitions) - 1)
            if head_alias is not None:
                self.head_aliases[len(self.definitions) - 1] = head_alias
            text = chr(PLACEHOLDER_BASE + len(self.definitions) - 1)
        self._memo[key] = text
        return text

    def is_recursive(self, ref: str) -> bool:
        """True when ``ref`` reaches itself (its group has other members, or its target
        refers to it directly); one walk per reference (``group``).
        """
        group = self.group(ref)
        return len(group) > 1 or ref in self._edges(ref)

    def reserve(self, key: tuple) -> tuple[int, str]:
        """A definition slot for a recursive ``$ref`` converted as a grammar rule (its
        placeholder is memoised under ``key`` before the target is converted, so the
        recursion refers back to it); ``define`` fills it. Definitions then refer to
        each other in cycles: only ``structgen.fsm.grammar`` reads them.

        Raises:
            GrammarTooComplexError: more than ``MAX_DEFINITIONS`` definitions.
        """
        if len(self.definitions) >= MAX_DEFINITIONS:
            raise GrammarTooComplexError(
                f"schema needs more than {MAX_DEFINITIONS} distinct $ref expansions"
            )
        index = len(self.definitions)
        self.definitions.append("")
        self.rules.add(index)
        placeholder = self._memo[key] = chr(PLACEHOLDER_BASE + index)
        return index, placeholder

    def define(self, index: int, text: str) -> None:
        """Fill the slot ``reserve`` gave."""
        self.definitions[index] = text
