"""Token healing in front of a ``gen(regex=...)`` whose pattern has end anchors or global
flags: the healed constraint is the removed text, then the same language. Before, the
pattern was pasted into the middle of the concatenation's regex, where ``^``/``$`` are
refused ("anchors are taken only at the start...") and ``(?i)`` does not parse ("global
flags not at the start"), so ``s += "Year: " + gen("y", regex=r"^[0-9]{4}$")`` raised.

Reference: ``text.startswith(removed)`` and ``re.fullmatch(pattern, rest)``, over every
text of up to 3 characters of an alphabet and the examples; the constraint compiled
locally and as the ``regex`` OpenAIBackend sends.
"""

from __future__ import annotations

import itertools
import re

import pytest

from structgen.fsm import compile_regex
from structgen.fsm.regex.parse import regex_group
from structgen.fsm.spec import Regex
from structgen.lang.healing import Healing
from structgen.lang.openai_backend import _constraint_fields

PATTERNS = [r"^[0-9]{2}$", r"(?i)ok", r"(?i)^no?$", r"x|^y$", r"(?s)\Aa.\Z", r"(?i)(?s)a.", "ab*"]
EXAMPLES = [
    "12",
    "123",
    "OK",
    "oK",
    "ok",
    "N",
    "no",
    "NO",
    "x",
    "y",
    "xy",
    "a\n",
    "A\n",
    "ab",
    "abb",
]


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("removed", [" ", "a", '"'])
def test_healed_regex_keeps_its_language(pattern, removed):
    healed = Healing([1], removed).constraint(Regex(pattern))
    local = healed.compile(None)
    sent = compile_regex(_constraint_fields(healed)["regex"])
    alphabet = sorted(set("".join(EXAMPLES)) | set(removed))
    texts = {removed + e for e in EXAMPLES}
    texts |= {"".join(p) for n in range(4) for p in itertools.product(alphabet, repeat=n)}
    hits = 0
    for text in texts:
        want = text.startswith(removed) and re.fullmatch(pattern, text[len(removed) :]) is not None
        assert local.matches(text) == want, text
        assert sent.matches(text) == want, text
        hits += want
    assert hits


def test_regex_group_refuses_an_anchor_inside():
    from structgen.errors import UnsupportedRegexError

    assert regex_group("(?i)^ok$") == "(?i:ok)"
    with pytest.raises(UnsupportedRegexError, match="anchors are taken only"):
        regex_group("a^b")
