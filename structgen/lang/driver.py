"""Driving interpreters: one backend call per round, a fork's branches in lock-step.

A state's interpreter (``ProgramState._exec``) is a generator that yields lists of
``Call``s and receives their outputs; :func:`drive` merges the pending calls of several
interpreters into one ``backend.generate`` batch per round.
"""

from __future__ import annotations

from typing import Any

from structgen.errors import RequestError
from structgen.lang.expr import Expr, as_expr

__all__ = ["ForkedStates", "drive", "run_one"]


def drive(backend: Any, steps: list[Any]) -> None:
    """Run interpreters in lock-step: each round merges their calls into one backend call."""
    pending: list[tuple[Any, list[Any]]] = []
    for s in steps:
        try:
            pending.append((s, next(s)))
        except StopIteration:
            pass
    while pending:
        calls = [c for _, cs in pending for c in cs]
        deltas = [c.on_delta for c in calls]
        on_delta = None
        if any(deltas):
            def on_delta(i: int, text: str) -> None:
                if deltas[i] is not None:
                    deltas[i](text)
        outs = backend.generate(
            [c.prompt_ids for c in calls], [c.params for c in calls],
            [c.constraint for c in calls], on_delta,
        )
        nxt, i = [], 0
        for s, cs in pending:
            mine, i = outs[i : i + len(cs)], i + len(cs)
            try:
                nxt.append((s, s.send(mine)))
            except StopIteration:
                pass
        pending = nxt


def run_one(state: Any, expr: Expr) -> None:
    """Interpret ``expr`` on one state."""
    drive(state.backend, [state._exec(expr)])


class ForkedStates(list):
    """The branches of :meth:`ProgramState.fork`; ``forks += expr`` runs them together.

    ``forks += expr`` appends the same expression to every branch; a seeded gen in it
    runs with seed ``seed + i`` in branch ``i`` (as ``SamplingParams.n`` does), so the
    branches differ yet are reproducible. ``forks += [e0, e1, ...]`` appends one
    expression per branch, seeds as written. Either way the branches' generation calls
    run as one batch per round (prefix pages shared by the radix cache).
    """

    def __iadd__(self, value: Any) -> ForkedStates:  # type: ignore[override]
        broadcast = not isinstance(value, (list, tuple))
        if not broadcast:
            if len(value) != len(self):
                raise RequestError(f"{len(value)} expressions for {len(self)} branches")
            exprs = [as_expr(v) for v in value]
        else:
            exprs = [as_expr(value)] * len(self)
        if not self:
            return self
        saved = [s._seed_offset for s in self]
        if broadcast:
            for i, s in enumerate(self):
                s._seed_offset = saved[i] + i
        try:
            drive(self[0].backend, [s._exec(e) for s, e in zip(self, exprs)])
        finally:
            for s, off in zip(self, saved):
                s._seed_offset = off
        return self

    def __getitem__(self, i):
        return list.__getitem__(self, i)
