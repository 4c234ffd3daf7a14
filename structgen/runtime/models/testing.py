"""Conveniences for tests and notebooks: run whole sequences through a model over paged KV.

Not used by the engine (which plans its own batches); kept small and explicit.
"""

from __future__ import annotations

import random

import torch

from structgen.runtime.forward_batch import ForwardBatch
from structgen.runtime.kv_pool import KVPool

__all__ = ["PagedSequences"]


class PagedSequences:
    """A KV pool plus page tables for a few sequences, stepped with ragged batches.

    Args:
        model: a model with ``make_kv_pool`` and ``forward(batch, kv)``.
        num_pages: pool size (including the scratch page).
        page_size: tokens per page.
        shuffle_pages: hand pages out in a random order (seeded), so tests cover
            non-contiguous page tables.
        kv_dtype: the pool's storage dtype (None: the model's; as ``kv_cache_dtype``).
    """

    def __init__(
        self,
        model,
        num_pages: int = 256,
        page_size: int = 4,
        shuffle_pages: bool = True,
        seed: int = 0,
        kv_dtype: torch.dtype | None = None,
    ) -> None:
        self.model = model
        self.page_size = page_size
        self.kv: KVPool = model.make_kv_pool(num_pages, page_size, kv_dtype=kv_dtype)
        if shuffle_pages:
            random.Random(seed).shuffle(self.kv._free)
        self.tokens: dict[int, list[int]] = {}  # sequence id -> tokens whose K/V are cached
        self.pages: dict[int, list[int]] = {}

    def _reserve(self, sid: int, total: int) -> None:
        pages = self.pages.setdefault(sid, [])
        need = -(-total // self.page_size) - len(pages)
        if need > 0:
            got = self.kv.alloc(need)
            assert got is not None, "KV pool exhausted"
            pages.extend(got)

    def step(
        self, chunks: dict[int, list[int]], all_logits: bool = False
    ) -> dict[int, torch.Tensor]:
        """Extend each sequence ``sid`` by ``chunks[sid]`` in ONE ragged forward.

        Returns:
            ``sid -> logits``: ``[len(chunk), vocab]`` if ``all_logits`` else ``[vocab]`` (last
            token).
        """
        sids = list(chunks)
        prefix = [len(self.tokens.get(s, [])) for s in sids]
        for s, p in zip(sids, prefix):
            self._reserve(s, p + len(chunks[s]))
        batch = ForwardBatch.build(
            [chunks[s] for s in sids], prefix, [self.pages[s] for s in sids], self.page_size
        )
        if all_logits:
            batch.logits_indices = torch.arange(batch.num_tokens, device=batch.input_ids.device)
        logits = self.model(batch, self.kv)
        out: dict[int, torch.Tensor] = {}
        start = 0
        for i, s in enumerate(sids):
            n = len(chunks[s])
            out[s] = logits[start : start + n] if all_logits else logits[i]
            start += n
            self.tokens.setdefault(s, []).extend(chunks[s])
        return out

    def greedy(self, prompts: dict[int, list[int]], max_new_tokens: int) -> dict[int, list[int]]:
        """Prefill all prompts in one step, then decode all sequences together, greedily."""
        last = self.step(prompts)
        out = {s: [int(last[s].argmax())] for s in prompts}
        for _ in range(max_new_tokens - 1):
            last = self.step({s: [out[s][-1]] for s in prompts})
            for s in prompts:
                out[s].append(int(last[s].argmax()))
        return out
