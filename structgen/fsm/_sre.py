"""Adapter over CPython's regex parser (``re._parser``; ``sre_parse`` before 3.11).

The only module that touches the private parser: used to vet a pattern before it
reaches interegular (lookaround, backreferences, anchors, size) and to translate
JSON Schema ``pattern`` values.
"""

from __future__ import annotations

import re

try:  # Python >= 3.11
    import re._constants as sre_constants
    import re._parser as sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from ..errors import GrammarTooComplexError, RegexError, UnsupportedRegexError

__all__ = ["parse", "vet_pattern", "sre_constants", "MAXREPEAT"]

MAXREPEAT = sre_constants.MAXREPEAT
_C = sre_constants
_REPEATS = {_C.MAX_REPEAT, _C.MIN_REPEAT} | (
    {_C.POSSESSIVE_REPEAT} if hasattr(_C, "POSSESSIVE_REPEAT") else set()
)


def parse(pattern: str):
    """Parse with Python ``re`` syntax.

    Raises:
        RegexError: the pattern is not a valid Python regular expression.
    """
    try:
        re.compile(pattern)
        return sre_parse.parse(pattern)
    except re.error as exc:
        raise RegexError(f"cannot parse regex {pattern!r}: {exc}") from exc
    except (RecursionError, OverflowError) as exc:
        raise RegexError(f"cannot parse regex {pattern!r}: {exc}") from exc


def _estimate(items, pattern: str, allow_anchors: bool) -> int:
    """Upper estimate of the number of NFA positions; rejects non-regular features."""
    total = 0
    for op, av in items:
        if op in (_C.ASSERT, _C.ASSERT_NOT):
            raise UnsupportedRegexError(f"lookaround is not regular, in {pattern!r}")
        if op in (_C.GROUPREF, _C.GROUPREF_EXISTS):
            raise UnsupportedRegexError(f"backreferences are not regular, in {pattern!r}")
        if op == _C.AT:
            if allow_anchors:
                continue
            raise UnsupportedRegexError(
                f"anchors (^, $, \\b, \\A, \\Z) are not supported, in {pattern!r}: "
                "the whole output must match (fullmatch semantics)"
            )
        if op in _REPEATS:
            lo, hi, sub = av
            count = max(lo, 1) + 1 if hi == MAXREPEAT else max(hi, 1)
            total += count * _estimate(sub, pattern, allow_anchors)
        elif op == _C.SUBPATTERN:
            total += _estimate(av[-1], pattern, allow_anchors)
        elif op == _C.BRANCH:
            total += sum(_estimate(b, pattern, allow_anchors) for b in av[1])
        elif getattr(_C, "ATOMIC_GROUP", None) is not None and op == _C.ATOMIC_GROUP:
            raise UnsupportedRegexError(f"atomic groups are not supported, in {pattern!r}")
        else:
            total += 1
    return total


def vet_pattern(pattern: str, max_positions: int, allow_anchors: bool = False) -> None:
    """Check that ``pattern`` is a valid, regular, reasonably sized Python regex.

    Raises:
        RegexError: unparsable.
        UnsupportedRegexError: lookaround, backreference, anchors.
        GrammarTooComplexError: bounded repetitions expand beyond ``max_positions``.
    """
    tree = parse(pattern)
    size = _estimate(list(tree), pattern, allow_anchors)
    if size > max_positions:
        raise GrammarTooComplexError(
            f"regex expands to about {size} positions (budget {max_positions}); "
            "reduce bounded repetitions such as {m,n} or maxLength"
        )
