"""The structgen language: programs over a state, primitives, templates.

Public names are re-exported from ``structgen``: ``function``, ``gen``, ``select``,
``system``, ``user``, ``assistant``, ``template``, ``set_default_backend``. The constraint
terms (``Regex``, ``JsonSchema``, ``Choice``) belong to the grammar layer,
``structgen.fsm.spec``, and are re-exported from ``structgen`` too.
"""

from __future__ import annotations

__all__: list[str] = []
