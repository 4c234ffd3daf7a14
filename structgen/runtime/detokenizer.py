"""Incremental detokenization that never emits half a UTF-8 character or a partial stop string."""

from __future__ import annotations

from structgen.fsm.jump_forward import complete_utf8_prefix_len

__all__ = ["IncrementalDetokenizer"]


class IncrementalDetokenizer:
    """Turns a growing list of token ids into text, safely, for streaming.

    Text is the UTF-8 decoding of the concatenated token bytes (the same bytes the
    grammar sees). A stop string ends the text before it; text that could still become
    a stop string is held back from :meth:`pop_delta` until it is decided.

    Args:
        token_bytes: bytes of every token id (``Vocabulary.token_bytes``); None for a model
            without a tokenizer: token ids add no text (``text`` stays empty).
        stop: stop strings (may be empty).
    """

    def __init__(
        self, token_bytes: list[bytes] | None, stop: tuple[str, ...] | None = None
    ) -> None:
        self._token_bytes = token_bytes
        self._stop = tuple(stop or ())
        self._buf = bytearray()
        self._text = ""  # decoded complete characters
        self._emitted = 0  # characters already returned by pop_delta
        self.stopped = False  # a stop string was found; text is final

    @property
    def text(self) -> str:
        """All text decided so far (stop string excluded once found)."""
        return self._text

    def add_token(self, token_id: int) -> None:
        """Append one token's bytes; detects stop strings. Raises: never."""
        if self._token_bytes is not None:
            self.add_bytes(self._token_bytes[token_id])

    def add_bytes(self, data: bytes) -> None:
        """Append raw output bytes (e.g. jump-forward text); detects stop strings."""
        if self.stopped or not data:
            return
        self._buf += data
        cut = complete_utf8_prefix_len(bytes(self._buf))
        if cut == 0:
            return
        old_len = len(self._text)
        self._text += bytes(self._buf[:cut]).decode("utf-8", errors="replace")
        del self._buf[:cut]
        for s in self._stop:
            # only search the region a new stop string could appear in
            idx = self._text.find(s, max(0, old_len - len(s) + 1))
            if idx != -1:
                self._text = self._text[:idx]
                self.stopped = True
                self._buf.clear()
        return

    def finish(self) -> str:
        """Flush undecodable trailing bytes (with U+FFFD) at the end of generation."""
        if self._buf and not self.stopped:
            self._text += bytes(self._buf).decode("utf-8", errors="replace")
            self._buf.clear()
        return self._text

    def pop_delta(self) -> str:
        """Text since the last call that can no longer change (safe to stream)."""
        end = len(self._text)
        if not self.stopped:
            for s in self._stop:
                for k in range(min(len(s) - 1, end), 0, -1):
                    if self._text.endswith(s[:k]):
                        end = min(end, len(self._text) - k)
                        break
        end = max(end, self._emitted)
        delta = self._text[self._emitted : end]
        self._emitted = end
        return delta
