r"""Terms carried from one ``TermArena`` to another (``export_term`` / ``import_term``).

A term's id only means something in its own arena, but its structure does not depend on
the arena: the smart constructors decide from kinds, masks and nullability alone, so the
term a piece of regex lowers to in a fresh arena has the same shape in any other. A
*recipe* is that shape as a post-order list of nodes, children named by their position in
the list; importing it interns the nodes bottom-up, giving exactly the term building it
from scratch would give (up to the ids: alternations are sorted again by the new ids).

Used by ``lower`` to keep the terms of character classes and escapes across
compiles: the JSON string class ``[^"\\\x00-\x1f]`` is about 30 terms built from UTF-8
sequences; importing its recipe is several times cheaper (``benchmarks/RESULTS.md``).

Node forms: ``(BYTES, mask)``, ``(CONCAT, head, tail)``, ``(ALT, members)``,
``(REPEAT, x, lo, hi)``, ``(UNTIL, trigger, k, cont)``; ``EMPTY`` and ``EPS`` are the
positions -2 and -1 (never listed).
"""

from __future__ import annotations

from .terms import ALT, BYTES, CONCAT, EMPTY, EPS, REPEAT, UNTIL, TermArena

__all__ = ["export_term", "import_term"]

_FIXED = {EMPTY: -2, EPS: -1}


def export_term(arena: TermArena, term: int) -> tuple[tuple, ...]:
    """The recipe of ``term`` (post-order, shared subterms listed once; empty for ``EMPTY``
    and ``EPS``).

    Its length is the number of distinct subterms; the walk is iterative (no recursion
    limit), so any term the arena holds can be exported.
    """
    index: dict[int, int] = dict(_FIXED)
    nodes: list[tuple] = []
    kind, args = arena.kind, arena.args
    stack = [(term, False)]
    while stack:
        t, expanded = stack.pop()
        if t in index:
            continue
        k = kind[t]
        children = _children(k, args[t])
        if not expanded:
            stack.append((t, True))
            stack.extend((c, False) for c in reversed(children) if c not in index)
            continue
        a = args[t]
        if k == BYTES:
            node = (BYTES, a[0])
        elif k == CONCAT:
            node = (CONCAT, index[a[0]], index[a[1]])
        elif k == ALT:
            node = (ALT, tuple(index[u] for u in a))
        elif k == REPEAT:
            node = (REPEAT, index[a[0]], a[1], a[2])
        else:
            node = (UNTIL, a[0], a[1], index[a[2]])
        index[t] = len(nodes)
        nodes.append(node)
    return tuple(nodes)


def _children(k: int, a: tuple) -> tuple[int, ...]:
    if k in (CONCAT, ALT):
        return a
    if k == REPEAT:
        return (a[0],)
    if k == UNTIL:
        return (a[2],)
    return ()


def import_term(arena: TermArena, recipe: tuple[tuple, ...]) -> int:
    """Intern ``recipe``'s nodes into ``arena``; returns the term of its last node (the
    exported term). ``recipe`` must be non-empty: ``EMPTY`` and ``EPS`` have no recipe.

    Raises:
        GrammarTooComplexError: the arena's term budget or nesting limit is exceeded.
    """
    ids: list[int] = []
    fixed = (EMPTY, EPS)  # positions -2 and -1

    def at(i: int) -> int:
        return ids[i] if i >= 0 else fixed[i + 2]

    for node in recipe:
        k = node[0]
        if k == CONCAT:
            t = arena._concat2(at(node[1]), at(node[2]))
        elif k == BYTES:
            t = arena.byteset(node[1])
        elif k == ALT:
            t = arena.alt_members(tuple(sorted(at(i) for i in node[1])))
        elif k == REPEAT:
            t = arena.repeat(at(node[1]), node[2], node[3])
        else:
            t = arena.until(node[1], at(node[3]), node[2])
        ids.append(t)
    return ids[-1]
