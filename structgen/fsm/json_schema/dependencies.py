"""Property dependencies: ``dependentRequired``, ``dependentSchemas`` and draft 3-7's
``dependencies`` (an array value: keys required; a schema value: a dependent schema).

Each dependency reads "if key A is present, the object also satisfies part P", with P a
schema: ``{"required": [B, ...]}`` for the array forms, the subschema otherwise. An object
schema with dependencies is written as an alternation of branches, one per combination of
its trigger keys: where A is present, the branch is the object schema merged (``allOf``)
with ``{"required": [A]}`` and P; where A is absent, A's property schema is ``false``
(so neither a listed member nor an extra key can spell A). A trigger the object requires
has only the present branch; dependencies a merged P brings in are split in turn, each
(trigger, part) applied once per branch. Every branch is exact, so the alternation is.

Not enforced (``UnsupportedSchemaError(keyword, pointer)`` when strict, with the object
schema's pointer and the trigger key in the detail; else a warning and the dependency is
ignored): more than ``MAX_DEPENDENCY_BRANCHES`` branches, more than
``MAX_DEPENDENCY_STEPS`` dependencies applied in one object, and a part that cannot be
merged into the object schema. A trigger that is neither listed nor required is left out
of the extra keys of its absent branch too, whatever decides them (``additionalProperties``,
``patternProperties``, ``propertyNames``): ``objects`` writes no extra key equal to a listed
name, a ``false`` property included. Keywords of another draft than the document's are
unknown keywords (the converter reports them before the object is lowered).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ...errors import UnsupportedSchemaError
from .combine import merge_all_of
from .context import ConvertContext

__all__ = [
    "DEPENDENCY_KEYWORDS",
    "MAX_DEPENDENCY_BRANCHES",
    "MAX_DEPENDENCY_STEPS",
    "has_dependencies",
    "dependent_object_regex",
]

DEPENDENCY_KEYWORDS = ("dependentRequired", "dependentSchemas", "dependencies")
MAX_DEPENDENCY_BRANCHES = 64  # 6 independent optional trigger keys
MAX_DEPENDENCY_STEPS = 4096  # pending dependencies taken up across one object's branches


class _Dep(NamedTuple):
    trigger: str  # the key whose presence triggers the dependency
    part: Any  # the schema the object must then satisfy too
    keyword: str
    pointer: str  # of the object schema that holds the keyword


class _Branch(NamedTuple):
    schema: dict
    pending: tuple[_Dep, ...]
    absent: frozenset[str]  # trigger keys this branch forbids
    applied: frozenset[tuple[str, str]]  # (trigger, part as JSON) merged in already


def has_dependencies(conv: ConvertContext, schema: dict) -> bool:
    """True when ``schema`` holds a dependency keyword of the document's draft."""
    return any(k in schema for k in conv.dependency_keywords)


def _parts(value: Any) -> list[Any]:
    """The conjuncts of a dependent schema (a bare ``allOf`` split), trivial ones dropped."""
    if isinstance(value, dict) and set(value) == {"allOf"} and isinstance(value["allOf"], list):
        return [p for sub in value["allOf"] for p in _parts(sub)]
    return [] if value is True or value == {} else [value]


def _split(conv: ConvertContext, schema: dict, pointer: str) -> tuple[dict, list[_Dep]]:
    """``schema`` without its dependency keywords, and the dependencies they hold."""
    base = {k: v for k, v in schema.items() if k not in conv.dependency_keywords}
    deps: list[_Dep] = []
    for kw in DEPENDENCY_KEYWORDS:
        if kw not in schema or kw not in conv.dependency_keywords:
            continue  # another draft's keyword: left for the converter to report
        for trigger, value in (schema[kw] or {}).items():
            if isinstance(value, str) and kw == "dependencies":  # draft 3: one key
                value = [value]
            if isinstance(value, list):
                parts = [{"required": list(value)}] if value else []
            elif kw != "dependentRequired" and isinstance(value, (dict, bool)):
                parts = _parts(value)
            else:
                conv.unsupported(
                    kw, pointer, f"{trigger!r}: a value of type {type(value).__name__}"
                )
                continue
            deps += [_Dep(trigger, p, kw, pointer) for p in parts]
    return base, deps


def _present(
    conv: ConvertContext, branch: _Branch, dep: _Dep, key: tuple[str, str]
) -> _Branch | None:
    """``branch`` with ``dep.trigger`` present: merged with its part (None: unsatisfiable).
    The trigger is required before the keys the part requires (their order in the layout).
    """
    merged = merge_all_of(
        [branch.schema, {"required": [dep.trigger]}, dep.part], dep.pointer, conv.resolve
    )
    if merged is False:
        return None
    merged, new = _split(conv, merged, dep.pointer)
    return _Branch(merged, branch.pending[1:] + tuple(new), branch.absent, branch.applied | {key})


def _absent(branch: _Branch, dep: _Dep) -> _Branch:
    """``branch`` with ``dep.trigger`` forbidden (its property schema ``false``)."""
    props = dict(branch.schema.get("properties") or {})
    props[dep.trigger] = False
    return _Branch(
        {**branch.schema, "properties": props},
        branch.pending[1:],
        branch.absent | {dep.trigger},
        branch.applied,
    )


def _problem(
    conv: ConvertContext, branch: _Branch, dep: _Dep, steps: int, num_branches: int
) -> str:
    """Why ``dep`` cannot be split exactly in ``branch`` (``""``: it can)."""
    if steps > MAX_DEPENDENCY_STEPS:
        return f"more than {MAX_DEPENDENCY_STEPS} dependencies to apply in one object"
    required = dep.trigger in branch.schema.get("required", ())
    if not required and num_branches >= MAX_DEPENDENCY_BRANCHES:
        return f"more than {MAX_DEPENDENCY_BRANCHES} combinations of trigger keys"
    return ""


def _step(conv: ConvertContext, branch: _Branch, steps: int, num_branches: int) -> list[_Branch]:
    """The branches that replace ``branch`` once its first pending dependency is split."""
    dep = branch.pending[0]
    key = (dep.trigger, json.dumps(dep.part, sort_keys=True))
    if key in branch.applied or dep.trigger in branch.absent:  # done, or vacuous
        return [branch._replace(pending=branch.pending[1:])]
    problem = _problem(conv, branch, dep, steps, num_branches)
    present = None
    if not problem:
        try:
            present = _present(conv, branch, dep, key)
        except UnsupportedSchemaError as exc:
            problem = f"the dependent schema cannot be merged into the object schema ({exc})"
    if problem:
        # strict: raises; else the dependency is ignored (a warning)
        conv.unsupported(dep.keyword, dep.pointer, f"trigger key {dep.trigger!r}: {problem}")
        return [branch._replace(pending=branch.pending[1:])]
    out = [] if dep.trigger in branch.schema.get("required", ()) else [_absent(branch, dep)]
    return out + ([present] if present is not None else [])


def _branches(conv: ConvertContext, schema: dict, pointer: str) -> list[dict]:
    """The object schemas (no dependency keywords left) whose union is ``schema``."""
    base, deps = _split(conv, schema, pointer)
    work = [_Branch({**base, "type": "object"}, tuple(deps), frozenset(), frozenset())]
    done: list[dict] = []
    steps = 0
    while work:
        branch = work.pop()
        if branch.pending:
            steps += 1
            work += _step(conv, branch, steps, len(work) + len(done) + 1)
        else:
            done.append(branch.schema)
    return done


def dependent_object_regex(
    conv: ConvertContext, schema: dict, pointer: str, refs: tuple
) -> str | None:
    """Regex for the objects valid under ``schema``, its dependencies enforced: one
    alternative per branch (see the module docstring); None when no branch has an object.
    """
    options = []
    for branch in _branches(conv, schema, pointer):
        regex = conv.convert(branch, pointer, refs)
        if regex is not None and regex not in options:
            options.append(regex)
    if not options:
        return None
    return options[0] if len(options) == 1 else "(?:" + "|".join(options) + ")"
