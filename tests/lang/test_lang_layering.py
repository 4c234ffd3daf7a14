"""The language's own layering, checked on the source: its modules import one way only.

Order, bottom up (see ``structgen/lang/__init__.py``): the IR (``expr``, ``template``),
``healing``, the backends, the runner (``driver``), ``state``, ``program``. A lang module
may import only lang modules before it; every import counts (inside functions and under
``TYPE_CHECKING`` too), so no two lang modules import each other, not even lazily. The IR
in particular imports no runner, state or backend.
"""

from __future__ import annotations

import pytest

from tests.test_layering import PACKAGE, imports_of

ORDER = ("expr", "template", "healing", "backend", "openai_backend", "driver", "state", "program")
IR = ("expr", "template")
NOT_FOR_THE_IR = ("driver", "state", "backend", "openai_backend", "program")


def _lang_imports(source: str, name: str) -> list[tuple[int, str]]:
    """(line, lang module) for each import of another ``structgen.lang`` module."""
    out = []
    for imp in imports_of(source, f"structgen.lang.{name}", is_package=False):
        parts = imp.target.split(".")
        if parts[:2] == ["structgen", "lang"] and len(parts) > 2:
            out.append((imp.line, parts[2]))
        elif imp.target == "structgen.lang" and name != "__init__":
            out.append((imp.line, "__init__"))
    return out


def violations(source: str, name: str) -> list[str]:
    """``"lang.name:line imports lang.other (why)"`` for each import against the order."""
    found = []
    for line, other in _lang_imports(source, name):
        if name in IR and other in NOT_FOR_THE_IR:
            why = "the IR imports no runner, state or backend"
            found.append(f"lang.{name}:{line} imports lang.{other} ({why})")
        elif other not in ORDER or ORDER.index(other) >= ORDER.index(name):
            found.append(f"lang.{name}:{line} imports lang.{other} (against the order)")
    return found


def test_order_names_every_lang_module():
    modules = {p.stem for p in (PACKAGE / "lang").glob("*.py")} - {"__init__"}
    assert modules == set(ORDER)


def test_lang_modules_import_one_way():
    found = []
    for name in ORDER:
        source = (PACKAGE / "lang" / f"{name}.py").read_text(encoding="utf-8")
        found += violations(source, name)
    assert not found, "lang imports against the order:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "name, source, why",
    [
        (
            "template",
            "def run(self):\n    from structgen.lang.state import ProgramState\n",
            "the IR",
        ),
        ("template", "from structgen.lang import backend\n", "the IR"),
        (
            "expr",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .driver import drive\n",
            "the IR",
        ),
        ("expr", "def f():\n    from structgen.lang.template import Template\n", "against"),
        ("driver", "def f():\n    from structgen.lang.state import ProgramState\n", "against"),
        ("state", "from structgen.lang.program import Program\n", "against"),
        ("driver", "from structgen.lang import driver\n", "against"),
    ],
)
def test_an_injected_violation_is_found(name, source, why):
    (found,) = violations(source, name)
    assert found.startswith(f"lang.{name}:") and f"({why}" in found


@pytest.mark.parametrize(
    "name, source",
    [
        ("template", "from structgen.lang.expr import TemplateFill\n"),
        ("state", "from .driver import run_one\nfrom . import expr\n"),
        ("program", "from structgen.lang import expr as E\n"),
        ("expr", "from structgen.fsm.spec import Regex\n"),
    ],
)
def test_an_allowed_import_passes(name, source):
    assert violations(source, name) == []
