"""The grammar interfaces the runtime drives: ``BaseCompiledGrammar`` and ``BaseMatcher``.

A constraint passes three stages: a *spec* (``structgen.fsm.spec``: immutable, picklable,
no vocabulary), a *compiled grammar* for one vocabulary (``BaseCompiledGrammar``,
immutable, shared by every request under it) and a per-request *matcher*
(``BaseMatcher``, a cursor with rollback). The runtime, the server and the language use
only the methods below; how a grammar is represented (a lazy byte DFA over a token index
for the regex implementation, ``compiler.CompiledGrammar`` and ``matcher.Matcher``) is
the implementation's own.

Contract of every matcher method on the per-token path: it never raises; a token that is
not allowed is refused with ``False`` (or a shorter count) and leaves the state as it was.
A compiled grammar carries the spec it was compiled from (``spec``): that spec, not the
grammar, is what crosses a process boundary (a data-parallel replica compiles it again for
its own vocabulary; ``OpenAIBackend`` sends its wire form).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import GrammarWarning, warn_at_user_frame
from .grammar_pool import fill_rows_serial

if TYPE_CHECKING:
    import torch

    from .grammar_pool import GrammarPool

__all__ = ["BaseCompiledGrammar", "BaseMatcher"]


class BaseMatcher(ABC):
    """Per-request cursor into a compiled grammar.

    The reference decoding loop (``bitmask`` is int32 ``[batch, ceil(vocab_size / 32)]``,
    bit ``t % 32`` of word ``t // 32`` set when token ``t`` is allowed)::

        matcher = grammar.matcher(max_tokens=params.max_tokens)
        while not matcher.is_terminated():
            matcher.fill_bitmask(bitmask, row)
            token = sample(apply_token_bitmask(logits, bitmask[row]))
            matcher.advance(token)          # True: the mask allowed it
    """

    @abstractmethod
    def fill_bitmask(self, bitmask: torch.Tensor, row: int) -> None:
        """Write the allowed tokens into ``bitmask[row]``.

        Args:
            bitmask: int32 ``[batch, num_words]``, ``num_words >= ceil(vocab_size / 32)``;
                words past the vocabulary are zeroed. Mutated in place (``row`` only).
            row: the batch row to write.

        Raises: never (for a correctly shaped tensor).
        """

    @classmethod
    def fill_bitmask_batch(
        cls,
        matchers: Sequence[BaseMatcher],
        bitmask: torch.Tensor,
        rows: Sequence[int],
        pool: GrammarPool | None = None,
    ) -> list[BaseException | None]:
        """Fill ``bitmask[rows[i]]`` for ``matchers[i]``, every i: the batch entry point.

        Correct for matchers of any implementations mixed. Without ``pool`` the rows are
        filled in order on the calling thread; with one, cold rows of different grammars
        are filled in parallel (``structgen.fsm.grammar_pool``), bit-identical to the
        serial fill.

        Args:
            matchers: one matcher per row to fill.
            bitmask: as for ``fill_bitmask``; mutated in the rows named.
            rows: distinct batch rows, ``len(rows) == len(matchers)``.
            pool: the thread pool to fill on, or None (serial).

        Returns:
            Per row, the exception its ``fill_bitmask`` raised (e.g.
            ``GrammarTooComplexError`` building a lazy state; the row's contents are then
            undefined), else None.

        Raises:
            ValueError: ``matchers`` and ``rows`` differ in length.
        """
        if pool is not None:
            return pool.fill_bitmask_batch(matchers, bitmask, rows)
        if len(matchers) != len(rows):
            raise ValueError(f"{len(matchers)} matchers for {len(rows)} rows")
        errors: list[BaseException | None] = [None] * len(matchers)
        fill_rows_serial(matchers, bitmask, rows, errors)
        return errors

    def is_mask_cached(self) -> bool:
        """True when ``fill_bitmask`` would only copy a mask already computed (a batch
        fill writes such rows at once instead of handing them to a thread). The default,
        False, is always safe. Raises: never.
        """
        return False

    def grammar_state_key(self) -> object:
        """A hashable key shared by matchers whose ``fill_bitmask`` calls touch the same
        mutable state (a lazily built automaton, a mask cache): a parallel batch fill
        runs the matchers of one key on one thread. The default, the matcher itself,
        claims no sharing. Raises: never.
        """
        return self

    @abstractmethod
    def advance(self, token_id: int) -> bool:
        """Accept one token; False (state unchanged) if it is not allowed. Raises: never."""

    @abstractmethod
    def validate(self, token_ids: Sequence[int]) -> int:
        """How many leading ``token_ids`` would be accepted, without advancing. Raises: never."""

    @abstractmethod
    def rollback(self, n: int) -> None:
        """Undo the last ``n`` accepted tokens (clamped to what was accepted). Raises: never."""

    @abstractmethod
    def forced_bytes(self) -> bytes:
        """Bytes that are the only way on from here (jump-forward); ``b""`` if none.

        Raises: never.
        """

    @abstractmethod
    def is_accepting(self) -> bool:
        """True when the output so far is a complete match. Raises: never."""

    @abstractmethod
    def is_terminated(self) -> bool:
        """True when no token but EOS can follow, or EOS was accepted. Raises: never."""

    @abstractmethod
    def fork(self) -> BaseMatcher:
        """An independent copy at the same state (sharing the immutable grammar)."""

    @abstractmethod
    def reset(self) -> None:
        """Back to the initial state with nothing accepted."""


# the compile note of a schema whose objects allow unlisted keys: generated without them
# (the documented default, ``allow_extra_properties=False``), so not worth a Python warning
NO_EXTRA_NOTE = "objects whose additionalProperties is not false are generated without extra keys"


class BaseCompiledGrammar(ABC):
    """A constraint compiled for one vocabulary (or for none: then only ``matches`` works).

    Immutable; any number of matchers may run on one grammar at once.

    Attributes:
        spec: the ``structgen.fsm.spec`` term this grammar was compiled from (picklable;
            ``spec.compile(vocab)`` gives an equivalent grammar in another process).
        warnings: messages about parts of the spec that were ignored or approximated.
    """

    spec: Any
    warnings: list[str]

    @property
    def reported_warnings(self) -> list[str]:
        """``warnings`` less ``NO_EXTRA_NOTE`` (it states the documented default): what the
        API, the CLI and the server report to the user.
        """
        return [m for m in self.warnings if m != NO_EXTRA_NOTE]

    def emit_warnings(self, stacklevel: int = 2) -> None:
        """Issue each of ``reported_warnings`` as a :class:`~structgen.errors.GrammarWarning`
        at the user's line: the innermost calling frame outside the structgen package
        (``errors.warn_at_user_frame``; ``stacklevel`` counts from this method's caller
        where every frame is inside it). Python's default filters show a distinct message
        once per call site. Raises: never (unless a warning filter turns warnings into
        errors).
        """
        for message in self.reported_warnings:
            warn_at_user_frame(GrammarWarning(message), stacklevel=stacklevel + 1)

    @abstractmethod
    def matches(self, text: str | bytes) -> bool:
        """Whole-string membership (a str is UTF-8 encoded). Raises: never."""

    @abstractmethod
    def matcher(self, max_tokens: int | None = None) -> BaseMatcher:
        """A fresh per-request matcher at the initial state.

        Args:
            max_tokens: the request's budget of non-EOS tokens, or None; with one, the
                mask allows only tokens after which a complete match still fits.

        Raises:
            NoVocabularyError: the grammar was compiled without a vocabulary.
        """
