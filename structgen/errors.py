"""Every exception structgen raises on purpose, in one place.

Three levels of error (see ``shared/STYLE.md``):

* typed, actionable exceptions for bad specs and requests (below; the ones caused
  by bad user input also subclass :class:`ValueError`);
* no exceptions on the per-token path: the matcher returns ``False`` or enters a
  sticky terminated state, and the engine turns a failing request into a
  ``RequestOutput`` with ``finish_reason="error"``;
* ``assert`` only for internal invariants.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import warnings
from collections.abc import Sequence

__all__ = [
    "StructgenError",
    "ConfigError",
    "SchemaError",
    "InvalidSchemaError",
    "UnsupportedSchemaError",
    "UnsatisfiableSchemaError",
    "RegexError",
    "UnsupportedRegexError",
    "GrammarTooComplexError",
    "NoVocabularyError",
    "ModelNotFoundError",
    "ModelLoadError",
    "KernelArgumentError",
    "RequestError",
    "PromptTooLongError",
    "ExtractionError",
    "ExtractionPromptTooLongError",
    "ProgramError",
    "DistributedError",
    "EngineDeadError",
    "InvalidGrammarError",
    "UnsupportedGrammarError",
    "ExtractionTruncatedWarning",
    "GrammarWarning",
    "LengthLimit",
    "unknown_keyword_error",
    "did_you_mean",
    "length_limit",
    "length_cut",
    "warn_at_user_frame",
]


class StructgenError(Exception):
    """Base class of every error structgen raises on purpose."""


class ConfigError(StructgenError, ValueError):
    """An engine or sampling setting is invalid (names the field and the bad value)."""


class SchemaError(StructgenError, ValueError):
    """Base class for problems with a JSON Schema given by the user.

    Attributes:
        pointer: JSON pointer (RFC 6901) of the offending subschema, ``""`` for the root.
    """

    def __init__(self, message: str, pointer: str = "") -> None:
        self.pointer = pointer
        where = pointer if pointer else "#"
        super().__init__(f"{message} (at {where})" if not message.endswith(")") else message)


class InvalidSchemaError(SchemaError):
    """The schema is not valid JSON Schema (fails its metaschema, or is not an object)."""


class UnsupportedSchemaError(SchemaError):
    """The schema uses a keyword (or keyword value) that structgen cannot enforce exactly.

    Attributes:
        keyword: the unsupported keyword, e.g. ``"uniqueItems"``.
        pointer: JSON pointer of the subschema that holds it.
        detail: why, without the keyword and pointer ("" if none was given).
    """

    def __init__(self, keyword: str, pointer: str = "", detail: str = "") -> None:
        self.keyword = keyword
        self.detail = detail
        where = pointer if pointer else "#"
        msg = f"unsupported JSON Schema keyword {keyword!r} at {where}"
        if detail:
            msg += f": {detail}"
        StructgenError.__init__(self, msg)
        self.pointer = pointer


class UnsatisfiableSchemaError(UnsupportedSchemaError):
    """The schema accepts no value, so nothing can be generated from it.

    Attributes:
        keyword: the keyword that leaves no value (``"enum"`` for ``{"enum": []}``,
            ``"maximum"`` for a ``minimum`` above it); ``"false"`` when no single keyword
            is the cause.
        pointer: JSON pointer of the subschema that holds it.
        detail: what leaves no value ("" if no cause was found).
    """

    def __init__(self, keyword: str, pointer: str = "", detail: str = "") -> None:
        self.keyword = keyword
        self.detail = detail
        self.pointer = pointer
        msg = "the schema accepts no value"
        if detail:
            msg += f": {detail} at {pointer or '#'}"
        StructgenError.__init__(self, msg)


class RegexError(StructgenError, ValueError):
    """A regular expression cannot be parsed."""


class UnsupportedRegexError(RegexError):
    """A regex uses a feature no finite automaton can express (lookaround, backreference)."""


class GrammarTooComplexError(StructgenError, ValueError):
    """Compiling a constraint exceeded the state-count or time budget."""


class NoVocabularyError(StructgenError, ValueError):
    """``CompiledGrammar.matcher()`` was called on a grammar compiled without a vocabulary."""


class ModelNotFoundError(StructgenError, FileNotFoundError):
    """The model path does not exist, or the default model package is not installed."""


class ModelLoadError(StructgenError):
    """A model file exists but cannot be loaded (unknown architecture, bad tensor shapes)."""


class KernelArgumentError(StructgenError, ValueError):
    """A tensor passed to a C kernel's wrapper (``structgen.runtime.cpu``) has the wrong shape,
    dtype, device or layout; raised before the C call, which would read out of bounds.

    The message names the argument and what was expected.
    """


class RequestError(StructgenError, ValueError):
    """A generation request is invalid (bad prompt type, mismatched list lengths, ...)."""


class PromptTooLongError(RequestError):
    """A prompt does not fit the model's context or the KV cache."""


class ExtractionError(StructgenError):
    """Extraction did not produce a complete, schema-valid object.

    Attributes:
        raw_text: the text the model generated, for inspection.
        finish_reason: why generation stopped (``"length"``, ``"error"``, ...).
        cut_by: the limit that cut the output (a :class:`LengthLimit`: ``max_tokens`` or the
            end of the model's context, and its value) where a limit cut it before its JSON
            was complete and schema-valid; None otherwise.
    """

    def __init__(
        self,
        message: str,
        raw_text: str = "",
        finish_reason: str | None = None,
        cut_by: LengthLimit | None = None,
    ) -> None:
        super().__init__(message)
        self.raw_text = raw_text
        self.finish_reason = finish_reason
        self.cut_by = cut_by


class ExtractionPromptTooLongError(ExtractionError, PromptTooLongError):
    """A text's extraction prompt (the text with the schema, in the chat template) does
    not fit the model's context or the KV cache: refused before anything ran, as a
    ``generate`` prompt is (``except PromptTooLongError`` catches both), and in a batch
    with ``errors="return"`` an ExtractionError in that text's place. Its message is the
    engine's (``prompt has N tokens; this engine's context allows at most M (...)``).
    """


class ProgramError(StructgenError):
    """A structgen program raised; the message names the program's own line.

    Attributes:
        filename: file of the program's line that raised (or called what raised).
        lineno: that line's number.
        original: the exception the program raised (also ``__cause__``).
        cut_by: the ``original``'s ``cut_by`` (a :class:`LengthLimit`) where a limit cut
            a gen's output that the program could not use (an ExtractionError); else None.
    """

    def __init__(
        self,
        message: str,
        filename: str = "",
        lineno: int = 0,
        original: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.filename = filename
        self.lineno = lineno
        self.original = original

    @property
    def cut_by(self) -> LengthLimit | None:
        """See the class's attributes. Raises: never."""
        return getattr(self.original, "cut_by", None)


class DistributedError(StructgenError):
    """A tensor- or data-parallel rank died, or a collective failed or timed out.

    The engine is unusable afterwards (its process group is broken); create a new one.
    The message names the rank(s) and, when known, their exit code or error.
    """


class EngineDeadError(StructgenError):
    """The ``AsyncEngine`` loop thread crashed; the original exception is its ``__cause__``.

    Every pending and later request of that engine raises it; create a new engine.
    """


class InvalidGrammarError(StructgenError, ValueError):
    """A context-free grammar (Lark, GBNF, EBNF) does not parse or is inconsistent.

    The message names the problem, its ``line:column`` and the offending text where
    there is one (an undefined rule, a syntax error, a recursive terminal).
    """


class UnsupportedGrammarError(InvalidGrammarError):
    """A grammar uses a construct structgen does not implement (named with its line:column)."""


class GrammarWarning(UserWarning):
    """A part of a constraint was ignored or approximated (an unknown JSON Schema keyword,
    with a "did you mean" for a near miss; a format that is only an annotation; a
    recursion unrolled); the message names it and its JSON pointer or line:column.
    Issued once per distinct message when a request compiles its constraint.
    """


class ExtractionTruncatedWarning(UserWarning):
    """An extraction was cut by ``max_tokens``; the grammar's token budget had already
    closed the JSON, so the (shortened) schema-valid object is returned anyway.

    Attributes:
        index: the text's index in the list given to ``extract`` (0 for a single text).
        raw_text: the text the model generated.
    """

    def __init__(self, message: str, index: int = 0, raw_text: str = "") -> None:
        super().__init__(message)
        self.index = index
        self.raw_text = raw_text


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_at_user_frame(warning: Warning, stacklevel: int = 1) -> None:
    """Issue ``warning`` (``warnings.warn``) at the user's line: the innermost frame, from
    this function's caller outwards, whose file is outside the structgen package. A
    warning raised deep inside a call (``extract`` -> extraction -> compile) thus points at
    the line that called structgen, however deep the call went (as Python 3.12's
    ``skip_file_prefixes``).

    Args:
        warning: the warning instance.
        stacklevel: where the warning points when every frame is inside the package
            (structgen running on its own, e.g. a server thread), counted as
            ``warnings.warn`` counts from this function's caller (1 = the caller's line).

    Raises:
        never (unless a warning filter turns the warning into an error).
    """
    frame = sys._getframe(1)
    level = 2  # the stacklevel warnings.warn, called from here, gives ``frame``
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(warning, stacklevel=level if frame is not None else stacklevel + 1)


def unknown_keyword_error(owner: str, key: object, names: Sequence[str]) -> ConfigError:
    """The error for a keyword ``owner`` does not take: it names ``key``, the entry of
    ``names`` it most resembles (``difflib``, ratio >= 0.6), if any, and every name, e.g.
    ``SamplingParams got an unknown keyword 'max_token'; did you mean 'max_tokens'?
    (fields: ...)``. Returned, not raised. Raises: never.
    """
    hint = did_you_mean(key, names)
    return ConfigError(f"{owner} got an unknown keyword {key!r}{hint} (fields: {', '.join(names)})")


def prompt_too_long(num_tokens: int, limit: int) -> PromptTooLongError:
    """The error for a prompt of ``num_tokens`` tokens on an engine whose requests hold at
    most ``limit`` tokens (``max_request_tokens()``: the context, or the KV cache where
    smaller), in the one wording the engine, its scheduler, ``extract`` and the CLI use.
    Returned, not raised. Raises: never.
    """
    return PromptTooLongError(
        f"prompt has {num_tokens} tokens; this engine's context allows at most "
        f"{limit - 1} (max_model_len, or the KV cache's size where smaller)"
    )


def did_you_mean(key: object, names: Sequence[str]) -> str:
    """``"; did you mean 'NAME'?"`` for the entry of ``names`` that ``key`` most resembles
    (``difflib``, ratio >= 0.6), or ``""`` where none does. Raises: never.
    """
    import difflib

    near = difflib.get_close_matches(str(key), list(names), n=1, cutoff=0.6)
    return f"; did you mean {near[0]!r}?" if near else ""


@dataclasses.dataclass(frozen=True)
class LengthLimit:
    """The limit that cut an output which finished with ``finish_reason="length"``.

    ``str(limit)`` is the limit in the words every message about such a cut uses:
    ``max_tokens=N``, or ``the end of the model's context (N tokens, prompt included)``.

    Attributes:
        name: ``"max_tokens"`` (the request's ``SamplingParams.max_tokens``) or
            ``"context"`` (the most tokens, prompt + output, one request can hold:
            ``engine.max_request_tokens()``, the model's context or the KV cache's size).
        tokens: the limit's value, in tokens (output tokens for ``max_tokens``, prompt +
            output for ``context``).

    Raises:
        ValueError: at construction, a ``name`` other than those two.
    """

    name: str
    tokens: int

    def __post_init__(self) -> None:
        if self.name not in ("max_tokens", "context"):
            raise ValueError(
                f"LengthLimit.name must be 'max_tokens' or 'context', got {self.name!r}"
            )

    def __str__(self) -> str:
        if self.name == "max_tokens":
            return f"max_tokens={self.tokens}"
        return f"the end of the model's context ({self.tokens} tokens, prompt included)"

    def remedy(
        self,
        raise_max_tokens: str = "raise max_tokens",
        shorten_prompt: str = "shorten the prompt",
    ) -> str:
        """``raise_max_tokens`` for a ``max_tokens`` cut, else ``shorten_prompt`` (a caller
        names its own terms: a CLI its flag, extract the text). Raises: never.
        """
        return raise_max_tokens if self.name == "max_tokens" else shorten_prompt


def length_limit(num_output_tokens: int, max_tokens: int, context_tokens: int) -> LengthLimit:
    """Which limit cut an output that finished with ``finish_reason="length"``: ``max_tokens``
    when the output has ``max_tokens`` tokens, else the end of the model's context.

    Args:
        num_output_tokens: tokens the output has.
        max_tokens: the request's ``SamplingParams.max_tokens``.
        context_tokens: most tokens (prompt + output) one request can hold
            (``engine.max_request_tokens()``; not read for a ``max_tokens`` cut).

    Raises:
        never.
    """
    if num_output_tokens >= max_tokens:
        return LengthLimit("max_tokens", max_tokens)
    return LengthLimit("context", context_tokens)


def length_cut(
    num_output_tokens: int,
    max_tokens: int,
    context_tokens: int,
    raise_max_tokens: str = "raise max_tokens",
    shorten_prompt: str = "shorten the prompt",
) -> tuple[str, str]:
    """Which limit cut an output that finished with ``finish_reason="length"``, and its
    remedy, in the words every message about such a cut uses (:func:`length_limit`, worded).

    Args:
        num_output_tokens: tokens the output has.
        max_tokens: the request's ``SamplingParams.max_tokens``.
        context_tokens: most tokens (prompt + output) one request can hold
            (``engine.max_request_tokens()``).
        raise_max_tokens: the remedy when ``max_tokens`` cut it (a CLI names its flag).
        shorten_prompt: the remedy when the model's context ended it first.

    Returns:
        ``(by, fix)``: ``("max_tokens=N", raise_max_tokens)`` when the output has
        ``max_tokens`` tokens, else ``("the end of the model's context (N tokens, prompt
        included)", shorten_prompt)``.

    Raises:
        never.
    """
    limit = length_limit(num_output_tokens, max_tokens, context_tokens)
    return str(limit), limit.remedy(raise_max_tokens, shorten_prompt)
