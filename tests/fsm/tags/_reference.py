"""A plain-Python reading of structural tags: the oracle of the automaton's language.

The text is scanned from the left: free text up to the first position where a trigger
ends; there a structure whose begin starts with that trigger must follow (its begin
text, a content accepted by ``content_ok``, its end), then free text again. Every
split is tried (contents may be followed by text that also starts an end).
"""

from __future__ import annotations

from collections.abc import Callable


def tag_reference(
    text: str,
    triggers: list[str],
    structures: list[tuple[str, Callable[[str], bool], str]],
    *,
    at_least_one: bool = False,
    stop_after_first: bool = False,
) -> bool:
    """True when ``text`` is in the language of the structural tag.

    Args:
        text: the output.
        triggers: the trigger strings.
        structures: ``(begin, content_ok, end)`` per structure.
        at_least_one: at least one region.
        stop_after_first: the text ends right after the first region's end.
    """

    def from_pos(pos: int, count: int) -> bool:
        for e in range(pos + 1, len(text) + 1):
            ending = [t for t in triggers if text[pos:e].endswith(t)]
            if not ending:
                continue
            for t in ending:
                start = e - len(t)
                for begin, content_ok, end in structures:
                    if not begin.startswith(t) or not text.startswith(begin, start):
                        continue
                    c0 = start + len(begin)
                    for k in range(c0, len(text) - len(end) + 1):
                        if not text.startswith(end, k) or not content_ok(text[c0:k]):
                            continue
                        after = k + len(end)
                        if stop_after_first:
                            if after == len(text):
                                return True
                        elif from_pos(after, count + 1):
                            return True
            return False  # the first trigger occurrence must start a region
        return count >= 1 or not at_least_one

    return from_pos(0, 0)
