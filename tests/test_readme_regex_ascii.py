"""README's regex claims a user from Python's ``re`` trips on: ``\\d``, ``\\w``, ``\\s`` are
ASCII (as under ``re.ASCII``) in ``compile_regex`` and in Lark's ``/.../`` terminals, a class
naming other letters takes them, and lookaround / backreferences raise
``UnsupportedRegexError``. Reference: ``re.fullmatch`` with ``re.ASCII``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from structgen.errors import UnsupportedRegexError
from structgen.fsm import compile_grammar, compile_regex

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
TEXTS = ["héllo", "hello", "中文", "١٢٣", "123", " ", "\u00a0", "\u2003", "a_1"]


@pytest.mark.parametrize(
    "pattern", [r"\w+", r"\d+", r"\s", r"[^\W\d]+", r"\S+", r"[\w\u00C0-\u024F]+"]
)
def test_classes_are_ascii_as_readme_says(pattern):
    g = compile_regex(pattern)
    lark = compile_grammar(f"start: /{pattern}/", syntax="lark")
    for text in TEXTS:
        want = re.fullmatch(pattern, text, re.ASCII) is not None
        assert g.matches(text) == want, text
        assert lark.matches(text) == want, text
    assert compile_regex(r"[\w\u00C0-\u024F]+").matches("héllo")
    assert "are ASCII, as under `re.ASCII`" in README
    assert "`[\\w\\u00C0-\\u024F]+` takes `héllo`" in README


@pytest.mark.parametrize("pattern", [r"(?=a)a", r"(?<!b)a", r"(a)\1"])
def test_lookaround_and_backreferences_raise(pattern):
    with pytest.raises(UnsupportedRegexError):
        compile_regex(pattern)
