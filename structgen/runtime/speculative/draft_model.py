"""Draft-model proposer: a smaller model with the target's vocabulary drafts k tokens.

The draft has its own :class:`KVPool` and a page table per request. Each step it first
catches up, in one extend over all proposing requests, on the tokens it has not
computed (the prompt the first time, then the target's own token, jump-forward text,
anything after a rejected draft: its computed tokens are compared with the request's);
the catch-up obeys the engine's ``chunked_prefill_tokens`` / ``max_batch_tokens``, so
a long prompt reaches the draft in chunks over several steps (the request does not
speculate until it has caught up). Then it decodes k - 1 more tokens
autoregressively, batched over requests. Every draft row
is masked with the request's grammar (the matcher advanced through the drafts so far,
rolled back at the end), so drafts are always grammar-valid; sampled requests draw from
``q`` = the masked draft distribution under the request's own temperature / top-k /
top-p / min-p, and ``q`` goes with the proposal for rejection sampling.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from structgen.errors import ConfigError
from structgen.kernels.apply_token_bitmask import apply_token_bitmask
from structgen.runtime.model_runner import ModelRunner
from structgen.runtime.speculative.base import BaseProposer, Proposal

__all__ = ["DraftModelProposer"]


@dataclass
class _DraftSeq:
    """The draft's KV of one request: ``tokens`` computed, in ``pages``."""

    pages: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class DraftModelProposer(BaseProposer):
    """Drafts with a second model (``config.draft_model``: a path, loaded with
    ``config.draft_quantization``, or an ``Engine`` whose weights are reused).

    Raises:
        ConfigError: the draft's tokenizer differs from the target's.
        ModelNotFoundError, ModelLoadError: the draft model cannot be loaded.
    """

    def __init__(self, engine, config) -> None:
        super().__init__(engine, config)
        src = config.draft_model
        if hasattr(src, "loaded") and hasattr(src, "runner"):  # an Engine: reuse its weights
            loaded = src.loaded
        else:
            from structgen.runtime.loader import load_model

            loaded = load_model(
                str(src),
                engine.config.torch_dtype,
                engine.device,
                quantization=config.draft_quantization,
            )
        if loaded.tokenizer is None or engine.tokenizer is None:
            if loaded.tokenizer is not engine.tokenizer or (
                loaded.config.vocab_size != engine.loaded.config.vocab_size
            ):
                raise ConfigError(
                    "the draft model and the target must both have a tokenizer (with the "
                    "same vocabulary), or neither with the same vocabulary size"
                )
        elif loaded.tokenizer.get_vocab() != engine.tokenizer.get_vocab():
            raise ConfigError("the draft model's tokenizer differs from the target's vocabulary")
        page_size = engine.pool.page_size
        kv_tokens = config.draft_max_kv_tokens or engine.pool.num_usable_pages * page_size
        # the model shapes its own pool (as the target's: Engine does the same), grown on
        # demand where the target's is
        self.pool = loaded.model.make_kv_pool(
            -(-kv_tokens // page_size) + 1,
            page_size,
            engine.pool.growth_pages,
            # a cache dtype apart from the target's compute dtype applies to the draft too;
            # else the draft's cache follows its own dtype
            kv_dtype=(
                engine.config.torch_kv_cache_dtype
                if engine.config.kv_cache_dtype != engine.config.dtype
                else None
            ),
        )
        self.runner = ModelRunner(loaded.model, self.pool, engine.device)
        self.vocab_size = engine.loaded.config.vocab_size  # width of the target's logits
        self.num_sampled_ids = engine.step_context.num_sampled_ids  # padded rows past it
        self.eos_token_ids = engine.eos_token_ids
        self.max_batch_tokens = engine.config.max_batch_tokens  # the catch-up's budgets
        self.chunked_prefill_tokens = engine.config.chunked_prefill_tokens
        self._seqs: dict[str, _DraftSeq] = {}

    # ------------------------------------------------------------------ pages
    def release(self, req) -> None:
        """Free the draft KV pages held for ``req`` (none held: no effect)."""
        seq = self._seqs.pop(req.request_id, None)
        if seq is not None:
            self.pool.free(seq.pages)

    def _free_idle(self, busy: list) -> None:
        """Free the draft KV of requests not proposing now (waiting, preempted, prefilling)."""
        keep = {r.request_id for r in busy}
        for rid in [rid for rid in self._seqs if rid not in keep]:
            self.pool.free(self._seqs.pop(rid).pages)

    def _reserve(self, seq: _DraftSeq, num_tokens: int) -> bool:
        """Hold exactly the pages of ``num_tokens`` tokens (surplus freed: rollback)."""
        need = -(-num_tokens // self.pool.page_size) - len(seq.pages)
        if need <= 0:
            if need < 0:
                self.pool.free(seq.pages[need:])
                del seq.pages[need:]
            return True
        pages = self.pool.alloc(need)
        if pages is None:
            return False
        seq.pages.extend(pages)
        return True

    def stats(self) -> dict:
        """The draft model's forward passes and its KV pool's page counts."""
        return {
            "spec_draft_forward_passes": self.runner.num_forward_passes,
            "spec_draft_pages_total": self.pool.num_usable_pages,
            "spec_draft_pages_free": self.pool.num_free_pages,
        }

    # ---------------------------------------------------------------- propose
    def _logits_to_target(self, logits: torch.Tensor) -> torch.Tensor:
        """``[B, V_draft]`` -> ``[B, V_target]`` (truncated, or padded with -inf), the
        target's padded-vocabulary columns at -inf (never proposed).
        """
        v = self.vocab_size
        if logits.shape[1] >= v:
            logits = logits[:, :v].contiguous()
        else:
            pad = logits.new_full((logits.shape[0], v - logits.shape[1]), float("-inf"))
            logits = torch.cat([logits, pad], dim=1)
        if self.num_sampled_ids is not None:
            logits[:, self.num_sampled_ids :] = float("-inf")
        return logits

    def _mask(self, logits: torch.Tensor, reqs: list) -> None:
        constrained = [i for i, r in enumerate(reqs) if r.matcher is not None]
        if not constrained:
            return
        bitmask = torch.zeros((len(constrained), -(-logits.shape[1] // 32)), dtype=torch.int32)
        for row, i in enumerate(constrained):
            reqs[i].matcher.fill_bitmask(bitmask, row)
        idx = torch.tensor(constrained, dtype=torch.int64, device=logits.device)
        apply_token_bitmask(logits, bitmask.to(logits.device), idx)

    def _catch_up(
        self, reqs: list, num_tokens: list[int]
    ) -> list[tuple[int, list[int], int, bool]]:
        """Plan the first draft forward of this step: each request's uncomputed tokens.

        The catch-up is budgeted like the target's prefill: at most
        ``chunked_prefill_tokens`` tokens of one request and ``max_batch_tokens`` in all
        (shortest catch-ups first, so the usual one-or-few-token ones always fit). A
        request whose catch-up does not fit computes a chunk without logits and drafts
        on a later step (a long prompt is prefilled into the draft over several steps).

        Returns:
            ``(request index, tokens, prefix length, wants logits)`` per row. Raises: never.
        """
        todo = []
        for i, req in enumerate(reqs):
            seq = self._seqs.setdefault(req.request_id, _DraftSeq())
            known = req.prompt_token_ids + req.output_token_ids
            keep = min(_common_prefix(seq.tokens, known), len(known) - 1)
            del seq.tokens[keep:]
            need = len(known) + num_tokens[i] - 1
            if not self._reserve(seq, need):
                self._free_idle(reqs)
                if not self._reserve(seq, need):
                    continue  # draft pool full: this request does not speculate this step
            todo.append((len(known) - keep, i, known, keep))
        budget = self.max_batch_tokens
        rows = []
        for pending, i, known, keep in sorted(todo, key=lambda t: t[0]):
            n = min(pending, self.chunked_prefill_tokens, budget)
            if n <= 0:
                break
            budget -= n
            rows.append((i, known[keep : keep + n], keep, n == pending))
            self._seqs[reqs[i].request_id].tokens = known[: keep + n]
        rows.sort(key=lambda r: r[0])
        return rows

    def _draft_tokens(self, logits, rows, reqs, num_tokens, props, probs, advanced):
        """Pick one draft token per logits row; return the next decode rows. Raises: never."""
        from structgen.runtime.sampler import draw
        from structgen.runtime.speculative.verify import target_probs

        eos = self.eos_token_ids
        nxt = []
        for row, i in enumerate(rows):
            req, seq = reqs[i], self._seqs[reqs[i].request_id]
            if req.params.is_greedy:
                tok = int(logits[row].argmax())
            else:
                q = target_probs(logits[row : row + 1], req)[0]
                tok = draw(q, req.generator)
                probs[i].append(q)
            if req.matcher is not None:
                if not req.matcher.advance(tok):  # masked row empty: stop here
                    if probs[i]:
                        probs[i].pop()
                    continue
                advanced[i] += 1
            props[i].token_ids.append(tok)
            done = (
                len(props[i].token_ids) >= num_tokens[i]
                or (tok in eos and not req.params.ignore_eos)
                or tok in (req.params.stop_token_ids or ())
                or (req.matcher is not None and req.matcher.is_terminated())
            )
            if not done:
                nxt.append((i, [tok], len(seq.tokens), True))
                seq.tokens = seq.tokens + [tok]
        return nxt

    def propose(self, reqs, num_tokens):
        """Catch up (budgeted, see :meth:`_catch_up`), then draft autoregressively,
        batched over requests, every row masked by the request's grammar.
        """
        props = [Proposal([]) for _ in reqs]
        advanced = [0] * len(reqs)
        probs: list[list[torch.Tensor]] = [[] for _ in reqs]
        try:
            with torch.inference_mode():
                batch = self._catch_up(reqs, num_tokens)
                while batch:
                    pages = [self._seqs[reqs[i].request_id].pages for i, _, _, _ in batch]
                    want = [r for r, b in enumerate(batch) if b[3]]
                    logits = self.runner.forward(
                        [b[1] for b in batch], [b[2] for b in batch], pages, logits_rows=want
                    )
                    self.num_forward_passes += 1
                    if not want:
                        break
                    active = [batch[r][0] for r in want]
                    logits = self._logits_to_target(logits)
                    self._mask(logits, [reqs[i] for i in active])
                    batch = self._draft_tokens(
                        logits, active, reqs, num_tokens, props, probs, advanced
                    )
        finally:
            for i, req in enumerate(reqs):
                if req.matcher is not None:
                    req.matcher.rollback(advanced[i])
        for i, prop in enumerate(props):
            if probs[i] and len(probs[i]) == len(prop.token_ids):
                prop.probs = torch.stack(probs[i])
        return props
