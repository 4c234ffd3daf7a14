"""Parse a generated turn in a tool-call format back into OpenAI deltas, incrementally.

:class:`ToolCallParser` reads the text as it is generated and returns chat-completion
deltas: ``{"content": text}`` for the answer's text, and ``{"tool_calls": [{"index": i,
...}]}`` for call ``i`` (its first delta carries ``id``, ``type`` and ``function.name``
with empty ``arguments``; later ones carry argument text). The end of the arguments is
found by scanning the JSON value (strings, escapes, nesting), so any chunking of the
text gives the same result. Whitespace between the text and a call, and after the last
call at the end of the turn, is not content. Text that does not form a call (a turn cut
by ``max_tokens`` inside a call's head) comes back as content; a call cut inside its
arguments keeps the arguments it streamed.
"""

from __future__ import annotations

import json
import re
import uuid

from structgen.tools.formats import ToolCallFormat

__all__ = ["ToolCallParser", "collect"]

_JSON_STRING = r'"(?:[^"\\]|\\.)*"'


def _prefix_overlap(text: str, word: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``word``."""
    for k in range(min(len(text), len(word) - 1), 0, -1):
        if text.endswith(word[:k]):
            return k
    return 0


class ToolCallParser:
    """Turns one generated turn in ``fmt`` into chat deltas (module docstring).

    Args:
        fmt: the tool-call format the turn was generated in.
        mode: ``"call"`` (the turn starts with the calls: ``required`` or a named tool)
            or ``"auto"`` (text, calls where the format's trigger appears).

    Raises: never (``feed`` and ``finish`` only return deltas).
    """

    def __init__(self, fmt: ToolCallFormat, mode: str) -> None:
        self.fmt = fmt
        self.mode = mode
        self.buf = ""
        self.calls: list[dict] = []  # {"id", "name"} per call
        self._pos = 0
        self._ws = ""  # whitespace held back (content unless a call follows)
        self._head = re.compile(
            re.escape(fmt.call_begin)
            + (f"({_JSON_STRING})" if fmt.json_name else r"([^\n]*?)")
            + re.escape(fmt.args_intro)
        )
        self._extra = re.compile(fmt.call_extra) if fmt.call_extra else None
        self._state = "block" if mode == "call" else "start"
        self._closed = 0  # calls whose end text has been read
        self._call_start = 0
        self._after_call = False
        self._said = False  # some content was returned

    @property
    def is_tool_call(self) -> bool:
        """True once a call's name has been parsed."""
        return bool(self.calls)

    @property
    def is_complete_call(self) -> bool:
        """True when at least one call was read and every call read is complete."""
        return bool(self.calls) and self._closed == len(self.calls) and self._state == "text"

    # ------------------------------------------------------------------ text
    def _content(self, text: str, out: list[dict]) -> None:
        text = self._ws + text
        self._ws = ""
        if self._after_call and not self._said:  # whitespace after a call, at the start
            text = text.lstrip()
            self._after_call = not text
        body = text.rstrip()
        if body:
            out.append({"content": body})
            self._said = True
        self._ws = text[len(body) :]

    def _text_step(self, out: list[dict]) -> bool:
        """Content up to the trigger (or the lead); True when a block starts at ``_pos``."""
        rest = self.buf[self._pos :]
        trig = self.fmt.trigger or self.fmt.lead
        if trig is None:
            self._content(rest, out)
            self._pos = len(self.buf)
            return False
        at = rest.find(trig)
        if at < 0:
            keep = _prefix_overlap(rest, trig)
            self._content(rest[: len(rest) - keep], out)
            self._pos += len(rest) - keep
            return False
        self._content(rest[:at], out)
        self._ws = ""  # whitespace before a call is not content
        self._pos += at
        return True

    # ----------------------------------------------------------------- feed
    def feed(self, delta: str) -> list[dict]:
        """Deltas for ``delta``, the newly generated text."""
        self.buf += delta
        out: list[dict] = []
        while True:
            s = self._state
            if s == "start":  # auto mode, nothing read yet
                if self.fmt.trigger is not None:
                    self._state = "text"
                    continue
                rest = self.buf[self._pos :]
                if not rest:
                    return out
                lead = self.fmt.lead
                if lead and (rest.startswith(lead) or lead.startswith(rest)):
                    if len(rest) < len(lead):
                        return out
                    self._state = "block"  # the block reads the lead
                    continue
                self._state = "block" if rest[0] == "{" else "text"
            elif s == "text":
                if not self._text_step(out):
                    return out
                self._state = "block"
            elif s == "block":
                rest = self.buf[self._pos :]
                lead = self.fmt.lead
                if lead and (rest.startswith(lead) or lead.startswith(rest)):
                    if len(rest) < len(lead):
                        return out
                    self._pos += len(lead)
                    rest = rest[len(lead) :]
                begin = self.fmt.block_begin
                if len(rest) < len(begin):
                    return out
                if not rest.startswith(begin):
                    self._state = "text"
                    self._flush_literal(len(begin), out)
                    continue
                self._pos += len(begin)
                self._state = "head"
            elif s == "head":
                self._call_start = self._pos
                m = self._head.match(self.buf, self._pos)
                if m is None:
                    return out
                name = json.loads(m.group(1)) if self.fmt.json_name else m.group(1)
                call = {"id": "call_" + uuid.uuid4().hex[:24], "name": name}
                self.calls.append(call)
                out.append(
                    {
                        "tool_calls": [
                            {
                                "index": len(self.calls) - 1,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                )
                self._pos = m.end()
                self._scan = _JsonScan()
                self._state = "args"
            elif s == "args":
                start = self._pos
                self._pos = self._scan.advance(self.buf, self._pos)
                if self._pos > start:
                    out.append(self._args_delta(self.buf[start : self._pos]))
                if not self._scan.done:
                    return out
                self._state = "end"
            elif s == "end":
                if self._extra is not None:
                    m = self._extra.match(self.buf, self._pos)
                    if m is not None and m.end() < len(self.buf):
                        self._pos = m.end()
                    elif self.buf.startswith(",", self._pos) and "}" not in self.buf[self._pos :]:
                        return out  # the id may still come
                rest = self.buf[self._pos :]
                end = self.fmt.call_end
                if len(rest) < len(end) and end.startswith(rest):
                    return out
                if not rest.startswith(end):
                    self._state = "text"  # cannot happen under the constraint
                    continue
                self._pos += len(end)
                self._closed += 1
                self._state = "after"
            elif s == "after":
                rest = self.buf[self._pos :]
                sep, end = self.fmt.call_sep, self.fmt.block_end
                nxt = (sep + self.fmt.call_begin) if sep is not None else None
                if nxt is not None and rest.startswith(nxt):
                    self._pos += len(sep)
                    self._state = "head"
                    continue
                if end and rest.startswith(end):
                    self._pos += len(end)
                    self._state, self._after_call = "text", True
                    continue
                waiting = (nxt is not None and nxt.startswith(rest)) or (
                    end and end.startswith(rest)
                )
                if waiting:
                    return out
                self._state, self._after_call = "text", True

    def _flush_literal(self, n: int, out: list[dict]) -> None:
        """Content for ``n`` characters at ``_pos`` that did not open a block."""
        self._content(self.buf[self._pos : self._pos + n], out)
        self._pos += n

    def finish(self) -> list[dict]:
        """Deltas for the rest of the text, once generation has ended."""
        out: list[dict] = []
        if self._state == "head":
            self._pos = self._call_start
            self._state = "text"
        if self._state in ("args", "end"):
            return out  # a cut call keeps the arguments it streamed
        rest = self.buf[self._pos :]
        self._pos = len(self.buf)
        if self._state == "after" and not rest.strip():
            self._state = "text"
            return out
        if self._state != "after":
            self._state = "text"
        text = self._ws + rest
        self._ws = ""
        if text and (text.strip() or not self.calls):
            out.append({"content": text.rstrip() if self.calls else text})
        return out

    def _args_delta(self, text: str) -> dict:
        return {"tool_calls": [{"index": len(self.calls) - 1, "function": {"arguments": text}}]}


class _JsonScan:
    """Finds the end of one JSON value in text given in pieces (``advance``)."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escape = False
        self.started = False
        self.done = False

    def advance(self, buf: str, pos: int) -> int:
        """Scan ``buf`` from ``pos``; returns the position after what was consumed."""
        while pos < len(buf) and not self.done:
            c = buf[pos]
            if self.in_string:
                if self.escape:
                    self.escape = False
                elif c == "\\":
                    self.escape = True
                elif c == '"':
                    self.in_string = False
                    self.done = self.depth == 0
            elif not self.started and c in " \t\r\n":
                pass
            elif c == '"':
                self.in_string = True
                self.started = True
            elif c in "{[":
                self.depth += 1
                self.started = True
            elif c in "}]":
                if self.depth == 0:  # a scalar ended by its container
                    self.done = True
                    return pos
                self.depth -= 1
                self.done = self.depth == 0
            elif self.depth == 0 and self.started and c in ",\n ":
                self.done = True
                return pos
            else:
                self.started = True
            pos += 1
        return pos


def collect(deltas: list[dict]) -> tuple[str | None, list[dict] | None]:
    """Merge deltas into a message's ``content`` and ``tool_calls`` (None when empty)."""
    content: list[str] = []
    calls: dict[int, dict] = {}
    for d in deltas:
        if "content" in d:
            content.append(d["content"])
        for tc in d.get("tool_calls", ()):
            call = calls.get(tc["index"])
            if call is None:
                calls[tc["index"]] = {
                    "id": tc["id"],
                    "type": "function",
                    "function": {"name": tc["function"]["name"], "arguments": ""},
                }
            else:
                call["function"]["arguments"] += tc["function"]["arguments"]
    text = "".join(content)
    return (text or None), ([calls[i] for i in sorted(calls)] if calls else None)
