"""Verification of proposed tokens inside the engine's continuous batch.

Per step, :class:`SpeculativeDecoder`:

1. :meth:`~SpeculativeDecoder.propose` (before scheduling): asks the proposer for up to k
   tokens for every decoding request that may speculate, cuts each proposal at the
   first token the request's grammar rejects (``matcher.validate``) and stores it as
   ``req.draft_token_ids``: the scheduler sees them as more tokens to compute, so a
   speculating request's chunk is ``[last sampled token, d1 .. dk]``.
2. after scheduling, :meth:`~SpeculativeDecoder.trim` drops drafts that did not make it
   into the batch (token budget, preemption).
3. the target's one ragged forward returns logits at all ``m + 1`` positions of such a
   chunk; :meth:`~SpeculativeDecoder.verify` masks every row with the grammar (the
   matcher advanced through the drafts, then rolled back), and accepts: greedy, the
   longest prefix agreeing with the target's argmax plus the target's own next token;
   sampled, rejection sampling (Leviathan et al. 2023, Chen et al. 2023): draft ``d``
   kept with probability ``min(1, p(d) / q(d))``, on rejection a token drawn from
   ``norm(max(p - q, 0))``; with every draft kept, a bonus token drawn from ``p``. A
   point-mass proposal (n-gram) has ``q = onehot(d)``. The output distribution is the
   target's (``p`` is the distribution the plain sampler would draw from: grammar mask,
   ``min_tokens`` EOS ban, temperature, top-k / top-p / min-p).
4. ``Scheduler.update_from_output`` sets ``num_computed_tokens`` to the verified length (the radix
cache only
   ever receives computed, hence verified, tokens; pages past the known tokens go back
   to the pool, ``Scheduler.trim_pages``) and applies the accepted tokens as if sampled
   one by one, stopping after the first one at which the grammar forces text: plain
   decoding jump-forwards there with a canonical retokenization, so the later tokens
   (verified on the draft's spelling) are dropped (:meth:`SpeculativeDecoder.discard`)
   and the jump-forward text is appended as already-verified tokens instead.

Requests whose params need per-position logits processing (penalties, logit bias,
logprobs) do not speculate (``SamplingParams.can_speculate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from structgen.runtime.request import Request, RequestStatus
from structgen.runtime.sampler import draw, filter_probs, uniforms

if TYPE_CHECKING:
    import torch

    from structgen.runtime.config import SpeculativeConfig
    from structgen.runtime.scheduler import SchedulerOutput
    from structgen.runtime.speculative.base import BaseProposer
    from structgen.runtime.step import StepContext
    from structgen.runtime.step_masks import StepMasks

__all__ = ["SpeculativeDecoder", "accept_greedy", "accept_sampled", "target_probs"]


def target_probs(logits: torch.Tensor, req: Request) -> torch.Tensor:
    """``[M, V]`` the distribution the plain sampler draws from, for already masked rows."""
    import torch

    p = req.params
    probs = torch.softmax(logits.float() / p.temperature, dim=-1)
    return filter_probs(probs, [p] * logits.shape[0])


def accept_greedy(logits: torch.Tensor, drafts: list[int]) -> tuple[list[int], int]:
    """Longest prefix of ``drafts`` equal to the row-wise argmax, plus the next argmax.

    Args:
        logits: ``[m + 1, V]`` masked; row ``j`` predicts the token after ``drafts[:j]``.
        drafts: the ``m`` proposed tokens.

    Returns:
        (tokens to append, number of drafts accepted).
    """
    best = logits.argmax(dim=-1).tolist()  # [m + 1]
    n = 0
    while n < len(drafts) and drafts[n] == best[n]:
        n += 1
    return drafts[:n] + [best[n]], n


def accept_sampled(
    probs: torch.Tensor,
    drafts: list[int],
    draft_probs: torch.Tensor | None,
    gen,
) -> tuple[list[int], int]:
    """Speculative rejection sampling (Leviathan et al. 2023, algorithm 1).

    Args:
        probs: ``[m + 1, V]`` target distributions ``p`` per position.
        drafts: the ``m`` proposed tokens.
        draft_probs: ``[m, V]`` the distributions ``q`` the drafts were drawn from, or
            None for a point mass on each draft.
        gen: the request's generator (``sampler.make_generator``; None = the default one).

    Returns:
        (tokens to append, number of drafts accepted).
    """
    m = len(drafts)
    if m:
        u = uniforms(m, gen, probs.device)
    for j, d in enumerate(drafts):
        pd = float(probs[j, d])
        qd = float(draft_probs[j, d]) if draft_probs is not None else 1.0
        if qd > 0 and u[j] < pd / qd:
            continue
        if draft_probs is not None:
            residual = (probs[j] - draft_probs[j]).clamp_min(0)
        else:
            residual = probs[j].clone()
            residual[d] = 0.0  # max(p - onehot(d), 0)
        if float(residual.sum()) <= 0:  # p == q: rejection had probability 0
            residual = probs[j]
        return drafts[:j] + [draw(residual, gen)], j
    return list(drafts) + [draw(probs[m], gen)], m


class SpeculativeDecoder:
    """Proposal, trimming, verification and counters of speculative decoding.

    Args:
        proposer: drafts tokens (``make_proposer``).
        config: the speculative settings.
        context: the engine's step settings (EOS ids, request token limit).
    """

    def __init__(
        self, proposer: BaseProposer, config: SpeculativeConfig, context: StepContext
    ) -> None:
        self.context = context
        self.config = config
        self.proposer = proposer
        self._drafted: list[Request] = []  # requests given drafts by the last propose()
        self.num_proposed = 0
        self.num_accepted = 0
        self.num_verify_steps = 0  # request-steps that verified >= 1 draft
        self.num_emitted = 0  # tokens those steps emitted (accepted + the target's own)
        self.num_discarded = 0  # drafts the target agreed with but the engine dropped

    # --------------------------------------------------------------- propose
    def _num_tokens(self, req: Request) -> int:
        """K for this request now: its adaptive k, capped by ``max_tokens`` and context."""
        k = req.spec_num_tokens or self.config.num_tokens
        room_out = req.params.max_tokens - len(req.output_token_ids) - 1
        room_ctx = self.context.max_request_tokens - req.num_tokens - 1
        return max(0, min(k, room_out, room_ctx))

    def propose(self, running: list[Request]) -> None:
        """Set ``draft_token_ids`` of every decoding request that may speculate."""
        reqs, ks = [], []
        for req in running:
            req.clear_drafts()
            if (
                req.status != RequestStatus.RUNNING
                or not req.params.can_speculate
                or not req.output_token_ids
                or req.num_tokens_to_compute != 1
            ):
                continue
            if req.matcher is not None and req.matcher.is_terminated():
                continue
            k = self._num_tokens(req)
            if k > 0:
                reqs.append(req)
                ks.append(k)
        self._drafted = []
        if not reqs:
            return
        proposals = self.proposer.propose(reqs, ks)
        eos = self.context.eos_token_ids
        for req, k, prop in zip(reqs, ks, proposals):
            tokens = list(prop.token_ids[:k])
            if req.matcher is not None:
                tokens = tokens[: req.matcher.validate(tokens)]
            for i, t in enumerate(tokens):  # nothing follows an EOS / stop token
                if (t in eos and not req.params.ignore_eos) or t in (
                    req.params.stop_token_ids or ()
                ):
                    tokens = tokens[: i + 1]
                    break
            req.draft_token_ids = tokens
            self._drafted.append(req)
            if prop.probs is not None and tokens and not req.params.is_greedy:
                req.draft_probs = prop.probs[: len(tokens)]

    def trim(self, plan: SchedulerOutput) -> None:
        """Keep only the drafts that the scheduled chunk covers."""
        planned = {id(req) for req, _ in plan}
        for req in self._drafted:  # not scheduled: e.g. preempted this step
            if req.draft_token_ids and id(req) not in planned:
                req.clear_drafts()
        self._drafted = []
        for req, num in plan:
            if not req.draft_token_ids:
                continue
            covered = req.num_computed_tokens + num - req.num_tokens
            if covered <= 0:
                req.clear_drafts()
            elif covered < len(req.draft_token_ids):
                req.draft_token_ids = req.draft_token_ids[:covered]
                if req.draft_probs is not None:
                    req.draft_probs = req.draft_probs[:covered]

    # ---------------------------------------------------------------- verify
    def _mask(
        self, logits: torch.Tensor, items: list[tuple[Request, int]], masks: StepMasks | None
    ) -> None:
        """Grammar bitmask and ``min_tokens`` ban on every verified row, in place.

        Row ``lo + j`` of request ``req`` is masked with its matcher advanced through
        ``draft_token_ids[:j]`` (rolled back afterwards); rows computed ahead
        (``masks``) are copied instead.
        """
        import torch

        from structgen.kernels.apply_token_bitmask import apply_token_bitmask

        words = -(-logits.shape[1] // 32)
        bitmask = torch.full((logits.shape[0], words), -1, dtype=torch.int32)
        constrained: list[int] = []  # rows with a grammar
        eos = self.context.eos_token_ids
        for req, lo in items:
            drafts = req.draft_token_ids
            m = req.matcher
            ahead = None
            if m is not None and masks is not None and masks.num_words == words:
                ahead = masks.rows_of(req, len(drafts) + 1)
            if ahead is not None:
                bitmask[lo : lo + len(drafts) + 1] = masks.bitmask[ahead]
                constrained.extend(range(lo, lo + len(drafts) + 1))
            elif m is not None:
                advanced = 0
                try:
                    for j in range(len(drafts) + 1):
                        m.fill_bitmask(bitmask, lo + j)
                        if j == len(drafts):
                            break
                        if not m.advance(drafts[j]):  # validated at proposal: not expected
                            del drafts[j:]
                            break
                        advanced += 1
                except Exception as exc:  # e.g. GrammarTooComplexError building a state
                    req.finish("error", f"grammar failed: {type(exc).__name__}: {exc}")
                m.rollback(advanced)
                constrained.extend(range(lo, lo + len(drafts) + 1))
            p = req.params
            banned = set(p.stop_token_ids or ()) | (set() if p.ignore_eos else set(eos))
            for j in range(len(drafts) + 1):
                if banned and len(req.output_token_ids) + j < p.min_tokens:
                    logits[lo + j, list(banned)] = float("-inf")
        if constrained:
            idx = torch.tensor(constrained, dtype=torch.int64)
            apply_token_bitmask(logits, bitmask[idx].to(logits.device), idx.to(logits.device))

    def verify(
        self,
        logits: torch.Tensor,
        items: list[tuple[Request, int]],
        masks: StepMasks | None = None,
    ) -> list[list[int]]:
        """Accept drafts and pick the target's next token for each speculating request.

        Args:
            logits: ``[R, V]`` float32; request ``req`` of ``items`` owns rows
                ``lo .. lo + len(req.draft_token_ids)``. Modified in place (masked).
            items: ``(request, first row)`` pairs.
            masks: the step's grammar rows computed during the forward
                (``runtime.step_masks.StepMasks``, waited for), or None: masked here.

        Returns:
            Per request, the tokens to append (accepted drafts, then the target's token).
            Counters and the request's adaptive k are updated here. Raises: never.
        """
        self._mask(logits, items, masks)
        out = []
        for req, lo in items:
            drafts = req.draft_token_ids
            rows = logits[lo : lo + len(drafts) + 1]
            if req.params.is_greedy:
                tokens, n_acc = accept_greedy(rows, drafts)
            else:
                tokens, n_acc = accept_sampled(
                    target_probs(rows, req), drafts, req.draft_probs, req.generator
                )
            self._count(req, len(drafts), n_acc)
            out.append(tokens)
        return out

    def _count(self, req: Request, num_proposed: int, num_accepted: int) -> None:
        if not num_proposed:
            return
        req.spec_proposed_tokens += num_proposed
        req.spec_accepted_tokens += num_accepted
        self.num_proposed += num_proposed
        self.num_accepted += num_accepted
        self.num_verify_steps += 1
        self.num_emitted += num_accepted + 1
        if self.config.adaptive:
            # expected run length of a geometric acceptance with the request's running rate
            rate = (req.spec_accepted_tokens + 1) / (req.spec_proposed_tokens + 2)
            k = 1 + int(rate / max(1e-6, 1 - rate))
            req.spec_num_tokens = max(1, min(self.config.num_tokens, k))

    def discard(self, req: Request, num_tokens: int) -> None:
        """Uncount the last ``num_tokens`` tokens of the request's latest verification
        (accepted drafts and the target's token) that the engine did not apply: the
        request finished before them, or the grammar forced text there (see
        ``step.process_tokens``). Raises: never.
        """
        if num_tokens <= 0:
            return
        drafts = num_tokens - 1  # the target's own token is the last one
        req.spec_accepted_tokens -= drafts
        self.num_accepted -= drafts
        self.num_discarded += drafts
        self.num_emitted -= num_tokens

    # ----------------------------------------------------------------- misc
    def release(self, req: Request) -> None:
        """Forget a finished request (drafts and proposer state)."""
        req.clear_drafts()
        self.proposer.release(req)

    def stats(self) -> dict:
        """``spec_*`` counters for ``Engine.stats()``."""
        return {
            "spec_proposed_tokens": self.num_proposed,
            "spec_accepted_tokens": self.num_accepted,
            "spec_acceptance_rate": self.num_accepted / max(1, self.num_proposed),
            "spec_mean_accepted_length": self.num_emitted / max(1, self.num_verify_steps),
            "spec_verify_steps": self.num_verify_steps,
            "spec_discarded_tokens": self.num_discarded,
            **self.proposer.stats(),
        }
