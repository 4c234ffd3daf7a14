"""CPU-time budgets of compiles: ``max_seconds``, ``max_convert_seconds``, ``search_seconds``.

Every compile budget counts the CPU time of the thread doing the compile
(``time.thread_time``), not wall-clock time: a compile that waits (for the GIL while
another thread runs, for a core on a loaded machine, or sleeping) spends none of it, so
whether a grammar is refused does not depend on the machine's load. A compile run in a
thread pool (the server plans grammars off its event loop) counts its worker thread's CPU,
since the budget is started and checked on that thread.

``cpu_clock`` is the calling thread's CPU seconds plus the CPU its walks handed to fresh
stacks spent (``nesting.fresh_stack`` runs a deep walker on a new thread while its caller
waits: ``fresh_stack_clock`` starts the new thread's clock where the caller's stands and
``credit`` adds what it spent back to the caller's), so one compile's clock runs on
across those hand-offs.
"""

from __future__ import annotations

import math
import threading
import time

from ..errors import ConfigError, GrammarTooComplexError

__all__ = ["NEVER", "Deadline", "cpu_clock", "credit", "fresh_stack_clock"]


class _Clock(threading.local):
    offset = 0.0  # a thread's own value once fresh_stack_clock or credit sets it


_local = _Clock()


def cpu_clock() -> float:
    """CPU seconds of the calling thread (``time.thread_time``) plus its offset (module
    docstring); only differences between two readings on one thread mean anything.
    """
    return time.thread_time() + _local.offset


def fresh_stack_clock(clock: float) -> None:
    """Start the calling (new) thread's ``cpu_clock`` at ``clock``, its parent's reading."""
    _local.offset = clock - time.thread_time()


def credit(seconds: float) -> None:
    """Add ``seconds`` (CPU a child thread spent for the caller) to the caller's clock."""
    _local.offset += seconds


class Deadline:
    """A CPU-time budget of the compiling thread: ``seconds`` of ``cpu_clock`` from now.

    Create it on the thread that does the work and check it there (``expired``,
    ``remaining``, ``check``); ``nesting.fresh_stack`` carries the clock to the threads
    it hands a walk to.

    Args:
        seconds: the budget in CPU seconds (``math.inf``: none).
        name: the budget's keyword, named in the error (``"max_seconds"``).

    Raises:
        ConfigError: ``seconds`` is negative or NaN.
    """

    __slots__ = ("seconds", "name", "end")

    def __init__(self, seconds: float, name: str = "max_seconds") -> None:
        seconds = float(seconds)
        if not seconds >= 0.0:
            raise ConfigError(f"a compile budget must be >= 0 CPU seconds, got {name}={seconds}")
        self.seconds = seconds
        self.name = name
        self.end = cpu_clock() + seconds

    def expired(self) -> bool:
        """True once the thread has spent the budget (at once for a budget of 0)."""
        return time.thread_time() + _local.offset >= self.end  # cpu_clock(), inlined

    def remaining(self) -> float:
        """CPU seconds left (0.0 when spent; ``math.inf`` for no budget)."""
        return max(0.0, self.end - cpu_clock())

    def describe(self) -> str:
        """``"its CPU-time budget (max_seconds=10 CPU s)"``, for error messages."""
        return f"its CPU-time budget ({self.name}={self.seconds:g} CPU s)"

    def error(self, what: str) -> GrammarTooComplexError:
        """The ``GrammarTooComplexError`` saying ``what`` exceeded this budget."""
        return GrammarTooComplexError(f"{what} exceeded {self.describe()}")

    def check(self, what: str) -> None:
        """Raises ``self.error(what)`` (``GrammarTooComplexError``) once expired."""
        if time.thread_time() + _local.offset >= self.end:  # self.expired(), inlined
            raise self.error(what)


NEVER = Deadline(math.inf)  # no budget (parse.lower's default)
