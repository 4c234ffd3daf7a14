"""Constraint specs -> byte DFA -> token index -> per-request matcher.

A spec (``spec.py``: ``Regex``, ``JsonSchema``, ``Choice``, ``Concatenation``) compiles to a
``BaseCompiledGrammar`` whose ``matcher()`` gives the per-request ``BaseMatcher`` the
runtime drives (``base.py``: the interfaces and the decoding loop). ``compile_spec``,
``compile_regex`` / ``compile_json_schema`` / ``compile_choice`` return the regex
implementation's cached ``CompiledGrammar`` and ``Matcher``.

Layout, in pipeline order:

* ``spec.py``: constraint specs; ``base.py``: the grammar interfaces;
* ``regex/``: regex text -> hash-consed byte terms -> lazily built ``ByteDFA``;
* ``json_schema/``: JSON Schema -> regex text with shared definitions, one module per
  keyword family;
* ``index/``: a DFA meets a ``Vocabulary``: token trie, ``TokenIndex`` masks, mask writing,
  completion budget;
* ``grammar/``: context-free grammars (Lark, GBNF, EBNF) -> a lexer + Earley automaton
  behind the same interfaces (``compile_grammar``);
* ``compiler.py``: ``CompiledGrammar`` and the cached ``compile_*`` entry points;
  ``matcher.py``: the per-request ``Matcher``; ``jump_forward.py``: forced-text planning;
  ``grammar_pool.py``: the thread pool that fills a batch's bitmask rows in parallel.
"""

from __future__ import annotations

from typing import Any

# Imported on first use (PEP 562), so that ``import structgen`` and the CLI's argument
# parsing do not load the compiler and its torch-backed mask writer.
_LAZY = {
    "BaseCompiledGrammar": ".base",
    "BaseMatcher": ".base",
    "CompiledGrammar": ".compiler",
    "compile_choice": ".compiler",
    "compile_json_schema": ".compiler",
    "compile_regex": ".compiler",
    "compile_spec": ".compiler",
    "compile_grammar": ".grammar",
    "TokenIndex": ".index.token_index",
    "Vocabulary": ".index.vocabulary",
    "json_schema_to_regex": ".json_schema",
    "Matcher": ".matcher",
    "ByteDFA": ".regex.dfa",
    "regex_to_dfa": ".regex.dfa",
    "schema_for": ".spec",
}

__all__ = [
    "Vocabulary",
    "ByteDFA",
    "TokenIndex",
    "BaseMatcher",
    "BaseCompiledGrammar",
    "Matcher",
    "CompiledGrammar",
    "compile_spec",
    "compile_regex",
    "compile_json_schema",
    "compile_choice",
    "compile_grammar",
    "clear_cache",
    "json_schema_to_regex",
    "regex_to_dfa",
    "schema_for",
]


# The per-process memos a compile fills and later compiles of any schema reuse (module,
# attribute: an ``LRUCache``, a dict or an ``lru_cache`` function): the atom recipes of regex
# lowering, the reusable definitions' arena snapshots, closed rules, the "any value" texts,
# the key tries' texts of schemas allowing extra keys, bounded string bodies, copy plans.
_MEMOS = (
    (".regex.lower", "_ATOM_RECIPES"),
    (".regex.reused", "_runs"),
    (".regex.reused", "_lexer_runs"),
    (".grammar.lower", "_closed"),
    (".grammar.schema_rules", "_closed_expr"),
    (".json_schema.convert", "_any_value_body"),
    (".json_schema.objects", "_unit_not_in"),
    (".json_schema.objects", "_key_not_in"),
    (".json_schema.string_length", "_BODIES"),
    (".json_schema.copy", "_PLANS"),
    (".json_schema.copy", "_LOWERED"),
    (".json_schema.copy", "_ACCEPTORS"),
)


def clear_cache(memos: bool = False) -> None:
    """Drop every cached compiled grammar.

    Clears the regex / JSON Schema / choice compile cache, the context-free grammar cache
    (``compile_grammar``), the structural-tag grammar cache and the cache of ``select``
    alternatives. The vocabulary's shared lexical mask cache is not a compile cache and
    stays (bound it with ``grammar_cache_bytes``).

    Args:
        memos: also drop the per-process memos of ``_MEMOS`` (kept otherwise: no
            vocabulary in them, each bounded), which hold work a compile did for one
            schema's texts (its key names' classes, its formats' bodies) as well as what
            every schema shares: the state of a process that has compiled nothing.
            Benchmarks' cold-empty mode takes it, then ``Vocabulary.prepare`` (its
            warm-up), so a repeated compile of one schema pays that schema's own work
            each time. Compiles after it give the same grammars.

    Raises: never.
    """
    import sys

    from .compiler import clear_cache as clear_compiled
    from .grammar.compile import clear_cache as clear_cfg
    from .grammar.union import clear_cache as clear_alternatives
    from .tags.grammar import clear_cache as clear_tags

    clear_compiled()
    clear_cfg()
    clear_alternatives()
    clear_tags()
    if memos:
        for module, name in _MEMOS:
            loaded = sys.modules.get(__name__ + module)  # a module not loaded holds none
            if loaded is not None:
                memo = getattr(loaded, name)
                (getattr(memo, "cache_clear", None) or memo.clear)()


def __getattr__(name: str) -> Any:
    """The public names of ``_LAZY``, imported from their module on first use.

    Raises:
        AttributeError: ``name`` is not a public name of this package (nor a submodule).
    """
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
