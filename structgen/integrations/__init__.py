"""Adapters that let other generation stacks use structgen's compiled grammars.

``structgen.integrations.transformers``: a ``LogitsProcessor`` for ``model.generate``.
Imported lazily: importing this package imports no third-party library.
"""

from __future__ import annotations

__all__: list[str] = []
