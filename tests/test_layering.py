"""The package's layering, checked on the source: no module imports a layer above its own.

Layers, bottom up: ``errors`` (and settings), ``fsm`` (the grammar layer, constraint specs
included) and ``kernels``; ``runtime``; ``extraction``; ``lang``, ``server``, ``cli``,
``integrations`` and the ``structgen`` package itself (its ``__init__`` re-exports the
public API). Every ``import`` and ``from ... import`` statement of every module under
``structgen/`` is read with ``ast`` (relative imports resolved, imports inside functions
and under ``TYPE_CHECKING`` included); ``from pkg import name`` counts as importing
``pkg.name`` when that is a module, else ``pkg``.

The one exception: a runtime module may import the extraction package inside a function
named ``extract`` (the Engine interface's ``extract`` method, which hands over to
``structgen.extraction``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "structgen"

_ABOVE_RUNTIME = (
    "structgen.extraction",
    "structgen.lang",
    "structgen.server",
    "structgen.cli",
    "structgen.integrations",
    "structgen.__main__",
)


@dataclass(frozen=True)
class Rule:
    """Modules under ``layer`` must not import ``forbidden`` (a name or a package prefix;
    ``"structgen"`` alone is the package's ``__init__``)."""

    name: str
    layer: str
    forbidden: tuple[str, ...]
    #: (imported package, enclosing function name) pairs allowed despite ``forbidden``
    allowed_in_function: tuple[tuple[str, str], ...] = ()


RULES = (
    Rule(
        "runtime imports neither the layers above it nor structgen/__init__",
        "structgen.runtime",
        ("structgen",) + _ABOVE_RUNTIME,
        allowed_in_function=(("structgen.extraction", "extract"),),
    ),
    Rule(
        "fsm imports neither runtime, lang, server nor any layer above it",
        "structgen.fsm",
        ("structgen", "structgen.runtime") + _ABOVE_RUNTIME,
    ),
    Rule(
        "extraction imports neither lang, server, cli nor structgen/__init__",
        "structgen.extraction",
        (
            "structgen",
            "structgen.lang",
            "structgen.server",
            "structgen.cli",
            "structgen.integrations",
            "structgen.__main__",
        ),
    ),
)


@dataclass(frozen=True)
class Import:
    line: int
    target: str
    functions: tuple[str, ...]  # enclosing function names, outermost first


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def imports_of(source: str, module: str, is_package: bool) -> list[Import]:
    """Every import statement of ``source`` (the text of ``module``) with its resolved target."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: list[Import] = []

    def visit(node: ast.AST, functions: tuple[str, ...]) -> None:
        if isinstance(node, ast.Import):
            found.extend(Import(node.lineno, a.name, functions) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.append(Import(node.lineno, sub if _is_module(sub) else target, functions))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions = functions + (node.name,)
        for child in ast.iter_child_nodes(node):
            visit(child, functions)

    visit(ast.parse(source), ())
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or (prefix != "structgen" and name.startswith(prefix + "."))


def violations(source: str, module: str, is_package: bool = False) -> list[str]:
    """``"module:line imports target (rule)"`` for each forbidden import of ``source``."""
    out = []
    for rule in RULES:
        if not _within(module, rule.layer):
            continue
        for imp in imports_of(source, module, is_package):
            if not any(_within(imp.target, f) for f in rule.forbidden):
                continue
            if any(
                _within(imp.target, pkg) and fn in imp.functions
                for pkg, fn in rule.allowed_in_function
            ):
                continue
            out.append(f"{module}:{imp.line} imports {imp.target} ({rule.name})")
    return list(dict.fromkeys(out))  # one line per statement and target


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        yield ".".join(parts[:-1] if is_package else parts), path, is_package


def test_the_package_keeps_its_layers():
    found = []
    for module, path, is_package in _modules():
        found += violations(path.read_text(encoding="utf-8"), module, is_package)
    assert not found, "forbidden imports:\n" + "\n".join(found)


def test_every_rule_names_existing_layers():
    for rule in RULES:
        assert _is_module(rule.layer), rule.layer
        assert all(
            f == "structgen" or _is_module(f) or f.endswith("__main__") for f in rule.forbidden
        ), rule


@pytest.mark.parametrize(
    "module, source, rule",
    [
        ("structgen.runtime.request_factory", "from structgen.lang.expr import gen\n", "runtime"),
        ("structgen.runtime.distributed.async_front", "from structgen import Regex\n", "runtime"),
        ("structgen.runtime.engine", "from .. import lang\n", "runtime"),
        ("structgen.runtime.engine", "def f():\n    import structgen.server.app\n", "runtime"),
        ("structgen.runtime.engine", "import structgen.extraction\n", "runtime"),
        (
            "structgen.runtime.engine",
            "class E:\n    def generate(self):\n        from structgen.extraction import extract\n",
            "runtime",
        ),
        ("structgen.runtime.models.llama", "from ...cli import main\n", "runtime"),
        ("structgen.fsm.compiler", "from ..runtime.request import Request\n", "fsm"),
        ("structgen.fsm.spec", "def f():\n    from structgen.lang import healing\n", "fsm"),
        ("structgen.fsm", "from ..server import app\n", "fsm"),
        ("structgen.extraction.extractor", "from structgen.lang.expr import gen\n", "extraction"),
        ("structgen.extraction", "from .. import Regex\n", "extraction"),
    ],
)
def test_an_injected_violation_is_found(module, source, rule):
    is_package = module in ("structgen.fsm", "structgen.extraction")
    (found,) = violations(source, module, is_package)
    assert found.startswith(f"{module}:") and f"({rule} " in found


@pytest.mark.parametrize(
    "module, source",
    [
        (
            "structgen.runtime.engine",
            "class E:\n    def extract(self):\n        from structgen.extraction import extract\n",
        ),
        ("structgen.runtime.engine", "from structgen import errors\nfrom .. import fsm\n"),
        ("structgen.runtime.engine", "from structgen.fsm.spec import to_constraint\n"),
        ("structgen.extraction.extractor", "from structgen.runtime.engine import Engine\n"),
        ("structgen.lang.state", "from structgen.runtime.outputs import RequestOutput\n"),
    ],
)
def test_an_allowed_import_passes(module, source):
    assert violations(source, module) == []
