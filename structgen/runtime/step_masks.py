"""A step's grammar masks, computed on the grammar pool while the forward runs (``StepMasks``).

Why: the bitmask rows a step samples under depend only on the matchers' states, which are
final once the previous step's tokens were applied; the forward does not touch them. So
the engine plans the step's masks from the scheduler's output (:meth:`StepMasks.plan`),
hands the work to a ``structgen.fsm.grammar_pool.GrammarPool`` thread
(:meth:`StepMasks.start`), runs the forward, and waits (:meth:`StepMasks.wait`) before
sampling (vLLM overlaps grammar work with the forward the same way). Sampling
(``step.sample_step``) and speculative verification (``SpeculativeDecoder.verify``) then
copy the rows instead of filling them.

The rows are exactly those the inline path fills: a plain request's one row at its
matcher's state; a speculating request's ``len(drafts) + 1`` rows, its matcher advanced
through the drafts and rolled back. While the job runs only the job touches the matchers
(the engine thread runs the forward), and nothing of a request but its matcher is
written by the job: a draft the grammar refuses (not expected: drafts are validated at
proposal) is recorded, and the engine thread drops it after :meth:`wait`. A request whose
grammar raises is failed alone at :meth:`wait`, on the engine thread.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from structgen.fsm import BaseMatcher
from structgen.fsm.grammar_pool import GrammarPool
from structgen.fsm.matcher import Matcher
from structgen.runtime.request import Request
from structgen.runtime.scheduler import SchedulerOutput

if TYPE_CHECKING:
    import torch

__all__ = ["StepMasks"]


@dataclass
class _Entry:
    req: Request
    first_row: int
    num_rows: int  # 1 + the drafts at planning time
    num_valid_drafts: int = -1  # drafts the grammar accepted, -1: all (or not speculating)
    error: str | None = None


@dataclass
class StepMasks:
    """The bitmask rows of one step's constrained sampling requests.

    Attributes:
        bitmask: int32 ``[rows, num_words]``: each planned request's rows, consecutive
            (rows of a failed request hold -1: any token, its sample is discarded). An
            ``ndarray`` when every planned request samples one row under structgen's own
            ``Matcher`` (no torch on the step); otherwise a CPU tensor (what
            ``BaseMatcher.fill_bitmask`` and ``SpeculativeDecoder.verify`` take).
        num_words: ``ceil(vocab_size / 32)`` of the logits the rows are for.
    """

    bitmask: np.ndarray | torch.Tensor
    num_words: int
    _entries: dict[int, _Entry] = field(default_factory=dict)  # id(request) -> entry
    _future: Future | None = None

    @classmethod
    def plan(cls, scheduled: SchedulerOutput, vocab_size: int) -> StepMasks | None:
        """The rows of the requests that sample this step under a grammar, or None.

        Args:
            scheduled: the step's chunks; a request samples when its chunk reaches its
                last known token (as ``ModelRunner.execute`` decides).
            vocab_size: the logits' width.

        Raises: never.
        """
        entries: dict[int, _Entry] = {}
        num_rows = 0
        for req, num in scheduled:
            if req.matcher is None or req.status.is_finished:
                continue
            if req.num_computed_tokens + num < req.num_tokens:
                continue  # a prefill chunk that does not reach the end: no sampling
            n = 1 + len(req.draft_token_ids)
            entries[id(req)] = _Entry(req, num_rows, n)
            num_rows += n
        if not entries:
            return None
        words = -(-vocab_size // 32)
        bitmask = np.full((num_rows, words), -1, dtype=np.int32)
        host = all(e.num_rows == 1 and isinstance(e.req.matcher, Matcher) for e in entries.values())
        if not host:
            import torch

            bitmask = torch.from_numpy(bitmask)
        return cls(bitmask, words, entries)

    def start(self, pool: GrammarPool) -> None:
        """Fill the rows on ``pool`` (returns at once; :meth:`wait` before reading)."""
        self._future = pool.submit(self._fill, pool)

    def wait(self) -> None:
        """Wait for the job; fail the requests whose grammar raised and drop drafts the
        grammar refused (on the calling thread: the engine's). Raises: what a bug in the
        job raised (never a grammar's error, which fails its request).
        """
        if self._future is not None:
            future, self._future = self._future, None
            future.result()
        for entry in self._entries.values():
            req = entry.req
            if entry.error is not None and not req.status.is_finished:
                req.finish("error", entry.error)
            if entry.num_valid_drafts >= 0:
                del req.draft_token_ids[entry.num_valid_drafts :]
                if req.draft_probs is not None:
                    req.draft_probs = req.draft_probs[: entry.num_valid_drafts]

    def rows_of(self, req: Request, num_rows: int) -> slice | None:
        """The rows planned for ``req`` when they are ``num_rows`` (its sampling rows now),
        else None (not planned, or planned for other drafts: fill inline). Raises: never.
        """
        entry = self._entries.get(id(req))
        if entry is None or entry.req is not req or num_rows > entry.num_rows:
            return None
        return slice(entry.first_row, entry.first_row + num_rows)

    def _fill(self, pool: GrammarPool) -> None:
        plain = [e for e in self._entries.values() if e.num_rows == 1]
        if plain:
            errors = BaseMatcher.fill_bitmask_batch(
                [e.req.matcher for e in plain],
                self.bitmask,
                [e.first_row for e in plain],
                pool=pool,
            )
            for entry, exc in zip(plain, errors):
                if exc is not None:
                    entry.error = _message(exc)
                    self.bitmask[entry.first_row] = -1
        for entry in self._entries.values():
            if entry.num_rows > 1:
                self._fill_drafts(entry)

    def _fill_drafts(self, entry: _Entry) -> None:
        """Rows ``first .. first + len(drafts)``: the matcher advanced through the drafts
        (rolled back afterwards), as ``SpeculativeDecoder`` masks inline.
        """
        m, drafts = entry.req.matcher, entry.req.draft_token_ids[: entry.num_rows - 1]
        advanced = 0
        try:
            for j in range(len(drafts) + 1):
                m.fill_bitmask(self.bitmask, entry.first_row + j)
                if j == len(drafts):
                    break
                if not m.advance(drafts[j]):  # validated at proposal: not expected
                    entry.num_valid_drafts = j
                    break
                advanced += 1
        except Exception as exc:  # e.g. GrammarTooComplexError building a state
            entry.error = _message(exc)
        m.rollback(advanced)


def _message(exc: BaseException) -> str:
    return f"grammar failed: {type(exc).__name__}: {exc}"
