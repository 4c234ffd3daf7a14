"""A transformers ``LogitsProcessor`` over any structgen ``CompiledGrammar``.

Usage::

    from structgen.integrations.transformers import logits_processor

    proc = logits_processor({"type": "object", ...}, tokenizer, max_tokens=64)
    out = model.generate(ids, logits_processor=[proc], max_new_tokens=64,
                         eos_token_id=proc.eos_token_ids)

Pass ``proc.eos_token_ids`` (every id the grammar's vocabulary treats as EOS, e.g. both
``<|endoftext|>`` and ``<|im_end|>`` for SmolLM2) as ``eos_token_id``, so that generate
stops on whichever EOS the grammar allowed.

One matcher per batch row, created on the first call (the prompt length is taken from
``input_ids`` then); each later call advances every row by the token generate appended.
Masks are written into one packed ``[batch, ceil(vocab / 32)]`` int32 bitmask and
applied with ``structgen.kernels.apply_token_bitmask`` (one call for the batch). A row
whose grammar is complete and has no way on allows only EOS; a row that has finished
(EOS taken, then padded by generate) keeps EOS allowed so the mask is never empty.
Greedy and sampling are supported; beam search (rows reordered between steps) is not.
A processor holds per-generation state: make a new one (or call ``reset()``) per call to
``generate``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import LogitsProcessor

from structgen.fsm import (
    BaseCompiledGrammar,
    CompiledGrammar,
    Vocabulary,
    compile_json_schema,
    compile_regex,
)
from structgen.fsm.spec import BaseSpec
from structgen.kernels.apply_token_bitmask import apply_token_bitmask

__all__ = ["StructgenLogitsProcessor", "logits_processor"]


class StructgenLogitsProcessor(LogitsProcessor):
    """Mask ``generate``'s scores to the tokens the grammar allows.

    Args:
        grammar: a grammar compiled for the tokenizer's vocabulary.
        max_tokens: token budget per row (pass ``max_new_tokens``): the grammar then
            closes the document in time (see ``structgen.fsm.index.budget``). None: no budget.
    """

    def __init__(self, grammar: CompiledGrammar, max_tokens: int | None = None) -> None:
        self.grammar = grammar
        self.max_tokens = max_tokens
        vocab = grammar.vocab
        self._eos = sorted(vocab.eos_token_ids) if vocab is not None else []
        self.reset()

    @property
    def eos_token_ids(self) -> list[int]:
        """The EOS ids the grammar allows at acceptance (give them to ``generate``)."""
        return list(self._eos)

    def reset(self) -> None:
        """Forget the rows of the previous ``generate`` call."""
        self._matchers: list | None = None
        self._prompt_len = 0
        self._num_seen = 0
        self.num_rejected = 0  # tokens generate chose that the grammar refused (should be 0)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Advance each row's matcher by the tokens ``generate`` chose since the last call,
        then mask a copy of ``scores`` to what each row's grammar allows.

        Args:
            input_ids: ``[B, L]`` prompt plus the tokens generated so far.
            scores: ``[B, V]`` next-token scores (not modified).

        Returns:
            ``[B, V]`` a copy of ``scores`` with the tokens the grammar forbids at ``-inf``
            (a finished row keeps only its EOS ids).

        Raises:
            ValueError: the batch size changed since the first call (beam search).
        """
        batch, vocab_size = scores.shape
        if self._matchers is None:
            self._matchers = [self.grammar.matcher(self.max_tokens) for _ in range(batch)]
            self._prompt_len = input_ids.shape[1]
        if len(self._matchers) != batch:
            raise ValueError(
                f"batch changed from {len(self._matchers)} to {batch} rows "
                "(beam search is not supported); make a new processor per call"
            )
        new = input_ids.shape[1] - self._prompt_len
        if new > self._num_seen:
            tokens = input_ids[:, self._prompt_len + self._num_seen : self._prompt_len + new]
            for row, m in enumerate(self._matchers):
                for tok in tokens[row].tolist():
                    if not m.is_terminated() and not m.advance(tok):
                        self.num_rejected += 1
            self._num_seen = new
        bitmask = torch.zeros((batch, (vocab_size + 31) // 32), dtype=torch.int32)
        for row, m in enumerate(self._matchers):
            if m.is_terminated():
                for eos in self._eos:  # finished (or only EOS left): keep EOS possible
                    if eos < vocab_size:
                        bitmask[row, eos // 32] |= _bit(eos % 32)
            else:
                m.fill_bitmask(bitmask, row)
        scores = scores.clone()
        apply_token_bitmask(scores, bitmask.to(scores.device))
        return scores


def _bit(i: int) -> int:
    return (1 << i) - (1 << 32) if i == 31 else 1 << i


def logits_processor(
    constraint: Any, tokenizer, *, max_tokens: int | None = None, **compile_options: Any
) -> StructgenLogitsProcessor:
    """A processor for ``constraint`` over ``tokenizer``'s vocabulary.

    Args:
        constraint: a compiled grammar (``BaseCompiledGrammar``); a spec
            (``structgen.Grammar``, ``Regex``, ...: compiled for the tokenizer); a JSON
            Schema (dict, or a pydantic model class); or a regex (str, fullmatch semantics).
        tokenizer: the Hugging Face tokenizer the model uses.
        max_tokens: per-row token budget (see ``StructgenLogitsProcessor``).
        **compile_options: passed to ``compile_json_schema`` (``whitespace``, ...).

    Raises:
        InvalidSchemaError, UnsupportedSchemaError, RegexError, InvalidGrammarError,
            GrammarTooComplexError: the constraint does not compile.
    """
    if isinstance(constraint, BaseCompiledGrammar):
        grammar = constraint
    else:
        vocab = Vocabulary.from_tokenizer(tokenizer)
        if isinstance(constraint, BaseSpec):
            grammar = constraint.compile(vocab)
        elif isinstance(constraint, str):
            grammar = compile_regex(constraint, vocab)
        else:
            grammar = compile_json_schema(constraint, vocab, **compile_options)
    return StructgenLogitsProcessor(grammar, max_tokens=max_tokens)
