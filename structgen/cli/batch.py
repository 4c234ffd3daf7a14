"""``structgen extract``'s batch writer: results written as they finish, in input order.

``extract`` reports each text's result as it finishes (completion order); the CLI writes
one line per text in input order, so a finished result waits until every
earlier one is written. On JSON Lines input a progress bar runs on stderr, an output cut
by ``max_tokens`` or the end of the model's context (its JSON closed early by the grammar)
gets a warning line there as it finishes, naming the limit, and ``summary()`` gives the
closing line (documents, time, rate, the texts cut by each limit and the failed ones, named
``FILE:LINE``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from structgen.errors import ExtractionError, LengthLimit

__all__ = ["BatchWriter"]


class BatchWriter:
    """Writes ``structgen extract``'s results in input order as they finish.

    Args:
        write: ``write(result, where)`` writes one result line; ``where`` is the text's
            ``FILE:LINE`` on JSON Lines input, None for a single text (a failed single
            text may raise there: the error propagates out of ``on_result``).
        num_texts: how many texts the batch has (the progress bar's total).
        where: a text's index -> its name in messages (``FILE:LINE``, or ``"text"``).
        is_lines: JSON Lines input: a progress bar on stderr and named result lines.
        max_tokens: the token budget, named for a cut output whose result does not say
            which limit cut it (``ExtractionResult.cut_by`` None).

    Attributes:
        failed: indices of the texts whose result is an ExtractionError, as they finished.
        truncated: indices of the texts whose output a limit cut (the grammar closed the
            JSON early), as they finished.
        cut_by: the limit that cut each of ``truncated`` (a ``LengthLimit``), by index.
    """

    def __init__(
        self,
        write: Callable[[Any, str | None], None],
        num_texts: int,
        where: Callable[[int], str],
        is_lines: bool,
        max_tokens: int,
    ) -> None:
        self.failed: list[int] = []
        self.truncated: list[int] = []
        self.cut_by: dict[int, LengthLimit] = {}
        self._write = write
        self._num_texts = num_texts
        self._where = where
        self._is_lines = is_lines
        self._max_tokens = max_tokens
        self._pending: dict[int, Any] = {}
        self._written = 0
        self._bar = tqdm(total=num_texts, desc="extract", unit="doc", file=sys.stderr,
                         disable=not is_lines)  # fmt: skip
        self._start = time.perf_counter()

    def on_result(self, i: int, res: Any) -> None:
        """Take text ``i``'s result (an ``ExtractionResult`` or an ExtractionError) and
        write every result of the finished prefix of the input.

        Raises:
            whatever ``write`` raises (CliError for a failed single text).
        """
        self._bar.update(1)
        if isinstance(res, ExtractionError):
            self.failed.append(i)
        elif res.truncated:
            limit = res.cut_by or LengthLimit("max_tokens", self._max_tokens)
            self.truncated.append(i)
            self.cut_by[i] = limit
            self._bar.write(
                f"structgen: warning: {self._where(i)}: cut by {limit}; "
                "the grammar closed the JSON early, so later fields may be shortened",
                file=sys.stderr,
            )
        self._pending[i] = res
        while self._written in self._pending:  # input order: write the finished prefix
            name = self._where(self._written) if self._is_lines else None
            self._write(self._pending.pop(self._written), name)
            self._written += 1

    def close(self) -> None:
        """Close the progress bar."""
        self._bar.close()

    def summary(self) -> str:
        """The closing line: documents, seconds since the writer started, documents per
        second, then the texts cut by ``max_tokens``, those cut by the end of the model's
        context, and the failed ones (ten named at most per group).
        """
        elapsed = time.perf_counter() - self._start
        n = self._num_texts
        summary = f"{n} documents in {elapsed:.1f} s ({n / elapsed:.2f} documents/s)"
        for name, words in (("max_tokens", "max_tokens"), ("context", "the model's context")):
            cut = [i for i in self.truncated if self.cut_by[i].name == name]
            if cut:
                summary += f"; {len(cut)} cut by {words} ({self._names(cut)})"
        if self.failed:
            summary += f"; {len(self.failed)} failed ({self._names(self.failed)})"
        return summary

    def interrupted(self) -> str:
        """The line for a job stopped before its end (Ctrl-C): how many texts finished, how
        many of them were written (input order: a finished text after the first unfinished
        one is held, not written), and where a rerun would start.
        """
        done, n = self._bar.n, self._num_texts
        line = f"interrupted: {done} of {n} documents finished, {self._written} written"
        if self._written < n:
            held = len(self._pending)
            line += f"; the first not written is {self._where(self._written)}"
            if held:
                were = "was" if held == 1 else "were"
                line += f" ({held} finished after it {were} held back to keep input order)"
        return line

    def _names(self, indices: list[int], most: int = 10) -> str:
        shown = ", ".join(self._where(i) for i in sorted(indices)[:most])
        return shown + (", ..." if len(indices) > most else "")
