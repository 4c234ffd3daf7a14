"""Program state: the text (or chat) so far, the captures, and the prompt they make.

``s += expr`` interprets ``expr`` at once: the state hands it to the runner
(``structgen.lang.driver``), which yields batches of generation calls, runs them on the
state's backend and writes the results back here, so one driver can run a single state
(each batch is one backend call) or the branches of a fork in lock-step (the branches'
calls merged into one batch).

Prompts: in plain mode the prompt is the text so far, encoded as ``Engine.generate``
encodes a string. Once a chat role is used the state is a list of messages; a gen inside
``assistant(...)`` sees the closed messages rendered by the engine's chat template (with
the generation prompt) followed by the assistant text so far.
"""

from __future__ import annotations

from typing import Any, Callable

from structgen.errors import LengthLimit, RequestError
from structgen.lang.driver import ForkedStates, run_one
from structgen.lang.expr import as_expr
from structgen.runtime.outputs import RequestOutput

__all__ = ["ProgramState"]

_SENTINEL = "\x00structgen-open-turn\x00"


class ProgramState:
    """The state ``s`` a program appends to.

    Read captures with ``s["name"]`` / ``s.get("name")``, the text with ``s.text()``,
    the chat with ``s.messages()``.

    The runner writes a state only through ``_append``, ``_open_turn``, ``_close_turn``,
    ``_capture``, ``_scores`` and ``_seed_offset``, and reads ``backend``, ``_sink`` and
    ``_prompt_ids``.

    Args:
        backend: the backend its generation calls run on (``structgen.lang.backend``).
        sink: called with each piece of text as it is appended (streaming); None for none.
    """

    def __init__(self, backend: Any, sink: Callable[[str], None] | None = None) -> None:
        self.backend = backend
        self._sink = sink
        self._parts: list[str] = []
        self._messages: list[dict] = []
        self._is_chat = False
        self._open_role: str | None = None
        self._open_content = ""
        self._captures: dict[str, Any] = {}
        self.outputs: dict[str, RequestOutput] = {}  # capture name -> its RequestOutput
        self._scores: dict[str, dict[str, float]] = {}  # select name -> option scores
        self._cut_by: dict[str, LengthLimit] = {}  # capture name -> the limit that cut it
        self._seed_offset = 0  # added to gen seeds (branch i of a broadcast fork: i)

    # ------------------------------------------------------------ reading
    def __getitem__(self, name: str) -> Any:
        try:
            return self._captures[name]
        except KeyError:
            raise KeyError(
                f"no capture named {name!r}; captured: {sorted(self._captures)}"
            ) from None

    def __contains__(self, name: str) -> bool:
        return name in self._captures

    def get(self, name: str, default: Any = None) -> Any:
        """The capture ``name``, or ``default``."""
        return self._captures.get(name, default)

    def truncated(self, name: str) -> bool:
        """Whether the generation captured as ``name`` was cut: it stopped at its
        ``max_tokens`` or at the end of the model's context (:meth:`cut_by` tells which).

        For a ``gen(json_schema=...)`` the capture is still the complete, schema-valid
        value: the grammar's token budget closed the JSON early (later fields may be
        shortened).

        Raises:
            KeyError: no generation was captured as ``name``.
        """
        return self._output(name).finish_reason == "length"

    def cut_by(self, name: str) -> LengthLimit | None:
        """The limit that cut the generation captured as ``name``: a
        :class:`~structgen.errors.LengthLimit` (``name`` ``"max_tokens"`` with the gen's
        ``max_tokens``, or ``"context"`` with the most tokens, prompt included, one request
        can hold); None when it was not cut (:meth:`truncated` is False).

        Raises:
            KeyError: no generation was captured as ``name``.
        """
        self._output(name)
        return self._cut_by.get(name)

    def _output(self, name: str) -> RequestOutput:
        try:
            return self.outputs[name]
        except KeyError:
            raise KeyError(
                f"no generation captured as {name!r}; generated: {sorted(self.outputs)}"
            ) from None

    def select_scores(self, name: str) -> dict[str, float]:
        """The normalised log-probability of every option of the select named ``name``."""
        return dict(self._scores[name])

    @property
    def captures(self) -> dict[str, Any]:
        """A copy of every capture."""
        return dict(self._captures)

    def messages(self) -> list[dict]:
        """The chat so far (the open turn included); ``[]`` for a plain program."""
        msgs = [dict(m) for m in self._messages]
        if self._open_role is not None:
            msgs.append({"role": self._open_role, "content": self._open_content})
        return msgs

    def text(self) -> str:
        """The whole text so far, chat turns rendered with the model's chat template."""
        if not self._is_chat:
            return "".join(self._parts)
        if self._open_role is None:
            return self.backend.chat_text(self._messages, add_generation_prompt=False)
        return self._open_turn_text("")

    def __repr__(self) -> str:
        return f"ProgramState(captures={self._captures!r})"

    # ------------------------------------------------------------ writing
    def __iadd__(self, value: Any) -> "ProgramState":
        run_one(self, as_expr(value))
        return self

    def set(self, name: str, value: Any) -> None:
        """Store a capture by hand (e.g. a tool's result).

        Raises:
            RequestError: the name is already captured.
        """
        if name in self._captures:
            raise RequestError(f"capture name {name!r} is already set in this program")
        self._captures[name] = value

    def fork(self, n: int) -> ForkedStates:
        """``n`` branch states sharing this state's text and captures.

        ``forks += gen(...)`` runs the branches together, their calls in one batch; a
        branch can also be extended alone (``forks[i] += ...``). Branches never write
        back to this state; use :meth:`join` to collect their captures.
        """
        if not isinstance(n, int) or n < 1:
            raise RequestError(f"fork needs n >= 1, got {n!r}")
        return ForkedStates([self._copy() for _ in range(n)])

    def join(self, forks: list["ProgramState"]) -> None:
        """Collect the branches' new captures into this state, each as a list (branch order).

        Raises:
            RequestError: a collected name is already captured here.
        """
        names: list[str] = []
        for f in forks:
            names.extend(k for k in f._captures if k not in self._captures and k not in names)
        for k in names:
            self.set(k, [f._captures.get(k) for f in forks])

    def _copy(self, sink: Callable[[str], None] | None = None) -> "ProgramState":
        c = ProgramState(self.backend, sink)
        c._parts = list(self._parts)
        c._messages = [dict(m) for m in self._messages]
        c._is_chat, c._open_role, c._open_content = (
            self._is_chat,
            self._open_role,
            self._open_content,
        )
        c._captures = dict(self._captures)
        c.outputs = dict(self.outputs)
        c._scores = dict(self._scores)
        c._cut_by = dict(self._cut_by)
        c._seed_offset = self._seed_offset
        return c

    # ------------------------------------------------------------ text and prompts
    def _append(self, text: str, streamed: bool = False) -> None:
        if self._open_role is not None:
            self._open_content += text
        elif self._is_chat:
            raise RequestError(
                "text outside a role after chat turns: wrap it in system/user/assistant(...)"
            )
        else:
            self._parts.append(text)
        if self._sink is not None and not streamed and text:
            self._sink(text)

    def _open_turn_text(self, extra: str) -> str:
        content = self._open_content + extra
        if self._open_role == "assistant":
            return self.backend.chat_text(self._messages, add_generation_prompt=True) + content
        rendered = self.backend.chat_text(
            self._messages + [{"role": self._open_role, "content": content + _SENTINEL}],
            add_generation_prompt=False,
        )
        return rendered[: rendered.index(_SENTINEL)]

    def _prompt_ids(self, extra: str = "") -> list[int]:
        """Token ids of the prompt so far, plus ``extra`` text at its end.

        Raises:
            RequestError: nothing to condition on, or a gen outside a role in a chat.
        """
        if not self._is_chat:
            text = "".join(self._parts) + extra
            if not text:
                raise RequestError("a gen/select needs some text before it (the prompt is empty)")
            return self.backend.encode(text)
        if self._open_role is None:
            raise RequestError("gen/select outside a role after chat turns: use assistant(...)")
        if self._open_role == "assistant":
            return self.backend.chat_ids(self._messages) + self.backend.encode(
                self._open_content + extra
            )
        return self.backend.encode(self._open_turn_text(extra))

    def _capture(
        self,
        name: str | None,
        value: Any,
        out: RequestOutput | None = None,
        cut_by: LengthLimit | None = None,
    ) -> None:
        if name is None:
            return
        self.set(name, value)
        if out is not None:
            self.outputs[name] = out
        if cut_by is not None:
            self._cut_by[name] = cut_by

    def _open_turn(self, role: str) -> None:
        """Start a chat turn of ``role`` (the state becomes a chat).

        Raises:
            RequestError: the state already holds plain text.
        """
        if not self._is_chat and "".join(self._parts):
            raise RequestError(
                f"{role}(...) after plain text: a program is either plain text or chat turns"
            )
        self._is_chat = True
        self._open_role, self._open_content = role, ""

    def _close_turn(self) -> None:
        """End the open chat turn: its text becomes a message."""
        self._messages.append({"role": self._open_role, "content": self._open_content})
        self._open_role, self._open_content = None, ""
