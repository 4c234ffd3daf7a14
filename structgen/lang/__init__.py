"""The structgen language: programs over a state, primitives, templates.

Public names are re-exported from ``structgen``: ``function``, ``gen``, ``select``,
``system``, ``user``, ``assistant``, ``template``, ``set_default_backend``. The constraint
terms (``Regex``, ``JsonSchema``, ``Choice``) belong to the grammar layer,
``structgen.fsm.spec``, and are re-exported from ``structgen`` too.

Modules, each importing only those listed before it (checked by
``tests/lang/test_lang_layering.py``):

- ``expr``, ``template``: the IR, immutable nodes and their pure lowering (no model state);
- ``healing``: token healing as a spec composition;
- ``backend``, ``openai_backend``: where generation calls run (a local engine, a server);
- ``driver``: the runner, interpreting nodes on a state in batched rounds of calls;
- ``state``: ``ProgramState``, the text, chat and captures, whose ``+=`` calls the runner;
- ``program``: the user-facing ``@function`` programs and ``template(...)``.
"""

from __future__ import annotations

__all__: list[str] = []
