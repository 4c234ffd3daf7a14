"""Token healing at the boundary between the prompt and the generated text.

A prompt that ends in the middle of what the tokenizer would merge (``"Answer: "``
ends in a lone space token, ``"the capital is Par"`` in a partial word, ``{"a": "``
in a quote) makes the model continue from an unnatural token boundary. Healing (as
Guidance does) removes the prompt's last token and requires the generated text to
start with that token's text, so the model may pick a token that covers both.

Here the requirement is a spec prefix: the gen's constraint ``C`` becomes
``Concatenation([Choice([removed]), C])`` (any text after the removed one for an
unconstrained gen), and the removed text is cut from the front of the output again. The
first token may be any token whose bytes are consistent with the removed text (covering
it, or a prefix of it followed by the rest by jump-forward).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from structgen.errors import RequestError
from structgen.fsm.spec import Choice, Concatenation, Grammar, Regex, RegexSpec

__all__ = ["Healing", "heal"]

#: Unconstrained text, as a pattern the fsm reads.
ANY_TEXT = r"[\s\S]*"


@dataclass(frozen=True)
class Healing:
    """The outcome of :func:`heal`.

    Attributes:
        prompt_ids: the prompt with its last token removed (or unchanged).
        removed: the removed token's text ("" when not healed).
    """

    prompt_ids: list[int]
    removed: str = ""

    def constraint(self, constraint: RegexSpec | None) -> RegexSpec | None:
        """The gen's constraint with the removed text required in front.

        Args:
            constraint: the gen's spec, or None (unconstrained).

        Returns:
            ``constraint`` itself when nothing was removed; else the removed text (a
            one-option ``Choice``) followed by ``constraint`` (by any text for None); for
            a ``Grammar``, the grammar with the removed text as its ``prefix``.

        Raises:
            RequestError: ``constraint`` is not a ``RegexSpec`` or has a trigger.
        """
        if not self.removed:
            return constraint
        if isinstance(constraint, Grammar):
            if constraint.trigger is not None:
                raise RequestError("token healing cannot precede a grammar with a trigger")
            return dataclasses.replace(constraint, prefix=self.removed + constraint.prefix)
        rest = Regex(ANY_TEXT) if constraint is None else constraint
        return Concatenation((Choice([self.removed]), rest))


def _ends_mergeable(text: str) -> bool:
    """A trailing space/tab, quote or word character: text the tokenizer may merge on."""
    if not text:
        return False
    ch = text[-1]
    return ch in " \t\"'" or ch.isalnum() or ch == "_"


def heal(backend, prompt_ids: list[int]) -> Healing:
    """Back up the last prompt token when it could merge with the generated text.

    The token is removed when its text ends in a space, tab, quote or word character,
    it is not a special token, it decodes to whole UTF-8 characters, and a longer
    vocabulary token starts with its bytes. Never removes the only prompt token.

    Args:
        backend: an ``EngineBackend`` (vocabulary, special ids).
        prompt_ids: the full prompt.
    """
    if len(prompt_ids) < 2:
        return Healing(prompt_ids)
    last = prompt_ids[-1]
    if last in backend.special_ids:
        return Healing(prompt_ids)
    try:
        text = backend.vocab.token_bytes[last].decode("utf-8")
    except UnicodeDecodeError:
        return Healing(prompt_ids)
    if not _ends_mergeable(text) or not backend.can_extend(last):
        return Healing(prompt_ids)
    return Healing(list(prompt_ids[:-1]), text)
