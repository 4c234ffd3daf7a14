r"""Regex -> lazily built byte DFA (``ByteDFA``).

Pipeline: Python ``re`` parse and vetting, then lowering to hash-consed byte-level
terms with counted repetitions (``parse`` / ``lower`` -> ``terms``), then states built on
demand by derivatives (``lazy_dfa``). Compiling builds the first ``eager_rows`` rows
breadth-first, so small automata are complete (and their budget errors surface)
at compile time; larger ones grow as masks and walks need them.

Regex dialect: Python ``re`` with fullmatch semantics (the whole output must match), so
``^``/``\A`` at the start and ``$``/``\Z`` at the end of the pattern or of a top-level
alternative are accepted as no-ops (``anchors``); other anchors raise.
``\d``, ``\w``, ``\s`` and their negations are ASCII (as with ``re.ASCII``); ``.``
matches any code point except ``\n``.
"""

from __future__ import annotations

from ...errors import RegexError
from ..deadline import Deadline
from .lazy_dfa import DEFAULT_MAX_SECONDS, DEFAULT_MAX_STATES, ByteDFA
from .parse import lower
from .terms import EMPTY, TermArena

__all__ = [
    "ByteDFA",
    "regex_to_dfa",
    "DEFAULT_MAX_STATES",
    "DEFAULT_MAX_SECONDS",
    "DEFAULT_EAGER_ROWS",
]

DEFAULT_EAGER_ROWS = 64


def regex_to_dfa(
    pattern: str,
    *,
    trigger: str | bytes | None = None,
    max_states: int = DEFAULT_MAX_STATES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    eager_rows: int = DEFAULT_EAGER_ROWS,
    definitions: list[str] | None = None,
    deadline: Deadline | None = None,
    reusable: frozenset[int] = frozenset(),
    head_aliases: tuple[tuple[int, bytes, int], ...] = (),
) -> ByteDFA:
    """Compile a Python regex (fullmatch semantics) to a lazily built ``ByteDFA``.

    Args:
        pattern: the regex.
        trigger: when given, the automaton first reads free text up to and including
            the first occurrence of ``trigger`` (a str is UTF-8 encoded), and ``pattern``
            applies to what follows (``terms`` ``UNTIL``). The free text may be any
            bytes; it cannot end the match, so the trigger must appear.
        max_states: budget of built states (rows), at compile and later.
        max_seconds: CPU-time budget of the compile (and of each full exploration), in CPU
            seconds of the compiling thread (``deadline.Deadline``).
        eager_rows: rows built breadth-first at compile time.
        definitions: shared subpatterns that placeholders in ``pattern`` stand for
            (``json_schema_to_shared``; see ``parse.lower``).
        deadline: the budget of a larger compile this one is part of (a grammar's
            lexer); None: ``Deadline(max_seconds)``.
        reusable: indices of ``definitions`` the same in every spec that writes them,
            lowered once per process (``parse.lower``, ``reused``).
        head_aliases: ``(index, alias, slack)`` of ``definitions`` (``parse.lower``).

    Raises:
        RegexError: the pattern does not parse, or matches no string at all; an empty
            ``trigger``.
        UnsupportedRegexError: lookaround, backreferences, anchors other than at the ends
            (with the position), word boundaries, atomic groups.
        GrammarTooComplexError: a budget (states, time, nesting depth) is exceeded.
    """
    if deadline is None:
        deadline = Deadline(max_seconds)
    arena = TermArena()
    root = lower(
        pattern,
        arena,
        deadline=deadline,
        definitions=definitions,
        reusable=reusable,
        head_aliases=head_aliases,
    )
    arena.deadline = deadline  # emptiness searches share the compile's budget
    if root == EMPTY or arena.is_empty(root):
        raise RegexError(f"regex {pattern!r} matches no string")
    if trigger is not None:
        data = trigger.encode("utf-8") if isinstance(trigger, str) else bytes(trigger)
        if not data:
            raise RegexError("the constraint trigger must be a non-empty string")
        root = arena.until(data, root)
    dfa = ByteDFA(
        arena,
        root,
        max_states=max_states,
        max_seconds=max_seconds,
    )
    dfa.explore(max_rows=eager_rows, deadline=deadline)
    arena.deadline = None
    return dfa
