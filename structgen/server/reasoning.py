"""Split a chat answer at its ``constraint_trigger``: reasoning before, answer after.

With ``constraint_trigger`` (e.g. ``"</think>"``) the model writes free text until the
trigger and the constrained answer after it. Like vLLM's and SGLang's reasoning parsers,
the chat endpoint returns the text before the first trigger as
``message.reasoning_content`` and the text after it as ``message.content`` (the trigger
itself in neither); streamed, the deltas carry ``reasoning_content`` until the trigger
and ``content`` after it. A trigger split across deltas is held back until it is
complete or ruled out. ``/v1/completions`` returns the whole text unsplit.
"""

from __future__ import annotations

__all__ = ["ReasoningSplit"]


class ReasoningSplit:
    """Incremental splitter of one choice's text at the first ``trigger``.

    ``feed(delta_text)`` and ``finish()`` return chat delta dicts
    (``{"reasoning_content": s}`` or ``{"content": s}``). Raises: never.

    Args:
        trigger: the non-empty trigger string.
    """

    def __init__(self, trigger: str) -> None:
        self.trigger = trigger
        self.found = False
        self._held = ""  # reasoning text not sent yet: may be the start of the trigger

    def feed(self, delta: str) -> list[dict]:
        """Deltas for ``delta``, the newly generated text."""
        if self.found:
            return [{"content": delta}] if delta else []
        text = self._held + delta
        i = text.find(self.trigger)
        if i >= 0:
            self.found = True
            self._held = ""
            head, rest = text[:i], text[i + len(self.trigger) :]
            return ([{"reasoning_content": head}] if head else []) + (
                [{"content": rest}] if rest else []
            )
        keep = next(
            (
                k
                for k in range(min(len(self.trigger) - 1, len(text)), 0, -1)
                if text.endswith(self.trigger[:k])
            ),
            0,
        )
        self._held = text[len(text) - keep :] if keep else ""
        sent = text[: len(text) - keep]
        return [{"reasoning_content": sent}] if sent else []

    def finish(self) -> list[dict]:
        """The held-back text, once generation has ended (no trigger came)."""
        rest, self._held = self._held, ""
        return [{"reasoning_content": rest}] if rest else []

    @staticmethod
    def merge(deltas: list[dict]) -> dict:
        """``{"content", "reasoning_content"}`` of a whole message (None where empty)."""
        parts: dict[str, list[str]] = {"content": [], "reasoning_content": []}
        for d in deltas:
            for key, text in d.items():
                parts[key].append(text)
        return {k: ("".join(v) if v else None) for k, v in parts.items()}
