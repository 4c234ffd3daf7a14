"""The structgen language: programs over a state, primitives, templates, constraints.

Public names are re-exported from ``structgen``: ``function``, ``gen``, ``select``,
``system``, ``user``, ``assistant``, ``template``, ``set_default_backend``, and the
constraint terms ``Regex``, ``JsonSchema``, ``Choice``.
"""

from __future__ import annotations

from structgen.lang.constraints import Choice, JsonSchema, Regex, to_constraint

__all__ = ["Choice", "JsonSchema", "Regex", "to_constraint"]
