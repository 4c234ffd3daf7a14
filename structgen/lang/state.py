"""Program state: the text (or chat) so far, the captures, and the interpreter of expressions.

``s += expr`` interprets ``expr`` at once. Interpretation is a generator that yields
batches of generation calls and receives their outputs, so one driver can run a single
state (each batch is one backend call) or the branches of a fork in lock-step (the
branches' calls merged into one batch).

Prompts: in plain mode the prompt is the text so far, encoded as ``Engine.generate``
encodes a string. Once a chat role is used the state is a list of messages; a gen inside
``assistant(...)`` sees the closed messages rendered by the engine's chat template (with
the generation prompt) followed by the assistant text so far.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Generator

from structgen.errors import ExtractionError, RequestError
from structgen.fsm.spec import Regex
from structgen.lang.expr import Concat, Expr, Gen, Role, Select, TemplateFill, Text, as_expr
from structgen.lang.healing import Healing, heal
from structgen.runtime.outputs import RequestOutput
from structgen.runtime.sampling_params import SamplingParams

if TYPE_CHECKING:
    from structgen.lang.driver import ForkedStates

__all__ = ["ProgramState", "Call"]

_SENTINEL = "\x00structgen-open-turn\x00"
_SELECT_PARAMS = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)


@dataclass
class Call:
    """One generation call: what a backend runs for one prompt."""

    prompt_ids: list[int]
    params: SamplingParams
    constraint: Any = None
    on_delta: Callable[[str], None] | None = None


Steps = Generator[list[Call], list[RequestOutput], None]


class ProgramState:
    """The state ``s`` a program appends to.

    Read captures with ``s["name"]`` / ``s.get("name")``, the text with ``s.text()``,
    the chat with ``s.messages()``.
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
        self._seed_offset = 0  # added to gen seeds (branch i of a broadcast fork: i)

    # ------------------------------------------------------------ reading
    def __getitem__(self, name: str) -> Any:
        try:
            return self._captures[name]
        except KeyError:
            raise KeyError(f"no capture named {name!r}; captured: {sorted(self._captures)}") from None

    def __contains__(self, name: str) -> bool:
        return name in self._captures

    def get(self, name: str, default: Any = None) -> Any:
        """The capture ``name``, or ``default``."""
        return self._captures.get(name, default)

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
        from structgen.lang.driver import run_one

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

    def fork(self, n: int) -> "ForkedStates":
        """``n`` branch states sharing this state's text and captures.

        ``forks += gen(...)`` runs the branches together, their calls in one batch; a
        branch can also be extended alone (``forks[i] += ...``). Branches never write
        back to this state; use :meth:`join` to collect their captures.
        """
        from structgen.lang.driver import ForkedStates

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
        c._is_chat, c._open_role, c._open_content = self._is_chat, self._open_role, self._open_content
        c._captures = dict(self._captures)
        c.outputs = dict(self.outputs)
        c._scores = dict(self._scores)
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

    def _capture(self, name: str | None, value: Any, out: RequestOutput | None = None) -> None:
        if name is None:
            return
        self.set(name, value)
        if out is not None:
            self.outputs[name] = out

    # ------------------------------------------------------------ interpreter
    def _exec(self, expr: Expr) -> Steps:
        """Interpret ``expr``: yields lists of calls, receives their outputs."""
        if isinstance(expr, Text):
            self._append(expr.text)
        elif isinstance(expr, Concat):
            for part in expr.parts:
                yield from self._exec(part)
        elif isinstance(expr, Role):
            yield from self._exec_role(expr)
        elif isinstance(expr, Gen):
            yield from self._exec_gen(expr)
        elif isinstance(expr, Select):
            yield from self._exec_select(expr)
        elif isinstance(expr, TemplateFill):
            yield from self._exec_template(expr)
        else:  # pragma: no cover - as_expr admits only the nodes above
            raise RequestError(f"cannot run {type(expr).__name__}")

    def _exec_role(self, expr: Role) -> Steps:
        if not self._is_chat and "".join(self._parts):
            raise RequestError(
                f"{expr.role}(...) after plain text: a program is either plain text or chat turns"
            )
        self._is_chat = True
        self._open_role, self._open_content = expr.role, ""
        yield from self._exec(expr.body)
        self._messages.append({"role": expr.role, "content": self._open_content})
        self._open_role, self._open_content = None, ""

    def _exec_template(self, t: TemplateFill) -> Steps:
        tpl = t.template
        if tpl.prefix:
            self._append(tpl.prefix)
        params = SamplingParams(max_tokens=t.max_tokens, temperature=t.temperature)
        text, out = yield from self._generate(Regex(tpl.pattern), params, t.token_healing,
                                              "template")
        res = tpl.parse(text)
        res.output = out
        if t.result_name is not None:
            self._capture(t.result_name, res, out)
        else:
            for name, value in res.items():
                self._capture(name, value, out)

    def _generate(self, constraint: Any, params: SamplingParams, token_healing: bool,
                  what: str) -> Steps:
        """One gen call on the prompt so far (healed); appends and returns (text, output)."""
        ids = self._prompt_ids()
        healing = heal(self.backend, ids) if token_healing else Healing(ids)
        if healing.removed:
            constraint = healing.constraint(constraint)
            params = dataclasses.replace(params, max_tokens=params.max_tokens + 1)
        on_delta = self._stream_delta(len(healing.removed)) if self._sink else None
        (out,) = yield [Call(healing.prompt_ids, params, constraint, on_delta)]
        if out.finish_reason == "error":
            raise RequestError(f"{what} failed: {out.error}")
        text = out.text[len(healing.removed):] if out.text.startswith(healing.removed) else out.text
        self._append(text, streamed=on_delta is not None)
        return text, out

    def _exec_gen(self, g: Gen) -> Steps:
        params = g.params
        if params.seed is not None and self._seed_offset:
            params = dataclasses.replace(params, seed=params.seed + self._seed_offset)
        text, out = yield from self._generate(
            g.constraint, params, g.token_healing, f"gen {g.name!r}"
        )
        value: Any = text
        if g.schema is not None:
            value = _parse_json(text, g.schema, out.finish_reason)
        self._capture(g.name, value, out)

    def _stream_delta(self, skip: int) -> Callable[[str], None]:
        left = [skip]  # healed text the output repeats first, not streamed again

        def on_delta(text: str) -> None:
            cut = min(left[0], len(text))
            left[0] -= cut
            if text[cut:] and self._sink is not None:
                self._sink(text[cut:])

        return on_delta

    def _exec_select(self, sel: Select) -> Steps:
        base = self._prompt_ids()
        fulls = [self._prompt_ids(opt) for opt in sel.options]
        # log-probs only from each option's first token on: the shared prompt's KV is
        # served by the prefix cache (the first request computes it, the rest reuse it)
        params = [dataclasses.replace(_SELECT_PARAMS,
                                      prompt_logprobs_start=max(1, common_prefix(base, f)))
                  for f in fulls]
        outs = yield [Call(f, p) for f, p in zip(fulls, params)]
        scores = [option_score(base, f, o) for f, o in zip(fulls, outs)]
        best = max(range(len(scores)), key=lambda i: (scores[i], -i))
        choice = sel.options[best]
        self._append(choice)
        self._capture(sel.name, choice)
        if sel.name is not None:
            self._scores[sel.name] = dict(zip(sel.options, scores))

    def select_scores(self, name: str) -> dict[str, float]:
        """The normalised log-probability of every option of the select named ``name``."""
        return dict(self._scores[name])


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common leading run of two token id lists."""
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def option_score(base: list[int], full: list[int], out: RequestOutput) -> float:
    """Mean log-probability of ``full``'s tokens after its common prefix with ``base``.

    The option's tokens are those of ``prompt + option`` past the longest common token
    prefix with the prompt alone (so a token merged across the boundary counts).

    Raises:
        RequestError: the request failed (no prompt log-probabilities).
    """
    if out.finish_reason == "error" or out.prompt_logprobs is None:
        raise RequestError(f"select could not score an option: {out.error}")
    positions = range(max(common_prefix(base, full), 1), len(full))
    lps = [out.prompt_logprobs[j][full[j]] for j in positions]
    return sum(lps) / max(1, len(lps))


def _parse_json(text: str, schema: Any, finish_reason: str | None) -> Any:
    if finish_reason == "length":
        raise ExtractionError(
            "gen(json_schema=...) hit max_tokens before the JSON was complete; raise max_tokens",
            raw_text=text, finish_reason=finish_reason,
        )
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExtractionError(f"generated text is not JSON: {exc}", text, finish_reason) from exc
    if isinstance(schema, type) and hasattr(schema, "model_validate"):
        return schema.model_validate(value)
    return value
