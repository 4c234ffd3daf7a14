"""A thread pool that fills the bitmask rows of many matchers at once (``GrammarPool``).

Why: a batch of requests under different grammars needs one mask per row per step. A
warm mask is a C copy of a cached row (about a microsecond, the GIL held: threads would
only add their hand-over cost), but a cold one walks the vocabulary's token trie, and the
C walk (``csrc/tokentrie.c``) releases the GIL while it steps through built DFA rows, so
cold rows of different grammars fill in parallel. The engine also hands a whole step's
mask work to the pool (:meth:`GrammarPool.submit`) so that it runs while the model's
forward does (vLLM overlaps grammar work with the forward the same way).

How a batch is split (:meth:`GrammarPool.fill_bitmask_batch`):

1. rows whose mask is cached (``BaseMatcher.is_mask_cached``) are written at once by the
   calling thread;
2. the other rows are grouped by ``BaseMatcher.grammar_state_key``: matchers with one key
   share mutable grammar state (a lazily built DFA, a mask cache), which is not
   thread-safe, so one group is always filled by one thread, in row order;
3. the groups are dealt to at most ``num_threads`` shards (largest group first, each to
   the shard with the fewest rows); the calling thread fills one shard, pool threads the
   others.

Each row is filled by the same ``fill_bitmask`` call on the same matcher state as a serial
loop would make, and rows are disjoint, so the tensor comes out bit-identical to serial
filling. A matcher that raises (``GrammarTooComplexError`` building a lazy state) fails
its own row only: the exception is returned, never raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    import torch

    from .base import BaseMatcher

__all__ = ["GrammarPool", "fill_rows_serial"]


def fill_rows_serial(
    matchers: Sequence[BaseMatcher],
    bitmask: torch.Tensor,
    rows: Sequence[int],
    errors: list[BaseException | None],
    positions: Sequence[int] | None = None,
) -> None:
    """Fill ``bitmask[rows[i]]`` for ``matchers[i]`` in order, catching per row.

    Args:
        matchers: one matcher per row.
        bitmask: as for ``BaseMatcher.fill_bitmask``; mutated in the rows named.
        rows: the batch rows, ``len(rows) == len(matchers)``.
        errors: written at ``positions[i]`` (default ``i``): the exception row ``i``'s
            ``fill_bitmask`` raised; rows that filled are left as they were.
        positions: where each row's outcome goes in ``errors``.

    Raises: never (a matcher's exception goes into ``errors``).
    """
    for i, (matcher, row) in enumerate(zip(matchers, rows, strict=True)):
        try:
            matcher.fill_bitmask(bitmask, row)
        except Exception as exc:  # one grammar's failure stays in its row
            errors[i if positions is None else positions[i]] = exc


class GrammarPool:
    """Threads that fill grammar bitmasks and run a step's mask work beside the forward.

    Args:
        num_threads: threads that fill rows, the calling thread included (>= 1). With 1,
            :meth:`fill_bitmask_batch` fills serially and :meth:`submit` runs jobs on one
            background thread.

    Raises:
        ConfigError: ``num_threads`` is not an int >= 1.
    """

    def __init__(self, num_threads: int) -> None:
        if not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 1:
            raise ConfigError(f"GrammarPool num_threads must be an int >= 1, got {num_threads!r}")
        self.num_threads = num_threads
        # one thread for a submitted job plus num_threads - 1 shard fillers: a job that
        # fills a batch never waits on a shard queued behind itself
        self._executor = ThreadPoolExecutor(
            max_workers=num_threads, thread_name_prefix="structgen-grammar"
        )
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(*args)`` on a pool thread; its exception is re-raised by
        ``future.result()`` (at the caller's sync point, never swallowed).

        At most one submitted job should run at a time (the engine submits one per step
        and waits for it before the next): shards of a batch it fills use the other
        threads. Raises: RuntimeError after :meth:`close`.
        """
        return self._executor.submit(fn, *args)

    def fill_bitmask_batch(
        self, matchers: Sequence[BaseMatcher], bitmask: torch.Tensor, rows: Sequence[int]
    ) -> list[BaseException | None]:
        """Fill ``bitmask[rows[i]]`` for ``matchers[i]``, every i, over the pool's threads.

        Args:
            matchers: one matcher per row (any implementations mixed).
            bitmask: int32 ``[batch, num_words]`` (``BaseMatcher.fill_bitmask``); mutated
                in the rows named, each row by exactly one thread.
            rows: distinct batch rows, ``len(rows) == len(matchers)``.

        Returns:
            Per row, the exception its matcher raised (its row's contents are then
            undefined), else None.

        Raises:
            ValueError: ``matchers`` and ``rows`` differ in length.
        """
        if len(matchers) != len(rows):
            raise ValueError(f"{len(matchers)} matchers for {len(rows)} rows")
        n = len(matchers)
        errors: list[BaseException | None] = [None] * n
        cold: dict[Any, list[int]] = {}  # grammar state key -> positions, in row order
        for i, m in enumerate(matchers):
            try:
                if m.is_mask_cached():
                    m.fill_bitmask(bitmask, rows[i])
                    continue
                key = m.grammar_state_key()
            except Exception as exc:
                errors[i] = exc
                continue
            cold.setdefault(key, []).append(i)
        if not cold:
            return errors
        shards = _deal(list(cold.values()), self.num_threads)
        futures = [
            self._executor.submit(_fill_shard, matchers, bitmask, rows, errors, shard)
            for shard in shards[1:]
        ]
        _fill_shard(matchers, bitmask, rows, errors, shards[0])
        for future in futures:
            future.result()  # _fill_shard catches per row: only a bug raises here
        return errors

    def close(self) -> None:
        """Stop the threads after the work queued (idempotent). Raises: never."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=True)


def _deal(groups: list[list[int]], num_shards: int) -> list[list[int]]:
    """Groups dealt to at most ``num_shards`` shards, largest first, each to the shard with
    the fewest positions; the positions of a shard in ascending order.
    """
    shards: list[list[int]] = [[] for _ in range(min(num_shards, len(groups)))]
    for group in sorted(groups, key=len, reverse=True):
        min(shards, key=len).extend(group)
    for shard in shards:
        shard.sort()  # a group's rows keep their order (they share state: order matters)
    return shards


def _fill_shard(
    matchers: Sequence[BaseMatcher],
    bitmask: torch.Tensor,
    rows: Sequence[int],
    errors: list[BaseException | None],
    positions: list[int],
) -> None:
    fill_rows_serial(
        [matchers[i] for i in positions], bitmask, [rows[i] for i in positions], errors, positions
    )
