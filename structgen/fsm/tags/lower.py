r"""A structural tag's format tree -> one regex with shared (and boolean) definitions.

Every node with regular content (all but ``GrammarContent``) lowers to regex text; the
whole tree becomes one pattern that ``compile_spec`` turns into one lazily built byte
automaton, so jump-forward, speculation and the token budget see an ordinary grammar.

Free text is where no trigger occurs. With ``A = (?s:.)`` (one code point) and ``T`` the
alternation of the triggers (``regex.definitions`` writes the boolean parts):

* ``free = A* & !(A* T A*)``: text without any trigger;
* ``lead(t) = (A* t) & !(A* T A+)``: text that ends with trigger ``t`` and holds no
  other trigger occurrence ending before its end, i.e. free text up to the first
  trigger, which is ``t``;
* a region of tag ``begin, content, end`` whose begin starts with ``t``:
  ``lead(t) begin[len(t):] content end``; one alternative per trigger ``begin``
  starts with;
* ``TriggeredTags``: ``region* free`` (``region+ free`` with ``at_least_one``;
  ``region | free`` with ``stop_after_first``, ``region`` with both).

Free text is valid UTF-8 (``A`` is a code point), so it never holds a special token's
bytes. A tag whose content is ``AnyText`` reads any text without its end, then the end.
"""

from __future__ import annotations

import re

from ...errors import (
    GrammarTooComplexError,
    InvalidGrammarError,
    RegexError,
    SchemaError,
    UnsupportedGrammarError,
    UnsupportedRegexError,
    UnsupportedSchemaError,
)
from ..regex.anchors import strip_end_anchors
from ..regex.definitions import (
    COMPLEMENT,
    INTERSECT,
    MAX_DEFINITIONS,
    PLACEHOLDER_BASE,
    RAW_BYTES,
)
from ..regex.escape import RESERVED_FROM, escape_literal
from .format import (
    AnyText,
    ConstString,
    FormatNode,
    GrammarContent,
    JsonContent,
    Or,
    RegexContent,
    Sequence,
    Tag,
    TagsWithSeparator,
    TriggeredTags,
)

__all__ = ["lower_format"]

_CHAR = "(?s:.)"
_GLOBAL_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")


def lower_format(
    node: FormatNode,
    *,
    max_convert_seconds: float | None = None,
    special_tokens: dict[str, int] | None = None,
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """The regex of a format tree.

    Args:
        node: the tree's root.
        max_convert_seconds: time budget of each JSON content's conversion.
        special_tokens: text -> id of the special tokens a trigger, begin or end may be
            written as (``compile_structural_tag``): each such text is also accepted as
            the token's marker (``index.vocabulary.special_token_marker``), one token.

    Returns:
        ``(pattern, definitions, warnings)``, as ``LoweredRegex``'s fields.

    Raises:
        InvalidSchemaError, UnsupportedSchemaError: a JSON content's schema; the pointer
            is the one inside the structural tag (``/structures/0/schema/...``).
        RegexError, UnsupportedRegexError: a regex content (the message names where).
        InvalidGrammarError: a tag's begin starts with no trigger, no tags or triggers.
        UnsupportedGrammarError: a grammar content (not regular).
        GrammarTooComplexError: more shared definitions than placeholders.
    """
    builder = _Builder(max_convert_seconds, special_tokens or {})
    pattern = builder.lower(node)
    return pattern, tuple(builder.definitions), tuple(builder.warnings)


class _Builder:
    """Collects the definitions of one tree while its nodes are lowered."""

    def __init__(self, max_convert_seconds: float | None, special_tokens: dict[str, int]) -> None:
        self.definitions: list[str] = []
        self.warnings: list[str] = []
        self._named: dict[str, str] = {}
        self._max_convert_seconds = max_convert_seconds
        self._special = special_tokens

    def marker(self, text: str) -> str | None:
        """The placeholder of the marker of the special token written ``text``, or None."""
        tid = self._special.get(text)
        if tid is None:
            return None
        from ..index.vocabulary import special_token_marker

        return self.define(RAW_BYTES + special_token_marker(tid).decode("latin-1"))

    def text_or_token(self, text: str) -> str:
        """``text`` as characters, or as its special token where it is one."""
        marker = self.marker(text)
        literal = escape_literal(text)
        return literal if marker is None else f"(?:{literal}|{marker})"

    def define(self, text: str) -> str:
        """The placeholder of definition ``text`` (added once)."""
        hit = self._named.get(text)
        if hit is not None:
            return hit
        if len(self.definitions) >= MAX_DEFINITIONS:
            raise GrammarTooComplexError(
                f"a structural tag shares more than {MAX_DEFINITIONS} definitions"
            )
        self.definitions.append(text)
        placeholder = chr(PLACEHOLDER_BASE + len(self.definitions) - 1)
        self._named[text] = placeholder
        return placeholder

    def lower(self, node: FormatNode) -> str:
        if isinstance(node, ConstString):
            return escape_literal(node.value)
        if isinstance(node, JsonContent):
            return self._json(node)
        if isinstance(node, RegexContent):
            return self._regex(node)
        if isinstance(node, GrammarContent):
            raise UnsupportedGrammarError(
                f"structural tag at {node.where or '#'}: grammar contents are not regular "
                "and cannot be composed with the other regions yet; write the content as "
                "a regex or JSON Schema"
            )
        if isinstance(node, AnyText):
            return _CHAR + "*"
        if isinstance(node, Sequence):
            return "".join("(?:" + self.lower(e) + ")" for e in node.elements)
        if isinstance(node, Or):
            return "(?:" + "|".join(self.lower(e) for e in node.elements) + ")"
        if isinstance(node, Tag):
            return self.text_or_token(node.begin) + self._tag_rest(node)
        if isinstance(node, TriggeredTags):
            return self._triggered(node)
        if isinstance(node, TagsWithSeparator):
            return self._separated(node)
        raise UnsupportedGrammarError(f"unknown structural tag node {type(node).__name__}")

    def _tag_rest(self, tag: Tag) -> str:
        """The content and end of ``tag`` (what follows its begin)."""
        ends = "(?:" + "|".join(self.text_or_token(e) for e in tag.end) + ")"
        if isinstance(tag.content, AnyText):
            if not all(tag.end):
                raise InvalidGrammarError(
                    f"structural tag at {tag.where or '#'}: any_text content needs a non-empty end"
                )
            texts = "(?:" + "|".join(escape_literal(e) for e in tag.end) + ")"
            return self._without(texts) + ends
        return "(?:" + self.lower(tag.content) + ")" + ends

    def _without(self, texts: str) -> str:
        """Placeholder of the text holding no occurrence of the regex ``texts``."""
        anything = self.define(_CHAR + "*")
        holding = self.define(_CHAR + "*" + texts + _CHAR + "*")
        return self.define(INTERSECT + anything + self.define(COMPLEMENT + holding))

    def _triggered(self, node: TriggeredTags) -> str:
        if not node.triggers or not all(node.triggers):
            raise InvalidGrammarError(
                f"structural tag at {node.where or '#'}: triggers must be non-empty strings"
            )
        if not node.tags:
            raise InvalidGrammarError(f"structural tag at {node.where or '#'}: no tags")
        triggers = "(?:" + "|".join(escape_literal(t) for t in node.triggers) + ")"
        free = self._without(triggers)
        early = self.define(COMPLEMENT + self.define(_CHAR + "*" + triggers + _CHAR + "+"))
        regions = []
        for tag in node.tags:
            starts = [t for t in dict.fromkeys(node.triggers) if tag.begin.startswith(t)]
            if not starts:
                raise InvalidGrammarError(
                    f"structural tag at {tag.where or '#'}: begin {tag.begin!r} starts with "
                    f"none of the triggers {list(node.triggers)}"
                )
            rest = self._tag_rest(tag)
            for t in starts:
                lead = self.define(INTERSECT + self.define(_CHAR + "*" + escape_literal(t)) + early)
                regions.append(lead + escape_literal(tag.begin[len(t) :]) + rest)
                marker = self.marker(t)  # the trigger as its one special token
                if marker is not None:
                    regions.append(free + marker + escape_literal(tag.begin[len(t) :]) + rest)
            marker = self.marker(tag.begin)
            if marker is not None and tag.begin not in starts:  # the begin as one token
                regions.append(free + marker + rest)
        region = self.define("|".join(regions))
        if node.stop_after_first:
            return region if node.at_least_one else f"(?:{region}|{free})"
        return region + ("+" if node.at_least_one else "*") + free

    def _separated(self, node: TagsWithSeparator) -> str:
        if not node.tags:
            raise InvalidGrammarError(f"structural tag at {node.where or '#'}: no tags")
        one = self.define("|".join(self.lower(t) for t in node.tags))
        if node.stop_after_first:
            return one if node.at_least_one else f"{one}?"
        several = f"{one}(?:{escape_literal(node.separator)}{one})*"
        return several if node.at_least_one else f"(?:{several})?"

    def _json(self, node: JsonContent) -> str:
        try:
            low = node.spec.lower(max_convert_seconds=self._max_convert_seconds)
        except UnsupportedSchemaError as exc:
            raise UnsupportedSchemaError(exc.keyword, node.where + exc.pointer, exc.detail) from exc
        except SchemaError as exc:
            message = str(exc).rsplit(" (at ", 1)[0]
            raise type(exc)(f"structural tag: {message}", node.where + exc.pointer) from exc
        self.warnings.extend(f"{node.where}: {w}" for w in low.warnings)
        offset = len(self.definitions)
        shift = {
            PLACEHOLDER_BASE + i: PLACEHOLDER_BASE + offset + i for i in range(len(low.definitions))
        }
        for text in low.definitions:  # appended in order: each refers only to earlier ones
            if len(self.definitions) >= MAX_DEFINITIONS:
                raise GrammarTooComplexError(
                    f"a structural tag shares more than {MAX_DEFINITIONS} definitions"
                )
            self.definitions.append(text.translate(shift))
        return low.pattern.translate(shift)

    def _regex(self, node: RegexContent) -> str:
        from ..regex.parse import lower as parse_lower
        from ..regex.terms import TermArena

        if any(ord(c) >= RESERVED_FROM for c in node.pattern):
            raise UnsupportedRegexError(
                f"structural tag at {node.where or '#'}: a raw code point at or above "
                f"U+{RESERVED_FROM:X} in a regex; write it as an escape"
            )
        try:
            parse_lower(node.pattern, TermArena())  # its own errors, named by where
        except RegexError as exc:
            raise type(exc)(f"structural tag at {node.where or '#'}: {exc}") from exc
        text, _ = strip_end_anchors(node.pattern)  # checked above: no stray anchor left
        flags = ""
        while (m := _GLOBAL_FLAGS.match(text)) is not None:  # legal only at the very start
            flags, text = flags + m.group(1), text[m.end() :]
        return f"(?{flags}:{text})" if flags else text
