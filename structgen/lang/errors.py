"""The language's own error (kept beside the language until ``structgen/errors.py`` takes it)."""

from __future__ import annotations

from structgen.errors import StructgenError

__all__ = ["ProgramError"]


class ProgramError(StructgenError):
    """A structgen program raised; the message names the program's own line.

    Attributes:
        filename: file of the program's line that raised (or called what raised).
        lineno: that line's number.
        original: the exception the program raised (also ``__cause__``).
    """

    def __init__(self, message: str, filename: str = "", lineno: int = 0,
                 original: BaseException | None = None) -> None:
        super().__init__(message)
        self.filename = filename
        self.lineno = lineno
        self.original = original
