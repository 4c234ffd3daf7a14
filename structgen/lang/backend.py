"""Where programs run: a thread-safe wrapper of one local ``Engine``, and the default backend.

(``structgen.lang.openai_backend.OpenAIBackend`` runs the same programs on a remote
OpenAI-compatible server.)

Every call a program makes becomes ``Request``s run by ``engine.run_requests``: the
engine's loop steps until the caller's requests finish. Steps advance every running
request, so programs running in several threads (``run_batch``) and the branches of a
fork are continuously batched together and share prefixes through the radix cache.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Sequence

from structgen.errors import RequestError
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.sampling_params import SamplingParams

__all__ = [
    "TokenizerBackend",
    "EngineBackend",
    "set_default_backend",
    "get_default_backend",
    "as_backend",
]


class TokenizerBackend:
    """What every backend shares: prompts are built and healed with the model's tokenizer.

    Subclasses set ``tokenizer`` (a transformers tokenizer with the model's chat
    template) and ``vocab`` (a ``structgen.fsm.Vocabulary``), and implement
    ``generate(prompts, params, constraints, on_delta) -> list[RequestOutput]``.
    """

    tokenizer: Any
    vocab: Any

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._healing: dict[int, bool] = {}

    # -------------------------------------------------------------- prompts
    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""
        return self.tokenizer.encode(text, add_special_tokens=False) if text else []

    def chat_ids(self, messages: list[dict]) -> list[int]:
        """``messages`` rendered by the model's chat template, generation prompt added."""
        return self.encode(self.chat_text(messages, add_generation_prompt=True))

    def chat_text(self, messages: list[dict], add_generation_prompt: bool) -> str:
        """The chat template's text of ``messages``."""
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def can_extend(self, token_id: int) -> bool:
        """True when some longer vocabulary token starts with this token's bytes (cached)."""
        hit = self._healing.get(token_id)
        if hit is None:
            b = self.vocab.token_bytes[token_id]
            hit = bool(b) and any(
                len(t) > len(b) and t.startswith(b) for t in self.vocab.token_bytes
            )
            self._healing[token_id] = hit
        return hit

    def max_request_tokens(self) -> int | None:
        """Most tokens (prompt + output) one request can hold on this backend, where it
        says (an engine's ``max_request_tokens()``); None here: a remote server does not.
        Raises: never.
        """
        return None

    @property
    def special_ids(self) -> frozenset[int]:
        """Ids of the tokenizer's special tokens (never healed)."""
        return frozenset(self.tokenizer.all_special_ids)

    def check_constraint(self, constraint: Any) -> None:
        """Raise where this backend cannot run ``constraint`` (a spec, compiled grammar or
        None), before any call is made; the program names the gen in the message. Every
        constraint runs on a local engine (the engine raises for a bad one when it compiles
        it), so this checks nothing here.

        Raises:
            RequestError: in a subclass, a constraint it cannot run.
        """

    def generate(
        self,
        prompts: Sequence[list[int]],
        params: Sequence[SamplingParams],
        constraints: Sequence[Any],
        on_delta: Callable[[int, str], None] | None = None,
    ) -> list[RequestOutput]:
        """Run the prompts as one batch; see :meth:`EngineBackend.generate`."""
        raise NotImplementedError  # pragma: no cover - abstract


class EngineBackend(TokenizerBackend):
    """Runs a program's generation calls on a :class:`structgen.Engine` (one process, or
    data-parallel replicas: any ``BaseEngine``).

    Args:
        engine: the engine; get one backend per engine with :func:`as_backend`.
    """

    def __init__(self, engine: Any) -> None:
        super().__init__()
        self.engine = engine
        self.tokenizer = engine.tokenizer
        self.vocab = engine.vocab

    def chat_ids(self, messages: list[dict]) -> list[int]:
        """``messages`` rendered by the model's chat template, generation prompt added."""
        return self.engine.apply_chat_template(messages)

    def max_request_tokens(self) -> int:
        """The engine's ``max_request_tokens()``: the model's context or the KV cache's
        size, whichever is smaller. Raises: never.
        """
        return self.engine.max_request_tokens()

    # ----------------------------------------------------------- generation
    def generate(
        self,
        prompts: Sequence[list[int]],
        params: Sequence[SamplingParams],
        constraints: Sequence[Any],
        on_delta: Callable[[int, str], None] | None = None,
    ) -> list[RequestOutput]:
        """Run the prompts as one batch (the same requests ``Engine.generate`` would make).

        Args:
            prompts: token ids per prompt.
            params: one SamplingParams per prompt (``n`` must be 1).
            constraints: one constraint (or None) per prompt.
            on_delta: called with ``(prompt index, text)`` as text becomes final
                (token streaming); None to not stream.

        Returns:
            One RequestOutput per prompt, in order.

        Raises:
            RequestError, RegexError, SchemaError: a request cannot be made.
        """
        if not (len(prompts) == len(params) == len(constraints)):
            raise RequestError("prompts, params and constraints must have equal lengths")
        with self._lock:
            reqs = [
                self.engine.make_request(p, sp, c) for p, sp, c in zip(prompts, params, constraints)
            ]
        listener = None
        if on_delta is not None:

            def listener(i: int, out: RequestOutput) -> None:
                if out.delta_text:
                    on_delta(i, out.delta_text)

        return self.engine.run_requests(reqs, listener)


_backends: "weakref.WeakKeyDictionary[Any, EngineBackend]" = weakref.WeakKeyDictionary()
_default: list[EngineBackend] = []
_default_lock = threading.Lock()
_create_lock = threading.Lock()


def as_backend(backend: Any) -> TokenizerBackend:
    """The backend for ``backend``: a backend (``EngineBackend``, ``OpenAIBackend``), an
    Engine, or None (the default).

    Raises:
        RequestError: anything else.
    """
    if backend is None:
        return get_default_backend()
    if isinstance(backend, TokenizerBackend):
        return backend
    from structgen.runtime.base_engine import BaseEngine

    if isinstance(backend, BaseEngine):
        with _default_lock:
            b = _backends.get(backend)
            if b is None:
                b = _backends[backend] = EngineBackend(backend)
            return b
    raise RequestError(
        f"backend must be a structgen Engine or OpenAIBackend, got {type(backend).__name__}"
    )


def set_default_backend(backend: Any) -> None:
    """Use ``backend`` (an Engine or OpenAIBackend) for programs and templates run without
    ``backend=``; None restores the default.
    """
    b = as_backend(backend) if backend is not None else None
    with _default_lock:
        _default[:] = [b] if b is not None else []


def get_default_backend() -> TokenizerBackend:
    """The default backend; a default ``Engine()`` (packaged model) is created once."""
    with _create_lock:  # held while loading, so the engine is created once
        with _default_lock:
            if _default:
                return _default[0]
        from structgen.runtime.engine import Engine

        engine = Engine()
        backend = EngineBackend(engine)
        with _default_lock:
            _default.append(backend)
            _backends[engine] = backend
        return backend
