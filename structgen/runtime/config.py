"""EngineConfig: the one frozen dataclass holding every engine setting."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from structgen.env import cuda_visible_devices
from structgen.errors import ConfigError, unknown_keyword_error

if TYPE_CHECKING:  # torch is imported where a torch dtype is asked for, not by this module
    import torch

__all__ = [
    "EngineConfig",
    "SpeculativeConfig",
    "auto_device",
    "model_context_length",
    "model_context_limit",
    "torch_dtype",
]

DTYPES = ("float32", "bfloat16", "float16")  # the dtype names a config holds (torch's names)
_ATTENTION_BACKENDS = ("auto", "triton", "torch")
_ACTIVATION_DTYPES = ("auto", "int8", "float32")


@dataclass(frozen=True)
class SpeculativeConfig:
    """Speculative decoding settings (``Engine(model, speculative=...)``).

    Attributes:
        method: a registered proposer: ``"ngram"`` (prompt lookup) or ``"draft"`` (a
            smaller model sharing the target's vocabulary); see
            ``structgen.runtime.speculative.register_proposer``.
        num_tokens: k, the most tokens proposed per request per step.
        adaptive: choose k per request from its running acceptance rate (at most
            ``num_tokens``); False = always ``num_tokens``.
        draft_model: for ``"draft"``: a model path (``.gguf`` file or Hugging Face folder)
            or an ``Engine`` whose model is reused (its KV is not: the proposer owns a pool).
        draft_max_kv_tokens: KV capacity of the draft's own pool, tokens; None = the
            target's capacity.
        draft_quantization: for a ``draft_model`` path: load the draft quantized (any
            ``EngineConfig.quantization`` value, e.g. ``"int4"``: the same checkpoint as
            the target, smaller and cheaper); None = the target's ``dtype``. An
            ``Engine`` draft keeps its own quantization.
        ngram_min / ngram_max: for ``"ngram"``: the n-gram lengths tried, longest first.

    Raises:
        ConfigError: an invalid field.
    """

    method: str = "ngram"
    num_tokens: int = 4
    adaptive: bool = False
    draft_model: Any = None
    draft_max_kv_tokens: int | None = None
    draft_quantization: str | None = None
    ngram_min: int = 1
    ngram_max: int = 4

    def __post_init__(self) -> None:
        if not isinstance(self.method, str):
            raise ConfigError(f"speculative method must be a string, got {self.method!r}")
        if not isinstance(self.num_tokens, int) or not 1 <= self.num_tokens <= 32:
            raise ConfigError(
                f"speculative num_tokens must be an int in [1, 32], got {self.num_tokens!r}"
            )
        if not isinstance(self.ngram_min, int) or not 1 <= self.ngram_min <= self.ngram_max:
            raise ConfigError("speculative ngram_min must be an int in [1, ngram_max]")
        if self.method == "draft" and self.draft_model is None:
            raise ConfigError(
                'speculative method "draft" needs "draft_model" (a path or an Engine)'
            )
        if self.draft_quantization is not None:
            from structgen.runtime.quantization import check_quantization

            check_quantization(self.draft_quantization)
            if hasattr(self.draft_model, "loaded"):
                raise ConfigError(
                    "speculative draft_quantization applies to a draft_model path; "
                    "an Engine draft keeps its own (Engine(..., quantization=...))"
                )

    @classmethod
    def parse(cls, value: Any) -> "SpeculativeConfig | None":
        """From ``None``, a method name, a dict of fields or a SpeculativeConfig.

        Raises:
            ConfigError: unknown keys or invalid values.
        """
        if value is None or value is False:
            return None
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls(method=value)
        if isinstance(value, dict):
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(value) - names)
            if unknown:
                raise ConfigError(
                    f"unknown speculative setting(s) {unknown}; known: {sorted(names)}"
                )
            return cls(**value)
        raise ConfigError(
            f"speculative must be None, a method name or a dict, got {type(value).__name__}"
        )


def _checkpoint_dtype(model: str | None) -> str | None:
    """The dtype a Hugging Face folder's ``config.json`` says its weights are stored in
    (``torch_dtype``, or ``dtype`` as newer transformers write it), or None: not a folder, no
    such key, or an unreadable file (the loader reports those). Raises: never.
    """
    if model is None or not os.path.isdir(model):
        return None
    try:
        with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        return None
    dtype = cfg.get("torch_dtype", cfg.get("dtype")) if isinstance(cfg, dict) else None
    return dtype if isinstance(dtype, str) else None


def torch_dtype(dtype: "str | torch.dtype | None") -> "torch.dtype":
    """The ``torch.dtype`` of a dtype name (:data:`DTYPES`), for the code that builds torch
    tensors from a config's names; a ``torch.dtype`` is returned as it is, None is
    ``torch.float32``. Imports torch.

    Raises:
        ConfigError: a name not in :data:`DTYPES`.
    """
    import torch

    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; known: {sorted(DTYPES)}")
    return getattr(torch, dtype)


# Files that exist where a GPU torch could use may be present: an NVIDIA driver (its
# /proc entry exists as soon as the kernel module is loaded, before any /dev node), its
# device nodes (a container given GPUs), WSL's GPU (/dev/dxg) and AMD's ROCm (/dev/kfd)
_GPU_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg", "/dev/kfd")


def auto_device(environ: "Mapping[str, str] | None" = None) -> str:
    """``device="auto"`` resolved, asking torch only where a GPU may be present.

    ``"cuda"`` where ``torch.cuda.is_available()``, else ``"cpu"``; torch (about a second to
    import) is imported to be asked only where a GPU may be present:

    1. torch already imported: it is asked (as every engine did before).
    2. ``CUDA_VISIBLE_DEVICES`` set to ``""`` or ``"-1"`` (every device hidden): ``"cpu"``.
    3. Linux: a GPU driver's file (``/proc/driver/nvidia``, ``/dev/nvidiactl``,
       ``/dev/nvidia0``, WSL's ``/dev/dxg``, ROCm's ``/dev/kfd``) exists: torch is imported
       and asked; none exists: ``"cpu"`` (no CUDA device without a driver).
    4. macOS: ``"cpu"`` (torch has no CUDA there).
    5. Elsewhere (Windows): torch is imported and asked.

    So a machine with a usable GPU gets ``"cuda"`` as before, and a machine without one
    resolves ``"cpu"`` without importing torch. Where a driver is present but torch cannot
    use it (a CPU build of torch), the answer is still torch's (``"cpu"``), at torch's
    import time.

    Args:
        environ: the environment to read ``CUDA_VISIBLE_DEVICES`` from; None = ``os.environ``.

    Raises: never.
    """
    if "torch" not in sys.modules:
        visible = cuda_visible_devices(environ)
        if visible is not None and visible.strip() in ("", "-1"):
            return "cpu"
        if sys.platform == "darwin":
            return "cpu"
        if sys.platform.startswith("linux") and not any(Path(f).exists() for f in _GPU_FILES):
            return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _cpu_ops_available() -> bool:
    """``structgen.runtime.cpu.ops.kernel_available()`` without importing that module (it
    imports torch) when it is not imported yet: then its switch is at its default (on), and
    the answer is whether the C extension (torch-free) is built.
    """
    ops = sys.modules.get("structgen.runtime.cpu.ops")
    if ops is not None:
        return ops.kernel_available()
    try:
        from structgen.runtime.cpu import _cpuops  # noqa: F401
    except ImportError:  # pragma: no cover - depends on the build
        return False
    return True


def _auto_kv_cache_dtype(
    device: str, dtype: str, quantization: str | None, activation_dtype: str, backend: str
) -> str:
    """``kv_cache_dtype="auto"`` resolved (the other fields already resolved).

    float16 for a CPU engine of float32 compute whose quantized matmuls take int8
    activations (``quantization`` set, ``activation_dtype`` not ``"float32"``: the default
    GGUF engine) and whose attention runs the C kernels (built, ``attention_backend``
    ``"auto"``): its outputs are already not float32-exact, and a float16 cache is faster
    there with quality within run-to-run noise (benchmarks/RESULTS.md, "Session 25, k7").
    Otherwise the compute dtype: float weights, or float32 activations, keep the float32
    cache that is exact against the float32 reference; CUDA keeps its compute dtype.
    """
    if (
        device == "cpu"
        and dtype == "float32"
        and quantization is not None
        and activation_dtype != "float32"
        and backend == "auto"
    ):
        if _cpu_ops_available():
            return "float16"
    return dtype


# the config fields a model's context length is read from (vLLM's list; the smallest wins)
_CONTEXT_FIELDS = (
    "max_position_embeddings",  # Llama, Qwen, Mixtral, DeepSeek (and ModelConfig)
    "n_positions",  # GPT-2
    "max_seq_len",  # MPT
    "seq_length",  # ChatGLM
    "max_target_positions",  # Whisper
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
# rope types whose max_position_embeddings is already the scaled length (vLLM's list)
_SCALED_ROPE_TYPES = ("su", "longrope", "llama3")


def model_context_limit(model_config: Any) -> tuple[int, str] | None:
    """The longest context, in tokens, a model's config allows, as vLLM derives it
    (``vllm.config``'s ``_get_and_verify_max_len``), with the fields it comes from.

    The smallest of the config's position fields (:data:`_CONTEXT_FIELDS`), or its
    ``model_max_length`` where set; then RoPE scaling (``rope_parameters``, or
    ``rope_scaling`` of older transformers configs): a ``linear``, ``dynamic`` or ``yarn``
    type multiplies it by ``factor`` (``yarn``: ``original_max_position_embeddings`` times
    ``factor``); ``llama3``, ``longrope`` and ``su`` configs already give the scaled length.

    Args:
        model_config: a transformers config or ``ModelConfig`` (read by attribute).

    Returns:
        ``(limit, what it comes from)``, e.g. ``(8192, "max_position_embeddings")``, or None
        where the config has none of those fields (no fixed limit).

    Raises: never.
    """
    limit, source = None, None
    for name in _CONTEXT_FIELDS:
        value = getattr(model_config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            if limit is None or value < limit:
                limit, source = value, name
    value = getattr(model_config, "model_max_length", None)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        limit, source = value, "model_max_length"
    if limit is None:
        return None
    rope = getattr(model_config, "rope_parameters", None) or getattr(
        model_config, "rope_scaling", None
    )
    if isinstance(rope, dict):
        kind = rope.get("rope_type", rope.get("type", "default")) or "default"
        factor = rope.get("factor", 1.0)
        if kind not in _SCALED_ROPE_TYPES and isinstance(factor, (int, float)) and factor != 1:
            if kind == "yarn" and rope.get("original_max_position_embeddings"):
                limit = int(rope["original_max_position_embeddings"])
                source = "original_max_position_embeddings"
            source = f"{source} {limit} x {kind} rope scaling factor {factor:g}"
            limit = int(limit * factor)
    return limit, source


# transformers' model_max_length of a tokenizer whose files name none (VERY_LARGE_INTEGER)
_UNSET_MODEL_MAX_LENGTH = int(1e30)
DEFAULT_CONTEXT_LENGTH = 2048  # a model whose config and tokenizer name no limit (vLLM's)


def model_context_length(model_config: Any, tokenizer: Any = None) -> int:
    """A model's own context length, in tokens (prompt + output): the loaders'
    ``LoadedModel.max_model_len``, and so the engine's where ``max_model_len`` is unset.

    :func:`model_context_limit`'s limit (the one rule ``EngineConfig.context_length`` checks
    a given ``max_model_len`` against, RoPE scaling included); where the config names none,
    the tokenizer's ``model_max_length`` where its files set one, else
    :data:`DEFAULT_CONTEXT_LENGTH` (vLLM's default for such a model).

    Args:
        model_config: a transformers config or ``ModelConfig`` (read by attribute).
        tokenizer: the model's tokenizer, or None.

    Raises: never.
    """
    found = model_context_limit(model_config)
    if found is not None:
        return found[0]
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < _UNSET_MODEL_MAX_LENGTH:
        return value
    return DEFAULT_CONTEXT_LENGTH


@dataclass(frozen=True)
class EngineConfig:
    """Every engine setting, validated at construction.

    Attributes:
        model: path of a ``.gguf`` file or a Hugging Face folder; None = packaged SmolLM2.
        dtype: compute dtype name: ``"float32"``, ``"bfloat16"``, ``"float16"`` or ``"auto"``
            (bfloat16 on CUDA; on CPU bfloat16 for a Hugging Face folder whose
            ``config.json`` stores bfloat16 weights, where it decodes faster than widening
            them to float32 (RESULTS.md, session 30), else float32).
        kv_cache_dtype: storage dtype of the KV cache, independent of ``dtype`` (vLLM's
            ``kv_cache_dtype``): ``"auto"`` (the compute dtype), ``"float32"``,
            ``"bfloat16"`` or ``"float16"``. K/V are rounded to it when stored and widened
            to the compute dtype when read (attention math stays in float32 accumulation);
            a 16-bit cache halves the memory per token and the bytes attention reads. On CPU
            the C kernels read and write fp32, bf16 and fp16 caches (fp16 widened with F16C).
            Every cache dtype rounds per element, so greedy output does not depend on batch
            composition with any of them. ``"auto"``: ``"float16"`` on CPU for a quantized
            engine with int8 activations over the C kernels (the default GGUF engine, whose
            outputs are not float32-exact anyway: the faster cache, quality within noise,
            benchmarks/RESULTS.md "Session 25, k7"); else the compute dtype (float weights
            or ``activation_dtype="float32"``: float32 on CPU, exact against the float32
            reference; CUDA: its compute dtype).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``.
        max_kv_tokens: KV cache capacity in tokens (rounded up to whole pages); None = on
            CPU ``min(max_model_len * max_running_requests, kv_memory_fraction * available
            RAM)``, on CUDA ``kv_memory_fraction`` of the GPU memory left free after the
            weights are loaded. On CPU the pool's storage grows on demand up to it; on CUDA
            it is preallocated (CUDA graphs capture its pointers).
        kv_memory_fraction: share of the memory available after loading (free GPU memory on
            CUDA, available RAM on CPU) the default ``max_kv_tokens`` may take.
        page_size: tokens per KV page.
        max_batch_tokens: most tokens one forward pass computes, all requests together.
        chunked_prefill_tokens: most tokens of one request per forward (longer prompts are
            prefilled in chunks, interleaved with other requests' decode steps).
        max_running_requests: most requests decoding at once (the scoring requests of
            ``extract`` included). On CPU the fused step runs a step's rows as calls of 64
            rows, so admitting more requests makes steps fewer, not rows cheaper: 64 and 256
            gave the same per-card CPU on a 200-document ``extract`` (benchmarks/RESULTS.md
            "Session 28, c10").
        max_model_len: context limit in tokens; None = the model's own
            (:func:`model_context_length`). More than the model's config allows (its
            positions, times its RoPE scaling factor: vLLM's rule) is refused when the
            model loads (``context_length``).
        prefix_cache: reuse KV of shared prefixes through the radix cache.
        schedule_policy: ``"lpm"`` (longest cached prefix first) or ``"fcfs"``.
        num_threads: torch intra-op threads on CPU; None keeps torch's default. Set, it
            imports torch (``torch.set_num_threads``).
        jump_forward: append forced grammar text without sampling.
        speculative: speculative decoding: None (off), a method name (``"ngram"``,
            ``"draft"``), a dict of :class:`SpeculativeConfig` fields, or one; normalised
            to a SpeculativeConfig.
        quantization: weight quantization: None (weights in ``dtype``), ``"int8"`` (per
            output channel), ``"int4"`` / ``"int4-g32"`` / ``"int4-g64"`` / ``"int4-g128"``
            (group-wise with zero points), ``"gguf"`` (keep a GGUF file's Q8_0/Q4_0/Q4_1/Q6_K
            blocks quantized in memory) or ``"auto"`` (the default: ``"gguf"`` for a GGUF
            file on one CPU process, the fastest configuration whose greedy output does not
            depend on batch composition; None otherwise). ``None`` (float weights, a GGUF file
            dequantized) is the configuration exact against transformers. See
            ``structgen.runtime.quantization``.
        tensor_parallel_size: ranks that split every layer (Megatron-style; needs float
            weights, ``quantization=None``); ranks 1.. are worker processes. See
            ``structgen.runtime.distributed``.
        data_parallel_size: engine replicas (processes) behind a prefix-cache-aware router;
            ``Engine(...)`` then returns a ``DataParallelEngine``.
        dist_timeout_s: seconds a collective may wait for another rank before the engine
            fails with ``DistributedError`` (a dead rank is usually reported at once).
        cuda_graph: on CUDA, replay decode steps from CUDA graphs captured at start-up for
            batch-size buckets (``structgen.runtime.cuda_graph``); ignored on CPU.
        cuda_graph_max_batch: largest decode batch replayed from a graph (capped by
            ``max_running_requests``); larger steps run eagerly.
        attention_backend: paged attention and KV stores: ``"auto"`` (Triton kernels on
            CUDA; on CPU the fused C ops, else torch), ``"triton"`` (the kernels; on CPU only
            under Triton's interpreter, for tests) or ``"torch"`` (the references). Anything
            but ``"auto"`` also turns off the fused CPU decode step. See
            ``structgen.runtime.models.attention``.
        activation_dtype: activations of the quantized matmuls on CPU (with
            ``quantization`` set; float weights ignore it): ``"int8"`` (the C kernel
            quantizes them per block of 32, as llama.cpp's Q8_0 activations: faster,
            relative error ~1e-2; torch's packed kernels, used where the C kernel is not
            built, take bfloat16 activations), ``"float32"`` (exact: the dequantized-weight
            reference up to summation order) or ``"auto"`` (``"int8"``).
        grammar_threads: threads that compute grammar masks (``fsm.grammar_pool``): 0 =
            on the engine thread when sampling; n >= 1 = a step's masks are computed on
            a pool while the forward runs, cold rows of different grammars by n threads
            in parallel; ``"auto"`` = 0 on CPU (the forward's kernel threads hold the
            cores: measured in ``benchmarks/RESULTS.md``), ``min(4, cores)`` on CUDA.
        grammar_cache_bytes: byte bound of the masks' head parts shared by every
            grammar of the engine's vocabulary (``fsm.index.lexical_masks``: the inside
            of a JSON string, a number, reused by new schemas), an LRU; None keeps the
            vocabulary's bound (``DEFAULT_CAPACITY_BYTES``, 64 MiB), 0 turns sharing
            off. The cache belongs to the vocabulary, so engines of one tokenizer in a
            process share it and the last bound set applies. Size and hit rate in
            ``Engine.stats()`` (``lexical_cache_*``).

    Raises:
        ConfigError: a field is invalid (the message names it).
    """

    model: str | None = None
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    device: str = "auto"
    max_kv_tokens: int | None = None
    kv_memory_fraction: float = 0.85
    page_size: int = 16
    max_batch_tokens: int = 2048
    chunked_prefill_tokens: int = 512
    max_running_requests: int = 64
    max_model_len: int | None = None
    prefix_cache: bool = True
    schedule_policy: str = "lpm"
    num_threads: int | None = None
    jump_forward: bool = True
    speculative: Any = None
    quantization: str | None = "auto"
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    dist_timeout_s: float = 60.0
    cuda_graph: bool = True
    cuda_graph_max_batch: int = 64
    attention_backend: str = "auto"
    activation_dtype: str = "auto"
    grammar_threads: int | str = "auto"
    grammar_cache_bytes: int | None = None

    def __post_init__(self) -> None:
        from structgen.runtime.quantization import check_quantization

        if self.model is not None and not isinstance(self.model, (str, os.PathLike)):
            raise ConfigError(
                "EngineConfig.model must be the path (str or os.PathLike) of a .gguf file or "
                "a Hugging Face folder, or None for the packaged SmolLM2; got "
                f"{type(self.model).__name__}"
            )
        if self.quantization != "auto":
            check_quantization(self.quantization)  # raises ConfigError naming the method
        object.__setattr__(self, "speculative", SpeculativeConfig.parse(self.speculative))
        if self.dtype != "auto" and self.dtype not in DTYPES:
            raise ConfigError(
                f"EngineConfig.dtype must be 'auto' or one of {sorted(DTYPES)}, got {self.dtype!r}"
            )
        if self.kv_cache_dtype != "auto" and self.kv_cache_dtype not in DTYPES:
            raise ConfigError(
                f"EngineConfig.kv_cache_dtype must be 'auto' or one of {sorted(DTYPES)}, "
                f"got {self.kv_cache_dtype!r}"
            )
        dev = self.device
        if dev not in ("auto", "cpu") and not dev.startswith("cuda"):
            raise ConfigError(
                f"EngineConfig.device must be 'auto', 'cpu' or 'cuda[:N]', got {dev!r}"
            )
        if self.attention_backend not in _ATTENTION_BACKENDS:
            raise ConfigError(
                "EngineConfig.attention_backend must be one of "
                f"{_ATTENTION_BACKENDS}, got {self.attention_backend!r}"
            )
        if self.activation_dtype not in _ACTIVATION_DTYPES:
            raise ConfigError(
                f"EngineConfig.activation_dtype must be one of {_ACTIVATION_DTYPES}, "
                f"got {self.activation_dtype!r}"
            )
        if self.schedule_policy not in ("lpm", "fcfs"):
            raise ConfigError(
                f"EngineConfig.schedule_policy must be 'lpm' or 'fcfs', got "
                f"{self.schedule_policy!r}"
            )
        if self.max_model_len is not None and (
            not isinstance(self.max_model_len, int) or self.max_model_len < 2
        ):
            raise ConfigError(
                f"EngineConfig.max_model_len must be an int >= 2, got {self.max_model_len!r}"
            )
        if not 0.0 < self.kv_memory_fraction <= 0.98:
            raise ConfigError(
                f"EngineConfig.kv_memory_fraction must be in (0, 0.98], got "
                f"{self.kv_memory_fraction!r}"
            )
        for name in (
            "page_size",
            "max_batch_tokens",
            "chunked_prefill_tokens",
            "max_running_requests",
        ) + (("max_kv_tokens",) if self.max_kv_tokens else ()):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"EngineConfig.{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.cuda_graph, bool):
            raise ConfigError(f"EngineConfig.cuda_graph must be a bool, got {self.cuda_graph!r}")
        for name in ("tensor_parallel_size", "data_parallel_size", "cuda_graph_max_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"EngineConfig.{name} must be an int >= 1, got {value!r}")
        if not isinstance(self.dist_timeout_s, (int, float)) or not self.dist_timeout_s > 0:
            raise ConfigError(
                f"EngineConfig.dist_timeout_s must be > 0 seconds, got {self.dist_timeout_s!r}"
            )
        if self.tensor_parallel_size > 1 and self.quantization not in (None, "auto"):
            raise ConfigError(
                "tensor_parallel_size > 1 needs float weights (quantization=None), "
                f"got quantization={self.quantization!r}"
            )
        if self.max_kv_tokens is not None and self.max_kv_tokens < self.page_size:
            raise ConfigError("EngineConfig.max_kv_tokens must hold at least one page")
        threads = self.grammar_threads
        if threads != "auto" and (
            not isinstance(threads, int) or isinstance(threads, bool) or threads < 0
        ):
            raise ConfigError(
                f"EngineConfig.grammar_threads must be 'auto' or an int >= 0, got {threads!r}"
            )
        cap = self.grammar_cache_bytes
        if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < 0):
            raise ConfigError(
                f"EngineConfig.grammar_cache_bytes must be None or an int >= 0, got {cap!r}"
            )

    @classmethod
    def from_kwargs(cls, model: str | None = None, **kwargs) -> "EngineConfig":
        """Build a config from ``Engine(...)`` keywords.

        Raises:
            ConfigError: an unknown keyword (named in the message with the field it most
                resembles, ``dtyp`` -> ``dtype``) or an invalid value.
        """
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise unknown_keyword_error("EngineConfig", unknown[0], names)
        return cls(model=model, **kwargs)

    def context_length(self, model_config: Any, model_max_len: int) -> int:
        """The engine's context length, in tokens (prompt + output), for a loaded model:
        the one number its scheduler, prompt checks, server and CLI read
        (``engine.max_request_tokens()`` is it, or the KV cache's size where smaller).

        ``max_model_len`` when set, checked against the longest context the model's config
        allows (:func:`model_context_limit`, vLLM's rule: a model whose config names no
        limit takes any); None gives ``model_max_len``, the loader's
        :func:`model_context_length` of the same config: that limit, RoPE scaling included
        (as vLLM's default), so a model takes by default the most it is given.

        Args:
            model_config: the model's config (a transformers config or ``ModelConfig``).
            model_max_len: the loader's context length (``LoadedModel.max_model_len``).

        Raises:
            ConfigError: ``max_model_len`` is above the model's limit (both numbers and the
                config field named), as vLLM refuses it (which takes it only with
                ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``; structgen has no such override:
                positions past the trained ones give meaningless output).
        """
        if self.max_model_len is None:
            return model_max_len
        found = model_context_limit(model_config)
        if found is not None and self.max_model_len > found[0]:
            limit, source = found
            raise ConfigError(
                f"EngineConfig.max_model_len={self.max_model_len} is more than this model's "
                f"context of {limit} tokens ({source} in its config); give at most "
                f"{limit}, or leave it unset for the model's own"
            )
        return self.max_model_len

    def resolved(self) -> "EngineConfig":
        """Return a copy with ``"auto"`` device, dtype, grammar threads and quantization
        resolved for this machine (``device="auto"``: :func:`auto_device`, which imports
        torch only where a GPU may be present; ``quantization="auto"``: ``"gguf"`` for a GGUF
        file, the packaged model included, on one CPU process; None otherwise). Dtypes stay
        names (:data:`DTYPES`); :attr:`torch_dtype` turns them into torch's.
        """
        device = self.device
        if device == "auto":
            device = auto_device()
        dtype = self.dtype
        if dtype == "auto":
            if device.startswith("cuda") or _checkpoint_dtype(self.model) == "bfloat16":
                dtype = "bfloat16"
            else:
                dtype = "float32"
        threads = self.grammar_threads
        if threads == "auto":
            threads = min(4, os.cpu_count() or 1) if device.startswith("cuda") else 0
        quantization = self.quantization
        if quantization == "auto":
            gguf = self.model is None or str(self.model).lower().endswith(".gguf")
            on_cpu = device == "cpu" and self.tensor_parallel_size == 1
            quantization = "gguf" if gguf and on_cpu else None
        kv_cache_dtype = self.kv_cache_dtype
        if kv_cache_dtype == "auto":
            kv_cache_dtype = _auto_kv_cache_dtype(
                device, dtype, quantization, self.activation_dtype, self.attention_backend
            )
        return dataclasses.replace(
            self,
            device=device,
            dtype=dtype,
            kv_cache_dtype=kv_cache_dtype,
            grammar_threads=threads,
            quantization=quantization,
        )

    @property
    def torch_dtype(self) -> "torch.dtype":
        """The compute dtype as a ``torch.dtype`` (``"auto"`` resolved). Imports torch."""
        return torch_dtype(self.resolved().dtype)

    @property
    def torch_kv_cache_dtype(self) -> "torch.dtype":
        """The KV cache's storage dtype as a ``torch.dtype`` (``"auto"`` resolved). Imports
        torch.
        """
        return torch_dtype(self.resolved().kv_cache_dtype)
