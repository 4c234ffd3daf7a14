"""RequestFactory: turns prompts, sampling params and constraints into ``Request`` objects.

The part of ``Engine`` that touches the tokenizer and the constraint compiler but not the
model: chat-template rendering, prompt validation, and one ``Request`` per branch
(``SamplingParams.n``) with its seeded generator, detokenizer and grammar matcher.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from structgen.errors import (
    ConfigError,
    RequestError,
    StructgenError,
    did_you_mean,
    prompt_too_long,
)
from structgen.fsm.base import BaseCompiledGrammar
from structgen.fsm.spec import to_constraint
from structgen.runtime.detokenizer import IncrementalDetokenizer
from structgen.runtime.request import Request
from structgen.runtime.sampler import make_generator
from structgen.runtime.sampling_params import SamplingParams

__all__ = ["RequestFactory", "CHAT_ROLES", "naming_prompt"]

#: The roles a chat message may have: OpenAI's (the server's ``ChatMessage`` takes the same).
#: ``developer`` is rendered as ``system``, as the server does.
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")


class RequestFactory:
    """Mixin of every engine: needs ``tokenizer``, ``vocab_size`` (width of the model's
    logits), ``vocab`` (the fsm ``Vocabulary``), ``device`` (a device name or a
    ``torch.device``), ``_ids`` (a request-id counter) and ``max_request_tokens()``.

    ``tokenizer`` and ``vocab`` are None for a model loaded without a tokenizer: it serves
    token-id prompts, unconstrained, without stop strings, and its outputs have token ids and
    no text; anything that needs text raises ``ConfigError``.
    """

    def _require_tokenizer(self, what: str) -> None:
        """Raise ``ConfigError`` when the model has no tokenizer and ``what`` needs one."""
        if self.tokenizer is None:
            raise ConfigError(
                f"{what} needs a tokenizer, and this model was loaded without one (its folder "
                "has no tokenizer files): pass token-id prompts, no constraint and no stop "
                "strings"
            )

    def _detokenizer_tokens(self) -> list[bytes] | None:
        """The token bytes a request's detokenizer reads (None without a tokenizer): the
        vocabulary's. An engine whose ``vocab`` waits for a background preparation returns
        them without waiting, so unconstrained requests never wait. Raises: as ``vocab``.
        """
        return None if self.vocab is None else self.vocab.token_bytes

    # ----------------------------------------------------------------- prompts
    def apply_chat_template(self, messages: list[dict]) -> list[int]:
        """Render chat messages with the model's template (generation prompt added).

        Args:
            messages: ``{"role", "content"}`` dicts; ``role`` one of :data:`CHAT_ROLES`
                (``developer`` is rendered as ``system``), ``content`` a string (None only
                beside ``tool_calls``); other keys go to the template as they are.

        Raises:
            RequestError: a message is not such a dict, has an unknown role or a content
                that is not a string (the message names the message's index).
            ConfigError: the model has no tokenizer.
        """
        self._require_tokenizer("a chat prompt")
        messages = [_checked_message(m, i) for i, m in enumerate(messages)]
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return self.tokenizer.encode(text, add_special_tokens=False)

    def encode_prompt(self, prompt: Any) -> list[int]:
        """Token ids of one prompt: a string, a list of chat messages, or a list of ids.

        Raises:
            RequestError: unsupported prompt type, empty prompt, or out-of-range ids.
            ConfigError: a string or chat prompt for a model without a tokenizer.
        """
        if isinstance(prompt, str):
            self._require_tokenizer("a text prompt")
            ids = self.tokenizer.encode(prompt, add_special_tokens=False)
        elif type(prompt) is list and prompt and set(map(type, prompt)) == {int}:
            # plain ints (the usual token-id prompt): checked by their extremes
            ids = list(prompt)
            vocab_size = self.vocab_size
            if min(ids) < 0 or max(ids) >= vocab_size:
                raise RequestError(f"prompt token ids must be in [0, {vocab_size})")
        elif (
            isinstance(prompt, (list, tuple))
            and prompt
            and all(isinstance(m, dict) for m in prompt)
        ):
            ids = self.apply_chat_template(list(prompt))
        elif isinstance(prompt, (list, tuple)) and all(isinstance(t, int) for t in prompt):
            ids = [int(t) for t in prompt]
            vocab_size = self.vocab_size
            if any(t < 0 or t >= vocab_size for t in ids):
                raise RequestError(f"prompt token ids must be in [0, {vocab_size})")
        else:
            raise RequestError(
                "each prompt must be a string, a list of {'role','content'} messages or a list "
                f"of token ids; got {type(prompt).__name__}"
            )
        if not ids:
            raise RequestError("prompt is empty")
        return ids

    def check_prompt_fits(self, ids: list[int]) -> None:
        """Raise when a prompt of ``ids`` can never run on this engine (vLLM's and
        SGLang's engines refuse it the same way, before anything runs).

        Raises:
            PromptTooLongError: ``len(ids)`` is at least :meth:`max_request_tokens` (the
                context, or the KV cache where that is smaller), which leaves no room for
                one output token.
        """
        limit = self.max_request_tokens()
        if len(ids) >= limit:
            raise prompt_too_long(len(ids), limit)

    # -------------------------------------------------------------- requests
    def _make_requests(self, prompt: Any, params: SamplingParams, constraint: Any) -> list[Request]:
        """The ``params.n`` branch requests of one prompt (grammar compiled once)."""
        if not isinstance(params, SamplingParams):
            raise RequestError(f"params must be SamplingParams, got {type(params).__name__}")
        ids = self.encode_prompt(prompt)
        if params.stop:
            self._require_tokenizer("a stop string")
        term = to_constraint(constraint)
        grammar = None
        if term is not None:
            # compiled over the vocabulary; jump-forward re-encodes text
            self._require_tokenizer("a constraint")
            if isinstance(term, BaseCompiledGrammar):
                grammar = term
            else:
                grammar = term.compile(self.vocab)
                grammar.emit_warnings()  # at the user's line
        reqs = []
        for i in range(params.n):
            p = params
            if i > 0 and (params.seed is not None or params.prompt_logprobs is not None):
                p = dataclasses.replace(
                    params,
                    seed=None if params.seed is None else params.seed + i,
                    prompt_logprobs=None,  # computed once, by branch 0
                )
            gen = None if p.seed is None else make_generator(p.seed, self.device)
            req = Request(
                request_id=str(next(self._ids)),
                prompt_token_ids=ids,
                params=p,
                detokenizer=IncrementalDetokenizer(self._detokenizer_tokens(), p.stop),
                generator=gen,
                max_cached_prefix=None
                if p.prompt_logprobs is None
                else max(0, p.prompt_logprobs_start - 1),
            )
            if grammar is not None:
                self.attach_grammar(req, grammar, term)
            reqs.append(req)
        return reqs

    def attach_grammar(self, req: Request, grammar: Any, constraint: Any = None) -> None:
        """Constrain ``req`` (made without a constraint, not yet run) by a compiled
        ``grammar``, as ``make_request`` would have: its matcher's budget is ``max_tokens``
        or the context's room, whichever ends first (``step._check_limits`` finishes the
        request at either: a JSON cut by the context is closed validly as one cut by
        ``max_tokens`` is). ``constraint``: what it was compiled from (default ``grammar``).
        Raises: what ``grammar.matcher`` raises.
        """
        room = self.max_request_tokens() - len(req.prompt_token_ids)
        req.constraint = grammar if constraint is None else constraint
        req.matcher = grammar.matcher(max_tokens=max(1, min(req.params.max_tokens, room)))

    def _make_request(self, prompt: Any, params: SamplingParams, constraint: Any) -> Request:
        if isinstance(params, SamplingParams) and params.n != 1:
            raise RequestError("n > 1 is served by Engine.generate (one stream per request here)")
        return self._make_requests(prompt, params, constraint)[0]

    @staticmethod
    def _per_prompt(value: Any, n: int, name: str, is_single) -> list:
        if isinstance(value, list) and not is_single(value):
            if len(value) != n:
                raise RequestError(f"{name} has {len(value)} entries for {n} prompts")
            return value
        return [value] * n


def _checked_message(message: Any, i: int) -> dict:
    """``message`` as the chat template reads it (``developer`` as ``system``).

    Raises:
        RequestError: not a dict with ``role`` and ``content``, a role outside
            :data:`CHAT_ROLES` (the nearest one named), or a content that is not a string
            (None is allowed beside ``tool_calls``).
    """
    if not isinstance(message, dict) or "role" not in message or "content" not in message:
        raise RequestError(f"chat message {i} must be a dict with 'role' and 'content'")
    role = message["role"]
    if role not in CHAT_ROLES:
        raise RequestError(
            f"chat message {i} has an unknown role {role!r}{did_you_mean(role, CHAT_ROLES)} "
            f"(roles: {', '.join(CHAT_ROLES)})"
        )
    content = message["content"]
    if not isinstance(content, str) and not (content is None and message.get("tool_calls")):
        raise RequestError(
            f"chat message {i} ({role}): content must be a string, got {type(content).__name__}"
        )
    if role == "developer":
        message = {**message, "role": "system"}
    return message


@contextlib.contextmanager
def naming_prompt(i: int, n: int) -> Iterator[None]:
    """Checks of prompt ``i`` of a call's ``n``: a ``StructgenError`` with a one-string
    message raised inside names the prompt (``prompts[I] (of N): ...``) where ``n > 1``.

    Raises:
        what the body raises.
    """
    try:
        yield
    except StructgenError as exc:
        if n > 1 and len(exc.args) == 1 and isinstance(exc.args[0], str):
            exc.args = (f"prompts[{i}] (of {n}): {exc.args[0]}",)
        raise
