"""Definitions lowered once per process: reusable definitions restored from an arena snapshot.

A spec's converter may know that some of its shared definitions (``definitions``) say the
same thing in every spec: the JSON Schema converter's "any JSON value" chain
(``json_schema.convert``'s ``any_value``: eleven definitions of 127-273 characters, one per
nesting level, written for every object that allows extra properties and every untyped
value) depends on the whitespace option only, yet lowering it was about a quarter of a flat
schema's compile (``benchmarks/RESULTS.md``); a string ``format`` or ``pattern`` with a
length (``json_schema.string_length``: ~15k definitions for an email of maxLength 80) is the
same in every schema and every copy constraint's document. It marks them *reusable*; ``parse.lower``
then lowers them first, into the still empty arena, and here keeps a snapshot of that arena
(``TermArena.snapshot``) under their texts, so the next spec that writes the same texts
restores it (``TermArena.restore``, a copy of a few hundred list items) instead of lowering.

Exact: the key is the reusable definitions' texts, their placeholders renumbered to their
order among themselves (``run_key``); a run is kept only when they refer to nothing else
(``lowering_texts``), and it is lowered before anything else, into an empty arena, with a
group memo of its own. Lowering it thus depends on those texts alone, and the arena a
snapshot restores is the arena the lowering would build: the same terms under the same ids,
hence the same automaton (character classes come from ``lower``'s atom recipes either way;
whether an atom was built or imported can change the ids its intermediate terms took, never
a language: ``tests/fsm/regex/test_reused.py`` compares the arenas and the masks).

With the snapshot a run keeps the groups of its own lowering memo whose text holds no
placeholder (the JSON string, the number, the escape classes: ``lower.fast_lower``'s memo
keys), and hands them to the spec's memo when it restores the run: a key without a
placeholder lowers to the same term under any binding, and the terms are the restored
arena's, so the spec's own texts that repeat those groups take them instead of lowering them
again (their terms may be the run's where a fresh lowering would build equal ones under new
ids: the same languages, ``tests/fsm/regex/test_reused_groups.py``).

The store survives ``clear_cache``, as the atom recipes do: it holds no vocabulary and no
per-schema term. Bounded: ``MAX_ENTRIES`` runs of ``parse.lower`` (one per whitespace option
and mix of reusable definitions in use: each bounded string body, a ``format`` with its
length, is its own) and, apart, ``MAX_LEXER_ENTRIES`` runs of the grammar lexers
(``parse.SharedDefinitions``, keyed by ``lexer_key``: one per whitespace option and set of
seeds), so a schema mix with many bodies does not drop the lexers' runs; the least recently
used of each dropped first.
"""

from __future__ import annotations

import re

from ...lru import LRUCache
from .definitions import PLACEHOLDER_BASE, renumber_many, renumber_placeholders
from .terms import TermArena

__all__ = [
    "run_key",
    "lexer_key",
    "lowering_texts",
    "restore",
    "restore_groups",
    "keep",
    "clear",
    "num_entries",
    "MAX_ENTRIES",
    "MAX_LEXER_ENTRIES",
    "MAX_RUN",
    "RUN_BASE",
]

MAX_ENTRIES = 16  # parse.lower's runs kept (each a few hundred terms: ~0.1 MB)
MAX_LEXER_ENTRIES = 16  # the grammar lexers' runs kept (lexer_key)
MAX_RUN = 65_536  # definitions in one run (the any-value chain has eleven; a bounded
# string body, ``json_schema.string_length``, ~15k for an email of maxLength 80)
RUN_BASE = 0x100000  # a run member's placeholder in a key (plane 16: never a placeholder)
# a placeholder or boolean / raw-bytes marker (definitions) left in a key: outside the run
_OUTSIDE = re.compile(f"[{chr(PLACEHOLDER_BASE)}-{chr(RUN_BASE - 1)}]")

_LEXERS = object()  # the first item of a lexer_key (no run key holds it)
# any placeholder or marker code point (definitions): a memo key holding one is left out
_RESERVED = re.compile(f"[{chr(PLACEHOLDER_BASE)}-\U0010ffff]")
# run key -> (snapshot, each definition's term, the run's group memo without placeholders);
# locked: compiles run on several threads
_Run = tuple[TermArena, tuple[int, ...], dict]
_runs: LRUCache[tuple, _Run] = LRUCache(MAX_ENTRIES)
_lexer_runs: LRUCache[tuple, _Run] = LRUCache(MAX_LEXER_ENTRIES)


def run_key(texts: list[str], order: list[int]) -> tuple[str, ...] | None:
    """The key of the reusable definitions ``order`` of ``texts``: their texts with the
    placeholder of ``order[k]`` renumbered to ``RUN_BASE + k`` (plane 16: reserved, never a
    placeholder; converter output writes every code point at or above
    ``escape.RESERVED_FROM`` as an escape, so nothing else there is raw).

    Linear in the texts (``renumber_many``: one pass over them all): a text that refers
    outside the run keeps a placeholder, which no kept key holds (``lowering_texts``
    refuses such a run before it is kept).

    Args:
        texts: every definition of the spec (placeholders as in ``parse.lower``).
        order: the reusable ones' indices, ascending.

    Returns:
        The key, or None for a run longer than ``MAX_RUN``. Raises: never.
    """
    if len(order) > MAX_RUN:
        return None
    table = {PLACEHOLDER_BASE + i: RUN_BASE + k for k, i in enumerate(order)}
    key = renumber_many([texts[i] for i in order], table)
    return tuple(key)


def lexer_key(run: tuple[str, ...], seeds: tuple[str, ...]) -> tuple:
    """The key of the grammar lexers' run (``parse.SharedDefinitions``): the reusable
    definitions' ``run_key`` (``()`` for none) and the seed patterns; kept apart from
    ``parse.lower``'s runs, under ``MAX_LEXER_ENTRIES``. Raises: never.
    """
    return (_LEXERS, run, seeds)


def _store(key: tuple) -> LRUCache:
    return _lexer_runs if key and key[0] is _LEXERS else _runs


def lowering_texts(key: tuple[str, ...]) -> list[str] | None:
    """The run's texts to lower, member ``k``'s placeholder ``PLACEHOLDER_BASE + k``; None
    when a text refers outside the run or is a boolean or raw-bytes definition (a code
    point of the placeholder range left: the run is lowered as usual, never kept).
    Raises: never.
    """
    if any(_OUTSIDE.search(text) for text in key):
        return None
    table = {RUN_BASE + k: PLACEHOLDER_BASE + k for k in range(len(key))}
    return [renumber_placeholders(text, table) for text in key]


def restore(key: tuple, arena: TermArena, memo: dict | None = None) -> list[int] | None:
    """The terms of the run ``key`` (``run_key`` or ``lexer_key``) restored into the empty
    ``arena``, or None when the store does not hold it (the caller lowers it, then ``keep``).

    Args:
        key: the run's key.
        arena: an empty arena (mutated: it holds the run's terms, under the snapshot's ids).
        memo: a group memo (``lower.fast_lower``'s) to receive the entries of the run's own
            memo whose key holds no placeholder or marker (``keep``): their terms are this
            arena's now, and a key without a placeholder lowers to the same term under any
            placeholder binding, so the spec's texts take those groups (the JSON string,
            the number, the escapes) from it instead of lowering them again.

    Raises:
        GrammarTooComplexError: the run holds more terms than ``arena.max_terms``.
    """
    hit = _store(key).get(key)
    if hit is None:
        return None
    snapshot, terms, groups = hit
    arena.restore(snapshot)
    if memo is not None:
        memo.update(groups)
    return list(terms)


def keep(key: tuple, arena: TermArena, terms: list[int], memo: dict | None = None) -> None:
    """Keep a snapshot of ``arena``, which holds exactly the run ``key`` lowered from empty
    (``terms``: each definition's term; ``memo``: the group memo the run was lowered with,
    of which the entries whose key holds no placeholder or marker are kept for ``restore``).
    Raises: never.
    """
    groups = {k: v for k, v in (memo or {}).items() if not _RESERVED.search(k)}
    _store(key).put(key, (arena.snapshot(), tuple(terms), groups))


def restore_groups(key: tuple, memo: dict) -> None:
    """Copy the kept run ``key``'s groups without a placeholder into ``memo`` (what
    ``restore`` gives its ``memo``), after ``keep``: the compile that lowered the run reads
    its groups as later ones do. Nothing when the store does not hold ``key``.
    Raises: never.
    """
    hit = _store(key).get(key)
    if hit is not None:
        memo.update(hit[2])


def clear() -> None:
    """Drop every kept run (tests; a cold start of the process). Raises: never."""
    _runs.clear()
    _lexer_runs.clear()


def num_entries() -> int:
    """Runs kept now (both stores). Raises: never."""
    return len(_runs) + len(_lexer_runs)
