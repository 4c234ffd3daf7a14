"""docs/architecture.md names only what exists.

Every backticked repository path in the map (``structgen/...``, ``tests/...``, ``csrc/...``,
``docs/...``, ``benchmarks/...``, ``examples/...``, ``.ci/run``) must exist; every
backticked dotted name under ``structgen.`` must resolve (its longest module prefix is a file
or package of ``structgen/``, and the rest, at most ``Class.member``, is defined at the top
level of that module: a def, class, assignment, import or ``__all__`` entry; a member in that
class's body); and every backticked ``ClassName`` or ``ClassName.member`` (a call's arguments
aside) is a class of ``structgen/`` (or a test helper's) that defines the member, itself
or in a base class. Nothing is imported: the sources are read with ``ast``.
"""

from __future__ import annotations

import ast
import builtins
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"

_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"(?:structgen|tests|csrc|docs|benchmarks|examples)/[\w./-]*|\.ci/run")
_DOTTED = re.compile(r"structgen(?:\.\w+)+")
_CLASS = re.compile(r"([A-Z][a-z]\w*)(?:\.(\w+))?(?:\(.*\))?")
# names the map uses that are not structgen's own
_FOREIGN = {"LogitsProcessor"} | set(dir(builtins))


def _spans() -> list[str]:
    return _CODE.findall(DOC.read_text(encoding="utf-8"))


def _paths() -> set[str]:
    return {m.group(0) for span in _spans() for m in [_PATH.fullmatch(span.strip())] if m}


def _dotted() -> set[str]:
    found = set()
    for span in _spans():
        # `structgen.fsm.compiler.compile_spec(spec, ...)`: the name before the call
        m = _DOTTED.match(span.strip())
        if m:
            found.add(m.group(0))
    return found


def _class_refs() -> set[tuple[str, str | None]]:
    refs = set()
    for span in _spans():
        m = _CLASS.fullmatch(span.strip())
        if m and m.group(1) not in _FOREIGN:
            refs.add((m.group(1), m.group(2)))
    return refs


def _module_file(dotted: str) -> Path | None:
    path = ROOT.joinpath(*dotted.split("."))
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    return None


@cache
def _tree(file: Path) -> ast.Module:
    return ast.parse(file.read_text(encoding="utf-8"))


def _names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                if isinstance(node.value, (ast.List, ast.Tuple)):
                    names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    return names


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        file = _module_file(".".join(parts[:cut]))
        if file is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        if len(rest) > 2:
            return False
        body = _tree(file).body
        if rest[0] not in _names(body):
            return False
        if len(rest) == 1:
            return True
        classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == rest[0]]
        return any(rest[1] in _names(c.body) for c in classes)
    return False


@cache
def _classes() -> dict[str, list[ast.ClassDef]]:
    found: dict[str, list[ast.ClassDef]] = {}
    for file in sorted([*(ROOT / "structgen").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]):
        for node in ast.walk(_tree(file)):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(node)
    return found


def _defines(cls: str, member: str, seen: frozenset[str] = frozenset()) -> bool:
    for node in _classes().get(cls, []):
        if member in _names(node.body):
            return True
        bases = {b.id for b in node.bases if isinstance(b, ast.Name)} - seen
        if any(_defines(b, member, seen | {cls}) for b in bases):
            return True
    return False


def test_the_map_names_paths():
    assert len(_paths()) > 30  # the extraction itself works


def test_every_path_in_the_map_exists():
    missing = sorted(p for p in _paths() if not (ROOT / p).exists())
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_module_name_in_the_map_resolves():
    names = _dotted()
    assert names
    broken = sorted(n for n in names if not _resolves(n))
    assert not broken, f"docs/architecture.md names modules or objects that do not exist: {broken}"


def test_every_class_name_in_the_map_exists():
    refs = _class_refs()
    assert len(refs) > 30
    broken = sorted(
        f"{cls}.{member}" if member else cls
        for cls, member in refs
        if cls not in _classes() or (member is not None and not _defines(cls, member))
    )
    assert not broken, f"docs/architecture.md names classes or members that do not exist: {broken}"
